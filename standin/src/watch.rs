//! Watch streams: `{"type":…,"object":…}` lines in a chunked response, each flushed
//! as it is written. Initial ADDED events (resourceVersion unset or `0`, or
//! `sendInitialEvents=true` followed by the `k8s.io/initial-events-end` BOOKMARK),
//! resumption from a resourceVersion out of the event log (410 Expired when too old),
//! periodic BOOKMARKs, label/field selector transitions, Table and
//! PartialObjectMetadata transforms, `timeoutSeconds`, and an end on shutdown or when
//! the client goes away. With CBOR negotiated the stream is `application/cbor-seq`:
//! one `55799({"type":…,"object":55799(…)})` item per event, one event per chunk.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch as signal;

use super::api::Shared;
use super::cbor;
use super::http::{self, Conn, RequestHead};
use super::json;
use super::negotiation::{self as neg, Format, Negotiated};
use super::objects::{self, FieldSelector, LabelSelector};
use super::status;
use super::store::{EventType, ResourceDef, WatchMsg};
use super::table::{self, IncludeObject};
use super::util;

/// Everything a watch needs, decided before the response starts.
pub(crate) struct WatchPlan {
    pub res: &'static ResourceDef,
    pub ns: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub rv: Option<u64>,
    pub send_initial_events: Option<bool>,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub negotiated: Negotiated,
    pub include: IncludeObject,
}

struct Writer<'a> {
    plan: &'a WatchPlan,
    chunked: bool,
    table_headers_sent: bool,
}

impl Writer<'_> {
    fn matches(&self, obj: &Value) -> bool {
        self.plan.labels.matches(obj) && self.plan.fields.matches(self.plan.res.kind, obj)
    }

    fn transform<'v>(&mut self, obj: &'v Value) -> std::borrow::Cow<'v, Value> {
        use std::borrow::Cow;
        match &self.plan.negotiated.convert {
            Some(c) if c.kind == "Table" => {
                let rv = objects::meta_str(obj, "resourceVersion").unwrap_or("");
                let t = table::table(
                    self.plan.res,
                    std::slice::from_ref(obj),
                    json!({"resourceVersion": rv}),
                    self.plan.include,
                    &c.version,
                    !self.table_headers_sent,
                    util::now_unix(),
                );
                self.table_headers_sent = true;
                Cow::Owned(t)
            }
            Some(c)
                if c.kind == "PartialObjectMetadata" || c.kind == "PartialObjectMetadataList" =>
            {
                Cow::Owned(table::pom(obj, &c.version))
            }
            _ => Cow::Borrowed(obj),
        }
    }

    fn frame(&self, typ: &str, object: &Value) -> Vec<u8> {
        if self.plan.negotiated.format == Format::Cbor {
            return cbor::encode_event(typ, object);
        }
        // {"type":…,"object":…} written directly, without copying the object.
        let mut ev = Vec::with_capacity(512);
        ev.extend_from_slice(b"{\"type\":");
        ev.extend_from_slice(&json::encode_compact(&Value::String(typ.to_string())));
        ev.extend_from_slice(b",\"object\":");
        ev.extend_from_slice(&json::encode_compact(object));
        ev.push(b'}');
        match self.plan.negotiated.format {
            Format::Protobuf => {
                // Stand-in framing: 4-byte big-endian length, then "k8s\0" + JSON.
                let len = (ev.len() + neg::PROTOBUF_MAGIC.len()) as u32;
                let mut out = len.to_be_bytes().to_vec();
                out.extend_from_slice(neg::PROTOBUF_MAGIC);
                out.extend_from_slice(&ev);
                out
            }
            _ => {
                ev.push(b'\n');
                ev
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Vec<u8> {
        let res = self.plan.res;
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        if initial_end {
            meta.insert(
                "annotations".into(),
                json!({"k8s.io/initial-events-end": "true"}),
            );
        }
        let mut obj = json!({"kind": res.kind, "apiVersion": res.api_version(), "metadata": Value::Object(meta)});
        if !res.builtin {
            obj = objects::sort_recursive(&obj);
        }
        self.frame("BOOKMARK", &obj)
    }

    /// The frame for a committed event, if this watcher sees it.
    fn event(&mut self, typ: EventType, obj: &Value, old: Option<&Value>) -> Option<Vec<u8>> {
        let now = self.matches(obj);
        let typ = match typ {
            EventType::Modified => {
                let before = old.is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => EventType::Modified,
                    (false, true) => EventType::Added,
                    (true, false) => EventType::Deleted,
                    (false, false) => return None,
                }
            }
            other if now => other,
            _ => return None,
        };
        let o = self.transform(obj);
        Some(self.frame(typ.as_str(), &o))
    }

    async fn send(&self, conn: &mut Conn, data: &[u8]) -> std::io::Result<()> {
        if self.chunked {
            conn.write_chunk(data).await
        } else {
            conn.write_all(data).await
        }
    }
}

async fn shutdown_signalled(rx: &mut signal::Receiver<bool>) {
    loop {
        if *rx.borrow() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Serves a watch on `conn`. Returns whether the connection may be reused (the stream
/// ended cleanly by timeout).
pub(crate) async fn serve(
    conn: &mut Conn,
    shared: &Shared,
    head: &RequestHead,
    plan: WatchPlan,
    mut shutdown: signal::Receiver<bool>,
) -> bool {
    let res = plan.res;
    let ri = res.index();
    // Register under the lock, so nothing falls between the snapshot and the channel.
    let (reg, initial, expired, snapshot_rv) = {
        let mut st = shared.store();
        let snapshot_rv = st.rv();
        let mut initial: Vec<Arc<Value>> = Vec::new();
        let mut replay = Vec::new();
        let mut expired = None;
        let want_initial = match plan.send_initial_events {
            Some(b) => b,
            None => matches!(plan.rv, None | Some(0)),
        };
        if want_initial {
            initial = st
                .list(ri, plan.ns.as_deref())
                .into_iter()
                .map(|(_, o)| o)
                .collect();
        } else if let Some(rv) = plan.rv.filter(|rv| *rv > 0) {
            match st.events_since(ri, plan.ns.as_deref(), rv) {
                Ok(evs) => replay = evs,
                Err(oldest) => expired = Some(status::expired(rv, oldest)),
            }
        }
        let reg = st.watch(ri, plan.ns.clone());
        (reg, (initial, replay), expired, snapshot_rv)
    };
    let chunked = head.minor >= 1;
    let content_type = match plan.negotiated.format {
        Format::Protobuf => neg::PROTOBUF_WATCH,
        Format::Cbor => neg::CBOR_SEQ,
        _ => neg::JSON,
    };
    let audit = head
        .header("audit-id")
        .map(str::to_string)
        .unwrap_or_else(util::uuid_v4);
    let mut head_bytes = http::response_head(200, content_type, &audit, &[], None, !chunked);
    if !chunked {
        // HTTP/1.0: no chunking; the stream ends when the connection closes.
        head_bytes = String::from_utf8_lossy(&head_bytes)
            .replace("Transfer-Encoding: chunked\r\n", "")
            .into_bytes();
    }
    let mut w = Writer {
        plan: &plan,
        chunked,
        table_headers_sent: false,
    };
    let mut reg = reg;
    let result = async {
        conn.write_all(&head_bytes).await?;
        if let Some(st) = expired {
            let f = w.frame("ERROR", &st);
            w.send(conn, &f).await?;
            return Ok::<bool, std::io::Error>(true);
        }
        let (initial, replay) = initial;
        for o in &initial {
            if w.matches(o) {
                let t = w.transform(o);
                let f = w.frame("ADDED", &t);
                w.send(conn, &f).await?;
            }
        }
        if plan.send_initial_events == Some(true) {
            let f = w.bookmark(snapshot_rv, true);
            w.send(conn, &f).await?;
        }
        for ev in &replay {
            if let Some(f) = w.event(ev.typ, &ev.obj, ev.old.as_deref()) {
                w.send(conn, &f).await?;
            }
        }
        let deadline = plan.timeout.map(|t| tokio::time::Instant::now() + t);
        let interval = shared.opts.bookmark_interval.clamp(
            Duration::from_millis(10),
            Duration::from_secs(365 * 24 * 3600),
        );
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            tokio::select! {
                msg = reg.rx.recv() => match msg {
                    Some(WatchMsg::Event(ev)) => {
                        if let Some(f) = w.event(ev.typ, &ev.obj, ev.old.as_deref()) {
                            w.send(conn, &f).await?;
                        }
                    }
                    Some(WatchMsg::Bookmark(rv)) => {
                        let f = w.bookmark(rv, false);
                        w.send(conn, &f).await?;
                    }
                    None => return Ok(false),
                },
                _ = ticker.tick(), if plan.bookmarks => {
                    // Queue the bookmark behind every event already committed.
                    let st = shared.store();
                    let _ = reg.tx.send(WatchMsg::Bookmark(st.rv()));
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending::<()>().await,
                    }
                } => return Ok(true),
                _ = shutdown_signalled(&mut shutdown) => return Ok(false),
                n = conn.fill() => {
                    // The client went away (or sent garbage we keep for later).
                    match n {
                        Ok(0) | Err(_) => return Ok(false),
                        Ok(_) if conn.buf.len() > http::MAX_HEAD => return Ok(false),
                        Ok(_) => {}
                    }
                }
            }
        }
    }
    .await;
    shared.store().unwatch(reg.id);
    match result {
        Ok(clean) => {
            if chunked && conn.write_all(b"0\r\n\r\n").await.is_err() {
                return false;
            }
            clean && chunked
        }
        Err(_) => false,
    }
}
