//! Who a request is, and which identity headers go upstream (docs/wire.md §6a): the
//! request-header (front-proxy) protocol as kube-apiserver, the kube-aggregator and
//! kube-rbac-proxy speak it. From what the client's TLS certificate proved ([`PeerCert`],
//! made after the handshake) and the request's headers, [`identify`] decides:
//!
//! - a **trusted front proxy** (its certificate verified against the request-header CA,
//!   with an allowed CN) that names a user: its identity headers go upstream unchanged;
//! - otherwise every header named like an identity header (the configured user and group
//!   names, anything starting with an extra prefix) is removed, whoever sent it;
//! - then a client certificate verified against the client CA, with a CN, is named
//!   upstream as kube-apiserver's x509 authenticator names it: CN the user, each O a
//!   group, the certificate's SHA-256 as the `authentication.kubernetes.io/credential-id`
//!   extra (the caller hashes; this module stays `std`-only);
//! - a request with no verified identity goes on with its own credentials only.
//!
//! Pure and total: no I/O, no panics, only `std`.

use super::plan::{LocalReply, Plan};

/// The identity settings: the configured header names (`server.requestheader_*`) and
/// whether client certificates are asked for at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderNames {
    /// A client CA or a request-header CA is configured. Then the upstream client
    /// certificate (the front-proxy certificate) is presented only with a named
    /// identity; otherwise it is presented on every request, as before.
    pub client_certs: bool,
    /// User headers, in order of precedence; the first is the one cborgate writes.
    pub user: Vec<String>,
    /// Group headers; the first is the one cborgate writes, once per group.
    pub group: Vec<String>,
    /// Extra prefixes; the first is the one cborgate writes.
    pub extra_prefix: Vec<String>,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            client_certs: false,
            user: vec!["X-Remote-User".into()],
            group: vec!["X-Remote-Group".into()],
            extra_prefix: vec!["X-Remote-Extra-".into()],
        }
    }
}

/// A user as kube-apiserver's x509 authenticator derives it from a verified certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The subject's CN (never empty: a certificate without one gives no user).
    pub name: String,
    /// Each O of the subject, in order.
    pub groups: Vec<String>,
    /// Extras, `(key, value)` in order; one value per entry.
    pub extra: Vec<(String, String)>,
}

/// The request-header CA's verdict on a client certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrontProxy {
    /// Not verified against the request-header CA (or none is configured).
    #[default]
    No,
    /// Verified, with a CN in `server.requestheader_allowed_names` (or that list empty).
    Allowed,
    /// Verified, but its CN is not allowed: not a front proxy.
    NotAllowed,
}

/// What the client's certificate proved at the TLS handshake. A certificate that does
/// not verify against either CA is refused at the handshake; one that verifies against
/// neither any more (a session resumed after the CA bundle changed) is `unverified`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCert {
    /// A certificate was presented, and verifies against no bundle now.
    pub unverified: bool,
    /// Verified against the client CA: the user it names (`None`: no CN, or a subject
    /// that cannot be read).
    pub x509: Option<User>,
    /// Verified against the client CA (with or without a usable user).
    pub client_ca: bool,
    pub front_proxy: FrontProxy,
}

/// How a request's identity was established: the `method` label of
/// `cborgate_authentications_total` and the `auth` field of the request log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    X509,
    FrontProxy,
    None,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::X509, Method::FrontProxy, Method::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::X509 => "x509",
            Method::FrontProxy => "front-proxy",
            Method::None => "none",
        }
    }
}

/// The `result` label values of `cborgate_authentications_total`.
pub const RESULTS: [&str; 2] = ["success", "failure"];

/// The decision for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// How the identity was established (`None`: it was not).
    pub method: Method,
    /// The verified user, for the request log.
    pub user: Option<String>,
    /// The `(method, result)` counted in `cborgate_authentications_total`:
    /// `x509`/`front-proxy` success; `x509` failure for a client-CA certificate that
    /// names no usable user; `front-proxy` failure for a request-header-CA certificate
    /// whose CN is not allowed, or that names no user; `none` success when nothing
    /// was claimed, `none` failure when identity headers were removed.
    pub counted: (Method, &'static str),
    /// Header names (lower case) removed from the upstream request.
    pub remove: Vec<String>,
    /// Headers added to the upstream request, in order.
    pub add: Vec<(String, String)>,
    /// The client presented a certificate that does not verify: answer 401
    /// `Unauthorized`, never forward.
    pub refuse: bool,
    /// Present the upstream client certificate on this request's connection. With
    /// client certificates configured, only when an identity is named upstream: a
    /// request with no verified identity reaches the upstream with its own credentials
    /// only, exactly as if it came directly (no front-proxy certificate that the
    /// upstream would try, and fail, as an x509 client).
    pub upstream_cert: bool,
}

impl Identity {
    /// 401 `Unauthorized`, as kube-apiserver answers an unauthenticated request, in the
    /// request's error format, for a client whose certificate does not verify.
    pub fn refusal(&self, plan: &Plan) -> Option<LocalReply> {
        self.refuse
            .then(|| plan.error_reply(401, "Unauthorized", "Unauthorized".into()))
    }
}

/// Is `b` a byte of an HTTP token (RFC 9110 `tchar`)?
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An extra's key as a header-name suffix, as client-go's `headerKeyEscape` writes it:
/// every byte that is not a token character, and `%`, percent-encoded.
pub fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key.as_bytes() {
        if tchar(b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Can `v` travel as a header value and arrive unchanged (no control bytes, no
/// surrounding whitespace that a parser would trim)?
fn header_value_ok(v: &str) -> bool {
    let b = v.as_bytes();
    !b.iter().any(|&c| (c < 0x20 && c != b'\t') || c == 0x7f)
        && !b.first().is_some_and(|c| *c == b' ' || *c == b'\t')
        && !b.last().is_some_and(|c| *c == b' ' || *c == b'\t')
}

/// The headers that name `user` upstream, or `None` if a value cannot be carried.
fn name_upstream(user: &User, names: &HeaderNames) -> Option<Vec<(String, String)>> {
    let mut add = Vec::with_capacity(1 + user.groups.len() + user.extra.len());
    add.push((names.user.first()?.clone(), user.name.clone()));
    if let Some(g) = names.group.first() {
        add.extend(user.groups.iter().map(|v| (g.clone(), v.clone())));
    }
    if let Some(p) = names.extra_prefix.first() {
        for (k, v) in &user.extra {
            add.push((format!("{p}{}", escape_extra_key(k)), v.clone()));
        }
    }
    add.iter().all(|(_, v)| header_value_ok(v)).then_some(add)
}

/// Decide the identity of a request from its certificate's verdict (`None`: no
/// certificate, or a plain listener) and its headers: `headers()` walks them, as
/// `(name, value)` in any case, each time it is called.
pub fn identify<'a, I>(
    peer: Option<&PeerCert>,
    names: &HeaderNames,
    headers: impl Fn() -> I,
) -> Identity
where
    I: Iterator<Item = (&'a str, &'a [u8])>,
{
    let is_user = |n: &str| names.user.iter().any(|u| u.eq_ignore_ascii_case(n));
    let is_group = |n: &str| names.group.iter().any(|g| g.eq_ignore_ascii_case(n));
    let is_extra = |n: &str| {
        names.extra_prefix.iter().any(|p| {
            n.len() >= p.len() && n.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
        })
    };
    if peer.is_some_and(|p| p.unverified) {
        return Identity {
            method: Method::None,
            user: None,
            counted: (Method::X509, "failure"),
            remove: Vec::new(),
            add: Vec::new(),
            refuse: true,
            upstream_cert: false,
        };
    }
    let front_proxy = peer.map_or(FrontProxy::No, |p| p.front_proxy);
    // kube-apiserver's request-header authenticator: the first user header, in the
    // configured order, whose first value is not empty.
    let claimed_user = names.user.iter().find_map(|u| {
        headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(u))
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    });
    if let (FrontProxy::Allowed, Some(user)) = (front_proxy, claimed_user) {
        return Identity {
            method: Method::FrontProxy,
            user: Some(String::from_utf8_lossy(user).into_owned()),
            counted: (Method::FrontProxy, "success"),
            remove: Vec::new(),
            add: Vec::new(),
            refuse: false,
            upstream_cert: true,
        };
    }
    let mut remove: Vec<String> = Vec::new();
    for (n, _) in headers() {
        if (is_user(n) || is_group(n) || is_extra(n))
            && !remove.iter().any(|r| r.eq_ignore_ascii_case(n))
        {
            remove.push(n.to_ascii_lowercase());
        }
    }
    let x509 = peer.and_then(|p| p.x509.as_ref());
    if let Some((user, add)) = x509.and_then(|u| Some((u, name_upstream(u, names)?))) {
        return Identity {
            method: Method::X509,
            user: Some(user.name.clone()),
            counted: (Method::X509, "success"),
            remove,
            add,
            refuse: false,
            upstream_cert: true,
        };
    }
    let counted = if peer.is_some_and(|p| p.client_ca) {
        (Method::X509, "failure")
    } else if front_proxy != FrontProxy::No {
        (Method::FrontProxy, "failure")
    } else if remove.is_empty() {
        (Method::None, "success")
    } else {
        (Method::None, "failure")
    };
    Identity {
        method: Method::None,
        user: None,
        counted,
        remove,
        add: Vec::new(),
        refuse: false,
        upstream_cert: !names.client_certs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> User {
        User {
            name: "alice".into(),
            groups: vec!["devs".into(), "ops".into()],
            extra: vec![(
                "authentication.kubernetes.io/credential-id".into(),
                "X509SHA256=ab".into(),
            )],
        }
    }

    fn x509(u: User) -> PeerCert {
        PeerCert {
            unverified: false,
            x509: Some(u),
            client_ca: true,
            front_proxy: FrontProxy::No,
        }
    }

    fn proxy(fp: FrontProxy) -> PeerCert {
        PeerCert {
            unverified: false,
            x509: None,
            client_ca: false,
            front_proxy: fp,
        }
    }

    const SPOOF: &[(&str, &str)] = &[
        ("X-Remote-User", "system:admin"),
        ("x-remote-group", "system:masters"),
        ("X-Remote-Group", "devs"),
        ("X-REMOTE-EXTRA-scopes", "all"),
        ("Authorization", "Bearer t"),
        ("Impersonate-User", "bob"),
        ("Accept", "application/cbor"),
    ];
    const SPOOF_REMOVED: &[&str] = &["x-remote-user", "x-remote-group", "x-remote-extra-scopes"];

    fn run(peer: Option<PeerCert>, names: &HeaderNames, headers: &[(&str, &str)]) -> Identity {
        identify(peer.as_ref(), names, || {
            headers.iter().map(|(n, v)| (*n, v.as_bytes()))
        })
    }

    fn adds(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Every row: the certificate's verdict and the headers in; method, user, count,
    /// removed and added headers out.
    #[test]
    fn the_decision_table() {
        let n = HeaderNames {
            client_certs: true,
            ..HeaderNames::default()
        };
        let removed = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        struct Row {
            what: &'static str,
            peer: Option<PeerCert>,
            headers: &'static [(&'static str, &'static str)],
            method: Method,
            user: Option<&'static str>,
            counted: (Method, &'static str),
            remove: Vec<String>,
            add: Vec<(String, String)>,
        }
        let alice_headers = adds(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", "ops"),
            (
                "X-Remote-Extra-authentication.kubernetes.io%2Fcredential-id",
                "X509SHA256=ab",
            ),
        ]);
        let rows = vec![
            Row {
                what: "no certificate, no claims",
                peer: None,
                headers: &[("Authorization", "Bearer t")],
                method: Method::None,
                user: None,
                counted: (Method::None, "success"),
                remove: vec![],
                add: vec![],
            },
            Row {
                what: "no certificate, spoofed claims",
                peer: None,
                headers: SPOOF,
                method: Method::None,
                user: None,
                counted: (Method::None, "failure"),
                remove: removed(SPOOF_REMOVED),
                add: vec![],
            },
            Row {
                what: "client certificate",
                peer: Some(x509(alice())),
                headers: &[("Accept", "application/json")],
                method: Method::X509,
                user: Some("alice"),
                counted: (Method::X509, "success"),
                remove: vec![],
                add: alice_headers.clone(),
            },
            Row {
                what: "client certificate with spoofed claims: the certificate wins",
                peer: Some(x509(alice())),
                headers: SPOOF,
                method: Method::X509,
                user: Some("alice"),
                counted: (Method::X509, "success"),
                remove: removed(SPOOF_REMOVED),
                add: alice_headers.clone(),
            },
            Row {
                what: "client-CA certificate without a CN",
                peer: Some(PeerCert {
                    client_ca: true,
                    ..PeerCert::default()
                }),
                headers: SPOOF,
                method: Method::None,
                user: None,
                counted: (Method::X509, "failure"),
                remove: removed(SPOOF_REMOVED),
                add: vec![],
            },
            Row {
                what: "allowed front proxy: headers unchanged",
                peer: Some(proxy(FrontProxy::Allowed)),
                headers: SPOOF,
                method: Method::FrontProxy,
                user: Some("system:admin"),
                counted: (Method::FrontProxy, "success"),
                remove: vec![],
                add: vec![],
            },
            Row {
                what: "allowed front proxy naming nobody: groups and extras removed",
                peer: Some(proxy(FrontProxy::Allowed)),
                headers: &[("X-Remote-User", ""), ("X-Remote-Group", "g")],
                method: Method::None,
                user: None,
                counted: (Method::FrontProxy, "failure"),
                remove: removed(&["x-remote-user", "x-remote-group"]),
                add: vec![],
            },
            Row {
                what: "front-proxy CA, CN not allowed: stripped",
                peer: Some(proxy(FrontProxy::NotAllowed)),
                headers: SPOOF,
                method: Method::None,
                user: None,
                counted: (Method::FrontProxy, "failure"),
                remove: removed(SPOOF_REMOVED),
                add: vec![],
            },
            Row {
                what: "front proxy also in the client CA: the front proxy's claim wins",
                peer: Some(PeerCert {
                    x509: Some(alice()),
                    client_ca: true,
                    front_proxy: FrontProxy::Allowed,
                    unverified: false,
                }),
                headers: SPOOF,
                method: Method::FrontProxy,
                user: Some("system:admin"),
                counted: (Method::FrontProxy, "success"),
                remove: vec![],
                add: vec![],
            },
            Row {
                what: "front proxy also in the client CA, no claim: its own x509 name",
                peer: Some(PeerCert {
                    x509: Some(alice()),
                    client_ca: true,
                    front_proxy: FrontProxy::Allowed,
                    unverified: false,
                }),
                headers: &[],
                method: Method::X509,
                user: Some("alice"),
                counted: (Method::X509, "success"),
                remove: vec![],
                add: alice_headers.clone(),
            },
            Row {
                what: "a CN that cannot travel in a header: no identity",
                peer: Some(x509(User {
                    name: "ali\nce".into(),
                    ..alice()
                })),
                headers: &[],
                method: Method::None,
                user: None,
                counted: (Method::X509, "failure"),
                remove: vec![],
                add: vec![],
            },
        ];
        for r in rows {
            assert!(!run(r.peer.clone(), &n, r.headers).refuse, "{}", r.what);
            let got = run(r.peer.clone(), &n, r.headers);
            assert_eq!(got.method, r.method, "{}", r.what);
            assert_eq!(got.user.as_deref(), r.user, "{}", r.what);
            assert_eq!(got.counted, r.counted, "{}", r.what);
            assert_eq!(got.remove, r.remove, "{}", r.what);
            assert_eq!(got.add, r.add, "{}", r.what);
            // The front-proxy certificate goes with a named identity only, once client
            // certificates are configured; without them, always (plain upstream mTLS).
            let named = got.method != Method::None;
            assert_eq!(got.upstream_cert, named, "{}", r.what);
            let plain = HeaderNames {
                client_certs: false,
                ..n.clone()
            };
            assert!(
                run(r.peer.clone(), &plain, r.headers).upstream_cert,
                "{}",
                r.what
            );
        }
    }

    #[test]
    fn a_certificate_that_no_longer_verifies_is_refused() {
        let got = run(
            Some(PeerCert {
                unverified: true,
                ..x509(alice())
            }),
            &HeaderNames::default(),
            SPOOF,
        );
        assert!(got.refuse);
        assert_eq!((got.method, got.user.as_deref()), (Method::None, None));
        assert_eq!(got.counted, (Method::X509, "failure"));
        assert!(got.add.is_empty());
        let plan = crate::negotiate::plan(
            &crate::negotiate::RequestHead {
                method: "GET",
                path: "/api/v1/pods",
                query: None,
                accept: Some("application/cbor"),
                content_type: None,
                upgrade: false,
                declared_len: None,
                accept_encoding: None,
                compress_responses: false,
            },
            crate::negotiate::UpstreamMode::Legacy,
        );
        let r = got.refusal(&plan).unwrap();
        assert_eq!((r.code, r.reason), (401, "Unauthorized"));
        assert_eq!(r.format, crate::negotiate::Format::Cbor);
        assert_eq!(
            run(None, &HeaderNames::default(), SPOOF).refusal(&plan),
            None
        );
    }

    #[test]
    fn configured_names_are_removed_and_the_first_is_written() {
        let n = HeaderNames {
            client_certs: true,
            user: vec!["X-User".into(), "X-Remote-User".into()],
            group: vec!["X-Groups".into()],
            extra_prefix: vec!["X-Extra-".into(), "X-Remote-Extra-".into()],
        };
        let got = run(
            Some(x509(alice())),
            &n,
            &[
                ("x-user", "a"),
                ("X-Remote-User", "b"),
                ("X-Groups", "c"),
                ("X-Remote-Group", "not configured: passes"),
                ("x-remote-extra-k", "d"),
                ("X-Extra-k", "e"),
            ],
        );
        assert_eq!(
            got.remove,
            [
                "x-user",
                "x-remote-user",
                "x-groups",
                "x-remote-extra-k",
                "x-extra-k"
            ]
        );
        assert_eq!(got.add[0], ("X-User".into(), "alice".into()));
        assert_eq!(got.add[1], ("X-Groups".into(), "devs".into()));
        assert!(got.add[3].0.starts_with("X-Extra-authentication"));
        // A trusted front proxy: the first configured user header with a value names it.
        let got = run(
            Some(proxy(FrontProxy::Allowed)),
            &n,
            &[("X-Remote-User", "second"), ("X-User", "")],
        );
        assert_eq!(got.user.as_deref(), Some("second"));
    }

    #[test]
    fn extra_keys_are_escaped_as_client_go_does() {
        assert_eq!(
            escape_extra_key("authentication.kubernetes.io/credential-id"),
            "authentication.kubernetes.io%2Fcredential-id"
        );
        assert_eq!(escape_extra_key("a b%c"), "a%20b%25c");
        assert_eq!(escape_extra_key("é"), "%C3%A9");
        assert_eq!(escape_extra_key("Scopes_1~"), "Scopes_1~");
    }

    #[test]
    fn header_values_that_would_change_in_transit_are_refused() {
        assert!(header_value_ok("system:node:worker-1"));
        assert!(header_value_ok("Ünïcode"));
        for bad in ["a\r\nb", "a\0", " lead", "trail\t", "del\x7f"] {
            assert!(!header_value_ok(bad), "{bad:?}");
        }
    }
}
