//! Acceptance: every RFC 8949 Appendix A vector is accepted or rejected as
//! Kubernetes' decoder does, accepted ones decode to Kubernetes' value, and
//! (where Kubernetes re-encodes without a float) JSON → CBOR gives back
//! Kubernetes' re-encoding, map order aside.

use crate::support::bodies::same;
use crate::support::*;
use cborgate::codec::{cbor_to_json, json_to_cbor, CborToJsonOptions, JsonToCborOptions};
use serde_json::Value;

/// Decode a Go literal from the expectations file (`"\x01"`, `int64(1)`, …)
/// into the JSON value `encoding/json` would print. `None`: use the RFC value.
fn go_literal(go: &str) -> Option<Value> {
    if let Some(inner) = go.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('x') => {
                    let h: String = chars.by_ref().take(2).collect();
                    out.push(u8::from_str_radix(&h, 16).unwrap() as char);
                }
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => {}
            }
        }
        return Some(Value::String(out));
    }
    if let Some(n) = go.strip_prefix("int64(").and_then(|s| s.strip_suffix(')')) {
        return Some(Value::from(n.parse::<i64>().unwrap()));
    }
    match go {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        "nil" => return Some(Value::Null),
        "math.Copysign(0, -1)" => return Some(serde_json::json!(-0.0)),
        _ => {}
    }
    go.parse::<f64>().ok().map(|f| serde_json::json!(f))
}

#[test]
fn appendix_a_as_kubernetes_decodes_it() {
    let path = data().join("vectors/k8s_appendix_a_expectations.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() > 80);
    let (mut accepted, mut rejected) = (0, 0);
    for v in vectors {
        let hx = v["hex"].as_str().unwrap();
        let input = hex(hx);
        let got = cbor_to_json(&input, CborToJsonOptions::default());
        match v["k8s_decode"].as_str().unwrap() {
            "reject" => {
                assert!(
                    got.is_err(),
                    "{hx} must be rejected: {:?}",
                    v["reject_reason"]
                );
                rejected += 1;
            }
            "accept" => {
                let json = got.unwrap_or_else(|e| panic!("{hx} must be accepted: {e}"));
                let ours: Value = serde_json::from_slice(&json)
                    .unwrap_or_else(|e| panic!("{hx}: invalid JSON {e}"));
                let go = v["k8s_decoded_go"].as_str().unwrap();
                let want = go_literal(go)
                    .or_else(|| v.get("rfc_decoded_json").cloned())
                    .unwrap_or_else(|| panic!("{hx}: no expected value"));
                assert!(same(&ours, &want), "{hx}: got {ours}, want {want}");
                // Negative zero keeps its sign in the JSON text, as in Go.
                if go == "math.Copysign(0, -1)" {
                    assert_eq!(json, b"-0");
                }
                // Back to CBOR: Kubernetes' re-encoding, except that integral
                // floats became integers in JSON (docs/wire.md §2 accepts that).
                let is_float = matches!(input[0], 0xf9..=0xfb);
                if let (false, Some(re)) = (is_float, v["k8s_reencoded_hex"].as_str()) {
                    let cbor = json_to_cbor(&json, JsonToCborOptions::default()).unwrap();
                    assert_eq!(
                        cbor_canon(&cbor[3..], false),
                        cbor_canon(&hex(re), false),
                        "{hx}: re-encoding"
                    );
                }
                accepted += 1;
            }
            other => panic!("unknown expectation {other}"),
        }
    }
    assert!(
        accepted > 50 && rejected > 15,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn appendix_a_file_parses_and_matches_expectations() {
    // The plain RFC vector file and the expectations list the same inputs.
    let a: Value =
        serde_json::from_slice(&std::fs::read(data().join("vectors/appendix_a.json")).unwrap())
            .unwrap();
    let e: Value = serde_json::from_slice(
        &std::fs::read(data().join("vectors/k8s_appendix_a_expectations.json")).unwrap(),
    )
    .unwrap();
    let mut left: Vec<&str> = a
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["hex"].as_str().unwrap())
        .collect();
    let mut right: Vec<&str> = e["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["hex"].as_str().unwrap())
        .collect();
    left.sort();
    right.sort();
    left.dedup();
    right.dedup();
    assert_eq!(left, right);
}
