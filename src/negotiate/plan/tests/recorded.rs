//! The recorded exchanges (`tests/data/corpus/exchanges`), as cborgate must answer them.

use super::*;

#[derive(Debug)]
enum Want {
    /// Transcoded to CBOR (watch or not), with this body action.
    Cbor(bool, BodyAction),
    /// Passed through in this format, with this body action.
    Pass(Format, BodyAction),
    /// Refused locally with this code.
    Reply(u16),
    /// Discovery: passed through as JSON, asked for by name. Where the recording shows
    /// CBOR (or the 1.36 server's reset of `/api/v1`), cborgate departs on purpose:
    /// client-go 1.36 cannot decode CBOR discovery (docs/wire.md §1).
    DiscoveryJson,
}

#[test]
fn recorded_exchanges() {
    use Want::*;
    let none = BodyAction::PassThrough;
    let apply = BodyAction::CborToJson {
        upstream_content_type: APPLY_YAML,
        schema: Schema::Unstructured,
        kind: None,
    };
    let pom = "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let fallback = "application/cbor;as=Table;g=meta.k8s.io;v=v1, application/json;as=Table;g=meta.k8s.io;v=v1;q=0.9";
    let aggregated = "application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let watch = "/api/v1/namespaces/verify/configmaps?watch=true&timeoutSeconds=1";
    let missing = "/api/v1/namespaces/verify/configmaps/does-not-exist";
    let posted = "/api/v1/namespaces/verify/configmaps/cm-cbor-post";
    let cases = [
        (
            "b-post-cbor",
            "POST",
            CM,
            Some("application/cbor"),
            Some("application/cbor"),
            Cbor(false, TO_JSON),
        ),
        (
            "b-post-cbor-noaccept",
            "POST",
            CM,
            None,
            Some("application/cbor"),
            Pass(Format::Json, TO_JSON),
        ),
        (
            "b-get-cbor",
            "GET",
            CM_ONE,
            Some("application/cbor"),
            None,
            Cbor(false, none),
        ),
        (
            "b-get-json",
            "GET",
            CM_ONE,
            Some("application/json"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-get-cbor-json-q09",
            "GET",
            CM_ONE,
            Some("application/cbor, application/json;q=0.9"),
            None,
            Cbor(false, none),
        ),
        (
            "b-get-json-cbor-q09",
            "GET",
            CM_ONE,
            Some("application/json;q=0.9, application/cbor"),
            None,
            Cbor(false, none),
        ),
        (
            "b-get-noaccept",
            "GET",
            CM_ONE,
            None,
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-get-star",
            "GET",
            CM_ONE,
            Some("*/*"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-list-cbor",
            "GET",
            CM,
            Some("application/cbor"),
            None,
            Cbor(false, none),
        ),
        ("b-table-cbor", "GET", CM, Some(TABLE), None, Reply(406)),
        (
            "b-table-cbor-get",
            "GET",
            CM_ONE,
            Some(TABLE),
            None,
            Reply(406),
        ),
        (
            "b-pom-cbor",
            "GET",
            CM_ONE,
            Some(pom),
            None,
            Cbor(false, none),
        ),
        (
            "b-missing-cbor",
            "GET",
            missing,
            Some("application/cbor"),
            None,
            Cbor(false, none),
        ),
        (
            "b-missing-json",
            "GET",
            missing,
            Some("application/json"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-api-cbor",
            "GET",
            "/api",
            Some("application/cbor"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-apis-cbor",
            "GET",
            "/apis",
            Some("application/cbor"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-apiv1-cbor",
            "GET",
            "/api/v1",
            Some("application/cbor"),
            None,
            Reply(406),
        ),
        (
            "b-aggdisc-cbor",
            "GET",
            "/apis",
            Some(aggregated),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-aggdisc-json",
            "GET",
            "/apis",
            Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-version-cbor",
            "GET",
            "/version",
            Some("application/cbor"),
            None,
            Pass(Format::Other, none),
        ),
        (
            "b-openapiv3-cbor",
            "GET",
            "/openapi/v3",
            Some("application/cbor"),
            None,
            Pass(Format::Other, none),
        ),
        (
            "b-apply-cbor",
            "PATCH",
            "/api/v1/namespaces/verify/configmaps/cm-cbor-post?fieldManager=verify",
            Some("application/cbor"),
            Some(APPLY_CBOR),
            Cbor(false, apply),
        ),
        (
            "b-mergepatch-cbor",
            "PATCH",
            posted,
            Some("application/cbor"),
            Some("application/merge-patch+json"),
            Cbor(false, none),
        ),
        (
            "b-put-cbor",
            "PUT",
            posted,
            Some("application/cbor"),
            Some("application/cbor"),
            Cbor(false, TO_JSON),
        ),
        (
            "b-badcbor",
            "POST",
            CM,
            Some("application/cbor"),
            Some("application/cbor"),
            Cbor(false, TO_JSON),
        ),
        (
            "b-delete-cbor",
            "DELETE",
            posted,
            Some("application/cbor"),
            None,
            Cbor(false, none),
        ),
        (
            "b-apis-apps-v1-cbor",
            "GET",
            "/apis/apps/v1",
            Some("application/cbor"),
            None,
            Reply(406),
        ),
        (
            "b-apis-apps-cbor",
            "GET",
            "/apis/apps",
            Some("application/cbor"),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-apiv1-cbor-json-q09",
            "GET",
            "/api/v1",
            Some("application/cbor, application/json;q=0.9"),
            None,
            DiscoveryJson,
        ),
        (
            "b-table-cbor-json-fb",
            "GET",
            CM,
            Some(fallback),
            None,
            Pass(Format::Json, none),
        ),
        (
            "b-yaml",
            "GET",
            CM_ONE,
            Some("application/yaml"),
            None,
            Pass(Format::Yaml, none),
        ),
        (
            "b-protobuf",
            "GET",
            CM_ONE,
            Some("application/vnd.kubernetes.protobuf"),
            None,
            Pass(Format::Protobuf, none),
        ),
        (
            "b-watch-cbor",
            "GET",
            watch,
            Some("application/cbor"),
            None,
            Cbor(true, none),
        ),
        (
            "b-watch-cborseq",
            "GET",
            watch,
            Some("application/cbor-seq"),
            None,
            Reply(406),
        ),
    ];
    for (name, method, target, accept, ct, want) in cases {
        let p = legacy(method, target, accept, ct);
        match want {
            Cbor(watch, body) => {
                assert_eq!(p.reply, None, "{name}");
                assert_eq!(
                    (p.response, p.body),
                    (ResponseAction::JsonToCbor { watch }, body),
                    "{name}"
                );
                assert!(
                    p.upstream_accept
                        .as_deref()
                        .is_some_and(|a| a.starts_with(JSON)),
                    "{name}"
                );
            }
            Pass(format, body) => {
                assert_eq!(
                    (p.reply.as_ref(), p.upstream_accept.as_deref()),
                    (None, None),
                    "{name}"
                );
                assert_eq!(
                    (p.response, p.response_format, p.body),
                    (PASS, format, body),
                    "{name}"
                );
            }
            Reply(code) => assert_eq!(p.reply.map(|r| r.code), Some(code), "{name}"),
            DiscoveryJson => {
                assert_eq!((p.reply.as_ref(), p.response), (None, PASS), "{name}");
                assert_eq!(p.upstream_accept.as_deref(), Some(JSON), "{name}");
            }
        }
    }
    // b-watch-json
    assert_passthrough(&get(watch, "application/json"), Format::Json);
}
