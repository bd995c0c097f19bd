//! Client connections on the way in: how many are open (`server.max_connections`, by
//! default derived from the file-descriptor limit so that upstream connections and the
//! admin listener always find a free descriptor), and the total deadline for each
//! request head (`server.request_head_timeout_seconds`, Go's `ReadHeaderTimeout`).
//!
//! One [`Connections`] is made at start-up and passed to the accept loop
//! (`src/inbound/accept.rs`), the proxy (which says when a head has been read) and the drain
//! (which waits for heads that are still arriving). A connection over the limit is
//! closed as soon as it is accepted: a fast refusal, never a hang in the backlog.
//!
//! The head deadline lives in [`Conn`], the wrapper around each HTTP/1 client stream:
//! while a head is being read, a read past the deadline fails, and pingora closes the
//! connection. The deadline of a connection's first head starts when it is accepted;
//! on a kept-alive connection it starts with the first byte of the next head (the wait
//! before it is the keep-alive timeout), as Go's server does.
//!
//! [`Conn`] also counts the lines of each head as they are read
//! ([`crate::negotiate::head_lines`]): a head with more than pingora's 256 header lines,
//! which pingora's parser refuses with a bare 400, is answered with a 431 `Status`
//! instead (docs/wire.md §4): the bytes pingora writes for its 400 are replaced.

use crate::metrics::metrics;
use crate::negotiate::head_lines::HeadLines;
use crate::negotiate::LocalReply;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, Stream, UniqueID,
    UniqueIDType,
};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The counters shared by the accept loop, the proxy and the drain.
#[derive(Debug)]
pub struct Connections {
    limit: usize,
    head_timeout: Duration,
    open: AtomicUsize,
    /// Heads of which at least one byte has arrived and that are not complete yet.
    heads: AtomicUsize,
    /// The most connections open at once since [`Connections::take_peak`] last looked.
    peak: AtomicUsize,
    /// HTTP/2 connections open: the drain waits for them to close (after pingora's
    /// GOAWAY, once their streams have ended), so their last frames are sent.
    h2: AtomicUsize,
    /// A local reply as a whole HTTP/1.1 response that closes the connection.
    render: Http1Reply,
}

/// Writes a local reply as a whole HTTP/1.1 response (`proxy::local_reply::http1_bytes`,
/// passed in at start-up: the rings' imports point inward).
pub type Http1Reply = fn(&LocalReply) -> Vec<u8>;

/// One open HTTP/2 connection; dropping it (the connection has closed) counts it out.
#[derive(Debug)]
pub struct H2Held(Arc<Connections>);

impl Drop for H2Held {
    fn drop(&mut self) {
        self.0.h2.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One admitted connection's place; dropping it gives the place back.
#[derive(Debug)]
pub struct Held(Arc<Connections>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        metrics().connections_open.dec();
    }
}

impl Connections {
    /// `limit` is at least 1 (`Config::connection_limit`), `head_timeout` at least 1 s.
    pub fn new(limit: usize, head_timeout: Duration, render: Http1Reply) -> Arc<Self> {
        metrics().connections_limit.set(limit as i64);
        Arc::new(Connections {
            limit,
            head_timeout,
            open: AtomicUsize::new(0),
            heads: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            h2: AtomicUsize::new(0),
            render,
        })
    }

    /// Take a place for a new connection, or `None` when the limit is reached (counted;
    /// the caller closes the connection).
    pub fn admit(self: &Arc<Self>) -> Option<Held> {
        let before = self.open.fetch_add(1, Ordering::AcqRel);
        if before >= self.limit {
            self.open.fetch_sub(1, Ordering::AcqRel);
            metrics().connections_refused_total.inc();
            return None;
        }
        self.peak.fetch_max(before + 1, Ordering::AcqRel);
        metrics().connections_open.inc();
        Some(Held(self.clone()))
    }

    /// The most connections open at once since the last call (for `memory::Trimmer`).
    pub fn take_peak(&self) -> usize {
        self.peak.swap(self.open(), Ordering::AcqRel)
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Count an HTTP/2 connection open until the guard is dropped.
    pub fn h2_open(self: &Arc<Self>) -> H2Held {
        self.h2.fetch_add(1, Ordering::AcqRel);
        H2Held(self.clone())
    }

    /// HTTP/2 connections open now.
    pub fn h2_connections(&self) -> usize {
        self.h2.load(Ordering::Acquire)
    }

    /// Request heads partly arrived: the drain waits for them as for requests in flight.
    pub fn heads_arriving(&self) -> usize {
        self.heads.load(Ordering::Acquire)
    }

    /// Wrap an HTTP/1 client stream: its first head must be complete within the
    /// head timeout from now.
    pub fn wrap(self: &Arc<Self>, inner: Stream, held: Held) -> Conn {
        Conn {
            inner,
            phase: AtomicU8::new(HEAD),
            arriving: AtomicU8::new(0),
            deadline: Box::pin(tokio::time::sleep(self.head_timeout)),
            connections: self.clone(),
            gathering: AtomicBool::new(false),
            lines: HeadLines::default(),
            refusal: None,
            _held: held,
        }
    }
}

/// Waiting for the first byte of a next head (no deadline yet).
const WAITING: u8 = 0;
/// Reading a head: the deadline runs.
const HEAD: u8 = 1;
/// The head is complete: body and response, no deadline.
const BODY: u8 = 2;

/// An HTTP/1 client stream with the head deadline and its place among the open
/// connections. Everything but reading is passed through.
#[derive(Debug)]
pub struct Conn {
    inner: Stream,
    phase: AtomicU8,
    /// 1 while this connection counts in `Connections::heads`.
    arriving: AtomicU8,
    deadline: Pin<Box<Sleep>>,
    connections: Arc<Connections>,
    /// This response's flushes are held back until its terminating chunk is written
    /// ([`gather`], [`release`]).
    gathering: AtomicBool,
    /// The lines of the head being read.
    lines: HeadLines,
    /// The 431 written in place of pingora's 400 for too many header lines, and how
    /// much of it is written.
    refusal: Option<(Vec<u8>, usize)>,
    _held: Held,
}

impl Conn {
    /// The head has been read (the proxy's first callback): no deadline until the next.
    pub fn head_read(&self) {
        self.phase.store(BODY, Ordering::Release);
        self.stop_arriving();
    }

    /// The connection is kept alive for a next request: its deadline starts with the
    /// first byte of that request's head.
    pub fn next_request(&self) {
        self.phase.store(WAITING, Ordering::Release);
        self.stop_arriving();
    }

    /// Writes the 431 for too many header lines in place of what pingora writes (its
    /// 400, the only answer pingora gives before a head is read whole): `None` when this
    /// head is not refused, else ready once the 431 is written.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Option<Poll<io::Result<()>>> {
        if self.refusal.is_none() {
            if self.phase.load(Ordering::Acquire) == BODY || !self.lines.too_many() {
                return None;
            }
            metrics()
                .client_errors_total
                // `ops::logs::ClientError::TooManyHeaders`'s label (ops is an outer ring).
                .with_label_values(&["too_many_headers"])
                .inc();
            self.refusal = Some(((self.connections.render)(&self.lines.refusal()), 0));
        }
        let (bytes, at) = self.refusal.as_mut()?;
        while *at < bytes.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*at..]) {
                Poll::Ready(Ok(0)) => {
                    return Some(Poll::Ready(Err(io::ErrorKind::WriteZero.into())))
                }
                Poll::Ready(Ok(n)) => *at += n,
                Poll::Ready(Err(e)) => return Some(Poll::Ready(Err(e))),
                Poll::Pending => return Some(Poll::Pending),
            }
        }
        Some(Poll::Ready(Ok(())))
    }

    fn stop_arriving(&self) {
        if self.arriving.swap(0, Ordering::AcqRel) == 1 {
            self.connections.heads.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn start_arriving(&self) {
        if self.arriving.swap(1, Ordering::AcqRel) == 0 {
            self.connections.heads.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Hold this response's flushes back until its terminating chunk is written, so
    /// that the head, the chunks and the end that pingora flushes one by one leave in
    /// one send where the write buffer holds them (a larger body still leaves as the
    /// buffer fills). Only for a chunked body that pingora ends with [`LAST_CHUNK`]
    /// ([`crate::negotiate::response::Relabel::gather`]): nothing else would let the
    /// held bytes go.
    fn gather(&self) {
        self.gathering.store(true, Ordering::Release);
    }

    /// The response is over: flushes go through again.
    fn release(&self) {
        self.gathering.store(false, Ordering::Release);
    }

    /// The `Conn` inside a pingora session's stream, if it is one (HTTP/1 only).
    pub fn of(stream: &Stream) -> Option<&Conn> {
        stream.as_any().downcast_ref::<Conn>()
    }
}

/// The head of this session's request is complete (the proxy's first callback): its
/// deadline stops. Nothing for HTTP/2.
pub fn head_read(session: &pingora::protocols::http::ServerSession) {
    if let Some(conn) = session.stream().and_then(Conn::of) {
        conn.head_read();
    }
}

/// This response's flushes are held back until its terminating chunk
/// ([`crate::negotiate::response::Relabel::gather`]). Nothing for HTTP/2.
pub fn gather(session: &pingora::protocols::http::ServerSession) {
    if let Some(conn) = session.stream().and_then(Conn::of) {
        conn.gather();
    }
}

/// The response is over: flushes go through again. Called for every request.
pub fn release(session: &pingora::protocols::http::ServerSession) {
    if let Some(conn) = session.stream().and_then(Conn::of) {
        conn.release();
    }
}

/// The terminating chunk of a chunked body, as pingora writes it, alone
/// (pingora-core 0.9.1 `protocols/http/v1/body.rs`: `LAST_CHUNK`,
/// `do_finish_chunked_body`), before the flush that must go through.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Whether a write of `pieces` is the terminating chunk alone: written whole
/// (`do_finish_chunked_body`) or as one vectored write (pingora's cancel-safe body
/// writer, `poll_finish_chunked_task`).
fn is_last_chunk(pieces: &[io::IoSlice<'_>]) -> bool {
    pieces.iter().map(|p| p.len()).sum::<usize>() == LAST_CHUNK.len()
        && pieces.iter().flat_map(|p| p.iter()).eq(LAST_CHUNK)
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stop_arriving();
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let phase = this.phase.load(Ordering::Acquire);
        if phase == HEAD && this.deadline.as_mut().poll(cx).is_ready() {
            metrics().request_head_timeouts_total.inc();
            this.phase.store(BODY, Ordering::Release);
            this.stop_arriving();
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head deadline (server.request_head_timeout_seconds)",
            )));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            match phase {
                WAITING => {
                    this.lines.reset();
                    this.lines.feed(&buf.filled()[before..]);
                    let at = Instant::now() + this.connections.head_timeout;
                    this.deadline.as_mut().reset(at);
                    this.phase.store(HEAD, Ordering::Release);
                    this.start_arriving();
                }
                HEAD => {
                    this.lines.feed(&buf.filled()[before..]);
                    this.start_arriving();
                }
                _ => {}
            }
        }
        read
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(done) = self.poll_refusal(cx) {
            return done.map_ok(|()| buf.len());
        }
        if is_last_chunk(&[io::IoSlice::new(buf)]) {
            self.release();
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.gathering.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(done) = self.poll_refusal(cx) {
            return done.map_ok(|()| bufs.iter().map(|b| b.len()).sum());
        }
        if is_last_chunk(bufs) {
            self.release();
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait::async_trait]
impl Shutdown for Conn {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Conn {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for Conn {
    fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<pingora::protocols::ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for Conn {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Conn {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }
}

impl GetSocketDigest for Conn {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.inner.get_socket_digest()
    }
}

#[async_trait::async_trait]
impl Peek for Conn {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_limit_leaves_room_for_upstream_connections_and_the_rest() {
        assert_eq!(crate::config::limit_from_fds(1024), 384);
        assert_eq!(crate::config::limit_from_fds(65536), 32640);
        assert_eq!(crate::config::limit_from_fds(100), 1, "at least one");
    }

    #[test]
    fn places_are_refused_over_the_limit_and_come_back_when_dropped() {
        let c = Connections::new(2, Duration::from_secs(1), |_| Vec::new());
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        assert!(c.admit().is_none());
        assert_eq!(c.open(), 2, "a refused connection holds nothing");
        assert_eq!(c.take_peak(), 2);
        drop(a);
        assert_eq!(c.open(), 1);
        assert_eq!(c.take_peak(), 2, "the peak since the last look");
        assert_eq!(c.take_peak(), 1);
        let d = c.admit().unwrap();
        drop((b, d));
        assert_eq!(c.open(), 0);
    }

    /// A client stream as pingora's listener makes it: writes wait in a buffer, and a
    /// flush sends them (here: into `sent`).
    #[derive(Debug, Default)]
    struct Buffered {
        buffer: Vec<u8>,
        sent: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl AsyncRead for Buffered {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Buffered {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.buffer.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            bufs.iter().for_each(|b| self.buffer.extend_from_slice(b));
            Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            let written = std::mem::take(&mut self.buffer);
            self.sent.lock().unwrap().extend(written);
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.poll_flush(cx)
        }
    }

    #[async_trait::async_trait]
    impl Shutdown for Buffered {
        async fn shutdown(&mut self) {}
    }
    impl UniqueID for Buffered {
        fn id(&self) -> UniqueIDType {
            0
        }
    }
    impl Ssl for Buffered {}
    impl pingora::protocols::GetTimingDigest for Buffered {
        fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
            Vec::new()
        }
    }
    impl pingora::protocols::GetProxyDigest for Buffered {
        fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
            None
        }
    }
    impl pingora::protocols::GetSocketDigest for Buffered {
        fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
            None
        }
    }
    impl pingora::protocols::Peek for Buffered {}

    #[tokio::test]
    async fn a_gathered_answer_leaves_at_its_terminating_chunk_and_the_next_flushes_as_usual() {
        use tokio::io::AsyncWriteExt;
        let stream = Buffered::default();
        let sent = stream.sent.clone();
        let taken = || std::mem::take(&mut *sent.lock().unwrap());
        let c = Connections::new(2, Duration::from_secs(1), |_| Vec::new());
        let held = c.admit().unwrap();
        let mut conn = c.wrap(Box::new(stream), held);

        // As pingora writes a chunked answer: the head, flushed; a chunk, flushed; the
        // terminating chunk, flushed.
        conn.gather();
        conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        conn.flush().await.unwrap();
        conn.write_all(b"3\r\nabc\r\n").await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"", "held back until the end");
        conn.write_all(LAST_CHUNK).await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"HTTP/1.1 200 OK\r\n\r\n3\r\nabc\r\n0\r\n\r\n");

        // Not gathered: a flush sends at once.
        conn.write_all(b"next").await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"next");

        // The terminating chunk as one vectored write (pingora's cancel-safe body
        // writer) ends it too.
        conn.gather();
        conn.write_all(b"held").await.unwrap();
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"");
        let end = [io::IoSlice::new(b"0\r\n"), io::IoSlice::new(b"\r\n")];
        let n = std::future::poll_fn(|cx| Pin::new(&mut conn).poll_write_vectored(cx, &end))
            .await
            .unwrap();
        assert_eq!(n, 5);
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"held0\r\n\r\n");

        // The request is over without one (an answer cut short): flushes go through.
        conn.gather();
        conn.write_all(b"cut").await.unwrap();
        conn.release();
        conn.flush().await.unwrap();
        assert_eq!(taken(), b"cut");
    }
}
