//! The apiserver's audit `sourceIPs` through cborgate (`--forwarded-for`): kube-apiserver
//! lists the first `X-Forwarded-For` line's addresses, then `X-Real-Ip`, then the
//! connection's address (cborgate's, 127.0.0.1 here) unless it is already last
//! (`utilnet.SourceIPs`, k8s.io/apimachinery `pkg/util/net/http.go`). With the default `append` a client's claim comes first and
//! the client after it; with `replace` only the client, whatever it sent.

use crate::cluster::Gate;
use crate::procs::free_port;
use crate::Suite;
use serde_json::Value;
use std::time::{Duration, Instant};

pub const CASES: [crate::Case; 1] = [("audit_source_ips_follow_forwarded_for", audit_source_ips)];

/// The `sourceIPs` of the audit events whose request URI contains `marker`, once there.
fn source_ips(s: &Suite, marker: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&s.api.audit).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|ev| {
                ev["requestURI"]
                    .as_str()
                    .is_some_and(|u| u.contains(marker))
                    && ev["stage"] == "ResponseComplete"
            });
        if let Some(ev) = found {
            return ev["sourceIPs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
        }
        assert!(Instant::now() < deadline, "no audit event for {marker}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn audit_source_ips(s: &mut Suite) {
    let claimed = [
        ("X-Forwarded-For", "203.0.113.9"),
        ("X-Real-Ip", "198.51.100.4"),
    ];
    let path =
        |marker: &str| format!("/api/v1/namespaces/default/configmaps?labelSelector={marker}");
    // The suite's cborgate: append.
    let r = s
        .through
        .request("GET", &path("xff-append"), &claimed, None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        source_ips(s, "xff-append"),
        ["203.0.113.9", "127.0.0.1", "198.51.100.4", "127.0.0.1"],
        "append: the claim, the client (X-Forwarded-For), the client's X-Real-Ip, then the \
         connection (cborgate); passed through unchanged it would have been \
         [203.0.113.9, 198.51.100.4, 127.0.0.1]"
    );
    let listen = format!("127.0.0.1:{}", free_port());
    let gate = Gate::start(
        &s.dir,
        "cborgate-xff-replace",
        &s.pki,
        &s.api.addr,
        "legacy",
        &listen,
        &["--forwarded-for", "replace"],
    );
    let r = gate
        .client(&s.pki, &s.pki.admin)
        .request("GET", &path("xff-replace"), &claimed, None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        source_ips(s, "xff-replace"),
        ["127.0.0.1"],
        "replace: the client alone, nothing it claimed"
    );
}
