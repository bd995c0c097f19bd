//! Server-side transformations of responses: `meta.k8s.io` Tables (the printer
//! columns kubectl shows, recorded in `table-pods`, `table-gadgets` and
//! `b-table-cbor-json-fb`) and PartialObjectMetadata[List] (`pom-configmap`,
//! `pomlist-pods`).

use serde_json::{json, Map, Value};

use super::objects::typed_metadata;
use super::store::ResourceDef;
use super::util;

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CM_DATA_DESC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const SECRET_TYPE_DESC: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA_DESC: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const NS_STATUS_DESC: &str = "The status of the namespace";
const POD_READY_DESC: &str = "The aggregate readiness state of this pod for accepting traffic.";
const POD_STATUS_DESC: &str = "The aggregate status of the containers in this pod.";
const POD_RESTARTS_DESC: &str = "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.";
const POD_IP_DESC: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const POD_NODE_DESC: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const POD_NOMINATED_DESC: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const POD_GATES_DESC: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";

fn col(name: &str, typ: &str, format: &str, desc: &str, priority: i64) -> Value {
    json!({"name": name, "type": typ, "format": format, "description": desc, "priority": priority})
}

/// The column definitions of a resource's Table.
pub(crate) fn columns(res: &ResourceDef) -> Value {
    let name = col("Name", "string", "name", NAME_DESC, 0);
    let age = col("Age", "string", "", AGE_DESC, 0);
    match res.kind {
        "ConfigMap" => json!([name, col("Data", "string", "", CM_DATA_DESC, 0), age]),
        "Secret" => json!([
            name,
            col("Type", "string", "", SECRET_TYPE_DESC, 0),
            col("Data", "string", "", SECRET_DATA_DESC, 0),
            age
        ]),
        "Namespace" => json!([name, col("Status", "string", "", NS_STATUS_DESC, 0), age]),
        "Pod" => json!([
            name,
            col("Ready", "string", "", POD_READY_DESC, 0),
            col("Status", "string", "", POD_STATUS_DESC, 0),
            col("Restarts", "string", "", POD_RESTARTS_DESC, 0),
            age,
            col("IP", "string", "", POD_IP_DESC, 1),
            col("Node", "string", "", POD_NODE_DESC, 1),
            col("Nominated Node", "string", "", POD_NOMINATED_DESC, 1),
            col("Readiness Gates", "string", "", POD_GATES_DESC, 1)
        ]),
        // The default table convertor.
        "CustomResourceDefinition" => json!([name, col("Created At", "date", "", AGE_DESC, 0)]),
        // The CRD's additionalPrinterColumns (corpus `crd-definition`).
        _ => json!([
            name,
            col(
                "Int",
                "integer",
                "",
                "Custom resource definition column (in JSONPath format): .spec.intVal",
                0
            ),
            col(
                "Float",
                "number",
                "",
                "Custom resource definition column (in JSONPath format): .spec.floatVal",
                0
            ),
            col(
                "Str",
                "string",
                "",
                "Custom resource definition column (in JSONPath format): .spec.str",
                0
            )
        ]),
    }
}

fn path<'a>(obj: &'a Value, p: &[&str]) -> Option<&'a Value> {
    let mut cur = obj;
    for k in p {
        cur = cur.get(k)?;
    }
    Some(cur)
}

fn s_or_none(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

fn count(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, |m| m.len())
}

fn age(obj: &Value, now: i64) -> String {
    match path(obj, &["metadata", "creationTimestamp"])
        .and_then(Value::as_str)
        .and_then(util::parse_rfc3339)
    {
        Some(t) => util::human_duration(now - t),
        None => "<unknown>".into(),
    }
}

/// The cells of one row.
pub(crate) fn cells(res: &ResourceDef, obj: &Value, now: i64) -> Value {
    let name = json!(path(obj, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or(""));
    match res.kind {
        "ConfigMap" => json!([
            name,
            count(obj.get("data")) + count(obj.get("binaryData")),
            age(obj, now)
        ]),
        "Secret" => json!([
            name,
            path(obj, &["type"]).and_then(Value::as_str).unwrap_or(""),
            count(obj.get("data")),
            age(obj, now)
        ]),
        "Namespace" => json!([
            name,
            path(obj, &["status", "phase"])
                .and_then(Value::as_str)
                .unwrap_or(""),
            age(obj, now)
        ]),
        "Pod" => {
            let total = path(obj, &["spec", "containers"])
                .and_then(Value::as_array)
                .map_or(0, |a| a.len());
            let statuses = path(obj, &["status", "containerStatuses"])
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
                .count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum();
            let mut status = path(obj, &["status", "reason"])
                .or_else(|| path(obj, &["status", "phase"]))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if path(obj, &["metadata", "deletionTimestamp"]).is_some() {
                status = "Terminating".into();
            }
            let gates = match path(obj, &["spec", "readinessGates"]).and_then(Value::as_array) {
                Some(g) if !g.is_empty() => format!("0/{}", g.len()),
                _ => "<none>".into(),
            };
            json!([
                name,
                format!("{ready}/{total}"),
                status,
                restarts.to_string(),
                age(obj, now),
                s_or_none(path(obj, &["status", "podIP"])),
                s_or_none(path(obj, &["spec", "nodeName"])),
                s_or_none(path(obj, &["status", "nominatedNodeName"])),
                gates
            ])
        }
        "CustomResourceDefinition" => json!([
            name,
            path(obj, &["metadata", "creationTimestamp"])
                .cloned()
                .unwrap_or(Value::Null)
        ]),
        _ => json!([
            name,
            path(obj, &["spec", "intVal"])
                .cloned()
                .unwrap_or(Value::Null),
            path(obj, &["spec", "floatVal"])
                .cloned()
                .unwrap_or(Value::Null),
            path(obj, &["spec", "str"]).cloned().unwrap_or(Value::Null)
        ]),
    }
}

/// What a Table row carries as `object` (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(s: Option<&str>) -> Result<IncludeObject, String> {
        match s.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"Metadata\", \"None\", \"Object\""
            )),
        }
    }
}

/// PartialObjectMetadata of an object.
pub(crate) fn pom(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": typed_metadata(obj.get("metadata").unwrap_or(&Value::Null))
    })
}

/// PartialObjectMetadataList of a list.
pub(crate) fn pom_list(objs: &[Value], list_meta: Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "items": objs.iter().map(|o| pom(o, version)).collect::<Vec<_>>()
    })
}

/// A Table of objects. `headers: false` writes `columnDefinitions: null` (watch
/// events after the first).
pub(crate) fn table(
    res: &ResourceDef,
    objs: &[Value],
    list_meta: Value,
    include: IncludeObject,
    version: &str,
    headers: bool,
    now: i64,
) -> Value {
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut row = Map::new();
            row.insert("cells".into(), cells(res, o, now));
            row.insert(
                "object".into(),
                match include {
                    IncludeObject::None => Value::Null,
                    IncludeObject::Metadata => pom(o, version),
                    IncludeObject::Object => o.clone(),
                },
            );
            Value::Object(row)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "columnDefinitions": if headers { columns(res) } else { Value::Null },
        "rows": rows
    })
}
