//! Experiment: JSON → CBOR in two stages, the way
//! simdjson parses, against the codec's single pass and serde_json's
//! validate-only scan, on the same pod lists, paired within each round.
//!
//! ```text
//! cargo bench --bench structural                      # smoke: the outputs agree
//! cargo bench --bench structural -- --measure         # 40 paired rounds
//! cargo bench --bench structural -- --measure --rounds 100
//! ```
//!
//! - Stage 1 indexes each 64-byte block without branches: vector compares
//!   find quotes, backslashes, `{}[]:,` and whitespace; carry arithmetic
//!   finds the escaped quotes; a carry-less multiplication turns the quotes
//!   into an in-string mask; the bits kept are the structural bytes outside
//!   strings, every unescaped quote, the first byte of each number or
//!   literal, and inside strings every byte the plain path cannot copy
//!   (backslash, control, non-ASCII). The bits become a list of positions.
//!   There are two kernels: AVX2 (two 32-byte halves) and AVX-512BW (one
//!   64-byte register).
//! - Stage 2 walks the positions with the JSON grammar and writes CBOR as
//!   the codec does: one-byte placeholders for container heads, patched at
//!   the closer, longer heads put in when the document is assembled. A
//!   string whose closing quote is the next position is plain and is copied
//!   with one fixed 32-byte move.
//!
//! It answers one question: is that design faster than the codec's one
//! pass on Kubernetes objects? It is not a transcoder. It writes the codec's
//! bytes (checked on every run) only for what these inputs hold: whole
//! documents within the window, integers, no floats, no watch mode, no
//! duplicate detection, no input cut into pieces. Results and reading:
//! `bench/README.md`, "Structural index".
//!
//! x86-64 only, with AVX2 and PCLMULQDQ (the AVX-512 kernel when the CPU
//! has AVX-512BW); elsewhere it says so and exits.

#[allow(dead_code)] // the watch stream is not measured here
mod gen;
mod stats;

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("structural: x86-64 only");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;
    use std::time::Instant;

    use cborgate::codec::{json_to_cbor, JsonToCbor, JsonToCborOptions};

    use super::gen;
    use super::stats::median;

    const MAJOR_UINT: u8 = 0x00;
    const MAJOR_NINT: u8 = 0x20;
    const MAJOR_BYTES: u8 = 0x40;
    const MAJOR_ARRAY: u8 = 0x80;
    const MAJOR_MAP: u8 = 0xa0;
    const EVEN: u64 = 0x5555_5555_5555_5555;

    /// The masks of one 64-byte block, bit `k` for byte `k`.
    struct Classes {
        quote: u64,
        backslash: u64,
        /// `{ } [ ] : ,`
        op: u64,
        /// space, `\t`, `\n`, `\r`
        ws: u64,
        /// below 0x20 or from 0x80 on (a signed compare)
        unplain: u64,
    }

    /// What stage 1 carries from one block to the next.
    #[derive(Default)]
    struct Carry {
        /// The block ended in an odd run of backslashes.
        escaped: u64,
        /// All ones when the block ended inside a string.
        in_string: u64,
        /// 1 when the block ended inside a number or literal.
        scalar: u64,
    }

    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        // SAFETY: only called from functions compiled with `pclmulqdq`,
        // which the caller checked the CPU has.
        unsafe {
            let a = _mm_set_epi64x(0, x as i64);
            _mm_cvtsi128_si64(_mm_clmulepi64_si128(a, _mm_set1_epi8(-1), 0)) as u64
        }
    }

    impl Carry {
        /// simdjson's stage 1 over one block's classes: the positions go to
        /// `idx` (at `base` + bit).
        #[inline(always)]
        fn index(&mut self, c: Classes, base: u32, idx: &mut Vec<u32>) {
            let bs = c.backslash & !self.escaped;
            let follows = (bs << 1) | self.escaped;
            let odd_starts = bs & !EVEN & !follows;
            let (even_seq, overflow) = odd_starts.overflowing_add(bs);
            self.escaped = overflow as u64;
            let escaped = (EVEN ^ (even_seq << 1)) & follows;
            let quote = c.quote & !escaped;
            let in_string = prefix_xor(quote) ^ self.in_string;
            self.in_string = ((in_string as i64) >> 63) as u64;
            let op = c.op & !in_string;
            let scalar = !(op | c.ws | quote | in_string);
            let starts = scalar & !((scalar << 1) | self.scalar);
            self.scalar = scalar >> 63;
            let special = (bs | c.unplain) & in_string;
            let mut m = op | quote | starts | special;
            let n = m.count_ones() as usize;
            // Four positions a step, written past the count and cut back
            // (simdjson writes eight).
            idx.reserve(64 + 4);
            let len = idx.len();
            let out = idx.spare_capacity_mut();
            let mut k = 0;
            while m != 0 {
                for slot in &mut out[k..k + 4] {
                    slot.write(base + m.trailing_zeros());
                    m &= m.wrapping_sub(1);
                }
                k += 4;
            }
            // SAFETY: the first `n` spare slots were written above (one per
            // set bit of the mask, in order).
            unsafe { idx.set_len(len + n) };
        }
    }

    #[inline(always)]
    unsafe fn classes_avx2(p: *const u8) -> Classes {
        let lo = _mm256_loadu_si256(p as *const __m256i);
        let hi = _mm256_loadu_si256(p.add(32) as *const __m256i);
        let mask = |l: __m256i, h: __m256i| {
            (_mm256_movemask_epi8(l) as u32 as u64)
                | ((_mm256_movemask_epi8(h) as u32 as u64) << 32)
        };
        let eq = |l: __m256i, h: __m256i, c: u8| {
            let v = _mm256_set1_epi8(c as i8);
            mask(_mm256_cmpeq_epi8(l, v), _mm256_cmpeq_epi8(h, v))
        };
        // `[` and `]` are `{` and `}` without bit 5.
        let b5 = _mm256_set1_epi8(0x20);
        let (lo5, hi5) = (_mm256_or_si256(lo, b5), _mm256_or_si256(hi, b5));
        Classes {
            quote: eq(lo, hi, b'"'),
            backslash: eq(lo, hi, b'\\'),
            op: eq(lo5, hi5, b'{') | eq(lo5, hi5, b'}') | eq(lo, hi, b':') | eq(lo, hi, b','),
            ws: eq(lo, hi, b' ') | eq(lo, hi, b'\n') | eq(lo, hi, b'\r') | eq(lo, hi, b'\t'),
            unplain: mask(_mm256_cmpgt_epi8(b5, lo), _mm256_cmpgt_epi8(b5, hi)),
        }
    }

    #[inline(always)]
    unsafe fn classes_avx512(p: *const u8) -> Classes {
        let v = _mm512_loadu_si512(p as *const _);
        let b5 = _mm512_set1_epi8(0x20);
        let v5 = _mm512_or_si512(v, b5);
        let eq = |x: __m512i, c: u8| _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(c as i8));
        Classes {
            quote: eq(v, b'"'),
            backslash: eq(v, b'\\'),
            op: eq(v5, b'{') | eq(v5, b'}') | eq(v, b':') | eq(v, b','),
            ws: eq(v, b' ') | eq(v, b'\n') | eq(v, b'\r') | eq(v, b'\t'),
            unplain: _mm512_cmplt_epi8_mask(v, b5),
        }
    }

    /// Stage 1 over the whole input with one kernel; the last partial block
    /// is padded with spaces, and `input.len()` ends the list.
    macro_rules! stage1 {
        ($name:ident, $features:literal, $classes:ident) => {
            #[target_feature(enable = $features)]
            unsafe fn $name(input: &[u8], idx: &mut Vec<u32>) {
                idx.clear();
                let mut carry = Carry::default();
                let mut i = 0;
                while i + 64 <= input.len() {
                    carry.index($classes(input.as_ptr().add(i)), i as u32, idx);
                    i += 64;
                }
                let mut tail = [b' '; 64];
                tail[..input.len() - i].copy_from_slice(&input[i..]);
                carry.index($classes(tail.as_ptr()), i as u32, idx);
                idx.push(input.len() as u32);
            }
        };
    }
    stage1!(stage1_avx2, "avx2,pclmulqdq", classes_avx2);
    stage1!(stage1_avx512, "avx512f,avx512bw,pclmulqdq", classes_avx512);

    #[derive(Clone, Copy, Debug)]
    enum Kernel {
        Avx2,
        Avx512,
    }

    fn stage1(k: Kernel, input: &[u8], idx: &mut Vec<u32>) {
        assert!(input.len() < u32::MAX as usize);
        // SAFETY: `main` runs a kernel only when the CPU has its features.
        unsafe {
            match k {
                Kernel::Avx2 => stage1_avx2(input, idx),
                Kernel::Avx512 => stage1_avx512(input, idx),
            }
        }
    }

    #[inline(always)]
    fn head(out: &mut Vec<u8>, major: u8, arg: u64) {
        match arg {
            0..24 => out.push(major | arg as u8),
            24..=0xff => out.extend_from_slice(&[major | 24, arg as u8]),
            0x100..=0xffff => {
                out.push(major | 25);
                out.extend_from_slice(&(arg as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(major | 26);
                out.extend_from_slice(&(arg as u32).to_be_bytes());
            }
            _ => {
                out.push(major | 27);
                out.extend_from_slice(&arg.to_be_bytes());
            }
        }
    }

    #[derive(Clone, Copy)]
    struct Frame {
        object: bool,
        head: usize,
        count: u64,
    }

    /// Something stage 2 does not take (or invalid JSON), at a position.
    #[derive(Debug)]
    #[allow(dead_code)] // read through `Debug` when a run fails
    struct Unsupported(usize);

    /// Stage 2's buffers, reused across documents.
    #[derive(Default)]
    struct Stage2 {
        body: Vec<u8>,
        slots: Vec<(usize, u8, u64)>,
        below: Vec<Frame>,
        scratch: Vec<u8>,
    }

    impl Stage2 {
        /// The plain string between the quotes at `p` and `q`.
        #[inline(always)]
        fn plain(&mut self, input: &[u8], p: usize, q: usize) {
            let n = q - p - 1;
            if n < 24 && q + 32 <= input.len() {
                self.body.reserve(33);
                let at = self.body.len();
                // SAFETY: `reserve(33)` leaves 33 writable bytes from `at`;
                // `input` holds 32 bytes from `p + 1` (`q + 32 <= len`, and
                // `p < q`); the new length ends within what was written.
                unsafe {
                    let dst = self.body.as_mut_ptr().add(at);
                    dst.write(MAJOR_BYTES | n as u8);
                    std::ptr::copy_nonoverlapping(input.as_ptr().add(p + 1), dst.add(1), 32);
                    self.body.set_len(at + 1 + n);
                }
            } else {
                head(&mut self.body, MAJOR_BYTES, n as u64);
                self.body.extend_from_slice(&input[p + 1..q]);
            }
        }

        /// A string with escapes or non-ASCII bytes between `p` and `q`.
        #[cold]
        #[inline(never)]
        fn unplain(&mut self, input: &[u8], p: usize, q: usize) -> Result<(), Unsupported> {
            let s = &input[p + 1..q];
            self.scratch.clear();
            let mut j = 0;
            while j < s.len() {
                match s[j] {
                    b'\\' => {
                        let d = match s.get(j + 1) {
                            Some(b'"') => b'"',
                            Some(b'\\') => b'\\',
                            Some(b'/') => b'/',
                            Some(b'b') => 8,
                            Some(b'f') => 12,
                            Some(b'n') => b'\n',
                            Some(b'r') => b'\r',
                            Some(b't') => b'\t',
                            Some(b'u') => {
                                let c = s
                                    .get(j + 2..j + 6)
                                    .and_then(|h| std::str::from_utf8(h).ok())
                                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                                    .and_then(char::from_u32)
                                    .ok_or(Unsupported(p))?;
                                let mut b = [0; 4];
                                self.scratch
                                    .extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                                j += 6;
                                continue;
                            }
                            _ => return Err(Unsupported(p)),
                        };
                        self.scratch.push(d);
                        j += 2;
                    }
                    0..0x20 => return Err(Unsupported(p)),
                    c => {
                        self.scratch.push(c);
                        j += 1;
                    }
                }
            }
            std::str::from_utf8(&self.scratch).map_err(|_| Unsupported(p))?;
            head(&mut self.body, MAJOR_BYTES, self.scratch.len() as u64);
            self.body.extend_from_slice(&self.scratch);
            Ok(())
        }

        #[inline(always)]
        fn close(&mut self, top: &mut Frame, depth: &mut usize) {
            let major = if top.object { MAJOR_MAP } else { MAJOR_ARRAY };
            if top.count < 24 {
                self.body[top.head] = major | top.count as u8;
            } else {
                self.slots.push((top.head, major, top.count));
            }
            *depth -= 1;
            if let Some(f) = self.below.pop() {
                *top = f;
            }
        }

        /// One whole document, indexed in `idx`, appended to `out` as CBOR.
        fn run(&mut self, input: &[u8], idx: &[u32], out: &mut Vec<u8>) -> Result<(), Unsupported> {
            self.body.clear();
            self.slots.clear();
            self.below.clear();
            let mut k = 0;
            let mut next = || {
                let p = idx.get(k).map_or(input.len(), |&p| p as usize);
                k += 1;
                p
            };
            let byte = |p: usize| input.get(p).copied().ok_or(Unsupported(p));
            // The string whose opening quote is at `$p`: plain when the next
            // position is its closing quote; otherwise the positions up to
            // the closing quote are its escapes and non-ASCII bytes.
            macro_rules! string {
                ($p:expr) => {{
                    let p = $p;
                    let mut q = next();
                    if byte(q)? == b'"' {
                        self.plain(input, p, q);
                    } else {
                        while byte(q)? != b'"' {
                            q = next();
                        }
                        self.unplain(input, p, q)?;
                    }
                }};
            }
            self.body.extend_from_slice(&[0xd9, 0xd9, 0xf7]);
            let mut top = Frame {
                object: false,
                head: usize::MAX,
                count: 0,
            };
            let mut depth = 0;
            let mut p = next();
            // What the position `p` holds: a value, what follows a value, a key.
            enum At {
                Value,
                After,
                Key,
            }
            let mut at = At::Value;
            loop {
                match at {
                    At::Value => {
                        let c = byte(p)?;
                        match c {
                            b'"' => string!(p),
                            b'{' | b'[' => {
                                let object = c == b'{';
                                if depth > 0 {
                                    self.below.push(top);
                                }
                                depth += 1;
                                top = Frame {
                                    object,
                                    head: self.body.len(),
                                    count: 0,
                                };
                                self.body
                                    .push(if object { MAJOR_MAP } else { MAJOR_ARRAY } | 31);
                                p = next();
                                if byte(p)? == c + 2 {
                                    self.close(&mut top, &mut depth);
                                } else if object {
                                    at = At::Key;
                                    continue;
                                } else {
                                    top.count += 1;
                                    continue;
                                }
                            }
                            b'-' | b'0'..=b'9' => {
                                let neg = c == b'-';
                                let start = p + neg as usize;
                                let mut j = start;
                                let mut v: u64 = 0;
                                while let Some(d @ b'0'..=b'9') = input.get(j) {
                                    v = v * 10 + (d - b'0') as u64;
                                    j += 1;
                                    if j - start > 18 {
                                        return Err(Unsupported(p));
                                    }
                                }
                                let digits = j - start;
                                if digits == 0
                                    || (digits > 1 && input[start] == b'0')
                                    || matches!(input.get(j), Some(b'.' | b'e' | b'E'))
                                {
                                    return Err(Unsupported(p));
                                }
                                if neg && v > 0 {
                                    head(&mut self.body, MAJOR_NINT, v - 1);
                                } else {
                                    head(&mut self.body, MAJOR_UINT, v);
                                }
                            }
                            _ => {
                                let (word, cbor): (&[u8], u8) = match c {
                                    b't' => (b"true", 0xf5),
                                    b'f' => (b"false", 0xf4),
                                    b'n' => (b"null", 0xf6),
                                    _ => return Err(Unsupported(p)),
                                };
                                if input.get(p..p + word.len()) != Some(word) {
                                    return Err(Unsupported(p));
                                }
                                self.body.push(cbor);
                            }
                        }
                        if depth == 0 {
                            break;
                        }
                        p = next();
                        at = At::After;
                    }
                    At::After => match (byte(p)?, top.object) {
                        (b',', true) => {
                            p = next();
                            at = At::Key;
                        }
                        (b',', false) => {
                            p = next();
                            top.count += 1;
                            at = At::Value;
                        }
                        (b'}', true) | (b']', false) => {
                            self.close(&mut top, &mut depth);
                            if depth == 0 {
                                break;
                            }
                            p = next();
                        }
                        _ => return Err(Unsupported(p)),
                    },
                    At::Key => {
                        if byte(p)? != b'"' {
                            return Err(Unsupported(p));
                        }
                        top.count += 1;
                        string!(p);
                        let colon = next();
                        if byte(colon)? != b':' {
                            return Err(Unsupported(colon));
                        }
                        p = next();
                        at = At::Value;
                    }
                }
            }
            if next() != input.len() {
                return Err(Unsupported(p));
            }
            self.slots.sort_unstable_by_key(|s| s.0);
            let mut cur = 0;
            for &(pos, major, len) in &self.slots {
                out.extend_from_slice(&self.body[cur..pos]);
                head(out, major, len);
                cur = pos + 1;
            }
            out.extend_from_slice(&self.body[cur..]);
            Ok(())
        }
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let measure = args.iter().any(|a| a == "--measure");
        let rounds = args
            .iter()
            .position(|a| a == "--rounds")
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(40usize);
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("pclmulqdq")) {
            println!("structural: this CPU lacks AVX2 or PCLMULQDQ");
            return;
        }
        let mut kernels = vec![Kernel::Avx2];
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
            kernels.push(Kernel::Avx512);
        }
        let opts = JsonToCborOptions {
            dedupe_keys: false,
            ..Default::default()
        };
        let sizes: &[usize] = if measure { &[1, 100] } else { &[1, 3] };
        let (mut idx, mut s2, mut out) = (Vec::new(), Stage2::default(), Vec::new());
        let mut codec = JsonToCbor::new(opts);
        if measure {
            println!("| scenario | kernel | stage 1 MB/s | stage 2 MB/s | two-stage MB/s | codec MB/s | validate MB/s | two-stage / validate | codec / validate | positions per KB |");
            println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        }
        for &n in sizes {
            let input = gen::pod_list(n);
            let want = json_to_cbor(&input, opts).expect("codec");
            for &kernel in &kernels {
                stage1(kernel, &input, &mut idx);
                out.clear();
                s2.run(&input, &idx, &mut out)
                    .expect("stage 2 takes the pod lists");
                assert!(out == want, "podlist-{n} {kernel:?}: not the codec's bytes");
            }
            println!(
                "podlist-{n}: both kernels write the codec's {} bytes",
                want.len()
            );
            if !measure {
                continue;
            }
            let iters = (2_000_000 / input.len()).max(1);
            let time = |f: &mut dyn FnMut()| {
                let t = Instant::now();
                for _ in 0..iters {
                    f();
                }
                t.elapsed().as_secs_f64()
            };
            for &kernel in &kernels {
                // Best time of each path, and the paired ratios per round.
                let mut best = [f64::MAX; 5];
                let (mut two_v, mut codec_v) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    let t = [
                        time(&mut || stage1(kernel, black_box(&input), &mut idx)),
                        time(&mut || {
                            out.clear();
                            s2.run(black_box(&input), &idx, &mut out).unwrap();
                        }),
                        time(&mut || {
                            stage1(kernel, black_box(&input), &mut idx);
                            out.clear();
                            s2.run(&input, &idx, &mut out).unwrap();
                        }),
                        time(&mut || {
                            codec.reset();
                            out.clear();
                            codec.feed(black_box(&input), &mut out).unwrap();
                            codec.finish(&mut out).unwrap();
                        }),
                        time(&mut || {
                            let _: serde::de::IgnoredAny =
                                serde_json::from_slice(black_box(&input)).unwrap();
                        }),
                    ];
                    for (b, v) in best.iter_mut().zip(t) {
                        *b = b.min(v);
                    }
                    two_v.push(t[4] / t[2]);
                    codec_v.push(t[4] / t[3]);
                }
                let mbs = |t: f64| (input.len() * iters) as f64 / t / 1e6;
                println!(
                    "| podlist-{n} | {kernel:?} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.0} |",
                    mbs(best[0]),
                    mbs(best[1]),
                    mbs(best[2]),
                    mbs(best[3]),
                    mbs(best[4]),
                    median(&mut two_v),
                    median(&mut codec_v),
                    idx.len() as f64 * 1000.0 / input.len() as f64,
                );
            }
        }
    }
}
