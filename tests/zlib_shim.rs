//! flate2 as pingora-core builds it: its C-zlib backend (pingora-core 0.9.1 asks for
//! `features = ["zlib-ng"]`) on cborgate's libz-ng-sys shim (shims/libz-ng-sys,
//! zlib in Rust). Each call the shim forwards is exercised here: compress and
//! decompress, reset, level change and dictionaries, and a gzip stream made by
//! another zlib decodes.

use flate2::read::{GzDecoder, GzEncoder};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::io::Read;

fn payload() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..20_000u32 {
        out.extend_from_slice(
            format!("{{\"kind\":\"Pod\",\"n\":{i},\"x\":{}}}\n", i * 7919 % 1013).as_bytes(),
        );
    }
    out
}

#[test]
fn gzip_round_trips_through_the_shim() {
    let data = payload();
    let mut gz = Vec::new();
    GzEncoder::new(&data[..], Compression::default())
        .read_to_end(&mut gz)
        .unwrap();
    assert!(gz.len() < data.len() / 4, "{} of {}", gz.len(), data.len());
    let mut back = Vec::new();
    GzDecoder::new(&gz[..]).read_to_end(&mut back).unwrap();
    assert_eq!(back, data);
}

/// `{"kind":"Status","apiVersion":"v1"}\n` four times, gzipped by Python's zlib
/// (`zlib.compressobj(6, zlib.DEFLATED, 31)`).
#[test]
fn a_gzip_stream_from_another_zlib_decodes() {
    let gz: [u8; 58] = [
        31, 139, 8, 0, 0, 0, 0, 0, 0, 3, 171, 86, 202, 206, 204, 75, 81, 178, 82, 10, 46, 73, 44,
        41, 45, 86, 210, 81, 74, 44, 200, 12, 75, 45, 42, 206, 204, 207, 3, 138, 150, 25, 42, 213,
        114, 85, 211, 81, 13, 0, 140, 210, 34, 53, 144, 0, 0, 0,
    ];
    let mut back = String::new();
    GzDecoder::new(&gz[..]).read_to_string(&mut back).unwrap();
    assert_eq!(
        back,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\"}\n".repeat(4)
    );
}

/// `set_dictionary` exists only with a C-zlib backend (`flate2-1.1.11/src/mem.rs`
/// lines 270 and 540: `#[cfg(feature = "any_c_zlib")]`), so this compiling at all
/// shows which backend flate2 has; running it checks the shim's dictionary,
/// level, reset and corrupt-input paths.
#[test]
fn dictionaries_levels_resets_and_errors_go_through_the_shim() {
    let dict = b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":";
    let data = b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}";

    let mut c = Compress::new(Compression::best(), true);
    let adler = c.set_dictionary(dict).unwrap();
    c.set_level(Compression::fast()).unwrap();
    let mut z = Vec::with_capacity(256);
    assert_eq!(
        c.compress_vec(data, &mut z, FlushCompress::Finish).unwrap(),
        Status::StreamEnd
    );

    let mut d = Decompress::new(true);
    let mut out = Vec::with_capacity(256);
    // zlib stops and names the dictionary's checksum; then it goes on.
    match d.decompress_vec(&z, &mut out, FlushDecompress::Finish) {
        Err(e) => assert_eq!(e.needs_dictionary(), Some(adler)),
        Ok(s) => panic!("decompressed without the dictionary: {s:?}"),
    }
    assert_eq!(d.set_dictionary(dict).unwrap(), adler);
    let used = d.total_in() as usize;
    assert_eq!(
        d.decompress_vec(&z[used..], &mut out, FlushDecompress::Finish)
            .unwrap(),
        Status::StreamEnd
    );
    assert_eq!(&out[..], &data[..]);

    // Reset both ends (no dictionary after a reset) and go again.
    c.reset();
    let mut z2 = Vec::with_capacity(256);
    c.compress_vec(b"again", &mut z2, FlushCompress::Finish)
        .unwrap();
    d.reset(true);
    let mut out2 = Vec::with_capacity(64);
    assert_eq!(
        d.decompress_vec(&z2, &mut out2, FlushDecompress::Finish)
            .unwrap(),
        Status::StreamEnd
    );
    assert_eq!(out2, b"again");

    // A corrupt raw deflate stream is an error, not a panic or garbage.
    let mut raw = Decompress::new(false);
    let mut out3 = Vec::with_capacity(64);
    assert!(raw
        .decompress_vec(b"\xff\xff\xff\xff", &mut out3, FlushDecompress::Finish)
        .is_err());
}
