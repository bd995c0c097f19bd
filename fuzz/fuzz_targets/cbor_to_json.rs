//! CBOR → JSON on arbitrary bytes.
//!
//! Input: `[flags, chunking, cbor...]`.
//! - flags bit 0: CBOR Sequence (watch); bit 1: duplicate-key detection off;
//!   bit 2: total input length known (`input_len`); bit 3: diagnostic notation
//!   shows UTF-8 byte strings as text.
//! - chunking: how the CBOR is cut into pieces (see `common::chunks`).
//!
//! Checks: no panic (also in `diag::diagnose`); the same outcome (output, or
//! error reason) whether fed whole or in pieces; and on success the JSON
//! re-encodes with `JsonToCbor` (watch mode for sequences) into as many items.
#![no_main]

#[path = "common.rs"]
mod common;

use cborgate::codec::diag::{diagnose, BytesAs};
use cborgate::codec::{CborToJsonOptions, JsonToCborOptions, Reason, DEFAULT_WINDOW};
use common::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [flags, sel, cbor @ ..] = data else {
        return;
    };
    let opts = CborToJsonOptions {
        sequence: flags & 1 != 0,
        dedupe_keys: flags & 2 == 0,
        input_len: (flags & 4 != 0).then_some(cbor.len() as u64),
        ..CborToJsonOptions::default()
    };
    let bytes_as = if flags & 8 != 0 {
        BytesAs::TextWhereValid
    } else {
        BytesAs::Hex
    };
    let _ = diagnose(cbor, bytes_as, opts.limits.max_depth);

    let (whole, whole_r, whole_docs) = cbor_to_json_pieces(opts, &[cbor]);
    let (split, split_r, split_docs) = cbor_to_json_pieces(opts, &chunks(cbor, *sel));
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

    // The JSON must re-encode.
    let eopts = JsonToCborOptions {
        watch: opts.sequence,
        ..JsonToCborOptions::default()
    };
    let (_cbor2, r, docs) = json_to_cbor_pieces(eopts, &[&whole]);
    match r {
        Ok(()) => assert_eq!(docs, whole_docs, "item count changed"),
        // A duplicate JSON key (byte keys that differ only in invalid UTF-8, or
        // detection off) is refused only once the first copy has streamed out.
        Err(e) if e.reason == Reason::DuplicateKey && whole.len() > DEFAULT_WINDOW => {}
        Err(e) => panic!(
            "JSON output does not re-encode: {e} (json {:?})",
            String::from_utf8_lossy(&whole[..whole.len().min(512)])
        ),
    }
});
