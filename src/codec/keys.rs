//! Duplicate map-key bookkeeping for the open maps of one document, used by
//! both directions when duplicate detection is on (request bodies and the
//! `transcode` command; a Go upstream never sends duplicates, so the response
//! path turns it off).
//!
//! Keys are kept in one arena with stack discipline: closing a map drops its
//! keys. Small maps use a cheap fingerprint per key: a 64-bit filter per map
//! answers "certainly new" for most keys at once, and otherwise a linear scan
//! compares fingerprints, then bytes (at most [`INDEX_AFTER`] entries, so the
//! fingerprint needs no collision resistance). Once a map grows past
//! [`INDEX_AFTER`] keys it gets a hash index with a per-process random seed,
//! so crafted keys cannot force collisions. Index maps are kept for reuse, so
//! a warmed-up key set allocates nothing.
//!
//! A set without caller data (`KeySets<()>`, CBOR → JSON) also takes
//! [`KeySets::check_key`]: keys of at most [`SHORT_MAX`] bytes (five in six
//! keys of a pod) are then kept apart as exact 16-byte records (the bytes,
//! zero-padded, and the length in the last byte), compared whole with no
//! arena copy and no fingerprint. A one-bit-per-record filter per map skips
//! the compare for most new keys; past [`INDEX_AFTER`] records a map's go into
//! a seeded hash set. A short key can never equal a longer one, so the two
//! kinds are checked apart. The last key of a map need not be recorded at
//! all. The innermost map's record start and filter live in the set itself
//! (each map's frame keeps its parent's), so a key needs no frame lookup.
//!
//! A set with caller data (JSON → CBOR, where the data says where a pair lies in
//! the output) takes [`KeySets::pair_key`] and [`KeySets::pair_key_end`]: short
//! keys are then records too, with their data in a parallel list, and past
//! [`INDEX_AFTER`] records a map's go into a seeded hash map from record to
//! position. Longer keys take the fingerprint entries above. Every key of a
//! set goes one way or the other by its length alone, so equal keys always
//! meet.

use super::buf::{extend_prefix, extend_run};
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

const INDEX_AFTER: usize = 16;
/// The longest key kept as a short record.
const SHORT_MAX: usize = 15;
const NONE: u32 = u32::MAX;
/// Marks an index from [`KeySets::pair_key`] that names a short record (in
/// `short` / `short_data`) rather than an entry.
const SHORT_INDEX: usize = 1 << (usize::BITS - 1);

#[derive(Debug, Clone, Copy)]
struct Entry<P> {
    /// The fingerprint while the map is small; the seeded hash once indexed.
    hash: u64,
    start: u32,
    len: u32,
    next: u32,
    payload: P,
}

#[derive(Debug)]
struct MapFrame {
    first_entry: usize,
    arena_start: usize,
    /// Two bits per key, from its fingerprint (small maps).
    filter: u64,
    /// The map has a hash index: the last of `KeySets::indexes`.
    indexed: bool,
    /// The map's short records are in a set: the last of `KeySets::short_indexes`.
    short_indexed: bool,
    /// The map's short records (with caller data) are in a map: the last of
    /// `KeySets::short_maps`.
    short_mapped: bool,
    /// The enclosing map's `KeySets::short_start` and `short_filter`, put
    /// back when this map closes.
    outer_short_start: usize,
    outer_short_filter: u64,
}

/// The exact record of a key of at most [`SHORT_MAX`] bytes: its bytes,
/// zero-padded, with the length in the last byte. Equal records, equal keys.
type Record = u128;

/// The record of `chunk[..n]` (`n <= SHORT_MAX`); `chunk` holds the key and
/// whatever follows it.
#[inline(always)]
fn record(chunk: &[u8; 16], n: usize) -> Record {
    (u128::from_le_bytes(*chunk) & LOW_BYTES[n & 15]) | ((n as u128) << 120)
}

/// The record of a key of at most [`SHORT_MAX`] bytes, given alone.
fn record_of(key: &[u8]) -> Record {
    let mut chunk = [0u8; 16];
    let n = key.len().min(SHORT_MAX);
    chunk[..n].copy_from_slice(&key[..n]);
    record(&chunk, n)
}

/// The record of the key `padded[..n]` (`n <= SHORT_MAX`); `padded` may go
/// on past the key, and when it holds 16 bytes they are read at once.
#[inline(always)]
fn padded_record(padded: &[u8], n: usize) -> Record {
    match padded.get(..16).and_then(|c| <&[u8; 16]>::try_from(c).ok()) {
        Some(chunk) => record(chunk, n),
        None => record_of(&padded[..n]),
    }
}

/// A record's bit in its map's filter.
#[inline(always)]
fn record_bit(rec: Record) -> u64 {
    let h = (rec as u64) ^ ((rec >> 64) as u64).rotate_left(29);
    1 << (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

/// `LOW_BYTES[n]`: the low `n` bytes of a record.
static LOW_BYTES: [u128; 16] = {
    let mut m = [0u128; 16];
    let mut n = 0;
    while n < 16 {
        m[n] = (1u128 << (8 * n)) - 1;
        n += 1;
    }
    m
};

/// The eight bytes of `s` from its start, little-endian.
#[inline(always)]
fn word(s: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[..8]);
    u64::from_le_bytes(b)
}

/// The fingerprint of a key of `n` bytes from its first eight bytes
/// (zero-padded) and, if longer, its last eight.
#[inline(always)]
fn mix(first: u64, last: u64, n: usize) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let h = (first ^ (n as u64).rotate_right(8)).wrapping_mul(K) ^ last;
    let h = h.wrapping_mul(K);
    h ^ (h >> 32)
}

/// A fast, unseeded fingerprint of a key (for small maps only): its length
/// and first and last eight bytes, mixed. Equal keys have equal fingerprints.
#[inline]
fn fingerprint(key: &[u8]) -> u64 {
    let n = key.len();
    let half = |s: &[u8]| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&s[..4]);
        u32::from_le_bytes(b) as u64
    };
    // The first eight bytes, zero-padded, from (possibly overlapping) loads
    // that agree where they overlap.
    let first = if n >= 8 {
        word(key)
    } else if n >= 4 {
        half(key) | half(&key[n - 4..]) << (8 * (n - 4))
    } else if n > 0 {
        key[0] as u64 | (key[n / 2] as u64) << (8 * (n / 2)) | (key[n - 1] as u64) << (8 * (n - 1))
    } else {
        0
    };
    let last = if n > 8 { word(&key[n - 8..]) } else { 0 };
    mix(first, last, n)
}

/// [`fingerprint`] of `padded[..n]`, where `padded` has at least eight bytes.
#[inline(always)]
fn fingerprint_padded(padded: &[u8], n: usize) -> u64 {
    let w = word(padded);
    let first = if n >= 8 {
        w
    } else {
        w & ((1u64 << (8 * n)) - 1)
    };
    let last = if n > 8 { word(&padded[n - 8..]) } else { 0 };
    mix(first, last, n)
}

/// The filter bits of a fingerprint.
#[inline]
fn filter_bits(fp: u64) -> u64 {
    (1u64 << (fp & 63)) | (1u64 << ((fp >> 6) & 63))
}

/// The key sets of the currently open maps; `P` is caller data kept per key.
#[derive(Debug)]
pub(crate) struct KeySets<P> {
    arena: Vec<u8>,
    entries: Vec<Entry<P>>,
    frames: Vec<MapFrame>,
    /// The hash indexes of the open maps that have one, innermost last.
    indexes: Vec<HashMap<u64, u32>>,
    /// Emptied index maps of closed maps, for reuse.
    spare: Vec<HashMap<u64, u32>>,
    hasher: RandomState,
    /// Short-key records of the open maps (payload-free sets only), each
    /// map's from its `short_start`; at most [`INDEX_AFTER`] per map, the rest
    /// in its set.
    short: Vec<Record>,
    /// The record sets of the open maps that have one, innermost last.
    short_indexes: Vec<HashSet<Record>>,
    /// Caller data of each record in `short` ([`Self::pair_key`] only).
    short_data: Vec<P>,
    /// Record to position in `short`, for the open maps with more than
    /// [`INDEX_AFTER`] records ([`Self::pair_key`] only), innermost last.
    short_maps: Vec<HashMap<Record, u32>>,
    /// Emptied record maps, for reuse.
    short_map_spare: Vec<HashMap<Record, u32>>,
    /// Emptied record sets, for reuse.
    short_spare: Vec<HashSet<Record>>,
    /// Where the innermost map's short records start in `short`, and one bit
    /// per record (from [`record_bit`]): kept here rather than in its frame,
    /// so a key needs no frame lookup.
    short_start: usize,
    short_filter: u64,
}

/// Index maps kept for reuse at most (more are dropped).
const MAX_SPARE: usize = 64;

impl<P: Copy> KeySets<P> {
    pub fn new() -> Self {
        KeySets {
            arena: Vec::new(),
            entries: Vec::new(),
            frames: Vec::new(),
            indexes: Vec::new(),
            spare: Vec::new(),
            hasher: RandomState::new(),
            short: Vec::new(),
            short_indexes: Vec::new(),
            short_data: Vec::new(),
            short_maps: Vec::new(),
            short_map_spare: Vec::new(),
            short_spare: Vec::new(),
            short_start: 0,
            short_filter: 0,
        }
    }

    /// Forget every open map, keeping the allocated capacity.
    pub fn clear(&mut self) {
        while !self.frames.is_empty() {
            self.close_map();
        }
        self.arena.clear();
        self.entries.clear();
        self.short.clear();
        self.short_data.clear();
    }

    #[inline]
    pub fn open_map(&mut self) {
        self.frames.push(MapFrame {
            first_entry: self.entries.len(),
            arena_start: self.arena.len(),
            filter: 0,
            indexed: false,
            short_indexed: false,
            short_mapped: false,
            outer_short_start: self.short_start,
            outer_short_filter: self.short_filter,
        });
        self.short_start = self.short.len();
        self.short_filter = 0;
    }

    #[inline(always)]
    pub fn close_map(&mut self) {
        if let Some(f) = self.frames.pop() {
            self.entries.truncate(f.first_entry);
            self.arena.truncate(f.arena_start);
            self.short.truncate(self.short_start);
            self.short_data.truncate(self.short_start);
            self.short_start = f.outer_short_start;
            self.short_filter = f.outer_short_filter;
            if f.indexed || f.short_indexed || f.short_mapped {
                self.release_indexes(&f);
            }
        }
    }

    /// The index and record set of a closed map, emptied for reuse.
    #[cold]
    #[inline(never)]
    fn release_indexes(&mut self, f: &MapFrame) {
        if f.short_mapped {
            if let Some(mut map) = self.short_maps.pop() {
                if self.short_map_spare.len() < MAX_SPARE {
                    map.clear();
                    self.short_map_spare.push(map);
                }
            }
        }
        if f.short_indexed {
            if let Some(mut set) = self.short_indexes.pop() {
                if self.short_spare.len() < MAX_SPARE {
                    set.clear();
                    self.short_spare.push(set);
                }
            }
        }
        if f.indexed {
            if let Some(mut index) = self.indexes.pop() {
                if self.spare.len() < MAX_SPARE {
                    index.clear();
                    self.spare.push(index);
                }
            }
        }
    }

    /// Start collecting a key's bytes (they may arrive in pieces).
    pub fn key_start(&mut self) -> usize {
        self.arena.len()
    }

    pub fn key_bytes(&mut self, b: &[u8]) {
        self.arena.extend_from_slice(b);
    }

    /// A whole key, `padded[..n]`: [`Self::key_start`], [`Self::key_bytes`]
    /// and [`Self::key_end`] at once. `padded` may go on past the key: short
    /// keys are then copied as a fixed 32 bytes (no call) and cut back, and
    /// a new key of a small map is recognised without a second look at it.
    #[inline(always)]
    pub fn key(&mut self, padded: &[u8], n: usize, payload: P) -> KeyOutcome {
        if let (Some(chunk), true) = (
            padded.get(..32).and_then(|c| <&[u8; 32]>::try_from(c).ok()),
            n <= 32,
        ) {
            if let Some(frame) = self.frames.last_mut() {
                if !frame.indexed && self.entries.len() - frame.first_entry < INDEX_AFTER {
                    let fp = fingerprint_padded(chunk, n);
                    let bits = filter_bits(fp);
                    if frame.filter & bits != bits {
                        // Certainly new: as `key_end` records it.
                        frame.filter |= bits;
                        let start = self.arena.len();
                        extend_prefix(&mut self.arena, chunk, n);
                        let idx = self.entries.len();
                        self.entries.push(Entry {
                            hash: fp,
                            start: start as u32,
                            len: n as u32,
                            next: NONE,
                            payload,
                        });
                        return KeyOutcome::New(idx);
                    }
                }
            }
        }
        let start = self.arena.len();
        self.padded_key_bytes(padded, n);
        self.key_end_slow(start, payload)
    }

    /// [`Self::key_bytes`] of `padded[..n]`, where `padded` may go on past
    /// them: short runs are then copied as a fixed 24 bytes and cut back.
    #[inline]
    pub fn padded_key_bytes(&mut self, padded: &[u8], n: usize) {
        extend_run::<24>(&mut self.arena, padded, 0, n);
    }

    /// The key begun at `start` is complete. If the innermost map already holds
    /// it, the key's bytes are dropped and `Dup(i)` names the earlier entry;
    /// otherwise the key is recorded with `payload` as `New(i)`.
    #[inline]
    pub fn key_end(&mut self, start: usize, payload: P) -> KeyOutcome {
        // The common case: a small map, and the filter says the key is new.
        if let Some(frame) = self.frames.last_mut() {
            if !frame.indexed && self.entries.len() - frame.first_entry < INDEX_AFTER {
                let key = &self.arena[start..];
                let fp = fingerprint(key);
                let bits = filter_bits(fp);
                if frame.filter & bits != bits {
                    frame.filter |= bits;
                    let idx = self.entries.len();
                    self.entries.push(Entry {
                        hash: fp,
                        start: start as u32,
                        len: key.len() as u32,
                        next: NONE,
                        payload,
                    });
                    return KeyOutcome::New(idx);
                }
            }
        }
        self.key_end_slow(start, payload)
    }

    fn key_end_slow(&mut self, start: usize, payload: P) -> KeyOutcome {
        let Some(frame) = self.frames.last_mut() else {
            self.arena.truncate(start);
            return KeyOutcome::New(usize::MAX);
        };
        let key = &self.arena[start..];
        let count = self.entries.len() - frame.first_entry;
        let (found, mut hash) = match self.indexes.last().filter(|_| frame.indexed) {
            Some(index) => {
                let hash = self.hasher.hash_one(key);
                let mut at = index.get(&hash).copied().unwrap_or(NONE);
                let mut hit = None;
                while at != NONE {
                    let e = &self.entries[at as usize];
                    if e.hash == hash
                        && &self.arena[e.start as usize..(e.start + e.len) as usize] == key
                    {
                        hit = Some(at as usize);
                        break;
                    }
                    at = e.next;
                }
                (hit, hash)
            }
            None => {
                let fp = fingerprint(key);
                let bits = filter_bits(fp);
                let hit = if frame.filter & bits != bits {
                    None
                } else {
                    (frame.first_entry..self.entries.len()).find(|&i| {
                        let e = &self.entries[i];
                        e.hash == fp
                            && e.len as usize == key.len()
                            && &self.arena[e.start as usize..(e.start + e.len) as usize] == key
                    })
                };
                if hit.is_none() {
                    frame.filter |= bits;
                }
                (hit, fp)
            }
        };
        if let Some(i) = found {
            self.arena.truncate(start);
            return KeyOutcome::Dup(i);
        }
        let idx = self.entries.len() as u32;
        if !frame.indexed && count + 1 > INDEX_AFTER {
            // The map has grown: index it, with seeded hashes from now on.
            let mut index = self.spare.pop().unwrap_or_default();
            index.reserve(count * 2);
            for i in frame.first_entry..self.entries.len() {
                let e = &self.entries[i];
                let h = self
                    .hasher
                    .hash_one(&self.arena[e.start as usize..(e.start + e.len) as usize]);
                let prev = index.insert(h, i as u32).unwrap_or(NONE);
                self.entries[i].hash = h;
                self.entries[i].next = prev;
            }
            hash = self.hasher.hash_one(&self.arena[start..]);
            frame.indexed = true;
            self.indexes.push(index);
        }
        let mut entry = Entry {
            hash,
            start: start as u32,
            len: (self.arena.len() - start) as u32,
            next: NONE,
            payload,
        };
        if let Some(index) = self.indexes.last_mut().filter(|_| frame.indexed) {
            entry.next = index.insert(hash, idx).unwrap_or(NONE);
        }
        self.entries.push(entry);
        KeyOutcome::New(idx as usize)
    }

    /// The caller data of entry `i` (as returned by [`KeySets::key_end`] or
    /// [`KeySets::pair_key`]).
    #[inline(always)]
    pub fn payload_mut(&mut self, i: usize) -> Option<&mut P> {
        if i & SHORT_INDEX != 0 {
            self.short_data.get_mut(i & !SHORT_INDEX)
        } else {
            self.entries.get_mut(i).map(|e| &mut e.payload)
        }
    }

    /// [`Self::key`] for a set whose every key goes through this method or
    /// [`Self::pair_key_end`]: a key of at most [`SHORT_MAX`] bytes is kept
    /// as an exact record with `payload` beside it (no arena copy, no
    /// fingerprint), a longer one as an entry. `padded[..n]` is the key;
    /// `padded` may go on past it.
    #[inline(always)]
    pub fn pair_key(&mut self, padded: &[u8], n: usize, payload: P) -> KeyOutcome {
        if n <= SHORT_MAX {
            return self.short_pair(padded_record(padded, n), payload);
        }
        self.key(padded, n, payload)
    }

    /// [`Self::pair_key`] for a key collected since [`Self::key_start`]
    /// returned `start`.
    pub fn pair_key_end(&mut self, start: usize, payload: P) -> KeyOutcome {
        match self.take_short(start) {
            Some(rec) => self.short_pair(rec, payload),
            None => self.key_end(start, payload),
        }
    }

    /// The record of the key collected since `start`, taken out of the arena,
    /// if it is short; `None` leaves a longer key where it is.
    fn take_short(&mut self, start: usize) -> Option<Record> {
        let key = self.arena.get(start..).filter(|k| k.len() <= SHORT_MAX)?;
        let rec = record_of(key);
        self.arena.truncate(start);
        Some(rec)
    }

    #[inline(always)]
    fn short_pair(&mut self, rec: Record, payload: P) -> KeyOutcome {
        if self.frames.is_empty() {
            return KeyOutcome::New(usize::MAX);
        }
        match self.short.get(self.short_start..) {
            Some(recs) if recs.len() < INDEX_AFTER => {
                let bit = record_bit(rec);
                if self.short_filter & bit != 0 {
                    if let Some(k) = recs.iter().position(|&r| r == rec) {
                        return KeyOutcome::Dup(SHORT_INDEX | (self.short_start + k));
                    }
                }
                self.short_filter |= bit;
                let at = self.short.len();
                self.short.push(rec);
                self.short_data.push(payload);
                KeyOutcome::New(SHORT_INDEX | at)
            }
            _ => self.short_pair_mapped(rec, payload),
        }
    }

    /// A short key of a map with [`INDEX_AFTER`] records or more: looked up
    /// in its record map, which is made from the records first if the map
    /// has none yet.
    #[inline(never)]
    fn short_pair_mapped(&mut self, rec: Record, payload: P) -> KeyOutcome {
        let Some(frame) = self.frames.last_mut() else {
            return KeyOutcome::New(usize::MAX);
        };
        if !frame.short_mapped {
            let mut map = self
                .short_map_spare
                .pop()
                .unwrap_or_else(|| HashMap::with_hasher(self.hasher.clone()));
            for (k, &r) in self.short.iter().enumerate().skip(self.short_start) {
                map.insert(r, k as u32);
            }
            frame.short_mapped = true;
            self.short_maps.push(map);
        }
        let at = self.short.len();
        let Some(map) = self.short_maps.last_mut() else {
            return KeyOutcome::New(usize::MAX);
        };
        match map.entry(rec) {
            std::collections::hash_map::Entry::Occupied(e) => {
                KeyOutcome::Dup(SHORT_INDEX | *e.get() as usize)
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(at as u32);
                self.short.push(rec);
                self.short_data.push(payload);
                KeyOutcome::New(SHORT_INDEX | at)
            }
        }
    }
}

impl KeySets<()> {
    /// Whether the whole key `padded[..n]` is already in the innermost map,
    /// recording it if not. `padded` may go on past the key. `last`: no other
    /// key of this map follows, so a new key need not be recorded.
    #[inline(always)]
    pub fn check_key(&mut self, padded: &[u8], n: usize, last: bool) -> bool {
        if n <= SHORT_MAX {
            return self.short_key(padded_record(padded, n), last);
        }
        matches!(self.key(padded, n, ()), KeyOutcome::Dup(_))
    }

    /// [`Self::check_key`] for a key collected since [`Self::key_start`]
    /// returned `start`.
    pub fn check_key_end(&mut self, start: usize) -> bool {
        match self.take_short(start) {
            Some(rec) => self.short_key(rec, false),
            None => matches!(self.key_end(start, ()), KeyOutcome::Dup(_)),
        }
    }

    #[inline(always)]
    fn short_key(&mut self, rec: Record, last: bool) -> bool {
        if self.frames.is_empty() {
            return false;
        }
        // A map with a set keeps exactly `INDEX_AFTER` records here.
        match self.short.get(self.short_start..) {
            Some(recs) if recs.len() < INDEX_AFTER => {
                let bit = record_bit(rec);
                if self.short_filter & bit != 0 && recs.contains(&rec) {
                    return true;
                }
                if !last {
                    self.short_filter |= bit;
                    self.short.push(rec);
                }
                false
            }
            _ => self.short_key_indexed(rec),
        }
    }

    /// A short key of a map with [`INDEX_AFTER`] records: into its set,
    /// which is made from the records first if the map has none yet.
    #[inline(never)]
    fn short_key_indexed(&mut self, rec: Record) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        if !frame.short_indexed {
            let mut set = self
                .short_spare
                .pop()
                .unwrap_or_else(|| HashSet::with_hasher(self.hasher.clone()));
            set.extend(self.short.get(self.short_start..).unwrap_or(&[]));
            frame.short_indexed = true;
            self.short_indexes.push(set);
        }
        match self.short_indexes.last_mut() {
            Some(set) => !set.insert(rec),
            None => false,
        }
    }
}

/// Result of [`KeySets::key_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOutcome {
    New(usize),
    Dup(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(k: &mut KeySets<u32>, key: &[u8], p: u32) -> Option<u32> {
        let s = k.key_start();
        k.key_bytes(key);
        match k.key_end(s, p) {
            KeyOutcome::New(_) => None,
            KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
        }
    }

    /// A xorshift generator for the model tests: `next(n)` is in `0..n`.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        }
    }

    /// A random key for the model tests, over `ab\0` (keys that differ late,
    /// by length, or only by trailing zero bytes): short, near the 15/16-byte
    /// boundary, or long. Often `earlier` instead (a key of this or an outer
    /// map), sometimes with one byte changed.
    fn random_key(next: &mut impl FnMut(u64) -> u64, earlier: Option<&[u8]>) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ab\0";
        let n = match next(4) {
            0 => next(4),
            1 => 13 + next(6),
            _ => next(40),
        } as usize;
        let mut key: Vec<u8> = (0..n)
            .map(|_| ALPHABET[next(if n > 3 { 2 } else { 3 }) as usize])
            .collect();
        if let Some(e) = earlier.filter(|_| next(2) == 0) {
            key = e.to_vec();
            if !key.is_empty() && next(3) == 0 {
                let at = next(key.len() as u64) as usize;
                key[at] ^= 1;
            }
        }
        key
    }

    /// `key` (whole, padded or not) and `key_start`/`key_bytes`/`key_end`
    /// (in pieces) against a model: a set of keys per open map.
    #[test]
    fn matches_a_model_on_random_maps() {
        model_test(false);
    }

    /// The same with `pair_key` and `pair_key_end` (short keys as records
    /// with their data beside them, maps past the index threshold).
    #[test]
    fn pair_keys_match_a_model_on_random_maps() {
        model_test(true);
    }

    fn model_test(pairs: bool) {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut k: KeySets<u32> = KeySets::new();
        let mut model: Vec<Vec<(Vec<u8>, u32)>> = Vec::new();
        for step in 0..200_000u32 {
            match next(10) {
                0 if model.len() < 6 => {
                    k.open_map();
                    model.push(Vec::new());
                }
                1 if !model.is_empty() && next(4) == 0 => {
                    k.close_map();
                    model.pop();
                }
                _ if !model.is_empty() => {
                    let m = &model[next(model.len() as u64) as usize];
                    let earlier = (!m.is_empty()).then(|| &m[next(m.len() as u64) as usize].0);
                    let key = random_key(&mut next, earlier.map(|e| &e[..]));
                    let n = key.len();
                    let want = model
                        .last()
                        .and_then(|m| m.iter().find(|(x, _)| *x == key))
                        .map(|&(_, p)| p);
                    let got = match next(3) {
                        0 => {
                            let mut padded = key.clone();
                            padded.extend((0..next(40)).map(|_| b'?'));
                            let r = if pairs {
                                k.pair_key(&padded, n, step)
                            } else {
                                k.key(&padded, n, step)
                            };
                            match r {
                                KeyOutcome::New(_) => None,
                                KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
                            }
                        }
                        1 => match if pairs {
                            k.pair_key(&key, n, step)
                        } else {
                            k.key(&key, n, step)
                        } {
                            KeyOutcome::New(_) => None,
                            KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
                        },
                        _ => {
                            let s = k.key_start();
                            let cut = next(n as u64 + 1) as usize;
                            k.key_bytes(&key[..cut]);
                            k.key_bytes(&key[cut..]);
                            let r = if pairs {
                                k.pair_key_end(s, step)
                            } else {
                                k.key_end(s, step)
                            };
                            match r {
                                KeyOutcome::New(_) => None,
                                KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
                            }
                        }
                    };
                    assert_eq!(got, want, "step {step}: key {key:?}");
                    if want.is_none() {
                        if let Some(m) = model.last_mut() {
                            m.push((key, step));
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// [`KeySets::check_key`] (padded or not, sometimes as a map's last key)
    /// and [`KeySets::check_key_end`] (in pieces) against a set per open map:
    /// short and long keys, the 15/16-byte boundary, maps past the index
    /// threshold, and nesting under a map's last key.
    #[test]
    fn check_key_matches_a_model() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut k: KeySets<()> = KeySets::new();
        // Per open map: its keys, and whether its last key has been seen.
        let mut model: Vec<(Vec<Vec<u8>>, bool)> = Vec::new();
        let mut dups = 0;
        for step in 0..300_000u32 {
            match next(12) {
                0 if model.len() < 6 => {
                    k.open_map();
                    model.push((Vec::new(), false));
                }
                1 if !model.is_empty() && next(6) == 0 => {
                    k.close_map();
                    model.pop();
                }
                _ if model.last().is_some_and(|m| !m.1) => {
                    let m = &model[next(model.len() as u64) as usize].0;
                    let earlier = (!m.is_empty()).then(|| &m[next(m.len() as u64) as usize]);
                    let key = random_key(&mut next, earlier.map(|e| &e[..]));
                    let n = key.len();
                    let want = model.last().is_some_and(|m| m.0.contains(&key));
                    let last = next(16) == 0;
                    let got = match next(3) {
                        0 => {
                            let mut padded = key.clone();
                            padded.extend((0..next(40)).map(|_| b'?'));
                            k.check_key(&padded, n, last)
                        }
                        1 => k.check_key(&key, n, last),
                        _ => {
                            let s = k.key_start();
                            let cut = next(n as u64 + 1) as usize;
                            k.key_bytes(&key[..cut]);
                            k.key_bytes(&key[cut..]);
                            k.check_key_end(s)
                        }
                    };
                    assert_eq!(got, want, "step {step}: key {key:?}");
                    dups += got as u32;
                    if let Some(m) = model.last_mut() {
                        if !want {
                            m.0.push(key);
                        }
                        m.1 |= last;
                    }
                }
                _ => {}
            }
        }
        assert!(dups > 5_000, "the model test found only {dups} duplicates");
    }

    #[test]
    fn padded_fingerprint_is_the_fingerprint() {
        let buf: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
        for n in 0..=32 {
            assert_eq!(
                fingerprint_padded(&buf, n),
                fingerprint(&buf[..n]),
                "n = {n}"
            );
        }
    }

    #[test]
    fn whole_and_pieced_keys_agree() {
        let mut k: KeySets<u32> = KeySets::new();
        k.open_map();
        let keys: Vec<String> = (0..40)
            .map(|i| format!("k{}", "x".repeat(i % 30)))
            .collect();
        for (i, key) in keys.iter().enumerate().take(30) {
            let mut padded = key.as_bytes().to_vec();
            padded.extend_from_slice(&[b'?'; 32]);
            assert_eq!(k.key(&padded, key.len(), i as u32), KeyOutcome::New(i));
        }
        for (i, key) in keys.iter().enumerate().skip(30) {
            assert_eq!(add(&mut k, key.as_bytes(), 0), Some(i as u32 - 30));
        }
        // A small map: whole keys first, then the same keys in pieces.
        k.open_map();
        for (i, key) in keys.iter().enumerate().take(5) {
            let mut padded = key.as_bytes().to_vec();
            padded.extend_from_slice(&[b'?'; 32]);
            assert!(matches!(
                k.key(&padded, key.len(), i as u32),
                KeyOutcome::New(_)
            ));
        }
        for (i, key) in keys.iter().enumerate().take(5) {
            assert_eq!(add(&mut k, key.as_bytes(), 0), Some(i as u32));
        }
        k.close_map();
        k.close_map();
    }

    #[test]
    fn finds_duplicates_small_and_large() {
        let mut k = KeySets::new();
        k.open_map();
        for i in 0..1000u32 {
            assert_eq!(add(&mut k, format!("key{i}").as_bytes(), i), None);
        }
        assert_eq!(add(&mut k, b"key7", 9999), Some(7));
        assert_eq!(add(&mut k, b"key999", 9999), Some(999));
        k.open_map();
        assert_eq!(add(&mut k, b"key7", 1), None, "inner map is separate");
        k.close_map();
        assert_eq!(add(&mut k, b"new", 5), None);
        assert_eq!(add(&mut k, b"new", 6), Some(5));
        k.close_map();
    }
}
