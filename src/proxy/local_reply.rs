//! Local replies: writing the answers cborgate gives itself (each a
//! [`LocalReply`] that `negotiate` decided) as Kubernetes `Status` bodies, and
//! the failure mapping: which of pingora's error types is which
//! [`Failure`] on the way to the upstream.

use super::status::{Status, StatusFormat};
use crate::negotiate::{Failure, Format, LocalReply, Reply};
use crate::outbound::failure::upstream_failure_words;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::{Error, ErrorType, Result};
use std::time::Duration;

/// How long a lingering close waits for the rest of a request body.
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// How much more than `codec.max_request_body_bytes` a lingering close reads and
/// discards: a body just over the limit, as clients send it, is read to its end.
pub const LINGER_SLACK_BYTES: u64 = 1 << 20;

/// The `Status` and its format for a reply.
pub fn status_of(r: &LocalReply) -> (Status, StatusFormat) {
    let format = if r.format == Format::Cbor {
        StatusFormat::Cbor
    } else if r.pretty {
        StatusFormat::JsonPretty
    } else {
        StatusFormat::Json
    };
    let mut status = Status::new(r.code, r.reason, r.message.clone());
    status.empty_details = r.empty_details;
    (status, format)
}

/// A reply as a whole HTTP/1.1 response that closes the connection, for the stream
/// below pingora's session (`inbound::connections`: too many header lines).
pub fn http1_bytes(r: &LocalReply) -> Vec<u8> {
    let (status, format) = status_of(r);
    let (body, content_type) = status.render(format);
    let reason = http::StatusCode::from_u16(status.code)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("");
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {content_type}\r\nCache-Control: no-cache, private\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        status.code,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The `response_format` label of a reply.
pub fn format_label(r: &LocalReply) -> &'static str {
    if r.format == Format::Cbor {
        Format::Cbor.as_str()
    } else {
        Format::Json.as_str()
    }
}

/// Write a complete reply to the client (the caller has set the connection's reuse). A
/// reply while the request body is still unread says `Connection: close`: see [`linger`].
pub async fn write(session: &mut Session, reply: &Reply) -> Result<()> {
    let Reply {
        status: reply,
        retry_after,
    } = reply;
    if !session.is_body_done() {
        session.set_keepalive(None);
    }
    let (status, format) = status_of(reply);
    let (body, content_type) = status.render(format);
    let mut resp = ResponseHeader::build(status.code, Some(4))?;
    resp.insert_header("Content-Type", content_type)?;
    resp.insert_header("Cache-Control", "no-cache, private")?;
    resp.insert_header("Content-Length", body.len().to_string())?;
    if *retry_after {
        resp.insert_header("Retry-After", "1")?;
    }
    session.write_response_header(Box::new(resp), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await?;
    Ok(())
}

/// The lingering close after a reply written while the request body is still arriving
/// (HTTP/1.x; a no-op when the body is done): read and discard the rest of the body, at
/// most `max_bytes` of it and for at most [`LINGER_TIME`], before pingora closes the
/// connection. Closing with unread bytes in the socket makes the kernel send a reset, so
/// a client that writes its whole body before it reads (Python's `http.client`,
/// client-go over HTTP/1.1) would get a broken pipe instead of the reply; Go's net/http
/// and nginx's `lingering_close` read on for the same reason. pingora itself closes at
/// once: its drain runs only for a connection kept alive, and a response written before
/// the body is done turns keep-alive off. Each piece read is dropped at once, so the
/// memory held is one read of pingora's body buffer. Returns the bytes discarded.
pub async fn linger(session: &mut Session, max_bytes: u64) -> u64 {
    let mut discarded = 0u64;
    if session.is_http2() || session.is_body_done() {
        return discarded;
    }
    session.set_keepalive(None);
    let deadline = tokio::time::Instant::now() + LINGER_TIME;
    while discarded < max_bytes {
        match tokio::time::timeout_at(deadline, session.read_request_body()).await {
            Ok(Ok(Some(piece))) => discarded += piece.len() as u64,
            // The body's end, the client's close or error, or the time is up.
            _ => break,
        }
    }
    discarded
}

/// Which failure pingora's error is, if it is one cborgate answers: `answered` says
/// whether the upstream's response head had already arrived (then nothing can be).
pub fn failure_of(e: &Error, answered: bool) -> Option<Failure> {
    use ErrorType::*;
    match e.etype() {
        ConnectTimedout | ConnectRefused | ConnectNoRoute | ConnectError | TLSHandshakeFailure
        | TLSHandshakeTimedout | ConnectProxyFailure | BindError => {
            Some(Failure::Unavailable(unavailable_words(e.etype())))
        }
        HTTPStatus(415) => Some(Failure::RefusedNotReplayable),
        // Only the upstream's silence is a 504; a client that stalls in its own body
        // (`server.request_read_timeout_seconds`) gets its connection closed.
        ReadTimedout if !answered && e.esource() == &pingora::ErrorSource::Upstream => {
            Some(Failure::HeaderTimeout)
        }
        _ if e.esource() == &pingora::ErrorSource::Upstream && !answered => {
            Some(Failure::ClosedBeforeAnswer)
        }
        _ => None,
    }
}

/// Why the upstream is unavailable, in the words the client's 503 `Status` gives (they
/// complete "the upstream apiserver …"): the plain cause, never pingora's error name
/// (`ConnectRefused`, `TLSHandshakeFailure`); the operator's fuller account is the log
/// line's and `/readyz`'s ([`upstream_failure_words`]).
pub fn unavailable_words(etype: &ErrorType) -> &'static str {
    use ErrorType::*;
    match etype {
        ConnectRefused => "refused the connection",
        ConnectTimedout => "did not accept a connection in time",
        ConnectNoRoute => "cannot be reached (no route to it)",
        TLSHandshakeFailure => "failed the TLS handshake",
        TLSHandshakeTimedout => "did not finish the TLS handshake in time",
        _ => "cannot be connected to",
    }
}

/// Whether the upstream refused the request without processing it (docs/wire.md §5a):
/// its HTTP/2 stream met a graceful GOAWAY (`NO_ERROR`) from the upstream, which happens
/// only to a stream above the GOAWAY's last-stream-id or to one opened on a connection
/// already going away, or the upstream reset it with `REFUSED_STREAM`. Any other error
/// (a broken connection, a reset for another reason) may have reached a handler.
pub fn refused(e: &Error) -> bool {
    let Some(h2e) = e.root_cause().downcast_ref::<h2::Error>() else {
        return false;
    };
    h2e.is_remote()
        && ((h2e.is_go_away() && h2e.reason() == Some(h2::Reason::NO_ERROR))
            || (h2e.is_reset() && h2e.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

/// Whether pingora's error is its write of the request body failing because the upstream
/// had ended the HTTP/2 stream before it had the whole body (docs/wire.md §5a). pingora
/// writes a body it holds before the attempt (one cborgate read whole, or its retry
/// buffer) before it reads the answer, and a failure of that write ends the attempt
/// (pingora-proxy 0.9.1 `proxy_h2.rs`, `bidirection_down_to_up`): an answer the upstream
/// gave first is lost with it. kube-apiserver 1.36.2 answers a CBOR body with 415 as soon
/// as it has the head, then resets the stream with `NO_ERROR` (Go's HTTP/2 server, a
/// complete response while the request body is open; tests/proxy/early_answer.rs). The
/// write then finds the stream closed: no capacity to reserve (pingora-core 0.9.1
/// `protocols/http/v2/mod.rs`: h2's `poll_capacity` has none for a stream that can no
/// longer send), or, between the two, no stream to send on. Only an upstream error of the
/// write itself counts, wherever it is in the chain (`error_while_proxy` adds the peer
/// around it); an error reading the answer does not.
pub fn ended_before_body(e: &Error) -> bool {
    std::iter::successors(Some(e), |e| {
        e.cause
            .as_ref()
            .and_then(|c| c.downcast_ref::<Box<Error>>())
            .map(|b| &**b)
    })
    .any(|e| {
        let context = e.context.as_ref().map(|c| c.as_str());
        e.esource() == &pingora::ErrorSource::Upstream
            && matches!(
                (e.etype(), context),
                (
                    ErrorType::H2Error,
                    Some("cannot reserve capacity" | "while waiting for capacity")
                ) | (ErrorType::WriteError, Some("while writing h2 request body"))
            )
    })
}

/// Whether pingora's error is the upstream ending a response whose head had already
/// arrived (`answered`): a reset, a closed connection or a read error in the body.
/// One line per upstream failure, in an operator's words (no pingora error name); pingora's
/// own account at debug level.
pub fn log_upstream_failure(e: &Error) {
    tracing::warn!(
        target: "cborgate::proxy",
        reason = %upstream_failure_words(e.etype(), &e.to_string()),
        "upstream request failed"
    );
    tracing::debug!(target: "cborgate::proxy", error = %e, "upstream request failed");
}

pub fn cut_short(e: &Error, answered: bool) -> bool {
    answered && e.esource() == &pingora::ErrorSource::Upstream
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingora_errors_map_to_failures() {
        let up = |t: ErrorType| {
            let mut e = Error::new(t);
            e.as_up();
            e
        };
        // The client's 503 says the cause in words, never pingora's error name.
        for (t, words) in [
            (
                ErrorType::ConnectTimedout,
                "did not accept a connection in time",
            ),
            (ErrorType::ConnectRefused, "refused the connection"),
            (
                ErrorType::ConnectNoRoute,
                "cannot be reached (no route to it)",
            ),
            (ErrorType::ConnectError, "cannot be connected to"),
            (ErrorType::BindError, "cannot be connected to"),
            (ErrorType::ConnectProxyFailure, "cannot be connected to"),
            (ErrorType::TLSHandshakeFailure, "failed the TLS handshake"),
            (
                ErrorType::TLSHandshakeTimedout,
                "did not finish the TLS handshake in time",
            ),
        ] {
            assert_eq!(
                failure_of(&up(t.clone()), false),
                Some(Failure::Unavailable(words))
            );
            assert!(!words.contains(t.as_str()), "{words}");
        }
        assert_eq!(
            failure_of(&up(ErrorType::ReadTimedout), false),
            Some(Failure::HeaderTimeout)
        );
        assert_eq!(failure_of(&up(ErrorType::ReadTimedout), true), None);
        let mut stalled = Error::new(ErrorType::ReadTimedout);
        stalled.as_down();
        assert_eq!(
            failure_of(&stalled, false),
            None,
            "the client's own stall is no 504"
        );
        assert_eq!(
            failure_of(&up(ErrorType::ConnectionClosed), false),
            Some(Failure::ClosedBeforeAnswer)
        );
        assert_eq!(failure_of(&up(ErrorType::ConnectionClosed), true), None);
        assert_eq!(
            failure_of(&Error::new(ErrorType::HTTPStatus(415)), false),
            Some(Failure::RefusedNotReplayable)
        );
        // The client's doing: nothing to answer.
        let mut down = Error::new(ErrorType::ConnectionClosed);
        down.as_down();
        assert_eq!(failure_of(&down, false), None);
        // Once the head has arrived, only the upstream's own errors cut a response short.
        assert!(cut_short(&up(ErrorType::ReadError), true));
        assert!(cut_short(&up(ErrorType::H2Error), true));
        assert!(!cut_short(&up(ErrorType::ReadError), false));
        assert!(!cut_short(&down, true));
        // A body that cannot be transcoded is cborgate's finding, with its own reason.
        assert!(!cut_short(&Error::new(ErrorType::HTTPStatus(502)), true));
    }

    #[test]
    fn only_a_refusal_by_the_upstream_counts_as_refused() {
        // A remote GOAWAY or RST_STREAM can only come from a real h2 connection (the end
        // to end test in tests/proxy/goaway.rs has them); what is built here is not one.
        let cause = |c: h2::Error| Error::because(ErrorType::H2Error, "while reading h2 header", c);
        // Made by this side, not the upstream.
        assert!(!refused(&cause(h2::Error::from(
            h2::Reason::REFUSED_STREAM
        ))));
        assert!(!refused(&cause(h2::Error::from(h2::Reason::NO_ERROR))));
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(!refused(&Error::because(
            ErrorType::ReadError,
            "while reading",
            io
        )));
        assert!(!refused(&Error::new(ErrorType::ConnectionClosed)));
        assert!(!refused(&Error::new(ErrorType::H2Error)));
    }

    #[test]
    fn only_a_body_write_on_an_ended_stream_is_ended_before_body() {
        // As pingora makes them: the write's error, marked upstream by `send_body_to2`,
        // then wrapped with the peer by `error_while_proxy`.
        let write = |t: ErrorType, context: &'static str| {
            Error::explain(t, context)
                .into_up()
                .more_context("Peer: addr: 127.0.0.1:6443")
        };
        let io = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let table: &[(&str, Box<Error>, bool)] = &[
            (
                "no capacity to reserve on a stream that can no longer send",
                write(ErrorType::H2Error, "cannot reserve capacity"),
                true,
            ),
            (
                "waiting for capacity failed",
                write(ErrorType::H2Error, "while waiting for capacity"),
                true,
            ),
            (
                "no stream to send on",
                Error::because(
                    ErrorType::WriteError,
                    "while writing h2 request body",
                    h2::Error::from(h2::Reason::NO_ERROR),
                )
                .into_up(),
                true,
            ),
            (
                "the write itself, unwrapped",
                Error::explain(ErrorType::H2Error, "cannot reserve capacity").into_up(),
                true,
            ),
            (
                "a reset before any answer, read with the head",
                Error::because(
                    ErrorType::H2Error,
                    "while reading h2 header",
                    h2::Error::from(h2::Reason::INTERNAL_ERROR),
                )
                .into_up()
                .more_context("Peer: addr: 127.0.0.1:6443"),
                false,
            ),
            (
                "an HTTP/1.1 body write",
                Error::because(ErrorType::WriteError, "while writing body", io()).into_up(),
                false,
            ),
            (
                "the same words from the client's side",
                {
                    let mut e = Error::explain(ErrorType::H2Error, "cannot reserve capacity");
                    e.as_down();
                    e
                },
                false,
            ),
            (
                "an h2 write that timed out",
                write(
                    ErrorType::WriteTimedout,
                    "while writing h2 request body, timeout: 1s",
                ),
                false,
            ),
            (
                "a closed connection",
                Error::new_up(ErrorType::ConnectionClosed),
                false,
            ),
            (
                "the replay's signal",
                Error::new(ErrorType::HTTPStatus(415)),
                false,
            ),
        ];
        for (what, e, want) in table {
            assert_eq!(ended_before_body(e), *want, "{what}: {e}");
        }
    }

    #[test]
    fn replies_become_statuses_in_their_format() {
        let reply = |format, pretty| LocalReply {
            code: 406,
            reason: "NotAcceptable",
            message: "m".into(),
            format,
            pretty,
            empty_details: true,
        };
        let (s, f) = status_of(&reply(Format::Cbor, false));
        assert_eq!(
            (s.code, s.reason, s.empty_details, f),
            (406, "NotAcceptable", true, StatusFormat::Cbor)
        );
        assert_eq!(
            status_of(&reply(Format::Json, true)).1,
            StatusFormat::JsonPretty
        );
        assert_eq!(status_of(&reply(Format::Json, false)).1, StatusFormat::Json);
        assert_eq!(format_label(&reply(Format::Cbor, false)), "cbor");
        assert_eq!(format_label(&reply(Format::Yaml, false)), "json");
    }
}
