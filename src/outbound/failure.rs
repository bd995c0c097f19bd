//! What went wrong on the way to the upstream, in an operator's words, for `/readyz`
//! and the log: from pingora's error type and its whole error text, naming the
//! certificate's names, its notAfter and the files involved where the failure is the
//! upstream's certificate or its refusal of cborgate's; never pingora's error chain,
//! and never a Rust type name.

use pingora::ErrorType;

/// What went wrong on the way to the upstream, in an operator's words (for `/readyz`
/// and the log), from pingora's error type and its whole error text: never pingora's
/// error chain, and never a Rust type name (rustls' `CaUsedAsEndEntity`, …). The words
/// complete "the upstream at ADDR …".
pub fn upstream_failure_words(etype: &ErrorType, text: &str) -> String {
    upstream_failure_words_in(etype, text, &TlsFiles::default())
}

/// Whether a failed request says the upstream may be gone: no connection, or no TLS
/// session with it. Such a failure makes the readiness probe look at once
/// (`Readiness::doubt`) rather than at its next turn; an answer of any status, or a
/// connection that broke mid-answer, does not; a TLS alert refusing cborgate's client
/// certificate does, whatever pingora calls it (under TLS 1.3 it comes with the first read).
pub fn suggests_unreachable(etype: &ErrorType, text: &str) -> bool {
    use ErrorType::*;
    text.contains("received fatal alert")
        || matches!(
            etype,
            ConnectRefused
                | ConnectTimedout
                | ConnectNoRoute
                | ConnectError
                | SocketError
                | TLSHandshakeTimedout
                | TLSHandshakeFailure
                | InvalidCert
                | HandshakeError
        )
}

/// The files cborgate verifies the upstream with and presents to it, for the words of a
/// TLS failure (empty: not configured).
#[derive(Clone, Copy, Debug, Default)]
pub struct TlsFiles<'a> {
    /// Known to verify with the system's roots (no `upstream.ca_file`).
    pub system_roots: bool,
    pub ca_file: &'a str,
    pub client_cert: &'a str,
}

/// The names in rustls' account of a name mismatch (`certificate not valid for name
/// "127.0.0.1"; certificate is only valid for DnsName("kubernetes") or
/// IpAddress(10.96.0.1)`, which pingora passes on as text): the name asked for and
/// the names the certificate has, in its order.
fn san_mismatch(text: &str) -> Option<(String, Vec<String>)> {
    let rest = text.split_once("certificate not valid for name \"")?.1;
    let (expected, rest) = rest.split_once('"')?;
    let list = rest.split_once("is only valid for ").map_or("", |r| r.1);
    let list = list.split(", SNI: ").next().unwrap_or("");
    let mut names = Vec::new();
    let mut at = list;
    loop {
        let dns = at.find("DnsName(\"");
        let ip = at.find("IpAddress(");
        let (start, close, skip) = match (dns, ip) {
            (Some(d), Some(i)) if i < d => (i, ")", "IpAddress(".len()),
            (Some(d), _) => (d, "\")", "DnsName(\"".len()),
            (None, Some(i)) => (i, ")", "IpAddress(".len()),
            (None, None) => break,
        };
        let body = &at[start + skip..];
        let Some(end) = body.find(close) else { break };
        names.push(body[..end].to_string());
        at = &body[end + close.len()..];
    }
    Some((expected.to_string(), names))
}

/// rustls' `not valid after <Unix seconds>`, as a date.
fn not_after(text: &str) -> Option<String> {
    let secs: i64 = text
        .split_once("not valid after ")?
        .1
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some(
        x509_parser::time::ASN1Time::from_timestamp(secs)
            .map_or_else(|_| format!("{secs} (Unix seconds)"), |t| t.to_string()),
    )
}

/// [`upstream_failure_words`], naming the certificate's names, its notAfter and the
/// files involved where the failure is the upstream's certificate or its refusal of
/// cborgate's.
pub fn upstream_failure_words_in(etype: &ErrorType, text: &str, files: &TlsFiles) -> String {
    use ErrorType::*;
    let has = |s: &str| text.contains(s);
    let ca = if files.system_roots {
        "the system's trusted CAs (no --upstream-ca)".to_string()
    } else if files.ca_file.is_empty() {
        "--upstream-ca (upstream.ca_file)".to_string()
    } else {
        format!("--upstream-ca {} (upstream.ca_file)", files.ca_file)
    };
    let client = if files.client_cert.is_empty() {
        "--upstream-client-cert".to_string()
    } else {
        format!("--upstream-client-cert {}", files.client_cert)
    };
    // A refused client certificate: under TLS 1.3 the server's alert arrives after the
    // client's side of the handshake, with the first read, whatever pingora calls it.
    if has("received fatal alert: BadCertificate")
        || has("received fatal alert: UnknownCA")
        || has("received fatal alert: DecryptError")
        || has("received fatal alert: CertificateUnknown")
        || (has("received fatal alert: CertificateRequired") && !files.client_cert.is_empty())
    {
        return format!(
            "refused cborgate's client certificate ({client}): is it signed by a CA the \
             upstream's --client-ca-file trusts, and unexpired?"
        );
    }
    match etype {
        ConnectRefused => "refused the connection".into(),
        ConnectTimedout => "did not accept a connection within upstream.connect_timeout_ms".into(),
        ConnectNoRoute => "cannot be reached (no route to it)".into(),
        ConnectError | SocketError => "cannot be connected to".into(),
        TLSHandshakeTimedout => "did not finish the TLS handshake in time".into(),
        TLSHandshakeFailure | InvalidCert | HandshakeError => {
            let why = if has("CaUsedAsEndEntity") {
                "its certificate is a CA certificate (CA:TRUE), which cborgate does not \
                 accept as a server's own certificate, unlike Go: give the server a \
                 certificate signed by that CA (the CA in --upstream-ca), or one without CA:TRUE"
                    .to_string()
            } else if has("UnknownIssuer") || has("BadSignature") {
                // BadSignature: a CA of the same name, not the one that signed it.
                format!("its certificate is not signed by a CA in {ca}")
            } else if let Some((expected, names)) = san_mismatch(text) {
                let names = if names.is_empty() {
                    "it names no host name or IP address".to_string()
                } else {
                    format!("it names {}", names.join(", "))
                };
                format!(
                    "its certificate is not valid for {expected}, the host in --upstream \
                     (upstream.url): {names}"
                )
            } else if has("NotValidForName") {
                "its certificate is not valid for the host name in --upstream (upstream.url)"
                    .to_string()
            } else if let Some(date) = not_after(text) {
                format!("its certificate expired on {date} (its notAfter)")
            } else if has("Expired") || has("certificate expired") {
                "its certificate has expired".to_string()
            } else if has("NotValidYet") || has("certificate not valid yet") {
                "its certificate is not valid yet".to_string()
            } else if has("CertificateRequired") {
                "it asks for a client certificate: give --upstream-client-cert and --upstream-client-key"
                    .to_string()
            } else if has("InvalidContentType") || has("corrupt message") {
                "it does not speak TLS: is --upstream https:// to a plain-HTTP port?".to_string()
            } else {
                "the TLS handshake failed".to_string()
            };
            format!("failed the TLS handshake: {why}")
        }
        ReadTimedout => "did not answer in time".into(),
        _ if has("InvalidHTTPHeader") || has("invalid HTTP") => {
            "did not answer HTTP: is --upstream http:// to a TLS port?".into()
        }
        _ => "closed the connection without answering".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_that_make_the_probe_look_at_once() {
        use ErrorType::*;
        let table: &[(ErrorType, &str, bool)] = &[
            (ConnectRefused, "Connection refused (os error 111)", true),
            (ConnectTimedout, "", true),
            (ConnectNoRoute, "", true),
            (ConnectError, "", true),
            (
                TLSHandshakeFailure,
                "invalid peer certificate: UnknownIssuer",
                true,
            ),
            (TLSHandshakeTimedout, "", true),
            (InvalidCert, "", true),
            (ReadError, "received fatal alert: BadCertificate", true),
            (ReadError, "Connection reset by peer", false),
            (ConnectionClosed, "Connection closed", false),
            (ReadTimedout, "", false),
            (HTTPStatus(502), "", false),
            (InvalidHTTPHeader, "", false),
        ];
        for (t, text, want) in table {
            assert_eq!(suggests_unreachable(t, text), *want, "{t:?} {text:?}");
        }
    }

    #[test]
    fn upstream_failures_in_an_operators_words() {
        use ErrorType::*;
        // (pingora's type, its text as recorded from cborgate 0.1.0 against the failure,
        // the words): none carries pingora's chain or a Rust type name.
        let table: &[(ErrorType, &str, &str)] = &[
            (ConnectRefused, " ConnectRefused context: Fail to connect to addr: 127.0.0.1:18699, scheme: HTTP, sni: 127.0.0.1 cause: Connection refused (os error 111)", "refused the connection"),
            (ConnectTimedout, "", "did not accept a connection within upstream.connect_timeout_ms"),
            (TLSHandshakeFailure, "tls connect error cause: invalid peer certificate: Other(OtherError(CaUsedAsEndEntity)), SNI: 127.0.0.1", "failed the TLS handshake: its certificate is a CA certificate (CA:TRUE)"),
            (TLSHandshakeFailure, "tls connect error cause: invalid peer certificate: UnknownIssuer", "failed the TLS handshake: its certificate is not signed by a CA in --upstream-ca"),
            (TLSHandshakeFailure, "invalid peer certificate: BadSignature", "failed the TLS handshake: its certificate is not signed by a CA in --upstream-ca"),
            (TLSHandshakeFailure, "invalid peer certificate: NotValidForName", "failed the TLS handshake: its certificate is not valid for the host name"),
            (TLSHandshakeFailure, "tls connect error cause: received corrupt message of type InvalidContentType, SNI: 127.0.0.1", "failed the TLS handshake: it does not speak TLS"),
            (TLSHandshakeFailure, "received fatal alert: CertificateRequired", "failed the TLS handshake: it asks for a client certificate"),
            (TLSHandshakeFailure, " TLSHandshakeFailure context: TLS connect() failed:  TLSHandshakeFailure context: tls connect error cause: invalid peer certificate: certificate not valid for name \"127.0.0.1\"; certificate is only valid for DnsName(\"kubernetes\"), DnsName(\"kubernetes.default\"), IpAddress(10.96.0.1) or IpAddress(192.0.2.10), SNI: 127.0.0.1",
             "failed the TLS handshake: its certificate is not valid for 127.0.0.1, the host in --upstream (upstream.url): it names kubernetes, kubernetes.default, 10.96.0.1, 192.0.2.10"),
            (TLSHandshakeFailure, "invalid peer certificate: certificate not valid for name \"x\"; certificate is not valid for any names (according to its subjectAltName extension)",
             "failed the TLS handshake: its certificate is not valid for x, the host in --upstream (upstream.url): it names no host name or IP address"),
            (TLSHandshakeFailure, "invalid peer certificate: certificate expired: verification time 1800000000 (UNIX), but certificate is not valid after 1700000000 (100000000 seconds ago), SNI: a",
             "failed the TLS handshake: its certificate expired on Nov 14 22:13:20 2023"),
            (ReadError, "received fatal alert: BadCertificate", "refused cborgate's client certificate (--upstream-client-cert)"),
            (ConnectionClosed, "Connection closed", "closed the connection without answering"),
        ];
        for (t, text, want) in table {
            let got = upstream_failure_words(t, text);
            assert!(got.starts_with(want), "{t:?} {text:?}: {got}");
            for internal in ["context:", "cause:", "sni", "Other(", "Error", "SNI"] {
                assert!(!got.contains(internal), "{got}");
            }
        }
    }
}
