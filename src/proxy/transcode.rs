//! Where bodies are transcoded: the request body ([`RequestBody`]: read whole, checked
//! and transcoded before anything goes upstream, when the plan says so) and the response
//! body ([`ResponseBody`]: through the codec chunk by chunk, then gzip, or, for the
//! upstream's own CBOR watch that passes through, only its events counted). They decide
//! nothing: every choice is the plan's ([`Plan::intake`], [`Plan::on_response`]).

use super::body::{BodyCodec, Gzip};
use super::buffers::{OutputBuffers, Transcoders};
use crate::codec::{ItemCounter, Limits, StringMode};
use crate::limits::budget::{BodyBudget, Charge};
use crate::metrics::metrics;
use crate::negotiate::local::keeps_tail;
use crate::negotiate::{
    BodyAction, BodyProgress, Intake, OnResponse, Plan, RequestLimits, ResponseAction,
};
use crate::proxy::request_labels::{ResourceLabels, ResourceSeries};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

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
    /// The cap on distinct (group, resource) label pairs, where each request's labels
    /// come from (`metrics.max_resources`).
    pub labels: Arc<ResourceLabels>,
}

/// The request body of one request, from its first piece to what each upstream attempt
/// sends.
pub struct RequestBody {
    /// The body's declared length (`Content-Length`).
    declared_len: Option<u64>,
    /// What the next step of reading it is ([`Plan::intake`]); [`Intake::Whole`] for a
    /// body that is not read first (it streams upstream as it comes).
    next: Intake,
    /// Made at the first piece (a refused request never needs one).
    codec: Option<BodyCodec>,
    /// The body as it goes upstream, transcoded, growing while it is read.
    out: Vec<u8>,
    /// Raw body bytes read so far.
    read: u64,
    /// The body, read whole (and transcoded, unless CBOR goes first), as the next
    /// attempt sends it.
    held: Option<Bytes>,
    /// What the held body takes of the process-wide body budget.
    charge: Option<Charge>,
    /// `auto`: the JSON replay after an upstream 415 is under way.
    replay: bool,
    /// The request's (group, resource) labels, for the codec families.
    resource: &'static ResourceSeries,
}

/// The most room a request body's output buffer is given before it is read.
const FIRST_ROOM: u64 = 64 * 1024;

impl RequestBody {
    pub fn new(plan: &Plan, declared_len: Option<u64>, resource: &'static ResourceSeries) -> Self {
        RequestBody {
            resource,
            declared_len,
            next: match plan.reads_body_first() {
                true => Intake::Read {
                    keep_tail: keeps_tail(declared_len, 0),
                },
                false => Intake::Whole,
            },
            codec: None,
            out: Vec::new(),
            read: 0,
            held: None,
            charge: None,
            replay: false,
        }
    }

    /// What follows now: read a piece, send the body, or refuse it.
    pub fn next(&self) -> &Intake {
        &self.next
    }

    fn make_codec(&self, plan: &Plan, s: &CodecSettings) -> Option<BodyCodec> {
        match plan.body_for_attempt(self.replay) {
            BodyAction::PassThrough => None,
            BodyAction::CborToJson { schema, .. } => Some(BodyCodec::request(
                self.resource,
                self.declared_len,
                s.limits,
                schema,
            )),
            BodyAction::JsonToCbor { .. } => Some(BodyCodec::request_to_cbor(
                self.resource,
                s.window,
                s.strings,
                s.limits,
            )),
        }
    }

    /// One piece of a body read whole (`None`: its end): transcoded (`auto`'s CBOR-first
    /// body is kept as it came, and transcoded only for a replay), held against the body
    /// budget, and judged ([`Plan::intake`]). A refused body lets go of what it held at
    /// once, not when the lingering close ends.
    pub fn take(
        &mut self,
        plan: &Plan,
        piece: Option<&[u8]>,
        s: &CodecSettings,
        budget: &Arc<BodyBudget>,
    ) {
        if self.codec.is_none() && self.read == 0 {
            self.codec = self.make_codec(plan, s);
            // Room for the body as it goes upstream, so a small one is not grown by
            // doubling from nothing: what its declared length says, half again for the
            // JSON text, at most `FIRST_ROOM` (the length is the client's word).
            let room = self.declared_len.map_or(0, |n| n.saturating_mul(3) / 2);
            self.out.reserve(room.min(FIRST_ROOM) as usize);
        }
        self.read += piece.map_or(0, |b| b.len() as u64);
        let ended = piece.is_none();
        let codec = match self.codec.as_mut() {
            Some(codec) => codec.chunk_into(piece, ended, &mut self.out).err(),
            None => {
                self.out.extend_from_slice(piece.unwrap_or_default());
                None
            }
        };
        let produced = self.out.len() as u64;
        let charge = self.charge.get_or_insert_with(|| budget.charge());
        let progress = BodyProgress {
            declared_len: self.declared_len,
            read: self.read,
            produced,
            codec: codec.as_ref(),
            within_budget: charge.hold(produced).is_ok(),
            ended,
        };
        self.next = plan.intake(&progress, s.request);
        match self.next {
            Intake::Refuse(_) => {
                self.out = Vec::new();
                self.charge = None;
            }
            Intake::Whole => self.held = Some(Bytes::from(std::mem::take(&mut self.out))),
            Intake::Read { .. } => {}
        }
    }

    /// `auto`: the upstream refused the CBOR body; the next attempt sends it as JSON,
    /// transcoded now from the CBOR that went first (at most 64 KiB). `Err`: the answer
    /// instead (400, 413 or 429), as for a body refused while it was read.
    pub fn start_replay(
        &mut self,
        plan: &Plan,
        s: &CodecSettings,
        budget: &Arc<BodyBudget>,
    ) -> Result<(), crate::negotiate::Reply> {
        self.replay = true;
        self.codec = self.make_codec(plan, s);
        let Some(cbor) = self.held.take() else {
            return Ok(());
        };
        self.read = 0;
        for piece in [Some(&cbor[..]), None] {
            self.take(plan, piece, s, budget);
            if let Intake::Refuse(r) = &self.next {
                return Err(r.clone());
            }
        }
        Ok(())
    }

    /// `auto`: this attempt is the JSON replay.
    pub fn replaying(&self) -> bool {
        self.replay
    }

    /// The body this attempt sends, when it was read whole.
    pub fn held(&self) -> Option<&Bytes> {
        self.held.as_ref()
    }

    /// The request body on its way upstream. A body read whole is sent as held, in one
    /// piece: pingora hands over what its retry buffer kept of the body (the last
    /// 64 KiB at most, [`crate::negotiate::local::keeps_tail`]) once, at the body's end,
    /// and that becomes the held body, for every attempt. Any other body passes through.
    pub fn upstream_piece(&self, body: &mut Option<Bytes>, end: bool) {
        if let Some(held) = &self.held {
            *body = Some(if end { held.clone() } else { Bytes::new() });
        }
    }

    fn codec_time(&self) -> Duration {
        self.codec
            .as_ref()
            .map_or(Duration::ZERO, BodyCodec::codec_time)
    }
}

/// The response body of one request: what the upstream's head decided for it, and the
/// stages it goes through. Made when the head is decided, so it always has a decision.
pub struct ResponseBody {
    /// The decision about the upstream's response head.
    decision: OnResponse,
    codec: Option<BodyCodec>,
    /// The gzip stage after the codec, for an answer that is compressed.
    gzip: Option<Gzip>,
    /// Counts the events of a CBOR watch that passes through untouched.
    events: Option<(ItemCounter, prometheus::IntCounter)>,
    /// Output of a failed watch chunk made before the failure: written to the client
    /// before its stream ends abnormally.
    unsent: Option<Bytes>,
}

impl ResponseBody {
    /// The body of a response whose head was decided so.
    pub fn new(decision: OnResponse) -> Self {
        ResponseBody {
            decision,
            codec: None,
            gzip: None,
            events: None,
            unsent: None,
        }
    }

    /// Replace the decision before any stage is ready (`proxy::hold`: the upstream's
    /// JSON instead of CBOR).
    pub fn redecide(&mut self, decision: OnResponse) {
        self.decision = decision;
    }

    pub fn decision(&self) -> &OnResponse {
        &self.decision
    }

    /// Get the body's stages ready, as decided: the codec (then gzip), or only the
    /// event counter of a CBOR watch that passes through.
    pub fn prepare(&mut self, s: &CodecSettings, resource: &'static ResourceSeries) {
        let decision = self.decision;
        if decision.count_events {
            let counted = metrics().watch_events_total.with_label_values(&["cbor"]);
            self.events = Some((ItemCounter::new(s.limits.max_depth), counted));
        }
        if decision.gzip {
            self.gzip = Some(Gzip::with_buffers(&s.buffers));
        }
        let codec = match decision.action {
            ResponseAction::JsonToCbor { watch } => BodyCodec::response(
                resource,
                decision.schema,
                watch,
                s.window,
                s.strings,
                s.limits,
                &s.transcoders,
            ),
            ResponseAction::CborToJson { watch } => {
                BodyCodec::response_to_json(resource, watch, s.limits)
            }
            ResponseAction::PassThrough => return,
        };
        self.codec = Some(codec.with_buffers(&s.buffers));
    }

    /// One piece of the response body, transcoded if the response is, then gzipped if
    /// it is compressed; a CBOR watch that passes through has its new events counted.
    /// The error is the codec's ([`CodecError`](crate::codec::CodecError)) or the
    /// encoder's.
    pub fn piece(&mut self, body: &mut Option<Bytes>, end: bool) -> std::io::Result<()> {
        if let (Some((events, counted)), Some(b)) = (self.events.as_mut(), body.as_ref()) {
            // Counting only: bytes the counter cannot walk still reach the client as
            // the upstream sent them; its events simply stop being counted.
            let new = events.feed(b);
            if new > 0 {
                counted.inc_by(new);
            }
        }
        if let Some(codec) = self.codec.as_mut() {
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

    /// The whole events a failed watch chunk transcoded before the failure.
    pub fn take_unsent(&mut self) -> Option<Bytes> {
        self.unsent.take()
    }

    fn codec_time(&self) -> Duration {
        self.codec
            .as_ref()
            .map_or(Duration::ZERO, BodyCodec::codec_time)
            + self.gzip.as_ref().map_or(Duration::ZERO, Gzip::time)
    }
}

/// Time spent in the codec, both bodies (`None`: no response head was decided), and
/// compressing the response.
pub fn codec_time(request: &RequestBody, response: Option<&ResponseBody>) -> Duration {
    request.codec_time() + response.map_or(Duration::ZERO, ResponseBody::codec_time)
}
