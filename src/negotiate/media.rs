//! Media types: `Accept` negotiation exactly as a CBOR-enabled kube-apiserver 1.36 does it,
//! `Content-Type` parsing, and the bounded [`Format`] label used by metrics.
//!
//! `Accept` goes through the two steps the apiserver uses:
//!
//! 1. goautoneg `ParseAccept` (the copy vendored by Kubernetes): clauses split on `,`, the
//!    media range and parameters on `;`, only spaces trimmed, `q` read with Go's
//!    `strconv.ParseFloat(q, 32)` (ported in `go_float.rs`; errors ignored, so a bad `q` is
//!    0), and the clauses sorted by Go's `sort.Sort` with goautoneg's comparator: `q`
//!    descending, then a concrete type before `*`. That comparator is not a strict weak
//!    order and `sort.Sort` is not stable, so the order depends on the algorithm:
//!    `go_sort.rs` is a line-by-line port of Go's pdqsort (insertion sort up to 12
//!    clauses). Clauses with `q=0` are kept, as goautoneg keeps them:
//!    `application/cbor;q=0` still chooses CBOR, as on the real server.
//! 2. apiserver `NegotiateMediaTypeOptions`: for each clause in that order, for each offered
//!    media type in server order ([`Offer::SERVER_ORDER`]), the first match of
//!    `type/subtype`, `type/*` or `*/*` whose parameters the endpoint allows wins
//!    ([`Restrictions`]). An empty or missing header chooses the first offer, JSON.
//!
//! Work is bounded: one pass over the header, at most [`MAX_ACCEPT_CLAUSES`] clauses kept,
//! no allocation per clause or parameter.

use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;

use super::go_float::go_parse_float32;
use super::go_sort::go_sort;

/// Where the crate's randomized model tests (plan.rs, the stand-in's) find their
/// pseudo-random source.
#[cfg(test)]
pub(crate) use super::go_sort::xorshift_next;

/// At most this many well-formed clauses of one `Accept` header are considered; later ones
/// are ignored. kube-apiserver has no such limit, so a header with more clauses can negotiate
/// differently there; real clients send one to four.
pub const MAX_ACCEPT_CLAUSES: usize = 64;

/// The message of the 406 a CBOR-enabled server answers when nothing in `Accept` can be
/// served (recorded in `b-table-cbor` and `b-watch-cborseq`).
pub const NOT_ACCEPTABLE_MESSAGE: &str = "only the following media types are accepted: \
     application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor";

/// The message of the 406 for discovery that only CBOR would satisfy (recorded as
/// `disc-apis-cr-v1` in `tests/data/corpus/native-1.36`: a CRD group's discovery).
pub const DISCOVERY_NOT_ACCEPTABLE_MESSAGE: &str = "only the following media types are accepted: \
     application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// What a CBOR-enabled server's router (go-restful) lists as a resource route's
/// `Produces`: an object route.
pub const PRODUCES_OBJECT: [&str; 4] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];

/// The same for a collection's GET (list and watch): the stream types too.
pub const PRODUCES_COLLECTION: [&str; 7] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/cbor-seq",
];

/// go-restful's `Route.matchesAccept`, which runs before the handler negotiates: any
/// `*/*`, or a clause whose type (parameters cut, spaces trimmed, compared as written)
/// is literally one of `produces`. An empty or missing header counts as `*/*`. So
/// `application/*` matches nothing (case `accept-app-star`).
pub fn router_accepts(accept: Option<&str>, produces: &[&str]) -> bool {
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    accept.split(',').any(|part| {
        let t = part.split(';').next().unwrap_or("").trim_matches(' ');
        t == "*/*" || produces.contains(&t)
    })
}

/// The router's 406 text: `406: Not Acceptable`, then the route's `Produces`
/// (cases `accept-cbor-seq`, `accept-app-star`).
pub fn router_not_acceptable_message(produces: &[&str]) -> String {
    format!(
        "406: Not Acceptable\n\nAvailable representations: {}",
        produces.join(", ")
    )
}

/// `accept` with every CBOR clause asking for JSON instead, other clauses and every
/// parameter as written: for routes whose legacy upstream would refuse CBOR in its router
/// but whose handler does not care (`pods/log`).
pub fn accept_without_cbor(accept: &str) -> String {
    accept
        .split(',')
        .map(|part| {
            let (t, params) = part
                .split_once(';')
                .map_or((part, None), |(t, p)| (t, Some(p)));
            let lead = &t[..t.len() - t.trim_start().len()];
            let media = t.trim();
            let media = if media.eq_ignore_ascii_case("application/cbor")
                || media.eq_ignore_ascii_case("application/cbor-seq")
            {
                "application/json"
            } else {
                media
            };
            match params {
                Some(p) => format!("{lead}{media};{p}"),
                None => format!("{lead}{media}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A body format, as a bounded metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `application/json` and `+json` types (JSON patches).
    Json,
    /// `application/cbor` and `+cbor` types.
    Cbor,
    /// `application/yaml` and `+yaml` types (`application/apply-patch+yaml`).
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
    /// Anything else: text, logs, streams, unknown types.
    Other,
    /// No body type at all.
    None,
}

impl Format {
    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Cbor => "cbor",
            Format::Yaml => "yaml",
            Format::Protobuf => "protobuf",
            Format::Other => "other",
            Format::None => "none",
        }
    }

    /// The label of a media type without parameters; case is ignored.
    pub fn of_media_type(media_type: &str) -> Format {
        if media_type.is_empty() {
            return Format::None;
        }
        let Some((ty, subtype)) = media_type.split_once('/') else {
            return Format::Other;
        };
        if !ty.eq_ignore_ascii_case("application") {
            return Format::Other;
        }
        let suffix = subtype
            .rsplit_once('+')
            .map_or(subtype, |(_, suffix)| suffix);
        let is =
            |name: &str| subtype.eq_ignore_ascii_case(name) || suffix.eq_ignore_ascii_case(name);
        if is("json") {
            Format::Json
        } else if is("cbor") {
            Format::Cbor
        } else if is("yaml") {
            Format::Yaml
        } else if is("vnd.kubernetes.protobuf") || suffix.eq_ignore_ascii_case("protobuf") {
            Format::Protobuf
        } else {
            Format::Other
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A media type a CBOR-enabled kube-apiserver 1.36 can answer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Offer {
    /// `application/json`
    Json,
    /// `application/yaml`
    Yaml,
    /// `application/vnd.kubernetes.protobuf`
    Protobuf,
    /// `application/cbor`
    Cbor,
}

impl Offer {
    /// The server's own order, which breaks ties between equally good clauses.
    pub const SERVER_ORDER: [Offer; 4] = [Offer::Json, Offer::Yaml, Offer::Protobuf, Offer::Cbor];

    /// The offers of a route that serves no CBOR (discovery, as cborgate serves it).
    pub const WITHOUT_CBOR: [Offer; 3] = [Offer::Json, Offer::Yaml, Offer::Protobuf];

    /// The media type, without parameters.
    pub const fn media_type(self) -> &'static str {
        match self {
            Offer::Json => "application/json",
            Offer::Yaml => "application/yaml",
            Offer::Protobuf => "application/vnd.kubernetes.protobuf",
            Offer::Cbor => "application/cbor",
        }
    }

    /// The subtype; every offer has type `application`.
    const fn subtype(self) -> &'static str {
        match self {
            Offer::Json => "json",
            Offer::Yaml => "yaml",
            Offer::Protobuf => "vnd.kubernetes.protobuf",
            Offer::Cbor => "cbor",
        }
    }

    /// Whether the server has a stream (watch) serializer for it: all but YAML.
    pub const fn has_stream_serializer(self) -> bool {
        !matches!(self, Offer::Yaml)
    }

    /// The metric label.
    pub const fn format(self) -> Format {
        match self {
            Offer::Json => Format::Json,
            Offer::Yaml => Format::Yaml,
            Offer::Protobuf => Format::Protobuf,
            Offer::Cbor => Format::Cbor,
        }
    }
}

/// The `EndpointRestrictions` the apiserver negotiates with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restrictions {
    /// A resource handler's `RequestScope`: `as`/`g`/`v` may ask for `Table` (JSON and YAML
    /// only) or `PartialObjectMetadata[List]` (any type) in `meta.k8s.io/v1` or `v1beta1`,
    /// `sv` may be `v1`, `stream` may be `watch` on a type with a stream serializer.
    ///
    /// Assumes a built-in resource with a table convertor: a CRD also refuses protobuf, which
    /// a proxy cannot know from the path (it passes protobuf through, so the upstream decides).
    Resource,
    /// `DefaultEndpointRestrictions`: no transformation, no `sv`, `stream=watch` only. Used by
    /// group-version discovery and for every error `Status` (`ErrorNegotiated`).
    Default,
    /// Anything goes; only a label for routes cborgate never changes.
    Unrestricted,
}

impl Restrictions {
    fn allows_transform(self, offer: Offer, convert: Option<&Convert<'_>>) -> bool {
        let Some(convert) = convert else {
            return true;
        };
        match self {
            Restrictions::Unrestricted => true,
            Restrictions::Default => false,
            Restrictions::Resource => {
                convert.group == "meta.k8s.io"
                    && (convert.version == "v1" || convert.version == "v1beta1")
                    && match convert.kind {
                        "Table" => matches!(offer, Offer::Json | Offer::Yaml),
                        "PartialObjectMetadata" | "PartialObjectMetadataList" => true,
                        _ => false,
                    }
            }
        }
    }

    fn allows_server_version(self, version: &str) -> bool {
        match self {
            Restrictions::Unrestricted => true,
            Restrictions::Default => false,
            // MetaGroupVersion.Version of a resource scope.
            Restrictions::Resource => version == "v1",
        }
    }

    fn allows_stream_schema(self, schema: &str) -> bool {
        matches!(self, Restrictions::Unrestricted) || schema == "watch"
    }
}

/// A requested transformation: the `as`, `g` and `v` parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Convert<'a> {
    /// `as`
    pub kind: &'a str,
    /// `g`
    pub group: &'a str,
    /// `v`
    pub version: &'a str,
}

/// The parameters of one clause as the apiserver reads them (`MediaTypeOptions`); for a
/// repeated key the last value wins, as in the Go map they are stored in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaTypeOptions<'a> {
    /// `pretty=1`
    pub pretty: bool,
    /// `export=1` (ignored by the server nowadays)
    pub export: bool,
    /// `stream`, empty when absent
    pub stream: &'a str,
    /// `sv`, empty when absent
    pub server_version: &'a str,
    /// `profile` (discovery), empty when absent
    pub profile: &'a str,
    /// Present when any of `as`, `g`, `v` is.
    pub convert: Option<Convert<'a>>,
}

impl MediaTypeOptions<'_> {
    /// `acceptMediaTypeOptions`: whether `offer` may be served with these parameters.
    pub fn allowed(&self, offer: Offer, restrictions: Restrictions) -> bool {
        if !self.stream.is_empty()
            && (!offer.has_stream_serializer() || !restrictions.allows_stream_schema(self.stream))
        {
            return false;
        }
        if !self.server_version.is_empty()
            && !restrictions.allows_server_version(self.server_version)
        {
            return false;
        }
        restrictions.allows_transform(offer, self.convert.as_ref())
    }
}

/// One clause of an `Accept` header, as goautoneg parsed it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcceptClause<'a> {
    type_: &'a str,
    subtype: &'a str,
    q: f32,
    /// Everything after the first `;`, unparsed.
    params: &'a str,
}

impl<'a> AcceptClause<'a> {
    /// The type, e.g. `application` or `*`.
    pub fn media_type_type(&self) -> &'a str {
        self.type_
    }

    /// The subtype, e.g. `cbor` or `*`.
    pub fn subtype(&self) -> &'a str {
        self.subtype
    }

    /// The quality, as Go parsed it (a float32; 0 when unparsable, 1 when absent).
    pub fn q(&self) -> f32 {
        self.q
    }

    /// The parameters goautoneg keeps, `q` included, in header order: `(key, value)` with
    /// spaces trimmed. Malformed ones (`a`, `a=`, `a=b=c`) are skipped as goautoneg skips them.
    pub fn params(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        RawParams { rest: self.params }.map(|(key, value)| (key, trim_spaces(value)))
    }

    /// The options the apiserver reads from the parameters.
    pub fn options(&self) -> MediaTypeOptions<'a> {
        let mut options = MediaTypeOptions::default();
        let (mut kind, mut group, mut version) = (None, None, None);
        for (key, value) in self.params() {
            match key {
                "as" => kind = Some(value),
                "g" => group = Some(value),
                "v" => version = Some(value),
                "stream" => options.stream = value,
                "sv" => options.server_version = value,
                "pretty" => options.pretty = value == "1",
                "export" => options.export = value == "1",
                "profile" => options.profile = value,
                // `q` is not a parameter for the apiserver; anything else is recorded as
                // unrecognized and otherwise ignored.
                _ => {}
            }
        }
        if kind.is_some() || group.is_some() || version.is_some() {
            options.convert = Some(Convert {
                kind: kind.unwrap_or_default(),
                group: group.unwrap_or_default(),
                version: version.unwrap_or_default(),
            });
        }
        options
    }

    /// Whether this media range covers `offer` (`type/subtype`, `type/*` or `*/*`).
    pub fn matches(&self, offer: Offer) -> bool {
        (self.type_ == "application" && (self.subtype == offer.subtype() || self.subtype == "*"))
            || (self.type_ == "*" && self.subtype == "*")
    }

    /// goautoneg's `Less`: higher `q` first, then a concrete type or subtype before `*`.
    /// Not a strict weak order (`*/*` "sorts before" `application/json;q=0.5` and the other
    /// way round), which is why the sort algorithm has to be Go's own.
    fn goautoneg_less(&self, other: &Self) -> bool {
        self.q > other.q
            || (self.type_ != "*" && other.type_ == "*")
            || (self.subtype != "*" && other.subtype == "*")
    }

    /// goautoneg's parsing of one comma-separated part; `None` where goautoneg skips it.
    fn parse(part: &'a str) -> Option<Self> {
        let part = trim_spaces(part);
        let (range, params) = split_first(part, ';');
        let (type_, after_slash) = split_first(range, '/');
        let type_ = trim_spaces(type_);
        let subtype = if after_slash.is_empty() {
            // `*` alone (or `*/`) means `*/*`; `application` or `application/` is dropped.
            if type_ != "*" {
                return None;
            }
            "*"
        } else {
            let (subtype, extra) = split_first(after_slash, '/');
            if !extra.is_empty() {
                return None;
            }
            trim_spaces(subtype)
        };
        let mut q = 1.0;
        for (key, value) in (RawParams { rest: params }) {
            if key == "q" {
                // Go reads the value untrimmed: `q= 0.5` is a syntax error, hence 0.
                q = go_parse_float32(value);
            }
        }
        Some(AcceptClause {
            type_,
            subtype,
            q,
            params,
        })
    }
}

/// The parameters of a clause as goautoneg's loop yields them: key trimmed, value raw.
struct RawParams<'a> {
    rest: &'a str,
}

impl<'a> Iterator for RawParams<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.rest.is_empty() {
            let (param, rest) = split_first(self.rest, ';');
            self.rest = rest;
            let (key, after_eq) = split_first(param, '=');
            if after_eq.is_empty() {
                continue;
            }
            let (value, extra) = split_first(after_eq, '=');
            if !extra.is_empty() {
                continue;
            }
            return Some((trim_spaces(key), value));
        }
        None
    }
}

/// A parsed `Accept` header, clauses in the order the apiserver tries them.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptHeader<'a> {
    /// No header, or an empty one: the apiserver then chooses its first offer.
    empty: bool,
    /// Inline up to [`INLINE_CLAUSES`]: what clients send (kubectl's table request
    /// has three) is parsed without an allocation.
    clauses: SmallVec<[AcceptClause<'a>; INLINE_CLAUSES]>,
}

/// How many `Accept` clauses a parsed header holds without allocating.
const INLINE_CLAUSES: usize = 4;

impl<'a> AcceptHeader<'a> {
    /// Parses and sorts, as goautoneg `ParseAccept` does. Never fails: what goautoneg
    /// skips is skipped, and a header with nothing usable has no clauses.
    pub fn parse(header: Option<&'a str>) -> Self {
        let header = header.unwrap_or_default();
        let mut clauses = SmallVec::new();
        let mut remaining = header;
        while !remaining.is_empty() && clauses.len() < MAX_ACCEPT_CLAUSES {
            let (part, rest) = split_first(remaining, ',');
            remaining = rest;
            if let Some(clause) = AcceptClause::parse(part) {
                clauses.push(clause);
            }
        }
        go_sort(&mut clauses, AcceptClause::goautoneg_less);
        AcceptHeader {
            empty: header.is_empty(),
            clauses,
        }
    }

    /// Whether the header was missing or empty.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The clauses, in negotiation order.
    pub fn clauses(&self) -> &[AcceptClause<'a>] {
        &self.clauses
    }

    /// `NegotiateMediaTypeOptions`: the first clause, then offer, that the endpoint allows;
    /// `None` means 406 Not Acceptable.
    pub fn negotiate(&self, restrictions: Restrictions) -> Option<Negotiated<'a>> {
        self.negotiate_among(restrictions, &Offer::SERVER_ORDER)
    }

    /// Whether a clause names `application/cbor` (any parameters, any `q`: a `q=0`
    /// clause still chooses CBOR on the server).
    pub fn lists_cbor(&self) -> bool {
        self.clauses.iter().any(|c| {
            c.media_type_type().eq_ignore_ascii_case("application")
                && c.subtype().eq_ignore_ascii_case("cbor")
        })
    }

    /// [`AcceptHeader::negotiate`] for a route that offers only `offers` (in server order).
    pub fn negotiate_among(
        &self,
        restrictions: Restrictions,
        offers: &[Offer],
    ) -> Option<Negotiated<'a>> {
        if self.empty {
            return Some(Negotiated {
                offer: Offer::Json,
                clause: None,
                options: MediaTypeOptions::default(),
            });
        }
        for clause in &self.clauses {
            let options = clause.options();
            for &offer in offers {
                if clause.matches(offer) && options.allowed(offer, restrictions) {
                    return Some(Negotiated {
                        offer,
                        clause: Some(*clause),
                        options,
                    });
                }
            }
        }
        None
    }
}

/// The outcome of a successful negotiation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Negotiated<'a> {
    /// What the server answers in.
    pub offer: Offer,
    /// The clause that chose it; `None` for an empty `Accept`.
    pub clause: Option<AcceptClause<'a>>,
    /// That clause's options.
    pub options: MediaTypeOptions<'a>,
}

impl Negotiated<'_> {
    /// The same request for JSON: `application/json` followed by the chosen clause's
    /// parameters except `q`, in the client's order (so `as`/`g`/`v`, and any option the
    /// upstream may know and cborgate does not, survive). Every parameter the apiserver
    /// accepts for CBOR it accepts for JSON too, so the upstream never refuses it.
    pub fn as_json_accept(&self) -> Cow<'static, str> {
        self.as_accept(Offer::Json)
    }

    /// The chosen clause rewritten to `application/cbor` with the same parameters (upgrade
    /// mode: what to ask a CBOR-enabled upstream for on behalf of a JSON client).
    pub fn as_cbor_accept(&self) -> Cow<'static, str> {
        self.as_accept(Offer::Cbor)
    }

    /// True when the chosen clause asks for a Table (JSON and YAML only, even on a
    /// CBOR-enabled server).
    pub fn is_table(&self) -> bool {
        self.options.convert.is_some_and(|c| c.kind == "Table")
    }

    /// The chosen clause rewritten to `offer`'s media type with the same parameters but `q`
    /// (the media type alone, borrowed, when there are none).
    pub fn as_accept(&self, offer: Offer) -> Cow<'static, str> {
        let mut accept = Cow::Borrowed(offer.media_type());
        for (key, value) in self.clause.iter().flat_map(AcceptClause::params) {
            // Control characters cannot come from a parsed header, but this function cannot
            // know where its input came from: never let one into a header value.
            if key == "q" || key.is_empty() || !is_field_text(key) || !is_field_text(value) {
                continue;
            }
            let accept = accept.to_mut();
            accept.push(';');
            accept.push_str(key);
            accept.push('=');
            accept.push_str(value);
        }
        accept
    }
}

/// A `Content-Type`: the media type without parameters (the server ignores them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentType<'a> {
    raw: &'a str,
    lower: Cow<'a, str>,
}

impl<'a> ContentType<'a> {
    /// Everything before the first `;`, trimmed; `None` when that is empty (no body type).
    pub fn parse(value: &'a str) -> Option<Self> {
        let raw = split_first(value, ';').0.trim();
        if raw.is_empty() {
            return None;
        }
        let lower = if raw.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(raw.to_ascii_lowercase())
        } else {
            Cow::Borrowed(raw)
        };
        Some(ContentType { raw, lower })
    }

    /// The media type, lower-cased (what `mime.ParseMediaType` gives POST and PUT handlers).
    pub fn media_type(&self) -> &str {
        &self.lower
    }

    /// The media type as sent (what the PATCH handler and router compare, case-sensitively).
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The metric label.
    pub fn format(&self) -> Format {
        Format::of_media_type(&self.lower)
    }

    /// `application/cbor` or a `+cbor` type.
    pub fn is_cbor_family(&self) -> bool {
        self.lower == "application/cbor" || self.lower.ends_with("+cbor")
    }
}

/// Text allowed in an HTTP field value: no control characters except horizontal tab.
fn is_field_text(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// goautoneg's `nextSplitElement`: before and after the first `sep`, or all and nothing.
fn split_first(s: &str, sep: char) -> (&str, &str) {
    s.split_once(sep).unwrap_or((s, ""))
}

/// goautoneg trims spaces only, not tabs.
fn trim_spaces(s: &str) -> &str {
    s.trim_matches(' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(header: &str) -> Vec<String> {
        AcceptHeader::parse(Some(header))
            .clauses()
            .iter()
            .map(|c| format!("{}/{}", c.media_type_type(), c.subtype()))
            .collect()
    }

    fn chosen(header: Option<&str>, restrictions: Restrictions) -> Option<Offer> {
        AcceptHeader::parse(header)
            .negotiate(restrictions)
            .map(|n| n.offer)
    }

    fn resource(header: &str) -> Option<Offer> {
        chosen(Some(header), Restrictions::Resource)
    }

    #[test]
    fn format_labels() {
        let cases = [
            ("application/json", Format::Json),
            ("application/merge-patch+json", Format::Json),
            ("application/json-patch+json", Format::Json),
            ("application/strategic-merge-patch+json", Format::Json),
            ("application/cbor", Format::Cbor),
            ("application/apply-patch+cbor", Format::Cbor),
            ("APPLICATION/CBOR", Format::Cbor),
            ("application/yaml", Format::Yaml),
            ("application/apply-patch+yaml", Format::Yaml),
            ("application/vnd.kubernetes.protobuf", Format::Protobuf),
            ("application/cbor-seq", Format::Other),
            ("text/plain", Format::Other),
            ("text/json", Format::Other),
            ("garbage", Format::Other),
            ("", Format::None),
        ];
        for (media_type, format) in cases {
            assert_eq!(Format::of_media_type(media_type), format, "{media_type}");
        }
        let labels: Vec<_> = [
            Format::Json,
            Format::Cbor,
            Format::Yaml,
            Format::Protobuf,
            Format::Other,
            Format::None,
        ]
        .iter()
        .map(|f| f.to_string())
        .collect();
        assert_eq!(
            labels,
            ["json", "cbor", "yaml", "protobuf", "other", "none"]
        );
    }

    #[test]
    fn content_type_ignores_parameters_and_case() {
        let ct = ContentType::parse(" Application/CBOR ; charset=utf-8").unwrap();
        assert_eq!(ct.media_type(), "application/cbor");
        assert_eq!(ct.raw(), "Application/CBOR");
        assert_eq!(ct.format(), Format::Cbor);
        assert!(ct.is_cbor_family());
        assert!(ContentType::parse("application/merge-patch+cbor")
            .unwrap()
            .is_cbor_family());
        assert!(!ContentType::parse("application/cbor-seq")
            .unwrap()
            .is_cbor_family());
        assert_eq!(ContentType::parse(""), None);
        assert_eq!(ContentType::parse("  ;charset=utf-8"), None);
    }

    #[test]
    fn parses_clauses_like_goautoneg() {
        assert_eq!(order("application/json"), ["application/json"]);
        // `*` alone is `*/*`; a type without subtype, or with two slashes, is dropped.
        assert_eq!(order("*"), ["*/*"]);
        assert_eq!(order("*/"), ["*/*"]);
        assert_eq!(order("application"), Vec::<String>::new());
        assert_eq!(order("application/"), Vec::<String>::new());
        assert_eq!(order("a/b/c"), Vec::<String>::new());
        assert_eq!(order("a/b/"), ["a/b"]);
        // Only spaces are trimmed.
        assert_eq!(
            order("  application/json  ,\tapplication/cbor"),
            ["application/json", "\tapplication/cbor"]
        );
        // Empty parts vanish.
        assert_eq!(order(",,, ,application/cbor,,"), ["application/cbor"]);
    }

    #[test]
    fn q_is_parsed_like_go_parse_float_32() {
        let q = |h: &str| {
            AcceptHeader::parse(Some(h))
                .clauses()
                .first()
                .map(AcceptClause::q)
        };
        assert_eq!(q("a/b"), Some(1.0));
        assert_eq!(q("a/b;q=0.9"), Some(0.9));
        assert_eq!(q("a/b;q=.5"), Some(0.5));
        assert_eq!(q("a/b;q=1."), Some(1.0));
        assert_eq!(q("a/b;q=1e-1"), Some(0.1));
        assert_eq!(q("a/b;q=+0.25"), Some(0.25));
        assert_eq!(q("a/b; q =0.5"), Some(0.5), "the key is trimmed");
        assert_eq!(q("a/b;q= 0.5"), Some(0.0), "the value is not trimmed");
        assert_eq!(q("a/b;q=0.5 ;x=y"), Some(0.0));
        assert_eq!(q("a/b;q=0.5 "), Some(0.5), "the clause is trimmed first");
        assert_eq!(q("a/b;q=high"), Some(0.0));
        // The value is read by Go's `strconv.ParseFloat(q, 32)` (go_float.rs has its cases).
        assert_eq!(
            q("a/b;q=1_0"),
            Some(10.0),
            "Go reads underscores between digits"
        );
        assert_eq!(q("a/b;q=0x1p-1"), Some(0.5), "and hexadecimal floats");
        assert_eq!(q("a/b;q=1_"), Some(0.0), "a syntax error is 0");
        assert_eq!(q("a/b;q=1e400"), Some(f32::INFINITY));
        assert!(q("a/b;q=NaN").is_some_and(f32::is_nan));
        // Malformed q parameters are skipped entirely; the last good one wins.
        assert_eq!(q("a/b;q="), Some(1.0));
        assert_eq!(q("a/b;q=0.5=1"), Some(1.0));
        assert_eq!(q("a/b;q=0.5;q=0.7"), Some(0.7));
        assert_eq!(q("a/b;q=0.5="), Some(0.5));
        assert_eq!(q("a/b;Q=0.5"), Some(1.0), "keys are case-sensitive");
    }

    #[test]
    fn sorts_by_q_then_specificity() {
        assert_eq!(
            order("application/json;q=0.9,application/cbor;q=1"),
            ["application/cbor", "application/json"]
        );
        assert_eq!(order("*/*, application/json"), ["application/json", "*/*"]);
        assert_eq!(
            order("application/*, application/json"),
            ["application/json", "application/*"]
        );
        // A concrete subtype goes before `application/*` even with a lower q (goautoneg).
        assert_eq!(
            order("*/*;q=0.1, application/*;q=0.5, a/b;q=0.2"),
            ["a/b", "application/*", "*/*"]
        );
        assert_eq!(
            order("*/*;q=0.1, application/*;q=0.5"),
            ["application/*", "*/*"]
        );
        // Equal clauses keep their order (insertion sort is stable for a consistent order).
        assert_eq!(order("a/b, c/d, e/f"), ["a/b", "c/d", "e/f"]);
    }

    #[test]
    fn goautoneg_comparator_quirk_is_kept() {
        // goautoneg puts a concrete type before `*/*` whatever their q: on the apiserver
        // `*/*, application/cbor;q=0.5` chooses CBOR, not JSON.
        assert_eq!(
            order("*/*, application/cbor;q=0.5"),
            ["application/cbor", "*/*"]
        );
        assert_eq!(resource("*/*, application/cbor;q=0.5"), Some(Offer::Cbor));
        assert_eq!(
            resource("*/*;q=0.1, application/json;q=0.5"),
            Some(Offer::Json)
        );
    }

    #[test]
    fn q_zero_is_kept() {
        assert_eq!(resource("application/cbor;q=0"), Some(Offer::Cbor));
        assert_eq!(
            resource("application/json;q=0, application/cbor;q=0"),
            Some(Offer::Json)
        );
        assert_eq!(
            resource("application/json;q=0, application/cbor"),
            Some(Offer::Cbor)
        );
    }

    #[test]
    fn negotiates_in_clause_then_server_order() {
        assert_eq!(chosen(None, Restrictions::Resource), Some(Offer::Json));
        assert_eq!(chosen(Some(""), Restrictions::Resource), Some(Offer::Json));
        assert_eq!(resource("*/*"), Some(Offer::Json));
        assert_eq!(resource("application/*"), Some(Offer::Json));
        assert_eq!(resource("application/cbor, */*"), Some(Offer::Cbor));
        assert_eq!(
            resource("application/json;q=0.9,application/cbor;q=1"),
            Some(Offer::Cbor)
        );
        assert_eq!(
            resource("application/cbor, application/json;q=0.9"),
            Some(Offer::Cbor)
        );
        assert_eq!(
            resource("application/json;q=0.9, application/cbor"),
            Some(Offer::Cbor)
        );
        assert_eq!(resource("application/yaml"), Some(Offer::Yaml));
        assert_eq!(
            resource("application/vnd.kubernetes.protobuf, application/json"),
            Some(Offer::Protobuf)
        );
        assert_eq!(resource("application/cbor-seq"), None);
        assert_eq!(resource("text/plain"), None);
        assert_eq!(
            resource("Application/CBOR"),
            None,
            "types are compared case-sensitively"
        );
        assert_eq!(resource(" "), None, "a blank header is not an empty one");
        assert_eq!(resource("*/json"), None);
    }

    #[test]
    fn transformations_follow_the_resource_scope() {
        let table = ";as=Table;g=meta.k8s.io;v=v1";
        assert_eq!(resource(&format!("application/cbor{table}")), None);
        assert_eq!(
            resource(&format!("application/json{table}")),
            Some(Offer::Json)
        );
        assert_eq!(
            resource(&format!("application/yaml{table}")),
            Some(Offer::Yaml)
        );
        assert_eq!(
            resource(&format!("application/vnd.kubernetes.protobuf{table}")),
            None
        );
        assert_eq!(resource(&format!("*/*{table}")), Some(Offer::Json));
        assert_eq!(
            resource(&format!(
                "application/cbor{table}, application/json{table};q=0.9"
            )),
            Some(Offer::Json)
        );
        for kind in ["PartialObjectMetadata", "PartialObjectMetadataList"] {
            for version in ["v1", "v1beta1"] {
                let h = format!("application/cbor;as={kind};g=meta.k8s.io;v={version}");
                assert_eq!(resource(&h), Some(Offer::Cbor), "{h}");
                assert_eq!(chosen(Some(&h), Restrictions::Default), None, "{h}");
            }
        }
        assert_eq!(
            resource("application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v2"),
            None
        );
        assert_eq!(
            resource("application/cbor;as=PartialObjectMetadata;g=apps;v=v1"),
            None
        );
        assert_eq!(resource("application/cbor;as=Pod;g=meta.k8s.io;v=v1"), None);
        assert_eq!(
            resource("application/cbor;g=meta.k8s.io;v=v1"),
            None,
            "a kind is needed"
        );
        assert_eq!(
            resource("application/json;as=\"Table\";g=meta.k8s.io;v=v1"),
            None,
            "quotes are kept"
        );
    }

    #[test]
    fn stream_sv_pretty_and_unknown_parameters() {
        assert_eq!(resource("application/cbor;stream=watch"), Some(Offer::Cbor));
        assert_eq!(
            resource("application/yaml;stream=watch"),
            None,
            "YAML has no stream serializer"
        );
        assert_eq!(resource("application/*;stream=watch"), Some(Offer::Json));
        assert_eq!(resource("application/cbor;stream=other"), None);
        assert_eq!(
            resource("application/cbor;stream= "),
            Some(Offer::Cbor),
            "an empty value is no stream"
        );
        assert_eq!(resource("application/cbor;sv=v1"), Some(Offer::Cbor));
        assert_eq!(resource("application/cbor;sv=v2"), None);
        assert_eq!(
            chosen(Some("application/cbor;sv=v1"), Restrictions::Default),
            None
        );
        assert_eq!(
            resource("application/cbor;pretty=1;export=1;profile=x;foo=bar"),
            Some(Offer::Cbor)
        );
        let header = AcceptHeader::parse(Some("application/json;pretty=1;pretty=0"));
        assert!(
            !header
                .negotiate(Restrictions::Resource)
                .unwrap()
                .options
                .pretty,
            "last value wins"
        );
    }

    #[test]
    fn upstream_json_accept_keeps_parameters_but_q() {
        let json_accept = |h: &str| {
            AcceptHeader::parse(Some(h))
                .negotiate(Restrictions::Resource)
                .map(|n| n.as_json_accept())
        };
        assert_eq!(
            json_accept("application/cbor").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            json_accept("application/cbor;q=0.5").as_deref(),
            Some("application/json")
        );
        // No parameters left: the media type itself, not a copy.
        for h in ["application/cbor", "application/cbor;q=0.5"] {
            assert!(matches!(json_accept(h), Some(Cow::Borrowed(_))), "{h}");
        }
        assert_eq!(
            json_accept(
                " application/cbor ; as=PartialObjectMetadataList ; g=meta.k8s.io;v=v1;q=1"
            )
            .as_deref(),
            Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        );
        assert_eq!(
            json_accept("application/cbor;bad;=x;a=b=c;k=v").as_deref(),
            Some("application/json;k=v")
        );
        assert_eq!(
            json_accept("application/cbor;x=a\r\nEvil: 1;k=\tv").as_deref(),
            Some("application/json;k=\tv")
        );
        assert_eq!(
            AcceptHeader::parse(None)
                .negotiate(Restrictions::Resource)
                .unwrap()
                .as_json_accept(),
            "application/json"
        );
    }

    #[test]
    fn clause_count_is_capped() {
        let many = vec!["text/plain"; 10_000].join(",") + ",application/cbor";
        let header = AcceptHeader::parse(Some(&many));
        assert_eq!(header.clauses().len(), MAX_ACCEPT_CLAUSES);
        assert_eq!(header.negotiate(Restrictions::Resource), None);
        // Garbage parts do not count towards the cap.
        let garbage = vec!["x"; 10_000].join(",") + ",application/cbor";
        assert_eq!(resource(&garbage), Some(Offer::Cbor));
    }
}
