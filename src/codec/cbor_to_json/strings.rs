//! CBOR → JSON, strings: whole strings, strings streamed chunk by chunk (text, byte strings
//! with their base64/base64url/hex encoding, tag-0 time text), and `[]byte` fields with a
//! schema.

use super::{CborToJson, Dest, Frame, TagKind};
use crate::codec::base64::GoBase64;
use crate::codec::error::{CodecError, Reason};
use crate::codec::fields::Schema;
use crate::codec::json_text::{quoted_ascii, Encoder, Encoding, JsonSink};
use crate::codec::time::{rfc3339_to_nano, MAX_TIME_TEXT};
use crate::codec::utf8::plain_ascii_prefix;

impl CborToJson {
    /// With a schema: what a byte or text string value becomes in its field.
    pub(super) fn string_field(
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

    /// Fast path for a definite string (head just read, payload from
    /// `input[i]`) that lies whole in this piece, directly in an array or map:
    /// the same steps as [`Self::item`], [`Self::begin_string`] and the payload
    /// loop take for it, without the round trips. `None`: not such a string,
    /// nothing done.
    #[inline(always)]
    pub(super) fn whole_string(
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

    /// Open quote and per-string state, at the first head of a string.
    pub(super) fn start_string(&mut self, major: u8, dest: Dest, _i: usize, out: &mut Vec<u8>) {
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
    pub(super) fn begin_string(
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
    pub(super) fn str_payload(
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
    pub(super) fn chunk_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
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
    pub(super) fn string_done(&mut self, i: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
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
}
