//! CBOR → JSON, the general path: one item per head, whatever its major type, tag or
//! argument, with the schema followed when there is one; definite-length containers opened.

use super::{CborToJson, Dest, Frame, Parent, TagKind};
use crate::codec::error::{CodecError, Reason};
use crate::codec::json_text::{write_decimal_i64, write_go_float, Encoding};
use crate::codec::time::{epoch_float_to_nano, epoch_int_to_nano};

impl CborToJson {
    /// One complete head: major type, additional info, argument. `i` is the
    /// position just after the head.
    pub(super) fn item(
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

    /// Fast path for a definite array or map (head just read, at `i`) as a
    /// value in an array or map: the same steps as [`Self::item`] takes for
    /// it. `false`: not such a container, or one that [`Self::item`] must
    /// reject; nothing done.
    #[inline(always)]
    pub(super) fn definite_container(
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
}
