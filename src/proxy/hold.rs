//! The hold: an answer to a client that decodes CBOR with client-go 1.32–1.35's limits
//! is made CBOR only once it is known to have no array or map wider than they allow
//! (docs/wire.md §2b; what is protected is `negotiate::protect`'s decision, what the
//! hold does next `negotiate::hold`'s, the width `codec::BreadthScanner`'s).
//!
//! pingora 0.9 writes the response head as soon as `response_filter` returns, before
//! any body byte is read (`proxy_h1.rs` `process_upstream_tasks`, `proxy_h2.rs` alike),
//! and no callback delays it. So a held request is not sent upstream by pingora:
//! `request_filter` hands it to [`Hold::serve`], which drives the same loop as pingora
//! (`proxy/mod.rs`, "One loop"), with the same [`Steps`] in the same order, over a
//! [`Connector`] of its own (HTTP/1.1 upstream connections pooled apart from pingora's):
//!
//! 1. [`Steps::choose_peer`], then [`Steps::upstream_request`] on an HTTP/1.1 head;
//! 2. the request is sent; a pooled connection that fails before the response head is
//!    sent again as `negotiate::hold`'s [`Holding::send_again`] says (pool's
//!    `retry`, counted in `cborgate_upstream_retries_total{reason="connection"}`);
//! 3. [`Steps::upstream_head`] decides the response; a protected single answer is
//!    held: the start of its body, at most `cbor_protection.hold_bytes` plus one read,
//!    until [`Holding::next`] lets it go (JSON: a container over the limit, or the bound
//!    reached undecided; CBOR: the body ended within it);
//! 4. [`Steps::client_head`] relabels the head as decided and it is written; the held
//!    pieces and the rest go through [`Steps::client_body`] as pingora would send them.
//!
//! Guarantees: it never calls a pingora callback; any failure is returned to pingora,
//! whose `fail_to_proxy` answers it (a `Status` before the head, an abnormal end after)
//! and whose `logging` ends the request, so every request gets its answer; the upstream
//! connection is given back to the pool only after a whole response.

use super::exchange::Exchange;
use super::steps::{header_list, Steps};
use crate::codec::BreadthScanner;
use crate::config::Config;
use crate::metrics::metrics;
use crate::negotiate::client::ClientAgent;
use crate::negotiate::hold::{Event, Holding, Next};
use crate::negotiate::protect::{Protection, Verdict};
use crate::outbound::upstream::count_opened;
use bytes::Bytes;
use pingora::connectors::http::Connector;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::client::HttpSession;
use pingora::proxy::Session;
use pingora::upstreams::peer::HttpPeer;
use pingora::Result;

/// What the hold needs, fixed at start-up.
pub struct Hold {
    protection: Protection,
    /// The codec's nesting limit, which bounds the scanner's stack.
    max_depth: usize,
    /// Upstream connections of held requests, pooled apart from pingora's own.
    connector: Connector,
}

impl Hold {
    pub fn new(config: &Config) -> Self {
        let p = &config.cbor_protection;
        Hold {
            protection: Protection {
                enabled: p.enabled,
                user_agents: p.user_agents.clone(),
                all_clients: p.all_clients,
                max_elements: p.max_elements,
                hold_bytes: p.hold_bytes,
            },
            max_depth: config.codec.max_depth,
            connector: Connector::new(None),
        }
    }

    /// Decide whether an admitted request is protected (remembered in its
    /// [`Exchange`], with its client family for the metric) and whether it is held
    /// (`true`: answer it with [`Hold::serve`]). `agent` is what the request's
    /// `User-Agent` names, `declared` its `Content-Length`.
    pub fn protect(
        &self,
        session: &mut Session,
        ex: &mut Exchange,
        agent: ClientAgent,
        declared: Option<u64>,
    ) -> Result<bool> {
        let req = session.req_header();
        let user_agent = req.headers.get("user-agent").and_then(|v| v.to_str().ok());
        if !self.protection.old_limits(agent, user_agent) {
            return Ok(false);
        }
        let accept = header_list(req, http::header::ACCEPT);
        let held = ex.protect_with(|plan| {
            let protected = self.protection.protects(plan, true, accept.as_deref());
            let held = self.protection.holds(plan, protected, declared);
            (protected.then_some(agent.family), held)
        })?;
        Ok(held && session.as_mut().is_body_empty())
    }

    /// Answer a held request (see the module doc). `Ok(true)`: answered; an error is
    /// pingora's to answer through `fail_to_proxy`.
    pub async fn serve(
        &self,
        steps: &Steps,
        session: &mut Session,
        ex: &mut Exchange,
    ) -> Result<bool> {
        let mut peer = steps.choose_peer(ex).await?;
        // HTTP/1.1 upstream, as pingora's own `proxy_h1.rs` makes the request: the
        // version, and an HTTP/2 client's `:authority` as `Host`.
        peer.options.alpn = pingora::protocols::ALPN::H1;
        let mut req = session.req_header().clone();
        req.set_version(http::Version::HTTP_11);
        if session.req_header().version == http::Version::HTTP_2 {
            if let Some(authority) = req.uri.authority().map(|a| a.to_string()) {
                req.insert_header("Host", authority)?;
            }
        }
        steps.upstream_request(session, &mut req, ex)?;
        let mut holding = Holding::new(self.protection.hold_bytes);
        let mut up = self.connect(ex, &peer, req, &mut holding).await?;
        match self.answer(steps, session, ex, &mut up, holding).await {
            Ok(()) => {
                // Reused only when the response was read whole (pingora checks).
                self.connector
                    .release_http_session(up, &*peer, peer.options.idle_timeout)
                    .await;
                Ok(true)
            }
            Err(e) => {
                up.shutdown().await;
                Err(e)
            }
        }
    }

    /// A connection upstream that has taken the request and answered with a head. A
    /// pooled connection the upstream closed while idle fails before the head: the
    /// request (a `GET`, idempotent, with no body) is sent again as `holding` decides;
    /// otherwise the failure is the answer.
    async fn connect(
        &self,
        ex: &mut Exchange,
        peer: &HttpPeer,
        req: RequestHeader,
        holding: &mut Holding,
    ) -> Result<HttpSession> {
        loop {
            let got = self.connector.get_http_session(peer).await;
            // As `connected_to_upstream` and `fail_to_connect` do: the turn is over.
            ex.connect_turn(None);
            let (mut up, reused) = got.map_err(|e| e.into_up())?;
            count_opened(reused);
            up.set_read_timeout(peer.options.read_timeout);
            let Err(e) = send(&mut up, req.clone()).await else {
                return Ok(up);
            };
            up.shutdown().await;
            let again = holding.send_again(reused).ok_or(e)?;
            if let Some(reason) = again.label() {
                metrics()
                    .upstream_retries_total
                    .with_label_values(&[reason])
                    .inc();
            }
        }
    }

    /// The response: its head decided, its body's start held if protected, then both to
    /// the client.
    async fn answer(
        &self,
        steps: &Steps,
        session: &mut Session,
        ex: &mut Exchange,
        up: &mut HttpSession,
        holding: Holding,
    ) -> Result<()> {
        let Some(head) = up.response_header() else {
            return Err(pingora::Error::new_up(
                pingora::ErrorType::InvalidHTTPHeader,
            ));
        };
        let mut resp: ResponseHeader = head.clone();
        steps.upstream_head(&resp, ex)?;
        let (held, mut end) = match ex.protected_verdict()? {
            Verdict::Hold => self.hold(ex, up, holding).await?,
            Verdict::AsDecided | Verdict::Json(_) => (Vec::new(), false),
        };
        steps.client_head(session, &mut resp, ex)?;
        session
            .write_response_header(Box::new(resp), false)
            .await
            .map_err(|e| e.into_down())?;
        // The held pieces as they came; the last one ends the body if the body ended.
        let pieces = held.len();
        for (n, piece) in held.into_iter().enumerate() {
            forward(steps, session, ex, Some(piece), end && n + 1 == pieces).await?;
        }
        if end && pieces == 0 {
            forward(steps, session, ex, None, true).await?;
        }
        while !end {
            let piece = up.read_response_body().await.map_err(|e| e.into_up())?;
            end = piece.is_none() || up.response_done();
            forward(steps, session, ex, piece, end).await?;
        }
        Ok(())
    }

    /// Hold the body's start until `holding` lets it go: the pieces held, as they were
    /// read (never copied), and whether they are the whole body. Let go as JSON, the
    /// exchange's decision about the head becomes the upstream's JSON.
    async fn hold(
        &self,
        ex: &mut Exchange,
        up: &mut HttpSession,
        mut holding: Holding,
    ) -> Result<(Vec<Bytes>, bool)> {
        let mut scan = BreadthScanner::new(self.protection.max_elements, self.max_depth);
        let mut held = Vec::new();
        let mut next = holding.next(Event::Start);
        loop {
            match next {
                Next::Read => {}
                Next::Release { json, whole } => {
                    if let Some(reason) = json {
                        ex.as_json(reason)?;
                    }
                    return Ok((held, whole));
                }
            }
            let event = match up.read_response_body().await.map_err(|e| e.into_up())? {
                None => Event::End,
                Some(piece) => {
                    let (len, breadth) = (piece.len(), scan.feed(&piece));
                    held.push(piece);
                    let done = up.response_done();
                    Event::Piece { len, breadth, done }
                }
            };
            next = holding.next(event);
        }
    }
}

/// The request head upstream, and the response head back.
async fn send(up: &mut HttpSession, req: RequestHeader) -> Result<()> {
    up.write_request_header(Box::new(req))
        .await
        .map_err(|e| e.into_up())?;
    up.finish_request_body().await.map_err(|e| e.into_up())?;
    up.read_response_header().await.map_err(|e| e.into_up())
}

/// One piece of the body to the client, through [`Steps::client_body`] as pingora
/// sends it.
async fn forward(
    steps: &Steps,
    session: &mut Session,
    ex: &mut Exchange,
    mut body: Option<Bytes>,
    end: bool,
) -> Result<()> {
    steps.client_body(&mut body, end, ex)?;
    session
        .write_response_body(body, end)
        .await
        .map_err(|e| e.into_down())
}
