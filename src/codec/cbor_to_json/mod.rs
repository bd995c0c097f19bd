//! CBOR → JSON (docs/wire.md §3): CBOR request bodies (and, in upgrade mode, CBOR
//! responses and `cbor-seq` watch streams) become the JSON Go's
//! `encoding/json` would have written for the value Kubernetes decodes.
//!
//! An incremental state machine over CBOR heads: a head split across pieces
//! is buffered (at most nine bytes), string payloads stream straight through,
//! and nesting lives on an explicit stack. JSON needs no lengths up front, so
//! output is produced as the input arrives and nothing is buffered but a
//! partial head, a partial UTF-8 sequence, the keys of open maps (duplicate
//! detection), the text of a tag-0 time and, with a field schema
//! ([`super::fields`]), one position per open container and the current key's first
//! 32 bytes. With a schema that has `[]byte` fields (or is unknown) the fast paths are off:
//! every item takes the general path, where the schema is followed. The JSON text itself (escapes,
//! base64, Go's number text) is written by `json_text.rs`.
//!
//! Here are the transcoder's state, its public interface, the stack and the ends of
//! items; the work is in three files, each an `impl CborToJson` of its own: `items.rs`
//! (the general path, one head at a time), `fast.rs` (the fast path) and `strings.rs`
//! (strings, their encodings and `[]byte` fields).

mod fast;
mod items;
mod strings;

use super::base64::GoBase64;
use super::error::{CodecError, Reason};
use super::fields::{Position, Schema, MAX_FIELD_NAME};
use super::json_text::{Encoder, Encoding};
use super::keys::KeySets;
use super::utf8::Utf8Stream;
use super::CborToJsonOptions;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagKind {
    /// Dropped; the content is kept (55799 and unknown tags).
    Transparent,
    /// Tag 0: RFC 3339 text.
    Time0,
    /// Tag 1: epoch seconds.
    Time1,
    /// Tags 21/22/23 on a byte string.
    Enc(Encoding),
}

#[derive(Debug, Clone, Copy)]
enum Frame {
    /// `remaining == None`: indefinite length.
    Array { remaining: Option<u64>, first: bool },
    Map {
        remaining: Option<u64>,
        key_next: bool,
        first: bool,
    },
    /// A tag wraps the next item; `Parent` is the context it sits in, cached
    /// so that finding it never walks the stack.
    Tag(TagKind, Parent),
    /// An indefinite-length string: definite chunks of `major` until a break.
    IndefStr { major: u8 },
}

/// Where string payload bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Json,
    Key,
    Time,
    Enc(Encoding),
    /// A map key tagged 21/22/23 on a byte string: its text form is the key, as
    /// Kubernetes decodes such a key into a Go `string` (docs/wire.md §3).
    EncKey(Encoding),
    /// An untagged byte string in a `[]byte` field: base64 text, checked as Go decodes it
    /// and written as the JSON string it is (docs/wire.md §3).
    B64Text,
}

/// What the parent of a new item is, looking through tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    Top,
    Array,
    MapKey,
    MapValue,
    IndefStr(u8),
}

/// Streaming CBOR → JSON transcoder. See the module documentation.
#[derive(Debug)]
pub struct CborToJson {
    opts: CborToJsonOptions,
    head: [u8; 9],
    head_len: u8,
    stack: Vec<Frame>,
    /// Containers and tags open (indefinite strings do not count).
    depth: usize,
    // String payload in progress.
    in_str: bool,
    str_remaining: u64,
    str_major: u8,
    str_dest: Dest,
    str_total: u64,
    utf8: Utf8Stream,
    key_start: usize,
    tbuf: Vec<u8>,
    enc: Encoder,
    /// The base64 text of a [`Dest::B64Text`] string, checked as it streams.
    b64: GoBase64,
    keys: KeySets<()>,
    /// Where an encoded key's text starts in `out` (for duplicate detection).
    enc_key_start: usize,
    /// `opts.schema` marks no field ([`Schema::marks_nothing`]): no field bookkeeping, fast
    /// paths on.
    plain: bool,
    /// With a schema: the position of each open array and map, innermost last.
    positions: Vec<Position>,
    /// With a schema: the position of the value being read (set at its first head).
    pos: Position,
    /// With a schema: the position of the value after the key just read.
    next_value: Position,
    /// With a schema: the current key, for matching field names (`None`: tagged or long).
    field_name: [u8; MAX_FIELD_NAME],
    field_name_len: Option<u8>,
    offset: u64,
    documents: u64,
    top_done: bool,
    error: Option<CodecError>,
}

/// Length of a CBOR head, from its first byte.
#[inline(always)]
fn head_len(b0: u8) -> usize {
    match b0 & 31 {
        24 => 2,
        25 => 3,
        26 => 5,
        27 => 9,
        _ => 1,
    }
}

impl CborToJson {
    pub fn new(opts: CborToJsonOptions) -> Self {
        CborToJson {
            opts,
            head: [0; 9],
            head_len: 0,
            stack: Vec::new(),
            depth: 0,
            in_str: false,
            str_remaining: 0,
            str_major: 0,
            str_dest: Dest::Json,
            str_total: 0,
            utf8: Utf8Stream::new(),
            key_start: 0,
            tbuf: Vec::new(),
            enc: Encoder::new(Encoding::Hex),
            b64: GoBase64::new(),
            keys: KeySets::new(),
            enc_key_start: 0,
            plain: opts.schema.marks_nothing(),
            positions: Vec::new(),
            pos: Position::top(Schema::Unstructured),
            next_value: Position::top(Schema::Unstructured),
            field_name: [0; MAX_FIELD_NAME],
            field_name_len: None,
            offset: 0,
            documents: 0,
            top_done: false,
            error: None,
        }
    }

    /// Start over on a new, independent input, exactly as if freshly made
    /// with the same options, but keep the buffers already allocated, so a
    /// reused transcoder allocates nothing once warmed up.
    pub fn reset(&mut self) {
        let mut stack = std::mem::take(&mut self.stack);
        let mut tbuf = std::mem::take(&mut self.tbuf);
        let mut keys = std::mem::replace(&mut self.keys, KeySets::new());
        let mut positions = std::mem::take(&mut self.positions);
        stack.clear();
        tbuf.clear();
        keys.clear();
        positions.clear();
        *self = CborToJson {
            stack,
            tbuf,
            keys,
            positions,
            ..CborToJson::new(self.opts)
        };
    }

    /// Completed top-level items so far.
    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// Feed the next piece of CBOR; JSON produced so far is appended to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = self.run(input, out);
        self.offset += input.len() as u64;
        if let Err(e) = r {
            self.error = Some(e);
        }
        r
    }

    /// The input is complete.
    pub fn finish(&mut self, _out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let idle = self.stack.is_empty() && !self.in_str && self.head_len == 0;
        let ok = if self.opts.sequence {
            idle
        } else {
            idle && self.top_done
        };
        if ok {
            Ok(())
        } else {
            let e = CodecError::new(Reason::Truncated, self.offset);
            self.error = Some(e);
            Err(e)
        }
    }

    fn run(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let len = input.len();
        let mut i = 0;
        while i < len {
            if self.in_str {
                let take = (self.str_remaining.min((len - i) as u64)) as usize;
                self.str_payload(&input[i..], take, i, out)?;
                i += take;
                self.str_remaining -= take as u64;
                if self.str_remaining == 0 {
                    self.in_str = false;
                    self.chunk_done(i, out)?;
                }
                continue;
            }
            if self.head_len == 0 && self.plain {
                i = self.fast(input, i, out)?;
                if i == len {
                    break;
                }
            }
            if self.top_done && self.stack.is_empty() && !self.opts.sequence {
                return Err(self.err(Reason::TrailingData, i));
            }
            // A whole head in this piece: read it in place.
            if self.head_len == 0 {
                let b0 = input[i];
                let need = head_len(b0);
                if let Some(h) = input.get(i + 1..i + need) {
                    let mut arg = if b0 & 31 < 24 { (b0 & 31) as u64 } else { 0 };
                    for &b in h {
                        arg = (arg << 8) | b as u64;
                    }
                    i += need;
                    let (major, ai) = (b0 >> 5, b0 & 31);
                    if !self.plain {
                        // A schema is followed on the general path only.
                    } else if (major == 2 || major == 3) && ai < 28 {
                        if let Some(end) = self.whole_string(major, arg, input, i, out)? {
                            i = end;
                            continue;
                        }
                    } else if (major == 4 || major == 5)
                        && ai < 28
                        && self.definite_container(major, arg, i, out)?
                    {
                        continue;
                    }
                    self.item(major, ai, arg, i, out)?;
                    continue;
                }
            }
            // Assemble a head split across pieces.
            if self.head_len == 0 {
                self.head[0] = input[i];
                self.head_len = 1;
                i += 1;
            }
            let need = head_len(self.head[0]);
            while (self.head_len as usize) < need && i < len {
                self.head[self.head_len as usize] = input[i];
                self.head_len += 1;
                i += 1;
            }
            if (self.head_len as usize) < need {
                return Ok(());
            }
            let b0 = self.head[0];
            let mut arg = if b0 & 31 < 24 { (b0 & 31) as u64 } else { 0 };
            for &b in &self.head[1..need] {
                arg = (arg << 8) | b as u64;
            }
            self.head_len = 0;
            self.item(b0 >> 5, b0 & 31, arg, i, out)?;
        }
        Ok(())
    }

    fn err(&self, reason: Reason, i: usize) -> CodecError {
        CodecError::new(reason, self.offset + i as u64)
    }

    /// Input bytes left after position `i` of the current piece, if known.
    fn remaining_input(&self, i: usize) -> Option<u64> {
        self.opts
            .input_len
            .map(|n| n.saturating_sub(self.offset + i as u64))
    }

    fn parent(&self) -> (Parent, Option<TagKind>) {
        match self.stack.last() {
            None => (Parent::Top, None),
            Some(Frame::Tag(k, p)) => (*p, Some(*k)),
            Some(Frame::Array { .. }) => (Parent::Array, None),
            Some(Frame::Map { key_next: true, .. }) => (Parent::MapKey, None),
            Some(Frame::Map { .. }) => (Parent::MapValue, None),
            Some(Frame::IndefStr { major }) => (Parent::IndefStr(*major), None),
        }
    }

    /// Write the separator an item needs in its container (not inside tags).
    #[inline(always)]
    fn separator(&mut self, out: &mut Vec<u8>) {
        match self.stack.last_mut() {
            Some(Frame::Array { first, .. }) => {
                if !*first {
                    out.push(b',');
                }
                *first = false;
            }
            Some(Frame::Map {
                key_next: true,
                first,
                ..
            }) => {
                if !*first {
                    out.push(b',');
                }
                *first = false;
            }
            _ => {}
        }
    }

    fn push_frame(&mut self, f: Frame, i: usize) -> Result<(), CodecError> {
        if !matches!(f, Frame::IndefStr { .. }) {
            if self.depth >= self.opts.limits.max_depth {
                return Err(self.err(Reason::DepthExceeded, i));
            }
            self.depth += 1;
        }
        if !self.plain && matches!(f, Frame::Array { .. } | Frame::Map { .. }) {
            self.positions.push(self.pos);
        }
        self.stack.push(f);
        Ok(())
    }

    fn pop_frame(&mut self) -> Option<Frame> {
        let f = self.stack.pop();
        if let Some(f) = f {
            if !matches!(f, Frame::IndefStr { .. }) {
                self.depth -= 1;
            }
            if !self.plain && matches!(f, Frame::Array { .. } | Frame::Map { .. }) {
                self.positions.pop();
            }
        }
        f
    }

    /// With a schema: where a new value (its first head) sits.
    fn position_of(&self, parent: Parent) -> Position {
        let schema = self.opts.schema;
        match (parent, self.positions.last()) {
            (Parent::Array, Some(p)) => p.child(schema, None, true),
            (Parent::MapValue, _) => self.next_value,
            _ => Position::top(schema),
        }
    }

    /// With a schema: a map key has ended; where its value sits.
    fn key_read(&mut self) {
        let schema = self.opts.schema;
        let name = self.field_name_len.map(|n| &self.field_name[..n as usize]);
        self.next_value = match self.positions.last() {
            Some(p) => p.child(schema, name, false),
            None => Position::top(Schema::Unstructured),
        };
    }

    fn brk(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        match self.stack.last().copied() {
            Some(Frame::Array {
                remaining: None, ..
            }) => {
                self.pop_frame();
                out.push(b']');
                self.item_done(i, out)
            }
            Some(Frame::Map {
                remaining: None,
                key_next: true,
                ..
            }) => {
                self.pop_frame();
                if self.opts.dedupe_keys {
                    self.keys.close_map();
                }
                out.push(b'}');
                self.item_done(i, out)
            }
            Some(Frame::IndefStr { .. }) => {
                self.pop_frame();
                self.string_done(i, out)
            }
            _ => Err(self.err(Reason::Syntax, i)),
        }
    }

    /// An item completed: close tags around it and finished containers.
    #[inline(always)]
    fn item_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        // The common cases, where no container closes: as the loop below.
        match self.stack.last_mut() {
            Some(Frame::Map {
                remaining,
                key_next,
                ..
            }) if *key_next || *remaining != Some(1) => {
                if *key_next {
                    *key_next = false;
                    out.push(b':');
                } else {
                    *key_next = true;
                    if let Some(r) = remaining {
                        *r -= 1;
                    }
                }
                Ok(())
            }
            Some(Frame::Array { remaining, .. }) if *remaining != Some(1) => {
                if let Some(r) = remaining {
                    *r -= 1;
                }
                Ok(())
            }
            _ => self.items_done(i, out),
        }
    }

    /// [`Self::item_done`], closing tags and finished containers.
    fn items_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        loop {
            let Some(top) = self.stack.last_mut() else {
                self.documents += 1;
                if self.opts.sequence {
                    out.push(b'\n');
                } else {
                    self.top_done = true;
                }
                return Ok(());
            };
            match top {
                Frame::Tag(..) => {
                    self.pop_frame();
                }
                Frame::Array { remaining, .. } => {
                    if let Some(r) = remaining {
                        *r -= 1;
                        if *r == 0 {
                            self.pop_frame();
                            out.push(b']');
                            continue;
                        }
                    }
                    return Ok(());
                }
                Frame::Map {
                    remaining,
                    key_next,
                    ..
                } => {
                    if *key_next {
                        *key_next = false;
                        out.push(b':');
                        return Ok(());
                    }
                    *key_next = true;
                    if let Some(r) = remaining {
                        *r -= 1;
                        if *r == 0 {
                            self.pop_frame();
                            if self.opts.dedupe_keys {
                                self.keys.close_map();
                            }
                            out.push(b'}');
                            continue;
                        }
                    }
                    return Ok(());
                }
                Frame::IndefStr { .. } => {
                    // Cannot happen: chunks are not items.
                    return Err(self.err(Reason::Syntax, i));
                }
            }
        }
    }
}
