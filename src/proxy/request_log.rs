//! What each request leaves behind: `cborgate_requests_total` and the duration histogram, its one log line
//! (docs/surface.md "Logs"), and what it held given back.
//!
//! The line is a [`Line`] handed to the process's log ([`Lines`], `ops::request_lines`, given at
//! start-up),
//! which writes it in the log's format itself: no `tracing` event per request, whose
//! dispatch and field-by-field formatting cost more than the rest of the request's
//! bookkeeping (bench/README.md "Instructions per proxied request").

use super::exchange::Exchange;
use crate::metrics::metrics;
/// The client's IPv4 address as text, for the line's `client` field (`ops` writes the
/// line and imports only what `proxy` hands it).
pub use crate::negotiate::forwarded::ipv4_text;
use crate::proxy::request_labels::request_series;
use pingora::proxy::Session;
use pingora::{Error, ErrorType};
use std::fmt;
use std::time::Duration;

/// One request's log line: what it says, in the order it says it (docs/surface.md "Logs").
/// A field that is `None` is left out of the line.
pub struct Line<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub verb: &'a str,
    pub request_format: &'a str,
    pub response_format: &'a str,
    pub upstream: Duration,
    pub codec: Duration,
    pub total: Duration,
    pub client: Option<Client<'a>>,
    pub user_agent: Option<&'a str>,
    pub auth: &'a str,
    pub user: Option<&'a str>,
    pub error: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub ended: Option<&'a str>,
}

/// The client's address: an IP socket address, or what pingora says of another kind.
#[derive(Clone, Copy)]
pub enum Client<'a> {
    Inet(std::net::SocketAddr),
    Other(&'a dyn fmt::Display),
}

/// Where request lines go: the process's log, which writes each one in its own format
/// and never makes a request wait (`ops::request_lines::RequestLines`).
pub trait Lines: Send + Sync {
    fn write(&self, line: &Line<'_>);
}

/// The status label of a request cborgate never answered because the client
/// closed its connection first (nginx's "client closed request").
const CLIENT_CLOSED: u16 = 499;

/// The request is over: count it, write its line to `lines` (none: no line), and give
/// back what it held.
pub fn finish(session: &Session, e: Option<&Error>, ex: &mut Exchange, lines: Option<&dyn Lines>) {
    let m = metrics();
    let r = ex.record(session.response_written().map(|h| h.status.as_u16()));
    let code = r.status.unwrap_or(CLIENT_CLOSED);
    let formats = [r.request_format, r.response_format];
    let mut code_buf = [0; 20];
    let (count, time) = request_series(
        r.verb,
        code_label(code, &mut code_buf),
        formats,
        ex.labels(),
    );
    m.requests_total.with_label_values(&count).inc();
    m.request_duration_seconds
        .with_label_values(&time)
        .observe(r.elapsed.as_secs_f64());
    if let Some(lines) = lines {
        let req = session.req_header();
        let user_agent = req
            .headers
            .get(http::header::USER_AGENT)
            .map(|v| String::from_utf8_lossy(v.as_bytes()));
        // What failed, where it says more than the status and reason do, in words.
        // A response the drain ended has none: its end was clean.
        let error = e
            .filter(|e| !r.ended_by_drain && !matches!(e.etype(), ErrorType::HTTPStatus(_)))
            .map(error_words);
        let client = session.client_addr();
        lines.write(&Line {
            method: req.method.as_str(),
            path: req.uri.path(),
            status: code,
            verb: r.verb,
            request_format: r.request_format,
            response_format: r.response_format,
            upstream: r.upstream_time,
            codec: r.codec_time,
            total: r.elapsed,
            client: client.map(|a| match a.as_inet() {
                Some(inet) => Client::Inet(*inet),
                None => Client::Other(a),
            }),
            user_agent: user_agent.as_deref(),
            auth: r.auth,
            user: r.user,
            error: error.as_deref(),
            reason: r.reason,
            ended: r.ended_by_drain.then_some("shutdown"),
        });
    }
    ex.release();
}

/// pingora's error as the request line's `error` field: which side (`client`, `upstream`,
/// `proxy`) and what failed, in words (`upstream: connection closed`), never pingora's
/// error type name (`ConnectionClosed`).
fn error_words(e: &Error) -> String {
    use pingora::ErrorSource;
    use ErrorType::*;
    let side = match e.esource() {
        ErrorSource::Upstream => "upstream",
        ErrorSource::Downstream => "client",
        _ => "proxy",
    };
    let what = match e.etype() {
        ConnectTimedout => "connect timed out",
        ConnectRefused => "connection refused",
        ConnectNoRoute => "no route",
        TLSHandshakeFailure | TLSWantX509Lookup | InvalidCert | HandshakeError => {
            "TLS handshake failed"
        }
        TLSHandshakeTimedout => "TLS handshake timed out",
        ConnectError | BindError | AcceptError | SocketError | ConnectProxyFailure => {
            "connect failed"
        }
        InvalidHTTPHeader | H1Error => "malformed HTTP/1.1",
        H2Error | H2Downgrade | InvalidH2 => "HTTP/2 error",
        ReadError => "read failed",
        WriteError => "write failed",
        ReadTimedout => "read timed out",
        WriteTimedout => "write timed out",
        ConnectionClosed => "connection closed",
        _ => "internal error",
    };
    format!("{side}: {what}")
}

/// The `code` label, the status in decimal, written into `buf` rather than a `String`
/// per request.
fn code_label(code: u16, buf: &mut [u8; 20]) -> &str {
    decimal(code.into(), buf)
}

/// `n` in decimal, written into `buf`.
pub fn decimal(n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::{code_label, error_words};
    use pingora::{Error, ErrorType};

    #[test]
    fn the_error_field_is_words_never_pingora_s_names() {
        for (t, up, want) in [
            (
                ErrorType::ConnectionClosed,
                true,
                "upstream: connection closed",
            ),
            (
                ErrorType::ConnectRefused,
                true,
                "upstream: connection refused",
            ),
            (
                ErrorType::TLSHandshakeFailure,
                true,
                "upstream: TLS handshake failed",
            ),
            (ErrorType::ReadError, false, "client: read failed"),
            (ErrorType::H2Error, false, "client: HTTP/2 error"),
            (ErrorType::InternalError, true, "upstream: internal error"),
        ] {
            let mut e = Error::new(t.clone());
            if up {
                e.as_up();
            } else {
                e.as_down();
            }
            let got = error_words(&e);
            assert_eq!(got, want);
            assert!(!got.contains(t.as_str()), "{got}");
        }
        assert_eq!(
            error_words(&Error::new(ErrorType::WriteTimedout)),
            "proxy: write timed out"
        );
    }

    #[test]
    fn code_labels_are_the_status_in_decimal() {
        for code in [0, 7, 200, 404, 503, 999, 65535] {
            assert_eq!(code_label(code, &mut [0; 20]), code.to_string());
        }
    }
}
