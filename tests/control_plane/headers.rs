//! Header sets as large as kube-apiserver takes (docs/surface.md, on request heads):
//! Go limits a request head by bytes (1 MiB `MaxHeaderBytes`), not by count, and a
//! user impersonating someone with hundreds of groups sends one `Impersonate-Group`
//! line per group. Over HTTP/2 cborgate takes the same 1 MiB header list and forwards
//! every `Impersonate-*` line, in order; over HTTP/1.1 pingora's parser stops at 256
//! lines, and beyond them the client gets a 431 `Status` instead of a bare 400.

use crate::http::Client;
use crate::Suite;

pub const CASES: [crate::Case; 2] = [
    ("impersonate_2000_groups_over_http2", http2_groups),
    ("impersonate_300_groups_over_http1", http1_groups),
];

fn groups(n: usize) -> Vec<String> {
    // 40 bytes a value: 2,000 of them are about 90 KB of header lines.
    (0..n)
        .map(|i| format!("impersonated-group-{i:05}-of-a-long-list"))
        .collect()
}

/// kubectl (HTTP/2) impersonating `jane` with 2,000 groups: through cborgate, the
/// same SelfSubjectReview as directly, every group there in the order sent.
fn http2_groups(s: &mut Suite) {
    let gs = groups(2000);
    let mut args: Vec<String> = vec!["--as=jane".into(), "--as-uid=jane-uid".into()];
    args.extend(gs.iter().map(|g| format!("--as-group={g}")));
    args.extend(["auth", "whoami", "-o", "json"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let direct = crate::cluster::kubectl(&s.assets, &s.kc_direct, false, &args, None);
    let through = crate::cluster::kubectl(&s.assets, &s.kc_through, true, &args, None);
    assert!(direct.ok, "directly: {}", direct.stderr);
    assert!(through.ok, "through cborgate: {}", through.stderr);
    // The two reviews are made one after the other: their creationTimestamp may differ
    // by a second (seen in CI), everything else must not.
    let untimed = |out: &str| {
        let mut v: serde_json::Value = serde_json::from_str(out).unwrap();
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("creationTimestamp");
        }
        v
    };
    assert_eq!(
        untimed(&through.stdout),
        untimed(&direct.stdout),
        "through cborgate and directly"
    );
    let review: serde_json::Value = serde_json::from_str(&through.stdout).unwrap();
    let info = &review["status"]["userInfo"];
    assert_eq!(info["username"], "jane");
    assert_eq!(info["uid"], "jane-uid");
    let seen: Vec<&str> = info["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str())
        .filter(|g| g.starts_with("impersonated-group-"))
        .collect();
    assert_eq!(seen, gs, "the groups, in the order sent");
}

const REVIEW: &[u8] = br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// A SelfSubjectReview over HTTP/1.1 impersonating `jane` with `gs`.
fn review(c: &Client, gs: &[String], accept: &str) -> cborgate_standin::client::Resp {
    let mut h: Vec<(&str, &str)> = vec![
        ("Content-Type", "application/json"),
        ("Accept", accept),
        ("Impersonate-User", "jane"),
    ];
    h.extend(gs.iter().map(|g| ("Impersonate-Group", g.as_str())));
    c.request("POST", REVIEWS, &h, Some(REVIEW))
}

/// Over HTTP/1.1: 250 groups pass untouched, in order, as directly; 300 (more than
/// pingora's 256 lines), which the apiserver takes directly, get a 431 `Status`
/// that names the limit and HTTP/2, in JSON or in CBOR as the client asks.
fn http1_groups(s: &mut Suite) {
    let few = groups(250);
    let r = review(&s.through, &few, "application/json");
    assert_eq!(r.status, 201, "250 groups through cborgate: {}", r.text());
    let seen: Vec<String> = r.json()["status"]["userInfo"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str())
        .filter(|g| g.starts_with("impersonated-group-"))
        .map(String::from)
        .collect();
    assert_eq!(seen, few, "the groups, in the order sent");

    let many = groups(300);
    let d = review(&s.direct, &many, "application/json");
    assert_eq!(d.status, 201, "300 groups directly: {}", d.text());
    let r = review(&s.through, &many, "application/json");
    assert_eq!(r.status, 431, "300 groups through cborgate: {}", r.text());
    assert!(
        r.content_type().starts_with("application/json"),
        "{:?}",
        r.headers
    );
    let status = r.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 431);
    assert_eq!(status["reason"], "RequestHeaderFieldsTooLarge");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("256") && message.contains("HTTP/2"),
        "{message}"
    );
    let r = review(
        &s.through,
        &many,
        "application/cbor;q=1, application/json;q=0.9",
    );
    assert_eq!(r.status, 431, "{}", r.text());
    assert_eq!(r.content_type(), "application/cbor", "{:?}", r.headers);
    let through = s.gate.metric(
        "cborgate_client_errors_total",
        &[("kind", "too_many_headers")],
    );
    assert!(through >= 2.0, "cborgate_client_errors_total: {through}");
}
