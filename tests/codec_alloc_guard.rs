//! Regression guard that does not depend on wall time: allocations per
//! transcoded document, for each codec path, against the committed baseline
//! in `bench/alloc-baseline.txt`. A path that allocates 50% more than its
//! baseline (so, any doubling; any allocation at all where the baseline is 0)
//! fails. To update the baseline after a deliberate change, run
//! `CBORGATE_WRITE_ALLOC_BASELINE=1 cargo test --test codec_alloc_guard`.

#[path = "../bench/gen.rs"]
#[allow(dead_code)]
mod gen;

use cborgate::codec::{CborToJson, CborToJsonOptions, JsonToCbor, JsonToCborOptions, Transcoder};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const DOCS: u64 = 5;

/// Allocations per document: `fresh` makes a new transcoder and output
/// buffer for each document (as the proxy does per request); otherwise one
/// transcoder and buffer are reused (`reset()`) after a warm-up.
fn per_doc(input: &[u8], make: &dyn Fn() -> Box<dyn Transcoder>, fresh: bool) -> f64 {
    let run = |t: &mut Box<dyn Transcoder>, out: &mut Vec<u8>| {
        out.clear();
        for piece in input.chunks(64 * 1024) {
            t.feed(piece, out).unwrap();
        }
        t.finish(out).unwrap();
    };
    let mut t = make();
    let mut out = Vec::new();
    for _ in 0..2 {
        run(&mut t, &mut out);
        t.reset();
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..DOCS {
        if fresh {
            let mut t = make();
            let mut out = Vec::new();
            run(&mut t, &mut out);
        } else {
            run(&mut t, &mut out);
            t.reset();
        }
    }
    (ALLOCS.load(Ordering::Relaxed) - before) as f64 / DOCS as f64
}

type Make = Box<dyn Fn() -> Box<dyn Transcoder>>;

fn j2c(watch: bool, dedupe_keys: bool) -> Make {
    Box::new(move || {
        Box::new(JsonToCbor::new(JsonToCborOptions {
            watch,
            dedupe_keys,
            ..Default::default()
        }))
    })
}

fn c2j(sequence: bool, dedupe_keys: bool) -> Make {
    Box::new(move || {
        Box::new(CborToJson::new(CborToJsonOptions {
            sequence,
            dedupe_keys,
            ..Default::default()
        }))
    })
}

#[test]
fn allocations_per_document_stay_at_the_baseline() {
    let list = gen::pod_list(100);
    let watch = gen::watch_stream(200);
    let cbor_list = cborgate::codec::json_to_cbor(&list, JsonToCborOptions::default()).unwrap();
    let cbor_watch = cborgate::codec::json_to_cbor(
        &watch,
        JsonToCborOptions {
            watch: true,
            ..Default::default()
        },
    )
    .unwrap();
    // A list of ConfigMaps with `binaryData`, written with their kind's `[]byte` fields
    // (tag 22 and the bytes), and a ConfigMap body whose untagged byte strings are base64
    // text, read with them.
    let cms = configmap_list(100);
    let cm_schema = cborgate::negotiate::byte_fields::typed_response(&configmaps_route());
    let cm_body = cborgate::codec::json_to_cbor(
        br#"{"kind":"ConfigMap","binaryData":{"a":"AAEC//4=","b":"aGVsbG8gd29ybGQ="}}"#,
        JsonToCborOptions::default(),
    )
    .unwrap();
    let cases: Vec<(&str, &[u8], Make)> = vec![
        (
            "json_to_cbor+bytes configmaplist-100",
            &cms,
            Box::new(move || {
                Box::new(JsonToCbor::new(JsonToCborOptions {
                    dedupe_keys: false,
                    schema: cm_schema,
                    ..Default::default()
                }))
            }),
        ),
        (
            "cbor_to_json+bytes configmap",
            &cm_body,
            Box::new(move || {
                Box::new(CborToJson::new(CborToJsonOptions {
                    schema: cm_schema,
                    ..Default::default()
                }))
            }),
        ),
        ("json_to_cbor podlist-100", &list, j2c(false, false)),
        ("json_to_cbor+dedupe podlist-100", &list, j2c(false, true)),
        ("json_to_cbor watch-200", &watch, j2c(true, false)),
        ("cbor_to_json podlist-100", &cbor_list, c2j(false, false)),
        (
            "cbor_to_json+dedupe podlist-100",
            &cbor_list,
            c2j(false, true),
        ),
        ("cbor_to_json watch-200", &cbor_watch, c2j(true, false)),
    ];
    let mut measured = Vec::new();
    for (name, input, make) in &cases {
        measured.push((
            format!("{name} reused"),
            per_doc(input, make.as_ref(), false),
        ));
        measured.push((format!("{name} fresh"), per_doc(input, make.as_ref(), true)));
    }
    check(measured);
    // The breadth scanner (the hold's, docs/wire.md §2b): its stack, once, and nothing
    // per byte, whatever the body's size or cuts.
    for input in [&list, &watch] {
        let before = ALLOCS.load(Ordering::Relaxed);
        let mut scan = cborgate::codec::BreadthScanner::new(1024, 10_000);
        for byte in input.chunks(1) {
            scan.feed(byte);
        }
        assert_eq!(scan.verdict(), cborgate::codec::Breadth::Within);
        let allocs = ALLOCS.load(Ordering::Relaxed) - before;
        assert!(allocs <= 1, "the breadth scanner allocated {allocs} times");
    }
}

/// `/api/v1/namespaces/a/configmaps`, as a route.
fn configmaps_route() -> cborgate::negotiate::route::ResourceRoute {
    match cborgate::negotiate::Route::classify("/api/v1/namespaces/a/configmaps") {
        cborgate::negotiate::Route::Resource(r) => r,
        other => panic!("{other:?}"),
    }
}

/// A ConfigMapList of `n` items, each with three `binaryData` values.
fn configmap_list(n: usize) -> Vec<u8> {
    let items: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"metadata":{{"name":"cm-{i}","namespace":"a"}},"data":{{"k":"v"}},"binaryData":{{"a":"AAEC//4=","b":"{}","e":""}}}}"#,
                "QUJD".repeat(i % 50)
            )
        })
        .collect();
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"1"}},"items":[{}]}}"#,
        items.join(",")
    )
    .into_bytes()
}

fn check(measured: Vec<(String, f64)>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/alloc-baseline.txt");
    if std::env::var_os("CBORGATE_WRITE_ALLOC_BASELINE").is_some() {
        let mut text = String::from(
            "# allocations per document (tab-separated); checked by tests/codec_alloc_guard.rs\n",
        );
        for (name, v) in &measured {
            text.push_str(&format!("{name}\t{v}\n"));
        }
        std::fs::write(path, text).unwrap();
        return;
    }
    let baseline = std::fs::read_to_string(path).expect("bench/alloc-baseline.txt");
    for (name, got) in measured {
        let want: f64 = baseline
            .lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                l.split_once('\t')
                    .filter(|(n, _)| *n == name)
                    .map(|(_, v)| v.parse().unwrap())
            })
            .unwrap_or_else(|| panic!("{name}: no baseline"));
        println!("{name}: {got} allocations per document (baseline {want})");
        assert!(
            got <= want * 1.5,
            "{name}: {got} allocations per document, baseline {want}"
        );
    }
}
