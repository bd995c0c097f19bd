//! Byte fields and tagged map keys in CBOR request bodies (docs/wire.md §3): the JSON a
//! legacy apiserver must read for what a CBOR-enabled one (kube-apiserver 1.36.2) decodes,
//! at every split of the input.

use cborgate::codec::fields::{Schema, Step};
use cborgate::codec::{CborToJson, CborToJsonOptions, Reason};
use cborgate::negotiate::byte_fields::typed_body;
use cborgate::negotiate::Route;

use Step::{AnyIndex, AnyKey, Key};

// A tiny CBOR writer, so each case reads as the value it encodes.
fn head(major: u8, n: u64) -> Vec<u8> {
    let m = major << 5;
    match n {
        0..=23 => vec![m | n as u8],
        24..=0xff => vec![m | 24, n as u8],
        0x100..=0xffff => [vec![m | 25], (n as u16).to_be_bytes().to_vec()].concat(),
        _ => [vec![m | 26], (n as u32).to_be_bytes().to_vec()].concat(),
    }
}
fn t(s: &str) -> Vec<u8> {
    [head(3, s.len() as u64), s.as_bytes().to_vec()].concat()
}
fn b(bytes: &[u8]) -> Vec<u8> {
    [head(2, bytes.len() as u64), bytes.to_vec()].concat()
}
fn tag(n: u64, item: Vec<u8>) -> Vec<u8> {
    [head(6, n), item].concat()
}
fn map(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<u8> {
    let mut out = head(5, pairs.len() as u64);
    for (k, v) in pairs {
        out.extend(k);
        out.extend(v);
    }
    out
}
fn arr(items: Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = head(4, items.len() as u64);
    for i in items {
        out.extend(i);
    }
    out
}

const CM: Schema = Schema::Typed(&[&[Key("binaryData"), AnyKey]]);
const HOOKS: Schema = Schema::Typed(&[&[
    Key("webhooks"),
    AnyIndex,
    Key("clientConfig"),
    Key("caBundle"),
]]);

/// Transcode whole, byte at a time and at every single split: one answer for all.
fn json(schema: Schema, cbor: &[u8]) -> Result<String, Reason> {
    let opts = CborToJsonOptions {
        schema,
        input_len: Some(cbor.len() as u64),
        ..CborToJsonOptions::default()
    };
    let run = |cuts: &[usize]| {
        let mut c = CborToJson::new(opts);
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            c.feed(&cbor[w[0]..w[1]], &mut out).map_err(|e| e.reason)?;
        }
        c.finish(&mut out).map_err(|e| e.reason)?;
        Ok(String::from_utf8(out).expect("JSON is UTF-8"))
    };
    same_at_every_cut(cbor.len(), run)
}

/// `run` over an input of `len` bytes cut at `cuts`: whole, byte at a time and at every
/// single split, one answer for all.
fn same_at_every_cut<T: PartialEq + std::fmt::Debug>(len: usize, run: impl Fn(&[usize]) -> T) -> T {
    let whole = run(&[0, len]);
    let bytewise: Vec<usize> = (0..=len).collect();
    assert_eq!(run(&bytewise), whole, "byte at a time");
    for cut in 1..len {
        assert_eq!(run(&[0, cut, len]), whole, "split at {cut}");
    }
    whole
}

fn cm(value: Vec<u8>) -> Vec<u8> {
    map(vec![
        (t("kind"), t("ConfigMap")),
        (t("binaryData"), map(vec![(t("b"), value)])),
        (t("data"), map(vec![(t("s"), tag(23, b(&[0, 1])))])),
    ])
}

#[test]
fn a_tagged_byte_field_gets_the_bytes_whatever_the_tag() {
    // The CBOR-enabled server (1.36.2) stores `binaryData: {"b": 23(h'0001fffe')}` (and 21,
    // 22) as 00 01 ff fe; the legacy server must get their base64. `data` is a string
    // field: there the tag's text form stays (docs/wire.md §3's table).
    let want = r#"{"kind":"ConfigMap","binaryData":{"b":"AAH//g=="},"data":{"s":"0001"}}"#;
    let bytes = b(&[0x00, 0x01, 0xff, 0xfe]);
    for value in [
        tag(23, bytes.clone()),
        tag(21, bytes.clone()),
        tag(22, bytes.clone()),
        tag(55799, tag(21, bytes.clone())),
        // Indefinite length, in two chunks.
        tag(
            22,
            [vec![0x5f], b(&[0, 1]), b(&[0xff, 0xfe]), vec![0xff]].concat(),
        ),
        // An untagged byte string holding the base64 text (below).
        b(b"AAH//g=="),
    ] {
        assert_eq!(
            json(CM, &cm(value.clone())).as_deref(),
            Ok(want),
            "{value:02x?}"
        );
    }
    // Without a schema (a custom resource, an apply patch) the table applies as before.
    assert_eq!(
        json(Schema::Unstructured, &cm(tag(23, bytes))).as_deref(),
        Ok(r#"{"kind":"ConfigMap","binaryData":{"b":"0001fffe"},"data":{"s":"0001"}}"#)
    );
    // An empty byte string and null.
    assert_eq!(
        json(CM, &cm(b(&[]))).as_deref(),
        Ok(r#"{"kind":"ConfigMap","binaryData":{"b":""},"data":{"s":"0001"}}"#)
    );
    assert_eq!(
        json(CM, &cm(vec![0xf6])).as_deref(),
        Ok(r#"{"kind":"ConfigMap","binaryData":{"b":null},"data":{"s":"0001"}}"#)
    );
}

/// The Go offset of a refused body's `InvalidBase64`, whole and byte at a time.
fn base64_refusal(schema: Schema, cbor: &[u8]) -> Option<u64> {
    let opts = CborToJsonOptions {
        schema,
        input_len: Some(cbor.len() as u64),
        ..CborToJsonOptions::default()
    };
    let run = |step: usize| {
        let mut c = CborToJson::new(opts);
        let mut out = Vec::new();
        for piece in cbor.chunks(step) {
            c.feed(piece, &mut out)?;
        }
        c.finish(&mut out)
    };
    let whole = run(cbor.len().max(1)).err();
    assert_eq!(run(1).err(), whole, "byte at a time");
    whole
        .filter(|e| e.reason == Reason::InvalidBase64)
        .map(|e| e.detail)
}

#[test]
fn an_untagged_byte_string_in_a_byte_field_is_base64_text() {
    // Observed on a CBOR-enabled kube-apiserver 1.36.2 (docs/wire.md §3): it decodes the
    // bytes of an untagged byte string in a `[]byte` field as base64 text, with Go's
    // `base64.StdEncoding`. The legacy server decodes the same text from the JSON string.
    let ok: &[(&[u8], &str)] = &[
        (b"AAH//g==", "AAH//g=="),
        (b"", ""),
        (b"AAH//h==", "AAH//h=="),
        (b"AAH/\n/g==", "AAH/\\n/g=="),
        (b"AAH/\r\n/g==", "AAH/\\r\\n/g=="),
    ];
    for (text, want) in ok {
        let want = format!(
            r#"{{"kind":"ConfigMap","binaryData":{{"b":"{want}"}},"data":{{"s":"0001"}}}}"#
        );
        assert_eq!(json(CM, &cm(b(text))), Ok(want), "{text:?}");
    }
    // Indefinite length: the chunks are one text.
    assert_eq!(
        json(
            CM,
            &cm([vec![0x5f], b(b"AAH"), b(b"//g="), b(b"="), vec![0xff]].concat())
        )
        .as_deref(),
        Ok(r#"{"kind":"ConfigMap","binaryData":{"b":"AAH//g=="},"data":{"s":"0001"}}"#)
    );
    // What the real server refused, with the offset its message named.
    let bad: &[(&[u8], u64)] = &[
        (b"\x00\x01\xff\xfe", 0),
        (b"hello", 4),
        (b"AAH//g", 4),
        (b"AAH__g==", 3),
        (b"AAH/ /g==", 4),
        (b"AAH//g===", 8),
    ];
    for (text, at) in bad {
        let body = cm(b(text));
        assert_eq!(json(CM, &body), Err(Reason::InvalidBase64), "{text:?}");
        assert_eq!(base64_refusal(CM, &body), Some(*at), "{text:?}");
    }
    let split = cm([vec![0x5f], b(b"AAH/"), b(b"/g="), b(b"x"), vec![0xff]].concat());
    assert_eq!(base64_refusal(CM, &split), Some(6));
    // Elsewhere an untagged byte string is the string of its bytes, as before.
    assert_eq!(
        json(Schema::Unstructured, &cm(b(b"hello"))).as_deref(),
        Ok(r#"{"kind":"ConfigMap","binaryData":{"b":"hello"},"data":{"s":"0001"}}"#)
    );
}

#[test]
fn text_in_a_byte_field_is_refused() {
    // A text string where the built-in schema wants bytes is a 400 directly (kube-apiserver
    // 1.36.2, CBOR on: "cannot unmarshal UTF-8 text string into Go struct field
    // v1.ConfigMap.binaryData of type []uint8").
    for value in [
        t("AAH//g=="),
        tag(22, t("AAH//g==")),
        [vec![0x7f], t("AA"), vec![0xff]].concat(),
    ] {
        assert_eq!(
            json(CM, &cm(value.clone())),
            Err(Reason::TextForBytes),
            "{value:02x?}"
        );
    }
}

#[test]
fn paths_through_arrays_and_only_there() {
    let hook = |ca: Vec<u8>| {
        map(vec![(
            t("webhooks"),
            arr(vec![
                map(vec![(t("name"), t("a"))]),
                map(vec![(
                    t("clientConfig"),
                    map(vec![(t("url"), tag(21, b(b"\xfb"))), (t("caBundle"), ca)]),
                )]),
            ]),
        )])
    };
    assert_eq!(
        json(HOOKS, &hook(tag(23, b(b"PEM\x00")))).as_deref(),
        Ok(r#"{"webhooks":[{"name":"a"},{"clientConfig":{"url":"-w","caBundle":"UEVNAA=="}}]}"#)
    );
    assert_eq!(json(HOOKS, &hook(t("PEM"))), Err(Reason::TextForBytes));
    // `caBundle` elsewhere is not the field.
    let elsewhere = map(vec![(t("caBundle"), t("PEM"))]);
    assert_eq!(
        json(HOOKS, &elsewhere).as_deref(),
        Ok(r#"{"caBundle":"PEM"}"#)
    );
}

#[test]
fn an_unknown_typed_body_refuses_ambiguous_byte_strings() {
    let body = |v: Vec<u8>| map(vec![(t("spec"), map(vec![(t("x"), v)]))]);
    // Tag 22's base64 text is right for a string and for a []byte field alike.
    assert_eq!(
        json(Schema::Unknown, &body(tag(22, b(&[0, 1])))).as_deref(),
        Ok(r#"{"spec":{"x":"AAE="}}"#)
    );
    assert_eq!(
        json(Schema::Unknown, &body(t("text"))).as_deref(),
        Ok(r#"{"spec":{"x":"text"}}"#)
    );
    // Untagged: the string of its bytes, for a string field and (as base64 text, which the
    // legacy server checks) for a []byte one.
    assert_eq!(
        json(Schema::Unknown, &body(b(b"abcd"))).as_deref(),
        Ok(r#"{"spec":{"x":"abcd"}}"#)
    );
    for v in [tag(21, b(&[0, 1])), tag(23, b(&[0, 1]))] {
        assert_eq!(
            json(Schema::Unknown, &body(v.clone())),
            Err(Reason::AmbiguousBytes),
            "{v:02x?}"
        );
    }
    // Keys are strings in Go whatever their CBOR type.
    assert_eq!(
        json(Schema::Unknown, &map(vec![(b(b"k"), t("v"))])).as_deref(),
        Ok(r#"{"k":"v"}"#)
    );
}

#[test]
fn tagged_map_keys_decode_as_go_strings() {
    // Kubernetes decodes a map key into a Go string: tag 0's text as it
    // is, tags 21-23 on a byte string as their text form, unknown tags dropped; tag 1's
    // number cannot be a string.
    for schema in [Schema::Unstructured, CM] {
        let m = map(vec![
            (tag(0, t("2024-01-01T00:00:00.000Z")), t("a")),
            (tag(21, b(&[0xfb, 0xff])), t("b")),
            (tag(22, b(&[0xfb, 0xff])), t("c")),
            (tag(23, b(&[0xfb, 0xff])), t("d")),
            (tag(23, t("text")), t("e")),
            (tag(1234, t("u")), t("f")),
        ]);
        assert_eq!(
            json(schema, &m).as_deref(),
            Ok(
                r#"{"2024-01-01T00:00:00.000Z":"a","-_8":"b","+/8=":"c","fbff":"d","text":"e","u":"f"}"#
            ),
            "{schema:?}"
        );
        assert_eq!(
            json(schema, &map(vec![(tag(1, vec![0x01]), t("a"))])),
            Err(Reason::InvalidMapKey)
        );
        // Duplicates are judged on the text the keys become, as Go compares strings.
        let dup = map(vec![(tag(21, b(b"a")), t("x")), (t("YQ"), t("y"))]);
        assert_eq!(json(schema, &dup), Err(Reason::DuplicateKey), "{schema:?}");
        let dup = map(vec![(t("YQ"), t("y")), (tag(21, b(b"a")), t("x"))]);
        assert_eq!(json(schema, &dup), Err(Reason::DuplicateKey), "{schema:?}");
    }
    // A tagged key never names a field: its value is not the byte field.
    let m = map(vec![(
        tag(55799, t("binaryData")),
        map(vec![(t("b"), t("text"))]),
    )]);
    assert_eq!(
        json(CM, &m).as_deref(),
        Ok(r#"{"binaryData":{"b":"text"}}"#)
    );
}

#[test]
fn routes_pick_their_schema_end_to_end() {
    let schema = |path: &str| match Route::classify(path) {
        Route::Resource(r) => typed_body(&r),
        other => panic!("{other:?}"),
    };
    let secret = map(vec![(
        t("data"),
        map(vec![(t("k"), tag(23, b(b"\x00\x01")))]),
    )]);
    assert_eq!(
        json(schema("/api/v1/namespaces/a/secrets"), &secret).as_deref(),
        Ok(r#"{"data":{"k":"AAE="}}"#)
    );
    // The same body to a ConfigMap: `data` is map[string]string there.
    assert_eq!(
        json(schema("/api/v1/namespaces/a/configmaps"), &secret).as_deref(),
        Ok(r#"{"data":{"k":"0001"}}"#)
    );
    let csr = map(vec![(
        t("spec"),
        map(vec![(t("request"), tag(21, b(b"CSR")))]),
    )]);
    assert_eq!(
        json(
            schema("/apis/certificates.k8s.io/v1/certificatesigningrequests"),
            &csr
        )
        .as_deref(),
        Ok(r#"{"spec":{"request":"Q1NS"}}"#)
    );
}

/// A typed kind without `[]byte` fields (a Pod) reads exactly as an unstructured body, so
/// the transcoder takes its fast paths for it (`Schema::marks_nothing`): the general path,
/// following a schema whose one path never matches, writes the same JSON and refuses the
/// same input.
#[test]
fn a_kind_without_byte_fields_reads_as_unstructured() {
    const NEVER: Schema = Schema::Typed(&[&[Key("no-such-field"), AnyKey]]);
    let pod = schema_of("/api/v1/namespaces/a/pods");
    assert_eq!(pod, Schema::Typed(&[]));
    assert!(pod.marks_nothing() && Schema::Unstructured.marks_nothing());
    assert!(!NEVER.marks_nothing() && !CM.marks_nothing() && !Schema::Unknown.marks_nothing());
    let bodies = [
        cm(tag(22, b(b"\x00\x01"))),
        map(vec![
            (t("kind"), t("Pod")),
            (t("b"), b(b"\xff\x00")),
            (t("t21"), tag(21, b(b"\x01"))),
            (t("t23"), tag(23, b(b"\x02\x03"))),
            (t("time"), tag(0, t("2024-01-02T03:04:05Z"))),
            (t("n"), arr(vec![head(0, 7), head(1, 3), t("caf\u{e9}")])),
            (tag(22, b(b"k")), t("tagged key")),
        ]),
        map(vec![(t("a"), t("x")), (t("a"), t("y"))]),
        arr(vec![t("\u{1}\"quoted\""), map(vec![])]),
    ];
    for body in &bodies {
        let unstructured = json(Schema::Unstructured, body);
        assert_eq!(json(pod, body), unstructured, "{body:?}");
        assert_eq!(json(NEVER, body), unstructured, "{body:?}");
    }
}

fn schema_of(path: &str) -> Schema {
    match Route::classify(path) {
        Route::Resource(r) => typed_body(&r),
        other => panic!("{other:?}"),
    }
}

/// JSON → CBOR of a response with `schema`, at every cut.
fn response_cbor(schema: Schema, watch: bool, window: usize, json: &str) -> Vec<u8> {
    use cborgate::codec::{JsonToCbor, JsonToCborOptions};
    let json = json.as_bytes();
    let opts = JsonToCborOptions {
        schema,
        watch,
        window,
        dedupe_keys: false,
        ..JsonToCborOptions::default()
    };
    let run = |cuts: &[usize]| {
        let mut c = JsonToCbor::new(opts);
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            c.feed(&json[w[0]..w[1]], &mut out).unwrap();
        }
        c.finish(&mut out).unwrap();
        out
    };
    same_at_every_cut(json.len(), run)
}

fn sd(item: Vec<u8>) -> Vec<u8> {
    tag(55799, item)
}

#[test]
fn a_response_writes_byte_fields_as_tag_22_and_the_bytes() {
    use cborgate::codec::DEFAULT_WINDOW;
    let w = DEFAULT_WINDOW;
    // A ConfigMap: `binaryData` values become 22(bytes); `data` stays text.
    let got = response_cbor(
        CM,
        false,
        w,
        r#"{"binaryData":{"b":"AAEC//4=","e":"","n":null},"data":{"b":"AAEC//4="}}"#,
    );
    let want = sd(map(vec![
        (
            b(b"binaryData"),
            map(vec![
                (b(b"b"), tag(22, b(&[0, 1, 2, 0xff, 0xfe]))),
                (b(b"e"), tag(22, b(&[]))),
                (b(b"n"), vec![0xf6]),
            ]),
        ),
        (b(b"data"), map(vec![(b(b"b"), b(b"AAEC//4="))])),
    ]));
    assert_eq!(got, want);
    // Escapes (`\/`), a long value (a head of several bytes), and a value longer than
    // the window (streamed out as text before it ends: left as it is).
    let long = "QUJD".repeat(40);
    let json = format!(r#"{{"binaryData":{{"x":"AAEC\/\/4=","l":"{long}"}}}}"#);
    let want = sd(map(vec![(
        b(b"binaryData"),
        map(vec![
            (b(b"x"), tag(22, b(&[0, 1, 2, 0xff, 0xfe]))),
            (b(b"l"), tag(22, b("ABC".repeat(40).as_bytes()))),
        ]),
    )]));
    assert_eq!(response_cbor(CM, false, w, &json), want);
    let small = response_cbor(CM, false, 100, &json);
    assert!(
        small.windows(1).filter(|x| x[0] == 0xd6).count() == 1,
        "{small:02x?}"
    );
    // Base64 a Go upstream never writes stays the text string it is.
    assert_eq!(
        response_cbor(
            CM,
            false,
            w,
            r#"{"binaryData":{"b":"AAEC"},"x":{"binaryData":"QQ"}}"#
        ),
        sd(map(vec![
            (
                b(b"binaryData"),
                map(vec![(b(b"b"), tag(22, b(&[0, 1, 2])))])
            ),
            (b(b"x"), map(vec![(b(b"binaryData"), b(b"QQ"))])),
        ]))
    );
    assert_eq!(
        response_cbor(CM, false, w, r#"{"binaryData":{"b":"not base64"}}"#),
        sd(map(vec![(
            b(b"binaryData"),
            map(vec![(b(b"b"), b(b"not base64"))])
        )]))
    );
}

#[test]
fn lists_watch_events_and_arrays_find_their_objects() {
    use cborgate::codec::DEFAULT_WINDOW;
    let w = DEFAULT_WINDOW;
    let bytes = || tag(22, b(&[0, 1]));
    // A list: each of `items` is an object of the kind.
    assert_eq!(
        response_cbor(
            CM,
            false,
            w,
            r#"{"kind":"ConfigMapList","items":[{"binaryData":{"b":"AAE="}},{"binaryData":{}}]}"#
        ),
        sd(map(vec![
            (b(b"kind"), b(b"ConfigMapList")),
            (
                b(b"items"),
                arr(vec![
                    map(vec![(b(b"binaryData"), map(vec![(b(b"b"), bytes())]))]),
                    map(vec![(b(b"binaryData"), map(vec![]))]),
                ])
            ),
        ]))
    );
    // Watch events: the `object` of each.
    let events = concat!(
        r#"{"type":"ADDED","object":{"binaryData":{"b":"AAE="}}}"#,
        "\n",
        r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#,
        "\n"
    );
    let event =
        |ty: &[u8], object: Vec<u8>| sd(map(vec![(b(b"type"), b(ty)), (b(b"object"), sd(object))]));
    assert_eq!(
        response_cbor(CM, true, w, events),
        [
            event(
                b"ADDED",
                map(vec![(b(b"binaryData"), map(vec![(b(b"b"), bytes())]))])
            ),
            event(
                b"BOOKMARK",
                map(vec![(
                    b(b"metadata"),
                    map(vec![(b(b"resourceVersion"), b(b"9"))])
                )])
            ),
        ]
        .concat()
    );
    // Through arrays: webhooks[].clientConfig.caBundle.
    assert_eq!(
        response_cbor(
            HOOKS,
            false,
            w,
            r#"{"webhooks":[{"name":"a","clientConfig":{"caBundle":"AAE=","url":"AAE="}}]}"#
        ),
        sd(map(vec![(
            b(b"webhooks"),
            arr(vec![map(vec![
                (b(b"name"), b(b"a")),
                (
                    b(b"clientConfig"),
                    map(vec![(b(b"caBundle"), bytes()), (b(b"url"), b(b"AAE="))])
                ),
            ])])
        )]))
    );
    // Without a typed schema nothing changes.
    for schema in [Schema::Unstructured, Schema::Unknown, Schema::Typed(&[])] {
        assert_eq!(
            response_cbor(schema, false, w, r#"{"binaryData":{"b":"AAE="}}"#),
            sd(map(vec![(
                b(b"binaryData"),
                map(vec![(b(b"b"), b(b"AAE="))])
            )]))
        );
    }
}
