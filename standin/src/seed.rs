//! Seed data and fixed documents: the objects a fresh stand-in holds (namespaces
//! `default` and `demo`; ConfigMaps, a Secret, a Pod and a Gadget in `demo`), and the
//! discovery documents (`/api/v1` exactly as recorded from a real 1.36 server).

use serde_json::{json, Value};

/// `/api/v1` as the recorded legacy server answered it (`a-apiv1-cbor-json-q09`),
/// without the encoder's trailing newline.
pub(crate) const CORE_V1_RESOURCES: &str = r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"bindings","singularName":"binding","namespaced":true,"kind":"Binding","verbs":["create"]},{"name":"componentstatuses","singularName":"componentstatus","namespaced":false,"kind":"ComponentStatus","verbs":["get","list"],"shortNames":["cs"]},{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["cm"],"storageVersionHash":"qFsyl6wFWjQ="},{"name":"endpoints","singularName":"endpoints","namespaced":true,"kind":"Endpoints","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ep"],"storageVersionHash":"fWeeMqaN/OA="},{"name":"events","singularName":"event","namespaced":true,"kind":"Event","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ev"],"storageVersionHash":"r2yiGXH7wu8="},{"name":"limitranges","singularName":"limitrange","namespaced":true,"kind":"LimitRange","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["limits"],"storageVersionHash":"EBKMFVe6cwo="},{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],"storageVersionHash":"Q3oi5N2YM8M="},{"name":"namespaces/finalize","singularName":"","namespaced":false,"kind":"Namespace","verbs":["update"]},{"name":"namespaces/status","singularName":"","namespaced":false,"kind":"Namespace","verbs":["get","patch","update"]},{"name":"nodes","singularName":"node","namespaced":false,"kind":"Node","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["no"],"storageVersionHash":"XwShjMxG9Fs="},{"name":"nodes/proxy","singularName":"","namespaced":false,"kind":"NodeProxyOptions","verbs":["create","delete","get","patch","update"]},{"name":"nodes/status","singularName":"","namespaced":false,"kind":"Node","verbs":["get","patch","update"]},{"name":"persistentvolumeclaims","singularName":"persistentvolumeclaim","namespaced":true,"kind":"PersistentVolumeClaim","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["pvc"],"storageVersionHash":"QWTyNDq0dC4="},{"name":"persistentvolumeclaims/status","singularName":"","namespaced":true,"kind":"PersistentVolumeClaim","verbs":["get","patch","update"]},{"name":"persistentvolumes","singularName":"persistentvolume","namespaced":false,"kind":"PersistentVolume","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["pv"],"storageVersionHash":"HN/zwEC+JgM="},{"name":"persistentvolumes/status","singularName":"","namespaced":false,"kind":"PersistentVolume","verbs":["get","patch","update"]},{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["po"],"categories":["all"],"storageVersionHash":"xPOwRZ+Yhw8="},{"name":"pods/attach","singularName":"","namespaced":true,"kind":"PodAttachOptions","verbs":["create","get"]},{"name":"pods/binding","singularName":"","namespaced":true,"kind":"Binding","verbs":["create"]},{"name":"pods/ephemeralcontainers","singularName":"","namespaced":true,"kind":"Pod","verbs":["get","patch","update"]},{"name":"pods/eviction","singularName":"","namespaced":true,"group":"policy","version":"v1","kind":"Eviction","verbs":["create"]},{"name":"pods/exec","singularName":"","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]},{"name":"pods/log","singularName":"","namespaced":true,"kind":"Pod","verbs":["get"]},{"name":"pods/portforward","singularName":"","namespaced":true,"kind":"PodPortForwardOptions","verbs":["create","get"]},{"name":"pods/proxy","singularName":"","namespaced":true,"kind":"PodProxyOptions","verbs":["create","delete","get","patch","update"]},{"name":"pods/resize","singularName":"","namespaced":true,"kind":"Pod","verbs":["get","patch","update"]},{"name":"pods/status","singularName":"","namespaced":true,"kind":"Pod","verbs":["get","patch","update"]},{"name":"podtemplates","singularName":"podtemplate","namespaced":true,"kind":"PodTemplate","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"storageVersionHash":"LIXB2x4IFpk="},{"name":"replicationcontrollers","singularName":"replicationcontroller","namespaced":true,"kind":"ReplicationController","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["rc"],"categories":["all"],"storageVersionHash":"Jond2If31h0="},{"name":"replicationcontrollers/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]},{"name":"replicationcontrollers/status","singularName":"","namespaced":true,"kind":"ReplicationController","verbs":["get","patch","update"]},{"name":"resourcequotas","singularName":"resourcequota","namespaced":true,"kind":"ResourceQuota","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["quota"],"storageVersionHash":"8uhSgffRX6w="},{"name":"resourcequotas/status","singularName":"","namespaced":true,"kind":"ResourceQuota","verbs":["get","patch","update"]},{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"storageVersionHash":"S6u1pOWzb84="},{"name":"serviceaccounts","singularName":"serviceaccount","namespaced":true,"kind":"ServiceAccount","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["sa"],"storageVersionHash":"pbx9ZvyFpBE="},{"name":"serviceaccounts/token","singularName":"","namespaced":true,"group":"authentication.k8s.io","version":"v1","kind":"TokenRequest","verbs":["create"]},{"name":"services","singularName":"service","namespaced":true,"kind":"Service","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["svc"],"categories":["all"],"storageVersionHash":"0/CO1lhkEBI="},{"name":"services/proxy","singularName":"","namespaced":true,"kind":"ServiceProxyOptions","verbs":["create","delete","get","patch","update"]},{"name":"services/status","singularName":"","namespaced":true,"kind":"Service","verbs":["get","patch","update"]}]}"#;

/// The Gadget CRD as the recorded server held it (corpus `crd-definition`), with
/// `__NOW__` where the seeding time goes.
const GADGET_CRD: &str = r#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{"name":"gadgets.corpus.example.com"},"spec":{"group":"corpus.example.com","names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"bigInt":{"type":"integer"},"emptyList":{"type":"array","items":{"type":"string"}},"emptyMap":{"type":"object","additionalProperties":{"type":"string"}},"emptyStr":{"type":"string"},"falseFlag":{"type":"boolean"},"flag":{"type":"boolean"},"floatVal":{"type":"number"},"free":{"type":"object","x-kubernetes-preserve-unknown-fields":true},"hugeFloat":{"type":"number"},"intOrString":{"x-kubernetes-int-or-string":true},"intVal":{"type":"integer"},"list":{"type":"array","items":{"type":"integer"}},"listOfObjs":{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","nullable":true}}}},"maxInt64":{"type":"integer"},"negInt":{"type":"integer"},"negZero":{"type":"number"},"nullable":{"type":"string","nullable":true},"nullableObj":{"type":"object","nullable":true,"x-kubernetes-preserve-unknown-fields":true},"quantity":{"pattern":"^.*$","x-kubernetes-int-or-string":true},"str":{"type":"string"},"tinyFloat":{"type":"number"},"wholeFloat":{"type":"number"}}},"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}},"subresources":{"status":{}},"additionalPrinterColumns":[{"name":"Int","type":"integer","jsonPath":".spec.intVal"},{"name":"Float","type":"number","jsonPath":".spec.floatVal"},{"name":"Str","type":"string","jsonPath":".spec.str"}]}],"conversion":{"strategy":"None"}},"status":{"conditions":[{"type":"NamesAccepted","status":"True","lastTransitionTime":"__NOW__","reason":"NoConflicts","message":"no conflicts found"},{"type":"Established","status":"True","lastTransitionTime":"__NOW__","reason":"InitialNamesAccepted","message":"the initial names have been accepted"}],"acceptedNames":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},"storedVersions":["v1"]}}"#;

/// The objects a new stand-in starts with: (resource index, namespace, object).
pub(crate) fn seed_objects(now: &str) -> Vec<(usize, &'static str, Value)> {
    let crd = serde_json::from_str(&GADGET_CRD.replace("__NOW__", now)).unwrap_or(Value::Null);
    vec![
        (5, "", crd),
        (
            0,
            "",
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default"}}),
        ),
        (
            0,
            "",
            json!({"kind": "Namespace", "apiVersion": "v1",
                   "metadata": {"name": "demo", "labels": {"purpose": "demo"}}}),
        ),
        (
            1,
            "demo",
            json!({
                "kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"name": "demo-config", "namespace": "demo",
                             "labels": {"app": "demo"}, "annotations": {"a": "héllo ☃"}},
                "data": {"empty": "", "json": "{\"x\":1}", "k": "v", "multiline": "line1\nline2\n",
                         "unicode": "héllo wörld ☃ 🎉"},
                "binaryData": {"bin": "AAEC/w==", "emptybin": ""}
            }),
        ),
        (
            1,
            "demo",
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "cm-plain", "namespace": "demo"},
                   "data": {"greeting": "hello"}}),
        ),
        (
            2,
            "demo",
            json!({"kind": "Secret", "apiVersion": "v1",
                   "metadata": {"name": "secret-demo", "namespace": "demo"},
                   "data": {"bin": "AAEC/w==", "s": "cGxhaW4=", "text": "aGVsbG8="},
                   "type": "Opaque"}),
        ),
        (3, "demo", demo_pod()),
        (
            4,
            "demo",
            json!({
                "apiVersion": "corpus.example.com/v1", "kind": "Gadget",
                "metadata": {"name": "g1", "namespace": "demo", "labels": {"k": "v"}},
                "spec": {
                    "bigInt": 9007199254740993_i64, "emptyList": [], "emptyMap": {}, "emptyStr": "",
                    "falseFlag": false, "flag": true, "floatVal": 3.5,
                    "free": {"deep": {"a": {"b": {"c": "d"}}}, "exp": 1e-7, "f64": 0.1, "i": 1,
                             "nested": [[1, 2], [3]]},
                    "hugeFloat": 1e300, "intOrString": "50%", "intVal": 42, "list": [1, 2, 3],
                    "listOfObjs": [{"a": 1, "b": "x"}, {"a": 2, "b": null}],
                    "maxInt64": 9223372036854775807_i64, "negInt": -5, "negZero": -0.0,
                    "nullable": null, "nullableObj": null, "quantity": "1500m",
                    "str": "héllo ☃", "tinyFloat": 5e-324, "wholeFloat": 2.0
                }
            }),
        ),
    ]
}

fn demo_pod() -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "pod-demo", "namespace": "demo", "labels": {"app": "demo"}},
        "spec": {
            "containers": [{
                "name": "c", "image": "busybox:1.0", "args": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": 0, "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"}
    })
}

/// `/api`.
pub(crate) fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_entry(group: &str) -> Value {
    let gv = format!("{group}/v1");
    json!({
        "name": group,
        "versions": [{"groupVersion": gv, "version": "v1"}],
        "preferredVersion": {"groupVersion": gv, "version": "v1"}
    })
}

/// `/apis`.
pub(crate) fn api_group_list() -> Value {
    let groups: Vec<Value> = super::store::GROUPS
        .iter()
        .map(|g| group_entry(g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub(crate) fn api_group(group: &str) -> Value {
    let mut g = json!({"kind": "APIGroup", "apiVersion": "v1"});
    if let (Value::Object(m), Value::Object(e)) = (&mut g, group_entry(group)) {
        m.extend(e);
    }
    g
}

/// `/apis/<group>/v1`.
pub(crate) fn group_resources(group: &str) -> Value {
    let resources = if group == "apiextensions.k8s.io" {
        json!([
            {"name": "customresourcedefinitions", "singularName": "customresourcedefinition",
             "namespaced": false, "kind": "CustomResourceDefinition",
             "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
             "shortNames": ["crd", "crds"], "categories": ["api-extensions"],
             "storageVersionHash": "jfWCUB31mvA="},
            {"name": "customresourcedefinitions/status", "singularName": "", "namespaced": false,
             "kind": "CustomResourceDefinition", "verbs": ["get", "patch", "update"]}
        ])
    } else {
        json!([
            {"name": "gadgets", "singularName": "gadget", "namespaced": true, "kind": "Gadget",
             "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
             "storageVersionHash": "7ZoCZlkrvmk="},
            {"name": "gadgets/status", "singularName": "", "namespaced": true, "kind": "Gadget",
             "verbs": ["get", "patch", "update"]}
        ])
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/v1"),
        "resources": resources
    })
}

/// `/version`, written pretty like the real server's `WriteRawJSON`.
pub(crate) fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": "v1.36.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}
