//! [`Steps`]: what happens to one request, step by step, in the order pingora takes
//! them. Each step is a plain method that carries out what `negotiate` decided, through
//! the request's [`Exchange`]; none is a pingora callback. Two callers drive them:
//!
//! - pingora's own loop, through the [`pingora::proxy::ProxyHttp`] callbacks of
//!   `Gate` (`proxy/mod.rs`), each of which calls one step;
//! - `proxy::hold`, for a held request, which pingora never sends upstream: it calls
//!   the steps from [`Steps::choose_peer`] to [`Steps::client_body`], in the same order,
//!   over an upstream connection of its own.
//!
//! So a request goes one way whoever drives it: [`Steps::arrive`] (plan, admission,
//! body intake, or a local answer), [`Steps::choose_peer`], [`Steps::upstream_request`],
//! [`Steps::upstream_head`] (the response decision), [`Steps::client_head`] (relabel),
//! [`Steps::client_body`] per piece; then [`Steps::fail`] if it failed and
//! [`Steps::finish`] always (both pingora's only: the hold hands every failure back to
//! pingora).

use super::exchange::Exchange;
use super::identity;
use super::local_reply;
use super::replay;
use super::request_log;
use super::transcode::CodecSettings;
use crate::config::Config;
use crate::inbound::connections;
use crate::limits::admission::Admission;
use crate::limits::budget::BodyBudget;
use crate::metrics::Origin;
use crate::negotiate::client::{identify as identify_client, ClientAgent};
use crate::negotiate::response::drain_ends_cleanly;
use crate::negotiate::{
    plan_with, AdmissionClass, ClientFraming, HeadFacts, Intake, Plan, Reply, RequestHead,
    RequestLimits, UpstreamMode,
};
use crate::outbound::capabilities::Capabilities;
use crate::outbound::failure::suggests_unreachable;
use crate::outbound::upstream::{count_opened, Upstream};
use crate::proxy::request_labels::{count_refusal, ResourceLabels};
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::{FailToProxy, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType, Result};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// What the steps need, fixed at start-up.
pub struct Steps {
    config: Arc<Config>,
    upstream: Arc<Upstream>,
    mode: UpstreamMode,
    caps: Arc<Capabilities>,
    admission: Arc<Admission>,
    /// What request bodies read whole may hold in memory, over all requests.
    budget: Arc<BodyBudget>,
    codecs: CodecSettings,
    identity_headers: crate::negotiate::identity::HeaderNames,
    /// The process's log, where each request's line goes (none: no lines).
    lines: Option<Arc<dyn request_log::Lines>>,
}

/// A request that has arrived: the answer cborgate gives it itself, if any, and what the
/// hold asks of it.
pub struct Arrival {
    /// The local answer (a refusal of its head or its body), already written.
    pub answered: bool,
    /// The client its `User-Agent` names.
    pub client: ClientAgent,
    /// Its body's declared length (`Content-Length`).
    pub declared_len: Option<u64>,
}

/// Join every value of a header with ", " (RFC 9110 list semantics). A single value,
/// the common case, is borrowed from the request head; joining several allocates.
pub fn header_list<'r>(
    req: &'r RequestHeader,
    name: http::header::HeaderName,
) -> Option<Cow<'r, str>> {
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

impl Steps {
    pub fn new(
        config: Arc<Config>,
        upstream: Arc<Upstream>,
        admission: Arc<Admission>,
        budget: Arc<BodyBudget>,
        lines: Option<Arc<dyn request_log::Lines>>,
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
        Steps {
            lines,
            identity_headers: config.identity_headers(),
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
        use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_TYPE};
        let (accept, content_type) = (header_list(req, ACCEPT), header_list(req, CONTENT_TYPE));
        let accept_encoding = header_list(req, ACCEPT_ENCODING);
        let declared_len = req
            .headers
            .get(http::header::CONTENT_LENGTH)
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

    /// The head is complete: its deadline (`server.request_head_timeout_seconds`) stops.
    pub fn head_read(&self, session: &mut Session) {
        connections::head_read(session.as_downstream());
    }

    /// A request arrives: who it is, its plan, its metric labels, admission, and its
    /// body read whole when the plan says so; a refusal is answered here.
    pub async fn arrive(&self, session: &mut Session, ex: &mut Exchange) -> Result<Arrival> {
        let who = identity::decide(session, &self.identity_headers);
        let pool = identity::pool_of(session, &who);
        let (plan, head_bytes, declared_len) = self.plan(session);
        // Who the client is, read once: its metric label and whether it is protected.
        let user_agent = session.req_header().headers.get(http::header::USER_AGENT);
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
        if let Some(r) = &reply {
            self.answer(session, ex, r, Connection::Reusable).await?;
        }
        Ok(Arrival {
            answered: reply.is_some(),
            client,
            declared_len,
        })
    }

    /// The upstream peer of this attempt: the upstream's address, the pool and HTTP
    /// version the plan allows, and (HTTP/2) the turn to get a session.
    pub async fn choose_peer(&self, ex: &mut Exchange) -> Result<Box<HttpPeer>> {
        let choice = ex.peer_choice()?;
        let addr = match self.upstream.resolver.resolve().await {
            Ok(addr) => addr,
            Err(why) => {
                ex.unresolved(why.clone())?;
                return Err(Error::explain(ErrorType::ConnectError, why));
            }
        };
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

    /// Connected upstream (`fd`: the connection's socket; `reused`: a kept or shared one,
    /// rather than one opened for this request).
    pub fn connected(&self, fd: std::os::fd::RawFd, reused: bool, ex: &mut Exchange) -> Result<()> {
        count_opened(reused);
        ex.connected(fd, &self.admission)
    }

    /// The request head upstream: as planned, with the identity and `Forwarded` lines
    /// decided, and the upstream's `Host`.
    pub fn upstream_request(
        &self,
        session: &Session,
        req: &mut RequestHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.rewrite_upstream_request(req)?;
        identity::forward(session, self.config.server.forwarded_for, req)?;
        self.upstream.rewrite_host(req)
    }

    /// The upstream's response head: the decision about it (a protected client's watch
    /// as the upstream's JSON), what it says of the upstream's CBOR and what `auto`
    /// learns; `auto`'s 415 becomes the error that replays the request.
    pub fn upstream_head(&self, resp: &ResponseHeader, ex: &mut Exchange) -> Result<()> {
        let (decision, support) = ex.decide_response(resp)?;
        ex.protect_at_head()?;
        if let Some(support) = support {
            self.upstream.readiness.record_cbor(support);
        }
        if let Some((key, learned)) = ex.learned()? {
            self.caps.learn(key, learned);
        }
        match decision.replay {
            true => Err(replay::start(ex, &self.codecs, &self.budget)),
            false => Ok(()),
        }
    }

    /// The response head to the client: counted, relabelled as decided, the client
    /// connection's reuse set.
    pub fn client_head(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Exchange,
    ) -> Result<()> {
        let upgrade = session.req_header().headers.get(http::header::UPGRADE);
        ex.upstream_answered(resp.status.as_u16(), upgrade.and_then(|v| v.to_str().ok()));
        self.connection_reuse(session);
        let head_request = session.req_header().method == http::Method::HEAD;
        if ex.relabel_response(resp, framing(session), head_request, &self.codecs)? {
            connections::gather(session.as_downstream());
        }
        Ok(())
    }

    /// One piece of the response body to the client, transcoded as decided. The head is
    /// already on its way: a body that cannot be transcoded ends the response
    /// abnormally, so the client cannot take a truncated body for a whole one.
    pub fn client_body(
        &self,
        body: &mut Option<Bytes>,
        end: bool,
        ex: &mut Exchange,
    ) -> Result<()> {
        ex.response()?.piece(body, end).map_err(|e| {
            tracing::warn!(error = %e, "upstream body could not be transcoded");
            *body = None;
            Error::explain(
                ErrorType::HTTPStatus(502),
                format!("upstream body could not be transcoded: {e}"),
            )
        })
    }

    /// The request failed (`e`): a drained watch ends cleanly; otherwise the client gets
    /// a `Status` if no head was sent, and the watch events transcoded before a
    /// malformed one if it was.
    pub async fn fail(&self, session: &mut Session, e: &Error, ex: &mut Exchange) -> FailToProxy {
        ex.note_upstream_time();
        let head_sent = session.response_written().is_some();
        let draining = self.admission.long_running_ending();
        if drain_ends_cleanly(draining, ex.is_watch_stream(), head_sent) {
            return end_cleanly(session, ex).await;
        }
        if *e.esource() != pingora::ErrorSource::Downstream
            && suggests_unreachable(e.etype(), &e.to_string())
        {
            self.upstream.readiness.doubt();
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

    /// The request is over: the client connection's count, its metrics and log line,
    /// and what it held given back.
    pub fn finish(&self, session: &mut Session, e: Option<&Error>, ex: &mut Exchange) {
        connections::release(session.as_downstream());
        request_log::finish(session, e, ex, self.lines.as_deref());
    }
}
