//! CBOR request bodies read as a CBOR-enabled kube-apiserver reads them into an
//! unstructured object (fxamacker/cbor with apimachinery's decoding options), then
//! written as the JSON text Go's `encoding/json` would write for that value: the
//! rules of docs/wire.md §3. The bytes are read with minicbor and the rules are
//! applied here, so nothing of cborgate's codec is involved and the stand-in stays
//! an independent oracle for the proxy's upgrade mode.
//!
//! Errors are Go's wording where the recordings or fxamacker/cbor's error types
//! show it (`EOF`, `unexpected EOF` in `b-badcbor`, extraneous data, duplicate map
//! keys, unacceptable data items, type mismatches); the texts for malformed heads,
//! time tags and nesting are close paraphrases. Every one becomes a 400.

use std::collections::HashSet;

use minicbor::decode::{Decoder, Error as CborError};
use serde_json::{Map, Number, Value};

use super::{json, util};

/// Nesting limit: arrays, maps and tags each count a level, the top item is level 1.
/// serde_json, which then parses the decoded JSON text, stops at 128 levels anyway,
/// and the recursion here stays far from a worker thread's stack size.
const MAX_DEPTH: usize = 128;

/// Go's `io.ErrUnexpectedEOF`: the body ends inside an item (`b-badcbor`).
const UNEXPECTED_EOF: &str = "unexpected EOF";

/// A CBOR request body (tag 55799 optional) as the JSON text Go would have decoded it
/// to. The error is Go's wording of the decoder's complaint.
pub(crate) fn decode_body(body: &[u8]) -> Result<Vec<u8>, String> {
    decode_typed_body(body, None)
}

/// [`decode_body`] for a built-in kind whose top-level field `bytes_map` is
/// `map[string][]byte` (ConfigMap `binaryData`, Secret `data`): its values decode as
/// fxamacker/cbor decodes into `[]byte` (a byte string's bytes whatever tag 21-23 it
/// carries; a text string refused) and are base64 in the JSON.
pub(crate) fn decode_typed_body(body: &[u8], bytes_map: Option<&str>) -> Result<Vec<u8>, String> {
    if body.is_empty() {
        return Err("EOF".into());
    }
    let mut d = Decoder::new(body);
    while body[d.position()..].starts_with(&[0xd9, 0xd9, 0xf7]) {
        d.set_position(d.position() + 3);
    }
    let v = if peek(&d)? >> 5 == 5 {
        let len = d
            .map()
            .map_err(|e| fail(e, || "cbor: malformed map".into()))?;
        let values = bytes_map.map_or(Values::Any, Values::BytesMapAt);
        map(&mut d, len, 1, values).map(Value::Object)?
    } else {
        item(&mut d, 1)?
    };
    let (v, end) = (v, d.position());
    if end < body.len() {
        return Err(format!(
            "cbor: {} bytes of extraneous data starting at index {end}",
            body.len() - end
        ));
    }
    Ok(json::encode_compact(&v))
}

/// The first data item of `input` and the offset just after it. Floats stay floats
/// in the value; [`json::encode_compact`] prints them as Go does (`2.0` → `2`).
#[cfg(test)]
pub(crate) fn decode_first(input: &[u8]) -> Result<(Value, usize), String> {
    let mut d = Decoder::new(input);
    let v = item(&mut d, 1)?;
    Ok((v, d.position()))
}

/// fxamacker/cbor's names of the major types, as its error messages use them.
fn type_name(major: u8) -> &'static str {
    match major {
        0 => "positive integer",
        1 => "negative integer",
        2 => "byte string",
        3 => "UTF-8 text string",
        4 => "array",
        5 => "map",
        6 => "tag",
        _ => "primitives",
    }
}

/// fxamacker/cbor's `UnacceptableDataItemError`, what Kubernetes' options turn NaN,
/// infinities, bignums and unknown simple values into.
fn unacceptable(major: u8, what: &str) -> String {
    format!(
        "cbor: data item of cbor type {} is not accepted by protocol: {what}",
        type_name(major)
    )
}

/// The byte at the read position, without consuming it.
fn peek(d: &Decoder<'_>) -> Result<u8, String> {
    d.input()
        .get(d.position())
        .copied()
        .ok_or_else(|| UNEXPECTED_EOF.to_string())
}

/// Consumes the one byte [`peek`] saw (a break code).
fn advance(d: &mut Decoder<'_>) {
    d.set_position(d.position() + 1);
}

/// A minicbor error where the head was already checked: running out of input is
/// Go's `unexpected EOF`, anything else is `other`.
fn fail(e: CborError, other: impl FnOnce() -> String) -> String {
    if e.is_end_of_input() {
        UNEXPECTED_EOF.into()
    } else {
        other()
    }
}

fn item(d: &mut Decoder<'_>, depth: usize) -> Result<Value, String> {
    let b = peek(d)?;
    let (major, info) = (b >> 5, b & 0x1f);
    // RFC 8949 §3: additional information 28–30 is reserved, and 31 (indefinite
    // length) exists only for strings, arrays and maps (and as break, major 7).
    if (28..=30).contains(&info) || (info == 31 && matches!(major, 0 | 1 | 6)) {
        return Err(format!(
            "cbor: invalid additional information {info} for type {}",
            type_name(major)
        ));
    }
    if matches!(major, 4..=6) && depth > MAX_DEPTH {
        return Err(format!("cbor: exceeded max nested level {MAX_DEPTH}"));
    }
    let malformed = || format!("cbor: malformed {}", type_name(major));
    match major {
        0 => {
            let n = d.u64().map_err(|e| fail(e, malformed))?;
            // IntDecConvertSignedOrFail: integers outside int64 are refused.
            i64::try_from(n)
                .map(Value::from)
                .map_err(|_| overflow(major, &n.to_string()))
        }
        1 => {
            let n = i128::from(d.int().map_err(|e| fail(e, malformed))?);
            i64::try_from(n)
                .map(Value::from)
                .map_err(|_| overflow(major, &n.to_string()))
        }
        2 => string_bytes(d, 2).map(|raw| Value::String(go_string(&raw))),
        3 => text(d).map(Value::String),
        4 => {
            let len = d.array().map_err(|e| fail(e, malformed))?;
            let mut items = Vec::new();
            each(d, len, |d| {
                items.push(item(d, depth + 1)?);
                Ok(())
            })?;
            Ok(Value::Array(items))
        }
        5 => {
            let len = d.map().map_err(|e| fail(e, malformed))?;
            map(d, len, depth, Values::Any).map(Value::Object)
        }
        6 => tagged(d, depth),
        _ => simple(d, b),
    }
}

fn overflow(major: u8, n: &str) -> String {
    format!(
        "cbor: cannot unmarshal {} into Go value of type int64 ({n} overflows Go's int64)",
        type_name(major)
    )
}

/// Runs `f` once per element of a container of `len` elements, or until the break
/// code when the length is indefinite (`None`).
fn each<'b>(
    d: &mut Decoder<'b>,
    len: Option<u64>,
    mut f: impl FnMut(&mut Decoder<'b>) -> Result<(), String>,
) -> Result<(), String> {
    match len {
        // A length beyond the input costs nothing: each element consumes at least
        // one byte, so the loop meets the end of the input first.
        Some(n) => (0..n).try_for_each(|_| f(d)),
        None => loop {
            if peek(d)? == 0xff {
                advance(d);
                return Ok(());
            }
            f(d)?;
        },
    }
}

/// A map of text or byte string keys (Kubernetes decodes into
/// `map[string]interface{}`); a key seen twice, in either form, is refused
/// (DupMapKeyEnforcedAPF).
/// What a map's values are, for `[]byte` fields.
#[derive(Clone, Copy)]
enum Values<'a> {
    /// Anything, decoded as [`item`] decodes it.
    Any,
    /// Anything, but the value under this key is `map[string][]byte`.
    BytesMapAt(&'a str),
    /// `[]byte`, each ([`byte_value`]).
    Bytes,
}

fn map(
    d: &mut Decoder<'_>,
    len: Option<u64>,
    depth: usize,
    values: Values<'_>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut index = 0usize;
    each(d, len, |d| {
        let key_major = peek(d)? >> 5;
        let key = match key_major {
            2 => string_bytes(d, 2)?,
            3 => text(d)?.into_bytes(),
            other => {
                return Err(format!(
                    "cbor: cannot unmarshal {} into Go value of type string",
                    type_name(other)
                ))
            }
        };
        let name = go_string(&key);
        if !seen.insert(key) {
            return Err(format!(
                "cbor: found duplicate map key \"{name}\" at map element index {index}"
            ));
        }
        let value = match values {
            Values::Bytes => byte_value(d, depth + 1)?,
            Values::BytesMapAt(field) if field == name && peek(d)? >> 5 == 5 => {
                let len = d
                    .map()
                    .map_err(|e| fail(e, || "cbor: malformed map".into()))?;
                Value::Object(map(d, len, depth + 1, Values::Bytes)?)
            }
            _ => item(d, depth + 1)?,
        };
        out.insert(name, value);
        index += 1;
        Ok(())
    })?;
    Ok(out)
}

/// The content of a byte (`major` 2) or text (3) string, the chunks of an
/// indefinite-length one joined. Each chunk must be a definite-length string of
/// the same major type (RFC 8949 §3.2.3); text chunks must each be valid UTF-8.
fn string_bytes(d: &mut Decoder<'_>, major: u8) -> Result<Vec<u8>, String> {
    if peek(d)? & 0x1f != 31 {
        return chunk(d, major);
    }
    advance(d);
    let mut out = Vec::new();
    loop {
        let b = peek(d)?;
        if b == 0xff {
            advance(d);
            return Ok(out);
        }
        if b >> 5 != major || b & 0x1f >= 28 {
            return Err(format!(
                "cbor: wrong element type {} for indefinite-length {}",
                type_name(b >> 5),
                type_name(major)
            ));
        }
        out.extend_from_slice(&chunk(d, major)?);
    }
}

/// One definite-length string of `major` 2 or 3, its head already checked.
fn chunk(d: &mut Decoder<'_>, major: u8) -> Result<Vec<u8>, String> {
    let read = if major == 2 {
        d.bytes().map(<[u8]>::to_vec)
    } else {
        d.str().map(|s| s.as_bytes().to_vec())
    };
    // minicbor's only other complaint about a text string is invalid UTF-8.
    read.map_err(|e| fail(e, || "cbor: invalid UTF-8 string".into()))
}

/// A text string (UTF8RejectInvalid).
fn text(d: &mut Decoder<'_>) -> Result<String, String> {
    let raw = string_bytes(d, 3)?;
    String::from_utf8(raw).map_err(|_| "cbor: invalid UTF-8 string".into())
}

/// Bytes as Go's `encoding/json` writes a `string` holding them: each byte that does
/// not start a valid UTF-8 sequence becomes one U+FFFD, as `utf8.DecodeRune` steps
/// over it (docs/wire.md §3; `h'61e6b062'` → `"a\ufffd\ufffdb"`).
fn go_string(mut raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    loop {
        match std::str::from_utf8(raw) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (valid, rest) = raw.split_at(e.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                out.push('\u{fffd}');
                raw = rest.get(1..).unwrap_or_default();
            }
        }
    }
}

/// A `[]byte` value. Under a tag 21-23 the bytes are the value (base64 in JSON); the tag
/// only says how they might be shown later. Untagged (or under 55799 alone), a byte string
/// holds base64 text, which Go's `base64.StdEncoding` decodes, as a CBOR-enabled
/// kube-apiserver 1.36.2 does (`h'414148…'`, the text `AAH//g==`, is stored as 00 01 ff fe;
/// `'hello'` is "illegal base64 data at input byte 4"). Text is refused, as fxamacker/cbor
/// refuses a text string for `[]byte`.
fn byte_value(d: &mut Decoder<'_>, depth: usize) -> Result<Value, String> {
    let start = d.position();
    let mut innermost = None;
    while peek(d)? >> 5 == 6 {
        match d.tag().map(u64::from) {
            Ok(t @ (21..=23 | 55799)) => innermost = Some(t),
            _ => {
                d.set_position(start);
                return item(d, depth);
            }
        }
    }
    match peek(d)? >> 5 {
        2 if matches!(innermost, Some(21..=23)) => {
            Ok(Value::String(util::base64_std(&string_bytes(d, 2)?)))
        }
        2 => {
            let text = string_bytes(d, 2)?;
            let raw = go_base64_decode(&text).map_err(|at| {
                format!(
                    "cbor: failed to decode base64 from byte string: illegal base64 data at input byte {at}"
                )
            })?;
            Ok(Value::String(util::base64_std(&raw)))
        }
        3 => Err("cbor: cannot unmarshal UTF-8 text string into Go value of type []uint8".into()),
        _ => item(d, depth),
    }
}

/// Go's `base64.StdEncoding.Decode`, quantum by quantum as `decodeQuantum` in Go's
/// `encoding/base64` reads them: `\r` and `\n` skipped, `=` padding required, bits after
/// the last byte ignored. `Err(n)` is Go's `CorruptInputError(n)`.
fn go_base64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut out = Vec::new();
    let mut si = 0;
    while si < src.len() {
        let mut dbuf = [0u8; 4];
        let mut dlen = 4;
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = value(c) {
                dbuf[j] = v;
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && newline(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            dlen = j;
            break;
        }
        let val = (dbuf[0] as u32) << 18
            | (dbuf[1] as u32) << 12
            | (dbuf[2] as u32) << 6
            | dbuf[3] as u32;
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
    }
    Ok(out)
}

/// A tagged item. 55799 and unknown tags are dropped (UnrecognizedTagContentToAny);
/// 21/22/23 on a byte string are its base64url/base64/hex text
/// (ByteStringToStringAllowedWithExpectedLaterEncoding); 0 and 1 become RFC 3339
/// text (TimeTagToRFC3339Nano); bignums 2 and 3 are refused (BigIntDecodeForbidden).
fn tagged(d: &mut Decoder<'_>, depth: usize) -> Result<Value, String> {
    let tag = u64::from(
        d.tag()
            .map_err(|e| fail(e, || "cbor: malformed tag".into()))?,
    );
    let content = peek(d)? >> 5;
    match tag {
        21..=23 if content == 2 => {
            let raw = string_bytes(d, 2)?;
            Ok(Value::String(match tag {
                21 => util::base64_url(&raw),
                22 => util::base64_std(&raw),
                _ => raw.iter().map(|b| format!("{b:02x}")).collect(),
            }))
        }
        0 => {
            if content != 3 {
                return Err(format!(
                    "cbor: tag number 0 must be followed by text string, got {}",
                    type_name(content)
                ));
            }
            let s = text(d)?;
            rfc3339_nano(&s)
                .map(Value::String)
                .ok_or_else(|| format!("cbor: cannot set {s:?} for time.Time: not RFC 3339"))
        }
        1 => {
            let v = item(d, depth + 1)?;
            match v.as_i64() {
                Some(secs) => epoch_text(secs, 0),
                None => v.as_f64().and_then(epoch_float),
            }
            .map(Value::String)
            .ok_or_else(|| format!("cbor: cannot decode {v} as a time in years 0000 to 9999"))
        }
        2 | 3 => {
            item(d, depth + 1)?;
            Err(unacceptable(6, "bignum"))
        }
        _ => item(d, depth + 1),
    }
}

/// Major type 7 (its reserved heads already refused): false, true, null and finite
/// floats of any width; everything else is refused.
fn simple(d: &mut Decoder<'_>, b: u8) -> Result<Value, String> {
    let one_byte = |d: &mut Decoder<'_>, v: Value| {
        advance(d);
        Ok(v)
    };
    match b {
        0xf4 => one_byte(d, Value::Bool(false)),
        0xf5 => one_byte(d, Value::Bool(true)),
        0xf6 => one_byte(d, Value::Null),
        0xf9..=0xfb => {
            let f = d
                .f64()
                .map_err(|e| fail(e, || "cbor: malformed float".into()))?;
            if f.is_nan() {
                Err(unacceptable(7, "floating-point NaN"))
            } else if f.is_infinite() {
                Err(unacceptable(7, "floating-point infinity"))
            } else {
                Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
            }
        }
        0xf8 => {
            let v = d
                .simple()
                .map_err(|e| fail(e, || "cbor: malformed simple value".into()))?;
            // RFC 8949 §3.3: one-byte simple values below 32 are not well-formed.
            if v < 32 {
                Err(format!(
                    "cbor: invalid simple value {v} for type primitives"
                ))
            } else {
                Err(unacceptable(
                    7,
                    &format!("simple value {v} is not recognized"),
                ))
            }
        }
        0xff => Err("cbor: unexpected \"break\" code".into()),
        // 0xe0–0xf3 and 0xf7 (undefined): simple values 0–19 and 23.
        _ => Err(unacceptable(
            7,
            &format!("simple value {} is not recognized", b & 0x1f),
        )),
    }
}

/// Seconds (and nanoseconds) since the epoch as Go's RFC3339Nano in UTC, if the year
/// is within 0000–9999 (what RFC 3339 text can hold).
fn epoch_text(secs: i64, nanos: u32) -> Option<String> {
    // 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
    if !(-62_167_219_200..=253_402_300_799).contains(&secs) {
        return None;
    }
    let base = util::rfc3339(secs);
    Some(format!(
        "{}{}Z",
        base.strip_suffix('Z').unwrap_or(&base),
        fraction(nanos)
    ))
}

/// A float epoch as fxamacker/cbor reads it: whole seconds and the fraction's
/// nanoseconds, truncated, normalised to a non-negative fraction as `time.Unix` does.
fn epoch_float(f: f64) -> Option<String> {
    if !(-62_167_219_201.0..=253_402_300_800.0).contains(&f) {
        return None;
    }
    let whole = f.trunc();
    let nanos = ((f - whole) * 1e9) as i64;
    let total = whole as i64 * 1_000_000_000 + nanos;
    let (secs, nanos) = (
        total.div_euclid(1_000_000_000),
        total.rem_euclid(1_000_000_000),
    );
    epoch_text(secs, u32::try_from(nanos).unwrap_or(0))
}

/// RFC3339Nano's fraction: `.` and up to nine digits, trailing zeros dropped, or
/// nothing for a whole second.
fn fraction(nanos: u32) -> String {
    if nanos == 0 {
        return String::new();
    }
    let digits = format!("{nanos:09}");
    format!(".{}", digits.trim_end_matches('0'))
}

/// RFC 3339 text (`2006-01-02T15:04:05[.frac](Z|±hh:mm)`) re-written as Go's
/// RFC3339Nano writes the parsed time: the same wall clock and offset, the fraction
/// without trailing zeros, a zero offset as `Z`.
fn rfc3339_nano(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(r)?;
        part.iter().all(u8::is_ascii_digit).then(|| {
            part.iter()
                .fold(0u32, |acc, c| acc * 10 + u32::from(c - b'0'))
        })
    };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return None;
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let mut i = 19;
    let mut nanos = 0u32;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        // Nanosecond precision: digits past the ninth are dropped.
        let kept = n.min(9);
        nanos = digits(start..start + kept)? * 10u32.pow((9 - kept) as u32);
    }
    let zone = match b.get(i..)? {
        b"Z" => "Z".to_string(),
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (oh, om) = (digits(i + 1..i + 3)?, digits(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            if oh == 0 && om == 0 {
                "Z".to_string()
            } else {
                format!("{}{oh:02}:{om:02}", *sign as char)
            }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let (next_y, next_mo) = if mo == 12 { (y + 1, 1) } else { (y, mo + 1) };
    let month_days = util::days_from_civil(i64::from(next_y), next_mo, 1)
        - util::days_from_civil(i64::from(y), mo, 1);
    if d == 0 || i64::from(d) > month_days {
        return None;
    }
    Some(format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}{}{zone}",
        fraction(nanos)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(b: &[u8]) -> Value {
        serde_json::from_slice(&decode_body(b).unwrap_or_else(|e| panic!("{e}"))).unwrap()
    }

    fn text_of(b: &[u8]) -> String {
        String::from_utf8(decode_body(b).unwrap()).unwrap()
    }

    fn err(b: &[u8]) -> String {
        decode_body(b).unwrap_err()
    }

    #[test]
    fn scalars_and_containers() {
        // A body with and without tag 55799 (client-go sends apply bodies without it).
        assert_eq!(
            decode_body(b"\xd9\xd9\xf7\xa1\x41k\x41v").unwrap(),
            b"{\"k\":\"v\"}"
        );
        assert_eq!(decode_body(b"\xa1\x41k\x41v").unwrap(), b"{\"k\":\"v\"}");
        assert_eq!(ok(b"\x00"), json!(0));
        assert_eq!(ok(b"\x3b\x7f\xff\xff\xff\xff\xff\xff\xff"), json!(i64::MIN));
        assert_eq!(ok(b"\x1b\x7f\xff\xff\xff\xff\xff\xff\xff"), json!(i64::MAX));
        assert_eq!(ok(b"\xf4"), json!(false));
        assert_eq!(ok(b"\xf5"), json!(true));
        assert_eq!(ok(b"\xf6"), json!(null));
        assert_eq!(ok(b"\x82\x61a\x41b"), json!(["a", "b"]));
        assert_eq!(ok(b"\xa2\x61a\x01\x41b\x02"), json!({"a": 1, "b": 2}));
        // Tag 55799 anywhere, and unknown tags, are dropped.
        assert_eq!(ok(b"\xd9\xd9\xf7\x81\xd9\xd9\xf7\xd8\x64\x01"), json!([1]));
    }

    #[test]
    fn floats_print_as_go_prints_float64() {
        // docs/wire.md §3: 3.0 → 3, 1e21 → 1e+21, 1e-7 → 1e-7, 0.000001 → 0.000001.
        assert_eq!(text_of(b"\xf9\x42\x00"), "3");
        assert_eq!(
            text_of(&[0xfb, 0x44, 0x4b, 0x1a, 0xe4, 0xd6, 0xe2, 0xef, 0x50]),
            "1e+21"
        );
        assert_eq!(
            text_of(&[0xfb, 0x3e, 0x7a, 0xd7, 0xf2, 0x9a, 0xbc, 0xaf, 0x48]),
            "1e-7"
        );
        assert_eq!(
            text_of(&[0xfb, 0x3e, 0xb0, 0xc6, 0xf7, 0xa0, 0xb5, 0xed, 0x8d]),
            "0.000001"
        );
        assert_eq!(text_of(b"\xf9\x3e\x00"), "1.5");
        for bad in [
            &b"\xf9\x7e\x00"[..],
            b"\xf9\x7c\x00",
            b"\xfa\xff\x80\x00\x00",
        ] {
            assert!(err(bad).contains("floating-point"), "{:?}", err(bad));
        }
    }

    #[test]
    fn strings() {
        assert_eq!(text_of(b"\x44\x61\xe6\xb0\x62"), "\"a\u{fffd}\u{fffd}b\"");
        assert_eq!(ok(b"\x63h\xc3\xa9"), json!("hé"));
        assert_eq!(err(b"\x62\xc3\x28"), "cbor: invalid UTF-8 string");
        // Indefinite lengths, strings included.
        assert_eq!(ok(b"\x5f\x41a\x42bc\xff"), json!("abc"));
        assert_eq!(ok(b"\x7f\x61a\x62bc\xff"), json!("abc"));
        assert_eq!(ok(b"\x9f\x01\x9f\xff\xff"), json!([1, []]));
        assert_eq!(ok(b"\xbf\x41k\xbf\xff\xff"), json!({"k": {}}));
        assert!(err(b"\x5f\x61a\xff").starts_with("cbor: wrong element type"));
        // Expected later encodings on byte strings.
        assert_eq!(ok(b"\xd5\x44\x00\x01\xff\xfe"), json!("AAH__g"));
        assert_eq!(ok(b"\xd6\x44\x00\x01\xff\xfe"), json!("AAH//g=="));
        assert_eq!(ok(b"\xd7\x44\x00\x01\xff\xfe"), json!("0001fffe"));
    }

    #[test]
    fn byte_fields_of_typed_kinds() {
        // kube-apiserver 1.36.2, CBOR on: `binaryData: {"b": 23(h'0001fffe')}` (and 21, 22,
        // and the base64 text `'AAH//g=='` untagged) is stored as 00 01 ff fe.
        let typed = |b: &[u8]| {
            decode_typed_body(b, Some("binaryData")).map(|j| String::from_utf8(j).unwrap())
        };
        for value in [
            &b"\xd7\x44\x00\x01\xff\xfe"[..],
            b"\xd5\x44\x00\x01\xff\xfe",
            b"\xd6\x44\x00\x01\xff\xfe",
            // Untagged: base64 text, decoded (and written again in canonical form).
            b"\x48AAH//g==",
            b"\x48AAH//h==",
            b"\x49AAH/\n/g==",
            b"\xd9\xd9\xf7\x48AAH//g==",
        ] {
            let body = [&b"\xa1\x4abinaryData\xa1\x41b"[..], value].concat();
            assert_eq!(typed(&body).unwrap(), r#"{"binaryData":{"b":"AAH//g=="}}"#);
            // Without the kind, the tag's text form (a custom resource).
            assert!(decode_body(&body).is_ok());
        }
        // What the real server refused, with the same words (Go's offsets).
        for (value, at) in [
            (&b"\x44\x00\x01\xff\xfe"[..], 0),
            (b"\x45hello", 4),
            (b"\x46AAH//g", 4),
            (b"\x48AAH__g==", 3),
            (b"\x49AAH/ /g==", 4),
            (b"\x49AAH//g===", 8),
        ] {
            let body = [&b"\xa1\x4abinaryData\xa1\x41b"[..], value].concat();
            assert_eq!(
                typed(&body).unwrap_err(),
                format!("cbor: failed to decode base64 from byte string: illegal base64 data at input byte {at}")
            );
        }
        let text = b"\xa1\x4abinaryData\xa1\x41b\x62ab";
        assert_eq!(
            typed(text).unwrap_err(),
            "cbor: cannot unmarshal UTF-8 text string into Go value of type []uint8"
        );
    }

    #[test]
    fn map_keys() {
        assert_eq!(
            err(b"\xa2\x41k\x01\x61k\x02"),
            "cbor: found duplicate map key \"k\" at map element index 1"
        );
        assert_eq!(
            err(b"\xa1\x01\x02"),
            "cbor: cannot unmarshal positive integer into Go value of type string"
        );
    }

    #[test]
    fn times() {
        assert_eq!(
            ok(b"\xc1\xfb\x41\xd4\x52\xd9\xec\x20\x00\x00"),
            json!("2013-03-21T20:04:00.5Z")
        );
        assert_eq!(ok(b"\xc1\x00"), json!("1970-01-01T00:00:00Z"));
        assert_eq!(ok(b"\xc1\x20"), json!("1969-12-31T23:59:59Z"));
        let t0 = |s: &str| {
            let mut b = vec![0xc0, 0x78, s.len() as u8];
            b.extend_from_slice(s.as_bytes());
            decode_body(&b).map(|j| serde_json::from_slice::<Value>(&j).unwrap())
        };
        assert_eq!(
            t0("2026-11-21T12:01:11.500+01:00").unwrap(),
            json!("2026-11-21T12:01:11.5+01:00")
        );
        assert_eq!(
            t0("2026-11-21T12:01:11+00:00").unwrap(),
            json!("2026-11-21T12:01:11Z")
        );
        assert_eq!(
            t0("2026-11-21T12:01:11Z").unwrap(),
            json!("2026-11-21T12:01:11Z")
        );
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-21 12:01:11Z",
            "2026-11-21T12:01:11",
        ] {
            assert!(t0(bad).is_err(), "{bad}");
        }
        assert!(err(b"\xc0\x01").starts_with("cbor: tag number 0 must be followed by text"));
        // Year 10000 and beyond cannot be RFC 3339 text.
        assert!(err(b"\xc1\x1b\x00\x00\x00\x3b\x00\x00\x00\x00").starts_with("cbor: cannot decode"));
    }

    #[test]
    fn refused() {
        let big = b"\x1b\xff\xff\xff\xff\xff\xff\xff\xff";
        assert!(err(big).ends_with("(18446744073709551615 overflows Go's int64)"));
        assert!(err(b"\x3b\xff\xff\xff\xff\xff\xff\xff\xff").contains("overflows Go's int64"));
        assert_eq!(
            err(b"\xc2\x41\x01"),
            "cbor: data item of cbor type tag is not accepted by protocol: bignum"
        );
        assert_eq!(
            err(b"\xf7"),
            "cbor: data item of cbor type primitives is not accepted by protocol: simple value 23 is not recognized"
        );
        assert!(err(b"\xf8\x10").starts_with("cbor: invalid simple value"));
        assert!(err(b"\x1c").starts_with("cbor: invalid additional information 28"));
        assert_eq!(err(b"\x81\xff"), "cbor: unexpected \"break\" code");
        assert_eq!(err(b"\xa1\x41"), "unexpected EOF");
        assert_eq!(err(b"\xd9\xd9\xf7\xa1\x41"), "unexpected EOF"); // b-badcbor
                                                                    // A length beyond the input is found without allocating for it.
        assert_eq!(
            err(b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff"),
            "unexpected EOF"
        );
        assert_eq!(
            err(b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff"),
            "unexpected EOF"
        );
        assert_eq!(err(b""), "EOF");
        assert_eq!(
            err(b"\xa0\x00\x00"),
            "cbor: 2 bytes of extraneous data starting at index 1"
        );
        let deep: Vec<u8> = std::iter::repeat_n(0x81, MAX_DEPTH).chain([0x00]).collect();
        assert!(decode_body(&deep).is_ok());
        let deeper: Vec<u8> = std::iter::repeat_n(0x81, MAX_DEPTH + 1)
            .chain([0x00])
            .collect();
        assert_eq!(
            err(&deeper),
            format!("cbor: exceeded max nested level {MAX_DEPTH}")
        );
    }
}
