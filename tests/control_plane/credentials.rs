//! The aggregated-sidecar kit's credential (deploy/sidecar-aggregated; deploy/README.md,
//! "Credentials"): cborgate names users to the aggregated server with a client
//! certificate from a CA of the kit's own, which the aggregated server trusts for
//! `X-Remote-*` through its `--requestheader-*` flags, and which the main
//! kube-apiserver does not trust at all. So a leaked Secret of the kit is worth
//! nothing against the main apiserver, unlike kubeadm's front-proxy client
//! certificate. A second kube-apiserver stands in for the aggregated server: it has
//! the same request-header authenticator (k8s.io/apiserver) every aggregated server
//! has, configured by the same flags.

use crate::cluster::{Apiserver, ApiserverOpts, Gate};
use crate::http::Client;
use crate::procs::free_port;
use crate::support::pki::{Ca, Leaf};
use crate::Suite;

pub const CASES: [crate::Case; 1] = [(
    "aggregated_kit_credential_is_worthless_to_the_main_apiserver",
    aggregated_credential,
)];

/// POST a SelfSubjectReview: the status and the user the server authenticated.
fn whoami(addr: &str, ca: &str, leaf: &Leaf, headers: &[(&str, &str)]) -> (u16, String) {
    let body = br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let mut h = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    h.extend_from_slice(headers);
    let r = Client::with_leaf(addr, ca, leaf)
        .try_request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &h,
            Some(body),
        )
        .unwrap_or_else(|e| panic!("POST selfsubjectreviews to {addr}: {e}"));
    let user = if r.status == 201 {
        r.json()["status"]["userInfo"]["username"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        String::new()
    };
    (r.status, user)
}

fn aggregated_credential(s: &mut Suite) {
    let dir = s.dir.join("aggregated-credential");
    std::fs::create_dir_all(&dir).unwrap();
    // deploy/README.md's openssl lines: a CA of the kit's own, and cborgate's
    // client certificate from it (CN cborgate, the allowed name).
    let kit_ca = Ca::new(&dir, "cborgate-upstream-client-ca");
    let kit = kit_ca.client("cborgate-upstream-client", "cborgate", &[]);
    let mut agg = Apiserver::start(
        &s.assets,
        &dir,
        &s.pki,
        ApiserverOpts {
            name: "aggregated-apiserver",
            etcd: &s.etcd_url,
            prefix: "/registry-aggregated",
            cbor: false,
            bind: "127.0.0.1",
            advertise: "127.0.0.1",
            port: free_port(),
            // The placeholder container's flags in deploy/sidecar-aggregated (the
            // later flag wins over the kubeadm-style ones Apiserver::start gives).
            extra: vec![
                format!("--requestheader-client-ca-file={}", kit_ca.path),
                "--requestheader-allowed-names=cborgate".into(),
            ],
        },
    );
    // cborgate as deploy/sidecar-aggregated runs it: the kube-aggregator verified
    // against the front-proxy CA, the kit's certificate upstream.
    let pki = &s.pki;
    let identity = [
        "--requestheader-client-ca-file",
        &pki.front_proxy_ca.path,
        "--requestheader-allowed-names",
        "front-proxy-client",
        "--upstream-client-cert",
        &kit.cert_path,
        "--upstream-client-key",
        &kit.key_path,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let listen = format!("127.0.0.1:{}", free_port());
    let upstream = agg.addr.clone();
    let mut gate = Gate::start_with(
        &dir,
        "cborgate-aggregated",
        pki,
        &upstream,
        "legacy",
        &listen,
        identity,
    );
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ca = pki.ca.path.as_str();
        let alice = [("X-Remote-User", "alice"), ("X-Remote-Group", "devs")];
        let admin_claim = [
            ("X-Remote-User", "system:admin"),
            ("X-Remote-Group", "system:masters"),
        ];
        // The kube-aggregator (its front-proxy certificate) through cborgate: the
        // aggregated server sees the user it named.
        assert_eq!(
            whoami(&listen, ca, &pki.front_proxy_client, &alice),
            (201, "alice".to_string()),
            "the aggregator's user through cborgate"
        );
        // What the kit no longer hands out: kubeadm's front-proxy certificate makes
        // the main kube-apiserver believe any name (this request is the control).
        assert_eq!(
            whoami(&s.api.addr, ca, &pki.front_proxy_client, &admin_claim),
            (201, "system:admin".to_string()),
            "the front-proxy certificate at the main apiserver"
        );
        // The kit's certificate against the main kube-apiserver: not a front proxy
        // there, not even a client it knows.
        let (status_main, user) = whoami(&s.api.addr, ca, &kit, &admin_claim);
        assert!(
            status_main == 401 || status_main == 403,
            "the kit's certificate at the main apiserver: {status_main} {user}"
        );
        // And the aggregated server trusts identity headers from the kit's CA only:
        // kubeadm's front-proxy certificate straight to it names nobody.
        let (status, user) = whoami(&agg.addr, ca, &pki.front_proxy_client, &admin_claim);
        assert!(
            status == 401 || status == 403,
            "the front-proxy certificate straight to the aggregated server: {status} {user}"
        );
        eprintln!(
            "credentials: through cborgate 201 alice; the front-proxy certificate at the main \
             apiserver 201 system:admin; the kit's certificate there {status_main}, the \
             front-proxy certificate at the aggregated server {status}"
        );
    }));
    gate.svc.check_alive();
    gate.svc.stop();
    agg.svc.stop();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}
