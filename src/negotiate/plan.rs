//! The decision table (docs/wire.md §1, §4, §5): one request head in, one [`Plan`] out, decided
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

use std::borrow::Cow;

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
    /// Transcode CBOR to JSON (docs/wire.md §3) and send it with this `Content-Type` (and a new
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
    /// Upgrade mode: transcode a JSON body to CBOR (docs/wire.md §2 rules) and send it with this
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
    /// The upstream answers JSON (it was asked for JSON): transcode it (docs/wire.md §2) and
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
/// (docs/wire.md §4) with `status: Failure`.
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
    pub verb: route::Verb,
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
    pub upstream_accept: Option<Cow<'static, str>>,
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
        self.verb == route::Verb::Connect
    }

    /// The key under which upstream capabilities are remembered: (verb, group, resource),
    /// for resource routes only.
    pub fn capability_key(&self) -> Option<CapabilityKey<'_>> {
        match &self.route {
            Route::Resource(r) => Some((self.verb.label(), r.group.as_str(), r.resource.as_str())),
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
                self.upstream_accept = Some(Cow::Owned(auto::cbor_first_accept(&accept)));
            }
        }
    }
}

/// What a CBOR-enabled kube-apiserver 1.36 does with the request, before any mode applies.
struct Emulation<'a> {
    /// Upgrade mode: the CBOR type a JSON body of this request would become.
    body_as_cbor: Option<&'static str>,
    verb: route::Verb,
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
        upstream_accept: Option<Cow<'static, str>>,
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
            Route::Resource(r) => !byte_fields::typed_body(r).marks_nothing(),
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
        verb: route::Verb,
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
                plan.upstream_accept = json_accept.map(Cow::Owned);
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

/// A refusal of a request of which only the `Accept` is known (a head cborgate could not
/// read whole: `head_lines`), in the format the server would write its errors in.
pub fn head_refusal_for(
    accept: Option<&str>,
    code: u16,
    reason: &'static str,
    message: &str,
) -> LocalReply {
    let accept = AcceptHeader::parse(accept);
    ErrorStyle {
        choice: accept.negotiate(Restrictions::Default),
        pretty_query: None,
    }
    .reply(code, reason, message, false)
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
mod tests;
