//! [`Exchange`]: the context of one request across the steps of its loop
//! (`proxy::steps`). It is made when the request arrives and planned once, in
//! `request_filter`; from then on its stage ([`Stage`]) says which phase the request is
//! in and carries what that phase has: the plan, who the request is and its request
//! body ([`RequestBody`]) from planning on, whether it is protected, and the response
//! body ([`ResponseBody`], with the decision about the upstream's head) once the
//! upstream answered. Beside the stage it holds what the request is counted and logged
//! with ([`Account`]), and what it holds of the process ([`Held`]: guards that give
//! themselves back when dropped, on every path, panics included). Its fields are
//! private: the steps ask it, and it asks the plan.

use super::local_reply;
use super::transcode::{codec_time, CodecSettings, RequestBody, ResponseBody};
use crate::limits::admission::{Admission, Slot, UpstreamHeld};
use crate::limits::budget::BodyBudget;
use crate::metrics::{metrics, GaugeHeld, Origin};
use crate::negotiate::client::ClientFamily;
use crate::negotiate::identity::Identity;
use crate::negotiate::pool::{retry, Attempt, Pool, Retry};
use crate::negotiate::protect::{self, Reason, Verdict};
use crate::negotiate::route::UpgradeProtocol;
use crate::negotiate::{
    BodyAction, CapabilityKey, CborSupport, ClientFraming, Failure, Intake, Learned, OnResponse,
    Plan, Reply, ResponseHead,
};
use crate::proxy::request_labels::{count_refusal, RequestLabels};
use bytes::Bytes;
use http::header::{
    HeaderName, ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    ETAG, TRANSFER_ENCODING,
};
use http::HeaderValue;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::{Error, ErrorType, Result};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything about one request that outlives a callback.
pub struct Exchange {
    started: Instant,
    stage: Stage,
    account: Account,
    held: Held,
}

/// Where the request is, each phase with what it has. Planning happens once, first
/// thing in `request_filter`; from then on every phase carries the [`Request`]. A step
/// asked of a phase that cannot have it (pingora never does so) is one internal error,
/// [`out_of_turn`]; a question about the request answers from whatever phase it is in.
/// The phases are held inline: the context lives in the request's own future, which
/// pingora already keeps on the heap, and a box of its own would be one more
/// allocation per request.
#[allow(clippy::large_enum_variant)]
enum Stage {
    /// pingora made the context; nothing is known yet.
    Arrived,
    /// Planned and admitted: its body is read whole here when the plan says so, and it
    /// may be protected (`proxy::hold`); nothing has gone upstream.
    Planned(Request),
    /// An attempt upstream is under way: its peer is chosen, no response head decided.
    Proxied(Request),
    /// The upstream's response head is decided: its body's stages.
    Answered(Request, ResponseBody),
    /// cborgate answered it itself (a refusal, or a failure's `Status`).
    Local(Request),
}

/// A planned request: its plan, who it is, and its request body.
struct Request {
    plan: Plan,
    /// Who the request is, and its identity headers upstream.
    identity: Identity,
    /// The upstream connections it may share (decided with its identity).
    pool: Pool,
    /// Its `group`, `resource` and `client` metric labels.
    labels: RequestLabels,
    request: RequestBody,
    /// Attempts the upstream did not act on (refused unprocessed, or their stream ended
    /// before the body) that were sent again.
    resent: u8,
    /// A client with old CBOR limits that accepts JSON (`proxy::hold`): its family.
    protected: Option<ClientFamily>,
}

/// What the request is counted and logged with.
#[derive(Default)]
struct Account {
    /// The status the client got (`None`: no answer yet).
    status: Option<u16>,
    /// The `response_format` label, once decided.
    format: Option<&'static str>,
    /// Why cborgate answered with an error Status, or what cut the response short.
    reason: Option<String>,
    upstream_started: Option<Instant>,
    upstream_time: Option<Duration>,
    /// The SIGTERM drain ended this watch's stream, cleanly.
    ended_by_drain: bool,
    /// An answer cborgate gives itself once the request has failed.
    local_error: Option<Reply>,
}

/// What the request holds of the process; each gives itself back when dropped.
#[derive(Default)]
struct Held {
    /// The admission slot; given back last ([`Exchange::release`]).
    admitted: Option<Slot>,
    /// A long-running request's upstream socket, for the drain to end it.
    upstream_socket: Option<UpstreamHeld>,
    /// The turn to get an HTTP/2 upstream session (`Upstream::connect_turn`), given
    /// back once it has one.
    connect_turn: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Counted in `cborgate_watch_streams_active`.
    watch: Option<GaugeHeld>,
    /// Counted in `cborgate_upgrades_active`, with its protocol.
    upgrade: Option<GaugeHeld>,
}

/// How the upstream peer is chosen for an attempt.
#[derive(Clone, Copy, Debug)]
pub struct PeerChoice {
    /// No response-header timeout; the socket is held for the drain.
    pub long_running: bool,
    /// HTTP/1.1 only: an upgrade, an anonymous request, or a refused one sent again.
    pub http1_only: bool,
    /// The front-proxy certificate goes with it.
    pub cert: bool,
    pub pool: Pool,
}

/// What the request log and `cborgate_requests_total` say of a request that is over.
pub struct Record<'a> {
    pub verb: &'static str,
    /// The status the client got, or the one it is counted with.
    pub status: Option<u16>,
    pub request_format: &'static str,
    pub response_format: &'static str,
    pub upstream_time: Duration,
    pub codec_time: Duration,
    pub elapsed: Duration,
    pub auth: &'static str,
    pub user: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub ended_by_drain: bool,
}

/// The one answer to a step asked of a phase that cannot have it: pingora calls
/// `request_filter` (which plans) before any other step, and `upstream_peer` before the
/// upstream's head, so this is a bug, answered as an internal error.
fn out_of_turn() -> Box<Error> {
    Error::explain(ErrorType::InternalError, "a request step out of its turn")
}

fn header(resp: &ResponseHeader, name: HeaderName) -> Option<&str> {
    resp.headers.get(name).and_then(|v| v.to_str().ok())
}

/// What decisions need of the upstream's response head.
fn response_head(resp: &ResponseHeader) -> ResponseHead<'_> {
    ResponseHead {
        status: resp.status.as_u16(),
        content_type: header(resp, CONTENT_TYPE),
        content_encoding: header(resp, CONTENT_ENCODING),
        content_length: header(resp, CONTENT_LENGTH).and_then(|v| v.trim().parse().ok()),
    }
}

/// [`STRIPPED_HEADERS`](crate::negotiate::response::STRIPPED_HEADERS) as header names, made
/// once: a name given as text is parsed again at each removal, in both of pingora's maps.
static STRIPPED: [HeaderName; 6] = [
    CONTENT_LENGTH,
    ETAG,
    HeaderName::from_static("content-md5"),
    HeaderName::from_static("digest"),
    ACCEPT_RANGES,
    CONTENT_ENCODING,
];

/// A request that repeats one `Content-Length` (pingora accepts identical repeats) goes
/// upstream with it once.
fn single_content_length(req: &mut RequestHeader) -> Result<()> {
    let mut values = req.headers.get_all(CONTENT_LENGTH).iter();
    if let (Some(first), Some(_)) = (values.next(), values.next()) {
        let first = first.clone();
        req.insert_header("Content-Length", first)?;
    }
    Ok(())
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            started: Instant::now(),
            stage: Stage::Arrived,
            account: Account::default(),
            held: Held::default(),
        }
    }
}

impl Stage {
    /// The request, in whatever phase it is (`None`: never planned).
    fn request(&self) -> Option<&Request> {
        match self {
            Stage::Arrived => None,
            Stage::Planned(r) | Stage::Proxied(r) | Stage::Answered(r, _) | Stage::Local(r) => {
                Some(r)
            }
        }
    }

    fn request_mut(&mut self) -> Option<&mut Request> {
        match self {
            Stage::Arrived => None,
            Stage::Planned(r) | Stage::Proxied(r) | Stage::Answered(r, _) | Stage::Local(r) => {
                Some(r)
            }
        }
    }

    /// Into the phase `to` makes of the request, from whatever phase it is in.
    fn advance(&mut self, to: impl FnOnce(Request) -> Stage) -> Result<()> {
        match std::mem::replace(self, Stage::Arrived) {
            Stage::Arrived => Err(out_of_turn()),
            Stage::Planned(r) | Stage::Proxied(r) | Stage::Answered(r, _) | Stage::Local(r) => {
                *self = to(r);
                Ok(())
            }
        }
    }
}

impl Exchange {
    /// Plan the request (once): its plan, who it is, the connections it may share, its
    /// metric labels, its admission slot if it has one, and its body's declared length.
    pub fn plan(
        &mut self,
        plan: Plan,
        identity: Identity,
        pool: Pool,
        labels: RequestLabels,
        admitted: Option<Slot>,
        declared_len: Option<u64>,
    ) {
        self.held.admitted = admitted;
        let request = RequestBody::new(&plan, declared_len, labels.resource);
        self.stage = Stage::Planned(Request {
            plan,
            identity,
            pool,
            labels,
            request,
            resent: 0,
            protected: None,
        });
    }

    /// The request before it goes upstream.
    fn planned_mut(&mut self) -> Result<&mut Request> {
        match &mut self.stage {
            Stage::Planned(r) => Ok(r),
            _ => Err(out_of_turn()),
        }
    }

    /// The request of the attempt under way.
    fn proxied(&self) -> Result<&Request> {
        match &self.stage {
            Stage::Proxied(r) => Ok(r),
            _ => Err(out_of_turn()),
        }
    }

    /// The request and its response, once the upstream's head is decided.
    fn upstream_answer(&self) -> Result<(&Request, &ResponseBody)> {
        match &self.stage {
            Stage::Answered(r, resp) => Ok((r, resp)),
            _ => Err(out_of_turn()),
        }
    }

    fn answered_mut(&mut self) -> Result<(&mut Request, &mut ResponseBody)> {
        match &mut self.stage {
            Stage::Answered(r, resp) => Ok((r, resp)),
            _ => Err(out_of_turn()),
        }
    }

    /// What follows in reading the request body: a piece, the upstream, or a refusal.
    pub fn body_intake(&mut self) -> Result<Intake> {
        Ok(self.planned_mut()?.request.next().clone())
    }

    /// One piece of a body read whole (`None`: its end).
    pub fn take_body_piece(
        &mut self,
        piece: Option<&[u8]>,
        s: &CodecSettings,
        budget: &Arc<BodyBudget>,
    ) -> Result<()> {
        let r = self.planned_mut()?;
        r.request.take(&r.plan, piece, s, budget);
        Ok(())
    }

    /// Whether the request is protected as a client with old CBOR limits (`decide`, from
    /// the plan: its client family, remembered for the metric) and held (`proxy::hold`).
    pub fn protect_with(
        &mut self,
        decide: impl FnOnce(&Plan) -> (Option<ClientFamily>, bool),
    ) -> Result<bool> {
        let r = self.planned_mut()?;
        let (client, held) = decide(&r.plan);
        r.protected = client;
        Ok(held)
    }

    /// An attempt upstream starts now: how its peer is chosen (after a replay or a
    /// retry, the last attempt's response is let go).
    pub fn peer_choice(&mut self) -> Result<PeerChoice> {
        if let Stage::Arrived | Stage::Local(_) = self.stage {
            return Err(out_of_turn());
        }
        self.stage.advance(Stage::Proxied)?;
        self.account.upstream_started = Some(Instant::now());
        let r = self.proxied()?;
        Ok(PeerChoice {
            long_running: r.plan.long_running,
            http1_only: r.plan.needs_http1() || r.pool.http1_only(r.resent),
            cert: r.identity.upstream_cert,
            pool: r.pool,
        })
    }

    /// The upstream's name did not resolve: the request is answered with this failure.
    pub fn unresolved(&mut self, why: String) -> Result<()> {
        let reply = self
            .proxied()?
            .plan
            .failure_reply(&Failure::Unresolved(why));
        self.account.local_error = reply;
        Ok(())
    }

    /// Hold (or, with `None`, give back) the turn to get an HTTP/2 upstream session.
    pub fn connect_turn(&mut self, turn: Option<tokio::sync::OwnedSemaphorePermit>) {
        self.held.connect_turn = turn;
    }

    /// Connected: the connect turn goes back; a long-running request's socket is held
    /// for the drain, which ends it through this second handle.
    pub fn connected(&mut self, fd: std::os::fd::RawFd, admission: &Arc<Admission>) -> Result<()> {
        self.held.connect_turn = None;
        if self.proxied()?.plan.long_running {
            match crate::limits::admission::dup_socket(fd) {
                Ok(s) => self.held.upstream_socket = Some(admission.hold_upstream(s)),
                Err(e) => {
                    tracing::warn!(target: "cborgate::proxy", error = %e, "a watch cannot be ended cleanly at shutdown")
                }
            }
        }
        Ok(())
    }

    /// The request head as the upstream gets it: `Accept` and `Content-Type` as
    /// planned, no `Accept-Encoding` where the answer may be transcoded, the held body's
    /// exact length, and the identity headers removed and added as decided.
    pub fn rewrite_upstream_request(&self, req: &mut RequestHeader) -> Result<()> {
        let r = self.proxied()?;
        match &r.plan.upstream_accept {
            // A media type alone is a constant: no copy.
            Some(Cow::Borrowed(accept)) => {
                req.insert_header("Accept", HeaderValue::from_static(accept))?
            }
            Some(Cow::Owned(accept)) => req.insert_header("Accept", accept.as_str())?,
            None => {}
        }
        if r.plan.strips_accept_encoding() {
            req.remove_header(&ACCEPT_ENCODING);
        }
        match r.plan.body_for_attempt(r.request.replaying()) {
            BodyAction::PassThrough => {}
            BodyAction::CborToJson {
                upstream_content_type,
                ..
            }
            | BodyAction::JsonToCbor {
                upstream_content_type,
            } => {
                req.insert_header(
                    "Content-Type",
                    HeaderValue::from_static(upstream_content_type),
                )?;
            }
        }
        if let Some(body) = r.request.held() {
            // The body was read whole: its exact length, one Content-Length line.
            req.remove_header(&TRANSFER_ENCODING);
            req.insert_header("Content-Length", body.len().to_string())?;
        } else {
            single_content_length(req)?;
        }
        super::identity::apply(&r.identity, req)
    }

    /// The request body on its way upstream ([`RequestBody::upstream_piece`]); it may
    /// still be on its way once the upstream has answered.
    pub fn request_body(&self, body: &mut Option<Bytes>, end: bool) -> Result<()> {
        let r = self.stage.request().ok_or_else(out_of_turn)?;
        r.request.upstream_piece(body, end);
        Ok(())
    }

    /// Decide what to do with the upstream's response head: the request is answered by
    /// the upstream from here (a second head, after an informational one, decides anew).
    /// With it, in upgrade mode, whether the head shows the upstream refuses (or speaks)
    /// CBOR, for `/readyz` ([`Plan::cbor_support`]): the head's fields are read once.
    pub fn decide_response(
        &mut self,
        resp: &ResponseHeader,
    ) -> Result<(OnResponse, Option<CborSupport>)> {
        let r = match &self.stage {
            Stage::Proxied(r) | Stage::Answered(r, _) => r,
            _ => return Err(out_of_turn()),
        };
        let head = response_head(resp);
        let decision = r.plan.on_response(head, r.request.replaying());
        let support = r.plan.cbor_support(head);
        self.stage
            .advance(|r| Stage::Answered(r, ResponseBody::new(decision)))?;
        self.account.format = Some(decision.format);
        Ok((decision, support))
    }

    /// What the answer taught `auto` mode, and the key it is remembered under.
    pub fn learned(&self) -> Result<Option<(CapabilityKey<'_>, Learned)>> {
        let (r, resp) = self.upstream_answer()?;
        let learned = resp.decision().learned;
        Ok(r.plan.capability_key().zip(learned))
    }

    /// What protecting the request (`proxy::hold`) makes of the upstream's response head
    /// ([`protect::on_response`]).
    pub fn protected_verdict(&self) -> Result<Verdict> {
        let (r, resp) = self.upstream_answer()?;
        Ok(protect::on_response(resp.decision(), r.protected.is_some()))
    }

    /// At the head: a protected watch goes as the upstream's JSON (its events' width
    /// cannot be known at the head).
    pub fn protect_at_head(&mut self) -> Result<()> {
        match self.protected_verdict()? {
            Verdict::Json(reason) => self.as_json(reason),
            Verdict::Hold | Verdict::AsDecided => Ok(()),
        }
    }

    /// Send the upstream's JSON as it came instead of the CBOR decided at the head, to a
    /// protected client, counted with `reason` in `cborgate_cbor_protected_total`.
    pub fn as_json(&mut self, reason: Reason) -> Result<()> {
        let (r, resp) = self.answered_mut()?;
        if let Some(client) = r.protected {
            let json = protect::as_json(*resp.decision());
            resp.redecide(json);
            self.account.format = Some(json.format);
            metrics()
                .cbor_protected_total
                .with_label_values(&[client.label(), reason.label()])
                .inc();
        }
        Ok(())
    }

    /// `auto`: start the JSON replay after the upstream's 415. `Err(Some)`: the answer
    /// instead (400, 413 or 429), recorded as the request's local answer.
    pub fn start_replay(
        &mut self,
        s: &CodecSettings,
        budget: &Arc<BodyBudget>,
    ) -> Result<Option<Reply>> {
        let (r, _) = self.answered_mut()?;
        let Err(reply) = r.request.start_replay(&r.plan, s, budget) else {
            return Ok(None);
        };
        self.account.local_error = Some(reply.clone());
        Ok(Some(reply))
    }

    /// Whether, and why, the failed attempt is sent again ([`retry`]).
    pub fn retry(&mut self, failure: RetryFacts) -> Option<Retry> {
        let answered_locally = self.account.local_error.is_some();
        let r = self.stage.request_mut()?;
        let again = retry(&Attempt {
            idempotent: failure.idempotent,
            body_kept: failure.body_kept,
            answered: failure.answered,
            refused: failure.refused,
            ended_before_body: failure.ended_before_body,
            transport: failure.transport,
            resent: r.resent,
            replay: r.request.replaying() && failure.replay_signal,
            answered_locally,
        });
        if again.is_some_and(Retry::resends) {
            r.resent += 1;
        }
        again
    }

    /// The error is the replay's own signal, not a failure worth a log line.
    pub fn is_replay(&self, e: &Error) -> bool {
        self.stage.request().is_some_and(|r| r.request.replaying())
            && matches!(e.etype(), ErrorType::HTTPStatus(415))
    }

    /// The time the upstream took to answer (or fail), measured once, from the start of
    /// the upstream attempt.
    pub fn note_upstream_time(&mut self) {
        let a = &mut self.account;
        if a.upstream_time.is_none() {
            a.upstream_time = a.upstream_started.map(|t| t.elapsed());
        }
    }

    /// The upstream's response head is on its way to the client: its status, the time
    /// the upstream took, an upgrade (counted while it is open) or a refusal counted.
    pub fn upstream_answered(&mut self, status: u16, upgrade: Option<&str>) {
        self.account.status = Some(status);
        self.note_upstream_time();
        match status {
            101 => {
                let label = UpgradeProtocol::of(upgrade).label();
                let gauge = metrics().upgrades_active.with_label_values(&[label]);
                self.held.upgrade = Some(GaugeHeld::hold(&gauge));
            }
            code => count_refusal(code, Origin::Upstream, self.labels()),
        }
    }

    /// Relabel the response head as decided and get the body's stages ready; a watch's
    /// stream counts as open from here until the request is over. True: the client's
    /// connection holds this response's flushes until its terminating chunk
    /// ([`crate::negotiate::response::Relabel::gather`]).
    pub fn relabel_response(
        &mut self,
        resp: &mut ResponseHeader,
        framing: ClientFraming,
        head_request: bool,
        s: &CodecSettings,
    ) -> Result<bool> {
        let Stage::Answered(r, response) = &mut self.stage else {
            return Err(out_of_turn());
        };
        let decision = *response.decision();
        if decision.watch_stream && self.held.watch.is_none() {
            self.held.watch = Some(GaugeHeld::hold(&metrics().watch_streams_active));
        }
        response.prepare(s, r.labels.resource);
        let Some(edits) = decision.relabel(framing, head_request) else {
            return Ok(false);
        };
        resp.insert_header("Content-Type", HeaderValue::from_static(edits.content_type))?;
        for h in &STRIPPED {
            resp.remove_header(h);
        }
        if edits.chunked {
            resp.insert_header("Transfer-Encoding", HeaderValue::from_static("chunked"))?;
        }
        if edits.gzip {
            resp.insert_header("Content-Encoding", HeaderValue::from_static("gzip"))?;
            resp.append_header("Vary", HeaderValue::from_static("Accept-Encoding"))?;
        }
        Ok(edits.gather)
    }

    /// The response body's stages ([`ResponseBody::piece`] for each piece).
    pub fn response(&mut self) -> Result<&mut ResponseBody> {
        Ok(self.answered_mut()?.1)
    }

    /// The response is a watch's stream that has begun.
    pub fn is_watch_stream(&self) -> bool {
        match &self.stage {
            Stage::Answered(_, response) => response.decision().watch_stream,
            _ => false,
        }
    }

    /// The drain ended this watch's stream, cleanly: what it had transcoded goes out
    /// before the end.
    pub fn ended_by_drain(&mut self) -> Option<Bytes> {
        self.account.ended_by_drain = true;
        self.take_unsent()
    }

    /// The whole events a failed watch chunk transcoded before the failure.
    pub fn take_unsent(&mut self) -> Option<Bytes> {
        match &mut self.stage {
            Stage::Answered(_, response) => response.take_unsent(),
            _ => None,
        }
    }

    /// Its `group`, `resource` and `client` metric labels (`None`: never planned).
    pub fn labels(&self) -> Option<RequestLabels> {
        self.stage.request().map(|r| r.labels)
    }

    /// Record `reply` as the request's answer, which cborgate writes itself (its format
    /// labels the request; its message is the reason).
    pub fn answered(&mut self, reply: &Reply) {
        let status = &reply.status;
        self.account.status = Some(status.code);
        self.account.format = Some(local_reply::format_label(status));
        if status.code >= 400 {
            self.account.reason = Some(status.message.clone());
        }
        // A request never planned stays as it came: its record says so.
        if !matches!(self.stage, Stage::Arrived) {
            let local = self.stage.advance(Stage::Local);
            debug_assert!(local.is_ok());
        }
    }

    /// The request failed after it was sent upstream (`e`); `head_sent`: the client
    /// already has a response head. Returns the answer to write, if one can still be
    /// written; records how the request is counted and logged either way.
    pub fn failed(&mut self, e: &Error, head_sent: bool) -> Option<Reply> {
        let answered = self.account.status.is_some();
        let mut unanswered = None;
        let reply = self.account.local_error.take().or_else(|| {
            let failure = local_reply::failure_of(e, answered)?;
            local_reply::log_upstream_failure(e);
            let plan = &self.stage.request()?.plan;
            let reply = plan.failure_reply(&failure);
            if reply.is_none() {
                unanswered = Some(plan.unanswered_failure(&failure));
            }
            reply
        });
        if let (Some((code, reason)), false) = (unanswered, head_sent) {
            // Counted and logged as the upstream failure it is, not as a client that left.
            self.account.status = Some(code);
            self.account.reason = Some(reason);
        }
        if local_reply::cut_short(e, answered) && head_sent {
            // The status the client got stays; the line says what cut its response short.
            self.account.reason = Some(Plan::CUT_SHORT.to_string());
        }
        reply.filter(|_| !head_sent)
    }

    /// What the request log and the metrics say of it; `written`: the status of the
    /// response head the client got, if any.
    pub fn record(&self, written: Option<u16>) -> Record<'_> {
        let response = match &self.stage {
            Stage::Answered(_, response) => Some(response),
            _ => None,
        };
        let (verb, request_format, response_format, auth, user, codec) = match self.stage.request()
        {
            Some(r) => (
                r.plan.verb.label(),
                r.plan.request_format.as_str(),
                self.account
                    .format
                    .unwrap_or_else(|| r.plan.unanswered_format()),
                r.identity.method.as_str(),
                r.identity.user.as_deref(),
                codec_time(&r.request, response),
            ),
            None => ("OTHER", "none", "none", "none", None, Duration::ZERO),
        };
        Record {
            verb,
            status: self.account.status.or(written),
            request_format,
            response_format,
            upstream_time: self.account.upstream_time.unwrap_or_default(),
            codec_time: codec,
            elapsed: self.started.elapsed(),
            auth,
            user,
            reason: self.account.reason.as_deref(),
            ended_by_drain: self.account.ended_by_drain,
        }
    }

    /// The request is over: give back what it holds, the admission slot last (the drain
    /// exits once none is held, and the request's line is written by then).
    pub fn release(&mut self) {
        let held = std::mem::take(&mut self.held);
        let Held {
            admitted,
            upstream_socket,
            connect_turn,
            watch,
            upgrade,
        } = held;
        drop((upstream_socket, connect_turn, watch, upgrade));
        drop(admitted);
    }
}

/// What is known about a failed upstream attempt, beside what the exchange knows.
#[derive(Clone, Copy, Debug)]
pub struct RetryFacts {
    pub idempotent: bool,
    pub body_kept: bool,
    pub answered: bool,
    pub refused: bool,
    /// The upstream ended the HTTP/2 stream before it had the whole body
    /// ([`local_reply::ended_before_body`]).
    pub ended_before_body: bool,
    pub transport: bool,
    /// The error is a 415 (the replay's signal, when a replay is under way).
    pub replay_signal: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Limits, StringMode};
    use crate::negotiate::identity::{identify, HeaderNames};
    use crate::negotiate::{plan, RequestHead, RequestLimits, UpstreamMode};

    #[test]
    fn the_stripped_names_are_the_decided_ones() {
        let names: Vec<&str> = STRIPPED.iter().map(HeaderName::as_str).collect();
        let decided: Vec<String> = crate::negotiate::response::STRIPPED_HEADERS
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect();
        assert_eq!(names, decided);
    }

    fn settings() -> CodecSettings {
        CodecSettings {
            buffers: Arc::default(),
            transcoders: Arc::default(),
            window: 64 * 1024,
            strings: StringMode::Bytes,
            limits: Limits::default(),
            request: RequestLimits {
                max_header_bytes: 1 << 20,
                max_request_body: 1 << 20,
                max_upstream_body: 1 << 20,
            },
            labels: Arc::new(crate::proxy::request_labels::ResourceLabels::new(10)),
        }
    }

    fn planned(query: Option<&str>) -> Exchange {
        let head = RequestHead {
            method: "GET",
            path: "/api/v1/namespaces/d/pods",
            query,
            accept: Some("application/cbor"),
            ..Default::default()
        };
        let mut ex = Exchange::default();
        let who = identify(None, &HeaderNames::default(), std::iter::empty);
        let labels = settings().labels.unclassified();
        ex.plan(
            plan(&head, UpstreamMode::Legacy),
            who,
            Pool::Anonymous,
            labels,
            None,
            None,
        );
        ex
    }

    impl Exchange {
        fn plan_for_test(&self) -> &Plan {
            &self.stage.request().unwrap().plan
        }
    }

    fn json_ok() -> ResponseHeader {
        let mut resp = ResponseHeader::build(200, None).unwrap();
        resp.insert_header("Content-Type", "application/json")
            .unwrap();
        resp
    }

    /// A panic in the middle of a watch or an upgrade drops the exchange as it unwinds
    /// (tokio drops a task's future when it panics), and each gauge it held comes back.
    #[test]
    fn gauges_come_back_when_a_request_panics() {
        let watches = || metrics().watch_streams_active.get();
        let upgrades = || metrics().upgrades_active.with_label_values(&["spdy"]).get();
        let (w0, u0) = (watches(), upgrades());
        let s = settings();
        let watch = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ex = planned(Some("watch=true"));
            let mut resp = json_ok();
            ex.peer_choice().unwrap();
            ex.decide_response(&resp).unwrap();
            ex.upstream_answered(200, None);
            ex.relabel_response(&mut resp, ClientFraming::Http11, false, &s)
                .unwrap();
            assert_eq!(watches(), w0 + 1, "the stream is open");
            panic!("a bug in the middle of a watch");
        }));
        assert!(watch.is_err());
        assert_eq!(watches(), w0, "the watch gauge came back");
        let upgrade = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ex = planned(None);
            ex.upstream_answered(101, Some("SPDY/3.1"));
            assert_eq!(upgrades(), u0 + 1, "the upgrade is open");
            panic!("a bug in the middle of an upgrade");
        }));
        assert!(upgrade.is_err());
        assert_eq!(upgrades(), u0, "the upgrade gauge came back");
        // And without a panic, when the request is over.
        let mut ex = planned(Some("watch=true"));
        let mut resp = json_ok();
        ex.peer_choice().unwrap();
        ex.decide_response(&resp).unwrap();
        ex.relabel_response(&mut resp, ClientFraming::Http2, false, &s)
            .unwrap();
        assert_eq!(watches(), w0 + 1);
        ex.release();
        assert_eq!(watches(), w0);
    }

    /// Each step is asked of the phase that has what it needs; asked of another, it is
    /// the one internal error (`out_of_turn`), never a panic nor a quiet success.
    #[test]
    fn each_step_has_its_phases() {
        let phase = |n: usize| {
            let mut ex = planned(None);
            match n {
                0 => ex = Exchange::default(),
                1 => {}
                2 => {
                    ex.peer_choice().unwrap();
                }
                3 => {
                    ex.peer_choice().unwrap();
                    ex.decide_response(&json_ok()).unwrap();
                }
                _ => {
                    let failure = Failure::Unresolved("nowhere".into());
                    let reply = ex.plan_for_test().failure_reply(&failure).unwrap();
                    ex.answered(&reply);
                }
            }
            ex
        };
        type Step = fn(&mut Exchange) -> bool;
        let steps: &[(&str, Step)] = &[
            ("body_intake", |ex| ex.body_intake().is_ok()),
            ("protect_with", |ex| {
                ex.protect_with(|_| (None, false)).is_ok()
            }),
            ("peer_choice", |ex| ex.peer_choice().is_ok()),
            ("rewrite_upstream_request", |ex| {
                let mut req = RequestHeader::build("GET", b"/api", None).unwrap();
                ex.rewrite_upstream_request(&mut req).is_ok()
            }),
            ("request_body", |ex| {
                ex.request_body(&mut None, true).is_ok()
            }),
            ("decide_response", |ex| {
                ex.decide_response(&json_ok()).is_ok()
            }),
            ("protected_verdict", |ex| ex.protected_verdict().is_ok()),
            ("relabel_response", |ex| {
                let s = settings();
                let mut resp = json_ok();
                ex.relabel_response(&mut resp, ClientFraming::Http11, false, &s)
                    .is_ok()
            }),
            ("response", |ex| ex.response().is_ok()),
        ];
        // Per phase (arrived, planned, proxied, answered by the upstream, answered
        // locally), whether each step above is in its turn.
        let table: [[bool; 9]; 5] = [
            [
                false, false, false, false, false, false, false, false, false,
            ],
            [true, true, true, false, true, false, false, false, false],
            [false, false, true, true, true, true, false, false, false],
            [false, false, true, false, true, true, true, true, true],
            [false, false, false, false, true, false, false, false, false],
        ];
        for (n, row) in table.iter().enumerate() {
            for ((name, step), want) in steps.iter().zip(row) {
                let mut ex = phase(n);
                assert_eq!(step(&mut ex), *want, "phase {n}, {name}");
            }
        }
    }

    /// The plan is there from `request_filter` on; before it, every question is an
    /// error or a no-op, never a panic.
    #[test]
    fn an_exchange_without_a_plan_answers_without_panicking() {
        let mut ex = Exchange::default();
        assert!(ex.body_intake().is_err());
        assert!(ex.peer_choice().is_err());
        assert!(ex.decide_response(&json_ok()).is_err());
        assert!(!ex.is_watch_stream());
        assert!(ex.take_unsent().is_none());
        let r = ex.record(None);
        assert_eq!(
            (r.verb, r.status, r.response_format),
            ("OTHER", None, "none")
        );
        ex.release();
    }
}
