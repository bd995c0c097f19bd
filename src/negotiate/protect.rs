//! Keeping answers that old CBOR decoders refuse from being made CBOR (docs/wire.md §2b).
//!
//! client-go 1.32–1.35 decode CBOR with at most 1,024 elements per array and 1,024
//! pairs per map (apimachinery's CBOR decode modes, `MaxArrayElements` and
//! `MaxMapPairs`; raised in 1.36), and fail the whole request beyond them. Three pure
//! decisions, each table-tested:
//!
//! - [`Protection::old_limits`]: whether a client decodes CBOR with those limits (a
//!   Kubernetes component or kubectl at v1.32–v1.35 by its `User-Agent`, a `User-Agent`
//!   the operator listed, or every client when the operator says so);
//! - [`Protection::protects`]: whether a request is one to protect: such a client, whose
//!   `Accept` also takes JSON, asking for something cborgate would make CBOR;
//! - [`on_response`]: from the upstream's response head, whether its body is held
//!   until its width is known, sent as the upstream's JSON at once (a watch: its events
//!   cannot be known at the head), or treated as decided before.
//!
//! When the hold ends, and whether a failed send goes again, is `negotiate::hold`'s; the
//! reads and writes are the proxy's (`proxy::hold`); the width is the codec's
//! (`codec::BreadthScanner`).

use super::client::{ClientAgent, ClientFamily};
use super::media::{AcceptHeader, Offer, Restrictions};
use super::plan::{Plan, ResponseAction};
use super::response::OnResponse;
use super::route::Verb;
use super::Format;

/// The Kubernetes minor versions whose client-go decodes CBOR with the old limits.
const OLD_MINORS: std::ops::RangeInclusive<u16> = 32..=35;

/// What the operator configured (`[cbor_protection]`), fixed at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    pub enabled: bool,
    /// `User-Agent` patterns ([`matches`]).
    pub user_agents: Vec<String>,
    pub all_clients: bool,
    /// The widest array or map such a client decodes.
    pub max_elements: u64,
    /// The most of a response's start held while it is decided, bytes.
    pub hold_bytes: usize,
}

/// Why an answer went out as JSON: the `reason` label of `cborgate_cbor_protected_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// An array or map wider than the limit was seen.
    OverLimit,
    /// Not known in time: the hold bound was reached, or the answer is a watch.
    Undecided,
}

impl Reason {
    pub const ALL: [Reason; 2] = [Reason::OverLimit, Reason::Undecided];

    pub const fn label(self) -> &'static str {
        match self {
            Reason::OverLimit => "over_limit",
            Reason::Undecided => "undecided",
        }
    }
}

/// What to do with a protected request's response, from its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// As decided before: nothing here would be made CBOR.
    AsDecided,
    /// Hold the body's start until its width is known.
    Hold,
    /// Send the upstream's JSON as it came.
    Json(Reason),
}

impl Protection {
    /// Whether the client decodes CBOR with the old limits.
    pub fn old_limits(&self, agent: ClientAgent, user_agent: Option<&str>) -> bool {
        if !self.enabled {
            return false;
        }
        let known = agent.family != ClientFamily::Other
            && agent
                .version
                .is_some_and(|(major, minor)| major == 1 && OLD_MINORS.contains(&minor));
        self.all_clients
            || known
            || user_agent.is_some_and(|ua| self.user_agents.iter().any(|p| matches(p, ua)))
    }

    /// Whether the request is protected: a client with the old limits whose `Accept` also
    /// takes JSON, and an answer cborgate would transcode JSON → CBOR. In `native` mode
    /// (and for `auto`'s keys whose upstream speaks CBOR) the upstream's own CBOR passes
    /// through untouched and this does not apply.
    pub fn protects(&self, plan: &Plan, old_limits: bool, accept: Option<&str>) -> bool {
        old_limits
            && matches!(plan.response, ResponseAction::JsonToCbor { .. })
            && plan.response_format == Format::Cbor
            && accepts_json(accept)
    }

    /// Whether the request goes the hold's way from the start: protected, a single answer
    /// (not a watch), and nothing in the request body for the upstream (`GET` and `LIST`:
    /// the hold sends the request itself).
    pub fn holds(&self, plan: &Plan, protected: bool, declared_len: Option<u64>) -> bool {
        protected
            && matches!(plan.response, ResponseAction::JsonToCbor { watch: false })
            && matches!(plan.verb, Verb::Get | Verb::List)
            && declared_len.unwrap_or(0) == 0
            && !plan.long_running
            && plan.reply.is_none()
    }
}

/// Whether an `Accept` header takes JSON at all (a clause the apiserver would answer
/// with JSON, `*/*` included).
pub fn accepts_json(accept: Option<&str>) -> bool {
    let header = AcceptHeader::parse(accept);
    header.is_empty()
        || header
            .negotiate_among(Restrictions::Resource, &[Offer::Json])
            .is_some()
}

/// What to do with a protected request's response, from the decision about its head.
pub fn on_response(decision: &OnResponse, protected: bool) -> Verdict {
    match decision.action {
        _ if !protected => Verdict::AsDecided,
        ResponseAction::JsonToCbor { watch: false } => Verdict::Hold,
        // A watch's events are objects whose width is known only as each arrives, long
        // after the head: undecided at the head, so JSON (docs/wire.md §2b).
        ResponseAction::JsonToCbor { watch: true } => Verdict::Json(Reason::Undecided),
        _ => Verdict::AsDecided,
    }
}

/// The decision about the head, changed to send the upstream's JSON as it came.
pub fn as_json(decision: OnResponse) -> OnResponse {
    OnResponse {
        action: ResponseAction::PassThrough,
        format: Format::Json.as_str(),
        gzip: false,
        ..decision
    }
}

/// Whether `text` matches `pattern` as a whole: `*` any run of bytes (none included), `?`
/// any one byte, every other byte itself. Allocation-free, linear backtracking to the
/// last `*` only.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::client::identify;
    use crate::negotiate::{plan, RequestHead, UpstreamMode};

    fn protection() -> Protection {
        Protection {
            enabled: true,
            user_agents: vec!["my-operator/*".into(), "exact".into()],
            all_clients: false,
            max_elements: 1024,
            hold_bytes: 1 << 20,
        }
    }

    #[test]
    fn which_clients_have_the_old_limits() {
        let table: &[(&str, bool)] = &[
            ("kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/abc", true),
            ("kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/abc/generic-garbage-collector", true),
            ("kubelet/v1.32.0 (linux/arm64) kubernetes/70d3cc9", true),
            ("kubectl/v1.34.1 (darwin/arm64) kubernetes/x", true),
            ("kube-scheduler/v1.33.0-rc.1 (linux/amd64) kubernetes/x", true),
            ("kube-controller-manager/v1.36.0 (linux/amd64) kubernetes/abc", false),
            ("kubectl/v1.31.9 (linux/amd64) kubernetes/x", false),
            ("kubectl/v2.35.0 (linux/amd64) kubernetes/x", false),
            ("kubectl/v0.0.0-master+$Format:%H$ (linux/amd64) kubernetes/$Format", false),
            // The operator's patterns.
            ("my-operator/v0.0.0-master+$Format:%H$ (linux/amd64) kubernetes/$Format", true),
            ("my-operator", false),
            ("exact", true),
            ("exactly", false),
            ("curl/8.5.0", false),
            ("", false),
        ];
        let p = protection();
        for (ua, want) in table {
            assert_eq!(p.old_limits(identify(Some(ua)), Some(ua)), *want, "{ua}");
        }
        assert!(!p.old_limits(identify(None), None));
        let all = Protection {
            all_clients: true,
            ..protection()
        };
        assert!(all.old_limits(identify(Some("curl/8.5.0")), Some("curl/8.5.0")));
        assert!(all.old_limits(identify(None), None));
        let off = Protection {
            enabled: false,
            all_clients: true,
            ..protection()
        };
        let ua = "kubelet/v1.32.0 (linux/arm64) kubernetes/70d3cc9";
        assert!(!off.old_limits(identify(Some(ua)), Some(ua)));
    }

    #[test]
    fn patterns_match_the_whole_value() {
        let table: &[(&str, &str, bool)] = &[
            ("a*", "abc", true),
            ("a*", "a", true),
            ("a*", "ba", false),
            ("*c", "abc", true),
            ("*b*", "abc", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("**x", "aax", true),
            (
                "ctrl/v0.0.0-*",
                "ctrl/v0.0.0-master+$Format:%H$ (linux/amd64)",
                true,
            ),
        ];
        for (p, t, want) in table {
            assert_eq!(matches(p, t), *want, "{p} {t}");
        }
    }

    fn planned(mode: UpstreamMode, path: &str, query: Option<&str>, accept: &str) -> Plan {
        plan(
            &RequestHead {
                method: "GET",
                path,
                query,
                accept: Some(accept),
                ..RequestHead::default()
            },
            mode,
        )
    }

    #[test]
    fn which_requests_are_protected_and_held() {
        use UpstreamMode::*;
        let list = "/api/v1/configmaps";
        let one = "/api/v1/namespaces/default/configmaps/big";
        let both = "application/cbor, application/json";
        type Row<'a> = (
            UpstreamMode,
            &'a str,
            Option<&'a str>,
            &'a str,
            bool,
            bool,
            bool,
        );
        // (mode, path, query, accept, old limits, protected, held)
        let table: &[Row] = &[
            (Legacy, list, None, both, true, true, true),
            (Legacy, one, None, both, true, true, true),
            (Auto, list, None, both, true, true, true),
            (
                Legacy,
                list,
                None,
                "application/cbor;q=1, */*;q=0.5",
                true,
                true,
                true,
            ),
            // A CBOR-only client gets CBOR as before.
            (Legacy, list, None, "application/cbor", true, false, false),
            // A client with the new limits.
            (Legacy, list, None, both, false, false, false),
            // Nothing made CBOR: a JSON client, or native mode's own CBOR.
            (Legacy, list, None, "application/json", true, false, false),
            (Native, list, None, both, true, false, false),
            // A watch is protected, but decided at its head, not held.
            (Legacy, list, Some("watch=true"), both, true, true, false),
        ];
        let p = protection();
        for (mode, path, query, accept, old, protected, held) in table {
            let plan = planned(*mode, path, *query, accept);
            let got = p.protects(&plan, *old, Some(accept));
            assert_eq!(got, *protected, "{mode:?} {path} {query:?} {accept}");
            assert_eq!(p.holds(&plan, got, None), *held, "{mode:?} {path} {accept}");
        }
        let plan = planned(Legacy, list, None, both);
        assert!(!p.holds(&plan, true, Some(10)), "a body to send upstream");
    }

    #[test]
    fn the_response_head_decides_hold_json_or_as_before() {
        let decision = |action| OnResponse {
            replay: false,
            action,
            learned: None,
            format: "cbor",
            gzip: true,
            count_events: false,
            watch_stream: false,
            schema: crate::codec::fields::Schema::Unstructured,
        };
        let single = decision(ResponseAction::JsonToCbor { watch: false });
        let watch = decision(ResponseAction::JsonToCbor { watch: true });
        let through = decision(ResponseAction::PassThrough);
        assert_eq!(on_response(&single, true), Verdict::Hold);
        assert_eq!(on_response(&watch, true), Verdict::Json(Reason::Undecided));
        assert_eq!(on_response(&through, true), Verdict::AsDecided);
        assert_eq!(on_response(&single, false), Verdict::AsDecided);
        assert_eq!(on_response(&watch, false), Verdict::AsDecided);
        let json = as_json(single);
        assert_eq!(
            (json.action, json.format, json.gzip),
            (ResponseAction::PassThrough, "json", false)
        );
    }
}
