//! The CBOR and JSON body helpers of the end-to-end and codec tests, one set:
//! a JSON value as a CBOR request body, a CBOR response (or CBOR Sequence) as
//! JSON values, and value equality with numbers compared as float64.
#![allow(dead_code)]

use super::http::Resp;
use cborgate::codec::{cbor_to_json, json_to_cbor, CborToJsonOptions, JsonToCborOptions};
use serde_json::Value;

/// `v` as a CBOR body, encoded by cborgate's codec.
pub fn cbor(v: &Value) -> Vec<u8> {
    json_to_cbor(v.to_string().as_bytes(), JsonToCborOptions::default()).unwrap()
}

/// A self-described `application/cbor` response body as JSON (or fail the test
/// with its status and body).
pub fn decode(r: &Resp) -> Value {
    assert_eq!(
        r.header("content-type"),
        Some("application/cbor"),
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(
        r.body.get(..3),
        Some(&[0xd9, 0xd9, 0xf7][..]),
        "self-described CBOR, got {:?}",
        String::from_utf8_lossy(&r.body)
    );
    serde_json::from_slice(
        &cbor_to_json(&r.body, CborToJsonOptions::default()).expect("valid CBOR"),
    )
    .unwrap()
}

/// Every item of a CBOR Sequence (a watch body) as JSON.
pub fn decode_seq(bytes: &[u8]) -> Vec<Value> {
    let json = cbor_to_json(
        bytes,
        CborToJsonOptions {
            sequence: true,
            ..Default::default()
        },
    )
    .unwrap();
    json.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// Equal as values, numbers compared as float64: a legacy server prints -0.0
/// as `-0` and 2.0 as `2`, which arrive in CBOR as integers (docs/wire.md §2).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Fails the test unless `a` and `b` are the same value (see [`same`]).
pub fn assert_same(a: &Value, b: &Value, what: &str) {
    assert!(same(a, b), "{what}\n ours: {a}\n upstream: {b}");
}
