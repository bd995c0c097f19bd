//! What the apiserver does to an object's JSON shape: field order as Go writes it
//! (typed structs for built-ins, sorted map keys for custom resources), defaults on
//! create, a simplified `managedFields`, and label/field selectors.

use serde_json::{Map, Value};

use super::store::ResourceDef;
use super::util;

/// `ObjectMeta` field order.
const META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `ManagedFieldsEntry` field order.
const MF_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

fn reorder(m: &Map<String, Value>, order: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for k in order {
        if let Some(v) = m.get(*k) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    for (k, v) in m {
        if !out.contains_key(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Sorts every object's keys, recursively (Go's encoding of `map[string]interface{}`).
pub(crate) fn sort_recursive(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sort_recursive(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_recursive).collect()),
        other => other.clone(),
    }
}

fn sorted_map(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), m[k].clone()))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Metadata in `ObjectMeta` order, with Go's `omitempty` applied and map fields sorted.
pub(crate) fn typed_metadata(meta: &Value) -> Value {
    let Some(m) = meta.as_object() else {
        return Value::Object(Map::new());
    };
    let mut m = m.clone();
    m.retain(|k, v| {
        let zero = empty(v) || v.as_i64() == Some(0) || *v == Value::Bool(false);
        !(META_ORDER.contains(&k.as_str()) && zero)
    });
    for k in ["labels", "annotations"] {
        if let Some(v) = m.get_mut(k) {
            *v = sorted_map(v);
        }
    }
    if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
        for e in mf.iter_mut() {
            if let Value::Object(em) = e {
                *em = reorder(em, MF_ORDER);
            }
        }
    }
    Value::Object(reorder(&m, META_ORDER))
}

/// The order Go writes a built-in kind's top-level fields in.
fn top_order(kind: &str) -> &'static [&'static str] {
    match kind {
        "ConfigMap" => &[
            "kind",
            "apiVersion",
            "metadata",
            "immutable",
            "data",
            "binaryData",
        ],
        "Secret" => &[
            "kind",
            "apiVersion",
            "metadata",
            "immutable",
            "data",
            "stringData",
            "type",
        ],
        _ => &["kind", "apiVersion", "metadata", "spec", "status"],
    }
}

/// An object in the shape the apiserver would write it.
pub(crate) fn canonicalize(res: &ResourceDef, obj: &Value) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    if !res.builtin {
        return sort_recursive(obj);
    }
    let mut m = m.clone();
    m.retain(|_, v| !v.is_null());
    if let Some(meta) = m.get_mut("metadata") {
        *meta = typed_metadata(meta);
    }
    if res.kind == "ConfigMap" || res.kind == "Secret" {
        for k in ["data", "binaryData", "stringData"] {
            if m.get(k).is_some_and(empty) {
                m.shift_remove(k);
            } else if let Some(v) = m.get_mut(k) {
                *v = sorted_map(v);
            }
        }
    }
    Value::Object(reorder(&m, top_order(res.kind)))
}

/// Defaults the apiserver fills on create.
pub(crate) fn apply_create_defaults(res: &ResourceDef, obj: &mut Map<String, Value>) {
    match res.kind {
        "Namespace" => {
            let name = obj
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(l) = labels {
                    l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
                }
            }
            let spec = obj
                .entry("spec")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(s) = spec {
                s.entry("finalizers")
                    .or_insert_with(|| Value::Array(vec![Value::String("kubernetes".into())]));
            }
            obj.insert("status".into(), serde_json::json!({"phase": "Active"}));
        }
        "Secret" => {
            fold_string_data(obj);
            obj.entry("type")
                .or_insert_with(|| Value::String("Opaque".into()));
        }
        "Pod" => {
            let status = obj
                .entry("status")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(s) = status {
                s.entry("phase")
                    .or_insert_with(|| Value::String("Pending".into()));
                s.entry("qosClass")
                    .or_insert_with(|| Value::String("BestEffort".into()));
            }
        }
        _ => {}
    }
}

/// A Secret's `stringData` is folded into `data` (base64) on every write.
pub(crate) fn fold_string_data(obj: &mut Map<String, Value>) {
    if let Some(Value::Object(sd)) = obj.shift_remove("stringData") {
        let data = obj
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(d) = data {
            for (k, v) in sd {
                let text = v.as_str().unwrap_or_default().to_string();
                d.insert(k, Value::String(util::base64_std(text.as_bytes())));
            }
        }
    }
}

/// Whether a resource has a `status` subresource (then `status` is not owned by
/// writers of the main resource).
fn has_status_subresource(res: &ResourceDef) -> bool {
    matches!(
        res.kind,
        "Pod" | "Namespace" | "Gadget" | "CustomResourceDefinition"
    )
}

fn fieldset(v: &Value, apply: bool) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            if !apply {
                out.insert(".".into(), Value::Object(Map::new()));
            }
            for (k, sub) in m {
                out.insert(format!("f:{k}"), fieldset(sub, apply));
            }
            sort_keys_map(out)
        }
        _ => Value::Object(Map::new()),
    }
}

fn sort_keys_map(m: Map<String, Value>) -> Value {
    let mut entries: Vec<(String, Value)> = m.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(entries.into_iter().collect())
}

/// A simplified `fieldsV1` for an object: every field it sets (maps recursively,
/// lists atomically), metadata limited to labels and annotations.
pub(crate) fn fields_v1(res: &ResourceDef, obj: &Value, apply: bool) -> Value {
    let mut out = Map::new();
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            match k.as_str() {
                "kind" | "apiVersion" => {}
                "status" if has_status_subresource(res) => {}
                "metadata" => {
                    let mut mm = Map::new();
                    for mk in ["labels", "annotations"] {
                        if let Some(x) = v.get(mk) {
                            if x.as_object().is_some_and(|o| !o.is_empty()) {
                                mm.insert(format!("f:{mk}"), fieldset(x, apply));
                            }
                        }
                    }
                    if !mm.is_empty() {
                        out.insert("f:metadata".into(), sort_keys_map(mm));
                    }
                }
                _ => {
                    out.insert(format!("f:{k}"), fieldset(v, apply));
                }
            }
        }
    }
    sort_keys_map(out)
}

/// Records a write by `manager` in `metadata.managedFields`, replacing that manager's
/// previous entry for the same operation. Apply entries stay ahead of Update ones.
pub(crate) fn record_manager(
    res: &ResourceDef,
    obj: &mut Map<String, Value>,
    previous: Option<&Value>,
    manager: &str,
    apply: bool,
    now: i64,
) {
    let operation = if apply { "Apply" } else { "Update" };
    let fields = fields_v1(res, &Value::Object(obj.clone()), apply);
    let mut entries: Vec<Value> = previous
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| {
        !(e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some(operation))
    });
    let mut entry = Map::new();
    entry.insert("manager".into(), Value::String(manager.to_string()));
    entry.insert("operation".into(), Value::String(operation.into()));
    entry.insert("apiVersion".into(), Value::String(res.api_version()));
    entry.insert("time".into(), Value::String(util::rfc3339(now)));
    entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
    entry.insert("fieldsV1".into(), fields);
    let entry = Value::Object(entry);
    if apply {
        let pos = entries
            .iter()
            .position(|e| e.get("operation").and_then(Value::as_str) != Some("Apply"))
            .unwrap_or(entries.len());
        entries.insert(pos, entry);
    } else {
        entries.push(entry);
    }
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// The field manager name the apiserver derives from a User-Agent.
pub(crate) fn manager_from_user_agent(ua: &str) -> String {
    let m = ua.split('/').next().unwrap_or("").trim();
    if m.is_empty() {
        "unknown".into()
    } else {
        m.chars().take(128).collect()
    }
}

/// Reads `metadata.<field>` as a string.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// One requirement of a label selector.
#[derive(Clone, Debug)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed `labelSelector`.
#[derive(Clone, Debug, Default)]
pub(crate) struct LabelSelector(Vec<Req>);

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn valid_label_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_./".contains(&c))
}

fn valid_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c)))
}

impl LabelSelector {
    pub(crate) fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top_level(s) {
            let p = part.trim();
            let bad = || format!("unable to parse requirement: found '{p}', expected: key");
            if p.is_empty() {
                return Err(bad());
            }
            let set_values = |rest: &str| -> Result<Vec<String>, String> {
                let rest = rest.trim();
                let inner = rest
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| {
                        format!("unable to parse requirement: found '{rest}', expected: '('")
                    })?;
                Ok(inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect())
            };
            let req = if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set_values(v)?)
            } else if let Some((k, v)) = p.split_once(" in ") {
                Req::In(k.trim().into(), set_values(v)?)
            } else if let Some((k, v)) = p.split_once('>') {
                Req::Gt(k.trim().into(), v.trim().parse().map_err(|_| bad())?)
            } else if let Some((k, v)) = p.split_once('<') {
                Req::Lt(k.trim().into(), v.trim().parse().map_err(|_| bad())?)
            } else {
                Req::Exists(p.to_string())
            };
            let key = match &req {
                Req::Eq(k, _)
                | Req::NotEq(k, _)
                | Req::In(k, _)
                | Req::NotIn(k, _)
                | Req::Exists(k)
                | Req::NotExists(k)
                | Req::Gt(k, _)
                | Req::Lt(k, _) => k,
            };
            if !valid_label_key(key) {
                return Err(format!(
                    "unable to parse requirement: invalid label key \"{key}\""
                ));
            }
            let values: Vec<&String> = match &req {
                Req::Eq(_, v) | Req::NotEq(_, v) => vec![v],
                Req::In(_, vs) | Req::NotIn(_, vs) => vs.iter().collect(),
                _ => Vec::new(),
            };
            if let Some(v) = values.into_iter().find(|v| !valid_label_value(v)) {
                return Err(format!(
                    "unable to parse requirement: invalid label value: \"{v}\""
                ));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Req::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// A parsed `fieldSelector` (equality forms only, as the apiserver supports).
#[derive(Clone, Debug, Default)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

fn field_value(kind: &str, obj: &Value, field: &str) -> Option<String> {
    let s = |path: &[&str]| -> String {
        let mut cur = obj;
        for p in path {
            match cur.get(p) {
                Some(v) => cur = v,
                None => return String::new(),
            }
        }
        cur.as_str().unwrap_or_default().to_string()
    };
    match field {
        "metadata.name" => Some(s(&["metadata", "name"])),
        "metadata.namespace" => Some(s(&["metadata", "namespace"])),
        "type" if kind == "Secret" => Some(s(&["type"])),
        "status.phase" if kind == "Pod" || kind == "Namespace" => Some(s(&["status", "phase"])),
        "spec.nodeName" if kind == "Pod" => Some(s(&["spec", "nodeName"])),
        "spec.restartPolicy" if kind == "Pod" => Some(s(&["spec", "restartPolicy"])),
        "spec.schedulerName" if kind == "Pod" => Some(s(&["spec", "schedulerName"])),
        "spec.serviceAccountName" if kind == "Pod" => Some(s(&["spec", "serviceAccountName"])),
        "status.podIP" if kind == "Pod" => Some(s(&["status", "podIP"])),
        _ => None,
    }
}

impl FieldSelector {
    pub(crate) fn parse(kind: &str, s: &str) -> Result<FieldSelector, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let k = k.trim();
            if field_value(kind, &Value::Null, k).is_none() {
                return Err(format!("field label not supported: {k}"));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, kind: &str, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let actual = field_value(kind, obj, k).unwrap_or_default();
            (actual == *v) == *eq
        })
    }
}

/// A DNS-1123 subdomain, as object names must be.
pub(crate) fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 253
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors() {
        let obj =
            json!({"metadata": {"name": "a", "labels": {"app": "x", "tier": "web", "n": "5"}}});
        for (sel, want) in [
            ("app=x", true),
            ("app==x,tier!=db", true),
            ("app in (x, y)", true),
            ("app notin (x)", false),
            ("tier", true),
            ("!tier", false),
            ("n>4", true),
            ("n<4", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&obj),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a=b,").is_err());
        let fs = FieldSelector::parse("ConfigMap", "metadata.name=a").unwrap();
        assert!(fs.matches("ConfigMap", &obj));
        assert!(FieldSelector::parse("ConfigMap", "spec.x=1").is_err());
    }

    #[test]
    fn fields_like_recorded() {
        let res = &super::super::store::RESOURCES[1];
        let obj = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "cm", "labels": {"app": "harness"}},
            "data": {"empty": "", "k": "v", "unicode": "x"}, "binaryData": {"bin": "AA=="}});
        let f = fields_v1(res, &obj, false);
        assert_eq!(
            f.to_string(),
            r#"{"f:binaryData":{".":{},"f:bin":{}},"f:data":{".":{},"f:empty":{},"f:k":{},"f:unicode":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}"#
        );
    }
}
