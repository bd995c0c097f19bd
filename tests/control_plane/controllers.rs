//! The control plane works through cborgate: leader election, the deployment and
//! replica-set controllers, the root-CA publisher, the scheduler, the garbage
//! collector (built-in kinds and custom resources, through discovery and the
//! metadata client), namespace deletion; the apiserver sees the controller manager
//! as itself; and cborgate's metrics show the CBOR these clients exchanged.

use crate::cluster::{samples, wait_gone, wait_json};
use crate::http::Client;
use crate::Suite;
use serde_json::{json, Value};

pub const CASES: [crate::Case; 7] = [
    ("leader_election_leases_held", leases_held),
    ("deployment_gets_replicaset_and_pods", deployment_reconciled),
    ("new_namespace_gets_root_ca", root_ca_published),
    ("scheduler_records_failed_scheduling", failed_scheduling),
    ("garbage_collector_collects_deployment", gc_deployment),
    (
        "garbage_collector_collects_custom_resources",
        gc_custom_resources,
    ),
    ("namespace_deletion_completes", namespace_deletion),
];

/// After the kubectl and CBOR-client cases, before anything is restarted.
pub const LATE_CASES: [crate::Case; 2] = [
    ("audit_names_the_controller_manager", audit_identity),
    ("metrics_show_cbor_and_no_errors", metrics_show_cbor),
];

/// POST `body` as JSON; the created object (201, or 200 for an existing name is a
/// failure).
pub fn create(c: &Client, path: &str, body: &Value) -> Value {
    let r = c.request(
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(r.status, 201, "POST {path}: {}", r.text());
    r.json()
}

pub fn delete(c: &Client, path: &str) {
    let r = c.request("DELETE", path, &[("Accept", "application/json")], None);
    assert!(
        r.status == 200 || r.status == 202,
        "DELETE {path}: {} {}",
        r.status,
        r.text()
    );
}

pub fn namespace(c: &Client, name: &str) {
    create(
        c,
        "/api/v1/namespaces",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":name}}),
    );
}

/// A Deployment of `replicas` pause pods (they never run: there are no nodes).
pub fn deployment(ns: &str, name: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    })
}

fn items(v: &Value) -> &Vec<Value> {
    v["items"].as_array().expect("a list")
}

/// Create a Deployment through cborgate and wait (up to `secs`) until its
/// ReplicaSet and all its Pods exist: the controller manager reconciled it.
pub fn reconcile_deployment(s: &Suite, ns: &str, name: &str, secs: u64) {
    create(
        &s.through,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &deployment(ns, name, 2),
    );
    wait_json(
        &s.through,
        secs,
        &format!("ReplicaSet of deployment {ns}/{name}"),
        &format!("/apis/apps/v1/namespaces/{ns}/replicasets?labelSelector=app%3D{name}"),
        |v| {
            items(v)
                .iter()
                .any(|rs| rs["metadata"]["ownerReferences"][0]["name"] == name)
        },
    );
    wait_json(
        &s.through,
        secs,
        &format!("2 Pods of deployment {ns}/{name}"),
        &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{name}"),
        |v| items(v).len() == 2,
    );
}

fn leases_held(s: &mut Suite) {
    for who in ["kube-controller-manager", "kube-scheduler"] {
        wait_json(
            &s.through,
            120,
            &format!("{who} holds its leader-election Lease"),
            &format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{who}"),
            |v| {
                v["spec"]["holderIdentity"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty())
            },
        );
    }
}

fn deployment_reconciled(s: &mut Suite) {
    namespace(&s.through, "cp-deploy");
    reconcile_deployment(s, "cp-deploy", "web", 120);
}

fn root_ca_published(s: &mut Suite) {
    namespace(&s.through, "cp-rootca");
    let cm = wait_json(
        &s.through,
        60,
        "kube-root-ca.crt in a new namespace",
        "/api/v1/namespaces/cp-rootca/configmaps/kube-root-ca.crt",
        |_| true,
    );
    let want = std::fs::read_to_string(&s.pki.ca.path).unwrap();
    assert_eq!(cm["data"]["ca.crt"].as_str().unwrap().trim(), want.trim());
}

fn failed_scheduling(s: &mut Suite) {
    wait_json(
        &s.through,
        60,
        "a FailedScheduling event for the deployment's pods (no nodes)",
        "/api/v1/namespaces/cp-deploy/events",
        |v| items(v).iter().any(|e| e["reason"] == "FailedScheduling"),
    );
}

fn gc_deployment(s: &mut Suite) {
    namespace(&s.through, "cp-gc");
    reconcile_deployment(s, "cp-gc", "doomed", 120);
    delete(
        &s.through,
        "/apis/apps/v1/namespaces/cp-gc/deployments/doomed",
    );
    wait_json(
        &s.through,
        120,
        "the deleted deployment's ReplicaSet collected",
        "/apis/apps/v1/namespaces/cp-gc/replicasets",
        |v| items(v).is_empty(),
    );
    wait_json(
        &s.through,
        120,
        "the deleted deployment's Pods collected",
        "/api/v1/namespaces/cp-gc/pods",
        |v| items(v).is_empty(),
    );
}

/// The suite's custom resource: `widgets.cp.cborgate.test`, namespaced, with
/// free-form spec; created once (an existing one is fine), established.
pub fn widget_crd(c: &Client) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.cp.cborgate.test"},
        "spec": {
            "group": "cp.cborgate.test",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "data": {"type": "string", "format": "byte"}
                }}}}]
        }
    });
    let r = c.request(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        Some(crd.to_string().as_bytes()),
    );
    assert!(
        r.status == 201 || r.status == 409,
        "create CRD: {} {}",
        r.status,
        r.text()
    );
    wait_json(
        c,
        60,
        "the Widget CRD established",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.cp.cborgate.test",
        |v| {
            v["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            })
        },
    );
    // Served: discovery of the group-version answers.
    crate::procs::eventually(60, "cp.cborgate.test/v1 discovery", || {
        c.try_request(
            "GET",
            "/apis/cp.cborgate.test/v1",
            &[("Accept", "application/json")],
            None,
        )
        .is_ok_and(|r| r.status == 200 && r.text().contains("widgets"))
    });
}

pub fn widget(ns: &str, name: &str, owner: Option<(&str, &str, &str, &str)>) -> Value {
    let mut w = json!({
        "apiVersion": "cp.cborgate.test/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"size": 3, "colour": "blue"}
    });
    if let Some((api_version, kind, oname, uid)) = owner {
        w["metadata"]["ownerReferences"] =
            json!([{"apiVersion": api_version, "kind": kind, "name": oname, "uid": uid}]);
    }
    w
}

/// Owner deletion collects its dependent widgets and a dependent ConfigMap, and a
/// widget whose owner is already gone is collected too: the garbage collector
/// reaches custom resources through discovery and the metadata client, through
/// cborgate (`client` names which cborgate).
pub fn gc_custom_resources_via(c: &Client, ns: &str, secs: u64) {
    widget_crd(c);
    namespace(c, ns);
    let base = format!("/apis/cp.cborgate.test/v1/namespaces/{ns}/widgets");
    let owner = create(c, &base, &widget(ns, "owner", None));
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    let by_owner = Some(("cp.cborgate.test/v1", "Widget", "owner", uid.as_str()));
    create(c, &base, &widget(ns, "child-1", by_owner));
    create(c, &base, &widget(ns, "child-2", by_owner));
    create(
        c,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"child-cm","namespace":ns,
            "ownerReferences":[{"apiVersion":"cp.cborgate.test/v1","kind":"Widget","name":"owner","uid":uid}]},
            "data":{"k":"v"}}),
    );
    // An owner that never existed (a uid nobody has): a dangling reference.
    create(
        c,
        &base,
        &widget(
            ns,
            "orphan",
            Some((
                "cp.cborgate.test/v1",
                "Widget",
                "gone",
                "0ba6d3e8-4c7f-4bd5-9e4e-000000000000",
            )),
        ),
    );
    delete(c, &format!("{base}/owner"));
    for dep in ["child-1", "child-2", "orphan"] {
        wait_gone(
            c,
            secs,
            &format!("widget {ns}/{dep} collected"),
            &format!("{base}/{dep}"),
        );
    }
    wait_gone(
        c,
        secs,
        &format!("configmap {ns}/child-cm collected"),
        &format!("/api/v1/namespaces/{ns}/configmaps/child-cm"),
    );
}

fn gc_custom_resources(s: &mut Suite) {
    gc_custom_resources_via(&s.through, "cp-gc-crd", 120);
}

fn namespace_deletion(s: &mut Suite) {
    let ns = "cp-nsdel";
    namespace(&s.through, ns);
    widget_crd(&s.through);
    create(
        &s.through,
        &format!("/apis/cp.cborgate.test/v1/namespaces/{ns}/widgets"),
        &widget(ns, "w", None),
    );
    for i in 0..5 {
        create(
            &s.through,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":format!("cm-{i}")},"data":{"i":i.to_string()}}),
        );
    }
    create(
        &s.through,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &deployment(ns, "d", 1),
    );
    delete(&s.through, &format!("/api/v1/namespaces/{ns}"));
    wait_gone(
        &s.through,
        180,
        "the namespace deleted",
        &format!("/api/v1/namespaces/{ns}"),
    );
}

/// The apiserver's audit log names the controller manager as itself (its x509
/// identity, carried by cborgate's front-proxy headers) and its controllers as
/// their service accounts; never the front-proxy certificate cborgate connects with.
fn audit_identity(s: &mut Suite) {
    let text = std::fs::read_to_string(&s.api.audit).unwrap();
    let mut users = std::collections::BTreeMap::<String, usize>::new();
    for line in text.lines() {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(u) = ev["user"]["username"].as_str() {
            *users.entry(u.to_string()).or_default() += 1;
        }
    }
    // The controllers' service accounts (`--use-service-account-credentials`): the
    // ones every start uses, whichever cases ran before.
    for who in [
        "system:kube-controller-manager",
        "system:kube-scheduler",
        "system:serviceaccount:kube-system:resourcequota-controller",
        "kubernetes-admin",
    ] {
        assert!(
            users.get(who).copied().unwrap_or(0) > 0,
            "no audit event by {who}; users seen: {users:?}"
        );
    }
    assert!(
        !users.contains_key("front-proxy-client"),
        "cborgate's own identity in audit: {users:?}"
    );
}

/// cborgate's metrics: CBOR request bodies, CBOR responses and CBOR watch events
/// went through, counted under the controllers' own client families and real
/// resources; no transcode error and no 5xx.
fn metrics_show_cbor(s: &mut Suite) {
    let m = s.gate.metrics();
    let sum = |name: &str, f: &dyn Fn(&str) -> bool| -> f64 {
        samples(&m, name)
            .filter(|(l, _)| f(l))
            .map(|(_, v)| v)
            .sum()
    };
    let cbor_in = sum("cborgate_requests_total", &|l| {
        l.contains("request_format=\"cbor\"")
    });
    let cbor_out = sum("cborgate_requests_total", &|l| {
        l.contains("response_format=\"cbor\"")
    });
    let events = sum("cborgate_watch_events_total", &|l| {
        l.contains("format=\"cbor\"")
    });
    let errors = sum("cborgate_transcode_errors_total", &|_| true);
    let server_errors = sum("cborgate_requests_total", &|l| l.contains("code=\"5"));
    eprintln!("metrics: {cbor_in} CBOR request bodies, {cbor_out} CBOR responses, {events} CBOR watch events, {errors} transcode errors, {server_errors} 5xx");
    // The client and resource labels (docs/wire.md §6) name the real components by their
    // User-Agent. kube-controller-manager 1.36.2 with the CBOR client gates on sends its
    // server-side apply bodies (clusterroles, servicecidrs) in CBOR and reads built-in
    // kinds in protobuf; kube-scheduler sends protobuf and JSON patches (observed here).
    let requests = |client: &str, f: &dyn Fn(&str) -> bool| {
        let label = format!("client=\"{client}\"");
        sum("cborgate_requests_total", &|l| l.contains(&label) && f(l))
    };
    let all_lines = || {
        m.lines()
            .filter(|l| l.starts_with("cborgate_requests_total{"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let kcm_cbor = requests("kube-controller-manager", &|l| {
        l.contains("request_format=\"cbor\"") && l.contains("verb=\"APPLY\"")
    });
    assert!(
        kcm_cbor > 0.0,
        "no CBOR apply by kube-controller-manager:\n{}",
        all_lines()
    );
    assert!(
        requests("kube-scheduler", &|_| true) > 0.0,
        "no kube-scheduler:\n{}",
        all_lines()
    );
    let resource_bytes = sum("cborgate_codec_bytes_total", &|l| {
        !l.contains("resource=\"(")
    });
    assert!(
        resource_bytes > 0.0,
        "no codec bytes under a resource of its own"
    );
    assert!(cbor_in > 0.0, "no CBOR request body went through");
    assert!(cbor_out > 0.0, "no CBOR response went through");
    assert!(events > 0.0, "no CBOR watch event went through");
    assert_eq!(errors, 0.0, "transcode errors");
    assert_eq!(
        server_errors,
        0.0,
        "5xx answers:\n{}",
        m.lines()
            .filter(|l| l.contains("code=\"5"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
