//! Acceptance: hostile inputs end in a clean error, quickly, within 64 MiB.
//! A counting allocator makes the memory bound a deterministic assertion.

mod support;

use cborgate::codec::{
    cbor_to_json, json_to_cbor, CborToJson, CborToJsonOptions, JsonToCbor, JsonToCborOptions,
    Reason,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use support::*;

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if n > l.size() {
            let now = CURRENT.fetch_add(n - l.size(), Ordering::Relaxed) + n - l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            CURRENT.fetch_sub(l.size() - n, Ordering::Relaxed);
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;
/// Tests in this file run one at a time so the peak is theirs.
static SERIAL: Mutex<()> = Mutex::new(());

const LIMIT: usize = 64 << 20;

/// Run `f` and assert it allocated at most 64 MiB beyond what was live before
/// (the input itself is allocated by the caller, before).
fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = std::time::Instant::now();
    let r = f();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    eprintln!("{what}: {:?}, peak {} KiB", t.elapsed(), peak / 1024);
    assert!(peak < LIMIT, "{what}: peak {peak} bytes");
    r
}

fn cbor_err(what: &str, input: &[u8]) -> Reason {
    let r = bounded(what, || cbor_to_json(input, CborToJsonOptions::default()));
    // Also without knowing the input length (pure streaming).
    let mut t = CborToJson::new(CborToJsonOptions::default());
    let mut out = Vec::new();
    let streamed = t.feed(input, &mut out).and_then(|_| t.finish(&mut out));
    assert!(streamed.is_err(), "{what}: streaming accepted it");
    r.expect_err(what).reason
}

fn json_err(what: &str, input: &[u8]) -> Reason {
    bounded(what, || json_to_cbor(input, JsonToCborOptions::default()))
        .expect_err(what)
        .reason
}

#[test]
fn deep_nesting() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 100_000;
    assert_eq!(json_err("json [[[", &vec![b'['; n]), Reason::DepthExceeded);
    let mut obj = Vec::new();
    for _ in 0..n {
        obj.extend_from_slice(b"{\"a\":");
    }
    assert_eq!(json_err("json {\"a\":{", &obj), Reason::DepthExceeded);
    assert_eq!(
        cbor_err("cbor 81 81 81", &vec![0x81; n]),
        Reason::DepthExceeded
    );
    assert_eq!(
        cbor_err("cbor 9f 9f 9f", &vec![0x9f; n]),
        Reason::DepthExceeded
    );
    let mut tags = Vec::new();
    for _ in 0..n {
        tags.extend_from_slice(&[0xd9, 0xd9, 0xf7]);
    }
    assert_eq!(cbor_err("cbor tags", &tags), Reason::DepthExceeded);
    // Exactly at the limit is fine: 10000 levels, the top one counted as 1.
    let mut ok = vec![0x81u8; 9_999];
    ok.push(0x80);
    assert!(cbor_to_json(&ok, CborToJsonOptions::default()).is_ok());
    let mut ok = vec![b'['; 10_000];
    ok.extend(vec![b']'; 10_000]);
    assert!(json_to_cbor(&ok, JsonToCborOptions::default()).is_ok());
    let mut over = vec![b'['; 10_001];
    over.extend(vec![b']'; 10_001]);
    assert_eq!(json_err("json 10001", &over), Reason::DepthExceeded);
}

#[test]
fn huge_length_headers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let two60 = (1u64 << 60).to_be_bytes();
    for major in [0x5b, 0x7b, 0x9b, 0xbb] {
        let mut v = vec![major];
        v.extend_from_slice(&two60);
        v.extend_from_slice(b"abc");
        let r = cbor_err(&format!("{major:02x} 2^60"), &v);
        assert!(
            matches!(r, Reason::LengthExceedsInput | Reason::StringTooLong),
            "{major:02x}: {r:?}"
        );
    }
    // A length inside an indefinite string's chunk, and a map inside an array.
    let mut v = vec![0x9f, 0x5f, 0x5b];
    v.extend_from_slice(&two60);
    assert!(cbor_to_json(&v, CborToJsonOptions::default()).is_err());
}

#[test]
fn truncated_items() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cbor = std::fs::read(data().join("corpus/objects/configmap/b.cbor")).unwrap();
    for cut in 0..cbor.len() {
        let r = cbor_to_json(&cbor[..cut], CborToJsonOptions::default());
        let e = r.expect_err("a prefix must not decode");
        assert!(
            matches!(e.reason, Reason::Truncated | Reason::LengthExceedsInput),
            "cut {cut}: {e}"
        );
    }
    let json = std::fs::read(data().join("corpus/objects/configmap/b.json")).unwrap();
    for cut in 0..json.len() - 1 {
        let r = json_to_cbor(&json[..cut], JsonToCborOptions::default());
        assert!(r.is_err(), "JSON prefix of {cut} bytes accepted");
    }
}

#[test]
fn duplicate_keys() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // CBOR: text/text, byte/byte, and text vs byte with the same bytes.
    for input in [
        hex("a2616101616102"),
        hex("a2416101416102"),
        hex("a2616101416102"),
        hex("bf616101416102ff"),
        hex("a1617aa2616101416102"),
    ] {
        assert_eq!(
            cbor_err("dup", &input),
            Reason::DuplicateKey,
            "{}",
            to_hex(&input)
        );
    }
    // The same key in different maps is fine.
    assert!(cbor_to_json(
        &hex("a2617aa16161016179a1616102"),
        CborToJsonOptions::default()
    )
    .is_ok());
    // Many keys, one duplicate at the end (hash index path).
    let mut big = vec![0xb9, 0x27, 0x11]; // map of 10001 pairs
    for i in 0..10_000u32 {
        let k = format!("k{i}");
        big.push(0x60 | k.len() as u8);
        big.extend_from_slice(k.as_bytes());
        big.push(0x00);
    }
    big.extend_from_slice(&[0x42, b'k', b'7', 0x01]);
    assert_eq!(cbor_err("dup in 10001 keys", &big), Reason::DuplicateKey);

    // JSON: the last one wins, as in Go, and the CBOR holds no duplicate.
    let cbor = json_to_cbor(
        br#"{"a":1,"b":{"x":[1,2]},"a":{"c":[3]},"a":3}"#,
        JsonToCborOptions::default(),
    )
    .unwrap();
    assert_eq!(
        cbor_canon(&cbor, false),
        cbor_canon(&hex("d9d9f7a24161034162a14178820102"), false)
    );
    let cbor = json_to_cbor(br#"{"":"","":""}"#, JsonToCborOptions::default()).unwrap();
    assert_eq!(cbor, hex("d9d9f7a14040"));
}

#[test]
fn floats_that_kubernetes_refuses() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for h in [
        "f97c00",
        "f97e00",
        "f9fc00",
        "f97c01",
        "fa7f800000",
        "fa7fc00000",
        "faff800000",
        "fb7ff0000000000000",
        "fb7ff8000000000000",
        "fbfff0000000000000",
    ] {
        assert_eq!(cbor_err(h, &hex(h)), Reason::NanOrInfinity, "{h}");
        // Also nested.
        let mut v = hex("a16178");
        v.extend(hex(h));
        assert_eq!(cbor_err(h, &v), Reason::NanOrInfinity, "{h} nested");
    }
    assert_eq!(json_err("1e400", b"[1e400]"), Reason::NumberOutOfRange);
    assert_eq!(json_err("NaN", b"NaN"), Reason::Syntax);
    assert_eq!(json_err("Infinity", b"[Infinity]"), Reason::Syntax);
}

#[test]
fn bignums_undefined_simple() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(
        cbor_err("c2", &hex("c249010000000000000000")),
        Reason::UnsupportedTag
    );
    assert_eq!(
        cbor_err("c3", &hex("c349010000000000000000")),
        Reason::UnsupportedTag
    );
    assert_eq!(cbor_err("f7", &hex("f7")), Reason::UnsupportedSimple);
    assert_eq!(cbor_err("[f7]", &hex("81f7")), Reason::UnsupportedSimple);
    assert_eq!(cbor_err("f0", &hex("f0")), Reason::UnsupportedSimple);
    assert_eq!(cbor_err("f818", &hex("f818")), Reason::Syntax);
    assert_eq!(
        cbor_err("1b max", &hex("1bffffffffffffffff")),
        Reason::NumberOutOfRange
    );
    assert_eq!(cbor_err("int key", &hex("a10102")), Reason::InvalidMapKey);
    assert_eq!(cbor_err("reserved ai", &hex("1c")), Reason::Syntax);
    assert_eq!(cbor_err("stray break", &hex("ff")), Reason::Syntax);
    assert_eq!(cbor_err("1f", &hex("1f")), Reason::Syntax);
    assert_eq!(cbor_err("tag0 on int", &hex("c001")), Reason::InvalidTime);
    assert_eq!(
        cbor_err("tag1 on text", &hex("c16161")),
        Reason::InvalidTime
    );
    assert_eq!(
        cbor_err("tag1 year 10000", &hex("c11b000000ec00000000")),
        Reason::InvalidTime
    );
}

#[test]
fn invalid_utf8_in_text_strings() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for h in [
        "62fffe",
        "63e6b062",
        "63eda080",
        "a162ff6101",
        "7f62c3bc61c3ff",
        "7f61c361bcff",
    ] {
        assert_eq!(cbor_err(h, &hex(h)), Reason::InvalidUtf8, "{h}");
    }
    // Byte strings are repaired Go's way instead: one U+FFFD per bad byte.
    let json = cbor_to_json(&hex("4461e6b062"), CborToJsonOptions::default()).unwrap();
    assert_eq!(json, "\"a\u{FFFD}\u{FFFD}b\"".as_bytes());
    // JSON input: lone surrogates and bad bytes become U+FFFD, as in Go.
    let cbor = json_to_cbor(
        br#"["\ud800","\udc00x","\ud83d\ude00","\ud800\u0041"]"#,
        JsonToCborOptions::default(),
    )
    .unwrap();
    let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        "[\"\u{FFFD}\",\"\u{FFFD}x\",\"😀\",\"\u{FFFD}A\"]"
    );
    let cbor = json_to_cbor(b"\"a\xe6\xb0b\"", JsonToCborOptions::default()).unwrap();
    assert_eq!(
        cbor,
        [
            &[0xd9, 0xd9, 0xf7, 0x48, b'a'][..],
            "\u{FFFD}\u{FFFD}".as_bytes(),
            b"b"
        ]
        .concat()
    );
}

#[test]
fn trailing_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(cbor_err("0102", &hex("0102")), Reason::TrailingData);
    assert_eq!(cbor_err("a0ff", &hex("a0ff")), Reason::TrailingData);
    assert_eq!(json_err("{}{}", b"{} {}"), Reason::TrailingData);
    assert_eq!(json_err("1 2", b"1 2"), Reason::TrailingData);
    assert_eq!(json_err("empty", b"  "), Reason::Truncated);
    assert_eq!(cbor_err("empty", b""), Reason::Truncated);
    // Whitespace after JSON is fine.
    assert!(json_to_cbor(b"{}\n\n", JsonToCborOptions::default()).is_ok());
}

/// `head`, then `n` items from `item` separated by commas, then `]}`.
fn object_with_items(head: &str, n: usize, item: impl Fn(usize) -> String) -> Vec<u8> {
    let mut json = head.as_bytes().to_vec();
    for i in 0..n {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(item(i).as_bytes());
    }
    json.extend_from_slice(b"]}");
    json
}

#[test]
fn big_input_in_small_memory_and_window() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A 200k-element array of objects, streamed with a 16 KiB window: the
    // transcoder's own buffer stays near the window.
    let json = object_with_items("{\"items\":[", 200_000, |i| {
        format!("{{\"name\":\"pod-{i}\",\"n\":{i},\"f\":1.5}}")
    });
    let window = 16 * 1024;
    let mut t = JsonToCbor::new(JsonToCborOptions {
        window,
        dedupe_keys: false,
        ..Default::default()
    });
    let mut cbor = Vec::new();
    let mut max_buffered = 0;
    for chunk in json.chunks(4096) {
        t.feed(chunk, &mut cbor).unwrap();
        max_buffered = max_buffered.max(t.buffered());
    }
    t.finish(&mut cbor).unwrap();
    assert!(max_buffered <= window + 4096, "buffered {max_buffered}");
    // Open containers switched to indefinite length, and it decodes back.
    assert_eq!(&cbor[..5], &[0xd9, 0xd9, 0xf7, 0xbf, 0x45]);
    let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
    assert_eq!(json_canon(&back), json_canon(&json));
    // A single huge string also streams (as an indefinite string).
    let mut s = b"\"".to_vec();
    s.extend(std::iter::repeat_n(b'x', 100_000));
    s.extend_from_slice("é\\n\"".as_bytes());
    for mode in [
        cborgate::codec::StringMode::Bytes,
        cborgate::codec::StringMode::Text,
    ] {
        let cbor = json_to_cbor(
            &s,
            JsonToCborOptions {
                window: 1000,
                strings: mode,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(cbor[3] & 31, 31, "indefinite string");
        let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
        assert_eq!(json_canon(&back), json_canon(&s));
    }
}

#[test]
fn a_list_past_the_window_goes_out_an_element_at_a_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 80,000 items of about 55 bytes (4.4 MB of JSON, 3 MB of CBOR) with the
    // default 1 MiB window.
    // Once the list has gone indefinite, completed items go out as soon as
    // 16 KiB of their content is buffered, not when the window fills again;
    // with heads and a 4 KiB piece, the buffer stays under 24 KiB.
    let json = object_with_items("{\"kind\":\"List\",\"items\":[", 80_000, |i| {
        format!("{{\"name\":\"pod-{i}\",\"labels\":{{\"app\":\"web\"}},\"n\":{i}}}")
    });
    let whole = json_to_cbor(&json, JsonToCborOptions::default()).unwrap();
    let mut t = JsonToCbor::new(JsonToCborOptions::default());
    let mut cbor = Vec::new();
    let mut max_after_first_flush = 0;
    for chunk in json.chunks(4096) {
        t.feed(chunk, &mut cbor).unwrap();
        if !cbor.is_empty() {
            max_after_first_flush = max_after_first_flush.max(t.buffered());
        }
    }
    let before_finish = cbor.len();
    t.finish(&mut cbor).unwrap();
    assert!(
        before_finish > 2 << 20,
        "only {before_finish} bytes out before the end"
    );
    assert!(
        max_after_first_flush < 24 * 1024,
        "buffered {max_after_first_flush} after the list went indefinite"
    );
    // The same bytes as in one piece: the object and the list (open when the
    // window filled) indefinite, every item definite.
    assert_eq!(cbor, whole);
    assert_eq!(&cbor[..4], &[0xd9, 0xd9, 0xf7, 0xbf]);
    let back = cbor_to_json(&cbor, CborToJsonOptions::default()).unwrap();
    assert_eq!(json_canon(&back), json_canon(&json));
}
