//! End-to-end tests of the stand-in over real sockets with a tiny raw HTTP/1.1 client:
//! the recorded `a-*` exchanges byte for byte, CRUD/404/409 flows, Table and
//! PartialObjectMetadata shapes, watches, keep-alive, chunked bodies, upgrades and
//! garbage input. The recorded files in `tests/data/corpus` are compared too; the key
//! recorded bodies are also embedded here. The CBOR modes
//! (`b-*` recordings) are tested in the child module `tests_cbor.rs`, and against the
//! native 1.36.2 recordings (`native-1.36`) in `tests_native.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::client::{request_bytes, AsyncConn, Head, Resp};

use super::{StandIn, StandInOptions};

#[path = "tests_cbor.rs"]
mod cbor_mode;
#[path = "tests_native.rs"]
mod native;

const UA: &str = "harness-verify/1.0";

const NA_OBJECT: &str = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"406: Not Acceptable\\n\\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf\",\n  \"reason\": \"NotAcceptable\",\n  \"details\": {},\n  \"code\": 406\n}";
const NA_LIST: &str = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"406: Not Acceptable\\n\\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch\",\n  \"reason\": \"NotAcceptable\",\n  \"details\": {},\n  \"code\": 406\n}";
const NA_APIS: &str = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf\",\n  \"reason\": \"NotAcceptable\",\n  \"code\": 406\n}";
const NA_VERSION: &str = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"406: Not Acceptable\\n\\nAvailable representations: application/json\",\n  \"reason\": \"NotAcceptable\",\n  \"details\": {},\n  \"code\": 406\n}";
const UMT_BODY: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf\",\"reason\":\"UnsupportedMediaType\",\"code\":415}\n";
const UMT_APPLY: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"415: Unsupported Media Type\",\"reason\":\"UnsupportedMediaType\",\"details\":{},\"code\":415}\n";
const NOT_FOUND_CM: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"does-not-exist\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"does-not-exist\",\"kind\":\"configmaps\"},\"code\":404}\n";
const NOT_FOUND_CR: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"gadgets.corpus.example.com \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"group\":\"corpus.example.com\",\"kind\":\"gadgets\"},\"code\":404}\n";
/// The recorded `a-get-cbor-json-q09` body.
const CM_BASIC: &str = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm-basic\",\"namespace\":\"verify\",\"uid\":\"24748e7e-7432-435e-b8a0-94f9b1a0b29b\",\"resourceVersion\":\"681\",\"creationTimestamp\":\"2026-11-21T12:01:11Z\",\"labels\":{\"app\":\"harness\"},\"managedFields\":[{\"manager\":\"curl\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-11-21T12:01:11Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:binaryData\":{\".\":{},\"f:bin\":{}},\"f:data\":{\".\":{},\"f:empty\":{},\"f:k\":{},\"f:unicode\":{}},\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}}}}]},\"data\":{\"empty\":\"\",\"k\":\"v\",\"unicode\":\"héllo ☃\"},\"binaryData\":{\"bin\":\"AAEC/w==\"}}\n";
/// Some CBOR, as the recordings sent (`cm-post-ns.cbor` is not needed byte for byte).
const CBOR_BODY: &[u8] =
    b"\xd9\xd9\xf7\xa2\x44kind\x49ConfigMap\x48metadata\xa1\x44name\x4ccm-cbor-post";

/// A recorded file from the repository's `tests/data/corpus`, beside this crate's
/// directory (always in the repository: a missing file is a test failure, never a
/// silent skip).
fn corpus(rel: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/corpus")
        .join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The stand-in's tests speak through the shared client, reads bounded by 10 s.
type Client = AsyncConn;

async fn connect(addr: SocketAddr) -> Client {
    AsyncConn::connect(addr)
        .await
        .expect("connect")
        .with_read_timeout(Duration::from_secs(10))
}

/// A request as the recording harness sent it: `Host: standin`, and its
/// User-Agent unless `headers` name one (the stand-in keeps it in managedFields).
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Vec<u8> {
    let mut all = vec![("Host", "standin")];
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
    {
        all.push(("User-Agent", UA));
    }
    all.extend_from_slice(headers);
    request_bytes(method, path, &all, body)
}

/// One request and its whole response on `c`.
async fn call_on(
    c: &mut Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    c.write(&request(method, path, headers, body))
        .await
        .expect("write");
    c.response_to(method).await.expect("a response")
}

async fn start() -> StandIn {
    start_with(StandInOptions::default()).await
}

async fn start_with(opts: StandInOptions) -> StandIn {
    StandIn::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .expect("start")
}

async fn call(
    s: &StandIn,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    call_on(&mut connect(s.addr()).await, method, path, headers, body).await
}

const JSON_CT: (&str, &str) = ("Content-Type", "application/json");

async fn create_ns(s: &StandIn, ns: &str) {
    let body = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{{\"name\":\"{ns}\"}}}}"
    );
    let r = call(
        s,
        "POST",
        "/api/v1/namespaces",
        &[JSON_CT],
        Some(body.as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
}

/// Creates `cm-basic` in `verify` the way the recording harness did (with curl).
async fn create_cm_basic(s: &StandIn) -> Value {
    create_ns(s, "verify").await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-basic","labels":{"app":"harness"}},"data":{"k":"v","empty":"","unicode":"héllo ☃"},"binaryData":{"bin":"AAEC/w=="}}"#;
    let r = call(
        s,
        "POST",
        "/api/v1/namespaces/verify/configmaps",
        &[
            JSON_CT,
            ("User-Agent", "curl/8.5.0"),
            ("Accept", "application/json"),
        ],
        Some(body.as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

fn assert_apiserver_headers(r: &Resp, content_type: &str) {
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    let last = if r.header("transfer-encoding").is_some() {
        "Transfer-Encoding"
    } else {
        "Content-Length"
    };
    assert_eq!(
        names,
        vec![
            "Audit-Id",
            "Cache-Control",
            "Content-Type",
            "X-Kubernetes-Pf-Flowschema-Uid",
            "X-Kubernetes-Pf-Prioritylevel-Uid",
            "Date",
            last
        ]
    );
    assert_eq!(r.header("cache-control"), Some("no-cache, private"));
    assert_eq!(r.header("content-type"), Some(content_type));
    let audit = r.header("audit-id").unwrap();
    assert_eq!(audit.len(), 36);
    assert!(r.header("date").unwrap().ends_with(" GMT"));
}

#[tokio::test]
async fn recorded_negotiation_errors_are_byte_identical() {
    let s = start().await;
    create_cm_basic(&s).await;
    let cm = "/api/v1/namespaces/verify/configmaps";
    let cbor = ("Accept", "application/cbor");
    // (recording, method, path, headers, body, status, body wanted)
    type Case<'a> = (
        &'a str,
        &'a str,
        String,
        Vec<(&'a str, &'a str)>,
        Option<&'a [u8]>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "a-post-cbor",
            "POST",
            cm.into(),
            vec![("Content-Type", "application/cbor")],
            Some(CBOR_BODY),
            415,
            UMT_BODY,
        ),
        (
            "a-post-cbor-acc-json",
            "POST",
            cm.into(),
            vec![
                ("Accept", "application/json"),
                ("Content-Type", "application/cbor"),
            ],
            Some(CBOR_BODY),
            415,
            UMT_BODY,
        ),
        (
            "a-post-cbor-acc-cbor",
            "POST",
            cm.into(),
            vec![cbor, ("Content-Type", "application/cbor")],
            Some(CBOR_BODY),
            406,
            NA_OBJECT,
        ),
        (
            "a-get-cbor",
            "GET",
            format!("{cm}/cm-basic"),
            vec![cbor],
            None,
            406,
            NA_OBJECT,
        ),
        (
            "a-list-cbor",
            "GET",
            cm.into(),
            vec![cbor],
            None,
            406,
            NA_LIST,
        ),
        (
            "a-watch-cbor",
            "GET",
            format!("{cm}?watch=true&timeoutSeconds=1"),
            vec![cbor],
            None,
            406,
            NA_LIST,
        ),
        (
            "a-watch-cborseq",
            "GET",
            format!("{cm}?watch=true&timeoutSeconds=1"),
            vec![("Accept", "application/cbor-seq")],
            None,
            406,
            NA_LIST,
        ),
        (
            "a-table-cbor",
            "GET",
            cm.into(),
            vec![("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1")],
            None,
            406,
            NA_LIST,
        ),
        (
            "a-missing-cbor",
            "GET",
            format!("{cm}/does-not-exist"),
            vec![cbor],
            None,
            406,
            NA_OBJECT,
        ),
        (
            "a-missing-cbor-json",
            "GET",
            format!("{cm}/does-not-exist"),
            vec![("Accept", "application/cbor, application/json;q=0.9")],
            None,
            404,
            NOT_FOUND_CM,
        ),
        (
            "a-api-cbor",
            "GET",
            "/api".into(),
            vec![cbor],
            None,
            406,
            NA_OBJECT,
        ),
        (
            "a-apis-cbor",
            "GET",
            "/apis".into(),
            vec![cbor],
            None,
            406,
            NA_APIS,
        ),
        (
            "a-version-cbor",
            "GET",
            "/version".into(),
            vec![cbor],
            None,
            406,
            NA_VERSION,
        ),
        (
            "a-apply-cbor",
            "PATCH",
            format!("{cm}/cm-cbor-post?fieldManager=verify"),
            vec![
                ("Accept", "application/json"),
                ("Content-Type", "application/apply-patch+cbor"),
            ],
            Some(CBOR_BODY),
            415,
            UMT_APPLY,
        ),
    ];
    for (name, method, path, headers, body, status, want) in cases {
        let r = call(&s, method, &path, &headers, body).await;
        assert_eq!(r.status, status, "{name}: {}", r.text());
        assert_apiserver_headers(&r, "application/json");
        assert_eq!(r.text(), want, "{name}");
        let recorded = corpus(&format!("exchanges/{name}.body"));
        assert_eq!(r.body, recorded, "{name} differs from the recording");
    }
    // The CR's own 404 (corpus status-404-cr).
    let r = call(
        &s,
        "GET",
        "/apis/corpus.example.com/v1/namespaces/corpus/gadgets/nope",
        &[],
        None,
    )
    .await;
    assert_eq!((r.status, r.text().as_str()), (404, NOT_FOUND_CR));
    assert_eq!(r.body, corpus("objects/status-404-cr/a.json"));
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/corpus/configmaps/does-not-exist",
        &[],
        None,
    )
    .await;
    assert_eq!(r.body, corpus("objects/status-404/a.json"));
}

#[tokio::test]
async fn recorded_objects_have_the_recorded_shape() {
    let s = start().await;
    let created = create_cm_basic(&s).await;
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/verify/configmaps/cm-basic",
        &[("Accept", "application/cbor, application/json;q=0.9")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_apiserver_headers(&r, "application/json");
    // Only the server-assigned values may differ from the recording.
    let meta = &created["metadata"];
    let ts = meta["creationTimestamp"].as_str().unwrap();
    let want = CM_BASIC
        .replace(
            "24748e7e-7432-435e-b8a0-94f9b1a0b29b",
            meta["uid"].as_str().unwrap(),
        )
        .replace(
            "\"681\"",
            &format!("\"{}\"", meta["resourceVersion"].as_str().unwrap()),
        )
        .replace("2026-11-21T12:01:11Z", ts);
    assert_eq!(r.text(), want);

    // /api/v1 as recorded (a-apiv1-cbor-json-q09).
    let r = call(
        &s,
        "GET",
        "/api/v1",
        &[("Accept", "application/cbor, application/json;q=0.9")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 6488);
    assert!(r
        .text()
        .starts_with("{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\""));
    assert_eq!(r.body, corpus("exchanges/a-apiv1-cbor-json-q09.body"));
}

#[tokio::test]
async fn crud_flow_with_conflicts_and_not_found() {
    let s = start().await;
    let mut c = connect(s.addr()).await;
    let base = "/api/v1/namespaces/demo/configmaps";
    let body =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"crud"},"data":{"a":"1"}}"#;
    let r = call_on(&mut c, "POST", base, &[JSON_CT], Some(body)).await;
    assert_eq!(r.status, 201);
    let v = r.json();
    let rv1 = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(v["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(r.text().starts_with("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"crud\",\"namespace\":\"demo\",\"uid\":"));

    let r = call_on(&mut c, "POST", base, &[JSON_CT], Some(body)).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.text(),
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"crud\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"crud\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );

    // Update with the current resourceVersion, then with the now stale one.
    let upd = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"crud","resourceVersion":"{rv1}"}},"data":{{"a":"2"}}}}"#
    );
    let r = call_on(
        &mut c,
        "PUT",
        &format!("{base}/crud"),
        &[JSON_CT],
        Some(upd.as_bytes()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let rv2 = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rv2.parse::<u64>().unwrap() > rv1.parse::<u64>().unwrap());
    let r = call_on(
        &mut c,
        "PUT",
        &format!("{base}/crud"),
        &[JSON_CT],
        Some(upd.as_bytes()),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["reason"], "Conflict");
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on configmaps \"crud\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let r = call_on(
        &mut c,
        "PUT",
        &format!("{base}/missing"),
        &[JSON_CT],
        Some(br#"{"metadata":{"name":"missing"}}"#),
    )
    .await;
    assert_eq!(r.status, 404);

    // Patches.
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/crud"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"data":{"b":"3","a":null}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"], json!({"b": "3"}));
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/crud"),
        &[("Content-Type", "application/strategic-merge-patch+json")],
        Some(br#"{"metadata":{"labels":{"x":"y"}}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["labels"], json!({"x": "y"}));
    let r = call_on(&mut c,
            "PATCH",
            &format!("{base}/crud"),
            &[("Content-Type", "application/json-patch+json")],
            Some(br#"[{"op":"add","path":"/data/c","value":"4"},{"op":"replace","path":"/data/b","value":"5"},{"op":"remove","path":"/metadata/labels"}]"#),
        ).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"], json!({"b": "5", "c": "4"}));
    assert!(r.json()["metadata"].get("labels").is_none());
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/crud"),
        &[("Content-Type", "application/json-patch+json")],
        Some(br#"[{"op":"replace","path":"/data/zzz","value":"4"}]"#),
    )
    .await;
    assert_eq!(r.status, 422);
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/nope"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(b"{}"),
    )
    .await;
    assert_eq!(r.status, 404);

    // Server-side apply: required field manager, create-if-missing, then merge.
    let apply = ("Content-Type", "application/apply-patch+yaml");
    let doc =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"k":"v"}}"#;
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/applied"),
        &[apply],
        Some(doc),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["details"]["causes"][0]["field"], "fieldManager");
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/applied?fieldManager=me"),
        &[apply],
        Some(doc),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    let doc2 = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"k2":"v2"}}"#;
    let r = call_on(
        &mut c,
        "PATCH",
        &format!("{base}/applied?fieldManager=me"),
        &[apply],
        Some(doc2),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"], json!({"k": "v", "k2": "v2"}));

    // Delete answers a Success Status with details (b-delete-cbor, decoded).
    let uid = call_on(&mut c, "GET", &format!("{base}/crud"), &[], None)
        .await
        .json()["metadata"]["uid"]
        .clone();
    let r = call_on(&mut c, "DELETE", &format!("{base}/crud"), &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        format!("{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Success\",\"details\":{{\"name\":\"crud\",\"kind\":\"configmaps\",\"uid\":{uid}}}}}\n")
    );
    let r = call_on(&mut c, "GET", &format!("{base}/crud"), &[], None).await;
    assert_eq!(r.status, 404);
    let r = call_on(&mut c, "DELETE", &format!("{base}/crud"), &[], None).await;
    assert_eq!(r.status, 404);

    // Creating into a namespace that does not exist.
    let r = call_on(
        &mut c,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        &[JSON_CT],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "namespaces \"nowhere\" not found");
    // Invalid names and malformed bodies.
    let r = call_on(
        &mut c,
        "POST",
        base,
        &[JSON_CT],
        Some(br#"{"metadata":{"name":"Bad_Name"}}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (422, Some("Invalid"))
    );
    let r = call_on(&mut c, "POST", base, &[JSON_CT], Some(b"{not json")).await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (400, Some("BadRequest"))
    );
    let r = call_on(&mut c, "POST", base, &[JSON_CT], Some(b"[1,2]")).await;
    assert_eq!(r.status, 400);
    let r = call_on(
        &mut c,
        "POST",
        base,
        &[JSON_CT],
        Some(br#"{"kind":"Secret"}"#),
    )
    .await;
    assert_eq!(r.status, 400);
    let r = call_on(
        &mut c,
        "POST",
        base,
        &[JSON_CT],
        Some(br#"{"metadata":{"generateName":"gen-"}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    assert!(r.json()["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("gen-"));
    // Every request above went over one connection.
    let reqs = s.requests();
    assert!(reqs.len() >= 20);
    assert!(reqs
        .iter()
        .all(|q| q.connection_id == reqs[0].connection_id));
}

#[tokio::test]
async fn other_resources_and_custom_resources() {
    let s = start().await;
    // Secrets also answer DELETE with a Status; pods, namespaces and gadgets with the object.
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/secrets/secret-demo",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.text().ends_with("\"data\":{\"bin\":\"AAEC/w==\",\"s\":\"cGxhaW4=\",\"text\":\"aGVsbG8=\"},\"type\":\"Opaque\"}\n"));
    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/demo/secrets",
        &[JSON_CT],
        Some(br#"{"metadata":{"name":"s2"},"stringData":{"pw":"hunter2"}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["data"], json!({"pw": "aHVudGVyMg=="}));
    assert_eq!(r.json()["type"], "Opaque");

    // The Gadget is unstructured: keys sorted, floats as Go prints them.
    let g = "/apis/corpus.example.com/v1/namespaces/demo/gadgets";
    let r = call(&s, "GET", &format!("{g}/g1"), &[], None).await;
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(t.starts_with("{\"apiVersion\":\"corpus.example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"creationTimestamp\":"), "{t}");
    for frag in [
        "\"wholeFloat\":2}",
        "\"negZero\":-0,",
        "\"tinyFloat\":5e-324,",
        "\"hugeFloat\":1e+300,",
        "\"exp\":1e-7,",
        "\"maxInt64\":9223372036854775807,",
        "\"nullable\":null,",
    ] {
        assert!(t.contains(frag), "{frag} in {t}");
    }
    let r = call(&s, "GET", g, &[], None).await;
    assert!(r.text().starts_with("{\"apiVersion\":\"corpus.example.com/v1\",\"items\":[{\"apiVersion\":\"corpus.example.com/v1\",\"kind\":\"Gadget\""));
    assert!(r
        .text()
        .contains("\"kind\":\"GadgetList\",\"metadata\":{\"continue\":\"\",\"resourceVersion\":"));
    // No strategic merge patch (and no apply-patch+cbor) for a custom resource.
    for ct in [
        "application/strategic-merge-patch+json",
        "application/apply-patch+cbor",
    ] {
        let r = call(
            &s,
            "PATCH",
            &format!("{g}/g1?fieldManager=x"),
            &[("Content-Type", ct)],
            Some(b"{}"),
        )
        .await;
        assert_eq!(r.status, 415, "{ct}");
        assert_eq!(r.json()["message"], "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
    }
    let r = call(
        &s,
        "PATCH",
        &format!("{g}/g1"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"spec":{"intVal":43}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["generation"], 2);
    let r = call(
        &s,
        "GET",
        g,
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
    let r = call(&s, "DELETE", &format!("{g}/g1"), &[], None).await;
    assert_eq!((r.status, r.json()["kind"].as_str()), (200, Some("Gadget")));

    // Namespaces: cluster scoped, defaults filled, deletion takes the contents along.
    let r = call(&s, "GET", "/api/v1/namespaces/demo", &[], None).await;
    assert_eq!(
        r.json()["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "demo"
    );
    assert_eq!(r.json()["status"], json!({"phase": "Active"}));
    let r = call(&s, "DELETE", "/api/v1/namespaces/demo", &[], None).await;
    assert_eq!(
        (r.status, r.json()["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/pods/pod-demo",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    let r = call(&s, "GET", "/api/v1/namespaces/demo/services", &[], None).await;
    assert_eq!(
        r.json()["message"],
        "the server could not find the requested resource"
    );
    let r = call(
        &s,
        "PUT",
        "/api/v1/namespaces/default/configmaps",
        &[JSON_CT],
        Some(b"{}"),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

#[tokio::test]
async fn lists_paginate_with_continue() {
    let s = start().await;
    s.emit_configmaps("pages", 7);
    let base = "/api/v1/namespaces/pages/configmaps";
    let r = call(&s, "GET", &format!("{base}?limit=3"), &[], None).await;
    let v = r.json();
    assert!(r.text().starts_with(
        "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
    ));
    assert_eq!(v["items"].as_array().unwrap().len(), 3);
    assert!(v["items"][0].get("kind").is_none());
    assert_eq!(v["metadata"]["remainingItemCount"], 4);
    let rv = v["metadata"]["resourceVersion"].clone();
    let mut names: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut cont = v["metadata"]["continue"].as_str().unwrap().to_string();
    loop {
        let r = call(
            &s,
            "GET",
            &format!("{base}?limit=3&continue={cont}"),
            &[],
            None,
        )
        .await;
        let v = r.json();
        assert_eq!(v["metadata"]["resourceVersion"], rv);
        names.extend(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
        );
        match v["metadata"]["continue"].as_str() {
            Some(c) => cont = c.to_string(),
            None => break,
        }
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names.len(), 7);
    assert_eq!(names, sorted);
    let r = call(&s, "GET", &format!("{base}?continue=garbage"), &[], None).await;
    assert_eq!(r.status, 400);
    // Selectors.
    let r = call(
        &s,
        "GET",
        "/api/v1/configmaps?labelSelector=app%3Ddemo",
        &[],
        None,
    )
    .await;
    let items = r.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "demo-config");
    let r = call(
        &s,
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.name%3Dcm-plain",
        &[],
        None,
    )
    .await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    let r = call(
        &s,
        "GET",
        "/api/v1/configmaps?fieldSelector=spec.foo%3D1",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn tables_and_partial_object_metadata() {
    let s = start().await;
    let table = ("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1");
    let r = call(&s, "GET", "/api/v1/namespaces/demo/pods", &[table], None).await;
    assert_eq!(r.status, 200);
    assert_apiserver_headers(&r, "application/json");
    let v = r.json();
    assert!(r.text().starts_with(
        "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":"
    ));
    let rec: Value = serde_json::from_slice(&corpus("objects/table-pods/a.json")).unwrap();
    assert_eq!(v["columnDefinitions"], rec["columnDefinitions"]);
    let cells = v["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(cells[0], "pod-demo");
    assert_eq!(&cells[1..4], &[json!("0/1"), json!("Pending"), json!("0")]);
    assert_eq!(
        &cells[5..],
        &[
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    assert!(r.text().contains("\\u003cnone\\u003e"));
    assert_eq!(v["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    let r = call(
        &s,
        "GET",
        "/apis/corpus.example.com/v1/namespaces/demo/gadgets",
        &[table],
        None,
    )
    .await;
    let v = r.json();
    assert_eq!(v["rows"][0]["cells"], json!(["g1", 42, 3.5, "héllo ☃"]));
    let names: Vec<&str> = v["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Name", "Int", "Float", "Str"]);
    let rec: Value = serde_json::from_slice(&corpus("objects/table-gadgets/a.json")).unwrap();
    assert_eq!(v["columnDefinitions"], rec["columnDefinitions"]);
    // PartialObjectMetadata of a CR comes in ObjectMeta order, not sorted.
    let meta = serde_json::to_string(&v["rows"][0]["object"]["metadata"]).unwrap();
    assert!(
        meta.starts_with("{\"name\":\"g1\",\"namespace\":\"demo\",\"uid\":"),
        "{meta}"
    );

    // ConfigMap Table, with the kubectl-style fallback list (b-table-cbor-json-fb).
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[("Accept", "application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(
        v["rows"][0]["cells"].as_array().unwrap()[0..2],
        [json!("cm-plain"), json!(1)]
    );
    assert_eq!(v["rows"][1]["cells"][0], "demo-config");
    assert_eq!(v["rows"][1]["cells"][1], 7);
    let rec: Value =
        serde_json::from_slice(&corpus("exchanges/b-table-cbor-json-fb.body")).unwrap();
    assert_eq!(v["columnDefinitions"], rec["columnDefinitions"]);
    // A single object as a Table.
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/configmaps/cm-plain?includeObject=None",
        &[table],
        None,
    )
    .await;
    assert_eq!(r.json()["rows"].as_array().unwrap().len(), 1);
    assert_eq!(r.json()["rows"][0]["object"], Value::Null);
    // Table is JSON/YAML only.
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[(
            "Accept",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        )],
        None,
    )
    .await;
    assert_eq!(r.status, 406);

    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(t.starts_with("{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"demo-config\",\"namespace\":\"demo\",\"uid\":"), "{t}");
    assert!(!t.contains("\"data\""));
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/pods?limit=5",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        None,
    )
    .await;
    let v = r.json();
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(v["items"][0]["metadata"]["name"], "pod-demo");
}

#[tokio::test]
async fn yaml_and_protobuf_stand_ins() {
    let s = start().await;
    let p = "/api/v1/namespaces/demo/configmaps/cm-plain";
    let json_body = call(&s, "GET", p, &[], None).await.body;
    let r = call(&s, "GET", p, &[("Accept", "application/yaml")], None).await;
    assert_eq!(r.header("content-type"), Some("application/yaml"));
    assert_eq!(r.body, json_body);
    let r = call(
        &s,
        "GET",
        p,
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        None,
    )
    .await;
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert_eq!(&r.body[..4], b"k8s\x00");
    assert_eq!(&r.body[4..], &json_body[..json_body.len() - 1]);
    // A protobuf request body in the same envelope.
    let mut body = b"k8s\x00".to_vec();
    body.extend_from_slice(br#"{"metadata":{"name":"pb"},"data":{"x":"y"}}"#);
    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201);
    // curl gets pretty JSON, like from a real apiserver.
    let r = call(&s, "GET", p, &[("User-Agent", "curl/8.5.0")], None).await;
    assert!(r.text().starts_with("{\n  \"kind\": \"ConfigMap\","));
}

#[tokio::test]
async fn discovery_version_and_health() {
    let s = start().await;
    let r = call(&s, "GET", "/api", &[], None).await;
    assert_eq!(r.json()["kind"], "APIVersions");
    let r = call(
        &s,
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )],
        None,
    )
    .await;
    assert_eq!(r.json()["groups"][1]["name"], "corpus.example.com");
    let r = call(&s, "GET", "/apis/corpus.example.com", &[], None).await;
    assert_eq!(r.json()["kind"], "APIGroup");
    let r = call(&s, "GET", "/apis/corpus.example.com/v1", &[], None).await;
    assert_eq!(r.json()["resources"][0]["name"], "gadgets");
    let r = call(
        &s,
        "GET",
        "/apis/apiextensions.k8s.io/v1",
        &[("Accept", "application/cbor")],
        None,
    )
    .await;
    assert_eq!((r.status, r.text().as_str()), (406, NA_OBJECT));
    // The Gadget CRD is there, shaped like the recorded one (corpus crd-definition).
    let r = call(
        &s,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.corpus.example.com",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let crd = r.json();
    assert_eq!(crd["spec"]["names"]["kind"], "Gadget");
    assert_eq!(crd["metadata"]["generation"], 1);
    let rec: Value = serde_json::from_slice(&corpus("objects/crd-definition/a.json")).unwrap();
    assert_eq!(crd["spec"], rec["spec"]);
    let spec_text = |v: &Value| serde_json::to_string(&v["spec"]).unwrap();
    assert_eq!(spec_text(&crd), spec_text(&rec));
    let r = call(&s, "GET", "/version", &[], None).await;
    assert!(r
        .text()
        .starts_with("{\n  \"major\": \"1\",\n  \"minor\": \"36\","));
    // A router 406 is written in whatever else the Accept allows (ErrorNegotiated).
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[("Accept", "application/*")],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
    assert!(r.text().starts_with("{\"kind\":\"Status\"") && r.text().ends_with("}\n"));
    let r = call(
        &s,
        "GET",
        "/version",
        &[("Accept", "application/yaml")],
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.header("content-type")),
        (406, Some("application/yaml"))
    );
    for p in ["/healthz", "/livez", "/readyz"] {
        let r = call(&s, "GET", p, &[("Accept", "application/cbor")], None).await;
        assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    }
    let r = call(
        &s,
        "GET",
        "/apis/corpus.example.com/v1",
        &[("Accept", "application/cbor")],
        None,
    )
    .await;
    assert_eq!((r.status, r.text().as_str()), (406, NA_APIS));
}

async fn next_event(c: &mut Client) -> Value {
    let chunk = c.chunk().await.unwrap().expect("an event");
    assert_eq!(chunk.last(), Some(&b'\n'));
    serde_json::from_slice(&chunk).unwrap()
}

#[tokio::test]
async fn watch_initial_events_bookmarks_and_live_changes() {
    let s = start_with(StandInOptions {
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        "/api/v1/namespaces/demo/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2",
        &[("Accept", "application/json")],
        None,
    )).await.unwrap();
    let Head { status, headers } = w.head().await.unwrap();
    assert_eq!(status, 200);
    let resp = Resp::from(Head { status, headers });
    assert_apiserver_headers(&resp, "application/json");
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    let a = next_event(&mut w).await;
    let b = next_event(&mut w).await;
    assert_eq!(
        (a["type"].as_str(), b["type"].as_str()),
        (Some("ADDED"), Some("ADDED"))
    );
    assert_eq!(a["object"]["metadata"]["name"], "cm-plain");
    assert_eq!(b["object"]["metadata"]["name"], "demo-config");
    let end = next_event(&mut w).await;
    assert_eq!(
        serde_json::to_string(&end).unwrap(),
        format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{}\",\"annotations\":{{\"k8s.io/initial-events-end\":\"true\"}}}}}}}}",
            s.resource_version()
        )
    );
    // A live change arrives at once.
    let t0 = Instant::now();
    let r = call(
        &s,
        "PATCH",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"data":{"n":"1"}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    let mut ev = next_event(&mut w).await;
    while ev["type"] == "BOOKMARK" {
        ev = next_event(&mut w).await;
    }
    assert!(
        t0.elapsed() < Duration::from_millis(100),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["data"]["n"], "1");
    // Then periodic bookmarks, then the clean end at timeoutSeconds.
    let bm = next_event(&mut w).await;
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(
        bm["object"]["metadata"]["resourceVersion"],
        ev["object"]["metadata"]["resourceVersion"]
    );
    let mut n = 0;
    while let Some(chunk) = w.chunk().await.unwrap() {
        let e: Value = serde_json::from_slice(&chunk).unwrap();
        assert_eq!(e["type"], "BOOKMARK");
        n += 1;
    }
    assert!(n >= 3, "{n} bookmarks");
    // The connection is still usable after the stream ended.
    let r = call_on(
        &mut w,
        "GET",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn watch_resumes_filters_and_transforms() {
    let s = start().await;
    let rv = s.resource_version();
    s.emit_configmaps("demo", 2);
    // Resume after rv: exactly the two newer events, no initial state.
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        &format!("/api/v1/watch/namespaces/demo/configmaps?resourceVersion={rv}&timeoutSeconds=1"),
        &[],
        None,
    ))
    .await
    .unwrap();
    let Head { status, .. } = w.head().await.unwrap();
    assert_eq!(status, 200);
    let mut names = Vec::new();
    while let Some(chunk) = w.chunk().await.unwrap() {
        let e: Value = serde_json::from_slice(&chunk).unwrap();
        assert_eq!(e["type"], "ADDED");
        names.push(
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.starts_with("emit-")));

    // A label-selected watch sees an object leave the selection as DELETED.
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        "/api/v1/namespaces/demo/configmaps?watch=1&labelSelector=app%3Ddemo&timeoutSeconds=3",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        None,
    ))
    .await
    .unwrap();
    assert_eq!(w.head().await.unwrap().status, 200);
    let e = next_event(&mut w).await;
    assert_eq!(
        (e["type"].as_str(), e["object"]["kind"].as_str()),
        (Some("ADDED"), Some("PartialObjectMetadata"))
    );
    let r = call(
        &s,
        "PATCH",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"metadata":{"labels":{"app":null}}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    let e = next_event(&mut w).await;
    assert_eq!(e["type"], "DELETED");

    // A Table watch: headers only on the first event.
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        "/api/v1/namespaces/demo/pods?watch=true&timeoutSeconds=1",
        &[("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")],
        None,
    ))
    .await
    .unwrap();
    assert_eq!(w.head().await.unwrap().status, 200);
    let e = next_event(&mut w).await;
    assert_eq!(e["object"]["kind"], "Table");
    assert!(e["object"]["columnDefinitions"].is_array());
    // Watches refuse YAML (no stream serializer).
    let r = call(
        &s,
        "GET",
        "/api/v1/namespaces/demo/pods?watch=true",
        &[("Accept", "application/yaml")],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
}

#[tokio::test]
async fn many_events_reach_a_watch_in_order() {
    let s = start().await;
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        "/api/v1/namespaces/bulk/configmaps?watch=true&resourceVersion=0&timeoutSeconds=30",
        &[],
        None,
    ))
    .await
    .unwrap();
    assert_eq!(w.head().await.unwrap().status, 200);
    s.emit_configmaps("bulk", 2000);
    let mut last = 0u64;
    for _ in 0..2000 {
        let e = next_event(&mut w).await;
        assert_eq!(e["type"], "ADDED");
        let rv: u64 = e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > last);
        last = rv;
    }
    assert_eq!(last, s.resource_version());
    // Shutdown ends the stream cleanly.
    s.shutdown();
    assert!(w.chunk().await.unwrap().is_none());
}

#[tokio::test]
async fn keep_alive_survives_an_early_406_with_a_body() {
    let s = start().await;
    let mut c = connect(s.addr()).await;
    // Head first: the 406 must come before the body is sent.
    let mut req = request(
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[
            ("Accept", "application/cbor"),
            ("Content-Type", "application/cbor"),
        ],
        Some(CBOR_BODY),
    );
    let body = req.split_off(req.len() - CBOR_BODY.len());
    c.write(&req).await.unwrap();
    let r = c.response().await.unwrap();
    assert_eq!((r.status, r.text().as_str()), (406, NA_OBJECT));
    c.write(&body).await.unwrap();
    // Then more requests on the same connection, including a chunked body.
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let chunked = b"10\r\n{\"metadata\":{\"na\r\n18\r\nme\":\"chunky\"},\"data\":{}}\r\n0\r\n\r\n";
    let r = call_on(
        &mut c,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[JSON_CT, ("Transfer-Encoding", "chunked")],
        Some(chunked),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["metadata"]["name"], "chunky");
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps/chunky",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    // Two requests pipelined in one write.
    let mut two = request("GET", "/healthz", &[], None);
    two.extend(request("GET", "/livez", &[], None));
    c.write(&two).await.unwrap();
    assert_eq!(c.response().await.unwrap().text(), "ok");
    assert_eq!(c.response().await.unwrap().text(), "ok");

    let reqs = s.requests();
    assert_eq!(reqs.len(), 6);
    assert!(reqs
        .iter()
        .all(|q| q.connection_id == reqs[0].connection_id));
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].body, CBOR_BODY);
    assert_eq!(reqs[0].header("accept"), Some("application/cbor"));
    assert_eq!(reqs[2].body, br#"{"metadata":{"name":"chunky"},"data":{}}"#);
    assert_eq!(reqs[2].path, "/api/v1/namespaces/demo/configmaps");
    s.clear_requests();
    assert!(s.requests().is_empty());
    // Connection: close is honoured.
    let r = call_on(&mut c, "GET", "/healthz", &[("Connection", "close")], None).await;
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closes().await);
}

#[tokio::test]
async fn upgrades_echo() {
    let s = start().await;
    let mut c = connect(s.addr()).await;
    c.write(&request(
        "POST",
        "/api/v1/namespaces/demo/pods/pod-demo/exec?command=sh&stdin=true",
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
        ],
        None,
    ))
    .await
    .unwrap();
    let Head { status, headers } = c.head().await.unwrap();
    assert_eq!(status, 101);
    assert!(headers.contains(&(
        "X-Stream-Protocol-Version".into(),
        "v4.channel.k8s.io".into()
    )));
    c.write(b"\x80\x03\x00\x01hello").await.unwrap();
    assert_eq!(c.read_exact(9).await.unwrap(), b"\x80\x03\x00\x01hello");

    let mut c = connect(s.addr()).await;
    c.write(&request(
        "GET",
        "/api/v1/namespaces/demo/pods/pod-demo/portforward",
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
            (
                "Sec-WebSocket-Protocol",
                "v4.channel.k8s.io, v5.channel.k8s.io",
            ),
        ],
        None,
    ))
    .await
    .unwrap();
    let Head { status, headers } = c.head().await.unwrap();
    assert_eq!(status, 101);
    assert!(headers.contains(&(
        "Sec-WebSocket-Accept".into(),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".into()
    )));
    assert!(headers.contains(&("Sec-WebSocket-Protocol".into(), "v4.channel.k8s.io".into())));
    c.write(b"ping").await.unwrap();
    assert_eq!(c.read_exact(4).await.unwrap(), b"ping");
    drop(c);

    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/demo/pods/pod-demo/exec",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/demo/pods/nope/attach",
        &[("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn garbage_never_brings_it_down() {
    let s = start().await;
    let garbage: Vec<Vec<u8>> = vec![
        b"\x00\x01\x02\xff\xfe\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(),
        b"GET /api HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /api HTTP/1.1\r\nHost: x\r\n bad fold\r\n\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n".to_vec(),
        b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n".to_vec(),
        b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"GET /api/v1/namespaces/demo/configmaps?watch=true&timeoutSeconds=x HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"GET /api/v1/namespaces/demo/configmaps?labelSelector=a%3D%3D%3D%28 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"GET /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nAccept: ;;;,,/,*/;q=abc\r\n\r\n".to_vec(),
    ];
    for g in garbage {
        let mut c = connect(s.addr()).await;
        c.write(&g).await.unwrap();
        let r = c.response().await.unwrap();
        assert!(
            r.status >= 400,
            "{:?} -> {}",
            String::from_utf8_lossy(&g),
            r.status
        );
        assert_eq!(r.json()["kind"], "Status");
    }
    // Bad JSON in patches and bodies: 400 with a Status, connection kept.
    let mut c = connect(s.addr()).await;
    for (ct, body) in [
        ("application/merge-patch+json", &b"{"[..]),
        ("application/json-patch+json", &b"{\"op\":1}"[..]),
        ("application/apply-patch+yaml", &b"key: value"[..]),
        ("application/merge-patch+json", &b"[]"[..]),
    ] {
        let r = call_on(
            &mut c,
            "PATCH",
            "/api/v1/namespaces/demo/configmaps/cm-plain?fieldManager=x",
            &[("Content-Type", ct)],
            Some(body),
        )
        .await;
        assert!(matches!(r.status, 400 | 422), "{ct}: {}", r.status);
        assert_eq!(r.json()["kind"], "Status");
    }
    // A huge head is refused, the server lives on.
    let mut c2 = connect(s.addr()).await;
    let mut big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 1_100_000));
    let _ = c2.write(&big).await;
    let r = c2.response().await.unwrap();
    assert_eq!(r.status, 431);
    // A client that vanishes mid-request.
    let mut c3 = connect(s.addr()).await;
    c3.write(b"POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{").await.unwrap();
    drop(c3);
    let r = call_on(&mut c, "GET", "/healthz", &[], None).await;
    assert_eq!(r.text(), "ok");
}

#[tokio::test]
async fn http_details_head_http10_chunked_pretty_and_misc_verbs() {
    let s = start_with(StandInOptions {
        chunked_above: Some(100),
        ..Default::default()
    })
    .await;
    let mut c = connect(s.addr()).await;
    // HEAD has no route (405), and the answer carries no body.
    c.write(&request("HEAD", "/api/v1/namespaces", &[], None))
        .await
        .unwrap();
    let Head { status, headers } = c.head().await.unwrap();
    assert_eq!(status, 405);
    assert!(headers
        .iter()
        .any(|(k, v)| k == "Content-Length" && v != "0"));
    // Large bodies are chunked like Go's net/http does past its buffer.
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[],
        None,
    )
    .await;
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.json()["metadata"]["name"], "demo-config");
    let r = call_on(&mut c, "GET", "/healthz", &[], None).await;
    assert_eq!(r.header("content-length"), Some("2"));
    // ?pretty wins over the User-Agent.
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo?pretty=true",
        &[],
        None,
    )
    .await;
    assert!(r.text().starts_with("{\n  \"kind\": \"Namespace\""));
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo?pretty=false",
        &[("User-Agent", "curl/8")],
        None,
    )
    .await;
    assert!(r.text().starts_with("{\"kind\":\"Namespace\""));
    // dryRun creates nothing; deletecollection honours the selector.
    let body = br#"{"metadata":{"name":"dry","labels":{"del":"yes"}}}"#;
    let r = call_on(
        &mut c,
        "POST",
        "/api/v1/namespaces/demo/configmaps?dryRun=All",
        &[JSON_CT],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps/dry",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    let r = call_on(
        &mut c,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[JSON_CT],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = call_on(
        &mut c,
        "DELETE",
        "/api/v1/namespaces/demo/configmaps?labelSelector=del%3Dyes",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["kind"], "ConfigMapList");
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    let r = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[],
        None,
    )
    .await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
    // DELETE with stale preconditions.
    let r = call_on(
        &mut c,
        "DELETE",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[JSON_CT],
        Some(br#"{"preconditions":{"resourceVersion":"1"}}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (409, Some("Conflict"))
    );
    // A no-op update keeps the resourceVersion.
    let cur = call_on(
        &mut c,
        "GET",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[],
        None,
    )
    .await;
    let r = call_on(
        &mut c,
        "PUT",
        "/api/v1/namespaces/demo/configmaps/cm-plain",
        &[JSON_CT],
        Some(&cur.body),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["metadata"]["resourceVersion"],
        cur.json()["metadata"]["resourceVersion"]
    );

    // HTTP/1.0 closes after the response.
    let mut old = connect(s.addr()).await;
    old.write(b"GET /livez HTTP/1.0\r\n\r\n").await.unwrap();
    let r = old.response().await.unwrap();
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(old.closes().await);

    // A legacy single-object watch sees only that object.
    let mut w = connect(s.addr()).await;
    w.write(&request(
        "GET",
        "/api/v1/watch/namespaces/demo/configmaps/demo-config?timeoutSeconds=1",
        &[],
        None,
    ))
    .await
    .unwrap();
    assert_eq!(w.head().await.unwrap().status, 200);
    let e = next_event(&mut w).await;
    assert_eq!(e["object"]["metadata"]["name"], "demo-config");
    assert!(w.chunk().await.unwrap().is_none());
}

#[tokio::test]
async fn mutated_requests_never_break_the_server() {
    let s = start().await;
    let seeds: Vec<Vec<u8>> = vec![
        request("GET", "/api/v1/namespaces/demo/configmaps?watch=1&timeoutSeconds=0", &[("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")], None),
        request("POST", "/api/v1/namespaces/demo/configmaps", &[JSON_CT], Some(br#"{"metadata":{"name":"x","labels":{"a":"b"}},"data":{"k":"v"}}"#)),
        request("PATCH", "/api/v1/namespaces/demo/configmaps/demo-config", &[("Content-Type", "application/json-patch+json")], Some(br#"[{"op":"move","from":"/data","path":"/metadata/labels"}]"#)),
        request("PATCH", "/apis/corpus.example.com/v1/namespaces/demo/gadgets/g1", &[("Content-Type", "application/merge-patch+json")], Some(br#"{"metadata":"x","spec":null}"#)),
        request("GET", "/api/v1/pods?limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NjQ5LCJzdGFydCI6Ii9wb2QtMDE4XHUwMDAwIn0", &[("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")], None),
    ];
    let mut rng: u64 = 12345;
    let mut next = || xorshift_next(&mut rng);
    for i in 0..400 {
        let mut m = seeds[i % seeds.len()].clone();
        let n = (next() % 6) as usize;
        for _ in 0..n {
            let pos = (next() as usize) % m.len();
            match next() % 3 {
                0 => m[pos] = next() as u8,
                1 => {
                    m.remove(pos);
                }
                _ => m.insert(pos, b"{}[]\":,;=/%\r\n "[(next() % 14) as usize]),
            }
        }
        if let Ok(Ok(mut c)) = timeout(Duration::from_secs(2), TcpStream::connect(s.addr())).await {
            let _ = c.write_all(&m).await;
            let _ = c.shutdown().await;
            let mut sink = Vec::new();
            let _ = timeout(Duration::from_millis(300), c.read_to_end(&mut sink)).await;
        }
    }
    let r = call(&s, "GET", "/healthz", &[], None).await;
    assert_eq!(r.text(), "ok");
}

/// Go's `sort.xorshift.Next` (the 64-bit triple 13, 7, 17): a seeded, repeatable
/// source for the garbage-input test (a copy of cborgate's, which this crate does
/// not depend on).
fn xorshift_next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
