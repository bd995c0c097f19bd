//! The decision table's tests, by theme; here the helpers they share.

use super::*;
use crate::negotiate::route::Verb;

mod accept;
mod garbage;
mod modes;
mod recorded;
mod routes;
mod rows;

const CM: &str = "/api/v1/namespaces/verify/configmaps";
const CM_ONE: &str = "/api/v1/namespaces/verify/configmaps/cm-basic";
const TABLE: &str = "application/cbor;as=Table;g=meta.k8s.io;v=v1";
const CBOR_SEQ: ResponseAction = ResponseAction::JsonToCbor { watch: true };
const TO_CBOR: ResponseAction = ResponseAction::JsonToCbor { watch: false };
const PASS: ResponseAction = ResponseAction::PassThrough;
const TO_JSON: BodyAction = BodyAction::CborToJson {
    upstream_content_type: JSON,
    schema: Schema::Typed(byte_fields::CONFIGMAP),
    kind: Some(byte_fields::TypedKind {
        kind: "ConfigMap",
        version: "v1",
    }),
};

fn head<'a>(
    method: &'a str,
    target: &'a str,
    accept: Option<&'a str>,
    content_type: Option<&'a str>,
) -> RequestHead<'a> {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    RequestHead {
        method,
        path,
        query,
        accept,
        content_type,
        upgrade: false,
        declared_len: None,
        accept_encoding: None,
        compress_responses: false,
    }
}

fn legacy(method: &str, target: &str, accept: Option<&str>, content_type: Option<&str>) -> Plan {
    plan(
        &head(method, target, accept, content_type),
        UpstreamMode::Legacy,
    )
}

fn get(target: &str, accept: &str) -> Plan {
    legacy("GET", target, Some(accept), None)
}

/// CBOR chosen: Accept rewritten to `expected_accept`, response transcoded.
fn assert_cbor(p: &Plan, expected_accept: &str, watch: bool) {
    assert_eq!(p.reply, None);
    assert_eq!(p.response, ResponseAction::JsonToCbor { watch });
    assert_eq!(p.response_format, Format::Cbor);
    assert_eq!(p.upstream_accept.as_deref(), Some(expected_accept));
    assert_eq!(p.error_response, TO_CBOR);
}

fn assert_passthrough(p: &Plan, format: Format) {
    assert_eq!(p.reply, None);
    assert_eq!(p.response, PASS);
    assert_eq!(p.upstream_accept, None);
    assert_eq!(p.response_format, format);
}

fn assert_406(p: &Plan) {
    let reply = p.reply.as_ref().expect("a local 406");
    assert_eq!((reply.code, reply.reason), (406, "NotAcceptable"));
    assert_eq!(reply.message, NOT_ACCEPTABLE_MESSAGE);
    assert_eq!(reply.format, Format::Json);
    assert!(reply.pretty && !reply.empty_details);
    assert_eq!(
        (p.body, p.response, p.upstream_accept.as_deref()),
        (BodyAction::PassThrough, PASS, None)
    );
    assert_eq!(p.response_format, Format::Json);
}

/// The router's 406: `Accept` matches none of the route's `Produces`.
fn assert_router_406(p: &Plan, produces: &[&str], pretty: bool) {
    let reply = p.reply.as_ref().expect("a local 406");
    assert_eq!((reply.code, reply.reason), (406, "NotAcceptable"));
    assert_eq!(reply.message, router_not_acceptable_message(produces));
    assert_eq!(
        (reply.format, reply.pretty, reply.empty_details),
        (Format::Json, pretty, true)
    );
    assert_eq!(
        (p.body, p.response, p.upstream_accept.as_deref()),
        (BodyAction::PassThrough, PASS, None)
    );
}

fn assert_415(p: &Plan, message: &str, format: Format) {
    let reply = p.reply.as_ref().expect("a local 415");
    assert_eq!(
        (reply.code, reply.reason, reply.message.as_str()),
        (415, "UnsupportedMediaType", message)
    );
    assert_eq!(reply.format, format);
    assert_eq!(reply.empty_details, message == PATCH_UNSUPPORTED_MESSAGE);
    assert_eq!(
        (p.body, p.response, p.upstream_accept.as_deref()),
        (BodyAction::PassThrough, PASS, None)
    );
}
