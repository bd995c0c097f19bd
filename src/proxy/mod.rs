//! The pingora glue: [`Gate`], the [`ProxyHttp`] whose callbacks carry out what
//! `negotiate` decided, each in a few lines. Its rooms:
//!
//! - [`transcode`]: where requests and responses are transcoded ([`Exchange`],
//!   the synchronous context of one request: heads and bodies);
//! - [`replay`]: `auto` mode's 415 replay;
//! - [`local_reply`]: the Statuses cborgate writes itself, and which pingora
//!   failure is which;
//! - [`request_log`]: what each request leaves behind (metrics, its log line);
//! - [`buffers`]: response chunk buffers, reused;
//! - [`body`]: the codec driven over one body;
//! - [`identity`]: who the request is, and its identity headers upstream;
//! - [`hold`]: answers to clients with old CBOR limits, held until their width is known.
//!
//! Admission is [`crate::limits::admission`].

pub mod body;
pub mod buffers;
pub mod exchange;
pub mod hold;
pub mod identity;
pub mod local_reply;
pub mod replay;
pub mod request_labels;
pub mod request_log;
pub mod status;
pub mod transcode;

use crate::config::Config;
use crate::inbound::connections;
use crate::limits::admission::Admission;
use crate::limits::budget::BodyBudget;
use crate::metrics::Origin;
use crate::negotiate::client::identify as identify_client;
use crate::negotiate::response::drain_ends_cleanly;
use crate::negotiate::{
    plan_with, AdmissionClass, ClientFraming, HeadFacts, Intake, Plan, Reply, RequestHead,
    RequestLimits, UpstreamMode,
};
use crate::outbound::capabilities::Capabilities;
use crate::outbound::upstream::Upstream;
use crate::proxy::request_labels::{count_refusal, ResourceLabels};
use async_trait::async_trait;
use bytes::Bytes;
pub use exchange::Exchange;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, ProxyWarnLogContext, Session};
use pingora::{Error, ErrorType};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use transcode::CodecSettings;

/// The proxy.
pub struct Gate {
    config: Arc<Config>,
    upstream: Arc<Upstream>,
    mode: UpstreamMode,
    caps: Arc<Capabilities>,
    admission: Arc<Admission>,
    /// What request bodies read whole may hold in memory, over all requests.
    budget: Arc<BodyBudget>,
    codecs: CodecSettings,
    identity_headers: crate::negotiate::identity::HeaderNames,
    hold: hold::Hold,
}

/// Join every value of a header with ", " (RFC 9110 list semantics). A single value,
/// the common case, is borrowed from the request head; joining several allocates.
fn header_list<'r>(req: &'r RequestHeader, name: &str) -> Option<Cow<'r, str>> {
    let mut out: Option<Cow<'r, str>> = None;
    for v in req.headers.get_all(name) {
        let s = String::from_utf8_lossy(v.as_bytes());
        match &mut out {
            Some(o) => {
                let o = o.to_mut();
                o.push_str(", ");
                o.push_str(&s);
            }
            None => out = Some(s),
        }
    }
    out
}

/// The size of a request head as it would be written in HTTP/1.1: the request line and
/// every header line, with their CRLFs (what `server.max_header_bytes` limits).
fn request_head_bytes(req: &RequestHeader) -> usize {
    let target = req.uri.path_and_query().map_or(1, |pq| pq.as_str().len());
    let line = req.method.as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    req.headers
        .iter()
        .fold(line + 2, |n, (k, v)| n + k.as_str().len() + 2 + v.len() + 2)
}

impl Gate {
    pub fn new(
        config: Arc<Config>,
        upstream: Arc<Upstream>,
        admission: Arc<Admission>,
        budget: Arc<BodyBudget>,
    ) -> Self {
        let mode = config.upstream.mode;
        let caps = Arc::new(Capabilities::new(Duration::from_secs(
            config.upstream.capability_ttl_seconds,
        )));
        let codecs = CodecSettings {
            buffers: Arc::default(),
            transcoders: Arc::default(),
            window: config.codec.window_bytes,
            strings: config.codec.strings,
            limits: config.codec_limits(),
            request: RequestLimits {
                max_header_bytes: config.server.max_header_bytes,
                max_request_body: config.codec.max_request_body_bytes as u64,
                max_upstream_body: config.upstream.max_request_body_bytes,
            },
            labels: Arc::new(ResourceLabels::new(config.metrics.max_resources)),
        };
        Gate {
            identity_headers: config.identity_headers(),
            hold: hold::Hold::new(&config),
            config,
            upstream,
            mode,
            caps,
            admission,
            budget,
            codecs,
        }
    }

    /// What `/debug/capabilities` reads.
    pub fn capabilities(&self) -> Arc<Capabilities> {
        self.caps.clone()
    }

    /// The plan for the request head, its size as HTTP/1.1 text, and its declared length.
    fn plan(&self, session: &Session) -> (Plan, usize, Option<u64>) {
        let req = session.req_header();
        let (accept, content_type) = (header_list(req, "accept"), header_list(req, "content-type"));
        let accept_encoding = header_list(req, "accept-encoding");
        let declared_len = req
            .headers
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let head = RequestHead {
            method: req.method.as_str(),
            path: req.uri.path(),
            query: req.uri.query(),
            accept: accept.as_deref(),
            content_type: content_type.as_deref(),
            upgrade: session.is_upgrade_req(),
            declared_len,
            accept_encoding: accept_encoding.as_deref(),
            compress_responses: self.config.server.compress_responses,
        };
        let p = plan_with(&head, self.mode, |key| self.caps.get(key));
        (p, request_head_bytes(req), declared_len)
    }

    /// The in-flight limit of an admission class.
    fn limit(&self, class: AdmissionClass) -> usize {
        match class {
            AdmissionClass::Short => self.config.server.max_requests_inflight,
            AdmissionClass::LongRunning => self.config.server.max_long_running_requests,
        }
    }

    /// How the client connection is reused after this response: closed after SIGTERM, so
    /// clients move to another replica before the listener closes; otherwise kept alive
    /// (when the client allows it) for `server.idle_timeout_seconds` of idleness.
    fn connection_reuse(&self, session: &mut Session) {
        if self.admission.is_draining() {
            session.set_keepalive(None);
        } else if session.get_keepalive().is_some() {
            session.set_keepalive(Some(self.config.server.idle_timeout_seconds));
        }
    }

    /// Record `reply` as the request's answer and write it, with the connection's reuse
    /// set as for any response; `after`: whether pingora may serve another request on
    /// this connection afterwards (otherwise the answer says `Connection: close`, as it
    /// will be).
    async fn answer(
        &self,
        session: &mut Session,
        ex: &mut Exchange,
        reply: &Reply,
        after: Connection,
    ) -> Result<()> {
        ex.answered(reply);
        self.connection_reuse(session);
        if after == Connection::Close {
            session.set_keepalive(None);
        }
        local_reply::write(session, reply).await?;
        let max_bytes =
            (self.codecs.request.max_request_body).saturating_add(local_reply::LINGER_SLACK_BYTES);
        local_reply::linger(session, max_bytes).await;
        Ok(())
    }

    /// Read a body that is checked and transcoded before anything goes upstream, whole,
    /// piece by piece (each read held to `server.request_read_timeout_seconds`), as
    /// [`Plan::intake`] says. `Some`: the answer instead (413, 411, 429 or 400), with
    /// nothing sent upstream.
    async fn read_body(&self, session: &mut Session, ex: &mut Exchange) -> Result<Option<Reply>> {
        loop {
            match ex.body_intake()? {
                Intake::Read { keep_tail } => {
                    if keep_tail {
                        session.as_mut().enable_retry_buffering();
                    }
                    let piece = session.read_request_body().await?;
                    ex.take_body_piece(piece.as_deref(), &self.codecs, &self.budget)?;
                }
                Intake::Whole => return Ok(None),
                Intake::Refuse(reply) => return Ok(Some(reply)),
            }
        }
    }
}

/// Whether pingora may serve another request on the client connection after a local
/// answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Connection {
    Reusable,
    Close,
}

/// How the client's connection frames a response body.
fn framing(session: &Session) -> ClientFraming {
    if session.is_http2() {
        ClientFraming::Http2
    } else if session.req_header().version == http::Version::HTTP_11 {
        ClientFraming::Http11
    } else {
        ClientFraming::Http10
    }
}

/// End a response the drain ended as kube-apiserver ends a watch when it shuts down:
/// the whole events already transcoded, then the end of the body (the terminating
/// chunk on HTTP/1.1, `END_STREAM` on HTTP/2), so the client re-establishes it at once.
async fn end_cleanly(session: &mut Session, ex: &mut Exchange) -> FailToProxy {
    let ended = match ex.ended_by_drain() {
        Some(b) => session.write_response_body(Some(b), false).await,
        None => Ok(()),
    };
    if let Err(e) = match ended {
        Ok(()) => session.as_mut().finish_body().await,
        e => e,
    } {
        tracing::debug!(error = %e, "could not end the response");
    }
    FailToProxy {
        error_code: 0,
        can_reuse_downstream: false,
    }
}

#[async_trait]
impl ProxyHttp for Gate {
    type CTX = Exchange;

    fn new_ctx(&self) -> Exchange {
        Exchange::default()
    }

    /// No downstream modules. pingora's default adds its response compression module
    /// switched off (level 0), which changes nothing but costs allocations on every
    /// request (its context and its filters' futures); cborgate compresses answers
    /// itself (`negotiate::encoding`, `proxy::body`).
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    /// The head is complete: its deadline (`server.request_head_timeout_seconds`) stops.
    async fn early_request_filter(&self, session: &mut Session, _: &mut Exchange) -> Result<()> {
        connections::head_read(session.as_downstream());
        Ok(())
    }

    async fn request_filter(&self, session: &mut Session, ex: &mut Exchange) -> Result<bool> {
        let who = identity::decide(session, &self.identity_headers);
        let pool = identity::pool_of(session, &who);
        let (plan, head_bytes, declared_len) = self.plan(session);
        // Who the client is, read once: its metric label and whether it is protected.
        let user_agent = session.req_header().headers.get("user-agent");
        let client = identify_client(user_agent.and_then(|v| v.to_str().ok()));
        let req = session.req_header();
        let method = crate::negotiate::route::Method::parse(req.method.as_str());
        let labels =
            self.codecs
                .labels
                .request(&plan.route, method, req.uri.query(), client.family);
        let facts = HeadFacts {
            identity: &who,
            head_bytes,
            declared_len,
            limits: self.codecs.request,
        };
        let mut slot = None;
        let refusal = plan.judge_head(facts, |class| {
            let long_running = class == AdmissionClass::LongRunning;
            slot = self.admission.admit(long_running, self.limit(class)).ok();
            slot.is_some()
        });
        ex.plan(plan, who, pool, labels, slot, declared_len);
        let reply = match refusal {
            Some(r) => {
                count_refusal(r.reply.status.code, Origin::Proxy, Some(labels));
                Some(r.reply)
            }
            None => self.read_body(session, ex).await?,
        };
        match reply {
            Some(r) => {
                self.answer(session, ex, &r, Connection::Reusable).await?;
                Ok(true)
            }
            None if self.hold.protect(session, ex, client, declared_len) => {
                hold::serve(self, session, ex).await
            }
            None => Ok(false),
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ex: &mut Exchange,
    ) -> Result<Box<HttpPeer>> {
        let choice = ex.peer_choice()?;
        let addr = self.upstream.resolver.resolve().await.map_err(|why| {
            ex.unresolved(why.clone());
            Error::explain(ErrorType::ConnectError, why)
        })?;
        let mut peer = self
            .upstream
            .peer(addr, choice.long_running, choice.cert, choice.pool);
        let h2 = self
            .upstream
            .choose_http_version(&mut peer, choice.http1_only);
        // A retry gives back the turn it held before it waits for the next.
        ex.connect_turn(None);
        ex.connect_turn(self.upstream.connect_turn(h2).await);
        Ok(peer)
    }

    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        _reused: bool,
        _peer: &HttpPeer,
        #[cfg(unix)] fd: std::os::unix::io::RawFd,
        #[cfg(windows)] _sock: std::os::windows::io::RawSocket,
        _digest: Option<&pingora::protocols::Digest>,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.connected(fd, &self.admission);
        Ok(())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ex: &mut Exchange,
        e: Box<Error>,
    ) -> Box<Error> {
        ex.connect_turn(None);
        e
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        req: &mut RequestHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.rewrite_upstream_request(req)?;
        identity::forward(session, self.config.server.forwarded_for, req)?;
        self.upstream.rewrite_host(req)
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.request_body(body, end_of_stream)
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        let decision = ex.decide_response(resp)?;
        hold::on_head(ex)?;
        if let Some(support) = ex.cbor_support(resp) {
            self.upstream.readiness.record_cbor(support);
        }
        if let Some((key, learned)) = ex.learned() {
            self.caps.learn(key, learned);
        }
        match decision.replay {
            true => Err(replay::start(ex, &self.codecs, &self.budget)),
            false => Ok(()),
        }
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ex: &mut Exchange,
        client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        replay::decide_retry(&mut e, ex, session, client_reused);
        e
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        let upgrade = session.req_header().headers.get("upgrade");
        ex.upstream_answered(resp.status.as_u16(), upgrade.and_then(|v| v.to_str().ok()));
        self.connection_reuse(session);
        if ex.relabel_response(resp, framing(session), &self.codecs)? {
            connections::gather(session.as_downstream());
        }
        Ok(())
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ex: &mut Exchange,
    ) -> Result<Option<Duration>> {
        // The head is already on its way: a body that cannot be transcoded ends the
        // response abnormally, so the client cannot take a truncated body for a whole one.
        ex.response_body(body, end_of_stream).map_err(|e| {
            tracing::warn!(error = %e, "upstream body could not be transcoded");
            *body = None;
            Error::explain(
                ErrorType::HTTPStatus(502),
                format!("upstream body could not be transcoded: {e}"),
            )
        })?;
        Ok(None)
    }

    fn suppress_error_log(&self, _session: &Session, _ex: &Exchange, _e: &Error) -> bool {
        // `logging` writes the one line per request, with the error in it, and
        // `fail_to_proxy` one WARN line per upstream failure: pingora's own
        // ERROR line would say the same thing a second time.
        true
    }

    fn suppress_proxy_warn_log(
        &self,
        _session: &Session,
        ex: &Exchange,
        e: &Error,
        _context: ProxyWarnLogContext,
    ) -> bool {
        // The 415 replay is auto mode working as designed (counted in
        // `cborgate_fallbacks_total`), and so is sending again a request the upstream
        // refused unprocessed (counted in `cborgate_upstream_retries_total`; docs/wire.md
        // §5a): neither is something to warn about.
        ex.is_replay(e) || local_reply::refused(e)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ex: &mut Exchange,
    ) -> FailToProxy {
        ex.note_upstream_time();
        let head_sent = session.response_written().is_some();
        let draining = self.admission.long_running_ending();
        if drain_ends_cleanly(draining, ex.is_watch_stream(), head_sent) {
            return end_cleanly(session, ex).await;
        }
        let reply = ex.failed(e, head_sent);
        let error_code = reply.as_ref().map_or(0, |r| r.status.code);
        if let Some(r) = reply {
            // pingora closes the connection after a failed proxy attempt: say so.
            if let Err(we) = self.answer(session, ex, &r, Connection::Close).await {
                tracing::debug!(error = %we, "could not write the error response");
            }
        }
        if let Some(unsent) = ex.take_unsent().filter(|_| head_sent) {
            // The watch events transcoded before a malformed one: the client gets them,
            // then the stream ends abnormally (no end chunk).
            if let Err(we) = session.write_response_body(Some(unsent), false).await {
                tracing::debug!(error = %we, "could not write the last watch events");
            }
        }
        FailToProxy {
            error_code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ex: &mut Exchange) {
        connections::release(session.as_downstream());
        request_log::finish(session, e, ex);
    }
}
