//! Where requests and responses are transcoded: [`Exchange`], the synchronous
//! context of one request, carries its [`Plan`] out on heads and bodies. It
//! rewrites the upstream request head, runs the request body through the codec
//! (held back until it is known to be good), relabels the response head as
//! [`Plan::on_response`] decided, and runs the response body through the codec
//! chunk by chunk (or, for the upstream's own CBOR watch that passes through,
//! only counts its events). It decides nothing: every choice is the plan's.

use super::body::{BodyCodec, Gzip};
use crate::admission::Slot;
use crate::codec::{ItemCounter, Limits, StringMode};
use crate::metrics::metrics;
use crate::negotiate::identity::Identity;
use crate::negotiate::{
    BodyAction, LocalReply, OnResponse, Plan, RequestLimits, ResponseAction, ResponseHead,
};
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::Result;
use std::time::{Duration, Instant};

/// How bodies are transcoded (from the configuration, fixed at start-up).
#[derive(Clone, Copy, Debug)]
pub struct CodecSettings {
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
    request_json: Vec<u8>,
    response_codec: Option<BodyCodec>,
    /// The gzip stage after the response codec, for an answer that is compressed.
    gzip: Option<Gzip>,
    /// Counts the events of a CBOR watch that passes through untouched.
    events: Option<ItemCounter>,
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
    /// Counted in `cborgate_upgrades_active` with this protocol label.
    pub upgrade: Option<&'static str>,
    /// The status the client got (0: none yet).
    pub status: u16,
    /// Who the request is, and its identity headers upstream (decided first thing).
    pub identity: Option<Identity>,
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

fn header<'a>(resp: &'a ResponseHeader, name: &str) -> Option<&'a str> {
    resp.headers.get(name).and_then(|v| v.to_str().ok())
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            started: Instant::now(),
            plan: None,
            admitted: None,
            declared_len: None,
            request_codec: None,
            request_json: Vec::new(),
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
            upgrade: None,
            status: 0,
            identity: None,
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
            BodyAction::CborToJson { .. } => Some(BodyCodec::request(declared_len, s.limits)),
            BodyAction::JsonToCbor { .. } => {
                Some(BodyCodec::request_to_cbor(s.window, s.strings, s.limits))
            }
        }
    }

    /// `auto`: the upstream refused the CBOR body; the next attempt sends it as JSON.
    pub fn start_replay(&mut self, s: &CodecSettings) {
        self.replay = true;
        if let Some(p) = &self.plan {
            self.request_codec = Self::request_codec(p, true, self.declared_len, s);
        }
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
            }
            | BodyAction::JsonToCbor {
                upstream_content_type,
            } => {
                req.insert_header("Content-Type", upstream_content_type)?;
                req.remove_header("Content-Length");
                req.insert_header("Transfer-Encoding", "chunked")?;
            }
        }
        Ok(())
    }

    /// One piece of the request body: transcoded, and held back until the whole
    /// body has decoded, so a bad body never reaches the upstream as a request.
    /// `Err` is the Status to answer (413 or 400).
    pub fn request_body(
        &mut self,
        body: &mut Option<Bytes>,
        end: bool,
        limits: RequestLimits,
    ) -> std::result::Result<(), LocalReply> {
        let (Some(codec), Some(p)) = (self.request_codec.as_mut(), self.plan.as_ref()) else {
            return Ok(());
        };
        let incoming = body.as_ref().map_or(0, |b| b.len() as u64);
        if let Some(r) = p.body_refusal(Some(codec.bytes_in() + incoming), limits) {
            return Err(r);
        }
        match codec.chunk(body.as_ref(), end) {
            Ok(json) => {
                self.request_json.extend_from_slice(&json);
                *body = Some(if end {
                    Bytes::from(std::mem::take(&mut self.request_json))
                } else {
                    Bytes::new()
                });
                Ok(())
            }
            Err(e) => Err(p.bad_body(&e)),
        }
    }

    /// Decide what to do with the upstream's response head, and remember it.
    pub fn decide_response(&mut self, resp: &ResponseHeader) -> Option<OnResponse> {
        let p = self.plan.as_ref()?;
        let head = ResponseHead {
            status: resp.status.as_u16(),
            content_type: header(resp, "content-type"),
            content_encoding: header(resp, "content-encoding"),
            content_length: header(resp, "content-length").and_then(|v| v.trim().parse().ok()),
        };
        let decision = p.on_response(head, self.replay);
        self.response = Some(decision);
        self.format = Some(decision.format);
        Some(decision)
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
            self.events = Some(ItemCounter::new(s.limits.max_depth));
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
            self.gzip = Some(Gzip::default());
        }
        let (codec, watch) = match decision.action {
            ResponseAction::JsonToCbor { watch } => (
                BodyCodec::response(watch, s.window, s.strings, s.limits),
                watch,
            ),
            ResponseAction::CborToJson { watch } => {
                (BodyCodec::response_to_json(watch, s.limits), watch)
            }
            ResponseAction::PassThrough => return Ok(()),
        };
        self.response_codec = Some(codec);
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
        if let (Some(events), Some(b)) = (self.events.as_mut(), body.as_ref()) {
            // Counting only: bytes the counter cannot walk still reach the client as
            // the upstream sent them; its events simply stop being counted.
            let new = events.feed(b);
            if new > 0 {
                metrics()
                    .watch_events_total
                    .with_label_values(&["cbor"])
                    .inc_by(new);
            }
        }
        if let Some(codec) = self.response_codec.as_mut() {
            *body = Some(
                codec
                    .chunk(body.as_ref(), end)
                    .map_err(std::io::Error::other)?,
            );
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
