//! JSON → CBOR (docs/wire.md §2): upstream JSON bodies and watch events become the
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
//!
//! Here are the transcoder's state and its public interface; the work is in three
//! files, each an `impl JsonToCbor` of its own: `machine.rs` (the token state
//! machine: structure, numbers, literals, keys, the end of a value), `strings.rs`
//! (strings and `[]byte` fields) and `emit.rs` (the window and the output).

mod emit;
mod machine;
mod strings;

use super::error::{CodecError, Reason};
use super::fields::{Position, Schema};
use super::keys::KeySets;
use super::number::{MAJOR_ARRAY, MAJOR_BYTES, MAJOR_MAP, MAJOR_TEXT};
use super::utf8::{Scan, Scanner, Utf8Stream};
use super::{JsonToCborOptions, StringMode};
use emit::{Hole, Slot};

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
}
