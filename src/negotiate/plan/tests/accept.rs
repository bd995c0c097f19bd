//! `Accept` headers, and which refusal comes first.

use super::*;

#[test]
fn client_go_dynamic_client_header() {
    assert_cbor(
        &get(CM, "application/json;q=0.9,application/cbor;q=1"),
        JSON,
        false,
    );
}

#[test]
fn client_go_prefer_cbor_header() {
    assert_cbor(&get(CM_ONE, "application/cbor, */*"), JSON, false);
    assert_cbor(
        &get(CM_ONE, "application/cbor, application/json"),
        JSON,
        false,
    );
}

#[test]
fn q_zero_clauses_are_kept_like_the_apiserver() {
    assert_cbor(&get(CM_ONE, "application/cbor;q=0"), JSON, false);
    assert_passthrough(
        &get(CM_ONE, "application/json;q=0, application/cbor;q=0"),
        Format::Json,
    );
    assert_cbor(
        &get(CM_ONE, "application/json;q=0, application/cbor"),
        JSON,
        false,
    );
}

#[test]
fn wildcards_choose_json() {
    assert_passthrough(&get(CM_ONE, "*/*"), Format::Json); // b-get-star
                                                           // go-restful's router takes only `*/*` and literal types: `application/*` and `*`
                                                           // get its 406, compact JSON as the error negotiates JSON (native-1.36
                                                           // `accept-app-star`).
    assert_router_406(&get(CM_ONE, "application/*"), &PRODUCES_OBJECT, false);
    assert_router_406(&get(CM, "application/*"), &PRODUCES_COLLECTION, false);
    assert_router_406(&get(CM_ONE, "*"), &PRODUCES_OBJECT, false);
    // goautoneg sorts a concrete type before */* whatever the q values.
    assert_cbor(&get(CM_ONE, "*/*, application/cbor;q=0.5"), JSON, false);
}

#[test]
fn missing_or_empty_accept_chooses_json() {
    assert_passthrough(&legacy("GET", CM_ONE, None, None), Format::Json); // b-get-noaccept
    assert_passthrough(&get(CM_ONE, ""), Format::Json);
    let p = legacy("POST", CM, None, Some("application/cbor")); // b-post-cbor-noaccept
    assert_eq!(p.body, TO_JSON);
    assert_passthrough(&p, Format::Json);
    assert_eq!(p.error_response, PASS);
}

#[test]
fn table_fallback_clause_chooses_json_table() {
    // b-table-cbor-json-fb
    let p = get(
        CM,
        &format!("{TABLE}, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9"),
    );
    assert_passthrough(&p, Format::Json);
    assert_eq!(p.error_response, PASS);
}

#[test]
fn error_format_follows_untransformed_clauses() {
    // JSON Table on success, but a real server writes an error in CBOR here.
    let p = get(
        CM,
        "application/json;as=Table;g=meta.k8s.io;v=v1, application/cbor",
    );
    assert_passthrough(&p, Format::Json);
    assert_eq!((p.error_format, p.error_response), (Format::Cbor, TO_CBOR));
    assert_eq!(p.response_for_status(200), PASS);
    assert_eq!(p.response_for_status(404), TO_CBOR);
    // b-missing-cbor: a 404 for a CBOR client is CBOR.
    let p = get(&format!("{CM}/does-not-exist"), "application/cbor");
    assert_eq!(p.response_for_status(404), TO_CBOR);
    assert_eq!(p.response_for_status(101), PASS);
    assert_eq!(
        p.response_for_status(304),
        TO_CBOR,
        "no body, but the plan stays the same"
    );
}

#[test]
fn pretty_requests_shape_local_json_errors() {
    let reply = |accept: &str, target: &str| {
        legacy(
            "PATCH",
            target,
            Some(accept),
            Some("application/merge-patch+cbor"),
        )
        .reply
        .unwrap()
    };
    assert!(reply("application/json;pretty=1", CM_ONE).pretty);
    assert!(reply("application/json", &format!("{CM_ONE}?pretty=true")).pretty);
    assert!(!reply("application/json", &format!("{CM_ONE}?pretty=false")).pretty);
    // The router's serializer has no CBOR: nothing negotiable, so indented.
    assert!(reply("application/cbor;pretty=1", CM_ONE).pretty);
    // YAML or protobuf errors are written as JSON by cborgate.
    assert_eq!(reply("application/yaml", CM_ONE).format, Format::Json);
}

// ---- Which refusal comes first ------------------------------------------------------

#[test]
fn post_and_put_check_accept_before_the_body_type() {
    // a-post-cbor-acc-cbor: Accept is matched by the router first.
    for method in ["POST", "PUT"] {
        let target = if method == "POST" { CM } else { CM_ONE };
        assert_router_406(
            &legacy(
                method,
                target,
                Some("application/cbor-seq"),
                Some("application/merge-patch+cbor"),
            ),
            &PRODUCES_OBJECT,
            true,
        );
        let p = legacy(
            method,
            target,
            Some("application/cbor"),
            Some("application/merge-patch+cbor"),
        );
        assert_415(&p, BODY_UNSUPPORTED_MESSAGE, Format::Cbor);
        let p = legacy(method, target, None, Some("application/apply-patch+cbor"));
        assert_415(&p, BODY_UNSUPPORTED_MESSAGE, Format::Json);
    }
    // A valid CBOR body with an unservable Accept: 406, nothing sent upstream.
    assert_406(&legacy("POST", CM, Some(TABLE), Some("application/cbor")));
}

#[test]
fn other_body_types_are_left_to_the_upstream() {
    let p = legacy(
        "POST",
        CM,
        Some("application/cbor"),
        Some("application/cbor-seq"),
    );
    assert_eq!((p.body, p.reply.as_ref()), (BodyAction::PassThrough, None));
    let p = legacy(
        "DELETE",
        CM_ONE,
        Some("application/cbor"),
        Some("application/merge-patch+cbor"),
    );
    assert_eq!((p.body, p.reply.as_ref()), (BodyAction::PassThrough, None));
    let p = legacy(
        "GET",
        CM_ONE,
        Some("application/json"),
        Some("application/cbor"),
    );
    assert_eq!(
        (p.body, p.request_format),
        (BodyAction::PassThrough, Format::Cbor)
    );
}
