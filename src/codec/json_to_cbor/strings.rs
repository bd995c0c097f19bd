//! JSON → CBOR, strings: the short and whole-string fast paths, escapes, strings read
//! piece by piece in the `Str` state (Go's surrogate and U+FFFD rules, chunks at the
//! window), and `[]byte` fields with a schema (their base64 text becomes tag 22 and the
//! bytes).

use super::emit::{Slot, SlotKind};
use super::{Container, JsonToCbor, PairLoc, State, NONE};
use crate::codec::base64::GoBase64;
use crate::codec::buf::{extend_head_prefix, extend_run};
use crate::codec::error::{CodecError, Reason};
use crate::codec::fields::{Position, Schema, MAX_FIELD_NAME};
use crate::codec::number::{write_head, MAJOR_BYTES, MAJOR_TEXT};
use crate::codec::utf8::{ascii_stop16, plain_ascii_run_at, plain_run_at, Utf8Sink, REPLACEMENT};

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

impl JsonToCbor {
    /// A string starts with the quote at `input[i]`. Returns where to continue.
    #[inline(always)]
    pub(super) fn begin_string<const DD: bool, const W: bool, const V: bool>(
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
            if W && self.stack.len() == 1 {
                let k = n.min(self.probe.len());
                self.probe[..k].copy_from_slice(&s[..k]);
                self.probe_len = k as u8;
            }
            if self.typed {
                self.key_read(Some(s));
            }
            let padded = if raw { &input[quote - n..] } else { s };
            self.end_key::<DD, W>(quote, Some((padded, n)))?;
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

    pub(super) fn str_raw(
        &mut self,
        run: &[u8],
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
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

    pub(super) fn str_char(
        &mut self,
        c: char,
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
        let mut buf = [0u8; 4];
        self.body
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.str_added(from, i, out)
    }

    /// A `\uXXXX` escape, with Go's surrogate rules: a valid pair combines, any
    /// lone surrogate becomes U+FFFD.
    pub(super) fn str_unicode(
        &mut self,
        v: u16,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
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

    pub(super) fn end_string<const DD: bool, const W: bool>(
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
            self.end_key::<DD, W>(i, None)?;
            self.state = State::Colon;
            Ok(())
        } else {
            self.value_done::<DD, W>(out);
            Ok(())
        }
    }

    /// With a schema: where the value about to start (or just ended) sits. The top of a
    /// document is a response's object or list, or a watch event.
    pub(super) fn value_position(&self) -> Position {
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
}
