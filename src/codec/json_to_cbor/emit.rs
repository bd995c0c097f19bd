//! JSON → CBOR, the output: the streaming window, and the buffered body written out with
//! its heads (slots for heads longer than their placeholder, holes for duplicate pairs).

use super::{JsonToCbor, EAGER_FLUSH, NONE};
use crate::codec::number::write_head;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotKind {
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
pub(super) struct Slot {
    pub(super) pos: usize,
    pub(super) major: u8,
    pub(super) kind: SlotKind,
    pub(super) len: u64,
}

/// A duplicate key's earlier pair, cut out at assembly: `body[start..end]`
/// as `(start, end)`.
pub(super) type Hole = (usize, usize);

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

impl JsonToCbor {
    /// Content bytes buffered: the body without the inline heads.
    #[inline]
    pub(super) fn window_fill(&self) -> usize {
        self.body.len() - self.inline
    }

    /// The window check, for a token starting in state `Value`,
    /// `ArrayFirst`, `ObjectFirst` or `Key` (from [`Self::structural`] and
    /// [`Self::chain`]).
    #[inline(always)]
    pub(super) fn window_check(&mut self, out: &mut Vec<u8>) {
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

    /// Write `body[..end]` to `out` with its heads. Still-open containers
    /// switch to indefinite length; an open string (always the last slot)
    /// becomes an indefinite string whose next chunk starts with what is
    /// kept, `body[end..]`.
    pub(super) fn flush(&mut self, out: &mut Vec<u8>, end: usize) {
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
