//! What cborgate costs next to the apiserver it fronts (a measurement, not a
//! timed test; run with `CBORGATE_CP_COST=1`, and `CBORGATE_BIN` naming a release
//! build): the controller manager reconciles 300 Deployments (300 ReplicaSets,
//! 300 Pods, their scheduling events) while 1,000 ConfigMaps are created, half of
//! them by a CBOR client, then relists every informer (it is restarted). CPU
//! seconds (user + system, from /proc) of cborgate, kube-apiserver and etcd over
//! that run, and peak RSS; `bench/control-plane.md` keeps the table
//! (`CBORGATE_CP_COST_OUT=FILE` writes it there).

use crate::cbor::{self, Item};
use crate::cbor_client::cbor_request;
use crate::cluster::wait_json;
use crate::controllers::{create, deployment, namespace};
use crate::Suite;
use serde_json::json;
use std::time::Instant;

pub const CASES: [crate::Case; 1] = [("cost_against_the_apiserver", cost)];

/// The cost case runs only when asked for.
pub fn wanted(name: &str) -> bool {
    !name.starts_with("cost_") || std::env::var_os("CBORGATE_CP_COST").is_some()
}

/// utime + stime of `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Peak RSS (VmHWM) of `pid` in MiB.
fn peak_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

fn cost(s: &mut Suite) {
    let ns = "cp-cost";
    namespace(&s.through, ns);
    let pids = [
        ("cborgate", s.gate.svc.pid()),
        ("kube-apiserver", s.api.svc.pid()),
        ("etcd", s.etcd.pid()),
        ("kube-controller-manager", s.kcm.as_ref().unwrap().pid()),
    ];
    let before: Vec<f64> = pids.iter().map(|(_, p)| cpu_seconds(*p)).collect();
    let t = Instant::now();
    for i in 0..300 {
        create(
            &s.through,
            &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            &deployment(ns, &format!("d{i}"), 1),
        );
    }
    for i in 0..1000 {
        let name = format!("cm{i}");
        if i % 2 == 0 {
            create(
                &s.through,
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name},"data":{"i":i.to_string(),"pad":"x".repeat(512)}}),
            );
        } else {
            let cm = Item::map(&[
                ("apiVersion", Item::str("v1")),
                ("kind", Item::str("ConfigMap")),
                ("metadata", Item::map(&[("name", Item::str(&name))])),
                (
                    "data",
                    Item::map(&[
                        ("i", Item::str(&i.to_string())),
                        ("pad", Item::str(&"x".repeat(512))),
                    ]),
                ),
            ]);
            let (st, _) = cbor_request(
                &s.through,
                "POST",
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                Some("application/cbor"),
                Some(&cbor::body(&cm)),
            );
            assert_eq!(st, 201);
        }
    }
    wait_json(
        &s.through,
        600,
        "300 ReplicaSets",
        &format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
        |v| v["items"].as_array().unwrap().len() == 300,
    );
    wait_json(
        &s.through,
        600,
        "300 Pods",
        &format!("/api/v1/namespaces/{ns}/pods"),
        |v| v["items"].as_array().unwrap().len() == 300,
    );
    // Relist: a new controller manager lists every informer again, through cborgate.
    let kcm_cpu = cpu_seconds(pids[3].1) - before[3];
    let kcm = s.kcm.as_mut().unwrap();
    kcm.restart();
    let new_kcm = kcm.pid();
    crate::controllers::reconcile_deployment(s, ns, "after-relist", 300);
    let secs = t.elapsed().as_secs_f64();
    let cpu: Vec<f64> = pids
        .iter()
        .zip(&before)
        .map(|((_, p), b)| {
            if *p == pids[3].1 {
                kcm_cpu + cpu_seconds(new_kcm)
            } else {
                cpu_seconds(*p) - b
            }
        })
        .collect();
    let peaks: Vec<f64> = pids
        .iter()
        .map(|(_, p)| {
            if *p == pids[3].1 {
                peak_mib(new_kcm)
            } else {
                peak_mib(*p)
            }
        })
        .collect();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let bin = std::env::var("CBORGATE_BIN")
        .unwrap_or_else(|_| "debug build (set CBORGATE_BIN to a release build)".into());
    let mut table = format!(
        "Measured {date} at commit {commit}, {secs:.0} s of workload, cborgate binary: {bin}\n\n| process | CPU seconds | CPU vs kube-apiserver | peak RSS (MiB) |\n|---|---:|---:|---:|\n"
    );
    for (((name, _), c), p) in pids.iter().zip(&cpu).zip(&peaks) {
        table.push_str(&format!(
            "| {name} | {c:.1} | {:.2} | {p:.0} |\n",
            c / cpu[1]
        ));
    }
    println!("{table}");
    if let Some(out) = std::env::var_os("CBORGATE_CP_COST_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
