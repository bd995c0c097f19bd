//! Acceptance: a client using client-go's exact CBOR headers creates, gets,
//! lists, updates, applies and deletes ConfigMaps and a custom resource
//! through the proxy. Every response decodes as CBOR and matches the
//! stand-in's state as a JSON client reads it directly.

use crate::support::harness::Harness;
use crate::support::http::Conn;
use crate::support::scenario::{run, ACCEPTS};
use serde_json::{json, Value};

#[test]
fn client_go_scenario_for_configmaps_and_a_custom_resource() {
    let h = Harness::start("legacy", &[]);
    let mut c = Conn::connect(h.proxy);
    for (i, accept) in ACCEPTS.iter().enumerate() {
        run(
            &h,
            &mut c,
            accept,
            "/api/v1/namespaces/demo/configmaps",
            &|n| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": "v", "ünï": "☃"}, "binaryData": {"b": "AAEC/w=="}}),
            &format!("scenario-cm-{i}"),
        );
        run(
            &h,
            &mut c,
            accept,
            "/apis/corpus.example.com/v1/namespaces/demo/gadgets",
            &|n| json!({"apiVersion": "corpus.example.com/v1", "kind": "Gadget", "metadata": {"name": n}, "spec": {"size": 3, "ratio": 0.25, "tags": ["a", "b"], "enabled": true}}),
            &format!("scenario-gadget-{i}"),
        );
    }
    // Everything the upstream received for these was JSON.
    for r in h.standin().requests() {
        if let Some(ct) = r.header("content-type") {
            assert!(
                ct == "application/json" || ct == "application/apply-patch+yaml",
                "{ct}"
            );
            serde_json::from_slice::<Value>(&r.body).expect("JSON body upstream");
        }
        assert_ne!(r.header("accept"), Some("application/cbor"));
    }
}
