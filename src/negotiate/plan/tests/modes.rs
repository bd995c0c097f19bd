//! The modes: `native`, `auto`, `upgrade`; and the client's gzip, the same in every mode.

use super::*;

#[test]
fn native_mode_changes_nothing_but_still_labels() {
    let native =
        |method, target, accept, ct| plan(&head(method, target, accept, ct), UpstreamMode::Native);
    let cases = [
        (
            "GET",
            CM_ONE,
            Some("application/cbor"),
            None,
            "GET",
            Format::Cbor,
        ),
        ("GET", CM, Some(TABLE), None, "LIST", Format::Json),
        (
            "POST",
            CM,
            Some("application/cbor"),
            Some("application/cbor"),
            "POST",
            Format::Cbor,
        ),
        // The router's 415, JSON even for a CBOR client (native-1.36 `patch-merge-cbor`).
        (
            "PATCH",
            CM_ONE,
            Some("application/cbor"),
            Some("application/merge-patch+cbor"),
            "PATCH",
            Format::Json,
        ),
        (
            "PATCH",
            CM_ONE,
            Some("application/cbor"),
            Some(APPLY_CBOR),
            "APPLY",
            Format::Cbor,
        ),
        (
            "GET",
            "/api/v1",
            Some("application/cbor"),
            None,
            "GET",
            Format::Cbor,
        ),
        (
            "GET",
            "/api",
            Some("application/cbor"),
            None,
            "GET",
            Format::Json,
        ),
    ];
    for (method, target, accept, ct, verb, format) in cases {
        let p = native(method, target, accept, ct);
        assert_eq!(
            (p.verb.label(), p.response_format),
            (verb, format),
            "{method} {target}"
        );
        assert_eq!(
            (p.body, p.response, p.error_response),
            (BodyAction::PassThrough, PASS, PASS)
        );
        assert_eq!(
            (p.upstream_accept.as_deref(), p.reply.as_ref()),
            (None, None)
        );
        assert_eq!(
            p.request_format,
            if ct.is_some() {
                Format::Cbor
            } else {
                Format::None
            }
        );
    }
}

/// `auto` is the legacy plan plus the CBOR-first body and `Accept` (table).
#[test]
fn auto_is_legacy_made_cbor_first() {
    use crate::negotiate::auto::REPLAYABLE_BODY;
    let small = Some(100);
    let large = Some(REPLAYABLE_BODY + 1);
    // (method, target, accept, content type, declared length, learned,
    //  CBOR-first body, CBOR-first Accept)
    let cases = [
        (
            "GET",
            CM_ONE,
            Some("application/cbor"),
            None,
            None,
            None,
            false,
            true,
        ),
        (
            "GET",
            CM,
            Some("application/cbor"),
            None,
            None,
            Some(Learned::NeedsJson),
            false,
            true,
        ),
        (
            "POST",
            CM,
            Some("application/cbor"),
            Some("application/cbor"),
            small,
            None,
            true,
            true,
        ),
        (
            "POST",
            CM,
            Some("application/json"),
            Some("application/cbor"),
            small,
            None,
            true,
            false,
        ),
        (
            "PUT",
            CM_ONE,
            None,
            Some("application/cbor"),
            small,
            Some(Learned::SpeaksCbor),
            true,
            false,
        ),
        // Known to need JSON, too large to replay, or unframed: JSON at once.
        (
            "POST",
            CM,
            None,
            Some("application/cbor"),
            small,
            Some(Learned::NeedsJson),
            false,
            false,
        ),
        (
            "POST",
            CM,
            None,
            Some("application/cbor"),
            large,
            None,
            false,
            false,
        ),
        (
            "POST",
            CM,
            None,
            Some("application/cbor"),
            None,
            None,
            false,
            false,
        ),
        (
            "PATCH",
            CM_ONE,
            None,
            Some("application/apply-patch+cbor"),
            small,
            None,
            true,
            false,
        ),
        // /api/v1 is never asked for CBOR (1.36 drops that request).
        (
            "GET",
            "/api/v1",
            Some("application/cbor"),
            None,
            None,
            None,
            false,
            false,
        ),
        (
            "GET",
            "/apis/apps/v1",
            Some("application/cbor"),
            None,
            None,
            None,
            false,
            false,
        ),
        // Refused or untouched requests are the legacy plan exactly.
        (
            "PATCH",
            CM_ONE,
            None,
            Some("application/json-patch+cbor"),
            small,
            None,
            false,
            false,
        ),
        (
            "POST",
            CM,
            Some(TABLE),
            Some("application/cbor"),
            small,
            None,
            false,
            false,
        ),
        (
            "GET",
            "/version",
            Some("application/cbor"),
            None,
            None,
            None,
            false,
            false,
        ),
    ];
    for (method, target, accept, ct, len, learned, cbor_body, cbor_accept) in cases {
        let h = RequestHead {
            declared_len: len,
            ..head(method, target, accept, ct)
        };
        let asked = std::cell::Cell::new(None);
        let auto = plan_with(&h, UpstreamMode::Auto, |key| {
            asked.set(Some((key.0, key.1.to_string(), key.2.to_string())));
            learned
        });
        let legacy = plan(&h, UpstreamMode::Legacy);
        let what = format!("{method} {target} {accept:?} {ct:?} {len:?} {learned:?}");
        assert_eq!(auto.cbor_first, cbor_body, "{what}");
        if let Some((verb, _, resource)) = asked.take() {
            assert_eq!(
                (verb, resource.as_str()),
                (legacy.verb.label(), "configmaps"),
                "{what}"
            );
        }
        let want_accept = match (&legacy.upstream_accept, cbor_accept) {
            (Some(a), true) => Some(format!(
                "{}, {a};q=0.9",
                a.replacen("application/json", "application/cbor", 1)
            )),
            (a, false) => a.as_deref().map(str::to_owned),
            (None, true) => panic!("{what}: no Accept to make CBOR-first"),
        };
        assert_eq!(
            auto.upstream_accept.as_deref(),
            want_accept.as_deref(),
            "{what}"
        );
        // Everything else is the legacy plan.
        // What was learned of a CBOR answer keeps the client's Accept-Encoding, so a
        // CBOR-enabled upstream's gzip passes through.
        let speaks = learned == Some(Learned::SpeaksCbor);
        assert_eq!(auto.upstream_speaks_cbor, speaks, "{what}");
        assert_eq!(
            auto.strips_accept_encoding(),
            legacy.strips_accept_encoding() && !speaks,
            "{what}"
        );
        let rest = Plan {
            cbor_first: legacy.cbor_first,
            upstream_accept: legacy.upstream_accept.clone(),
            mode: legacy.mode,
            upstream_speaks_cbor: legacy.upstream_speaks_cbor,
            ..auto.clone()
        };
        assert_eq!(rest, legacy, "{what}");
        // The first attempt sends a CBOR-first body untouched; the replay transcodes.
        let first = if cbor_body {
            BodyAction::PassThrough
        } else {
            auto.body
        };
        assert_eq!(auto.body_for_attempt(false), first, "{what}");
        assert_eq!(auto.body_for_attempt(true), auto.body, "{what}");
    }
    assert_eq!(UpstreamMode::default(), UpstreamMode::Auto);
}

#[test]
fn upgrade_turns_json_clients_into_cbor_upstream() {
    let to_json = ResponseAction::CborToJson { watch: false };
    // GET: ask for CBOR, answer JSON.
    let p = plan(
        &head("GET", CM_ONE, Some("application/json"), None),
        UpstreamMode::Upgrade,
    );
    assert_eq!(p.upstream_accept.as_deref(), Some("application/cbor"));
    assert_eq!((p.response, p.error_response), (to_json, to_json));
    assert_eq!(p.response.content_type(), Some("application/json"));
    // No Accept at all is a JSON client too; parameters are kept.
    let p = plan(&head("GET", CM, None, None), UpstreamMode::Upgrade);
    assert_eq!(p.upstream_accept.as_deref(), Some("application/cbor"));
    let pom = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let p = plan(&head("GET", CM, Some(pom), None), UpstreamMode::Upgrade);
    assert_eq!(
        p.upstream_accept.as_deref(),
        Some("application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    );
    // Bodies: JSON becomes CBOR, apply YAML (JSON text) becomes apply CBOR.
    let pods = "/api/v1/namespaces/verify/pods";
    for (method, target, ct, want) in [
        ("POST", pods, "application/json", "application/cbor"),
        (
            "PUT",
            &format!("{pods}/p")[..],
            "application/json",
            "application/cbor",
        ),
        ("DELETE", CM_ONE, "application/json", "application/cbor"),
        (
            "POST",
            "/apis/harness.example.com/v1/namespaces/a/widgets",
            "application/json",
            "application/cbor",
        ),
        (
            "PATCH",
            CM_ONE,
            "application/apply-patch+yaml",
            "application/apply-patch+cbor",
        ),
    ] {
        let p = plan(
            &head(method, target, Some("application/json"), Some(ct)),
            UpstreamMode::Upgrade,
        );
        assert_eq!(
            p.body,
            BodyAction::JsonToCbor {
                upstream_content_type: want
            },
            "{method} {ct}"
        );
    }
    // A kind with `[]byte` fields (or fields not known) keeps its JSON body: a CBOR
    // string there would be taken as the bytes, not as their base64.
    for (method, target) in [
        ("POST", CM),
        ("PUT", CM_ONE),
        ("POST", "/api/v1/namespaces/verify/secrets"),
        (
            "POST",
            "/apis/certificates.k8s.io/v9/certificatesigningrequests",
        ),
    ] {
        let p = plan(
            &head(
                method,
                target,
                Some("application/json"),
                Some("application/json"),
            ),
            UpstreamMode::Upgrade,
        );
        assert_eq!(
            (p.body, p.response),
            (BodyAction::PassThrough, to_json),
            "{target}"
        );
    }
    // Patch types with no CBOR form keep their body; the answer is still upgraded.
    let p = plan(
        &head(
            "PATCH",
            CM_ONE,
            Some("application/json"),
            Some("application/merge-patch+json"),
        ),
        UpstreamMode::Upgrade,
    );
    assert_eq!((p.body, p.response), (BodyAction::PassThrough, to_json));
    // Watches: cbor-seq back to a JSON stream.
    let p = plan(
        &head(
            "GET",
            &format!("{CM}?watch=1"),
            Some("application/json"),
            None,
        ),
        UpstreamMode::Upgrade,
    );
    assert_eq!(p.response, ResponseAction::CborToJson { watch: true });
    // Left alone: Tables, CBOR, YAML and protobuf clients, non-object paths.
    for (target, accept) in [
        (CM, TABLE),
        (CM_ONE, "application/cbor"),
        (CM_ONE, "application/yaml"),
        (CM_ONE, "application/vnd.kubernetes.protobuf"),
        ("/version", "application/json"),
        ("/apis", "application/json"),
    ] {
        let p = plan(
            &head("GET", target, Some(accept), None),
            UpstreamMode::Upgrade,
        );
        assert_eq!(
            (p.body, p.response, p.upstream_accept),
            (BodyAction::PassThrough, PASS, None),
            "{target} {accept}"
        );
    }
}

/// (mode, Accept-Encoding, server.compress_responses) → client_gzip; the same for
/// every mode, since the response decides whether anything is transcoded.
#[test]
fn client_gzip_needs_the_client_and_the_configuration() {
    use UpstreamMode::*;
    #[rustfmt::skip]
    let cases: &[(Option<&str>, bool, bool)] = &[
        (Some("gzip"), true, true),
        (Some("gzip"), false, false),
        (Some("gzip;q=0"), true, false),
        (Some("deflate"), true, false),
        (Some("br, *"), true, true),
        (None, true, false),
    ];
    for &(ae, on, want) in cases {
        for mode in [Legacy, Auto, Native, Upgrade] {
            let h = RequestHead {
                accept_encoding: ae,
                compress_responses: on,
                ..head("GET", CM, Some("application/cbor"), None)
            };
            assert_eq!(plan(&h, mode).client_gzip, want, "{mode:?} {ae:?} {on}");
        }
    }
}
