//! The `group`, `resource` and `client` labels (docs/wire.md §6) through the real binary:
//! the cap on distinct (group, resource) pairs holds against 10,000 CRD resource names,
//! and every query of deploy/README.md's "Deciding to turn CBOR on" guide, and every
//! recording rule of deploy/monitoring/prometheusrule.yaml, evaluated on a real scrape
//! (`support::promql`), gives the answer the traffic that was sent says it must.

use crate::support::bodies::cbor;
use crate::support::harness::Harness;
use crate::support::http::{Conn, Resp};
use crate::support::promql::{eval, parse_exposition, Labels, Sample};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

const KCM: &str = "kube-controller-manager/v1.36.0 (linux/amd64) kubernetes/abc";
const KUBECTL: &str = "kubectl/v1.36.0 (linux/amd64) kubernetes/abc";
const OPERATOR: &str = "my-operator/v0.1.0";
const CBOR: &str = "application/cbor";
const JSON: &str = "application/json";

/// The families that carry `group` and `resource`.
const LABELLED: [&str; 6] = [
    "cborgate_requests_total",
    "cborgate_codec_duration_seconds",
    "cborgate_codec_bytes_total",
    "cborgate_fallbacks_total",
    "cborgate_unsupported_media_type_total",
    "cborgate_not_acceptable_total",
];

/// The queries of the guide, by the name each one's first comment line gives it.
fn guide_queries() -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/README.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("## Deciding to turn CBOR on")
        .expect("the guide in deploy/README.md");
    let section = &text[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut out = BTreeMap::new();
    for block in section.split("```promql\n").skip(1) {
        let query = block.split("```").next().unwrap();
        let name = query
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# "))
            .expect("each query starts with `# name`");
        assert!(
            out.insert(name.to_string(), query.to_string()).is_none(),
            "{name} twice"
        );
    }
    out
}

/// The recording rules (record name, expression), in order.
fn recording_rules() -> Vec<(String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/monitoring/prometheusrule.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        let Some(name) = l.trim_start().strip_prefix("- record:") else {
            continue;
        };
        // The SLO burn rates (`cborgate_request:burnrate*`) use regex matchers this
        // small evaluator does not read; promtool evaluates them (rules-test.yaml).
        if name.trim().starts_with("cborgate_request:") {
            continue;
        }
        let at = n
            + 1
            + lines[n + 1..]
                .iter()
                .position(|e| e.trim_start().starts_with("expr: |"))
                .unwrap();
        let expr: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|b| !b.trim().is_empty() && indent(b) > indent(lines[at]))
            .copied()
            .collect();
        out.push((name.trim().to_string(), expr.join("\n")));
    }
    out
}

/// Evaluate every recording rule, in order, each seeing the ones before it (as
/// Prometheus evaluates a group), and add what they record to `samples`.
fn record(samples: &mut Vec<Sample>) -> BTreeMap<String, Vec<(Labels, f64)>> {
    let mut recorded = BTreeMap::new();
    for (name, expr) in recording_rules() {
        let v = eval(&expr, samples)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .vector();
        for (labels, value) in &v {
            samples.push(Sample {
                name: name.clone(),
                labels: labels.clone(),
                value: *value,
            });
        }
        recorded.insert(name, v);
    }
    recorded
}

/// The distinct (group, resource) pairs of a family's samples.
fn pairs(samples: &[Sample], family: &str) -> BTreeSet<(String, String)> {
    samples
        .iter()
        .filter(|s| {
            s.name
                .strip_prefix(family)
                .is_some_and(|rest| ["", "_bucket", "_sum", "_count"].contains(&rest))
        })
        .map(|s| (s.labels["group"].clone(), s.labels["resource"].clone()))
        .collect()
}

fn key(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ten_thousand_crd_resources_stay_under_the_cap() {
    const CAP: usize = 50;
    const CRDS: usize = 10_000;
    let h = Harness::start("legacy", &["--metrics-max-resources", &CAP.to_string()]);
    let mut c = Conn::connect(h.proxy);
    let r = c.request(
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        &[("Accept", CBOR), ("User-Agent", KCM)],
        None,
    );
    assert_eq!(r.status, 200);
    // Each name once, in groups of their own and shared ones; every one a 404 from the
    // stand-in (no such CRD), transcoded to CBOR for the client, counted all the same.
    let agents = [KCM, KUBECTL, OPERATOR];
    std::thread::scope(|s| {
        for t in 0..4 {
            let proxy = h.proxy;
            s.spawn(move || {
                let mut c = Conn::connect(proxy);
                for i in (t..CRDS).step_by(4) {
                    let path = format!(
                        "/apis/crd{}.example.com/v1/namespaces/ns-{i}/widgets{i}/obj-{i}",
                        i % 300
                    );
                    let ua = agents[i % agents.len()];
                    let r = c.request("GET", &path, &[("Accept", CBOR), ("User-Agent", ua)], None);
                    assert_eq!(r.status, 404, "{path}");
                    assert_eq!(r.content_type(), CBOR);
                }
            });
        }
    });
    let requests = (CRDS + 1) as f64;
    h.wait_metric("cborgate_requests_total", &[], requests);
    let text = h.metrics();
    let samples = parse_exposition(&text);
    let fixed = ["(discovery)", "(nonresource)", "(other)"];
    for family in LABELLED {
        let seen = pairs(&samples, family);
        let own = seen
            .iter()
            .filter(|(g, _)| !fixed.contains(&g.as_str()))
            .count();
        assert!(
            own <= CAP && seen.len() <= CAP + fixed.len(),
            "{family}: {} pairs: {seen:?}",
            seen.len()
        );
        // No namespace, object name or version ever became a label value.
        for s in samples.iter().filter(|s| s.name.starts_with(family)) {
            assert!(
                s.labels
                    .values()
                    .all(|v| !v.contains("ns-") && !v.contains("obj-")),
                "{s:?}"
            );
        }
    }
    // The first CAP pairs have their own labels (configmaps, then CAP - 1 CRDs, in the
    // order they arrived); everything later is (other).
    let seen = pairs(&samples, "cborgate_requests_total");
    assert!(seen.contains(&(String::new(), "configmaps".into())));
    assert!(seen.contains(&("(other)".into(), "(other)".into())));
    let own = (CAP - 1) as f64;
    let other = h.metric("cborgate_requests_total", &[("resource", "(other)")]);
    assert_eq!(other, CRDS as f64 - own);
    assert!(
        h.metric(
            "cborgate_codec_bytes_total",
            &[("resource", "(other)"), ("format", "json")]
        ) > 0.0,
        "the (other) bucket has the codec bytes of the rest"
    );
    // Bounded in all: each family's series are at most its pairs times its other
    // labels' values seen here (3 clients, 2 codes), never one per name.
    let series = |family: &str| samples.iter().filter(|s| s.name == family).count();
    assert!(series("cborgate_requests_total") <= (CAP + fixed.len()) * 3 * 2);
    assert!(series("cborgate_codec_bytes_total") <= (CAP + fixed.len()) * 2);
    assert!(series("cborgate_codec_duration_seconds_count") <= CAP + fixed.len() + 3);
    // The guide's "whether the answers see every resource" query says so.
    let over = eval(&guide_queries()["share-over-the-cap"], &samples)
        .unwrap()
        .vector();
    assert_eq!(over.len(), 1, "{over:?}");
    assert!((over[0].1 - other / requests).abs() < 1e-12, "{over:?}");
    assert!(over[0].1 > 0.99);
}

/// A read of the guide test: (client label, User-Agent, path, Accept, the (group,
/// resource) its transcoded body is counted under).
type Read = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    (&'static str, &'static str),
);

/// What the client got, and whether it got CBOR.
fn cbor_answer(r: &Resp) -> bool {
    r.content_type().starts_with(CBOR)
}

/// Counts the traffic of the guide test sends, as the guide's queries must find it.
#[derive(Default)]
struct Expected {
    /// client → (requests, answered in CBOR)
    clients: BTreeMap<&'static str, (u32, u32)>,
    /// (group, resource) → (CBOR bytes, JSON bytes) through the codec.
    bytes: BTreeMap<(String, String), (u64, u64)>,
}

impl Expected {
    fn answered(&mut self, client: &'static str, r: &Resp) {
        let e = self.clients.entry(client).or_default();
        e.0 += 1;
        e.1 += u32::from(cbor_answer(r));
    }

    fn transcoded(&mut self, group: &str, resource: &str, cbor: usize, json: usize) {
        let e = self
            .bytes
            .entry((group.to_string(), resource.to_string()))
            .or_default();
        e.0 += cbor as u64;
        e.1 += json as u64;
    }
}

#[test]
fn the_guide_queries_answer_from_a_real_scrape() {
    // auto mode in front of a JSON-only apiserver: CBOR answers are transcoded from
    // JSON, CBOR bodies are tried as CBOR first, refused (415) and replayed as JSON.
    let h = Harness::start("auto", &[]);
    let mut c = Conn::connect(h.proxy);
    let mut want = Expected::default();
    let cms = "/api/v1/namespaces/demo/configmaps";
    let gadgets = "/apis/corpus.example.com/v1/namespaces/demo/gadgets";
    // Writes with CBOR bodies (answers in JSON, so only the bodies are transcoded): the
    // first of each (verb, group, resource) is a fallback.
    let posts: [(&'static str, &str, &str, serde_json::Value); 3] = [
        (
            "kube-controller-manager",
            KCM,
            cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g1"}, "data": {"a": "1", "bbbbbbbb": "some longer text"}}),
        ),
        (
            "kube-controller-manager",
            KCM,
            cms,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g2", "labels": {"app": "web"}}, "data": {"k": "v"}}),
        ),
        (
            "other",
            OPERATOR,
            gadgets,
            json!({"apiVersion": "corpus.example.com/v1", "kind": "Gadget", "metadata": {"name": "g3"}, "spec": {"size": 12345}}),
        ),
    ];
    for (client, ua, path, obj) in &posts {
        let body = cbor(obj);
        let headers = [
            ("Content-Type", CBOR),
            ("Accept", JSON),
            ("User-Agent", *ua),
        ];
        let r = c.request("POST", path, &headers, Some(&body));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        want.answered(client, &r);
        let sent = h.standin().requests().last().unwrap().body.len();
        let (group, resource) = match *path == cms {
            true => ("", "configmaps"),
            false => ("corpus.example.com", "gadgets"),
        };
        want.transcoded(group, resource, body.len(), sent);
    }
    // Reads answered in CBOR (transcoded from the JSON the stand-in sends, which the
    // same request straight to the stand-in gets too) or in JSON (passed through).
    let reads: [Read; 6] = [
        (
            "kube-controller-manager",
            KCM,
            cms,
            CBOR,
            ("", "configmaps"),
        ),
        (
            "kube-controller-manager",
            KCM,
            cms,
            CBOR,
            ("", "configmaps"),
        ),
        (
            "kube-controller-manager",
            KCM,
            "/api/v1/namespaces/demo/configmaps/g1",
            CBOR,
            ("", "configmaps"),
        ),
        (
            "other",
            OPERATOR,
            gadgets,
            CBOR,
            ("corpus.example.com", "gadgets"),
        ),
        ("kubectl", KUBECTL, cms, JSON, ("", "")),
        ("kubectl", KUBECTL, cms, JSON, ("", "")),
    ];
    let mut direct = Conn::connect(h.upstream);
    for (client, ua, path, accept, (group, resource)) in reads {
        let r = c.request("GET", path, &[("Accept", accept), ("User-Agent", ua)], None);
        assert_eq!(r.status, 200, "{path}");
        want.answered(client, &r);
        assert_eq!(cbor_answer(&r), accept == CBOR, "{path}");
        if accept == CBOR {
            let j = direct.request("GET", path, &[("Accept", JSON), ("User-Agent", ua)], None);
            assert_eq!(j.status, 200);
            want.transcoded(group, resource, r.body.len(), j.body.len());
        }
    }
    // Discovery is never CBOR (docs/wire.md §1): cborgate's own 406, counted under
    // (discovery).
    let r = c.request(
        "GET",
        "/api/v1",
        &[("Accept", CBOR), ("User-Agent", OPERATOR)],
        None,
    );
    assert_eq!(r.status, 406);
    want.answered("other", &r);
    // A CBOR patch no CBOR-enabled apiserver takes either: cborgate's own 415.
    let r = c.request(
        "PATCH",
        "/api/v1/namespaces/demo/configmaps/g1",
        &[
            ("Content-Type", CBOR),
            ("Accept", JSON),
            ("User-Agent", KUBECTL),
        ],
        Some(&cbor(&json!({"data": {"a": "2"}}))),
    );
    assert_eq!(r.status, 415);
    want.answered("kubectl", &r);
    let total: u32 = want.clients.values().map(|c| c.0).sum();
    h.wait_metric("cborgate_requests_total", &[], f64::from(total));
    let mut samples = parse_exposition(&h.metrics());
    let q = guide_queries();
    let names: Vec<&str> = q.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "bytes-saved-by-resource",
            "cbor-share-by-client",
            "codec-time-by-resource",
            "fallbacks-by-client",
            "share-over-the-cap",
            "unsupported-media-type-by-client",
        ],
        "every query of the guide is checked here"
    );
    let run = |name: &str, samples: &[Sample]| {
        eval(&q[name], samples).unwrap_or_else(|e| panic!("{name}: {e}"))
    };

    // Which clients speak CBOR: the share of each one's requests answered in CBOR;
    // kubectl, which never asked, is not in the answer.
    let share = run("cbor-share-by-client", &samples).by(&["client"]);
    let mut expect = BTreeMap::new();
    for (client, (n, cbor)) in &want.clients {
        if *cbor > 0 {
            expect.insert(key(&[client]), f64::from(*cbor) / f64::from(*n));
        }
    }
    assert_eq!(share, expect);
    assert!(share[&key(&["kube-controller-manager"])] > 0.0);

    // How many bytes CBOR saves, per resource: 1 - CBOR/JSON of exactly the bodies
    // sent and received, between 0 and 1.
    let saved = run("bytes-saved-by-resource", &samples).by(&["group", "resource"]);
    let mut expect = BTreeMap::new();
    for ((group, resource), (cbor, json)) in &want.bytes {
        expect.insert(key(&[group, resource]), 1.0 - *cbor as f64 / *json as f64);
    }
    assert_eq!(
        saved.keys().collect::<Vec<_>>(),
        expect.keys().collect::<Vec<_>>()
    );
    for (k, v) in &saved {
        assert!((v - expect[k]).abs() < 1e-12, "{k:?}: {v} vs {}", expect[k]);
        assert!(*v > 0.0 && *v < 1.0, "{k:?}: {v}");
    }

    // Which resources cost codec time: every transcoded resource, largest first, and
    // together all of the codec's time.
    let time = run("codec-time-by-resource", &samples).vector();
    let spent: BTreeSet<Vec<String>> = time
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(l, _)| key(&[&l.get("group").cloned().unwrap_or_default(), &l["resource"]]))
        .collect();
    assert_eq!(spent, expect.keys().cloned().collect());
    assert!(time.windows(2).all(|w| w[0].1 >= w[1].1), "{time:?}");
    let all: f64 = samples
        .iter()
        .filter(|s| s.name == "cborgate_codec_duration_seconds_sum")
        .map(|s| s.value)
        .sum();
    let top: f64 = time.iter().map(|t| t.1).sum();
    assert!((top - all).abs() < 1e-9, "{top} vs {all}");

    // Which clients hit fallbacks and 415s.
    let fallbacks = run("fallbacks-by-client", &samples).by(&["client"]);
    assert_eq!(
        fallbacks,
        BTreeMap::from([
            (key(&["kube-controller-manager"]), 1.0),
            (key(&["other"]), 1.0)
        ])
    );
    let refused = run("unsupported-media-type-by-client", &samples).by(&["client", "origin"]);
    assert_eq!(
        refused,
        BTreeMap::from([
            (key(&["kube-controller-manager", "upstream"]), 1.0),
            (key(&["kubectl", "proxy"]), 1.0),
            (key(&["other", "proxy"]), 0.0),
            (key(&["other", "upstream"]), 1.0),
        ])
    );

    let not_acceptable = |resource: &str| {
        let labels = [
            ("origin", "proxy"),
            ("client", "other"),
            ("resource", resource),
        ];
        crate::support::harness::metric_sum(&h.metrics(), "cborgate_not_acceptable_total", &labels)
    };
    assert_eq!(not_acceptable("(discovery)"), 1.0);

    // Nothing is over the cap: no request under (other).
    let over = run("share-over-the-cap", &samples).vector();
    assert!(over.iter().all(|(_, v)| *v == 0.0), "{over:?}");

    // The recording rules evaluate on the same scrape, and record what the guide asks.
    let recorded = record(&mut samples);
    for (name, v) in &recorded {
        assert!(!v.is_empty(), "{name} records nothing");
    }
    let ratio: BTreeMap<Vec<String>, f64> = recorded["cborgate:cbor_bytes_saved:ratio5m"]
        .iter()
        .map(|(l, v)| {
            let g = l.get("group").cloned().unwrap_or_default();
            (key(&[&g, &l["resource"]]), *v)
        })
        .collect();
    assert_eq!(ratio, saved);
    let by_client = eval(
        "sum by (client) (cborgate:requests_by_client_format:rate5m{response_format=\"cbor\"}) \
         / sum by (client) (cborgate:requests_by_client_format:rate5m)",
        &samples,
    )
    .unwrap()
    .by(&["client"]);
    assert_eq!(by_client, share);
}

/// A query with its target matchers and Grafana's rate window taken out, and its
/// whitespace and comment lines too: what the dashboard and the guide must share.
fn bare(query: &str) -> String {
    let text: Vec<&str> = query
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    text.join(" ")
        .replace("namespace=~\"$namespace\", job=~\"$job\", ", "")
        .replace("namespace=~\"$namespace\", job=~\"$job\"", "")
        .replace("{}", "")
        .replace("[$__rate_interval]", "[5m]")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The dashboard's "CBOR adoption" row shows the guide's queries, for the dashboard's
/// namespace and job, and nothing else.
#[test]
fn the_dashboard_row_shows_the_guide_queries() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/monitoring/grafana-dashboard.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    let row = panels
        .iter()
        .position(|p| p["type"] == "row" && p["title"] == "CBOR adoption")
        .expect("a CBOR adoption row");
    let shown: Vec<String> = panels[row + 1..]
        .iter()
        .take_while(|p| p["type"] != "row")
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| bare(t["expr"].as_str().unwrap()))
        .collect();
    let guide: BTreeSet<String> = guide_queries().values().map(|q| bare(q)).collect();
    assert!(shown.len() >= 5, "{shown:#?}");
    for q in &shown {
        assert!(
            guide.contains(q),
            "not a query of the guide: {q}\n{guide:#?}"
        );
    }
}

/// `native` mode in front of a JSON-only apiserver (the stand-in; a real 1.30 answers
/// the same): the JSON answer is `response_format="json"` whatever the `Accept` listed.
#[test]
fn native_mode_labels_a_json_answer_json_whatever_the_accept() {
    let h = Harness::start("native", &[]);
    let mut c = Conn::connect(h.proxy);
    let cms = "/api/v1/namespaces/demo/configmaps";
    for accept in [
        "application/cbor, application/json",
        "application/cbor;q=1, application/json;q=0.5",
        JSON,
    ] {
        let r = c.request("GET", cms, &[("Accept", accept)], None);
        assert_eq!((r.status, r.content_type()), (200, JSON), "{accept}");
    }
    let filter = [("verb", "LIST"), ("code", "200")];
    h.wait_metric(
        "cborgate_requests_total",
        &[filter[0], filter[1], ("response_format", "json")],
        3.0,
    );
    assert_eq!(h.metric("cborgate_requests_total", &filter), 3.0);
}
