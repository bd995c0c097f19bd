//! Upstream connections (docs/wire.md §5a): which pooled connections a request may share
//! ([`pool`]), and whether a failed attempt is sent again ([`retry`]).
//!
//! kube-apiserver ends an HTTP/2 connection after every request it serves as anonymous, or
//! refuses for failed authentication: it answers that request, then sends GOAWAY. The
//! requests that were on their way on the same connection and that it had not read yet
//! are refused; a proxy that shared the connection between clients would hand those
//! refusals to clients who did nothing wrong. So a request the upstream will see as
//! anonymous gets connections of its own, over HTTP/1.1 (where the upstream keeps them
//! alive), and a request refused unprocessed (a token the upstream rejects still ends
//! the connection it came on) is sent again, whatever its method, as Go's HTTP/2
//! transport does, over HTTP/1.1.
//!
//! Likewise a request whose HTTP/2 stream the upstream ended before it had the whole body:
//! kube-apiserver answers a body it will not read (a CBOR one it cannot decode: 415) as
//! soon as it has the head, and Go's server then resets the stream with `NO_ERROR`; a body
//! pingora holds before the attempt (one cborgate read whole) goes only after the head,
//! and its write, failing on the ended stream, takes the answer with it. The upstream
//! never had the body, so it did not act on it: the request is sent again, over HTTP/1.1,
//! where the answer cannot be lost so (docs/wire.md §5a).
//!
//! Pure and total: no I/O, no panics, only `std`.

use super::identity::{Identity, Method};

/// The connections a request goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Requests with credentials the upstream authenticates (a bearer token, or an
    /// identity cborgate names upstream): shared connections, HTTP/2 when configured.
    Credentialed,
    /// Requests the upstream will see as anonymous: connections of their own, HTTP/1.1.
    Anonymous,
}

/// Is `value` (an `Authorization` header) a bearer token, as kube-apiserver's
/// bearer-token authenticator reads one: surrounding whitespace trimmed, split at single
/// spaces, a first word `bearer` in any case and a second word that is not empty
/// (docs/wire.md §5a). Anything else authenticates nobody.
pub fn bearer_token(value: &[u8]) -> bool {
    let v = value.trim_ascii();
    let mut words = v.split(|&b| b == b' ');
    let scheme = words.next().unwrap_or_default();
    scheme.eq_ignore_ascii_case(b"bearer") && words.next().is_some_and(|t| !t.is_empty())
}

/// The pool of a request: [`Pool::Credentialed`] when it carries a bearer token
/// (`authorization`: each `Authorization` header value) or cborgate names its user
/// upstream (a verified client certificate, a trusted front proxy's headers); otherwise
/// [`Pool::Anonymous`], which includes a request that reaches the upstream only with
/// cborgate's own client certificate: without identity headers, the front-proxy
/// certificate names nobody.
pub fn pool<'a>(identity: &Identity, mut authorization: impl Iterator<Item = &'a [u8]>) -> Pool {
    let named = matches!(identity.method, Method::X509 | Method::FrontProxy);
    if named || authorization.any(bearer_token) {
        Pool::Credentialed
    } else {
        Pool::Anonymous
    }
}

impl Pool {
    /// Whether an attempt goes over HTTP/1.1 only, after `resent` attempts the upstream
    /// did not act on ([`Retry::resends`]): every anonymous one, as kube-apiserver's
    /// GOAWAY after an anonymous request applies to HTTP/2 only; and a request sent again
    /// so, so that no other client's GOAWAY can refuse it a second time and no stream can
    /// end under its body again (docs/wire.md §5a).
    pub fn http1_only(self, resent: u8) -> bool {
        self == Pool::Anonymous || resent > 0
    }

    /// The key that keeps the pools apart in the connection pool, with `generation`, the
    /// upstream TLS material's (connections are reused only with the credentials they
    /// were made with).
    pub fn group_key(self, generation: u64) -> u64 {
        let bit = match self {
            Pool::Credentialed => 0,
            Pool::Anonymous => 1,
        };
        (generation << 1) | bit
    }
}

/// How many times a request the upstream did not act on (refused unprocessed, or its
/// stream ended before the body) is sent again, on top of the retries an idempotent
/// request gets anyway.
pub const RESENDS: u8 = 1;

/// What is known about a failed upstream attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The method is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE).
    pub idempotent: bool,
    /// The whole request body can be sent again (none was lost to a full retry buffer).
    pub body_kept: bool,
    /// The upstream's response head had arrived: nothing can be sent again.
    pub answered: bool,
    /// The upstream did not process the request: its HTTP/2 stream was above the
    /// last-stream-id of a graceful GOAWAY, was refused with `REFUSED_STREAM`, or could
    /// not be opened on a connection already going away (docs/wire.md §5a).
    pub refused: bool,
    /// The upstream ended the HTTP/2 stream before it had the whole request body: the
    /// write of a body pingora held before the attempt failed on a stream already reset
    /// or gone away. Whatever the upstream answered first (kube-apiserver's 415 to a CBOR
    /// body, followed by a `NO_ERROR` reset) is lost with it; the upstream did not act
    /// on a body it never had (docs/wire.md §5a).
    pub ended_before_body: bool,
    /// The retry that pingora's own rule allows (a connection that failed while reused,
    /// a refusal), whatever the method.
    pub transport: bool,
    /// Attempts of this request the upstream did not act on already sent again
    /// ([`Retry::resends`]).
    pub resent: u8,
    /// The failure is `auto` mode's own signal after an upstream 415: send the request
    /// again with its body as JSON (docs/wire.md §5).
    pub replay: bool,
    /// cborgate answers the request itself (a replay whose body cannot go as JSON).
    pub answered_locally: bool,
}

/// Why a request is sent upstream again: the `reason` of
/// `cborgate_upstream_retries_total`, or the 415 replay (counted as a fallback instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// `auto`'s JSON replay after a 415.
    Replay,
    /// The upstream refused it unprocessed.
    Refused,
    /// The upstream ended its HTTP/2 stream before it had the whole body.
    EndedBeforeBody,
    /// An idempotent request whose connection failed, as pingora retries it.
    Connection,
}

impl Retry {
    /// The retries `cborgate_upstream_retries_total` counts, each with its `reason`.
    pub const COUNTED: [Retry; 3] = [Retry::Refused, Retry::EndedBeforeBody, Retry::Connection];

    /// The `reason` label; the replay has none (it is a fallback).
    pub const fn label(self) -> Option<&'static str> {
        match self {
            Retry::Replay => None,
            Retry::Refused => Some("refused"),
            Retry::EndedBeforeBody => Some("ended_before_body"),
            Retry::Connection => Some("connection"),
        }
    }

    /// A request the upstream did not act on, sent again ([`RESENDS`] times at most,
    /// then over HTTP/1.1 only: [`Pool::http1_only`]).
    pub const fn resends(self) -> bool {
        matches!(self, Retry::Refused | Retry::EndedBeforeBody)
    }
}

/// Whether, and why, the request is sent again: never when cborgate answers it itself,
/// without its whole body or after an answer began; the replay once; one the upstream
/// did not act on (refused, or its stream ended before the body), any method,
/// [`RESENDS`] times in all; an idempotent one whenever pingora's rule allows.
pub fn retry(a: &Attempt) -> Option<Retry> {
    if a.answered_locally || !a.body_kept {
        None
    } else if a.replay {
        Some(Retry::Replay)
    } else if a.answered {
        None
    } else if a.refused && a.resent < RESENDS {
        Some(Retry::Refused)
    } else if a.ended_before_body && a.resent < RESENDS {
        Some(Retry::EndedBeforeBody)
    } else {
        (a.idempotent && a.transport).then_some(Retry::Connection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::identity::{identify, FrontProxy, HeaderNames, PeerCert, User};

    fn who(peer: Option<PeerCert>, names: &HeaderNames, headers: &[(&str, &str)]) -> Identity {
        identify(peer.as_ref(), names, || {
            headers.iter().map(|(n, v)| (*n, v.as_bytes()))
        })
    }

    fn pool_of(id: &Identity, headers: &[(&str, &str)]) -> Pool {
        pool(
            id,
            headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("authorization"))
                .map(|(_, v)| v.as_bytes()),
        )
    }

    #[test]
    fn bearer_tokens_as_kube_apiserver_reads_them() {
        let table: &[(&str, bool)] = &[
            ("Bearer abc", true),
            ("bearer abc", true),
            ("BEARER abc", true),
            ("  Bearer abc  ", true),
            ("Bearer abc def", true),
            ("Bearer", false),
            ("Bearer ", false),
            // Two spaces: the second word is empty.
            ("Bearer  abc", false),
            ("Basic YWRtaW46YWRtaW4=", false),
            ("Bearerabc", false),
            ("", false),
            ("Bearer\tabc", false),
        ];
        for (value, want) in table {
            assert_eq!(bearer_token(value.as_bytes()), *want, "{value:?}");
        }
    }

    #[test]
    fn which_pool_a_request_goes_on() {
        let plain = HeaderNames::default();
        let certs = HeaderNames {
            client_certs: true,
            ..HeaderNames::default()
        };
        let alice = PeerCert {
            x509: Some(User {
                name: "alice".into(),
                groups: vec![],
                extra: vec![],
            }),
            client_ca: true,
            ..PeerCert::default()
        };
        let front = PeerCert {
            front_proxy: FrontProxy::Allowed,
            ..PeerCert::default()
        };
        let token = [("Authorization", "Bearer t")];
        let user = [("X-Remote-User", "bob")];
        type Row<'a> = (
            &'a str,
            Option<PeerCert>,
            &'a HeaderNames,
            &'a [(&'a str, &'a str)],
            Pool,
        );
        let table: &[Row] = &[
            ("a bearer token", None, &plain, &token, Pool::Credentialed),
            ("nothing", None, &plain, &[], Pool::Anonymous),
            (
                "cborgate's own certificate only",
                None,
                &plain,
                &[("Accept", "application/json")],
                Pool::Anonymous,
            ),
            (
                "basic credentials",
                None,
                &plain,
                &[("authorization", "Basic YTpi")],
                Pool::Anonymous,
            ),
            (
                "an empty bearer token",
                None,
                &plain,
                &[("Authorization", "Bearer ")],
                Pool::Anonymous,
            ),
            (
                "a second Authorization header with the token",
                None,
                &plain,
                &[
                    ("Authorization", "Basic YTpi"),
                    ("Authorization", "Bearer t"),
                ],
                Pool::Credentialed,
            ),
            (
                "a verified client certificate",
                Some(alice.clone()),
                &certs,
                &[],
                Pool::Credentialed,
            ),
            (
                "a trusted front proxy naming a user",
                Some(front.clone()),
                &certs,
                &user,
                Pool::Credentialed,
            ),
            (
                "a trusted front proxy naming nobody",
                Some(front),
                &certs,
                &[],
                Pool::Anonymous,
            ),
            (
                "identity headers from nobody in particular (removed)",
                None,
                &certs,
                &user,
                Pool::Anonymous,
            ),
            (
                "a client certificate and a token",
                Some(alice),
                &certs,
                &token,
                Pool::Credentialed,
            ),
        ];
        for (what, peer, names, headers, want) in table {
            let id = who(peer.clone(), names, headers);
            assert_eq!(pool_of(&id, headers), *want, "{what}");
        }
    }

    #[test]
    fn anonymous_requests_and_resent_ones_go_over_http1() {
        assert!(Pool::Anonymous.http1_only(0));
        assert!(Pool::Anonymous.http1_only(1));
        assert!(!Pool::Credentialed.http1_only(0));
        // Sent again after a refusal, or a stream ended before its body: over HTTP/1.1,
        // where no GOAWAY can refuse it and no stream end under its body.
        assert!(Pool::Credentialed.http1_only(1));
        for r in [
            Retry::Replay,
            Retry::Refused,
            Retry::EndedBeforeBody,
            Retry::Connection,
        ] {
            let counted = Retry::COUNTED.contains(&r);
            assert_eq!(r.label().is_some(), counted, "{r:?}");
            assert_eq!(
                r.resends(),
                matches!(r, Retry::Refused | Retry::EndedBeforeBody),
                "{r:?}"
            );
        }
        for generation in [0, 1, 7, u64::MAX >> 1] {
            assert_ne!(
                Pool::Anonymous.group_key(generation),
                Pool::Credentialed.group_key(generation)
            );
            assert_ne!(
                Pool::Credentialed.group_key(generation),
                Pool::Credentialed.group_key(generation + 1)
            );
        }
    }

    #[test]
    fn when_a_failed_attempt_is_sent_again() {
        let post = Attempt {
            idempotent: false,
            body_kept: true,
            answered: false,
            refused: false,
            ended_before_body: false,
            transport: true,
            resent: 0,
            replay: false,
            answered_locally: false,
        };
        let get = Attempt {
            idempotent: true,
            ..post
        };
        let refused = |a: Attempt, n: u8| Attempt {
            refused: true,
            resent: n,
            ..a
        };
        // pingora's write of a body it held before the attempt failed on an HTTP/2
        // stream the upstream had ended (a 415 and its `NO_ERROR` reset came first, or
        // a reset before any answer): no transport retry of pingora's own.
        let ended = |a: Attempt, n: u8| Attempt {
            ended_before_body: true,
            transport: false,
            resent: n,
            ..a
        };
        let replay = Attempt {
            replay: true,
            transport: false,
            ..post
        };
        use Retry::*;
        let table: &[(&str, Attempt, Option<Retry>)] = &[
            ("the replay", replay, Some(Replay)),
            (
                "the replay without its whole body",
                Attempt {
                    body_kept: false,
                    ..replay
                },
                None,
            ),
            (
                "a replay answered by cborgate",
                Attempt {
                    answered_locally: true,
                    ..replay
                },
                None,
            ),
            (
                "a refused GET answered by cborgate",
                Attempt {
                    answered_locally: true,
                    ..refused(get, 0)
                },
                None,
            ),
            ("a refused POST", refused(post, 0), Some(Refused)),
            ("a refused POST, a second time", refused(post, 1), None),
            (
                "a refused POST whose body was not kept",
                Attempt {
                    body_kept: false,
                    ..refused(post, 0)
                },
                None,
            ),
            (
                "a refused POST after the answer began",
                Attempt {
                    answered: true,
                    ..refused(post, 0)
                },
                None,
            ),
            (
                "a POST whose stream ended before its body",
                ended(post, 0),
                Some(EndedBeforeBody),
            ),
            (
                "a GET whose stream ended before its body",
                ended(get, 0),
                Some(EndedBeforeBody),
            ),
            (
                "a POST whose stream ended before its body, sent again already",
                ended(post, 1),
                None,
            ),
            (
                "a POST whose stream ended before its body, after a refusal",
                Attempt {
                    refused: false,
                    ..ended(refused(post, 1), 1)
                },
                None,
            ),
            (
                "a POST whose stream ended before its body that was not kept",
                Attempt {
                    body_kept: false,
                    ..ended(post, 0)
                },
                None,
            ),
            (
                "a POST whose stream ended before its body, after the answer began",
                Attempt {
                    answered: true,
                    ..ended(post, 0)
                },
                None,
            ),
            (
                "a POST whose stream ended before its body, answered by cborgate",
                Attempt {
                    answered_locally: true,
                    ..ended(post, 0)
                },
                None,
            ),
            ("a POST whose reused connection broke", post, None),
            ("a GET whose reused connection broke", get, Some(Connection)),
            (
                "a GET pingora does not retry",
                Attempt {
                    transport: false,
                    ..get
                },
                None,
            ),
            (
                "a refused GET, a second time",
                refused(get, 1),
                Some(Connection),
            ),
            (
                "a refused GET whose body was not kept",
                Attempt {
                    body_kept: false,
                    ..refused(get, 0)
                },
                None,
            ),
        ];
        for (what, a, want) in table {
            assert_eq!(retry(a), *want, "{what}");
        }
    }
}
