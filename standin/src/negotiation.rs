//! Content negotiation as a kube-apiserver does it, with CBOR off or (per endpoint,
//! [`Serving`]) on, in its two layers:
//! the go-restful router (exact media-type match on `Produces`/`Consumes`, params
//! stripped, `*/*` accepted; its 406/415 bodies) and apimachinery's negotiation over
//! goautoneg-parsed `Accept` clauses (q-values sorted but `q=0` kept, `*/*`,
//! `type/*`, the `as`/`g`/`v`/`stream`/`pretty` parameters, endpoint restrictions for
//! Table and PartialObjectMetadata). Also request-body media types. With CBOR on
//! (`CBORServingAndStorage`), `application/cbor` joins the offered serializers (after
//! protobuf, so `*/*` still means JSON), watches stream `application/cbor-seq`, Table
//! stays JSON/YAML only, and `application/apply-patch+cbor` joins the patch types.

use serde_json::{json, Value};

pub(crate) const JSON: &str = "application/json";
pub(crate) const YAML: &str = "application/yaml";
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
pub(crate) const JSON_WATCH: &str = "application/json;stream=watch";
pub(crate) const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
pub(crate) const CBOR: &str = "application/cbor";
/// The watch media type of a CBOR-enabled server (RFC 8742 CBOR Sequence).
pub(crate) const CBOR_SEQ: &str = "application/cbor-seq";
pub(crate) const APPLY_PATCH_CBOR: &str = "application/apply-patch+cbor";

/// The prefix of every Kubernetes protobuf body; the stand-in puts JSON text after it.
pub(crate) const PROTOBUF_MAGIC: &[u8] = b"k8s\x00";

/// What the router's single-object and create/update/patch/delete routes produce.
pub(crate) const PRODUCES_OBJECT: &[&str] = &[JSON, YAML, PROTOBUF];
/// What list and watch routes produce (adds the stream variants).
pub(crate) const PRODUCES_LIST: &[&str] = &[JSON, YAML, PROTOBUF, JSON_WATCH, PROTOBUF_WATCH];
/// With CBOR on: what single-object routes produce (`MediaTypesForSerializer`).
pub(crate) const PRODUCES_OBJECT_CBOR: &[&str] = &[JSON, YAML, PROTOBUF, CBOR];
/// With CBOR on: what list and watch routes produce; CBOR's stream type is `cbor-seq`.
pub(crate) const PRODUCES_LIST_CBOR: &[&str] = &[
    JSON,
    YAML,
    PROTOBUF,
    CBOR,
    JSON_WATCH,
    PROTOBUF_WATCH,
    CBOR_SEQ,
];
/// What `/version` produces.
pub(crate) const PRODUCES_VERSION: &[&str] = &[JSON];

/// Patch types a built-in resource accepts (router `Consumes` and handler check).
pub(crate) const PATCH_TYPES_BUILTIN: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];
/// Patch types a custom resource accepts: no strategic merge patch.
pub(crate) const PATCH_TYPES_CR: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// With CBOR on: patch types of a built-in resource (apply-patch+cbor appended).
pub(crate) const PATCH_TYPES_BUILTIN_CBOR: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    APPLY_PATCH_CBOR,
];
/// With CBOR on: patch types of a custom resource.
pub(crate) const PATCH_TYPES_CR_CBOR: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    APPLY_PATCH_CBOR,
];

/// One serializer the server can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Yaml,
    Protobuf,
    Cbor,
}

impl Format {
    pub(crate) fn media_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Yaml => YAML,
            Format::Protobuf => PROTOBUF,
            Format::Cbor => CBOR,
        }
    }
    fn parts(self) -> (&'static str, &'static str) {
        match self {
            Format::Json => ("application", "json"),
            Format::Yaml => ("application", "yaml"),
            Format::Protobuf => ("application", "vnd.kubernetes.protobuf"),
            Format::Cbor => ("application", "cbor"),
        }
    }
    pub(crate) fn has_stream(self) -> bool {
        !matches!(self, Format::Yaml)
    }
}

/// The serializers every endpoint of this server has, in the server's order.
pub(crate) const OFFERED: &[Format] = &[Format::Json, Format::Yaml, Format::Protobuf];
/// With CBOR on: CBOR last, so `*/*` and an empty `Accept` still choose JSON.
pub(crate) const OFFERED_CBOR: &[Format] =
    &[Format::Json, Format::Yaml, Format::Protobuf, Format::Cbor];

/// Which serializers stand behind one endpoint: a legacy server's (CBOR off) or a
/// CBOR-enabled one's. Behind an aggregator, this can differ per API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Serving {
    #[default]
    Legacy,
    Cbor,
}

impl Serving {
    pub(crate) fn offered(self) -> &'static [Format] {
        match self {
            Serving::Legacy => OFFERED,
            Serving::Cbor => OFFERED_CBOR,
        }
    }
    pub(crate) fn produces_object(self) -> &'static [&'static str] {
        match self {
            Serving::Legacy => PRODUCES_OBJECT,
            Serving::Cbor => PRODUCES_OBJECT_CBOR,
        }
    }
    pub(crate) fn produces_list(self) -> &'static [&'static str] {
        match self {
            Serving::Legacy => PRODUCES_LIST,
            Serving::Cbor => PRODUCES_LIST_CBOR,
        }
    }
    /// The stream media types (`MediaTypesForSerializer`'s second list).
    pub(crate) fn stream_types(self) -> &'static [&'static str] {
        &self.produces_list()[self.produces_object().len()..]
    }
    pub(crate) fn patch_types(self, builtin: bool) -> &'static [&'static str] {
        match (self, builtin) {
            (Serving::Legacy, true) => PATCH_TYPES_BUILTIN,
            (Serving::Legacy, false) => PATCH_TYPES_CR,
            (Serving::Cbor, true) => PATCH_TYPES_BUILTIN_CBOR,
            (Serving::Cbor, false) => PATCH_TYPES_CR_CBOR,
        }
    }
    /// The request-body format for POST/PUT/DELETE bodies (`NegotiateInputSerializer`).
    pub(crate) fn input_format(self, content_type: &str) -> Option<Format> {
        match input_format(content_type) {
            Some(f) => Some(f),
            None if self == Serving::Cbor => {
                (body_media_type(content_type)?.as_str() == CBOR).then_some(Format::Cbor)
            }
            None => None,
        }
    }
}

/// A requested transformation (`as=Table;g=meta.k8s.io;v=v1` and friends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Convert {
    pub kind: String,
    pub group: String,
    pub version: String,
}

/// The outcome of output negotiation.
#[derive(Clone, Debug)]
pub(crate) struct Negotiated {
    pub format: Format,
    pub convert: Option<Convert>,
    pub pretty: bool,
}

/// Which transformations an endpoint allows, as `RequestScope.AllowsMediaTypeTransform`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Restrictions {
    /// Discovery and other plain endpoints: no `as=` at all.
    Default,
    /// A built-in resource: Table (JSON/YAML) and PartialObjectMetadata[List].
    Builtin,
    /// A custom resource: like built-ins, but untransformed output only as JSON or YAML.
    Custom,
}

impl Restrictions {
    fn allows(self, format: Format, convert: Option<&Convert>) -> bool {
        match convert {
            None => match self {
                Restrictions::Custom => format != Format::Protobuf,
                _ => true,
            },
            Some(c) => {
                if self == Restrictions::Default {
                    return false;
                }
                if c.group != "meta.k8s.io" || (c.version != "v1" && c.version != "v1beta1") {
                    return false;
                }
                match c.kind.as_str() {
                    "Table" => matches!(format, Format::Json | Format::Yaml),
                    "PartialObjectMetadata" | "PartialObjectMetadataList" => true,
                    _ => false,
                }
            }
        }
    }
}

/// One clause of an `Accept` header as goautoneg parses it.
#[derive(Clone, Debug)]
pub(crate) struct Clause {
    pub typ: String,
    pub sub: String,
    pub q: f64,
    pub params: Vec<(String, String)>,
}

/// goautoneg's `ParseAccept`, including its (unstable-looking but insertion-sorted) order.
pub(crate) fn parse_accept(header: &str) -> Vec<Clause> {
    let mut out: Vec<Clause> = Vec::new();
    for part in header.split(',') {
        let mut mrp = part.split(';');
        let media_range = mrp.next().unwrap_or("");
        let sp: Vec<&str> = media_range.split('/').collect();
        let typ = sp[0].trim_matches(' ').to_string();
        let sub = if sp.len() == 1 && typ == "*" {
            "*".to_string()
        } else if sp.len() == 2 {
            sp[1].trim_matches(' ').to_string()
        } else {
            continue;
        };
        let mut c = Clause {
            typ,
            sub,
            q: 1.0,
            params: Vec::new(),
        };
        for param in mrp {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let token = k.trim_matches(' ');
            if token == "q" {
                // strconv.ParseFloat(v, 32): the raw text, 0 on error.
                c.q = v.parse::<f32>().map(|f| f as f64).unwrap_or(0.0);
            } else {
                let v = v.trim_matches(' ').to_string();
                if let Some(slot) = c.params.iter_mut().find(|(pk, _)| pk == token) {
                    slot.1 = v;
                } else {
                    c.params.push((token.to_string(), v));
                }
            }
        }
        out.push(c);
    }
    // Go's sort.Sort on a short slice is an insertion sort with this Less.
    let less = |a: &Clause, b: &Clause| -> bool {
        a.q > b.q || (a.typ != "*" && b.typ == "*") || (a.sub != "*" && b.sub == "*")
    };
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && less(&out[j], &out[j - 1]) {
            out.swap(j, j - 1);
            j -= 1;
        }
    }
    out
}

/// apimachinery's `NegotiateMediaTypeOptions` over the given serializers.
pub(crate) fn negotiate(
    accept: &str,
    offered: &[Format],
    restrictions: Restrictions,
) -> Option<Negotiated> {
    if accept.is_empty() {
        return offered.first().map(|f| Negotiated {
            format: *f,
            convert: None,
            pretty: false,
        });
    }
    for clause in parse_accept(accept) {
        for f in offered {
            let (t, s) = f.parts();
            let matches = (clause.typ == t && (clause.sub == s || clause.sub == "*"))
                || (clause.typ == "*" && clause.sub == "*");
            if !matches {
                continue;
            }
            if let Some(n) = accept_options(&clause.params, *f, restrictions) {
                return Some(n);
            }
        }
    }
    None
}

fn accept_options(params: &[(String, String)], f: Format, r: Restrictions) -> Option<Negotiated> {
    let mut convert: Option<Convert> = None;
    let mut pretty = false;
    for (k, v) in params {
        match k.as_str() {
            "as" => convert.get_or_insert_with(empty_convert).kind = v.clone(),
            "g" => convert.get_or_insert_with(empty_convert).group = v.clone(),
            "v" => convert.get_or_insert_with(empty_convert).version = v.clone(),
            "stream" if !v.is_empty() && (!f.has_stream() || v != "watch") => return None,
            "sv" if !v.is_empty() && v != "v1" => return None,
            "pretty" => pretty = v == "1",
            _ => {}
        }
    }
    if !r.allows(f, convert.as_ref()) {
        return None;
    }
    Some(Negotiated {
        format: f,
        convert,
        pretty,
    })
}

fn empty_convert() -> Convert {
    Convert {
        kind: String::new(),
        group: String::new(),
        version: String::new(),
    }
}

/// go-restful's `Route.matchesAccept`: any `*/*`, or a type (params stripped) that is
/// literally one of `produces`. An empty header counts as `*/*`.
pub(crate) fn router_accepts(accept: &str, produces: &[&str]) -> bool {
    let accept = if accept.is_empty() { "*/*" } else { accept };
    for part in accept.split(',') {
        let t = part.split(';').next().unwrap_or("").trim_matches(' ');
        if t == "*/*" {
            return true;
        }
        if produces.iter().any(|p| *p == "*/*" || *p == t) {
            return true;
        }
    }
    false
}

/// go-restful's `Route.matchesContentType` for a route that lists `consumes`.
pub(crate) fn router_consumes(content_type: &str, method: &str, consumes: &[&str]) -> bool {
    if consumes.is_empty() {
        return true;
    }
    let ct = if content_type.is_empty() {
        if matches!(method, "GET" | "HEAD" | "OPTIONS" | "DELETE" | "TRACE") {
            return true;
        }
        "application/octet-stream"
    } else {
        content_type
    };
    for part in ct.split(',') {
        let t = part.split(';').next().unwrap_or("").trim_matches(' ');
        if t.is_empty() {
            continue;
        }
        if consumes.iter().any(|c| *c == "*/*" || *c == t) {
            return true;
        }
    }
    false
}

/// The request body's media type as Go's `mime.ParseMediaType` sees it (lower-cased,
/// parameters dropped); `None` if it does not parse.
pub(crate) fn body_media_type(content_type: &str) -> Option<String> {
    let t = content_type.split(';').next()?.trim();
    let (a, b) = t.split_once('/')?;
    let tok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
    };
    if !tok(a) || !tok(b) {
        return None;
    }
    Some(t.to_ascii_lowercase())
}

/// The request-body format for POST/PUT/DELETE bodies (`NegotiateInputSerializer`).
pub(crate) fn input_format(content_type: &str) -> Option<Format> {
    if content_type.trim().is_empty() {
        return Some(Format::Json);
    }
    match body_media_type(content_type)?.as_str() {
        JSON => Some(Format::Json),
        YAML => Some(Format::Yaml),
        PROTOBUF => Some(Format::Protobuf),
        _ => None,
    }
}

/// The go-restful router's 406, as the apiserver writes it when nothing is acceptable.
pub(crate) fn router_not_acceptable(produces: &[&str]) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("406: Not Acceptable\n\nAvailable representations: {}", produces.join(", ")),
        "reason": "NotAcceptable",
        "details": {},
        "code": 406
    })
}

/// The go-restful router's 415 (`a-apply-cbor`).
pub(crate) fn router_unsupported_media_type() -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "415: Unsupported Media Type",
        "reason": "UnsupportedMediaType",
        "details": {},
        "code": 415
    })
}

/// apimachinery's `errNotAcceptable` (`a-apis-cbor`).
pub(crate) fn not_acceptable(types: &[&str]) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("only the following media types are accepted: {}", types.join(", ")),
        "reason": "NotAcceptable",
        "code": 406
    })
}

/// apimachinery's `errUnsupportedMediaType` (`a-post-cbor`).
pub(crate) fn unsupported_media_type(types: &[&str]) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            types.join(", ")
        ),
        "reason": "UnsupportedMediaType",
        "code": 415
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(accept: &str, r: Restrictions) -> Option<(Format, Option<String>)> {
        negotiate(accept, OFFERED, r).map(|n| (n.format, n.convert.map(|c| c.kind)))
    }

    #[test]
    fn q_values_and_wildcards() {
        let b = Restrictions::Builtin;
        assert_eq!(
            pick("application/cbor, application/json;q=0.9", b),
            Some((Format::Json, None))
        );
        assert_eq!(pick("application/cbor", b), None);
        assert_eq!(pick("*/*", b), Some((Format::Json, None)));
        assert_eq!(pick("", b), Some((Format::Json, None)));
        assert_eq!(pick("application/*", b), Some((Format::Json, None)));
        assert_eq!(
            pick("application/json;q=0.5, application/yaml", b),
            Some((Format::Yaml, None))
        );
        // q=0 is kept, as goautoneg keeps it.
        assert_eq!(pick("application/json;q=0", b), Some((Format::Json, None)));
        assert_eq!(
            pick("application/vnd.kubernetes.protobuf, */*", b),
            Some((Format::Protobuf, None))
        );
    }

    #[test]
    fn transforms() {
        let b = Restrictions::Builtin;
        assert_eq!(
            pick("application/json;as=Table;g=meta.k8s.io;v=v1", b),
            Some((Format::Json, Some("Table".into())))
        );
        assert_eq!(
            pick("application/cbor;as=Table;g=meta.k8s.io;v=v1", b),
            None
        );
        assert_eq!(
            pick(
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
                b
            ),
            None
        );
        assert_eq!(pick("application/json;as=Table", b), None);
        assert_eq!(
            pick(
                "application/json;as=Table;g=meta.k8s.io;v=v1",
                Restrictions::Default
            ),
            None
        );
        assert_eq!(
            pick(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
                Restrictions::Default
            ),
            Some((Format::Json, None))
        );
        assert_eq!(
            pick("application/vnd.kubernetes.protobuf", Restrictions::Custom),
            None
        );
    }

    #[test]
    fn router() {
        assert!(router_accepts("", PRODUCES_OBJECT));
        assert!(router_accepts(
            "application/cbor, application/json;q=0.9",
            PRODUCES_OBJECT
        ));
        assert!(!router_accepts("application/cbor", PRODUCES_OBJECT));
        assert!(router_accepts(
            "application/json;stream=watch",
            PRODUCES_LIST
        ));
        assert!(!router_accepts("application/*", PRODUCES_OBJECT));
        assert!(router_consumes(
            "application/merge-patch+json; charset=utf-8",
            "PATCH",
            PATCH_TYPES_BUILTIN
        ));
        assert!(!router_consumes(
            "application/apply-patch+cbor",
            "PATCH",
            PATCH_TYPES_BUILTIN
        ));
        assert!(!router_consumes("", "PATCH", PATCH_TYPES_BUILTIN));
    }
}
