//! Response compression, as a CBOR-enabled kube-apiserver does it
//! (`responsewriters/writers.go`, `deferredResponseWriter`): gzip at Go's `BestSpeed` for a
//! client whose `Accept-Encoding` takes gzip, when the body is more than 128 KiB;
//! watches never. Pure: the proxy only carries it out.
//!
//! The apiserver holds the response head until it has seen the first write, so it
//! knows the size; cborgate writes the head before any of the body has arrived, so it
//! decides from the upstream's JSON `Content-Length` when there is one (JSON of more than
//! 128 KiB: the CBOR is about 20% smaller, so a JSON body just above the threshold may
//! make CBOR just below it, compressed where the apiserver would not), and compresses
//! a body of unknown length (chunked) whenever the client takes gzip. Go's net/http
//! sends a `Content-Length` for bodies it wrote in one buffer (up to 4 KiB) and chunks
//! the rest, so a body between 4 and 128 KiB is compressed where the apiserver would not.

/// `defaultGzipThresholdBytes`: bodies up to this long go uncompressed (the apiserver
/// compresses when its first write is longer: `len(p) > defaultGzipThresholdBytes`).
pub const GZIP_THRESHOLD: u64 = 128 * 1024;

/// The zlib level of the apiserver's `defaultGzipContentEncodingLevel`, `gzip.BestSpeed`.
///
/// Not 1: the zlib cborgate links (zlib-rs, which follows zlib-ng) spends level 1 on
/// `deflate_quick`, which writes static-Huffman blocks only, where Go's `BestSpeed`
/// writes dynamic-Huffman ones. Level 2 is zlib-rs's `deflate_fast`, greedy matching with
/// dynamic-Huffman blocks. Measured against a real CBOR-enabled kube-apiserver 1.36.2 on
/// the same objects (`tests/data/corpus/objects/cmlist-320`, 320 ConfigMaps of about
/// 1 KB; and 2,000 of about 20 KB, a 46.75 MB CBOR list): level 1 made 1.21 and 1.25
/// times the apiserver's gzip, level 2 makes 0.93 and 0.94 times, and costs 0.24-0.25 CPU
/// seconds per 46.75 MB list where the apiserver's gzip costs 0.36-0.44. The CBOR before
/// compression is the apiserver's size (within 0.1%), so the level was the whole gap.
pub const GZIP_LEVEL: u32 = 2;

/// Whether an `Accept-Encoding` value (all lines joined with `", "`) takes gzip: a
/// `gzip` (or `x-gzip`, or `*`) coding with a non-zero `q`. An explicit `gzip;q=0`
/// refuses it whatever `*` says. (The apiserver itself, `negotiateContentEncoding`,
/// takes only a bare `gzip` token: not `gzip;q=1`, `x-gzip` or `*`. client-go sends a
/// bare `gzip`, which both read alike; for the rest cborgate follows RFC 9110.)
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(value) = accept_encoding else {
        return false;
    };
    let mut gzip: Option<bool> = None;
    let mut star: Option<bool> = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let mut q_positive = true;
        for param in parts {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            if k.trim().eq_ignore_ascii_case("q") {
                q_positive = q_is_positive(v.trim());
            }
        }
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            // The first explicit mention that says no wins over any that says yes.
            gzip = Some(gzip.unwrap_or(true) && q_positive);
        } else if coding == "*" {
            star = Some(star.unwrap_or(true) && q_positive);
        }
    }
    gzip.or(star).unwrap_or(false)
}

/// A `qvalue` (RFC 9110 §12.4.2) above zero; anything that does not parse counts as
/// `q=1`, as most servers read it.
fn q_is_positive(v: &str) -> bool {
    match v.parse::<f64>() {
        Ok(q) => q > 0.0,
        Err(_) => true,
    }
}

/// Whether a transcoded (non-watch) response is compressed: `client_gzip` (the client
/// takes gzip and compression is on, [`Plan::client_gzip`](super::Plan::client_gzip)),
/// and the upstream's body is longer than [`GZIP_THRESHOLD`] or of unknown length.
pub fn compresses(client_gzip: bool, upstream_len: Option<u64>) -> bool {
    client_gzip && upstream_len.is_none_or(|n| n > GZIP_THRESHOLD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_table() {
        #[rustfmt::skip]
        let cases: &[(Option<&str>, bool)] = &[
            (None, false),
            (Some(""), false),
            (Some("gzip"), true),
            (Some("GZIP"), true),
            (Some("x-gzip"), true),
            (Some("gzip, deflate"), true),
            (Some("deflate, br"), false),
            (Some("identity"), false),
            (Some("gzip;q=0"), false),
            (Some("gzip; q=0.0"), false),
            (Some("gzip;q=0.000"), false),
            (Some("gzip;q=0.5"), true),
            (Some("gzip;q=1"), true),
            (Some("gzip ; Q=0.001"), true),
            (Some("gzip;q=junk"), true),
            (Some("*"), true),
            (Some("*;q=0"), false),
            (Some("br, *;q=0.1"), true),
            (Some("gzip;q=0, *"), false),
            (Some("*;q=0, gzip"), true),
            (Some("gzip, gzip;q=0"), false),
            (Some("deflate, gzip;level=9"), true),
            (Some("gzipx"), false),
        ];
        for (value, want) in cases {
            assert_eq!(accepts_gzip(*value), *want, "{value:?}");
        }
    }

    #[test]
    fn compression_table() {
        const T: u64 = GZIP_THRESHOLD;
        #[rustfmt::skip]
        let cases: &[(bool, Option<u64>, bool)] = &[
            // (client takes gzip and compression is on, upstream Content-Length) → gzip
            (true, None, true),
            (true, Some(T + 1), true),
            (true, Some(T), false),
            (true, Some(T - 1), false),
            (true, Some(0), false),
            (false, None, false),
            (false, Some(T * 10), false),
        ];
        for &(client, len, want) in cases {
            assert_eq!(compresses(client, len), want, "{client} {len:?}");
        }
    }
}
