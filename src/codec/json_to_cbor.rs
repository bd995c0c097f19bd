//! JSON → CBOR (WIRE.md §2): upstream JSON bodies and watch events become the
//! CBOR a CBOR-enabled kube-apiserver writes.
//!
//! The transcoder is an incremental state machine: feed it JSON in pieces of
//! any size and it appends CBOR to the caller's buffer as soon as it can.
//!
//! Definite lengths need the element count before the elements. The emitter
//! therefore builds each document in an internal buffer (`body`), where every
//! container head, and the head of a string read piece by piece, starts as a
//! one-byte placeholder. When the item ends with fewer than 24 elements (or
//! bytes), its head is one byte and is written over the placeholder. Otherwise
//! the item gets a [`Slot`] (position, major type, count), and the longer head
//! replaces the placeholder when the buffer is written out. So a document
//! without such heads goes out as one copy; the rest is copied between the
//! slots. If a document outgrows the streaming window while containers or a
//! string are still open, everything buffered is written out and the
//! still-open items switch to indefinite length (`9f`/`bf`/`5f`/`7f` … `ff`);
//! an open container's placeholder already holds its indefinite head. Memory
//! then stays bounded by the window, not by the body. From then on, completed
//! elements go out every [`EAGER_FLUSH`] bytes rather than every window.
//!
//! Fast paths: a string, number, literal or empty container that lies whole
//! in the current input piece (no escapes, valid UTF-8, shorter than the
//! window) has its final head written straight into `body`. The bytes are the
//! same either way; the window counts content bytes only, so heads and
//! placeholders are tracked (`inline`) and left out of it. Most keys and
//! values are short ASCII: one that closes within sixteen bytes takes one
//! scan step and one fixed-size copy (`short_string`), and the innermost
//! open container, which every token reads or counts into, is kept apart
//! from the ones around it ([`Stack`]).
//!
//! Specialised per option set: duplicate detection (`DD`) and watch mode (`W`)
//! change what happens at every key and value, so [`JsonToCbor::feed`] picks
//! one of four compiled copies of the scanner once per piece, and the methods
//! on the token path take the two options as const parameters instead of
//! testing `opts` at each token. The string scan is a third const parameter,
//! `V`: vectors (SSE2, and AVX2 for long runs when the CPU has it, detected
//! at construction) or the portable word-at-a-time reference, which other
//! CPUs run and tests compare with ([`JsonToCbor::set_scan`]); both find the
//! same bytes, so the output is the same.
//!
//! Duplicate keys: the last one wins, as in Go. When detection is on, the
//! earlier pair is cut out of the buffer (a [`Hole`]); if it had already been
//! streamed out (maps larger than the window) the input is rejected instead.

use super::base64::GoBase64;
use super::buf::{extend_head_prefix, extend_run};
use super::error::{CodecError, Reason};
use super::fields::{Position, Schema, MAX_FIELD_NAME};
use super::keys::{KeyOutcome, KeySets};
use super::number::{
    interpret_json_number, write_float, write_head, write_int, JsonNumber, MAJOR_ARRAY,
    MAJOR_BYTES, MAJOR_MAP, MAJOR_TEXT, SELF_DESCRIBED,
};
use super::utf8::{
    ascii_stop16, plain_ascii_run_at, plain_run_at, Scan, Scanner, Utf8Sink, Utf8Stream,
    REPLACEMENT,
};
use super::{JsonToCborOptions, StringMode};

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// A whole integer literal at `input[i..]` that ends inside `input` and needs
/// no more than the plain int64 path: optional `-`, 1–18 digits without a
/// leading zero (or a lone `0`), followed by a byte that cannot continue a
/// number. Anything else is left to the number state machine.
#[inline(always)]
fn whole_small_int(input: &[u8], i: usize, max_len: usize) -> Option<(i64, usize)> {
    let neg = input[i] == b'-';
    let ds = i + neg as usize;
    let mut j = ds;
    let mut v: u64 = 0;
    while let Some(&d) = input.get(j) {
        if !d.is_ascii_digit() {
            break;
        }
        if j - ds == 18 {
            return None;
        }
        v = v * 10 + (d - b'0') as u64;
        j += 1;
    }
    let nd = j - ds;
    let &t = input.get(j)?;
    if nd == 0
        || (nd > 1 && input[ds] == b'0')
        || matches!(t, b'.' | b'e' | b'E' | b'+' | b'-')
        || j - i > max_len
    {
        return None;
    }
    let v = v as i64;
    Some((if neg { -v } else { v }, j))
}

/// Longest plain string run handled per step, so that the window check runs
/// often even when a caller feeds one huge piece.
const MAX_RUN: usize = 64 * 1024;
const NONE: usize = usize::MAX;

/// Once a document has outgrown the window, whatever is buffered is written
/// out as soon as this much content (or a quarter of a smaller window) is
/// buffered and the next token starts directly inside a container already
/// streamed out as indefinite length, so that everything buffered is
/// complete: a list of 10,000 pods then goes out two pods at a time from a
/// buffer that stays in cache, instead of in 1 MiB bursts. The bytes are the
/// same. It is checked where the window is (content bytes, at token starts),
/// so when it happens does not depend on how the input was cut.
const EAGER_FLUSH: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    /// A complete head of `len`: a container's element or pair count, a
    /// string's or a chunk's byte length (24 or more).
    Head,
    /// A string still being read: if written out now, it becomes an
    /// indefinite-length string whose first chunk is what is buffered.
    OpenStr,
    /// A further chunk of such a string, still being read.
    OpenChunk,
}

/// A head longer than its one-byte placeholder at `body[pos]`, or not yet
/// known (an open string).
#[derive(Debug, Clone, Copy)]
struct Slot {
    pos: usize,
    major: u8,
    kind: SlotKind,
    len: u64,
}

/// A duplicate key's earlier pair, cut out at assembly: `body[start..end]`
/// as `(start, end)`.
type Hole = (usize, usize);

/// Where a map pair lives, in absolute (never reset) positions.
#[derive(Debug, Clone, Copy, Default)]
struct PairLoc {
    body_start: u64,
    body_end: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Array,
    Object,
}

impl Container {
    /// The CBOR major type of its head.
    fn major(self) -> u8 {
        match self {
            Container::Array => MAJOR_ARRAY,
            Container::Object => MAJOR_MAP,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: Container,
    /// Position of this container's head placeholder in `body`, or NONE
    /// once streamed out as indefinite length.
    head: usize,
    count: u64,
    /// Key-set entry of the pair being read (objects with duplicate detection).
    entry: usize,
}

/// The open containers. The innermost one, which every token reads or
/// updates (its kind, its count), is a field of its own at a fixed place
/// rather than the last element of a `Vec` (a length and a pointer to load
/// first); the ones around it are in `below`, which keeps its allocation
/// across documents.
#[derive(Debug)]
struct Stack {
    top: Frame,
    depth: usize,
    below: Vec<Frame>,
}

impl Stack {
    fn new() -> Stack {
        Stack {
            top: Frame {
                kind: Container::Array,
                head: NONE,
                count: 0,
                entry: NONE,
            },
            depth: 0,
            below: Vec::new(),
        }
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.depth == 0
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.depth
    }

    #[inline(always)]
    fn last(&self) -> Option<&Frame> {
        (self.depth > 0).then_some(&self.top)
    }

    #[inline(always)]
    fn last_mut(&mut self) -> Option<&mut Frame> {
        (self.depth > 0).then_some(&mut self.top)
    }

    #[inline(always)]
    fn push(&mut self, f: Frame) {
        if self.depth > 0 {
            self.below.push(self.top);
        }
        self.top = f;
        self.depth += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Frame> {
        if self.depth == 0 {
            return None;
        }
        let f = self.top;
        self.depth -= 1;
        if let Some(b) = self.below.pop() {
            self.top = b;
        }
        Some(f)
    }

    fn clear(&mut self) {
        self.below.clear();
        self.depth = 0;
    }

    /// Every open container, innermost first.
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Frame> {
        let top = (self.depth > 0).then_some(&mut self.top);
        top.into_iter().chain(self.below.iter_mut().rev())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected.
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    Key,
    Colon,
    /// After a value inside a container: `,` or the closer.
    AfterValue,
    /// A single body is complete; only whitespace may follow.
    TopDone,
    Str,
    Escape,
    Unicode {
        n: u8,
        acc: u16,
    },
    Number(Num),
    Literal {
        lit: u8,
        idx: u8,
    },
}

/// `t.method::<DD, W>(args)`, with `DD` and `W` the transcoder's own
/// options (duplicate detection, watch mode): the one place where they
/// become the const parameters of the token path.
macro_rules! with_options {
    ($t:ident . $method:ident ( $($arg:expr),* )) => {
        match ($t.opts.dedupe_keys, $t.opts.watch) {
            (false, false) => $t.$method::<false, false>($($arg),*),
            (false, true) => $t.$method::<false, true>($($arg),*),
            (true, false) => $t.$method::<true, false>($($arg),*),
            (true, true) => $t.$method::<true, true>($($arg),*),
        }
    };
    ($t:ident . $method:ident ::< $v:literal > ( $($arg:expr),* )) => {
        match ($t.opts.dedupe_keys, $t.opts.watch) {
            (false, false) => $t.$method::<false, false, $v>($($arg),*),
            (false, true) => $t.$method::<false, true, $v>($($arg),*),
            (true, false) => $t.$method::<true, false, $v>($($arg),*),
            (true, true) => $t.$method::<true, true, $v>($($arg),*),
        }
    };
}

/// What each two-byte escape `\\x` stands for, by `x`; 0 where there is none
/// (`\\u` and anything invalid). A table, not a `match`: mostly one escape
/// (`\\"`) comes after another, and a jump table on it mispredicts.
const ESCAPED: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];
const LITERAL_CBOR: [u8; 3] = [0xf5, 0xf4, 0xf6];

/// Tag 22 (expected later encoding: standard base64), one byte.
const TAG_BASE64: u8 = 0xd6;

/// The length of the CBOR head of a string of `n` bytes.
fn head_size(n: u64) -> usize {
    match n {
        0..=23 => 1,
        24..=0xff => 2,
        0x100..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

/// Streaming JSON → CBOR transcoder. See the module documentation.
#[derive(Debug)]
pub struct JsonToCbor {
    opts: JsonToCborOptions,
    /// The string scanner: the best this CPU has, unless a test asked for
    /// a lower level ([`JsonToCbor::set_scan`]).
    scan: Scanner,
    str_major: u8,
    /// Longest string the fast path takes whole: shorter than the window
    /// (never cut into chunks) and within the string limit.
    whole_max: usize,
    /// Buffered content at which the window check looks again: the window,
    /// or, once this document has outgrown it, [`EAGER_FLUSH`] (a quarter of
    /// a smaller window).
    flush_at: usize,
    state: State,
    stack: Stack,
    // Emitter.
    body: Vec<u8>,
    /// Bytes of heads and placeholders in `body`.
    inline: usize,
    /// Heads longer than their placeholders, in no particular order.
    slots: Vec<Slot>,
    holes: Vec<Hole>,
    /// Bytes already written out in this document (absolute base of `body`).
    body_base: u64,
    // Current string.
    str_slot: usize,
    str_is_key: bool,
    str_len: u64,
    utf8: Utf8Stream,
    pending_high: Option<u16>,
    key_start: usize,
    pending_pair: PairLoc,
    /// The first bytes of a depth-1 key in watch mode, to spot `object`.
    probe: [u8; 7],
    probe_len: u8,
    /// The key just read is `object` at depth 1 of a watch event.
    key_is_object: bool,
    tag_next_value: bool,
    // Current number.
    num: Vec<u8>,
    /// A string with escapes, decoded (fast path).
    scratch: Vec<u8>,
    // Duplicate keys.
    keys: KeySets<PairLoc>,
    // `[]byte` fields (`opts.schema` typed: `typed`).
    typed: bool,
    /// The position of each open array and object, innermost last.
    positions: Vec<Position>,
    /// The position of the value after the key just read.
    next_value: Position,
    /// The bytes of a `[]byte` field's base64 text, decoded.
    raw: Vec<u8>,
    // Progress.
    offset: u64,
    documents: u64,
    error: Option<CodecError>,
}

/// Appends validated string bytes (U+FFFD for each bad byte) to the body,
/// and only there: the caller then hands what was appended to `str_added`,
/// which copies a key's bytes to the duplicate-key set (when deduplicating)
/// and, at depth 1 of a watch event, to the `object` probe.
struct Sink<'a> {
    body: &'a mut Vec<u8>,
}

impl Utf8Sink for Sink<'_> {
    #[inline]
    fn valid(&mut self, b: &[u8]) {
        self.body.extend_from_slice(b);
    }
    #[inline]
    fn replacement(&mut self) {
        self.body.extend_from_slice(REPLACEMENT);
    }
}

impl JsonToCbor {
    pub fn new(opts: JsonToCborOptions) -> Self {
        let str_major = match opts.strings {
            StringMode::Bytes => MAJOR_BYTES,
            StringMode::Text => MAJOR_TEXT,
        };
        JsonToCbor {
            opts,
            scan: Scanner::new(Scan::Avx2),
            str_major,
            whole_max: (opts.window.max(1) - 1)
                .min(usize::try_from(opts.limits.max_string_len).unwrap_or(usize::MAX)),
            flush_at: opts.window,
            state: State::Value,
            stack: Stack::new(),
            body: Vec::new(),
            inline: 0,
            slots: Vec::new(),
            holes: Vec::new(),
            body_base: 0,
            str_slot: NONE,
            str_is_key: false,
            str_len: 0,
            utf8: Utf8Stream::new(),
            pending_high: None,
            key_start: 0,
            pending_pair: PairLoc::default(),
            probe: [0; 7],
            probe_len: 0,
            key_is_object: false,
            tag_next_value: false,
            num: Vec::new(),
            scratch: Vec::new(),
            keys: KeySets::new(),
            typed: matches!(opts.schema, Schema::Typed(_)),
            positions: Vec::new(),
            next_value: Position::top(Schema::Unstructured),
            raw: Vec::new(),
            offset: 0,
            documents: 0,
            error: None,
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> JsonToCborOptions {
        self.opts
    }

    /// Start over on a new, independent input, exactly as if freshly made
    /// with the same options, but keep the buffers already allocated, so a
    /// reused transcoder allocates nothing once warmed up.
    pub fn reset(&mut self) {
        let mut stack = std::mem::replace(&mut self.stack, Stack::new());
        let mut body = std::mem::take(&mut self.body);
        let mut slots = std::mem::take(&mut self.slots);
        let mut holes = std::mem::take(&mut self.holes);
        let mut num = std::mem::take(&mut self.num);
        let scratch = std::mem::take(&mut self.scratch);
        let mut keys = std::mem::replace(&mut self.keys, KeySets::new());
        let mut positions = std::mem::take(&mut self.positions);
        let raw = std::mem::take(&mut self.raw);
        stack.clear();
        body.clear();
        slots.clear();
        holes.clear();
        num.clear();
        keys.clear();
        positions.clear();
        *self = JsonToCbor {
            scan: self.scan,
            stack,
            body,
            slots,
            holes,
            num,
            scratch,
            keys,
            positions,
            raw,
            ..JsonToCbor::new(self.opts)
        };
    }

    /// Transcode the next input with `schema` (which fields are `[]byte`) instead of the
    /// one it was made with: between inputs only, after [`Self::reset`] or before the
    /// first [`Self::feed`], so a kept transcoder serves every kind.
    pub fn set_schema(&mut self, schema: Schema) {
        debug_assert_eq!(self.offset, 0, "set_schema between inputs only");
        self.opts.schema = schema;
        self.typed = matches!(schema, Schema::Typed(_));
    }

    /// Scan strings at `level`, or at the best level this CPU has if that
    /// is lower: the output is the same at every level (tests compare them;
    /// `Scan::Portable` is the reference). Kept across [`Self::reset`].
    pub fn set_scan(&mut self, level: Scan) {
        self.scan = Scanner::new(level);
    }

    /// The level strings are scanned at.
    pub fn scan(&self) -> Scan {
        self.scan.level()
    }

    /// Completed documents (watch events) so far.
    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// Bytes held back waiting for a document (or the window) to complete.
    pub fn buffered(&self) -> usize {
        self.body.len()
    }

    /// Input bytes consumed so far.
    pub fn consumed(&self) -> u64 {
        self.offset
    }

    /// Feed the next piece of JSON; CBOR produced so far is appended to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = match self.scan.level() {
            Scan::Portable => with_options!(self.run::<false>(input, out)),
            Scan::Sse2 | Scan::Avx2 => with_options!(self.run::<true>(input, out)),
        };
        self.offset += input.len() as u64;
        if let Err(e) = r {
            self.error = Some(e);
        }
        r
    }

    /// The input is complete: finish a trailing number and check that the
    /// document (or the last watch event) is whole.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = self.finish_inner(out);
        if let Err(e) = r {
            self.error = Some(e);
        }
        r
    }

    fn finish_inner(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let at = self.offset;
        if let State::Number(n) = self.state {
            with_options!(self.end_number(n, at, out))?;
        }
        match self.state {
            State::TopDone => Ok(()),
            State::Value if self.stack.is_empty() && self.opts.watch => Ok(()),
            _ => Err(CodecError::new(Reason::Truncated, at)),
        }
    }

    fn err(&self, reason: Reason, i: usize) -> CodecError {
        CodecError::new(reason, self.offset + i as u64)
    }

    fn run<const DD: bool, const W: bool, const V: bool>(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let len = input.len();
        let mut i = 0;
        while i < len {
            match self.state {
                State::Str => {
                    let start = i;
                    let stop = len.min(i + MAX_RUN);
                    i += plain_run_at::<V>(&input[i..stop], self.scan);
                    if i > start {
                        self.str_raw(&input[start..i], start, out)?;
                    }
                    if i >= stop {
                        continue;
                    }
                    match input[i] {
                        b'"' => {
                            self.end_string::<DD, W>(i, out)?;
                        }
                        b'\\' => self.state = State::Escape,
                        _ => return Err(self.err(Reason::Syntax, i)),
                    }
                    i += 1;
                }
                State::Value
                | State::ArrayFirst
                | State::ObjectFirst
                | State::Key
                | State::Colon
                | State::AfterValue
                | State::TopDone => {
                    // Token after token while no string, number or literal
                    // is left open by the end of the piece.
                    loop {
                        i = self.chain::<DD, W, V>(input, i, out)?;
                        if i >= len || !self.between_tokens() {
                            break;
                        }
                        let b = input[i];
                        if is_ws(b) {
                            i += 1;
                        } else {
                            i = self.structural::<DD, W, V>(b, input, i, out)?;
                        }
                        if i >= len || !self.between_tokens() {
                            break;
                        }
                    }
                }
                State::Number(mut n) => {
                    // Fast path over digits.
                    let start = i;
                    while let Some(&b) = input.get(i) {
                        let next = match (n, b) {
                            (Num::Minus, b'0') => Num::Zero,
                            (Num::Minus, b'1'..=b'9') => Num::Int,
                            (Num::Int, b'0'..=b'9') => Num::Int,
                            (Num::Zero | Num::Int, b'.') => Num::Dot,
                            (Num::Dot | Num::Frac, b'0'..=b'9') => Num::Frac,
                            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
                            (Num::Exp, b'+' | b'-') => Num::ExpSign,
                            (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => {
                                Num::ExpDigits
                            }
                            _ => break,
                        };
                        n = next;
                        i += 1;
                    }
                    if self.num.len() + (i - start) > self.opts.limits.max_number_len {
                        return Err(self.err(Reason::NumberTooLong, i));
                    }
                    self.num.extend_from_slice(&input[start..i]);
                    if i < len {
                        // Any other byte ends the number; it is examined again.
                        self.end_number::<DD, W>(n, self.offset + i as u64, out)?;
                    } else {
                        self.state = State::Number(n);
                    }
                }
                State::Escape => {
                    let b = input[i];
                    let c = match b {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            self.state = State::Unicode { n: 0, acc: 0 };
                            i += 1;
                            continue;
                        }
                        _ => return Err(self.err(Reason::Syntax, i)),
                    };
                    self.str_char(c, i, out)?;
                    self.state = State::Str;
                    i += 1;
                }
                State::Unicode { n, acc } => {
                    let b = input[i];
                    let d = match b {
                        b'0'..=b'9' => b - b'0',
                        b'a'..=b'f' => b - b'a' + 10,
                        b'A'..=b'F' => b - b'A' + 10,
                        _ => return Err(self.err(Reason::Syntax, i)),
                    };
                    let acc = (acc << 4) | d as u16;
                    if n == 3 {
                        self.state = State::Str;
                        self.str_unicode(acc, i, out)?;
                    } else {
                        self.state = State::Unicode { n: n + 1, acc };
                    }
                    i += 1;
                }
                State::Literal { lit, idx } => {
                    let word = LITERALS[lit as usize];
                    if input[i] != word[idx as usize] {
                        return Err(self.err(Reason::Syntax, i));
                    }
                    i += 1;
                    if idx as usize + 1 == word.len() {
                        self.body.push(LITERAL_CBOR[lit as usize]);
                        self.value_done::<DD, W>(out);
                    } else {
                        self.state = State::Literal { lit, idx: idx + 1 };
                    }
                }
            }
        }
        Ok(())
    }

    /// Not inside a string, number or literal.
    #[inline]
    fn between_tokens(&self) -> bool {
        matches!(
            self.state,
            State::Value
                | State::ArrayFirst
                | State::ObjectFirst
                | State::Key
                | State::Colon
                | State::AfterValue
                | State::TopDone
        )
    }

    /// Content bytes buffered: the body without the inline heads.
    #[inline]
    fn window_fill(&self) -> usize {
        self.body.len() - self.inline
    }

    /// A structural byte (not whitespace) outside strings, numbers and
    /// literals, at `input[i]`. Returns where to continue.
    #[inline(always)]
    fn structural<const DD: bool, const W: bool, const V: bool>(
        &mut self,
        b: u8,
        input: &[u8],
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        // Outgrown the window: stream out what is buffered. Checked only where
        // a token starts, so the output never depends on how input was cut.
        if matches!(
            self.state,
            State::Value | State::ArrayFirst | State::ObjectFirst | State::Key
        ) {
            self.window_check(out);
        }
        match self.state {
            State::Value => self.begin_value::<DD, W, V, false>(b, input, i, out),
            State::ArrayFirst => {
                if b == b']' {
                    self.close::<DD, W>(Container::Array, i, out)?;
                    Ok(i + 1)
                } else {
                    self.begin_value::<DD, W, V, false>(b, input, i, out)
                }
            }
            State::ObjectFirst | State::Key => match b {
                b'"' => self.begin_string::<DD, W, V>(true, input, i, out),
                b'}' if self.state == State::ObjectFirst => {
                    self.close::<DD, W>(Container::Object, i, out)?;
                    Ok(i + 1)
                }
                _ => Err(self.err(Reason::Syntax, i)),
            },
            State::Colon => {
                if b != b':' {
                    return Err(self.err(Reason::Syntax, i));
                }
                self.tag_next_value = self.key_is_object;
                self.state = State::Value;
                Ok(i + 1)
            }
            State::AfterValue => match (b, self.stack.last().map(|f| f.kind)) {
                (b',', Some(Container::Array)) => {
                    self.state = State::Value;
                    Ok(i + 1)
                }
                (b',', Some(Container::Object)) => {
                    self.state = State::Key;
                    Ok(i + 1)
                }
                (b']', Some(Container::Array)) => {
                    self.close::<DD, W>(Container::Array, i, out)?;
                    Ok(i + 1)
                }
                (b'}', Some(Container::Object)) => {
                    self.close::<DD, W>(Container::Object, i, out)?;
                    Ok(i + 1)
                }
                _ => Err(self.err(Reason::Syntax, i)),
            },
            State::TopDone => Err(self.err(Reason::TrailingData, i)),
            _ => Err(self.err(Reason::Syntax, i)),
        }
    }

    /// The window check, for a token starting in state `Value`,
    /// `ArrayFirst`, `ObjectFirst` or `Key` (from [`Self::structural`] and
    /// [`Self::chain`]).
    #[inline(always)]
    fn window_check(&mut self, out: &mut Vec<u8>) {
        if self.window_fill() >= self.flush_at {
            self.window_flush(out);
        }
    }

    /// A token starts with [`Self::flush_at`] reached: write out what is
    /// buffered if the window is full, or (after it has been outgrown) if
    /// everything buffered is complete.
    #[cold]
    #[inline(never)]
    fn window_flush(&mut self, out: &mut Vec<u8>) {
        let Some(top) = self.stack.last() else {
            return;
        };
        if self.window_fill() >= self.opts.window || top.head == NONE {
            let end = self.body.len();
            self.flush(out, end);
        }
    }

    /// Tokens in the grammar's own order — key, colon, value, then comma or
    /// closer — so that the next step is known from where the code is rather
    /// than from a dispatch on the state. Each step does what
    /// [`Self::structural`] does in that state; whitespace, unfinished tokens
    /// and anything unexpected are left to it. `self.state` is kept up to
    /// date throughout. Returns where it stopped.
    #[inline(never)]
    fn chain<const DD: bool, const W: bool, const V: bool>(
        &mut self,
        input: &[u8],
        mut i: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        // Each round: a key (in objects), a value, then commas and closers.
        let mut key = match self.state {
            State::Key | State::ObjectFirst => true,
            State::Value | State::ArrayFirst => false,
            State::AfterValue => {
                // Finish the pending round first.
                match self.after_values::<DD, W>(input, i, out)? {
                    (j, Some(key)) => {
                        i = j;
                        key
                    }
                    (j, None) => return Ok(j),
                }
            }
            _ => return Ok(i),
        };
        loop {
            if key {
                if input.get(i) != Some(&b'"') {
                    return Ok(i);
                }
                self.window_check(out);
                i = self.begin_string::<DD, W, V>(true, input, i, out)?;
                if self.state != State::Value {
                    return Ok(i);
                }
                // The value of the pair: the container is an object (no
                // element count, no `]`).
                let Some(&b) = input.get(i) else {
                    return Ok(i);
                };
                if is_ws(b) {
                    return Ok(i);
                }
                self.window_check(out);
                i = self.begin_value::<DD, W, V, true>(b, input, i, out)?;
            } else {
                let Some(&b) = input.get(i) else {
                    return Ok(i);
                };
                if is_ws(b) || (b == b']' && self.state == State::ArrayFirst) {
                    return Ok(i);
                }
                self.window_check(out);
                i = self.begin_value::<DD, W, V, false>(b, input, i, out)?;
            }
            match self.state {
                State::AfterValue => {}
                State::ObjectFirst => {
                    key = true;
                    continue;
                }
                State::ArrayFirst => {
                    key = false;
                    continue;
                }
                _ => return Ok(i),
            }
            match self.after_values::<DD, W>(input, i, out)? {
                (j, Some(k)) => {
                    i = j;
                    key = k;
                }
                (j, None) => return Ok(j),
            }
        }
    }

    /// In state `AfterValue`: closers, then a comma. Returns where it stopped
    /// and, after a comma, whether a key (rather than a value) comes next;
    /// `None` when it stopped for anything else (left to
    /// [`Self::structural`]).
    #[inline(always)]
    fn after_values<const DD: bool, const W: bool>(
        &mut self,
        input: &[u8],
        mut i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(usize, Option<bool>), CodecError> {
        loop {
            let (Some(&b), Some(top)) = (input.get(i), self.stack.last()) else {
                return Ok((i, None));
            };
            match (b, top.kind) {
                (b',', Container::Object) => {
                    self.state = State::Key;
                    return Ok((i + 1, Some(true)));
                }
                (b',', Container::Array) => {
                    self.state = State::Value;
                    return Ok((i + 1, Some(false)));
                }
                (b'}', Container::Object) => self.close::<DD, W>(Container::Object, i, out)?,
                (b']', Container::Array) => self.close::<DD, W>(Container::Array, i, out)?,
                _ => return Ok((i, None)),
            }
            i += 1;
            if self.state != State::AfterValue {
                return Ok((i, None));
            }
        }
    }

    /// A value starts with `b` at `input[i]`. Returns where to continue.
    /// `PAIR`: it is the value of a key just read (so the innermost
    /// container is an object, which counts pairs at their keys).
    #[inline(always)]
    fn begin_value<const DD: bool, const W: bool, const V: bool, const PAIR: bool>(
        &mut self,
        b: u8,
        input: &[u8],
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        if PAIR {
            debug_assert!(self
                .stack
                .last()
                .is_some_and(|f| f.kind == Container::Object));
        } else if self.stack.is_empty() {
            // A new document (or watch event) starts.
            self.body.extend_from_slice(&SELF_DESCRIBED);
        } else if let Some(f) = self.stack.last_mut() {
            if f.kind == Container::Array {
                f.count += 1;
            }
        }
        if W && self.tag_next_value {
            self.tag_next_value = false;
            self.body.extend_from_slice(&SELF_DESCRIBED);
        }
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= self.opts.limits.max_depth {
                    return Err(self.err(Reason::DepthExceeded, i));
                }
                let (kind, state, closer) = if b == b'{' {
                    (Container::Object, State::ObjectFirst, b'}')
                } else {
                    (Container::Array, State::ArrayFirst, b']')
                };
                let major = kind.major();
                // `{}` / `[]` in one piece: a one-byte head, unless the
                // window check at the closer would have streamed it out.
                if input.get(i + 1) == Some(&closer) && self.window_fill() < self.opts.window {
                    self.body.push(major);
                    self.inline += 1;
                    self.value_done::<DD, W>(out);
                    return Ok(i + 2);
                }
                if self.typed {
                    let pos = self.value_position();
                    self.positions.push(pos);
                }
                // The placeholder is the indefinite head, ready for a flush.
                self.stack.push(Frame {
                    kind,
                    head: self.body.len(),
                    count: 0,
                    entry: NONE,
                });
                self.body.push(major | 31);
                self.inline += 1;
                if kind == Container::Object && DD {
                    self.keys.open_map();
                }
                self.state = state;
                Ok(i + 1)
            }
            b'"' => self.begin_string::<DD, W, V>(false, input, i, out),
            b'-' | b'0'..=b'9' => {
                if let Some((v, end)) = whole_small_int(input, i, self.opts.limits.max_number_len) {
                    write_int(&mut self.body, v);
                    self.value_done::<DD, W>(out);
                    return Ok(end);
                }
                let n = match b {
                    b'-' => Num::Minus,
                    b'0' => Num::Zero,
                    _ => Num::Int,
                };
                self.begin_number(n, b);
                Ok(i + 1)
            }
            b't' | b'f' | b'n' => {
                let lit = match b {
                    b't' => 0,
                    b'f' => 1,
                    _ => 2,
                };
                let word = LITERALS[lit as usize];
                if input.get(i..i + word.len()) == Some(word) {
                    self.body.push(LITERAL_CBOR[lit as usize]);
                    self.value_done::<DD, W>(out);
                    return Ok(i + word.len());
                }
                self.state = State::Literal { lit, idx: 1 };
                Ok(i + 1)
            }
            _ => Err(self.err(Reason::Syntax, i)),
        }
    }

    fn begin_number(&mut self, n: Num, b: u8) {
        self.num.clear();
        self.num.push(b);
        self.state = State::Number(n);
    }

    fn end_number<const DD: bool, const W: bool>(
        &mut self,
        n: Num,
        at: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        if !matches!(n, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits) {
            return Err(CodecError::new(Reason::Syntax, at));
        }
        let integral = matches!(n, Num::Zero | Num::Int);
        match interpret_json_number(&self.num, integral) {
            Some(JsonNumber::Int(v)) => write_int(&mut self.body, v),
            Some(JsonNumber::Float(f)) => write_float(&mut self.body, f),
            None => return Err(CodecError::new(Reason::NumberOutOfRange, at)),
        }
        self.value_done::<DD, W>(out);
        Ok(())
    }

    /// A string starts with the quote at `input[i]`. Returns where to continue.
    #[inline(always)]
    fn begin_string<const DD: bool, const W: bool, const V: bool>(
        &mut self,
        is_key: bool,
        input: &[u8],
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        if is_key {
            if let Some(f) = self.stack.last_mut() {
                f.count += 1;
                if DD {
                    f.entry = NONE;
                }
            }
            if DD {
                // Where the pair starts, until the key is known.
                self.pending_pair = PairLoc {
                    body_start: self.body_base + self.body.len() as u64,
                    ..PairLoc::default()
                };
                self.key_start = self.keys.key_start();
            }
        }
        // Most strings are short: plain ASCII closed within the first
        // sixteen bytes, with 24 bytes of input from the string on. Head and
        // text then go in with one fixed-size copy.
        if let Some((n, chunk)) = short_string::<V>(input, i, self.whole_max) {
            self.inline += 1;
            extend_head_prefix(&mut self.body, self.str_major | n as u8, chunk, n);
            return self.whole_string::<DD, W, true>(
                is_key,
                &chunk[..n],
                true,
                input,
                i + 1 + n,
                out,
            );
        }
        // Fast path: the whole string is here, plain, valid UTF-8 and shorter
        // than the window (so it would never be cut into chunks).
        let start = i + 1;
        let rest = &input[start..];
        let mut n = plain_ascii_run_at::<V>(rest, self.scan);
        if let Some(&stop) = rest.get(n) {
            if stop == b'"' && n <= self.whole_max {
                let s = &rest[..n];
                return self.whole_string::<DD, W, false>(is_key, s, true, input, start + n, out);
            }
            if stop == b'\\' {
                if let Some(quote) = self.unescape::<V>(input, start) {
                    let text = std::mem::take(&mut self.scratch);
                    let r =
                        self.whole_string::<DD, W, false>(is_key, &text, false, input, quote, out);
                    self.scratch = text;
                    return r;
                }
            } else if stop >= 0x80 {
                n += plain_run_at::<V>(&rest[n..], self.scan);
                if rest.get(n) == Some(&b'"')
                    && n <= self.whole_max
                    && std::str::from_utf8(&rest[..n]).is_ok()
                {
                    let s = &rest[..n];
                    return self.whole_string::<DD, W, false>(
                        is_key,
                        s,
                        true,
                        input,
                        start + n,
                        out,
                    );
                }
            }
        }
        self.open_string(is_key, i)
    }

    /// The string with escapes starting at `input[start]` (after the quote),
    /// decoded into `scratch`, when it lies whole in `input`, is ASCII, has no
    /// lone surrogate escape and is short enough for the fast path. Returns
    /// the position of the closing quote; `None` leaves it to the `Str` state.
    #[inline(never)]
    fn unescape<const V: bool>(&mut self, input: &[u8], start: usize) -> Option<usize> {
        self.scratch.clear();
        let mut j = start;
        loop {
            let n = plain_ascii_run_at::<V>(&input[j..], self.scan);
            if self.scratch.len() + n > self.whole_max {
                return None;
            }
            copy_run(&mut self.scratch, input, j, j + n);
            j += n;
            match *input.get(j)? {
                b'"' => break,
                b'\\' => {}
                _ => return None,
            }
            let e = *input.get(j + 1)?;
            let c = ESCAPED[e as usize];
            if c == 0 {
                if e != b'u' {
                    return None;
                }
                let mut v = 0u32;
                for &h in input.get(j + 2..j + 6)? {
                    v = (v << 4) | (h as char).to_digit(16)?;
                }
                // Surrogates (pairs and lone ones) take the slow path.
                let c = char::from_u32(v)?;
                let mut buf = [0u8; 4];
                self.scratch
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                j += 6;
                continue;
            }
            self.scratch.push(c);
            j += 2;
        }
        if self.scratch.len() > self.whole_max {
            return None;
        }
        Some(j)
    }

    /// A whole string `s` whose closing quote is at `input[quote]`: its head
    /// goes straight into the body (unless `WRITTEN`: the caller has put it
    /// there already). `raw`: `s` is the input right before the quote.
    /// Returns where to continue.
    #[inline(always)]
    fn whole_string<const DD: bool, const W: bool, const WRITTEN: bool>(
        &mut self,
        is_key: bool,
        s: &[u8],
        raw: bool,
        input: &[u8],
        quote: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        let n = s.len();
        if WRITTEN {
            // The short-string path has put head and text there.
        } else if n < 24 {
            self.inline += 1;
            // Most strings are short: head and text are assembled in a
            // fixed-size buffer and appended at once (one capacity check, no
            // call) when the input has 24 bytes from the string on, then cut
            // back to their length.
            let from = quote - n;
            if let Some(chunk) = input
                .get(from..from + 24)
                .filter(|_| raw)
                .and_then(|c| <&[u8; 24]>::try_from(c).ok())
            {
                extend_head_prefix(&mut self.body, self.str_major | n as u8, chunk, n);
            } else {
                self.body.push(self.str_major | n as u8);
                self.body.extend_from_slice(s);
            }
        } else {
            let before = self.body.len();
            write_head(&mut self.body, self.str_major, n as u64);
            self.inline += self.body.len() - before;
            if raw {
                copy_run(&mut self.body, input, quote - n, quote);
            } else {
                self.body.extend_from_slice(s);
            }
        }
        let mut next = quote + 1;
        if is_key {
            if DD {
                if raw {
                    self.keys.padded_key_bytes(&input[quote - n..], n);
                } else {
                    self.keys.key_bytes(s);
                }
            }
            if W && self.stack.len() == 1 {
                let k = n.min(self.probe.len());
                self.probe[..k].copy_from_slice(&s[..k]);
                self.probe_len = k as u8;
            }
            if self.typed {
                self.key_read(Some(s));
            }
            self.end_key::<DD, W>(quote)?;
            self.state = State::Colon;
            // The colon, when it follows at once (compact JSON).
            if input.get(next) == Some(&b':') {
                if W {
                    self.tag_next_value = self.key_is_object;
                }
                self.state = State::Value;
                next += 1;
            }
            return Ok(next);
        }
        if self.typed && self.value_position().bytes {
            // Head and text are the last bytes of the body; the head has its final length.
            let head = self.body.len() - n - head_size(n as u64);
            self.bytes_field(head, head_size(n as u64));
        }
        self.value_done::<DD, W>(out);
        Ok(next)
    }

    /// A string that does not lie whole in this piece (or has escapes):
    /// give it a placeholder and a slot, and read it in the `Str` state.
    #[inline(never)]
    fn open_string(&mut self, is_key: bool, i: usize) -> Result<usize, CodecError> {
        self.slots.push(Slot {
            pos: self.body.len(),
            major: self.str_major,
            kind: SlotKind::OpenStr,
            len: 0,
        });
        self.body.push(self.str_major | 31);
        self.inline += 1;
        self.str_slot = self.slots.len() - 1;
        self.str_is_key = is_key;
        self.str_len = 0;
        self.state = State::Str;
        Ok(i + 1)
    }

    /// Account for new string bytes appended to the body since `from`.
    #[inline]
    fn str_added(&mut self, from: usize, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let added = (self.body.len() - from) as u64;
        self.str_len += added;
        if self.str_len > self.opts.limits.max_string_len {
            return Err(self.err(Reason::StringTooLong, i));
        }
        if self.str_is_key {
            if self.opts.dedupe_keys {
                self.keys.key_bytes(&self.body[from..]);
            }
            if self.opts.watch && self.stack.len() == 1 {
                for &b in &self.body[from..] {
                    let n = self.probe_len as usize;
                    if n >= self.probe.len() {
                        break;
                    }
                    self.probe[n] = b;
                    self.probe_len += 1;
                }
            }
        }
        // A long string streams out in chunks of exactly `window` content
        // bytes (floored to a character boundary for text), wherever the
        // input pieces happen to end.
        while let Some(slot) = self.slots.get(self.str_slot) {
            let content = &self.body[slot.pos + 1..];
            if content.len() < self.opts.window.max(1) {
                break;
            }
            let mut cut = self.opts.window.max(1);
            if self.str_major == MAJOR_TEXT {
                while cut > 0 && cut < content.len() && (content[cut] & 0xC0) == 0x80 {
                    cut -= 1;
                }
                if cut == 0 {
                    cut = 1;
                    while cut < content.len() && (content[cut] & 0xC0) == 0x80 {
                        cut += 1;
                    }
                }
            }
            let end = slot.pos + 1 + cut;
            self.flush(out, end);
        }
        Ok(())
    }

    fn str_raw(&mut self, run: &[u8], i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let from = self.body.len();
        if self.pending_high.take().is_some() {
            self.body.extend_from_slice(REPLACEMENT);
        }
        if run.is_ascii() && self.utf8.is_clear() {
            self.body.extend_from_slice(run);
        } else {
            let mut sink = Sink {
                body: &mut self.body,
            };
            let _ = self.utf8.push(run, false, &mut sink);
        }
        self.str_added(from, i, out)
    }

    fn str_char(&mut self, c: char, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let from = self.body.len();
        if self.pending_high.take().is_some() {
            self.body.extend_from_slice(REPLACEMENT);
        }
        let mut sink = Sink {
            body: &mut self.body,
        };
        let _ = self.utf8.end(false, &mut sink);
        let mut buf = [0u8; 4];
        self.body
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.str_added(from, i, out)
    }

    /// A `\uXXXX` escape, with Go's surrogate rules: a valid pair combines, any
    /// lone surrogate becomes U+FFFD.
    fn str_unicode(&mut self, v: u16, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(h) = self.pending_high.take() {
            if (0xDC00..=0xDFFF).contains(&v) {
                let c = 0x10000 + (((h as u32) - 0xD800) << 10) + ((v as u32) - 0xDC00);
                return self.str_char(char::from_u32(c).unwrap_or('\u{FFFD}'), i, out);
            }
            self.str_char('\u{FFFD}', i, out)?;
        }
        if (0xD800..=0xDBFF).contains(&v) {
            // Flush a pending partial UTF-8 sequence before deferring.
            let from = self.body.len();
            let mut sink = Sink {
                body: &mut self.body,
            };
            let _ = self.utf8.end(false, &mut sink);
            self.str_added(from, i, out)?;
            self.pending_high = Some(v);
            Ok(())
        } else {
            let c = char::from_u32(v as u32).unwrap_or('\u{FFFD}');
            self.str_char(c, i, out)
        }
    }

    fn end_string<const DD: bool, const W: bool>(
        &mut self,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let from = self.body.len();
        if self.pending_high.take().is_some() {
            self.body.extend_from_slice(REPLACEMENT);
        }
        let mut sink = Sink {
            body: &mut self.body,
        };
        let _ = self.utf8.end(false, &mut sink);
        self.str_added(from, i, out)?;
        // The open string's slot is the last one: nothing else gets a slot
        // while it is read.
        debug_assert!(self.str_slot == NONE || self.str_slot + 1 == self.slots.len());
        if self.typed {
            // A string streamed out in part (longer than the window) is neither a field
            // name nor a `[]byte` value cborgate rewrites.
            let whole = self
                .slots
                .get(self.str_slot)
                .filter(|slot| slot.kind == SlotKind::OpenStr)
                .map(|slot| slot.pos);
            if self.str_is_key {
                let key = whole.map(|pos| &self.body[pos + 1..]);
                let key = key.filter(|k| k.len() <= MAX_FIELD_NAME);
                self.next_value = self.child_of_top(key, false);
            } else if let Some(pos) = whole.filter(|_| self.value_position().bytes) {
                // Its placeholder (one byte) and text are the last bytes of the body.
                if self.bytes_field(pos, 1) {
                    self.slots.pop();
                    self.str_slot = NONE;
                    self.value_done::<DD, W>(out);
                    return Ok(());
                }
            }
        }
        if let Some(slot) = self.slots.get_mut(self.str_slot) {
            let len = self.body.len() - slot.pos - 1;
            let chunk = slot.kind == SlotKind::OpenChunk;
            if len < 24 {
                self.body[slot.pos] = slot.major | len as u8;
                self.slots.pop();
            } else {
                slot.kind = SlotKind::Head;
                slot.len = len as u64;
            }
            if chunk {
                self.body.push(0xff);
            }
        }
        self.str_slot = NONE;
        if self.str_is_key {
            self.end_key::<DD, W>(i)?;
            self.state = State::Colon;
            Ok(())
        } else {
            self.value_done::<DD, W>(out);
            Ok(())
        }
    }

    /// With a schema: where the value about to start (or just ended) sits. The top of a
    /// document is a response's object or list, or a watch event.
    fn value_position(&self) -> Position {
        match self.stack.last() {
            None if self.opts.watch => Position::event(),
            None => Position::response_top(self.opts.schema),
            Some(f) if f.kind == Container::Object => self.next_value,
            Some(_) => self.child_of_top(None, true),
        }
    }

    /// With a schema: the position of a child of the innermost open container.
    fn child_of_top(&self, key: Option<&[u8]>, array: bool) -> Position {
        match self.positions.last() {
            Some(p) => p.child(self.opts.schema, key, array),
            None => Position::top(Schema::Unstructured),
        }
    }

    /// With a schema: a key `s` (a whole string) has been read; where its value sits.
    #[cold]
    fn key_read(&mut self, s: Option<&[u8]>) {
        let key = s.filter(|k| k.len() <= MAX_FIELD_NAME);
        self.next_value = self.child_of_top(key, false);
    }

    /// The string value at the end of the body, its head at `body[head..]` taking
    /// `head_len` bytes (as counted in `inline`), is a `[]byte` field: its base64 text
    /// becomes tag 22 and the bytes, as a CBOR-enabled kube-apiserver 1.36.2 writes such a
    /// field (observed: ConfigMap `binaryData` `"AAEC//4="` is `d6 45 00 01 02 ff fe`,
    /// `tests/data/corpus/objects/configmaplist-bytes`; docs/wire.md §2). Base64 that Go's decoder refuses cannot come from a Go upstream (it wrote the
    /// text from the bytes); should it come, the text string stays as it is and `false`
    /// says so. Decided by the text alone, so the bytes do not depend on how the input
    /// was cut.
    #[cold]
    #[inline(never)]
    fn bytes_field(&mut self, head: usize, head_len: usize) -> bool {
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        let mut b64 = GoBase64::new();
        let ok = b64
            .push::<true>(&self.body[head + head_len..], &mut raw)
            .and_then(|()| b64.finish())
            .is_ok();
        if ok {
            self.body.truncate(head);
            let before = self.body.len();
            self.body.push(TAG_BASE64);
            write_head(&mut self.body, MAJOR_BYTES, raw.len() as u64);
            self.inline = self.inline - head_len + (self.body.len() - before);
            self.body.extend_from_slice(&raw);
        }
        self.raw = raw;
        ok
    }

    #[inline(always)]
    fn end_key<const DD: bool, const W: bool>(&mut self, i: usize) -> Result<(), CodecError> {
        // Without watch mode the probe stays empty and `key_is_object` false.
        if W {
            self.key_is_object = self.stack.len() == 1
                && self.probe_len as usize == 6
                && &self.probe[..6] == b"object";
            self.probe_len = 0;
        }
        if !DD {
            return Ok(());
        }
        self.dedupe_key(i)
    }

    /// Duplicate detection for the key just read.
    fn dedupe_key(&mut self, i: usize) -> Result<(), CodecError> {
        let pair = self.pending_pair;
        match self.keys.key_end(self.key_start, pair) {
            KeyOutcome::New(idx) => {
                if let Some(f) = self.stack.last_mut() {
                    f.entry = idx;
                }
                Ok(())
            }
            KeyOutcome::Dup(idx) => {
                let Some(earlier) = self.keys.payload_mut(idx) else {
                    return Ok(());
                };
                let old = *earlier;
                *earlier = pair;
                if old.body_start < self.body_base {
                    // The earlier pair has already been streamed out.
                    return Err(self.err(Reason::DuplicateKey, i));
                }
                self.holes.push((
                    (old.body_start - self.body_base) as usize,
                    (old.body_end - self.body_base) as usize,
                ));
                if let Some(f) = self.stack.last_mut() {
                    f.count -= 1;
                    f.entry = idx;
                }
                Ok(())
            }
        }
    }

    /// A closer for `kind` at `input[i]`.
    #[inline(always)]
    fn close<const DD: bool, const W: bool>(
        &mut self,
        kind: Container,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        // The common case inline: the matching container, its placeholder
        // still buffered, fewer than 24 elements, no key sets to close.
        if let Some(&f) = self.stack.last() {
            if f.kind == kind && f.count < 24 && f.head != NONE && !DD {
                self.stack.pop();
                if self.typed {
                    self.positions.pop();
                }
                self.body[f.head] = kind.major() | f.count as u8;
                self.value_done::<DD, W>(out);
                return Ok(());
            }
        }
        self.close_slow::<DD, W>(kind, i, out)
    }

    #[inline(never)]
    fn close_slow<const DD: bool, const W: bool>(
        &mut self,
        kind: Container,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let Some(f) = self.stack.pop() else {
            return Err(self.err(Reason::Syntax, i));
        };
        if self.typed {
            self.positions.pop();
        }
        if f.kind != kind {
            return Err(self.err(Reason::Syntax, i));
        }
        let major = kind.major();
        if f.head == NONE {
            self.body.push(0xff);
        } else if f.count < 24 {
            self.body[f.head] = major | f.count as u8;
        } else {
            self.slots.push(Slot {
                pos: f.head,
                major,
                kind: SlotKind::Head,
                len: f.count,
            });
        }
        if kind == Container::Object && DD {
            self.keys.close_map();
        }
        self.value_done::<DD, W>(out);
        Ok(())
    }

    /// A value just ended.
    #[inline(always)]
    fn value_done<const DD: bool, const W: bool>(&mut self, out: &mut Vec<u8>) {
        match self.stack.last() {
            None => self.document_done(out),
            Some(f) => {
                if DD && f.kind == Container::Object && f.entry != NONE {
                    self.pair_done(f.entry);
                }
                self.state = State::AfterValue;
            }
        }
    }

    /// A top-level value (a body or a watch event) just ended.
    fn document_done(&mut self, out: &mut Vec<u8>) {
        let end = self.body.len();
        self.flush(out, end);
        self.body_base = 0;
        self.documents += 1;
        self.state = if self.opts.watch {
            State::Value
        } else {
            State::TopDone
        };
    }

    /// Record where the pair of key-set entry `entry` ends.
    fn pair_done(&mut self, entry: usize) {
        let body_end = self.body_base + self.body.len() as u64;
        if let Some(p) = self.keys.payload_mut(entry) {
            p.body_end = body_end;
        }
    }

    /// Write `body[..end]` to `out` with its heads. Still-open containers
    /// switch to indefinite length; an open string (always the last slot)
    /// becomes an indefinite string whose next chunk starts with what is
    /// kept, `body[end..]`.
    fn flush(&mut self, out: &mut Vec<u8>, end: usize) {
        if self.slots.is_empty() && self.holes.is_empty() {
            // Every head is in place.
            out.extend_from_slice(&self.body[..end]);
        } else {
            self.flush_with_slots(out, end);
        }
        let open_string = self.str_slot != NONE;
        debug_assert!(end > 0 || !open_string);
        self.flush_at = if self.stack.is_empty() {
            self.opts.window
        } else {
            (self.opts.window / 4).min(EAGER_FLUSH)
        };
        self.slots.clear();
        self.holes.clear();
        for f in self.stack.iter_mut() {
            f.head = NONE;
        }
        if open_string && end > 0 {
            // The rest of the string goes into further chunks: the last byte
            // written out becomes the next chunk's placeholder. (An open
            // string's content starts after its placeholder, so `end` > 0.)
            self.body_base += (end - 1) as u64;
            self.body.drain(..end - 1);
            self.body[0] = self.str_major;
            self.inline = 1;
            self.slots.push(Slot {
                pos: 0,
                major: self.str_major,
                kind: SlotKind::OpenChunk,
                len: 0,
            });
            self.str_slot = 0;
        } else {
            self.body_base += end as u64;
            self.body.drain(..end);
            self.inline = 0;
        }
    }

    /// [`Self::flush`] with heads to put in, or duplicate pairs to cut out.
    #[inline(never)]
    fn flush_with_slots(&mut self, out: &mut Vec<u8>, end: usize) {
        out.reserve(end + self.slots.len() * 9);
        let body = &self.body[..end];
        self.slots.sort_unstable_by_key(|s| s.pos);
        // Holes nest (a map inside a cut-out pair has holes of its own):
        // merge them into disjoint ranges, in order.
        let holes = &mut self.holes;
        holes.sort_unstable();
        let mut merged = 0;
        for k in 0..holes.len() {
            let h = holes[k];
            if merged > 0 && h.0 < holes[merged - 1].1 {
                holes[merged - 1].1 = holes[merged - 1].1.max(h.1);
            } else {
                holes[merged] = h;
                merged += 1;
            }
        }
        holes.truncate(merged);
        let mut cur = 0;
        let mut next_hole = 0;
        for s in &self.slots {
            if s.pos >= end {
                break;
            }
            cur = copy_minus_holes(out, body, cur, s.pos, holes, &mut next_hole);
            while holes.get(next_hole).is_some_and(|h| h.1 <= s.pos) {
                next_hole += 1;
            }
            if holes.get(next_hole).is_some_and(|h| h.0 <= s.pos) {
                continue; // its placeholder is cut out with a duplicate pair
            }
            write_slot_head(out, s, end);
            cur = s.pos + 1;
        }
        copy_minus_holes(out, body, cur, end, holes, &mut next_hole);
    }
}

/// Append `body[cur..to]` without the bytes in `holes` (disjoint, in order;
/// those before `holes[*next]` are passed). Returns where it stopped: `to`,
/// or the end of a hole that reaches past `to`.
fn copy_minus_holes(
    out: &mut Vec<u8>,
    body: &[u8],
    mut cur: usize,
    to: usize,
    holes: &[Hole],
    next: &mut usize,
) -> usize {
    while cur < to {
        match holes.get(*next) {
            Some(&(_, he)) if he <= cur => *next += 1,
            Some(&(hs, he)) if hs <= cur => cur = he,
            Some(&(hs, _)) if hs < to => {
                out.extend_from_slice(&body[cur..hs]);
                cur = hs;
            }
            _ => {
                out.extend_from_slice(&body[cur..to]);
                cur = to;
            }
        }
    }
    cur
}

/// The string whose opening quote is at `input[i]`, when it is short: plain
/// ASCII closed within sixteen bytes, no longer than `whole_max`, and the
/// input goes on for 24 bytes from its first byte. Returns its length and
/// those 24 bytes, for [`extend_head_prefix`].
#[inline(always)]
fn short_string<const V: bool>(
    input: &[u8],
    i: usize,
    whole_max: usize,
) -> Option<(usize, &[u8; 24])> {
    let chunk = input.get(i + 1..)?.first_chunk::<24>()?;
    let n = ascii_stop16::<V>(chunk.first_chunk::<16>()?)?;
    (chunk.get(n) == Some(&b'"') && n <= whole_max).then_some((n, chunk))
}

/// Append `src[a..b]`. Runs between escapes are mostly short: those are
/// copied as a fixed 64 bytes and cut back.
#[inline(always)]
fn copy_run(out: &mut Vec<u8>, src: &[u8], a: usize, b: usize) {
    extend_run::<64>(out, src, a, b);
}

/// The head for a slot when `body[..end]` is written out.
fn write_slot_head(out: &mut Vec<u8>, s: &Slot, end: usize) {
    let buffered = (end - s.pos - 1) as u64;
    match s.kind {
        SlotKind::Head => write_head(out, s.major, s.len),
        SlotKind::OpenStr => {
            out.push(s.major | 31);
            write_head(out, s.major, buffered);
        }
        SlotKind::OpenChunk => write_head(out, s.major, buffered),
    }
}
