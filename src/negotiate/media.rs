//! Media types: `Accept` negotiation exactly as a CBOR-enabled kube-apiserver 1.36 does it,
//! `Content-Type` parsing, and the bounded [`Format`] label used by metrics.
//!
//! `Accept` goes through the two steps the apiserver uses:
//!
//! 1. goautoneg `ParseAccept` (the copy vendored by Kubernetes): clauses split on `,`, the
//!    media range and parameters on `;`, only spaces trimmed, `q` read with Go's
//!    `strconv.ParseFloat(q, 32)` (errors ignored, so a bad `q` is 0), and the clauses sorted
//!    by Go's `sort.Sort` with goautoneg's comparator: `q` descending, then a concrete type
//!    before `*`. That comparator is not a strict weak order and `sort.Sort` is not stable,
//!    so the order depends on the algorithm: [`go_sort`] is a line-by-line port of Go's
//!    pdqsort (insertion sort up to 12 clauses). Clauses with `q=0` are kept, as goautoneg
//!    keeps them: `application/cbor;q=0` still chooses CBOR, as on the real server.
//! 2. apiserver `NegotiateMediaTypeOptions`: for each clause in that order, for each offered
//!    media type in server order ([`Offer::SERVER_ORDER`]), the first match of
//!    `type/subtype`, `type/*` or `*/*` whose parameters the endpoint allows wins
//!    ([`Restrictions`]). An empty or missing header chooses the first offer, JSON.
//!
//! Work is bounded: one pass over the header, at most [`MAX_ACCEPT_CLAUSES`] clauses kept,
//! no allocation per clause or parameter.

use std::borrow::Cow;
use std::fmt;

/// At most this many well-formed clauses of one `Accept` header are considered; later ones
/// are ignored. kube-apiserver has no such limit, so a header with more clauses can negotiate
/// differently there; real clients send one to four.
pub const MAX_ACCEPT_CLAUSES: usize = 64;

/// The message of the 406 a CBOR-enabled server answers when nothing in `Accept` can be
/// served (recorded in `b-table-cbor` and `b-watch-cborseq`).
pub const NOT_ACCEPTABLE_MESSAGE: &str = "only the following media types are accepted: \
     application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor";

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
    clauses: Vec<AcceptClause<'a>>,
}

impl<'a> AcceptHeader<'a> {
    /// Parses and sorts, as goautoneg `ParseAccept` does. Never fails: what goautoneg
    /// skips is skipped, and a header with nothing usable has no clauses.
    pub fn parse(header: Option<&'a str>) -> Self {
        let header = header.unwrap_or_default();
        let mut clauses = Vec::new();
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
        if self.empty {
            return Some(Negotiated {
                offer: Offer::Json,
                clause: None,
                options: MediaTypeOptions::default(),
            });
        }
        for clause in &self.clauses {
            let options = clause.options();
            for offer in Offer::SERVER_ORDER {
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
    pub fn as_json_accept(&self) -> String {
        self.as_accept(Offer::Json)
    }

    /// The chosen clause rewritten to `application/cbor` with the same parameters (upgrade
    /// mode: what to ask a CBOR-enabled upstream for on behalf of a JSON client).
    pub fn as_cbor_accept(&self) -> String {
        self.as_accept(Offer::Cbor)
    }

    /// True when the chosen clause asks for a Table (JSON and YAML only, even on a
    /// CBOR-enabled server).
    pub fn is_table(&self) -> bool {
        self.options.convert.is_some_and(|c| c.kind == "Table")
    }

    fn as_accept(&self, offer: Offer) -> String {
        let mut accept = String::from(offer.media_type());
        for (key, value) in self.clause.iter().flat_map(AcceptClause::params) {
            // Control characters cannot come from a parsed header, but this function cannot
            // know where its input came from: never let one into a header value.
            if key == "q" || key.is_empty() || !is_field_text(key) || !is_field_text(value) {
                continue;
            }
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

/// Go's `strconv.ParseFloat(s, 32)` with the error ignored: a syntax error gives 0, an
/// overflow ±Inf. Decimal and hexadecimal forms, underscores between digits, `inf`,
/// `infinity` and `nan` are read as Go reads them (ported from `strconv/atof.go`).
fn go_parse_float32(s: &str) -> f32 {
    if let Some(special) = go_special_float(s) {
        return special;
    }
    let Some(float) = go_read_float(s.as_bytes()) else {
        return 0.0;
    };
    if float.hex {
        return go_atof_hex32(float.mantissa, float.exp, float.neg, float.trunc);
    }
    // Validated Go syntax without its underscores is valid Rust syntax, and both round
    // correctly to the nearest float32.
    let digits: String = s.chars().filter(|&c| c != '_').collect();
    digits.parse::<f32>().unwrap_or(0.0)
}

/// Go's `special`: `[+-]inf`, `[+-]infinity`, `nan`, any case, and nothing after.
fn go_special_float(s: &str) -> Option<f32> {
    let (sign, body) = match s.as_bytes().first() {
        Some(b'+') => (1.0, s.get(1..)?),
        Some(b'-') => (-1.0, s.get(1..)?),
        _ => (1.0, s),
    };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f32::INFINITY);
    }
    if body.len() == s.len() && body.eq_ignore_ascii_case("nan") {
        return Some(f32::NAN);
    }
    None
}

/// What Go's `readFloat` reads from a number.
struct GoFloat {
    mantissa: u64,
    exp: i64,
    neg: bool,
    trunc: bool,
    hex: bool,
}

/// Go's `readFloat`, requiring the whole input to be the number.
fn go_read_float(s: &[u8]) -> Option<GoFloat> {
    let mut i = 0;
    let mut neg = false;
    match s.first()? {
        b'+' => i = 1,
        b'-' => {
            neg = true;
            i = 1;
        }
        _ => {}
    }
    let hex = i + 2 < s.len()
        && s.get(i) == Some(&b'0')
        && s.get(i + 1).map(u8::to_ascii_lowercase) == Some(b'x');
    let (base, max_mant_digits, exp_char) = if hex { (16, 16, b'p') } else { (10, 19, b'e') };
    if hex {
        i += 2;
    }
    let (mut underscores, mut saw_dot, mut saw_digits, mut trunc) = (false, false, false, false);
    let (mut nd, mut nd_mant, mut dp) = (0_i64, 0_i64, 0_i64);
    let mut mantissa = 0_u64;
    while let Some(&c) = s.get(i) {
        let lower = c.to_ascii_lowercase();
        if c == b'_' {
            underscores = true;
        } else if c == b'.' {
            if saw_dot {
                break;
            }
            saw_dot = true;
            dp = nd;
        } else if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&lower)) {
            saw_digits = true;
            if c == b'0' && nd == 0 {
                // Leading zeros.
                dp -= 1;
                i += 1;
                continue;
            }
            nd += 1;
            let digit = if c.is_ascii_digit() {
                c - b'0'
            } else {
                lower - b'a' + 10
            };
            if nd_mant < max_mant_digits {
                // At most 19 decimal or 16 hex digits: no overflow.
                mantissa = mantissa * base + u64::from(digit);
                nd_mant += 1;
            } else if digit != 0 {
                trunc = true;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if !saw_dot {
        dp = nd;
    }
    if hex {
        dp *= 4;
        nd_mant *= 4;
    }
    if s.get(i).map(u8::to_ascii_lowercase) == Some(exp_char) {
        i += 1;
        let mut sign = 1;
        match s.get(i) {
            Some(b'+') => i += 1,
            Some(b'-') => {
                i += 1;
                sign = -1;
            }
            _ => {}
        }
        if !s.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        let mut e = 0_i64;
        while let Some(&c) = s.get(i) {
            if c == b'_' {
                underscores = true;
            } else if c.is_ascii_digit() {
                if e < 10_000 {
                    e = e * 10 + i64::from(c - b'0');
                }
            } else {
                break;
            }
            i += 1;
        }
        dp += e * sign;
    } else if hex {
        // A hexadecimal mantissa needs a `p` exponent.
        return None;
    }
    let exp = if mantissa != 0 { dp - nd_mant } else { 0 };
    if underscores && !go_underscore_ok(s.get(..i)?) {
        return None;
    }
    (i == s.len()).then_some(GoFloat {
        mantissa,
        exp,
        neg,
        trunc,
        hex,
    })
}

/// Go's `underscoreOK`: underscores only between digits, or after a base prefix.
fn go_underscore_ok(s: &[u8]) -> bool {
    let s = match s.first() {
        Some(b'+' | b'-') => s.get(1..).unwrap_or_default(),
        _ => s,
    };
    let prefix = s.get(1).map(u8::to_ascii_lowercase);
    let (mut saw, mut i, hex) =
        if s.len() >= 2 && s.first() == Some(&b'0') && matches!(prefix, Some(b'b' | b'o' | b'x')) {
            (b'0', 2, prefix == Some(b'x'))
        } else {
            (b'^', 0, false)
        };
    while let Some(&c) = s.get(i) {
        i += 1;
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&c.to_ascii_lowercase())) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `atofHex` for float32: rounds `mantissa * 2^exp` to nearest even, `trunc` being a
/// sticky bit for digits beyond the mantissa; overflow gives ±Inf.
fn go_atof_hex32(mut mantissa: u64, mut exp: i64, neg: bool, trunc: bool) -> f32 {
    const MANT_BITS: u32 = 23;
    const EXP_BITS: u32 = 8;
    const BIAS: i64 = -127;
    let max_exp = (1 << EXP_BITS) + BIAS - 2;
    let min_exp = BIAS + 1;
    exp += i64::from(MANT_BITS);
    while mantissa != 0 && mantissa >> (MANT_BITS + 2) == 0 {
        mantissa <<= 1;
        exp -= 1;
    }
    if trunc {
        mantissa |= 1;
    }
    while mantissa >> (1 + MANT_BITS + 2) != 0 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    while mantissa > 1 && exp < min_exp - 2 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    let mut round = mantissa & 3;
    mantissa >>= 2;
    round |= mantissa & 1;
    exp += 2;
    if round == 3 {
        mantissa += 1;
        if mantissa == 1 << (1 + MANT_BITS) {
            mantissa >>= 1;
            exp += 1;
        }
    }
    if mantissa >> MANT_BITS == 0 {
        exp = BIAS;
    }
    if exp > max_exp {
        mantissa = 1 << MANT_BITS;
        exp = max_exp + 1;
    }
    let mut bits = mantissa & ((1 << MANT_BITS) - 1);
    bits |= u64::try_from((exp - BIAS) & ((1 << EXP_BITS) - 1)).unwrap_or(0) << MANT_BITS;
    if neg {
        bits |= 1 << (MANT_BITS + EXP_BITS);
    }
    f32::from_bits(u32::try_from(bits).unwrap_or(0))
}

/// Go's `sort.Sort` (pattern-defeating quicksort, Go 1.22 and later, as kube-apiserver 1.36
/// is built with), ported line by line from `sort/zsortinterface.go` so that goautoneg's
/// inconsistent comparator gives the same order as in the apiserver. Indices are checked:
/// an out-of-range comparison is `false` and an out-of-range swap does nothing, which the
/// algorithm never asks for, but no input can make this panic.
fn go_sort<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: F) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let Ok(end) = isize::try_from(n) else {
        return;
    };
    let mut data = SortData { v, less };
    pdqsort(&mut data, 0, end, bits_len(n));
}

struct SortData<'s, T, F> {
    v: &'s mut [T],
    less: F,
}

impl<T, F: Fn(&T, &T) -> bool> SortData<'_, T, F> {
    fn less(&self, i: isize, j: isize) -> bool {
        let a = usize::try_from(i).ok().and_then(|i| self.v.get(i));
        let b = usize::try_from(j).ok().and_then(|j| self.v.get(j));
        match (a, b) {
            (Some(a), Some(b)) => (self.less)(a, b),
            _ => false,
        }
    }

    fn swap(&mut self, i: isize, j: isize) {
        if let (Ok(i), Ok(j)) = (usize::try_from(i), usize::try_from(j)) {
            if i < self.v.len() && j < self.v.len() {
                self.v.swap(i, j);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SortedHint {
    Unknown,
    Increasing,
    Decreasing,
}

/// Go's `bits.Len`.
fn bits_len(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

/// Go's `sort.xorshift.Next` (the 64-bit triple 13, 7, 17). Also the
/// pseudo-random source of the crate's randomized model tests.
pub(crate) fn xorshift_next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn insertion_sort<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let mut i = a + 1;
    while i < b {
        let mut j = i;
        while j > a && data.less(j, j - 1) {
            data.swap(j, j - 1);
            j -= 1;
        }
        i += 1;
    }
}

fn sift_down<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    lo: isize,
    hi: isize,
    first: isize,
) {
    let mut root = lo;
    loop {
        let mut child = 2 * root + 1;
        if child >= hi {
            return;
        }
        if child + 1 < hi && data.less(first + child, first + child + 1) {
            child += 1;
        }
        if !data.less(first + root, first + child) {
            return;
        }
        data.swap(first + root, first + child);
        root = child;
    }
}

fn heap_sort<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let first = a;
    let lo = 0;
    let hi = b - a;
    let mut i = (hi - 1) / 2;
    while i >= 0 {
        sift_down(data, i, hi, first);
        i -= 1;
    }
    let mut i = hi - 1;
    while i >= 0 {
        data.swap(first, first + i);
        sift_down(data, lo, i, first);
        i -= 1;
    }
}

fn pdqsort<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    mut a: isize,
    mut b: isize,
    mut limit: u32,
) {
    const MAX_INSERTION: isize = 12;
    let mut was_balanced = true;
    let mut was_partitioned = true;
    loop {
        let length = b - a;
        if length <= MAX_INSERTION {
            insertion_sort(data, a, b);
            return;
        }
        if limit == 0 {
            heap_sort(data, a, b);
            return;
        }
        if !was_balanced {
            break_patterns(data, a, b);
            limit -= 1;
        }
        let (mut pivot, mut hint) = choose_pivot(data, a, b);
        if hint == SortedHint::Decreasing {
            reverse_range(data, a, b);
            pivot = (b - 1) - (pivot - a);
            hint = SortedHint::Increasing;
        }
        if was_balanced
            && was_partitioned
            && hint == SortedHint::Increasing
            && partial_insertion_sort(data, a, b)
        {
            return;
        }
        if a > 0 && !data.less(a - 1, pivot) {
            a = partition_equal(data, a, b, pivot);
            continue;
        }
        let (mid, already_partitioned) = partition(data, a, b, pivot);
        was_partitioned = already_partitioned;
        let (left_len, right_len) = (mid - a, b - mid);
        let balance_threshold = length / 8;
        if left_len < right_len {
            was_balanced = left_len >= balance_threshold;
            pdqsort(data, a, mid, limit);
            a = mid + 1;
        } else {
            was_balanced = right_len >= balance_threshold;
            pdqsort(data, mid + 1, b, limit);
            b = mid;
        }
    }
}

fn partition<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
    pivot: isize,
) -> (isize, bool) {
    data.swap(a, pivot);
    let (mut i, mut j) = (a + 1, b - 1);
    while i <= j && data.less(i, a) {
        i += 1;
    }
    while i <= j && !data.less(j, a) {
        j -= 1;
    }
    if i > j {
        data.swap(j, a);
        return (j, true);
    }
    data.swap(i, j);
    i += 1;
    j -= 1;
    loop {
        while i <= j && data.less(i, a) {
            i += 1;
        }
        while i <= j && !data.less(j, a) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    data.swap(j, a);
    (j, false)
}

fn partition_equal<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
    pivot: isize,
) -> isize {
    data.swap(a, pivot);
    let (mut i, mut j) = (a + 1, b - 1);
    loop {
        while i <= j && !data.less(a, i) {
            i += 1;
        }
        while i <= j && data.less(a, j) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    i
}

fn partial_insertion_sort<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
) -> bool {
    const MAX_STEPS: usize = 5;
    const SHORTEST_SHIFTING: isize = 50;
    let mut i = a + 1;
    for _ in 0..MAX_STEPS {
        while i < b && !data.less(i, i - 1) {
            i += 1;
        }
        if i == b {
            return true;
        }
        if b - a < SHORTEST_SHIFTING {
            return false;
        }
        data.swap(i, i - 1);
        // Shift the smaller one to the left (Go's bound is 1, not a).
        if i - a >= 2 {
            let mut j = i - 1;
            while j >= 1 {
                if !data.less(j, j - 1) {
                    break;
                }
                data.swap(j, j - 1);
                j -= 1;
            }
        }
        // Shift the greater one to the right.
        if b - i >= 2 {
            let mut j = i + 1;
            while j < b {
                if !data.less(j, j - 1) {
                    break;
                }
                data.swap(j, j - 1);
                j += 1;
            }
        }
    }
    false
}

fn break_patterns<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let length = b - a;
    if length < 8 {
        return;
    }
    let (Ok(len_u64), Ok(len_usize)) = (u64::try_from(length), usize::try_from(length)) else {
        return;
    };
    let mut random = len_u64;
    let modulus = 1u64 << bits_len(len_usize);
    let mut idx = a + (length / 4) * 2 - 1;
    while idx <= a + (length / 4) * 2 + 1 {
        let mut other = isize::try_from(xorshift_next(&mut random) & (modulus - 1)).unwrap_or(0);
        if other >= length {
            other -= length;
        }
        data.swap(idx, a + other);
        idx += 1;
    }
}

fn choose_pivot<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
) -> (isize, SortedHint) {
    const SHORTEST_NINTHER: isize = 50;
    const MAX_SWAPS: u32 = 4 * 3;
    let l = b - a;
    let mut swaps = 0;
    let mut i = a + l / 4;
    let mut j = a + l / 4 * 2;
    let mut k = a + l / 4 * 3;
    if l >= 8 {
        if l >= SHORTEST_NINTHER {
            i = median_adjacent(data, i, &mut swaps);
            j = median_adjacent(data, j, &mut swaps);
            k = median_adjacent(data, k, &mut swaps);
        }
        j = median(data, i, j, k, &mut swaps);
    }
    match swaps {
        0 => (j, SortedHint::Increasing),
        MAX_SWAPS => (j, SortedHint::Decreasing),
        _ => (j, SortedHint::Unknown),
    }
}

fn order2<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    b: isize,
    swaps: &mut u32,
) -> (isize, isize) {
    if data.less(b, a) {
        *swaps += 1;
        return (b, a);
    }
    (a, b)
}

fn median<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    b: isize,
    c: isize,
    swaps: &mut u32,
) -> isize {
    let (a, b) = order2(data, a, b, swaps);
    let (b, _) = order2(data, b, c, swaps);
    order2(data, a, b, swaps).1
}

fn median_adjacent<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    swaps: &mut u32,
) -> isize {
    median(data, a - 1, a, a + 1, swaps)
}

fn reverse_range<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let (mut i, mut j) = (a, b - 1);
    while i < j {
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
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
        assert_eq!(
            q("a/b;q=1_0"),
            Some(10.0),
            "Go reads underscores between digits"
        );
        assert_eq!(q("a/b;q=0.2_5"), Some(0.25));
        assert_eq!(q("a/b;q=0_0.5"), Some(0.5));
        for bad in [
            "1__0", "_1", "1_", "1e+_5", "1e_5", "0x1_p0", "1_.5", "1._5", ".e1", "0b1", "0o7",
        ] {
            assert_eq!(q(&format!("a/b;q={bad}")), Some(0.0), "{bad}");
        }
        assert_eq!(q("a/b;q=1e1_0"), Some(1e10));
        assert_eq!(q("a/b;q=0x1p-1"), Some(0.5), "and hexadecimal floats");
        assert_eq!(q("a/b;q=0x_1p-1"), Some(0.5));
        assert_eq!(q("a/b;q=0x1p1_0"), Some(1024.0));
        assert_eq!(q("a/b;q=-0X.8P1"), Some(-1.0));
        assert_eq!(q("a/b;q=0x1.fffffffp0"), Some(2.0), "rounded to float32");
        assert_eq!(q("a/b;q=0x1.fffffep127"), Some(f32::MAX));
        assert_eq!(q("a/b;q=0x1.ffffffp127"), Some(f32::INFINITY));
        assert_eq!(q("a/b;q=0x1p-200"), Some(0.0));
        assert_eq!(
            q("a/b;q=0x1"),
            Some(0.0),
            "a hex mantissa needs an exponent"
        );
        assert_eq!(q("a/b;q=0x"), Some(0.0));
        assert_eq!(q("a/b;q=1e99999999999999999999"), Some(f32::INFINITY));
        assert_eq!(q("a/b;q=1e-50"), Some(0.0));
        assert_eq!(q("a/b;q=00.5"), Some(0.5));
        assert_eq!(q("a/b;q=1e"), Some(0.0));
        assert_eq!(q("a/b;q=1e400"), Some(f32::INFINITY));
        assert_eq!(q("a/b;q=-Inf"), Some(f32::NEG_INFINITY));
        assert_eq!(q("a/b;q=infinity"), Some(f32::INFINITY));
        assert_eq!(q("a/b;q=infin"), Some(0.0));
        assert!(q("a/b;q=NaN").is_some_and(f32::is_nan));
        assert_eq!(q("a/b;q=+nan"), Some(0.0), "Go has no signed NaN");
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

    /// A consistent comparator on many elements exercises every pdqsort path: the result
    /// must be sorted and a permutation, for random, sorted, reversed and repetitive inputs.
    #[test]
    fn go_sort_sorts() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for round in 0..400_usize {
            let len = round % 97;
            let mut v: Vec<u64> = (0..len)
                .map(|i| match round % 4 {
                    0 => xorshift_next(&mut state) % 1000,
                    1 => i as u64,
                    2 => (len - i) as u64,
                    _ => xorshift_next(&mut state) % 3,
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_unstable();
            go_sort(&mut v, |a, b| a < b);
            assert_eq!(v, expected, "round {round}");
        }
    }

    /// goautoneg's comparator is inconsistent: the port must still terminate, keep every
    /// clause and never panic, whatever the clauses.
    #[test]
    fn go_sort_survives_inconsistent_comparators() {
        let mut state = 42_u64;
        for round in 0..300 {
            let len = round % 70;
            let mut v: Vec<u64> = (0..len).map(|_| xorshift_next(&mut state)).collect();
            let mut before = v.clone();
            go_sort(&mut v, |a, b| (a ^ b) & 1 == 1 || a % 7 > b % 5);
            let mut after = v.clone();
            before.sort_unstable();
            after.sort_unstable();
            assert_eq!(before, after);
        }
    }
}
