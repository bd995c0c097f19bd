//! The write verbs, once the body has been read: create, update (PUT), the four
//! patch types, delete and deletecollection, with the apiserver's checks (names,
//! namespaces, resourceVersion preconditions, AlreadyExists/Conflict/NotFound), its
//! no-op detection, generation and managedFields bookkeeping; plus seeding and the
//! bulk-event test hook. With CBOR on, `application/cbor` bodies (and
//! `application/apply-patch+cbor` patches) are decoded to JSON first (`cbor_decode`).

use serde_json::{json, Map, Value};

use super::api::{
    error_response, list_body, patch_media_type, respond, selectors, PatchKind, Pending, Shared,
    Verb,
};
use super::cbor;
use super::cbor_decode;
use super::http::Response;
use super::negotiation::{self as neg, Format, Serving};
use super::objects;
use super::patch;
use super::seed;
use super::status::{self, ApiError};
use super::store::{self, EventType, ResourceDef, Store, RESOURCES};
use super::util;

/// Carries out a write once its body has been read.
pub(crate) fn handle(shared: &Shared, p: Pending, body: &[u8]) -> Response {
    let head = &p.head;
    match handle_inner(shared, &p, body) {
        Ok((code, v)) => respond(head, code, &v, &p.negotiated),
        Err(e) => error_response(head, &e, p.serving),
    }
}

fn decode_object(
    res: &ResourceDef,
    format: Format,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    let unrecognized = |why: String| {
        status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {why}",
            res.kind
        ))
    };
    let transcoded;
    let text = match format {
        Format::Protobuf => body.strip_prefix(neg::PROTOBUF_MAGIC).ok_or_else(|| {
            unrecognized(
                "the stand-in reads protobuf bodies only as \"k8s\\x00\" followed by JSON".into(),
            )
        })?,
        Format::Cbor => {
            transcoded = cbor_decode::decode_typed_body(body, cbor::bytes_field(res.kind))
                .map_err(|why| {
                    // The decoder's own complaints about a value are worded as the real
                    // server words them (kube-apiserver 1.36.2, a ConfigMap with `'hello'`
                    // in `binaryData`).
                    if why.starts_with("cbor: failed to decode base64") {
                        return status::bad_request(format!(
                            "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
                            kind = res.kind,
                            version = res.version
                        ));
                    }
                    unrecognized(format!(
                        "unable to determine group/version/kind: {why} ({})",
                        cbor::summarize(body)
                    ))
                })?;
            &transcoded[..]
        }
        _ => body,
    };
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(unrecognized("Object 'Kind' is missing in ''".into()));
    }
    let v: Value = serde_json::from_slice(text).map_err(|e| match format {
        Format::Yaml => unrecognized(format!(
            "error converting YAML to JSON: {e} (the stand-in reads only JSON-compatible YAML)"
        )),
        _ => unrecognized(format!("couldn't get version/kind; json parse error: {e}")),
    })?;
    let Value::Object(m) = v else {
        return Err(unrecognized(
            "couldn't get version/kind; json parse error: not an object".into(),
        ));
    };
    check_type(res, &m)?;
    Ok(m)
}

fn check_type(res: &ResourceDef, m: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(av) = m.get("apiVersion").and_then(Value::as_str) {
        if av != res.api_version() {
            return Err(status::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                res.api_version()
            )));
        }
    }
    if let Some(k) = m.get("kind").and_then(Value::as_str) {
        if k != res.kind {
            return Err(status::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
    }
    if m.get("metadata")
        .is_some_and(|x| !x.is_object() && !x.is_null())
    {
        return Err(status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): metadata must be an object",
            res.kind
        )));
    }
    Ok(())
}

fn manager(p: &Pending) -> String {
    match p.query.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => objects::manager_from_user_agent(p.head.header_or_empty("user-agent")),
    }
}

fn handle_inner(shared: &Shared, p: &Pending, body: &[u8]) -> Result<(u16, Value), ApiError> {
    let t = &p.target;
    let dry_run = p.query.get("dryRun").is_some_and(|d| !d.is_empty());
    let content_type = p.head.header_or_empty("content-type");
    let now = util::now_unix();
    let mgr = manager(p);
    match p.verb {
        Verb::Create => {
            let format = p.serving.input_format(content_type).unwrap_or(Format::Json);
            let obj = decode_object(t.res, format, body)?;
            let mut st = shared.store();
            let created = create_in(&mut st, t.res, &t.ns, obj, &mgr, false, dry_run, now)?;
            Ok((201, created))
        }
        Verb::Update => {
            let format = p.serving.input_format(content_type).unwrap_or(Format::Json);
            let obj = decode_object(t.res, format, body)?;
            let name = t.name.clone().unwrap_or_default();
            let mut st = shared.store();
            let updated = update_in(&mut st, t.res, &t.ns, &name, obj, &mgr, false, dry_run, now)?;
            Ok((200, updated))
        }
        Verb::Patch(kind) => patch_object(shared, p, kind, body, &mgr, dry_run, now),
        Verb::Delete => {
            let opts = delete_options(p.serving, content_type, body)?;
            let name = t.name.clone().unwrap_or_default();
            let mut st = shared.store();
            delete_in(&mut st, t.res, &t.ns, &name, &opts, dry_run, now)
        }
        Verb::DeleteCollection => {
            let opts = delete_options(p.serving, content_type, body)?;
            let (labels, fields) = selectors(t.res, &p.query)?;
            let mut st = shared.store();
            let victims: Vec<String> = st
                .list(t.res.index(), Some(&t.ns))
                .into_iter()
                .filter(|(_, o)| labels.matches(o) && fields.matches(t.res.kind, o))
                .filter_map(|(_, o)| objects::meta_str(&o, "name").map(str::to_string))
                .collect();
            let mut items = Vec::new();
            for name in victims {
                let last = deleted_object(&mut st, t.res, &t.ns, &name, &opts, dry_run, now)?;
                items.push(last);
            }
            let rv = st.rv();
            Ok((200, list_body(t.res, items, rv, None, None)))
        }
    }
}

fn delete_options(serving: Serving, content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    let format = serving
        .input_format(content_type)
        .ok_or_else(|| ApiError::raw(neg::unsupported_media_type(serving.produces_object())))?;
    let transcoded;
    let text = match format {
        Format::Protobuf => body.strip_prefix(neg::PROTOBUF_MAGIC).unwrap_or(body),
        Format::Cbor => {
            transcoded = cbor_decode::decode_body(body).map_err(|why| {
                status::bad_request(format!(
                    "the object provided is unrecognized (must be of type DeleteOptions): unable to determine group/version/kind: {why} ({})",
                    cbor::summarize(body)
                ))
            })?;
            &transcoded[..]
        }
        _ => body,
    };
    serde_json::from_slice(text).map_err(|e| {
        status::bad_request(format!(
            "the object provided is unrecognized (must be of type DeleteOptions): couldn't get version/kind; json parse error: {e}"
        ))
    })
}

fn patch_object(
    shared: &Shared,
    p: &Pending,
    kind: PatchKind,
    body: &[u8],
    mgr: &str,
    dry_run: bool,
    now: i64,
) -> Result<(u16, Value), ApiError> {
    let t = &p.target;
    let name = t.name.clone().unwrap_or_default();
    if kind == PatchKind::Apply && p.query.get("fieldManager").is_none_or(str::is_empty) {
        return Err(status::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    }
    let transcoded;
    let body = if patch_media_type(p.head.header_or_empty("content-type")) == neg::APPLY_PATCH_CBOR
    {
        // The 55799 tag is optional here: client-go sends apply bodies without it.
        transcoded = cbor_decode::decode_body(body)
            .map_err(|why| status::bad_request(format!("error decoding CBOR: {why}")))?;
        &transcoded[..]
    } else {
        body
    };
    let patch_doc: Value = serde_json::from_slice(body).map_err(|e| match kind {
        PatchKind::Apply => status::bad_request(format!("error decoding YAML: {e}")),
        _ => status::bad_request(format!("error decoding patch: {e}")),
    })?;
    if kind != PatchKind::Json && !patch_doc.is_object() {
        return Err(status::bad_request(
            "json: cannot unmarshal the patch into an object".to_string(),
        ));
    }
    let mut st = shared.store();
    let existing = st.get(t.res.index(), &t.ns, &name);
    let Some(existing) = existing else {
        if kind != PatchKind::Apply {
            return Err(status::not_found(t.res, &name));
        }
        let Value::Object(mut obj) = patch_doc else {
            return Err(status::bad_request("apply body must be an object"));
        };
        check_type(t.res, &obj)?;
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            match m.get("name").and_then(Value::as_str) {
                Some(n) if n != name => {
                    return Err(status::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )))
                }
                _ => {
                    m.insert("name".into(), json!(name));
                }
            }
        }
        let created = create_in(&mut st, t.res, &t.ns, obj, mgr, true, dry_run, now)?;
        return Ok((201, created));
    };
    let patched = match kind {
        PatchKind::Json => patch::json_patch(&existing, &patch_doc).map_err(|e| {
            status::unprocessable(format!(
                "the server rejected our request due to an error in our request: {e}"
            ))
        })?,
        PatchKind::Merge | PatchKind::Strategic => patch::merge_patch(&existing, &patch_doc),
        PatchKind::Apply => {
            check_type(t.res, patch_doc.as_object().unwrap_or(&Map::new()))?;
            patch::merge_patch(&existing, &patch_doc)
        }
    };
    let Value::Object(obj) = patched else {
        return Err(status::unprocessable(
            "the patched object is not an object".into(),
        ));
    };
    let updated = update_in(
        &mut st,
        t.res,
        &t.ns,
        &name,
        obj,
        mgr,
        kind == PatchKind::Apply,
        dry_run,
        now,
    )?;
    Ok((200, updated))
}

fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn name_problem(res: &ResourceDef, name: &str) -> Option<ApiError> {
    if name.is_empty() {
        return Some(status::invalid(
            res.group,
            res.kind,
            "",
            "metadata.name",
            "FieldValueRequired",
            "Required value: name or generateName is required",
        ));
    }
    if !objects::valid_name(name) {
        return Some(status::invalid(
            res.group,
            res.kind,
            name,
            "metadata.name",
            "FieldValueInvalid",
            &format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ));
    }
    None
}

/// Creates an object (201 semantics) with the store already locked.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_in(
    st: &mut Store,
    res: &'static ResourceDef,
    url_ns: &str,
    mut obj: Map<String, Value>,
    manager: &str,
    apply: bool,
    dry_run: bool,
    now: i64,
) -> Result<Value, ApiError> {
    obj.insert("kind".into(), json!(res.kind));
    obj.insert("apiVersion".into(), json!(res.api_version()));
    let meta = meta_mut(&mut obj);
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        if let Some(g) = meta.get("generateName").and_then(Value::as_str) {
            if !g.is_empty() {
                name = format!("{g}{}", util::name_suffix());
            }
        }
    }
    if let Some(e) = name_problem(res, &name) {
        return Err(e);
    }
    if res.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != url_ns => {
                return Err(status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => {}
        }
        meta.insert("namespace".into(), json!(url_ns));
    } else {
        meta.shift_remove("namespace");
    }
    if res.namespaced && st.get(store::NAMESPACES, "", url_ns).is_none() {
        return Err(status::namespace_not_found(url_ns));
    }
    let ns = if res.namespaced { url_ns } else { "" };
    if st.get(res.index(), ns, &name).is_some() {
        return Err(status::already_exists(res, &name));
    }
    let rv = if dry_run { 0 } else { st.next_rv() };
    let meta = meta_mut(&mut obj);
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(util::uuid_v4()));
    if dry_run {
        meta.shift_remove("resourceVersion");
    } else {
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
    }
    meta.insert("creationTimestamp".into(), json!(util::rfc3339(now)));
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ] {
        meta.shift_remove(k);
    }
    if matches!(res.kind, "Pod" | "CustomResourceDefinition") || !res.builtin {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.shift_remove("generation");
    }
    objects::apply_create_defaults(res, &mut obj);
    objects::record_manager(res, &mut obj, None, manager, apply, now);
    let canonical = objects::canonicalize(res, &Value::Object(obj));
    if !dry_run {
        st.put(
            res.index(),
            ns,
            &name,
            canonical.clone(),
            rv,
            EventType::Added,
        );
    }
    Ok(canonical)
}

fn without_volatile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(Value::Object(m)) = v.get_mut("metadata") {
        m.shift_remove("resourceVersion");
        m.shift_remove("managedFields");
    }
    v
}

fn spec_part(res: &ResourceDef, v: &Value) -> Value {
    match v.as_object() {
        Some(m) if !res.builtin => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => v.get("spec").cloned().unwrap_or(Value::Null),
    }
}

/// Replaces an object (PUT semantics) with the store already locked.
#[allow(clippy::too_many_arguments)]
pub(crate) fn update_in(
    st: &mut Store,
    res: &'static ResourceDef,
    url_ns: &str,
    name: &str,
    mut obj: Map<String, Value>,
    manager: &str,
    apply: bool,
    dry_run: bool,
    now: i64,
) -> Result<Value, ApiError> {
    let ns = if res.namespaced { url_ns } else { "" };
    let existing = st
        .get(res.index(), ns, name)
        .ok_or_else(|| status::not_found(res, name))?;
    let current_rv = objects::meta_str(&existing, "resourceVersion")
        .unwrap_or("")
        .to_string();
    obj.insert("kind".into(), json!(res.kind));
    obj.insert("apiVersion".into(), json!(res.api_version()));
    let meta = meta_mut(&mut obj);
    if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str) {
        if !rv.is_empty() && rv != current_rv {
            return Err(status::conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
    }
    if let Some(n) = meta.get("name").and_then(Value::as_str) {
        if n != name {
            return Err(status::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
    }
    if res.namespaced {
        if let Some(n) = meta.get("namespace").and_then(Value::as_str) {
            if !n.is_empty() && n != url_ns {
                return Err(status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    }
    meta.insert("name".into(), json!(name));
    if res.namespaced {
        meta.insert("namespace".into(), json!(url_ns));
    } else {
        meta.shift_remove("namespace");
    }
    for k in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
    ] {
        match existing.get("metadata").and_then(|m| m.get(k)) {
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.shift_remove(k);
            }
        }
    }
    meta.insert(
        "managedFields".into(),
        existing
            .get("metadata")
            .and_then(|m| m.get("managedFields"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    if res.kind == "Secret" {
        objects::fold_string_data(&mut obj);
    }
    if matches!(res.kind, "Pod" | "Namespace" | "CustomResourceDefinition") || !res.builtin {
        // The status subresource owns status.
        match existing.get("status") {
            Some(s) => {
                obj.insert("status".into(), s.clone());
            }
            None => {
                obj.shift_remove("status");
            }
        }
    }
    if res.kind == "Namespace" {
        let labels = meta_mut(&mut obj)
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(l) = labels {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    let candidate = objects::canonicalize(res, &Value::Object(obj.clone()));
    if without_volatile(&candidate) == without_volatile(&existing) {
        return Ok((*existing).clone());
    }
    if spec_part(res, &candidate) != spec_part(res, &existing) {
        if let Some(g) = existing
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
        {
            meta_mut(&mut obj).insert("generation".into(), json!(g + 1));
        }
    }
    let rv = if dry_run {
        current_rv.parse::<u64>().unwrap_or(0)
    } else {
        st.next_rv()
    };
    meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
    objects::record_manager(res, &mut obj, Some(&existing), manager, apply, now);
    let canonical = objects::canonicalize(res, &Value::Object(obj));
    if !dry_run {
        st.put(
            res.index(),
            ns,
            name,
            canonical.clone(),
            rv,
            EventType::Modified,
        );
    }
    Ok(canonical)
}

fn check_preconditions(
    res: &ResourceDef,
    name: &str,
    existing: &Value,
    opts: &Value,
) -> Result<(), ApiError> {
    let pre = opts.get("preconditions");
    if let Some(uid) = pre.and_then(|p| p.get("uid")).and_then(Value::as_str) {
        let have = objects::meta_str(existing, "uid").unwrap_or("");
        if uid != have {
            return Err(status::conflict(
                res,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                ),
            ));
        }
    }
    if let Some(rv) = pre
        .and_then(|p| p.get("resourceVersion"))
        .and_then(Value::as_str)
    {
        let have = objects::meta_str(existing, "resourceVersion").unwrap_or("");
        if rv != have {
            return Err(status::conflict(
                res,
                name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
            ));
        }
    }
    Ok(())
}

/// Deletes one object and returns its last state (with the deletion's resourceVersion).
fn deleted_object(
    st: &mut Store,
    res: &'static ResourceDef,
    url_ns: &str,
    name: &str,
    opts: &Value,
    dry_run: bool,
    now: i64,
) -> Result<Value, ApiError> {
    let ns = if res.namespaced { url_ns } else { "" };
    let existing = st
        .get(res.index(), ns, name)
        .ok_or_else(|| status::not_found(res, name))?;
    check_preconditions(res, name, &existing, opts)?;
    let mut last = (*existing).clone();
    if dry_run {
        return Ok(last);
    }
    if res.kind == "Namespace" {
        for (ri, obj) in st.objects_in_namespace(name) {
            let r: &'static ResourceDef = &RESOURCES[ri];
            let n = objects::meta_str(&obj, "name").unwrap_or("").to_string();
            let rv = st.next_rv();
            let mut o = (*obj).clone();
            if let Some(Value::Object(m)) = o.get_mut("metadata") {
                m.insert("resourceVersion".into(), json!(rv.to_string()));
            }
            st.remove(r.index(), name, &n, o, rv);
        }
        if let Some(Value::Object(m)) = last.get_mut("metadata") {
            m.insert("deletionTimestamp".into(), json!(util::rfc3339(now)));
        }
        if let Some(Value::Object(s)) = last.get_mut("status") {
            s.insert("phase".into(), json!("Terminating"));
        }
    }
    let rv = st.next_rv();
    if let Some(Value::Object(m)) = last.get_mut("metadata") {
        m.insert("resourceVersion".into(), json!(rv.to_string()));
    }
    let last = objects::canonicalize(res, &last);
    st.remove(res.index(), ns, name, last.clone(), rv);
    Ok(last)
}

fn delete_in(
    st: &mut Store,
    res: &'static ResourceDef,
    url_ns: &str,
    name: &str,
    opts: &Value,
    dry_run: bool,
    now: i64,
) -> Result<(u16, Value), ApiError> {
    let last = deleted_object(st, res, url_ns, name, opts, dry_run, now)?;
    if res.delete_returns_object {
        Ok((200, last))
    } else {
        let uid = objects::meta_str(&last, "uid").unwrap_or("");
        Ok((200, status::deleted(res, name, uid)))
    }
}

/// Seeds a fresh store.
pub(crate) fn seed(st: &mut Store) {
    let now = util::now_unix();
    for (ri, ns, obj) in seed::seed_objects(&util::rfc3339(now)) {
        if let Value::Object(m) = obj {
            let _ = create_in(
                st,
                &RESOURCES[ri],
                ns,
                m,
                "cborgate-standin",
                false,
                false,
                now,
            );
        }
    }
}

/// Creates `n` ConfigMaps in `ns` (creating the namespace if needed), for tests that
/// need many watch events quickly.
pub(crate) fn emit_configmaps(shared: &Shared, ns: &str, n: usize) {
    let now = util::now_unix();
    let mut st = shared.store();
    if st.get(store::NAMESPACES, "", ns).is_none() {
        if let Value::Object(m) = json!({"metadata": {"name": ns}}) {
            let _ = create_in(
                &mut st,
                &RESOURCES[store::NAMESPACES],
                "",
                m,
                "standin-emit",
                false,
                false,
                now,
            );
        }
    }
    // A fast path that writes the objects directly in their final shape.
    let res = &RESOURCES[store::CONFIGMAPS];
    let created = util::rfc3339(now);
    for _ in 0..n {
        let i = shared
            .emitted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("emit-{i:07}");
        if st.get(store::CONFIGMAPS, ns, &name).is_some() {
            continue;
        }
        let rv = st.next_rv();
        let obj = json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": util::uuid_v4(),
                "resourceVersion": rv.to_string(),
                "creationTimestamp": created,
                "managedFields": [{
                    "manager": "standin-emit",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": created,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}, "f:i": {}}}
                }]
            },
            "data": {"i": i.to_string()}
        });
        st.put(res.index(), ns, &name, obj, rv, EventType::Added);
    }
}
