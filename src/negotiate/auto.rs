//! `auto` mode's decisions (docs/wire.md §5): what was learned about the
//! upstream per (verb, API group, resource), and how that and the request head
//! turn a legacy plan into a CBOR-first one: the body goes upstream as CBOR
//! when it can be replayed as JSON after a 415, and `Accept` asks for CBOR
//! first with JSON as the fallback. Pure: the cache itself lives in the proxy.

use super::plan::{BodyAction, Plan, ResponseAction};
use super::route::Route;

/// What the upstream showed for a (verb, group, resource).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// It answered a CBOR request body with 415: send JSON.
    NeedsJson,
    /// It answered in CBOR: it speaks CBOR for this key.
    SpeaksCbor,
}

/// The key under which what was learned is remembered: (verb, group, resource).
pub type CapabilityKey<'a> = (&'static str, &'a str, &'a str);

/// The largest CBOR body sent upstream as CBOR first: pingora keeps at most
/// this much of a request body to retry it, and a 415 is replayed as JSON from
/// that copy. Larger (or unframed) bodies go as JSON at once, so they never
/// need a replay.
pub const REPLAYABLE_BODY: u64 = 64 * 1024;

/// Turn the legacy plan `p` into auto mode's: `learned` is what is known of
/// this request's key, `declared_len` its `Content-Length`.
pub(super) fn apply(p: &mut Plan, learned: Option<Learned>, declared_len: Option<u64>) {
    p.upstream_speaks_cbor = learned == Some(Learned::SpeaksCbor);
    if let BodyAction::CborToJson { .. } = p.body {
        p.cbor_first = learned != Some(Learned::NeedsJson)
            && declared_len.is_some_and(|n| n <= REPLAYABLE_BODY);
    }
    // Ask for CBOR first, JSON as the fallback, so a CBOR-enabled upstream answers
    // CBOR with no extra round trip. Not for /api/v1: kube-apiserver 1.36 drops
    // that request when CBOR is acceptable (tests/data/corpus/exchanges, the
    // `b-apiv1-cbor` recording is empty).
    let core_discovery =
        matches!(&p.route, Route::GroupVersionDiscovery { group, .. } if group.is_empty());
    if p.response != ResponseAction::PassThrough && !core_discovery {
        if let Some(accept) = p.upstream_accept.take() {
            let cbor = accept.replacen("application/json", "application/cbor", 1);
            p.upstream_accept = Some(format!("{cbor}, {accept};q=0.9"));
        }
    }
}
