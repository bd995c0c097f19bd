//! Regression tests for inputs found by the fuzz targets (`fuzz/`), or by
//! differential runs over their corpus. Each feeds the input found, or a
//! smaller one with the same fault, and asserts the right result. Also
//! written-out cases for fast paths the property tests seldom reach.

use cborgate::codec::{
    CborToJson, CborToJsonOptions, CodecError, JsonToCbor, JsonToCborOptions, StringMode,
    Transcoder,
};

/// Feed `input` in pieces of `size` bytes (0: whole), then finish.
fn run<T: Transcoder>(mut t: T, input: &[u8], size: usize) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    if size == 0 {
        t.feed(input, &mut out)?;
    } else {
        for piece in input.chunks(size) {
            t.feed(piece, &mut out)?;
        }
    }
    t.finish(&mut out)?;
    Ok(out)
}

/// JSON → CBOR whole and byte at a time (same output), then back to JSON.
fn json_round_trip(opts: JsonToCborOptions, json: &[u8]) -> Vec<u8> {
    let cbor = run(JsonToCbor::new(opts), json, 0).expect("JSON → CBOR");
    let split = run(JsonToCbor::new(opts), json, 1).expect("JSON → CBOR, byte at a time");
    assert_eq!(cbor, split, "output depends on chunking");
    let dopts = CborToJsonOptions {
        sequence: opts.watch,
        ..CborToJsonOptions::default()
    };
    run(CborToJson::new(dopts), &cbor, 0).expect("CBOR → JSON")
}

fn text(window: usize) -> JsonToCborOptions {
    JsonToCborOptions {
        strings: StringMode::Text,
        window,
        dedupe_keys: false,
        ..JsonToCborOptions::default()
    }
}

/// fuzz json_to_cbor crash-45269bec: `[28, 135] "a"` (text strings, window 1).
/// A text string whose buffered content reached exactly the window indexed
/// one past its end while looking for a character boundary (panic).
#[test]
fn text_string_exactly_window_long() {
    assert_eq!(json_round_trip(text(1), br#""a""#), br#""a""#);
    assert_eq!(json_round_trip(text(2), br#""ab""#), br#""ab""#);
    assert_eq!(
        json_round_trip(text(2), "\"é\"".as_bytes()),
        "\"é\"".as_bytes()
    );
    assert_eq!(
        json_round_trip(text(1), "[\"aé€😀\",\"x\"]".as_bytes()),
        "[\"aé€😀\",\"x\"]".as_bytes()
    );
    assert_eq!(
        json_round_trip(text(16), br#""0123456789abcdef""#),
        br#""0123456789abcdef""#
    );
}

/// Found by comparing the emitter of one-byte head placeholders (c.f. the
/// module documentation of `json_to_cbor`) with the one before it over the
/// fuzz corpus: keys of 24 bytes or more that arrive in pieces get a slot for
/// their longer head. When two such pairs side by side are cut out as
/// duplicates, the second key's head was written although its pair was not.
#[test]
fn duplicate_long_keys_in_adjacent_pairs() {
    let k1 = "k".repeat(30);
    let k2 = "q".repeat(300);
    let json = format!(r#"{{"{k1}":1,"{k2}":[2],"{k1}":3,"{k2}":4}}"#);
    let opts = JsonToCborOptions::default();
    let whole = run(JsonToCbor::new(opts), json.as_bytes(), 0).unwrap();
    let mut want = vec![0xd9, 0xd9, 0xf7, 0xa2, 0x58, 30];
    want.extend_from_slice(k1.as_bytes());
    want.extend_from_slice(&[0x03, 0x59, 0x01, 0x2c]);
    want.extend_from_slice(k2.as_bytes());
    want.push(0x04);
    assert_eq!(whole, want);
    for size in [1, 2, 7, 40] {
        let pieces = run(JsonToCbor::new(opts), json.as_bytes(), size).unwrap();
        assert_eq!(pieces, want, "in pieces of {size}");
    }
}

/// Every two-byte escape, `\u` escapes and invalid escapes, in keys and
/// values short and long: the whole-string fast path (`unescape`, which
/// reads escapes from a table) decodes them as the byte-at-a-time state
/// machine does, and rejects the same ones at the same offset.
#[test]
fn escapes_decode_alike_whole_and_in_pieces() {
    let pad = "p".repeat(40);
    let mut cases: Vec<String> = Vec::new();
    for e in [
        "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u00e9", "\\u0041",
    ] {
        cases.push(format!(
            r#"{{"k{e}":"v{e}","{pad}{e}":["{e}{pad}","{e}"]}}"#
        ));
    }
    for (i, e) in ["\\a", "\\x", "\\U0041", "\\u00g1", "\\0", "\\ "]
        .iter()
        .enumerate()
    {
        cases.push(format!(r#"{{"k":"{}{e}"}}"#, "v".repeat(i * 7)));
    }
    let opts = JsonToCborOptions::default();
    for json in &cases {
        let whole = run(JsonToCbor::new(opts), json.as_bytes(), 0);
        let bytewise = run(JsonToCbor::new(opts), json.as_bytes(), 1);
        assert_eq!(whole, bytewise, "{json}");
        let want: Result<serde_json::Value, _> = serde_json::from_str(json);
        assert_eq!(whole.is_ok(), want.is_ok(), "{json}");
    }
}
