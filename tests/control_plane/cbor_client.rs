//! A CBOR client of the suite's own next to the controllers, speaking as
//! client-go's dynamic client does with `ClientsPreferCBOR` (the headers of
//! `tests/support/scenario.rs`: CBOR bodies, CBOR preferred over JSON, server-side
//! apply as `application/apply-patch+cbor` without the self-described tag):
//! create, update, apply, list and watch ConfigMaps and custom resources through
//! cborgate, each answer compared with the object read directly from the
//! apiserver as JSON.

use crate::cbor::{self, Item};
use crate::controllers::{namespace, widget_crd};
use crate::http::Client;
use crate::Suite;
use serde_json::Value;

pub const CASES: [crate::Case; 2] = [
    ("cbor_client_configmaps", configmaps),
    ("cbor_client_custom_resources", custom_resources),
];

/// client-go's dynamic client with both CBOR gates on.
pub const ACCEPT: &str = "application/json;q=0.9,application/cbor;q=1";
pub const UA: &str = "cp-cbor-client/v1.36.2 (linux/amd64) kubernetes/$Format";

/// A CBOR request through cborgate: the status and the decoded CBOR answer
/// (which must be self-described CBOR).
pub fn cbor_request(
    c: &Client,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: Option<&[u8]>,
) -> (u16, Item) {
    let mut h = vec![("Accept", ACCEPT), ("User-Agent", UA)];
    if let Some(ct) = ct {
        h.push(("Content-Type", ct));
    }
    let r = c.request(method, path, &h, body);
    assert_eq!(
        r.header("content-type"),
        Some("application/cbor"),
        "{method} {path}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let item = cbor::decode(&r.body);
    assert!(
        matches!(item, Item::Tag(cbor::SELF_DESCRIBED, _)),
        "not self-described: {item:?}"
    );
    (r.status, item)
}

fn configmap(ns: &str, name: &str, v: &str) -> Item {
    Item::map(&[
        ("apiVersion", Item::str("v1")),
        ("kind", Item::str("ConfigMap")),
        (
            "metadata",
            Item::map(&[("name", Item::str(name)), ("namespace", Item::str(ns))]),
        ),
        ("data", Item::map(&[("key", Item::str(v))])),
    ])
}

fn widget(ns: &str, name: &str, size: u64) -> Item {
    Item::map(&[
        ("apiVersion", Item::str("cp.cborgate.test/v1")),
        ("kind", Item::str("Widget")),
        (
            "metadata",
            Item::map(&[("name", Item::str(name)), ("namespace", Item::str(ns))]),
        ),
        (
            "spec",
            Item::map(&[
                ("size", Item::Uint(size)),
                ("ratio", Item::Float(0.5)),
                (
                    "tags",
                    Item::Array(vec![Item::str("a"), Item::Bool(true), Item::Null]),
                ),
            ]),
        ),
    ])
}

/// Create, update, apply, list, watch and delete `make`'s objects at `base`
/// through cborgate (`c`), in CBOR; `read` reads the value `make` set back from
/// the object as `d` (the apiserver, directly) gives it in JSON.
fn scenario(
    c: &Client,
    d: &Client,
    base: &str,
    make: &dyn Fn(&str, u64) -> Item,
    read: &dyn Fn(&Value) -> String,
) {
    let direct = |path: &str| d.get_json(path);
    // create
    let (st, created) = cbor_request(
        c,
        "POST",
        base,
        Some("application/cbor"),
        Some(&cbor::body(&make("one", 1))),
    );
    assert_eq!(st, 201, "create: {created:?}");
    let item = format!("{base}/one");
    assert_eq!(read(&direct(&item)), "1");
    // get, then update what the GET returned (a generic client's round trip)
    let (st, mut got) = cbor_request(c, "GET", &item, None, None);
    assert_eq!(st, 200);
    let Item::Tag(_, inner) = &mut got else {
        unreachable!()
    };
    let updated = make("one", 2);
    for k in ["data", "spec"] {
        if let Some(v) = updated.get(k) {
            inner.set(k, v.clone());
        }
    }
    let (st, _) = cbor_request(
        c,
        "PUT",
        &item,
        Some("application/cbor"),
        Some(&cbor::encode(&got)),
    );
    assert_eq!(st, 200, "update");
    assert_eq!(read(&direct(&item)), "2");
    // server-side apply, as client-go sends it: no self-described tag
    let (st, applied) = cbor_request(
        c,
        "PATCH",
        &format!("{item}?fieldManager=cp-cbor-client&force=true"),
        Some("application/apply-patch+cbor"),
        Some(&cbor::encode(&make("one", 3))),
    );
    assert_eq!(st, 200, "apply: {applied:?}");
    assert_eq!(read(&direct(&item)), "3");
    let managers = direct(&item)["metadata"]["managedFields"].to_string();
    assert!(
        managers.contains("cp-cbor-client"),
        "apply's field manager: {managers}"
    );
    // list
    let (st, list) = cbor_request(c, "GET", base, None, None);
    assert_eq!(st, 200);
    let Some(Item::Array(items)) = list.get("items") else {
        panic!("list: {list:?}")
    };
    let names: Vec<&str> = items
        .iter()
        .filter_map(|i| i.get("metadata")?.get("name")?.text())
        .collect();
    // (a namespace's ConfigMaps include the controller manager's kube-root-ca.crt)
    assert!(
        names.contains(&"one") && !names.contains(&"two"),
        "{names:?}"
    );
    let rv = list
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Item::text)
        .unwrap()
        .to_string();
    // watch from that list: an object created meanwhile arrives as an ADDED event
    let mut w = c.conn();
    c.send(
        &mut w,
        "GET",
        &format!(
            "{base}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=60"
        ),
        &[("Accept", ACCEPT), ("User-Agent", UA)],
        None,
    );
    let head = w.head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/cbor-seq"));
    let (st, _) = cbor_request(
        c,
        "POST",
        base,
        Some("application/cbor"),
        Some(&cbor::body(&make("two", 1))),
    );
    assert_eq!(st, 201);
    let mut buf = Vec::new();
    let added = loop {
        let chunk = w
            .try_chunk()
            .expect("watch stream")
            .expect("watch ended early");
        buf.extend(chunk);
        let (events, used) = cbor::complete_items(&buf);
        buf.drain(..used);
        if let Some(e) = events.into_iter().find(|e| {
            e.get("type").and_then(Item::text) == Some("ADDED")
                && e.get("object")
                    .and_then(|o| o.get("metadata"))
                    .and_then(|m| m.get("name"))
                    .and_then(Item::text)
                    == Some("two")
        }) {
            break e;
        }
    };
    assert!(added.get("object").and_then(|o| o.get("kind")).is_some());
    // delete
    for name in ["one", "two"] {
        let (st, _) = cbor_request(c, "DELETE", &format!("{base}/{name}"), None, None);
        assert_eq!(st, 200, "delete {name}");
    }
}

/// The scenario on ConfigMaps in `ns` (which exists), through `c`, checked
/// against `d`.
pub fn configmap_scenario(c: &Client, d: &Client, ns: &str) {
    scenario(
        c,
        d,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &|name, v| configmap(ns, name, &v.to_string()),
        &|j| j["data"]["key"].as_str().unwrap().to_string(),
    );
}

fn configmaps(s: &mut Suite) {
    namespace(&s.through, "cp-cbor");
    configmap_scenario(&s.through, &s.direct, "cp-cbor");
}

fn custom_resources(s: &mut Suite) {
    widget_crd(&s.through);
    namespace(&s.through, "cp-cbor-cr");
    scenario(
        &s.through,
        &s.direct,
        "/apis/cp.cborgate.test/v1/namespaces/cp-cbor-cr/widgets",
        &|name, v| widget("cp-cbor-cr", name, v),
        &|j| j["spec"]["size"].to_string(),
    );
}
