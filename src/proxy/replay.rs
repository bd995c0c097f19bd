//! The 415 replay, the heart of `auto` mode: a CBOR body went upstream as CBOR
//! first ([`crate::negotiate::Plan::cbor_first`]); the upstream refused it with
//! 415 before acting on it ([`crate::negotiate::OnResponse::replay`]); cborgate
//! learns that this (verb, group, resource) needs JSON and sends the same
//! request again with the body as JSON, transcoded when the body was read
//! (it was checked whole before the first attempt). The client never sees the 415. pingora's retry loop carries it out:
//! the refusal is an error marked for retry, once, and only with the whole body
//! still in hand.
//!
//! Every other retry is decided here too ([`decide_retry`]): pingora's rule for
//! idempotent requests, and a request the upstream did not act on (refused unprocessed,
//! or whose HTTP/2 stream it ended before it had the body), which is sent again whatever
//! its method (docs/wire.md §5a).

use super::exchange::{Exchange, RetryFacts};
use super::transcode::CodecSettings;
use crate::limits::budget::BodyBudget;
use crate::metrics::{metrics, Origin};
use crate::proxy::request_labels::{count_refusal, RequestLabels};
use pingora::proxy::Session;
use pingora::{Error, ErrorType};
use std::sync::Arc;

/// Start the replay after the upstream's 415 (what it teaches is learned with every
/// other decision's): count it, get the JSON body ready, and return the error that
/// makes pingora send the request again.
pub fn start(ex: &mut Exchange, s: &CodecSettings, budget: &Arc<BodyBudget>) -> Box<Error> {
    let labels = ex.labels();
    count_refusal(415, Origin::Upstream, labels);
    let [group, resource, client] = RequestLabels::values(labels);
    metrics()
        .fallbacks_total
        .with_label_values(&["unsupported_media_type", group, resource, client])
        .inc();
    match ex.start_replay(s, budget) {
        Err(e) => e,
        // The CBOR that went first does not make a JSON body the upstream takes: the
        // client gets that answer (not retried: see `decide_retry`).
        Ok(Some(reply)) => Error::explain(
            ErrorType::HTTPStatus(reply.status.code),
            "the body cannot be replayed as JSON",
        ),
        Ok(None) => Error::explain(
            ErrorType::HTTPStatus(415),
            "upstream refused CBOR; replaying as JSON",
        ),
    }
}

/// Whether pingora retries after `e`, as [`crate::negotiate::pool::retry`] decides: the
/// replay once, with the whole body still kept; pingora's own rule (idempotent requests
/// whose body was kept, on a fresh connection when the failed one was reused); a request
/// the upstream refused unprocessed, or whose stream it ended before it had the body
/// (then any method, once, over HTTP/1.1). A retry other than the replay is counted in
/// `cborgate_upstream_retries_total`.
pub fn decide_retry(e: &mut Error, ex: &mut Exchange, session: &Session, client_reused: bool) {
    e.retry.decide_reuse(client_reused);
    let facts = RetryFacts {
        idempotent: session.req_header().method.is_idempotent(),
        body_kept: !session.as_ref().retry_buffer_truncated(),
        answered: session.response_written().is_some(),
        refused: super::local_reply::refused(e),
        ended_before_body: super::local_reply::ended_before_body(e),
        transport: e.retry(),
        replay_signal: matches!(e.etype(), ErrorType::HTTPStatus(415)),
    };
    let again = ex.retry(facts);
    e.set_retry(again.is_some());
    if let Some(reason) = again.and_then(|r| r.label()) {
        tracing::debug!(reason, error = %e, "sending the request upstream again");
        metrics()
            .upstream_retries_total
            .with_label_values(&[reason])
            .inc();
    }
}
