//! `cborgate_requests_total` against kube-apiserver's own `apiserver_request_total`
//! (docs/wire.md §6): a fixed set of requests through cborgate (GET, LIST, WATCH, create,
//! a dry-run create, update, patch, a CBOR apply, delete, a subresource, a namespaced and
//! a cluster-scoped resource, an error) moves both counters by the same amounts, label by
//! label (`verb`, `dry_run`, `group`, `version`, `resource`, `subresource`, `scope`,
//! `code`), and the duration histograms have the same buckets. Everything else that
//! reaches these resources (the controllers) goes through cborgate too, so both sides
//! count it alike; the deltas are compared once every request has ended on both sides.

use crate::procs::poll;
use crate::support::bodies;
use crate::Suite;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub const CASES: [crate::Case; 1] = [(
    "request_metrics_match_the_apiservers",
    request_metrics_match,
)];

/// The labels both families share, in this order.
fn shared() -> [&'static str; 8] {
    cborgate::metrics::REQUEST_LABELS[..8]
        .try_into()
        .expect("eight shared labels")
}

const NS: &str = "cborgate-request-metrics";
const ROLE: &str = "cborgate-request-metrics";

/// The value of `name` in a label text `a="x",b="y"` (values here hold no `,` or `"`).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.trim_matches('"'))
    })
}

/// The series of `family` over the resources this case touches, summed by the shared
/// labels (cborgate's own labels, formats and client, summed away).
fn counts(text: &str, family: &str) -> BTreeMap<[String; 8], f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in crate::cluster::samples(text, family) {
        let key = shared().map(|l| label(labels, l).unwrap_or("").to_string());
        let ours = matches!(
            (key[2].as_str(), key[4].as_str(), key[5].as_str()),
            ("", "podtemplates", _)
                | ("apps", "deployments", "scale")
                | ("rbac.authorization.k8s.io", "clusterroles", _)
        );
        if ours {
            *out.entry(key).or_insert(0.0) += value;
        }
    }
    out
}

fn delta(
    before: &BTreeMap<[String; 8], f64>,
    after: &BTreeMap<[String; 8], f64>,
) -> BTreeMap<[String; 8], f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

fn apiserver_metrics(s: &Suite) -> String {
    let r = s
        .direct
        .request("GET", "/metrics", &[("Accept", "text/plain")], None);
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

/// The `le` boundaries of a histogram family's buckets.
fn buckets(text: &str, family: &str) -> BTreeSet<String> {
    crate::cluster::samples(text, &format!("{family}_bucket"))
        .filter_map(|(labels, _)| label(labels, "le").map(str::to_string))
        .collect()
}

fn request_metrics_match(s: &mut Suite) {
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    // Set-up straight to the apiserver: not part of the comparison.
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    let r = s.direct.request(
        "POST",
        "/api/v1/namespaces",
        &json,
        Some(ns.to_string().as_bytes()),
    );
    assert!(matches!(r.status, 201 | 409), "{}", r.text());
    let deploy = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "example.invalid/c"}]}}}
    });
    let r = s.direct.request(
        "POST",
        &format!("/apis/apps/v1/namespaces/{NS}/deployments"),
        &json,
        Some(deploy.to_string().as_bytes()),
    );
    assert!(matches!(r.status, 201 | 409), "{}", r.text());

    let gate_before = counts(&s.gate.metrics(), "cborgate_requests_total");
    let api_before = counts(&apiserver_metrics(s), "apiserver_request_total");

    let t = &s.through;
    let base = format!("/api/v1/namespaces/{NS}/podtemplates");
    let template = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
            "template": {"spec": {"containers": [{"name": "c", "image": "example.invalid/c"}]}}})
    };
    let expect =
        |method: &str, path: &str, headers: &[(&str, &str)], body: Option<Vec<u8>>, code: u16| {
            let r = t.request(method, path, headers, body.as_deref());
            assert_eq!(r.status, code, "{method} {path}: {}", r.text());
            r
        };
    let pt = template("pt");
    expect("POST", &base, &json, Some(pt.to_string().into_bytes()), 201);
    expect(
        "POST",
        &format!("{base}?dryRun=All"),
        &json,
        Some(template("dry").to_string().into_bytes()),
        201,
    );
    let got = expect("GET", &format!("{base}/pt"), &json, None, 200).json();
    expect("GET", &base, &json, None, 200);
    expect(
        "GET",
        &format!("{base}?watch=1&timeoutSeconds=1"),
        &json,
        None,
        200,
    );
    expect(
        "PUT",
        &format!("{base}/pt"),
        &json,
        Some(got.to_string().into_bytes()),
        200,
    );
    expect(
        "PATCH",
        &format!("{base}/pt"),
        &[
            ("Content-Type", "application/merge-patch+json"),
            ("Accept", "application/json"),
        ],
        Some(br#"{"metadata":{"labels":{"a":"b"}}}"#.to_vec()),
        200,
    );
    let apply = bodies::cbor(&template("applied"));
    expect(
        "PATCH",
        &format!("{base}/applied?fieldManager=request-metrics"),
        &[
            ("Content-Type", "application/apply-patch+cbor"),
            ("Accept", "application/cbor"),
        ],
        Some(apply),
        201,
    );
    expect("GET", &format!("{base}/missing"), &json, None, 404);
    expect("DELETE", &format!("{base}/pt"), &json, None, 200);
    expect("DELETE", &format!("{base}/applied"), &json, None, 200);
    expect(
        "GET",
        &format!("/apis/apps/v1/namespaces/{NS}/deployments/web/scale"),
        &json,
        None,
        200,
    );
    let role = serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": ROLE}, "rules": []});
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    expect(
        "POST",
        roles,
        &json,
        Some(role.to_string().into_bytes()),
        201,
    );
    expect("GET", &format!("{roles}/{ROLE}"), &json, None, 200);
    expect("GET", roles, &json, None, 200);
    expect("DELETE", &format!("{roles}/{ROLE}"), &json, None, 200);

    // Every request above has ended on both sides once the deltas agree (the apiserver
    // counts a request when its handler returns, cborgate when its answer is written).
    let mut last = (BTreeMap::new(), BTreeMap::new());
    let agreed = poll(Duration::from_secs(30), || {
        let gate = delta(
            &gate_before,
            &counts(&s.gate.metrics(), "cborgate_requests_total"),
        );
        let api = delta(
            &api_before,
            &counts(&apiserver_metrics(s), "apiserver_request_total"),
        );
        let same = gate == api;
        last = (gate, api);
        same.then_some(())
    });
    let (gate, api) = &last;
    let show = |m: &BTreeMap<[String; 8], f64>| {
        m.iter()
            .map(|(k, v)| {
                format!(
                    "  {} => {v}",
                    shared()
                        .iter()
                        .zip(k)
                        .map(|(l, v)| format!("{l}={v:?}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        agreed.is_some(),
        "cborgate's deltas:\n{}\nthe apiserver's:\n{}",
        show(gate),
        show(api)
    );
    // The requests this case sent are among them, with the apiserver's values.
    let has = |verb: &str,
               dry_run: &str,
               group: &str,
               resource: &str,
               sub: &str,
               scope: &str,
               code: &str| {
        let key = [verb, dry_run, group, "v1", resource, sub, scope, code].map(str::to_string);
        assert!(
            gate.get(&key).is_some_and(|v| *v >= 1.0),
            "{key:?} not in:\n{}",
            show(gate)
        );
    };
    // kube-apiserver 1.36 says `resource` for a named object and for a create, before
    // `namespace`.
    has("POST", "", "", "podtemplates", "", "resource", "201");
    has("POST", "All", "", "podtemplates", "", "resource", "201");
    has("GET", "", "", "podtemplates", "", "resource", "200");
    has("GET", "", "", "podtemplates", "", "resource", "404");
    has("LIST", "", "", "podtemplates", "", "namespace", "200");
    has("WATCH", "", "", "podtemplates", "", "namespace", "200");
    has("PUT", "", "", "podtemplates", "", "resource", "200");
    has("PATCH", "", "", "podtemplates", "", "resource", "200");
    // A CBOR apply reaches this apiserver as apply-patch+yaml: APPLY on both sides.
    has("APPLY", "", "", "podtemplates", "", "resource", "201");
    has("DELETE", "", "", "podtemplates", "", "resource", "200");
    has("GET", "", "apps", "deployments", "scale", "resource", "200");
    has(
        "POST",
        "",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "resource",
        "201",
    );
    has(
        "GET",
        "",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "resource",
        "200",
    );
    has(
        "LIST",
        "",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "cluster",
        "200",
    );
    has(
        "DELETE",
        "",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "resource",
        "200",
    );

    let gate_text = s.gate.metrics();
    assert!(
        crate::cluster::samples(&gate_text, "cborgate_requests_total").all(|(l, _)| label(
            l,
            "component"
        ) == Some(
            "cborgate"
        )),
        "component=\"cborgate\" on every series"
    );
    let ours = buckets(&gate_text, "cborgate_request_duration_seconds");
    let theirs = buckets(&apiserver_metrics(s), "apiserver_request_duration_seconds");
    assert_eq!(ours, theirs, "the duration buckets are the apiserver's");
    for le in ["1", "5", "30"] {
        assert!(ours.contains(le), "le={le} in {ours:?}");
    }
    eprintln!(
        "request metrics: {} series agree with the apiserver's; {} buckets",
        gate.len(),
        ours.len()
    );
}
