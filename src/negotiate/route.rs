//! Routes and verbs: what a request path addresses in the Kubernetes API (a resource, a
//! discovery document, something else), and the verb label `apiserver_request_total` gives
//! the request.
//!
//! Paths are read as kube-apiserver's `RequestInfoFactory` reads them: percent-decoded,
//! trimmed of `/` at both ends, split on `/`; `/api/v1/...` and `/apis/<group>/<version>/...`
//! are resource requests, `namespaces/<ns>/` scopes the resource after it (except the
//! namespace's own `status` and `finalize`), and `watch/` right after the version is the
//! legacy watch form. Anything that does not parse cleanly (bad escapes, empty segments,
//! non-UTF-8, segments longer than a DNS name) is [`Route::Other`]: cborgate passes it
//! through and lets the upstream answer.

use std::borrow::Cow;

/// Subresources that stream, upgrade or carry arbitrary bytes: never transcoded, and
/// reported as `CONNECT` (the apiserver's `validConnectRequests`, which include `log`).
pub const CONNECT_SUBRESOURCES: [&str; 5] = ["exec", "attach", "portforward", "proxy", "log"];

/// The verb of a request, as `apiserver_request_total` counts it ([`normalize_verb`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Post,
    Put,
    Patch,
    Apply,
    Delete,
    DeleteCollection,
    Head,
    Options,
    Connect,
    Other,
}

impl Verb {
    /// Every verb, for registering metric series up front.
    pub const ALL: [Verb; 13] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Post,
        Verb::Put,
        Verb::Patch,
        Verb::Apply,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Head,
        Verb::Options,
        Verb::Connect,
        Verb::Other,
    ];

    /// The `verb` label, as kube-apiserver writes it.
    pub const fn label(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Apply => "APPLY",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
            Verb::Head => "HEAD",
            Verb::Options => "OPTIONS",
            Verb::Connect => "CONNECT",
            Verb::Other => "OTHER",
        }
    }
}

/// Tests and tables compare a verb with its label.
impl PartialEq<&str> for Verb {
    fn eq(&self, label: &&str) -> bool {
        self.label() == *label
    }
}

/// The longest group, version, resource or subresource name kept (a DNS subdomain). Longer
/// ones exist on no server; such paths are [`Route::Other`], so no unbounded string reaches
/// a cache key.
const MAX_NAME_LEN: usize = 253;

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// An object or collection: `/api/v1/...` or `/apis/<group>/<version>/...`, including
    /// the legacy `.../watch/...` paths.
    Resource(ResourceRoute),
    /// A group-version resource list: exactly `/api/v1` or `/apis/<group>/<version>`. A
    /// CBOR-enabled server serves it in CBOR, so it is transcoded like an object.
    GroupVersionDiscovery {
        /// `""` for the core group.
        group: String,
        /// e.g. `v1`
        version: String,
    },
    /// `/api`, `/apis`, `/apis/<group>` (including aggregated discovery): no CBOR in 1.36,
    /// passed through so a CBOR-only `Accept` gets the upstream's own 406.
    NoCborDiscovery,
    /// `/version`, `/openapi/*`, `/healthz`, `/livez`, `/readyz`, `/metrics`, anything unknown.
    Other,
}

/// A group, version, resource or subresource name from a request path: held inline
/// when it is short (every built-in resource's names are), so that classifying a
/// request allocates nothing; on the heap when longer (up to a DNS name's 253 bytes).
#[derive(Clone)]
pub struct Name(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    Heap(Box<str>),
}

/// The longest name held inline (`mutatingwebhookconfigurations` is 29 bytes).
const INLINE_NAME: usize = 30;

impl Name {
    pub fn new(name: &str) -> Name {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE_NAME => {
                let mut bytes = [0; INLINE_NAME];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Name(NameRepr::Inline { len, bytes })
            }
            _ => Name(NameRepr::Heap(name.into())),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Whole `str`s copied in: always UTF-8.
            NameRepr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            NameRepr::Heap(s) => s,
        }
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::new("")
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

/// A resource request, without the namespace or object name (which must never become a
/// label or a cache key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRoute {
    /// The API group, `""` for the core group.
    pub group: Name,
    /// The API version.
    pub version: Name,
    /// The resource, e.g. `configmaps`.
    pub resource: Name,
    /// The subresource, e.g. `status`, `scale`, `exec`.
    pub subresource: Option<Name>,
    /// Addressed under `/namespaces/<ns>/`.
    pub namespaced: bool,
    /// Addresses one object (a name follows the resource) rather than a collection.
    pub named: bool,
    /// The legacy `/watch/` form.
    pub legacy_watch: bool,
}

impl ResourceRoute {
    /// A collection rather than one object.
    pub fn is_collection(&self) -> bool {
        !self.named
    }

    /// One of [`CONNECT_SUBRESOURCES`]: streams, upgrades or arbitrary bytes.
    pub fn is_connect(&self) -> bool {
        self.subresource
            .as_deref()
            .is_some_and(|s| CONNECT_SUBRESOURCES.contains(&s))
    }

    /// Whether the server answers with a watch stream: a GET on a legacy `/watch/` path, or a
    /// GET on a collection whose first `watch` query value is true for Go's
    /// `Convert_Slice_string_To_bool` (anything but `0` and `false`; `watch=` counts). A GET
    /// on a named object with `?watch=true` is a plain GET for the server.
    pub fn serves_watch(&self, method: Method, query: Option<&str>) -> bool {
        method == Method::Get && (self.legacy_watch || (self.is_collection() && query_watch(query)))
    }
}

impl Route {
    /// Classifies a request path (the part before `?`).
    pub fn classify(path: &str) -> Route {
        // Defensive: the caller passes the query separately.
        let path = path.split(['?', '#']).next().unwrap_or_default();
        if !path.starts_with('/') {
            return Route::Other;
        }
        let Some(decoded) = unescape(path, false) else {
            return Route::Other;
        };
        let Ok(decoded) = std::str::from_utf8(&decoded) else {
            return Route::Other;
        };
        let trimmed = decoded.trim_matches('/');
        // The segments, on the stack for any path an API request has; a longer one
        // is collected (and classified the same way).
        let mut stack = [""; 16];
        let mut n = 0;
        let mut longer = Vec::new();
        for (i, segment) in trimmed.split('/').enumerate() {
            if i < stack.len() {
                stack[i] = segment;
                n = i + 1;
            } else {
                if longer.is_empty() {
                    longer.extend_from_slice(&stack);
                }
                longer.push(segment);
            }
        }
        let parts = if longer.is_empty() {
            &stack[..n]
        } else {
            &longer[..]
        };
        match parts {
            ["api"] | ["apis"] => Route::NoCborDiscovery,
            ["apis", group] if valid_name(group) => Route::NoCborDiscovery,
            ["api", "v1"] => Route::GroupVersionDiscovery {
                group: String::new(),
                version: "v1".to_owned(),
            },
            ["apis", group, version] if valid_name(group) && valid_name(version) => {
                Route::GroupVersionDiscovery {
                    group: (*group).to_owned(),
                    version: (*version).to_owned(),
                }
            }
            ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
            ["apis", group, version, rest @ ..] if valid_name(group) && valid_name(version) => {
                resource_route(group, version, rest)
            }
            _ => Route::Other,
        }
    }

    /// The API group of a resource or group-version route (`""` for core).
    pub fn group(&self) -> Option<&str> {
        match self {
            Route::Resource(r) => Some(&r.group),
            Route::GroupVersionDiscovery { group, .. } => Some(group),
            Route::NoCborDiscovery | Route::Other => None,
        }
    }

    /// The resource of a resource route.
    pub fn resource(&self) -> Option<&str> {
        match self {
            Route::Resource(r) => Some(&r.resource),
            _ => None,
        }
    }

    /// A bounded label for logs.
    pub const fn kind(&self) -> &'static str {
        match self {
            Route::Resource(_) => "resource",
            Route::GroupVersionDiscovery { .. } => "group_version_discovery",
            Route::NoCborDiscovery => "no_cbor_discovery",
            Route::Other => "other",
        }
    }
}

/// The part of `RequestInfoFactory.NewRequestInfo` after the version.
fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        // The long-removed `/proxy/` special verb: let the upstream answer.
        ["proxy", ..] => return Route::Other,
        _ => (false, rest),
    };
    let (namespaced, parts) = match rest {
        ["namespaces", _, next, ..] if *next != "status" && *next != "finalize" => {
            (true, rest.get(2..).unwrap_or_default())
        }
        _ => (false, rest),
    };
    let Some(resource) = parts.first().copied().filter(|r| valid_name(r)) else {
        return Route::Other;
    };
    let named = match parts.get(1) {
        Some(&"") => return Route::Other,
        Some(_) => true,
        None => false,
    };
    let subresource = match parts.get(2) {
        Some(sub) if !valid_name(sub) => return Route::Other,
        Some(sub) => Some(Name::new(sub)),
        None => None,
    };
    Route::Resource(ResourceRoute {
        group: Name::new(group),
        version: Name::new(version),
        resource: Name::new(resource),
        subresource,
        namespaced,
        named,
        legacy_watch,
    })
}

/// A group, version, resource or subresource name: not empty, not absurdly long.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN
}

/// An HTTP method; unknown ones are [`Method::Other`]. Case is ignored, as the apiserver's
/// metrics ignore it (`strings.ToUpper(req.Method)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
    /// OPTIONS
    Options,
    /// CONNECT
    Connect,
    /// Anything else.
    Other,
}

impl Method {
    /// Reads a method.
    pub fn parse(method: &str) -> Method {
        const METHODS: [(&str, Method); 8] = [
            ("GET", Method::Get),
            ("HEAD", Method::Head),
            ("POST", Method::Post),
            ("PUT", Method::Put),
            ("PATCH", Method::Patch),
            ("DELETE", Method::Delete),
            ("OPTIONS", Method::Options),
            ("CONNECT", Method::Connect),
        ];
        METHODS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(method))
            .map_or(Method::Other, |&(_, m)| m)
    }
}

/// The verb label, as `apiserver_request_total` writes it, from a bounded set ([`Verb::ALL`]):
///
/// - `CONNECT` for upgrades and for the [`CONNECT_SUBRESOURCES`];
/// - `WATCH` for a GET on a legacy `/watch/` path or with a true `watch` query value (the
///   apiserver's `getVerbIfWatch`, which does not look at the path, so a named GET with
///   `?watch=1` is a `WATCH` here even though the server answers it with one object);
/// - `LIST` and `DELETECOLLECTION` for GET and DELETE on a resource collection;
/// - `APPLY` for a PATCH with `application/apply-patch+yaml` or `+cbor`;
/// - POST, PUT, PATCH, DELETE, HEAD, OPTIONS as themselves, `OTHER` for anything else.
///
/// `body_media_type` is the `Content-Type` without parameters, as sent: like the apiserver,
/// `APPLY` needs the exact lower-case type.
pub fn normalize_verb(
    method: Method,
    route: &Route,
    query: Option<&str>,
    body_media_type: Option<&str>,
    upgrade: bool,
) -> Verb {
    if upgrade {
        return Verb::Connect;
    }
    let resource = match route {
        Route::Resource(r) => Some(r),
        _ => None,
    };
    if let Some(r) = resource {
        // The apiserver takes the installer's WATCH for legacy paths before anything else.
        if r.legacy_watch && method == Method::Get {
            return Verb::Watch;
        }
        if r.is_connect() {
            return Verb::Connect;
        }
    }
    let collection = resource.is_some_and(ResourceRoute::is_collection);
    match method {
        Method::Get if query_watch(query) => Verb::Watch,
        Method::Get if collection => Verb::List,
        Method::Get => Verb::Get,
        // The apiserver reports HEAD as GET or LIST; kept apart here to see it at all.
        Method::Head => Verb::Head,
        Method::Post => Verb::Post,
        Method::Put => Verb::Put,
        Method::Patch
            if matches!(
                body_media_type,
                Some("application/apply-patch+yaml" | "application/apply-patch+cbor")
            ) =>
        {
            Verb::Apply
        }
        Method::Patch => Verb::Patch,
        Method::Delete if collection => Verb::DeleteCollection,
        Method::Delete => Verb::Delete,
        Method::Options => Verb::Options,
        Method::Connect => Verb::Connect,
        Method::Other => Verb::Other,
    }
}

/// Whether the first `watch` value of the query is true for the apiserver: present, and
/// neither `0` nor `false` (any case). `watch` and `watch=` count as true.
pub fn query_watch(query: Option<&str>) -> bool {
    query
        .and_then(|q| query_first_value(q, "watch"))
        .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The apiserver's `isPrettyPrint` as far as the query decides it: `Some` when a non-empty
/// `pretty` value is present (true only for what Go's `strconv.ParseBool` reads as true),
/// `None` when the `User-Agent` would decide (curl, Wget and browsers get pretty JSON).
pub fn query_pretty(query: Option<&str>) -> Option<bool> {
    let value = query_first_value(query?, "pretty")?;
    if value.is_empty() {
        return None;
    }
    Some(matches!(
        value.as_ref(),
        "1" | "t" | "T" | "TRUE" | "true" | "True"
    ))
}

/// The first value of `name` in a query string, as Go's `url.ParseQuery` reads it: pairs
/// split on `&`, a pair containing `;` or a bad `%` escape is skipped, `+` is a space, a key
/// without `=` has the empty value. Invalid UTF-8 is replaced, as it never equals a name.
pub fn query_first_value<'q>(query: &'q str, name: &str) -> Option<Cow<'q, str>> {
    for pair in query.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(key), Some(value)) = (unescape(key, true), unescape(value, true)) else {
            continue;
        };
        if String::from_utf8_lossy(&key) == name {
            return Some(match value {
                Cow::Borrowed(bytes) => String::from_utf8_lossy(bytes),
                Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
            });
        }
    }
    None
}

/// Percent-decoding as Go's `url.PathUnescape` (or `QueryUnescape` with `plus_is_space`):
/// `None` for a `%` not followed by two hex digits.
fn unescape(s: &str, plus_is_space: bool) -> Option<Cow<'_, [u8]>> {
    let bytes = s.as_bytes();
    if !bytes
        .iter()
        .any(|&b| b == b'%' || (plus_is_space && b == b'+'))
    {
        return Some(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            b'%' => {
                let (&hi, tail) = rest.split_first()?;
                let (&lo, tail) = tail.split_first()?;
                rest = tail;
                out.push(hex_value(hi)? << 4 | hex_value(lo)?);
            }
            b'+' if plus_is_space => out.push(b' '),
            _ => out.push(b),
        }
    }
    Some(Cow::Owned(out))
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The protocol an upgraded connection speaks: the `protocol` label of
/// `cborgate_upgrades_active`, from the client's `Upgrade` header (kubectl's exec,
/// attach and port-forward ask for SPDY/3.1 or, since 1.30, a WebSocket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeProtocol {
    Spdy,
    WebSocket,
    Other,
}

impl UpgradeProtocol {
    /// Reads the `Upgrade` header's value (case ignored).
    pub fn of(upgrade: Option<&str>) -> UpgradeProtocol {
        let Some(v) = upgrade.map(str::trim) else {
            return UpgradeProtocol::Other;
        };
        if v.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("spdy")) {
            UpgradeProtocol::Spdy
        } else if v.eq_ignore_ascii_case("websocket") {
            UpgradeProtocol::WebSocket
        } else {
            UpgradeProtocol::Other
        }
    }

    pub const fn label(self) -> &'static str {
        match self {
            UpgradeProtocol::Spdy => "spdy",
            UpgradeProtocol::WebSocket => "websocket",
            UpgradeProtocol::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourceRoute {
        match Route::classify(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    fn verb(method: &str, path: &str, query: Option<&str>) -> &'static str {
        normalize_verb(
            Method::parse(method),
            &Route::classify(path),
            query,
            None,
            false,
        )
        .label()
    }

    #[test]
    fn namespaced_collection_and_object() {
        let r = res("/api/v1/namespaces/verify/configmaps");
        assert_eq!(
            (r.group.as_str(), r.version.as_str(), r.resource.as_str()),
            ("", "v1", "configmaps")
        );
        assert!(r.namespaced && r.is_collection() && !r.legacy_watch && r.subresource.is_none());
        let r = res("/api/v1/namespaces/verify/configmaps/cm-basic");
        assert!(r.namespaced && r.named);
        let r = res("/apis/apps/v1/namespaces/ns/deployments/web/scale");
        assert_eq!(
            (r.group.as_str(), r.resource.as_str()),
            ("apps", "deployments")
        );
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        assert!(!r.is_connect());
    }

    #[test]
    fn cluster_scoped_and_namespace_objects() {
        let r = res("/api/v1/nodes");
        assert!(!r.namespaced && r.is_collection());
        let r = res("/apis/rbac.authorization.k8s.io/v1/clusterroles/admin");
        assert_eq!(r.group, "rbac.authorization.k8s.io");
        assert!(!r.namespaced && r.named);
        // The namespace itself, and its own subresources.
        let r = res("/api/v1/namespaces");
        assert_eq!(r.resource, "namespaces");
        assert!(r.is_collection());
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(r.resource, "namespaces");
        assert!(r.named && !r.namespaced);
        let r = res("/api/v1/namespaces/kube-system/finalize");
        assert_eq!(
            (r.resource.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("finalize"))
        );
        let r = res("/api/v1/namespaces/kube-system/status");
        assert_eq!(r.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn legacy_watch_paths() {
        let r = res("/api/v1/watch/namespaces/verify/configmaps");
        assert!(r.legacy_watch && r.namespaced && r.is_collection());
        let r = res("/apis/apps/v1/watch/deployments");
        assert!(r.legacy_watch && !r.namespaced);
        let r = res("/api/v1/watch/namespaces/verify/configmaps/one");
        assert!(r.legacy_watch && r.named);
        assert!(r.serves_watch(Method::Get, None));
        assert_eq!(Route::classify("/api/v1/watch"), Route::Other);
    }

    #[test]
    fn connect_subresources() {
        for sub in CONNECT_SUBRESOURCES {
            let r = res(&format!("/api/v1/namespaces/ns/pods/p/{sub}"));
            assert!(r.is_connect(), "{sub}");
        }
        let r = res("/api/v1/namespaces/ns/pods/p/proxy/some/deep/path");
        assert_eq!(r.subresource.as_deref(), Some("proxy"));
        let r = res("/api/v1/nodes/node-1:10250/proxy/metrics");
        assert!(r.is_connect());
        for sub in [
            "status",
            "scale",
            "eviction",
            "binding",
            "ephemeralcontainers",
            "token",
        ] {
            assert!(
                !res(&format!("/api/v1/namespaces/ns/pods/p/{sub}")).is_connect(),
                "{sub}"
            );
        }
    }

    #[test]
    fn discovery_routes() {
        let gv = |g: &str, v: &str| Route::GroupVersionDiscovery {
            group: g.to_owned(),
            version: v.to_owned(),
        };
        assert_eq!(Route::classify("/api/v1"), gv("", "v1"));
        assert_eq!(Route::classify("/api/v1/"), gv("", "v1"));
        assert_eq!(Route::classify("/apis/apps/v1"), gv("apps", "v1"));
        assert_eq!(Route::classify("/apis/apps/v1").group(), Some("apps"));
        for path in [
            "/api",
            "/api/",
            "/apis",
            "/apis/apps",
            "/apis/apiregistration.k8s.io",
        ] {
            assert_eq!(Route::classify(path), Route::NoCborDiscovery, "{path}");
        }
        for path in [
            "/version",
            "/openapi/v3",
            "/openapi/v2",
            "/healthz",
            "/livez",
            "/readyz",
            "/metrics",
            "/",
            "",
        ] {
            assert_eq!(Route::classify(path), Route::Other, "{path}");
        }
        assert_eq!(Route::classify("/api/v2"), Route::Other);
        assert_eq!(Route::classify("/api/v2/pods"), Route::Other);
    }

    #[test]
    fn odd_paths_are_other() {
        for path in [
            "api/v1/pods",
            "/api//v1/pods",
            "/apis//v1/pods",
            "/apis/apps//deployments",
            "/api/v1/namespaces/ns/configmaps//status",
            "/api/v1/%zz/pods",
            "/api/v1/%ff%fe/x",
            "/api/v1/proxy/namespaces/ns/pods/p",
            "/apiz/v1/pods",
        ] {
            assert_eq!(Route::classify(path), Route::Other, "{path}");
        }
        let long = format!("/apis/{}/v1/things", "g".repeat(300));
        assert_eq!(Route::classify(&long), Route::Other);
    }

    #[test]
    fn names_of_any_length_read_back_whole() {
        let long = "g".repeat(MAX_NAME_LEN);
        for text in [
            "",
            "v1",
            "mutatingwebhookconfigurations",
            &long[..31],
            &long,
        ] {
            let name = Name::new(text);
            assert_eq!(name.as_str(), text);
            assert_eq!(name, text);
            assert_eq!(name, Name::new(text));
            assert_eq!(format!("{name:?}"), format!("{text:?}"));
        }
        assert_ne!(Name::new("pods"), Name::new("pod"));
        let r = res(&format!("/apis/{long}/v1/{}/x", &long[..40]));
        assert_eq!(
            (r.group.as_str(), r.resource.as_str()),
            (&long[..], &long[..40])
        );
    }

    #[test]
    fn paths_longer_than_the_stack_segments_classify_the_same() {
        // 16 segments fit on the stack; 17 and more are collected.
        for extra in [9, 10, 11, 30] {
            let tail = vec!["x"; extra].join("/");
            let r = res(&format!("/api/v1/namespaces/ns/pods/p/log/{tail}"));
            assert_eq!(
                (r.resource.as_str(), r.subresource.as_deref(), r.named),
                ("pods", Some("log"), true),
                "{extra}"
            );
            let r = res(&format!("/apis/apps/v1/deployments/d/scale/{tail}/"));
            assert_eq!(r.subresource.as_deref(), Some("scale"), "{extra}");
        }
        let odd = format!("/api/v1/namespaces/ns/pods//{}", vec!["x"; 20].join("/"));
        assert_eq!(Route::classify(&odd), Route::Other);
    }

    #[test]
    fn percent_encoding_is_decoded() {
        let r = res("/api/v1/namespaces/ns/%63onfigmaps/a%2Fb");
        assert_eq!(r.resource, "configmaps");
        // `%2F` becomes a separator, as in Go's URL.Path.
        assert_eq!(r.subresource.as_deref(), Some("b"));
        assert_eq!(res("/api/v1/pods?watch=1").resource, "pods");
    }

    #[test]
    fn verbs() {
        let cm = "/api/v1/namespaces/ns/configmaps";
        assert_eq!(verb("GET", cm, None), "LIST");
        assert_eq!(verb("get", cm, None), "LIST");
        assert_eq!(verb("GET", &format!("{cm}/x"), None), "GET");
        assert_eq!(verb("GET", cm, Some("watch=true")), "WATCH");
        assert_eq!(verb("GET", cm, Some("timeoutSeconds=1&watch=1")), "WATCH");
        assert_eq!(verb("GET", cm, Some("watch=false")), "LIST");
        assert_eq!(verb("GET", cm, Some("watch=0&watch=1")), "LIST");
        assert_eq!(verb("GET", &format!("{cm}/x"), Some("watch=true")), "WATCH");
        assert_eq!(
            verb("GET", "/api/v1/watch/namespaces/ns/configmaps", None),
            "WATCH"
        );
        assert_eq!(verb("POST", cm, None), "POST");
        assert_eq!(verb("PUT", &format!("{cm}/x"), None), "PUT");
        assert_eq!(verb("PATCH", &format!("{cm}/x"), None), "PATCH");
        assert_eq!(verb("DELETE", &format!("{cm}/x"), None), "DELETE");
        assert_eq!(verb("DELETE", cm, None), "DELETECOLLECTION");
        assert_eq!(verb("HEAD", cm, None), "HEAD");
        assert_eq!(verb("OPTIONS", cm, None), "OPTIONS");
        assert_eq!(verb("CONNECT", "/", None), "CONNECT");
        assert_eq!(verb("BREW", cm, None), "OTHER");
        assert_eq!(verb("", cm, None), "OTHER");
        assert_eq!(
            verb(
                "GET",
                "/api/v1/namespaces/ns/pods/p/log",
                Some("follow=true")
            ),
            "CONNECT"
        );
        assert_eq!(
            verb("POST", "/api/v1/namespaces/ns/pods/p/exec", None),
            "CONNECT"
        );
        assert_eq!(
            verb("GET", "/api/v1/namespaces/ns/pods/p/portforward", None),
            "CONNECT"
        );
        assert_eq!(verb("GET", "/version", None), "GET");
        assert_eq!(verb("GET", "/apis/apps/v1", None), "GET");
        assert_eq!(verb("DELETE", "/healthz", None), "DELETE");
        let patch = |ct| normalize_verb(Method::Patch, &Route::classify(cm), None, Some(ct), false);
        assert_eq!(patch("application/apply-patch+yaml"), "APPLY");
        assert_eq!(patch("application/apply-patch+cbor"), "APPLY");
        assert_eq!(patch("application/merge-patch+json"), "PATCH");
        assert_eq!(
            normalize_verb(Method::Get, &Route::classify(cm), None, None, true),
            "CONNECT"
        );
        for v in [
            "GET",
            "LIST",
            "WATCH",
            "CONNECT",
            "OTHER",
            "APPLY",
            "DELETECOLLECTION",
        ] {
            assert!(Verb::ALL.iter().any(|verb| *verb == v));
        }
    }

    #[test]
    fn watch_query_follows_go() {
        let w = |q: &str| query_watch(Some(q));
        assert!(w("watch=true") && w("watch=1") && w("watch=yes") && w("watch=") && w("watch"));
        assert!(w("watch=TRUE") && w("%77atch=1") && w("watch=%31"));
        assert!(
            !w("watch=false") && !w("watch=FALSE") && !w("watch=0") && !w("") && !w("watcher=1")
        );
        assert!(!w("watch=0&watch=1"), "the first value decides");
        assert!(
            w("watch=%zz&watch=1"),
            "a pair with a bad escape is skipped"
        );
        assert!(
            w("watch=true;x=1&watch=true") && !w("watch=true;x=1"),
            "pairs with ; are skipped"
        );
        assert!(!query_watch(None));
        assert!(w("watch=%ff"), "non-UTF-8 is neither 0 nor false");
    }

    #[test]
    fn serving_watch_needs_a_collection_get() {
        let cm = res("/api/v1/namespaces/ns/configmaps");
        assert!(cm.serves_watch(Method::Get, Some("watch=true")));
        assert!(!cm.serves_watch(Method::Get, Some("watch=false")));
        assert!(!cm.serves_watch(Method::Delete, Some("watch=true")));
        let one = res("/api/v1/namespaces/ns/configmaps/x");
        assert!(!one.serves_watch(Method::Get, Some("watch=true")));
    }

    #[test]
    fn pretty_query() {
        assert_eq!(query_pretty(Some("pretty=true")), Some(true));
        assert_eq!(query_pretty(Some("pretty=1")), Some(true));
        assert_eq!(query_pretty(Some("pretty=0")), Some(false));
        assert_eq!(query_pretty(Some("pretty=yes")), Some(false));
        assert_eq!(query_pretty(Some("pretty=")), None);
        assert_eq!(query_pretty(Some("x=1")), None);
        assert_eq!(query_pretty(None), None);
    }

    #[test]
    fn query_values_are_unescaped() {
        assert_eq!(
            query_first_value("a=b+c%20d", "a").as_deref(),
            Some("b c d")
        );
        assert_eq!(query_first_value("a%3Db=1", "a=b").as_deref(), Some("1"));
        assert_eq!(query_first_value("&&a&", "a").as_deref(), Some(""));
        assert_eq!(query_first_value("a=%", "a"), None);
    }

    #[test]
    fn upgrade_protocols_are_a_bounded_label() {
        for (header, want) in [
            (Some("SPDY/3.1"), UpgradeProtocol::Spdy),
            (Some("spdy/3.1"), UpgradeProtocol::Spdy),
            (Some("websocket"), UpgradeProtocol::WebSocket),
            (Some("WebSocket"), UpgradeProtocol::WebSocket),
            (Some("h2c"), UpgradeProtocol::Other),
            (Some("spd"), UpgradeProtocol::Other),
            (Some(""), UpgradeProtocol::Other),
            (None, UpgradeProtocol::Other),
        ] {
            assert_eq!(UpgradeProtocol::of(header), want, "{header:?}");
        }
    }
}
