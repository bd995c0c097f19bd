//! One test per row of docs/wire.md §1.

use super::*;

#[test]
fn row_request_body_cbor_post_put_delete_sent_upstream_as_json() {
    for (method, target, verb) in [
        ("POST", CM, "POST"),
        ("PUT", CM_ONE, "PUT"),
        ("DELETE", CM_ONE, "DELETE"),
        ("DELETE", CM, "DELETECOLLECTION"),
    ] {
        for ct in [
            "application/cbor",
            "application/cbor; charset=utf-8",
            "Application/CBOR",
        ] {
            let p = legacy(method, target, Some("application/json"), Some(ct));
            assert_eq!(p.body, TO_JSON, "{method} {ct}");
            assert_eq!(p.request_format, Format::Cbor);
            assert_eq!(p.verb.label(), verb);
            assert_passthrough(&p, Format::Json);
        }
    }
}

#[test]
fn row_apply_patch_cbor_sent_upstream_as_apply_patch_yaml() {
    let p = legacy(
        "PATCH",
        &format!("{CM}/cm-cbor-post?fieldManager=verify"),
        Some("application/cbor"),
        Some(APPLY_CBOR),
    );
    assert_eq!(
        p.body,
        BodyAction::CborToJson {
            upstream_content_type: APPLY_YAML,
            schema: Schema::Unstructured,
            kind: None,
        }
    );
    assert_eq!((p.verb.label(), p.request_format), ("APPLY", Format::Cbor));
    assert_cbor(&p, JSON, false);
    // a-apply-cbor: Accept JSON, body apply CBOR.
    let p = legacy(
        "PATCH",
        CM_ONE,
        Some("application/json"),
        Some("application/apply-patch+cbor; x=y"),
    );
    assert_eq!(
        p.body,
        BodyAction::CborToJson {
            upstream_content_type: APPLY_YAML,
            schema: Schema::Unstructured,
            kind: None,
        }
    );
    assert_passthrough(&p, Format::Json);
}

#[test]
fn row_other_cbor_patch_types_refused_with_415() {
    for ct in [
        "application/strategic-merge-patch+cbor",
        "application/merge-patch+cbor",
        "application/json-patch+cbor",
        "application/whatever+cbor",
        // The router compares case-sensitively: only the exact apply type is consumed.
        "Application/Apply-Patch+CBOR",
    ] {
        // The router's 415 is JSON, indented, even for a CBOR client (native-1.36
        // `patch-merge-cbor`, `patch-smp-cbor`): its serializer has no CBOR.
        let p = legacy("PATCH", CM_ONE, Some("application/cbor"), Some(ct));
        assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
        assert!(p.reply.as_ref().unwrap().pretty);
        assert_eq!(
            (p.verb.label(), p.request_format, p.response_format),
            ("PATCH", Format::Cbor, Format::Json)
        );
        let p = legacy("PATCH", CM_ONE, Some("application/json"), Some(ct));
        assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
        assert!(!p.reply.unwrap().pretty);
        let p = legacy("PATCH", CM_ONE, None, Some(ct));
        assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
    }
}

#[test]
fn row_patch_with_application_cbor_refused_with_415() {
    let p = legacy(
        "PATCH",
        CM_ONE,
        Some("application/cbor"),
        Some("application/cbor"),
    );
    // native-1.36 `patch-plain-cbor`: JSON, indented.
    assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
    assert!(p.reply.as_ref().unwrap().pretty);
    // The router checks the body type before Accept on PATCH: 415 wins over 406.
    let p = legacy("PATCH", CM_ONE, Some(TABLE), Some("application/cbor"));
    assert_415(&p, PATCH_UNSUPPORTED_MESSAGE, Format::Json);
    // Nothing negotiable for the error either: raw, indented JSON.
    assert!(p.reply.unwrap().pretty);
}

#[test]
fn row_json_yaml_protobuf_and_json_patch_bodies_pass_through() {
    for (method, ct, format, verb) in [
        (
            "PATCH",
            "application/json-patch+json",
            Format::Json,
            "PATCH",
        ),
        (
            "PATCH",
            "application/merge-patch+json",
            Format::Json,
            "PATCH",
        ),
        (
            "PATCH",
            "application/strategic-merge-patch+json",
            Format::Json,
            "PATCH",
        ),
        (
            "PATCH",
            "application/apply-patch+yaml",
            Format::Yaml,
            "APPLY",
        ),
        (
            "POST",
            "application/vnd.kubernetes.protobuf",
            Format::Protobuf,
            "POST",
        ),
        ("POST", "application/json", Format::Json, "POST"),
        ("PUT", "application/yaml", Format::Yaml, "PUT"),
        ("POST", "text/plain", Format::Other, "POST"),
    ] {
        let target = if method == "POST" { CM } else { CM_ONE };
        let p = legacy(method, target, Some("application/cbor"), Some(ct));
        assert_eq!(p.body, BodyAction::PassThrough, "{ct}");
        assert_eq!((p.request_format, p.verb.label()), (format, verb), "{ct}");
        assert_cbor(&p, JSON, false);
    }
}

#[test]
fn row_accept_choosing_cbor_rewritten_and_transcoded() {
    let p = get(CM_ONE, "application/cbor");
    assert_cbor(&p, JSON, false);
    assert_eq!(p.response.content_type(), Some("application/cbor"));
    assert_eq!(
        (p.verb.label(), p.request_format, p.body),
        ("GET", Format::None, BodyAction::PassThrough)
    );
    assert!(!p.long_running);
}

#[test]
fn row_watch_choosing_cbor_streams_cbor_seq() {
    for target in [
        format!("{CM}?watch=true&timeoutSeconds=1"),
        format!("{CM}?watch=1"),
        "/api/v1/watch/namespaces/verify/configmaps".to_owned(),
        "/apis/apps/v1/watch/deployments?timeoutSeconds=5".to_owned(),
    ] {
        let p = get(&target, "application/cbor");
        assert_cbor(&p, JSON, true);
        assert_eq!(p.response.content_type(), Some("application/cbor-seq"));
        assert_eq!(p.verb.label(), "WATCH");
        assert!(p.long_running);
        // An error ends a watch before it starts: one Status, plain CBOR.
        assert_eq!(p.response_for_status(410), TO_CBOR);
        assert_eq!(p.response_for_status(200), CBOR_SEQ);
    }
}

#[test]
fn row_table_in_cbor_not_acceptable() {
    assert_406(&get(CM, TABLE)); // b-table-cbor
    assert_406(&get(CM_ONE, TABLE)); // b-table-cbor-get
    assert_eq!(get(CM, TABLE).verb, "LIST");
}

#[test]
fn row_partial_object_metadata_in_cbor_allowed() {
    for (target, kind) in [
        (CM_ONE, "PartialObjectMetadata"),
        (CM, "PartialObjectMetadataList"),
    ] {
        let accept = format!("application/cbor;as={kind};g=meta.k8s.io;v=v1");
        let p = get(target, &accept);
        let upstream = format!("application/json;as={kind};g=meta.k8s.io;v=v1");
        assert_eq!(p.upstream_accept.as_deref(), Some(upstream.as_str()));
        assert_eq!(p.response, TO_CBOR);
        assert_eq!(
            p.response.content_type(),
            Some("application/cbor"),
            "no parameters"
        );
        // A server writes errors without transformation: nothing negotiable, raw JSON.
        assert_eq!((p.error_format, p.error_response), (Format::Json, PASS));
    }
}

#[test]
fn row_cbor_seq_accept_not_acceptable() {
    // A collection's route produces `application/cbor-seq`: the handler refuses it
    // (b-watch-cborseq).
    assert_406(&get(
        &format!("{CM}?watch=true&timeoutSeconds=1"),
        "application/cbor-seq",
    ));
    // An object's route does not: the router's 406, indented (nothing negotiable for
    // the error), with `details: {}` (native-1.36 `accept-cbor-seq`).
    assert_router_406(&get(CM_ONE, "application/cbor-seq"), &PRODUCES_OBJECT, true);
}

#[test]
fn row_json_yaml_protobuf_choices_pass_through() {
    for (accept, format) in [
        ("application/json", Format::Json),
        ("application/yaml", Format::Yaml),
        ("application/vnd.kubernetes.protobuf", Format::Protobuf),
        (
            "application/vnd.kubernetes.protobuf, application/cbor",
            Format::Protobuf,
        ),
    ] {
        let p = get(CM_ONE, accept);
        assert_passthrough(&p, format);
        assert_eq!(p.error_response, PASS);
    }
}
