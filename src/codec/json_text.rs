//! JSON text output (CBOR → JSON): everything that writes JSON text for a CBOR
//! value's content. Strings: escaping as Go's `encoding/json` does (with the
//! fixed-size copies of `buf.rs`) and the quoted-key fast paths. Byte strings
//! under tags 21, 22 and 23: streaming base64url, base64 and hex. Numbers: Go's
//! `encoding/json` text for int64 and float64 ([`write_go_float`] is where a
//! CBOR float becomes JSON text).
//!
//! The state machine that decides what to write is `cbor_to_json.rs`; CBOR
//! heads and float widths are `number.rs`.

use std::io::Write as _;

use super::buf::{extend_prefix, extend_quoted, extend_run};
use super::utf8::{plain_run, Utf8Sink, REPLACEMENT, STR_STOP};

/// Escapes valid UTF-8 into a JSON string body.
pub(super) struct JsonSink<'a> {
    pub(super) out: &'a mut Vec<u8>,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_json_escaped(out: &mut Vec<u8>, s: &[u8]) {
    write_json_escaped_in(out, s, 0, s.len());
}

/// [`write_json_escaped`] of `src[a..b]`, where `src` may go on past `b`:
/// the runs between escapes (mostly short) are then copied as a fixed 32
/// bytes and cut back, and each escape as a fixed 8, with no call.
#[inline]
fn write_json_escaped_in(out: &mut Vec<u8>, src: &[u8], a: usize, b: usize) {
    let mut start = a;
    loop {
        let i = start + plain_run(&src[start..b]);
        extend_run::<32>(out, src, start, i);
        let Some(&c) = src.get(i).filter(|_| i < b) else {
            return;
        };
        debug_assert!(STR_STOP[c as usize]);
        let (seq, len) = escape(c);
        extend_prefix(out, &seq, len);
        start = i + 1;
    }
}

/// The JSON escape of a byte that needs one (a quote, a backslash or a
/// control byte), padded to 8 bytes, and its length.
#[inline(always)]
fn escape(c: u8) -> ([u8; 8], usize) {
    let short = match c {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            let u = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
                0,
                0,
            ];
            return (u, 6);
        }
    };
    ([b'\\', short, 0, 0, 0, 0, 0, 0], 2)
}

impl Utf8Sink for JsonSink<'_> {
    #[inline]
    fn valid(&mut self, b: &[u8]) {
        write_json_escaped(self.out, b);
    }
    #[inline]
    fn replacement(&mut self) {
        self.out.extend_from_slice(REPLACEMENT);
    }
}

/// Append `"input[i..i + n]"` for plain ASCII text, after a comma if
/// `comma`, followed by a colon if `colon`. Most strings are short: then the
/// whole piece is written at once, with one capacity check and no call.
#[inline(always)]
pub(super) fn quoted(
    out: &mut Vec<u8>,
    input: &[u8],
    i: usize,
    n: usize,
    comma: bool,
    colon: bool,
) {
    if let (Some(chunk), true) = (
        input
            .get(i..i + 24)
            .and_then(|c| <&[u8; 24]>::try_from(c).ok()),
        n <= 24,
    ) {
        extend_quoted(out, chunk, n, comma, colon);
        return;
    }
    if comma {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(&input[i..i + n]);
    out.push(b'"');
    if colon {
        out.push(b':');
    }
}

/// [`quoted`] for ASCII text of which only the first `plain` bytes need no
/// escaping: those are copied, the rest escaped.
#[inline(always)]
pub(super) fn quoted_ascii(
    out: &mut Vec<u8>,
    input: &[u8],
    i: usize,
    n: usize,
    plain: usize,
    comma: bool,
    colon: bool,
) {
    if plain == n {
        quoted(out, input, i, n, comma, colon);
        return;
    }
    if comma {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(&input[i..i + plain]);
    write_json_escaped_in(out, input, i + plain, i + n);
    out.push(b'"');
    if colon {
        out.push(b':');
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// What a byte string under tag 21, 22 or 23 becomes in JSON.
pub(super) enum Encoding {
    Base64Url,
    Base64,
    Hex,
}

/// Streaming base64 / base64url / hex of a byte string.
#[derive(Debug, Clone, Copy)]
pub(super) struct Encoder {
    kind: Encoding,
    carry: [u8; 2],
    n: u8,
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl Encoder {
    pub(super) fn new(kind: Encoding) -> Self {
        Encoder {
            kind,
            carry: [0; 2],
            n: 0,
        }
    }

    fn alphabet(&self) -> &'static [u8; 64] {
        if self.kind == Encoding::Base64Url {
            B64URL
        } else {
            B64
        }
    }

    pub(super) fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        if self.kind == Encoding::Hex {
            for &b in data {
                out.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
            return;
        }
        let a = self.alphabet();
        while self.n > 0 && self.n < 3 {
            let Some((&b, rest)) = data.split_first() else {
                return;
            };
            data = rest;
            if self.n == 2 {
                let t = [self.carry[0], self.carry[1], b];
                quad(a, t, out);
                self.n = 0;
            } else {
                self.carry[1] = b;
                self.n = 2;
            }
        }
        let mut chunks = data.chunks_exact(3);
        for c in &mut chunks {
            quad(a, [c[0], c[1], c[2]], out);
        }
        let rest = chunks.remainder();
        self.carry[..rest.len()].copy_from_slice(rest);
        self.n = rest.len() as u8;
    }

    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        if self.kind == Encoding::Hex {
            return;
        }
        let a = self.alphabet();
        let pad = self.kind == Encoding::Base64;
        match self.n {
            1 => {
                let b = self.carry[0];
                out.push(a[(b >> 2) as usize]);
                out.push(a[((b & 3) << 4) as usize]);
                if pad {
                    out.extend_from_slice(b"==");
                }
            }
            2 => {
                let (b0, b1) = (self.carry[0], self.carry[1]);
                out.push(a[(b0 >> 2) as usize]);
                out.push(a[(((b0 & 3) << 4) | (b1 >> 4)) as usize]);
                out.push(a[((b1 & 15) << 2) as usize]);
                if pad {
                    out.push(b'=');
                }
            }
            _ => {}
        }
        self.n = 0;
    }
}

#[inline]
fn quad(a: &[u8; 64], t: [u8; 3], out: &mut Vec<u8>) {
    let n = ((t[0] as u32) << 16) | ((t[1] as u32) << 8) | t[2] as u32;
    out.extend_from_slice(&[
        a[(n >> 18) as usize & 63],
        a[(n >> 12) as usize & 63],
        a[(n >> 6) as usize & 63],
        a[n as usize & 63],
    ]);
}

/// Append an int64 in decimal.
#[inline]
pub(super) fn write_decimal_i64(out: &mut Vec<u8>, v: i64) {
    // Digits (and sign) right-aligned at `buf[..20]`, then written as one
    // fixed 20-byte copy from where they start, cut back to their length.
    let mut buf = [0u8; 40];
    let mut i = 20;
    let neg = v < 0;
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    let mut chunk = [0u8; 20];
    chunk.copy_from_slice(&buf[i..i + 20]);
    extend_prefix(out, &chunk, 20 - i);
}

/// Append a finite float64 exactly as Go's `encoding/json` prints it:
/// shortest round-trip digits, `%f` style for 1e-6 <= |f| < 1e21, otherwise
/// `%e` style with the exponent's leading zero removed (`1e+21`, `1e-7`).
pub(super) fn write_go_float(out: &mut Vec<u8>, f: f64) {
    let abs = f.abs();
    let mut buf = [0u8; 400];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` gives shortest digits and a bare exponent: "1.5e-7".
        let _ = write!(cur, "{f:e}");
        let n = cur.position() as usize;
        let s = &buf[..n];
        let e = s.iter().position(|&b| b == b'e').unwrap_or(n);
        out.extend_from_slice(&s[..e]);
        out.push(b'e');
        let exp = &s[(e + 1).min(n)..];
        if let Some(rest) = exp.strip_prefix(b"-") {
            out.push(b'-');
            out.extend_from_slice(rest);
        } else {
            out.push(b'+');
            if exp.len() < 2 {
                out.push(b'0');
            }
            out.extend_from_slice(exp);
        }
    } else {
        // Rust's Display never uses an exponent and prints shortest digits,
        // "-0" for negative zero, and no ".0" for integral values, like Go's 'f'.
        let _ = write!(cur, "{f}");
        let n = cur.position() as usize;
        out.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(f: f64) -> String {
        let mut v = Vec::new();
        write_go_float(&mut v, f);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn go_float_text() {
        assert_eq!(go(2.0), "2");
        assert_eq!(go(3.0), "3");
        assert_eq!(go(1e21), "1e+21");
        assert_eq!(go(1e20), "100000000000000000000");
        assert_eq!(go(1e-7), "1e-7");
        assert_eq!(go(0.000001), "0.000001");
        assert_eq!(go(-0.0), "-0");
        assert_eq!(go(0.0), "0");
        assert_eq!(go(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(go(5e-324), "5e-324");
        assert_eq!(go(1.1), "1.1");
        assert_eq!(go(-4.1), "-4.1");
        assert_eq!(go(1.5e-10), "1.5e-10");
        assert_eq!(go(5.960464477539063e-8), "5.960464477539063e-8");
        assert_eq!(go(0.00006103515625), "0.00006103515625");
        assert_eq!(go(3.4028234663852886e38), "3.4028234663852886e+38");
        assert_eq!(go(1e300), "1e+300");
        assert_eq!(go(123456789012345680000.0), "123456789012345680000");
    }

    #[test]
    fn decimal_i64_text() {
        for v in [
            0,
            7,
            -7,
            10,
            -10,
            1234567890,
            -999_999_999_999,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            let mut out = b"x".to_vec();
            write_decimal_i64(&mut out, v);
            assert_eq!(out, format!("x{v}").as_bytes());
        }
    }
}
