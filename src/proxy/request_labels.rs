//! The labels of each request's series (docs/wire.md §6): its (group, resource) pair,
//! interned under the cap `metrics.max_resources` with its codec series, and per pair its
//! (version, subresource) pairs, at most [`MAX_VARIANTS`]; with the `scope` and `dry_run`
//! the apiserver would give it and the client family. An object the proxy owns
//! ([`ResourceLabels`]); every label a request gets is a `&'static str`, and one seen
//! before costs a lookup under a read lock, never an allocation.

use crate::codec::Reason;
use crate::metrics::{metrics, CodecSeries, Origin, Transcoding, Vocabulary};
use crate::negotiate::client::ClientFamily;
use crate::negotiate::identity::{Method, RESULTS as AUTH_RESULTS};
use crate::negotiate::labels::{self, ResourceKey, DISCOVERY, NON_RESOURCE, OTHER};
use crate::negotiate::pool::Retry;
use crate::negotiate::protect::Reason as ProtectReason;
use crate::negotiate::route::Method as HttpMethod;
use crate::negotiate::Route;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// The `group`, `resource` and `client` labels of the series every family has at zero
/// from start-up: a request outside the resource API from a client of no known family.
pub const ZERO_LABELS: [&str; 3] = [NON_RESOURCE, NON_RESOURCE, "other"];

/// `[dry_run, group, version, resource, subresource, scope]` of those series (and of a
/// request never classified).
pub const ZERO_API_LABELS: [&str; 6] = ["", NON_RESOURCE, "", NON_RESOURCE, "", ""];

/// The closed label sets the core defines, which the metrics create series over at
/// start-up ([`Metrics::count_at_zero`](crate::metrics::Metrics::count_at_zero)), so
/// that an alert over them finds a 0, not an absent series.
pub fn vocabulary() -> Vocabulary {
    Vocabulary {
        unclassified: ZERO_LABELS,
        unavailable_get: request_series("GET", "503", ["none", "json"], None).0,
        retry_reasons: Retry::COUNTED.iter().filter_map(|r| r.label()).collect(),
        transcode_errors: Reason::ALL.map(Reason::as_str).to_vec(),
        client_families: ClientFamily::ALL.map(ClientFamily::label).to_vec(),
        protect_reasons: ProtectReason::ALL.map(ProtectReason::label).to_vec(),
        auth_methods: Method::ALL.map(Method::as_str).to_vec(),
        auth_results: AUTH_RESULTS.to_vec(),
    }
}

/// Count a 415 or 406 (any other code is not counted here) by who answered it, and
/// the request's group, resource and client.
pub fn count_refusal(code: u16, origin: Origin, labels: Option<RequestLabels>) {
    let m = metrics();
    let family = match code {
        415 => &m.unsupported_media_type_total,
        406 => &m.not_acceptable_total,
        _ => return,
    };
    let [group, resource, client] = RequestLabels::values(labels);
    family
        .with_label_values(&[origin.label(), group, resource, client])
        .inc();
}

/// The label values of one request's series: `cborgate_requests_total`'s (in
/// [`REQUEST_LABELS`](crate::metrics::REQUEST_LABELS) order) and `cborgate_request_duration_seconds`' ([`DURATION_LABELS`](crate::metrics::DURATION_LABELS)),
/// from its verb, code, `[request_format, response_format]` and route labels.
pub fn request_series<'a>(
    verb: &'a str,
    code: &'a str,
    [request_format, response_format]: [&'a str; 2],
    labels: Option<RequestLabels>,
) -> ([&'a str; 11], [&'a str; 8]) {
    let [_, _, client] = RequestLabels::values(labels);
    let [dry_run, group, version, resource, subresource, scope] = ApiLabels::values(labels);
    (
        [
            verb,
            dry_run,
            group,
            version,
            resource,
            subresource,
            scope,
            code,
            request_format,
            response_format,
            client,
        ],
        [
            verb,
            dry_run,
            group,
            version,
            resource,
            subresource,
            scope,
            response_format,
        ],
    )
}

/// The `group` and `resource` labels of one pair (a resource, or one of the fixed values
/// of [`crate::negotiate::labels`]), and its codec series, each resolved the first time a
/// body of that pair is transcoded and kept (never looked up by label again).
pub struct ResourceSeries {
    pub group: &'static str,
    pub resource: &'static str,
    codecs: [OnceLock<CodecSeries>; Transcoding::ALL.len()],
    /// The (version, subresource) label pairs requests to this (group, resource) have
    /// had: at most [`MAX_VARIANTS`], each interned once.
    variants: RwLock<Vec<&'static Variant>>,
}

/// The `version` and `subresource` labels of a request, interned per (group, resource).
#[derive(Debug, PartialEq, Eq)]
pub struct Variant {
    pub version: &'static str,
    pub subresource: &'static str,
}

/// The most (version, subresource) pairs one (group, resource) pair gets labels for; a
/// later new one is counted as `(other)` in both. A built-in resource has a few versions
/// and subresources at most (pods: `v1` and ten subresources).
pub const MAX_VARIANTS: usize = 16;

/// `version=""`, `subresource=""`: the fixed pairs' (and a plain resource request's under
/// `(other)`).
static NO_VARIANT: Variant = Variant {
    version: "",
    subresource: "",
};
/// Beyond [`MAX_VARIANTS`], or a version or subresource no apiserver can serve.
static OTHER_VARIANT: Variant = Variant {
    version: OTHER,
    subresource: OTHER,
};

impl ResourceSeries {
    fn new(group: &'static str, resource: &'static str) -> Self {
        ResourceSeries {
            group,
            resource,
            codecs: Default::default(),
            variants: RwLock::default(),
        }
    }

    /// The interned labels of `version` and `subresource` for this pair: found under a
    /// read lock without allocating once seen; `(other)` beyond [`MAX_VARIANTS`].
    fn variant(&self, version: &str, subresource: &str) -> &'static Variant {
        if version.is_empty() && subresource.is_empty() {
            return &NO_VARIANT;
        }
        let find = |v: &[&'static Variant]| {
            v.iter()
                .copied()
                .find(|v| v.version == version && v.subresource == subresource)
        };
        let read = self.variants.read().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = find(&read) {
            return v;
        }
        drop(read);
        let mut write = self.variants.write().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = find(&write) {
            return v;
        }
        if write.len() >= MAX_VARIANTS {
            return &OTHER_VARIANT;
        }
        // The same version of a pair is interned once.
        let version: &'static str = match write.iter().find(|v| v.version == version) {
            Some(v) => v.version,
            None => Box::leak(version.into()),
        };
        let subresource: &'static str = match write.iter().find(|v| v.subresource == subresource) {
            Some(v) => v.subresource,
            None => Box::leak(subresource.into()),
        };
        let v: &'static Variant = Box::leak(Box::new(Variant {
            version,
            subresource,
        }));
        write.push(v);
        v
    }

    /// Interned for the life of the process: at most `metrics.max_resources` of them,
    /// plus the three fixed pairs of each [`ResourceLabels`].
    fn leak(self) -> &'static ResourceSeries {
        Box::leak(Box::new(self))
    }

    /// The codec series of one transcoding, for this pair.
    pub fn codec(&self, t: Transcoding) -> &CodecSeries {
        self.codecs[t as usize].get_or_init(|| {
            let (direction, from, to) = t.labels();
            let m = metrics();
            let (g, r) = (self.group, self.resource);
            CodecSeries {
                duration: m
                    .codec_duration_seconds
                    .with_label_values(&[direction, from, to, g, r]),
                bytes_from: m
                    .codec_bytes_total
                    .with_label_values(&[direction, from, g, r]),
                bytes_to: m
                    .codec_bytes_total
                    .with_label_values(&[direction, to, g, r]),
            }
        })
    }
}

/// The labels of one request beyond verb, code and formats: its (group, resource) pair
/// and its client family. Copied freely; nothing in it is allocated per request.
#[derive(Clone, Copy)]
pub struct RequestLabels {
    pub resource: &'static ResourceSeries,
    /// Its `version` and `subresource`.
    pub variant: &'static Variant,
    /// A [`crate::negotiate::labels::scope`] value.
    pub scope: &'static str,
    /// A [`crate::negotiate::labels::dry_run`] value.
    pub dry_run: &'static str,
    /// A [`crate::negotiate::client::ClientFamily`] label.
    pub client: &'static str,
}

/// The labels `cborgate_requests_total` shares with `apiserver_request_total` besides
/// verb and code: `[dry_run, group, version, resource, subresource, scope]`.
pub struct ApiLabels;

impl ApiLabels {
    /// Those of a request never classified, and of the series at zero from start-up.
    pub const ZERO: [&'static str; 6] = ZERO_API_LABELS;

    pub fn values(labels: Option<RequestLabels>) -> [&'static str; 6] {
        match labels {
            Some(l) => [
                l.dry_run,
                l.resource.group,
                l.variant.version,
                l.resource.resource,
                l.variant.subresource,
                l.scope,
            ],
            None => Self::ZERO,
        }
    }
}

impl RequestLabels {
    /// `[group, resource, client]`; a request never classified (no plan) is counted as
    /// [`ZERO_LABELS`] says.
    pub fn values(labels: Option<RequestLabels>) -> [&'static str; 3] {
        match labels {
            Some(l) => [l.resource.group, l.resource.resource, l.client],
            None => ZERO_LABELS,
        }
    }
}

/// The cap on distinct (group, resource) label pairs (`metrics.max_resources`): the
/// first `max` resource pairs seen get labels of their own, every later new pair is
/// counted as `(other)` (docs/wire.md §6). One object, made at start-up and passed to
/// the proxy. A pair already seen is found under a read lock without allocating; a new
/// one is interned once (its strings and its [`ResourceSeries`] live as long as the
/// process: at most `max` of them).
pub struct ResourceLabels {
    max: usize,
    tracked: RwLock<Tracked>,
    discovery: &'static ResourceSeries,
    non_resource: &'static ResourceSeries,
    other: &'static ResourceSeries,
}

impl std::fmt::Debug for ResourceLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceLabels")
            .field("max", &self.max)
            .field("tracked", &self.tracked())
            .finish()
    }
}

#[derive(Default)]
struct Tracked {
    /// group → resource → its labels.
    by_group: HashMap<&'static str, HashMap<&'static str, &'static ResourceSeries>>,
    pairs: usize,
}

impl ResourceLabels {
    /// At most `max` distinct (group, resource) pairs; 0: every resource is `(other)`.
    pub fn new(max: usize) -> Self {
        let fixed = |v: &'static str| ResourceSeries::new(v, v).leak();
        ResourceLabels {
            max,
            tracked: RwLock::default(),
            discovery: fixed(DISCOVERY),
            non_resource: fixed(NON_RESOURCE),
            other: fixed(OTHER),
        }
    }

    /// The labels of a `method` request to `route` with `query` from a client of
    /// `client`'s family.
    pub fn request(
        &self,
        route: &Route,
        method: HttpMethod,
        query: Option<&str>,
        client: ClientFamily,
    ) -> RequestLabels {
        let resource = self.resolve(labels::resource_key(route));
        let variant = if std::ptr::eq(resource, self.other) {
            &OTHER_VARIANT
        } else {
            match labels::variant(route) {
                Some((version, subresource)) => resource.variant(version, subresource),
                None => &OTHER_VARIANT,
            }
        };
        RequestLabels {
            resource,
            variant,
            scope: labels::scope(route, method),
            dry_run: labels::dry_run(query),
            client: client.label(),
        }
    }

    /// The labels of a request never classified (no route): `(nonresource)`, `other`.
    pub fn unclassified(&self) -> RequestLabels {
        RequestLabels {
            resource: self.non_resource,
            variant: &NO_VARIANT,
            scope: "",
            dry_run: "",
            client: "other",
        }
    }

    /// The pair's labels: its own while the cap allows, `(other)` beyond.
    pub fn resolve(&self, key: ResourceKey<'_>) -> &'static ResourceSeries {
        let (group, resource) = match key {
            ResourceKey::Fixed(v) if v == DISCOVERY => return self.discovery,
            ResourceKey::Fixed(v) if v == NON_RESOURCE => return self.non_resource,
            ResourceKey::Fixed(_) => return self.other,
            ResourceKey::Resource { group, resource } => (group, resource),
        };
        let seen = |t: &Tracked| t.by_group.get(group)?.get(resource).copied();
        let read = self.tracked.read().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = seen(&read) {
            return s;
        }
        if read.pairs >= self.max {
            return self.other;
        }
        drop(read);
        let mut t = self.tracked.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = seen(&t) {
            return s;
        }
        if t.pairs >= self.max {
            return self.other;
        }
        let group: &'static str = match t.by_group.get_key_value(group) {
            Some((g, _)) => g,
            None => Box::leak(group.into()),
        };
        let series = ResourceSeries::new(group, Box::leak(resource.into())).leak();
        t.by_group
            .entry(group)
            .or_default()
            .insert(series.resource, series);
        t.pairs += 1;
        series
    }

    /// Distinct (group, resource) pairs with labels of their own.
    pub fn tracked(&self) -> usize {
        self.tracked.read().unwrap_or_else(|e| e.into_inner()).pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::sample_labels;
    use crate::metrics::Metrics;
    use crate::negotiate::client::identify;

    /// Every series the alerts select, from each alert's `expr` in
    /// deploy/monitoring/prometheusrule.yaml (not the recording rules': a series
    /// they find absent is recorded as absent, which alerts on nothing): a metric
    /// name of ours (`cborgate_*`, `process_*`) and the label values its `=`
    /// matchers ask for, less the labels Prometheus adds at scrape.
    fn alert_selectors() -> Vec<(String, Vec<(String, String)>)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/monitoring/prometheusrule.yaml"
        );
        let yaml = std::fs::read_to_string(path).unwrap();
        let indent = |l: &str| l.len() - l.trim_start().len();
        let lines: Vec<&str> = yaml.lines().collect();
        let mut exprs = Vec::new();
        let mut recording = false;
        for (n, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if t.starts_with("- record:") || t.starts_with("- alert:") {
                recording = t.starts_with("- record:");
            }
            let Some(rest) = t.strip_prefix("expr:").filter(|_| !recording) else {
                continue;
            };
            if rest.trim() == "|" {
                let block = lines[n + 1..]
                    .iter()
                    .take_while(|b| b.trim().is_empty() || indent(b) > indent(l));
                exprs.push(block.copied().collect::<Vec<_>>().join("\n"));
            } else {
                exprs.push(rest.to_string());
            }
        }
        let mut selectors = Vec::new();
        for expr in exprs {
            let mut rest = expr.as_str();
            while let Some(at) = rest.find(|c: char| c.is_ascii_alphabetic()) {
                rest = &rest[at..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                let (name, after) = rest.split_at(end);
                rest = after;
                if !(name.starts_with("cborgate_") || name.starts_with("process_")) {
                    continue;
                }
                let mut matchers = Vec::new();
                if let Some(inner) = after.strip_prefix('{') {
                    let (inner, tail) = inner.split_once('}').expect("matchers end with }");
                    rest = tail;
                    for m in inner.split(',') {
                        let Some((label, value)) = m.split_once('=') else {
                            continue;
                        };
                        let label = label.trim();
                        // `!=`, `=~` and `!~` select no particular series.
                        if label.ends_with('!') || value.starts_with('~') {
                            continue;
                        }
                        if !["job", "namespace", "pod", "instance"].contains(&label) {
                            matchers.push((label.to_string(), value.trim().to_string()));
                        }
                    }
                }
                selectors.push((name.to_string(), matchers));
            }
        }
        selectors
    }

    #[test]
    fn every_series_an_alert_selects_has_a_sample_from_start_up() {
        let selectors = alert_selectors();
        let names: Vec<&str> = selectors.iter().map(|s| s.0.as_str()).collect();
        for name in [
            "cborgate_requests_total",
            "cborgate_fallbacks_total",
            "cborgate_transcode_errors_total",
            "cborgate_codec_duration_seconds_bucket",
            "cborgate_upstream_ready",
        ] {
            assert!(
                names.contains(&name),
                "{name} not found in the alerts: {names:?}"
            );
        }
        let m = Metrics::new();
        m.count_at_zero(&vocabulary());
        let text = m.render();
        for (name, matchers) in &selectors {
            if name.starts_with("process_") && !cfg!(target_os = "linux") {
                continue;
            }
            // One series per certificate cborgate has loaded: none without TLS
            // files, and nothing to expire then (docs/wire.md §6).
            if name == "cborgate_certificate_expiry_timestamp_seconds"
                || name == "cborgate_reload_last_success"
            {
                continue;
            }
            let found = text
                .lines()
                .filter_map(|l| sample_labels(l, name))
                .any(|labels| {
                    matchers
                        .iter()
                        .all(|(k, v)| labels.split(',').any(|pair| pair == format!("{k}={v}")))
                });
            assert!(
                found,
                "no sample of {name}{matchers:?} on a fresh process:\n{text}"
            );
        }
    }

    fn key<'a>(group: &'a str, resource: &'a str) -> ResourceKey<'a> {
        ResourceKey::Resource { group, resource }
    }

    #[test]
    fn the_cap_bounds_distinct_resource_pairs() {
        let labels = ResourceLabels::new(3);
        let pods = labels.resolve(key("", "pods"));
        assert_eq!((pods.group, pods.resource), ("", "pods"));
        assert!(
            std::ptr::eq(pods, labels.resolve(key("", "pods"))),
            "a pair is interned once"
        );
        let deployments = labels.resolve(key("apps", "deployments"));
        // The fixed values are not counted against the cap.
        for v in [DISCOVERY, NON_RESOURCE, OTHER] {
            let fixed = labels.resolve(ResourceKey::Fixed(v));
            assert_eq!((fixed.group, fixed.resource), (v, v));
        }
        let sets = labels.resolve(key("apps", "statefulsets"));
        assert_eq!((sets.group, sets.resource), ("apps", "statefulsets"));
        assert!(
            std::ptr::eq(sets.group, deployments.group),
            "a group is interned once"
        );
        assert_eq!(labels.tracked(), 3);
        // Beyond the cap: one bucket, and nothing new is kept.
        for (g, r) in [("example.com", "widgets"), ("", "secrets"), ("apps", "x")] {
            let over = labels.resolve(key(g, r));
            assert_eq!((over.group, over.resource), (OTHER, OTHER), "{g}/{r}");
        }
        assert_eq!(labels.tracked(), 3);
        // Pairs seen before the cap was reached keep their labels.
        assert!(std::ptr::eq(
            deployments,
            labels.resolve(key("apps", "deployments"))
        ));
        let none = ResourceLabels::new(0);
        assert_eq!(none.resolve(key("", "pods")).resource, OTHER);
        assert_eq!(none.tracked(), 0);
    }

    #[test]
    fn the_cap_holds_when_threads_see_new_pairs_at_once() {
        let labels = ResourceLabels::new(100);
        let seen: Vec<Vec<(String, &'static ResourceSeries)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|t| {
                    let labels = &labels;
                    s.spawn(move || {
                        (0..500)
                            .map(|i| {
                                // Threads overlap: each name is asked for by two of them.
                                let name = format!("r{}", (i * 7 + t / 2 * 13) % 1000);
                                let got = labels.resolve(key("g.example.com", &name));
                                (name, got)
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(labels.tracked(), 100);
        let mut own = std::collections::BTreeSet::new();
        for (name, got) in seen.iter().flatten() {
            if got.resource == OTHER {
                continue;
            }
            assert_eq!(got.resource, name);
            assert!(std::ptr::eq(
                *got,
                labels.resolve(key("g.example.com", name))
            ));
            own.insert(name.clone());
        }
        assert_eq!(own.len(), 100, "every admitted pair was handed out");
    }

    #[test]
    fn codec_series_carry_the_pair() {
        let labels = ResourceLabels::new(10);
        let s = labels.resolve(key("codec.example.com", "gadgets"));
        let series = s.codec(Transcoding::ResponseJsonToCbor);
        series.bytes_from.inc_by(700);
        series.bytes_to.inc_by(400);
        series.duration.observe(0.001);
        assert!(std::ptr::eq(
            series,
            s.codec(Transcoding::ResponseJsonToCbor)
        ));
        let text = metrics().render();
        for want in [
            r#"cborgate_codec_bytes_total{direction="response",format="json",group="codec.example.com",resource="gadgets"} 700"#,
            r#"cborgate_codec_bytes_total{direction="response",format="cbor",group="codec.example.com",resource="gadgets"} 400"#,
            r#"cborgate_codec_duration_seconds_count{direction="response",from="json",group="codec.example.com",resource="gadgets",to="cbor"} 1"#,
        ] {
            assert!(text.contains(want), "{want} not in:\n{text}");
        }
    }

    #[test]
    fn request_labels_name_route_and_client() {
        let labels = ResourceLabels::new(10);
        let route = Route::classify("/apis/apps/v1/namespaces/demo/deployments/web");
        let client = identify(Some(
            "kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/abc",
        ));
        let l = labels.request(&route, HttpMethod::Get, None, client.family);
        assert_eq!(
            RequestLabels::values(Some(l)),
            ["apps", "deployments", "kube-controller-manager"]
        );
        let l = labels.request(
            &Route::classify("/version"),
            HttpMethod::Get,
            None,
            identify(None).family,
        );
        assert_eq!(
            RequestLabels::values(Some(l)),
            [NON_RESOURCE, NON_RESOURCE, "other"]
        );
        assert_eq!(RequestLabels::values(None), ZERO_LABELS);
        assert_eq!(
            RequestLabels::values(Some(labels.unclassified())),
            ZERO_LABELS
        );
    }

    #[test]
    fn api_labels_are_the_apiservers() {
        let labels = ResourceLabels::new(10);
        let api = |path: &str, query: Option<&str>| {
            let l = labels.request(
                &Route::classify(path),
                HttpMethod::Get,
                query,
                identify(None).family,
            );
            ApiLabels::values(Some(l))
        };
        assert_eq!(
            api(
                "/apis/apps/v1/namespaces/d/deployments/web/scale",
                Some("dryRun=All")
            ),
            ["All", "apps", "v1", "deployments", "scale", "resource"]
        );
        assert_eq!(
            api("/api/v1/nodes/n1/status", None),
            ["", "", "v1", "nodes", "status", "resource"]
        );
        assert_eq!(
            api("/api/v1/namespaces/d/pods", None),
            ["", "", "v1", "pods", "", "namespace"]
        );
        assert_eq!(
            api("/api/v1/pods", None),
            ["", "", "v1", "pods", "", "cluster"]
        );
        assert_eq!(
            api("/version", None),
            ["", NON_RESOURCE, "", NON_RESOURCE, "", ""]
        );
        assert_eq!(
            api("/api/v1/pods/p/Bad_Sub", None),
            ["", "", OTHER, "pods", OTHER, "resource"]
        );
        assert_eq!(ApiLabels::values(None), ApiLabels::ZERO);
    }

    /// Hostile paths (every version, subresource and resource name a client can make up)
    /// leave at most `max_resources` + 3 pairs, each with at most [`MAX_VARIANTS`] + 1
    /// (version, subresource) pairs; scope and dry_run have 4 and 3 values.
    #[test]
    fn label_cardinality_is_bounded_under_hostile_paths() {
        let max = 5;
        let labels = ResourceLabels::new(max);
        let mut seen = std::collections::BTreeSet::new();
        let queries = [
            None,
            Some("dryRun=All"),
            Some("dryRun=x"),
            Some("dryRun=%41ll"),
        ];
        for i in 0..3000 {
            let path = match i % 6 {
                0 => format!("/apis/g{}.example.com/v{}/r{i}", i % 7, i % 9 + 1),
                1 => format!("/api/v1/namespaces/ns{i}/pods/p{i}/sub{i}"),
                2 => format!("/api/v{}beta{}/pods", i % 50 + 1, i % 30 + 1),
                3 => format!("/apis/apps/v{}/deployments/x/s{}", i % 40 + 1, i % 20),
                4 => format!("/x/{i}/%zz/{i}"),
                _ => format!("/apis/g{i}/v1"),
            };
            let l = labels.request(
                &Route::classify(&path),
                HttpMethod::Get,
                queries[i % 4],
                identify(None).family,
            );
            seen.insert(ApiLabels::values(Some(l)).map(str::to_string));
        }
        let count = |at: usize| {
            seen.iter()
                .map(|v| v[at].clone())
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert!(labels.tracked() <= max);
        let pairs: std::collections::BTreeSet<_> =
            seen.iter().map(|v| (v[1].clone(), v[3].clone())).collect();
        assert!(pairs.len() <= max + 3, "{pairs:?}");
        for (g, r) in &pairs {
            let variants = seen
                .iter()
                .filter(|v| (&v[1], &v[3]) == (g, r))
                .map(|v| (v[2].clone(), v[4].clone()))
                .collect::<std::collections::BTreeSet<_>>();
            assert!(variants.len() <= MAX_VARIANTS + 1, "{g}/{r}: {variants:?}");
        }
        assert!(count(0).len() <= 3, "{:?}", count(0));
        assert!(count(5).len() <= 4, "{:?}", count(5));
        assert!(seen.len() <= (max + 3) * (MAX_VARIANTS + 1) * 3 * 4);
    }
}
