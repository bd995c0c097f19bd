//! Routes: discovery, other paths, connect subresources and upgrades, methods, verbs, the
//! capability key.

use super::*;

/// Discovery is never transcoded (client-go 1.36 cannot decode CBOR discovery): JSON
/// (or YAML, protobuf) whenever the client accepts one, asked for by name when the
/// `Accept` also lists CBOR; a CBOR-only `Accept` gets the 406 a CRD group's
/// discovery gets on a CBOR-enabled server (native-1.36 `disc-apis-cr-v1`).
#[test]
fn group_version_discovery_is_never_transcoded() {
    let disc_406 = |p: &Plan| {
        let r = p.reply.as_ref().expect("a local 406");
        assert_eq!(
            (
                r.code,
                r.message.as_str(),
                r.format,
                r.pretty,
                r.empty_details
            ),
            (
                406,
                DISCOVERY_NOT_ACCEPTABLE_MESSAGE,
                Format::Json,
                true,
                false
            )
        );
        assert_eq!((p.response, p.upstream_accept.as_deref()), (PASS, None));
    };
    for (path, group) in [
        ("/api/v1", ""),
        ("/apis/apps/v1", "apps"),
        ("/apis/harness.example.com/v1", "harness.example.com"),
    ] {
        let p = get(path, "application/cbor");
        disc_406(&p);
        assert_eq!((p.verb.label(), p.route.group()), ("GET", Some(group)));
        disc_406(&get(path, "application/cbor-seq"));
        disc_406(&get(
            path,
            "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ));
        // client-go's generated clients and dynamic client: JSON, asked for by name.
        for accept in [
            "application/cbor, */*",
            "application/json;q=0.9,application/cbor;q=1",
            "application/cbor, application/json;q=0.9",
        ] {
            let p = get(path, accept);
            assert_eq!(p.reply, None, "{accept}");
            assert_eq!(p.response, PASS, "{accept}");
            assert_eq!(p.response_format, Format::Json, "{accept}");
            assert_eq!(p.upstream_accept.as_deref(), Some(JSON), "{accept}");
            // auto mode asks no CBOR-enabled upstream for CBOR here either.
            let auto = plan(&head("GET", path, Some(accept), None), UpstreamMode::Auto);
            assert_eq!(auto.upstream_accept.as_deref(), Some(JSON), "{accept}");
        }
        let p = get(path, "application/cbor, application/yaml");
        assert_eq!(p.upstream_accept.as_deref(), Some("application/yaml"));
        // No CBOR in `Accept`: byte for byte.
        assert_passthrough(&get(path, "application/json"), Format::Json);
        assert_passthrough(&get(path, "*/*"), Format::Json);
        // Native mode changes nothing and answers nothing.
        let p = plan(
            &head("GET", path, Some("application/cbor"), None),
            UpstreamMode::Native,
        );
        assert_eq!(
            (p.reply.as_ref(), p.upstream_accept.as_deref()),
            (None, None)
        );
        // Methods without a route: no 406 of our own, the upstream's 405 is transcoded.
        let p = legacy(
            "POST",
            path,
            Some("application/cbor-seq"),
            Some("application/cbor"),
        );
        assert_eq!(
            (p.reply.as_ref(), p.body, p.error_response),
            (None, BodyAction::PassThrough, PASS)
        );
        let p = legacy("POST", path, Some("application/cbor"), None);
        assert_eq!(
            (p.response, p.error_response, p.verb.label()),
            (PASS, TO_CBOR, "POST")
        );
    }
}

#[test]
fn discovery_without_cbor_and_other_paths_pass_through() {
    for (path, format) in [
        ("/api", Format::Json),  // b-api-cbor
        ("/apis", Format::Json), // b-apis-cbor
        ("/apis/apps", Format::Json),
        ("/version", Format::Other), // b-version-cbor
        ("/openapi/v3", Format::Other),
        ("/openapi/v2", Format::Other),
        ("/healthz", Format::Other),
        ("/livez", Format::Other),
        ("/readyz", Format::Other),
        ("/metrics", Format::Other),
        ("/nonsense/path", Format::Other),
    ] {
        for accept in ["application/cbor", "application/cbor-seq", TABLE] {
            let p = get(path, accept);
            assert_passthrough(&p, format);
            assert_eq!((p.error_response, p.verb.label()), (PASS, "GET"), "{path}");
            assert_eq!(p.capability_key(), None);
        }
    }
    // Aggregated discovery: b-aggdisc-cbor, b-aggdisc-json.
    let p = get(
        "/apis",
        "application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    );
    assert_passthrough(&p, Format::Json);
    let p = get(
        "/api",
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    );
    assert_passthrough(&p, Format::Protobuf);
}

#[test]
fn connect_subresources_and_upgrades_are_never_transcoded() {
    for sub in ["exec", "attach", "portforward", "proxy", "log"] {
        let target = format!("/api/v1/namespaces/ns/pods/p/{sub}?follow=true");
        let p = legacy("GET", &target, Some("application/cbor"), None);
        assert_eq!((p.reply.as_ref(), p.response), (None, PASS));
        assert_eq!(p.response_format, Format::Other);
        // A legacy upstream's router would refuse CBOR that the handler ignores
        // (native-1.36 `pod-log` is served): it is asked for JSON.
        assert_eq!(p.upstream_accept.as_deref(), Some("application/json"));
        assert_passthrough(
            &legacy("GET", &target, Some("text/plain, */*"), None),
            Format::Other,
        );
        let native = head("GET", &target, Some("application/cbor"), None);
        assert_passthrough(&plan(&native, UpstreamMode::Native), Format::Other);
        assert_eq!((p.verb.label(), p.long_running), ("CONNECT", true), "{sub}");
        assert!(p.needs_http1(), "{sub}");
        // Their errors are ordinary Status objects.
        assert_eq!(p.error_response, TO_CBOR);
        let p = legacy(
            "POST",
            &target,
            Some("application/cbor"),
            Some("application/cbor"),
        );
        assert_eq!(p.body, BodyAction::PassThrough);
    }
    let upgrade = RequestHead {
        upgrade: true,
        ..head(
            "POST",
            "/api/v1/namespaces/ns/pods/p/exec?command=sh",
            Some("application/cbor"),
            Some("application/cbor"),
        )
    };
    for mode in [
        UpstreamMode::Legacy,
        UpstreamMode::Native,
        UpstreamMode::Auto,
    ] {
        let p = plan(&upgrade, mode);
        assert_passthrough(&p, Format::Other);
        assert_eq!(
            (p.verb.label(), p.body, p.error_response, p.long_running),
            ("CONNECT", BodyAction::PassThrough, PASS, true)
        );
    }
    let p = plan(
        &RequestHead {
            upgrade: true,
            ..head("GET", CM_ONE, Some(TABLE), None)
        },
        UpstreamMode::Legacy,
    );
    assert!(p.needs_http1());
    assert_eq!((p.verb.label(), p.reply), ("CONNECT", None));
    // Everything else may go over HTTP/2: objects, lists, watches, logs are not upgrades.
    for target in [CM_ONE, CM, &format!("{CM}?watch=1")] {
        assert!(!legacy("GET", target, Some("application/cbor"), None).needs_http1());
    }
}

#[test]
fn methods_without_routes_are_passed_on() {
    for method in ["OPTIONS", "TRACE", "BREW", ""] {
        let p = legacy(
            method,
            CM_ONE,
            Some("application/cbor-seq"),
            Some("application/cbor"),
        );
        assert_eq!(
            (p.reply.as_ref(), p.body, p.upstream_accept.as_deref()),
            (None, BodyAction::PassThrough, None)
        );
    }
    let p = legacy("OPTIONS", CM_ONE, Some("application/cbor"), None);
    assert_eq!(
        (
            p.verb.label(),
            p.response,
            p.error_response,
            p.response_format
        ),
        ("OPTIONS", PASS, TO_CBOR, Format::Cbor)
    );
}

#[test]
fn verbs_for_every_case() {
    let v = |method, target: &str, ct| legacy(method, target, Some("application/cbor"), ct).verb;
    assert_eq!(v("GET", CM_ONE, None), "GET");
    assert_eq!(v("GET", CM, None), "LIST");
    assert_eq!(v("GET", &format!("{CM}?watch=true"), None), "WATCH");
    assert_eq!(v("GET", &format!("{CM}?watch=1"), None), "WATCH");
    assert_eq!(v("GET", &format!("{CM}?watch=false"), None), "LIST");
    assert_eq!(v("GET", "/api/v1/watch/pods", None), "WATCH");
    assert_eq!(v("POST", CM, Some("application/cbor")), "POST");
    assert_eq!(v("PUT", CM_ONE, Some("application/cbor")), "PUT");
    assert_eq!(
        v("PATCH", CM_ONE, Some("application/merge-patch+json")),
        "PATCH"
    );
    assert_eq!(
        v("PATCH", CM_ONE, Some("application/apply-patch+yaml")),
        "APPLY"
    );
    assert_eq!(
        v("PATCH", CM_ONE, Some("application/apply-patch+cbor")),
        "APPLY"
    );
    assert_eq!(
        v("PATCH", CM_ONE, Some("application/merge-patch+cbor")),
        "PATCH"
    );
    assert_eq!(v("DELETE", CM_ONE, None), "DELETE");
    assert_eq!(v("DELETE", CM, None), "DELETECOLLECTION");
    assert_eq!(v("HEAD", CM_ONE, None), "HEAD");
    assert_eq!(v("OPTIONS", CM_ONE, None), "OPTIONS");
    assert_eq!(
        v("GET", "/api/v1/namespaces/ns/pods/p/log", None),
        "CONNECT"
    );
    assert_eq!(v("PROPFIND", CM_ONE, None), "OTHER");
    assert_eq!(v("GET", "/version", None), "GET");
    assert_eq!(v("get", CM, None), "LIST");
}

#[test]
fn capability_key_is_verb_group_resource() {
    let p = legacy(
        "PATCH",
        "/apis/apps/v1/namespaces/ns/deployments/web/scale",
        Some("application/cbor"),
        Some(APPLY_CBOR),
    );
    assert_eq!(p.capability_key(), Some(("APPLY", "apps", "deployments")));
    assert_eq!(
        get(CM, "application/cbor").capability_key(),
        Some(("LIST", "", "configmaps"))
    );
    assert_eq!(
        get("/apis/apps/v1", "application/cbor").capability_key(),
        None
    );
}
