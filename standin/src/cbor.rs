//! CBOR as a CBOR-enabled kube-apiserver writes and reads it, for the stand-in's
//! `CborMode::On`/`Mixed`: bodies are the self-described tag 55799 and one item;
//! strings and map keys are byte strings; map keys come in a **random order on every
//! response** (the real server shuffles on purpose, so clients cannot rely on order);
//! integers are CBOR integers and floats take the shortest of float16/32/64 that holds
//! them exactly; `[]byte` fields the stand-in knows (`ConfigMap.binaryData`,
//! `Secret.data`) are tag 22 byte strings, as Go's encoder writes them. A watch event
//! is `55799({"type": …, "object": 55799(…)})`. Request bodies are read by
//! `cbor_decode`.
//!
//! The encoder recurses over the stand-in's own objects, which serde_json's parser
//! already bounded to 128 levels.

use serde_json::{Map, Value};

use super::util;

/// Tag 55799 (self-described CBOR), as every body and every watch event starts.
pub(crate) const SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];

/// A response body: `55799(<v>)`, keys shuffled.
pub(crate) fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&SELF_DESCRIBED);
    write_top(&mut out, v, None);
    out
}

/// One watch event of an `application/cbor-seq` stream: the object is embedded
/// pre-encoded, so the tag appears twice.
pub(crate) fn encode_event(typ: &str, object: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&SELF_DESCRIBED);
    write_head(&mut out, 5, 2);
    let write_type = |out: &mut Vec<u8>| {
        write_bytes(out, b"type");
        write_bytes(out, typ.as_bytes());
    };
    let write_object = |out: &mut Vec<u8>| {
        write_bytes(out, b"object");
        out.extend_from_slice(&SELF_DESCRIBED);
        write_top(out, object, None);
    };
    if util::random_u64() & 1 == 0 {
        write_type(&mut out);
        write_object(&mut out);
    } else {
        write_object(&mut out);
        write_type(&mut out);
    }
    out
}

/// The field of a built-in kind whose map values are `[]byte` (base64 in JSON).
pub(crate) fn bytes_field(kind: &str) -> Option<&'static str> {
    match kind {
        "ConfigMap" => Some("binaryData"),
        "Secret" => Some("data"),
        _ => None,
    }
}

/// An object, a list (whose items are of the list's kind, without their own `kind`
/// in typed lists) or anything else.
fn write_top(out: &mut Vec<u8>, v: &Value, item_kind: Option<&str>) {
    let Value::Object(m) = v else {
        write_value(out, v);
        return;
    };
    let kind = m.get("kind").and_then(Value::as_str).or(item_kind);
    let list_item_kind = kind
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| bytes_field(k).is_some());
    let field = kind.and_then(bytes_field);
    write_head(out, 5, m.len() as u64);
    for (k, val) in shuffled(m) {
        write_bytes(out, k.as_bytes());
        match (val, list_item_kind) {
            (Value::Array(items), Some(ik)) if k == "items" => {
                write_head(out, 4, items.len() as u64);
                for item in items {
                    write_top(out, item, Some(ik));
                }
            }
            (Value::Object(data), _) if field == Some(k.as_str()) => write_byte_map(out, data),
            _ => write_value(out, val),
        }
    }
}

/// A `map[string][]byte`: values that are canonical standard base64 become
/// `22(h'…')`, anything else stays a (byte) string.
fn write_byte_map(out: &mut Vec<u8>, m: &Map<String, Value>) {
    write_head(out, 5, m.len() as u64);
    for (k, v) in shuffled(m) {
        write_bytes(out, k.as_bytes());
        match v.as_str().and_then(base64_exact) {
            Some(raw) => {
                write_head(out, 6, 22);
                write_bytes(out, &raw);
            }
            None => write_value(out, v),
        }
    }
}

/// Decodes standard padded base64 only if re-encoding gives the same text, so the
/// tag 22 form decodes back to exactly the JSON string.
fn base64_exact(s: &str) -> Option<Vec<u8>> {
    let raw = util::base64_decode(s)?;
    (util::base64_std(&raw) == s).then_some(raw)
}

fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0xf6),
        Value::Bool(false) => out.push(0xf4),
        Value::Bool(true) => out.push(0xf5),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_bytes(out, s.as_bytes()),
        Value::Array(a) => {
            write_head(out, 4, a.len() as u64);
            for item in a {
                write_value(out, item);
            }
        }
        Value::Object(m) => {
            write_head(out, 5, m.len() as u64);
            for (k, item) in shuffled(m) {
                write_bytes(out, k.as_bytes());
                write_value(out, item);
            }
        }
    }
}

/// The entries of a map in a fresh random order (Fisher–Yates).
fn shuffled(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    for i in (1..entries.len()).rev() {
        let j = (util::random_u64() % (i as u64 + 1)) as usize;
        entries.swap(i, j);
    }
    entries
}

fn write_head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= u8::MAX as u64 {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= u16::MAX as u64 {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= u32::MAX as u64 {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_head(out, 2, b.len() as u64);
    out.extend_from_slice(b);
}

fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        if i >= 0 {
            write_head(out, 0, i as u64);
        } else {
            write_head(out, 1, (-1 - i) as u64);
        }
    } else if let Some(u) = n.as_u64() {
        // Beyond int64: the nearest float64, as Kubernetes' JSON decoding makes it.
        write_float(out, u as f64);
    } else {
        write_float(out, n.as_f64().unwrap_or(0.0));
    }
}

/// The shortest of float16, float32 and float64 that holds `f` exactly.
fn write_float(out: &mut Vec<u8>, f: f64) {
    let h = half::f16::from_f64(f);
    if h.to_f64() == f && h.to_f64().is_sign_negative() == f.is_sign_negative() {
        out.push(0xf9);
        out.extend_from_slice(&h.to_bits().to_be_bytes());
    } else if (f as f32) as f64 == f {
        out.push(0xfa);
        out.extend_from_slice(&(f as f32).to_bits().to_be_bytes());
    } else {
        out.push(0xfb);
        out.extend_from_slice(&f.to_bits().to_be_bytes());
    }
}

/// apiserver's `summarizeData(body, 30)`: how a rejected body is quoted in messages.
pub(crate) fn summarize(data: &[u8]) -> String {
    const MAX: usize = 30;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    match data.first() {
        None => "<empty>".into(),
        Some(b'{') if data.len() > MAX => {
            format!("{} ...", String::from_utf8_lossy(&data[..MAX]))
        }
        Some(b'{') => String::from_utf8_lossy(data).into_owned(),
        Some(_) if data.len() > MAX => format!("{} ...", hex(&data[..MAX])),
        Some(_) => hex(data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbor_decode;
    use serde_json::json;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Decoded by the stand-in's request decoder, which is written independently of
    /// this encoder (over minicbor).
    fn back(b: &[u8]) -> Value {
        serde_json::from_slice(&cbor_decode::decode_body(b).unwrap()).unwrap()
    }

    #[test]
    fn scalars_in_the_shortest_form() {
        let one = |v: Value| hex(&encode(&v)[3..]);
        assert_eq!(one(json!(0)), "00");
        assert_eq!(one(json!(23)), "17");
        assert_eq!(one(json!(24)), "1818");
        assert_eq!(one(json!(404)), "190194");
        assert_eq!(one(json!(-1)), "20");
        assert_eq!(one(json!(-500)), "3901f3");
        assert_eq!(one(json!(i64::MIN)), "3b7fffffffffffffff");
        assert_eq!(one(json!(1.0)), "f93c00");
        assert_eq!(one(json!(-0.0)), "f98000");
        assert_eq!(one(json!(100000.0)), "fa47c35000");
        assert_eq!(one(json!(1.1)), "fb3ff199999999999a");
        assert_eq!(one(json!(9223372036854775808u64)), "fa5f000000");
        assert_eq!(one(json!(5.960464477539063e-8)), "f90001");
        assert_eq!(one(json!(null)), "f6");
        assert_eq!(one(json!(true)), "f5");
        assert_eq!(one(json!("a")), "4161");
        assert_eq!(one(json!([])), "80");
        assert_eq!(one(json!({})), "a0");
        assert_eq!(hex(&encode(&json!({"k": "v"}))), "d9d9f7a1416b4176");
    }

    #[test]
    fn maps_shuffle_but_keep_their_value() {
        let v = json!({"a": 1, "b": [1.5, {"c": "x", "d": null, "e": false}], "f": "g", "h": {}});
        let first = encode(&v);
        let mut differed = false;
        for _ in 0..40 {
            let again = encode(&v);
            assert_eq!(back(&again), v);
            differed |= again != first;
        }
        assert!(differed, "key order never changed");
    }

    #[test]
    fn byte_fields_are_tag_22() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "binaryData": {"bin": "AAEC/w=="}, "data": {"k": "AAEC/w=="}});
        let b = encode(&cm);
        let h = hex(&b);
        assert!(h.contains("d644000102ff"), "{h}");
        assert_eq!(h.matches("d644").count(), 1, "data is text, not bytes: {h}");
        assert_eq!(back(&b), cm);
        // Typed lists drop the items' kind; the list's kind says what they are.
        let list = json!({"kind": "SecretList", "apiVersion": "v1", "items": [{"data": {"x": "eA==", "odd": "eA"}}]});
        let b = encode(&list);
        assert!(hex(&b).contains("d64178"));
        assert_eq!(back(&b), list);
    }

    #[test]
    fn events_carry_the_tag_twice() {
        let e = encode_event("ADDED", &json!({"kind": "ConfigMap"}));
        assert_eq!(&e[..4], &[0xd9, 0xd9, 0xf7, 0xa2]);
        assert_eq!(hex(&e).matches("d9d9f7").count(), 2);
        assert_eq!(
            back(&e),
            json!({"type": "ADDED", "object": {"kind": "ConfigMap"}})
        );
    }

    #[test]
    fn summaries() {
        assert_eq!(summarize(&[0xd9, 0xd9, 0xf7, 0xa1, 0x41]), "d9d9f7a141");
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(&[0u8; 31]), format!("{} ...", "00".repeat(30)));
        assert_eq!(summarize(b"{\"a\":1}"), "{\"a\":1}");
    }
}
