//! Every mode in front of the server it is for, each with a controller manager of
//! its own behind it (client-go discovery of a CRD group-version, the garbage
//! collector on custom resources), kubectl with the CBOR gates, and the suite's
//! CBOR client where the mode gives CBOR clients CBOR:
//! - `auto` in front of the CBOR-off apiserver and of the CBOR-on one;
//! - `native` in front of the CBOR-on apiserver;
//! - `upgrade`, with JSON kubectl, in front of the CBOR-on apiserver (ready throughout),
//!   and in front of the CBOR-off one and the pre-CBOR 1.30 one (not ready from its own
//!   CBOR probe, with no client traffic: `UPGRADE_OFF`, run against both servers).
//!
//! (`legacy` in front of the CBOR-off apiserver is the suite's own cborgate.)

use crate::cluster::{self, controller_manager, kubectl, Gate};
use crate::controllers::{gc_custom_resources_via, namespace, widget_crd};
use crate::http::Client;
use crate::procs::{eventually, free_port};
use crate::Suite;

pub const CASES: [crate::Case; 4] = [
    ("mode_auto_in_front_of_cbor_off", auto_off),
    ("mode_auto_in_front_of_cbor_on", auto_on),
    ("mode_native_in_front_of_cbor_on", native_on),
    ("mode_upgrade_json_kubectl_in_front_of_cbor_on", upgrade_on),
];

/// Upgrade mode in front of a server without CBOR: needs no controller manager, so it
/// runs against the 1.30 apiserver too.
pub const UPGRADE_OFF: [crate::Case; 1] = [(
    "mode_upgrade_in_front_of_cbor_off_is_not_ready",
    upgrade_off,
)];

/// cborgate in `mode` in front of the CBOR-off (`cbor == false`) or CBOR-on
/// apiserver, with a controller manager (garbage collector) of its own behind it;
/// the suite's controller manager is stopped meanwhile, so that the collection
/// can only have come through this cborgate. Runs `check` with the gate, then
/// stops both and brings the suite's controller manager back.
fn with_mode(
    s: &mut Suite,
    mode: &str,
    cbor: bool,
    check: &dyn Fn(&Suite, &Gate, &Client, &std::path::Path),
) {
    if cbor {
        s.api_cbor();
    }
    let api = if cbor {
        s.api_cbor.as_ref().unwrap()
    } else {
        &s.api
    };
    let (upstream, direct) = (api.addr.clone(), api.admin(&s.pki));
    let name = format!("cborgate-{mode}-{}", if cbor { "on" } else { "off" });
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gate = Gate::start(&s.dir, &name, &s.pki, &upstream, mode, &listen, &[]);
    let admin = gate.client(&s.pki, &s.pki.admin);
    // The CRD first, so that the new controller manager's first discovery sees it.
    widget_crd(&admin);
    let main_kcm_stopped = !cbor && s.kcm.as_mut().map(|k| k.stop()).is_some();
    let mut kcm = controller_manager(
        &s.assets,
        &s.dir,
        &s.pki,
        &format!("kcm-{name}"),
        &gate.addr,
        &[
            "--leader-elect=false",
            "--controllers=garbage-collector-controller,namespace-controller",
        ],
    );
    let kc = s.admin_kubeconfig(&name, &gate.addr);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check(s, &gate, &direct, &kc)
    }));
    kcm.check_alive();
    kcm.stop();
    gate.svc.check_alive();
    let m = gate.metrics();
    gate.svc.stop();
    if main_kcm_stopped {
        s.kcm.as_mut().unwrap().restart();
    }
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
    let errors = cluster::metric_sum(&m, "cborgate_transcode_errors_total", &[]);
    assert_eq!(errors, 0.0, "{name}: transcode errors");
}

/// What every mode must do: discovery of the CRD's group-version through the gate
/// (kubectl, with the gates), and garbage collection of custom resources by the
/// controller manager behind it.
fn common(s: &Suite, gate: &Gate, kc: &std::path::Path, ns: &str) {
    let admin = gate.client(&s.pki, &s.pki.admin);
    let out = kubectl(
        &s.assets,
        kc,
        true,
        &[
            "api-resources",
            "--api-group=cp.cborgate.test",
            "-o",
            "name",
        ],
        None,
    )
    .expect("api-resources through the gate");
    assert_eq!(out.trim(), "widgets.cp.cborgate.test");
    gc_custom_resources_via(&admin, ns, 120);
}

/// `mode` in front of the CBOR-off or CBOR-on apiserver: what every mode must do,
/// and the suite's CBOR client.
fn with_cbor_client(s: &mut Suite, mode: &str, cbor: bool) {
    let ns = format!("cp-mode-{mode}-{}", if cbor { "on" } else { "off" });
    with_mode(s, mode, cbor, &|s, gate, direct, kc| {
        common(s, gate, kc, &ns);
        cbor_scenario(s, gate, direct, &format!("{ns}-cbor"));
    });
}

fn auto_off(s: &mut Suite) {
    with_cbor_client(s, "auto", false);
}

fn auto_on(s: &mut Suite) {
    with_cbor_client(s, "auto", true);
}

fn native_on(s: &mut Suite) {
    with_cbor_client(s, "native", true);
}

/// `upgrade`: JSON clients in, CBOR upstream. kubectl without the gates works as
/// it would directly, and the apiserver's audit log shows what it was sent.
fn upgrade_on(s: &mut Suite) {
    with_mode(s, "upgrade", true, &|s, gate, _direct, kc| {
        common(s, gate, kc, "cp-mode-upgrade-on");
        let ns = "cp-mode-upgrade-kubectl";
        namespace(&gate.client(&s.pki, &s.pki.admin), ns);
        let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: up, namespace: {ns}}}\ndata: {{k: v}}\n");
        for args in [
            vec!["apply", "-f", "-"],
            vec!["apply", "--server-side", "-f", "-"],
        ] {
            let o = kubectl(&s.assets, kc, false, &args, Some(&cm));
            assert!(o.ok, "kubectl {args:?} through upgrade mode: {}", o.stderr);
        }
        let o = kubectl(
            &s.assets,
            kc,
            false,
            &[
                "-n",
                ns,
                "get",
                "configmap",
                "up",
                "-o",
                "jsonpath={.data.k}",
            ],
            None,
        );
        assert_eq!(o.expect("get through upgrade mode"), "v");
        let o = kubectl(
            &s.assets,
            kc,
            false,
            &[
                "-n",
                ns,
                "patch",
                "configmap",
                "up",
                "-p",
                r#"{"data":{"k":"w"}}"#,
            ],
            None,
        );
        o.expect("patch through upgrade mode");
        let o = kubectl(
            &s.assets,
            kc,
            false,
            &["-n", ns, "delete", "configmap", "up"],
            None,
        );
        o.expect("delete through upgrade mode");
        // JSON request bodies came in (and went upstream as CBOR).
        let json_in = cluster::samples(&gate.metrics(), "cborgate_requests_total")
            .filter(|(l, _)| l.contains("request_format=\"json\""))
            .map(|(_, v)| v)
            .sum::<f64>();
        assert!(json_in > 0.0, "no JSON request body came through");
        // The CBOR-on apiserver answered what cborgate made CBOR in CBOR: still ready.
        assert_eq!(gate.readyz_text(), (200, "ok".to_string()));
    });
}

/// The suite's CBOR client through this gate (ConfigMaps).
fn cbor_scenario(s: &Suite, gate: &Gate, direct: &Client, ns: &str) {
    let c = gate.client(&s.pki, &s.pki.admin);
    namespace(&c, ns);
    crate::cbor_client::configmap_scenario(&c, direct, ns);
}

/// `upgrade` in front of the CBOR-off apiserver: its `/readyz` answers cborgate's probe
/// with 200 as the CBOR-on one does, but it refuses CBOR. With no client traffic at all,
/// cborgate's own CBOR probe (a SelfSubjectReview asked for in CBOR, as
/// `system:cborgate:readiness-probe` through the front-proxy certificate) gets the 406
/// and cborgate's `/readyz` is 503 naming that cause, `cborgate_upstream_ready` and
/// `cborgate_upstream_cbor` 0 while the upstream itself is reachable. A client still gets
/// the apiserver's 406 as it came, and the reason stays.
fn upgrade_off(s: &mut Suite) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut gate = Gate::start(
        &s.dir,
        "cborgate-upgrade-off",
        &s.pki,
        &s.api.addr,
        "upgrade",
        &listen,
        &[],
    );
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let why = "the upstream refuses CBOR (406 to POST \
                   selfsubjectreviews.authentication.k8s.io); --mode upgrade needs an \
                   apiserver with CBORServingAndStorage=true\n"
            .to_string();
        eventually(30, "cborgate /readyz 503 from its own CBOR probe", || {
            gate.readyz_text() == (503, why.clone())
        });
        assert_eq!(gate.metric("cborgate_upstream_ready", &[]), 0.0);
        assert_eq!(gate.metric("cborgate_upstream_cbor", &[]), 0.0);
        let admin = gate.client(&s.pki, &s.pki.admin);
        let path = "/api/v1/namespaces/default/configmaps";
        for _ in 0..2 {
            let r = admin.request("GET", path, &[("Accept", "application/json")], None);
            assert_eq!(r.status, 406, "{}", r.text());
        }
        assert_eq!(gate.readyz_text().0, 503);
        assert_eq!(gate.metric("cborgate_upstream_ready", &[]), 0.0);
    }));
    gate.svc.check_alive();
    gate.svc.stop();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}
