//! The client-go scenario shared by the proxy tests: create, get, list,
//! update, apply and delete through the proxy with client-go's CBOR headers,
//! each response compared with the upstream's state read directly as JSON.
#![allow(dead_code)]

use super::bodies::{assert_same, cbor, decode};
use super::harness::Harness;
use super::http::Conn;
use serde_json::{json, Value};

/// Dynamic client and generated clients with ClientsPreferCBOR.
pub const ACCEPTS: [&str; 2] = [
    "application/json;q=0.9,application/cbor;q=1",
    "application/cbor, */*",
];
const UA: &str = "scenario/v0.0.0 (linux/amd64) kubernetes/$Format";

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
