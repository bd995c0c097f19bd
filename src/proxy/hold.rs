//! The hold: an answer to a client that decodes CBOR with client-go 1.32–1.35's limits
//! is made CBOR only once it is known to have no array or map wider than they allow
//! (docs/wire.md §2b; what is protected is `negotiate::protect`'s decision, the width
//! `codec::BreadthScanner`'s).
//!
//! pingora 0.9 writes the response head as soon as `response_filter` returns, before
//! any body byte is read (`proxy_h1.rs` `process_upstream_tasks`, `proxy_h2.rs` alike),
//! and no callback delays it. So a held request does not go through pingora's proxy
//! loop: `request_filter` sends it itself, over a [`Connector`] of its own (HTTP/1.1
//! upstream connections pooled apart from pingora's), with the peer
//! and the upstream request head made by the same callbacks pingora calls
//! (`upstream_peer`, `upstream_request_filter`), then runs `upstream_response_filter`
//! on the head. It holds the start of the body, at most
//! `cbor_protection.hold_bytes` plus one read, until a container over the limit is seen
//! (JSON: the upstream's head and bytes as they came), the body ends (CBOR, transcoded
//! as any answer), or the bound is reached undecided (JSON). Then `response_filter`
//! relabels the head as decided, and the held bytes and the rest go through
//! `response_body_filter` as pingora would send them. Any failure is returned to
//! pingora, whose `fail_to_proxy` answers it (a `Status` before the head, an abnormal
//! end after), so every request gets its answer, and the upstream connection is given
//! back to the pool only after a whole response.

use super::{Exchange, Gate};
use crate::codec::{Breadth, BreadthScanner};
use crate::config::Config;
use crate::metrics::metrics;
use crate::negotiate::client::{ClientAgent, ClientFamily};
use crate::negotiate::pool::Retry;
use crate::negotiate::protect::{self, Protection, Reason, Verdict};
use bytes::Bytes;
use pingora::connectors::http::Connector;
use pingora::http::ResponseHeader;
use pingora::protocols::http::client::HttpSession;
use pingora::proxy::{ProxyHttp, Session};
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

    /// Decide whether an admitted request is protected (remembered in
    /// [`Exchange::protected`], with its client family for the metric) and whether
    /// it is held (`true`: answer it with [`serve`]).
    /// `agent` is what the request's `User-Agent` names, `declared` its `Content-Length`
    /// (both read by `request_filter`).
    pub fn protect(
        &self,
        session: &mut Session,
        ex: &mut Exchange,
        agent: ClientAgent,
        declared: Option<u64>,
    ) -> bool {
        let req = session.req_header();
        let user_agent = req.headers.get("user-agent").and_then(|v| v.to_str().ok());
        if !self.protection.old_limits(agent, user_agent) {
            return false;
        }
        let accept = super::header_list(req, "accept");
        let held = ex.protect_with(|plan| {
            let protected = self.protection.protects(plan, true, accept.as_deref());
            let held = self.protection.holds(plan, protected, declared);
            (protected.then_some(agent.family), held)
        });
        held && session.as_mut().is_body_empty()
    }
}

/// Count one answer sent as JSON to protect its client.
fn count(client: ClientFamily, reason: Reason) {
    metrics()
        .cbor_protected_total
        .with_label_values(&[client.label(), reason.label()])
        .inc();
}

/// Send the upstream's JSON as it came instead of the CBOR decided at the head.
fn answer_json(ex: &mut Exchange, reason: Reason) -> Result<()> {
    if let (Some(d), Some(client)) = (ex.decision(), ex.protected()) {
        ex.redecide(protect::as_json(d))?;
        count(client, reason);
    }
    Ok(())
}

/// `upstream_response_filter`, after the head is decided: a protected watch is sent as
/// the upstream's JSON (its events' width cannot be known at the head).
pub fn on_head(ex: &mut Exchange) -> Result<()> {
    let verdict = ex
        .decision()
        .map(|d| protect::on_response(&d, ex.protected().is_some()));
    match verdict {
        Some(Verdict::Json(reason)) => answer_json(ex, reason),
        _ => Ok(()),
    }
}

/// Answer a held request (see the module doc). `Ok(true)`: answered; an error is
/// pingora's to answer through `fail_to_proxy`.
pub async fn serve(gate: &Gate, session: &mut Session, ex: &mut Exchange) -> Result<bool> {
    let mut peer = gate.upstream_peer(session, ex).await?;
    // HTTP/1.1 upstream, as pingora's own `proxy_h1.rs` makes the request: the version,
    // and an HTTP/2 client's `:authority` as `Host`.
    peer.options.alpn = pingora::protocols::ALPN::H1;
    let mut req = session.req_header().clone();
    req.set_version(http::Version::HTTP_11);
    if session.req_header().version == http::Version::HTTP_2 {
        if let Some(authority) = req.uri.authority().map(|a| a.to_string()) {
            req.insert_header("Host", authority)?;
        }
    }
    gate.upstream_request_filter(session, &mut req, ex).await?;
    let mut up = connect(gate, ex, &peer, req).await?;
    match exchange(gate, session, ex, &mut up).await {
        Ok(()) => {
            // Reused only when the response was read whole (pingora checks).
            gate.hold
                .connector
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

/// Pooled connections a held request tries before a new one answers for it.
const POOLED_TRIES: usize = 2;

/// A connection upstream that has taken the request and answered with a head. A pooled
/// connection the upstream closed while idle fails before the head: the request (a `GET`,
/// idempotent, with no body) is sent again, as pingora does (counted in
/// `cborgate_upstream_retries_total{reason="connection"}`); a new connection's failure
/// is the answer.
async fn connect(
    gate: &Gate,
    ex: &mut Exchange,
    peer: &HttpPeer,
    req: pingora::http::RequestHeader,
) -> Result<HttpSession> {
    let mut tries = 0;
    loop {
        let got = gate.hold.connector.get_http_session(peer).await;
        // As `connected_to_upstream` and `fail_to_connect` do: the turn is over.
        ex.connect_turn(None);
        let (mut up, reused) = got.map_err(|e| e.into_up())?;
        up.set_read_timeout(peer.options.read_timeout);
        match send(&mut up, req.clone()).await {
            Ok(()) => return Ok(up),
            Err(e) => {
                up.shutdown().await;
                tries += 1;
                if !reused || tries > POOLED_TRIES {
                    return Err(e);
                }
                let reason = Retry::Connection.label().unwrap_or_default();
                metrics()
                    .upstream_retries_total
                    .with_label_values(&[reason])
                    .inc();
            }
        }
    }
}

/// The request head upstream, and the response head back.
async fn send(up: &mut HttpSession, req: pingora::http::RequestHeader) -> Result<()> {
    up.write_request_header(Box::new(req))
        .await
        .map_err(|e| e.into_up())?;
    up.finish_request_body().await.map_err(|e| e.into_up())?;
    up.read_response_header().await.map_err(|e| e.into_up())
}

/// The request upstream, the hold, and the answer.
async fn exchange(
    gate: &Gate,
    session: &mut Session,
    ex: &mut Exchange,
    up: &mut HttpSession,
) -> Result<()> {
    let mut resp: ResponseHeader = match up.response_header() {
        Some(r) => r.clone(),
        None => {
            return Err(pingora::Error::new_up(
                pingora::ErrorType::InvalidHTTPHeader,
            ))
        }
    };
    gate.upstream_response_filter(session, &mut resp, ex)
        .await?;
    let verdict = ex
        .decision()
        .map(|d| protect::on_response(&d, ex.protected().is_some()));
    let (held, mut end) = match verdict {
        Some(Verdict::Hold) => hold(gate, ex, up).await?,
        _ => (Vec::new(), false),
    };
    gate.response_filter(session, &mut resp, ex).await?;
    session
        .write_response_header(Box::new(resp), false)
        .await
        .map_err(|e| e.into_down())?;
    // The held pieces as they came; the last one ends the body if the body ended.
    let pieces = held.len();
    for (n, piece) in held.into_iter().enumerate() {
        forward(gate, session, ex, Some(piece), end && n + 1 == pieces).await?;
    }
    if end && pieces == 0 {
        forward(gate, session, ex, None, true).await?;
    }
    while !end {
        let piece = up.read_response_body().await.map_err(|e| e.into_up())?;
        end = piece.is_none() || up.response_done();
        forward(gate, session, ex, piece, end).await?;
    }
    Ok(())
}

/// Hold the body's start until it is decided: the pieces held, as they were read (never
/// copied: at most `cbor_protection.hold_bytes` plus one read), and whether they are the
/// whole body. Decided JSON changes the exchange's decision about the head.
async fn hold(gate: &Gate, ex: &mut Exchange, up: &mut HttpSession) -> Result<(Vec<Bytes>, bool)> {
    let p = &gate.hold.protection;
    let mut scan = BreadthScanner::new(p.max_elements, gate.hold.max_depth);
    let (mut held, mut bytes) = (Vec::new(), 0);
    loop {
        if bytes >= p.hold_bytes {
            answer_json(ex, Reason::Undecided)?;
            return Ok((held, false));
        }
        let Some(piece) = up.read_response_body().await.map_err(|e| e.into_up())? else {
            return Ok((held, true));
        };
        bytes += piece.len();
        let verdict = scan.feed(&piece);
        held.push(piece);
        match verdict {
            Breadth::Within if up.response_done() => return Ok((held, true)),
            Breadth::Within => {}
            Breadth::Over => {
                answer_json(ex, Reason::OverLimit)?;
                return Ok((held, up.response_done()));
            }
            Breadth::TooDeep => {
                answer_json(ex, Reason::Undecided)?;
                return Ok((held, up.response_done()));
            }
        }
    }
}

/// One piece of the body to the client, through `response_body_filter` as pingora
/// sends it.
async fn forward(
    gate: &Gate,
    session: &mut Session,
    ex: &mut Exchange,
    mut body: Option<Bytes>,
    end: bool,
) -> Result<()> {
    gate.response_body_filter(session, &mut body, end, ex)?;
    session
        .write_response_body(body, end)
        .await
        .map_err(|e| e.into_down())
}
