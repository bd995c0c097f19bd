//! Local replies: writing the answers cborgate gives itself (each a
//! [`LocalReply`] that `negotiate` decided) as Kubernetes `Status` bodies, and
//! the failure mapping: which of pingora's error types is which
//! [`Failure`] on the way to the upstream.

use crate::negotiate::{Failure, Format, LocalReply};
use crate::status::{Status, StatusFormat};
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::{Error, ErrorType, Result};

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

/// The `response_format` label of a reply.
pub fn format_label(r: &LocalReply) -> &'static str {
    if r.format == Format::Cbor {
        Format::Cbor.as_str()
    } else {
        Format::Json.as_str()
    }
}

/// Write a complete reply to the client (the caller has set the connection's reuse).
pub async fn write(session: &mut Session, reply: &LocalReply, retry_after: bool) -> Result<()> {
    let (status, format) = status_of(reply);
    let (body, content_type) = status.render(format);
    let mut resp = ResponseHeader::build(status.code, Some(4))?;
    resp.insert_header("Content-Type", content_type)?;
    resp.insert_header("Cache-Control", "no-cache, private")?;
    resp.insert_header("Content-Length", body.len().to_string())?;
    if retry_after {
        resp.insert_header("Retry-After", "1")?;
    }
    session.write_response_header(Box::new(resp), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await?;
    Ok(())
}

/// Which failure pingora's error is, if it is one cborgate answers: `answered` says
/// whether the upstream's response head had already arrived (then nothing can be).
pub fn failure_of(e: &Error, answered: bool) -> Option<Failure> {
    use ErrorType::*;
    match e.etype() {
        ConnectTimedout | ConnectRefused | ConnectNoRoute | ConnectError | TLSHandshakeFailure
        | TLSHandshakeTimedout | ConnectProxyFailure | BindError => {
            Some(Failure::Unavailable(e.etype().as_str()))
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
        for t in [
            ErrorType::ConnectTimedout,
            ErrorType::ConnectRefused,
            ErrorType::TLSHandshakeFailure,
        ] {
            let kind = t.as_str();
            assert_eq!(failure_of(&up(t), false), Some(Failure::Unavailable(kind)));
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
