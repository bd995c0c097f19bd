//! Incremental UTF-8 handling with Go's rules. Input arrives in pieces that may
//! split a multi-byte sequence; up to three bytes are carried over.
//!
//! In lossy mode every byte that does not start a valid UTF-8 sequence becomes
//! one U+FFFD, exactly as Go's `encoding/json` does (`utf8.DecodeRune` consumes
//! one byte on error). This differs from `String::from_utf8_lossy`, which
//! replaces a maximal invalid subpart with a single U+FFFD. In strict mode the
//! first invalid byte is an error.
//!
//! Also the string scanner: where a plain run inside a JSON string ends (the
//! next `"`, `\`, control byte or, for the ASCII fast paths, non-ASCII
//! byte). The portable level reads eight bytes per step in a `u64` and is the
//! reference; on x86-64 SSE2 (part of the baseline) takes sixteen bytes per
//! step and AVX2, when runtime detection finds it, thirty-two once a run
//! outlasts the first sixteen. See [`Scan`].

/// Where validated text goes.
pub(crate) trait Utf8Sink {
    /// A run of valid UTF-8.
    fn valid(&mut self, bytes: &[u8]);
    /// One replacement character (lossy mode only).
    fn replacement(&mut self);
}

/// The bytes of U+FFFD.
pub(crate) const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// Expected total length and accepted range of the second byte for a lead byte.
fn lead_info(b: u8) -> Option<(usize, u8, u8)> {
    match b {
        0xC2..=0xDF => Some((2, 0x80, 0xBF)),
        0xE0 => Some((3, 0xA0, 0xBF)),
        0xE1..=0xEC | 0xEE..=0xEF => Some((3, 0x80, 0xBF)),
        0xED => Some((3, 0x80, 0x9F)),
        0xF0 => Some((4, 0x90, 0xBF)),
        0xF1..=0xF3 => Some((4, 0x80, 0xBF)),
        0xF4 => Some((4, 0x80, 0x8F)),
        _ => None,
    }
}

/// Carries an incomplete trailing sequence between pieces.
#[derive(Debug, Default, Clone)]
pub(crate) struct Utf8Stream {
    carry: [u8; 4],
    n: u8,
}

/// Returned in strict mode when invalid UTF-8 is found: how many bytes of the
/// current piece were consumed before the invalid sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub consumed: usize,
}

impl Utf8Stream {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no partial sequence is pending.
    pub fn is_clear(&self) -> bool {
        self.n == 0
    }

    /// Feed one piece. In lossy mode this never fails.
    pub fn push<S: Utf8Sink>(
        &mut self,
        mut data: &[u8],
        strict: bool,
        sink: &mut S,
    ) -> Result<(), Invalid> {
        let total = data.len();
        // First complete (or reject) a sequence carried over from the last piece.
        while self.n > 0 {
            let Some(&b) = data.first() else {
                return Ok(());
            };
            let n = self.n as usize;
            // Only valid leads are ever carried.
            let (len, lo, hi) = lead_info(self.carry[0]).unwrap_or((1, 0, 0));
            let ok = if n == 1 {
                (lo..=hi).contains(&b)
            } else {
                (0x80..=0xBF).contains(&b)
            };
            if ok {
                self.carry[n] = b;
                self.n += 1;
                data = &data[1..];
                if self.n as usize == len {
                    sink.valid(&self.carry[..len]);
                    self.n = 0;
                }
            } else {
                if strict {
                    return Err(Invalid {
                        consumed: total - data.len(),
                    });
                }
                // The lead and each continuation byte each become one U+FFFD;
                // `b` is examined again as a fresh start.
                for _ in 0..n {
                    sink.replacement();
                }
                self.n = 0;
            }
        }
        loop {
            match std::str::from_utf8(data) {
                Ok(_) => {
                    if !data.is_empty() {
                        sink.valid(data);
                    }
                    return Ok(());
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    if good > 0 {
                        sink.valid(&data[..good]);
                    }
                    match e.error_len() {
                        Some(bad) => {
                            if strict {
                                return Err(Invalid {
                                    consumed: total - data.len() + good,
                                });
                            }
                            for _ in 0..bad {
                                sink.replacement();
                            }
                            data = &data[good + bad..];
                        }
                        None => {
                            let rest = &data[good..];
                            self.carry[..rest.len()].copy_from_slice(rest);
                            self.n = rest.len() as u8;
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// The string ended: a pending partial sequence is invalid.
    pub fn end<S: Utf8Sink>(&mut self, strict: bool, sink: &mut S) -> Result<(), Invalid> {
        if self.n == 0 {
            return Ok(());
        }
        if strict {
            self.n = 0;
            return Err(Invalid { consumed: 0 });
        }
        for _ in 0..self.n {
            sink.replacement();
        }
        self.n = 0;
        Ok(())
    }

    pub fn reset(&mut self) {
        self.n = 0;
    }
}

/// Bytes that end a plain run inside a JSON string: `"`, `\` and control
/// characters (the bytes JSON requires to be escaped).
pub(super) static STR_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The eight bytes of `s` at `i`, little-endian.
#[inline(always)]
fn word(s: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(w)
}

/// Offset of the first byte in the word `v` that stops a plain run (`"`, `\`,
/// a control character and, with `ascii`, any byte >= 0x80), or `None`.
/// Only the lowest flagged byte is exact, which is the one wanted.
#[inline(always)]
fn first_stop(v: u64, ascii: bool) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let q = v ^ (ONES * b'"' as u64);
    let b = v ^ (ONES * b'\\' as u64);
    let hit = if ascii {
        // Every byte >= 0x80 is flagged by `v` itself, so the `& !x` terms
        // (which only clear bytes >= 0x80) are not needed: below the first
        // flagged byte all bytes are < 0x80 and no subtraction borrows.
        q.wrapping_sub(ONES) | b.wrapping_sub(ONES) | v.wrapping_sub(ONES * 0x20) | v
    } else {
        q.wrapping_sub(ONES) & !q | b.wrapping_sub(ONES) & !b | v.wrapping_sub(ONES * 0x20) & !v
    };
    let hit = hit & HIGH;
    (hit != 0).then(|| (hit.trailing_zeros() / 8) as usize)
}

/// A string scanner level. Every level finds exactly the same stop bytes, so
/// the output never depends on it. The portable level (eight bytes per step
/// in a `u64`) is the reference and what other CPUs run; tests ask for it to
/// compare the vector levels with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scan {
    /// Word at a time, any CPU.
    Portable,
    /// Sixteen bytes per step (x86-64 baseline).
    Sse2,
    /// Sixteen bytes for the first step (most strings are short and the
    /// check stays inline), then thirty-two per step (runtime-detected AVX2).
    Avx2,
}

impl Scan {
    /// The fastest level this CPU has.
    pub fn detect() -> Scan {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Scan::Avx2;
            }
            if std::arch::is_x86_feature_detected!("sse2") {
                return Scan::Sse2;
            }
        }
        Scan::Portable
    }

    /// Every level this CPU can run, the portable one first (for tests).
    pub fn available() -> Vec<Scan> {
        let best = Scan::detect();
        [Scan::Portable, Scan::Sse2, Scan::Avx2]
            .into_iter()
            .filter(|&s| s <= best)
            .collect()
    }
}

/// A [`Scan`] level this CPU is known to run: the field is private, so the
/// only ways to get one are [`Scanner::new`], which caps the level asked for
/// at what [`Scan::detect`] found, and [`DEFAULT_SCANNER`]. The `unsafe`
/// call of the AVX2 loop relies on this. (Whether the vector or the portable
/// code runs at all is the scanning functions' const parameter `V`, picked
/// once per piece from the level; SSE2 needs no detection on x86-64.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scanner(Scan);

impl Scanner {
    /// `want`, or the best level this CPU has if that is lower.
    pub(crate) fn new(want: Scan) -> Scanner {
        Scanner(want.min(Scan::detect()))
    }

    pub(crate) fn level(self) -> Scan {
        self.0
    }
}

/// The scanner of callers without a transcoder of their own to hold one
/// (CBOR → JSON, JSON text output). They call the vector code (`V` true:
/// SSE2 where the build target has it, the x86-64 baseline); a `Scanner`'s
/// level only decides whether the AVX2 loop may run, and this one's never
/// does, so it needs no detection.
const DEFAULT_SCANNER: Scanner = Scanner(Scan::Portable);

/// Offset of the first of the sixteen bytes of `block` that stops a plain
/// run (as [`first_stop`]), or `None`: with `V` (vector), one SSE2 compare
/// where the build target has SSE2 (every x86-64 target); two words
/// otherwise, and always without `V` (the portable reference).
#[inline(always)]
fn first_stop16<const V: bool>(block: &[u8; 16], ascii: bool) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if V {
        // SAFETY: `stop_mask16` requires only the SSE2 target feature, which
        // this code is compiled with (the `cfg` above: part of the x86-64
        // baseline); it reads exactly the sixteen bytes `block` refers to.
        let m = unsafe { x86::stop_mask16(block, ascii) };
        return (m != 0).then(|| m.trailing_zeros() as usize);
    }
    first_stop(word(block, 0), ascii).or_else(|| first_stop(word(block, 8), ascii).map(|at| at + 8))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_xor_si256, _mm_cmpeq_epi8,
        _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_xor_si128,
    };

    /// One bit per byte of `block`: set where the byte stops a plain run:
    /// `"`, `\`, a control character and, with `ascii`, any byte >= 0x80.
    #[target_feature(enable = "sse2")]
    #[inline]
    pub(super) fn stop_mask16(block: &[u8; 16], ascii: bool) -> u32 {
        // SAFETY: `block` is sixteen readable bytes; the load is unaligned.
        let v = unsafe { _mm_loadu_si128(block.as_ptr().cast::<__m128i>()) };
        let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let b = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Signed compare: bytes >= 0x80 are negative, so `< 0x20` takes them
        // too; without `ascii`, flipping the top bit first makes it unsigned.
        let c = if ascii {
            _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))
        } else {
            _mm_cmplt_epi8(
                _mm_xor_si128(v, _mm_set1_epi8(0x80u8 as i8)),
                _mm_set1_epi8(0xa0u8 as i8),
            )
        };
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c)) as u32
    }

    /// [`stop_mask16`] for thirty-two bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn stop_mask32(block: &[u8; 32], ascii: bool) -> u32 {
        // SAFETY: `block` is thirty-two readable bytes; the load is unaligned.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().cast::<__m256i>()) };
        let q = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let b = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        // As in `stop_mask16`, with `a < b` written as `b > a`.
        let c = if ascii {
            _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v)
        } else {
            _mm256_cmpgt_epi8(
                _mm256_set1_epi8(0xa0u8 as i8),
                _mm256_xor_si256(v, _mm256_set1_epi8(0x80u8 as i8)),
            )
        };
        _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(q, b), c)) as u32
    }

    /// The plain run at the start of `s`, thirty-two bytes per step while
    /// `s` has them; the rest (under 32 bytes) is left to the caller:
    /// returns `(run, true)` when a stop byte was found, `(checked, false)`
    /// otherwise.
    #[target_feature(enable = "avx2")]
    pub(super) fn run32(s: &[u8], ascii: bool) -> (usize, bool) {
        let mut i = 0;
        for block in s.chunks_exact(32) {
            let Ok(block) = <&[u8; 32]>::try_from(block) else {
                break;
            };
            let m = stop_mask32(block, ascii);
            if m != 0 {
                return (i + m.trailing_zeros() as usize, true);
            }
            i += 32;
        }
        (i, false)
    }
}

/// Length of the plain run at the start of `s` (the bytes before the first
/// stop byte: `"`, `\`, a control character and, with `ascii`, a byte >=
/// 0x80): the portable reference without `V`, vectors with it.
#[inline(always)]
fn run_at<const V: bool>(s: &[u8], ascii: bool, scan: Scanner) -> usize {
    let mut i = 0;
    // The first sixteen bytes inline: most strings end in them.
    if let Some(block) = s.first_chunk::<16>() {
        if let Some(at) = first_stop16::<V>(block, ascii) {
            return at;
        }
        i = 16;
        // Many keys and values end in the next sixteen bytes: one more step
        // inline before the loop.
        if let Some(block) = s.get(16..).and_then(|r| r.first_chunk::<16>()) {
            if let Some(at) = first_stop16::<V>(block, ascii) {
                return 16 + at;
            }
            i = 32;
        }
        // A long run: thirty-two bytes a step where the CPU has AVX2.
        #[cfg(target_arch = "x86_64")]
        if V && s.len() >= 64 && scan.0 == Scan::Avx2 {
            // SAFETY: a `Scanner` holds `Avx2` only when
            // `is_x86_feature_detected!("avx2")` found it on this CPU (see
            // `Scanner::new`), the only requirement of `run32`, which reads
            // within `s` only.
            let (n, found) = unsafe { x86::run32(&s[32..], ascii) };
            if found {
                return 32 + n;
            }
            i += n;
        }
    }
    let _ = scan;
    run_tail::<V>(s, i, ascii)
}

/// [`run_at`] from `s[i..]` on, out of line: sixteen bytes per step, then a
/// word, then bytes.
#[inline(never)]
fn run_tail<const V: bool>(s: &[u8], mut i: usize, ascii: bool) -> usize {
    while let Some(block) = s.get(i..).and_then(|r| r.first_chunk::<16>()) {
        if let Some(at) = first_stop16::<V>(block, ascii) {
            return i + at;
        }
        i += 16;
    }
    if i + 8 <= s.len() {
        if let Some(at) = first_stop(word(s, i), ascii) {
            return i + at;
        }
        i += 8;
    }
    while i < s.len() && !STR_STOP[s[i] as usize] && (!ascii || s[i] < 0x80) {
        i += 1;
    }
    i
}

/// Length of the plain run at the start of `s`: bytes up to (not including)
/// the first `"`, `\` or control character.
#[inline]
pub(crate) fn plain_run(s: &[u8]) -> usize {
    run_at::<true>(s, false, DEFAULT_SCANNER)
}

/// Like [`plain_run`], but also stops at the first non-ASCII byte.
#[inline]
pub(crate) fn plain_ascii_run(s: &[u8]) -> usize {
    run_at::<true>(s, true, DEFAULT_SCANNER)
}

/// [`plain_run`] with the portable reference (`V` false) or vectors at
/// `scan`'s level.
#[inline(always)]
pub(crate) fn plain_run_at<const V: bool>(s: &[u8], scan: Scanner) -> usize {
    run_at::<V>(s, false, scan)
}

/// [`plain_ascii_run`] as [`plain_run_at`].
#[inline(always)]
pub(crate) fn plain_ascii_run_at<const V: bool>(s: &[u8], scan: Scanner) -> usize {
    run_at::<V>(s, true, scan)
}

/// Where the first byte of `block` that stops a plain ASCII run is (as
/// [`plain_ascii_run_at`]), or `None`: one step of the scan, for callers
/// with a short string in a block already at hand.
#[inline(always)]
pub(crate) fn ascii_stop16<const V: bool>(block: &[u8; 16]) -> Option<usize> {
    first_stop16::<V>(block, true)
}

/// [`plain_ascii_run`] of `s[..n]`, reading whole blocks from `s` beyond `n`
/// where it has them (the caller's string sits inside a larger buffer).
#[inline(always)]
pub(crate) fn plain_ascii_prefix(s: &[u8], n: usize) -> usize {
    // Most strings are short: one block, and only its first `n` bytes count.
    if let (true, Some(block)) = (n <= 16, s.first_chunk::<16>()) {
        return match first_stop16::<true>(block, true) {
            Some(at) => at.min(n),
            None => n,
        };
    }
    let mut i = 0;
    // Whole sixteens of `s` (which may go on past `n`): one bounds check each.
    while i < n {
        let Some(block) = s.get(i..).and_then(|r| r.first_chunk::<16>()) else {
            break;
        };
        if let Some(at) = first_stop16::<true>(block, true) {
            return n.min(i + at);
        }
        i += 16;
    }
    if i >= n {
        return n;
    }
    i + plain_ascii_run(&s[i..n])
}

/// Go's conversion of arbitrary bytes to a valid string, all at once.
pub fn go_lossy(bytes: &[u8]) -> Vec<u8> {
    struct V(Vec<u8>);
    impl Utf8Sink for V {
        fn valid(&mut self, b: &[u8]) {
            self.0.extend_from_slice(b)
        }
        fn replacement(&mut self) {
            self.0.extend_from_slice(REPLACEMENT)
        }
    }
    let mut v = V(Vec::with_capacity(bytes.len()));
    let mut s = Utf8Stream::new();
    let _ = s.push(bytes, false, &mut v);
    let _ = s.end(false, &mut v);
    v.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run as the transcoder computes it at a level: `v` picks the
    /// vector code (the const parameter), `scan` the widest vectors.
    fn run_at_level(s: &[u8], ascii: bool, v: bool, scan: Scanner) -> usize {
        match (v, ascii) {
            (false, false) => plain_run_at::<false>(s, scan),
            (false, true) => plain_ascii_run_at::<false>(s, scan),
            (true, false) => plain_run_at::<true>(s, scan),
            (true, true) => plain_ascii_run_at::<true>(s, scan),
        }
    }

    fn lossy_chunked(bytes: &[u8], chunk: usize) -> Vec<u8> {
        struct V(Vec<u8>);
        impl Utf8Sink for V {
            fn valid(&mut self, b: &[u8]) {
                self.0.extend_from_slice(b)
            }
            fn replacement(&mut self) {
                self.0.extend_from_slice(REPLACEMENT)
            }
        }
        let mut v = V(Vec::new());
        let mut s = Utf8Stream::new();
        for c in bytes.chunks(chunk.max(1)) {
            s.push(c, false, &mut v).unwrap();
        }
        s.end(false, &mut v).unwrap();
        v.0
    }

    #[test]
    fn go_replaces_each_bad_byte() {
        // docs/wire.md §3: h'61e6b062' -> "a\ufffd\ufffdb"
        assert_eq!(go_lossy(b"a\xe6\xb0b"), "a\u{FFFD}\u{FFFD}b".as_bytes());
        // A surrogate encoded in UTF-8 is three bad bytes.
        assert_eq!(
            go_lossy(b"\xed\xa0\x80"),
            "\u{FFFD}\u{FFFD}\u{FFFD}".as_bytes()
        );
        assert_eq!(go_lossy(b"\xff"), REPLACEMENT);
        assert_eq!(go_lossy("é☃🎉".as_bytes()), "é☃🎉".as_bytes());
        assert_eq!(
            go_lossy(b"\xf0\x9f\x8e"),
            "\u{FFFD}\u{FFFD}\u{FFFD}".as_bytes()
        );
    }

    #[test]
    fn chunking_never_changes_the_result() {
        let samples: [&[u8]; 6] = [
            b"a\xe6\xb0b",
            "héllo wörld ☃ 🎉".as_bytes(),
            b"\xe0\x80\x80x\xf4\x90\x80\x80",
            b"\xc3",
            b"\xf0\x9f\x8e\x89\xf0\x9f",
            b"ok\xed\x9f\xbf\xed\xa0\x80",
        ];
        for s in samples {
            let whole = go_lossy(s);
            for c in 1..5 {
                assert_eq!(lossy_chunked(s, c), whole, "{s:?} chunk {c}");
            }
        }
    }

    #[test]
    fn plain_runs_stop_where_a_byte_loop_does() {
        let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        let mut seed = 7u64;
        for len in 0..120 {
            for _ in 0..200 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let r = (seed >> 33) as u8;
                        // Mostly plain bytes, some of each special kind.
                        match r % 16 {
                            0 => b'"',
                            1 => b'\\',
                            2 => r % 0x20,
                            3 => 0x80 | r,
                            4 => 0x1f + (r & 1),
                            _ => b'a' + r % 26,
                        }
                    })
                    .collect();
                let want = s.iter().position(|&b| special(b)).unwrap_or(s.len());
                assert_eq!(plain_run(&s), want, "{s:?}");
                let want_ascii = s
                    .iter()
                    .position(|&b| special(b) || b >= 0x80)
                    .unwrap_or(s.len());
                assert_eq!(plain_ascii_run(&s), want_ascii, "{s:?}");
                for level in Scan::available() {
                    let scan = Scanner::new(level);
                    let v = level != Scan::Portable;
                    assert_eq!(run_at_level(&s, false, v, scan), want, "{level:?} {s:?}");
                    assert_eq!(
                        run_at_level(&s, true, v, scan),
                        want_ascii,
                        "{level:?} {s:?}"
                    );
                }
                let want = want_ascii;
                for n in 0..=s.len() {
                    assert_eq!(plain_ascii_prefix(&s, n), want.min(n), "{s:?} {n}");
                }
            }
        }
    }

    /// Long plain runs with one stop byte anywhere (or none), so that every
    /// level's every step (the first sixteen, the thirty-two-byte loop, the
    /// tail) finds it, at every offset from the start of the input.
    #[test]
    fn every_level_finds_a_lone_stop_anywhere() {
        let plain: Vec<u8> = (0..200).map(|k| b'a' + (k % 26) as u8).collect();
        for level in Scan::available() {
            let scan = Scanner::new(level);
            assert_eq!(scan.level(), level);
            for len in 0..plain.len() {
                for at in (0..=len).rev() {
                    for stop in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff] {
                        let mut s = plain[..len].to_vec();
                        if at < len {
                            s[at] = stop;
                        }
                        let hit = at < len;
                        let (run, ascii_run) = match (hit, stop >= 0x80) {
                            (false, _) => (len, len),
                            (true, true) => (len, at),
                            (true, false) => (at, at),
                        };
                        let v = level != Scan::Portable;
                        assert_eq!(
                            run_at_level(&s, false, v, scan),
                            run,
                            "{level:?} {len} {at} {stop}"
                        );
                        assert_eq!(
                            run_at_level(&s, true, v, scan),
                            ascii_run,
                            "{level:?} {len} {at} {stop}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn strict_mode_reports_where() {
        struct N;
        impl Utf8Sink for N {
            fn valid(&mut self, _: &[u8]) {}
            fn replacement(&mut self) {}
        }
        let mut s = Utf8Stream::new();
        assert_eq!(
            s.push(b"ab\xffc", true, &mut N),
            Err(Invalid { consumed: 2 })
        );
        let mut s = Utf8Stream::new();
        assert!(s.push(b"ab\xe2\x98", true, &mut N).is_ok());
        assert!(s.end(true, &mut N).is_err());
    }
}
