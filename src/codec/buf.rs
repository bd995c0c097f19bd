//! Appending to output buffers with fixed-size copies: the one place where
//! the codec writes into a `Vec`'s spare capacity.
//!
//! Most strings and runs are short. Copying a fixed number of bytes (known at
//! compile time, so a couple of vector moves) and then setting the length to
//! the part wanted is cheaper than an exact, variable-length copy, which is a
//! call to `memcpy`. The source must hold the fixed number of bytes, which is
//! why callers take this path only when their input goes on far enough.

use std::ptr;

/// Append the first `n` bytes of `chunk` to `out` (`n` is clamped to `N`).
/// All `N` bytes are copied into the spare capacity; the length covers `n`.
#[inline(always)]
pub(crate) fn extend_prefix<const N: usize>(out: &mut Vec<u8>, chunk: &[u8; N], n: usize) {
    out.reserve(N);
    let at = out.len();
    // SAFETY: `reserve(N)` leaves at least `N` bytes of spare capacity from
    // `at` on, so the destination is valid for `N` writes; `chunk` is `N`
    // initialised bytes that cannot overlap the spare capacity (`out` is
    // borrowed mutably, `chunk` shared). After the copy the bytes
    // `at..at + N` are initialised, and the new length `at + min(n, N)` ends
    // within them.
    unsafe {
        ptr::copy_nonoverlapping(chunk.as_ptr(), out.as_mut_ptr().add(at), N);
        out.set_len(at + n.min(N));
    }
}

/// Append `src[a..b]`. A run of at most `N` bytes whose source goes on for
/// `N` bytes from `a` is copied as a fixed `N` bytes (a few moves, no call)
/// and cut back; anything else is copied exactly.
#[inline(always)]
pub(crate) fn extend_run<const N: usize>(out: &mut Vec<u8>, src: &[u8], a: usize, b: usize) {
    if b - a <= N {
        if let Some(chunk) = src.get(a..a + N).and_then(|c| <&[u8; N]>::try_from(c).ok()) {
            extend_prefix(out, chunk, b - a);
            return;
        }
    }
    out.extend_from_slice(&src[a..b]);
}

/// Append `head`, then the first `n` bytes of `chunk` (`n` clamped to `N`).
#[inline(always)]
pub(crate) fn extend_head_prefix<const N: usize>(
    out: &mut Vec<u8>,
    head: u8,
    chunk: &[u8; N],
    n: usize,
) {
    out.reserve(N + 1);
    let at = out.len();
    // SAFETY: as in `extend_prefix`, with `N + 1` bytes reserved: `head` goes
    // to `at` and the `N` bytes of `chunk` to `at + 1..at + 1 + N`, all within
    // the spare capacity and initialised afterwards; the new length
    // `at + 1 + min(n, N)` ends within them.
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        dst.write(head);
        ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(1), N);
        out.set_len(at + 1 + n.min(N));
    }
}

/// Append `"` `chunk[..n]` `"` (`n` clamped to 24), after a comma if
/// `comma` and followed by a colon if `colon`: a JSON string or key whose
/// text needs no escaping.
#[inline(always)]
pub(crate) fn extend_quoted(
    out: &mut Vec<u8>,
    chunk: &[u8; 24],
    n: usize,
    comma: bool,
    colon: bool,
) {
    out.reserve(28);
    let at = out.len();
    let p = comma as usize;
    let e = p + 1 + n.min(24);
    // SAFETY: `reserve(28)` leaves at least 28 bytes of spare capacity from
    // `at` on, and every write below lands in `at..at + 28`: the comma (or
    // the quote) at 0, the quote at `p <= 1`, the 24 bytes of `chunk` at
    // `p + 1..p + 25`, the closing quote at `e <= 26` and the colon at
    // `e + 1 <= 27`. Together they initialise every byte of `at..=at + e + 1`,
    // and the new length `at + e + 1 + colon` ends within them. `chunk`
    // cannot overlap the spare capacity (`out` is borrowed mutably).
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        dst.write(b',');
        dst.add(p).write(b'"');
        ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(p + 1), 24);
        dst.add(e).write(b'"');
        dst.add(e + 1).write(b':');
        out.set_len(at + e + 1 + colon as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_exactly_the_prefix() {
        let chunk: [u8; 8] = *b"abcdefgh";
        for n in 0..=10 {
            let mut out = b"xy".to_vec();
            extend_prefix(&mut out, &chunk, n);
            assert_eq!(out, [b"xy", &chunk[..n.min(8)]].concat(), "n = {n}");
            let mut out = Vec::new();
            extend_head_prefix(&mut out, 0x45, &chunk, n);
            assert_eq!(out, [&[0x45u8][..], &chunk[..n.min(8)]].concat(), "n = {n}");
            // The next append starts right after.
            out.push(b'!');
            assert_eq!(out.len(), 2 + n.min(8));
            assert_eq!(out.last(), Some(&b'!'));
        }
    }

    #[test]
    fn appends_exactly_the_run() {
        let src: Vec<u8> = (0..40u8).collect();
        for a in 0..=src.len() {
            for b in a..=src.len() {
                let mut out = b"xy".to_vec();
                extend_run::<8>(&mut out, &src, a, b);
                assert_eq!(out, [b"xy", &src[a..b]].concat(), "a = {a}, b = {b}");
            }
        }
    }

    #[test]
    fn quotes_exactly_the_prefix() {
        let chunk: [u8; 24] = *b"abcdefghijklmnopqrstuvwx";
        for n in 0..=26 {
            for (comma, colon) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut out = b"[".to_vec();
                extend_quoted(&mut out, &chunk, n, comma, colon);
                let text = std::str::from_utf8(&chunk[..n.min(24)]).unwrap();
                let want = format!(
                    "[{}\"{text}\"{}",
                    if comma { "," } else { "" },
                    if colon { ":" } else { "" }
                );
                assert_eq!(
                    out,
                    want.as_bytes(),
                    "n = {n}, comma {comma}, colon {colon}"
                );
            }
        }
    }
}
