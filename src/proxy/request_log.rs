//! What each request leaves behind: the gauges it held given back, the
//! counters its response head moves (upgrades, upstream 415s and 406s),
//! `cborgate_requests_total` and the duration histogram, and its one log line
//! (docs/surface.md "Logs").

use super::transcode::Exchange;
use crate::ops::metrics::{metrics, RequestLabels};
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

/// Count what the upstream's response head says.
pub fn count_response(session: &Session, ex: &mut Exchange, status: u16) {
    let m = metrics();
    match status {
        101 => {
            let proto = session
                .req_header()
                .headers
                .get("upgrade")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.to_ascii_lowercase());
            let label = match proto.as_deref() {
                Some(p) if p.starts_with("spdy") => "spdy",
                Some("websocket") => "websocket",
                _ => "other",
            };
            m.upgrades_active.with_label_values(&[label]).inc();
            ex.upgrade = Some(label);
        }
        code => count_refusal(code, "upstream", ex.labels),
    }
}

/// Count a 415 or 406 (any other code is not counted here) by its `origin`:
/// `proxy`, answered by cborgate from the request head, or `upstream`, and the
/// request's group, resource and client.
pub fn count_refusal(code: u16, origin: &str, labels: Option<RequestLabels>) {
    let m = metrics();
    let family = match code {
        415 => &m.unsupported_media_type_total,
        406 => &m.not_acceptable_total,
        _ => return,
    };
    let [group, resource, client] = RequestLabels::values(labels);
    family
        .with_label_values(&[origin, group, resource, client])
        .inc();
}

/// The request is over: give back what it held, count it, and write its line.
pub fn finish(session: &Session, e: Option<&Error>, ex: &mut Exchange) {
    let m = metrics();
    if std::mem::take(&mut ex.watch_counted) {
        m.watch_streams_active.dec();
    }
    if let Some(label) = ex.upgrade.take() {
        m.upgrades_active.with_label_values(&[label]).dec();
    }
    let code = match (ex.status, session.response_written()) {
        (0, Some(r)) => r.status.as_u16(),
        (0, None) => CLIENT_CLOSED,
        (c, _) => c,
    };
    let (verb, req_fmt, resp_fmt) = match ex.plan.as_ref() {
        Some(p) => (
            p.verb,
            p.request_format.as_str(),
            ex.format.unwrap_or_else(|| p.unanswered_format()),
        ),
        None => ("OTHER", "none", "none"),
    };
    let [group, resource, client] = RequestLabels::values(ex.labels);
    let mut buf = [0; 5];
    let code_text = code_label(code, &mut buf);
    m.requests_total
        .with_label_values(&[verb, code_text, req_fmt, resp_fmt, group, resource, client])
        .inc();
    let elapsed = ex.started.elapsed();
    m.request_duration_seconds
        .with_label_values(&[verb, resp_fmt])
        .observe(elapsed.as_secs_f64());
    let req = session.req_header();
    let user_agent = req
        .headers
        .get("user-agent")
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    // pingora's error type, where it says more than the status and reason do.
    // A response the drain ended has none: its end was clean.
    let error = e
        .filter(|e| !ex.ended_by_drain && !matches!(e.etype(), ErrorType::HTTPStatus(_)))
        .map(|e| e.etype().as_str());
    let ended = ex.ended_by_drain.then_some("shutdown");
    let (auth, user) = match &ex.identity {
        Some(id) => (id.method.as_str(), id.user.as_deref()),
        None => ("none", None),
    };
    tracing::info!(
        target: "cborgate::proxy",
        method = %req.method,
        path = %req.uri.path(),
        status = code,
        verb,
        request_format = req_fmt,
        response_format = resp_fmt,
        upstream_ms = ms(ex.upstream_time.unwrap_or_default()),
        codec_ms = ms(ex.codec_time()),
        total_ms = ms(elapsed),
        client = session.client_addr().map(tracing::field::display),
        user_agent = user_agent.as_deref(),
        auth,
        user,
        error,
        reason = ex.reason.as_deref(),
        ended,
        "request"
    );
    // The admission slot goes last: the drain exits once none is held, and the
    // request's line must be written by then.
    ex.admitted.take();
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
    use super::code_label;

    #[test]
    fn code_labels_are_the_status_in_decimal() {
        for code in [0, 7, 200, 404, 503, 999, 65535] {
            assert_eq!(code_label(code, &mut [0; 5]), code.to_string());
        }
    }
}
