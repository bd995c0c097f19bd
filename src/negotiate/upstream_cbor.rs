//! Upgrade mode: what an upstream answer says about whether the upstream speaks CBOR at
//! all, for `/readyz`. The readiness probe cannot tell: a real kube-apiserver 1.36.2 answers
//! an anonymous probe the same with `CBORServingAndStorage` on or off (anonymous `/api`
//! with `Accept: application/cbor` is 403 on both, `/version` 406 on both, `/api` and
//! `/apis` with a token 406 on both); only a resource request with credentials tells them
//! apart (on: 200 `application/cbor`; off: 406). So readiness learns it from the requests
//! upgrade mode makes CBOR, and from a probe of its own that any authenticated identity may
//! make: `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` (RBAC's `system:basic-user`)
//! with `Accept: application/cbor`, answered 201 `application/cbor` by a CBOR-enabled 1.36.2
//! (native-1.36 `selfsubjectreview`) and 406 by a server without CBOR (docs/wire.md §5,
//! `upgrade`). Anonymous, it is a 401 or 403 in JSON either way: it tells nothing.

use super::plan::{BodyAction, Plan, UpstreamMode};
use super::response::{is_cbor, media_type, ResponseHead};
use super::route::Route;
use std::time::Duration;

/// What one answer to a request cborgate made CBOR says about the upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CborSupport {
    /// The upstream refused the CBOR cborgate sent or asked for (406 to its CBOR
    /// `Accept`, 415 to its CBOR body): the reason, for `/readyz` and the log.
    Refused(String),
    /// The upstream answered a CBOR request with CBOR (a 2xx `application/cbor` or
    /// `application/cbor-seq`).
    Speaks,
}

impl Plan {
    /// Whether this answer shows the upstream cannot, or can, speak CBOR; `None` when it
    /// says nothing (other modes, a request cborgate did not make CBOR, any other answer).
    pub fn cbor_support(&self, head: ResponseHead<'_>) -> Option<CborSupport> {
        if self.mode != UpstreamMode::Upgrade {
            return None;
        }
        let asked_cbor = self.upstream_accept.is_some();
        let sent_cbor = matches!(self.body, BodyAction::JsonToCbor { .. });
        match head.status {
            406 if asked_cbor => Some(CborSupport::Refused(self.refusal(406))),
            415 if sent_cbor => Some(CborSupport::Refused(self.refusal(415))),
            200..=299 if asked_cbor && is_cbor(media_type(head.content_type)) => {
                Some(CborSupport::Speaks)
            }
            _ => None,
        }
    }

    /// `the upstream refuses CBOR (406 to GET configmaps); …`: the resource as kubectl
    /// names it (`deployments.apps`), never a namespace or an object name.
    fn refusal(&self, status: u16) -> String {
        let what = match &self.route {
            Route::Resource(r) if r.group.is_empty() => r.resource.to_string(),
            Route::Resource(r) => format!("{}.{}", r.resource, r.group),
            // Upgrade mode makes only resource requests CBOR.
            _ => "a request".into(),
        };
        format!(
            "the upstream refuses CBOR ({status} to {} {what}); --mode upgrade needs an \
             apiserver with CBORServingAndStorage=true",
            self.verb.label()
        )
    }
}

/// The path of upgrade mode's CBOR probe, and the JSON body it sends.
pub const CBOR_PROBE_PATH: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
pub const CBOR_PROBE_BODY: &str =
    r#"{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1"}"#;

/// What the answer to the CBOR probe says: CBOR, a refusal, or nothing (a 401 or 403 to a
/// probe without an identity, any other answer).
pub fn cbor_probe_support(status: u16, content_type: Option<&str>) -> Option<CborSupport> {
    match status {
        406 | 415 => Some(CborSupport::Refused(format!(
            "the upstream refuses CBOR ({status} to POST selfsubjectreviews.authentication.k8s.io); \
             --mode upgrade needs an apiserver with CBORServingAndStorage=true"
        ))),
        200..=299 if is_cbor(media_type(content_type)) => Some(CborSupport::Speaks),
        _ => None,
    }
}

/// Why `/readyz` is 503, by cause; the metrics and alerts tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotReady {
    /// The process is shutting down.
    Draining,
    /// The readiness probe got no answer below 500: unreachable, TLS, timeout, 5xx.
    Unreachable,
    /// The upstream answers, but refuses CBOR (upgrade mode only).
    WithoutCbor,
}

/// What `/readyz` says: draining first, then the readiness probe, then (upgrade mode) the
/// upstream's CBOR as its answers and the CBOR probe last showed it. `refuses_cbor` is
/// only ever set in upgrade mode; a refusal seen while the upstream is unreachable says
/// less than the failed probe does.
pub fn readiness(draining: bool, reachable: bool, refuses_cbor: bool) -> Result<(), NotReady> {
    match (draining, reachable, refuses_cbor) {
        (true, _, _) => Err(NotReady::Draining),
        (false, false, _) => Err(NotReady::Unreachable),
        (false, true, true) => Err(NotReady::WithoutCbor),
        (false, true, false) => Ok(()),
    }
}

/// How often the readiness probe runs while `/readyz` says not ready, so that an
/// upstream that comes back (or starts speaking CBOR) is seen within this.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// How often it runs while `/readyz` says ready. Each probe costs an idle cborgate about
/// a millisecond of CPU (a request on a kept TLS connection and the wake-ups around it,
/// measured in front of kube-apiserver 1.36.2): every 2 s, that was most of what an idle
/// cborgate cost. A request that cannot reach the upstream makes the probe look at once
/// instead, no sooner than [`PROBE_INTERVAL`] after the last.
pub const PROBE_INTERVAL_READY: Duration = Duration::from_secs(5);

/// How long the readiness probe waits for its next turn: `doubted` when a request has
/// found the upstream unreachable since the last probe.
pub fn probe_wait(ready: bool, doubted: bool) -> Duration {
    match (ready, doubted) {
        (_, true) | (false, _) => PROBE_INTERVAL,
        (true, false) => PROBE_INTERVAL_READY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::plan::{plan, RequestHead};
    use CborSupport::*;
    use UpstreamMode::*;

    const CMS: &str = "/api/v1/namespaces/ns/configmaps";

    #[test]
    fn the_probe_looks_often_only_while_not_ready_or_doubted() {
        for (ready, doubted, want) in [
            (false, false, PROBE_INTERVAL),
            (false, true, PROBE_INTERVAL),
            (true, true, PROBE_INTERVAL),
            (true, false, PROBE_INTERVAL_READY),
        ] {
            assert_eq!(
                probe_wait(ready, doubted),
                want,
                "ready {ready}, doubted {doubted}"
            );
        }
        assert!(PROBE_INTERVAL < PROBE_INTERVAL_READY);
    }
    const SVCS: &str = "/api/v1/namespaces/ns/services";
    const DEP: &str = "/apis/apps/v1/namespaces/ns/deployments/d";

    fn head(status: u16, content_type: Option<&'static str>) -> ResponseHead<'static> {
        ResponseHead {
            status,
            content_type,
            ..Default::default()
        }
    }

    fn refused(what: &str) -> Option<CborSupport> {
        Some(Refused(format!(
            "the upstream refuses CBOR ({what}); --mode upgrade needs an apiserver with \
             CBORServingAndStorage=true"
        )))
    }

    /// (mode, method, path, Accept, Content-Type, upstream status, upstream Content-Type)
    /// → what it says about the upstream.
    type Case<'a> = (
        UpstreamMode,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        u16,
        Option<&'a str>,
        Option<CborSupport>,
    );

    #[test]
    fn cbor_support_table() {
        let json = Some("application/json");
        let cbor = Some("application/cbor");
        let seq = Some("application/cbor-seq");
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            // A JSON-only apiserver (1.36.2, CBORServingAndStorage off) answers the CBOR
            // Accept of a list with 406, a CBOR body with 415.
            (Upgrade, "GET", CMS, json, None, 406, json, refused("406 to LIST configmaps")),
            (Upgrade, "GET", DEP, json, None, 406, json, refused("406 to GET deployments.apps")),
            // (A ConfigMap's body stays JSON: it has `[]byte` fields.)
            (Upgrade, "POST", SVCS, json, json, 415, json, refused("415 to POST services")),
            (Upgrade, "POST", CMS, json, json, 415, json, None),
            (Upgrade, "POST", CMS, None, json, 406, json, refused("406 to POST configmaps")),
            // A CBOR-enabled one answers in CBOR: it speaks CBOR.
            (Upgrade, "GET", CMS, json, None, 200, cbor, Some(Speaks)),
            (Upgrade, "GET", CMS, json, None, 200, Some("application/cbor; x=y"), Some(Speaks)),
            (Upgrade, "POST", SVCS, json, json, 201, cbor, Some(Speaks)),
            (Upgrade, "GET", CMS, json, None, 200, seq, Some(Speaks)),
            // Errors in CBOR, JSON answers, other statuses: nothing learned.
            (Upgrade, "GET", CMS, json, None, 404, cbor, None),
            (Upgrade, "GET", CMS, json, None, 200, json, None),
            (Upgrade, "GET", CMS, json, None, 403, json, None),
            (Upgrade, "GET", CMS, json, None, 500, json, None),
            // Requests cborgate did not make CBOR: a CBOR client's own Accept, a Table,
            // discovery without CBOR, anything else.
            (Upgrade, "GET", CMS, cbor, None, 406, json, None),
            (Upgrade, "GET", CMS, Some("application/json;as=Table;v=v1;g=meta.k8s.io"), None, 406, json, None),
            (Upgrade, "GET", "/api", json, None, 406, json, None),
            (Upgrade, "GET", "/api/v1", json, None, 406, json, None),
            (Upgrade, "GET", "/apis/apps/v1", json, None, 406, json, None),
            (Upgrade, "GET", "/version", json, None, 406, json, None),
            (Upgrade, "POST", SVCS, cbor, cbor, 415, json, None),
            // Other modes never look.
            (Legacy, "GET", CMS, cbor, None, 406, json, None),
            (Auto, "POST", CMS, cbor, cbor, 415, json, None),
            (Native, "GET", CMS, cbor, None, 200, cbor, None),
            (Native, "GET", CMS, json, None, 406, json, None),
        ];
        for (mode, method, path, accept, ct, status, rct, want) in cases {
            let req = RequestHead {
                method,
                path,
                accept,
                content_type: ct,
                declared_len: ct.map(|_| 10),
                ..Default::default()
            };
            let p = plan(&req, mode);
            assert_eq!(
                p.cbor_support(head(status, rct)),
                want,
                "{mode:?} {method} {path} {accept:?} {ct:?} -> {status} {rct:?}"
            );
        }
    }

    #[test]
    fn readiness_table() {
        use NotReady::*;
        #[rustfmt::skip]
        let cases = [
            // (draining, reachable, refuses CBOR) -> verdict
            (false, true, false, Ok(())),
            (false, true, true, Err(WithoutCbor)),
            (false, false, false, Err(Unreachable)),
            (false, false, true, Err(Unreachable)),
            (true, true, false, Err(Draining)),
            (true, false, true, Err(Draining)),
        ];
        for (d, r, c, want) in cases {
            assert_eq!(readiness(d, r, c), want, "{d} {r} {c}");
        }
    }

    #[test]
    fn cbor_probe_table() {
        let refused = |s: u16| {
            Some(Refused(format!(
                "the upstream refuses CBOR ({s} to POST selfsubjectreviews.authentication.k8s.io); \
                 --mode upgrade needs an apiserver with CBORServingAndStorage=true"
            )))
        };
        #[rustfmt::skip]
        let cases = [
            // CBOR-enabled 1.36.2 (native-1.36 `selfsubjectreview`).
            (201, Some("application/cbor"), Some(Speaks)),
            // Without CBOR: a 406 in JSON.
            (406, Some("application/json"), refused(406)),
            (415, Some("application/json"), refused(415)),
            // No identity, or one not allowed: written by the filters in JSON on both.
            (401, Some("application/json"), None),
            (403, Some("application/json"), None),
            (201, Some("application/json"), None),
            (404, Some("application/json"), None),
            (500, None, None),
        ];
        for (status, ct, want) in cases {
            assert_eq!(cbor_probe_support(status, ct), want, "{status} {ct:?}");
        }
    }
}
