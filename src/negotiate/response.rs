//! What to do with the upstream's response head: transcode the body or pass it
//! through (from the plan, the status, the `Content-Type` and the
//! `Content-Encoding` the upstream actually sent), replay a refused CBOR body
//! as JSON (`auto`), what that teaches about the upstream, the format label
//! the request is logged and counted with, and whether a CBOR watch that passes
//! through has its events counted. Pure: the proxy only carries it out.

use super::auto::Learned;
use super::encoding;
use super::media::Format;
use super::plan::{Plan, ResponseAction};
use super::route::{Route, Verb};
use crate::codec::fields::Schema;

/// What the upstream's response head says, as far as decisions go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead<'a> {
    pub status: u16,
    /// The `Content-Type` value, if any.
    pub content_type: Option<&'a str>,
    /// The `Content-Encoding` value, if any.
    pub content_encoding: Option<&'a str>,
    /// The `Content-Length`, if any (`None`: chunked, or read to the end).
    pub content_length: Option<u64>,
}

/// The decision about one response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnResponse {
    /// `auto`: the upstream refused the CBOR body with 415 before acting on it;
    /// send the request again with the body as JSON, and show the client nothing
    /// of this answer.
    pub replay: bool,
    /// What to do with the body: transcode (with [`ResponseAction::content_type`]
    /// as the new `Content-Type`) or pass through.
    pub action: ResponseAction,
    /// What this answer teaches `auto` mode about the request's key.
    pub learned: Option<Learned>,
    /// The `response_format` label of the log line and the metrics.
    pub format: &'static str,
    /// Gzip the transcoded body (`Content-Encoding: gzip`, `Vary: Accept-Encoding`): a
    /// CBOR answer, not a watch, for a client that takes gzip, from an upstream body of
    /// more than 128 KiB or of unknown length ([`encoding::compresses`]).
    pub gzip: bool,
    /// The upstream's own CBOR watch stream (`application/cbor-seq`, identity-coded, a
    /// 2xx) passes through untouched: count its events (`cborgate_watch_events_total`)
    /// and the open stream (`cborgate_watch_streams_active`) as a transcoded watch's.
    pub count_events: bool,
    /// The answer is a watch's stream ([`Plan::is_watch`], a 2xx): it counts in
    /// `cborgate_watch_streams_active` while it is open, and the SIGTERM drain ends it
    /// cleanly ([`drain_ends_cleanly`]).
    pub watch_stream: bool,
    /// Which fields of the body to transcode are `[]byte` ([`Plan::response_schema`] for a
    /// 2xx made CBOR; an error's `Status` has none).
    pub schema: Schema,
}

/// The media type of a `Content-Type` value: parameters cut, trimmed.
pub(super) fn media_type(content_type: Option<&str>) -> &str {
    content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
}

pub(super) fn is_cbor(media: &str) -> bool {
    media.eq_ignore_ascii_case("application/cbor")
        || media.eq_ignore_ascii_case("application/cbor-seq")
}

impl Plan {
    /// Decide what to do with the upstream's response head. `replayed`: this is
    /// the answer to the JSON replay already.
    pub fn on_response(&self, head: ResponseHead<'_>, replayed: bool) -> OnResponse {
        if head.status == 415 && self.cbor_first && !replayed {
            // The apiserver checks the body's media type before it decodes or acts
            // on anything, so a 415 means the request had no effect, whatever its
            // verb: replaying it as JSON is safe.
            return OnResponse {
                replay: true,
                action: ResponseAction::PassThrough,
                learned: Some(Learned::NeedsJson),
                format: self.response_format.as_str(),
                gzip: false,
                count_events: false,
                watch_stream: false,
                schema: Schema::Unstructured,
            };
        }
        let media = media_type(head.content_type);
        let planned = if self.written_by_filters(head.status) {
            ResponseAction::PassThrough
        } else {
            self.response_for_status(head.status)
        };
        let (action, learned) = match planned {
            ResponseAction::PassThrough => (ResponseAction::PassThrough, None),
            // Upgrade mode: only a body labelled CBOR is made JSON; a watch is a
            // sequence only when the upstream says so.
            ResponseAction::CborToJson { watch } if is_cbor(media) => (
                ResponseAction::CborToJson {
                    watch: watch && media.eq_ignore_ascii_case("application/cbor-seq"),
                },
                None,
            ),
            ResponseAction::CborToJson { .. } => (ResponseAction::PassThrough, None),
            // The upstream speaks CBOR: pass it through, never transcode twice.
            ResponseAction::JsonToCbor { .. } if is_cbor(media) => {
                (ResponseAction::PassThrough, Some(Learned::SpeaksCbor))
            }
            // Only identity-coded JSON can be read; anything else (and a 101)
            // passes through as the upstream sent it. So does an answer that declares
            // no body (`Content-Length: 0`, 204, 304): there is no JSON document to make
            // CBOR of, and an empty `application/cbor` body would look like a complete
            // answer no server gives. The client sees what the upstream sent.
            ResponseAction::JsonToCbor { watch }
                if media.eq_ignore_ascii_case("application/json")
                    && head
                        .content_encoding
                        .is_none_or(|e| e.trim().eq_ignore_ascii_case("identity"))
                    && !matches!(head.status, 101 | 204 | 304)
                    && head.content_length != Some(0) =>
            {
                (ResponseAction::JsonToCbor { watch }, None)
            }
            ResponseAction::JsonToCbor { .. } => (ResponseAction::PassThrough, None),
        };
        let cbor_as_chosen = is_cbor(media) && self.response_format == Format::Cbor;
        let has_body = !matches!(head.status, 101 | 204 | 304) && head.content_length != Some(0);
        let format = if action != ResponseAction::PassThrough || cbor_as_chosen {
            self.response_format.as_str()
        } else if media.eq_ignore_ascii_case("application/json") && (head.status >= 400 || has_body)
        {
            // JSON the client gets as the upstream wrote it, whatever its `Accept` asked
            // for: an error Status, or in `native` mode a JSON-only apiserver's answer
            // to a client that listed CBOR (docs/wire.md §6).
            Format::Json.as_str()
        } else {
            self.unanswered_format()
        };
        // Only what cborgate makes CBOR is compressed here; a watch never is, as the
        // apiserver never compresses one.
        let gzip = action == ResponseAction::JsonToCbor { watch: false }
            && encoding::compresses(self.client_gzip, head.content_length);
        let count_events = action == ResponseAction::PassThrough
            && self.is_watch()
            && (200..300).contains(&head.status)
            && media.eq_ignore_ascii_case("application/cbor-seq")
            && head
                .content_encoding
                .is_none_or(|e| e.trim().eq_ignore_ascii_case("identity"));
        let transcoded = matches!(action, ResponseAction::JsonToCbor { .. });
        let schema = if transcoded && (200..300).contains(&head.status) {
            self.response_schema
        } else {
            Schema::Unstructured
        };
        OnResponse {
            replay: false,
            action,
            learned,
            format,
            gzip,
            count_events,
            watch_stream: self.is_watch() && (200..300).contains(&head.status),
            schema,
        }
    }

    /// The request is a watch: a resource route (not a connect subresource) that is
    /// long-running, whichever mode planned it.
    pub fn is_watch(&self) -> bool {
        self.long_running && matches!(&self.route, Route::Resource(r) if !r.is_connect())
    }

    /// Errors a CBOR-enabled server writes in JSON from its filters and router, whatever
    /// the client's `Accept` (cases `unauth`, `impersonate`, `options`, `head-cm`,
    /// `watch-missing-resource`): a legacy upstream writes them the same way, so they pass
    /// through. 401 comes only from authentication; 403 from authorization and
    /// impersonation (an admission webhook's 403, rarer, would be CBOR there); 405 from the
    /// router; a 404 on a watch or a list only from the router (an unknown resource: a list
    /// in a namespace that does not exist is empty, not a 404), while a GET's 404 for one
    /// object is usually the handler's (an object not found) and stays transcoded.
    fn written_by_filters(&self, status: u16) -> bool {
        match status {
            401 | 403 | 405 => true,
            404 => {
                self.response == ResponseAction::JsonToCbor { watch: true }
                    || self.verb == Verb::List
            }
            _ => false,
        }
    }

    /// The `response_format` label when the client gets the upstream's body as
    /// it came, or nothing at all: `other` where CBOR was chosen but not what
    /// arrived.
    pub fn unanswered_format(&self) -> &'static str {
        if self.response_format == Format::Cbor {
            "other"
        } else {
            self.response_format.as_str()
        }
    }
}

/// The headers that described the upstream's body before it was transcoded: its length,
/// its validators and its coding no longer hold for what the client gets.
pub const STRIPPED_HEADERS: [&str; 6] = [
    "Content-Length",
    "ETag",
    "Content-MD5",
    "Digest",
    "Accept-Ranges",
    "Content-Encoding",
];

/// How the client's connection frames a response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFraming {
    /// HTTP/2: frames, no `Transfer-Encoding`.
    Http2,
    /// HTTP/1.1: a body of unknown length is chunked.
    Http11,
    /// HTTP/1.0: a body of unknown length ends with the connection.
    Http10,
}

/// The response head's edits for a transcoded body, which also loses
/// [`STRIPPED_HEADERS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relabel {
    /// The new `Content-Type`.
    pub content_type: &'static str,
    /// `Transfer-Encoding: chunked`: the transcoded length is not known in advance.
    pub chunked: bool,
    /// `Content-Encoding: gzip` and `Vary: Accept-Encoding` added, as kube-apiserver's
    /// deferredResponseWriter sets them (Vary added to, not replaced).
    pub gzip: bool,
    /// The client's HTTP/1.1 connection holds the response's flushes back until the
    /// terminating chunk is written: pingora (pingora-core 0.9.1,
    /// `protocols/http/v1/server.rs` `prepare_response_header`, `body.rs`
    /// `do_write_chunked_body`) flushes a head without `Content-Length`, then each
    /// chunk, then the terminating chunk: three sends, three segments and three
    /// wake-ups of the client for one small answer (strace in bench/README.md), where
    /// the write buffer (`server.write_buffer_bytes`) holds all three. Not a watch's
    /// stream, whose events go out as they come; not HTTP/2, whose frames the h2
    /// library writes; not HTTP/1.0, whose body ends with the connection and so has no
    /// terminating chunk; not the answer to a `HEAD`, which has no body to end.
    pub gather: bool,
}

impl OnResponse {
    /// How the response head changes for the client; `None`: it passes as it came.
    /// `head_request`: the request was a `HEAD`, whose answer has no body.
    pub fn relabel(&self, framing: ClientFraming, head_request: bool) -> Option<Relabel> {
        Some(Relabel {
            content_type: self.action.content_type()?,
            chunked: framing == ClientFraming::Http11,
            gzip: self.gzip,
            gather: framing == ClientFraming::Http11 && !self.watch_stream && !head_request,
        })
    }
}

/// Whether the SIGTERM drain ends this response cleanly (the terminating chunk on
/// HTTP/1.1, `END_STREAM` on HTTP/2), as kube-apiserver ends a watch when it shuts
/// down, so that the client watches again at once: only a watch's stream whose head
/// is out, once the drain is ending long-running requests. A followed log or a proxied
/// download is long-running too, but its cut body must not look complete; an upgraded
/// connection just closes.
pub fn drain_ends_cleanly(draining: bool, watch_stream: bool, head_sent: bool) -> bool {
    draining && watch_stream && head_sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::plan::{plan, plan_with, RequestHead, UpstreamMode};
    use ResponseAction::*;

    const CM: &str = "/api/v1/namespaces/ns/configmaps/c";
    const CMS: &str = "/api/v1/namespaces/ns/configmaps";
    const JSON: Option<&str> = Some("application/json");
    const CBOR: Option<&str> = Some("application/cbor");
    const SEQ: Option<&str> = Some("application/cbor-seq");

    fn req(
        method: &'static str,
        path: &'static str,
        query: Option<&'static str>,
        accept: &'static str,
        ct: Option<&'static str>,
    ) -> RequestHead<'static> {
        RequestHead {
            method,
            path,
            query,
            accept: Some(accept),
            content_type: ct,
            declared_len: Some(100),
            ..Default::default()
        }
    }

    /// Only a watch is a watch (the drain ends it cleanly; a followed log, a proxied
    /// download or an upgrade is long-running too, but not a watch).
    #[test]
    fn only_watches_are_watches() {
        for (path, query, watch) in [
            (CMS, Some("watch=true"), true),
            ("/apis/apps/v1/deployments", Some("watch=1"), true),
            (CMS, None, false),
            (CM, None, false),
            (
                "/api/v1/namespaces/ns/pods/p/log",
                Some("follow=true"),
                false,
            ),
            ("/api/v1/namespaces/ns/pods/p/log", None, false),
            ("/api/v1/namespaces/ns/pods/p/proxy/x", None, false),
            (
                "/api/v1/namespaces/ns/pods/p/exec",
                Some("command=sh"),
                false,
            ),
        ] {
            for mode in [UpstreamMode::Legacy, UpstreamMode::Native] {
                let p = plan(&req("GET", path, query, "application/json", None), mode);
                assert_eq!(p.is_watch(), watch, "{path}?{query:?} in {mode:?}");
            }
        }
    }

    fn resp(
        status: u16,
        content_type: Option<&'static str>,
        encoding: Option<&'static str>,
    ) -> ResponseHead<'static> {
        ResponseHead {
            status,
            content_type,
            content_encoding: encoding,
            content_length: None,
        }
    }

    /// (replay, action, learned, format label), and whether watch events are counted
    /// as they pass through.
    type Want = (bool, ResponseAction, Option<Learned>, &'static str, bool);

    /// (mode, request, response, replayed) → [`Want`].
    #[test]
    fn response_decisions_table() {
        use Learned::*;
        use UpstreamMode::*;
        let get_cbor = req("GET", CM, None, "application/cbor", None);
        let get_json = req("GET", CM, None, "application/json", None);
        let watch_cbor = req("GET", CMS, Some("watch=1"), "application/cbor", None);
        let post_cbor = req("POST", CMS, None, "application/cbor", CBOR);
        let get_json_watch = req("GET", CMS, Some("watch=1"), "application/json", None);
        let list_cbor = req("GET", CMS, None, "application/cbor", None);
        #[rustfmt::skip]
        let cases: Vec<(UpstreamMode, &RequestHead, ResponseHead, bool, Want)> = vec![
            // legacy: JSON answers become CBOR; anything else passes as it came.
            (Legacy, &get_cbor, resp(200, JSON, None), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Legacy, &get_cbor, resp(200, Some("application/json; charset=utf-8"), Some("identity")), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Legacy, &get_cbor, resp(200, JSON, Some("gzip")), false, (false, PassThrough, None, "json", false)),
            (Legacy, &get_cbor, resp(200, Some("text/plain"), None), false, (false, PassThrough, None, "other", false)),
            (Legacy, &get_cbor, resp(200, CBOR, None), false, (false, PassThrough, Some(SpeaksCbor), "cbor", false)),
            (Legacy, &get_cbor, resp(404, JSON, None), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Legacy, &get_cbor, resp(101, JSON, None), false, (false, PassThrough, None, "other", false)),
            // An answer with no body to transcode passes through as it came.
            (Legacy, &get_cbor, resp(204, JSON, None), false, (false, PassThrough, None, "other", false)),
            (Legacy, &get_cbor, resp(304, JSON, None), false, (false, PassThrough, None, "other", false)),
            (Legacy, &watch_cbor, resp(200, JSON, None), false, (false, JsonToCbor { watch: true }, None, "cbor", false)),
            (Legacy, &watch_cbor, resp(410, JSON, None), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Legacy, &get_json, resp(200, JSON, None), false, (false, PassThrough, None, "json", false)),
            // A 415 replays only a CBOR-first body (auto), once.
            (Legacy, &post_cbor, resp(415, JSON, None), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Auto, &post_cbor, resp(415, JSON, None), false, (true, PassThrough, Some(NeedsJson), "cbor", false)),
            (Auto, &post_cbor, resp(415, JSON, None), true, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Auto, &post_cbor, resp(201, CBOR, None), false, (false, PassThrough, Some(SpeaksCbor), "cbor", false)),
            (Auto, &post_cbor, resp(201, JSON, None), true, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            // upgrade: CBOR answers become JSON for a JSON client; a sequence only when labelled one.
            (Upgrade, &get_json, resp(200, CBOR, None), false, (false, CborToJson { watch: false }, None, "json", false)),
            (Upgrade, &get_json, resp(200, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Upgrade, &get_json_watch, resp(200, SEQ, None), false, (false, CborToJson { watch: true }, None, "json", false)),
            (Upgrade, &get_json_watch, resp(200, CBOR, None), false, (false, CborToJson { watch: false }, None, "json", false)),
            // native: nothing is transcoded.
            (Native, &get_cbor, resp(200, CBOR, None), false, (false, PassThrough, None, "cbor", false)),
            (Native, &watch_cbor, resp(200, SEQ, None), false, (false, PassThrough, None, "cbor", true)),
            // The upstream's own CBOR watch passes through with its events counted: only a
            // watch, only a 2xx `cbor-seq`, only identity-coded.
            (Native, &watch_cbor, resp(200, Some("application/cbor-seq; x=y"), Some("identity")), false, (false, PassThrough, None, "cbor", true)),
            (Native, &watch_cbor, resp(200, SEQ, Some("gzip")), false, (false, PassThrough, None, "cbor", false)),
            (Native, &watch_cbor, resp(200, CBOR, None), false, (false, PassThrough, None, "cbor", false)),
            (Native, &watch_cbor, resp(500, SEQ, None), false, (false, PassThrough, None, "cbor", false)),
            (Native, &get_cbor, resp(200, SEQ, None), false, (false, PassThrough, None, "cbor", false)),
            (Legacy, &watch_cbor, resp(200, SEQ, None), false, (false, PassThrough, Some(SpeaksCbor), "cbor", true)),
            (Auto, &watch_cbor, resp(200, SEQ, None), false, (false, PassThrough, Some(SpeaksCbor), "cbor", true)),
            (Upgrade, &watch_cbor, resp(200, SEQ, None), false, (false, PassThrough, None, "cbor", true)),
            // Transcoded watches are counted by the codec instead.
            (Upgrade, &get_json_watch, resp(200, SEQ, None), false, (false, CborToJson { watch: true }, None, "json", false)),
            (Legacy, &watch_cbor, resp(200, JSON, None), false, (false, JsonToCbor { watch: true }, None, "cbor", false)),
            (Native, &get_cbor, resp(200, JSON, None), false, (false, PassThrough, None, "json", false)),
            // Errors the server writes from its filters and router stay JSON.
            (Legacy, &get_cbor, resp(401, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Legacy, &get_cbor, resp(403, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Legacy, &get_cbor, resp(405, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Legacy, &watch_cbor, resp(404, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Legacy, &list_cbor, resp(404, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Legacy, &list_cbor, resp(500, JSON, None), false, (false, JsonToCbor { watch: false }, None, "cbor", false)),
            (Auto, &post_cbor, resp(401, JSON, None), false, (false, PassThrough, None, "json", false)),
            (Native, &get_json, resp(200, JSON, None), false, (false, PassThrough, None, "json", false)),
        ];
        for (mode, head, response, replayed, (replay, action, learned, format, count_events)) in
            cases
        {
            let p = plan(head, mode);
            let got = p.on_response(response, replayed);
            let want = OnResponse {
                replay,
                action,
                learned,
                format,
                gzip: false,
                count_events,
                watch_stream: got.watch_stream,
                schema: got.schema,
            };
            assert_eq!(
                got, want,
                "{mode:?} {} {:?} {:?} → {response:?} replayed={replayed}",
                head.method, head.path, head.accept
            );
        }
    }

    /// Which `[]byte` fields a transcoded answer has (docs/wire.md §2): the route's kind
    /// for a 2xx made CBOR, as an object, a list or watch events; nothing for a Table or
    /// metadata only, an error Status, a kind without such fields, a custom resource, or an
    /// answer that is not transcoded.
    #[test]
    fn response_schemas() {
        use crate::negotiate::byte_fields::typed_response;
        use crate::negotiate::route::Route;
        use UpstreamMode::*;
        let typed = |path: &str| match Route::classify(path) {
            Route::Resource(r) => typed_response(&r),
            other => panic!("{other:?}"),
        };
        let cm = typed(CMS);
        assert!(matches!(cm, Schema::Typed(f) if f.len() == 1));
        let secret = "/api/v1/namespaces/ns/secrets/s";
        let pods = "/api/v1/namespaces/ns/pods";
        let cr = "/apis/harness.example.com/v1/namespaces/ns/widgets";
        let pom = "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let none = Schema::Unstructured;
        #[rustfmt::skip]
        let cases: Vec<(UpstreamMode, RequestHead, ResponseHead, Schema)> = vec![
            (Legacy, req("GET", CM, None, "application/cbor", None), resp(200, JSON, None), cm),
            (Legacy, req("GET", CMS, None, "application/cbor", None), resp(200, JSON, None), cm),
            (Legacy, req("GET", CMS, Some("watch=1"), "application/cbor", None), resp(200, JSON, None), cm),
            (Legacy, req("PUT", CM, None, "application/cbor", CBOR), resp(200, JSON, None), cm),
            (Legacy, req("POST", CMS, None, "application/cbor", CBOR), resp(201, JSON, None), cm),
            (Auto, req("GET", CM, None, "application/cbor", None), resp(200, JSON, None), cm),
            (Legacy, req("GET", secret, None, "application/cbor", None), resp(200, JSON, None), typed(secret)),
            (Legacy, req("GET", CM, None, pom, None), resp(200, JSON, None), none),
            (Legacy, req("GET", CM, None, "application/cbor", None), resp(404, JSON, None), none),
            (Legacy, req("GET", CM, None, "application/cbor", None), resp(200, CBOR, None), none),
            (Legacy, req("GET", CM, None, "application/json", None), resp(200, JSON, None), none),
            (Legacy, req("GET", pods, None, "application/cbor", None), resp(200, JSON, None), none),
            (Legacy, req("GET", cr, None, "application/cbor", None), resp(200, JSON, None), none),
            (Native, req("GET", CM, None, "application/cbor", None), resp(200, CBOR, None), none),
        ];
        for (mode, head, response, want) in cases {
            let got = plan(&head, mode).on_response(response, false).schema;
            assert_eq!(
                got, want,
                "{mode:?} {} {} {:?} → {response:?}",
                head.method, head.path, head.accept
            );
        }
    }

    /// An empty JSON answer (`Content-Length: 0`) never becomes an empty, well-formed
    /// CBOR answer: it passes through with the upstream's `Content-Type`.
    #[test]
    fn an_empty_json_answer_passes_through_untranscoded() {
        let p = plan(
            &req("GET", CM, None, "application/cbor", None),
            UpstreamMode::Legacy,
        );
        let empty = ResponseHead {
            content_length: Some(0),
            ..resp(200, JSON, None)
        };
        let got = p.on_response(empty, false);
        assert_eq!((got.action, got.format), (PassThrough, "other"));
        let one = ResponseHead {
            content_length: Some(1),
            ..resp(200, JSON, None)
        };
        assert_eq!(
            p.on_response(one, false).action,
            JsonToCbor { watch: false }
        );
        // An unknown length may still be empty: the codec then ends the answer
        // abnormally (an empty input is no JSON document).
        assert_eq!(
            p.on_response(resp(200, JSON, None), false).action,
            JsonToCbor { watch: false }
        );
    }

    /// `native` mode in front of a JSON-only apiserver (recorded against a real 1.30):
    /// a JSON answer is labelled `json` whatever the client's `Accept` listed; a CBOR
    /// answer to a client that chose CBOR, `cbor`; no body, or neither, `other`.
    #[test]
    fn native_mode_labels_what_the_client_got() {
        let any = |s: u16, ct, len| ResponseHead {
            content_length: len,
            ..resp(s, ct, None)
        };
        for (accept, head, want) in [
            ("application/cbor", any(200, JSON, None), "json"),
            (
                "application/cbor, application/json",
                any(200, JSON, None),
                "json",
            ),
            (
                "application/cbor;q=1, application/json;q=0.9",
                any(200, JSON, Some(9)),
                "json",
            ),
            ("application/json", any(200, JSON, None), "json"),
            ("*/*", any(200, JSON, None), "json"),
            ("application/cbor", any(404, JSON, None), "json"),
            ("application/cbor", any(201, JSON, Some(2)), "json"),
            ("application/cbor", any(200, CBOR, None), "cbor"),
            ("application/json", any(200, JSON, Some(0)), "json"),
            ("application/cbor", any(200, JSON, Some(0)), "other"),
            ("application/cbor", any(204, JSON, None), "other"),
            (
                "application/cbor",
                any(200, Some("text/plain"), None),
                "other",
            ),
        ] {
            let p = plan(&req("GET", CM, None, accept, None), UpstreamMode::Native);
            let got = p.on_response(head, false);
            assert_eq!(
                (got.action, got.format),
                (PassThrough, want),
                "{accept} -> {} {:?}",
                head.status,
                head.content_type
            );
        }
    }

    #[test]
    fn unanswered_requests_are_labelled_other_where_cbor_was_chosen() {
        let p = plan(
            &req("GET", CM, None, "application/cbor", None),
            UpstreamMode::Legacy,
        );
        assert_eq!(p.unanswered_format(), "other");
        let p = plan(
            &req("GET", CM, None, "application/json", None),
            UpstreamMode::Legacy,
        );
        assert_eq!(p.unanswered_format(), "json");
    }

    /// (mode, request, Accept-Encoding, response, Content-Length) → gzip.
    #[test]
    fn gzip_decisions_table() {
        use UpstreamMode::*;
        const BIG: Option<u64> = Some(crate::negotiate::encoding::GZIP_THRESHOLD + 1);
        const SMALL: Option<u64> = Some(crate::negotiate::encoding::GZIP_THRESHOLD);
        let gz = |mut h: RequestHead<'static>, ae: Option<&'static str>| {
            h.accept_encoding = ae;
            h.compress_responses = true;
            h
        };
        let list = req("GET", CMS, None, "application/cbor", None);
        let watch = req("GET", CMS, Some("watch=1"), "application/cbor", None);
        let json = req("GET", CMS, None, "application/json", None);
        let off = RequestHead {
            compress_responses: false,
            ..gz(list, Some("gzip"))
        };
        #[rustfmt::skip]
        let cases: Vec<(UpstreamMode, RequestHead, ResponseHead, Option<u64>, bool)> = vec![
            // A transcoded LIST: compressed when large or of unknown length.
            (Legacy, gz(list, Some("gzip")), resp(200, JSON, None), BIG, true),
            (Legacy, gz(list, Some("gzip")), resp(200, JSON, None), None, true),
            (Legacy, gz(list, Some("gzip")), resp(200, JSON, None), SMALL, false),
            (Auto, gz(list, Some("gzip, deflate")), resp(200, JSON, None), BIG, true),
            // Errors follow the same rule.
            (Legacy, gz(list, Some("gzip")), resp(404, JSON, None), SMALL, false),
            (Legacy, gz(list, Some("gzip")), resp(500, JSON, None), None, true),
            // Not for a client that refuses gzip, nor with compression off.
            (Legacy, gz(list, None), resp(200, JSON, None), BIG, false),
            (Legacy, gz(list, Some("gzip;q=0")), resp(200, JSON, None), BIG, false),
            (Legacy, gz(list, Some("identity")), resp(200, JSON, None), None, false),
            (Legacy, off, resp(200, JSON, None), BIG, false),
            // Never a watch.
            (Legacy, gz(watch, Some("gzip")), resp(200, JSON, None), None, false),
            (Legacy, gz(watch, Some("gzip")), resp(200, JSON, None), BIG, false),
            // Never what passes through: JSON for a JSON client, the upstream's own CBOR
            // (gzipped or not), an upstream gzip of JSON, native mode.
            (Legacy, gz(json, Some("gzip")), resp(200, JSON, None), BIG, false),
            (Auto, gz(list, Some("gzip")), resp(200, CBOR, Some("gzip")), BIG, false),
            (Auto, gz(list, Some("gzip")), resp(200, CBOR, None), BIG, false),
            (Legacy, gz(list, Some("gzip")), resp(200, JSON, Some("gzip")), None, false),
            (Native, gz(list, Some("gzip")), resp(200, CBOR, None), BIG, false),
            // Upgrade mode's JSON for JSON clients is not compressed.
            (Upgrade, gz(json, Some("gzip")), resp(200, CBOR, None), BIG, false),
        ];
        for (mode, head, mut response, len, want) in cases {
            response.content_length = len;
            let got = plan(&head, mode).on_response(response, false);
            assert_eq!(got.gzip, want, "{mode:?} {head:?} → {response:?}");
        }
    }

    /// A CBOR-enabled upstream's gzipped CBOR passes through with its encoding.
    #[test]
    fn an_upstreams_gzipped_cbor_passes_through() {
        let h = RequestHead {
            accept_encoding: Some("gzip"),
            ..req("GET", CMS, None, "application/cbor", None)
        };
        let p = plan_with(&h, UpstreamMode::Auto, |_| Some(Learned::SpeaksCbor));
        assert!(!p.strips_accept_encoding());
        let got = p.on_response(resp(200, CBOR, Some("gzip")), false);
        assert_eq!(got.action, PassThrough);
        assert_eq!(got.format, "cbor");
        assert!(!got.gzip);
        // Without that knowledge the JSON must arrive identity-coded.
        assert!(plan(&h, UpstreamMode::Auto).strips_accept_encoding());
    }

    /// Which responses are watch streams, for the gauge and the drain, in every mode:
    /// a watch answered with a 2xx, transcoded or passing through; not its error.
    #[test]
    fn watch_streams_are_watches_that_began() {
        let watch = req("GET", CMS, Some("watch=true"), "application/cbor", None);
        let json_watch = req("GET", CMS, Some("watch=true"), "application/json", None);
        let list = req("GET", CMS, None, "application/cbor", None);
        let upgrade = req(
            "GET",
            "/api/v1/namespaces/ns/pods/p/exec",
            None,
            "*/*",
            None,
        );
        let cases = [
            (UpstreamMode::Legacy, watch, resp(200, JSON, None), true),
            (
                UpstreamMode::Legacy,
                json_watch,
                resp(200, JSON, None),
                true,
            ),
            (UpstreamMode::Native, watch, resp(200, SEQ, None), true),
            (
                UpstreamMode::Upgrade,
                json_watch,
                resp(200, SEQ, None),
                true,
            ),
            (UpstreamMode::Auto, watch, resp(404, JSON, None), false),
            (UpstreamMode::Legacy, list, resp(200, JSON, None), false),
            (UpstreamMode::Legacy, upgrade, resp(101, None, None), false),
        ];
        for (mode, head, response, want) in cases {
            let got = plan(&head, mode).on_response(response, false);
            assert_eq!(got.watch_stream, want, "{mode:?} {head:?} → {response:?}");
        }
    }

    /// The response head's edits: none for a body that passes through; a transcoded one
    /// gets its new type, loses what described the old body, and is chunked only where
    /// HTTP/1.1 frames it so.
    #[test]
    fn transcoded_heads_are_relabelled() {
        let decide = |accept, query, response| {
            plan(&req("GET", CMS, query, accept, None), UpstreamMode::Legacy)
                .on_response(response, false)
        };
        let list = decide("application/cbor", None, resp(200, JSON, None));
        let watch = decide(
            "application/cbor",
            Some("watch=true"),
            resp(200, JSON, None),
        );
        let json = decide("application/json", None, resp(200, JSON, None));
        let mut big = list;
        big.gzip = true;
        use ClientFraming::*;
        let want = |content_type, chunked, gzip, gather| {
            Some(Relabel {
                content_type,
                chunked,
                gzip,
                gather,
            })
        };
        let (c, seq) = ("application/cbor", "application/cbor-seq");
        // (decision, framing, HEAD, want)
        let cases = [
            (json, Http11, false, None),
            (list, Http11, false, want(c, true, false, true)),
            (list, Http11, true, want(c, true, false, false)),
            (list, Http2, false, want(c, false, false, false)),
            (list, Http10, false, want(c, false, false, false)),
            (watch, Http11, false, want(seq, true, false, false)),
            (watch, Http10, false, want(seq, false, false, false)),
            (big, Http2, false, want(c, false, true, false)),
            (big, Http11, false, want(c, true, true, true)),
        ];
        for (decision, framing, head_request, want) in cases {
            assert_eq!(
                decision.relabel(framing, head_request),
                want,
                "{decision:?} {framing:?} {head_request}"
            );
        }
    }

    #[test]
    fn the_drain_ends_only_watch_streams_whose_head_is_out() {
        for (draining, watch_stream, head_sent, want) in [
            (true, true, true, true),
            (false, true, true, false),
            (true, false, true, false),
            (true, true, false, false),
        ] {
            assert_eq!(drain_ends_cleanly(draining, watch_stream, head_sent), want);
        }
    }
}
