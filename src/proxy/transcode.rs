//! Where requests and responses are transcoded: [`Exchange`], the synchronous
//! context of one request, carries its [`Plan`] out on heads and bodies. It
//! rewrites the upstream request head, runs the request body through the codec
//! (held back until it is known to be good), relabels the response head as
//! [`Plan::on_response`] decided, and runs the response body through the codec
//! chunk by chunk (or, for the upstream's own CBOR watch that passes through,
//! only counts its events). It decides nothing: every choice is the plan's.

use super::body::{BodyCodec, Gzip};
use super::buffers::{OutputBuffers, Transcoders};
use crate::codec::{ItemCounter, Limits, StringMode};
use crate::limits::admission::Slot;
use crate::limits::budget::{BodyBudget, Charge};
use crate::negotiate::identity::Identity;
use crate::negotiate::local::Reply;
use crate::negotiate::pool::Pool;
use crate::negotiate::{
    BodyAction, CborSupport, LocalReply, OnResponse, Plan, RequestLimits, ResponseAction,
    ResponseHead,
};
use crate::ops::metrics::metrics;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::Result;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How bodies are transcoded (from the configuration, fixed at start-up).
#[derive(Clone, Debug)]
pub struct CodecSettings {
    /// Where response chunk buffers come from and go back to.
    pub buffers: Arc<OutputBuffers>,
    /// Where response transcoders come from and go back to.
    pub transcoders: Arc<Transcoders>,
    pub window: usize,
    pub strings: StringMode,
    pub limits: Limits,
    pub request: RequestLimits,
}

/// Everything about one request that outlives a callback.
pub struct Exchange {
    pub started: Instant,
    pub plan: Option<Plan>,
    /// This request's admission slot; dropping it (when the exchange ends, on any
    /// path, panics included) gives it back.
    pub admitted: Option<Slot>,
    /// The request body's declared length (`Content-Length`).
    declared_len: Option<u64>,
    request_codec: Option<BodyCodec>,
    /// The request body as it goes upstream, transcoded, growing while it is read.
    request_out: Vec<u8>,
    /// Raw request body bytes read so far.
    request_read: u64,
    /// The request body, read whole (and transcoded, unless CBOR goes first), as the
    /// next attempt sends it.
    held: Option<Bytes>,
    /// What the held body takes of the process-wide body budget.
    charge: Option<Charge>,
    /// Output of a failed watch chunk made before the failure: written to the client
    /// before its stream ends abnormally.
    pub unsent: Option<Bytes>,
    response_codec: Option<BodyCodec>,
    /// The gzip stage after the response codec, for an answer that is compressed.
    gzip: Option<Gzip>,
    /// Counts the events of a CBOR watch that passes through untouched.
    events: Option<(ItemCounter, prometheus::IntCounter)>,
    /// `auto`: the JSON replay after an upstream 415 is under way.
    pub replay: bool,
    /// The decision about the upstream's response head.
    pub response: Option<OnResponse>,
    /// An answer cborgate gives itself once the request has failed, with `Retry-After`.
    pub local_error: Option<(LocalReply, bool)>,
    /// The `response_format` label, once decided.
    pub format: Option<&'static str>,
    /// Why cborgate answered with an error Status (for the request log).
    pub reason: Option<String>,
    pub upstream_started: Option<Instant>,
    pub upstream_time: Option<Duration>,
    /// Counted in `cborgate_watch_streams_active`.
    pub watch_counted: bool,
    /// The SIGTERM drain ended this long-running response, cleanly (`Gate::fail_to_proxy`).
    pub ended_by_drain: bool,
    /// A long-running request's upstream socket, held for the drain to end it.
    pub upstream_socket: Option<crate::limits::admission::UpstreamHeld>,
    /// Counted in `cborgate_upgrades_active` with this protocol label.
    pub upgrade: Option<&'static str>,
    /// The status the client got (0: none yet).
    pub status: u16,
    /// Who the request is, and its identity headers upstream (decided first thing).
    pub identity: Option<Identity>,
    /// The upstream connections it may share (decided with its identity).
    pub pool: Pool,
    /// Attempts the upstream refused unprocessed that were sent again.
    pub refused_retries: u8,
    /// This request's turn to get an HTTP/2 upstream session (`Upstream::connect_turn`),
    /// given back once it has one, or when the exchange ends.
    pub connect_turn: Option<tokio::sync::OwnedSemaphorePermit>,
    /// A client with old CBOR limits that accepts JSON (`proxy::hold`): its family.
    pub protected: Option<crate::negotiate::client::ClientFamily>,
}

/// Drop the headers that described the body before it was transcoded.
fn strip_body_headers(resp: &mut ResponseHeader) {
    for h in [
        "Content-Length",
        "ETag",
        "Content-MD5",
        "Digest",
        "Accept-Ranges",
        "Content-Encoding",
    ] {
        resp.remove_header(h);
    }
}

/// A request that repeats one `Content-Length` (pingora accepts identical repeats) goes
/// upstream with it once.
fn single_content_length(req: &mut RequestHeader) -> Result<()> {
    let mut values = req.headers.get_all("content-length").iter();
    if let (Some(first), Some(_)) = (values.next(), values.next()) {
        let first = first.clone();
        req.insert_header("Content-Length", first)?;
    }
    Ok(())
}

fn header<'a>(resp: &'a ResponseHeader, name: &str) -> Option<&'a str> {
    resp.headers.get(name).and_then(|v| v.to_str().ok())
}

/// What decisions need of the upstream's response head.
fn response_head(resp: &ResponseHeader) -> ResponseHead<'_> {
    ResponseHead {
        status: resp.status.as_u16(),
        content_type: header(resp, "content-type"),
        content_encoding: header(resp, "content-encoding"),
        content_length: header(resp, "content-length").and_then(|v| v.trim().parse().ok()),
    }
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            started: Instant::now(),
            plan: None,
            admitted: None,
            declared_len: None,
            request_codec: None,
            request_out: Vec::new(),
            request_read: 0,
            held: None,
            charge: None,
            unsent: None,
            response_codec: None,
            gzip: None,
            events: None,
            replay: false,
            response: None,
            local_error: None,
            format: None,
            reason: None,
            upstream_started: None,
            upstream_time: None,
            watch_counted: false,
            ended_by_drain: false,
            upstream_socket: None,
            upgrade: None,
            status: 0,
            identity: None,
            pool: Pool::Anonymous,
            refused_retries: 0,
            connect_turn: None,
            protected: None,
        }
    }
}

impl Exchange {
    /// Adopt the plan of an admitted request, and get its request body's codec ready.
    pub fn begin(&mut self, plan: Plan, slot: Slot, declared_len: Option<u64>, s: &CodecSettings) {
        self.request_codec = Self::request_codec(&plan, self.replay, declared_len, s);
        self.declared_len = declared_len;
        self.plan = Some(plan);
        self.admitted = Some(slot);
    }

    fn request_codec(
        plan: &Plan,
        replay: bool,
        declared_len: Option<u64>,
        s: &CodecSettings,
    ) -> Option<BodyCodec> {
        match plan.body_for_attempt(replay) {
            BodyAction::PassThrough => None,
            BodyAction::CborToJson { schema, .. } => {
                Some(BodyCodec::request(declared_len, s.limits, schema))
            }
            BodyAction::JsonToCbor { .. } => {
                Some(BodyCodec::request_to_cbor(s.window, s.strings, s.limits))
            }
        }
    }

    /// Whether the body is still being read whole (before anything goes upstream), and
    /// whether the rest of it is to be kept in pingora's retry buffer from now on
    /// ([`crate::negotiate::local::keeps_tail`]).
    pub fn reading_body(&self) -> Option<bool> {
        let p = self.plan.as_ref()?;
        (p.reads_body_first() && self.held.is_none())
            .then(|| crate::negotiate::local::keeps_tail(self.declared_len, self.request_read))
    }

    /// One piece of a body read whole, as it arrives (`None`: the body's end): checked
    /// against the limits and the body budget, and transcoded (`auto`'s CBOR-first body
    /// is kept as it came, and transcoded only for a replay). `Err` is the answer instead
    /// (413, 411, 429 or 400); the body is then not sent anywhere.
    pub fn read_body(
        &mut self,
        piece: Option<&[u8]>,
        limits: RequestLimits,
        budget: &Arc<BodyBudget>,
    ) -> std::result::Result<(), Reply> {
        let r = self.take_piece(piece, limits, budget);
        if r.is_err() {
            // Refused: what was held goes back now, not when the lingering close ends.
            self.request_out = Vec::new();
            self.charge = None;
        }
        r
    }

    fn take_piece(
        &mut self,
        piece: Option<&[u8]>,
        limits: RequestLimits,
        budget: &Arc<BodyBudget>,
    ) -> std::result::Result<(), Reply> {
        let Some(p) = self.plan.as_ref() else {
            return Ok(());
        };
        self.request_read += piece.map_or(0, |b| b.len() as u64);
        let read = self.request_read;
        if let Some(r) = p
            .body_refusal(Some(read), limits)
            .or_else(|| p.unframed_body_refusal(self.declared_len, read))
        {
            return Err((r, false));
        }
        match self.request_codec.as_mut() {
            Some(codec) => codec
                .chunk_into(piece, piece.is_none(), &mut self.request_out)
                .map_err(|e| (p.body_refused(&e), false))?,
            None => self
                .request_out
                .extend_from_slice(piece.unwrap_or_default()),
        }
        if let Some(r) = p.transcoded_body_refusal(self.request_out.len() as u64, limits) {
            return Err((r, false));
        }
        let charge = self.charge.get_or_insert_with(|| budget.charge());
        if charge.hold(self.request_out.len() as u64).is_err() {
            return Err(p.body_budget_refusal());
        }
        if piece.is_none() {
            self.held = Some(Bytes::from(std::mem::take(&mut self.request_out)));
        }
        Ok(())
    }

    /// `auto`: the upstream refused the CBOR body; the next attempt sends it as JSON,
    /// transcoded now from the CBOR that went first (at most 64 KiB). `Err`: the answer
    /// instead (400, 413 or 429), as for a body refused while it was read.
    pub fn start_replay(
        &mut self,
        s: &CodecSettings,
        budget: &Arc<BodyBudget>,
    ) -> std::result::Result<(), Reply> {
        self.replay = true;
        let Some(p) = self.plan.as_ref() else {
            return Ok(());
        };
        self.request_codec = Self::request_codec(p, true, self.declared_len, s);
        let Some(cbor) = self.held.take() else {
            return Ok(());
        };
        self.request_read = 0;
        self.read_body(Some(&cbor), s.request, budget)?;
        self.read_body(None, s.request, budget)
    }

    /// The time the upstream took to answer (or fail), measured once, from the start of
    /// the upstream attempt.
    pub fn note_upstream_time(&mut self) {
        if self.upstream_time.is_none() {
            self.upstream_time = self.upstream_started.map(|t| t.elapsed());
        }
    }

    /// Answer with `reply` (its format labels the request; its message is the reason).
    pub fn answered(&mut self, reply: &LocalReply) {
        self.status = reply.code;
        self.format = Some(super::local_reply::format_label(reply));
        if reply.code >= 400 {
            self.reason = Some(reply.message.clone());
        }
    }

    /// Record a failure the client got no answer to (its connection was ended) as the
    /// status and reason it is counted and logged with.
    pub fn unanswered(&mut self, code: u16, reason: String) {
        self.status = code;
        self.reason = Some(reason);
    }

    /// The request head as the upstream gets it: `Accept` and `Content-Type` as
    /// planned, no `Accept-Encoding` where the answer may be transcoded.
    pub fn rewrite_upstream_request(&self, req: &mut RequestHeader) -> Result<()> {
        let Some(p) = self.plan.as_ref() else {
            return Ok(());
        };
        if let Some(accept) = &p.upstream_accept {
            req.insert_header("Accept", accept.as_str())?;
        }
        if p.strips_accept_encoding() {
            req.remove_header("Accept-Encoding");
        }
        match p.body_for_attempt(self.replay) {
            BodyAction::PassThrough => {}
            BodyAction::CborToJson {
                upstream_content_type,
                ..
            }
            | BodyAction::JsonToCbor {
                upstream_content_type,
            } => {
                req.insert_header("Content-Type", upstream_content_type)?;
            }
        }
        if let Some(body) = self.held_for_attempt() {
            // The body was read whole: its exact length, one Content-Length line.
            req.remove_header("Transfer-Encoding");
            req.insert_header("Content-Length", body.len().to_string())?;
        } else {
            single_content_length(req)?;
        }
        Ok(())
    }

    /// The body this attempt sends, when it was read whole.
    fn held_for_attempt(&self) -> Option<&Bytes> {
        self.held.as_ref()
    }

    /// The request body on its way upstream. A body read whole is sent as held, in one
    /// piece: pingora hands over what its retry buffer kept of the body (the last
    /// 64 KiB at most, [`crate::negotiate::local::keeps_tail`]) once, at the body's end,
    /// and that becomes the held body, for every attempt. Any other body passes through.
    pub fn request_body(&self, body: &mut Option<Bytes>, end: bool) {
        if let Some(held) = self.held_for_attempt() {
            *body = Some(if end { held.clone() } else { Bytes::new() });
        }
    }

    /// Decide what to do with the upstream's response head, and remember it.
    pub fn decide_response(&mut self, resp: &ResponseHeader) -> Option<OnResponse> {
        let p = self.plan.as_ref()?;
        let decision = p.on_response(response_head(resp), self.replay);
        self.response = Some(decision);
        self.format = Some(decision.format);
        Some(decision)
    }

    /// Upgrade mode: whether the upstream's response head shows it refuses (or speaks)
    /// CBOR, for `/readyz` ([`Plan::cbor_support`]).
    pub fn cbor_support(&self, resp: &ResponseHeader) -> Option<CborSupport> {
        self.plan.as_ref()?.cbor_support(response_head(resp))
    }

    /// Relabel the response head as decided and get the body's codec ready.
    /// `chunked`: the client speaks HTTP/1.1, so a transcoded body is chunked.
    pub fn relabel_response(
        &mut self,
        resp: &mut ResponseHeader,
        chunked: bool,
        s: &CodecSettings,
    ) -> Result<()> {
        let Some(decision) = self.response else {
            return Ok(());
        };
        if decision.count_events && !self.watch_counted {
            let counted = metrics().watch_events_total.with_label_values(&["cbor"]);
            self.events = Some((ItemCounter::new(s.limits.max_depth), counted));
            metrics().watch_streams_active.inc();
            self.watch_counted = true;
        }
        let Some(content_type) = decision.action.content_type() else {
            return Ok(());
        };
        resp.insert_header("Content-Type", content_type)?;
        strip_body_headers(resp);
        if chunked {
            resp.insert_header("Transfer-Encoding", "chunked")?;
        }
        if decision.gzip {
            // As the apiserver's deferredResponseWriter sets them (Vary added, not set).
            resp.insert_header("Content-Encoding", "gzip")?;
            resp.append_header("Vary", "Accept-Encoding")?;
            self.gzip = Some(Gzip::with_buffers(&s.buffers));
        }
        let (codec, watch) = match decision.action {
            ResponseAction::JsonToCbor { watch } => (
                BodyCodec::response(
                    decision.schema,
                    watch,
                    s.window,
                    s.strings,
                    s.limits,
                    &s.transcoders,
                ),
                watch,
            ),
            ResponseAction::CborToJson { watch } => {
                (BodyCodec::response_to_json(watch, s.limits), watch)
            }
            ResponseAction::PassThrough => return Ok(()),
        };
        self.response_codec = Some(codec.with_buffers(&s.buffers));
        if watch {
            metrics().watch_streams_active.inc();
            self.watch_counted = true;
        }
        Ok(())
    }

    /// One piece of the response body, transcoded if the response is, then gzipped if
    /// it is compressed; a CBOR watch that passes through has its new events counted.
    /// The error is the codec's ([`CodecError`](crate::codec::CodecError)) or the
    /// encoder's.
    pub fn response_body(&mut self, body: &mut Option<Bytes>, end: bool) -> std::io::Result<()> {
        if let (Some((events, counted)), Some(b)) = (self.events.as_mut(), body.as_ref()) {
            // Counting only: bytes the counter cannot walk still reach the client as
            // the upstream sent them; its events simply stop being counted.
            let new = events.feed(b);
            if new > 0 {
                counted.inc_by(new);
            }
        }
        if let Some(codec) = self.response_codec.as_mut() {
            match codec.chunk(body.as_ref(), end) {
                Ok(out) => *body = Some(out),
                Err(e) => {
                    self.unsent = codec.take_unsent();
                    return Err(std::io::Error::other(e));
                }
            }
        }
        if let Some(gzip) = self.gzip.as_mut() {
            let plain = body.as_deref().unwrap_or_default();
            *body = Some(gzip.chunk(plain, end)?);
        }
        Ok(())
    }

    /// Time spent in the codec, both bodies, and compressing the response.
    pub fn codec_time(&self) -> Duration {
        let gzip = self.gzip.as_ref().map_or(Duration::ZERO, Gzip::time);
        [&self.request_codec, &self.response_codec]
            .iter()
            .filter_map(|c| c.as_ref())
            .map(BodyCodec::codec_time)
            .sum::<Duration>()
            + gzip
    }
}
