//! Shared by the fuzz targets: options and chunk boundaries chosen by the
//! input's first two bytes, and drivers that feed a transcoder in pieces.
#![allow(dead_code)]

use cborgate::codec::{
    CborToJson, CborToJsonOptions, CodecError, JsonToCbor, JsonToCborOptions, Scan, Transcoder,
    DEFAULT_WINDOW,
};

/// Streaming windows to try: the default and some tiny ones, so that
/// indefinite-length output and string chunking happen on small inputs.
pub const WINDOWS: [usize; 4] = [DEFAULT_WINDOW, 0, 1, 16];

/// Base piece sizes selected by the low four bits of the chunk byte.
const SIZES: [usize; 16] = [1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 64, 127, 1000, 4096];

/// Split `data` into pieces: `sel` picks a base size (byte-at-a-time included);
/// with the top bit set, sizes vary pseudo-randomly in `0..=2*base` (empty
/// pieces included), seeded by `sel`.
pub fn chunks(data: &[u8], sel: u8) -> Vec<&[u8]> {
    let base = SIZES[(sel & 15) as usize];
    let vary = sel & 0x80 != 0;
    let mut seed: u32 = 0x9e37_79b9 ^ (sel as u32).wrapping_mul(0x0101_0101);
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = if vary {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as usize) % (2 * base + 1)
        } else {
            base
        };
        let (a, b) = rest.split_at(n.min(rest.len()));
        out.push(a);
        rest = b;
    }
    out
}

/// Feed `pieces` then finish; the output produced so far is returned even on
/// error, with the error.
pub fn drive<T: Transcoder>(t: &mut T, pieces: &[&[u8]]) -> (Vec<u8>, Result<(), CodecError>) {
    let mut out = Vec::new();
    for p in pieces {
        if let Err(e) = t.feed(p, &mut out) {
            // A failed transcoder stays failed.
            assert_eq!(t.feed(b"{", &mut out), Err(e), "error not sticky");
            assert_eq!(t.finish(&mut out), Err(e), "error not sticky at finish");
            return (out, Err(e));
        }
    }
    let r = t.finish(&mut out);
    (out, r)
}

pub fn json_to_cbor_pieces(
    opts: JsonToCborOptions,
    pieces: &[&[u8]],
) -> (Vec<u8>, Result<(), CodecError>, u64) {
    json_to_cbor_pieces_at(opts, Scan::detect(), pieces)
}

/// [`json_to_cbor_pieces`] with the string scanner at `level` (the portable
/// one is the reference for the vector ones).
pub fn json_to_cbor_pieces_at(
    opts: JsonToCborOptions,
    level: Scan,
    pieces: &[&[u8]],
) -> (Vec<u8>, Result<(), CodecError>, u64) {
    let mut t = JsonToCbor::new(opts);
    t.set_scan(level);
    let (out, r) = drive(&mut t, pieces);
    (out, r, t.documents())
}

pub fn cbor_to_json_pieces(
    opts: CborToJsonOptions,
    pieces: &[&[u8]],
) -> (Vec<u8>, Result<(), CodecError>, u64) {
    let mut t = CborToJson::new(opts);
    let (out, r) = drive(&mut t, pieces);
    (out, r, t.documents())
}
