//! TLS on both sides: an HTTP/2 client over TLS (ALPN h2) gets CBOR and a CBOR
//! watch exactly as over HTTP/1.1; the upstream is reached over TLS verified
//! with a CA made in the test, presenting a client certificate.

mod support;

use cborgate::codec::{cbor_to_json, CborToJsonOptions};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::harness::Harness;

struct Pki {
    dir: PathBuf,
    ca_der: CertificateDer<'static>,
    server: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, written as PEM files under a fresh directory.
fn pki(tag: &str) -> Pki {
    let dir = std::env::temp_dir().join(format!("cborgate-pki-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "cborgate test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &issuer).unwrap();
        (cert, key)
    };
    let (srv, srv_key) = leaf(vec!["localhost".into(), "127.0.0.1".into()], "localhost");
    let (cli, cli_key) = leaf(vec!["cborgate".into()], "cborgate");
    let w = |name: &str, s: String| std::fs::write(dir.join(name), s).unwrap();
    w("ca.pem", ca_cert.pem());
    w("server.pem", srv.pem());
    w("server.key", srv_key.serialize_pem());
    w("client.pem", cli.pem());
    w("client.key", cli_key.serialize_pem());
    Pki {
        dir,
        ca_der: ca_cert.der().clone(),
        server: (
            srv.der().clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(srv_key.serialize_der())),
        ),
    }
}

fn path(p: &Path, f: &str) -> String {
    p.join(f).to_str().unwrap().to_string()
}

/// GET over TLS + HTTP/2; returns status, content type and the whole body.
async fn h2_get(
    addr: std::net::SocketAddr,
    ca: &CertificateDer<'static>,
    path: &str,
    accept: &str,
) -> (u16, String, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "ALPN chose h2"
    );
    let (mut client, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::builder()
        .method("GET")
        .uri(format!("https://localhost{path}"))
        .header("accept", accept)
        .body(())
        .unwrap();
    let (resp, _) = client.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    assert!(
        resp.headers().get("transfer-encoding").is_none(),
        "no chunked framing on HTTP/2"
    );
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    (status, ct, data)
}

#[test]
fn http2_over_tls_downstream_gets_cbor_and_cbor_watches() {
    let p = pki("down");
    let h = Harness::start(
        "legacy",
        &[
            "--tls-cert",
            &path(&p.dir, "server.pem"),
            "--tls-key",
            &path(&p.dir, "server.key"),
        ],
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (status, ct, body) = h2_get(
            h.proxy,
            &p.ca_der,
            "/api/v1/namespaces/demo/configmaps/demo-config",
            "application/cbor",
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(ct, "application/cbor");
        let v: Value =
            serde_json::from_slice(&cbor_to_json(&body, CborToJsonOptions::default()).unwrap())
                .unwrap();
        assert_eq!(v["metadata"]["name"], "demo-config");
        let (status, ct, body) = h2_get(
            h.proxy,
            &p.ca_der,
            "/api/v1/namespaces/demo/configmaps?watch=1&timeoutSeconds=1",
            "application/cbor",
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(ct, "application/cbor-seq");
        let json = cbor_to_json(
            &body,
            CborToJsonOptions {
                sequence: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            json.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count()
                >= 2
        );
        // JSON passes through untouched over HTTP/2 too.
        let (status, ct, body) = h2_get(
            h.proxy,
            &p.ca_der,
            "/api/v1/namespaces/demo/configmaps/demo-config",
            "application/json",
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(ct, "application/json");
        let direct = support::http::once(
            h.upstream,
            "GET",
            "/api/v1/namespaces/demo/configmaps/demo-config",
            &[("Accept", "application/json")],
            None,
        );
        assert_eq!(body, direct.body);
    });
}

/// A TLS front for the stand-in that requires a client certificate signed by
/// the test CA; counts the handshakes that presented one.
fn tls_upstream(
    p: &Pki,
    backend: std::net::SocketAddr,
    rt: &tokio::runtime::Runtime,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(p.ca_der.clone()).unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![p.server.0.clone()], p.server.1.clone_key())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen = Arc::new(AtomicUsize::new(0));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen2 = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .is_some_and(|c| !c.is_empty())
                {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                let Ok(mut back) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
            });
        }
    });
    (addr, seen)
}

#[test]
fn tls_upstream_with_a_test_ca_and_a_client_certificate() {
    let p = pki("up");
    let base = Harness::start("legacy", &[]);
    let (tls_addr, seen) = tls_upstream(&p, base.upstream, &base.rt);
    let url = format!("https://localhost:{}", tls_addr.port());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = Harness::proxy_to(
        &url,
        "legacy",
        &[
            "--upstream-ca",
            &path(&p.dir, "ca.pem"),
            "--upstream-client-cert",
            &path(&p.dir, "client.pem"),
            "--upstream-client-key",
            &path(&p.dir, "client.key"),
        ],
        rt,
    );
    let r = support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[
            ("Accept", "application/cbor"),
            ("Authorization", "Bearer abc"),
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.content_type(), "application/cbor");
    assert!(
        seen.load(Ordering::SeqCst) >= 1,
        "the upstream saw a client certificate"
    );
    // Authorization passed through untouched.
    let up = base.standin().requests().last().unwrap().clone();
    assert_eq!(up.header("authorization"), Some("Bearer abc"));

    // Without the client certificate the upstream refuses the handshake: 503.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = Harness::proxy_to(
        &url,
        "legacy",
        &["--upstream-ca", &path(&p.dir, "ca.pem")],
        rt,
    );
    let r = support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 503);
    // And with an unknown CA, verification fails: 503 too.
    let other = pki("other");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let h = Harness::proxy_to(
        &url,
        "legacy",
        &[
            "--upstream-ca",
            &path(&other.dir, "ca.pem"),
            "--upstream-client-cert",
            &path(&p.dir, "client.pem"),
            "--upstream-client-key",
            &path(&p.dir, "client.key"),
        ],
        rt,
    );
    let r = support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 503);
}
