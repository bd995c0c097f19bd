//! Output buffers for transcoded (and gzipped) response bodies, reused instead of
//! allocated per chunk (measured: a transcoded LIST cost about 630 page faults, the kernel
//! handing out and zeroing fresh pages for each chunk's output, freed right after;
//! bench/RESULTS.md has the page faults now).
//!
//! A chunk's output is written into a buffer taken from [`OutputBuffers`] and handed to
//! pingora as [`Bytes`] that own it; when pingora has written the chunk and drops the
//! `Bytes`, the buffer goes back on the free list, so a streaming body cycles through the
//! same one or two buffers. The list is bounded in count and in each buffer's capacity,
//! so what it keeps is bounded too (at most [`MAX_KEPT`] buffers and [`MAX_KEPT_BYTES`]); a
//! buffer over the bound is freed when its chunk is sent. One `OutputBuffers` is made per
//! proxy and passed in (`CodecSettings`).
//!
//! [`Transcoders`] does the same for the response codec itself: a LIST grows its JSON →
//! CBOR transcoder's window buffer to about 1 MiB, which a fresh transcoder per response
//! would take from the kernel again (about 150 page faults per LIST). A few are kept,
//! reset, for the next response.

use crate::codec::fields::Schema;
use crate::codec::{CodecError, JsonToCbor, JsonToCborOptions, Transcoder};
use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Most buffers kept for reuse.
pub const MAX_KEPT: usize = 64;
/// Largest buffer kept for reuse; bigger ones are freed after use. A streamed LIST's
/// chunks can reach the codec's window (1 MiB) plus a chunk of input.
pub const MAX_KEPT_CAPACITY: usize = 4 << 20;
/// Most bytes of capacity kept over all buffers.
pub const MAX_KEPT_BYTES: usize = 16 << 20;

/// A bounded free list of output buffers, shared by every request of a proxy.
#[derive(Debug, Default)]
pub struct OutputBuffers {
    free: Mutex<Free>,
}

/// The kept buffers and their total capacity.
#[derive(Debug, Default)]
struct Free {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
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
        let kept = self.free.lock().ok().and_then(|mut f| {
            let b = f.bufs.pop()?;
            f.bytes -= b.capacity();
            Some(b)
        });
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
            if free.bufs.len() < MAX_KEPT && free.bytes + buf.capacity() <= MAX_KEPT_BYTES {
                free.bytes += buf.capacity();
                free.bufs.push(buf);
            }
        }
    }

    /// Buffers kept for reuse now.
    pub fn kept(&self) -> usize {
        self.free.lock().map_or(0, |f| f.bufs.len())
    }
}

/// Most response transcoders kept for reuse (each may hold about a window's worth).
pub const MAX_KEPT_TRANSCODERS: usize = 4;

/// JSON → CBOR transcoders kept for reuse, shared by every response of a proxy.
#[derive(Debug, Default)]
pub struct Transcoders {
    free: Mutex<Vec<JsonToCbor>>,
}

impl Transcoders {
    /// A transcoder with `opts`: a kept one, reset, if one has them but for the schema,
    /// which a kept one takes on (each kind with `[]byte` fields has its own; matching
    /// on it would keep missing with more kinds in play than transcoders kept).
    pub fn take(self: &Arc<Self>, opts: JsonToCborOptions) -> PooledTranscoder {
        let unschemed = |o: JsonToCborOptions| JsonToCborOptions {
            schema: Schema::Unstructured,
            ..o
        };
        let kept = self.free.lock().ok().and_then(|mut free| {
            let i = free
                .iter()
                .position(|t| unschemed(t.options()) == unschemed(opts))?;
            Some(free.swap_remove(i))
        });
        let inner = match kept {
            Some(mut t) => {
                t.set_schema(opts.schema);
                t
            }
            None => JsonToCbor::new(opts),
        };
        PooledTranscoder {
            inner,
            home: Arc::clone(self),
        }
    }

    /// Transcoders kept for reuse now.
    pub fn kept(&self) -> usize {
        self.free.lock().map_or(0, |f| f.len())
    }
}

/// A response transcoder that goes back to its [`Transcoders`], reset, when dropped.
pub struct PooledTranscoder {
    inner: JsonToCbor,
    home: Arc<Transcoders>,
}

impl Transcoder for PooledTranscoder {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        self.inner.feed(input, out)
    }
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        self.inner.finish(out)
    }
    fn documents(&self) -> u64 {
        self.inner.documents()
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
}

impl Drop for PooledTranscoder {
    fn drop(&mut self) {
        // `JsonToCbor::new` allocates nothing: a placeholder to take the kept one out.
        let opts = self.inner.options();
        let mut t = std::mem::replace(&mut self.inner, JsonToCbor::new(opts));
        t.reset();
        if let Ok(mut free) = self.home.free.lock() {
            if free.len() < MAX_KEPT_TRANSCODERS {
                free.push(t);
            }
        }
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
    fn transcoders_are_reused_reset_and_bounded() {
        let pool = Arc::new(Transcoders::default());
        let opts = JsonToCborOptions::default();
        let mut out = Vec::new();
        {
            let mut t = pool.take(opts);
            t.feed(br#"{"a": [1, 2"#, &mut out).unwrap();
            // Dropped mid-body (a client that went away): reset before reuse.
        }
        assert_eq!(pool.kept(), 1);
        let mut t = pool.take(opts);
        assert_eq!(pool.kept(), 0);
        out.clear();
        t.feed(b"true", &mut out).unwrap();
        t.finish(&mut out).unwrap();
        assert_eq!(out, crate::codec::json_to_cbor(b"true", opts).unwrap());
        // Other options: a new one.
        let watch = JsonToCborOptions {
            watch: true,
            ..opts
        };
        let w = pool.take(watch);
        drop(t);
        assert_eq!(pool.kept(), 1);
        let many: Vec<_> = (0..MAX_KEPT_TRANSCODERS + 3)
            .map(|_| pool.take(opts))
            .collect();
        drop(many);
        drop(w);
        assert_eq!(pool.kept(), MAX_KEPT_TRANSCODERS);
    }

    #[test]
    fn a_kept_transcoder_takes_on_the_schema_asked_for() {
        use crate::negotiate::byte_fields::CONFIGMAP;
        let pool = Arc::new(Transcoders::default());
        let plain = JsonToCborOptions::default();
        let typed = JsonToCborOptions {
            schema: Schema::Typed(CONFIGMAP),
            ..plain
        };
        let cm = br#"{"kind":"ConfigMap","binaryData":{"b":"AAEC//4="}}"#;
        let run = |opts: JsonToCborOptions| {
            let mut t = pool.take(opts);
            let mut out = Vec::new();
            t.feed(cm, &mut out).unwrap();
            t.finish(&mut out).unwrap();
            out
        };
        // One transcoder serves both kinds in turn, each as a fresh one would.
        for opts in [plain, typed, plain, typed] {
            assert_eq!(run(opts), crate::codec::json_to_cbor(cm, opts).unwrap());
            assert_eq!(pool.kept(), 1);
        }
        assert_ne!(
            run(plain),
            run(typed),
            "the schema changes the output (tag 22)"
        );
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
        // Four buffers of 4 MiB fill the byte bound; a fifth is not kept.
        let pool = Arc::new(OutputBuffers::default());
        let sent: Vec<Bytes> = (0..5)
            .map(|_| {
                let mut b = pool.take(MAX_KEPT_CAPACITY);
                b.push(1);
                pool.send(b)
            })
            .collect();
        drop(sent);
        assert_eq!(pool.kept(), MAX_KEPT_BYTES / MAX_KEPT_CAPACITY);
        assert!(pool.send(Vec::new()).is_empty());
    }
}
