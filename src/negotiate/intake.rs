//! A request on its way in, before anything of it goes upstream: the order in which
//! cborgate refuses one from its head (docs/wire.md §4), which in-flight limit admits
//! it, and each step of reading a body that is checked and transcoded whole (go on
//! reading, keep the rest in pingora's retry buffer, send it, or refuse it). Pure: the
//! proxy takes the admission slot and reads the pieces; these say what follows.

use super::identity::Identity;
use super::local::{keeps_tail, Reply, RequestLimits};
use super::plan::Plan;
use crate::codec::CodecError;

/// Which in-flight limit admits a request: `server.max_requests_inflight` for short
/// ones, `server.max_long_running_requests` for watches, upgrades and connect
/// subresources (kube-apiserver's max-in-flight filter keeps long-running requests out
/// of its count the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionClass {
    Short,
    LongRunning,
}

/// What the request head is judged on, besides its plan.
#[derive(Clone, Copy, Debug)]
pub struct HeadFacts<'a> {
    /// Who the request is (its certificate's verdict).
    pub identity: &'a Identity,
    /// The request line and headers as HTTP/1.1 text.
    pub head_bytes: usize,
    /// `Content-Length`, if any.
    pub declared_len: Option<u64>,
    pub limits: RequestLimits,
}

/// A refusal from the request head, and whether it was given after the request was
/// admitted (then it holds its slot until it is over, as any admitted request does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadRefusal {
    pub reply: Reply,
    pub admitted: bool,
}

impl Plan {
    /// The limit the request is admitted under.
    pub fn admission_class(&self) -> AdmissionClass {
        if self.long_running {
            AdmissionClass::LongRunning
        } else {
            AdmissionClass::Short
        }
    }

    /// Judge the request head, in kube-apiserver's order: 401 for a client certificate
    /// that no longer verifies (authentication first), 431 for a head over the limit
    /// (the server reads the head before any filter), then admission (`admit` takes a
    /// slot of the request's class; `false`: none is free, 429), then the plan's own
    /// answer (406, 415), then 413 for a declared body over the limit. `None`: the
    /// request goes on.
    pub fn judge_head(
        &self,
        facts: HeadFacts<'_>,
        admit: impl FnOnce(AdmissionClass) -> bool,
    ) -> Option<HeadRefusal> {
        let before = |r| HeadRefusal {
            reply: Reply::now(r),
            admitted: false,
        };
        if let Some(r) = facts.identity.refusal(self) {
            return Some(before(r));
        }
        if let Some(r) = self.head_refusal(facts.head_bytes, facts.limits) {
            return Some(before(r));
        }
        if !admit(self.admission_class()) {
            return Some(HeadRefusal {
                reply: self.too_many_requests(),
                admitted: false,
            });
        }
        let refused = self
            .reply
            .clone()
            .or_else(|| self.body_refusal(facts.declared_len, facts.limits))?;
        Some(HeadRefusal {
            reply: Reply::now(refused),
            admitted: true,
        })
    }

    /// The next step of reading a body whole ([`Plan::reads_body_first`]), after a
    /// piece: the checks in the order kube-apiserver's would fail (the size that
    /// arrived, 413; a body of unknown length past the retry buffer, 411; a body the
    /// codec refused, 400; the body as it goes upstream, 413; the process-wide body
    /// budget, 429), else read on or, at the end, send it.
    pub fn intake(&self, p: &BodyProgress<'_>, limits: RequestLimits) -> Intake {
        let refusal = self
            .body_refusal(Some(p.read), limits)
            .or_else(|| self.unframed_body_refusal(p.declared_len, p.read))
            .or_else(|| p.codec.map(|e| self.body_refused(e)))
            .or_else(|| self.transcoded_body_refusal(p.produced, limits));
        if let Some(r) = refusal {
            return Intake::Refuse(Reply::now(r));
        }
        if !p.within_budget {
            return Intake::Refuse(self.body_budget_refusal());
        }
        if p.ended {
            Intake::Whole
        } else {
            Intake::Read {
                keep_tail: keeps_tail(p.declared_len, p.read),
            }
        }
    }
}

/// How far a body read whole has got.
#[derive(Clone, Copy, Debug, Default)]
pub struct BodyProgress<'e> {
    /// `Content-Length`, if any.
    pub declared_len: Option<u64>,
    /// Bytes of the body read so far.
    pub read: u64,
    /// Bytes of the body as it goes upstream (transcoded) so far.
    pub produced: u64,
    /// The codec refused the body.
    pub codec: Option<&'e CodecError>,
    /// What is held fits the process-wide body budget.
    pub within_budget: bool,
    /// The body has ended.
    pub ended: bool,
}

/// What follows a step of reading a body whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Intake {
    /// Read the next piece; `keep_tail`: pingora keeps the rest of the body in its
    /// retry buffer from now on ([`keeps_tail`]).
    Read { keep_tail: bool },
    /// The body is whole and good: send it.
    Whole,
    /// Refuse it with this answer; nothing of it goes upstream.
    Refuse(Reply),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Reason;
    use crate::negotiate::identity::{identify, HeaderNames, PeerCert};
    use crate::negotiate::plan::{plan, RequestHead, UpstreamMode};

    const LIMITS: RequestLimits = RequestLimits {
        max_header_bytes: 1000,
        max_request_body: 100,
        max_upstream_body: 150,
    };

    fn anonymous() -> Identity {
        identify(None, &HeaderNames::default(), std::iter::empty)
    }

    fn revoked() -> Identity {
        let peer = PeerCert {
            unverified: true,
            ..Default::default()
        };
        identify(Some(&peer), &HeaderNames::default(), std::iter::empty)
    }

    fn head<'a>(
        method: &'a str,
        path: &'a str,
        accept: &'a str,
        ct: Option<&'a str>,
    ) -> RequestHead<'a> {
        RequestHead {
            method,
            path,
            accept: Some(accept),
            content_type: ct,
            ..Default::default()
        }
    }

    /// The refusal order, one row per step; `admit` records whether admission was asked.
    #[test]
    fn the_head_is_refused_in_kube_apiservers_order() {
        const CBOR: &str = "application/cbor";
        let post = head("POST", "/api/v1/namespaces/d/configmaps", CBOR, Some(CBOR));
        let get = head("GET", "/api/v1/namespaces/d/configmaps", CBOR, None);
        let watch = RequestHead {
            query: Some("watch=true"),
            ..get
        };
        let unacceptable = head("GET", "/api/v1/namespaces/d/configmaps", "text/html", None);
        // (what, head, identity, head bytes, declared length, a slot is free,
        //  want: code, admitted, whether admission was asked, its class)
        type Row<'a> = (
            &'a str,
            RequestHead<'a>,
            Identity,
            usize,
            Option<u64>,
            bool,
            Option<(u16, bool)>,
            Option<AdmissionClass>,
        );
        let rows: Vec<Row> = vec![
            (
                "good",
                post,
                anonymous(),
                10,
                Some(50),
                true,
                None,
                Some(AdmissionClass::Short),
            ),
            (
                "revoked first",
                post,
                revoked(),
                5000,
                Some(500),
                false,
                Some((401, false)),
                None,
            ),
            (
                "head too big",
                post,
                anonymous(),
                5000,
                Some(500),
                false,
                Some((431, false)),
                None,
            ),
            (
                "no slot",
                post,
                anonymous(),
                10,
                Some(500),
                false,
                Some((429, false)),
                Some(AdmissionClass::Short),
            ),
            (
                "watch class",
                watch,
                anonymous(),
                10,
                None,
                false,
                Some((429, false)),
                Some(AdmissionClass::LongRunning),
            ),
            (
                "406 after admission",
                unacceptable,
                anonymous(),
                10,
                None,
                true,
                Some((406, true)),
                Some(AdmissionClass::Short),
            ),
            (
                "413 declared",
                post,
                anonymous(),
                10,
                Some(101),
                true,
                Some((413, true)),
                Some(AdmissionClass::Short),
            ),
            (
                "at the limit",
                post,
                anonymous(),
                1000,
                Some(100),
                true,
                None,
                Some(AdmissionClass::Short),
            ),
        ];
        for (what, h, id, head_bytes, declared_len, free, want, class) in rows {
            let p = plan(&h, UpstreamMode::Legacy);
            let mut asked = None;
            let facts = HeadFacts {
                identity: &id,
                head_bytes,
                declared_len,
                limits: LIMITS,
            };
            let got = p.judge_head(facts, |c| {
                asked = Some(c);
                free
            });
            assert_eq!(
                got.map(|r| (r.reply.status.code, r.admitted)),
                want,
                "{what}"
            );
            assert_eq!(asked, class, "{what}: admission");
        }
    }

    #[test]
    fn a_body_read_whole_goes_on_is_sent_or_is_refused() {
        const CBOR: &str = "application/cbor";
        let p = plan(
            &head("POST", "/api/v1/namespaces/d/configmaps", CBOR, Some(CBOR)),
            UpstreamMode::Legacy,
        );
        let bad = CodecError {
            reason: Reason::Truncated,
            offset: 3,
            detail: 0,
        };
        let at = |declared_len, read, produced, codec, within_budget, ended| BodyProgress {
            declared_len,
            read,
            produced,
            codec,
            within_budget,
            ended,
        };
        let code = |i: Intake| match i {
            Intake::Refuse(r) => Err((r.status.code, r.retry_after)),
            other => Ok(other),
        };
        type Row<'a> = (&'a str, BodyProgress<'a>, Result<Intake, (u16, bool)>);
        let rows: Vec<Row> = vec![
            (
                "first piece, length known",
                at(Some(90), 10, 12, None, true, false),
                Ok(Intake::Read { keep_tail: true }),
            ),
            (
                "unknown length keeps from the start only",
                at(None, 10, 12, None, true, false),
                Ok(Intake::Read { keep_tail: false }),
            ),
            (
                "unknown length, nothing read yet",
                at(None, 0, 0, None, true, false),
                Ok(Intake::Read { keep_tail: true }),
            ),
            (
                "whole",
                at(Some(90), 90, 120, None, true, true),
                Ok(Intake::Whole),
            ),
            (
                "over the body limit first",
                at(Some(90), 101, 200, Some(&bad), false, false),
                Err((413, false)),
            ),
            (
                "then the codec",
                at(Some(90), 50, 200, Some(&bad), false, false),
                Err((400, false)),
            ),
            (
                "then the upstream limit",
                at(Some(90), 50, 151, None, false, false),
                Err((413, false)),
            ),
            (
                "then the budget",
                at(Some(90), 50, 150, None, false, false),
                Err((429, true)),
            ),
        ];
        for (what, progress, want) in rows {
            assert_eq!(code(p.intake(&progress, LIMITS)), want, "{what}");
        }
        // 411: a body of unknown length past the retry buffer.
        let big = LIMITS_BIG;
        let unframed = at(None, 64 * 1024 + 1, 10, None, true, false);
        assert_eq!(code(p.intake(&unframed, big)), Err((411, false)));
    }

    const LIMITS_BIG: RequestLimits = RequestLimits {
        max_header_bytes: 1000,
        max_request_body: 1 << 30,
        max_upstream_body: 1 << 30,
    };
}
