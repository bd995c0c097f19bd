//! CBOR → JSON, the fast path (no schema): the common items (plain ASCII strings, integers,
//! `true` / `false` / `null`, definite arrays and maps) in a tight loop while each lies
//! whole in the current piece, taking exactly the steps the general path would.

use super::{CborToJson, Frame};
use crate::codec::error::{CodecError, Reason};
use crate::codec::json_text::{quoted, write_decimal_i64};
use crate::codec::utf8::plain_ascii_prefix;

impl CborToJson {
    /// The common items in a tight loop, from `input[i]` (no head or string
    /// in progress): plain ASCII strings, integers, `true` / `false` / `null`
    /// and definite arrays and maps, each with its head and payload whole in
    /// this piece, directly in a definite array or map. Each takes exactly the
    /// steps [`Self::item`] and the string payload loop would; the innermost
    /// frame lives in locals meanwhile. Returns where the first other item
    /// starts (nothing of it done), for the general path.
    #[inline(always)]
    pub(super) fn fast(
        &mut self,
        input: &[u8],
        mut i: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
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
}
