//! The pingora glue: [`Gate`], the [`ProxyHttp`] whose callbacks carry out what
//! `negotiate` decided, each in a few lines. Its rooms:
//!
//! - [`transcode`]: where requests and responses are transcoded ([`Exchange`],
//!   the synchronous context of one request: heads and bodies);
//! - [`replay`]: `auto` mode's 415 replay;
//! - [`local_reply`]: the Statuses cborgate writes itself, and which pingora
//!   failure is which;
//! - [`upstream`]: reaching the upstream (DNS, TLS material, timeouts) and the
//!   readiness probe;
//! - [`capabilities`]: what `auto` mode has learned;
//! - [`request_log`]: what each request leaves behind (metrics, its log line);
//! - [`buffers`]: response chunk buffers, reused;
//! - [`body`]: the codec driven over one body;
//! - [`identity`]: who the request is, and its identity headers upstream;
//! - [`hold`]: answers to clients with old CBOR limits, held until their width is known.
//!
//! Admission is [`crate::limits::admission`].

pub mod body;
pub mod buffers;
pub mod capabilities;
pub mod hold;
pub mod identity;
pub mod local_reply;
pub mod replay;
pub mod request_log;
pub mod status;
pub mod transcode;
pub mod upstream;

use crate::config::Config;
use crate::limits::admission::Admission;
use crate::limits::budget::BodyBudget;
use crate::negotiate::local::Reply;
use crate::negotiate::{
    plan_with, Failure, LocalReply, Plan, RequestHead, RequestLimits, UpstreamMode,
};
use async_trait::async_trait;
use bytes::Bytes;
use capabilities::Capabilities;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, ProxyWarnLogContext, Session};
use pingora::{Error, ErrorType};
use std::sync::Arc;
use std::time::{Duration, Instant};
use transcode::CodecSettings;
pub use transcode::Exchange;
use upstream::Upstream;

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

/// Join every value of a header with ", " (RFC 9110 list semantics).
fn header_list(req: &RequestHeader, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for v in req.headers.get_all(name) {
        let s = String::from_utf8_lossy(v.as_bytes());
        match &mut out {
            Some(o) => {
                o.push_str(", ");
                o.push_str(&s);
            }
            None => out = Some(s.into_owned()),
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
        let mode = match config.upstream.mode {
            crate::config::Mode::Auto => UpstreamMode::Auto,
            crate::config::Mode::Legacy => UpstreamMode::Legacy,
            crate::config::Mode::Native => UpstreamMode::Native,
            crate::config::Mode::Upgrade => UpstreamMode::Upgrade,
        };
        let caps = Arc::new(Capabilities::new(Duration::from_secs(
            config.upstream.capability_ttl_seconds,
        )));
        let codecs = CodecSettings {
            buffers: Arc::default(),
            transcoders: Arc::default(),
            window: config.codec.window_bytes,
            strings: config.string_mode(),
            limits: config.codec_limits(),
            request: RequestLimits {
                max_header_bytes: config.server.max_header_bytes,
                max_request_body: config.codec.max_request_body_bytes as u64,
                max_upstream_body: config.upstream.max_request_body_bytes,
            },
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

    /// A watch the drain ended (`ending`): its head is out, and a watch's stream has an
    /// end of its own that clients take as "watch again". Not a log or proxy response
    /// (long-running too), whose cut body must not be made to look complete, nor an
    /// upgraded connection, which just closes.
    fn ended_by_drain(&self, session: &Session, ex: &Exchange) -> bool {
        self.admission.long_running_ending()
            && ex.plan.as_ref().is_some_and(|p| p.is_watch())
            && ex.upgrade.is_none()
            && session.response_written().is_some()
    }

    /// Answer from `request_filter`, without the upstream. `Ok(true)`: the response is done.
    async fn reply(
        &self,
        session: &mut Session,
        ex: &mut Exchange,
        plan: Plan,
        reply: &LocalReply,
        retry_after: bool,
    ) -> Result<bool> {
        ex.plan = Some(plan);
        self.answer(session, ex, reply, retry_after, true).await?;
        Ok(true)
    }

    /// Record `reply` as the request's answer and write it, with the connection's reuse
    /// set as for any response; `reusable`: pingora may serve another request on this
    /// connection afterwards (otherwise the answer says `Connection: close`, as it will be).
    async fn answer(
        &self,
        session: &mut Session,
        ex: &mut Exchange,
        reply: &LocalReply,
        retry_after: bool,
        reusable: bool,
    ) -> Result<()> {
        ex.answered(reply);
        self.connection_reuse(session);
        if !reusable {
            session.set_keepalive(None);
        }
        self.write_reply(session, reply, retry_after).await
    }

    /// Read a body that is checked and transcoded before anything goes upstream, whole,
    /// piece by piece (each read held to `server.request_read_timeout_seconds`). `Some`:
    /// the answer instead (413, 411, 429 or 400), with nothing sent upstream.
    async fn read_body(&self, session: &mut Session, ex: &mut Exchange) -> Result<Option<Reply>> {
        while let Some(keep_tail) = ex.reading_body() {
            if keep_tail {
                session.as_mut().enable_retry_buffering();
            }
            let piece = session.read_request_body().await?;
            if let Err(reply) = ex.read_body(piece.as_deref(), self.codecs.request, &self.budget) {
                return Ok(Some(reply));
            }
        }
        Ok(None)
    }

    /// Write a local reply, then read and discard what is left of the request body
    /// (bounded: [`local_reply::linger`]), so the client gets the reply, not a reset.
    async fn write_reply(
        &self,
        session: &mut Session,
        reply: &LocalReply,
        retry_after: bool,
    ) -> Result<()> {
        local_reply::write(session, reply, retry_after).await?;
        let max_bytes =
            (self.codecs.request.max_request_body).saturating_add(local_reply::LINGER_SLACK_BYTES);
        local_reply::linger(session, max_bytes).await;
        Ok(())
    }
}

/// End a response the drain ended as kube-apiserver ends a watch when it shuts down:
/// the whole events already transcoded, then the end of the body (the terminating
/// chunk on HTTP/1.1, `END_STREAM` on HTTP/2), so the client re-establishes it at once.
async fn end_cleanly(session: &mut Session, ex: &mut Exchange) -> FailToProxy {
    ex.ended_by_drain = true;
    let unsent = ex.unsent.take();
    let ended = match unsent {
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

    /// The head is complete: its deadline (`server.request_head_timeout_seconds`) stops.
    async fn early_request_filter(&self, session: &mut Session, _: &mut Exchange) -> Result<()> {
        crate::inbound::connections::head_read(session.as_downstream());
        Ok(())
    }

    async fn request_filter(&self, session: &mut Session, ex: &mut Exchange) -> Result<bool> {
        let who = identity::decide(session, &self.identity_headers);
        ex.pool = identity::pool_of(session, &who);
        ex.identity = Some(who);
        let (p, head_bytes, declared_len) = self.plan(session);
        let limits = self.codecs.request;
        if let Some(r) = ex.identity.as_ref().and_then(|id| id.refusal(&p)) {
            return self.reply(session, ex, p, &r, false).await;
        }
        if let Some(r) = p.head_refusal(head_bytes, limits) {
            return self.reply(session, ex, p, &r, false).await;
        }
        let server = &self.config.server;
        let limit = match p.long_running {
            true => server.max_long_running_requests,
            false => server.max_requests_inflight,
        };
        let Ok(slot) = self.admission.admit(p.long_running, limit) else {
            let (r, retry) = p.too_many_requests();
            return self.reply(session, ex, p, &r, retry).await;
        };
        if let Some(r) = p
            .reply
            .clone()
            .or_else(|| p.body_refusal(declared_len, limits))
        {
            request_log::count_refusal(r.code, "proxy");
            ex.admitted = Some(slot);
            return self.reply(session, ex, p, &r, false).await;
        }
        ex.begin(p, slot, declared_len, &self.codecs);
        if let Some((r, retry_after)) = self.read_body(session, ex).await? {
            self.answer(session, ex, &r, retry_after, true).await?;
            return Ok(true);
        }
        if self.hold.protect(session, ex) {
            return hold::serve(self, session, ex).await;
        }
        Ok(false)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ex: &mut Exchange,
    ) -> Result<Box<HttpPeer>> {
        let long_running = ex.plan.as_ref().is_some_and(|p| p.long_running);
        let http1_only = ex.plan.as_ref().is_none_or(|p| p.needs_http1())
            || ex.pool.http1_only(ex.refused_retries);
        let cert = ex.identity.as_ref().is_some_and(|id| id.upstream_cert);
        ex.upstream_started = Some(Instant::now());
        match self.upstream.resolver.resolve().await {
            Ok(addr) => {
                let mut peer = self.upstream.peer(addr, long_running, cert, ex.pool);
                let h2 = self.upstream.choose_http_version(&mut peer, http1_only);
                // A retry gives back the turn it held before it waits for the next.
                ex.connect_turn = None;
                ex.connect_turn = self.upstream.connect_turn(h2).await;
                Ok(peer)
            }
            Err(why) => {
                let failure = Failure::Unresolved(why.clone());
                ex.local_error = ex.plan.as_ref().and_then(|p| p.failure_reply(&failure));
                Err(Error::explain(ErrorType::ConnectError, why))
            }
        }
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
        ex.connect_turn = None;
        if ex.plan.as_ref().is_some_and(|p| p.long_running) {
            // Held for the drain, which ends long-running requests through it.
            match crate::limits::admission::dup_socket(fd) {
                Ok(s) => ex.upstream_socket = Some(self.admission.hold_upstream(s)),
                Err(e) => tracing::warn!(error = %e, "a watch cannot be ended cleanly at shutdown"),
            }
        }
        Ok(())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ex: &mut Exchange,
        e: Box<Error>,
    ) -> Box<Error> {
        ex.connect_turn = None;
        e
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        req: &mut RequestHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.rewrite_upstream_request(req)?;
        identity::apply(ex.identity.as_ref(), req)?;
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
        ex.request_body(body, end_of_stream);
        Ok(())
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        let decision = ex.decide_response(resp);
        hold::on_head(ex);
        if let Some(support) = ex.cbor_support(resp) {
            self.upstream.readiness.record_cbor(support);
        }
        if let (Some(learned), Some(key)) = (
            decision.and_then(|d| d.learned),
            ex.plan.as_ref().and_then(|p| p.capability_key()),
        ) {
            self.caps.learn(key, learned);
        }
        match decision {
            Some(d) if d.replay => Err(replay::start(ex, &self.codecs, &self.budget)),
            _ => Ok(()),
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
        ex.status = resp.status.as_u16();
        ex.note_upstream_time();
        self.connection_reuse(session);
        request_log::count_response(session, ex, ex.status);
        let chunked = !session.is_http2() && session.req_header().version == http::Version::HTTP_11;
        ex.relabel_response(resp, chunked, &self.codecs)
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
        replay::is_replay(ex, e) || local_reply::refused(e)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ex: &mut Exchange,
    ) -> FailToProxy {
        ex.note_upstream_time();
        if self.ended_by_drain(session, ex) {
            return end_cleanly(session, ex).await;
        }
        let answered = ex.status != 0;
        let mut unanswered = None;
        let reply = ex.local_error.take().or_else(|| {
            let failure = local_reply::failure_of(e, answered)?;
            // One line per upstream failure, in an operator's words; pingora's own
            // account at debug level.
            tracing::warn!(
                reason = %local_reply::upstream_failure_words(e.etype(), &e.to_string()),
                kind = e.etype().as_str(),
                "upstream request failed"
            );
            tracing::debug!(error = %e, "upstream request failed");
            let p = ex.plan.as_ref()?;
            let reply = p.failure_reply(&failure);
            if reply.is_none() {
                unanswered = Some(p.unanswered_failure(&failure));
            }
            reply
        });
        if let (Some((code, reason)), None) = (unanswered, session.response_written()) {
            // Counted and logged as the upstream failure it is, not as a client that left.
            ex.unanswered(code, reason);
        }
        if local_reply::cut_short(e, answered) && session.response_written().is_some() {
            // The status the client got stays; the line says what cut its response short.
            ex.reason = Some(Plan::CUT_SHORT.to_string());
        }
        let mut code = 0;
        if let Some((reply, retry_after)) = reply {
            if session.response_written().is_none() {
                code = reply.code;
                // pingora closes the connection after a failed proxy attempt: say so.
                if let Err(we) = self.answer(session, ex, &reply, retry_after, false).await {
                    tracing::debug!(error = %we, "could not write the error response");
                }
            }
        }
        if let (Some(unsent), Some(_)) = (ex.unsent.take(), session.response_written()) {
            // The watch events transcoded before a malformed one: the client gets them,
            // then the stream ends abnormally (no end chunk).
            if let Err(we) = session.write_response_body(Some(unsent), false).await {
                tracing::debug!(error = %we, "could not write the last watch events");
            }
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ex: &mut Exchange) {
        request_log::finish(session, e, ex);
    }
}
