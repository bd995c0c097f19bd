//! JSON → CBOR on arbitrary bytes.
//!
//! Input: `[flags, chunking, json...]`.
//! - flags bit 0: watch stream; bits 1–2: window (see `WINDOWS`); bit 3:
//!   duplicate-key detection off; bit 4: text strings instead of byte strings.
//! - chunking: how the JSON is cut into pieces (see `common::chunks`).
//!
//! Checks: no panic; the breadth scanner's verdict (limit `flags >> 5`) the same whole
//! and in pieces; the same outcome (output, or error reason) whether fed
//! whole or in pieces, and with the portable string scanner as with the
//! CPU's vector one; and on success the CBOR decodes with `CborToJson`
//! (sequence mode for watch streams) into as many items as were encoded.
#![no_main]

#[path = "common.rs"]
mod common;

use cborgate::codec::{BreadthScanner, CborToJsonOptions, JsonToCborOptions, Scan, StringMode};
use common::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [flags, sel, json @ ..] = data else {
        return;
    };
    let opts = JsonToCborOptions {
        watch: flags & 1 != 0,
        window: WINDOWS[((flags >> 1) & 3) as usize],
        dedupe_keys: flags & 8 == 0,
        strings: if flags & 16 != 0 {
            StringMode::Text
        } else {
            StringMode::Bytes
        },
        ..JsonToCborOptions::default()
    };

    // The hold's breadth scanner (docs/wire.md §2b) on the same bytes: the same verdict
    // at the same offset, whole or in pieces.
    let breadth = |pieces: &[&[u8]]| {
        let mut s = BreadthScanner::new(u64::from(flags >> 5), 64);
        for p in pieces {
            s.feed(p);
        }
        (s.verdict(), s.offset())
    };
    assert_eq!(
        breadth(&[json]),
        breadth(&chunks(json, *sel)),
        "breadth depends on chunking"
    );

    let (whole, whole_r, whole_docs) = json_to_cbor_pieces(opts, &[json]);
    let (split, split_r, split_docs) = json_to_cbor_pieces(opts, &chunks(json, *sel));
    // The portable scanner, in pieces: the same outcome as the vector one.
    let portable = json_to_cbor_pieces_at(opts, Scan::Portable, &chunks(json, *sel));
    assert_eq!(
        portable,
        (split.clone(), split_r, split_docs),
        "scanner levels differ"
    );
    match (whole_r, split_r) {
        (Ok(()), Ok(())) => {
            assert_eq!(whole, split, "output depends on chunking");
            assert_eq!(whole_docs, split_docs);
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.reason, b.reason, "error depends on chunking");
            return;
        }
        (a, b) => panic!("whole: {a:?}, in pieces: {b:?}"),
    }

    // The CBOR must decode. Tags 55799 add nesting levels the JSON did not
    // have, so allow a few more; duplicate keys survive when detection is off.
    let mut dopts = CborToJsonOptions {
        sequence: opts.watch,
        dedupe_keys: opts.dedupe_keys,
        ..CborToJsonOptions::default()
    };
    dopts.limits.max_depth += 4;
    let (_json, r, docs) = cbor_to_json_pieces(dopts, &[&whole]);
    if let Err(e) = r {
        panic!(
            "CBOR output does not decode: {e} (cbor {:02x?})",
            &whole[..whole.len().min(256)]
        );
    }
    assert_eq!(docs, whole_docs, "item count changed");
    let (_json2, r2, _) = cbor_to_json_pieces(
        CborToJsonOptions {
            input_len: Some(whole.len() as u64),
            ..dopts
        },
        &chunks(&whole, sel.rotate_left(3)),
    );
    assert_eq!(r2, Ok(()));
});
