//! The CBOR-enabled stand-in against a real CBOR-enabled kube-apiserver 1.36.2
//! (`tests/data/corpus/native-1.36`): a CRD group's group-version discovery served
//! in JSON only, and the errors the server's filters and router write in JSON for a
//! CBOR client (405 for HEAD and OPTIONS, the router's 404, 401 and 403 from the
//! authentication and authorization filters). Status bodies are
//! compared byte for byte with the recorded ones; the legacy stand-in is checked to
//! answer as before.

use serde_json::Value;

use super::*;
use crate::CborMode;

const ACCEPT_CBOR: (&str, &str) = ("Accept", "application/cbor");
const CM_A: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
/// The CRD group's group version.
const CR_GV: &str = "/apis/corpus.example.com/v1";
/// A resource no route serves.
const MISSING: &str = "/api/v1/namespaces/demo/nosuchthings/x";

/// A recorded answer: status, Content-Type, Content-Length and the body bytes.
fn native(case: &str) -> (u16, String, usize, Vec<u8>) {
    let head = String::from_utf8(corpus(&format!("native-1.36/{case}.head"))).unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{case}.head: no status"));
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{case}.head: no {name}"))
            .trim()
            .to_string()
    };
    let ct = header("Content-Type:");
    let len = header("Content-Length:").parse().unwrap();
    (status, ct, len, corpus(&format!("native-1.36/{case}.body")))
}

/// Checks an answer against a recorded case, the body byte for byte (a HEAD answer
/// has none; its Content-Length is the recorded one).
fn check_native(case: &str, r: &Resp) {
    let (status, ct, len, body) = native(case);
    assert_eq!(r.status, status, "{case}: {}", r.text());
    assert_apiserver_headers(r, &ct);
    assert_eq!(
        r.header("content-length"),
        Some(len.to_string().as_str()),
        "{case}"
    );
    assert_eq!(r.text(), String::from_utf8_lossy(&body), "{case}");
}

async fn start_mode(cbor: CborMode) -> StandIn {
    start_with(StandInOptions {
        cbor,
        ..Default::default()
    })
    .await
}

/// The CRD group's group version is JSON only on a CBOR-enabled server
/// (`disc-apis-cr-v1`), whether every group serves CBOR or only that one; built-in
/// group versions keep answering CBOR (`disc-apis-apps-v1`).
#[tokio::test]
async fn crd_group_version_discovery_is_json_only() {
    for mode in [
        CborMode::On,
        CborMode::Mixed {
            cbor_groups: vec!["corpus.example.com".into()],
        },
    ] {
        let s = start_mode(mode.clone()).await;
        let r = call(&s, "GET", CR_GV, &[ACCEPT_CBOR], None).await;
        check_native("disc-apis-cr-v1", &r);
        let json = call(&s, "GET", CR_GV, &[], None).await;
        let r = call(
            &s,
            "GET",
            CR_GV,
            &[("Accept", "application/cbor, */*")],
            None,
        )
        .await;
        assert_eq!(r.status, 200, "{mode:?}");
        assert_apiserver_headers(&r, "application/json");
        assert_eq!(r.json(), json.json(), "{mode:?}");
        assert_eq!(r.json()["kind"], "APIResourceList");
        if mode == CborMode::On {
            let builtin = "/apis/apiextensions.k8s.io/v1";
            let r = call(&s, "GET", builtin, &[ACCEPT_CBOR], None).await;
            assert_eq!(r.header("content-type"), Some("application/cbor"));
        }
    }
}

/// HEAD and OPTIONS on a resource: a 405 in pretty JSON for a CBOR client
/// (`head-cm`, `options`), in either CBOR-enabled mode.
#[tokio::test]
async fn head_and_options_are_405_in_json() {
    for mode in [
        CborMode::On,
        CborMode::Mixed {
            cbor_groups: vec!["".into()],
        },
    ] {
        let s = start_mode(mode).await;
        for (case, method) in [("head-cm", "HEAD"), ("options", "OPTIONS")] {
            let r = call(&s, method, CM_A, &[ACCEPT_CBOR], None).await;
            if method == "HEAD" {
                assert!(r.body.is_empty());
                let (_, _, len, _) = native(case);
                assert_eq!(r.status, 405);
                assert_apiserver_headers(&r, "application/json");
                assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
            } else {
                check_native(case, &r);
            }
        }
    }
}

/// The router's 404 for a resource it does not know, watched or not
/// (`get-missing-resource`, `watch-missing-resource`).
#[tokio::test]
async fn unknown_resource_is_404_in_json() {
    for mode in [
        CborMode::On,
        CborMode::Mixed {
            cbor_groups: vec!["".into(), "corpus.example.com".into()],
        },
    ] {
        let s = start_mode(mode).await;
        for (case, path) in [
            ("get-missing-resource", MISSING),
            (
                "watch-missing-resource",
                "/api/v1/namespaces/demo/nosuchthings?watch=1",
            ),
            (
                "get-missing-resource",
                "/apis/corpus.example.com/v1/namespaces/demo/nosuchthings/x",
            ),
        ] {
            let r = call(&s, "GET", path, &[ACCEPT_CBOR], None).await;
            check_native(case, &r);
        }
    }
}

/// The legacy stand-in answers these as it always did: the CRD group version is the
/// same 406, HEAD and OPTIONS are go-restful's 405, and the 404 is the same.
#[tokio::test]
async fn legacy_answers_are_unchanged() {
    let s = start_mode(CborMode::Off).await;
    let r = call(&s, "GET", CR_GV, &[ACCEPT_CBOR], None).await;
    check_native("disc-apis-cr-v1", &r);
    let r = call(&s, "OPTIONS", CM_A, &[ACCEPT_CBOR], None).await;
    assert_eq!(r.status, 405);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["message"], "405: Method Not Allowed");
    let r = call(&s, "GET", MISSING, &[ACCEPT_CBOR], None).await;
    check_native("get-missing-resource", &r);
}

/// The authentication and authorization filters answer before any route, in JSON, CBOR
/// enabled or not (native-1.36 `unauth`: a bearer token the server does not know;
/// `impersonate`: a user allowed nothing).
#[tokio::test]
async fn authentication_and_authorization_errors_are_json() {
    for mode in [CborMode::On, CborMode::Off] {
        let s = start_mode(mode).await;
        let r = call(
            &s,
            "GET",
            "/api/v1/namespaces/wire/configmaps/cm-a",
            &[ACCEPT_CBOR, ("Authorization", "Bearer wrong")],
            None,
        )
        .await;
        check_native("unauth", &r);
        let r = call(
            &s,
            "GET",
            "/api/v1/namespaces/wire/configmaps/cm-b",
            &[ACCEPT_CBOR, ("Impersonate-User", "bob")],
            None,
        )
        .await;
        check_native("impersonate", &r);
        // Any other token is taken; impersonating system:admin is allowed everything.
        for h in [
            ("Authorization", "Bearer right"),
            ("Impersonate-User", "system:admin"),
        ] {
            let r = call(&s, "GET", CM_A, &[h], None).await;
            assert_eq!(r.status, 200, "{h:?}");
        }
    }
}
