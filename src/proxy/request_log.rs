//! What each request leaves behind: `cborgate_requests_total` and the duration histogram, its one log line
//! (docs/surface.md "Logs"), and what it held given back.

use super::exchange::Exchange;
use crate::metrics::metrics;
use crate::proxy::request_labels::request_series;
use pingora::proxy::Session;
use pingora::{Error, ErrorType};
use std::time::Duration;

/// The status label of a request cborgate never answered because the client
/// closed its connection first (nginx's "client closed request").
const CLIENT_CLOSED: u16 = 499;

/// Milliseconds, rounded to the microsecond, for log fields: `0.036`, not
/// `0.035667000000000004`.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// The request is over: count it, write its line, and give back what it held.
pub fn finish(session: &Session, e: Option<&Error>, ex: &mut Exchange) {
    let m = metrics();
    let r = ex.record(session.response_written().map(|h| h.status.as_u16()));
    let code = r.status.unwrap_or(CLIENT_CLOSED);
    let formats = [r.request_format, r.response_format];
    let mut code_buf = [0; 5];
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
    let req = session.req_header();
    let user_agent = req
        .headers
        .get("user-agent")
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    // What failed, where it says more than the status and reason do, in words.
    // A response the drain ended has none: its end was clean.
    let error = e
        .filter(|e| !r.ended_by_drain && !matches!(e.etype(), ErrorType::HTTPStatus(_)))
        .map(error_words);
    let ended = r.ended_by_drain.then_some("shutdown");
    tracing::info!(
        target: "cborgate::proxy",
        method = %req.method,
        path = %req.uri.path(),
        status = code,
        verb = r.verb,
        request_format = r.request_format,
        response_format = r.response_format,
        upstream_ms = ms(r.upstream_time),
        codec_ms = ms(r.codec_time),
        total_ms = ms(r.elapsed),
        client = session.client_addr().map(tracing::field::display),
        user_agent = user_agent.as_deref(),
        auth = r.auth,
        user = r.user,
        error,
        reason = r.reason,
        ended,
        "request"
    );
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
fn code_label(code: u16, buf: &mut [u8; 5]) -> &str {
    let mut at = buf.len();
    let mut n = code;
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
            assert_eq!(code_label(code, &mut [0; 5]), code.to_string());
        }
    }
}
