//! The `Status` answers cborgate gives itself outside the `Accept` table
//! (docs/wire.md §4): limits (431, 413), admission (429), a bad request body
//! (400), and failures on the way to the upstream (503 with `Retry-After`, 504,
//! and a 415 that cannot be replayed). Each is written in the format a
//! CBOR-enabled server would write its errors in for this request.

use super::auto::REPLAYABLE_BODY;
use super::media::Format;
use super::plan::{BodyAction, LocalReply, Plan, UpstreamMode};
use crate::codec::{CodecError, Reason};

/// What went wrong on the way to or from the upstream, before its answer began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The upstream's name does not resolve (the message names the host).
    Unresolved(String),
    /// Connecting, or the TLS handshake, failed; why, in words that complete "the
    /// upstream apiserver …" (`refused the connection`), never pingora's error name.
    Unavailable(&'static str),
    /// The upstream closed the connection before it sent a response head.
    ClosedBeforeAnswer,
    /// No response head within `upstream.response_header_timeout_seconds`.
    HeaderTimeout,
    /// `auto`: the upstream refused the CBOR body (415) and it was too large to
    /// keep for a replay.
    RefusedNotReplayable,
}

/// The size limits a request is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// `server.max_header_bytes`: the request line and headers, as HTTP/1.1 text.
    pub max_header_bytes: usize,
    /// `codec.max_request_body_bytes`: a body cborgate transcodes, as it arrives.
    pub max_request_body: u64,
    /// `upstream.max_request_body_bytes`: the body cborgate sends upstream after
    /// transcoding it.
    pub max_upstream_body: u64,
}

/// Whether the rest of a body cborgate reads whole before it goes upstream is kept in
/// pingora's retry buffer from now on, given its declared length and the bytes read so
/// far. pingora sends a body that was consumed before the upstream request only from
/// that buffer, which holds at most [`REPLAYABLE_BODY`] bytes: so the buffer is turned
/// on for the last 64 KiB of a body of known length (what it holds is then replaced
/// by the transcoded body), and from the start for a body of unknown length, which
/// therefore may be no longer ([`Plan::unframed_body_refusal`]).
pub fn keeps_tail(declared_len: Option<u64>, read: u64) -> bool {
    match declared_len {
        Some(n) => n.saturating_sub(read) <= REPLAYABLE_BODY,
        None => read == 0,
    }
}

/// An answer cborgate gives itself, and whether it says when to try again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The `Status` it answers with.
    pub status: LocalReply,
    /// `Retry-After: 1` goes with it (429, 503), as kube-apiserver's own.
    pub retry_after: bool,
}

impl Reply {
    /// A reply that says nothing of trying again.
    pub fn now(status: LocalReply) -> Reply {
        Reply {
            status,
            retry_after: false,
        }
    }

    /// A reply with `Retry-After: 1`.
    pub fn later(status: LocalReply) -> Reply {
        Reply {
            status,
            retry_after: true,
        }
    }
}

impl Plan {
    /// A Status in this request's error format (not pretty, no `details`).
    pub fn error_reply(&self, code: u16, reason: &'static str, message: String) -> LocalReply {
        LocalReply {
            code,
            reason,
            message,
            format: if self.error_format == Format::Cbor {
                Format::Cbor
            } else {
                Format::Json
            },
            pretty: false,
            empty_details: false,
        }
    }

    /// 431 for a request head over the limit; checked before anything else.
    pub fn head_refusal(&self, head_bytes: usize, limits: RequestLimits) -> Option<LocalReply> {
        (head_bytes > limits.max_header_bytes).then(|| {
            self.error_reply(
                431,
                "RequestHeaderFieldsTooLarge",
                format!(
                    "the request head is {head_bytes} bytes, over the limit of {} bytes",
                    limits.max_header_bytes
                ),
            )
        })
    }

    /// 429 with `Retry-After`, as kube-apiserver's max-in-flight filter answers.
    pub fn too_many_requests(&self) -> Reply {
        let message = "Too many requests, please try again later.".to_string();
        Reply::later(self.error_reply(429, "TooManyRequests", message))
    }

    /// 413 for a body cborgate would transcode whose size is over the limit: from its
    /// declared length before it is read, or from what arrived while it is read. The
    /// message is kube-apiserver's own (tests/data/corpus/native-1.36/post-too-big).
    pub fn body_refusal(
        &self,
        body_bytes: Option<u64>,
        limits: RequestLimits,
    ) -> Option<LocalReply> {
        let transcoded = self.body != BodyAction::PassThrough;
        let limit = limits.max_request_body;
        (transcoded && body_bytes.is_some_and(|n| n > limit)).then(|| {
            self.error_reply(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {limit}"),
            )
        })
    }

    /// Whether the request body is read whole, checked and transcoded before anything
    /// goes upstream: every body cborgate transcodes (or, `auto`, sends as CBOR first and
    /// keeps as JSON for the replay). Nothing of a refused body ever reaches the upstream.
    pub fn reads_body_first(&self) -> bool {
        self.body != BodyAction::PassThrough
    }

    /// 413 once the transcoded body (`produced` bytes so far) is over what the upstream
    /// takes: it could never succeed there. kube-apiserver's own message, with the
    /// upstream limit.
    pub fn transcoded_body_refusal(
        &self,
        produced: u64,
        limits: RequestLimits,
    ) -> Option<LocalReply> {
        let limit = limits.max_upstream_body;
        (self.reads_body_first() && produced > limit).then(|| {
            self.error_reply(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {limit}"),
            )
        })
    }

    /// 411 for a body cborgate reads whole that declares no length (chunked, or HTTP/2
    /// without `content-length`) once more than [`REPLAYABLE_BODY`] bytes of it arrived:
    /// pingora can send such a body on only from its 64 KiB retry buffer
    /// ([`keeps_tail`]). Clients that send CBOR (client-go) always declare the length.
    pub fn unframed_body_refusal(
        &self,
        declared_len: Option<u64>,
        read: u64,
    ) -> Option<LocalReply> {
        (self.reads_body_first() && declared_len.is_none() && read > REPLAYABLE_BODY).then(|| {
            self.error_reply(
                411,
                "BadRequest",
                format!(
                    "a request body of more than {REPLAYABLE_BODY} bytes that cborgate \
                     transcodes must declare its Content-Length"
                ),
            )
        })
    }

    /// 429 with `Retry-After` while the process-wide budget for request body bytes held
    /// in memory (`server.max_buffered_body_bytes`) is spent.
    pub fn body_budget_refusal(&self) -> Reply {
        let message = "Too many request bodies in flight, please try again later.".to_string();
        Reply::later(self.error_reply(429, "TooManyRequests", message))
    }

    /// 400 for a request body the codec refused; `what` is the format it should have
    /// been in, `why` the codec's reason and byte offset.
    pub fn bad_body(&self, why: &dyn std::fmt::Display) -> LocalReply {
        let what = match self.body {
            BodyAction::JsonToCbor { .. } => "JSON",
            _ => "CBOR",
        };
        self.error_reply(
            400,
            "BadRequest",
            format!("the request body is not valid {what}: {why}"),
        )
    }

    /// 400 for a request body the codec refused. Base64 text in a `[]byte` field that Go
    /// cannot decode gets the words of a CBOR-enabled kube-apiserver 1.36.2 (observed:
    /// `ConfigMap in version "v1" cannot be handled as a ConfigMap: cbor: failed to decode
    /// base64 from byte string: illegal base64 data at input byte 4`); the rest, cborgate's.
    pub fn body_refused(&self, e: &CodecError) -> LocalReply {
        match (e.reason, self.body) {
            (Reason::InvalidBase64, BodyAction::CborToJson { kind: Some(k), .. }) => self
                .error_reply(
                    400,
                    "BadRequest",
                    format!(
                        "{kind} in version \"{version}\" cannot be handled as a {kind}: cbor: \
                         failed to decode base64 from byte string: illegal base64 data at \
                         input byte {at}",
                        kind = k.kind,
                        version = k.version,
                        at = e.detail
                    ),
                ),
            _ => self.bad_body(e),
        }
    }

    /// The answer to a failure on the way to the upstream; `None`: the connection just
    /// ends. In native mode an upstream that closed before answering reaches the client as
    /// the upstream gave it (client-go then fails fast, as directly; a 503 with
    /// `Retry-After` would make it retry for seconds).
    pub fn failure_reply(&self, failure: &Failure) -> Option<Reply> {
        if self.mode == UpstreamMode::Native && *failure == Failure::ClosedBeforeAnswer {
            return None;
        }
        Some(self.failure_answer(failure))
    }

    /// The log reason of a response the upstream ended before its end (a reset, a closed
    /// connection, a read error) once the response head had gone out: the client's
    /// response ends abnormally (docs/wire.md §4), and the request keeps the status it
    /// began with, the one the client got.
    pub const CUT_SHORT: &'static str = "the upstream apiserver ended its response before the \
         end; the client's response was ended abnormally";

    /// The status and message a failure the client gets no answer to
    /// ([`Plan::failure_reply`] is `None`: native mode's upstream that closed or reset
    /// before answering) is counted and logged with: the code the other modes answer the
    /// same failure with (docs/wire.md §4: 503), so `cborgate_requests_total` counts an
    /// upstream failure as one in every mode, never as the client's own 499; the message
    /// says the client's connection was ended instead.
    pub fn unanswered_failure(&self, failure: &Failure) -> (u16, String) {
        let reply = self.failure_answer(failure).status;
        (
            reply.code,
            format!(
                "{}; the client's connection was ended without an answer, as the upstream ended it",
                reply.message
            ),
        )
    }

    fn failure_answer(&self, failure: &Failure) -> Reply {
        let unavailable =
            |message: String| Reply::later(self.error_reply(503, "ServiceUnavailable", message));
        match failure {
            Failure::Unresolved(why) => unavailable(why.clone()),
            Failure::Unavailable(kind) => {
                unavailable(format!("the upstream apiserver is unavailable: it {kind}"))
            }
            Failure::ClosedBeforeAnswer => unavailable(
                "the upstream apiserver closed the connection or reset the stream before \
                     answering"
                    .into(),
            ),
            Failure::HeaderTimeout => Reply::now(self.error_reply(
                504,
                "Timeout",
                "the upstream apiserver did not send response headers in time".into(),
            )),
            Failure::RefusedNotReplayable => Reply::now(self.error_reply(
                415,
                "UnsupportedMediaType",
                "the upstream refused the CBOR body and it was too large to replay as JSON".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::plan::{plan, RequestHead, UpstreamMode};

    const CMS: &str = "/api/v1/namespaces/ns/configmaps";
    const LIMITS: RequestLimits = RequestLimits {
        max_header_bytes: 1000,
        max_request_body: 3 << 20,
        max_upstream_body: 2 << 20,
    };

    fn plan_for(accept: &str, content_type: Option<&str>) -> Plan {
        plan(
            &RequestHead {
                method: "POST",
                path: CMS,
                accept: Some(accept),
                content_type,
                ..Default::default()
            },
            UpstreamMode::Legacy,
        )
    }

    /// Each local answer: (code, reason, Retry-After), in the client's error format.
    #[test]
    fn local_answers_table() {
        let cbor = plan_for("application/cbor", Some("application/cbor"));
        let json = plan_for("application/json", Some("application/cbor"));
        let yaml = plan_for("application/yaml", Some("application/json"));
        for (p, format) in [
            (&cbor, Format::Cbor),
            (&json, Format::Json),
            (&yaml, Format::Json),
        ] {
            let replies: Vec<Reply> = vec![
                Reply::now(p.head_refusal(1001, LIMITS).unwrap()),
                p.too_many_requests(),
                Reply::now(p.bad_body(&"truncated at byte offset 3")),
                p.failure_answer(&Failure::Unresolved(
                    "cannot resolve the upstream host x".into(),
                )),
                p.failure_answer(&Failure::Unavailable("refused the connection")),
                p.failure_answer(&Failure::ClosedBeforeAnswer),
                p.failure_answer(&Failure::HeaderTimeout),
                p.failure_answer(&Failure::RefusedNotReplayable),
            ];
            let got: Vec<(u16, &str, bool)> = replies
                .iter()
                .map(|r| (r.status.code, r.status.reason, r.retry_after))
                .collect();
            assert_eq!(
                got,
                [
                    (431, "RequestHeaderFieldsTooLarge", false),
                    (429, "TooManyRequests", true),
                    (400, "BadRequest", false),
                    (503, "ServiceUnavailable", true),
                    (503, "ServiceUnavailable", true),
                    (503, "ServiceUnavailable", true),
                    (504, "Timeout", false),
                    (415, "UnsupportedMediaType", false),
                ]
            );
            for r in replies.iter().map(|r| &r.status) {
                assert_eq!(
                    (r.format, r.pretty, r.empty_details),
                    (format, false, false)
                );
            }
        }
        assert!(cbor.bad_body(&"x").message.contains("not valid CBOR: x"));
        assert!(
            cbor.failure_answer(&Failure::Unresolved("cannot resolve x".into()))
                .status
                .message
                == "cannot resolve x"
        );
    }

    #[test]
    fn native_mode_lets_an_upstream_reset_end_the_connection() {
        let get = RequestHead {
            method: "GET",
            path: CMS,
            ..Default::default()
        };
        let native = plan(&get, UpstreamMode::Native);
        assert_eq!(native.failure_reply(&Failure::ClosedBeforeAnswer), None);
        // cborgate's own failures (DNS, connect, its timeout) are still answered.
        for f in [
            Failure::Unresolved("x".into()),
            Failure::Unavailable("refused the connection"),
            Failure::HeaderTimeout,
        ] {
            assert!(native.failure_reply(&f).is_some(), "{f:?}");
        }
        let legacy = plan(&get, UpstreamMode::Legacy);
        assert!(legacy.failure_reply(&Failure::ClosedBeforeAnswer).is_some());
        // Unanswered, it is still counted and logged as the upstream failure it is, with
        // the code legacy mode answers it with: never 499, the client's own leaving.
        let (code, message) = native.unanswered_failure(&Failure::ClosedBeforeAnswer);
        let answered = legacy
            .failure_reply(&Failure::ClosedBeforeAnswer)
            .unwrap()
            .status;
        assert_eq!(code, answered.code);
        assert_eq!(code, 503);
        assert!(
            message.contains("reset the stream before answering")
                && message.contains("ended without an answer"),
            "{message}"
        );
    }

    #[test]
    fn limits() {
        let p = plan_for("application/cbor", Some("application/cbor"));
        assert_eq!(p.head_refusal(1000, LIMITS), None);
        assert_eq!(p.body_refusal(Some(3 << 20), LIMITS), None);
        assert_eq!(p.body_refusal(None, LIMITS), None);
        let r = p.body_refusal(Some((3 << 20) + 1), LIMITS).unwrap();
        assert_eq!((r.code, r.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(r.message, "Request entity too large: limit is 3145728");
        // Only a body cborgate transcodes is held to the limit.
        let json_body = plan_for("application/json", Some("application/json"));
        assert_eq!(json_body.body_refusal(Some(u64::MAX), LIMITS), None);
    }

    /// A body read whole: (what is known, the answer) for the transcoded body's limit,
    /// a body of unknown length, and the body budget.
    #[test]
    fn bodies_read_whole_table() {
        let p = plan_for("application/cbor", Some("application/cbor"));
        let json_body = plan_for("application/json", Some("application/json"));
        assert!(p.reads_body_first());
        assert!(!json_body.reads_body_first());
        assert_eq!(p.transcoded_body_refusal(2 << 20, LIMITS), None);
        let r = p.transcoded_body_refusal((2 << 20) + 1, LIMITS).unwrap();
        assert_eq!((r.code, r.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(r.message, "Request entity too large: limit is 2097152");
        assert_eq!(json_body.transcoded_body_refusal(u64::MAX, LIMITS), None);
        #[rustfmt::skip]
        let unframed: [(Option<u64>, u64, Option<u16>); 5] = [
            (None, REPLAYABLE_BODY, None),
            (None, REPLAYABLE_BODY + 1, Some(411)),
            (Some(1 << 20), REPLAYABLE_BODY + 1, None),
            (Some(3 << 20), 3 << 20, None),
            (None, 0, None),
        ];
        for (declared, read, want) in unframed {
            let got = p.unframed_body_refusal(declared, read).map(|r| r.code);
            assert_eq!(got, want, "{declared:?} {read}");
        }
        assert_eq!(json_body.unframed_body_refusal(None, u64::MAX), None);
        let Reply {
            status: r,
            retry_after: retry,
        } = p.body_budget_refusal();
        assert_eq!((r.code, r.reason, retry), (429, "TooManyRequests", true));
        assert_eq!(r.format, Format::Cbor);
    }

    /// When pingora's retry buffer is on: the last 64 KiB of a body of known length,
    /// all of a body of unknown length.
    #[test]
    fn keeps_tail_table() {
        const K: u64 = REPLAYABLE_BODY;
        #[rustfmt::skip]
        let cases: [(Option<u64>, u64, bool); 8] = [
            (Some(100), 0, true),
            (Some(K), 0, true),
            (Some(K + 1), 0, false),
            (Some(K + 1), 1, true),
            (Some(3 << 20), (3 << 20) - K - 1, false),
            (Some(3 << 20), (3 << 20) - K, true),
            (None, 0, true),
            (None, 1, false),
        ];
        for (declared, read, want) in cases {
            assert_eq!(keeps_tail(declared, read), want, "{declared:?} {read}");
        }
    }
}
