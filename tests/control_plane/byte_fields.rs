//! `[]byte` fields (docs/wire.md §2 and §3) through cborgate (`legacy`, in front of the
//! CBOR-off kube-apiserver) against the CBOR-enabled kube-apiserver itself:
//! - an untagged byte string in a `[]byte` field is read as base64 text: stored as the
//!   bytes that text stands for, or refused with the very same 400 `Status`;
//! - a LIST's `items[]` and a watch event's `object` carry the fields as tag 22 and the
//!   bytes, as the CBOR-enabled apiserver sends them.
//!
//! (A generic client's GET-then-PUT of one object is `findings::byte_fields_round_trip`.)

use crate::cbor::{self, Item};
use crate::cbor_client::{cbor_request, ACCEPT};
use crate::controllers::{create, namespace};
use crate::http::Client;
use crate::Suite;
use serde_json::json;

pub const CASES: [crate::Case; 2] = [
    (
        "untagged_byte_strings_are_base64_text",
        untagged_byte_strings,
    ),
    (
        "lists_and_watches_send_byte_fields_as_tag_22",
        lists_and_watches,
    ),
];

const CBOR: &str = "application/cbor";

/// The CBOR-enabled apiserver's admin client, the apiserver started if need be.
fn native(s: &mut Suite) -> Client {
    s.api_cbor();
    s.api_cbor.as_ref().unwrap().admin(&s.pki)
}

fn configmap(name: &str, binary: Item) -> Item {
    Item::map(&[
        ("apiVersion", Item::str("v1")),
        ("kind", Item::str("ConfigMap")),
        ("metadata", Item::map(&[("name", Item::str(name))])),
        ("binaryData", Item::map(&[("b", binary)])),
    ])
}

/// The base64 text `AAH//g==` untagged is stored as `00 01 ff fe` through cborgate as by the
/// CBOR-enabled apiserver; text Go's decoder refuses gets the same 400 from both.
fn untagged_byte_strings(s: &mut Suite) {
    let ns = "cp-bytes-in";
    let native = native(s);
    for c in [&s.direct, &native] {
        namespace(c, ns);
    }
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    for (writer, reader) in [(&s.through, &s.direct), (&native, &native)] {
        let body = cbor::body(&configmap("text", Item::Bytes(b"AAH//g==".to_vec())));
        let (st, answer) = cbor_request(writer, "POST", &path, Some(CBOR), Some(&body));
        assert_eq!(st, 201, "{answer:?}");
        let stored = reader.get_json(&format!("{path}/text"));
        assert_eq!(stored["binaryData"]["b"], "AAH//g==", "00 01 ff fe");
    }
    for bad in [&b"hello"[..], b"\x00\x01\xff\xfe", b"AAH//g", b"AAH//g==="] {
        let body = cbor::body(&configmap("bad", Item::Bytes(bad.to_vec())));
        let (ours_st, ours) = cbor_request(&s.through, "POST", &path, Some(CBOR), Some(&body));
        let (theirs_st, theirs) = cbor_request(&native, "POST", &path, Some(CBOR), Some(&body));
        assert_eq!(
            (ours_st, theirs_st),
            (400, 400),
            "{bad:?}: {ours:?} {theirs:?}"
        );
        for field in ["kind", "status", "reason", "message"] {
            let (o, t) = (ours.get(field), theirs.get(field));
            assert_eq!(
                o.and_then(Item::text),
                t.and_then(Item::text),
                "{bad:?} {field}: cborgate (left), the CBOR-enabled apiserver (right)"
            );
        }
        assert_eq!(ours.get("code"), Some(&Item::Uint(400)));
    }
}

/// A ConfigMap with `binaryData` in a LIST and in a watch, through cborgate and from the
/// CBOR-enabled apiserver: the same tag 22 and bytes.
fn lists_and_watches(s: &mut Suite) {
    let ns = "cp-bytes-lists";
    let native = native(s);
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    for c in [&s.direct, &native] {
        namespace(c, ns);
        create(
            c,
            &path,
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bin"},
                    "binaryData":{"b":"AAEC//4=","e":""}}),
        );
    }
    // Keys are byte strings, as Kubernetes writes them; the order is sorted below.
    let tagged = |b: &[u8]| Item::Tag(22, Box::new(Item::Bytes(b.to_vec())));
    let want = Some(Item::Map(vec![
        (Item::Bytes(b"b".to_vec()), tagged(&[0, 1, 2, 0xff, 0xfe])),
        (Item::Bytes(b"e".to_vec()), tagged(&[])),
    ]));
    let sorted = |i: Option<&Item>| match i {
        Some(Item::Map(m)) => {
            let mut m = m.clone();
            m.sort_by(|(a, _), (b, _)| a.text().cmp(&b.text()));
            Some(Item::Map(m))
        }
        other => other.cloned(),
    };
    for (who, c) in [
        ("cborgate", &s.through),
        ("the CBOR-enabled apiserver", &native),
    ] {
        let (st, list) = cbor_request(c, "GET", &path, None, None);
        assert_eq!(st, 200);
        let Some(Item::Array(items)) = list.get("items") else {
            panic!("{who}: {list:?}");
        };
        let binary = items.first().and_then(|i| i.get("binaryData"));
        assert_eq!(sorted(binary), want, "{who}: LIST");
        let watch = format!("{path}?watch=true&timeoutSeconds=1");
        let r = c.request("GET", &watch, &[("Accept", ACCEPT)], None);
        assert_eq!(r.status, 200, "{who}: watch");
        let (events, _) = cbor::complete_items(&r.body);
        let object = events.first().and_then(|e| e.get("object"));
        let binary = object.and_then(|o| o.get("binaryData"));
        assert_eq!(sorted(binary), want, "{who}: watch {events:?}");
    }
}
