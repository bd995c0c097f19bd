//! Watch streams, structured: the input builds several watch events (a type,
//! an arbitrary JSON object, sometimes extra keys, varied whitespace between
//! events). They go JSON → CBOR (watch) → JSON (sequence), each leg fed in
//! pieces, and must come back as the same number of events, one per line,
//! each equal to the event that went in (numbers compared as float64 where
//! either side is not an integer).
#![no_main]

#[path = "common.rs"]
mod common;

use arbitrary::{Result, Unstructured};
use cborgate::codec::{CborToJsonOptions, JsonToCborOptions, StringMode};
use common::*;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Number, Value};

const TYPES: [&str; 5] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"];
const KEYS: [&str; 8] = [
    "kind",
    "apiVersion",
    "metadata",
    "name",
    "object",
    "type",
    "resourceVersion",
    "data",
];
const WS: [&str; 6] = ["\n", "", " ", "\r\n", "\t\n ", "\n\n"];

fn string(u: &mut Unstructured) -> Result<String> {
    if u.ratio(1, 2)? {
        Ok(KEYS[u.choose_index(KEYS.len())?].to_string())
    } else {
        u.arbitrary()
    }
}

fn value(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let max = if depth >= 6 { 5 } else { 7 };
    Ok(match u.int_in_range(0..=max)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => {
            let f: f64 = u.arbitrary()?;
            Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        4 | 5 => Value::String(string(u)?),
        6 => {
            let n = u.int_in_range(0..=4)?;
            let mut a = Vec::new();
            for _ in 0..n {
                a.push(value(u, depth + 1)?);
            }
            Value::Array(a)
        }
        _ => Value::Object(object(u, depth + 1)?),
    })
}

fn object(u: &mut Unstructured, depth: u32) -> Result<Map<String, Value>> {
    let n = u.int_in_range(0..=5)?;
    let mut m = Map::new();
    for _ in 0..n {
        let k = string(u)?;
        let v = value(u, depth)?;
        m.insert(k, v);
    }
    Ok(m)
}

fn event(u: &mut Unstructured) -> Result<Value> {
    let mut m = Map::new();
    m.insert(
        "type".into(),
        Value::String(TYPES[u.choose_index(TYPES.len())?].into()),
    );
    m.insert("object".into(), Value::Object(object(u, 1)?));
    if u.ratio(1, 4)? {
        m.insert(string(u)?, value(u, 1)?);
    }
    Ok(Value::Object(m))
}

/// Equal as Kubernetes would see them: numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok((flags, sel1, sel2)) = u.arbitrary::<(u8, u8, u8)>() else {
        return;
    };
    let mut events = Vec::new();
    let mut json = Vec::new();
    let n = u.int_in_range(1..=8).unwrap_or(1);
    for _ in 0..n {
        let Ok(ev) = event(&mut u) else { break };
        json.extend_from_slice(WS[u.choose_index(WS.len()).unwrap_or(0)].as_bytes());
        json.extend_from_slice(&serde_json::to_vec(&ev).unwrap());
        events.push(ev);
    }
    json.extend_from_slice(WS[(flags >> 5) as usize % WS.len()].as_bytes());

    let eopts = JsonToCborOptions {
        watch: true,
        window: WINDOWS[(flags & 3) as usize],
        dedupe_keys: flags & 4 == 0,
        strings: if flags & 8 != 0 {
            StringMode::Text
        } else {
            StringMode::Bytes
        },
        ..JsonToCborOptions::default()
    };
    let (cbor, r, docs) = json_to_cbor_pieces(eopts, &chunks(&json, sel1));
    if let Err(e) = r {
        panic!(
            "JSON → CBOR failed: {e}: {}",
            String::from_utf8_lossy(&json)
        );
    }
    assert_eq!(docs, events.len() as u64);

    let dopts = CborToJsonOptions {
        sequence: true,
        dedupe_keys: flags & 16 == 0,
        input_len: Some(cbor.len() as u64),
        ..CborToJsonOptions::default()
    };
    let (back, r, docs) = cbor_to_json_pieces(dopts, &chunks(&cbor, sel2));
    if let Err(e) = r {
        panic!("CBOR → JSON failed: {e}: {:02x?}", cbor);
    }
    assert_eq!(docs, events.len() as u64);
    let lines: Vec<&[u8]> = back.split(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), events.len() + 1, "one line per event");
    assert!(lines[events.len()].is_empty());
    for (line, ev) in lines.iter().zip(&events) {
        let got: Value = serde_json::from_slice(line).expect("event line is JSON");
        assert!(same(&got, ev), "event changed:\n in: {ev}\nout: {got}");
    }
});
