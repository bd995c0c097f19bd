//! Identity survives the proxy (docs/wire.md §6a): client certificates become front-proxy
//! headers, a trusted front proxy's headers pass unchanged, and identity headers from
//! anyone else never reach the upstream, over HTTP/1.1 and HTTP/2, for upgrades, in
//! every mode. The upstream here is a TLS server that, like kube-apiserver, trusts
//! identity headers only from a client certificate signed by the front-proxy CA with an
//! allowed CN, and records who each request is to it. The client CA reloads from disk.

use crate::support::harness::{eventually, Harness};
use crate::support::pki::{client_cert_acceptor, provider, Ca, Leaf};
use crate::tls::{connect, open_tls_watch};
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cborgate-identity-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// What the test upstream saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    /// The CN of the TLS client certificate that verified against the front-proxy CA.
    tls_client: Option<String>,
    /// Who the request is to the upstream, by kube-apiserver's rules.
    who: String,
}

impl Seen {
    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn identity_headers(&self) -> Vec<&(String, String)> {
        self.headers
            .iter()
            .filter(|(k, _)| k.to_ascii_lowercase().starts_with("x-remote-"))
            .collect()
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn cn_of(der: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, c) = X509Certificate::from_der(der.as_ref()).ok()?;
    let cn = c
        .subject()
        .iter_common_name()
        .last()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}

/// kube-apiserver's authentication chain, reduced to what the tests need: the
/// request-header authenticator (front-proxy CA verified by the TLS layer, CN
/// `front-proxy-client` allowed, `X-Remote-User` non-empty), then bearer tokens, then
/// anonymous.
fn who(tls_client: Option<&str>, headers: &[(String, String)]) -> String {
    let get = |n: &str| {
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    if tls_client == Some("front-proxy-client") {
        if let Some(user) = get("x-remote-user").first().filter(|u| !u.is_empty()) {
            return format!("{user} groups={}", get("x-remote-group").join(","));
        }
    }
    match get("authorization").first() {
        Some(a) if a.starts_with("Bearer ") => format!("token {}", &a[7..]),
        _ => "system:anonymous".into(),
    }
}

/// A TLS upstream (server certificate from `cluster`) that verifies client
/// certificates against `front_proxy_ca` and records every request.
fn upstream(rt: &tokio::runtime::Runtime, cluster: &Ca, front_proxy_ca: &Ca) -> (SocketAddr, Log) {
    let server = cluster.server("upstream-serving");
    let acceptor = client_cert_acceptor(front_proxy_ca.der(), server.der, server.key, true);
    let log: Log = Arc::default();
    let log2 = log.clone();
    let addr = crate::upstream::serve_tls(rt, acceptor, move |tls| {
        let log = log2.clone();
        async move {
            let tls_client = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(cn_of);
            let mut r = BufReader::new(tls);
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_string(), v.trim().to_string()));
                    }
                }
                let upgrade = headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("upgrade"));
                let who = who(tls_client.as_deref(), &headers);
                if path != "/readyz" {
                    log.lock().unwrap().push(Seen {
                        path,
                        headers,
                        tls_client: tls_client.clone(),
                        who: who.clone(),
                    });
                }
                let w = r.get_mut();
                if upgrade {
                    let _ = w
                            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
                            .await;
                    let mut buf = [0u8; 1024];
                    while matches!(r.read(&mut buf).await, Ok(n) if n > 0) {}
                    return;
                }
                let body = format!("{{\"user\":{who:?}}}");
                let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                if w.write_all((head + &body).as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    });
    (addr, log)
}

/// A client trusting `ca`, presenting `cert` if given, offering `alpn`.
fn client(ca: &Ca, cert: Option<&Leaf>, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let b = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match cert {
        Some(l) => b
            .with_client_auth_cert(vec![l.der.clone()], l.key.clone_key())
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(cfg)
}

/// One HTTP/1.1 request over TLS; the status line's code, or why there was none (a
/// refused certificate shows as a failed handshake or a connection ended unanswered).
async fn h1(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<u16, String> {
    let mut s = connect(addr, cfg).await.map_err(|e| e.to_string())?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n");
    let upgrade = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("upgrade"));
    if !upgrade {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(10), async {
        while !got.windows(2).any(|w| w == b"\r\n") {
            match s.read(&mut buf).await {
                Ok(0) => return Err("closed without an answer".to_string()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    })
    .await
    .map_err(|_| "no answer in 10 s".to_string())??;
    let line = String::from_utf8_lossy(&got);
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not a status line: {line}"))
}

/// One HTTP/2 request over TLS (ALPN h2); the status, or why there was none.
async fn h2(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<u16, String> {
    let tls = connect(addr, cfg).await.map_err(|e| e.to_string())?;
    if tls.get_ref().1.alpn_protocol() != Some(&b"h2"[..]) {
        return Err("ALPN did not choose h2".into());
    }
    let (mut c, conn) = h2::client::handshake(tls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = http::Request::builder()
        .method("GET")
        .uri(format!("https://localhost{path}"))
        .header("accept", "application/json");
    for (k, v) in headers {
        req = req.header(k.to_ascii_lowercase(), *v);
    }
    let (resp, _) = c
        .send_request(req.body(()).unwrap(), true)
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .map_err(|_| "no answer in 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(resp.status().as_u16())
}

const SPOOF: &[(&str, &str)] = &[
    ("X-Remote-User", "system:admin"),
    ("X-Remote-Group", "system:masters"),
    ("X-Remote-Extra-Scopes", "everything"),
];

struct Cluster {
    ca: Ca,
    front_proxy_ca: Ca,
    other_ca: Ca,
    dir: PathBuf,
}

fn cluster(tag: &str) -> Cluster {
    let dir = dir(tag);
    Cluster {
        ca: Ca::new(&dir, "ca"),
        front_proxy_ca: Ca::new(&dir, "front-proxy-ca"),
        other_ca: Ca::new(&dir, "other-ca"),
        dir,
    }
}

fn s(p: &str) -> &str {
    p
}

/// Acceptance 1 and 2: every kind of client, over HTTP/1.1 and HTTP/2, through a
/// cborgate set up as the apiserver sidecar and aggregated sidecar at once (kubeadm's
/// files: `ca.crt` as the client CA, `front-proxy-ca.crt` for front proxies with the
/// allowed name `front-proxy-client`, `front-proxy-client.crt` upstream).
#[test]
fn every_kind_of_client_is_seen_upstream_as_itself_and_nobody_else() {
    let c = cluster("kinds");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (up, log) = upstream(&rt, &c.ca, &c.front_proxy_ca);
    let serving = c.ca.server("serving");
    let upstream_client = c
        .front_proxy_ca
        .client("front-proxy-client", "front-proxy-client", &[]);
    let h = Harness::proxy_to(
        &format!("https://localhost:{}", up.port()),
        "legacy",
        &[
            "--tls-cert",
            s(&serving.cert_path),
            "--tls-key",
            s(&serving.key_path),
            "--client-ca-file",
            s(&c.ca.path),
            "--requestheader-client-ca-file",
            s(&c.front_proxy_ca.path),
            "--requestheader-allowed-names",
            "front-proxy-client",
            "--upstream-ca",
            s(&c.ca.path),
            "--upstream-client-cert",
            s(&upstream_client.cert_path),
            "--upstream-client-key",
            s(&upstream_client.key_path),
        ],
    );
    let alice = c.ca.client("alice", "alice", &["devs", "ops"]);
    // The aggregator's certificate, and one from the same CA with another CN.
    let aggregator = c
        .front_proxy_ca
        .client("aggregator", "front-proxy-client", &[]);
    let intruder = c
        .front_proxy_ca
        .client("intruder", "intruder", &["system:masters"]);
    // Signed by the cluster CA (a client CA, not a front-proxy CA), named like the aggregator.
    let lookalike = c.ca.client("lookalike", "front-proxy-client", &[]);
    let mallory = c.other_ca.client("mallory", "mallory", &["system:masters"]);
    let front_proxy_headers: &[(&str, &str)] = &[
        ("X-Remote-User", "bob"),
        ("X-Remote-Group", "viewers"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Scopes", "read"),
    ];
    let with_token: Vec<(&str, &str)> = SPOOF
        .iter()
        .copied()
        .chain([("Authorization", "Bearer tok-1")])
        .collect();
    let websocket: Vec<(&str, &str)> = SPOOF
        .iter()
        .copied()
        .chain([
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ])
        .collect();

    struct Case<'a> {
        name: &'static str,
        cert: Option<&'a Leaf>,
        headers: &'a [(&'a str, &'a str)],
        /// Who the upstream sees; `None`: the request never reaches it.
        who: Option<&'static str>,
        /// The identity headers the upstream sees, in order.
        identity: &'a [(&'a str, &'a str)],
        h2: bool,
    }
    let alice_headers: &[(&str, &str)] = &[
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "ops"),
    ];
    let lookalike_headers: &[(&str, &str)] = &[("X-Remote-User", "front-proxy-client")];
    let mut cases = Vec::new();
    for h2 in [false, true] {
        cases.extend([
            Case {
                name: "client certificate alice",
                cert: Some(&alice),
                headers: &[],
                who: Some("alice groups=devs,ops"),
                identity: alice_headers,
                h2,
            },
            Case {
                name: "client certificate alice claiming system:admin",
                cert: Some(&alice),
                headers: SPOOF,
                who: Some("alice groups=devs,ops"),
                identity: alice_headers,
                h2,
            },
            Case {
                name: "bearer token",
                cert: None,
                headers: &[("Authorization", "Bearer tok-1")],
                who: Some("token tok-1"),
                identity: &[],
                h2,
            },
            Case {
                name: "no certificate claiming system:admin",
                cert: None,
                headers: SPOOF,
                who: Some("system:anonymous"),
                identity: &[],
                h2,
            },
            Case {
                name: "bearer token claiming system:admin",
                cert: None,
                headers: &with_token,
                who: Some("token tok-1"),
                identity: &[],
                h2,
            },
            Case {
                name: "front proxy with an allowed CN",
                cert: Some(&aggregator),
                headers: front_proxy_headers,
                who: Some("bob groups=viewers,system:authenticated"),
                identity: front_proxy_headers,
                h2,
            },
            Case {
                name: "front-proxy CA, CN not allowed",
                cert: Some(&intruder),
                headers: front_proxy_headers,
                who: Some("system:anonymous"),
                identity: &[],
                h2,
            },
            Case {
                name: "the front proxy's CN from the client CA",
                cert: Some(&lookalike),
                headers: front_proxy_headers,
                who: Some("front-proxy-client groups="),
                identity: lookalike_headers,
                h2,
            },
            Case {
                name: "unknown CA",
                cert: Some(&mallory),
                headers: SPOOF,
                who: None,
                identity: &[],
                h2,
            },
        ]);
    }
    cases.push(Case {
        name: "WebSocket upgrade claiming system:admin",
        cert: None,
        headers: &websocket,
        who: Some("system:anonymous"),
        identity: &[],
        h2: false,
    });
    for (n, case) in cases.iter().enumerate() {
        let proto = if case.h2 { "HTTP/2" } else { "HTTP/1.1" };
        let what = format!("{} over {proto}", case.name);
        let path = format!("/api/v1/namespaces/case-{n}/configmaps");
        let alpn: &[u8] = if case.h2 { b"h2" } else { b"http/1.1" };
        let cfg = client(&c.ca, case.cert, alpn);
        let got = rt.block_on(async {
            if case.h2 {
                h2(h.proxy, &cfg, &path, case.headers).await
            } else {
                h1(h.proxy, &cfg, &path, case.headers).await
            }
        });
        let seen = log.lock().unwrap().iter().find(|s| s.path == path).cloned();
        let Some(want) = case.who else {
            assert!(got.is_err(), "{what}: answered {got:?}");
            assert!(seen.is_none(), "{what}: reached the upstream: {seen:?}");
            continue;
        };
        let want_status = if case.headers.iter().any(|(k, _)| *k == "Upgrade") {
            101
        } else {
            200
        };
        assert_eq!(got, Ok(want_status), "{what}");
        let seen = seen.unwrap_or_else(|| panic!("{what}: never reached the upstream"));
        // Acceptance 2: who the upstream, trusting only front-proxy certificates, sees.
        assert_eq!(seen.who, want, "{what}");
        // At the TLS layer, cborgate's own front-proxy certificate with a named
        // identity; none without one (the request arrives with its own credentials
        // only, as if it came directly).
        let named = !case.identity.is_empty();
        assert_eq!(
            seen.tls_client.as_deref(),
            named.then_some("front-proxy-client"),
            "{what}"
        );
        let identity: Vec<(&str, &str)> = seen
            .identity_headers()
            .into_iter()
            .filter(|(k, _)| {
                !k.to_ascii_lowercase()
                    .starts_with("x-remote-extra-authentication")
            })
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        // Unchanged: the same values under each name, in order (HTTP does not order
        // different names).
        let lower = |v: &[(&str, &str)]| {
            let mut v = v
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .collect::<Vec<_>>();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(lower(&identity), lower(case.identity), "{what}");
        // A client certificate's fingerprint goes as kube-apiserver's credential id.
        let cred = seen.all("X-Remote-Extra-Authentication.kubernetes.io%2Fcredential-id");
        if case
            .cert
            .is_some_and(|l| l.cert_path.contains("alice") || l.cert_path.contains("lookalike"))
        {
            assert_eq!(cred.len(), 1, "{what}");
            assert!(cred[0].starts_with("X509SHA256="), "{what}");
        } else {
            assert!(cred.is_empty(), "{what}: {cred:?}");
        }
        // Authorization passes as it came.
        let auth = case
            .headers
            .iter()
            .find(|(k, _)| *k == "Authorization")
            .map(|(_, v)| *v);
        assert_eq!(seen.all("authorization").first().copied(), auth, "{what}");
    }
    // Counted by method and result, never by user.
    let count = |m: &str, r: &str| {
        h.metric(
            "cborgate_authentications_total",
            &[("method", m), ("result", r)],
        )
    };
    assert!(count("x509", "success") >= 6.0);
    assert!(
        count("x509", "failure") >= 2.0,
        "the unknown CA's handshakes"
    );
    assert!(count("front-proxy", "success") >= 2.0);
    assert!(count("front-proxy", "failure") >= 2.0);
    assert!(count("none", "failure") >= 5.0);
    assert!(!h.metrics().contains("alice"));
}

/// No identity header passes from a client that is not a verified front proxy with
/// every identity option unset, in every mode, for requests and upgrades alike.
#[test]
fn with_nothing_configured_spoofed_identity_headers_never_pass_in_any_mode() {
    use crate::support::http::Conn;
    use cborgate_standin::{CborMode, StandInOptions};
    for mode in ["legacy", "auto", "native", "upgrade"] {
        // `upgrade` mode sends CBOR upstream: a CBOR-enabled stand-in.
        let cbor = match mode {
            "upgrade" | "native" => CborMode::On,
            _ => CborMode::Off,
        };
        let h = Harness::start_with(
            mode,
            &[],
            StandInOptions {
                cbor,
                ..Default::default()
            },
        );
        let mut headers = SPOOF.to_vec();
        headers.push(("Accept", "application/json"));
        headers.push(("Authorization", "Bearer tok-2"));
        // The stand-in lets only system:admin be impersonated (anyone else gets its 403).
        headers.push(("Impersonate-User", "system:admin"));
        let r = crate::support::http::once(
            h.proxy,
            "GET",
            "/api/v1/namespaces/demo/configmaps/demo-config",
            &headers,
            None,
        );
        assert_eq!(r.status, 200, "{mode}");
        let mut c = Conn::connect(h.proxy);
        let mut up = SPOOF.to_vec();
        up.extend([
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Protocol", "v5.channel.k8s.io"),
        ]);
        c.send(
            "POST",
            "/api/v1/namespaces/demo/pods/pod-demo/exec?command=sh&stdin=true",
            &up,
            None,
        );
        assert_eq!(c.head().status, 101, "{mode}");
        let reqs = h.standin().requests();
        let get = reqs
            .iter()
            .find(|r| r.path.contains("demo-config"))
            .expect("the GET reached the stand-in");
        assert_eq!(get.header("authorization"), Some("Bearer tok-2"), "{mode}");
        assert_eq!(
            get.header("impersonate-user"),
            Some("system:admin"),
            "{mode}"
        );
        assert!(
            reqs.iter().any(|r| r.path.contains("/exec")),
            "{mode}: the upgrade"
        );
        for r in &reqs {
            for (k, _) in &r.headers {
                assert!(
                    !k.to_ascii_lowercase().starts_with("x-remote-"),
                    "{mode}: {k} reached the upstream on {}",
                    r.path
                );
            }
        }
        assert!(
            h.metric(
                "cborgate_authentications_total",
                &[("method", "none"), ("result", "failure")]
            ) >= 2.0,
            "{mode}"
        );
    }
}

/// Acceptance 3: a new client CA on disk changes who is accepted within seconds,
/// without a restart, and a watch opened before stays open.
#[test]
fn replacing_the_client_ca_changes_who_is_accepted_and_open_watches_stay_open() {
    let c = cluster("reload");
    let serving = c.ca.server("serving");
    let upstream_client = c
        .front_proxy_ca
        .client("front-proxy-client", "front-proxy-client", &[]);
    let ca_file = c.dir.join("client-ca.crt");
    std::fs::copy(&c.ca.path, &ca_file).unwrap();
    // Info logs as JSON on a pipe, read at the end: the request lines name the user.
    let mut h = Harness::start_env(
        "legacy",
        &[
            "--tls-cert",
            s(&serving.cert_path),
            "--tls-key",
            s(&serving.key_path),
            "--client-ca-file",
            ca_file.to_str().unwrap(),
            "--upstream-client-cert",
            s(&upstream_client.cert_path),
            "--upstream-client-key",
            s(&upstream_client.key_path),
            "--log-format",
            "json",
        ],
        Default::default(),
        &[("RUST_LOG", "info")],
        true,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let alice = c.ca.client("alice", "alice", &["devs"]);
    let bob = c.other_ca.client("bob", "bob", &["ops"]);
    let (as_alice, as_bob) = (
        client(&c.ca, Some(&alice), b"http/1.1"),
        client(&c.ca, Some(&bob), b"http/1.1"),
    );
    let user_of = |h: &Harness, path: &str| {
        h.standin()
            .requests()
            .iter()
            .rev()
            .find(|r| r.path == path)
            .and_then(|r| r.header("x-remote-user").map(str::to_string))
    };
    let path = "/api/v1/namespaces/demo/configmaps/demo-config";
    assert_eq!(rt.block_on(h1(h.proxy, &as_alice, path, &[])), Ok(200));
    assert_eq!(user_of(&h, path).as_deref(), Some("alice"));
    // Not accepted: the handshake fails, or (a TLS session resumed from before a
    // reload) the request is answered 401 and never forwarded.
    let refused = |r: Result<u16, String>| r.is_err() || r == Ok(401);
    assert!(
        refused(rt.block_on(h1(h.proxy, &as_bob, path, &[]))),
        "bob's CA is not trusted yet"
    );
    // A watch opened as alice.
    let mut watch =
        rt.block_on(async { open_tls_watch(connect(h.proxy, &as_alice).await.unwrap()).await });
    // The other CA replaces the client CA on disk (written aside, renamed over).
    let tmp = c.dir.join("client-ca.crt.tmp");
    std::fs::copy(&c.other_ca.path, &tmp).unwrap();
    std::fs::rename(&tmp, &ca_file).unwrap();
    eventually(10, "bob is accepted with the new client CA", || {
        rt.block_on(h1(h.proxy, &as_bob, path, &[])) == Ok(200)
    });
    assert_eq!(user_of(&h, path).as_deref(), Some("bob"));
    // Alice again, on a fresh session and on a resumed one.
    let before = h.standin().requests().len();
    let fresh_alice = client(&c.ca, Some(&alice), b"http/1.1");
    let r = rt.block_on(h1(h.proxy, &fresh_alice, path, &[]));
    assert!(r.is_err(), "alice's CA is gone: {r:?}");
    let resumed = rt.block_on(h1(h.proxy, &as_alice, path, &[]));
    assert!(
        refused(resumed.clone()),
        "alice's CA is gone (resumed): {resumed:?}"
    );
    assert_eq!(
        h.standin().requests().len(),
        before,
        "a refused request never reaches the upstream"
    );
    assert!(
        h.metric(
            "cborgate_reloads_total",
            &[("file", "client_ca"), ("result", "success")]
        ) >= 1.0
    );
    // The watch opened before the swap still delivers events.
    rt.block_on(crate::tls::watch_survives(&h, &mut watch));
    drop(watch);
    // The request log names the verified user and how; the 401 names nobody. (Every line
    // is written by the time the process exits after SIGTERM; not so after SIGKILL.)
    crate::connections::sigterm(&h);
    let code = crate::support::harness::wait_exit(&mut h.child, Duration::from_secs(20));
    assert_eq!(code, Some(0));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut h.child.stderr.take().unwrap(), &mut text).unwrap();
    let requests: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == "request")
        .collect();
    let by = |auth: &str, user: Option<&str>| {
        requests
            .iter()
            .any(|v| v["auth"] == auth && v["user"].as_str() == user)
    };
    assert!(by("x509", Some("alice")), "{text}");
    assert!(by("x509", Some("bob")), "{text}");
    // (A resumed TLS session gets the 401; rustls resumes when it has a ticket.)
    if resumed == Ok(401) {
        assert!(
            requests
                .iter()
                .any(|v| v["status"] == 401 && v["auth"] == "none" && v["user"].is_null()),
            "{text}"
        );
    }
}

/// Start-up refuses client certificates it could not honour, naming the key.
#[test]
fn client_certificates_need_a_tls_listener_and_an_upstream_certificate() {
    let c = cluster("startup");
    let serving = c.ca.server("serving");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cborgate"))
            .args(["serve", "--upstream", "http://127.0.0.1:1"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--client-ca-file", &c.ca.path]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("server.client_ca_file") && err.contains("TLS listener"),
        "{err}"
    );
    let (code, err) = run(&[
        "--tls-cert",
        &serving.cert_path,
        "--tls-key",
        &serving.key_path,
        "--requestheader-client-ca-file",
        &c.front_proxy_ca.path,
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("server.requestheader_client_ca_file") && err.contains("upstream.client_cert"),
        "{err}"
    );
    let (code, err) = run(&["--requestheader-username-headers", "X Bad"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("server.requestheader_username_headers"),
        "{err}"
    );
}
