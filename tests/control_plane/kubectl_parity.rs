//! kubectl through cborgate, with client-go's CBOR gates exported, prints what
//! kubectl prints talking to the apiserver directly (without the gates, which a
//! CBOR-off server would refuse): the same commands, on twin objects in two
//! namespaces for the ones that write, on the same object for the ones that read.

use crate::cluster::kubectl;
use crate::controllers::{namespace, widget_crd};
use crate::Suite;

pub const CASES: [crate::Case; 3] = [
    ("kubectl_writes_print_the_same", writes),
    ("kubectl_reads_print_the_same", reads),
    ("kubectl_auth_whoami_x509_and_token", whoami),
];

const DIRECT_NS: &str = "cp-kubectl-direct";
const THROUGH_NS: &str = "cp-kubectl-through";

/// kubectl directly (no gates) and through cborgate (gates on), each in its own
/// namespace; both outputs, the direct one with its namespace renamed.
fn both(s: &Suite, args: &[&str], stdin: Option<&str>) -> (String, String) {
    let run = |kc: &std::path::Path, cbor: bool, ns: &str| {
        let mut a: Vec<&str> = vec!["-n", ns];
        a.extend(args);
        let stdin = stdin.map(|t| t.replace("NAMESPACE", ns));
        let o = kubectl(&s.assets, kc, cbor, &a, stdin.as_deref());
        assert!(
            o.ok,
            "kubectl {args:?} ({}): {}",
            if cbor { "through cborgate" } else { "direct" },
            o.stderr
        );
        o.stdout
    };
    let direct = run(&s.kc_direct, false, DIRECT_NS).replace(DIRECT_NS, THROUGH_NS);
    let through = run(&s.kc_through, true, THROUGH_NS);
    (direct, through)
}

fn same(s: &Suite, args: &[&str], stdin: Option<&str>) {
    let (direct, through) = both(s, args, stdin);
    assert_eq!(
        through, direct,
        "kubectl {args:?}: through cborgate (left) and direct (right) differ"
    );
}

const OBJECTS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: parity
  namespace: NAMESPACE
data:
  greeting: hello
  unicode: \"h\u{e9}llo \u{1f600}\"
binaryData:
  blob: AAEC//4=
---
apiVersion: cp.cborgate.test/v1
kind: Widget
metadata:
  name: parity
  namespace: NAMESPACE
spec:
  size: 3
  ratio: 0.25
  nested: {a: [1, 2, {b: null}], big: 9007199254740993}
";

fn writes(s: &mut Suite) {
    widget_crd(&s.through);
    namespace(&s.through, DIRECT_NS);
    namespace(&s.through, THROUGH_NS);
    same(s, &["apply", "-f", "-"], Some(OBJECTS));
    same(
        s,
        &["apply", "-f", "-"],
        Some(&OBJECTS.replace("hello", "hello again")),
    );
    same(
        s,
        &[
            "apply",
            "--server-side",
            "--field-manager=parity",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&OBJECTS.replace("size: 3", "size: 4")),
    );
    same(s, &["label", "configmap", "parity", "tier=web"], None);
    same(
        s,
        &["label", "widgets.cp.cborgate.test", "parity", "tier=web"],
        None,
    );
    same(
        s,
        &[
            "patch",
            "configmap",
            "parity",
            "-p",
            r#"{"data":{"greeting":"patched"}}"#,
        ],
        None,
    );
    same(
        s,
        &[
            "patch",
            "widgets.cp.cborgate.test",
            "parity",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":5}}"#,
        ],
        None,
    );
    same(
        s,
        &[
            "patch",
            "widgets.cp.cborgate.test",
            "parity",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/ratio","value":0.5}]"#,
        ],
        None,
    );
    // what the writes left is the same too (identity fields aside)
    let strip = "jsonpath={.data}{.binaryData}{.metadata.labels}";
    same(s, &["get", "configmap", "parity", "-o", strip], None);
    same(
        s,
        &[
            "get",
            "widgets.cp.cborgate.test",
            "parity",
            "-o",
            "jsonpath={.spec}{.metadata.labels}",
        ],
        None,
    );
    same(s, &["delete", "configmap", "parity"], None);
    same(s, &["delete", "widgets.cp.cborgate.test", "parity"], None);
}

/// The same object read both ways prints byte for byte the same.
fn reads(s: &mut Suite) {
    widget_crd(&s.through);
    namespace(&s.through, "cp-kubectl-read");
    let o = kubectl(
        &s.assets,
        &s.kc_direct,
        false,
        &["apply", "-f", "-"],
        Some(&OBJECTS.replace("NAMESPACE", "cp-kubectl-read")),
    );
    assert!(o.ok, "{}", o.stderr);
    let read = |args: &[&str]| {
        let direct = kubectl(&s.assets, &s.kc_direct, false, args, None).expect("direct");
        let through =
            kubectl(&s.assets, &s.kc_through, true, args, None).expect("through cborgate");
        assert_eq!(
            through, direct,
            "kubectl {args:?}: through cborgate (left) and direct (right) differ"
        );
    };
    for kind in ["configmap", "widgets.cp.cborgate.test"] {
        // (no table output: its AGE column moves between the two runs)
        for out in ["yaml", "json", "name", "jsonpath={.metadata.labels}"] {
            read(&["-n", "cp-kubectl-read", "get", kind, "parity", "-o", out]);
        }
        read(&["-n", "cp-kubectl-read", "get", kind, "-o", "yaml"]);
    }
    read(&["get", "namespaces", "-o", "name"]);
    // (not `get --raw`: with the gates, kubectl asks for CBOR and prints the CBOR
    // that cborgate sends, as a CBOR-enabled apiserver would; directly, JSON)
    read(&["api-resources"]);
    read(&[
        "api-resources",
        "--api-group=cp.cborgate.test",
        "-o",
        "wide",
    ]);
    read(&["api-versions"]);
    read(&["explain", "pods.spec.containers.resources"]);
    read(&["explain", "widgets.spec"]);
    read(&["explain", "deployments", "--recursive"]);
}

/// `kubectl auth whoami` through cborgate names the same user as directly: the
/// x509 admin (carried as front-proxy headers) and the token admin (passed through).
fn whoami(s: &mut Suite) {
    let kc_direct_token = crate::cluster::kubeconfig(
        &s.dir.join("direct-token.kubeconfig"),
        &s.api.addr,
        &s.pki,
        &crate::http::Cred::Token(s.pki.admin_token.clone()),
    );
    for (direct, through, who) in [
        (&s.kc_direct, &s.kc_through, "kubernetes-admin"),
        (&kc_direct_token, &s.kc_through_token, "token-admin"),
    ] {
        let args = ["auth", "whoami", "-o", "yaml"];
        let d = kubectl(&s.assets, direct, false, &args, None).expect("direct");
        let mut t = kubectl(&s.assets, through, true, &args, None).expect("through cborgate");
        if s.assets.legacy && who == "kubernetes-admin" {
            // cborgate names an x509 client with its certificate's hash as
            // `authentication.kubernetes.io/credential-id`, as 1.36 does itself
            // (src/negotiate/identity.rs); a 1.30 apiserver adds none of its own, so
            // through cborgate the review has that one extra more than directly.
            t = without_credential_id(&t);
        }
        // A review's creationTimestamp is the second it was made: two can differ.
        let undated = |y: &str| {
            y.lines()
                .filter(|l| !l.starts_with("  creationTimestamp: "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (t, d) = (undated(&t), undated(&d));
        assert_eq!(
            t, d,
            "auth whoami: through cborgate (left) and direct (right) differ"
        );
        assert!(t.contains(&format!("username: {who}")), "{t}");
    }
}

/// A SelfSubjectReview (YAML) without its `extra` of only a credential id.
fn without_credential_id(review: &str) -> String {
    let lines: Vec<&str> = review.lines().collect();
    let Some(at) = lines.iter().position(|l| *l == "    extra:") else {
        panic!("no extra in {review}");
    };
    assert_eq!(
        lines.get(at + 1).copied(),
        Some("      authentication.kubernetes.io/credential-id:"),
        "{review}"
    );
    assert!(lines[at + 2].starts_with("      - X509SHA256="), "{review}");
    let mut kept: Vec<&str> = lines[..at].to_vec();
    kept.extend(&lines[at + 3..]);
    kept.join("\n") + "\n"
}
