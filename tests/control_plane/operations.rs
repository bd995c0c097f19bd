//! What operators do while the control plane runs through cborgate, each followed
//! by a new Deployment that the controller manager must reconcile: certificates
//! rotated on disk, the apiserver stopped and started (cborgate's `/readyz`
//! follows it), cborgate stopped with SIGTERM and started again (streams end
//! cleanly, so client-go re-establishes them instead of reporting errors).

use crate::cluster::{metric_sum, wait_json};
use crate::controllers::{namespace, reconcile_deployment};
use crate::http::rustls_pemfile_certs;
use crate::procs::eventually;
use crate::support::pki::Ca;
use crate::Suite;

pub const CASES: [crate::Case; 3] = [
    ("certificates_rotate_on_disk", rotation),
    ("apiserver_restart_readyz_follows", apiserver_restart),
    ("sigterm_ends_streams_cleanly_and_restart", gate_restart),
];

/// A Deployment in a namespace of its own, reconciled within `secs`.
fn still_reconciles(s: &Suite, ns: &str, secs: u64) {
    namespace(&s.through, ns);
    reconcile_deployment(s, ns, "after", secs);
}

/// Replace `path` with `contents` in one rename, as a Secret volume's update does.
fn replace(path: &str, contents: &[u8]) {
    let tmp = format!("{path}.new");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The certificate cborgate presents to a new connection of a new client (one
/// with no TLS session to resume, which would show the certificate of its first
/// handshake).
fn served_cert(s: &Suite) -> Vec<u8> {
    let c = s.gate.client(&s.pki, &s.pki.admin);
    let mut conn = c.conn();
    c.send(
        &mut conn,
        "GET",
        "/version",
        &[("Accept", "application/json")],
        None,
    );
    let _ = conn.try_response("GET");
    conn.stream().conn.peer_certificates().unwrap()[0].to_vec()
}

/// cborgate's serving certificate is replaced by a new one, and its client CA
/// bundle gains a new CA (the first step of a CA rotation): new connections get the
/// new certificate, a client of the new CA is let in, and the controllers, still
/// on their old certificates, keep working.
fn rotation(s: &mut Suite) {
    let reloads = |file: &str| {
        metric_sum(
            &s.gate.metrics(),
            "cborgate_reloads_total",
            &[("file", file), ("result", "success")],
        )
    };
    let (serving0, client_ca0) = (reloads("serving"), reloads("client_ca"));
    let old = served_cert(s);
    let fresh = s.pki.ca.server_for(
        "cborgate-rotated",
        "kube-apiserver",
        &["127.0.0.1", "localhost"],
    );
    replace(
        &s.pki.gate_serving.key_path,
        &std::fs::read(&fresh.key_path).unwrap(),
    );
    replace(
        &s.pki.gate_serving.cert_path,
        &std::fs::read(&fresh.cert_path).unwrap(),
    );
    eventually(30, "cborgate serves the rotated certificate", || {
        served_cert(s) == fresh.der.to_vec()
    });
    assert_ne!(old, fresh.der.to_vec());
    let new_ca = Ca::new(&s.pki.dir, "kubernetes-ca-next");
    let bundle = [
        std::fs::read_to_string(&s.pki.ca.path).unwrap(),
        std::fs::read_to_string(&new_ca.path).unwrap(),
    ]
    .concat();
    replace(s.gate.client_ca.to_str().unwrap(), bundle.as_bytes());
    let newcomer = new_ca.client("newcomer", "newcomer", &["system:masters"]);
    let c = s.gate.client(&s.pki, &newcomer);
    eventually(30, "a client of the new CA is let in as itself", || {
        c.try_request(
            "GET",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &[],
            None,
        )
        .is_ok()
            && c.try_request(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json"),
                ],
                Some(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
            )
            .is_ok_and(|r| {
                r.status == 201 && r.json()["status"]["userInfo"]["username"] == "newcomer"
            })
    });
    assert!(reloads("serving") > serving0, "serving reload counted");
    assert!(
        reloads("client_ca") > client_ca0,
        "client CA reload counted"
    );
    still_reconciles(s, "cp-after-rotation", 120);
    // The rotated serving certificate chains to the cluster CA the controllers trust.
    assert_eq!(
        rustls_pemfile_certs(&s.pki.gate_serving.cert_path)[0].to_vec(),
        fresh.der.to_vec()
    );
}

/// The apiserver goes away: cborgate's `/readyz` turns 503 within seconds, and
/// back to 200 once the apiserver is ready again; the controllers carry on.
fn apiserver_restart(s: &mut Suite) {
    assert_eq!(s.gate.readyz(), Some(200));
    s.api.svc.stop();
    eventually(30, "cborgate /readyz 503 with the apiserver down", || {
        s.gate.readyz() == Some(503)
    });
    let ready = metric_sum(&s.gate.metrics(), "cborgate_upstream_ready", &[]);
    assert_eq!(ready, 0.0);
    s.api.svc.restart();
    let pki = &s.pki;
    s.api.wait_ready(pki);
    eventually(30, "cborgate /readyz 200 with the apiserver back", || {
        s.gate.readyz() == Some(200)
    });
    // The controller manager and the scheduler exit when they cannot renew their
    // lease (leader election lost, by design); the kubelet restarts them as static
    // pods. So does the suite.
    for svc in [s.kcm.as_mut().unwrap(), s.sched.as_mut().unwrap()] {
        if svc.exited() {
            eprintln!("{} exited while the apiserver was down (lease lost); restarted, as the kubelet would", svc.name());
            svc.restart();
        }
    }
    still_reconciles(s, "cp-after-apiserver-restart", 180);
}

/// Lines of a log from byte `from` on.
fn log_since(path: &std::path::Path, from: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&text[from.min(text.len())..]).into_owned()
}

/// What client-go logs when a stream it was reading broke instead of ending.
const BROKEN_STREAM: [&str; 5] = [
    "unexpected EOF",
    "connection reset by peer",
    "client connection lost",
    "INTERNAL_ERROR",
    "an error on the server",
];

/// SIGTERM: cborgate ends open watches cleanly (a watch of the suite's own sees
/// the terminating chunk) and exits 0; started again, the controllers come back
/// without a broken stream in their logs and reconcile a new Deployment.
fn gate_restart(s: &mut Suite) {
    let kcm_log = s.kcm.as_ref().unwrap().log();
    let sched_log = s.sched.as_ref().unwrap().log();
    let (kcm_from, sched_from) = (
        std::fs::metadata(&kcm_log).unwrap().len() as usize,
        std::fs::metadata(&sched_log).unwrap().len() as usize,
    );
    let mut w = s.through.conn();
    s.through.send(
        &mut w,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=120",
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(w.head().status, 200);
    let code = s.gate.svc.stop();
    let mut end = Ok(Some(Vec::new()));
    while let Ok(Some(_)) = end {
        end = w.try_chunk();
    }
    s.gate.svc.restart();
    s.gate.wait_listening();
    assert_eq!(code, Some(0), "cborgate's exit status after SIGTERM");
    assert!(
        end.is_ok(),
        "the watch ended without its terminating chunk: {end:?}"
    );
    still_reconciles(s, "cp-after-gate-restart", 180);
    // The leases are still held, renewed through the new process.
    wait_json(
        &s.through,
        60,
        "the controller manager's lease renewed after the restart",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
        |v| {
            v["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty())
        },
    );
    for (log, from) in [(&kcm_log, kcm_from), (&sched_log, sched_from)] {
        let text = log_since(log, from);
        let broken: Vec<&str> = text
            .lines()
            .filter(|l| BROKEN_STREAM.iter().any(|p| l.contains(p)))
            .collect();
        assert!(
            broken.is_empty(),
            "{}: streams broke instead of ending:\n{}",
            log.display(),
            broken.join("\n")
        );
    }
}
