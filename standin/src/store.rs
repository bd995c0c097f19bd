//! The in-memory "etcd": the served resource types, objects keyed as etcd keys them
//! (so lists come out in etcd order), the global resourceVersion counter, a bounded
//! event log for watches that resume from a resourceVersion, and the registered
//! watchers, each fed through its own unbounded channel under the store lock so
//! events and bookmarks arrive in resourceVersion order and never lag.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

/// One served resource type.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Built into the apiserver (go-restful routes, typed JSON) rather than a CRD.
    pub builtin: bool,
    /// DELETE answers with the object rather than a `Success` Status.
    pub delete_returns_object: bool,
}

impl ResourceDef {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `gadgets.corpus.example.com`, as messages name a resource.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub(crate) fn index(&'static self) -> usize {
        RESOURCES
            .iter()
            .position(|r| std::ptr::eq(r, self))
            .unwrap_or(0)
    }
}

pub(crate) static RESOURCES: [ResourceDef; 6] = [
    ResourceDef {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        builtin: true,
        delete_returns_object: true,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        builtin: true,
        delete_returns_object: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        builtin: true,
        delete_returns_object: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        builtin: true,
        delete_returns_object: true,
    },
    ResourceDef {
        group: "corpus.example.com",
        version: "v1",
        plural: "gadgets",
        kind: "Gadget",
        namespaced: true,
        builtin: false,
        delete_returns_object: true,
    },
    ResourceDef {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        builtin: true,
        delete_returns_object: true,
    },
];

/// The API groups served under `/apis`, built-in first, as a real server lists them.
pub(crate) const GROUPS: &[&str] = &["apiextensions.k8s.io", "corpus.example.com"];

pub(crate) const NAMESPACES: usize = 0;
pub(crate) const CONFIGMAPS: usize = 1;

pub(crate) fn find_resource(
    group: &str,
    version: &str,
    plural: &str,
) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub typ: EventType,
    pub res: usize,
    pub ns: String,
    pub obj: Arc<Value>,
    /// The object before a modification (to notice selector transitions).
    pub old: Option<Arc<Value>>,
}

/// What a watcher's channel carries.
#[derive(Debug)]
pub(crate) enum WatchMsg {
    Event(Arc<Event>),
    Bookmark(u64),
}

struct Watcher {
    id: u64,
    res: usize,
    ns: Option<String>,
    tx: mpsc::UnboundedSender<WatchMsg>,
}

/// A newly registered watcher.
pub(crate) struct Registration {
    pub id: u64,
    pub rx: mpsc::UnboundedReceiver<WatchMsg>,
    pub tx: mpsc::UnboundedSender<WatchMsg>,
}

/// How many past events a watch may resume from.
const LOG_CAP: usize = 200_000;

pub(crate) struct Store {
    rv: u64,
    objects: BTreeMap<(usize, String), Arc<Value>>,
    log: VecDeque<Arc<Event>>,
    /// resourceVersion below which the log has been trimmed.
    log_floor: u64,
    watchers: Vec<Watcher>,
    next_watcher: u64,
}

/// The etcd-like key of an object inside its resource: `ns/name` or `name`.
pub(crate) fn object_key(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    }
}

impl Store {
    pub(crate) fn new() -> Store {
        Store {
            rv: 0,
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            log_floor: 0,
            watchers: Vec::new(),
            next_watcher: 1,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub(crate) fn get(&self, res: usize, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects.get(&(res, object_key(ns, name))).cloned()
    }

    /// Objects of a resource (in one namespace if `ns` is set), in etcd key order,
    /// each with its key relative to the listed prefix (`/name` or `/ns/name`).
    pub(crate) fn list(&self, res: usize, ns: Option<&str>) -> Vec<(String, Arc<Value>)> {
        match ns {
            Some(ns) if !ns.is_empty() => {
                let lo = (res, format!("{ns}/"));
                let hi = (res, format!("{ns}0"));
                self.objects
                    .range(lo..hi)
                    .map(|((_, k), v)| (format!("/{}", &k[ns.len() + 1..]), v.clone()))
                    .collect()
            }
            _ => self
                .objects
                .range((res, String::new())..(res + 1, String::new()))
                .map(|((_, k), v)| (format!("/{k}"), v.clone()))
                .collect(),
        }
    }

    /// Stores `obj` (its resourceVersion already set to `rv`) and tells the watchers.
    pub(crate) fn put(
        &mut self,
        res: usize,
        ns: &str,
        name: &str,
        obj: Value,
        rv: u64,
        typ: EventType,
    ) -> Arc<Value> {
        let obj = Arc::new(obj);
        let old = self
            .objects
            .insert((res, object_key(ns, name)), obj.clone());
        self.emit(Event {
            rv,
            typ,
            res,
            ns: ns.to_string(),
            obj: obj.clone(),
            old,
        });
        obj
    }

    /// Removes an object; `last` is its final state (with the deletion's resourceVersion).
    pub(crate) fn remove(
        &mut self,
        res: usize,
        ns: &str,
        name: &str,
        last: Value,
        rv: u64,
    ) -> Arc<Value> {
        self.objects.remove(&(res, object_key(ns, name)));
        let obj = Arc::new(last);
        self.emit(Event {
            rv,
            typ: EventType::Deleted,
            res,
            ns: ns.to_string(),
            obj: obj.clone(),
            old: None,
        });
        obj
    }

    fn emit(&mut self, ev: Event) {
        let ev = Arc::new(ev);
        self.log.push_back(ev.clone());
        while self.log.len() > LOG_CAP {
            if let Some(old) = self.log.pop_front() {
                self.log_floor = old.rv;
            }
        }
        self.watchers.retain(|w| {
            if w.res != ev.res {
                return true;
            }
            if let Some(ns) = &w.ns {
                if *ns != ev.ns {
                    return true;
                }
            }
            w.tx.send(WatchMsg::Event(ev.clone())).is_ok()
        });
    }

    /// Registers a watcher for a resource (optionally one namespace).
    pub(crate) fn watch(&mut self, res: usize, ns: Option<String>) -> Registration {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_watcher;
        self.next_watcher += 1;
        self.watchers.push(Watcher {
            id,
            res,
            ns,
            tx: tx.clone(),
        });
        Registration { id, rx, tx }
    }

    pub(crate) fn unwatch(&mut self, id: u64) {
        self.watchers.retain(|w| w.id != id);
    }

    /// Logged events after `rv` for a resource/namespace; `Err(oldest)` if the log no
    /// longer reaches back that far.
    pub(crate) fn events_since(
        &self,
        res: usize,
        ns: Option<&str>,
        rv: u64,
    ) -> Result<Vec<Arc<Event>>, u64> {
        if rv < self.log_floor {
            return Err(self.log_floor + 1);
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        Ok(self
            .log
            .iter()
            .skip(start)
            .filter(|e| e.res == res && ns.is_none_or(|n| n == e.ns))
            .cloned()
            .collect())
    }

    /// Removes every object of a namespace (namespace deletion), emitting events.
    pub(crate) fn objects_in_namespace(&self, ns: &str) -> Vec<(usize, Arc<Value>)> {
        let mut out = Vec::new();
        for (i, r) in RESOURCES.iter().enumerate() {
            if r.namespaced {
                for (_, v) in self.list(i, Some(ns)) {
                    out.push((i, v));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_order_and_events() {
        let mut s = Store::new();
        for (ns, name) in [("b", "x"), ("a", "z"), ("a-x", "c"), ("a", "y")] {
            let rv = s.next_rv();
            s.put(
                CONFIGMAPS,
                ns,
                name,
                json!({"n": name}),
                rv,
                EventType::Added,
            );
        }
        let keys: Vec<String> = s
            .list(CONFIGMAPS, Some("a"))
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(keys, vec!["/y", "/z"]);
        let all: Vec<String> = s.list(CONFIGMAPS, None).into_iter().map(|x| x.0).collect();
        assert_eq!(all, vec!["/a-x/c", "/a/y", "/a/z", "/b/x"]);
        let ev = s.events_since(CONFIGMAPS, Some("a"), 2).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].rv, 4);
    }
}
