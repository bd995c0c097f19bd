//! TLS on both sides: an HTTP/2 client over TLS (ALPN h2) gets CBOR and a CBOR
//! watch exactly as over HTTP/1.1; the upstream is reached over TLS verified
//! with a CA made in the test, presenting a client certificate.

use crate::support::harness::{eventually, Harness};
use crate::support::pki::{client_cert_acceptor, provider};
use cborgate::codec::{cbor_to_json, CborToJsonOptions};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Pki {
    pub dir: PathBuf,
    pub ca_der: CertificateDer<'static>,
    server: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, written as PEM files under a fresh directory.
pub fn pki(tag: &str) -> Pki {
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

pub fn path(p: &Path, f: &str) -> String {
    p.join(f).to_str().unwrap().to_string()
}

/// An HTTP/2 connection over TLS (ALPN `h2`) to `addr` as `localhost`, trusting `ca`.
pub async fn h2_connect(
    addr: std::net::SocketAddr,
    ca: &CertificateDer<'static>,
) -> h2::client::SendRequest<bytes::Bytes> {
    crate::support::http2::connect(addr, "localhost", [ca.clone()]).await
}

/// GET over TLS + HTTP/2; returns status, content type and the whole body.
async fn h2_get(
    addr: std::net::SocketAddr,
    ca: &CertificateDer<'static>,
    path: &str,
    accept: &str,
) -> (u16, String, Vec<u8>) {
    let mut client = h2_connect(addr, ca).await;
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
    (status, ct, h2_body(resp.into_body()).await)
}

/// An HTTP/2 response body, read whole.
pub async fn h2_body(mut body: h2::RecvStream) -> Vec<u8> {
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    data
}

/// cborgate in legacy mode with a TLS listener (HTTP/2 and HTTP/1.1), and its PKI.
pub fn tls_legacy(tag: &str) -> (Pki, Harness) {
    let p = pki(tag);
    let h = Harness::start(
        "legacy",
        &[
            "--tls-cert",
            &path(&p.dir, "server.pem"),
            "--tls-key",
            &path(&p.dir, "server.key"),
        ],
    );
    (p, h)
}

#[test]
fn http2_over_tls_downstream_gets_cbor_and_cbor_watches() {
    let (p, h) = tls_legacy("down");
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
        let direct = crate::support::http::once(
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
    let acceptor = client_cert_acceptor(
        p.ca_der.clone(),
        p.server.0.clone(),
        p.server.1.clone_key(),
        false,
    );
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

/// A TLS front with `acceptor` for the stand-in at `backend`.
fn tls_front(
    acceptor: tokio_rustls::TlsAcceptor,
    backend: std::net::SocketAddr,
    rt: &tokio::runtime::Runtime,
) -> std::net::SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut back) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
            });
        }
    });
    addr
}

/// The kubeadm sidecar's one likely mistake, an apiserver certificate without the
/// 127.0.0.1 that cborgate verifies it at, and a client certificate the upstream does
/// not trust: `/readyz` names the cause at the default log level, with the
/// certificate's names and the file involved.
#[test]
fn readyz_names_a_san_mismatch_and_a_refused_client_certificate() {
    use crate::support::pki::Ca;
    let dir = std::env::temp_dir().join(format!("cborgate-san-{}", std::process::id()));
    let ca = Ca::new(&dir, "kube-ca");
    let other = Ca::new(&dir, "other-ca");
    let apiserver = ca.server_for(
        "apiserver",
        "kube-apiserver",
        &[
            "kubernetes",
            "kubernetes.default",
            "10.96.0.1",
            "192.0.2.10",
        ],
    );
    let base = Harness::start("legacy", &[]);
    let readyz_ends_with = |h: &Harness, want: &str| {
        let mut last = String::new();
        let seen = crate::support::harness::poll(std::time::Duration::from_secs(10), || {
            let r = crate::support::http::once(h.admin, "GET", "/readyz", &[], None);
            last = r.text();
            (r.status == 503 && last.ends_with(want)).then_some(())
        });
        assert!(seen.is_some(), "/readyz: {last}");
    };

    let optional = client_cert_acceptor(
        ca.der(),
        apiserver.der.clone(),
        apiserver.key.clone_key(),
        true,
    );
    let front = tls_front(optional, base.upstream, &base.rt);
    let h = Harness::proxy_to(
        &format!("https://127.0.0.1:{}", front.port()),
        "legacy",
        &["--upstream-ca", &ca.path],
    );
    readyz_ends_with(
        &h,
        " failed the TLS handshake: its certificate is not valid for 127.0.0.1, the host in \
         --upstream (upstream.url): it names kubernetes, kubernetes.default, 10.96.0.1, \
         192.0.2.10\n",
    );
    drop(h);

    // The upstream trusts only its own CA's client certificates; cborgate's is another's.
    let server = ca.server_for("local", "kube-apiserver", &["127.0.0.1"]);
    let required =
        client_cert_acceptor(ca.der(), server.der.clone(), server.key.clone_key(), false);
    let front = tls_front(required, base.upstream, &base.rt);
    let client = other.client("cborgate", "cborgate", &[]);
    let h = Harness::proxy_to(
        &format!("https://127.0.0.1:{}", front.port()),
        "legacy",
        &[
            "--upstream-ca",
            &ca.path,
            "--upstream-client-cert",
            &client.cert_path,
            "--upstream-client-key",
            &client.key_path,
        ],
    );
    readyz_ends_with(
        &h,
        &format!(
            " refused cborgate's client certificate (--upstream-client-cert {}): is it \
             signed by a CA the upstream's --client-ca-file trusts, and unexpired?\n",
            client.cert_path
        ),
    );
}

/// A stand-in behind a TLS front that asks for the client certificate (`tls_upstream`),
/// and a proxy in front of it with the test CA and client certificate: the PKI, the
/// stand-in's own harness, the front's URL, the proxy, and the count of TLS connections
/// that presented a client certificate.
fn through_tls_upstream(tag: &str) -> (Pki, Harness, String, Harness, Arc<AtomicUsize>) {
    let p = pki(tag);
    let base = Harness::start("legacy", &[]);
    let (tls_addr, seen) = tls_upstream(&p, base.upstream, &base.rt);
    let url = format!("https://localhost:{}", tls_addr.port());
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
    );
    (p, base, url, h, seen)
}

#[test]
fn tls_upstream_with_a_test_ca_and_a_client_certificate() {
    let (p, base, url, h, seen) = through_tls_upstream("up");
    let r = crate::support::http::once(
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
    // The expiry of each certificate file in use, and none for a file not configured.
    let expiry = |file: &str| {
        h.metric(
            "cborgate_certificate_expiry_timestamp_seconds",
            &[("file", file)],
        )
    };
    for (file, pem) in [("upstream_ca", "ca.pem"), ("upstream_client", "client.pem")] {
        let want = cborgate::tls::earliest_expiry(&path(&p.dir, pem)).unwrap();
        assert!(want > 0);
        assert_eq!(expiry(file), want as f64, "{file}");
    }
    assert!(!h
        .metrics()
        .contains("cborgate_certificate_expiry_timestamp_seconds{file=\"serving\"}"));

    // Without the client certificate the upstream refuses the handshake: 503.
    let h = Harness::proxy_to(&url, "legacy", &["--upstream-ca", &path(&p.dir, "ca.pem")]);
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 503);
    // And with an unknown CA, verification fails: 503 too.
    let other = pki("other");
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
    );
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(r.status, 503);
}

/// A rustls client configuration trusting every certificate in `cas`.
fn trusting(cas: &[&CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add((*ca).clone()).unwrap();
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

pub(crate) type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS connection to the proxy at `addr`, as `localhost`.
pub(crate) async fn connect(
    addr: std::net::SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// A watch on `demo` configmaps opened on `w`, its answer's head read (a 200).
pub(crate) async fn open_tls_watch(mut w: Tls) -> Tls {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    w.write_all(b"GET /api/v1/namespaces/demo/configmaps?watch=1 HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = w.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    w
}

/// A watch on `demo` configmaps opened before a reload still delivers an event made
/// after it (within 10 s).
pub(crate) async fn watch_survives(h: &Harness, watch: &mut Tls) {
    use tokio::io::AsyncReadExt;
    h.standin().emit_configmaps("demo", 1);
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !String::from_utf8_lossy(&seen).contains("emit-") {
            let n = watch.read(&mut buf).await.unwrap();
            assert!(n > 0, "the watch ended");
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the open watch survived the reload");
}

/// The certificate a new TLS connection to `addr` is served.
async fn served(
    addr: std::net::SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
) -> CertificateDer<'static> {
    connect(addr, cfg)
        .await
        .unwrap()
        .get_ref()
        .1
        .peer_certificates()
        .unwrap()[0]
        .clone()
}

/// Lay out `files` from `from` the way a Kubernetes Secret volume does: the
/// names are symlinks through `..data`, itself a symlink to a versioned
/// directory, swapped atomically by a rename.
fn secret_volume_swap(dir: &Path, version: &str, from: &Path, files: &[&str]) {
    let v = dir.join(version);
    std::fs::create_dir_all(&v).unwrap();
    for f in files {
        std::fs::copy(from.join(f), v.join(f)).unwrap();
        let link = dir.join(f);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(f), &link).unwrap();
        }
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[test]
fn the_serving_certificate_reloads_from_a_secret_volume_and_on_sighup() {
    let (v1, v2) = (pki("serve-v1"), pki("serve-v2"));
    let dir = std::env::temp_dir().join(format!("cborgate-secret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let files = ["server.pem", "server.key"];
    secret_volume_swap(&dir, "v1", &v1.dir, &files);
    let h = Harness::start(
        "legacy",
        &[
            "--tls-cert",
            &path(&dir, "server.pem"),
            "--tls-key",
            &path(&dir, "server.key"),
        ],
    );
    let cfg = trusting(&[&v1.ca_der, &v2.ca_der]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(served(h.proxy, &cfg)), v1.server.0);
    // A watch opened with the old certificate.
    let mut watch =
        rt.block_on(async { open_tls_watch(connect(h.proxy, &cfg).await.unwrap()).await });

    secret_volume_swap(&dir, "v2", &v2.dir, &files);
    eventually(10, "new connections get the new certificate", || {
        rt.block_on(served(h.proxy, &cfg)) == v2.server.0
    });
    // The watch opened before the swap still delivers events.
    rt.block_on(watch_survives(&h, &mut watch));
    let reloads = |h: &Harness| {
        h.metric(
            "cborgate_reloads_total",
            &[("file", "serving"), ("result", "success")],
        )
    };
    let before = reloads(&h);
    assert!(before >= 1.0);
    // SIGHUP reloads (even with nothing changed) and never kills.
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &h.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    eventually(10, "SIGHUP reloads", || reloads(&h) > before);
    let mut h = h;
    assert!(
        h.child.try_wait().unwrap().is_none(),
        "SIGHUP killed the process"
    );
    assert_eq!(rt.block_on(served(h.proxy, &cfg)), v2.server.0);
}

#[test]
fn readiness_and_requests_follow_the_upstream_ca_on_disk() {
    let p = pki("ca-good");
    let wrong = pki("ca-wrong");
    let base = Harness::start("legacy", &[]);
    let (tls_addr, _seen) = tls_upstream(&p, base.upstream, &base.rt);
    let dir = std::env::temp_dir().join(format!("cborgate-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::copy(wrong.dir.join("ca.pem"), &ca).unwrap();
    let h = Harness::proxy_to(
        &format!("https://localhost:{}", tls_addr.port()),
        "legacy",
        &[
            "--upstream-ca",
            ca.to_str().unwrap(),
            "--upstream-client-cert",
            &path(&p.dir, "client.pem"),
            "--upstream-client-key",
            &path(&p.dir, "client.key"),
        ],
    );
    let get = |h: &Harness| {
        crate::support::http::once(
            h.proxy,
            "GET",
            "/api/v1/namespaces/demo/configmaps/demo-config",
            &[("Accept", "application/cbor")],
            None,
        )
        .status
    };
    let ready = |h: &Harness| crate::support::http::once(h.admin, "GET", "/readyz", &[], None);
    // The wrong CA: TCP connects, the handshake fails, so /readyz says so. Polled for
    // the reason too: before the first probe /readyz is a 503 as well ("the upstream
    // has not been probed yet"), which once made this test fail.
    let mut last = String::new();
    let seen = crate::support::harness::poll(std::time::Duration::from_secs(10), || {
        let r = ready(&h);
        last = r.text();
        (r.status == 503
            && last.ends_with(&format!(
                " failed the TLS handshake: its certificate is not signed by a CA in \
                 --upstream-ca {} (upstream.ca_file)\n",
                ca.display()
            )))
        .then_some(())
    });
    assert!(seen.is_some(), "/readyz with the wrong CA: {last}");
    assert_eq!(h.metric("cborgate_upstream_ready", &[]), 0.0);
    assert_eq!(get(&h), 503);
    // The right CA arrives on disk (written aside, then renamed over the old one).
    let tmp = dir.join("ca.pem.tmp");
    std::fs::copy(p.dir.join("ca.pem"), &tmp).unwrap();
    std::fs::rename(&tmp, &ca).unwrap();
    eventually(10, "requests succeed with the new CA", || get(&h) == 200);
    eventually(10, "/readyz 200 with the new CA", || {
        ready(&h).status == 200
    });
    assert_eq!(h.metric("cborgate_upstream_ready", &[]), 1.0);
    assert!(
        h.metric(
            "cborgate_reloads_total",
            &[("file", "upstream_ca"), ("result", "success")]
        ) >= 1.0
    );
    // A bad file on disk is refused, and the good CA stays in use.
    std::fs::write(&ca, "garbage").unwrap();
    eventually(10, "a failed reload is counted", || {
        h.metric(
            "cborgate_reloads_total",
            &[("file", "upstream_ca"), ("result", "failure")],
        ) >= 1.0
    });
    assert_eq!(get(&h), 200);
}

/// The upstream client certificate reloads when its files change, a key that does not
/// match its certificate is refused (the previous pair stays), and a forced reload
/// (SIGHUP's) loads even what did not change.
#[test]
fn the_upstream_client_certificate_reloads_and_a_bad_one_is_refused() {
    use cborgate::process::reload::Reloader;
    use cborgate::tls::UpstreamTls;
    let dir = std::env::temp_dir().join(format!("cborgate-reload-client-{}", std::process::id()));
    let (cert, key) = crate::support::pki::self_signed(&dir, "client", "first");
    let tls = UpstreamTls::load("", &cert, &key).unwrap();
    let mut r = Reloader::new(None, &tls, "", Some((cert.clone(), key.clone())));
    let first = tls.client().unwrap().serial();
    r.check(false);
    assert_eq!(
        (tls.generation(), tls.client().unwrap().serial()),
        (0, first.clone()),
        "nothing changed"
    );
    crate::support::pki::self_signed(&dir, "client", "second");
    r.check(false);
    let second = tls.client().unwrap().serial();
    assert_ne!(second, first);
    assert_eq!(tls.generation(), 1);
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(&key, other.serialize_pem()).unwrap();
    r.check(false);
    assert_eq!(
        (tls.generation(), tls.client().unwrap().serial()),
        (1, second.clone())
    );
    r.check(true);
    assert_eq!(tls.client().unwrap().serial(), second);
}

/// Sends a JSON watch on its own HTTP/1.1 connection, with a bearer token as client-go's
/// watches have (a request without credentials goes upstream over HTTP/1.1 on
/// connections of its own: docs/wire.md §5a).
fn send_watch(proxy: std::net::SocketAddr) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    s.write_all(
        b"GET /api/v1/namespaces/demo/configmaps?watch=1&resourceVersion=0 HTTP/1.1\r\n\
          Host: x\r\nAccept: application/json\r\nAuthorization: Bearer watcher\r\n\r\n",
    )
    .unwrap();
    s
}

/// Waits for a watch's response head: 200.
fn watch_started(mut s: std::net::TcpStream) -> std::net::TcpStream {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "watch closed before its head"
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

/// Opens a JSON watch on its own HTTP/1.1 connection and waits for its response head.
fn open_watch(proxy: std::net::SocketAddr) -> std::net::TcpStream {
    watch_started(send_watch(proxy))
}

/// With an HTTP/2 upstream (docs/wire.md §5a) (another cborgate serving h2 over TLS, in front of
/// the stand-in), watches share upstream connections up to `upstream.http2_max_streams`
/// each, and events still arrive; `http2 = "off"` keeps one connection per watch.
#[test]
fn watches_share_http2_upstream_connections() {
    let p = pki("h2up");
    let tls = [
        "--tls-cert",
        &path(&p.dir, "server.pem"),
        "--tls-key",
        &path(&p.dir, "server.key"),
    ];
    let b = Harness::start("legacy", &tls);
    let url = format!("https://localhost:{}", b.proxy.port());
    let ca = path(&p.dir, "ca.pem");
    let config = |http2: &str| {
        crate::support::harness::config_file(&format!(
            "[upstream]\nhttp2 = \"{http2}\"\nhttp2_max_streams = 100\n"
        ))
    };
    let on = config("auto");
    let a = Harness::proxy_to(&url, "native", &["--upstream-ca", &ca, "--config", &on]);
    const WATCHES: usize = 250;
    // All sent at once, as a burst of clients would: they still share connections.
    let sent: Vec<_> = (0..WATCHES).map(|_| send_watch(a.proxy)).collect();
    let watches: Vec<_> = sent.into_iter().map(watch_started).collect();
    let upstream_conns = crate::support::http::connections_to(a.child.id(), b.proxy.port());
    // One per 100 watches (the stream limit), plus perhaps the readiness probe's own.
    assert!(
        (WATCHES.div_ceil(100)..=WATCHES.div_ceil(100) + 1).contains(&upstream_conns),
        "{upstream_conns} upstream connections for {WATCHES} watches"
    );
    // An event reaches the first and the last watch.
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"h2-event"}}"#;
    let r = crate::support::http::once(
        a.proxy,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        &[("Content-Type", "application/json")],
        Some(cm.as_bytes()),
    );
    assert_eq!(r.status, 201);
    for mut w in [&watches[0], &watches[WATCHES - 1]] {
        use std::io::Read;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("h2-event") {
            let n = w.read(&mut buf).unwrap();
            assert!(n > 0, "watch ended before the event");
            seen.extend_from_slice(&buf[..n]);
        }
    }
    drop(watches);
    // An upgrade offers HTTP/1.1 only (SPDY and WebSocket exist only there), and works.
    let mut c = crate::support::http::Conn::connect(a.proxy);
    c.send(
        "POST",
        "/api/v1/namespaces/demo/pods/pod-demo/exec?command=sh&stdin=true",
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
        ],
        None,
    );
    assert_eq!(c.head().status, 101);
    c.write(b"over h1");
    let mut got = [0u8; 7];
    assert!(c.read_exact(&mut got));
    assert_eq!(&got, b"over h1");
    // HTTP/1.1 only: one upstream connection per watch.
    let off = config("off");
    let a = Harness::proxy_to(&url, "native", &["--upstream-ca", &ca, "--config", &off]);
    let watches: Vec<_> = (0..5).map(|_| open_watch(a.proxy)).collect();
    assert!(crate::support::http::connections_to(a.child.id(), b.proxy.port()) >= 5);
    drop(watches);
}

/// One HTTP/2 client may hold `server.http2_max_streams` (250) watches open on one
/// connection, as client-go does with everything it runs: more than pingora's default
/// of 100.
#[test]
fn one_http2_connection_carries_hundreds_of_watches() {
    let (p, h) = tls_legacy("h2streams");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = h2_connect(h.proxy, &p.ca_der).await;
        // With too few streams allowed, `ready` would wait for one to end: bounded.
        let open_all = async move {
            let mut client = client.ready().await.unwrap();
            let mut pending = Vec::new();
            for _ in 0..200 {
                let req = http::Request::builder()
                    .uri("https://localhost/api/v1/namespaces/demo/configmaps?watch=1")
                    .header("accept", "application/cbor")
                    .body(())
                    .unwrap();
                let (resp, _) = client.send_request(req, true).unwrap();
                pending.push(resp);
                client = client.ready().await.unwrap();
            }
            (client, futures_join_all(pending).await)
        };
        let (_client, heads) = tokio::time::timeout(std::time::Duration::from_secs(20), open_all)
            .await
            .expect("every watch answered on the one connection");
        let streams: Vec<_> = heads
            .into_iter()
            .map(|r| {
                let r = r.unwrap();
                assert_eq!(r.status(), 200);
                assert_eq!(r.headers()["content-type"], "application/cbor-seq");
                r.into_body()
            })
            .collect();
        assert_eq!(streams.len(), 200);
        h.wait_metric("cborgate_watch_streams_active", &[], 200.0);
    });
}

/// Await every future, in order (no futures crate needed for a test).
async fn futures_join_all<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(fs.len());
    for f in fs {
        out.push(f.await);
    }
    out
}

/// A TLS handshake with the proxy offering only `suites` (rustls names, `Debug` of
/// `CipherSuite`); the suite agreed, or `None` when the handshake fails.
fn handshake_with(
    proxy: std::net::SocketAddr,
    ca: &CertificateDer<'static>,
    suites: &[&str],
) -> Option<String> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .retain(|s| suites.contains(&format!("{:?}", s.suite()).as_str()));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .ok()?;
        tls.get_ref()
            .1
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
    })
}

/// `--tls-min-version` and `--tls-cipher-suites`, by kube-apiserver's names: TLS 1.2 is
/// refused at `VersionTLS13`; at 1.2 only the named suites are offered; TLS 1.3 always.
#[test]
fn tls_min_version_and_cipher_suites_as_kube_apiserver_names_them() {
    let p = pki("policy");
    let (cert, key) = (path(&p.dir, "server.pem"), path(&p.dir, "server.key"));
    const AES128: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256";
    const AES256: &str = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384";
    const TLS13: &str = "TLS13_AES_128_GCM_SHA256";
    let with = |policy: &[&str]| {
        let mut args = vec!["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
        args.extend_from_slice(policy);
        Harness::start("legacy", &args)
    };
    let agreed = |h: &Harness, offered: &[&str]| handshake_with(h.proxy, &p.ca_der, offered);
    let h = with(&[]);
    assert_eq!(agreed(&h, &[AES128]).as_deref(), Some(AES128));
    let h = with(&["--tls-min-version", "VersionTLS13"]);
    assert_eq!(agreed(&h, &[AES128, AES256]), None);
    assert_eq!(agreed(&h, &[TLS13]).as_deref(), Some(TLS13));
    let h = with(&["--tls-cipher-suites", AES256]);
    assert_eq!(agreed(&h, &[AES128]), None);
    assert_eq!(agreed(&h, &[AES128, AES256]).as_deref(), Some(AES256));
    assert_eq!(agreed(&h, &[TLS13]).as_deref(), Some(TLS13));
}

/// An HTTP/2 upstream over TLS (ALPN `h2` only) that answers `/readyz`, and resets every
/// other stream with `RST_STREAM(INTERNAL_ERROR)`: what Go's HTTP/2 server sends when a
/// handler panics, as a real CBOR-enabled kube-apiserver 1.36.2 does for `/api/v1` with
/// CBOR in `Accept` (tests/data/README.md). A collection (a path ending in
/// `configmaps`) is reset in the middle of its body, after a 200 head and part of a JSON
/// list; anything else before its head. Counts the resets it sent.
fn resetting_h2_upstream(p: &Pki, rt: &tokio::runtime::Runtime) -> (u16, Arc<AtomicUsize>) {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![p.server.0.clone()], p.server.1.clone_key())
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let resets = Arc::new(AtomicUsize::new(0));
    let counted = resets.clone();
    let addr = crate::upstream::serve_tls(rt, acceptor, move |tls| {
        let resets = counted.clone();
        async move {
            let Ok(mut conn) = h2::server::handshake(tls).await else {
                return;
            };
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                if req.uri().path() == "/readyz" {
                    let head = http::Response::builder().status(200).body(()).unwrap();
                    if let Ok(mut body) = respond.send_response(head, false) {
                        let _ = body.send_data(bytes::Bytes::from_static(b"ok"), true);
                    }
                } else if req.uri().path().ends_with("configmaps") {
                    let head = http::Response::builder()
                        .status(200)
                        .header("content-type", "application/json")
                        .body(())
                        .unwrap();
                    let resets = resets.clone();
                    tokio::spawn(async move {
                        let Ok(mut body) = respond.send_response(head, false) else {
                            return;
                        };
                        let part = br#"{"kind":"ConfigMapList","items":[{"metadata":{"#;
                        let _ = body.send_data(bytes::Bytes::from_static(part), false);
                        // The fault under test: the head and part of the body have
                        // gone out, and the stream is reset a moment later (not
                        // synchronisation; the client waits on its socket).
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        body.send_reset(h2::Reason::INTERNAL_ERROR);
                        resets.fetch_add(1, Ordering::SeqCst);
                    });
                } else {
                    respond.send_reset(h2::Reason::INTERNAL_ERROR);
                    resets.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    (addr.port(), resets)
}

/// An HTTP/2 upstream that resets a stream before answering is an upstream failure in
/// every mode: counted and logged as 503 (docs/wire.md §4), never as 499, the client that
/// went away. Legacy mode answers it with the 503 `Status`; native mode ends the client's
/// connection without an answer, as the upstream ended the stream. Reset in the middle of
/// the body, the response ends abnormally and counts with the status that went out.
#[test]
fn an_http2_upstream_reset_is_counted_as_an_upstream_failure_not_499() {
    let p = pki("h2reset");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (port, resets) = resetting_h2_upstream(&p, &rt);
    let url = format!("https://localhost:{port}");
    let ca = path(&p.dir, "ca.pem");
    const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";
    // With a bearer token: anonymous requests go upstream over HTTP/1.1 on connections
    // of their own (docs/wire.md §5a), which this HTTP/2-only upstream refuses by ALPN.
    let accept = [
        ("Accept", "application/cbor"),
        ("Authorization", "Bearer t"),
    ];
    let native = Harness::proxy_to(&url, "native", &["--upstream-ca", &ca]);
    let mut c = crate::support::http::Conn::connect(native.proxy);
    c.send("GET", CM, &accept, None);
    eventually(5, "no answer, only a close", || c.is_closed());
    assert_eq!(resets.load(Ordering::SeqCst), 1, "reset over HTTP/2");
    native.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    assert_eq!(
        native.metric("cborgate_requests_total", &[("code", "499")]),
        0.0
    );
    let legacy = Harness::proxy_to(&url, "legacy", &["--upstream-ca", &ca]);
    let r = crate::support::http::once(legacy.proxy, "GET", CM, &accept, None);
    assert_eq!(r.status, 503);
    assert_eq!(resets.load(Ordering::SeqCst), 2, "reset over HTTP/2");
    legacy.wait_metric("cborgate_requests_total", &[("code", "503")], 1.0);
    // Reset after the head: the client's response ends abnormally, counted as the 200
    // it began as, in both modes.
    for h in [&native, &legacy] {
        let mut c = crate::support::http::Conn::connect(h.proxy);
        c.send("GET", "/api/v1/namespaces/demo/configmaps", &accept, None);
        let head = c.try_head().expect("the head went out before the reset");
        assert_eq!(head.status, 200);
        assert!(
            !c.try_body(&head, "GET").is_ok_and(|(_, chunked)| chunked),
            "a reset body must not look complete"
        );
        h.wait_metric("cborgate_requests_total", &[("code", "200")], 1.0);
    }
    assert_eq!(resets.load(Ordering::SeqCst), 4, "reset over HTTP/2");
    assert_eq!(
        native.metric("cborgate_requests_total", &[("code", "499")]),
        0.0
    );
    assert_eq!(
        legacy.metric("cborgate_requests_total", &[("code", "499")]),
        0.0
    );
}

/// An idle cborgate polls nothing: its readiness probe keeps its connection (and its
/// TLS session with the client certificate) from one probe to the next instead of a
/// handshake every 2 s, and pingora's timer wheel, whose thread wakes every 10 ms once
/// started, is never started (cborgate's timeouts go to tokio's timers).
#[test]
fn an_idle_proxy_keeps_its_probe_connection_and_starts_no_timer_thread() {
    let (_p, base, _url, h, seen) = through_tls_upstream("idle");
    // A request first, so that every timeout of a request's path has been set.
    let r = crate::support::http::once(
        h.proxy,
        "GET",
        "/api/v1/namespaces/demo/configmaps/demo-config",
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(r.status, 200);
    // Four more probes of this proxy (the stand-in also serves `base`'s own probes).
    let start = base.standin().requests_seen();
    eventually(45, "eight more probes at the stand-in", || {
        base.standin().requests_seen() >= start + 8
    });
    let handshakes = seen.load(Ordering::SeqCst);
    assert!(
        handshakes <= 2,
        "{handshakes} TLS connections with the client certificate: one for the probes, one for the request"
    );
    // The metric counts what the upstream saw.
    assert_eq!(
        h.metric("cborgate_upstream_connections_opened_total", &[]),
        handshakes as f64
    );
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", h.child.id()))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    assert!(!threads.is_empty());
    assert!(
        !threads.iter().any(|t| t == "Timer thread"),
        "pingora's timer thread runs: {threads:?}"
    );
}
