//! The pingora glue: a [`ProxyHttp`] that carries out the [`Plan`] that
//! `negotiate` made from the request head. It rewrites heads, runs bodies
//! through [`body::BodyCodec`], answers local errors as Kubernetes `Status`
//! objects, and records metrics and one log line per request. It makes no
//! decisions of its own beyond mapping transport failures to Status codes.

pub mod body;
pub mod capabilities;
pub mod upstream;

use crate::admission::{Admission, Slot};
use crate::config::Config;
use crate::metrics::metrics;
use crate::negotiate::{
    plan, BodyAction, Format, LocalReply, Plan, RequestHead, ResponseAction, UpstreamMode,
};
use crate::status::{Status, StatusFormat};
use async_trait::async_trait;
use body::BodyCodec;
use bytes::Bytes;
use capabilities::{Capabilities, Learned};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, ProxyWarnLogContext, Session};
use pingora::{Error, ErrorType};
use std::sync::Arc;
use std::time::{Duration, Instant};
use upstream::Upstream;

/// The proxy.
pub struct Gate {
    config: Arc<Config>,
    upstream: Arc<Upstream>,
    mode: UpstreamMode,
    caps: Arc<Capabilities>,
    admission: Arc<Admission>,
}

/// A Status cborgate answers itself once the request has failed.
pub struct LocalError {
    status: Status,
    format: StatusFormat,
    /// Send `Retry-After: 1` (the failure is expected to pass).
    retry_after: bool,
}

/// The largest CBOR body `auto` mode sends upstream as CBOR first: pingora
/// keeps at most this much of a request body to retry it, and a 415 is
/// replayed as JSON from that copy. Larger bodies go as JSON at once.
const REPLAYABLE_BODY: u64 = 64 * 1024;

/// Per-request state: decided once in `request_filter`, then only read.
pub struct RequestCtx {
    started: Instant,
    plan: Option<Plan>,
    request_codec: Option<BodyCodec>,
    request_json: Vec<u8>,
    response_codec: Option<BodyCodec>,
    /// The response actually sent to the client is CBOR.
    transcoding_response: bool,
    /// An error cborgate answers itself once the request has failed.
    local_error: Option<LocalError>,
    /// The format of the Status cborgate answered with, if it answered itself.
    local_reply: Option<StatusFormat>,
    /// Why cborgate answered with an error Status (for the request log).
    reason: Option<String>,
    upstream_started: Option<Instant>,
    upstream_time: Option<Duration>,
    watch_counted: bool,
    /// `auto`: the CBOR body goes upstream as CBOR; a 415 triggers a replay.
    cbor_first_body: bool,
    /// The replay as JSON after an upstream 415 is under way.
    replay: bool,
    /// Declared request body length.
    declared_len: Option<u64>,
    /// The client got CBOR straight from the upstream (no transcoding).
    cbor_passthrough: bool,
    /// Counted in `cborgate_upgrades_active` with this protocol label.
    upgrade: Option<&'static str>,
    /// This request's admission slot; dropping it (when the request ends, on
    /// any path, panics included) gives it back.
    admitted: Option<Slot>,
    status: u16,
}

impl Gate {
    pub fn new(config: Arc<Config>, upstream: Arc<Upstream>, admission: Arc<Admission>) -> Self {
        let mode = match config.upstream.mode {
            crate::config::Mode::Auto => UpstreamMode::Auto,
            crate::config::Mode::Legacy => UpstreamMode::Legacy,
            crate::config::Mode::Native => UpstreamMode::Native,
            crate::config::Mode::Upgrade => UpstreamMode::Upgrade,
        };
        let caps = Arc::new(Capabilities::new(Duration::from_secs(
            config.upstream.capability_ttl_seconds,
        )));
        Gate {
            config,
            upstream,
            mode,
            caps,
            admission,
        }
    }

    /// What `/debug/capabilities` reads.
    pub fn capabilities(&self) -> Arc<Capabilities> {
        self.caps.clone()
    }

    /// `auto`: what is known about this request's (verb, group, resource).
    fn learned(&self, p: &Plan) -> Option<Learned> {
        let (verb, group, resource) = p.capability_key()?;
        self.caps.get(verb, group, resource)
    }

    fn learn(&self, p: &Plan, learned: Learned) {
        if let Some((verb, group, resource)) = p.capability_key() {
            self.caps.learn(verb, group, resource, learned);
        }
    }

    /// Upgrade mode: a CBOR answer (or `cbor-seq` watch) becomes JSON for a
    /// JSON client. Anything else passes through.
    fn response_to_json(
        &self,
        session: &Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
        watch: bool,
    ) -> Result<()> {
        let media = resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if media != "application/cbor" && media != "application/cbor-seq" {
            return Ok(());
        }
        resp.insert_header("Content-Type", "application/json")?;
        strip_body_headers(resp);
        if !session.is_http2() && session.req_header().version == http::Version::HTTP_11 {
            resp.insert_header("Transfer-Encoding", "chunked")?;
        }
        let watch = watch && media == "application/cbor-seq";
        ctx.response_codec = Some(BodyCodec::response_to_json(
            watch,
            self.config.codec_limits(),
        ));
        ctx.transcoding_response = true;
        if watch {
            metrics().watch_streams_active.inc();
            ctx.watch_counted = true;
        }
        Ok(())
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

    /// Write a complete local response (a Status) to the client.
    async fn write_status(
        &self,
        session: &mut Session,
        status: &Status,
        format: StatusFormat,
        retry_after: bool,
    ) -> Result<()> {
        self.connection_reuse(session);
        let (body, content_type) = status.render(format);
        let mut resp = ResponseHeader::build(status.code, Some(4))?;
        resp.insert_header("Content-Type", content_type)?;
        resp.insert_header("Cache-Control", "no-cache, private")?;
        resp.insert_header("Content-Length", body.len().to_string())?;
        if retry_after {
            resp.insert_header("Retry-After", "1")?;
        }
        session.write_response_header(Box::new(resp), false).await?;
        session
            .write_response_body(Some(Bytes::from(body)), true)
            .await?;
        Ok(())
    }

    /// Answer a request from `request_filter` without the upstream: record
    /// the plan and the status for the request log, then write the Status.
    /// `Ok(true)` tells pingora the response is done.
    async fn reply_locally(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        plan: Plan,
        status: &Status,
        format: StatusFormat,
        retry_after: bool,
    ) -> Result<bool> {
        ctx.status = status.code;
        ctx.plan = Some(plan);
        ctx.local_reply = Some(format);
        if status.code >= 400 {
            ctx.reason = Some(status.message.clone());
        }
        self.write_status(session, status, format, retry_after)
            .await?;
        Ok(true)
    }

    /// The format of a Status cborgate writes: what a CBOR-enabled server
    /// would have written its error in for this request's Accept.
    fn status_format(plan: Option<&Plan>) -> StatusFormat {
        match plan {
            Some(p) if p.error_format == Format::Cbor => StatusFormat::Cbor,
            _ => StatusFormat::Json,
        }
    }
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

fn reply_status(r: &LocalReply) -> (Status, StatusFormat) {
    let format = if r.format == Format::Cbor {
        StatusFormat::Cbor
    } else if r.pretty {
        StatusFormat::JsonPretty
    } else {
        StatusFormat::Json
    };
    let mut status = Status::new(r.code, r.reason, r.message.clone());
    status.empty_details = r.empty_details;
    (status, format)
}

/// The Status for a request body over the configured limit.
fn too_large(limit: u64) -> Status {
    Status::new(
        413,
        "RequestEntityTooLarge",
        format!("the request body is larger than the limit of {limit} bytes"),
    )
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

/// True for media types whose body is JSON text.
fn is_json_content_type(ct: &str) -> bool {
    let mt = ct.split(';').next().unwrap_or("").trim();
    mt.eq_ignore_ascii_case("application/json")
}

#[async_trait]
impl ProxyHttp for Gate {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            plan: None,
            request_codec: None,
            request_json: Vec::new(),
            response_codec: None,
            transcoding_response: false,
            local_error: None,
            local_reply: None,
            reason: None,
            upstream_started: None,
            upstream_time: None,
            watch_counted: false,
            cbor_first_body: false,
            replay: false,
            declared_len: None,
            cbor_passthrough: false,
            admitted: None,
            upgrade: None,
            status: 0,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let upgrade = session.is_upgrade_req();
        let req = session.req_header();
        let accept = header_list(req, "accept");
        let content_type = header_list(req, "content-type");
        let method = req.method.as_str().to_string();
        let path = req.uri.path().to_string();
        let query = req.uri.query().map(str::to_string);
        let declared_len = req
            .headers
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let head = RequestHead {
            method: &method,
            path: &path,
            query: query.as_deref(),
            accept: accept.as_deref(),
            content_type: content_type.as_deref(),
            upgrade,
        };
        let head_bytes = request_head_bytes(req);
        let p = plan(&head, self.mode);
        let limits = &self.config.server;
        if head_bytes > limits.max_header_bytes {
            let status = Status::new(
                431,
                "RequestHeaderFieldsTooLarge",
                format!(
                    "the request head is {head_bytes} bytes, over the limit of {} bytes",
                    limits.max_header_bytes
                ),
            );
            let format = Self::status_format(Some(&p));
            return self
                .reply_locally(session, ctx, p, &status, format, false)
                .await;
        }
        // Admission, as kube-apiserver's max-in-flight filter: short requests and
        // long-running ones are counted apart, and both answer 429 with Retry-After.
        let limit = if p.long_running {
            limits.max_long_running_requests
        } else {
            limits.max_requests_inflight
        };
        match self.admission.admit(p.long_running, limit) {
            Ok(slot) => ctx.admitted = Some(slot),
            Err(_) => {
                let status = Status::new(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                );
                let format = Self::status_format(Some(&p));
                return self
                    .reply_locally(session, ctx, p, &status, format, true)
                    .await;
            }
        }
        if let Some(reply) = &p.reply {
            let (status, format) = reply_status(reply);
            let m = metrics();
            match status.code {
                415 => m
                    .unsupported_media_type_total
                    .with_label_values(&["proxy"])
                    .inc(),
                406 => m.not_acceptable_total.with_label_values(&["proxy"]).inc(),
                _ => {}
            }
            return self
                .reply_locally(session, ctx, p, &status, format, false)
                .await;
        }
        if let BodyAction::CborToJson { .. } = p.body {
            let limit = self.config.codec.max_request_body_bytes as u64;
            if declared_len.is_some_and(|n| n > limit) {
                let status = too_large(limit);
                let format = Self::status_format(Some(&p));
                return self
                    .reply_locally(session, ctx, p, &status, format, false)
                    .await;
            }
            ctx.declared_len = declared_len;
            let cbor_first = self.mode == UpstreamMode::Auto
                && self.learned(&p) != Some(Learned::NeedsJson)
                && declared_len.is_some_and(|n| n <= REPLAYABLE_BODY);
            if cbor_first {
                ctx.cbor_first_body = true;
            } else {
                ctx.request_codec =
                    Some(BodyCodec::request(declared_len, self.config.codec_limits()));
            }
        }
        if let BodyAction::JsonToCbor { .. } = p.body {
            ctx.request_codec = Some(BodyCodec::request_to_cbor(
                self.config.codec.window_bytes,
                self.config.string_mode(),
                self.config.codec_limits(),
            ));
        }
        ctx.plan = Some(p);
        Ok(false)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let long_running = ctx.plan.as_ref().is_some_and(|p| p.long_running);
        ctx.upstream_started = Some(Instant::now());
        match self.upstream.resolver.resolve().await {
            Ok(addr) => Ok(self.upstream.peer(addr, long_running)),
            Err(why) => {
                let status = Status::new(503, "ServiceUnavailable", why.clone());
                ctx.local_error = Some(LocalError {
                    status,
                    format: Self::status_format(ctx.plan.as_ref()),
                    retry_after: true,
                });
                Err(Error::explain(ErrorType::ConnectError, why))
            }
        }
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(p) = ctx.plan.as_ref() else {
            return Ok(());
        };
        if let Some(accept) = &p.upstream_accept {
            // `auto`: ask for CBOR first, JSON as the fallback, so a CBOR-enabled
            // upstream answers CBOR with no extra round trip. (Not for /api/v1:
            // kube-apiserver 1.36 drops that request when CBOR is acceptable.)
            let cbor_first = self.mode == UpstreamMode::Auto
                && p.response != ResponseAction::PassThrough
                && !matches!(&p.route, crate::negotiate::Route::GroupVersionDiscovery { group, .. } if group.is_empty());
            if cbor_first {
                let cbor = accept.replacen("application/json", "application/cbor", 1);
                upstream_request.insert_header("Accept", format!("{cbor}, {accept};q=0.9"))?;
            } else {
                upstream_request.insert_header("Accept", accept.as_str())?;
            }
        }
        if p.response != ResponseAction::PassThrough
            || p.error_response != ResponseAction::PassThrough
        {
            // The body must arrive as identity-coded JSON to be transcoded.
            upstream_request.remove_header("Accept-Encoding");
        }
        if let BodyAction::CborToJson {
            upstream_content_type,
        } = p.body
        {
            if ctx.cbor_first_body && !ctx.replay {
                // CBOR goes up untouched; a 415 makes it a JSON replay.
                self.upstream.rewrite_host(upstream_request)?;
                return Ok(());
            }
            upstream_request.insert_header("Content-Type", upstream_content_type)?;
            upstream_request.remove_header("Content-Length");
            upstream_request.insert_header("Transfer-Encoding", "chunked")?;
        }
        if let BodyAction::JsonToCbor {
            upstream_content_type,
        } = p.body
        {
            upstream_request.insert_header("Content-Type", upstream_content_type)?;
            upstream_request.remove_header("Content-Length");
            upstream_request.insert_header("Transfer-Encoding", "chunked")?;
        }
        self.upstream.rewrite_host(upstream_request)?;
        Ok(())
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(codec) = ctx.request_codec.as_mut() else {
            return Ok(());
        };
        let limit = self.config.codec.max_request_body_bytes as u64;
        let incoming = body.as_ref().map_or(0, |b| b.len() as u64);
        if codec.bytes_in() + incoming > limit {
            ctx.local_error = Some(LocalError {
                status: too_large(limit),
                format: Self::status_format(ctx.plan.as_ref()),
                retry_after: false,
            });
            return Err(Error::new(ErrorType::HTTPStatus(413)));
        }
        match codec.chunk(body.as_ref(), end_of_stream) {
            Ok(json) => {
                // Hold the JSON back until the whole body is known to be
                // good: a bad body never reaches the upstream as a request.
                ctx.request_json.extend_from_slice(&json);
                *body = if end_of_stream {
                    Some(Bytes::from(std::mem::take(&mut ctx.request_json)))
                } else {
                    Some(Bytes::new())
                };
                Ok(())
            }
            Err(e) => {
                let what = match ctx.plan.as_ref().map(|p| p.body) {
                    Some(BodyAction::JsonToCbor { .. }) => "JSON",
                    _ => "CBOR",
                };
                ctx.local_error = Some(LocalError {
                    status: Status::new(
                        400,
                        "BadRequest",
                        format!("the request body is not valid {what}: {e}"),
                    ),
                    format: Self::status_format(ctx.plan.as_ref()),
                    retry_after: false,
                });
                Err(Error::new(ErrorType::HTTPStatus(400)))
            }
        }
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if resp.status.as_u16() == 415 && ctx.cbor_first_body && !ctx.replay {
            // The upstream refused the CBOR body before processing it, so the
            // request had no effect: replaying it as JSON is safe for any verb.
            let m = metrics();
            m.unsupported_media_type_total
                .with_label_values(&["upstream"])
                .inc();
            m.fallbacks_total
                .with_label_values(&["unsupported_media_type"])
                .inc();
            if let Some(p) = ctx.plan.as_ref() {
                self.learn(p, Learned::NeedsJson);
            }
            ctx.replay = true;
            ctx.request_codec = Some(BodyCodec::request(
                ctx.declared_len,
                self.config.codec_limits(),
            ));
            return Err(Error::explain(
                ErrorType::HTTPStatus(415),
                "upstream refused CBOR; replaying as JSON",
            ));
        }
        Ok(())
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        if ctx.replay && matches!(e.etype(), ErrorType::HTTPStatus(415)) {
            // Replay once, and only with the whole body still in hand.
            e.set_retry(!session.as_ref().retry_buffer_truncated());
        } else if !session.req_header().method.is_idempotent()
            || session.as_ref().retry_buffer_truncated()
        {
            e.set_retry(false);
        } else {
            e.retry.decide_reuse(client_reused);
        }
        e
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        ctx.status = resp.status.as_u16();
        self.connection_reuse(session);
        if let Some(t) = ctx.upstream_started {
            ctx.upstream_time.get_or_insert(t.elapsed());
        }
        let m = metrics();
        if ctx.status == 101 {
            let proto = session
                .req_header()
                .headers
                .get("upgrade")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.to_ascii_lowercase());
            let label = match proto.as_deref() {
                Some(p) if p.starts_with("spdy") => "spdy",
                Some("websocket") => "websocket",
                _ => "other",
            };
            m.upgrades_active.with_label_values(&[label]).inc();
            ctx.upgrade = Some(label);
        }
        match ctx.status {
            415 => m
                .unsupported_media_type_total
                .with_label_values(&["upstream"])
                .inc(),
            406 => m
                .not_acceptable_total
                .with_label_values(&["upstream"])
                .inc(),
            _ => {}
        }
        let Some(p) = ctx.plan.as_ref() else {
            return Ok(());
        };
        let action = p.response_for_status(ctx.status);
        if let ResponseAction::CborToJson { watch } = action {
            return self.response_to_json(session, resp, ctx, watch);
        }
        let ResponseAction::JsonToCbor { watch } = action else {
            return Ok(());
        };
        let content_type = resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let media = content_type.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("application/cbor")
            || media.eq_ignore_ascii_case("application/cbor-seq")
        {
            // The upstream speaks CBOR: pass it through, never transcode twice.
            ctx.cbor_passthrough = true;
            self.learn(p, Learned::SpeaksCbor);
            return Ok(());
        }
        let encoded = resp
            .headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !v.eq_ignore_ascii_case("identity"));
        if !is_json_content_type(content_type) || encoded || resp.status.as_u16() == 101 {
            // Not JSON we can read: pass it through as the upstream sent it.
            return Ok(());
        }
        let action = ResponseAction::JsonToCbor { watch };
        resp.insert_header(
            "Content-Type",
            action.content_type().unwrap_or("application/cbor"),
        )?;
        strip_body_headers(resp);
        if !session.is_http2() && session.req_header().version == http::Version::HTTP_11 {
            resp.insert_header("Transfer-Encoding", "chunked")?;
        }
        ctx.response_codec = Some(BodyCodec::response(
            watch,
            self.config.codec.window_bytes,
            self.config.string_mode(),
            self.config.codec_limits(),
        ));
        ctx.transcoding_response = true;
        if watch {
            m.watch_streams_active.inc();
            ctx.watch_counted = true;
        }
        Ok(())
    }

    fn response_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        if ctx.watch_counted && session.is_process_shutting_down() && !end_of_stream {
            // Draining: end watches (clients re-watch) instead of holding the
            // process until the grace period runs out.
            return Err(Error::explain(
                ErrorType::HTTPStatus(503),
                "watch ended: cborgate is shutting down",
            ));
        }
        let Some(codec) = ctx.response_codec.as_mut() else {
            return Ok(None);
        };
        match codec.chunk(body.as_ref(), end_of_stream) {
            Ok(out) => {
                *body = Some(out);
                Ok(None)
            }
            Err(e) => {
                // The head is already on its way: end the response abnormally
                // so the client cannot mistake a truncated body for a whole one.
                tracing::warn!(error = %e, "upstream body could not be transcoded");
                *body = None;
                Err(Error::explain(
                    ErrorType::HTTPStatus(502),
                    format!("upstream body could not be transcoded: {e}"),
                ))
            }
        }
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestCtx, _e: &Error) -> bool {
        // `logging` writes the one line per request, with the error in it, and
        // `fail_to_proxy` one WARN line per upstream failure: pingora's own
        // ERROR line would say the same thing a second time.
        true
    }

    fn suppress_proxy_warn_log(
        &self,
        _session: &Session,
        ctx: &RequestCtx,
        e: &Error,
        _context: ProxyWarnLogContext,
    ) -> bool {
        // The 415 replay is auto mode working as designed (counted in
        // `cborgate_fallbacks_total`), not something to warn about.
        ctx.replay && matches!(e.etype(), ErrorType::HTTPStatus(415))
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        if let (None, Some(t)) = (ctx.upstream_time, ctx.upstream_started) {
            ctx.upstream_time = Some(t.elapsed());
        }
        let local = match ctx.local_error.take() {
            Some(l) => Some(l),
            None => {
                let l = upstream_failure(e, ctx.status, Self::status_format(ctx.plan.as_ref()));
                if l.as_ref().is_some_and(|l| l.status.code >= 500) {
                    // One line per upstream failure, with what pingora knows of it.
                    tracing::warn!(error = %e, "upstream request failed");
                }
                l
            }
        };
        let mut code = 0;
        if let Some(LocalError {
            status,
            format,
            retry_after,
        }) = local
        {
            if session.response_written().is_none() {
                code = status.code;
                ctx.local_reply = Some(format);
                ctx.reason = Some(status.message.clone());
                if let Err(we) = self
                    .write_status(session, &status, format, retry_after)
                    .await
                {
                    tracing::debug!(error = %we, "could not write the error response");
                }
            }
        }
        if code != 0 {
            ctx.status = code;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        let m = metrics();
        // Give the admission slot back (dropping it would too, on any path).
        ctx.admitted.take();
        if ctx.watch_counted {
            m.watch_streams_active.dec();
            ctx.watch_counted = false;
        }
        if let Some(label) = ctx.upgrade.take() {
            m.upgrades_active.with_label_values(&[label]).dec();
        }
        let code = match (ctx.status, session.response_written()) {
            (0, Some(r)) => r.status.as_u16(),
            // Nothing was answered: the client went away first (nginx's 499).
            (0, None) => CLIENT_CLOSED,
            (c, _) => c,
        };
        let (verb, req_fmt, resp_fmt) = match ctx.plan.as_ref() {
            Some(p) => (
                p.verb,
                p.request_format.as_str(),
                match ctx.local_reply {
                    Some(StatusFormat::Cbor) => Format::Cbor.as_str(),
                    Some(_) => Format::Json.as_str(),
                    None if ctx.transcoding_response || ctx.cbor_passthrough => {
                        p.response_format.as_str()
                    }
                    // CBOR was chosen but the upstream answered otherwise.
                    None if p.response_format == Format::Cbor => "other",
                    None => p.response_format.as_str(),
                },
            ),
            None => ("OTHER", "none", "none"),
        };
        m.requests_total
            .with_label_values(&[verb, &code.to_string(), req_fmt, resp_fmt])
            .inc();
        let elapsed = ctx.started.elapsed();
        m.request_duration_seconds
            .with_label_values(&[verb, resp_fmt])
            .observe(elapsed.as_secs_f64());
        let codec = ctx
            .response_codec
            .as_ref()
            .map_or(Duration::ZERO, |c| c.codec_time())
            + ctx
                .request_codec
                .as_ref()
                .map_or(Duration::ZERO, |c| c.codec_time());
        let req = session.req_header();
        let user_agent = req
            .headers
            .get("user-agent")
            .map(|v| String::from_utf8_lossy(v.as_bytes()));
        let client = session.client_addr();
        // pingora's error type, where it says more than the status and reason do.
        let error = e
            .filter(|e| !matches!(e.etype(), ErrorType::HTTPStatus(_)))
            .map(|e| e.etype().as_str());
        tracing::info!(
            method = %req.method,
            path = %req.uri.path(),
            status = code,
            verb,
            request_format = req_fmt,
            response_format = resp_fmt,
            upstream_ms = ms(ctx.upstream_time.unwrap_or_default()),
            codec_ms = ms(codec),
            total_ms = ms(elapsed),
            client = client.map(tracing::field::display),
            user_agent = user_agent.as_deref(),
            error,
            reason = ctx.reason.as_deref(),
            "request"
        );
    }
}

/// The status label of a request cborgate never answered because the client
/// closed its connection first (nginx's "client closed request").
const CLIENT_CLOSED: u16 = 499;

/// Milliseconds, rounded to the microsecond, for log fields: `0.036`, not
/// `0.035667000000000004`.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// The Status for a failure on the way to or from the upstream, when pingora
/// reports one and cborgate has not already decided its own (`local_error`).
/// `status` is the upstream's status code if its head arrived (then nothing
/// can be answered any more).
fn upstream_failure(e: &Error, status: u16, format: StatusFormat) -> Option<LocalError> {
    use ErrorType::*;
    let unavailable = |message: String| LocalError {
        status: Status::new(503, "ServiceUnavailable", message),
        format,
        retry_after: true,
    };
    match e.etype() {
        ConnectTimedout | ConnectRefused | ConnectNoRoute | ConnectError | TLSHandshakeFailure
        | TLSHandshakeTimedout | ConnectProxyFailure | BindError => Some(unavailable(format!(
            "the upstream apiserver is unavailable: {}",
            e.etype().as_str()
        ))),
        HTTPStatus(415) => Some(LocalError {
            status: Status::new(
                415,
                "UnsupportedMediaType",
                "the upstream refused the CBOR body and it was too large to replay as JSON",
            ),
            format,
            retry_after: false,
        }),
        ReadTimedout if status == 0 => Some(LocalError {
            status: Status::new(
                504,
                "Timeout",
                "the upstream apiserver did not send response headers in time",
            ),
            format,
            retry_after: false,
        }),
        _ if e.esource() == &pingora::ErrorSource::Upstream && status == 0 => Some(unavailable(
            "the upstream apiserver closed the connection before answering".into(),
        )),
        _ => None,
    }
}
