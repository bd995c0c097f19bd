//! Kubernetes `Status` objects in the exact field order and wording the apiserver
//! uses (`NotFound`, `AlreadyExists`, `Conflict`, `BadRequest`, `Invalid`, …).

use serde_json::{json, Map, Value};

use super::store::ResourceDef;

/// An error answer: HTTP code plus the Status body.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub body: Value,
}

fn failure(code: u16, reason: &str, message: String, details: Option<Value>) -> ApiError {
    let mut m = Map::new();
    m.insert("kind".into(), json!("Status"));
    m.insert("apiVersion".into(), json!("v1"));
    m.insert("metadata".into(), json!({}));
    m.insert("status".into(), json!("Failure"));
    m.insert("message".into(), json!(message));
    m.insert("reason".into(), json!(reason));
    if let Some(d) = details {
        m.insert("details".into(), d);
    }
    m.insert("code".into(), json!(code));
    ApiError {
        code,
        body: Value::Object(m),
    }
}

impl ApiError {
    /// An already-built Status body (the negotiation errors).
    pub(crate) fn raw(body: Value) -> ApiError {
        let code = body.get("code").and_then(Value::as_u64).unwrap_or(500) as u16;
        ApiError { code, body }
    }
}

fn details(res: &ResourceDef, name: &str) -> Value {
    let mut d = Map::new();
    d.insert("name".into(), json!(name));
    if !res.group.is_empty() {
        d.insert("group".into(), json!(res.group));
    }
    d.insert("kind".into(), json!(res.plural));
    Value::Object(d)
}

/// The authentication filter's 401 for a bearer token it does not know (native-1.36
/// `unauth`).
pub(crate) fn unauthorized() -> ApiError {
    failure(401, "Unauthorized", "Unauthorized".into(), None)
}

/// The authorization filter's 403 (native-1.36 `impersonate`: `configmaps "cm-b" is
/// forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace
/// "wire"`).
pub(crate) fn forbidden(
    res: &ResourceDef,
    name: Option<&str>,
    user: &str,
    verb: &str,
    ns: &str,
) -> ApiError {
    let what = match name {
        Some(n) => format!("{} \"{n}\"", res.qualified()),
        None => res.qualified(),
    };
    let scope = if ns.is_empty() {
        " at the cluster scope".to_string()
    } else {
        format!(" in the namespace \"{ns}\"")
    };
    let message = format!(
        "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\"{scope}",
        res.plural, res.group
    );
    let details = match name {
        Some(n) => details(res, n),
        None => {
            let mut d = Map::new();
            if !res.group.is_empty() {
                d.insert("group".into(), json!(res.group));
            }
            d.insert("kind".into(), json!(res.plural));
            Value::Object(d)
        }
    };
    failure(403, "Forbidden", message, Some(details))
}

/// `configmaps "x" not found` (corpus `status-404`, `status-404-cr`).
pub(crate) fn not_found(res: &ResourceDef, name: &str) -> ApiError {
    failure(
        404,
        "NotFound",
        format!("{} \"{}\" not found", res.qualified(), name),
        Some(details(res, name)),
    )
}

/// A namespace that does not exist, when creating into it.
pub(crate) fn namespace_not_found(ns: &str) -> ApiError {
    failure(
        404,
        "NotFound",
        format!("namespaces \"{ns}\" not found"),
        Some(json!({"name": ns, "kind": "namespaces"})),
    )
}

/// The server's answer for a path no handler serves.
pub(crate) fn path_not_found() -> ApiError {
    failure(
        404,
        "NotFound",
        "the server could not find the requested resource".into(),
        Some(json!({})),
    )
}

pub(crate) fn already_exists(res: &ResourceDef, name: &str) -> ApiError {
    failure(
        409,
        "AlreadyExists",
        format!("{} \"{}\" already exists", res.qualified(), name),
        Some(details(res, name)),
    )
}

pub(crate) fn conflict(res: &ResourceDef, name: &str, why: &str) -> ApiError {
    failure(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{}\": {}",
            res.qualified(),
            name,
            why
        ),
        Some(details(res, name)),
    )
}

pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
    failure(400, "BadRequest", message.into(), None)
}

/// A go-restful 405.
pub(crate) fn method_not_allowed() -> ApiError {
    failure(
        405,
        "MethodNotAllowed",
        "405: Method Not Allowed".into(),
        Some(json!({})),
    )
}

/// A CBOR-enabled server's 405 for HEAD and OPTIONS on a resource (native-1.36
/// `head-cm`, `options`).
pub(crate) fn method_not_supported() -> ApiError {
    failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource".into(),
        Some(json!({})),
    )
}

pub(crate) fn too_large(limit: usize) -> ApiError {
    failure(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {limit}"),
        None,
    )
}

pub(crate) fn not_acceptable_message(message: String) -> ApiError {
    failure(406, "NotAcceptable", message, None)
}

pub(crate) fn unprocessable(message: String) -> ApiError {
    failure(422, "Invalid", message, Some(json!({})))
}

/// A 422 `Invalid` for one field, like the apiserver's validation errors.
pub(crate) fn invalid(
    group: &str,
    kind: &str,
    name: &str,
    field: &str,
    cause_reason: &str,
    detail: &str,
) -> ApiError {
    let mut d = Map::new();
    d.insert("name".into(), json!(name));
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(kind));
    d.insert(
        "causes".into(),
        json!([{"reason": cause_reason, "message": detail, "field": field}]),
    );
    failure(
        422,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: {field}: {detail}"),
        Some(Value::Object(d)),
    )
}

/// The `Success` Status a DELETE of a configmap or secret answers (`b-delete-cbor`).
pub(crate) fn deleted(res: &ResourceDef, name: &str, uid: &str) -> Value {
    let mut d = Map::new();
    d.insert("name".into(), json!(name));
    if !res.group.is_empty() {
        d.insert("group".into(), json!(res.group));
    }
    d.insert("kind".into(), json!(res.plural));
    d.insert("uid".into(), json!(uid));
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": Value::Object(d)
    })
}

/// The 410 a watch sends when asked to resume from a compacted resourceVersion.
pub(crate) fn expired(requested: u64, oldest: u64) -> Value {
    failure(
        410,
        "Expired",
        format!("too old resource version: {requested} ({oldest})"),
        None,
    )
    .body
}
