//! Numbers on the CBOR side: CBOR heads, the shortest exact float width, and
//! what a JSON number literal becomes (JSON → CBOR). The text CBOR numbers
//! become in JSON is in `json_text.rs`.
//!
//! JSON number literals are parsed with the standard library's `f64` parser,
//! which is correctly rounded (unlike serde_json's default fast path).

use super::buf::extend_prefix;

/// CBOR major types, already shifted into the top three bits.
pub(crate) const MAJOR_UINT: u8 = 0 << 5;
pub(crate) const MAJOR_NINT: u8 = 1 << 5;
pub(crate) const MAJOR_BYTES: u8 = 2 << 5;
pub(crate) const MAJOR_TEXT: u8 = 3 << 5;
pub(crate) const MAJOR_ARRAY: u8 = 4 << 5;
pub(crate) const MAJOR_MAP: u8 = 5 << 5;

/// The self-described CBOR tag 55799 (`d9 d9 f7`).
pub const SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];

/// Append a CBOR head (major type + argument) in its shortest form.
#[inline(always)]
pub(crate) fn write_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    if arg < 24 {
        out.push(major | arg as u8);
    } else {
        write_long_head(out, major, arg);
    }
}

fn write_long_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    // Argument bytes after the head byte: 1, 2, 4 or 8.
    let (info, n) = if arg <= u8::MAX as u64 {
        (24, 1)
    } else if arg <= u16::MAX as u64 {
        (25, 2)
    } else if arg <= u32::MAX as u64 {
        (26, 4)
    } else {
        (27, 8)
    };
    // The head as one fixed 9-byte copy, cut back to its length: the
    // argument's `n` low bytes, big-endian, shifted to the front.
    let mut head = [0u8; 9];
    head[0] = major | info;
    head[1..].copy_from_slice(&(arg << (64 - 8 * n)).to_be_bytes());
    extend_prefix(out, &head, 1 + n as usize);
}

/// Append an int64 as a CBOR integer.
#[inline]
pub(crate) fn write_int(out: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        write_head(out, MAJOR_UINT, v as u64);
    } else {
        write_head(out, MAJOR_NINT, !(v as u64));
    }
}

/// Append a float in the shortest of float16/float32/float64 that holds it
/// exactly (1.0 → `f9 3c 00`, 100000.0 → `fa 47 c3 50 00`).
pub(crate) fn write_float(out: &mut Vec<u8>, f: f64) {
    let h = half::f16::from_f64(f);
    if h.to_f64().to_bits() == f.to_bits() {
        out.push(0xf9);
        out.extend_from_slice(&h.to_bits().to_be_bytes());
        return;
    }
    let s = f as f32;
    if (s as f64).to_bits() == f.to_bits() {
        out.push(0xfa);
        out.extend_from_slice(&s.to_bits().to_be_bytes());
        return;
    }
    out.push(0xfb);
    out.extend_from_slice(&f.to_bits().to_be_bytes());
}

/// What a JSON number literal becomes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum JsonNumber {
    Int(i64),
    Float(f64),
}

/// Interpret a syntactically valid JSON number literal the way Kubernetes'
/// JSON decoder does: no `.`/`e`/`E` and fits int64 → integer; anything else →
/// the correctly rounded float64. `None` when the value is outside float64's
/// range (Go reports a range error for `1e400`).
pub(crate) fn interpret_json_number(text: &[u8], integral: bool) -> Option<JsonNumber> {
    // The grammar was validated by the tokenizer, so this is ASCII.
    let s = std::str::from_utf8(text).ok()?;
    if integral {
        if let Ok(i) = s.parse::<i64>() {
            return Some(JsonNumber::Int(i));
        }
    }
    let f: f64 = s.parse().ok()?;
    if f.is_finite() {
        Some(JsonNumber::Float(f))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cbor_float(f: f64) -> Vec<u8> {
        let mut v = Vec::new();
        write_float(&mut v, f);
        v
    }

    #[test]
    fn shortest_exact_width() {
        assert_eq!(cbor_float(1.0), [0xf9, 0x3c, 0x00]);
        assert_eq!(cbor_float(100000.0), [0xfa, 0x47, 0xc3, 0x50, 0x00]);
        assert_eq!(
            cbor_float(1.1),
            [0xfb, 0x3f, 0xf1, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a]
        );
        assert_eq!(cbor_float(-0.0), [0xf9, 0x80, 0x00]);
        assert_eq!(cbor_float(5.960464477539063e-8), [0xf9, 0x00, 0x01]);
        assert_eq!(cbor_float(65504.0), [0xf9, 0x7b, 0xff]);
        assert_eq!(cbor_float(9223372036854775808.0), [0xfa, 0x5f, 0, 0, 0]);
    }

    #[test]
    fn heads_are_shortest() {
        let mut v = Vec::new();
        write_int(&mut v, 23);
        write_int(&mut v, 24);
        write_int(&mut v, -1);
        write_int(&mut v, -1000);
        write_int(&mut v, i64::MIN);
        assert_eq!(
            v,
            [
                0x17, 0x18, 0x18, 0x20, 0x39, 0x03, 0xe7, 0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0xff
            ]
        );
    }

    #[test]
    fn heads_at_every_width_boundary() {
        for (arg, want) in [
            (23u64, &[0x57u8][..]),
            (24, &[0x58, 24]),
            (255, &[0x58, 0xff]),
            (256, &[0x59, 0x01, 0x00]),
            (65535, &[0x59, 0xff, 0xff]),
            (65536, &[0x5a, 0x00, 0x01, 0x00, 0x00]),
            (u32::MAX as u64, &[0x5a, 0xff, 0xff, 0xff, 0xff]),
            (1 << 32, &[0x5b, 0, 0, 0, 1, 0, 0, 0, 0]),
            (
                u64::MAX,
                &[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            ),
        ] {
            let mut v = vec![0xaa];
            write_head(&mut v, MAJOR_BYTES, arg);
            assert_eq!(&v[1..], want, "arg {arg}");
            assert_eq!(v[0], 0xaa);
        }
    }

    #[test]
    fn json_number_rules() {
        use JsonNumber::*;
        assert_eq!(interpret_json_number(b"-0", true), Some(Int(0)));
        assert_eq!(
            interpret_json_number(b"9223372036854775808", true),
            Some(Float(9223372036854775808.0))
        );
        assert_eq!(interpret_json_number(b"2.0", false), Some(Float(2.0)));
        assert_eq!(interpret_json_number(b"1e400", false), None);
        assert_eq!(interpret_json_number(b"1e-400", false), Some(Float(0.0)));
        // Correctly rounded (a classic hard case for fast parsers).
        assert_eq!(
            interpret_json_number(b"2.2250738585072011e-308", false),
            Some(Float(2.225073858507201e-308))
        );
    }
}
