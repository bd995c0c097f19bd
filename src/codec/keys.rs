//! Duplicate map-key bookkeeping for the open maps of one document, used by
//! both directions when duplicate detection is on (request bodies and the
//! `transcode` command; a Go upstream never sends duplicates, so the response
//! path turns it off).
//!
//! Keys are kept in one arena with stack discipline: closing a map drops its
//! keys. Lookup is a linear scan for small maps and a hash index (with a
//! per-process random seed, so crafted keys cannot force collisions) once a
//! map grows past [`INDEX_AFTER`] keys.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;

const INDEX_AFTER: usize = 16;
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry<P> {
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
    index: Option<HashMap<u64, u32>>,
}

/// The key sets of the currently open maps; `P` is caller data kept per key.
#[derive(Debug)]
pub(crate) struct KeySets<P> {
    arena: Vec<u8>,
    entries: Vec<Entry<P>>,
    frames: Vec<MapFrame>,
    hasher: RandomState,
}

impl<P: Copy> KeySets<P> {
    pub fn new() -> Self {
        KeySets {
            arena: Vec::new(),
            entries: Vec::new(),
            frames: Vec::new(),
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
            index: None,
        });
    }

    pub fn close_map(&mut self) {
        if let Some(f) = self.frames.pop() {
            self.entries.truncate(f.first_entry);
            self.arena.truncate(f.arena_start);
        }
    }

    /// Start collecting a key's bytes (they may arrive in pieces).
    pub fn key_start(&mut self) -> usize {
        self.arena.len()
    }

    pub fn key_bytes(&mut self, b: &[u8]) {
        self.arena.extend_from_slice(b);
    }

    /// The key begun at `start` is complete. If the innermost map already holds
    /// it, the key's bytes are dropped and `Dup(i)` names the earlier entry;
    /// otherwise the key is recorded with `payload` as `New(i)`.
    pub fn key_end(&mut self, start: usize, payload: P) -> KeyOutcome {
        let Some(frame) = self.frames.last_mut() else {
            self.arena.truncate(start);
            return KeyOutcome::New(usize::MAX);
        };
        let key = &self.arena[start..];
        let hash = self.hasher.hash_one(key);
        let count = self.entries.len() - frame.first_entry;
        let found = match &frame.index {
            Some(index) => {
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
                hit
            }
            None => (frame.first_entry..self.entries.len()).find(|&i| {
                let e = &self.entries[i];
                e.hash == hash && &self.arena[e.start as usize..(e.start + e.len) as usize] == key
            }),
        };
        if let Some(i) = found {
            self.arena.truncate(start);
            return KeyOutcome::Dup(i);
        }
        let idx = self.entries.len() as u32;
        let mut entry = Entry {
            hash,
            start: start as u32,
            len: key.len() as u32,
            next: NONE,
            payload,
        };
        if frame.index.is_none() && count + 1 > INDEX_AFTER {
            let mut index = HashMap::with_capacity(count * 2);
            for i in frame.first_entry..self.entries.len() {
                let h = self.entries[i].hash;
                let prev = index.insert(h, i as u32).unwrap_or(NONE);
                self.entries[i].next = prev;
            }
            frame.index = Some(index);
        }
        if let Some(index) = frame.index.as_mut() {
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
