//! The proxy's per-connection loop: pingora's `HttpProxy` wrapped in cborgate's
//! own `ServerApp`, so that every HTTP/1 session starts with
//! `server.request_read_timeout_seconds` instead of pingora's fixed 60 s, both as
//! its read timeout (request bodies) and, on a new connection, as the wait for
//! the first request head. Each connection first takes a place among
//! `server.max_connections` (or is closed at once), and its HTTP/1 stream is a
//! `connections::Conn`, which enforces the request head deadline. HTTP/1 sessions
//! have pingora's pipelining turned on: requests a client sends before it has read
//! the previous answer are answered in order on the same connection, instead of
//! being dropped with the connection. Everything else is handed to pingora unchanged.
//!
//! On SIGTERM, connections waiting for or reading a request head are not cut off
//! (pingora's `http_cleanup` would end them at once): a request that still arrives
//! is served and answered with `Connection: close` until the drain ends the process.
//!
//! pingora-core 0.9.1 hard-codes both 60 s values: `HttpSession::new` in
//! `pingora-core-0.9.1/src/protocols/http/v1/server.rs` line 189 (`read_timeout`) and the blanket
//! `impl<T: HttpServerApp> ServerApp for T` in `pingora-core-0.9.1/src/apps/mod.rs` line 353 (the first
//! keep-alive wait). pingora-proxy documents driving `HttpProxy` from one's own
//! accept loop (`http_proxy`, `pingora-proxy-0.9.1/src/lib.rs` lines 1631-1668);
//! this is that loop for HTTP/1, the same steps as pingora-core's `apps/mod.rs` lines 346-367
//! plus the two timeouts.

use crate::inbound::connections::{Conn, Connections};
use async_trait::async_trait;
use pingora::apps::{HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Stream, ALPN};
use pingora::proxy::{HttpProxy, ProxyHttp};
use pingora::server::ShutdownWatch;
use std::sync::Arc;
use std::time::Duration;

/// `HttpProxy<SV>` with HTTP/1 sessions that start with `read_timeout_secs`.
pub struct ReadTimeout<SV> {
    proxy: Arc<HttpProxy<SV>>,
    read_timeout_secs: u64,
    connections: Arc<Connections>,
}

impl<SV> ReadTimeout<SV> {
    /// `read_timeout_secs` is `server.request_read_timeout_seconds` (at least 1:
    /// `Config::check`; 0 would mean "no timeout" to pingora's keep-alive).
    pub fn new(
        proxy: HttpProxy<SV>,
        read_timeout_secs: u64,
        connections: Arc<Connections>,
    ) -> Self {
        ReadTimeout {
            proxy: Arc::new(proxy),
            read_timeout_secs,
            connections,
        }
    }

    /// What `HttpSession::new` would have set had its 60 s been this value, and
    /// pipelining on.
    fn start(&self, session: &mut ServerSession) {
        session.set_read_timeout(Some(Duration::from_secs(self.read_timeout_secs)));
        session.set_pipelining_enabled(true);
    }
}

#[async_trait]
impl<SV> ServerApp for ReadTimeout<SV>
where
    SV: ProxyHttp + Send + Sync + 'static,
    <SV as ProxyHttp>::CTX: Send + Sync,
{
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        // Over the limit: dropping the stream closes it.
        let held = self.connections.admit()?;
        // pingora's own choice of protocol (pingora-core's `apps/mod.rs` lines 270-299, 343):
        // h2 (ALPN or, in plain text, h2c), or a custom protocol, is pingora's
        // business; with no server options (cborgate sets none) h2c and
        // force_custom are off, and what is left is HTTP/1. (Were h2c turned on, a
        // plain-text connection would go to pingora whole, with its 60 s.)
        let options = self.proxy.server_options();
        let h2c = options.is_some_and(|o| o.h2c) && stream.get_ssl_digest().is_none();
        let custom = options.is_some_and(|o| o.force_custom);
        if h2c
            || custom
            || matches!(
                stream.selected_alpn_proto(),
                Some(ALPN::H2 | ALPN::Custom(_))
            )
        {
            let h2 = self.connections.h2_open();
            let reused = ServerApp::process_new(&self.proxy, stream, shutdown).await;
            drop((h2, held));
            return reused;
        }

        // pingora-core's `apps/mod.rs` lines 346-367, with our timeouts.
        let conn = self.connections.wrap(stream, held);
        let mut session = ServerSession::new_http1(Box::new(conn));
        self.start(&mut session);
        if *shutdown.borrow() {
            // stop downstream from reusing if this service is shutting down soon
            session.set_keepalive(None);
        } else {
            session.set_keepalive(Some(self.read_timeout_secs));
        }
        session.set_keepalive_reuses_remaining(options.and_then(|o| o.keepalive_request_limit));

        let mut result = self.proxy.process_new_http(session, shutdown).await;
        while let Some((stream, persistent_settings)) = result.map(|r| r.consume()) {
            if let Some(conn) = Conn::of(&stream) {
                conn.next_request();
            }
            let mut session = ServerSession::new_http1(stream);
            self.start(&mut session);
            if let Some(persistent_settings) = persistent_settings {
                persistent_settings.apply_to_session(&mut session);
            }
            result = self.proxy.process_new_http(session, shutdown).await;
        }
        None
    }

    // No `cleanup`: the blanket impl's (pingora-core's `apps/mod.rs` lines 373-375) calls
    // `http_cleanup`, which ends every session waiting for or reading a request head
    // when the listener stops, so a request still arriving after SIGTERM met EOF while
    // the process lived on. Those sessions now read their request and are answered
    // with `Connection: close` (`shutdown` is set); the drain (src/process/drain.rs) waits for
    // heads that have begun to arrive, and the process's exit ends the idle ones.
}
