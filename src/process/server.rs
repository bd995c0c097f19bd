//! Assembles and runs the pingora server. Start-up checks come first: every
//! certificate, key and CA file loads, and every listener can be bound, or the
//! process exits 2 with one line naming the key and the problem before
//! anything serves. Then the services: the proxy (plain, or TLS with h2 and
//! http/1.1 by ALPN and a certificate that reloads), the admin listener, the
//! upstream readiness probe and the certificate reloader. With a client CA, the TLS
//! listener asks for client certificates (`client_cert`). SIGTERM drains
//! (stop accepting, let requests finish within the grace period); SIGHUP
//! reloads certificates.

use crate::config::{Checked, Config, ConfigError, UpstreamUrl};
use crate::inbound::accept::ReadTimeout;
use crate::inbound::client_cert::{ClientCas, PeerCertCallback};
use crate::inbound::connections::Connections;
use crate::limits::admission::Admission;
use crate::limits::budget::BodyBudget;
use crate::metrics::metrics;
use crate::ops::admin::Admin;
use crate::ops::logs::Flush;
use crate::outbound::upstream::{ReadinessProbe, Upstream};
use crate::process::drain::{Drain, DrainTimes};
use crate::process::reload::Reloader;
use crate::process::sys::raise_fd_limit;
use crate::proxy::request_labels::vocabulary;
use crate::proxy::Gate;
use crate::tls::{Kind, ServingCert, UpstreamTls};
use async_trait::async_trait;
use pingora::listeners::{L4BufferSettings, ListenerConfig, TcpSocketOptions};
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownWatch};
use pingora::services::background::{background_service, BackgroundService};
use pingora::services::listening::Service;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often certificate, key and CA files are looked at for changes.
const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// How long the listeners may take to accept connections after start-up
/// before the process gives up (exit 1) instead of living on half-started.
const START_DEADLINE: Duration = Duration::from_secs(10);

/// The certificate reloader as a pingora background service.
struct Reloading(Mutex<Option<Reloader>>);

#[async_trait]
impl BackgroundService for Reloading {
    async fn start(&self, shutdown: ShutdownWatch) {
        let reloader = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(r) = reloader {
            r.run(RELOAD_INTERVAL, shutdown).await;
        }
    }
}

/// A server ready to run, and what `run` needs beside it.
pub struct Built {
    server: Server,
    admission: Arc<Admission>,
    connections: Arc<Connections>,
    drain: DrainTimes,
    listen: SocketAddr,
    admin: SocketAddr,
    /// The start-up line.
    summary: String,
}

/// Can `addr` be listened on? Bound as pingora binds it (SO_REUSEADDR, so a port whose
/// old connections linger in TIME_WAIT is fine; IPV6_V6ONLY off on `[::]`), then let go.
/// The address to serve on: `addr`, or for `[::]` (`:PORT`) on a host without IPv6,
/// `0.0.0.0` with the same port, as Go's `net.Listen` falls back.
fn check_listen(key: &str, flag: &str, addr: SocketAddr) -> Result<SocketAddr, ConfigError> {
    let refused = |addr: SocketAddr, e: std::io::Error| {
        ConfigError(format!("{key} ({flag}): cannot listen on {addr}: {e}"))
    };
    match probe_bind(addr) {
        Ok(()) => Ok(addr),
        Err(e) if both_families(addr) && no_ipv6(&e) => {
            let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
            probe_bind(v4).map(|()| v4).map_err(|e| refused(v4, e))
        }
        Err(e) => Err(refused(addr, e)),
    }
}

/// `[::]:PORT`: a listener for both families, IPV6_V6ONLY off (docs/surface.md).
fn both_families(addr: SocketAddr) -> bool {
    addr.is_ipv6() && addr.ip().is_unspecified()
}

/// An error that says the host has no IPv6 at all.
fn no_ipv6(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
    )
}

fn probe_bind(addr: SocketAddr) -> std::io::Result<()> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if both_families(addr) {
        socket.set_only_v6(false)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1)
}

/// pingora's socket options for a listener on `addr`: IPV6_V6ONLY off on `[::]`, so one
/// listener takes both families whatever the host's `net.ipv6.bindv6only` says.
fn socket_options(addr: SocketAddr) -> TcpSocketOptions {
    let mut options = TcpSocketOptions::default();
    if both_families(addr) {
        options.ipv6_only = Some(false);
    }
    options
}

/// Reload the client CA bundles when their files change.
fn watch_client_cas(reloader: &mut Reloader, cas: &Arc<ClientCas>, config: &Config) {
    let server = &config.server;
    for (kind, path, front_proxy) in [
        (Kind::ClientCa, &server.client_ca_file, false),
        (
            Kind::RequestHeaderCa,
            &server.requestheader_client_ca_file,
            true,
        ),
    ] {
        if path.is_empty() {
            continue;
        }
        let (cas, p) = (cas.clone(), path.clone());
        reloader.watch(
            kind,
            vec![path.clone()],
            Box::new(move || cas.reload(front_proxy, &p)),
        );
    }
}

/// `server.tls_min_version` and `server.tls_cipher_suites` as rustls' process-wide
/// crypto provider, installed before pingora installs its own (it keeps one already
/// there), so the listener and the upstream connections are made with it: TLS 1.2
/// suites kept by name (all when none is named), none at `VersionTLS13`; TLS 1.3's
/// always, as in Go.
fn install_tls_policy(config: &Config) -> Result<(), ConfigError> {
    use rustls::SupportedCipherSuite::{Tls12, Tls13};
    let server = &config.server;
    let tls13_only = server.tls_min_version == "VersionTLS13";
    let named: Vec<&str> = server
        .tls_cipher_suites
        .iter()
        .filter_map(|n| crate::config::cipher_suite_name(n))
        .collect();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.retain(|s| match s {
        Tls13(_) => true,
        Tls12(_) => {
            !tls13_only
                && (named.is_empty() || named.contains(&format!("{:?}", s.suite()).as_str()))
        }
    });
    let default_policy = !tls13_only && named.is_empty();
    match provider.install_default() {
        Ok(()) => Ok(()),
        // Already installed (a second server in one process, as tests start): harmless
        // for the default policy, which is what rustls' provider has.
        Err(_) if default_policy => Ok(()),
        Err(_) => Err(ConfigError(
            "server.tls_min_version / server.tls_cipher_suites (--tls-min-version, \
             --tls-cipher-suites): cannot apply them, a TLS provider is already in use in this \
             process"
                .into(),
        )),
    }
}

/// The admin listener, handed what it reads: `/readyz` is 503 "shutting down" once the
/// drain has begun, else the readiness probe's verdict (with its words); and `auto`
/// mode's capabilities for `/debug/capabilities`.
fn admin(upstream: &Upstream, gate: &Gate, admission: &Arc<Admission>) -> Admin {
    let readiness = upstream.readiness.clone();
    let draining = admission.clone();
    let capabilities = gate.capabilities();
    Admin {
        ready: Arc::new(move || {
            if draining.is_draining() {
                return Err("shutting down".to_string());
            }
            match readiness.get() {
                (true, _) => Ok(()),
                (false, why) => Err(format!("{why}\n")),
            }
        }),
        capabilities: Arc::new(move || capabilities.to_json()),
    }
}

/// Build the server. Every error is a configuration problem (exit status 2)
/// whose message names the key or flag. `requests` is where each request's log line goes
/// (`ops::request_lines::RequestLines::of`; none: no lines).
pub fn build(
    config: Checked,
    requests: Option<Arc<dyn crate::proxy::request_log::Lines>>,
) -> Result<Built, ConfigError> {
    let config = config.into_inner();
    metrics().count_at_zero(&vocabulary());
    install_tls_policy(&config)?;
    let (listen, admin_addr) = config.listen_addrs()?;
    // Files first: a missing certificate is named before a busy port is.
    let serving = if config.server.tls_cert.is_empty() {
        None
    } else {
        Some(
            ServingCert::load(&config.server.tls_cert, &config.server.tls_key)
                .map_err(ConfigError)?,
        )
    };
    let upstream_tls = UpstreamTls::load(
        &config.upstream.ca_file,
        &config.upstream.client_cert,
        &config.upstream.client_key,
    )
    .map_err(ConfigError)?;
    let client_cas = (!config.server.client_ca_file.is_empty()
        || !config.server.requestheader_client_ca_file.is_empty())
    .then(|| {
        ClientCas::load(
            &config.server.client_ca_file,
            &config.server.requestheader_client_ca_file,
            &config.server.requestheader_allowed_names,
        )
    })
    .transpose()
    .map_err(ConfigError)?;
    let listen = check_listen("server.listen", "--listen", listen)?;
    let admin_addr = check_listen("server.admin", "--admin", admin_addr)?;

    let config = Arc::new(config);
    let conf = ServerConf {
        threads: config.server.threads,
        // The drain watchdog exits earlier when nothing is in flight.
        grace_period_seconds: Some(config.server.grace_period_seconds),
        graceful_shutdown_timeout_seconds: Some(1),
        // pingora times a read, a write or a connect with its own timer wheel unless the
        // timeout is longer than this many seconds; that wheel's clock thread, once started,
        // wakes every 10 ms for the life of the process (pingora-timeout 0.9 `clock_thread`),
        // which was most of an idle cborgate's CPU. At 0, every timeout of a second or more
        // (all of cborgate's, but a `upstream.connect_timeout_ms` under 1000) goes to tokio's
        // timers, which sleep while nothing is due.
        fast_timeout_to_tokio_threshold_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(Opt::default()), conf);
    server.bootstrap();

    let admission = Admission::new();
    let connections = Connections::new(
        config.connection_limit(raise_fd_limit()),
        Duration::from_secs(config.server.request_head_timeout_seconds),
        crate::proxy::local_reply::http1_bytes,
    );
    let upstream = Arc::new(Upstream::new(&config, upstream_tls.clone())?);
    let budget = BodyBudget::new(config.server.max_buffered_body_bytes);
    let gate = Gate::new(
        config.clone(),
        upstream.clone(),
        admission.clone(),
        budget,
        requests,
    );
    let admin = admin(&upstream, &gate, &admission);
    // pingora's `http_proxy_service` with cborgate's own loop around the proxy, for
    // `server.request_read_timeout_seconds` (see src/inbound/accept.rs); same service name.
    let mut http = pingora::proxy::http_proxy(&server.configuration, gate);
    // One HTTP/2 client connection may carry `server.http2_max_streams` requests and
    // watches at once (pingora's default is 100; Go's, and so kube-apiserver's, 250), as
    // client-go multiplexes everything it does over one connection.
    let mut h2 = pingora::protocols::http::v2::server::default_h2_options();
    h2.max_concurrent_streams(config.server.http2_max_streams);
    // The header list an HTTP/2 client may send (RFC 9113 §6.5.2: names, values and 32
    // bytes a field) is `server.max_header_bytes`, 1 MiB by default as Go's
    // `MaxHeaderBytes` and so kube-apiserver's; pingora's default of 64 KiB cut off a
    // request impersonating a user with 2,000 groups (about 90 KB of `Impersonate-Group`).
    h2.max_header_list_size(u32::try_from(config.server.max_header_bytes).unwrap_or(u32::MAX));
    http.h2_options = Some(h2);
    let mut proxy = Service::new(
        "Pingora HTTP Proxy Service".to_string(),
        ReadTimeout::new(
            http,
            config.server.request_read_timeout_seconds,
            connections.clone(),
        ),
    );
    // No L4 read buffer (pingora's default is 64 KiB per connection, zeroed when the
    // connection is accepted): pingora's HTTP/1 session reads the head and the body into
    // buffers of its own, so an idle connection then costs a few KiB instead of 64.
    // The write buffer (pingora's default: 1,460 bytes) is `server.write_buffer_bytes`:
    // pingora writes a response head and its body separately, and with the default a
    // 7 KB answer left as two sends, each a TCP segment that wakes the client
    // (strace in bench/README.md); gathered, it is one.
    let buffers = L4BufferSettings::default()
        .read(0)
        .write(config.server.write_buffer_bytes);
    let endpoint = || {
        ListenerConfig::tcp(listen.to_string())
            .l4_buffer(buffers)
            .tcp_socket_options(socket_options(listen))
    };
    let scheme = match &serving {
        None => {
            proxy.add_listener(endpoint());
            "http"
        }
        Some(cert) => {
            use pingora::listeners::tls::TlsSettings;
            let mut tls = match &client_cas {
                // Ask for a client certificate; record what it proves after the handshake.
                Some(cas) => {
                    let mut tls =
                        TlsSettings::with_callbacks(Box::new(PeerCertCallback(cas.clone())));
                    if let Ok(t) = &mut tls {
                        t.set_client_cert_verifier(cas.clone());
                    }
                    tls
                }
                None => TlsSettings::intermediate("", ""),
            }
            .map_err(|e| {
                // pingora's error names its own types; its context is the cause.
                let why = e.context.as_ref().map(|c| format!(": {}", c.as_str()));
                ConfigError(format!(
                    "server.tls_cert/tls_key (--tls-cert, --tls-key): the TLS listener could \
                     not be set up{}",
                    why.unwrap_or_default()
                ))
            })?;
            tls.set_cert_resolver(cert.clone());
            tls.enable_h2();
            proxy.add_listener(endpoint().tls(tls));
            "https"
        }
    };
    let mut admin_service = Service::new("cborgate admin".to_string(), admin);
    admin_service.add_tcp_with_settings(&admin_addr.to_string(), socket_options(admin_addr));
    let client = (!config.upstream.client_cert.is_empty()).then(|| {
        (
            config.upstream.client_cert.clone(),
            config.upstream.client_key.clone(),
        )
    });
    let mut reloader = Reloader::new(
        serving.map(|c| {
            (
                c,
                config.server.tls_cert.clone(),
                config.server.tls_key.clone(),
            )
        }),
        &upstream_tls,
        &config.upstream.ca_file,
        client,
    );
    if let Some(cas) = &client_cas {
        watch_client_cas(&mut reloader, cas, &config);
    }
    server.add_service(proxy);
    server.add_service(admin_service);
    server.add_service(background_service(
        "readiness probe",
        ReadinessProbe(upstream.clone()),
    ));
    server.add_service(background_service(
        "memory trim",
        crate::process::memory::Trimmer(connections.clone()),
    ));
    server.add_service(background_service(
        "certificate reload",
        Reloading(Mutex::new(Some(reloader))),
    ));
    let url = UpstreamUrl::parse(&config.upstream.url)?;
    let summary = format!(
        "cborgate {} serving {scheme}://{listen} in {} mode, upstream {}://{}:{}{}, admin http://{admin_addr}",
        crate::VERSION,
        config.upstream.mode,
        if url.tls { "https" } else { "http" },
        url.host,
        url.port,
        if config.upstream.insecure_skip_verify {
            " (certificate NOT verified)"
        } else {
            ""
        },
    );
    Ok(Built {
        server,
        admission,
        connections,
        drain: DrainTimes::of(&config),
        listen,
        admin: admin_addr,
        summary,
    })
}

/// Panics: each is counted and logged on one line. One before the listeners
/// accept connections means a half-started process: it exits 1 instead of
/// living on with a dead thread, after the lines logged so far.
fn install_panic_hook(started: Arc<AtomicBool>, logs: Flush) {
    std::panic::set_hook(Box::new(move |info| {
        metrics().panics_total.inc();
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if started.load(Ordering::Acquire) {
            tracing::error!(%location, %message, "panic (a bug): the request it served was ended");
        } else {
            logs.flush();
            eprintln!("cborgate: start-up failed: panic at {location}: {message}");
            std::process::exit(1);
        }
    }));
}

/// Wait until both listeners accept connections; exit 1 if they never do.
fn watch_start(
    listen: SocketAddr,
    admin: SocketAddr,
    started: Arc<AtomicBool>,
    summary: String,
    logs: Flush,
) {
    std::thread::spawn(move || {
        let t = Instant::now();
        let up = |a: SocketAddr| {
            std::net::TcpStream::connect_timeout(&loopback(a), Duration::from_millis(200)).is_ok()
        };
        while !(up(listen) && up(admin)) {
            if t.elapsed() > START_DEADLINE {
                logs.flush();
                eprintln!(
                    "cborgate: start-up failed: not accepting connections on {listen} and {admin} after {} s",
                    START_DEADLINE.as_secs()
                );
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        started.store(true, Ordering::Release);
        tracing::info!("{summary}");
    });
}

/// A connectable address for a listener bound to the unspecified address.
fn loopback(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v) if v.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, v.port()))
        }
        SocketAddr::V6(v) if v.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, v.port()))
        }
        other => other,
    }
}

/// Run until SIGTERM (drain, exit 0) or SIGINT (exit at once). Every exit
/// writes out the log lines still queued first (`logs`).
pub fn run(built: Built, logs: Flush) -> ! {
    let started = Arc::new(AtomicBool::new(false));
    install_panic_hook(started.clone(), logs.clone());
    watch_start(
        built.listen,
        built.admin,
        started,
        built.summary,
        logs.clone(),
    );
    built.server.run(RunArgs {
        shutdown_signal: Box::new(Drain::new(
            built.drain,
            built.admission,
            built.connections,
            logs.clone(),
        )),
    });
    logs.flush();
    std::process::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[::]` is bound for both families; where the host has no IPv6 (the socket family
    /// unsupported, or `::` not assignable), `0.0.0.0` with the same port instead.
    #[test]
    fn every_interface_binds_both_families_or_falls_back_to_ipv4() {
        let any: SocketAddr = "[::]:0".parse().unwrap();
        let got = check_listen("server.listen", "--listen", any).unwrap();
        assert!(got == any || got == "0.0.0.0:0".parse().unwrap(), "{got}");
        assert!(both_families(any));
        assert!(!both_families("[::1]:0".parse().unwrap()));
        assert!(!both_families("0.0.0.0:0".parse().unwrap()));
        for errno in [
            libc::EAFNOSUPPORT,
            libc::EADDRNOTAVAIL,
            libc::EPROTONOSUPPORT,
        ] {
            assert!(no_ipv6(&std::io::Error::from_raw_os_error(errno)));
        }
        assert!(!no_ipv6(&std::io::Error::from_raw_os_error(
            libc::EADDRINUSE
        )));
        let opts = socket_options(any);
        assert_eq!(opts.ipv6_only, Some(false));
        assert_eq!(socket_options("[::1]:0".parse().unwrap()).ipv6_only, None);
    }
}
