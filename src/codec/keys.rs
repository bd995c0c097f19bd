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

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;

const INDEX_AFTER: usize = 16;
const NONE: u32 = u32::MAX;

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
}

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
        }
    }

    /// Forget every open map, keeping the allocated capacity.
    pub fn clear(&mut self) {
        while !self.frames.is_empty() {
            self.close_map();
        }
        self.arena.clear();
        self.entries.clear();
    }

    pub fn open_map(&mut self) {
        self.frames.push(MapFrame {
            first_entry: self.entries.len(),
            arena_start: self.arena.len(),
            filter: 0,
            indexed: false,
        });
    }

    pub fn close_map(&mut self) {
        if let Some(f) = self.frames.pop() {
            self.entries.truncate(f.first_entry);
            self.arena.truncate(f.arena_start);
            if f.indexed {
                if let Some(mut index) = self.indexes.pop() {
                    if self.spare.len() < MAX_SPARE {
                        index.clear();
                        self.spare.push(index);
                    }
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
    /// keys are then copied as a fixed 24 bytes (no call) and cut back, and
    /// a new key of a small map is recognised without a second look at it.
    #[inline(always)]
    pub fn key(&mut self, padded: &[u8], n: usize, payload: P) -> KeyOutcome {
        if let (Some(chunk), true) = (
            padded.get(..24).and_then(|c| <&[u8; 24]>::try_from(c).ok()),
            n <= 24,
        ) {
            if let Some(frame) = self.frames.last_mut() {
                if !frame.indexed && self.entries.len() - frame.first_entry < INDEX_AFTER {
                    let fp = fingerprint_padded(chunk, n);
                    let bits = filter_bits(fp);
                    if frame.filter & bits != bits {
                        // Certainly new: as `key_end` records it.
                        frame.filter |= bits;
                        let start = self.arena.len();
                        self.arena.extend_from_slice(chunk);
                        self.arena.truncate(start + n);
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
        let start = self.arena.len();
        match padded.get(..24).and_then(|c| <&[u8; 24]>::try_from(c).ok()) {
            Some(chunk) if n <= 24 => {
                self.arena.extend_from_slice(chunk);
                self.arena.truncate(start + n);
            }
            _ => self.arena.extend_from_slice(&padded[..n]),
        }
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

    /// The caller data of entry `i` (as returned by [`KeySets::key_end`]).
    pub fn payload_mut(&mut self, i: usize) -> Option<&mut P> {
        self.entries.get_mut(i).map(|e| &mut e.payload)
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

    /// `key` (whole, padded or not) and `key_start`/`key_bytes`/`key_end`
    /// (in pieces) against a model: a set of keys per open map.
    #[test]
    fn matches_a_model_on_random_maps() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // Keys that differ late, by length, or only by trailing zero bytes.
        let alphabet: &[u8] = b"ab\0";
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
                    let n = match next(4) {
                        0 => next(4),
                        1 => 14 + next(6),
                        _ => next(40),
                    } as usize;
                    let mut key: Vec<u8> = (0..n)
                        .map(|_| alphabet[next(if n > 3 { 2 } else { 3 }) as usize])
                        .collect();
                    // Often an earlier key of this or an outer map, or one
                    // that differs from it in one byte.
                    let m = &model[next(model.len() as u64) as usize];
                    if !m.is_empty() && next(2) == 0 {
                        key = m[next(m.len() as u64) as usize].0.clone();
                        if !key.is_empty() && next(3) == 0 {
                            let at = next(key.len() as u64) as usize;
                            key[at] ^= 1;
                        }
                    }
                    let n = key.len();
                    let want = model
                        .last()
                        .and_then(|m| m.iter().find(|(x, _)| *x == key))
                        .map(|&(_, p)| p);
                    let got = match next(3) {
                        0 => {
                            let mut padded = key.clone();
                            padded.extend((0..next(30)).map(|_| b'?'));
                            match k.key(&padded, n, step) {
                                KeyOutcome::New(_) => None,
                                KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
                            }
                        }
                        1 => match k.key(&key, n, step) {
                            KeyOutcome::New(_) => None,
                            KeyOutcome::Dup(i) => k.payload_mut(i).map(|x| *x),
                        },
                        _ => {
                            let s = k.key_start();
                            let cut = next(n as u64 + 1) as usize;
                            k.key_bytes(&key[..cut]);
                            k.key_bytes(&key[cut..]);
                            match k.key_end(s, step) {
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
            padded.extend_from_slice(&[b'?'; 24]);
            assert_eq!(k.key(&padded, key.len(), i as u32), KeyOutcome::New(i));
        }
        for (i, key) in keys.iter().enumerate().skip(30) {
            assert_eq!(add(&mut k, key.as_bytes(), 0), Some(i as u32 - 30));
        }
        // A small map: whole keys first, then the same keys in pieces.
        k.open_map();
        for (i, key) in keys.iter().enumerate().take(5) {
            let mut padded = key.as_bytes().to_vec();
            padded.extend_from_slice(&[b'?'; 24]);
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
