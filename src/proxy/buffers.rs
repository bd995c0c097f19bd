//! Output buffers for transcoded (and gzipped) response bodies, reused instead of
//! allocated per chunk (issue 22: a transcoded LIST cost about 630 page faults, the kernel
//! handing out and zeroing fresh pages for each chunk's output, freed right after).
//!
//! A chunk's output is written into a buffer taken from [`OutputBuffers`] and handed to
//! pingora as [`Bytes`] that own it; when pingora has written the chunk and drops the
//! `Bytes`, the buffer goes back on the free list, so a streaming body cycles through the
//! same one or two buffers. The list is bounded in count and in each buffer's capacity,
//! so what it keeps is bounded too (at most [`MAX_KEPT`] × [`MAX_KEPT_CAPACITY`]); a
//! buffer over the bound is freed when its chunk is sent. One `OutputBuffers` is made per
//! proxy and passed in (`CodecSettings`).

use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Most buffers kept for reuse.
pub const MAX_KEPT: usize = 64;
/// Largest buffer kept for reuse; bigger ones are freed after use.
pub const MAX_KEPT_CAPACITY: usize = 1 << 20;

/// A bounded free list of output buffers, shared by every request of a proxy.
#[derive(Debug, Default)]
pub struct OutputBuffers {
    free: Mutex<Vec<Vec<u8>>>,
}

/// A buffer that returns itself to its [`OutputBuffers`] when the last `Bytes` of it drops.
struct Pooled {
    buf: Vec<u8>,
    home: Arc<OutputBuffers>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buf));
    }
}

impl OutputBuffers {
    /// An empty buffer with room for at least `capacity` bytes: a kept one if any.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let kept = self.free.lock().map(|mut f| f.pop()).unwrap_or(None);
        let mut buf = kept.unwrap_or_default();
        buf.clear();
        buf.reserve(capacity);
        buf
    }

    /// `buf` as `Bytes` for pingora; the buffer comes back here once they are dropped.
    /// An empty buffer goes straight back.
    pub fn send(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        if buf.is_empty() {
            self.give_back(buf);
            return Bytes::new();
        }
        Bytes::from_owner(Pooled {
            buf,
            home: Arc::clone(self),
        })
    }

    fn give_back(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > MAX_KEPT_CAPACITY {
            return;
        }
        if let Ok(mut free) = self.free.lock() {
            if free.len() < MAX_KEPT {
                free.push(buf);
            }
        }
    }

    /// Buffers kept for reuse now.
    pub fn kept(&self) -> usize {
        self.free.lock().map_or(0, |f| f.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_when_its_bytes_are_dropped() {
        let pool = Arc::new(OutputBuffers::default());
        let mut b = pool.take(1000);
        let ptr = b.as_ptr();
        b.extend_from_slice(b"chunk");
        let sent = pool.send(b);
        let clone = sent.clone();
        assert_eq!(&sent[..], b"chunk");
        drop(sent);
        assert_eq!(pool.kept(), 0, "a clone still holds it");
        drop(clone);
        assert_eq!(pool.kept(), 1);
        // The same memory serves the next chunk.
        let again = pool.take(500);
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
        assert!(again.capacity() >= 1000);
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let pool = Arc::new(OutputBuffers::default());
        let sent: Vec<Bytes> = (0..MAX_KEPT + 10)
            .map(|_| {
                let mut b = pool.take(10);
                b.push(1);
                pool.send(b)
            })
            .collect();
        drop(sent);
        assert_eq!(pool.kept(), MAX_KEPT);
        let mut big = pool.take(MAX_KEPT_CAPACITY + 1);
        big.push(1);
        drop(pool.send(big));
        assert_eq!(pool.kept(), MAX_KEPT - 1, "too big to keep");
        assert!(pool.send(Vec::new()).is_empty());
    }
}
