//! JSON text exactly as Go's `encoding/json` (and so the kube-apiserver) writes it:
//! `<`, `>`, `&`, U+2028 and U+2029 escaped as `\u003c`…, control characters as Go
//! escapes them, floats in Go's shortest form (`2` not `2.0`, `1e+21`, `1e-7`),
//! compact with a trailing newline like `json.Encoder`, or indented by two spaces
//! like `json.MarshalIndent` (no trailing newline).

use serde_json::Value;

/// Compact JSON followed by `\n`, as the apiserver's JSON serializer writes a body.
pub(crate) fn encode_line(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(v, &mut out, None, 0);
    out.push(b'\n');
    out
}

/// Compact JSON without the trailing newline (watch events embed objects with it).
pub(crate) fn encode_compact(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(v, &mut out, None, 0);
    out
}

/// `json.MarshalIndent(v, "", "  ")`: what `WriteRawJSON` and the pretty serializer write.
pub(crate) fn encode_pretty(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_value(v, &mut out, Some("  "), 0);
    out
}

fn newline(out: &mut Vec<u8>, indent: &str, level: usize) {
    out.push(b'\n');
    for _ in 0..level {
        out.extend_from_slice(indent.as_bytes());
    }
}

fn write_value(v: &Value, out: &mut Vec<u8>, indent: Option<&str>, level: usize) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            if a.is_empty() {
                out.extend_from_slice(b"[]");
                return;
            }
            out.push(b'[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if let Some(ind) = indent {
                    newline(out, ind, level + 1);
                }
                write_value(item, out, indent, level + 1);
            }
            if let Some(ind) = indent {
                newline(out, ind, level);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            if m.is_empty() {
                out.extend_from_slice(b"{}");
                return;
            }
            out.push(b'{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if let Some(ind) = indent {
                    newline(out, ind, level + 1);
                }
                write_string(k, out);
                out.push(b':');
                if indent.is_some() {
                    out.push(b' ');
                }
                write_value(item, out, indent, level + 1);
            }
            if let Some(ind) = indent {
                newline(out, ind, level);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        // Integers beyond int64 become float64 in Go's unstructured decoding.
        out.extend_from_slice(go_float(f).as_bytes());
    } else {
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

/// A float64 as Go's `encoding/json` prints it.
pub(crate) fn go_float(f: f64) -> String {
    if !f.is_finite() {
        // Go refuses to encode these; the stand-in never stores them.
        return "null".into();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Shortest round-trip digits in exponent form, then Go's exponent spelling.
        let s = format!("{f:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        let e = exp.unsigned_abs();
        if sign == '+' && e < 10 {
            format!("{mant}e+0{e}")
        } else {
            format!("{mant}e{sign}{e}")
        }
    } else {
        // Rust's Display is the shortest round-trip form without an exponent.
        format!("{f}")
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        if let Some(e) = esc {
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(e);
            i += 1;
            start = i;
            continue;
        }
        if b < 0x20 || b == b'<' || b == b'>' || b == b'&' {
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
            i += 1;
            start = i;
            continue;
        }
        // U+2028 and U+2029 are E2 80 A8 / E2 80 A9 in UTF-8.
        if b == 0xE2 && i + 2 < bytes.len() && bytes[i + 1] == 0x80 && (bytes[i + 2] & 0xFE) == 0xA8
        {
            out.extend_from_slice(&bytes[start..i]);
            out.extend_from_slice(if bytes[i + 2] == 0xA8 {
                b"\\u2028"
            } else {
                b"\\u2029"
            });
            i += 3;
            start = i;
            continue;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_floats() {
        assert_eq!(go_float(2.0), "2");
        assert_eq!(go_float(3.5), "3.5");
        assert_eq!(go_float(-0.0), "-0");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e20), "100000000000000000000");
        assert_eq!(go_float(1e-7), "1e-7");
        assert_eq!(go_float(0.000001), "0.000001");
        assert_eq!(go_float(1e300), "1e+300");
        assert_eq!(go_float(5e-324), "5e-324");
        assert_eq!(go_float(1.5e-10), "1.5e-10");
    }

    #[test]
    fn go_escaping() {
        let v = json!({"a": "<none> & \u{2028}\u{1}\u{8}\t\"\\ héllo ☃"});
        assert_eq!(
            String::from_utf8(encode_compact(&v)).unwrap(),
            r#"{"a":"\u003cnone\u003e \u0026 \u2028\u0001\b\t\"\\ héllo ☃"}"#
        );
    }

    #[test]
    fn pretty_like_marshal_indent() {
        let v = json!({"kind": "Status", "metadata": {}, "list": [1, {"x": []}]});
        assert_eq!(
            String::from_utf8(encode_pretty(&v)).unwrap(),
            "{\n  \"kind\": \"Status\",\n  \"metadata\": {},\n  \"list\": [\n    1,\n    {\n      \"x\": []\n    }\n  ]\n}"
        );
    }
}
