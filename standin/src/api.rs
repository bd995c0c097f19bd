//! Routing and the read path: turns a request head into a plan (answer now, before the
//! body is read; read the body and then handle; stream a watch; upgrade), and carries
//! out get and list (Tables and PartialObjectMetadata included) and the
//! discovery, version and health endpoints, in the order a real apiserver checks
//! things: router 405/415/406 first, then handler negotiation, then the body. Each
//! request is served by a legacy or a CBOR-enabled server ([`Serving`]), chosen by
//! its API group and [`super::CborMode`].

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::cbor;
use super::http::{RequestHead, Response};
use super::json;
use super::negotiation::{self as neg, Format, Negotiated, Restrictions, Serving};
use super::objects::{self, FieldSelector, LabelSelector};
use super::seed;
use super::status::{self, ApiError};
use super::store::{self, ResourceDef, Store};
use super::table::{self, IncludeObject};
use super::util;
use super::watch::WatchPlan;
use super::{RecordedRequest, StandInOptions};

/// State shared by every connection.
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub opts: StandInOptions,
    /// `opts.cbor`, changed by [`super::StandIn::set_cbor`].
    pub cbor: Mutex<super::CborMode>,
    pub addr: std::net::SocketAddr,
    pub requests: Mutex<Vec<(u64, RecordedRequest)>>,
    pub next_request: std::sync::atomic::AtomicU64,
    pub emitted: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server behind an API group (`""`: core).
    pub(crate) fn serving(&self, group: &str) -> Serving {
        if self
            .cbor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .serves_cbor(group)
        {
            Serving::Cbor
        } else {
            Serving::Legacy
        }
    }
}

/// A group the stand-in serves from a CustomResourceDefinition (not go-restful).
fn is_crd_group(group: &str) -> bool {
    group == "corpus.example.com"
}

/// What to do with a request once its head is known.
pub(crate) enum Plan {
    /// Answer now; the body (if any) is drained afterwards.
    Respond(Response),
    /// Read the body, then call [`super::verbs::handle`].
    Body(Box<Pending>),
    /// Stream a watch.
    Watch(Box<WatchPlan>),
    /// Switch protocols and echo.
    Upgrade(UpgradePlan),
}

/// An accepted upgrade to `exec`/`attach`/`portforward`.
pub(crate) struct UpgradePlan {
    pub websocket: bool,
    pub protocol: String,
    pub ws_key: String,
    pub subprotocol: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Create,
    Update,
    Patch(PatchKind),
    Delete,
    DeleteCollection,
}

/// A write request waiting for its body.
pub(crate) struct Pending {
    pub head: RequestHead,
    pub target: ResTarget,
    pub negotiated: Negotiated,
    pub verb: Verb,
    pub query: Query,
    pub serving: Serving,
}

/// Decoded query parameters, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(q: &str) -> Query {
        let mut out = Vec::new();
        for pair in q.split(['&', ';']) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Some(k), Some(v)) =
                (util::percent_decode(k, true), util::percent_decode(v, true))
            {
                out.push((k, v));
            }
        }
        Query(out)
    }

    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    /// Go's `strconv.ParseBool`; absent or invalid is `None`.
    pub(crate) fn bool(&self, k: &str) -> Option<bool> {
        match self.get(k)? {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
            _ => None,
        }
    }
}

/// A request for a resource path.
#[derive(Clone, Debug)]
pub(crate) struct ResTarget {
    pub res: &'static ResourceDef,
    /// The namespace in the URL (empty for cluster-scoped or all-namespace paths).
    pub ns: String,
    pub all_namespaces: bool,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub legacy_watch: bool,
}

#[derive(Clone, Debug)]
enum Target {
    Api,
    CoreV1,
    Apis,
    Group(String),
    GroupVersion(String),
    Version,
    Health,
    SelfSubjectReview,
    Resource(ResTarget),
    NotFound,
}

fn route(path: &str) -> Target {
    let mut segs: Vec<String> = Vec::new();
    for s in path.split('/').filter(|s| !s.is_empty()) {
        match util::percent_decode(s, false) {
            Some(d) => segs.push(d),
            None => return Target::NotFound,
        }
    }
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["api"] => Target::Api,
        ["api", "v1"] => Target::CoreV1,
        ["apis"] => Target::Apis,
        ["apis", g] if store::GROUPS.contains(g) => Target::Group(g.to_string()),
        ["apis", g, "v1"] if store::GROUPS.contains(g) => Target::GroupVersion(g.to_string()),
        ["version"] => Target::Version,
        ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => Target::SelfSubjectReview,
        [h, ..] if matches!(*h, "healthz" | "livez" | "readyz") => Target::Health,
        ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        _ => Target::NotFound,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Target {
    let (legacy_watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let target = |plural: &str, ns: &str, all: bool, name: Option<&&str>, sub: Option<&&str>| {
        match store::find_resource(group, version, plural) {
            Some(res) => Target::Resource(ResTarget {
                res,
                ns: ns.to_string(),
                all_namespaces: all,
                name: name.map(|n| n.to_string()),
                sub: sub.map(|n| n.to_string()),
                legacy_watch,
            }),
            None => Target::NotFound,
        }
    };
    let namespaced =
        |plural: &str| store::find_resource(group, version, plural).is_some_and(|r| r.namespaced);
    match rest {
        ["namespaces"] if group.is_empty() => target("namespaces", "", false, None, None),
        ["namespaces", n] if group.is_empty() => target("namespaces", "", false, Some(n), None),
        ["namespaces", n, sub @ ("status" | "finalize")] if group.is_empty() => {
            target("namespaces", "", false, Some(n), Some(sub))
        }
        ["namespaces", ns, plural, more @ ..] if namespaced(plural) && more.len() <= 2 => {
            target(plural, ns, false, more.first(), more.get(1))
        }
        [plural] if namespaced(plural) => target(plural, "", true, None, None),
        [plural, more @ ..]
            if *plural != "namespaces" && !namespaced(plural) && more.len() <= 2 =>
        {
            target(plural, "", false, more.first(), more.get(1))
        }
        _ => Target::NotFound,
    }
}

/// `isPrettyPrint`: the `pretty` query parameter, else a human User-Agent.
fn pretty_requested(head: &RequestHead) -> bool {
    if head.query.contains("pretty") {
        if let Some(p) = Query::parse(&head.query).get("pretty") {
            if !p.is_empty() {
                return matches!(p, "1" | "t" | "T" | "true" | "TRUE" | "True");
            }
        }
    }
    let ua = head.header_or_empty("user-agent");
    ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
}

/// Encodes a body in a negotiated format.
pub(crate) fn encode(v: &Value, format: Format, pretty: bool) -> Vec<u8> {
    match format {
        Format::Json if pretty => json::encode_pretty(v),
        Format::Json | Format::Yaml => json::encode_line(v),
        Format::Protobuf => {
            let mut out = neg::PROTOBUF_MAGIC.to_vec();
            out.extend_from_slice(&json::encode_compact(v));
            out
        }
        Format::Cbor => cbor::encode(v),
    }
}

pub(crate) fn respond(head: &RequestHead, code: u16, v: &Value, n: &Negotiated) -> Response {
    let pretty = n.pretty || pretty_requested(head);
    Response::new(code, n.format.media_type(), encode(v, n.format, pretty))
}

/// `ErrorNegotiated`: the Status in whatever the client accepts, or pretty JSON if
/// nothing is acceptable (`WriteRawJSON`).
pub(crate) fn error_response(head: &RequestHead, e: &ApiError, serving: Serving) -> Response {
    match neg::negotiate(
        head.header_or_empty("accept"),
        serving.offered(),
        Restrictions::Default,
    ) {
        Some(n) => respond(head, e.code, &e.body, &n),
        None => Response::new(e.code, neg::JSON, json::encode_pretty(&e.body)),
    }
}

/// The authorizer's verb for a request to a resource.
fn request_verb(head: &RequestHead, t: &ResTarget) -> &'static str {
    let watch = t.legacy_watch || Query::parse(&head.query).bool("watch") == Some(true);
    match head.method.as_str() {
        "GET" | "HEAD" if watch => "watch",
        "GET" | "HEAD" if t.name.is_none() => "list",
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if t.name.is_none() => "deletecollection",
        "DELETE" => "delete",
        _ => "unknown",
    }
}

fn err(head: &RequestHead, e: ApiError, serving: Serving) -> Plan {
    Plan::Respond(error_response(head, &e, serving))
}

/// Decides what to do with a request from its head alone.
pub(crate) fn plan(shared: &Shared, head: &RequestHead) -> Plan {
    // Authentication runs before everything, in the legacy serializers whatever the group
    // serves (native-1.36 `unauth`). The stand-in knows no users: every bearer token is
    // good but `wrong`, the one the recording sends.
    if head.header("authorization") == Some("Bearer wrong") {
        return err(head, status::unauthorized(), Serving::Legacy);
    }
    match route(&head.path) {
        // The router's 404 is written with the legacy serializers whether or not the
        // path's group serves CBOR: pretty JSON for a CBOR client
        // (native-1.36 `get-missing-resource`, `watch-missing-resource`).
        Target::NotFound => err(head, status::path_not_found(), Serving::Legacy),
        Target::Health => {
            if head.method != "GET" {
                return err(head, status::method_not_allowed(), Serving::Legacy);
            }
            let mut r = Response::new(200, "text/plain; charset=utf-8", b"ok".to_vec());
            r.extra_headers
                .push(("X-Content-Type-Options".into(), "nosniff".into()));
            Plan::Respond(r)
        }
        Target::Version => {
            // JSON only, CBOR or not (b-version-cbor).
            if head.method != "GET" {
                return err(head, status::method_not_allowed(), Serving::Legacy);
            }
            let accept = head.header_or_empty("accept");
            if !neg::router_accepts(accept, neg::PRODUCES_VERSION) {
                return err(
                    head,
                    ApiError::raw(neg::router_not_acceptable(neg::PRODUCES_VERSION)),
                    Serving::Legacy,
                );
            }
            Plan::Respond(Response::new(
                200,
                neg::JSON,
                json::encode_pretty(&seed::version_info()),
            ))
        }
        Target::SelfSubjectReview => {
            // Created for whoever asks (RBAC's system:basic-user), answered in what the
            // client accepts: 201 application/cbor when CBOR is on (native-1.36
            // `selfsubjectreview`), 406 when it is not acceptable.
            let serving = shared.serving("authentication.k8s.io");
            if head.method != "POST" {
                return err(head, status::method_not_allowed(), serving);
            }
            let produces = serving.produces_object();
            if !neg::router_accepts(head.header_or_empty("accept"), produces) {
                return err(
                    head,
                    ApiError::raw(neg::router_not_acceptable(produces)),
                    serving,
                );
            }
            let review = serde_json::json!({
                "kind": "SelfSubjectReview",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}},
            });
            match neg::negotiate(
                head.header_or_empty("accept"),
                serving.offered(),
                Restrictions::Default,
            ) {
                Some(n) => Plan::Respond(respond(head, 201, &review, &n)),
                None => err(
                    head,
                    ApiError::raw(neg::router_not_acceptable(produces)),
                    serving,
                ),
            }
        }
        t @ (Target::Api
        | Target::CoreV1
        | Target::Apis
        | Target::Group(_)
        | Target::GroupVersion(_)) => plan_discovery(shared, head, t),
        Target::Resource(t) => plan_resource(shared, head, t),
    }
}

fn plan_discovery(shared: &Shared, head: &RequestHead, t: Target) -> Plan {
    // A CBOR-enabled 1.36 serves group-version resource lists in CBOR (and means to
    // for /api/v1, where it crashes; the stand-in serves it), but not /api, /apis or
    // /apis/<group> (b-api-cbor, b-apis-cbor, b-apis-apps-cbor). A CRD's group
    // version is served in JSON, YAML and protobuf only, CBOR-enabled or not
    // (native-1.36 `disc-apis-cr-v1`: a 406 for `application/cbor` alone).
    let serving = match &t {
        Target::CoreV1 => shared.serving(""),
        Target::GroupVersion(g) if is_crd_group(g) => Serving::Legacy,
        Target::GroupVersion(g) => shared.serving(g),
        _ => Serving::Legacy,
    };
    if head.method != "GET" {
        return err(head, status::method_not_allowed(), serving);
    }
    let accept = head.header_or_empty("accept");
    // Built-in group versions are go-restful routes; a CRD's group is not.
    let go_restful = match &t {
        Target::Api | Target::CoreV1 => true,
        Target::GroupVersion(g) => !is_crd_group(g),
        _ => false,
    };
    if go_restful && !neg::router_accepts(accept, serving.produces_object()) {
        return err(
            head,
            ApiError::raw(neg::router_not_acceptable(serving.produces_object())),
            serving,
        );
    }
    let Some(n) = neg::negotiate(accept, serving.offered(), Restrictions::Default) else {
        return err(
            head,
            ApiError::raw(neg::not_acceptable(serving.produces_object())),
            serving,
        );
    };
    let body = match t {
        Target::Api => seed::api_versions(&shared.addr.to_string()),
        Target::CoreV1 => {
            if n.format == Format::Json && !(n.pretty || pretty_requested(head)) {
                let mut b = seed::CORE_V1_RESOURCES.as_bytes().to_vec();
                b.push(b'\n');
                return Plan::Respond(Response::new(200, neg::JSON, b));
            }
            serde_json::from_str(seed::CORE_V1_RESOURCES).unwrap_or(Value::Null)
        }
        Target::Apis => seed::api_group_list(),
        Target::Group(g) => seed::api_group(&g),
        Target::GroupVersion(g) => seed::group_resources(&g),
        _ => Value::Null,
    };
    Plan::Respond(respond(head, 200, &body, &n))
}

fn allowed_methods(t: &ResTarget) -> &'static [&'static str] {
    if t.legacy_watch || t.all_namespaces {
        &["GET"]
    } else if t.name.is_none() {
        if t.res.kind == "Namespace" {
            &["GET", "POST"]
        } else {
            &["GET", "POST", "DELETE"]
        }
    } else {
        &["GET", "PUT", "PATCH", "DELETE"]
    }
}

/// The media type of a PATCH body as the handler compares it (params cut off).
pub(crate) fn patch_media_type(content_type: &str) -> &str {
    match content_type.find(';') {
        Some(i) if i > 0 => &content_type[..i],
        _ => content_type,
    }
}

fn plan_resource(shared: &Shared, head: &RequestHead, t: ResTarget) -> Plan {
    // Impersonation is allowed, and whoever is impersonated may do nothing: authorization's
    // 403, in the legacy serializers (native-1.36 `impersonate`).
    if let Some(user) = head
        .header("impersonate-user")
        .filter(|u| *u != "system:admin")
    {
        let verb = request_verb(head, &t);
        let e = status::forbidden(t.res, t.name.as_deref(), user, verb, &t.ns);
        return err(head, e, Serving::Legacy);
    }
    let serving = shared.serving(t.res.group);
    // A CBOR-enabled server refuses HEAD and OPTIONS before any route, in the legacy
    // serializers' JSON with its own wording (native-1.36 `head-cm`, `options`).
    if serving == Serving::Cbor && matches!(head.method.as_str(), "HEAD" | "OPTIONS") {
        return err(head, status::method_not_supported(), Serving::Legacy);
    }
    if let Some(sub) = t.sub.clone() {
        return plan_subresource(shared, head, t, &sub, serving);
    }
    let err = |head: &RequestHead, e: ApiError| err(head, e, serving);
    let method = head.method.as_str();
    if !allowed_methods(&t).contains(&method) {
        return err(head, status::method_not_allowed());
    }
    let accept = head.header_or_empty("accept");
    let content_type = head.header_or_empty("content-type");
    let query = Query::parse(&head.query);
    let is_list_route = t.legacy_watch || (t.name.is_none() && method == "GET");
    let produces = if is_list_route {
        serving.produces_list()
    } else {
        serving.produces_object()
    };

    // The go-restful router (built-in resources only): Content-Type, then Accept.
    if t.res.builtin {
        let consumes: &[&str] = if method == "PATCH" {
            serving.patch_types(true)
        } else {
            &[]
        };
        if !neg::router_consumes(content_type, method, consumes) {
            if head.content_length() > 0 {
                return err(head, ApiError::raw(neg::router_unsupported_media_type()));
            }
            // No route left, and none to list as available.
            return err(head, ApiError::raw(neg::router_not_acceptable(&[])));
        }
        if !neg::router_accepts(accept, produces) {
            return err(head, ApiError::raw(neg::router_not_acceptable(produces)));
        }
    }

    // The handler: patch type, then output negotiation.
    let verb = match method {
        "POST" => Verb::Create,
        "PUT" => Verb::Update,
        "DELETE" if t.name.is_none() => Verb::DeleteCollection,
        "DELETE" => Verb::Delete,
        "PATCH" => {
            let types = serving.patch_types(t.res.builtin);
            let ct = patch_media_type(content_type);
            let kind = match ct {
                "application/json-patch+json" => PatchKind::Json,
                "application/merge-patch+json" => PatchKind::Merge,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" | neg::APPLY_PATCH_CBOR => PatchKind::Apply,
                _ => return err(head, ApiError::raw(neg::unsupported_media_type(types))),
            };
            if !types.contains(&ct) {
                return err(head, ApiError::raw(neg::unsupported_media_type(types)));
            }
            Verb::Patch(kind)
        }
        _ => Verb::Create, // GET, handled below
    };
    let restrictions = if t.res.builtin {
        Restrictions::Builtin
    } else {
        Restrictions::Custom
    };
    let Some(negotiated) = neg::negotiate(accept, serving.offered(), restrictions) else {
        return err(
            head,
            ApiError::raw(neg::not_acceptable(serving.produces_object())),
        );
    };

    if method == "GET" {
        let watching = t.legacy_watch || (t.name.is_none() && query.bool("watch") == Some(true));
        if watching {
            if !negotiated.format.has_stream() {
                return err(
                    head,
                    status::not_acceptable_message(format!(
                        "only the following media types are accepted: {}",
                        serving.stream_types().join(", ")
                    )),
                );
            }
            return match watch_plan(&t, &query, negotiated) {
                Ok(w) => Plan::Watch(Box::new(w)),
                Err(e) => err(head, e),
            };
        }
        let result = if t.name.is_some() {
            get(shared, head, &t, &query, &negotiated)
        } else {
            list(shared, head, &t, &query, &negotiated)
        };
        return Plan::Respond(result.unwrap_or_else(|e| error_response(head, &e, serving)));
    }

    // Request bodies of create/update are checked against the input serializers now.
    if matches!(verb, Verb::Create | Verb::Update) && serving.input_format(content_type).is_none() {
        return err(
            head,
            ApiError::raw(neg::unsupported_media_type(serving.produces_object())),
        );
    }
    Plan::Body(Box::new(Pending {
        head: head.clone(),
        target: t,
        negotiated,
        verb,
        query,
        serving,
    }))
}

fn plan_subresource(
    shared: &Shared,
    head: &RequestHead,
    t: ResTarget,
    sub: &str,
    serving: Serving,
) -> Plan {
    let err = |head: &RequestHead, e: ApiError| err(head, e, serving);
    let connect = t.res.kind == "Pod" && matches!(sub, "exec" | "attach" | "portforward");
    if !connect || t.legacy_watch {
        return err(head, status::path_not_found());
    }
    if head.method != "GET" && head.method != "POST" {
        return err(head, status::method_not_allowed());
    }
    let name = t.name.clone().unwrap_or_default();
    if shared.store().get(t.res.index(), &t.ns, &name).is_none() {
        return err(head, status::not_found(t.res, &name));
    }
    let upgrade = head.header_or_empty("upgrade").trim().to_string();
    if !head.has_token("connection", "upgrade") || upgrade.is_empty() {
        return err(head, status::bad_request("Upgrade request required"));
    }
    let websocket = upgrade.eq_ignore_ascii_case("websocket");
    if websocket {
        let key = head.header_or_empty("sec-websocket-key").trim().to_string();
        if key.is_empty() {
            return err(head, status::bad_request("missing Sec-WebSocket-Key"));
        }
        let sub = head
            .header("sec-websocket-protocol")
            .and_then(|p| p.split(',').map(str::trim).find(|s| !s.is_empty()))
            .map(str::to_string);
        return Plan::Upgrade(UpgradePlan {
            websocket: true,
            protocol: "websocket".into(),
            ws_key: key,
            subprotocol: sub,
        });
    }
    if !upgrade.eq_ignore_ascii_case("SPDY/3.1") {
        return err(
            head,
            status::bad_request(format!("unsupported upgrade protocol {upgrade:?}")),
        );
    }
    let sub = head
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-stream-protocol-version"))
        .map(|(_, v)| v.clone());
    Plan::Upgrade(UpgradePlan {
        websocket: false,
        protocol: "SPDY/3.1".into(),
        ws_key: String::new(),
        subprotocol: sub,
    })
}

pub(crate) fn selectors(
    res: &ResourceDef,
    query: &Query,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
        .map_err(status::bad_request)?;
    let fields = FieldSelector::parse(res.kind, query.get("fieldSelector").unwrap_or(""))
        .map_err(status::bad_request)?;
    Ok((labels, fields))
}

fn watch_plan(t: &ResTarget, query: &Query, negotiated: Negotiated) -> Result<WatchPlan, ApiError> {
    let (labels, mut fields) = selectors(t.res, query)?;
    if let Some(name) = &t.name {
        // Legacy single-object watch: /watch/namespaces/ns/configmaps/name.
        fields = FieldSelector::parse(t.res.kind, &format!("metadata.name={name}"))
            .map_err(status::bad_request)?;
        if let Some(extra) = query.get("fieldSelector").filter(|s| !s.is_empty()) {
            fields = FieldSelector::parse(t.res.kind, &format!("metadata.name={name},{extra}"))
                .map_err(status::bad_request)?;
        }
    }
    let rv = match query.get("resourceVersion") {
        None | Some("") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| status::bad_request(format!("invalid resource version {s:?}")))?,
        ),
    };
    // 0 means the server's default: here, no limit.
    let timeout = match query.get("timeoutSeconds") {
        None | Some("") | Some("0") => None,
        Some(s) => Some(Duration::from_secs(
            s.parse::<u64>()
                .map_err(|_| status::bad_request(format!("invalid timeoutSeconds {s:?}")))?
                .min(365 * 24 * 3600),
        )),
    };
    let include = IncludeObject::parse(query.get("includeObject")).map_err(status::bad_request)?;
    Ok(WatchPlan {
        res: t.res,
        ns: if t.res.namespaced && !t.all_namespaces {
            Some(t.ns.clone())
        } else {
            None
        },
        labels,
        fields,
        rv,
        send_initial_events: query.bool("sendInitialEvents"),
        bookmarks: query.bool("allowWatchBookmarks") == Some(true),
        timeout,
        negotiated,
        include,
    })
}

fn go_type(res: &ResourceDef, list: bool) -> String {
    match (res.builtin, list) {
        (true, false) => format!("*core.{}", res.kind),
        (true, true) => format!("*core.{}List", res.kind),
        (false, false) => "*unstructured.Unstructured".into(),
        (false, true) => "*unstructured.UnstructuredList".into(),
    }
}

fn get(
    shared: &Shared,
    head: &RequestHead,
    t: &ResTarget,
    query: &Query,
    n: &Negotiated,
) -> Result<Response, ApiError> {
    let name = t.name.clone().unwrap_or_default();
    let obj = shared
        .store()
        .get(t.res.index(), &t.ns, &name)
        .ok_or_else(|| status::not_found(t.res, &name))?;
    let body = match &n.convert {
        None => (*obj).clone(),
        Some(c) => match c.kind.as_str() {
            "Table" => {
                let include = IncludeObject::parse(query.get("includeObject")).map_err(status::bad_request)?;
                let rv = objects::meta_str(&obj, "resourceVersion").unwrap_or("");
                table::table(
                    t.res,
                    &[(*obj).clone()],
                    json!({"resourceVersion": rv}),
                    include,
                    &c.version,
                    true,
                    util::now_unix(),
                )
            }
            "PartialObjectMetadata" => table::pom(&obj, &c.version),
            _ => {
                return Err(status::not_acceptable_message(format!(
                    "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                    go_type(t.res, false)
                )))
            }
        },
    };
    Ok(respond(head, 200, &body, n))
}

fn continue_token(rv: u64, start: &str) -> String {
    let v = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")});
    util::base64_url(&json::encode_compact(&v))
}

fn parse_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = |why: &str| status::bad_request(format!("continue key is not valid: {why}"));
    let raw = util::base64_decode(token).ok_or_else(|| bad("illegal base64 data"))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| bad(&e.to_string()))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("server does not recognize this encoded key"));
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("missing rv"))?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing start"))?;
    Ok((rv, start.trim_end_matches('\u{0}').to_string()))
}

/// A list body as the apiserver writes it (typed for built-ins, sorted for CRs).
pub(crate) fn list_body(
    res: &ResourceDef,
    items: Vec<Value>,
    rv: u64,
    cont: Option<String>,
    remaining: Option<usize>,
) -> Value {
    if res.builtin {
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        if let Some(c) = cont {
            meta.insert("continue".into(), json!(c));
        }
        if let Some(r) = remaining {
            meta.insert("remainingItemCount".into(), json!(r));
        }
        let items: Vec<Value> = items
            .into_iter()
            .map(|mut o| {
                if let Value::Object(m) = &mut o {
                    m.shift_remove("kind");
                    m.shift_remove("apiVersion");
                }
                o
            })
            .collect();
        json!({"kind": res.list_kind(), "apiVersion": res.api_version(), "metadata": Value::Object(meta), "items": items})
    } else {
        let mut meta =
            json!({"continue": cont.unwrap_or_default(), "resourceVersion": rv.to_string()});
        if let (Some(r), Value::Object(m)) = (remaining, &mut meta) {
            m.insert("remainingItemCount".into(), json!(r));
        }
        objects::sort_recursive(&json!({
            "apiVersion": res.api_version(), "items": items, "kind": res.list_kind(), "metadata": meta
        }))
    }
}

fn list(
    shared: &Shared,
    head: &RequestHead,
    t: &ResTarget,
    query: &Query,
    n: &Negotiated,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(t.res, query)?;
    let limit = match query.get("limit") {
        None | Some("") => 0,
        Some(s) => s.parse::<i64>().unwrap_or(0).max(0) as usize,
    };
    let (mut rv, start) = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => {
            let (rv, s) = parse_continue(c)?;
            (rv, Some(s))
        }
        None => (0, None),
    };
    let ns = if t.res.namespaced && !t.all_namespaces {
        Some(t.ns.as_str())
    } else {
        None
    };
    let all = {
        let st = shared.store();
        if start.is_none() {
            rv = st.rv();
        }
        st.list(t.res.index(), ns)
    };
    let mut matched: Vec<(String, Arc<Value>)> = all
        .into_iter()
        .filter(|(k, _)| start.as_ref().is_none_or(|s| k.as_str() > s.as_str()))
        .filter(|(_, o)| labels.matches(o) && fields.matches(t.res.kind, o))
        .collect();
    let mut cont = None;
    let mut remaining = None;
    if limit > 0 && matched.len() > limit {
        let rest = matched.len() - limit;
        matched.truncate(limit);
        let last = matched.last().map(|(k, _)| k.clone()).unwrap_or_default();
        cont = Some(continue_token(rv, &last));
        if labels.is_empty() && fields.is_empty() {
            remaining = Some(rest);
        }
    }
    let items: Vec<Value> = matched.into_iter().map(|(_, o)| (*o).clone()).collect();
    let body = match &n.convert {
        None => list_body(t.res, items, rv, cont, remaining),
        Some(c) => {
            let mut meta = Map::new();
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
            if let Some(c) = cont {
                meta.insert("continue".into(), json!(c));
            }
            if let Some(r) = remaining {
                meta.insert("remainingItemCount".into(), json!(r));
            }
            match c.kind.as_str() {
                "Table" => {
                    let include = IncludeObject::parse(query.get("includeObject"))
                        .map_err(status::bad_request)?;
                    table::table(
                        t.res,
                        &items,
                        Value::Object(meta),
                        include,
                        &c.version,
                        true,
                        util::now_unix(),
                    )
                }
                "PartialObjectMetadataList" => {
                    table::pom_list(&items, Value::Object(meta), &c.version)
                }
                _ => {
                    return Err(status::not_acceptable_message(format!(
                    "you requested PartialObjectMetadata, but the requested object is a list ({})",
                    go_type(t.res, true)
                )))
                }
            }
        }
    };
    Ok(respond(head, 200, &body, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let r = |p: &str| match route(p) {
            Target::Resource(t) => format!(
                "{} ns={} all={} name={:?} sub={:?} w={}",
                t.res.plural, t.ns, t.all_namespaces, t.name, t.sub, t.legacy_watch
            ),
            other => format!("{other:?}"),
        };
        assert_eq!(
            r("/api/v1/namespaces"),
            "namespaces ns= all=false name=None sub=None w=false"
        );
        assert_eq!(
            r("/api/v1/namespaces/demo/configmaps/x"),
            "configmaps ns=demo all=false name=Some(\"x\") sub=None w=false"
        );
        assert_eq!(
            r("/api/v1/configmaps"),
            "configmaps ns= all=true name=None sub=None w=false"
        );
        assert_eq!(
            r("/api/v1/watch/namespaces/demo/pods"),
            "pods ns=demo all=false name=None sub=None w=true"
        );
        assert_eq!(
            r("/apis/corpus.example.com/v1/namespaces/demo/gadgets/g1"),
            "gadgets ns=demo all=false name=Some(\"g1\") sub=None w=false"
        );
        assert_eq!(
            r("/api/v1/namespaces/demo/pods/p/exec"),
            "pods ns=demo all=false name=Some(\"p\") sub=Some(\"exec\") w=false"
        );
        assert_eq!(r("/api/v1/namespaces/demo/services"), "NotFound");
        assert_eq!(r("/api/v1/configmaps/x"), "NotFound");
        assert_eq!(r("/apis/apps/v1"), "NotFound");
    }

    #[test]
    fn continue_tokens() {
        // The token recorded in corpus podlist-limit10.
        assert_eq!(
            continue_token(649, "/pod-018"),
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NjQ5LCJzdGFydCI6Ii9wb2QtMDE4XHUwMDAwIn0"
        );
        assert_eq!(
            parse_continue(
                "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NjQ5LCJzdGFydCI6Ii9wb2QtMDE4XHUwMDAwIn0"
            )
            .unwrap(),
            (649, "/pod-018".to_string())
        );
        assert!(parse_continue("!!!").is_err());
    }
}
