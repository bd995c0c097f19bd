//! What `auto` mode has learned about the upstream, per (verb, API group,
//! resource): whether it refused CBOR request bodies (415) and so needs JSON,
//! or answered in CBOR. Entries expire after a TTL, and then cborgate probes
//! with CBOR again. Read by the proxy and shown at `/debug/capabilities`. What a
//! [`Learned`] means for a request is decided in `negotiate::auto`.

pub use crate::negotiate::{CapabilityKey, Learned};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The clock entries are timed with: `Instant::now` outside tests.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

#[derive(Debug, Clone, Copy)]
struct Entry {
    learned: Learned,
    at: Instant,
    wall: SystemTime,
}

type Key = (String, String, String);

/// Bounded: at most this many keys (verbs × resources of one cluster fit easily).
const MAX_ENTRIES: usize = 4096;

pub struct Capabilities {
    ttl: Duration,
    entries: Mutex<HashMap<Key, Entry>>,
    now: Clock,
}

impl Capabilities {
    pub fn new(ttl: Duration) -> Self {
        Self::with_clock(ttl, Arc::new(Instant::now))
    }

    /// With a clock of the caller's (tests move time instead of waiting for it).
    pub fn with_clock(ttl: Duration, now: Clock) -> Self {
        Capabilities {
            ttl,
            entries: Mutex::new(HashMap::new()),
            now,
        }
    }

    fn age(&self, e: &Entry) -> Duration {
        (self.now)().saturating_duration_since(e.at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known of `key`, if it has not expired.
    pub fn get(&self, (verb, group, resource): CapabilityKey<'_>) -> Option<Learned> {
        let key = (verb.to_string(), group.to_string(), resource.to_string());
        let mut m = self.lock();
        match m.get(&key) {
            Some(e) if self.age(e) < self.ttl => Some(e.learned),
            Some(_) => {
                m.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn learn(&self, (verb, group, resource): CapabilityKey<'_>, learned: Learned) {
        let mut m = self.lock();
        if m.len() >= MAX_ENTRIES {
            let (ttl, now) = (self.ttl, (self.now)());
            m.retain(|_, e| now.saturating_duration_since(e.at) < ttl);
            if m.len() >= MAX_ENTRIES {
                return;
            }
        }
        m.insert(
            (verb.to_string(), group.to_string(), resource.to_string()),
            Entry {
                learned,
                at: (self.now)(),
                wall: SystemTime::now(),
            },
        );
    }

    /// The table as JSON for `/debug/capabilities`.
    pub fn to_json(&self) -> String {
        let m = self.lock();
        let mut rows: Vec<_> = m
            .iter()
            .filter(|(_, e)| self.age(e) < self.ttl)
            .map(|((verb, group, resource), e)| {
                let secs = e.wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let mut learned_at = Vec::new();
                let _ = crate::codec::format_unix_time(secs as i64, &mut learned_at);
                serde_json::json!({
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "upstream": match e.learned {
                        Learned::NeedsJson => "json",
                        Learned::SpeaksCbor => "cbor",
                    },
                    "learnedAt": String::from_utf8_lossy(&learned_at),
                    "expiresInSeconds": self.ttl.saturating_sub(self.age(e)).as_secs(),
                })
            })
            .collect();
        rows.sort_by_key(|r| r.to_string());
        serde_json::json!({"ttlSeconds": self.ttl.as_secs(), "entries": rows}).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_ttl() {
        let start = Instant::now();
        let offset = Arc::new(Mutex::new(Duration::ZERO));
        let o = offset.clone();
        let clock: Clock = Arc::new(move || start + *o.lock().unwrap());
        let c = Capabilities::with_clock(Duration::from_secs(600), clock);
        c.learn(("POST", "", "configmaps"), Learned::NeedsJson);
        assert_eq!(c.get(("POST", "", "configmaps")), Some(Learned::NeedsJson));
        assert_eq!(c.get(("PUT", "", "configmaps")), None);
        assert!(c.to_json().contains("\"upstream\":\"json\""));
        *offset.lock().unwrap() = Duration::from_secs(599);
        assert!(c.to_json().contains("\"expiresInSeconds\":1"));
        assert_eq!(c.get(("POST", "", "configmaps")), Some(Learned::NeedsJson));
        *offset.lock().unwrap() = Duration::from_secs(600);
        assert_eq!(c.get(("POST", "", "configmaps")), None);
        assert!(!c.to_json().contains("configmaps"));
    }
}
