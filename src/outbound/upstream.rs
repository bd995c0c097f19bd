//! The upstream apiserver: where it is (its name resolved without blocking a
//! worker, and again as it changes), how to reach it (peer, TLS material from
//! [`crate::tls::UpstreamTls`], timeouts), and whether it answers now (the
//! readiness probe behind `/readyz`).

use super::failure::{upstream_failure_words_in, TlsFiles};
use crate::config::{Config, ConfigError, Http2, UpstreamUrl};
use crate::metrics::metrics;
use crate::negotiate::pool::Pool;
use crate::negotiate::upstream_cbor::{
    cbor_probe_support, probe_wait, readiness, NotReady, CBOR_PROBE_BODY, CBOR_PROBE_PATH,
};
use crate::negotiate::{CborSupport, UpstreamMode};
use crate::tls::UpstreamTls;
use pingora::http::RequestHeader;
use pingora::prelude::HttpPeer;
use pingora::protocols::ALPN;
use pingora::Result;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A resolved address is used for this long; after that the next request starts
/// a lookup in the background and goes on with the address it has. Kubernetes
/// Services' DNS records have a TTL of 5 s (CoreDNS's default `ttl 5` for the
/// `kubernetes` plugin), so this follows an address that moves.
const REFRESH: Duration = Duration::from_secs(5);

/// With no address at all, a failed lookup is repeated at most this often: a
/// burst of requests during a DNS outage costs one lookup, not one each.
const NEGATIVE: Duration = Duration::from_secs(1);

/// The longest a lookup may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

type LookupFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// How a host name becomes addresses: the system resolver by default (on
/// tokio's blocking pool, never on a worker), a fake in tests.
pub type Lookup = Arc<dyn Fn(String, u16) -> LookupFuture + Send + Sync>;

fn system_lookup() -> Lookup {
    Arc::new(|host, port| {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    })
}

#[derive(Default)]
struct DnsState {
    addr: Option<SocketAddr>,
    resolved_at: Option<Instant>,
    failed: Option<(Instant, String)>,
}

/// The upstream's host name, resolved.
pub struct Resolver {
    host: String,
    port: u16,
    /// Set when the URL names an IP address: nothing to resolve.
    literal: Option<SocketAddr>,
    lookup: Lookup,
    state: Mutex<DnsState>,
    /// One lookup at a time.
    in_flight: tokio::sync::Mutex<()>,
    refreshing: AtomicBool,
}

impl Resolver {
    pub fn new(host: &str, port: u16, lookup: Option<Lookup>) -> Arc<Self> {
        Arc::new(Resolver {
            host: host.to_string(),
            port,
            literal: host
                .parse::<std::net::IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, port)),
            lookup: lookup.unwrap_or_else(system_lookup),
            state: Mutex::new(DnsState::default()),
            in_flight: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DnsState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address to connect to. An address once resolved stays in use while
    /// a newer lookup is under way or fails (a DNS hiccup does not take the
    /// proxy down); `Err` only when no lookup has ever succeeded.
    pub async fn resolve(self: &Arc<Self>) -> std::result::Result<SocketAddr, String> {
        if let Some(a) = self.literal {
            return Ok(a);
        }
        let (cached, stale) = {
            let s = self.state();
            (s.addr, s.resolved_at.is_none_or(|t| t.elapsed() >= REFRESH))
        };
        if let Some(addr) = cached {
            if stale && !self.refreshing.swap(true, Ordering::AcqRel) {
                let me = self.clone();
                tokio::spawn(async move {
                    let _ = me.lookup_now().await;
                    me.refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(addr);
        }
        let _one = self.in_flight.lock().await;
        {
            let s = self.state();
            if let Some(addr) = s.addr {
                return Ok(addr);
            }
            if let Some((at, why)) = &s.failed {
                if at.elapsed() < NEGATIVE {
                    return Err(why.clone());
                }
            }
        }
        self.lookup_now().await
    }

    async fn lookup_now(&self) -> std::result::Result<SocketAddr, String> {
        let found =
            tokio::time::timeout(LOOKUP_TIMEOUT, (self.lookup)(self.host.clone(), self.port)).await;
        let result = match found {
            Ok(Ok(addrs)) => addrs
                .into_iter()
                .next()
                .ok_or_else(|| "the name has no addresses".to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "the lookup took longer than {} s",
                LOOKUP_TIMEOUT.as_secs()
            )),
        };
        let mut s = self.state();
        match result {
            Ok(addr) => {
                if s.addr != Some(addr) {
                    tracing::info!(host = %self.host, %addr, "upstream address resolved");
                }
                s.addr = Some(addr);
                s.resolved_at = Some(Instant::now());
                s.failed = None;
                Ok(addr)
            }
            Err(e) => {
                metrics().upstream_resolve_failures_total.inc();
                let why = format!("cannot resolve the upstream host {}: {e}", self.host);
                if s.failed.is_none() {
                    // Once per outage; the counter has every failure.
                    match s.addr {
                        Some(kept) => tracing::warn!(
                            host = %self.host,
                            error = %e,
                            "upstream DNS lookup failed; still using {kept}, the last address it had"
                        ),
                        None => tracing::warn!(
                            host = %self.host,
                            error = %e,
                            "upstream DNS lookup failed; no address yet: requests get 503"
                        ),
                    }
                }
                s.failed = Some((Instant::now(), why.clone()));
                Err(why)
            }
        }
    }
}

/// Whether the upstream answered the last readiness probe, and why not; in upgrade mode
/// also whether it speaks CBOR ([`CborSupport`]), from the answers to the requests cborgate
/// made CBOR and from the CBOR probe (docs/wire.md §5, `upgrade`). What `/readyz` says
/// follows from these in [`crate::negotiate::upstream_cbor::readiness`].
#[derive(Debug)]
pub struct Readiness {
    /// The upstream refuses CBOR: a fast check for the requests that find it speaks
    /// CBOR again, which then take the lock.
    refuses_cbor: AtomicBool,
    state: Mutex<ReadinessState>,
    /// A request found the upstream unreachable: the probe looks at once.
    doubt: tokio::sync::Notify,
}

#[derive(Debug)]
struct ReadinessState {
    probe_ready: bool,
    probe_why: String,
    /// Why the upstream's answers say it cannot speak CBOR, and when that was last seen.
    refuses_cbor: Option<(String, Instant)>,
}

/// A refusal of CBOR learned from client traffic holds this long when the CBOR probe
/// cannot tell (it has no identity the upstream lets make it), so that a pod taken out of
/// its Service, which then gets no traffic, is tried again: `/readyz` recovers within
/// this plus one probe interval once the upstream speaks CBOR.
pub const REFUSAL_HOLD: Duration = Duration::from_secs(20);

impl ReadinessState {
    fn verdict(&self) -> Result<(), NotReady> {
        readiness(false, self.probe_ready, self.refuses_cbor.is_some())
    }

    fn publish(&self) {
        metrics()
            .upstream_ready
            .set(i64::from(self.verdict().is_ok()));
        metrics()
            .upstream_cbor
            .set(i64::from(self.verdict() != Err(NotReady::WithoutCbor)));
    }

    fn why(&self) -> String {
        match (self.verdict(), &self.refuses_cbor) {
            (Err(NotReady::WithoutCbor), Some((why, _))) => why.clone(),
            _ => self.probe_why.clone(),
        }
    }
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            refuses_cbor: AtomicBool::new(false),
            state: Mutex::new(ReadinessState {
                probe_ready: false,
                probe_why: "the upstream has not been probed yet".into(),
                refuses_cbor: None,
            }),
            doubt: tokio::sync::Notify::new(),
        }
    }
}

impl Readiness {
    fn state(&self) -> std::sync::MutexGuard<'_, ReadinessState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The readiness probe's answer. Returns whether the probe's own verdict changed.
    pub fn set(&self, ready: bool, why: String) -> bool {
        let mut s = self.state();
        let changed = s.probe_ready != ready;
        s.probe_ready = ready;
        s.probe_why = why;
        s.publish();
        changed
    }

    /// What an answer in upgrade mode showed about the upstream's CBOR. The first
    /// refusal is logged once (not once per request); so is the first CBOR answer after it.
    pub fn record_cbor(&self, support: CborSupport) {
        let refused = matches!(support, CborSupport::Refused(_));
        if !refused && !self.refuses_cbor.load(Ordering::Acquire) {
            return;
        }
        self.learn(
            Some(support),
            "the upstream answered a CBOR request with CBOR",
        );
    }

    /// What upgrade mode's CBOR probe showed: a CBOR answer or a refusal settles it; when
    /// the probe tells nothing, a refusal learned from traffic lapses after
    /// [`REFUSAL_HOLD`] without another one.
    pub fn record_cbor_probe(&self, support: Option<CborSupport>) {
        if support.is_none() {
            let mut s = self.state();
            if s.refuses_cbor
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() >= REFUSAL_HOLD)
            {
                s.refuses_cbor = None;
                self.refuses_cbor.store(false, Ordering::Release);
                s.publish();
                tracing::info!(
                    reason = %format_args!(
                        "no request has found the upstream refusing CBOR for {} s",
                        REFUSAL_HOLD.as_secs()
                    ),
                    "upstream ready again unless the next CBOR request is refused"
                );
            }
            return;
        }
        self.learn(support, "the upstream answered the CBOR probe with CBOR");
    }

    fn learn(&self, support: Option<CborSupport>, speaks: &str) {
        let mut s = self.state();
        match support {
            Some(CborSupport::Refused(why)) => match &mut s.refuses_cbor {
                // The first reason stays; the refusal is renewed.
                Some((_, at)) => *at = Instant::now(),
                None => {
                    tracing::warn!(reason = %why, "upstream not ready");
                    s.refuses_cbor = Some((why, Instant::now()));
                }
            },
            Some(CborSupport::Speaks) if s.refuses_cbor.is_some() => {
                tracing::info!(reason = speaks, "upstream ready");
                s.refuses_cbor = None;
            }
            _ => {}
        }
        self.refuses_cbor
            .store(s.refuses_cbor.is_some(), Ordering::Release);
        s.publish();
    }

    /// A request could not reach the upstream (`failure::suggests_unreachable`): while
    /// the probe last found it reachable, the probe looks again at once rather than at
    /// its next turn, so that `/readyz` turns 503 as soon as requests see it gone.
    pub fn doubt(&self) {
        if self.state().probe_ready {
            self.doubt.notify_one();
        }
    }

    /// Until a request doubts the upstream ([`Self::doubt`]).
    async fn doubted(&self) {
        self.doubt.notified().await
    }

    /// `(ready, reason)`: the upstream's refusal of CBOR is the reason only while the
    /// probe reaches the upstream.
    pub fn get(&self) -> (bool, String) {
        let s = self.state();
        (s.verdict().is_ok(), s.why())
    }
}

pub struct Upstream {
    pub url: UpstreamUrl,
    pub tls: Arc<UpstreamTls>,
    pub resolver: Arc<Resolver>,
    connect_timeout: Duration,
    header_timeout: Duration,
    insecure: bool,
    /// Offer HTTP/2 (TLS upstreams only), with at most this many streams per connection.
    http2_streams: Option<usize>,
    /// One HTTP/2 session acquisition at a time (`connect_turn`).
    connect_gate: Arc<tokio::sync::Semaphore>,
    pub readiness: Arc<Readiness>,
    /// Upgrade mode also probes the upstream's CBOR.
    mode: UpstreamMode,
    /// `upstream.ca_file` and `upstream.client_cert`, for the words of a TLS failure.
    ca_file: String,
    client_cert_file: String,
    /// The user header the CBOR probe names its own identity in, when the upstream
    /// client certificate is a front-proxy certificate (a client or request-header CA
    /// is configured): without a user header the apiserver takes such a certificate for
    /// nobody and answers 401, which tells nothing about CBOR.
    probe_user_header: Option<String>,
}

/// Count an upstream connection opened (not `reused`) in
/// `cborgate_upstream_connections_opened_total`.
pub fn count_opened(reused: bool) {
    if !reused {
        metrics().upstream_connections_opened_total.inc();
    }
}

/// The user the CBOR probe names when it speaks as a front proxy: no group, so only
/// what every authenticated user may do (`system:basic-user`: create a
/// SelfSubjectReview), and a name an audit log shows as cborgate's own.
pub const PROBE_USER: &str = "system:cborgate:readiness-probe";

/// The `group_key` bit of long-running requests' upstream connections.
const LONG_RUNNING_POOL: u64 = 1 << 63;

const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the probe's connection is kept before it is made anew.
const FRESH_AFTER: Duration = Duration::from_secs(60);

impl Upstream {
    pub fn new(config: &Config, tls: Arc<UpstreamTls>) -> Result<Self, ConfigError> {
        let url = UpstreamUrl::parse(&config.upstream.url)?;
        Ok(Upstream {
            resolver: Resolver::new(&url.host, url.port, None),
            http2_streams: (config.upstream.http2 == Http2::Auto && url.tls)
                .then_some(config.upstream.http2_max_streams),
            connect_gate: Arc::new(tokio::sync::Semaphore::new(1)),
            url,
            tls,
            connect_timeout: Duration::from_millis(config.upstream.connect_timeout_ms),
            header_timeout: Duration::from_secs(config.upstream.response_header_timeout_seconds),
            insecure: config.upstream.insecure_skip_verify,
            readiness: Arc::new(Readiness::default()),
            mode: config.upstream.mode,
            ca_file: config.upstream.ca_file.clone(),
            client_cert_file: config.upstream.client_cert.clone(),
            probe_user_header: {
                let names = config.identity_headers();
                (names.client_certs && !config.upstream.client_cert.is_empty())
                    .then(|| names.user.first().cloned())
                    .flatten()
            },
        })
    }

    /// A peer for one request to `addr`. Long-running requests (watches,
    /// upgrades, followed logs) get no read timeout at all. `client_cert`: present
    /// the upstream client certificate (pooled connections are kept apart by it).
    /// `pool`: the connections it may share (anonymous requests get their own).
    pub fn peer(
        &self,
        addr: SocketAddr,
        long_running: bool,
        client_cert: bool,
        pool: Pool,
    ) -> Box<HttpPeer> {
        let mut peer = HttpPeer::new(addr, self.url.tls, self.url.host.clone());
        peer.options.connection_timeout = Some(self.connect_timeout);
        peer.options.read_timeout = if long_running {
            None
        } else {
            Some(self.header_timeout)
        };
        peer.client_cert_key = self.tls.client().filter(|_| client_cert);
        peer.options.ca = self.tls.ca();
        // Pooled connections are reused only with the credentials they were made with,
        // and only by requests of the same pool (docs/wire.md §5a).
        peer.group_key = pool.group_key(self.tls.generation());
        if long_running {
            // Pooled apart from short requests' connections: the drain ends these
            // (`Admission::end_long_running`), which never cuts a short request, over
            // HTTP/1.1 or on a shared HTTP/2 connection.
            peer.group_key |= LONG_RUNNING_POOL;
        }
        // pingora forwards only WebSocket upgrades by default; kubectl falls
        // back to SPDY/3.1 for exec, attach and port-forward, so keep any
        // upgrade handshake whole (this applies only when `Upgrade` is present).
        peer.options.http_upstream_request_policy.h1_upgrade =
            pingora::upstreams::peer::H1UpgradePolicy::Preserve;
        if self.insecure {
            peer.options.verify_cert = false;
            peer.options.verify_hostname = false;
        }
        Box::new(peer)
    }

    /// The HTTP version a request goes upstream in: HTTP/2 offered by ALPN (then
    /// HTTP/1.1) when configured and the upstream is TLS, so requests and watches share
    /// connections, up to the stream limit each; HTTP/1.1 for `http1_only` (SPDY and
    /// WebSocket upgrades exist only there; `Plan::needs_http1`).
    /// Whether HTTP/2 is offered.
    pub fn choose_http_version(&self, peer: &mut HttpPeer, http1_only: bool) -> bool {
        match self.http2_streams {
            Some(streams) if !http1_only => {
                peer.options.alpn = ALPN::H2H1;
                peer.options.max_h2_streams = streams;
                true
            }
            _ => {
                peer.options.alpn = ALPN::H1;
                false
            }
        }
    }

    /// For a request that may go over HTTP/2: the turn to get an upstream session, held
    /// until pingora has one (`connected_to_upstream`, `fail_to_connect`, or the end of the
    /// request). pingora's pool lists an HTTP/2 connection only once it is made, so a burst
    /// of requests would each open a connection of its own (bench: 101 connections for
    /// 1,100 watches); one at a time, the rest find the first one's spare streams. Reusing
    /// a pooled connection takes microseconds; only a new connection's handshake makes the
    /// others wait, and only that long.
    pub async fn connect_turn(&self, h2: bool) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if !h2 {
            return None;
        }
        Arc::clone(&self.connect_gate).acquire_owned().await.ok()
    }

    /// The files behind the upstream's TLS, for the words of a failure.
    pub fn tls_files(&self) -> TlsFiles<'_> {
        TlsFiles {
            system_roots: self.ca_file.is_empty() && !self.insecure,
            ca_file: &self.ca_file,
            client_cert: &self.client_cert_file,
        }
    }

    /// The Host header the upstream expects when the client sent none.
    fn host_header(&self) -> String {
        if self.url.host.contains(':') {
            format!("[{}]:{}", self.url.host, self.url.port)
        } else {
            format!("{}:{}", self.url.host, self.url.port)
        }
    }

    /// Keep the client's Host unless it is missing (HTTP/2 uses :authority).
    pub fn rewrite_host(&self, req: &mut RequestHeader) -> Result<()> {
        if req.headers.get(http::header::HOST).is_none() {
            req.insert_header("Host", self.host_header())?;
        }
        Ok(())
    }

    /// One probe request over a connection made as requests make theirs (address, TLS,
    /// CA, client certificate), but always HTTP/1.1: its status and Content-Type. After a
    /// whole answer, when `keep`, the connection goes back to `connector`'s pool (with no
    /// idle timer) for the next probe; otherwise it is closed.
    async fn ask(
        &self,
        connector: &pingora::connectors::http::Connector,
        method: &str,
        path: &str,
        body: Option<(&str, &'static str)>,
        keep: bool,
    ) -> std::result::Result<(u16, Option<String>, SocketAddr), String> {
        // A kept connection the upstream closed meanwhile fails at once: ask again, on
        // a new one, as pingora sends a request again after a reused connection fails.
        match self.ask_once(connector, method, path, body, keep).await {
            Err((_, true)) => self.ask_once(connector, method, path, body, keep).await,
            other => other,
        }
        .map_err(|(why, _)| why)
    }

    /// [`Self::ask`] once; an error says whether its connection was a kept one.
    async fn ask_once(
        &self,
        connector: &pingora::connectors::http::Connector,
        method: &str,
        path: &str,
        body: Option<(&str, &'static str)>,
        keep: bool,
    ) -> std::result::Result<(u16, Option<String>, SocketAddr), (String, bool)> {
        let addr = self.resolver.resolve().await.map_err(|e| (e, false))?;
        let mut peer = self.peer(addr, false, true, Pool::Credentialed);
        // HTTP/1.1, whose kept connection pingora's pool hands back for the next probe (a
        // released HTTP/2 probe connection was closed at once here: seen against
        // kube-apiserver 1.36.2, a new connection and handshake for every probe).
        self.choose_http_version(&mut peer, true);
        let words = |e: &pingora::Error| {
            format!(
                "the upstream at {addr} {}",
                upstream_failure_words_in(e.etype(), &e.to_string(), &self.tls_files())
            )
        };
        let (mut session, reused) = connector
            .get_http_session(&*peer)
            .await
            .map_err(|e| (words(&e), false))?;
        count_opened(reused);
        let fail = |e: Box<pingora::Error>| (words(&e), reused);
        let mistake = |e: Box<pingora::Error>| (e.to_string(), false);
        let mut req = RequestHeader::build(method, path.as_bytes(), None).map_err(mistake)?;
        let mut header = |k: &'static str, v: String| req.insert_header(k, v).map_err(mistake);
        header("Host", self.host_header())?;
        header(
            "User-Agent",
            concat!("cborgate/", env!("CARGO_PKG_VERSION"), " readiness").into(),
        )?;
        if let Some((bytes, accept)) = body {
            header("Accept", accept.into())?;
            header("Content-Type", "application/json".into())?;
            header("Content-Length", bytes.len().to_string())?;
        }
        if let (Some(_), Some(user)) = (body, &self.probe_user_header) {
            req.insert_header(user.clone(), PROBE_USER)
                .map_err(mistake)?;
        }
        session
            .write_request_header(Box::new(req))
            .await
            .map_err(fail)?;
        if let Some((bytes, _)) = body {
            session
                .write_request_body(bytes::Bytes::copy_from_slice(bytes.as_bytes()), true)
                .await
                .map_err(fail)?;
        }
        session.finish_request_body().await.map_err(fail)?;
        session.read_response_header().await.map_err(fail)?;
        let (code, ct) = session.response_header().map_or((0, None), |r| {
            (
                r.status.as_u16(),
                r.headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            )
        });
        // The whole answer is read, so that the connection can serve the next probe.
        let mut whole = true;
        loop {
            match session.read_response_body().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    whole = false;
                    break;
                }
            }
        }
        if whole && keep {
            connector.release_http_session(session, &*peer, None).await;
        } else {
            session.shutdown().await;
        }
        Ok((code, ct, addr))
    }

    /// One readiness probe: `GET /readyz`. Any answer below 500 means requests would
    /// reach a working server now (a 401 or 403 means the probe itself is not authorised,
    /// not that the server is down); 5xx, a failed connection, handshake or timeout mean
    /// not ready. `keep`: keep its connection for the next probe.
    pub async fn probe(
        &self,
        connector: &pingora::connectors::http::Connector,
        keep: bool,
    ) -> (bool, String) {
        let asked = self.ask(connector, "GET", "/readyz", None, keep);
        match tokio::time::timeout(PROBE_TIMEOUT, asked).await {
            Ok(Ok((code, _, addr))) => (
                code < 500,
                format!("the upstream at {addr} answered GET /readyz with {code}"),
            ),
            Ok(Err(e)) => (false, e),
            Err(_) => (
                false,
                format!(
                    "the upstream did not answer GET /readyz within {} s",
                    PROBE_TIMEOUT.as_secs()
                ),
            ),
        }
    }

    /// Upgrade mode's CBOR probe ([`cbor_probe_support`]): whether the upstream speaks
    /// CBOR, with no client traffic needed; `None` when its answer tells nothing.
    pub async fn cbor_probe(
        &self,
        connector: &pingora::connectors::http::Connector,
        keep: bool,
    ) -> Option<CborSupport> {
        let asked = self.ask(
            connector,
            "POST",
            CBOR_PROBE_PATH,
            Some((CBOR_PROBE_BODY, "application/cbor")),
            keep,
        );
        match tokio::time::timeout(PROBE_TIMEOUT, asked).await {
            Ok(Ok((code, ct, _))) => cbor_probe_support(code, ct.as_deref()),
            _ => None,
        }
    }
}

/// Probes the upstream for `/readyz` ([`probe_wait`]: every 2 s, every 5 s once ready), as a pingora
/// background service.
pub struct ReadinessProbe(pub Arc<Upstream>);

#[async_trait::async_trait]
impl pingora::services::background::BackgroundService for ReadinessProbe {
    async fn start(&self, mut shutdown: pingora::server::ShutdownWatch) {
        // A connector of its own, so probes never take or leave requests' pooled
        // connections, made once (a new one reads the system's trusted CAs: about 10 ms
        // of CPU, though the peer's own CA is what verifies). Its connection is kept from
        // probe to probe (a TLS handshake with a client certificate every 2 s was most of
        // an idle cborgate's CPU); the first probe after FRESH_AFTER closes it when done,
        // so that a handshake the upstream would now refuse (a rotated CA, an expired
        // certificate) is seen by the next one. A rotated client certificate makes a new
        // connection at once (`Pool::group_key`).
        let connector = pingora::connectors::http::Connector::new(None);
        let mut made = Instant::now();
        let upgrade = self.0.mode == UpstreamMode::Upgrade;
        loop {
            let started = Instant::now();
            let fresh = made.elapsed() >= FRESH_AFTER;
            if fresh {
                made = started;
            }
            // The round's last request closes the connection when it is time.
            let (ready, why) = self.0.probe(&connector, !fresh || upgrade).await;
            if ready && upgrade {
                let support = self.0.cbor_probe(&connector, !fresh).await;
                self.0.readiness.record_cbor_probe(support);
            }
            let words = why.clone();
            if self.0.readiness.set(ready, why) {
                if ready {
                    tracing::info!(reason = %words, "upstream ready");
                } else {
                    tracing::warn!(reason = %words, "upstream not ready");
                }
            }
            let ready = self.0.readiness.get().0;
            tokio::select! {
                _ = tokio::time::sleep(probe_wait(ready, false)) => {}
                _ = async {
                    self.0.readiness.doubted().await;
                    tokio::time::sleep_until((started + probe_wait(ready, true)).into()).await;
                } => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// The probe's verdict and upgrade mode's CBOR verdict together: a refusal makes
    /// cborgate not ready whatever the probe says, until a CBOR answer clears it.
    #[test]
    fn readiness_combines_the_probe_and_cbor_refusal() {
        let r = Readiness::default();
        assert!(!r.get().0);
        assert!(r.set(true, "probe ok".into()));
        assert!(!r.set(true, "probe ok".into()));
        assert_eq!(r.get(), (true, "probe ok".into()));
        r.record_cbor(CborSupport::Speaks);
        assert_eq!(r.get(), (true, "probe ok".into()));
        r.record_cbor(CborSupport::Refused("first".into()));
        r.record_cbor(CborSupport::Refused("second".into()));
        assert_eq!(r.get(), (false, "first".into()));
        // The probe still answers 200: not ready, and the probe's own verdict unchanged.
        assert!(!r.set(true, "probe ok".into()));
        assert_eq!(r.get(), (false, "first".into()));
        r.record_cbor(CborSupport::Speaks);
        assert_eq!(r.get(), (true, "probe ok".into()));
        assert!(r.set(false, "probe failed".into()));
        assert_eq!(r.get(), (false, "probe failed".into()));
        // Unreachable comes first: a refusal seen meanwhile does not hide it.
        r.record_cbor(CborSupport::Refused("third".into()));
        assert_eq!(r.get(), (false, "probe failed".into()));
        assert_eq!(metrics().upstream_cbor.get(), 1);
        assert!(r.set(true, "probe ok".into()));
        assert_eq!(r.get(), (false, "third".into()));
        assert_eq!(metrics().upstream_cbor.get(), 0);
        // The CBOR probe settles it either way.
        r.record_cbor_probe(Some(CborSupport::Speaks));
        assert_eq!(r.get(), (true, "probe ok".into()));
        assert_eq!(metrics().upstream_cbor.get(), 1);
        r.record_cbor_probe(Some(CborSupport::Refused("probe".into())));
        assert_eq!(r.get(), (false, "probe".into()));
        // A probe that tells nothing keeps a fresh refusal, and lets an old one lapse.
        r.record_cbor_probe(None);
        assert_eq!(r.get(), (false, "probe".into()));
        r.state().refuses_cbor.as_mut().unwrap().1 -= REFUSAL_HOLD;
        r.record_cbor_probe(None);
        assert_eq!(r.get(), (true, "probe ok".into()));
        assert_eq!(metrics().upstream_ready.get(), 1);
    }

    /// A lookup that fails until `ok` is set, counting its calls.
    fn fake(ok: Arc<Mutex<Option<SocketAddr>>>, calls: Arc<AtomicUsize>) -> Lookup {
        Arc::new(move |_host, _port| {
            calls.fetch_add(1, Ordering::SeqCst);
            let answer = *ok.lock().unwrap();
            Box::pin(async move {
                answer.map(|a| vec![a]).ok_or_else(|| {
                    std::io::Error::other(
                        "failed to lookup address information: Name or service not known",
                    )
                })
            })
        })
    }

    #[tokio::test]
    async fn fails_without_panicking_then_recovers_once_the_name_resolves() {
        let answer = Arc::new(Mutex::new(None));
        let calls = Arc::new(AtomicUsize::new(0));
        let r = Resolver::new(
            "no-such-host.invalid",
            443,
            Some(fake(answer.clone(), calls.clone())),
        );
        let e = r.resolve().await.unwrap_err();
        assert!(e.contains("no-such-host.invalid"), "{e}");
        // A burst during the outage costs one lookup.
        for _ in 0..100 {
            assert!(r.resolve().await.is_err());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let addr: SocketAddr = "127.0.0.7:443".parse().unwrap();
        *answer.lock().unwrap() = Some(addr);
        r.state().failed.as_mut().unwrap().0 -= NEGATIVE;
        assert_eq!(r.resolve().await, Ok(addr));
    }

    #[tokio::test]
    async fn a_known_address_outlives_a_failed_refresh_and_follows_a_move() {
        let first: SocketAddr = "127.0.0.7:443".parse().unwrap();
        let answer = Arc::new(Mutex::new(Some(first)));
        let calls = Arc::new(AtomicUsize::new(0));
        let r = Resolver::new(
            "kubernetes.default.svc",
            443,
            Some(fake(answer.clone(), calls.clone())),
        );
        assert_eq!(r.resolve().await, Ok(first));
        // Stale, and DNS is down: the request goes on with the old address.
        *answer.lock().unwrap() = None;
        r.state().resolved_at = Some(Instant::now() - REFRESH);
        assert_eq!(r.resolve().await, Ok(first));
        for _ in 0..200 {
            if !r.refreshing.load(Ordering::Acquire) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(r.resolve().await, Ok(first));
        // The address moves: the next refresh follows it.
        let moved: SocketAddr = "127.0.0.8:443".parse().unwrap();
        *answer.lock().unwrap() = Some(moved);
        r.state().resolved_at = Some(Instant::now() - REFRESH);
        let _ = r.resolve().await;
        let t = Instant::now();
        while r.resolve().await != Ok(moved) {
            assert!(t.elapsed() < Duration::from_secs(5), "never moved");
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn ip_addresses_are_not_looked_up() {
        let calls = Arc::new(AtomicUsize::new(0));
        let r = Resolver::new(
            "::1",
            6443,
            Some(fake(Arc::new(Mutex::new(None)), calls.clone())),
        );
        assert_eq!(r.resolve().await, Ok("[::1]:6443".parse().unwrap()));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}
