//! The client-go scenario shared by the proxy tests: create, get, list,
//! update, apply and delete through the proxy with client-go's CBOR headers,
//! each response compared with the upstream's state read directly as JSON.
#![allow(dead_code)]

use super::harness::Harness;
use super::http::{Conn, Resp};
use cborgate::codec::{cbor_to_json, json_to_cbor, CborToJsonOptions, JsonToCborOptions};
use serde_json::{json, Value};

/// Dynamic client and generated clients with ClientsPreferCBOR.
pub const ACCEPTS: [&str; 2] = [
    "application/json;q=0.9,application/cbor;q=1",
    "application/cbor, */*",
];
const UA: &str = "scenario/v0.0.0 (linux/amd64) kubernetes/$Format";

pub fn cbor(v: &Value) -> Vec<u8> {
    json_to_cbor(v.to_string().as_bytes(), JsonToCborOptions::default()).unwrap()
}

pub fn decode(r: &Resp) -> Value {
    assert_eq!(
        r.header("content-type"),
        Some("application/cbor"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(&r.body[..3], &[0xd9, 0xd9, 0xf7]);
    serde_json::from_slice(&cbor_to_json(&r.body, CborToJsonOptions::default()).unwrap()).unwrap()
}

/// Equal as values, numbers compared as float64: a legacy server prints -0.0
/// as `-0` and 2.0 as `2`, which arrive in CBOR as integers (WIRE.md §2).
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

/// The object as a JSON client reads it straight from the upstream.
pub fn direct(h: &Harness, path: &str) -> (u16, Value) {
    let r = super::http::once(
        h.upstream,
        "GET",
        path,
        &[("Accept", "application/json")],
        None,
    );
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

pub fn run(
    h: &Harness,
    c: &mut Conn,
    accept: &str,
    base: &str,
    make: &dyn Fn(&str) -> Value,
    name: &str,
) {
    let hdr = |ct: Option<&'static str>| {
        let mut v = vec![("Accept", accept), ("User-Agent", UA)];
        if let Some(ct) = ct {
            v.push(("Content-Type", ct));
        }
        v
    };
    let item = format!("{base}/{name}");
    // create
    let r = c.request(
        "POST",
        base,
        &hdr(Some("application/cbor")),
        Some(&cbor(&make(name))),
    );
    assert_eq!(
        r.status,
        201,
        "create {base}: {}",
        String::from_utf8_lossy(&r.body)
    );
    let created = decode(&r);
    assert_same(
        &created,
        &direct(h, &item).1,
        "create result = stored object",
    );
    // get
    let r = c.request("GET", &item, &hdr(None), None);
    assert_eq!(r.status, 200);
    assert_same(&decode(&r), &direct(h, &item).1, "get");
    // list
    let r = c.request("GET", base, &hdr(None), None);
    assert_eq!(r.status, 200);
    let list = decode(&r);
    let (_, direct_list) = direct(h, base);
    assert_same(&list["items"], &direct_list["items"], "list");
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["metadata"]["name"] == name));
    // update
    let mut obj = created.clone();
    obj["metadata"]["labels"] = json!({"updated": "yes"});
    let r = c.request(
        "PUT",
        &item,
        &hdr(Some("application/cbor")),
        Some(&cbor(&obj)),
    );
    assert_eq!(
        r.status,
        200,
        "update: {}",
        String::from_utf8_lossy(&r.body)
    );
    let updated = decode(&r);
    assert_eq!(updated["metadata"]["labels"]["updated"], "yes");
    assert_same(&updated, &direct(h, &item).1, "update");
    // apply, as client-go sends it: apply-patch+cbor without the 55799 tag
    let mut patch = make(name);
    patch["metadata"]["annotations"] = json!({"applied": "true"});
    let mut body = cbor(&patch);
    body.drain(..3);
    let r = c.request(
        "PATCH",
        &format!("{item}?fieldManager=scenario&force=true"),
        &hdr(Some("application/apply-patch+cbor")),
        Some(&body),
    );
    assert_eq!(r.status, 200, "apply: {}", String::from_utf8_lossy(&r.body));
    let applied = decode(&r);
    assert_eq!(applied["metadata"]["annotations"]["applied"], "true");
    assert_same(&applied, &direct(h, &item).1, "apply");
    // delete
    let r = c.request("DELETE", &item, &hdr(None), None);
    assert_eq!(
        r.status,
        200,
        "delete: {}",
        String::from_utf8_lossy(&r.body)
    );
    decode(&r);
    assert_eq!(direct(h, &item).0, 404, "deleted upstream");
    // And a 404 through the proxy is a CBOR Status.
    let r = c.request("GET", &item, &hdr(None), None);
    assert_eq!(r.status, 404);
    assert_eq!(decode(&r)["reason"], "NotFound");
}
