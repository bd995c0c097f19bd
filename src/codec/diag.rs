//! CBOR diagnostic notation (RFC 8949 §8) for `cborgate diag`: shows people
//! what is on the wire, e.g. `55799({h'6b696e64': h'506f64'})`, or with byte
//! strings that are valid UTF-8 shown as `'Pod'` (RFC 8610 Appendix G).
//!
//! Works on a whole buffer with an explicit stack (no recursion on input
//! depth); a CBOR Sequence prints one item per line.

use super::error::{CodecError, Reason};
use std::fmt::Write as _;

/// How byte strings are shown.
///
/// In diagnostic notation a single-quoted string *is* a byte string: its bytes
/// are the UTF-8 encoding of the text between the quotes (RFC 8949 §8, RFC 8610
/// Appendix G.2), so `'Pod'` and `h'506f64'` denote the same item and showing
/// one for the other loses nothing. Inside the quotes, G.2 applies JSON's
/// string escapes (RFC 8259 §7), with `\'` for the quote itself; a reader
/// therefore gets back exactly the original bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesAs {
    /// `h'6b696e64'`
    Hex,
    /// `'kind'` wherever the bytes are valid UTF-8, control characters
    /// included (ConfigMap data is mostly text with `\n` in it): `\n`, `\t`,
    /// `\r`, `\\` and `\'` escaped, every other control character (C0, DEL
    /// and C1) as `\u00XX`. `h'…'` where the bytes are not valid UTF-8.
    TextWhereValid,
}

enum Frame {
    Seq {
        remaining: Option<u64>,
        first: bool,
        map: bool,
        key_next: bool,
    },
    Tag,
    Chunks {
        major: u8,
        first: bool,
    },
}

/// Render every data item in `input`, one per line.
pub fn diagnose(input: &[u8], bytes_as: BytesAs, max_depth: usize) -> Result<String, CodecError> {
    let mut out = String::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0usize;
    let err = |r: Reason, at: usize| CodecError::new(r, at as u64);
    while i < input.len() {
        let at = i;
        let b0 = input[i];
        i += 1;
        let (major, ai) = (b0 >> 5, b0 & 31);
        let n = match ai {
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            28..=30 => return Err(err(Reason::Syntax, at)),
            _ => 0,
        };
        if i + n > input.len() {
            return Err(err(Reason::Truncated, input.len()));
        }
        let mut arg = if ai < 24 { ai as u64 } else { 0 };
        for &b in &input[i..i + n] {
            arg = (arg << 8) | b as u64;
        }
        i += n;
        // Break.
        if major == 7 && ai == 31 {
            match stack.pop() {
                Some(Frame::Seq {
                    remaining: None,
                    map,
                    key_next,
                    ..
                }) if !map || key_next => {
                    out.push(if map { '}' } else { ']' });
                }
                Some(Frame::Chunks { .. }) => out.push(')'),
                _ => return Err(err(Reason::Syntax, at)),
            }
            close(&mut stack, &mut out);
            continue;
        }
        if let Some(Frame::Chunks { major: m, first }) = stack.last_mut() {
            if *m != major || ai == 31 {
                return Err(err(Reason::Syntax, at));
            }
            if !*first {
                out.push_str(", ");
            }
            *first = false;
        } else {
            separator(&mut stack, &mut out);
        }
        let depth = stack
            .iter()
            .filter(|f| !matches!(f, Frame::Chunks { .. }))
            .count();
        match major {
            0 => {
                let _ = write!(out, "{arg}");
            }
            1 => {
                let _ = write!(out, "{}", -1 - arg as i128);
            }
            2 | 3 if ai == 31 => {
                out.push_str("(_ ");
                stack.push(Frame::Chunks { major, first: true });
                continue;
            }
            2 | 3 => {
                let len = usize::try_from(arg).unwrap_or(usize::MAX);
                if len > input.len() - i {
                    return Err(err(Reason::LengthExceedsInput, at));
                }
                let s = &input[i..i + len];
                i += len;
                if major == 3 {
                    match std::str::from_utf8(s) {
                        Ok(t) => write_quoted(&mut out, t, '"'),
                        Err(_) => return Err(err(Reason::InvalidUtf8, at)),
                    }
                } else {
                    write_bytes(&mut out, s, bytes_as);
                }
            }
            4 | 5 => {
                if depth >= max_depth {
                    return Err(err(Reason::DepthExceeded, at));
                }
                let map = major == 5;
                let remaining = if ai == 31 { None } else { Some(arg) };
                if let Some(k) = remaining {
                    let min = if map { k.saturating_mul(2) } else { k };
                    if min > (input.len() - i) as u64 {
                        return Err(err(Reason::LengthExceedsInput, at));
                    }
                }
                out.push(if map { '{' } else { '[' });
                if remaining.is_none() {
                    out.push_str("_ ");
                }
                if remaining == Some(0) {
                    out.push(if map { '}' } else { ']' });
                } else {
                    stack.push(Frame::Seq {
                        remaining,
                        first: true,
                        map,
                        key_next: true,
                    });
                    continue;
                }
            }
            6 => {
                if ai == 31 {
                    return Err(err(Reason::Syntax, at));
                }
                if depth >= max_depth {
                    return Err(err(Reason::DepthExceeded, at));
                }
                let _ = write!(out, "{arg}(");
                stack.push(Frame::Tag);
                continue;
            }
            _ => match ai {
                20 => out.push_str("false"),
                21 => out.push_str("true"),
                22 => out.push_str("null"),
                23 => out.push_str("undefined"),
                24 if arg < 32 => return Err(err(Reason::Syntax, at)),
                25 => write_float(&mut out, half::f16::from_bits(arg as u16).to_f64(), "_1"),
                26 => write_float(&mut out, f32::from_bits(arg as u32) as f64, "_2"),
                27 => write_float(&mut out, f64::from_bits(arg), "_3"),
                _ => {
                    let _ = write!(out, "simple({arg})");
                }
            },
        }
        close(&mut stack, &mut out);
    }
    if !stack.is_empty() {
        return Err(err(Reason::Truncated, input.len()));
    }
    Ok(out)
}

fn separator(stack: &mut [Frame], out: &mut String) {
    if let Some(Frame::Seq {
        first,
        map,
        key_next,
        ..
    }) = stack.last_mut()
    {
        if *map && !*key_next {
            out.push_str(": ");
        } else if !*first {
            out.push_str(", ");
        }
        *first = false;
    }
}

/// An item just ended: close finished tags and containers above it.
fn close(stack: &mut Vec<Frame>, out: &mut String) {
    loop {
        match stack.last_mut() {
            None => {
                out.push('\n');
                return;
            }
            Some(Frame::Tag) => {
                stack.pop();
                out.push(')');
            }
            Some(Frame::Chunks { .. }) => return,
            Some(Frame::Seq {
                remaining,
                map,
                key_next,
                ..
            }) => {
                if *map {
                    *key_next = !*key_next;
                    if !*key_next {
                        return;
                    }
                }
                match remaining {
                    Some(r) => {
                        *r -= 1;
                        if *r > 0 {
                            return;
                        }
                        let m = *map;
                        stack.pop();
                        out.push(if m { '}' } else { ']' });
                    }
                    None => return,
                }
            }
        }
    }
}

fn write_bytes(out: &mut String, s: &[u8], bytes_as: BytesAs) {
    if bytes_as == BytesAs::TextWhereValid {
        if let Ok(t) = std::str::from_utf8(s) {
            write_quoted(out, t, '\'');
            return;
        }
    }
    out.push_str("h'");
    for b in s {
        let _ = write!(out, "{b:02x}");
    }
    out.push('\'');
}

/// `t` between `quote`s (`"` for text strings, `'` for byte strings shown as
/// text) with JSON's escapes (RFC 8610 Appendix G.2): the quote and `\\`
/// backslash-escaped, `\n` `\t` `\r` by name, other control characters
/// (`char::is_control`: U+0000-001F, U+007F-009F) as `\u00XX`, so that the
/// output is one line per item and safe to print on a terminal.
fn write_quoted(out: &mut String, t: &str, quote: char) {
    out.push(quote);
    for c in t.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn write_float(out: &mut String, f: f64, width: &str) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        let _ = write!(out, "{f:?}");
    }
    out.push_str(width);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(hex: &str) -> String {
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        diagnose(&bytes, BytesAs::Hex, 100).unwrap()
    }

    #[test]
    fn renders_rfc_examples() {
        assert_eq!(
            d("d9d9f7a1446b696e6443506f64"),
            "55799({h'6b696e64': h'506f64'})\n"
        );
        assert_eq!(d("8301820203820405"), "[1, [2, 3], [4, 5]]\n");
        assert_eq!(
            d("bf61610161629f0203ffff"),
            "{_ \"a\": 1, \"b\": [_ 2, 3]}\n"
        );
        assert_eq!(d("5f42010243030405ff"), "(_ h'0102', h'030405')\n");
        assert_eq!(d("3903e7"), "-1000\n");
        assert_eq!(d("f93c00"), "1.0_1\n");
        assert_eq!(d("f7"), "undefined\n");
        assert_eq!(d("a0"), "{}\n");
        assert_eq!(d("0102"), "1\n2\n");
        let text = diagnose(&[0xa1, 0x41, b'k', 0x41, b'v'], BytesAs::TextWhereValid, 10).unwrap();
        assert_eq!(text, "{'k': 'v'}\n");
    }

    #[test]
    fn text_shows_utf8_byte_strings_with_json_escapes() {
        // ConfigMap data: text with newlines and tabs is still text.
        let data = b"a\n\tb\r'\\\x01\x7f\xc2\x85";
        let mut cbor = vec![0x40 | data.len() as u8];
        cbor.extend_from_slice(data);
        let text = diagnose(&cbor, BytesAs::TextWhereValid, 10).unwrap();
        assert_eq!(text, "'a\\n\\tb\\r\\'\\\\\\u0001\\u007f\\u0085'\n");
        // Not UTF-8: hex, as before.
        let text = diagnose(&[0x42, 0xff, b'\n'], BytesAs::TextWhereValid, 10).unwrap();
        assert_eq!(text, "h'ff0a'\n");
        // Text strings get the same escapes, inside double quotes.
        let text = diagnose(&[0x65, b'"', b'\'', b'\n', 0x00, b'x'], BytesAs::Hex, 10).unwrap();
        assert_eq!(text, "\"\\\"'\\n\\u0000x\"\n");
    }

    #[test]
    fn rejects_bad_input() {
        assert!(diagnose(&[0x9f], BytesAs::Hex, 10).is_err());
        assert!(diagnose(
            &[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            BytesAs::Hex,
            10
        )
        .is_err());
        assert!(diagnose(&[0x81; 20], BytesAs::Hex, 10).is_err());
    }
}
