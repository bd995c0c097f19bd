//! Negotiation on arbitrary request heads: `Accept` and `Content-Type` parsing,
//! route classification, verbs, query parameters and `plan` in every upstream
//! mode.
//!
//! Input: `[flags, method \n path \n query \n accept \n content-type]` (missing
//! fields are empty; invalid UTF-8 is replaced, as the proxy reads header
//! values with `String::from_utf8_lossy`).
//! - flags bit 0: `upgrade`; bit 1: no query (`None` rather than `Some("")`);
//!   bit 2: no `Accept`; bit 3: no `Content-Type`.
//!
//! Checks: no panic; `plan` deterministic, `Auto` planned exactly as `Legacy`,
//! `Native` changes nothing; a local reply is a 406 or 415 `Status` in JSON or
//! CBOR, with the reason of its code; every upstream `Accept` is a valid header
//! value that re-parses to one `application/json` (or `application/cbor` in
//! upgrade mode) clause which the endpoint accepts with the same options; the
//! verb, route and formats in the plan agree with the functions that compute
//! them; negotiation is monotone in its restrictions; `application/json`
//! always negotiates JSON; and the query helpers read the first value.
#![no_main]

use cborgate::negotiate::media::{
    AcceptHeader, ContentType, Format, Offer, Restrictions, MAX_ACCEPT_CLAUSES,
};
use cborgate::negotiate::route::{
    normalize_verb, query_first_value, query_pretty, query_watch, Method, Verb,
    CONNECT_SUBRESOURCES,
};
use cborgate::negotiate::{
    plan, BodyAction, Plan, RequestHead, ResponseAction, Route, UpstreamMode,
};
use libfuzzer_sys::fuzz_target;

const MODES: [UpstreamMode; 4] = [
    UpstreamMode::Auto,
    UpstreamMode::Legacy,
    UpstreamMode::Native,
    UpstreamMode::Upgrade,
];
const RESTRICTIONS: [Restrictions; 3] = [
    Restrictions::Default,
    Restrictions::Resource,
    Restrictions::Unrestricted,
];

/// What `http::HeaderValue` accepts: no control characters but tab.
fn is_field_text(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// The restrictions `plan` negotiates a served route with.
fn restrictions_of(route: &Route) -> Option<Restrictions> {
    match route {
        Route::Resource(_) => Some(Restrictions::Resource),
        Route::GroupVersionDiscovery { .. } => Some(Restrictions::Default),
        _ => None,
    }
}

fn check_accept(header: Option<&str>) {
    let accept = AcceptHeader::parse(header);
    assert!(accept.clauses().len() <= MAX_ACCEPT_CLAUSES);
    assert_eq!(accept.is_empty(), header.is_none_or(str::is_empty));
    let parts = header.map_or(0, |h| h.split(',').count());
    assert!(accept.clauses().len() <= parts);
    let choices = RESTRICTIONS.map(|r| accept.negotiate(r));
    for (r, choice) in RESTRICTIONS.iter().zip(&choices) {
        let Some(n) = choice else { continue };
        if accept.is_empty() {
            assert_eq!(n.offer, Offer::Json, "empty Accept must choose JSON");
            assert!(n.clause.is_none());
            continue;
        }
        let clause = n.clause.expect("a non-empty Accept chose without a clause");
        assert!(clause.matches(n.offer));
        assert_eq!(clause.options(), n.options);
        assert!(n.options.allowed(n.offer, *r));
        if n.is_table() && *r == Restrictions::Resource {
            assert!(
                matches!(n.offer, Offer::Json | Offer::Yaml),
                "Table in {:?}",
                n.offer
            );
        }
        for (rewritten, media_type) in [
            (n.as_json_accept(), "application/json"),
            (n.as_cbor_accept(), "application/cbor"),
        ] {
            assert!(
                is_field_text(&rewritten),
                "not a header value: {rewritten:?}"
            );
            assert!(rewritten.starts_with(media_type));
            let re = AcceptHeader::parse(Some(&rewritten));
            assert_eq!(re.clauses().len(), 1, "{rewritten:?}");
            let c = re.clauses()[0];
            assert_eq!(
                format!("{}/{}", c.media_type_type(), c.subtype()),
                media_type
            );
            assert_eq!(c.q(), 1.0, "{rewritten:?}");
            assert!(c.params().all(|(k, _)| k != "q"));
        }
    }
    // Allowed sets are nested (Default ⊆ Resource ⊆ Unrestricted), so a stricter
    // endpoint never negotiates where a laxer one refuses.
    let [default, resource, unrestricted] = &choices;
    if default.is_some() {
        assert!(resource.is_some(), "Default negotiates, Resource does not");
    }
    if resource.is_some() {
        assert!(
            unrestricted.is_some(),
            "Resource negotiates, Unrestricted does not"
        );
    }
    // Deterministic, sort included.
    assert_eq!(AcceptHeader::parse(header), accept);
}

fn check_content_type(value: &str) {
    let Some(ct) = ContentType::parse(value) else {
        assert!(value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .is_empty());
        return;
    };
    let mt = ct.media_type();
    assert!(!mt.is_empty() && !mt.contains(';'));
    assert_eq!(mt, mt.trim());
    assert_eq!(mt, ct.raw().to_ascii_lowercase());
    assert_eq!(ct.format(), Format::of_media_type(mt));
    assert_eq!(
        Format::of_media_type(ct.raw()),
        Format::of_media_type(mt),
        "case matters"
    );
    assert_ne!(ct.format(), Format::None);
    if ct.is_cbor_family() && mt.starts_with("application/") {
        assert_eq!(ct.format(), Format::Cbor, "{mt}");
    }
    assert_eq!(ContentType::parse(value), Some(ct.clone()));
}

fn check_route(method: Method, path: &str, query: Option<&str>) -> Route {
    let route = Route::classify(path);
    assert_eq!(Route::classify(&format!("{path}?x=y")), route);
    assert_eq!(Route::classify(path), route);
    match &route {
        Route::Resource(r) => {
            assert_eq!(route.group(), Some(r.group.as_str()));
            assert_eq!(route.resource(), Some(r.resource.as_str()));
            assert!(!r.resource.is_empty() && r.resource.len() <= 253);
            assert!(!r.version.is_empty() && r.version.len() <= 253);
            assert!(r.group.len() <= 253);
            if let Some(sub) = &r.subresource {
                assert!(!sub.is_empty() && sub.len() <= 253);
                assert!(r.named, "subresource of a collection");
            }
            assert_eq!(
                r.is_connect(),
                r.subresource
                    .as_deref()
                    .is_some_and(|s| CONNECT_SUBRESOURCES.contains(&s))
            );
            if r.serves_watch(method, query) {
                assert_eq!(method, Method::Get);
                assert!(r.legacy_watch || query_watch(query));
            }
            if method == Method::Get && r.legacy_watch {
                assert!(r.serves_watch(method, query));
            }
        }
        Route::GroupVersionDiscovery { group, version } => {
            assert_eq!(route.group(), Some(group.as_str()));
            assert!(route.resource().is_none());
            assert!(!version.is_empty());
        }
        Route::NoCborDiscovery | Route::Other => {
            assert!(route.group().is_none() && route.resource().is_none());
        }
    }
    route
}

fn check_query(query: &str) {
    // The first value wins.
    assert!(!query_watch(Some(&format!("watch=0&{query}"))));
    assert!(!query_watch(Some(&format!("watch=FaLsE&{query}"))));
    assert!(query_watch(Some(&format!("watch&{query}"))));
    assert!(query_watch(Some(&format!("watch=true&{query}"))));
    assert_eq!(
        query_pretty(Some(&format!("pretty=true&{query}"))),
        Some(true)
    );
    assert_eq!(
        query_pretty(Some(&format!("pretty=0&{query}"))),
        Some(false)
    );
    assert_eq!(
        query_first_value(&format!("a%20b=c+d&{query}"), "a b").as_deref(),
        Some("c d")
    );
    assert!(query_watch(None) == false && query_pretty(None).is_none());
    let watch = query_first_value(query, "watch");
    assert_eq!(
        query_watch(Some(query)),
        watch.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    );
    if let Some(p) = query_pretty(Some(query)) {
        let v = query_first_value(query, "pretty").expect("pretty without a value");
        assert_eq!(
            p,
            matches!(v.as_ref(), "1" | "t" | "T" | "TRUE" | "true" | "True")
        );
    }
}

fn check_plan(head: &RequestHead<'_>, mode: UpstreamMode, p: &Plan) {
    let method = Method::parse(head.method);
    let route = Route::classify(head.path);
    let ct = head.content_type.and_then(ContentType::parse);
    assert_eq!(p.route, route);
    assert_eq!(
        p.verb,
        normalize_verb(
            method,
            &route,
            head.query,
            ct.as_ref().map(ContentType::raw),
            head.upgrade
        )
    );
    assert!(Verb::ALL.contains(&p.verb), "verb {}", p.verb.label());
    assert_eq!(
        p.request_format,
        ct.as_ref().map_or(Format::None, ContentType::format)
    );
    assert_ne!(p.error_format, Format::Other);
    assert_ne!(p.error_format, Format::None);
    if head.upgrade {
        assert!(p.long_running);
        assert_eq!(p.verb, "CONNECT");
    }
    assert_eq!(
        p.capability_key().is_some(),
        matches!(route, Route::Resource(_))
    );
    assert_eq!(p.response_for_status(101), ResponseAction::PassThrough);
    assert_eq!(p.response_for_status(404), p.error_response);
    assert_eq!(p.response_for_status(200), p.response);

    if let Some(reply) = &p.reply {
        assert!(
            matches!(mode, UpstreamMode::Legacy | UpstreamMode::Auto),
            "{mode:?} answered locally"
        );
        match reply.code {
            406 => {
                assert_eq!(reply.reason, "NotAcceptable");
                assert_eq!(reply.format, Format::Json);
                assert!(reply.pretty);
                let r = restrictions_of(&route).expect("406 on a route that does not negotiate");
                assert!(AcceptHeader::parse(head.accept).negotiate(r).is_none());
            }
            415 => {
                assert_eq!(reply.reason, "UnsupportedMediaType");
                let ct = ct.as_ref().expect("415 without a Content-Type");
                assert!(ct.is_cbor_family(), "415 for a non-CBOR body");
                assert!(matches!(method, Method::Post | Method::Put | Method::Patch));
            }
            code => panic!("local reply {code}"),
        }
        assert!(matches!(reply.format, Format::Json | Format::Cbor));
        assert!(!reply.message.is_empty());
        assert_eq!(p.response_format, reply.format);
        assert!(!head.upgrade);
        assert!(matches!(
            route,
            Route::Resource(_) | Route::GroupVersionDiscovery { .. }
        ));
    }

    if let Some(accept) = &p.upstream_accept {
        assert!(is_field_text(accept), "upstream Accept {accept:?}");
        assert!(p.reply.is_none());
        let re = AcceptHeader::parse(Some(accept));
        assert_eq!(re.clauses().len(), 1, "upstream Accept {accept:?}");
        let (want, offer) = match mode {
            UpstreamMode::Upgrade => ("application/cbor", Offer::Cbor),
            _ => ("application/json", Offer::Json),
        };
        assert!(accept.starts_with(want), "{accept:?}");
        let r =
            restrictions_of(&route).expect("Accept rewritten on a route that does not negotiate");
        let n = re
            .negotiate(r)
            .unwrap_or_else(|| panic!("upstream would refuse its own Accept {accept:?}"));
        assert_eq!(n.offer, offer, "{accept:?}");
        // The client's chosen clause, with the same options (control characters
        // never reach a parsed header, so only then must nothing be lost).
        if head.accept.is_some_and(is_field_text) {
            let orig = AcceptHeader::parse(head.accept)
                .negotiate(r)
                .expect("rewrote an Accept that does not negotiate");
            assert_eq!(n.options, orig.options, "options lost: {accept:?}");
        }
    }

    match mode {
        UpstreamMode::Native => {
            assert_eq!(p.body, BodyAction::PassThrough);
            assert_eq!(p.response, ResponseAction::PassThrough);
            assert_eq!(p.error_response, ResponseAction::PassThrough);
            assert!(p.upstream_accept.is_none());
            assert!(p.reply.is_none());
        }
        UpstreamMode::Legacy | UpstreamMode::Auto => {
            assert!(!matches!(p.body, BodyAction::JsonToCbor { .. }));
            assert!(!matches!(p.response, ResponseAction::CborToJson { .. }));
            assert!(!matches!(
                p.error_response,
                ResponseAction::CborToJson { .. }
            ));
            assert_eq!(
                matches!(p.response, ResponseAction::JsonToCbor { .. }),
                p.upstream_accept.is_some()
            );
            if let ResponseAction::JsonToCbor { watch } = p.response {
                assert_eq!(p.response_format, Format::Cbor);
                if watch {
                    assert!(p.long_running && method == Method::Get);
                    assert!(matches!(route, Route::Resource(_)));
                }
            }
            if p.error_response != ResponseAction::PassThrough {
                assert_eq!(p.error_format, Format::Cbor);
                assert_eq!(
                    p.error_response,
                    ResponseAction::JsonToCbor { watch: false }
                );
            }
            if let BodyAction::CborToJson {
                upstream_content_type,
                ..
            } = p.body
            {
                assert_eq!(p.request_format, Format::Cbor);
                assert!(matches!(
                    upstream_content_type,
                    "application/json" | "application/apply-patch+yaml"
                ));
            }
        }
        UpstreamMode::Upgrade => {
            assert!(p.reply.is_none());
            assert!(!matches!(p.body, BodyAction::CborToJson { .. }));
            assert!(!matches!(p.response, ResponseAction::JsonToCbor { .. }));
            assert_eq!(
                matches!(p.response, ResponseAction::CborToJson { .. }),
                p.upstream_accept.is_some()
            );
            if let BodyAction::JsonToCbor { .. } = p.body {
                assert!(matches!(p.request_format, Format::Json | Format::Yaml));
                assert!(p.upstream_accept.is_some());
            }
            if p.upstream_accept.is_some() {
                assert_eq!(p.response_format, Format::Json);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else {
        return;
    };
    let mut fields = rest.split(|&b| b == b'\n').map(String::from_utf8_lossy);
    let mut next = || fields.next().unwrap_or_default();
    let (method, path, query, accept, content_type) = (next(), next(), next(), next(), next());
    let head = RequestHead {
        method: &method,
        path: &path,
        query: (flags & 2 == 0).then_some(&*query),
        accept: (flags & 4 == 0).then_some(&*accept),
        content_type: (flags & 8 == 0).then_some(&*content_type),
        upgrade: flags & 1 != 0,
        // Not fuzzed here: the body length and response compression.
        declared_len: None,
        accept_encoding: None,
        compress_responses: false,
    };

    let m = Method::parse(head.method);
    for (name, want) in [
        ("get", Method::Get),
        ("Post", Method::Post),
        ("DELETE", Method::Delete),
    ] {
        assert_eq!(Method::parse(name), want);
    }
    if m != Method::Other {
        assert_eq!(Method::parse(&head.method.to_ascii_lowercase()), m);
    }

    check_accept(head.accept);
    check_content_type(&content_type);
    check_route(m, head.path, head.query);
    check_query(&query);
    let _ = Format::of_media_type(&accept);

    let plans = MODES.map(|mode| {
        let p = plan(&head, mode);
        assert_eq!(plan(&head, mode), p, "plan not deterministic in {mode:?}");
        check_plan(&head, mode, &p);
        p
    });
    assert_eq!(plans[0], plans[1], "Auto is not planned as Legacy");
    // Everything but the transcoding is the same in every mode.
    for p in &plans[1..] {
        assert_eq!(p.verb, plans[0].verb);
        assert_eq!(p.route, plans[0].route);
        assert_eq!(p.request_format, plans[0].request_format);
        assert_eq!(p.error_format, plans[0].error_format);
        assert_eq!(p.long_running, plans[0].long_running);
    }
    // Native and upgrade differ only for JSON clients.
    let (native, upgrade) = (&plans[2], &plans[3]);
    if upgrade.upstream_accept.is_none() {
        assert_eq!(upgrade, native);
    }

    // A client that asks for exactly `application/json` gets JSON, and cborgate
    // leaves the exchange to the upstream in legacy mode.
    let json = RequestHead {
        accept: Some("application/json"),
        ..head
    };
    for r in RESTRICTIONS {
        let n = AcceptHeader::parse(json.accept)
            .negotiate(r)
            .expect("JSON refused");
        assert_eq!(n.offer, Offer::Json);
    }
    let p = plan(&json, UpstreamMode::Legacy);
    check_plan(&json, UpstreamMode::Legacy, &p);
    assert!(p.upstream_accept.is_none());
    assert_eq!(p.response, ResponseAction::PassThrough);
    assert_eq!(p.error_response, ResponseAction::PassThrough);
    assert_eq!(p.error_format, Format::Json);
    assert!(p
        .reply
        .as_ref()
        .is_none_or(|r| r.code == 415 && r.format == Format::Json));
    // And exactly `application/cbor` is asked for as plain JSON upstream.
    let cbor = RequestHead {
        accept: Some("application/cbor"),
        ..head
    };
    let p = plan(&cbor, UpstreamMode::Legacy);
    check_plan(&cbor, UpstreamMode::Legacy, &p);
    if let Some(a) = &p.upstream_accept {
        assert_eq!(a, "application/json");
    }
    assert_eq!(p.error_format, Format::Cbor);
});
