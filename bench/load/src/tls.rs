//! The TLS handshake scenario's client: every GET on a new TLS connection (TCP connect,
//! full handshake, one request, the response, close), as a `kubectl` run makes them.
//! Blocking connections on a few threads of their own (rustls over `std::net`, the
//! shared HTTP/1.1 client reading the answers). Without resumption, every handshake is
//! a full one (the server signs with its key); with it, one client session cache is
//! shared by every connection of a turn, so after the first, each connection offers a
//! ticket the server gave an earlier one (TLS 1.3 PSK with a fresh key exchange).

use crate::client::Run;
use cborgate_standin::client::Conn;
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, StreamOwned};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A client configuration trusting `ca`, offering HTTP/1.1 by ALPN, with or without a
/// session cache (tickets offered).
pub fn client(ca: &CertificateDer<'static>, resume: bool) -> Result<Arc<ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg.resumption = if resume {
        Resumption::in_memory_sessions(256)
    } else {
        Resumption::disabled()
    };
    Ok(Arc::new(cfg))
}

/// One GET on a new TLS connection: the `200` with a JSON body (its length, and whether
/// the handshake resumed a session), or why not.
fn one(addr: SocketAddr, cfg: &Arc<ClientConfig>, path: &str) -> std::io::Result<(usize, bool)> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("localhost").expect("a server name");
    let tls = ClientConnection::new(cfg.clone(), name).map_err(|e| bad(e.to_string()))?;
    let mut conn = Conn::over(StreamOwned::new(tls, tcp));
    // A failed handshake fails the write, and then the read, which says why.
    conn.send(
        "GET",
        path,
        &[("Host", "load"), ("Accept", "application/json")],
        None,
    );
    let resp = conn.try_response("GET")?;
    if resp.status != 200 {
        return Err(bad(format!("status {}", resp.status)));
    }
    if resp.content_type() != "application/json" {
        return Err(bad(format!("Content-Type {}", resp.content_type())));
    }
    let resumed = conn.stream().conn.handshake_kind() == Some(HandshakeKind::Resumed);
    Ok((resp.body.len(), resumed))
}

/// `n` connections to `addr`, each one GET of `path`, `parallel` at a time (each
/// thread makes its share one after the other).
pub fn connections(
    addr: SocketAddr,
    cfg: &Arc<ClientConfig>,
    path: &str,
    n: usize,
    parallel: usize,
) -> Run {
    let started = Instant::now();
    let parallel = parallel.clamp(1, n.max(1));
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..parallel)
            .map(|i| {
                let share = n / parallel + usize::from(i < n % parallel);
                s.spawn(move || {
                    let mut run = Run::default();
                    for _ in 0..share {
                        let t = Instant::now();
                        match one(addr, cfg, path) {
                            Ok((bytes, resumed)) => {
                                run.requests += 1;
                                run.resumed += u64::from(resumed);
                                run.body_bytes += bytes as u64;
                                run.latencies.push(t.elapsed());
                            }
                            Err(e) => {
                                run.errors += 1;
                                run.first_error.get_or_insert(e.to_string());
                            }
                        }
                    }
                    run
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a TLS client thread"))
            .collect()
    });
    let mut total = Run::merge(runs);
    total.elapsed = started.elapsed();
    total
}
