//! JSON → CBOR, the token state machine: what each byte means in each [`State`], token
//! after token in the grammar's own order ([`JsonToCbor::chain`]), containers opened and
//! closed, numbers and literals, keys (the `object` probe of watch mode, duplicate keys)
//! and the end of a value or document.

use super::emit::{Slot, SlotKind};
use super::{Container, Frame, JsonToCbor, Num, State, NONE};
use crate::codec::error::{CodecError, Reason};
use crate::codec::keys::KeyOutcome;
use crate::codec::number::{
    interpret_json_number, write_float, write_int, JsonNumber, SELF_DESCRIBED,
};
use crate::codec::utf8::plain_run_at;

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
const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];
const LITERAL_CBOR: [u8; 3] = [0xf5, 0xf4, 0xf6];

impl JsonToCbor {
    pub(super) fn run<const DD: bool, const W: bool, const V: bool>(
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

    /// Tokens in the grammar's own order — key, colon, value, then comma or
    /// closer — so that the next step is known from where the code is rather
    /// than from a dispatch on the state. Each step does what
    /// [`Self::structural`] does in that state; whitespace, unfinished tokens
    /// and anything unexpected are left to it. `self.state` is kept up to
    /// date throughout. Returns where it stopped.
    #[inline(never)]
    pub(super) fn chain<const DD: bool, const W: bool, const V: bool>(
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

    pub(super) fn end_number<const DD: bool, const W: bool>(
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

    /// A key just ended at `input[i]`. `whole`: the key is `padded[..n]`
    /// (`padded` may go on past it) rather than collected in the key set
    /// piece by piece.
    #[inline(always)]
    pub(super) fn end_key<const DD: bool, const W: bool>(
        &mut self,
        i: usize,
        whole: Option<(&[u8], usize)>,
    ) -> Result<(), CodecError> {
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
        let pair = self.pending_pair;
        let outcome = match whole {
            Some((padded, n)) => self.keys.pair_key(padded, n, pair),
            None => self.keys.pair_key_end(self.key_start, pair),
        };
        match outcome {
            KeyOutcome::New(idx) => {
                if let Some(f) = self.stack.last_mut() {
                    f.entry = idx;
                }
                Ok(())
            }
            KeyOutcome::Dup(idx) => self.duplicate_key(idx, i),
        }
    }

    /// The key just read repeats the one of key-set entry `idx`: its earlier
    /// pair is cut out (the last one wins, as in Go).
    #[cold]
    #[inline(never)]
    fn duplicate_key(&mut self, idx: usize, i: usize) -> Result<(), CodecError> {
        let pair = self.pending_pair;
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

    /// A closer for `kind` at `input[i]`.
    #[inline(always)]
    fn close<const DD: bool, const W: bool>(
        &mut self,
        kind: Container,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        // The common case inline: the matching container, its placeholder
        // still buffered, fewer than 24 elements.
        if let Some(&f) = self.stack.last() {
            if f.kind == kind && f.count < 24 && f.head != NONE {
                self.stack.pop();
                if self.typed {
                    self.positions.pop();
                }
                if DD && kind == Container::Object {
                    self.keys.close_map();
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
    pub(super) fn value_done<const DD: bool, const W: bool>(&mut self, out: &mut Vec<u8>) {
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
    #[inline(always)]
    fn pair_done(&mut self, entry: usize) {
        let body_end = self.body_base + self.body.len() as u64;
        if let Some(p) = self.keys.payload_mut(entry) {
            p.body_end = body_end;
        }
    }
}
