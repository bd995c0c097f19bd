//! `auto` mode's decisions (docs/wire.md §5): what was learned about the
//! upstream per (verb, API group, resource), and how that and the request head
//! turn a legacy plan into a CBOR-first one: the body goes upstream as CBOR
//! when it can be replayed as JSON after a 415, and `Accept` asks for CBOR
//! first with JSON as the fallback. Pure, and a leaf: `plan` applies these to the
//! legacy plan; the cache itself lives in the proxy.

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

/// Whether a CBOR body goes upstream as CBOR first: unless the upstream was seen to
/// refuse it for this key, and only when its declared length can be replayed as JSON.
pub fn cbor_first(learned: Option<Learned>, declared_len: Option<u64>) -> bool {
    learned != Some(Learned::NeedsJson) && declared_len.is_some_and(|n| n <= REPLAYABLE_BODY)
}

/// The `Accept` that asks for CBOR first, JSON as the fallback, so a CBOR-enabled
/// upstream answers CBOR with no extra round trip: the legacy plan's JSON `accept` with
/// CBOR in its place, then the JSON at q=0.9.
pub fn cbor_first_accept(accept: &str) -> String {
    let cbor = accept.replacen("application/json", "application/cbor", 1);
    format!("{cbor}, {accept};q=0.9")
}
