//! The decision table (WIRE.md §1, §4, §5): one request head in, one [`Plan`] out, decided
//! once and only read afterwards by the proxy, the codec drivers, metrics and logs.
//!
//! [`plan`] first works out what a CBOR-enabled kube-apiserver 1.36 would do with the
//! request: which check it fails first, which media type it answers in, whether it streams,
//! in which format it would write an error. Then the upstream mode decides what cborgate must
//! change so that the client sees exactly that: in `legacy` mode it transcodes and answers the
//! refusals a legacy server would phrase differently; in `native` mode the upstream is the
//! real thing and cborgate changes nothing.
//!
//! Which check comes first follows the apiserver's code and the recorded exchanges: for POST
//! and PUT the router matches `Accept` before the handler reads the body type
//! (`a-post-cbor-acc-cbor`: 406, not 415); PATCH routes declare the patch types they consume,
//! and the router checks `Content-Type` before `Accept` (`a-apply-cbor`).

use super::auto::{self, CapabilityKey, Learned};
use super::byte_fields;
use super::encoding;
use super::media::{
    accept_without_cbor, router_accepts, router_not_acceptable_message, AcceptHeader, ContentType,
    Format, Negotiated, Offer, Restrictions, DISCOVERY_NOT_ACCEPTABLE_MESSAGE,
    NOT_ACCEPTABLE_MESSAGE, PRODUCES_COLLECTION, PRODUCES_OBJECT,
};
use super::route::{self, Method, ResourceRoute, Route};
use crate::codec::fields::Schema;

/// `application/json`
const JSON: &str = "application/json";
/// `application/cbor`
const CBOR: &str = "application/cbor";
/// `application/apply-patch+yaml`: JSON text is valid YAML for the apiserver.
const APPLY_YAML: &str = "application/apply-patch+yaml";
/// `application/apply-patch+cbor`
const APPLY_CBOR: &str = "application/apply-patch+cbor";

/// The message of the 415 for a PATCH whose body type is not a patch type the server
/// consumes. PATCH routes declare `Consumes(json-patch+json, merge-patch+json,
/// strategic-merge-patch+json, apply-patch+yaml, apply-patch+cbor)`, so go-restful refuses
/// anything else before the handler runs, with this message and `"details":{}`, as recorded
/// from the legacy server in `a-apply-cbor`. (Only a CRD's own handler words it
/// `the body of the request was in an unknown format - accepted media types include: ...`,
/// and its list has no strategic merge patch; cborgate cannot tell a CRD from its path.)
pub const PATCH_UNSUPPORTED_MESSAGE: &str = "415: Unsupported Media Type";

/// The message of the 415 for a POST or PUT body in a `+cbor` type (the handler's
/// `NegotiateInputSerializer`, as in `a-post-cbor`, with the CBOR-enabled server's list).
pub const BODY_UNSUPPORTED_MESSAGE: &str = "the body of the request was in an unknown format - \
     accepted media types include: application/json, application/yaml, \
     application/vnd.kubernetes.protobuf, application/cbor";

/// How cborgate treats the upstream (docs/wire.md §5): `upstream.mode` and `--mode`,
/// read by serde and clap from the variants' names. Adding a mode is a variant here and
/// its plan in [`plan_with`].
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Deserialize,
    serde::Serialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum UpstreamMode {
    // Planned as `Legacy`, then made CBOR-first by `auto.rs`.
    /// Learn per verb, group and resource whether the upstream takes CBOR, and send it
    /// CBOR where it does
    #[default]
    Auto,
    /// The upstream speaks JSON only: always transcode.
    Legacy,
    /// The upstream is CBOR-enabled: pass everything through untouched.
    Native,
    /// Load-test gateway: JSON clients are sent to the upstream as CBOR.
    Upgrade,
}

impl std::fmt::Display for UpstreamMode {
    /// The name `upstream.mode` and `--mode` take.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        let name = self.to_possible_value();
        f.write_str(name.as_ref().map_or("", |v| v.get_name()))
    }
}

/// What [`plan`] needs of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// The method, e.g. `GET`.
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query, without `?`.
    pub query: Option<&'a str>,
    /// All `Accept` values joined with `", "`. (Go's `Header.Get` reads only the first
    /// `Accept` line; clients send one.)
    pub accept: Option<&'a str>,
    /// The `Content-Type` value.
    pub content_type: Option<&'a str>,
    /// `Connection: upgrade` with an `Upgrade` header.
    pub upgrade: bool,
    /// The declared body length (`Content-Length`), if any.
    pub declared_len: Option<u64>,
    /// All `Accept-Encoding` values joined with `", "`.
    pub accept_encoding: Option<&'a str>,
    /// `server.compress_responses`: cborgate may gzip the responses it transcodes.
    pub compress_responses: bool,
}

/// What to do with the request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyAction {
    /// Send it as it came.
    PassThrough,
    /// Transcode CBOR to JSON (WIRE.md §3) and send it with this `Content-Type` (and a new
    /// length). An empty body stays empty: a DELETE may carry none.
    CborToJson {
        /// `application/json`, or `application/apply-patch+yaml` for an apply patch.
        upstream_content_type: &'static str,
        /// Which fields are bytes (`byte_fields`): by the kind for a typed body, none for
        /// an apply patch or a custom resource.
        schema: Schema,
        /// The kind the body decodes into, where it has `[]byte` fields: the words of the
        /// 400 for a bad one (`byte_fields::typed_kind`).
        kind: Option<byte_fields::TypedKind>,
    },
    /// Upgrade mode: transcode a JSON body to CBOR (WIRE.md §2 rules) and send it with this
    /// `Content-Type` (`application/cbor`, or `application/apply-patch+cbor`).
    JsonToCbor {
        /// The CBOR media type the upstream gets.
        upstream_content_type: &'static str,
    },
}

/// What to do with a response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseAction {
    /// Send it as it came.
    PassThrough,
    /// The upstream answers JSON (it was asked for JSON): transcode it (WIRE.md §2) and
    /// label it [`ResponseAction::content_type`]. Only a body the upstream labelled
    /// `application/json` can be transcoded; anything else passes through.
    JsonToCbor {
        /// A watch stream: one CBOR item per event, `application/cbor-seq`.
        watch: bool,
    },
    /// Upgrade mode: the upstream answers CBOR (it was asked for CBOR) to a JSON client:
    /// transcode it to JSON. Only a body labelled `application/cbor` or `application/cbor-seq`
    /// is transcoded; anything else passes through.
    CborToJson {
        /// A `cbor-seq` watch stream: one line of JSON per event.
        watch: bool,
    },
}

impl ResponseAction {
    /// The `Content-Type` the client gets for a transcoded body: `application/cbor`, or
    /// `application/cbor-seq` for a watch; `None` when nothing is transcoded.
    pub const fn content_type(self) -> Option<&'static str> {
        match self {
            ResponseAction::PassThrough => None,
            ResponseAction::JsonToCbor { watch: false } => Some(CBOR),
            ResponseAction::JsonToCbor { watch: true } => Some("application/cbor-seq"),
            ResponseAction::CborToJson { .. } => Some("application/json"),
        }
    }
}

/// An answer cborgate gives itself, without contacting the upstream: a Kubernetes `Status`
/// (WIRE.md §4) with `status: Failure`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalReply {
    /// The HTTP status and the Status `code`.
    pub code: u16,
    /// The Status `reason`.
    pub reason: &'static str,
    /// The Status `message`.
    pub message: String,
    /// [`Format::Cbor`] or [`Format::Json`]: the format the server would write the Status in.
    pub format: Format,
    /// JSON indented with two spaces, as the apiserver writes a Status it could not negotiate
    /// (always for 406), or one whose chosen clause or `?pretty=` asked for it.
    pub pretty: bool,
    /// Include `"details":{}` (the router's errors have it, the handlers' do not).
    pub empty_details: bool,
}

/// Everything decided about one request, before any byte of its body moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The verb label (see [`route::normalize_verb`]).
    pub verb: &'static str,
    /// What the path addresses.
    pub route: Route,
    /// The request body's format, from `Content-Type`; [`Format::None`] without one.
    pub request_format: Format,
    /// The format the client will get on success.
    pub response_format: Format,
    /// The format a CBOR-enabled server writes an error `Status` in for this `Accept`
    /// (negotiated without transformations); [`Format::Json`] when nothing is negotiable,
    /// as the server then writes raw JSON.
    pub error_format: Format,
    /// What to do with the request body.
    pub body: BodyAction,
    /// What to do with a successful (non-error) response body.
    pub response: ResponseAction,
    /// What to do with an error response body (status 400 and above).
    pub error_response: ResponseAction,
    /// `Some`: replace every `Accept` header sent upstream with this value.
    pub upstream_accept: Option<String>,
    /// `Some`: answer this and do not contact the upstream.
    pub reply: Option<LocalReply>,
    /// A watch, an upgrade or a connect subresource: no response-header timeout applies.
    pub long_running: bool,
    /// `auto`: the CBOR body goes upstream as CBOR first (the body action then applies
    /// only to the JSON replay after a 415; see [`Plan::on_response`]).
    pub cbor_first: bool,
    /// The mode it was planned in.
    pub mode: UpstreamMode,
    /// The client takes gzip (`Accept-Encoding`, q-values honoured) and compression is
    /// on: a large transcoded answer may be gzipped (see [`encoding`](super::encoding)).
    pub client_gzip: bool,
    /// `auto`: the upstream was seen answering CBOR for this request's key, so its
    /// answer will most likely pass through: it keeps the client's `Accept-Encoding`,
    /// and a CBOR-enabled server's gzip reaches the client untouched.
    pub upstream_speaks_cbor: bool,
    /// Which fields of a successful transcoded answer are `[]byte`: the route's kind, as
    /// an object, a list of them or watch events, when the client asked for the objects
    /// themselves (not a Table or metadata only); see [`Plan::on_response`].
    pub response_schema: Schema,
}

impl Plan {
    /// The response action for an upstream status: errors follow [`Plan::error_response`]
    /// (an error ends a watch before it starts, as one `Status`), informational statuses
    /// such as `101 Switching Protocols` pass through, the rest follow [`Plan::response`].
    pub fn response_for_status(&self, status: u16) -> ResponseAction {
        match status {
            100..=199 => ResponseAction::PassThrough,
            400.. => self.error_response,
            _ => self.response,
        }
    }

    /// Whether the upstream request goes without `Accept-Encoding`: a body that may be
    /// transcoded must arrive as identity-coded text. Not in `auto` mode for a key whose
    /// upstream speaks CBOR: its CBOR passes through, compressed as it came (a JSON
    /// answer it gzips anyway then passes through as it came, unread).
    pub fn strips_accept_encoding(&self) -> bool {
        (self.response != ResponseAction::PassThrough
            || self.error_response != ResponseAction::PassThrough)
            && !self.upstream_speaks_cbor
    }

    /// The body action for the upstream request: none while a CBOR body goes up as CBOR
    /// first (`auto`), [`Plan::body`] otherwise and for the replay.
    pub fn body_for_attempt(&self, replay: bool) -> BodyAction {
        if self.cbor_first && !replay {
            BodyAction::PassThrough
        } else {
            self.body
        }
    }

    /// Whether the request can only go upstream in HTTP/1.1: SPDY and WebSocket upgrades
    /// (exec, attach, port-forward) exist only there. Everything else may share an HTTP/2
    /// connection, watches included.
    pub fn needs_http1(&self) -> bool {
        self.verb == "CONNECT"
    }

    /// The key under which upstream capabilities are remembered: (verb, group, resource),
    /// for resource routes only.
    pub fn capability_key(&self) -> Option<CapabilityKey<'_>> {
        match &self.route {
            Route::Resource(r) => Some((self.verb, r.group.as_str(), r.resource.as_str())),
            _ => None,
        }
    }
}

/// Decides what cborgate does with a request, with nothing learned about the upstream.
/// Pure and total: any head, however malformed, gives a plan.
pub fn plan(head: &RequestHead<'_>, mode: UpstreamMode) -> Plan {
    plan_with(head, mode, |_| None)
}

/// Decides what cborgate does with a request. `learned` says what `auto` mode knows of
/// the request's (verb, group, resource); it is asked only in `auto` mode, and only for
/// resource routes. Pure and total.
pub fn plan_with(
    head: &RequestHead<'_>,
    mode: UpstreamMode,
    learned: impl FnOnce(CapabilityKey<'_>) -> Option<Learned>,
) -> Plan {
    let emulation = Emulation::of(head);
    let mut p = match mode {
        UpstreamMode::Legacy => emulation.legacy_plan(),
        UpstreamMode::Native => emulation.native_plan(),
        UpstreamMode::Auto => {
            let mut p = emulation.legacy_plan();
            let known = p.capability_key().and_then(learned);
            p.make_cbor_first(known, head.declared_len);
            p
        }
        UpstreamMode::Upgrade => emulation.upgrade_plan(),
    };
    p.mode = mode;
    p.client_gzip = head.compress_responses && encoding::accepts_gzip(head.accept_encoding);
    p
}

impl Plan {
    /// `auto` mode: the legacy plan made CBOR-first, from what is `learned` of this
    /// request's key and its `declared_len` ([`auto::cbor_first`]).
    fn make_cbor_first(&mut self, learned: Option<Learned>, declared_len: Option<u64>) {
        self.upstream_speaks_cbor = learned == Some(Learned::SpeaksCbor);
        if let BodyAction::CborToJson { .. } = self.body {
            self.cbor_first = auto::cbor_first(learned, declared_len);
        }
        // Not for /api/v1: kube-apiserver 1.36 drops that request when CBOR is
        // acceptable (tests/data/corpus/exchanges, the `b-apiv1-cbor` recording is empty).
        let core_discovery =
            matches!(&self.route, Route::GroupVersionDiscovery { group, .. } if group.is_empty());
        if self.response != ResponseAction::PassThrough && !core_discovery {
            if let Some(accept) = self.upstream_accept.take() {
                self.upstream_accept = Some(auto::cbor_first_accept(&accept));
            }
        }
    }
}

/// What a CBOR-enabled kube-apiserver 1.36 does with the request, before any mode applies.
struct Emulation<'a> {
    /// Upgrade mode: the CBOR type a JSON body of this request would become.
    body_as_cbor: Option<&'static str>,
    verb: &'static str,
    route: Route,
    request_format: Format,
    error_format: Format,
    long_running: bool,
    outcome: Outcome<'a>,
}

enum Outcome<'a> {
    /// Not an API object exchange (upgrades, connect subresources, non-resource paths, methods
    /// no route has): cborgate changes nothing on the way. `error_statuses`: an error there is
    /// a `Status` the server would negotiate like any other (so a legacy upstream's JSON one
    /// is transcoded when the client's `Accept` chose CBOR for errors).
    Untouched {
        response_format: Format,
        error_statuses: bool,
        /// A legacy upstream gets this `Accept` instead (its router would refuse CBOR
        /// where the handler does not care: `pods/log`).
        json_accept: Option<String>,
    },
    /// Discovery: never transcoded (client-go 1.36 cannot decode CBOR discovery), served
    /// in `chosen` among JSON, YAML and protobuf; `upstream_accept` asks for exactly that
    /// when the client's `Accept` also lists CBOR (a CBOR-enabled upstream would prefer it).
    /// `None` chosen: only CBOR would do, and cborgate answers the 406 (native mode
    /// leaves it to the upstream, labelled `native_format`, what that server answers in).
    Discovery {
        chosen: Option<Negotiated<'a>>,
        upstream_accept: Option<String>,
        native_format: Format,
    },
    /// The server refuses the request itself.
    Reply(LocalReply),
    /// The handler serves it in `chosen`.
    Serve {
        chosen: Negotiated<'a>,
        body: BodyAction,
        watch: bool,
    },
}

impl<'a> Emulation<'a> {
    fn of(head: &RequestHead<'a>) -> Self {
        let method = Method::parse(head.method);
        let route = Route::classify(head.path);
        let content_type = head.content_type.and_then(ContentType::parse);
        let request_format = content_type
            .as_ref()
            .map_or(Format::None, ContentType::format);
        let verb = route::normalize_verb(
            method,
            &route,
            head.query,
            content_type.as_ref().map(ContentType::raw),
            head.upgrade,
        );
        let accept = AcceptHeader::parse(head.accept);
        let errors = ErrorStyle {
            choice: accept.negotiate(Restrictions::Default),
            pretty_query: route::query_pretty(head.query),
        };
        // Upgrade mode writes JSON strings as CBOR strings: a text string in a `[]byte` field
        // is a 400 on a CBOR-enabled server (an untagged byte string it reads as base64 text,
        // which would do): a body that may hold one goes up as the JSON it is (docs/wire.md
        // §3, byte fields).
        // Looked up only for such a body, not for every request.
        let may_hold_bytes = || match &route {
            Route::Resource(r) => byte_fields::may_hold_bytes(byte_fields::typed_body(r)),
            _ => false,
        };
        let body_as_cbor = match (method, content_type.as_ref().map(ContentType::media_type)) {
            (Method::Post | Method::Put, Some("application/json")) if may_hold_bytes() => None,
            (Method::Post | Method::Put | Method::Delete, Some("application/json")) => Some(CBOR),
            (Method::Patch, Some("application/apply-patch+yaml")) => {
                Some("application/apply-patch+cbor")
            }
            _ => None,
        };
        let mut long_running = head.upgrade;
        let outcome = if head.upgrade {
            // exec, attach, port-forward over SPDY or WebSocket: untouched bytes both ways.
            Outcome::Untouched {
                response_format: Format::Other,
                error_statuses: false,
                json_accept: None,
            }
        } else {
            match &route {
                // log, exec, attach, portforward, proxy answer no API object: served as they
                // come whatever the `Accept` (case `pod-log`). A legacy upstream's router would
                // refuse a CBOR `Accept` its handler does not care about, so it gets JSON.
                Route::Resource(r) if r.is_connect() => {
                    long_running = true;
                    Outcome::Untouched {
                        response_format: Format::Other,
                        error_statuses: true,
                        json_accept: head
                            .accept
                            .filter(|a| *a != accept_without_cbor(a))
                            .map(accept_without_cbor),
                    }
                }
                Route::Resource(r) => {
                    let watch = r.serves_watch(method, head.query);
                    long_running = watch;
                    let produces: &[&str] = if method == Method::Get && r.is_collection() {
                        &PRODUCES_COLLECTION
                    } else {
                        &PRODUCES_OBJECT
                    };
                    let request = ResourceRequest {
                        method,
                        content_type: content_type.as_ref(),
                        accept_raw: head.accept,
                        produces,
                        route: r,
                    };
                    serve_resource(&request, &accept, &errors, watch)
                }
                // Discovery is never transcoded: client-go 1.36 cannot decode CBOR discovery
                // documents, so JSON whenever the client accepts JSON, and a CBOR-only
                // `Accept` gets the 406 a CRD group's discovery gets (`disc-apis-cr-v1`). Kinder
                // than the CBOR-enabled server, which serves built-in groups in CBOR.
                Route::GroupVersionDiscovery { .. } => match method {
                    // Served with `DefaultEndpointRestrictions`: no `as=` transformation.
                    Method::Get | Method::Head => {
                        let chosen =
                            accept.negotiate_among(Restrictions::Default, &Offer::WITHOUT_CBOR);
                        Outcome::Discovery {
                            chosen,
                            upstream_accept: chosen
                                .filter(|_| accept.lists_cbor())
                                .map(|c| c.as_accept(c.offer)),
                            native_format: accept
                                .negotiate(Restrictions::Default)
                                .map_or(Format::Json, |n| n.offer.format()),
                        }
                    }
                    _ => Outcome::Untouched {
                        response_format: errors.format(),
                        error_statuses: true,
                        json_accept: None,
                    },
                },
                // The upstream answers these itself, 406 included (`b-api-cbor`): the label is
                // what it will answer in, JSON when it refuses.
                Route::NoCborDiscovery => Outcome::Untouched {
                    response_format: accept.negotiate(Restrictions::Unrestricted).map_or(
                        Format::Json,
                        |n| match n.offer {
                            Offer::Cbor => Format::Json,
                            offer => offer.format(),
                        },
                    ),
                    error_statuses: false,
                    json_accept: None,
                },
                Route::Other => Outcome::Untouched {
                    response_format: Format::Other,
                    error_statuses: false,
                    json_accept: None,
                },
            }
        };
        Emulation {
            body_as_cbor,
            verb,
            route,
            request_format,
            error_format: errors.format(),
            long_running,
            outcome,
        }
    }

    fn base_plan(
        verb: &'static str,
        route: Route,
        request_format: Format,
        error_format: Format,
        long_running: bool,
    ) -> Plan {
        Plan {
            verb,
            route,
            request_format,
            response_format: Format::Other,
            error_format,
            body: BodyAction::PassThrough,
            response: ResponseAction::PassThrough,
            error_response: ResponseAction::PassThrough,
            upstream_accept: None,
            reply: None,
            long_running,
            cbor_first: false,
            mode: UpstreamMode::Legacy,
            client_gzip: false,
            upstream_speaks_cbor: false,
            response_schema: Schema::Unstructured,
        }
    }

    /// The upstream speaks JSON only: transcode what the client sends and asks for in CBOR,
    /// and answer the refusals a legacy server would word differently.
    fn legacy_plan(self) -> Plan {
        let Emulation {
            body_as_cbor: _,
            verb,
            route,
            request_format,
            error_format,
            long_running,
            outcome,
        } = self;
        let mut plan = Self::base_plan(verb, route, request_format, error_format, long_running);
        // A legacy upstream writes every error Status in JSON; the real server would have
        // written it in CBOR when that is what `Accept` negotiates for errors.
        let errors = if error_format == Format::Cbor {
            ResponseAction::JsonToCbor { watch: false }
        } else {
            ResponseAction::PassThrough
        };
        match outcome {
            Outcome::Untouched {
                response_format,
                error_statuses,
                json_accept,
            } => {
                plan.response_format = response_format;
                plan.upstream_accept = json_accept;
                if error_statuses {
                    plan.error_response = errors;
                }
            }
            Outcome::Discovery {
                chosen: Some(chosen),
                upstream_accept,
                ..
            } => {
                plan.response_format = chosen.offer.format();
                plan.upstream_accept = upstream_accept;
            }
            Outcome::Discovery { chosen: None, .. } => {
                plan.response_format = Format::Json;
                plan.reply = Some(LocalReply {
                    code: 406,
                    reason: "NotAcceptable",
                    message: DISCOVERY_NOT_ACCEPTABLE_MESSAGE.to_owned(),
                    format: Format::Json,
                    pretty: true,
                    empty_details: false,
                });
            }
            Outcome::Reply(reply) => {
                plan.response_format = reply.format;
                plan.reply = Some(reply);
            }
            Outcome::Serve {
                chosen,
                body,
                watch,
            } => {
                plan.response_format = chosen.offer.format();
                plan.body = body;
                plan.error_response = errors;
                if chosen.offer == Offer::Cbor {
                    plan.response = ResponseAction::JsonToCbor { watch };
                    plan.upstream_accept = Some(chosen.as_json_accept());
                    if let (Route::Resource(r), None) = (&plan.route, chosen.options.convert) {
                        plan.response_schema = byte_fields::typed_response(r);
                    }
                }
                // JSON, YAML or protobuf: the client's own `Accept` goes upstream untouched.
            }
        }
        plan
    }

    /// The upstream is a CBOR-enabled server: it negotiates, refuses and streams exactly as
    /// [`Emulation`] predicts, and better (its 406 and 415 wording follows its real routes,
    /// CRDs included). So cborgate transcodes nothing, rewrites nothing and answers nothing;
    /// the plan still carries the verb and formats for metrics. (1.36 drops `/api/v1`
    /// requests that ask for CBOR; native mode does not work around that.)
    fn native_plan(self) -> Plan {
        let Emulation {
            body_as_cbor: _,
            verb,
            route,
            request_format,
            error_format,
            long_running,
            outcome,
        } = self;
        let mut plan = Self::base_plan(verb, route, request_format, error_format, long_running);
        plan.response_format = match outcome {
            Outcome::Untouched {
                response_format, ..
            } => response_format,
            Outcome::Reply(reply) => reply.format,
            Outcome::Serve { chosen, .. } => chosen.offer.format(),
            Outcome::Discovery { native_format, .. } => native_format,
        };
        plan
    }
}

impl Emulation<'_> {
    /// Load-test gateway in front of a CBOR-enabled upstream: a JSON client's body goes up as
    /// CBOR and its answers come back from CBOR, so JSON load tools exercise the server's CBOR
    /// path. CBOR, YAML and protobuf clients, Tables, and everything that is not a served API
    /// object pass through as in native mode.
    fn upgrade_plan(self) -> Plan {
        let body_as_cbor = self.body_as_cbor;
        let json_client = match &self.outcome {
            Outcome::Serve { chosen, watch, .. }
                if chosen.offer == Offer::Json && !chosen.is_table() =>
            {
                Some((chosen.as_cbor_accept(), *watch))
            }
            _ => None,
        };
        let mut plan = self.native_plan();
        if let Some((accept, watch)) = json_client {
            plan.upstream_accept = Some(accept);
            plan.response = ResponseAction::CborToJson { watch };
            plan.error_response = ResponseAction::CborToJson { watch: false };
            if let Some(upstream_content_type) = body_as_cbor {
                plan.body = BodyAction::JsonToCbor {
                    upstream_content_type,
                };
            }
        }
        plan
    }
}

/// What the request body's type means for the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyCheck {
    /// Not CBOR: the upstream reads it as it is.
    Fine,
    /// CBOR the upstream must get as JSON text with this `Content-Type`.
    Cbor(&'static str),
    /// A PATCH in `application/cbor` or a `+cbor` type other than apply: the router's 415.
    UnsupportedPatch,
    /// A POST or PUT in a `+cbor` type: the handler's 415.
    UnsupportedBody,
}

fn check_body(method: Method, content_type: Option<&ContentType<'_>>) -> BodyCheck {
    let Some(ct) = content_type else {
        return BodyCheck::Fine;
    };
    match method {
        // The PATCH handler and router compare the type case-sensitively, parameters cut.
        Method::Patch if ct.raw() == APPLY_CBOR => BodyCheck::Cbor(APPLY_YAML),
        Method::Patch if ct.is_cbor_family() => BodyCheck::UnsupportedPatch,
        // POST and PUT go through `mime.ParseMediaType`, which lower-cases. DELETE bodies are
        // DeleteOptions; a `+cbor` one there is left to the upstream's own 415.
        Method::Post | Method::Put | Method::Delete if ct.media_type() == CBOR => {
            BodyCheck::Cbor(JSON)
        }
        Method::Post | Method::Put if ct.is_cbor_family() => BodyCheck::UnsupportedBody,
        _ => BodyCheck::Fine,
    }
}

/// A resource route that is not a connect subresource.
/// What [`serve_resource`] needs of a request to a resource route.
struct ResourceRequest<'r> {
    method: Method,
    content_type: Option<&'r ContentType<'r>>,
    accept_raw: Option<&'r str>,
    /// The route's `Produces`, for the router's own `Accept` check.
    produces: &'r [&'r str],
    /// The route, for the schema of a CBOR body (`byte_fields`), looked up only then.
    route: &'r ResourceRoute,
}

fn serve_resource<'a>(
    req: &ResourceRequest<'_>,
    accept: &AcceptHeader<'a>,
    errors: &ErrorStyle<'a>,
    watch: bool,
) -> Outcome<'a> {
    let method = req.method;
    let body = check_body(method, req.content_type);
    match method {
        Method::Patch if body == BodyCheck::UnsupportedPatch => {
            return Outcome::Reply(errors.router_reply(
                415,
                "UnsupportedMediaType",
                PATCH_UNSUPPORTED_MESSAGE,
                true,
            ));
        }
        Method::Get
        | Method::Head
        | Method::Post
        | Method::Put
        | Method::Patch
        | Method::Delete => {}
        // No route takes this method: the upstream's 405 is a Status like any error.
        Method::Options | Method::Connect | Method::Other => {
            return Outcome::Untouched {
                response_format: errors.format(),
                error_statuses: true,
                json_accept: None,
            };
        }
    }
    // The router checks `Accept` against the route's `Produces` before the handler
    // negotiates; its 406 lists them (cases `accept-cbor-seq`, `accept-app-star`).
    if !router_accepts(req.accept_raw, req.produces) {
        return Outcome::Reply(errors.router_reply(
            406,
            "NotAcceptable",
            &router_not_acceptable_message(req.produces),
            true,
        ));
    }
    let Some(chosen) = accept.negotiate(Restrictions::Resource) else {
        return Outcome::Reply(not_acceptable());
    };
    let body = match body {
        BodyCheck::UnsupportedBody => {
            return Outcome::Reply(errors.reply(
                415,
                "UnsupportedMediaType",
                BODY_UNSUPPORTED_MESSAGE,
                false,
            ));
        }
        BodyCheck::Cbor(upstream_content_type) => BodyAction::CborToJson {
            upstream_content_type,
            // The apiserver decodes an apply patch into an `Unstructured`, whatever the kind.
            schema: if upstream_content_type == APPLY_YAML {
                Schema::Unstructured
            } else {
                byte_fields::typed_body(req.route)
            },
            kind: if upstream_content_type == APPLY_YAML {
                None
            } else {
                byte_fields::typed_kind(req.route)
            },
        },
        BodyCheck::Fine | BodyCheck::UnsupportedPatch => BodyAction::PassThrough,
    };
    Outcome::Serve {
        chosen,
        body,
        watch,
    }
}

/// The 406 for an `Accept` nothing matches: raw JSON, indented, as the server writes a Status
/// it could not negotiate a format for (`b-table-cbor`).
fn not_acceptable() -> LocalReply {
    LocalReply {
        code: 406,
        reason: "NotAcceptable",
        message: NOT_ACCEPTABLE_MESSAGE.to_owned(),
        format: Format::Json,
        pretty: true,
        empty_details: false,
    }
}

/// How the server writes an error `Status` (`ErrorNegotiated`): negotiated with
/// `DefaultEndpointRestrictions`, or raw indented JSON when that fails.
struct ErrorStyle<'a> {
    choice: Option<Negotiated<'a>>,
    pretty_query: Option<bool>,
}

impl ErrorStyle<'_> {
    fn format(&self) -> Format {
        self.choice.map_or(Format::Json, |n| n.offer.format())
    }

    /// A refusal written by the router (go-restful's service error handler), whose
    /// serializer has no CBOR: JSON, indented when nothing else could be negotiated
    /// (cases `patch-merge-cbor`, `accept-cbor-seq`; compact for `accept-app-star`).
    fn router_reply(
        &self,
        code: u16,
        reason: &'static str,
        message: &str,
        empty_details: bool,
    ) -> LocalReply {
        let mut r = self.reply(code, reason, message, empty_details);
        if r.format == Format::Cbor {
            r.format = Format::Json;
            r.pretty = true;
        }
        r
    }

    /// A refusal in the error format. cborgate writes Status objects in JSON and CBOR only:
    /// where the server would use YAML or protobuf, JSON it is.
    fn reply(
        &self,
        code: u16,
        reason: &'static str,
        message: &str,
        empty_details: bool,
    ) -> LocalReply {
        let (format, pretty) = match &self.choice {
            None => (Format::Json, true),
            Some(n) if n.offer == Offer::Cbor => (Format::Cbor, false),
            // The user agent (curl, browsers) would also make it pretty; it is not in the head.
            Some(n) => (
                Format::Json,
                n.offer == Offer::Json && (n.options.pretty || self.pretty_query == Some(true)),
            ),
        };
        LocalReply {
            code,
            reason,
            message: message.to_owned(),
            format,
            pretty,
            empty_details,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::route::VERBS;

    const CM: &str = "/api/v1/namespaces/verify/configmaps";
    const CM_ONE: &str = "/api/v1/namespaces/verify/configmaps/cm-basic";
    const TABLE: &str = "application/cbor;as=Table;g=meta.k8s.io;v=v1";
    const CBOR_SEQ: ResponseAction = ResponseAction::JsonToCbor { watch: true };
    const TO_CBOR: ResponseAction = ResponseAction::JsonToCbor { watch: false };
    const PASS: ResponseAction = ResponseAction::PassThrough;
    const TO_JSON: BodyAction = BodyAction::CborToJson {
        upstream_content_type: JSON,
        schema: Schema::Typed(byte_fields::CONFIGMAP),
        kind: Some(byte_fields::TypedKind {
            kind: "ConfigMap",
            version: "v1",
        }),
    };

    fn head<'a>(
        method: &'a str,
        target: &'a str,
        accept: Option<&'a str>,
        content_type: Option<&'a str>,
    ) -> RequestHead<'a> {
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        RequestHead {
            method,
            path,
            query,
            accept,
            content_type,
            upgrade: false,
            declared_len: None,
            accept_encoding: None,
            compress_responses: false,
        }
    }

    fn legacy(
        method: &str,
        target: &str,
        accept: Option<&str>,
        content_type: Option<&str>,
    ) -> Plan {
        plan(
            &head(method, target, accept, content_type),
            UpstreamMode::Legacy,
        )
    }

    fn get(target: &str, accept: &str) -> Plan {
        legacy("GET", target, Some(accept), None)
    }

    /// CBOR chosen: Accept rewritten to `expected_accept`, response transcoded.
    fn assert_cbor(p: &Plan, expected_accept: &str, watch: bool) {
        assert_eq!(p.reply, None);
        assert_eq!(p.response, ResponseAction::JsonToCbor { watch });
        assert_eq!(p.response_format, Format::Cbor);
        assert_eq!(p.upstream_accept.as_deref(), Some(expected_accept));
        assert_eq!(p.error_response, TO_CBOR);
    }

    fn assert_passthrough(p: &Plan, format: Format) {
        assert_eq!(p.reply, None);
        assert_eq!(p.response, PASS);
        assert_eq!(p.upstream_accept, None);
        assert_eq!(p.response_format, format);
    }

    fn assert_406(p: &Plan) {
        let reply = p.reply.as_ref().expect("a local 406");
        assert_eq!((reply.code, reply.reason), (406, "NotAcceptable"));
        assert_eq!(reply.message, NOT_ACCEPTABLE_MESSAGE);
        assert_eq!(reply.format, Format::Json);
        assert!(reply.pretty && !reply.empty_details);
        assert_eq!(
            (p.body, p.response, p.upstream_accept.as_deref()),
            (BodyAction::PassThrough, PASS, None)
        );
        assert_eq!(p.response_format, Format::Json);
    }

    /// The router's 406: `Accept` matches none of the route's `Produces`.
    fn assert_router_406(p: &Plan, produces: &[&str], pretty: bool) {
        let reply = p.reply.as_ref().expect("a local 406");
        assert_eq!((reply.code, reply.reason), (406, "NotAcceptable"));
        assert_eq!(reply.message, router_not_acceptable_message(produces));
        assert_eq!(
            (reply.format, reply.pretty, reply.empty_details),
            (Format::Json, pretty, true)
        );
        assert_eq!(
            (p.body, p.response, p.upstream_accept.as_deref()),
            (BodyAction::PassThrough, PASS, None)
        );
    }

    fn assert_415(p: &Plan, message: &str, format: Format) {
        let reply = p.reply.as_ref().expect("a local 415");
        assert_eq!(
            (reply.code, reply.reason, reply.message.as_str()),
            (415, "UnsupportedMediaType", message)
        );
        assert_eq!(reply.format, format);
        assert_eq!(reply.empty_details, message == PATCH_UNSUPPORTED_MESSAGE);
        assert_eq!(
            (p.body, p.response, p.upstream_accept.as_deref()),
            (BodyAction::PassThrough, PASS, None)
        );
    }

    // ---- One test per row of WIRE.md §1 -------------------------------------------------

    #[test]
    fn row_request_body_cbor_post_put_delete_sent_upstream_as_json() {
        for (method, target, verb) in [
            ("POST", CM, "POST"),
            ("PUT", CM_ONE, "PUT"),
            ("DELETE", CM_ONE, "DELETE"),
            ("DELETE", CM, "DELETECOLLECTION"),
        ] {
            for ct in [
                "application/cbor",
                "application/cbor; charset=utf-8",
                "Application/CBOR",
            ] {
                let p = legacy(method, target, Some("application/json"), Some(ct));
                assert_eq!(p.body, TO_JSON, "{method} {ct}");
                assert_eq!(p.request_format, Format::Cbor);
                assert_eq!(p.verb, verb);
                assert_passthrough(&p, Format::Json);
            }
        }
    }

    #[test]
    fn row_apply_patch_cbor_sent_upstream_as_apply_patch_yaml() {
        let p = legacy(
            "PATCH",
            &format!("{CM}/cm-cbor-post?fieldManager=verify"),
            Some("application/cbor"),
            Some(APPLY_CBOR),
        );
        assert_eq!(
            p.body,
            BodyAction::CborToJson {
                upstream_content_type: APPLY_YAML,
                schema: Schema::Unstructured,
                kind: None,
            }
        );
        assert_eq!((p.verb, p.request_format), ("APPLY", Format::Cbor));
        assert_cbor(&p, JSON, false);
        // a-apply-cbor: Accept JSON, body apply CBOR.
        let p = legacy(
            "PATCH",
            CM_ONE,
            Some("application/json"),
            Some("application/apply-patch+cbor; x=y"),
        );
        assert_eq!(
            p.body,
            BodyAction::CborToJson {
                upstream_content_type: APPLY_YAML,
                schema: Schema::Unstructured,
                kind: None,
            }
        );
        assert_passthrough(&p, Format::Json);
    }

    #[test]
    fn row_other_cbor_patch_types_refused_with_415() {
        for ct in [
            "application/strategic-merge-patch+cbor",
            "application/merge-patch+cbor",
            "application/json-patch+cbor",
            "application/whatever+cbor",
            // The router compares case-sensitively: only the exact apply type is consumed.
            "Application/Apply-Patch+CBOR",
        ] {
            // The router's 415 is JSON, indented, even for a CBOR client (native-1.36
            // `patch-merge-cbor`, `patch-smp-cbor`): its serializer has no CBOR.
            let p = legacy("PATCH", CM_ONE, Some("application/cbor"), Some(ct));
            assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
            assert!(p.reply.as_ref().unwrap().pretty);
            assert_eq!(
                (p.verb, p.request_format, p.response_format),
                ("PATCH", Format::Cbor, Format::Json)
            );
            let p = legacy("PATCH", CM_ONE, Some("application/json"), Some(ct));
            assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
            assert!(!p.reply.unwrap().pretty);
            let p = legacy("PATCH", CM_ONE, None, Some(ct));
            assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
        }
    }

    #[test]
    fn row_patch_with_application_cbor_refused_with_415() {
        let p = legacy(
            "PATCH",
            CM_ONE,
            Some("application/cbor"),
            Some("application/cbor"),
        );
        // native-1.36 `patch-plain-cbor`: JSON, indented.
        assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
        assert!(p.reply.as_ref().unwrap().pretty);
        // The router checks the body type before Accept on PATCH: 415 wins over 406.
        let p = legacy("PATCH", CM_ONE, Some(TABLE), Some("application/cbor"));
        assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
        // Nothing negotiable for the error either: raw, indented JSON.
        assert!(p.reply.unwrap().pretty);
    }

    #[test]
    fn row_json_yaml_protobuf_and_json_patch_bodies_pass_through() {
        for (method, ct, format, verb) in [
            (
                "PATCH",
                "application/json-patch+json",
                Format::Json,
                "PATCH",
            ),
            (
                "PATCH",
                "application/merge-patch+json",
                Format::Json,
                "PATCH",
            ),
            (
                "PATCH",
                "application/strategic-merge-patch+json",
                Format::Json,
                "PATCH",
            ),
            (
                "PATCH",
                "application/apply-patch+yaml",
                Format::Yaml,
                "APPLY",
            ),
            (
                "POST",
                "application/vnd.kubernetes.protobuf",
                Format::Protobuf,
                "POST",
            ),
            ("POST", "application/json", Format::Json, "POST"),
            ("PUT", "application/yaml", Format::Yaml, "PUT"),
            ("POST", "text/plain", Format::Other, "POST"),
        ] {
            let target = if method == "POST" { CM } else { CM_ONE };
            let p = legacy(method, target, Some("application/cbor"), Some(ct));
            assert_eq!(p.body, BodyAction::PassThrough, "{ct}");
            assert_eq!((p.request_format, p.verb), (format, verb), "{ct}");
            assert_cbor(&p, JSON, false);
        }
    }

    #[test]
    fn row_accept_choosing_cbor_rewritten_and_transcoded() {
        let p = get(CM_ONE, "application/cbor");
        assert_cbor(&p, JSON, false);
        assert_eq!(p.response.content_type(), Some("application/cbor"));
        assert_eq!(
            (p.verb, p.request_format, p.body),
            ("GET", Format::None, BodyAction::PassThrough)
        );
        assert!(!p.long_running);
    }

    #[test]
    fn row_watch_choosing_cbor_streams_cbor_seq() {
        for target in [
            format!("{CM}?watch=true&timeoutSeconds=1"),
            format!("{CM}?watch=1"),
            "/api/v1/watch/namespaces/verify/configmaps".to_owned(),
            "/apis/apps/v1/watch/deployments?timeoutSeconds=5".to_owned(),
        ] {
            let p = get(&target, "application/cbor");
            assert_cbor(&p, JSON, true);
            assert_eq!(p.response.content_type(), Some("application/cbor-seq"));
            assert_eq!(p.verb, "WATCH");
            assert!(p.long_running);
            // An error ends a watch before it starts: one Status, plain CBOR.
            assert_eq!(p.response_for_status(410), TO_CBOR);
            assert_eq!(p.response_for_status(200), CBOR_SEQ);
        }
    }

    #[test]
    fn row_table_in_cbor_not_acceptable() {
        assert_406(&get(CM, TABLE)); // b-table-cbor
        assert_406(&get(CM_ONE, TABLE)); // b-table-cbor-get
        assert_eq!(get(CM, TABLE).verb, "LIST");
    }

    #[test]
    fn row_partial_object_metadata_in_cbor_allowed() {
        for (target, kind) in [
            (CM_ONE, "PartialObjectMetadata"),
            (CM, "PartialObjectMetadataList"),
        ] {
            let accept = format!("application/cbor;as={kind};g=meta.k8s.io;v=v1");
            let p = get(target, &accept);
            let upstream = format!("application/json;as={kind};g=meta.k8s.io;v=v1");
            assert_eq!(p.upstream_accept.as_deref(), Some(upstream.as_str()));
            assert_eq!(p.response, TO_CBOR);
            assert_eq!(
                p.response.content_type(),
                Some("application/cbor"),
                "no parameters"
            );
            // A server writes errors without transformation: nothing negotiable, raw JSON.
            assert_eq!((p.error_format, p.error_response), (Format::Json, PASS));
        }
    }

    #[test]
    fn row_cbor_seq_accept_not_acceptable() {
        // A collection's route produces `application/cbor-seq`: the handler refuses it
        // (b-watch-cborseq).
        assert_406(&get(
            &format!("{CM}?watch=true&timeoutSeconds=1"),
            "application/cbor-seq",
        ));
        // An object's route does not: the router's 406, indented (nothing negotiable for
        // the error), with `details: {}` (native-1.36 `accept-cbor-seq`).
        assert_router_406(&get(CM_ONE, "application/cbor-seq"), &PRODUCES_OBJECT, true);
    }

    #[test]
    fn row_json_yaml_protobuf_choices_pass_through() {
        for (accept, format) in [
            ("application/json", Format::Json),
            ("application/yaml", Format::Yaml),
            ("application/vnd.kubernetes.protobuf", Format::Protobuf),
            (
                "application/vnd.kubernetes.protobuf, application/cbor",
                Format::Protobuf,
            ),
        ] {
            let p = get(CM_ONE, accept);
            assert_passthrough(&p, format);
            assert_eq!(p.error_response, PASS);
        }
    }

    // ---- Accept headers -----------------------------------------------------------------

    #[test]
    fn client_go_dynamic_client_header() {
        assert_cbor(
            &get(CM, "application/json;q=0.9,application/cbor;q=1"),
            JSON,
            false,
        );
    }

    #[test]
    fn client_go_prefer_cbor_header() {
        assert_cbor(&get(CM_ONE, "application/cbor, */*"), JSON, false);
        assert_cbor(
            &get(CM_ONE, "application/cbor, application/json"),
            JSON,
            false,
        );
    }

    #[test]
    fn q_zero_clauses_are_kept_like_the_apiserver() {
        assert_cbor(&get(CM_ONE, "application/cbor;q=0"), JSON, false);
        assert_passthrough(
            &get(CM_ONE, "application/json;q=0, application/cbor;q=0"),
            Format::Json,
        );
        assert_cbor(
            &get(CM_ONE, "application/json;q=0, application/cbor"),
            JSON,
            false,
        );
    }

    #[test]
    fn wildcards_choose_json() {
        assert_passthrough(&get(CM_ONE, "*/*"), Format::Json); // b-get-star
                                                               // go-restful's router takes only `*/*` and literal types: `application/*` and `*`
                                                               // get its 406, compact JSON as the error negotiates JSON (native-1.36
                                                               // `accept-app-star`).
        assert_router_406(&get(CM_ONE, "application/*"), &PRODUCES_OBJECT, false);
        assert_router_406(&get(CM, "application/*"), &PRODUCES_COLLECTION, false);
        assert_router_406(&get(CM_ONE, "*"), &PRODUCES_OBJECT, false);
        // goautoneg sorts a concrete type before */* whatever the q values.
        assert_cbor(&get(CM_ONE, "*/*, application/cbor;q=0.5"), JSON, false);
    }

    #[test]
    fn missing_or_empty_accept_chooses_json() {
        assert_passthrough(&legacy("GET", CM_ONE, None, None), Format::Json); // b-get-noaccept
        assert_passthrough(&get(CM_ONE, ""), Format::Json);
        let p = legacy("POST", CM, None, Some("application/cbor")); // b-post-cbor-noaccept
        assert_eq!(p.body, TO_JSON);
        assert_passthrough(&p, Format::Json);
        assert_eq!(p.error_response, PASS);
    }

    #[test]
    fn table_fallback_clause_chooses_json_table() {
        // b-table-cbor-json-fb
        let p = get(
            CM,
            &format!("{TABLE}, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9"),
        );
        assert_passthrough(&p, Format::Json);
        assert_eq!(p.error_response, PASS);
    }

    #[test]
    fn error_format_follows_untransformed_clauses() {
        // JSON Table on success, but a real server writes an error in CBOR here.
        let p = get(
            CM,
            "application/json;as=Table;g=meta.k8s.io;v=v1, application/cbor",
        );
        assert_passthrough(&p, Format::Json);
        assert_eq!((p.error_format, p.error_response), (Format::Cbor, TO_CBOR));
        assert_eq!(p.response_for_status(200), PASS);
        assert_eq!(p.response_for_status(404), TO_CBOR);
        // b-missing-cbor: a 404 for a CBOR client is CBOR.
        let p = get(&format!("{CM}/does-not-exist"), "application/cbor");
        assert_eq!(p.response_for_status(404), TO_CBOR);
        assert_eq!(p.response_for_status(101), PASS);
        assert_eq!(
            p.response_for_status(304),
            TO_CBOR,
            "no body, but the plan stays the same"
        );
    }

    #[test]
    fn pretty_requests_shape_local_json_errors() {
        let reply = |accept: &str, target: &str| {
            legacy(
                "PATCH",
                target,
                Some(accept),
                Some("application/merge-patch+cbor"),
            )
            .reply
            .unwrap()
        };
        assert!(reply("application/json;pretty=1", CM_ONE).pretty);
        assert!(reply("application/json", &format!("{CM_ONE}?pretty=true")).pretty);
        assert!(!reply("application/json", &format!("{CM_ONE}?pretty=false")).pretty);
        // The router's serializer has no CBOR: nothing negotiable, so indented.
        assert!(reply("application/cbor;pretty=1", CM_ONE).pretty);
        // YAML or protobuf errors are written as JSON by cborgate.
        assert_eq!(reply("application/yaml", CM_ONE).format, Format::Json);
    }

    // ---- Which refusal comes first ------------------------------------------------------

    #[test]
    fn post_and_put_check_accept_before_the_body_type() {
        // a-post-cbor-acc-cbor: Accept is matched by the router first.
        for method in ["POST", "PUT"] {
            let target = if method == "POST" { CM } else { CM_ONE };
            assert_router_406(
                &legacy(
                    method,
                    target,
                    Some("application/cbor-seq"),
                    Some("application/merge-patch+cbor"),
                ),
                &PRODUCES_OBJECT,
                true,
            );
            let p = legacy(
                method,
                target,
                Some("application/cbor"),
                Some("application/merge-patch+cbor"),
            );
            assert_415(&p, BODY_UNSUPPORTED_MESSAGE, Format::Cbor);
            let p = legacy(method, target, None, Some("application/apply-patch+cbor"));
            assert_415(&p, BODY_UNSUPPORTED_MESSAGE, Format::Json);
        }
        // A valid CBOR body with an unservable Accept: 406, nothing sent upstream.
        assert_406(&legacy("POST", CM, Some(TABLE), Some("application/cbor")));
    }

    #[test]
    fn other_body_types_are_left_to_the_upstream() {
        let p = legacy(
            "POST",
            CM,
            Some("application/cbor"),
            Some("application/cbor-seq"),
        );
        assert_eq!((p.body, p.reply.as_ref()), (BodyAction::PassThrough, None));
        let p = legacy(
            "DELETE",
            CM_ONE,
            Some("application/cbor"),
            Some("application/merge-patch+cbor"),
        );
        assert_eq!((p.body, p.reply.as_ref()), (BodyAction::PassThrough, None));
        let p = legacy(
            "GET",
            CM_ONE,
            Some("application/json"),
            Some("application/cbor"),
        );
        assert_eq!(
            (p.body, p.request_format),
            (BodyAction::PassThrough, Format::Cbor)
        );
    }

    // ---- Routes ---------------------------------------------------------------------------

    /// Discovery is never transcoded (client-go 1.36 cannot decode CBOR discovery): JSON
    /// (or YAML, protobuf) whenever the client accepts one, asked for by name when the
    /// `Accept` also lists CBOR; a CBOR-only `Accept` gets the 406 a CRD group's
    /// discovery gets on a CBOR-enabled server (native-1.36 `disc-apis-cr-v1`).
    #[test]
    fn group_version_discovery_is_never_transcoded() {
        let disc_406 = |p: &Plan| {
            let r = p.reply.as_ref().expect("a local 406");
            assert_eq!(
                (
                    r.code,
                    r.message.as_str(),
                    r.format,
                    r.pretty,
                    r.empty_details
                ),
                (
                    406,
                    DISCOVERY_NOT_ACCEPTABLE_MESSAGE,
                    Format::Json,
                    true,
                    false
                )
            );
            assert_eq!((p.response, p.upstream_accept.as_deref()), (PASS, None));
        };
        for (path, group) in [
            ("/api/v1", ""),
            ("/apis/apps/v1", "apps"),
            ("/apis/harness.example.com/v1", "harness.example.com"),
        ] {
            let p = get(path, "application/cbor");
            disc_406(&p);
            assert_eq!((p.verb, p.route.group()), ("GET", Some(group)));
            disc_406(&get(path, "application/cbor-seq"));
            disc_406(&get(
                path,
                "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            ));
            // client-go's generated clients and dynamic client: JSON, asked for by name.
            for accept in [
                "application/cbor, */*",
                "application/json;q=0.9,application/cbor;q=1",
                "application/cbor, application/json;q=0.9",
            ] {
                let p = get(path, accept);
                assert_eq!(p.reply, None, "{accept}");
                assert_eq!(p.response, PASS, "{accept}");
                assert_eq!(p.response_format, Format::Json, "{accept}");
                assert_eq!(p.upstream_accept.as_deref(), Some(JSON), "{accept}");
                // auto mode asks no CBOR-enabled upstream for CBOR here either.
                let auto = plan(&head("GET", path, Some(accept), None), UpstreamMode::Auto);
                assert_eq!(auto.upstream_accept.as_deref(), Some(JSON), "{accept}");
            }
            let p = get(path, "application/cbor, application/yaml");
            assert_eq!(p.upstream_accept.as_deref(), Some("application/yaml"));
            // No CBOR in `Accept`: byte for byte.
            assert_passthrough(&get(path, "application/json"), Format::Json);
            assert_passthrough(&get(path, "*/*"), Format::Json);
            // Native mode changes nothing and answers nothing.
            let p = plan(
                &head("GET", path, Some("application/cbor"), None),
                UpstreamMode::Native,
            );
            assert_eq!(
                (p.reply.as_ref(), p.upstream_accept.as_deref()),
                (None, None)
            );
            // Methods without a route: no 406 of our own, the upstream's 405 is transcoded.
            let p = legacy(
                "POST",
                path,
                Some("application/cbor-seq"),
                Some("application/cbor"),
            );
            assert_eq!(
                (p.reply.as_ref(), p.body, p.error_response),
                (None, BodyAction::PassThrough, PASS)
            );
            let p = legacy("POST", path, Some("application/cbor"), None);
            assert_eq!(
                (p.response, p.error_response, p.verb),
                (PASS, TO_CBOR, "POST")
            );
        }
    }

    #[test]
    fn discovery_without_cbor_and_other_paths_pass_through() {
        for (path, format) in [
            ("/api", Format::Json),  // b-api-cbor
            ("/apis", Format::Json), // b-apis-cbor
            ("/apis/apps", Format::Json),
            ("/version", Format::Other), // b-version-cbor
            ("/openapi/v3", Format::Other),
            ("/openapi/v2", Format::Other),
            ("/healthz", Format::Other),
            ("/livez", Format::Other),
            ("/readyz", Format::Other),
            ("/metrics", Format::Other),
            ("/nonsense/path", Format::Other),
        ] {
            for accept in ["application/cbor", "application/cbor-seq", TABLE] {
                let p = get(path, accept);
                assert_passthrough(&p, format);
                assert_eq!((p.error_response, p.verb), (PASS, "GET"), "{path}");
                assert_eq!(p.capability_key(), None);
            }
        }
        // Aggregated discovery: b-aggdisc-cbor, b-aggdisc-json.
        let p = get(
            "/apis",
            "application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        );
        assert_passthrough(&p, Format::Json);
        let p = get("/api", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
        assert_passthrough(&p, Format::Protobuf);
    }

    #[test]
    fn connect_subresources_and_upgrades_are_never_transcoded() {
        for sub in ["exec", "attach", "portforward", "proxy", "log"] {
            let target = format!("/api/v1/namespaces/ns/pods/p/{sub}?follow=true");
            let p = legacy("GET", &target, Some("application/cbor"), None);
            assert_eq!((p.reply.as_ref(), p.response), (None, PASS));
            assert_eq!(p.response_format, Format::Other);
            // A legacy upstream's router would refuse CBOR that the handler ignores
            // (native-1.36 `pod-log` is served): it is asked for JSON.
            assert_eq!(p.upstream_accept.as_deref(), Some("application/json"));
            assert_passthrough(
                &legacy("GET", &target, Some("text/plain, */*"), None),
                Format::Other,
            );
            let native = head("GET", &target, Some("application/cbor"), None);
            assert_passthrough(&plan(&native, UpstreamMode::Native), Format::Other);
            assert_eq!((p.verb, p.long_running), ("CONNECT", true), "{sub}");
            assert!(p.needs_http1(), "{sub}");
            // Their errors are ordinary Status objects.
            assert_eq!(p.error_response, TO_CBOR);
            let p = legacy(
                "POST",
                &target,
                Some("application/cbor"),
                Some("application/cbor"),
            );
            assert_eq!(p.body, BodyAction::PassThrough);
        }
        let upgrade = RequestHead {
            upgrade: true,
            ..head(
                "POST",
                "/api/v1/namespaces/ns/pods/p/exec?command=sh",
                Some("application/cbor"),
                Some("application/cbor"),
            )
        };
        for mode in [
            UpstreamMode::Legacy,
            UpstreamMode::Native,
            UpstreamMode::Auto,
        ] {
            let p = plan(&upgrade, mode);
            assert_passthrough(&p, Format::Other);
            assert_eq!(
                (p.verb, p.body, p.error_response, p.long_running),
                ("CONNECT", BodyAction::PassThrough, PASS, true)
            );
        }
        let p = plan(
            &RequestHead {
                upgrade: true,
                ..head("GET", CM_ONE, Some(TABLE), None)
            },
            UpstreamMode::Legacy,
        );
        assert!(p.needs_http1());
        assert_eq!((p.verb, p.reply), ("CONNECT", None));
        // Everything else may go over HTTP/2: objects, lists, watches, logs are not upgrades.
        for target in [CM_ONE, CM, &format!("{CM}?watch=1")] {
            assert!(!legacy("GET", target, Some("application/cbor"), None).needs_http1());
        }
    }

    #[test]
    fn methods_without_routes_are_passed_on() {
        for method in ["OPTIONS", "TRACE", "BREW", ""] {
            let p = legacy(
                method,
                CM_ONE,
                Some("application/cbor-seq"),
                Some("application/cbor"),
            );
            assert_eq!(
                (p.reply.as_ref(), p.body, p.upstream_accept.as_deref()),
                (None, BodyAction::PassThrough, None)
            );
        }
        let p = legacy("OPTIONS", CM_ONE, Some("application/cbor"), None);
        assert_eq!(
            (p.verb, p.response, p.error_response, p.response_format),
            ("OPTIONS", PASS, TO_CBOR, Format::Cbor)
        );
    }

    #[test]
    fn verbs_for_every_case() {
        let v =
            |method, target: &str, ct| legacy(method, target, Some("application/cbor"), ct).verb;
        assert_eq!(v("GET", CM_ONE, None), "GET");
        assert_eq!(v("GET", CM, None), "LIST");
        assert_eq!(v("GET", &format!("{CM}?watch=true"), None), "WATCH");
        assert_eq!(v("GET", &format!("{CM}?watch=1"), None), "WATCH");
        assert_eq!(v("GET", &format!("{CM}?watch=false"), None), "LIST");
        assert_eq!(v("GET", "/api/v1/watch/pods", None), "WATCH");
        assert_eq!(v("POST", CM, Some("application/cbor")), "POST");
        assert_eq!(v("PUT", CM_ONE, Some("application/cbor")), "PUT");
        assert_eq!(
            v("PATCH", CM_ONE, Some("application/merge-patch+json")),
            "PATCH"
        );
        assert_eq!(
            v("PATCH", CM_ONE, Some("application/apply-patch+yaml")),
            "APPLY"
        );
        assert_eq!(
            v("PATCH", CM_ONE, Some("application/apply-patch+cbor")),
            "APPLY"
        );
        assert_eq!(
            v("PATCH", CM_ONE, Some("application/merge-patch+cbor")),
            "PATCH"
        );
        assert_eq!(v("DELETE", CM_ONE, None), "DELETE");
        assert_eq!(v("DELETE", CM, None), "DELETECOLLECTION");
        assert_eq!(v("HEAD", CM_ONE, None), "HEAD");
        assert_eq!(v("OPTIONS", CM_ONE, None), "OPTIONS");
        assert_eq!(
            v("GET", "/api/v1/namespaces/ns/pods/p/log", None),
            "CONNECT"
        );
        assert_eq!(v("PROPFIND", CM_ONE, None), "OTHER");
        assert_eq!(v("GET", "/version", None), "GET");
        assert_eq!(v("get", CM, None), "LIST");
    }

    #[test]
    fn capability_key_is_verb_group_resource() {
        let p = legacy(
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/web/scale",
            Some("application/cbor"),
            Some(APPLY_CBOR),
        );
        assert_eq!(p.capability_key(), Some(("APPLY", "apps", "deployments")));
        assert_eq!(
            get(CM, "application/cbor").capability_key(),
            Some(("LIST", "", "configmaps"))
        );
        assert_eq!(
            get("/apis/apps/v1", "application/cbor").capability_key(),
            None
        );
    }

    // ---- Modes ----------------------------------------------------------------------------

    #[test]
    fn native_mode_changes_nothing_but_still_labels() {
        let native = |method, target, accept, ct| {
            plan(&head(method, target, accept, ct), UpstreamMode::Native)
        };
        let cases = [
            (
                "GET",
                CM_ONE,
                Some("application/cbor"),
                None,
                "GET",
                Format::Cbor,
            ),
            ("GET", CM, Some(TABLE), None, "LIST", Format::Json),
            (
                "POST",
                CM,
                Some("application/cbor"),
                Some("application/cbor"),
                "POST",
                Format::Cbor,
            ),
            // The router's 415, JSON even for a CBOR client (native-1.36 `patch-merge-cbor`).
            (
                "PATCH",
                CM_ONE,
                Some("application/cbor"),
                Some("application/merge-patch+cbor"),
                "PATCH",
                Format::Json,
            ),
            (
                "PATCH",
                CM_ONE,
                Some("application/cbor"),
                Some(APPLY_CBOR),
                "APPLY",
                Format::Cbor,
            ),
            (
                "GET",
                "/api/v1",
                Some("application/cbor"),
                None,
                "GET",
                Format::Cbor,
            ),
            (
                "GET",
                "/api",
                Some("application/cbor"),
                None,
                "GET",
                Format::Json,
            ),
        ];
        for (method, target, accept, ct, verb, format) in cases {
            let p = native(method, target, accept, ct);
            assert_eq!(
                (p.verb, p.response_format),
                (verb, format),
                "{method} {target}"
            );
            assert_eq!(
                (p.body, p.response, p.error_response),
                (BodyAction::PassThrough, PASS, PASS)
            );
            assert_eq!(
                (p.upstream_accept.as_deref(), p.reply.as_ref()),
                (None, None)
            );
            assert_eq!(
                p.request_format,
                if ct.is_some() {
                    Format::Cbor
                } else {
                    Format::None
                }
            );
        }
    }

    /// `auto` is the legacy plan plus the CBOR-first body and `Accept` (table).
    #[test]
    fn auto_is_legacy_made_cbor_first() {
        use crate::negotiate::auto::REPLAYABLE_BODY;
        let small = Some(100);
        let large = Some(REPLAYABLE_BODY + 1);
        // (method, target, accept, content type, declared length, learned,
        //  CBOR-first body, CBOR-first Accept)
        let cases = [
            (
                "GET",
                CM_ONE,
                Some("application/cbor"),
                None,
                None,
                None,
                false,
                true,
            ),
            (
                "GET",
                CM,
                Some("application/cbor"),
                None,
                None,
                Some(Learned::NeedsJson),
                false,
                true,
            ),
            (
                "POST",
                CM,
                Some("application/cbor"),
                Some("application/cbor"),
                small,
                None,
                true,
                true,
            ),
            (
                "POST",
                CM,
                Some("application/json"),
                Some("application/cbor"),
                small,
                None,
                true,
                false,
            ),
            (
                "PUT",
                CM_ONE,
                None,
                Some("application/cbor"),
                small,
                Some(Learned::SpeaksCbor),
                true,
                false,
            ),
            // Known to need JSON, too large to replay, or unframed: JSON at once.
            (
                "POST",
                CM,
                None,
                Some("application/cbor"),
                small,
                Some(Learned::NeedsJson),
                false,
                false,
            ),
            (
                "POST",
                CM,
                None,
                Some("application/cbor"),
                large,
                None,
                false,
                false,
            ),
            (
                "POST",
                CM,
                None,
                Some("application/cbor"),
                None,
                None,
                false,
                false,
            ),
            (
                "PATCH",
                CM_ONE,
                None,
                Some("application/apply-patch+cbor"),
                small,
                None,
                true,
                false,
            ),
            // /api/v1 is never asked for CBOR (1.36 drops that request).
            (
                "GET",
                "/api/v1",
                Some("application/cbor"),
                None,
                None,
                None,
                false,
                false,
            ),
            (
                "GET",
                "/apis/apps/v1",
                Some("application/cbor"),
                None,
                None,
                None,
                false,
                false,
            ),
            // Refused or untouched requests are the legacy plan exactly.
            (
                "PATCH",
                CM_ONE,
                None,
                Some("application/json-patch+cbor"),
                small,
                None,
                false,
                false,
            ),
            (
                "POST",
                CM,
                Some(TABLE),
                Some("application/cbor"),
                small,
                None,
                false,
                false,
            ),
            (
                "GET",
                "/version",
                Some("application/cbor"),
                None,
                None,
                None,
                false,
                false,
            ),
        ];
        for (method, target, accept, ct, len, learned, cbor_body, cbor_accept) in cases {
            let h = RequestHead {
                declared_len: len,
                ..head(method, target, accept, ct)
            };
            let asked = std::cell::Cell::new(None);
            let auto = plan_with(&h, UpstreamMode::Auto, |key| {
                asked.set(Some((key.0, key.1.to_string(), key.2.to_string())));
                learned
            });
            let legacy = plan(&h, UpstreamMode::Legacy);
            let what = format!("{method} {target} {accept:?} {ct:?} {len:?} {learned:?}");
            assert_eq!(auto.cbor_first, cbor_body, "{what}");
            if let Some((verb, _, resource)) = asked.take() {
                assert_eq!(
                    (verb, resource.as_str()),
                    (legacy.verb, "configmaps"),
                    "{what}"
                );
            }
            let want_accept = match (&legacy.upstream_accept, cbor_accept) {
                (Some(a), true) => Some(format!(
                    "{}, {a};q=0.9",
                    a.replacen("application/json", "application/cbor", 1)
                )),
                (a, false) => a.clone(),
                (None, true) => panic!("{what}: no Accept to make CBOR-first"),
            };
            assert_eq!(auto.upstream_accept, want_accept, "{what}");
            // Everything else is the legacy plan.
            // What was learned of a CBOR answer keeps the client's Accept-Encoding, so a
            // CBOR-enabled upstream's gzip passes through.
            let speaks = learned == Some(Learned::SpeaksCbor);
            assert_eq!(auto.upstream_speaks_cbor, speaks, "{what}");
            assert_eq!(
                auto.strips_accept_encoding(),
                legacy.strips_accept_encoding() && !speaks,
                "{what}"
            );
            let rest = Plan {
                cbor_first: legacy.cbor_first,
                upstream_accept: legacy.upstream_accept.clone(),
                mode: legacy.mode,
                upstream_speaks_cbor: legacy.upstream_speaks_cbor,
                ..auto.clone()
            };
            assert_eq!(rest, legacy, "{what}");
            // The first attempt sends a CBOR-first body untouched; the replay transcodes.
            let first = if cbor_body {
                BodyAction::PassThrough
            } else {
                auto.body
            };
            assert_eq!(auto.body_for_attempt(false), first, "{what}");
            assert_eq!(auto.body_for_attempt(true), auto.body, "{what}");
        }
        assert_eq!(UpstreamMode::default(), UpstreamMode::Auto);
    }

    #[test]
    fn upgrade_turns_json_clients_into_cbor_upstream() {
        let to_json = ResponseAction::CborToJson { watch: false };
        // GET: ask for CBOR, answer JSON.
        let p = plan(
            &head("GET", CM_ONE, Some("application/json"), None),
            UpstreamMode::Upgrade,
        );
        assert_eq!(p.upstream_accept.as_deref(), Some("application/cbor"));
        assert_eq!((p.response, p.error_response), (to_json, to_json));
        assert_eq!(p.response.content_type(), Some("application/json"));
        // No Accept at all is a JSON client too; parameters are kept.
        let p = plan(&head("GET", CM, None, None), UpstreamMode::Upgrade);
        assert_eq!(p.upstream_accept.as_deref(), Some("application/cbor"));
        let pom = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let p = plan(&head("GET", CM, Some(pom), None), UpstreamMode::Upgrade);
        assert_eq!(
            p.upstream_accept.as_deref(),
            Some("application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        );
        // Bodies: JSON becomes CBOR, apply YAML (JSON text) becomes apply CBOR.
        let pods = "/api/v1/namespaces/verify/pods";
        for (method, target, ct, want) in [
            ("POST", pods, "application/json", "application/cbor"),
            (
                "PUT",
                &format!("{pods}/p")[..],
                "application/json",
                "application/cbor",
            ),
            ("DELETE", CM_ONE, "application/json", "application/cbor"),
            (
                "POST",
                "/apis/harness.example.com/v1/namespaces/a/widgets",
                "application/json",
                "application/cbor",
            ),
            (
                "PATCH",
                CM_ONE,
                "application/apply-patch+yaml",
                "application/apply-patch+cbor",
            ),
        ] {
            let p = plan(
                &head(method, target, Some("application/json"), Some(ct)),
                UpstreamMode::Upgrade,
            );
            assert_eq!(
                p.body,
                BodyAction::JsonToCbor {
                    upstream_content_type: want
                },
                "{method} {ct}"
            );
        }
        // A kind with `[]byte` fields (or fields not known) keeps its JSON body: a CBOR
        // string there would be taken as the bytes, not as their base64.
        for (method, target) in [
            ("POST", CM),
            ("PUT", CM_ONE),
            ("POST", "/api/v1/namespaces/verify/secrets"),
            (
                "POST",
                "/apis/certificates.k8s.io/v9/certificatesigningrequests",
            ),
        ] {
            let p = plan(
                &head(
                    method,
                    target,
                    Some("application/json"),
                    Some("application/json"),
                ),
                UpstreamMode::Upgrade,
            );
            assert_eq!(
                (p.body, p.response),
                (BodyAction::PassThrough, to_json),
                "{target}"
            );
        }
        // Patch types with no CBOR form keep their body; the answer is still upgraded.
        let p = plan(
            &head(
                "PATCH",
                CM_ONE,
                Some("application/json"),
                Some("application/merge-patch+json"),
            ),
            UpstreamMode::Upgrade,
        );
        assert_eq!((p.body, p.response), (BodyAction::PassThrough, to_json));
        // Watches: cbor-seq back to a JSON stream.
        let p = plan(
            &head(
                "GET",
                &format!("{CM}?watch=1"),
                Some("application/json"),
                None,
            ),
            UpstreamMode::Upgrade,
        );
        assert_eq!(p.response, ResponseAction::CborToJson { watch: true });
        // Left alone: Tables, CBOR, YAML and protobuf clients, non-object paths.
        for (target, accept) in [
            (CM, TABLE),
            (CM_ONE, "application/cbor"),
            (CM_ONE, "application/yaml"),
            (CM_ONE, "application/vnd.kubernetes.protobuf"),
            ("/version", "application/json"),
            ("/apis", "application/json"),
        ] {
            let p = plan(
                &head("GET", target, Some(accept), None),
                UpstreamMode::Upgrade,
            );
            assert_eq!(
                (p.body, p.response, p.upstream_accept),
                (BodyAction::PassThrough, PASS, None),
                "{target} {accept}"
            );
        }
    }

    // ---- The recorded exchanges (../corpus/exchanges), as cborgate must answer them -----

    #[derive(Debug)]
    enum Want {
        /// Transcoded to CBOR (watch or not), with this body action.
        Cbor(bool, BodyAction),
        /// Passed through in this format, with this body action.
        Pass(Format, BodyAction),
        /// Refused locally with this code.
        Reply(u16),
        /// Discovery: passed through as JSON, asked for by name. Where the recording shows
        /// CBOR (or the 1.36 server's reset of `/api/v1`), cborgate departs on purpose:
        /// client-go 1.36 cannot decode CBOR discovery (docs/wire.md §1).
        DiscoveryJson,
    }

    #[test]
    fn recorded_exchanges() {
        use Want::*;
        let none = BodyAction::PassThrough;
        let apply = BodyAction::CborToJson {
            upstream_content_type: APPLY_YAML,
            schema: Schema::Unstructured,
            kind: None,
        };
        let pom = "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let fallback = "application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9";
        let aggregated = "application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let watch = "/api/v1/namespaces/verify/configmaps?watch=true&timeoutSeconds=1";
        let missing = "/api/v1/namespaces/verify/configmaps/does-not-exist";
        let posted = "/api/v1/namespaces/verify/configmaps/cm-cbor-post";
        let cases = [
            (
                "b-post-cbor",
                "POST",
                CM,
                Some("application/cbor"),
                Some("application/cbor"),
                Cbor(false, TO_JSON),
            ),
            (
                "b-post-cbor-noaccept",
                "POST",
                CM,
                None,
                Some("application/cbor"),
                Pass(Format::Json, TO_JSON),
            ),
            (
                "b-get-cbor",
                "GET",
                CM_ONE,
                Some("application/cbor"),
                None,
                Cbor(false, none),
            ),
            (
                "b-get-json",
                "GET",
                CM_ONE,
                Some("application/json"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-get-cbor-json-q09",
                "GET",
                CM_ONE,
                Some("application/cbor, application/json;q=0.9"),
                None,
                Cbor(false, none),
            ),
            (
                "b-get-json-cbor-q09",
                "GET",
                CM_ONE,
                Some("application/json;q=0.9, application/cbor"),
                None,
                Cbor(false, none),
            ),
            (
                "b-get-noaccept",
                "GET",
                CM_ONE,
                None,
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-get-star",
                "GET",
                CM_ONE,
                Some("*/*"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-list-cbor",
                "GET",
                CM,
                Some("application/cbor"),
                None,
                Cbor(false, none),
            ),
            ("b-table-cbor", "GET", CM, Some(TABLE), None, Reply(406)),
            (
                "b-table-cbor-get",
                "GET",
                CM_ONE,
                Some(TABLE),
                None,
                Reply(406),
            ),
            (
                "b-pom-cbor",
                "GET",
                CM_ONE,
                Some(pom),
                None,
                Cbor(false, none),
            ),
            (
                "b-missing-cbor",
                "GET",
                missing,
                Some("application/cbor"),
                None,
                Cbor(false, none),
            ),
            (
                "b-missing-json",
                "GET",
                missing,
                Some("application/json"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-api-cbor",
                "GET",
                "/api",
                Some("application/cbor"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-apis-cbor",
                "GET",
                "/apis",
                Some("application/cbor"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-apiv1-cbor",
                "GET",
                "/api/v1",
                Some("application/cbor"),
                None,
                Reply(406),
            ),
            (
                "b-aggdisc-cbor",
                "GET",
                "/apis",
                Some(aggregated),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-aggdisc-json",
                "GET",
                "/apis",
                Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-version-cbor",
                "GET",
                "/version",
                Some("application/cbor"),
                None,
                Pass(Format::Other, none),
            ),
            (
                "b-openapiv3-cbor",
                "GET",
                "/openapi/v3",
                Some("application/cbor"),
                None,
                Pass(Format::Other, none),
            ),
            (
                "b-apply-cbor",
                "PATCH",
                "/api/v1/namespaces/verify/configmaps/cm-cbor-post?fieldManager=verify",
                Some("application/cbor"),
                Some(APPLY_CBOR),
                Cbor(false, apply),
            ),
            (
                "b-mergepatch-cbor",
                "PATCH",
                posted,
                Some("application/cbor"),
                Some("application/merge-patch+json"),
                Cbor(false, none),
            ),
            (
                "b-put-cbor",
                "PUT",
                posted,
                Some("application/cbor"),
                Some("application/cbor"),
                Cbor(false, TO_JSON),
            ),
            (
                "b-badcbor",
                "POST",
                CM,
                Some("application/cbor"),
                Some("application/cbor"),
                Cbor(false, TO_JSON),
            ),
            (
                "b-delete-cbor",
                "DELETE",
                posted,
                Some("application/cbor"),
                None,
                Cbor(false, none),
            ),
            (
                "b-apis-apps-v1-cbor",
                "GET",
                "/apis/apps/v1",
                Some("application/cbor"),
                None,
                Reply(406),
            ),
            (
                "b-apis-apps-cbor",
                "GET",
                "/apis/apps",
                Some("application/cbor"),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-apiv1-cbor-json-q09",
                "GET",
                "/api/v1",
                Some("application/cbor, application/json;q=0.9"),
                None,
                DiscoveryJson,
            ),
            (
                "b-table-cbor-json-fb",
                "GET",
                CM,
                Some(fallback),
                None,
                Pass(Format::Json, none),
            ),
            (
                "b-yaml",
                "GET",
                CM_ONE,
                Some("application/yaml"),
                None,
                Pass(Format::Yaml, none),
            ),
            (
                "b-protobuf",
                "GET",
                CM_ONE,
                Some("application/vnd.kubernetes.protobuf"),
                None,
                Pass(Format::Protobuf, none),
            ),
            (
                "b-watch-cbor",
                "GET",
                watch,
                Some("application/cbor"),
                None,
                Cbor(true, none),
            ),
            (
                "b-watch-cborseq",
                "GET",
                watch,
                Some("application/cbor-seq"),
                None,
                Reply(406),
            ),
        ];
        for (name, method, target, accept, ct, want) in cases {
            let p = legacy(method, target, accept, ct);
            match want {
                Cbor(watch, body) => {
                    assert_eq!(p.reply, None, "{name}");
                    assert_eq!(
                        (p.response, p.body),
                        (ResponseAction::JsonToCbor { watch }, body),
                        "{name}"
                    );
                    assert!(
                        p.upstream_accept
                            .as_deref()
                            .is_some_and(|a| a.starts_with(JSON)),
                        "{name}"
                    );
                }
                Pass(format, body) => {
                    assert_eq!(
                        (p.reply.as_ref(), p.upstream_accept.as_deref()),
                        (None, None),
                        "{name}"
                    );
                    assert_eq!(
                        (p.response, p.response_format, p.body),
                        (PASS, format, body),
                        "{name}"
                    );
                }
                Reply(code) => assert_eq!(p.reply.map(|r| r.code), Some(code), "{name}"),
                DiscoveryJson => {
                    assert_eq!((p.reply.as_ref(), p.response), (None, PASS), "{name}");
                    assert_eq!(p.upstream_accept.as_deref(), Some(JSON), "{name}");
                }
            }
        }
        // b-watch-json
        assert_passthrough(&get(watch, "application/json"), Format::Json);
    }

    // ---- Garbage ---------------------------------------------------------------------------

    fn check_invariants(h: &RequestHead<'_>) {
        for mode in [
            UpstreamMode::Legacy,
            UpstreamMode::Native,
            UpstreamMode::Auto,
            UpstreamMode::Upgrade,
        ] {
            let p = plan(h, mode);
            assert!(VERBS.contains(&p.verb), "{h:?}");
            if let Some(reply) = &p.reply {
                assert!(matches!(reply.code, 406 | 415), "{h:?}");
                assert!(matches!(reply.format, Format::Json | Format::Cbor));
                assert_eq!(
                    (p.body, p.response, p.upstream_accept.as_deref()),
                    (BodyAction::PassThrough, PASS, None)
                );
            }
            // An `Accept` goes upstream rewritten when the answer is transcoded, or to keep
            // CBOR away from discovery and connect subresources.
            let untransformed = matches!(&p.route, Route::GroupVersionDiscovery { .. })
                || matches!(&p.route, Route::Resource(r) if r.is_connect());
            if !untransformed {
                assert_eq!(p.upstream_accept.is_some(), p.response != PASS, "{h:?}");
            }
            // auto's `Accept` is the legacy one, or the legacy one made CBOR-first.
            let legacy = plan(h, UpstreamMode::Legacy).upstream_accept;
            if mode == UpstreamMode::Auto && p.upstream_accept != legacy {
                let json = legacy.clone().expect("auto rewrites only an Accept it has");
                let cbor = json.replacen(JSON, CBOR, 1);
                assert_eq!(p.upstream_accept, Some(format!("{cbor}, {json};q=0.9")));
            }
            let checked = if mode == UpstreamMode::Auto {
                &legacy
            } else {
                &p.upstream_accept
            };
            if let Some(accept) = checked {
                let target = match p.response {
                    ResponseAction::CborToJson { .. } => CBOR,
                    _ => JSON,
                };
                assert!(
                    accept.starts_with(target) && !accept.contains(','),
                    "{accept:?}"
                );
                assert!(
                    accept
                        .bytes()
                        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f)),
                    "{accept:?}"
                );
                assert!(accept.len() <= h.accept.map_or(0, str::len) + CBOR.len());
            }
            if mode == UpstreamMode::Native {
                assert_eq!(
                    (p.reply.as_ref(), p.body, p.response),
                    (None, BodyAction::PassThrough, PASS)
                );
            }
            if h.upgrade {
                assert_eq!(
                    (p.verb, p.reply.as_ref(), p.body, p.response),
                    ("CONNECT", None, BodyAction::PassThrough, PASS)
                );
            }
        }
    }

    #[test]
    fn garbage_headers_never_panic() {
        let long_accept = "application/cbor;".repeat(5_000);
        let many = ",;=/*".repeat(5_000);
        let nasty = [
            "",
            " ",
            ",",
            ";",
            "=",
            "/",
            "*",
            "*/",
            "/*",
            ";;;",
            ",,,",
            "=;=,=",
            "a/b;=;==;===",
            "application/cbor;q=",
            "application/cbor;q=nan",
            "application/cbor;q=-inf, */*;q=inf",
            "application/cbor;as=;g=;v=",
            "application/cbor;stream=watch;stream=",
            "\u{0}\u{1}\u{7f}",
            "appl\u{e9}cation/cbor",
            "application/cbor;x=\"a,b\"",
            "\r\napplication/cbor",
            "application/cbor\tq=1",
            long_accept.as_str(),
            many.as_str(),
        ];
        let paths = [
            "",
            "/",
            "//",
            "/api/",
            "/api/v1/%",
            "/api/v1/%zz",
            "/apis/%2F/v1/x",
            "/api/v1/namespaces//x",
            "/\u{0}",
            "*",
            "/api/v1/watch/",
        ];
        for accept in nasty {
            for path in paths
                .iter()
                .chain([CM, CM_ONE, "/api/v1", "/apis/apps/v1"].iter())
            {
                for (method, ct) in [
                    ("GET", None),
                    ("PATCH", Some(accept)),
                    ("POST", Some(accept)),
                    ("\u{0}", Some(";")),
                ] {
                    let query = Some(accept);
                    check_invariants(&RequestHead {
                        method,
                        path,
                        query,
                        accept: Some(accept),
                        content_type: ct,
                        upgrade: false,
                        declared_len: None,
                        accept_encoding: None,
                        compress_responses: false,
                    });
                    check_invariants(&RequestHead {
                        method,
                        path,
                        query,
                        accept: Some(accept),
                        content_type: ct,
                        upgrade: true,
                        declared_len: Some(10),
                        accept_encoding: None,
                        compress_responses: false,
                    });
                }
            }
        }
    }

    #[test]
    fn random_heads_never_panic() {
        const ALPHABET: &[u8] = b"application/cborjsyamlvnd.kubernetes.protobuf+-*/;,= q0.1965eE%&?watchpretty\"\t\\api/v1namespaces";
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = move || crate::negotiate::media::xorshift_next(&mut state);
        for round in 0..3_000_u64 {
            let mut field = |len: u64| -> String {
                let bytes: Vec<u8> = (0..next() % len)
                    .map(|_| {
                        let r = next();
                        if r % 5 == 0 {
                            (r >> 8) as u8
                        } else {
                            ALPHABET[(r >> 8) as usize % ALPHABET.len()]
                        }
                    })
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            };
            let accept = field(120);
            let path = format!("/{}", field(60));
            let query = field(40);
            let content_type = field(40);
            let method =
                ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "x"][(round % 7) as usize];
            check_invariants(&RequestHead {
                method,
                path: &path,
                query: Some(&query),
                accept: Some(&accept),
                content_type: Some(&content_type),
                upgrade: round % 11 == 0,
                declared_len: (round % 3 != 0).then_some(round * 37),
                accept_encoding: None,
                compress_responses: false,
            });
            check_invariants(&RequestHead {
                method,
                path: if round % 2 == 0 { CM } else { "/api/v1" },
                query: None,
                accept: Some(&accept),
                content_type: Some(&content_type),
                upgrade: false,
                declared_len: Some(round * 41),
                accept_encoding: None,
                compress_responses: false,
            });
        }
    }

    /// (mode, Accept-Encoding, server.compress_responses) → client_gzip; the same for
    /// every mode, since the response decides whether anything is transcoded.
    #[test]
    fn client_gzip_needs_the_client_and_the_configuration() {
        use UpstreamMode::*;
        #[rustfmt::skip]
        let cases: &[(Option<&str>, bool, bool)] = &[
            (Some("gzip"), true, true),
            (Some("gzip"), false, false),
            (Some("gzip;q=0"), true, false),
            (Some("deflate"), true, false),
            (Some("br, *"), true, true),
            (None, true, false),
        ];
        for &(ae, on, want) in cases {
            for mode in [Legacy, Auto, Native, Upgrade] {
                let h = RequestHead {
                    accept_encoding: ae,
                    compress_responses: on,
                    ..head("GET", CM, Some("application/cbor"), None)
                };
                assert_eq!(plan(&h, mode).client_gzip, want, "{mode:?} {ae:?} {on}");
            }
        }
    }
}
