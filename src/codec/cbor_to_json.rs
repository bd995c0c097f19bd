//! CBOR → JSON (WIRE.md §3): CBOR request bodies (and, in upgrade mode, CBOR
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
//! 32 bytes. With a schema the fast paths are off: every item takes the general path,
//! where the schema is followed. The JSON text itself (escapes,
//! base64, Go's number text) is written by `json_text.rs`.

use super::base64::GoBase64;
use super::error::{CodecError, Reason};
use super::fields::{Position, Schema, MAX_FIELD_NAME};
use super::json_text::{
    quoted, quoted_ascii, write_decimal_i64, write_go_float, Encoder, Encoding, JsonSink,
};
use super::keys::KeySets;
use super::time::{epoch_float_to_nano, epoch_int_to_nano, rfc3339_to_nano, MAX_TIME_TEXT};
use super::utf8::{plain_ascii_prefix, Utf8Stream};
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
    /// `opts.schema` is [`Schema::Unstructured`]: no field bookkeeping, fast paths on.
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
            plain: opts.schema == Schema::Unstructured,
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

    /// With a schema: what a byte or text string value becomes in its field.
    fn string_field(
        &self,
        major: u8,
        tag: Option<TagKind>,
        i: usize,
    ) -> Result<Option<Dest>, CodecError> {
        match self.opts.schema {
            Schema::Typed(_) if self.pos.bytes => {
                if major == 3 {
                    return Err(self.err(Reason::TextForBytes, i));
                }
                Ok(Some(match tag {
                    // Tagged 21–23: the bytes themselves, whatever the tag said; JSON carries
                    // `[]byte` as standard base64.
                    Some(TagKind::Enc(_)) => Dest::Enc(Encoding::Base64),
                    // Untagged: the real server reads base64 text (docs/wire.md §3).
                    _ => Dest::B64Text,
                }))
            }
            // Untagged, its JSON string is right for a `string` field and for a `[]byte`
            // one (the same base64 text, which the legacy server checks); tags 21 and 23
            // mean the text form in one and the bytes in the other.
            Schema::Unknown
                if major == 2 && matches!(tag, Some(TagKind::Enc(e)) if e != Encoding::Base64) =>
            {
                Err(self.err(Reason::AmbiguousBytes, i))
            }
            _ => Ok(None),
        }
    }

    /// One complete head: major type, additional info, argument. `i` is the
    /// position just after the head.
    fn item(
        &mut self,
        major: u8,
        ai: u8,
        arg: u64,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        if (28..=30).contains(&ai) || (ai == 31 && matches!(major, 0 | 1 | 6)) {
            return Err(self.err(Reason::Syntax, i));
        }
        let (parent, tag) = self.parent();
        // Breaks.
        if major == 7 && ai == 31 {
            return self.brk(i, out);
        }
        // Inside an indefinite string only definite chunks of its type may appear.
        if let Parent::IndefStr(m) = parent {
            if major != m || ai == 31 {
                return Err(self.err(Reason::Syntax, i));
            }
            return self.begin_string(major, arg, Dest::Json, true, i, out);
        }
        if parent == Parent::MapKey && !matches!(major, 2 | 3 | 6) {
            return Err(self.err(Reason::InvalidMapKey, i));
        }
        // Content of tags 0 and 1 is checked here.
        match tag {
            Some(TagKind::Time0) if major != 3 || ai == 31 => {
                return Err(self.err(Reason::InvalidTime, i));
            }
            Some(TagKind::Time1) if !matches!((major, ai), (0 | 1, _) | (7, 25..=27)) => {
                return Err(self.err(Reason::InvalidTime, i));
            }
            _ => {}
        }
        if tag.is_none() {
            self.separator(out);
            if !self.plain && parent != Parent::MapKey {
                self.pos = self.position_of(parent);
            }
        }
        match major {
            0 | 1 => {
                if arg > i64::MAX as u64 {
                    return Err(self.err(Reason::NumberOutOfRange, i));
                }
                let v = if major == 0 {
                    arg as i64
                } else {
                    -1 - arg as i64
                };
                if tag == Some(TagKind::Time1) {
                    out.push(b'"');
                    if epoch_int_to_nano(v as i128, out).is_none() {
                        return Err(self.err(Reason::InvalidTime, i));
                    }
                    out.push(b'"');
                } else {
                    write_decimal_i64(out, v);
                }
                self.item_done(i, out)
            }
            2 | 3 => {
                let field = if self.plain || parent == Parent::MapKey {
                    None
                } else {
                    self.string_field(major, tag, i)?
                };
                let dest = match (parent, tag, field) {
                    (Parent::MapKey, Some(TagKind::Enc(e)), _) if major == 2 => Dest::EncKey(e),
                    (Parent::MapKey, ..) => Dest::Key,
                    (_, _, Some(dest)) => dest,
                    (_, Some(TagKind::Time0), _) => Dest::Time,
                    (_, Some(TagKind::Enc(e)), _) if major == 2 => Dest::Enc(e),
                    _ => Dest::Json,
                };
                if !self.plain && parent == Parent::MapKey {
                    self.field_name_len = if tag.is_none() { Some(0) } else { None };
                }
                if ai == 31 {
                    self.start_string(major, dest, i, out);
                    self.push_frame(Frame::IndefStr { major }, i)
                } else {
                    self.start_string(major, dest, i, out);
                    self.begin_string(major, arg, dest, false, i, out)
                }
            }
            4 | 5 => {
                let remaining = if ai == 31 { None } else { Some(arg) };
                if let (Some(n), Some(left)) = (remaining, self.remaining_input(i)) {
                    let min_bytes = if major == 4 { n } else { n.saturating_mul(2) };
                    if min_bytes > left {
                        return Err(self.err(Reason::LengthExceedsInput, i));
                    }
                }
                if major == 4 {
                    out.push(b'[');
                    self.push_frame(
                        Frame::Array {
                            remaining,
                            first: true,
                        },
                        i,
                    )?;
                    if remaining == Some(0) {
                        self.pop_frame();
                        out.push(b']');
                        return self.item_done(i, out);
                    }
                } else {
                    out.push(b'{');
                    self.push_frame(
                        Frame::Map {
                            remaining,
                            key_next: true,
                            first: true,
                        },
                        i,
                    )?;
                    if self.opts.dedupe_keys {
                        self.keys.open_map();
                    }
                    if remaining == Some(0) {
                        self.pop_frame();
                        if self.opts.dedupe_keys {
                            self.keys.close_map();
                        }
                        out.push(b'}');
                        return self.item_done(i, out);
                    }
                }
                Ok(())
            }
            6 => {
                if ai == 31 {
                    return Err(self.err(Reason::Syntax, i));
                }
                let kind = match arg {
                    0 => TagKind::Time0,
                    1 => TagKind::Time1,
                    2 | 3 => return Err(self.err(Reason::UnsupportedTag, i)),
                    21 => TagKind::Enc(Encoding::Base64Url),
                    22 => TagKind::Enc(Encoding::Base64),
                    23 => TagKind::Enc(Encoding::Hex),
                    _ => TagKind::Transparent,
                };
                // A key decodes into a Go `string`: tag 0's text as it is, tags 21–23 turn a
                // byte string into their text form; tag 1's number cannot be a string.
                if parent == Parent::MapKey && kind == TagKind::Time1 {
                    return Err(self.err(Reason::InvalidMapKey, i));
                }
                match tag {
                    Some(TagKind::Time0 | TagKind::Time1) => {
                        return Err(self.err(Reason::InvalidTime, i));
                    }
                    Some(TagKind::Enc(_)) => {
                        // An encoding tag applies only to a byte string directly inside it.
                        if let Some(Frame::Tag(k, _)) = self.stack.last_mut() {
                            *k = TagKind::Transparent;
                        }
                    }
                    _ => {}
                }
                self.push_frame(Frame::Tag(kind, parent), i)
            }
            _ => {
                // Major type 7: simple values and floats.
                let f = match ai {
                    20 => {
                        out.extend_from_slice(b"false");
                        return self.item_done(i, out);
                    }
                    21 => {
                        out.extend_from_slice(b"true");
                        return self.item_done(i, out);
                    }
                    22 => {
                        out.extend_from_slice(b"null");
                        return self.item_done(i, out);
                    }
                    24 if arg < 32 => return Err(self.err(Reason::Syntax, i)),
                    25 => half::f16::from_bits(arg as u16).to_f64(),
                    26 => f32::from_bits(arg as u32) as f64,
                    27 => f64::from_bits(arg),
                    _ => return Err(self.err(Reason::UnsupportedSimple, i)),
                };
                if !f.is_finite() {
                    return Err(self.err(Reason::NanOrInfinity, i));
                }
                if tag == Some(TagKind::Time1) {
                    out.push(b'"');
                    if epoch_float_to_nano(f, out).is_none() {
                        return Err(self.err(Reason::InvalidTime, i));
                    }
                    out.push(b'"');
                } else {
                    write_go_float(out, f);
                }
                self.item_done(i, out)
            }
        }
    }

    /// The common items in a tight loop, from `input[i]` (no head or string
    /// in progress): plain ASCII strings, integers, `true` / `false` / `null`
    /// and definite arrays and maps, each with its head and payload whole in
    /// this piece, directly in a definite array or map. Each takes exactly the
    /// steps [`Self::item`] and the string payload loop would; the innermost
    /// frame lives in locals meanwhile. Returns where the first other item
    /// starts (nothing of it done), for the general path.
    #[inline(always)]
    fn fast(&mut self, input: &[u8], mut i: usize, out: &mut Vec<u8>) -> Result<usize, CodecError> {
        // Input bytes left at `p`: `left.saturating_sub(p)` (no bound without `input_len`).
        let left = match self.opts.input_len {
            Some(n) => n.saturating_sub(self.offset),
            None => u64::MAX,
        };
        let max_str = self.opts.limits.max_string_len;
        let max_depth = self.opts.limits.max_depth;
        let dedupe = self.opts.dedupe_keys;
        'frames: loop {
            // The innermost frame: arrays have `key_next == false`.
            let (mut is_map, mut remaining, mut first, mut key_next) = match self.stack.last() {
                Some(&Frame::Array {
                    remaining: Some(r),
                    first,
                }) => (false, r, first, false),
                Some(&Frame::Map {
                    remaining: Some(r),
                    key_next,
                    first,
                }) => (true, r, first, key_next),
                _ => return Ok(i),
            };
            // Store the locals back into the innermost frame.
            macro_rules! save {
                () => {
                    if let Some(top) = self.stack.last_mut() {
                        *top = if is_map {
                            Frame::Map {
                                remaining: Some(remaining),
                                key_next,
                                first,
                            }
                        } else {
                            Frame::Array {
                                remaining: Some(remaining),
                                first,
                            }
                        };
                    }
                };
            }
            loop {
                let Some(&b0) = input.get(i) else {
                    save!();
                    return Ok(i);
                };
                let ai = b0 & 31;
                let (arg, p) = match ai {
                    0..=23 => (ai as u64, i + 1),
                    24 => match input.get(i + 1) {
                        Some(&b) => (b as u64, i + 2),
                        None => {
                            save!();
                            return Ok(i);
                        }
                    },
                    25 => match input.get(i + 1..i + 3) {
                        Some(&[a, b]) => (u16::from_be_bytes([a, b]) as u64, i + 3),
                        _ => {
                            save!();
                            return Ok(i);
                        }
                    },
                    26 => match input.get(i + 1..i + 5) {
                        Some(&[a, b, c, d]) => (u32::from_be_bytes([a, b, c, d]) as u64, i + 5),
                        _ => {
                            save!();
                            return Ok(i);
                        }
                    },
                    27 => match input
                        .get(i + 1..i + 9)
                        .and_then(|h| <[u8; 8]>::try_from(h).ok())
                    {
                        Some(h) => (u64::from_be_bytes(h), i + 9),
                        None => {
                            save!();
                            return Ok(i);
                        }
                    },
                    _ => {
                        save!();
                        return Ok(i);
                    }
                };
                // `key`: the item is a map key; `sep`: it needs a comma before it.
                let key = key_next;
                let sep = !first && (key || !is_map);
                let major = b0 >> 5;
                match major {
                    2 | 3 => {
                        let Some(end) = usize::try_from(arg)
                            .ok()
                            .and_then(|n| p.checked_add(n))
                            .filter(|&end| end <= input.len())
                        else {
                            save!();
                            return Ok(i);
                        };
                        let n = end - p;
                        if arg > max_str
                            || arg > left.saturating_sub(p as u64)
                            || plain_ascii_prefix(&input[p..], n) != n
                        {
                            save!();
                            return Ok(i);
                        }
                        quoted(out, input, p, n, sep, key);
                        // The only key of a map has nothing to be compared with.
                        if key
                            && dedupe
                            && !(first && remaining == 1)
                            && self.keys.check_key(&input[p..], n, remaining == 1)
                        {
                            first = false;
                            save!();
                            out.pop(); // the colon: output as the slow path leaves it
                            return Err(CodecError::new(
                                Reason::DuplicateKey,
                                self.offset + end as u64,
                            ));
                        }
                        i = end;
                    }
                    0 | 1 => {
                        if key || arg > i64::MAX as u64 {
                            save!();
                            return Ok(i);
                        }
                        if sep {
                            out.push(b',');
                        }
                        if major == 0 && arg < 10 {
                            out.push(b'0' + arg as u8);
                        } else {
                            let v = if major == 0 {
                                arg as i64
                            } else {
                                -1 - arg as i64
                            };
                            write_decimal_i64(out, v);
                        }
                        i = p;
                    }
                    7 if !key && (20..=22).contains(&ai) => {
                        if sep {
                            out.push(b',');
                        }
                        out.extend_from_slice(match ai {
                            20 => b"false",
                            21 => b"true",
                            _ => b"null",
                        });
                        i = p;
                    }
                    4 | 5 if !key => {
                        let min_bytes = if major == 4 {
                            arg
                        } else {
                            arg.saturating_mul(2)
                        };
                        if self.depth >= max_depth || min_bytes > left.saturating_sub(p as u64) {
                            save!();
                            return Ok(i);
                        }
                        i = p;
                        if sep {
                            out.push(b',');
                        }
                        if arg > 0 {
                            out.push(if major == 4 { b'[' } else { b'{' });
                            first = false;
                            save!();
                            self.depth += 1;
                            is_map = major == 5;
                            remaining = arg;
                            first = true;
                            key_next = is_map;
                            self.stack.push(if is_map {
                                Frame::Map {
                                    remaining: Some(arg),
                                    key_next,
                                    first,
                                }
                            } else {
                                Frame::Array {
                                    remaining: Some(arg),
                                    first,
                                }
                            });
                            if is_map && dedupe {
                                self.keys.open_map();
                            }
                            continue;
                        }
                        // Opened and closed at once: depth and key sets end unchanged.
                        out.extend_from_slice(if major == 4 { b"[]" } else { b"{}" });
                    }
                    _ => {
                        save!();
                        return Ok(i);
                    }
                }
                // The item is complete: as `item_done`, with the separator's `first`.
                first = false;
                if key {
                    key_next = false;
                    continue;
                }
                // As `items_done`: close finished containers while the parent
                // is a definite array or map, and count the item in it.
                while remaining == 1 {
                    self.stack.pop();
                    self.depth -= 1;
                    if is_map {
                        out.push(b'}');
                        if dedupe {
                            self.keys.close_map();
                        }
                    } else {
                        out.push(b']');
                    }
                    // Its `first` is false and, in a map, `key_next` too: the
                    // closed container was a value (never a key) in it.
                    (is_map, remaining) = match self.stack.last() {
                        Some(&Frame::Array {
                            remaining: Some(r), ..
                        }) => (false, r),
                        Some(&Frame::Map {
                            remaining: Some(r), ..
                        }) => (true, r),
                        _ => {
                            // A tag, the top level or an indefinite container.
                            self.items_done(i, out)?;
                            continue 'frames;
                        }
                    };
                }
                remaining -= 1;
                key_next = is_map;
            }
        }
    }

    /// Fast path for a definite string (head just read, payload from
    /// `input[i]`) that lies whole in this piece, directly in an array or map:
    /// the same steps as [`Self::item`], [`Self::begin_string`] and the payload
    /// loop take for it, without the round trips. `None`: not such a string,
    /// nothing done.
    #[inline(always)]
    fn whole_string(
        &mut self,
        major: u8,
        len: u64,
        input: &[u8],
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<usize>, CodecError> {
        let dest = match self.stack.last() {
            Some(Frame::Map { key_next: true, .. }) => Dest::Key,
            Some(Frame::Map { .. } | Frame::Array { .. }) => Dest::Json,
            _ => return Ok(None),
        };
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|n| i.checked_add(n))
            .filter(|&end| end <= input.len())
        else {
            return Ok(None);
        };
        if len > self.opts.limits.max_string_len
            || self.remaining_input(i).is_some_and(|left| len > left)
        {
            return Ok(None);
        }
        let n = end - i;
        let plain = plain_ascii_prefix(&input[i..], n);
        // ASCII: valid in both string types; quotes, backslashes and control
        // bytes escaped, if any.
        if plain == n || input[i + plain..end].is_ascii() {
            // Separator, string and what `item_done` does after it, with one
            // look at the enclosing frame.
            self.str_major = major;
            self.str_dest = dest;
            let closes = match self.stack.last_mut() {
                Some(Frame::Map {
                    key_next: key_next @ true,
                    first,
                    remaining,
                }) => {
                    quoted_ascii(out, input, i, n, plain, !*first, true);
                    *first = false;
                    if self.opts.dedupe_keys
                        && self.keys.check_key(&input[i..], n, *remaining == Some(1))
                    {
                        out.pop(); // the colon: output as the slow path leaves it
                        return Err(CodecError::new(
                            Reason::DuplicateKey,
                            self.offset + end as u64,
                        ));
                    }
                    *key_next = false;
                    false
                }
                Some(Frame::Map {
                    key_next,
                    remaining,
                    ..
                }) => {
                    quoted_ascii(out, input, i, n, plain, false, false);
                    if *remaining == Some(1) {
                        true
                    } else {
                        *key_next = true;
                        if let Some(r) = remaining {
                            *r -= 1;
                        }
                        false
                    }
                }
                Some(Frame::Array { first, remaining }) => {
                    quoted_ascii(out, input, i, n, plain, !*first, false);
                    *first = false;
                    if *remaining == Some(1) {
                        true
                    } else {
                        if let Some(r) = remaining {
                            *r -= 1;
                        }
                        false
                    }
                }
                _ => return Ok(None), // not reached: `dest` came from this frame
            };
            if closes {
                self.items_done(end, out)?;
            }
            return Ok(Some(end));
        }
        self.separator(out);
        self.start_string(major, dest, i, out);
        self.str_total = len;
        if end > i {
            self.str_payload(&input[i..], end - i, i, out)?;
        }
        self.chunk_done(end, out)?;
        Ok(Some(end))
    }

    /// Fast path for a definite array or map (head just read, at `i`) as a
    /// value in an array or map: the same steps as [`Self::item`] takes for
    /// it. `false`: not such a container, or one that [`Self::item`] must
    /// reject; nothing done.
    #[inline(always)]
    fn definite_container(
        &mut self,
        major: u8,
        n: u64,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, CodecError> {
        if self.depth >= self.opts.limits.max_depth {
            return Ok(false);
        }
        if let Some(left) = self.remaining_input(i) {
            let min_bytes = if major == 4 { n } else { n.saturating_mul(2) };
            if min_bytes > left {
                return Ok(false);
            }
        }
        match self.stack.last_mut() {
            Some(Frame::Array { first, .. }) => {
                if !*first {
                    out.push(b',');
                }
                *first = false;
            }
            Some(Frame::Map {
                key_next: false, ..
            }) => {}
            _ => return Ok(false),
        }
        if n == 0 {
            // Opened and closed at once: depth and key sets end unchanged.
            out.extend_from_slice(if major == 4 { b"[]" } else { b"{}" });
            self.item_done(i, out)?;
            return Ok(true);
        }
        self.depth += 1;
        if major == 4 {
            out.push(b'[');
            self.stack.push(Frame::Array {
                remaining: Some(n),
                first: true,
            });
        } else {
            out.push(b'{');
            self.stack.push(Frame::Map {
                remaining: Some(n),
                key_next: true,
                first: true,
            });
            if self.opts.dedupe_keys {
                self.keys.open_map();
            }
        }
        Ok(true)
    }

    /// Open quote and per-string state, at the first head of a string.
    fn start_string(&mut self, major: u8, dest: Dest, _i: usize, out: &mut Vec<u8>) {
        self.str_major = major;
        self.str_dest = dest;
        self.str_total = 0;
        self.utf8.reset();
        match dest {
            Dest::Json => out.push(b'"'),
            Dest::Key => {
                out.push(b'"');
                if self.opts.dedupe_keys {
                    self.key_start = self.keys.key_start();
                }
            }
            Dest::Time => self.tbuf.clear(),
            Dest::Enc(e) => {
                out.push(b'"');
                self.enc = Encoder::new(e);
            }
            Dest::B64Text => {
                out.push(b'"');
                self.b64 = GoBase64::new();
            }
            Dest::EncKey(e) => {
                out.push(b'"');
                self.enc = Encoder::new(e);
                self.enc_key_start = out.len();
                if self.opts.dedupe_keys {
                    self.key_start = self.keys.key_start();
                }
            }
        }
    }

    /// A definite string (or chunk) of `len` bytes begins.
    fn begin_string(
        &mut self,
        _major: u8,
        len: u64,
        _dest: Dest,
        _chunk: bool,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        self.str_total = self.str_total.saturating_add(len);
        if self.str_total > self.opts.limits.max_string_len {
            return Err(self.err(Reason::StringTooLong, i));
        }
        if let Some(left) = self.remaining_input(i) {
            if len > left {
                return Err(self.err(Reason::LengthExceedsInput, i));
            }
        }
        self.str_remaining = len;
        if len == 0 {
            return self.chunk_done(i, out);
        }
        self.in_str = true;
        Ok(())
    }

    /// The next `n` bytes of string payload, `input[..n]` (the rest of
    /// `input` is only read ahead by the scanner), at position `i`.
    fn str_payload(
        &mut self,
        input: &[u8],
        n: usize,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let data = &input[..n];
        let strict = self.str_major == 3;
        match self.str_dest {
            Dest::Json | Dest::Key => {
                if self.str_dest == Dest::Key {
                    if self.opts.dedupe_keys {
                        self.keys.key_bytes(data);
                    }
                    if let Some(n) = self.field_name_len {
                        let n = n as usize;
                        self.field_name_len =
                            self.field_name.get_mut(n..n + data.len()).map(|dst| {
                                dst.copy_from_slice(data);
                                (n + data.len()) as u8
                            });
                    }
                }
                // A plain ASCII prefix is valid and needs no escaping.
                let n = if self.utf8.is_clear() {
                    plain_ascii_prefix(input, n)
                } else {
                    0
                };
                out.extend_from_slice(&data[..n]);
                if n < data.len() {
                    let mut sink = JsonSink { out };
                    if let Err(bad) = self.utf8.push(&data[n..], strict, &mut sink) {
                        return Err(self.err(Reason::InvalidUtf8, i + n + bad.consumed));
                    }
                }
            }
            Dest::Time => {
                if self.tbuf.len() + data.len() > MAX_TIME_TEXT {
                    return Err(self.err(Reason::InvalidTime, i));
                }
                self.tbuf.extend_from_slice(data);
            }
            Dest::Enc(_) | Dest::EncKey(_) => self.enc.push(data, out),
            Dest::B64Text => {
                let before = self.b64.seen();
                if let Err(at) = self.b64.push::<false>(data, out) {
                    let k = at.saturating_sub(before).min(data.len() as u64) as usize;
                    return Err(CodecError::invalid_base64(self.offset + (i + k) as u64, at));
                }
                // Base64 text is JSON-safe but for the line breaks Go skips in it.
                for part in data.split_inclusive(|&b| b == b'\n' || b == b'\r') {
                    match part.split_last() {
                        Some((b'\n', rest)) => {
                            out.extend_from_slice(rest);
                            out.extend_from_slice(b"\\n");
                        }
                        Some((b'\r', rest)) => {
                            out.extend_from_slice(rest);
                            out.extend_from_slice(b"\\r");
                        }
                        _ => out.extend_from_slice(part),
                    }
                }
            }
        }
        Ok(())
    }

    /// A definite string or one chunk of an indefinite string has ended.
    fn chunk_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let in_indef = matches!(self.stack.last(), Some(Frame::IndefStr { .. }));
        if self.str_major == 3 && matches!(self.str_dest, Dest::Json | Dest::Key) {
            // Each text chunk must be valid UTF-8 on its own.
            let mut sink = JsonSink { out };
            if self.utf8.end(true, &mut sink).is_err() {
                return Err(self.err(Reason::InvalidUtf8, i));
            }
        }
        if in_indef {
            return Ok(());
        }
        self.string_done(i, out)
    }

    /// A whole string value has ended.
    fn string_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        match self.str_dest {
            Dest::Json | Dest::Key => {
                let mut sink = JsonSink { out };
                let _ = self.utf8.end(false, &mut sink);
                out.push(b'"');
                if self.str_dest == Dest::Key {
                    if self.opts.dedupe_keys && self.keys.check_key_end(self.key_start) {
                        return Err(self.err(Reason::DuplicateKey, i));
                    }
                    if !self.plain {
                        self.key_read();
                    }
                }
            }
            Dest::EncKey(_) => {
                self.enc.finish(out);
                if self.opts.dedupe_keys {
                    // The text form is the key, for duplicates too (Go compares the strings).
                    self.keys.key_bytes(&out[self.enc_key_start..]);
                    if self.keys.check_key_end(self.key_start) {
                        out.push(b'"');
                        return Err(self.err(Reason::DuplicateKey, i));
                    }
                }
                out.push(b'"');
                if !self.plain {
                    self.key_read();
                }
            }
            Dest::Time => {
                out.push(b'"');
                if rfc3339_to_nano(&self.tbuf, out).is_none() {
                    return Err(self.err(Reason::InvalidTime, i));
                }
                out.push(b'"');
            }
            Dest::Enc(_) => {
                self.enc.finish(out);
                out.push(b'"');
            }
            Dest::B64Text => {
                if let Err(at) = self.b64.finish() {
                    return Err(CodecError::invalid_base64(self.offset + i as u64, at));
                }
                out.push(b'"');
            }
        }
        self.item_done(i, out)
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
