//! `X-Forwarded-For` upstream (kube-apiserver's audit `sourceIPs`): the client's
//! address appended to what it sent, as Go's `httputil.ReverseProxy` does, or in its
//! place (and `X-Real-Ip` dropped) with `--forwarded-for replace`; one line either way,
//! since the apiserver reads only the first. Over HTTP/1.1 and HTTP/2.

use crate::support::harness::Harness;
use crate::support::http::once;
use crate::tls::{h2_connect, path, pki};
use cborgate_standin::RecordedRequest;

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";

/// The client's forwarding headers: a claimed address, and an `X-Real-Ip`.
const SENT: [(&str, &str); 2] = [
    ("X-Forwarded-For", "203.0.113.9"),
    ("X-Real-Ip", "198.51.100.4"),
];

/// What reached the stand-in for `CM`: its `X-Forwarded-For` lines and `X-Real-Ip`.
fn upstream_saw(h: &Harness) -> (Vec<String>, Option<String>) {
    let reqs = h.standin().requests();
    let r: &RecordedRequest = reqs
        .iter()
        .rev()
        .find(|r| r.path == CM)
        .expect("the GET went upstream");
    let xff = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for"))
        .map(|(_, v)| v.clone())
        .collect();
    (xff, r.header("x-real-ip").map(str::to_string))
}

#[test]
fn http1_appends_the_client_by_default_and_replaces_on_request() {
    let h = Harness::start("legacy", &[]);
    assert_eq!(once(h.proxy, "GET", CM, &SENT, None).status, 200);
    assert_eq!(
        upstream_saw(&h),
        (
            vec!["203.0.113.9, 127.0.0.1".to_string()],
            Some("198.51.100.4".into())
        )
    );
    // No header from the client: the client alone.
    assert_eq!(once(h.proxy, "GET", CM, &[], None).status, 200);
    assert_eq!(upstream_saw(&h), (vec!["127.0.0.1".to_string()], None));

    let h = Harness::start("legacy", &["--forwarded-for", "replace"]);
    assert_eq!(once(h.proxy, "GET", CM, &SENT, None).status, 200);
    assert_eq!(upstream_saw(&h), (vec!["127.0.0.1".to_string()], None));
}

#[test]
fn http2_appends_the_client_by_default_and_replaces_on_request() {
    let p = pki("xff");
    let (cert, key) = (path(&p.dir, "server.pem"), path(&p.dir, "server.key"));
    for (extra, want) in [
        (
            &[][..],
            (
                vec!["203.0.113.9, 127.0.0.1".to_string()],
                Some("198.51.100.4".to_string()),
            ),
        ),
        (
            &["--forwarded-for", "replace"][..],
            (vec!["127.0.0.1".to_string()], None),
        ),
    ] {
        let mut args = vec!["--tls-cert", &cert, "--tls-key", &key];
        args.extend_from_slice(extra);
        let h = Harness::start("legacy", &args);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut client = h2_connect(h.proxy, &p.ca_der).await;
            let mut req = http::Request::builder()
                .method("GET")
                .uri(format!("https://localhost{CM}"));
            for (n, v) in SENT {
                req = req.header(n, v);
            }
            let (resp, _) = client.send_request(req.body(()).unwrap(), true).unwrap();
            assert_eq!(resp.await.unwrap().status(), 200);
        });
        assert_eq!(upstream_saw(&h), want, "{extra:?}");
    }
}
