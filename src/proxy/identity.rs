//! Identity through the proxy: carries out [`crate::negotiate::identity`] for one
//! request. Reads what the client's certificate proved from the connection's TLS
//! digest (`client_cert`), counts the decision in `cborgate_authentications_total`,
//! picks the upstream connections it may share ([`crate::negotiate::pool`]), and
//! applies its header edits to the upstream request head (every attempt: the 415
//! replay rewrites the head again from the client's). And the client's address in
//! `X-Forwarded-For`, as [`crate::negotiate::forwarded`] decides it.

use crate::inbound::client_cert::peer_cert;
use crate::metrics::metrics;
use crate::negotiate::forwarded::{forwarding, ForwardedFor};
use crate::negotiate::identity::{identify, HeaderNames, Identity};
use crate::negotiate::pool::{pool, Pool};
use http::header::HeaderName;
use pingora::http::RequestHeader;
use pingora::proxy::Session;
use pingora::Result;

/// Decide who the request is, and count it.
pub fn decide(session: &Session, names: &HeaderNames) -> Identity {
    let peer = peer_cert(session.digest());
    let req = session.req_header();
    let headers = || req.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    let id = identify(peer, names, headers);
    let (method, result) = id.counted;
    metrics()
        .authentications_total
        .with_label_values(&[method.as_str(), result])
        .inc();
    id
}

/// The upstream connections the request may share, from its identity and its
/// `Authorization` headers.
pub fn pool_of(session: &Session, identity: &Identity) -> Pool {
    let values = session
        .req_header()
        .headers
        .get_all(http::header::AUTHORIZATION);
    pool(identity, values.iter().map(|v| v.as_bytes()))
}

/// Remove and add the identity headers on the upstream request.
pub fn apply(id: &Identity, req: &mut RequestHeader) -> Result<()> {
    // The added names go too: the head may be rewritten more than once (a replay).
    for name in id.remove.iter().chain(id.add.iter().map(|(n, _)| n)) {
        req.remove_header(name.as_str());
    }
    for (name, value) in &id.add {
        req.append_header(name.clone(), value.as_str())?;
    }
    Ok(())
}

/// The names looked up on every request, made once (a name given as text is parsed on
/// each lookup).
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Write the client's address into `X-Forwarded-For` (and drop `X-Real-Ip` when
/// replacing) on the upstream request, from the client's own request head.
pub fn forward(session: &Session, mode: ForwardedFor, req: &mut RequestHeader) -> Result<()> {
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip());
    let sent: Vec<&str> = session
        .req_header()
        .headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let f = forwarding(mode, &sent, peer);
    if f.drop_real_ip {
        req.remove_header(&X_REAL_IP);
    }
    match f.forwarded_for {
        // Inserting replaces every line the client sent.
        Some(v) => req.insert_header(X_FORWARDED_FOR, v)?,
        None => drop(req.remove_header(&X_FORWARDED_FOR)),
    }
    Ok(())
}
