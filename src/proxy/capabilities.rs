//! What `auto` mode has learned about the upstream, per (verb, API group,
//! resource): whether it refused CBOR request bodies (415) and so needs JSON,
//! or answered in CBOR. Entries expire after a TTL, and then cborgate probes
//! with CBOR again. Read by the proxy and shown at `/debug/capabilities`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the upstream showed for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// It answered a CBOR request body with 415: send JSON.
    NeedsJson,
    /// It answered in CBOR: it speaks CBOR for this key.
    SpeaksCbor,
}

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
}

impl Capabilities {
    pub fn new(ttl: Duration) -> Self {
        Capabilities {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known, if it has not expired.
    pub fn get(&self, verb: &str, group: &str, resource: &str) -> Option<Learned> {
        let key = (verb.to_string(), group.to_string(), resource.to_string());
        let mut m = self.lock();
        match m.get(&key) {
            Some(e) if e.at.elapsed() < self.ttl => Some(e.learned),
            Some(_) => {
                m.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn learn(&self, verb: &str, group: &str, resource: &str, learned: Learned) {
        let mut m = self.lock();
        if m.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            m.retain(|_, e| e.at.elapsed() < ttl);
            if m.len() >= MAX_ENTRIES {
                return;
            }
        }
        m.insert(
            (verb.to_string(), group.to_string(), resource.to_string()),
            Entry {
                learned,
                at: Instant::now(),
                wall: SystemTime::now(),
            },
        );
    }

    /// The table as JSON for `/debug/capabilities`.
    pub fn to_json(&self) -> String {
        let m = self.lock();
        let mut rows: Vec<_> = m
            .iter()
            .filter(|(_, e)| e.at.elapsed() < self.ttl)
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
                    "expiresInSeconds": self.ttl.saturating_sub(e.at.elapsed()).as_secs(),
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
    fn entries_expire() {
        let c = Capabilities::new(Duration::from_millis(30));
        c.learn("POST", "", "configmaps", Learned::NeedsJson);
        assert_eq!(c.get("POST", "", "configmaps"), Some(Learned::NeedsJson));
        assert_eq!(c.get("PUT", "", "configmaps"), None);
        assert!(c.to_json().contains("\"upstream\":\"json\""));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(c.get("POST", "", "configmaps"), None);
    }
}
