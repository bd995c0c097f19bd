//! The pingora glue: [`Gate`], the [`ProxyHttp`] whose callbacks carry out what
//! `negotiate` decided.
//!
//! # One loop
//!
//! Every request goes through one sequence of named steps, [`steps::Steps`], whoever
//! drives it:
//!
//! - pingora drives almost every request: it calls the callbacks below, and each
//!   callback only calls its step (`request_filter` → [`Steps::arrive`](steps::Steps::arrive),
//!   `upstream_peer` → `choose_peer`, `upstream_request_filter` → `upstream_request`,
//!   `upstream_response_filter` → `upstream_head`, `response_filter` → `client_head`,
//!   `response_body_filter` → `client_body`, `fail_to_proxy` → `fail`, `logging` →
//!   `finish`). pingora owns the connection pool, the retries (decided by
//!   [`replay::decide_retry`] through `negotiate::pool::retry`) and the writes.
//! - [`hold`] drives a held request (docs/wire.md §2b), from inside `request_filter`,
//!   because pingora writes the response head before any body byte is read. It calls the
//!   same steps in the same order, never a callback; what it decides (read on, release
//!   as CBOR or JSON, send again) is `negotiate::hold`'s, and every failure goes back to
//!   pingora, so `fail_to_proxy` and `logging` end it as any other.
//!
//! The callbacks are called by pingora only. The request's state between them is its
//! [`Exchange`], whose stage says what each phase holds.
//!
//! # Rooms
//!
//! - [`steps`]: the steps, and what they need fixed at start-up;
//! - [`exchange`]: the context of one request ([`Exchange`]);
//! - [`transcode`]: where requests and responses are transcoded (heads and bodies);
//! - [`replay`]: `auto` mode's 415 replay, and every retry's decision;
//! - [`local_reply`]: the Statuses cborgate writes itself, and which pingora
//!   failure is which;
//! - [`request_log`]: what each request leaves behind (metrics, its log line);
//! - [`buffers`]: response chunk buffers, reused;
//! - [`body`]: the codec driven over one body;
//! - [`identity`]: who the request is, and its identity headers upstream;
//! - [`hold`]: answers to clients with old CBOR limits, held until their width is known.
//!
//! Admission is [`crate::limits::admission`].

pub mod body;
pub mod buffers;
pub mod exchange;
pub mod hold;
pub mod identity;
pub mod local_reply;
pub mod replay;
pub mod request_labels;
pub mod request_log;
pub mod status;
pub mod steps;
pub mod transcode;

use crate::config::Config;
use crate::limits::admission::Admission;
use crate::limits::budget::BodyBudget;
use crate::outbound::capabilities::Capabilities;
use crate::outbound::upstream::Upstream;
use async_trait::async_trait;
use bytes::Bytes;
pub use exchange::Exchange;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, ProxyWarnLogContext, Session};
use pingora::Error;
use std::sync::Arc;
use std::time::Duration;
use steps::Steps;

/// The proxy: the steps, and the hold's own upstream connections.
pub struct Gate {
    steps: Steps,
    hold: hold::Hold,
}

impl Gate {
    pub fn new(
        config: Arc<Config>,
        upstream: Arc<Upstream>,
        admission: Arc<Admission>,
        budget: Arc<BodyBudget>,
        lines: Option<Arc<dyn request_log::Lines>>,
    ) -> Self {
        Gate {
            hold: hold::Hold::new(&config),
            steps: Steps::new(config, upstream, admission, budget, lines),
        }
    }

    /// What `/debug/capabilities` reads.
    pub fn capabilities(&self) -> Arc<Capabilities> {
        self.steps.capabilities()
    }
}

#[async_trait]
impl ProxyHttp for Gate {
    /// Boxed: pingora keeps the context in its per-request future, which is moved as a
    /// whole more than once a request; a pointer moves cheaper than the exchange.
    type CTX = Box<Exchange>;

    fn new_ctx(&self) -> Box<Exchange> {
        Box::default()
    }

    /// No downstream modules. pingora's default adds its response compression module
    /// switched off (level 0), which changes nothing but costs allocations on every
    /// request (its context and its filters' futures); cborgate compresses answers
    /// itself (`negotiate::encoding`, `proxy::body`).
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    async fn early_request_filter(
        &self,
        session: &mut Session,
        _: &mut Box<Exchange>,
    ) -> Result<()> {
        self.steps.head_read(session);
        Ok(())
    }

    /// `true`: answered here, locally or by the hold; `false`: pingora sends it upstream.
    async fn request_filter(&self, session: &mut Session, ex: &mut Box<Exchange>) -> Result<bool> {
        let arrival = self.steps.arrive(session, ex).await?;
        if arrival.answered {
            return Ok(true);
        }
        match self
            .hold
            .protect(session, ex, arrival.client, arrival.declared_len)?
        {
            // Boxed: the hold's future is large and rare, and inline it would be
            // moved with every request's `request_filter` future.
            true => Box::pin(self.hold.serve(&self.steps, session, ex)).await,
            false => Ok(false),
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ex: &mut Box<Exchange>,
    ) -> Result<Box<HttpPeer>> {
        self.steps.choose_peer(ex).await
    }

    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        reused: bool,
        _peer: &HttpPeer,
        #[cfg(unix)] fd: std::os::unix::io::RawFd,
        #[cfg(windows)] _sock: std::os::windows::io::RawSocket,
        _digest: Option<&pingora::protocols::Digest>,
        ex: &mut Box<Exchange>,
    ) -> Result<()> {
        self.steps.connected(fd, reused, ex)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ex: &mut Box<Exchange>,
        e: Box<Error>,
    ) -> Box<Error> {
        ex.connect_turn(None);
        e
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        req: &mut RequestHeader,
        ex: &mut Box<Exchange>,
    ) -> Result<()> {
        self.steps.upstream_request(session, req, ex)
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ex: &mut Box<Exchange>,
    ) -> Result<()> {
        ex.request_body(body, end_of_stream)
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Box<Exchange>,
    ) -> Result<()> {
        self.steps.upstream_head(resp, ex)
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ex: &mut Box<Exchange>,
        client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        replay::decide_retry(&mut e, ex, session, client_reused);
        e
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ex: &mut Box<Exchange>,
    ) -> Result<()> {
        self.steps.client_head(session, resp, ex)
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ex: &mut Box<Exchange>,
    ) -> Result<Option<Duration>> {
        self.steps.client_body(body, end_of_stream, ex)?;
        Ok(None)
    }

    fn suppress_error_log(&self, _session: &Session, _ex: &Box<Exchange>, _e: &Error) -> bool {
        // `logging` writes the one line per request, with the error in it, and
        // `fail_to_proxy` one WARN line per upstream failure: pingora's own
        // ERROR line would say the same thing a second time.
        true
    }

    fn suppress_proxy_warn_log(
        &self,
        _session: &Session,
        ex: &Box<Exchange>,
        e: &Error,
        _context: ProxyWarnLogContext,
    ) -> bool {
        // The 415 replay is auto mode working as designed (counted in
        // `cborgate_fallbacks_total`), and so is sending again a request the upstream
        // did not act on, refused unprocessed or its stream ended before the body
        // (counted in `cborgate_upstream_retries_total`; docs/wire.md §5a): neither is
        // something to warn about.
        ex.is_replay(e) || local_reply::refused(e) || local_reply::ended_before_body(e)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ex: &mut Box<Exchange>,
    ) -> FailToProxy {
        self.steps.fail(session, e, ex).await
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ex: &mut Box<Exchange>) {
        self.steps.finish(session, e, ex);
    }
}
