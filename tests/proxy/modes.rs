//! Every mode against the legacy, CBOR-enabled and mixed stand-ins, running
//! the client-go scenario: the client sees the same results in every mode;
//! what the upstream received is what the mode says.

use crate::support::harness::Harness;
use crate::support::http::Conn;
use crate::support::scenario::{run, ACCEPTS};
use cborgate::codec::{cbor_to_json, json_to_cbor, CborToJsonOptions, JsonToCborOptions};
use cborgate_standin::{CborMode, StandInOptions};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/demo/configmaps";
const GADGETS: &str = "/apis/corpus.example.com/v1/namespaces/demo/gadgets";

fn cm(n: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": "v"}, "binaryData": {"b": "AAEC/w=="}})
}

fn gadget(n: &str) -> Value {
    json!({"apiVersion": "corpus.example.com/v1", "kind": "Gadget", "metadata": {"name": n}, "spec": {"size": 3, "ratio": 0.25, "tags": ["a"]}})
}

/// A one-second CBOR watch of the demo ConfigMaps, on a fresh connection.
fn cbor_watch(h: &Harness) -> crate::support::http::Resp {
    crate::support::http::once(
        h.proxy,
        "GET",
        &format!("{CMS}?watch=1&timeoutSeconds=1"),
        &[("Accept", "application/cbor")],
        None,
    )
}

fn upstream(kind: &str) -> StandInOptions {
    let cbor = match kind {
        "legacy" => CborMode::Off,
        "cbor" => CborMode::On,
        _ => CborMode::Mixed {
            cbor_groups: vec!["corpus.example.com".into()],
        },
    };
    StandInOptions {
        cbor,
        ..Default::default()
    }
}

/// (method, resource, content type) of every upstream request that carried a
/// body. (Classified by Content-Type: a body answered early with a 415 may be
/// recorded empty, as the proxy drops that connection before it is drained.)
fn bodies(h: &Harness) -> Vec<(String, String, String)> {
    h.standin()
        .requests()
        .into_iter()
        .filter(|r| r.header("content-type").is_some())
        .map(|r| {
            let kind = if r.path.starts_with("/apis/") {
                "gadgets"
            } else {
                "configmaps"
            };
            (
                r.method.clone(),
                kind.to_string(),
                r.header("content-type").unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_client_scenario_in_every_mode_against_every_upstream() {
    for (mode, kind) in [
        ("legacy", "legacy"),
        ("legacy", "cbor"),
        ("legacy", "mixed"),
        ("auto", "legacy"),
        ("auto", "cbor"),
        ("auto", "mixed"),
        ("native", "cbor"),
        ("upgrade", "cbor"),
    ] {
        let h = Harness::start_with(mode, &[], upstream(kind));
        let mut c = Conn::connect(h.proxy);
        for (i, accept) in ACCEPTS.iter().enumerate() {
            run(&h, &mut c, accept, CMS, &cm, &format!("m-cm-{i}"));
            run(&h, &mut c, accept, GADGETS, &gadget, &format!("m-g-{i}"));
        }
        let sent = bodies(&h);
        let cbor_sent = |kind_: &str| {
            sent.iter()
                .filter(|(_, k, ct)| k == kind_ && ct.contains("cbor"))
                .count()
        };
        let json_sent = |kind_: &str| {
            sent.iter()
                .filter(|(_, k, ct)| k == kind_ && !ct.contains("cbor"))
                .count()
        };
        let codec = h.metric("cborgate_codec_duration_seconds_count", &[]);
        let fallbacks = h.metric("cborgate_fallbacks_total", &[]);
        let what = format!(
            "mode {mode} against {kind}: sent {sent:?}, codec {codec}, fallbacks {fallbacks}"
        );
        match (mode, kind) {
            ("legacy", _) => {
                assert_eq!(cbor_sent("configmaps") + cbor_sent("gadgets"), 0, "{what}");
                assert!(
                    h.standin()
                        .requests()
                        .iter()
                        .all(|r| !r.header("accept").unwrap_or("").contains("cbor")),
                    "{what}"
                );
            }
            ("auto", "legacy") => {
                // One CBOR try (a 415, replayed) per (verb, resource): POST, PUT, APPLY.
                assert_eq!(
                    (cbor_sent("configmaps"), cbor_sent("gadgets")),
                    (3, 3),
                    "{what}"
                );
                assert_eq!(fallbacks, 6.0, "{what}");
            }
            ("auto", "cbor") | ("native", _) | ("upgrade", _) => {
                // A CBOR-enabled upstream gets CBOR and nothing is transcoded.
                assert_eq!(json_sent("configmaps") + json_sent("gadgets"), 0, "{what}");
                assert_eq!(codec, 0.0, "{what}");
                assert_eq!(fallbacks, 0.0, "{what}");
            }
            ("auto", "mixed") => {
                assert_eq!(json_sent("gadgets"), 0, "{what}");
                assert_eq!(cbor_sent("configmaps"), 3, "{what}");
                assert_eq!(fallbacks, 3.0, "{what}");
            }
            _ => unreachable!(),
        }
        assert_eq!(
            h.metric("cborgate_requests_total", &[("code", "415")]),
            0.0,
            "{what}"
        );
    }
}

#[test]
fn auto_against_a_cbor_upstream_passes_bodies_through_byte_identical() {
    let h = Harness::start_with("auto", &[], upstream("cbor"));
    let body = json_to_cbor(
        cm("bytes").to_string().as_bytes(),
        JsonToCborOptions::default(),
    )
    .unwrap();
    let r = crate::support::http::once(
        h.proxy,
        "POST",
        CMS,
        &[
            ("Content-Type", "application/cbor"),
            ("Accept", "application/cbor"),
        ],
        Some(&body),
    );
    assert_eq!(r.status, 201);
    assert_eq!(
        h.standin().requests().last().unwrap().body,
        body,
        "request body untouched"
    );
    // Responses: the upstream's own CBOR (map order shuffled per response), untouched.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let r = crate::support::http::once(
            h.proxy,
            "GET",
            &format!("{CMS}/bytes"),
            &[("Accept", "application/cbor")],
            None,
        );
        assert_eq!(r.status, 200);
        seen.insert(r.body);
    }
    assert!(
        seen.len() > 1,
        "the upstream's random map order reaches the client: nothing re-encoded"
    );
    let w = cbor_watch(&h);
    assert_eq!(w.header("content-type"), Some("application/cbor-seq"));
    assert_eq!(h.metric("cborgate_codec_duration_seconds_count", &[]), 0.0);
    let caps = crate::support::http::once(h.admin, "GET", "/debug/capabilities", &[], None);
    assert!(String::from_utf8_lossy(&caps.body).contains("\"upstream\":\"cbor\""));
}

#[test]
fn upgrade_lets_a_json_client_exercise_the_cbor_path() {
    let h = Harness::start_with("upgrade", &[], upstream("cbor"));
    let json_hdr = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let mut c = Conn::connect(h.proxy);
    // create
    let mut posted = cm("up");
    posted["binaryData"] = json!({"b": "AAH//g=="});
    let r = c.request("POST", CMS, &json_hdr, Some(posted.to_string().as_bytes()));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let created: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(created["metadata"]["name"], "up");
    // `binaryData` is []byte: the body went up as JSON, so the bytes are 00 01 ff fe.
    assert_eq!(created["binaryData"]["b"], "AAH//g==");
    // get, list
    let r = c.request(
        "GET",
        &format!("{CMS}/up"),
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["k"],
        "v"
    );
    let r = c.request("GET", CMS, &[("Accept", "application/json")], None);
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["metadata"]["name"] == "up"));
    // apply (YAML media type, JSON text)
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "up"}, "data": {"k": "applied"}});
    let r = c.request(
        "PATCH",
        &format!("{CMS}/up?fieldManager=load"),
        &[
            ("Content-Type", "application/apply-patch+yaml"),
            ("Accept", "application/json"),
        ],
        Some(apply.to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["k"],
        "applied"
    );
    // watch: cbor-seq upstream, JSON lines to the client
    let r = c.request(
        "GET",
        &format!("{CMS}?watch=1&timeoutSeconds=1"),
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    let events: Vec<Value> = r
        .body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert!(
        events.len() >= 2 && events.iter().all(|e| e["type"] == "ADDED"),
        "{events:?}"
    );
    // errors come back as JSON Status
    let r = c.request(
        "GET",
        &format!("{CMS}/missing"),
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap()["reason"],
        "NotFound"
    );
    // The upstream received only CBOR request bodies, except the ConfigMap's create (a kind
    // with `[]byte` fields keeps its JSON), and was asked for CBOR.
    for req in h.standin().requests() {
        if req.method == "POST" {
            assert_eq!(req.header("content-type"), Some("application/json"));
        } else if !req.body.is_empty() {
            let ct = req.header("content-type").unwrap_or("");
            assert!(
                ct == "application/cbor" || ct == "application/apply-patch+cbor",
                "{ct}"
            );
            cbor_to_json(&req.body, CborToJsonOptions::default()).expect("valid CBOR upstream");
        }
        assert!(
            req.header("accept")
                .unwrap_or("")
                .starts_with("application/cbor"),
            "{:?}",
            req.header("accept")
        );
    }
    // Protobuf clients are left alone.
    let r = c.request(
        "GET",
        &format!("{CMS}/up"),
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        None,
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert_eq!(
        h.standin().requests().last().unwrap().header("accept"),
        Some("application/vnd.kubernetes.protobuf")
    );
}

/// Native mode is the CBOR-enabled server exactly: an upstream that resets before
/// answering ends the client's connection too (client-go fails fast, as it would
/// directly), never a 503 with `Retry-After` that it would retry for seconds. It is
/// still counted as the upstream failure it is (503, as legacy mode answers it), not as
/// 499, a client that went away.
#[test]
fn native_mode_lets_an_upstream_reset_reach_the_client() {
    let upstream = crate::support::harness::fake_upstream(|_w| {
        // Read the head, answer nothing, close.
    });
    let h = Harness::proxy_to(&format!("http://{upstream}"), "native", &[]);
    let mut c = Conn::connect(h.proxy);
    c.send(
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    crate::support::harness::eventually(5, "no answer, only a close", || c.is_closed());
    h.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    assert_eq!(h.metric("cborgate_requests_total", &[("code", "499")]), 0.0);
    // legacy mode answers the same reset with a Status.
    let h = Harness::proxy_to(&format!("http://{upstream}"), "legacy", &[]);
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 503);
}

/// Native mode labels the CBOR the upstream sends as what it is.
#[test]
fn native_mode_counts_cbor_answers_as_cbor() {
    let h = Harness::start_with("native", &[], upstream("cbor"));
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!((r.status, r.content_type()), (200, "application/cbor"));
    h.wait_metric(
        "cborgate_requests_total",
        &[("verb", "GET"), ("response_format", "cbor")],
        1.0,
    );
}

/// The upstream's own CBOR watch passes through untouched and still has its events
/// counted in `cborgate_watch_events_total{format="cbor"}`, and its stream in
/// `cborgate_watch_streams_active` while it is open.
#[test]
fn native_mode_counts_the_events_of_a_cbor_watch_it_passes_through() {
    let h = Harness::start_with("native", &[], upstream("cbor"));
    let w = cbor_watch(&h);
    assert_eq!(w.header("content-type"), Some("application/cbor-seq"));
    let events = crate::support::bodies::decode_seq(&w.body);
    assert!(
        !events.is_empty() && events.iter().all(|e| e["type"] == "ADDED"),
        "{events:?}"
    );
    h.wait_metric(
        "cborgate_watch_events_total",
        &[("format", "cbor")],
        events.len() as f64,
    );
    h.wait_metric("cborgate_watch_streams_active", &[], 0.0);
    // Nothing was transcoded to count them.
    assert_eq!(h.metric("cborgate_codec_duration_seconds_count", &[]), 0.0);
}

/// `/readyz` on the admin listener: (status, body).
fn readyz(h: &Harness) -> (u16, String) {
    let r = crate::support::http::once(h.admin, "GET", "/readyz", &[], None);
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

/// Upgrade mode in front of a JSON-only upstream: the upstream's own `/readyz` answers 200
/// there as on a CBOR-enabled one (so does a real kube-apiserver 1.36.2's, anonymous or
/// not), but cborgate's CBOR probe (a SelfSubjectReview asked for in CBOR) gets 406, with
/// no client traffic at all: `/readyz` is 503 and says the upstream refuses CBOR, and
/// the metrics tell that apart from an unreachable upstream. When a CBOR-enabled server
/// takes its place, `/readyz` is 200 again within 30 s, still with no client traffic.
#[test]
fn upgrade_in_front_of_a_json_only_upstream_is_not_ready_until_one_with_cbor_replaces_it() {
    let h = Harness::start_with("upgrade", &[], upstream("legacy"));
    let want = "the upstream refuses CBOR (406 to POST selfsubjectreviews.authentication.k8s.io); \
                --mode upgrade needs an apiserver with CBORServingAndStorage=true\n";
    crate::support::harness::eventually(10, "/readyz 503 from the CBOR probe", || {
        readyz(&h) == (503, want.into())
    });
    assert!(h.standin().requests().is_empty(), "no client traffic");
    assert_eq!(h.metric("cborgate_upstream_ready", &[]), 0.0);
    assert_eq!(h.metric("cborgate_upstream_cbor", &[]), 0.0);
    // Clients still get the upstream's 406 unchanged, and the reason stays.
    let r =
        crate::support::http::once(h.proxy, "GET", CMS, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 406, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(readyz(&h), (503, want.into()));
    h.standin().clear_requests();

    // A CBOR-enabled apiserver takes its place.
    h.standin().set_cbor(CborMode::On);
    let t = std::time::Instant::now();
    crate::support::harness::eventually(30, "/readyz 200 with no client traffic", || {
        readyz(&h).0 == 200
    });
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    assert!(h.standin().requests().is_empty(), "no client traffic");
    assert_eq!(readyz(&h), (200, "ok".into()));
    assert_eq!(h.metric("cborgate_upstream_ready", &[]), 1.0);
    assert_eq!(h.metric("cborgate_upstream_cbor", &[]), 1.0);
}

/// A refusal learned from a client's request turns `/readyz` 503 at once (recorded before
/// the client had its answer), without waiting for the next CBOR probe.
#[test]
fn upgrade_learns_a_refusal_from_a_request_before_the_probe() {
    let h = Harness::start_with("upgrade", &[], upstream("cbor"));
    crate::support::harness::eventually(10, "/readyz 200 from the probes", || readyz(&h).0 == 200);
    h.standin().set_cbor(CborMode::Off);
    let r =
        crate::support::http::once(h.proxy, "GET", CMS, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 406, "{}", String::from_utf8_lossy(&r.body));
    let (status, body) = readyz(&h);
    assert_eq!(status, 503);
    assert!(body.starts_with("the upstream refuses CBOR ("), "{body}");
    assert_eq!(h.metric("cborgate_upstream_cbor", &[]), 0.0);
}

/// Upgrade mode in front of a CBOR-enabled upstream stays ready: its answers are CBOR.
#[test]
fn upgrade_in_front_of_a_cbor_enabled_upstream_stays_ready() {
    let h = Harness::start_with("upgrade", &[], upstream("cbor"));
    crate::support::harness::eventually(10, "/readyz 200 from the probe", || readyz(&h).0 == 200);
    let r =
        crate::support::http::once(h.proxy, "GET", CMS, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(readyz(&h), (200, "ok".into()));
    assert_eq!(h.metric("cborgate_upstream_ready", &[]), 1.0);
}
