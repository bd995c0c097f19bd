//! The kubeadm layout (deploy/kubeadm): kube-apiserver keeps its port and its
//! advertise address but binds loopback only; cborgate listens on the advertise
//! address, same port, and sends upstream to loopback. The apiserver's endpoint
//! reconciler then keeps `default/kubernetes` pointing at cborgate, on its own.
//!
//! The advertise address cannot be a loopback one (the apiserver refuses to write
//! 127.0.0.0/8 into Endpoints), so this case runs in a network namespace of its
//! own (`unshare --net`, root), where `192.0.2.10` (TEST-NET-1) is put on `lo`:
//! the suite's binary runs itself there, with its own etcd, apiserver and cborgate,
//! and nothing leaves the namespace. Without `unshare` the case is skipped.

use crate::cluster::{self, Assets, Gate, Pki, NODE_IP};
use crate::procs::{poll, Proc};
use crate::Suite;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub const CASES: [crate::Case; 1] =
    [("kubeadm_layout_endpoints_point_at_cborgate", kubeadm_layout)];

const CHILD_VAR: &str = "CBORGATE_CP_NETNS_DIR";

/// This process is the suite's binary run inside the namespace.
pub fn is_namespace_child() -> bool {
    std::env::var_os(CHILD_VAR).is_some()
}

fn kubeadm_layout(s: &mut Suite) {
    let probe = Command::new("unshare").args(["--net", "true"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        crate::skip("needs a network namespace of its own (`unshare --net`, as root)");
    }
    let dir = s.dir.join("layout");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Proc::start(
        &dir,
        "namespace-child",
        std::path::Path::new("unshare"),
        &["--net".into(), "--".into(), exe.to_str().unwrap().into()],
        &[(CHILD_VAR, dir.to_str().unwrap())],
    );
    let code = poll(Duration::from_secs(300), || child.exited().then_some(()))
        .map(|_| child.terminate(Duration::ZERO));
    let log = std::fs::read_to_string(&child.log).unwrap_or_default();
    eprintln!(
        "{}",
        log.lines()
            .filter(|l| l.starts_with("layout:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        code,
        Some(Some(0)),
        "the layout check in its namespace failed:\n{}",
        crate::procs::tail(&child.log, 40)
    );
}

/// Inside the namespace: the layout, and its checks. The exit code is the verdict.
pub fn namespace_child() -> i32 {
    let dir = PathBuf::from(std::env::var_os(CHILD_VAR).unwrap());
    let r = std::panic::catch_unwind(|| layout_in_namespace(dir));
    i32::from(r.is_err())
}

fn ip(args: &[&str]) {
    let st = Command::new("ip")
        .args(args)
        .status()
        .expect("the `ip` command (iproute2)");
    assert!(st.success(), "ip {args:?}");
}

fn layout_in_namespace(dir: PathBuf) {
    ip(&["link", "set", "lo", "up"]);
    ip(&["addr", "add", &format!("{NODE_IP}/32"), "dev", "lo"]);
    let assets = Assets::from_env().unwrap();
    let pki = Pki::new(&dir);
    let (_etcd, _, api) = cluster::etcd_and_apiserver(&assets, &dir, &pki, NODE_IP);
    let port: u16 = api.addr.rsplit_once(':').unwrap().1.parse().unwrap();
    let listen = format!("{NODE_IP}:{port}");
    let mut gate = Gate::start(&dir, "cborgate", &pki, &api.addr, "legacy", &listen, &[]);
    let admin = gate.client(&pki, &pki.admin);
    let want = (NODE_IP.to_string(), u64::from(port));
    let endpoints = || -> Option<(String, u64)> {
        let v = admin
            .try_request(
                "GET",
                "/api/v1/namespaces/default/endpoints/kubernetes",
                &[("Accept", "application/json")],
                None,
            )
            .ok()
            .filter(|r| r.status == 200)?
            .json();
        let subsets = v["subsets"].as_array()?;
        if subsets.len() != 1 || subsets[0]["addresses"].as_array()?.len() != 1 {
            return Some((format!("{subsets:?}"), 0));
        }
        Some((
            subsets[0]["addresses"][0]["ip"].as_str()?.to_string(),
            subsets[0]["ports"][0]["port"].as_u64()?,
        ))
    };
    let slice = || -> Option<(String, u64)> {
        let v = admin
            .try_request(
                "GET",
                "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
                &[("Accept", "application/json")],
                None,
            )
            .ok()
            .filter(|r| r.status == 200)?
            .json();
        Some((
            v["endpoints"][0]["addresses"][0].as_str()?.to_string(),
            v["ports"][0]["port"].as_u64()?,
        ))
    };
    let mut last = None;
    let ok = poll(Duration::from_secs(60), || {
        last = endpoints();
        (last.as_ref() == Some(&want) && slice().as_ref() == Some(&want)).then_some(())
    });
    assert!(
        ok.is_some(),
        "default/kubernetes endpoints: {last:?}, want {want:?}"
    );
    println!("layout: default/kubernetes = {NODE_IP}:{port}, which is cborgate's listener");
    // What the endpoints name is cborgate: a CBOR answer from a CBOR-off apiserver.
    let r = admin.request(
        "GET",
        "/api/v1/namespaces/default/endpoints/kubernetes",
        &[("Accept", "application/cbor")],
        None,
    );
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/cbor"))
    );
    // The apiserver itself is on loopback only.
    assert!(
        !crate::procs::listening(&format!("127.0.0.1:{port}")) || api.addr.starts_with("127.0.0.1")
    );
    // It stays right: across cborgate's restart, and over the reconciler's next
    // rounds (every 10 s), nothing rewrites it.
    gate.svc.stop();
    gate.svc.restart();
    gate.wait_listening();
    let t = Instant::now();
    let held = poll(Duration::from_secs(25), || {
        if endpoints().as_ref() != Some(&want) {
            return Some(false);
        }
        (t.elapsed() >= Duration::from_secs(21)).then_some(true)
    });
    assert_eq!(
        held,
        Some(true),
        "default/kubernetes changed: {:?}",
        endpoints()
    );
    println!("layout: still {NODE_IP}:{port} after cborgate's restart and two reconciler rounds");
    drop(api);
}
