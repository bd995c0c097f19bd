//! A stand-in for a kube-apiserver 1.36, in memory, reproducing the recorded wire
//! behaviour (`tests/data/corpus`) closely enough to test cborgate against it and to run
//! `cborgate demo`. By default it is a legacy (CBOR-off) server, JSON-only; with
//! [`CborMode::On`] it is a `CBORServingAndStorage=true` server (the `b-*`
//! recordings), and with [`CborMode::Mixed`] some API groups are, as behind an
//! aggregator that fronts servers of different ages.
//!
//! Module map: `http` (HTTP/1.1 connection), `negotiation` (router and apimachinery
//! negotiation, 406/415 bodies), `api` (routing, negotiation order, reads), `verbs` (writes), `store` (objects,
//! resourceVersions, watchers), `objects` (field order, defaults, managedFields,
//! selectors), `patch`, `table` (Table/PartialObjectMetadata), `watch`, `upgrade`,
//! `status`, `json` (Go-identical JSON text), `cbor` (CBOR bodies and events, keys
//! shuffled like the real server's), `cbor_decode` (CBOR request bodies, read with
//! minicbor by Kubernetes' decoder rules), `seed`, `util`; `client` (public: the
//! HTTP/1.1 client every test suite and the load harness share).
//!
//! A crate of its own (`cborgate-standin`), independent of cborgate: it is the
//! server cborgate's tests put behind the proxy, and the CBOR-enabled server its
//! upgrade mode is checked against, so it shares none of cborgate's codec.
//!
//! Documented simplifications: YAML is answered as JSON text labelled
//! `application/yaml`; protobuf as `k8s\x00` followed by JSON text (watch frames:
//! 4-byte length, then that), and such bodies are accepted as requests; request YAML
//! must be JSON-compatible; strategic merge patch and server-side apply are merge
//! patches (no conflict detection); managedFields are approximate. With CBOR on,
//! `/api/v1` is served in CBOR (1.36 crashes that request instead); CBOR request
//! bodies become JSON text first, so an integral float sent in CBOR (`f9 4000`) is
//! stored as the integer 2, where a real server would keep a float. With CBOR on (or
//! mixed), a response of more than 128 KiB is gzipped at Go's `BestSpeed` for a request whose
//! first `Accept-Encoding` line has a bare `gzip` token, as the apiserver's
//! `deferredResponseWriter` does (watches never); a legacy stand-in never compresses,
//! so the `a-*` answers stay as recorded.

mod api;
mod cbor;
mod cbor_decode;
pub mod client;
mod http;
mod json;
mod negotiation;
mod objects;
mod patch;
mod seed;
mod status;
mod store;
mod table;
#[cfg(test)]
mod tests;
mod upgrade;
mod util;
mod verbs;
mod watch;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch as signal;

/// Standard base64 with padding, public for cborgate's test oracles (one encoder,
/// independent of cborgate's codec, for the stand-in and the tests).
pub use util::base64_std;

use api::{Plan, Shared};
use http::{BodyKind, Conn, ReadError, RequestHead, Response};

/// Whether the stand-in serves CBOR (KEP-4222, gate `CBORServingAndStorage`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CborMode {
    /// A legacy server: JSON, YAML and protobuf only (the `a-*` recordings).
    #[default]
    Off,
    /// A CBOR-enabled 1.36 server (the `b-*` recordings): `application/cbor` bodies
    /// in and out, `application/cbor-seq` watches, `application/apply-patch+cbor`.
    On,
    /// The API groups listed (`""` for the core group) behave as with `On`, all
    /// others as with `Off`, as when an aggregator fronts servers of different ages.
    /// `/api`, `/apis`, `/apis/<group>` and `/version` have no CBOR in either mode,
    /// nor has a CRD group's group version (native-1.36 `disc-apis-cr-v1`); the
    /// router's 404 and the 405 for HEAD and OPTIONS are JSON (`get-missing-resource`,
    /// `head-cm`, `options`).
    Mixed { cbor_groups: Vec<String> },
}

impl CborMode {
    /// Whether requests for this API group (`""`: core) are served with CBOR on.
    pub fn serves_cbor(&self, group: &str) -> bool {
        match self {
            CborMode::Off => false,
            CborMode::On => true,
            CborMode::Mixed { cbor_groups } => cbor_groups.iter().any(|g| g == group),
        }
    }
}

/// How the stand-in behaves.
#[derive(Clone, Debug)]
pub struct StandInOptions {
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 1 s).
    pub bookmark_interval: Duration,
    /// Send responses whose body is larger than this with `Transfer-Encoding: chunked`
    /// instead of `Content-Length`. `None` (default): always `Content-Length`.
    /// `Some(2048)` imitates Go's net/http, which is what a real apiserver does.
    pub chunked_above: Option<usize>,
    /// CBOR off (default), on, or on for some API groups only.
    pub cbor: CborMode,
}

impl Default for StandInOptions {
    fn default() -> Self {
        StandInOptions {
            bookmark_interval: Duration::from_secs(1),
            chunked_above: None,
            cbor: CborMode::Off,
        }
    }
}

/// One request as the stand-in received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target: path with query, as sent.
    pub path: String,
    /// Headers in the order received.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked. Empty when there was none, or it could not be read.
    pub body: Vec<u8>,
    /// Which connection it arrived on (counted from 1 in accept order).
    pub connection_id: u64,
}

impl RecordedRequest {
    /// The first header of that name, case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A running stand-in. Dropping it (or [`StandIn::shutdown`]) stops it.
pub struct StandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: signal::Sender<bool>,
}

impl StandIn {
    /// Binds `addr` (port 0 picks one) and serves on the current tokio runtime.
    pub async fn start(addr: SocketAddr, opts: StandInOptions) -> std::io::Result<StandIn> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            store: Mutex::new(store::Store::new()),
            cbor: Mutex::new(opts.cbor.clone()),
            opts,
            addr,
            requests: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(1),
            emitted: AtomicU64::new(1),
        });
        verbs::seed(&mut shared.store());
        let (stop, stop_rx) = signal::channel(false);
        tokio::spawn(accept_loop(listener, shared.clone(), stop_rx));
        Ok(StandIn { addr, shared, stop })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests)
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// How many requests arrived so far, cborgate's readiness probes included (which
    /// [`StandIn::requests`] leaves out): a test waits on it for the next probe.
    pub fn requests_seen(&self) -> u64 {
        self.shared.next_request.load(Ordering::Relaxed) - 1
    }

    /// Serves with CBOR on or off from now on, as when the apiserver behind an address
    /// is replaced by one with `CBORServingAndStorage` set otherwise.
    pub fn set_cbor(&self, cbor: CborMode) {
        *lock(&self.shared.cbor) = cbor;
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().rv()
    }

    /// Creates `n` ConfigMaps named `emit-NNNNNNN` in namespace `ns` (created if
    /// missing), each a committed change delivered to watchers at once.
    pub fn emit_configmaps(&self, ns: &str, n: usize) {
        verbs::emit_configmaps(&self.shared, ns, n);
    }

    /// Stops accepting, ends watches and upgraded streams, closes idle connections.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn stopped(rx: &mut signal::Receiver<bool>) {
    loop {
        if *rx.borrow() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: signal::Receiver<bool>) {
    let mut next_conn: u64 = 1;
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let id = next_conn;
                    next_conn += 1;
                    tokio::spawn(serve_conn(Conn::new(stream, id), shared.clone(), stop.clone()));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = stopped(&mut stop) => return,
        }
    }
}

fn record(shared: &Shared, head: &RequestHead, conn: u64) -> u64 {
    let seq = shared.next_request.fetch_add(1, Ordering::Relaxed);
    // cborgate's readiness probe (`GET /readyz` every two seconds) is not a
    // request any test made; keep it out of what tests inspect.
    if head
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("cborgate/") && ua.ends_with(" readiness"))
    {
        return seq;
    }
    lock(&shared.requests).push((
        seq,
        RecordedRequest {
            method: head.method.clone(),
            path: head.target.clone(),
            headers: head.headers.clone(),
            body: Vec::new(),
            connection_id: conn,
        },
    ));
    seq
}

fn record_body(shared: &Shared, seq: u64, body: &[u8]) {
    if body.is_empty() {
        return;
    }
    if let Some((_, r)) = lock(&shared.requests).iter_mut().find(|(s, _)| *s == seq) {
        r.body = body.to_vec();
    }
}

/// An error answered outside any route (malformed request, oversized head or body).
fn plain_error(code: u16, message: String) -> Response {
    let e = match code {
        413 => status::too_large(http::MAX_BODY),
        _ => status::bad_request(message),
    };
    let mut body = e.body;
    if code == 431 {
        body["code"] = serde_json::json!(431);
        body["reason"] = serde_json::json!("RequestHeaderFieldsTooLarge");
        body["message"] = serde_json::json!("request header fields too large");
    }
    Response::new(code, negotiation::JSON, json::encode_line(&body))
}

async fn write_response(
    conn: &mut Conn,
    shared: &Shared,
    head: Option<&RequestHead>,
    resp: &Response,
    close: bool,
) -> std::io::Result<()> {
    let audit = head
        .and_then(|h| h.header("audit-id"))
        .map(str::to_string)
        .unwrap_or_else(util::uuid_v4);
    let is_head = head.is_some_and(|h| h.method == "HEAD");
    // A CBOR-enabled server gzips what it writes in one piece above 128 KiB for a client
    // that asks (`deferredResponseWriter`); a legacy stand-in keeps the recorded `a-*`
    // answers as they were taken, uncompressed.
    let gzipped = (*lock(&shared.cbor) != CborMode::Off
        && resp.body.len() > http::GZIP_THRESHOLD
        && head.is_some_and(RequestHead::accepts_gzip))
    .then(|| http::gzip(&resp.body));
    let body: &[u8] = gzipped.as_deref().unwrap_or(&resp.body);
    let mut extra = std::borrow::Cow::Borrowed(&resp.extra_headers);
    if gzipped.is_some() {
        let e = extra.to_mut();
        e.push(("Content-Encoding".into(), "gzip".into()));
        e.push(("Vary".into(), "Accept-Encoding".into()));
    }
    let chunk = shared
        .opts
        .chunked_above
        .is_some_and(|limit| body.len() > limit)
        && head.is_some_and(|h| h.minor >= 1)
        && !is_head;
    let mut out = http::response_head(
        resp.status,
        &resp.content_type,
        &audit,
        &extra,
        if chunk { None } else { Some(body.len()) },
        close,
    );
    if chunk {
        out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n0\r\n\r\n");
    } else if !is_head {
        out.extend_from_slice(body);
    }
    conn.write_all(&out).await
}

async fn serve_conn(mut conn: Conn, shared: Arc<Shared>, mut stop: signal::Receiver<bool>) {
    loop {
        let head = tokio::select! {
            r = conn.read_head() => r,
            _ = stopped(&mut stop) => return,
        };
        let head = match head {
            Ok(Some(h)) => h,
            Ok(None) | Err(ReadError::Io) => return,
            Err(ReadError::Malformed(m)) => {
                let _ = write_response(&mut conn, &shared, None, &plain_error(400, m), true).await;
                return;
            }
            Err(ReadError::TooLarge) => {
                let r = plain_error(431, String::new());
                let _ = write_response(&mut conn, &shared, None, &r, true).await;
                return;
            }
        };
        let seq = record(&shared, &head, conn.id);
        let keep_alive = head.keep_alive();
        let body_kind = match head.body_kind() {
            Ok(k) => k,
            Err(m) => {
                let r = plain_error(400, m);
                let _ = write_response(&mut conn, &shared, Some(&head), &r, true).await;
                return;
            }
        };
        let expect_continue = head
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
        match api::plan(&shared, &head) {
            Plan::Respond(resp) => {
                // Answered before the body is read (as the apiserver's 406 is).
                let unread = body_kind != BodyKind::None;
                let close = !keep_alive || (unread && expect_continue);
                if write_response(&mut conn, &shared, Some(&head), &resp, close)
                    .await
                    .is_err()
                    || close
                {
                    return;
                }
                match conn.read_body(body_kind, http::MAX_BODY).await {
                    Ok(b) => record_body(&shared, seq, &b),
                    Err(_) => return,
                }
            }
            Plan::Body(pending) => {
                if expect_continue
                    && body_kind != BodyKind::None
                    && conn
                        .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                        .await
                        .is_err()
                {
                    return;
                }
                let body = match conn.read_body(body_kind, http::MAX_BODY).await {
                    Ok(b) => b,
                    Err(ReadError::Io) => return,
                    Err(ReadError::TooLarge) => {
                        // A CBOR-enabled server writes this Status in CBOR if asked.
                        let r = match pending.serving {
                            negotiation::Serving::Cbor => api::error_response(
                                &head,
                                &status::too_large(http::MAX_BODY),
                                pending.serving,
                            ),
                            negotiation::Serving::Legacy => plain_error(413, String::new()),
                        };
                        let _ = write_response(&mut conn, &shared, Some(&head), &r, true).await;
                        return;
                    }
                    Err(ReadError::Malformed(m)) => {
                        let r = plain_error(400, m);
                        let _ = write_response(&mut conn, &shared, Some(&head), &r, true).await;
                        return;
                    }
                };
                record_body(&shared, seq, &body);
                let resp = verbs::handle(&shared, *pending, &body);
                if write_response(&mut conn, &shared, Some(&head), &resp, !keep_alive)
                    .await
                    .is_err()
                    || !keep_alive
                {
                    return;
                }
            }
            Plan::Watch(plan) => {
                match conn.read_body(body_kind, http::MAX_BODY).await {
                    Ok(b) => record_body(&shared, seq, &b),
                    Err(_) => return,
                }
                let reusable = watch::serve(&mut conn, &shared, &head, *plan, stop.clone()).await;
                if !reusable || !keep_alive {
                    return;
                }
            }
            Plan::Upgrade(plan) => {
                upgrade::serve(conn, plan, stop.clone()).await;
                return;
            }
        }
        if *stop.borrow() {
            return;
        }
    }
}
