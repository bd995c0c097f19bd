//! The real control plane through cborgate: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler (Kubernetes 1.36), kubectl and a
//! CBOR client of the suite's own, all on loopback, in the style of envtest; then
//! the apiserver-level cases again against a pre-CBOR kube-apiserver (1.30.3, from
//! `CBORGATE_LEGACY_ASSETS`; without it that half is skipped in one line).
//!
//! The binaries come from `KUBEBUILDER_ASSETS` (kube-apiserver, etcd, kubectl, as
//! setup-envtest installs them) and `CBORGATE_CONTROLLER_ASSETS` (or the same folder)
//! for kube-controller-manager and kube-scheduler. Without them the suite says so in
//! one line and passes. `.ci/run` unpacks them and sets the variable.
//!
//! One control plane serves the cases, which run in order on this thread (their
//! processes die with it: see `procs`); each case is a function that can fail. A
//! case says which servers it runs against by the list it is added to in `cases()`:
//! `current` (1.36 with CBOR off, with controllers) or `both` (also the 1.30
//! apiserver, alone: no controllers against an older apiserver, by the skew policy).
//! The 1.30 half has its own etcd and apiserver, started once after the 1.36 half
//! stops. The last lines are each server's count and
//! `control-plane: N passed, N failed`. A failed run keeps its work
//! directory (every process's log, the audit logs) and prints where it is.
//! `cargo test --test control_plane -- NAME…` runs the cases whose names contain a
//! NAME (the control plane is started all the same).

#[path = "../support/mod.rs"]
mod support;

mod byte_fields;
mod cbor;
mod cbor_client;
mod cluster;
mod controllers;
mod cost;
mod credentials;
mod findings;
mod forwarded;
mod goaway;
mod headers;
mod http;
mod idle;
mod kubectl_parity;
mod layout;
mod modes;
mod operations;
mod procs;
mod request_metrics;
mod watch_discovery;

use cluster::{Apiserver, ApiserverOpts, Assets, Gate, Pki, Service};
use http::Client;
use std::path::PathBuf;
use std::time::Instant;

/// Everything the cases share: the binaries, the certificates, and the running
/// control plane with cborgate (`legacy`) in front of a CBOR-off kube-apiserver.
pub struct Suite {
    pub assets: Assets,
    pub dir: PathBuf,
    pub pki: Pki,
    pub etcd: Service,
    pub etcd_url: String,
    pub api: Apiserver,
    pub gate: Gate,
    pub kcm: Option<Service>,
    pub sched: Option<Service>,
    /// A CBOR-enabled kube-apiserver on the same etcd (its own prefix), started by
    /// the first case that needs it.
    pub api_cbor: Option<Apiserver>,
    /// The cluster admin (x509) directly and through cborgate.
    pub direct: Client,
    pub through: Client,
    /// kubeconfigs of the admin (x509) directly and through cborgate, and of the
    /// token admin through cborgate.
    pub kc_direct: PathBuf,
    pub kc_through: PathBuf,
    pub kc_through_token: PathBuf,
}

impl Suite {
    fn start(assets: Assets, dir: PathBuf) -> Suite {
        let pki = Pki::new(&dir);
        let (etcd, etcd_url, api) = cluster::etcd_and_apiserver(&assets, &dir, &pki, "127.0.0.1");
        let legacy = assets.legacy;
        let listen = format!("127.0.0.1:{}", procs::free_port());
        let gate = Gate::start(&dir, "cborgate", &pki, &api.addr, "legacy", &listen, &[]);
        let direct = api.admin(&pki);
        let through = gate.client(&pki, &pki.admin);
        let admin = cluster::cert_cred(&pki.admin);
        let kc_direct =
            cluster::kubeconfig(&dir.join("direct.kubeconfig"), &api.addr, &pki, &admin);
        let kc_through =
            cluster::kubeconfig(&dir.join("through.kubeconfig"), &gate.addr, &pki, &admin);
        let kc_through_token = cluster::kubeconfig(
            &dir.join("through-token.kubeconfig"),
            &gate.addr,
            &pki,
            &http::Cred::Token(pki.admin_token.clone()),
        );
        // No controllers against a pre-CBOR (older) apiserver: the skew policy forbids it.
        let kcm = (!legacy).then(|| {
            cluster::controller_manager(
                &assets,
                &dir,
                &pki,
                "kube-controller-manager",
                &gate.addr,
                &[],
            )
        });
        let sched = (!legacy).then(|| cluster::scheduler(&assets, &dir, &pki, &gate.addr));
        Suite {
            assets,
            dir,
            pki,
            etcd,
            etcd_url,
            api,
            gate,
            kcm,
            sched,
            api_cbor: None,
            direct,
            through,
            kc_direct,
            kc_through,
            kc_through_token,
        }
    }

    /// The CBOR-enabled apiserver, started on first use.
    pub fn api_cbor(&mut self) -> &Apiserver {
        if self.api_cbor.is_none() {
            let port = procs::free_port();
            self.api_cbor = Some(Apiserver::start(
                &self.assets,
                &self.dir,
                &self.pki,
                ApiserverOpts {
                    name: "kube-apiserver-cbor",
                    etcd: &self.etcd_url,
                    prefix: "/registry-cbor",
                    cbor: true,
                    bind: "127.0.0.1",
                    advertise: "127.0.0.1",
                    port,
                    extra: vec![],
                },
            ));
        }
        self.api_cbor.as_ref().unwrap()
    }

    /// A kubeconfig of the admin (x509) for `server`.
    pub fn admin_kubeconfig(&self, name: &str, server: &str) -> PathBuf {
        cluster::kubeconfig(
            &self.dir.join(format!("{name}.kubeconfig")),
            server,
            &self.pki,
            &cluster::cert_cred(&self.pki.admin),
        )
    }

    /// kubectl as the admin through cborgate, with the CBOR gates.
    pub fn kubectl(&self, args: &[&str]) -> cluster::Out {
        cluster::kubectl(&self.assets, &self.kc_through, true, args, None)
    }
}

impl Drop for Suite {
    /// Stop everything in the reverse order of its start, so that no client is
    /// left waiting on a server that went first.
    fn drop(&mut self) {
        for svc in [self.kcm.as_mut(), self.sched.as_mut()]
            .into_iter()
            .flatten()
        {
            svc.stop();
        }
        self.gate.svc.stop();
        if let Some(a) = self.api_cbor.as_mut() {
            a.svc.stop();
        }
        self.api.svc.stop();
        self.etcd.stop();
    }
}

type Case = (&'static str, fn(&mut Suite));

/// The servers a case runs against.
#[derive(Clone, Copy, PartialEq)]
enum Servers {
    /// 1.36 with CBOR off, with controllers.
    Current,
    /// That, and the pre-CBOR 1.30 apiserver (`CBORGATE_LEGACY_ASSETS`).
    Both,
}

fn current(cases: &[Case]) -> impl Iterator<Item = (Case, Servers)> + '_ {
    cases.iter().map(|c| (*c, Servers::Current))
}

fn both(cases: &[Case]) -> impl Iterator<Item = (Case, Servers)> + '_ {
    cases.iter().map(|c| (*c, Servers::Both))
}

/// A case's way of saying it cannot run here (and why): not a pass, not a failure.
pub struct Skip(pub String);

pub fn skip(why: &str) -> ! {
    std::panic::panic_any(Skip(why.to_string()))
}

/// Every case, in the order they run: the ones that change the control plane
/// (restarts, other modes) come after the ones that check its steady state.
/// A new case goes into its module's `CASES` and that list here, through `current`
/// or `both`.
fn cases() -> Vec<(Case, Servers)> {
    let mut all = Vec::new();
    all.extend(current(&controllers::CASES));
    all.extend(both(&forwarded::CASES));
    all.extend(both(&kubectl_parity::CASES));
    all.extend(both(&cbor_client::CASES));
    all.extend(both(&headers::CASES));
    all.extend(both(&watch_discovery::CASES));
    // (the CBOR-enabled apiserver's answers are their yardstick: 1.36 only)
    all.extend(current(&findings::CASES));
    all.extend(both(&goaway::CASES));
    all.extend(current(&credentials::CASES));
    all.extend(current(&request_metrics::CASES));
    all.extend(current(&controllers::LATE_CASES));
    // (after the metrics check: it sends bodies cborgate refuses on purpose)
    all.extend(current(&byte_fields::CASES));
    all.extend(current(&operations::CASES));
    all.extend(current(&modes::CASES));
    all.extend(both(&modes::UPGRADE_OFF));
    all.extend(current(&layout::CASES));
    all.extend(current(&cost::CASES));
    all.extend(current(&idle::CASES));
    all
}

/// A half's counts.
#[derive(Default)]
struct Tally {
    passed: usize,
    skipped: usize,
    failed: Vec<String>,
}

/// Start a control plane on `assets` in `dir`, run `selected` against it, stop it.
fn run_half(assets: Assets, dir: &std::path::Path, selected: &[Case], tally: &mut Tally) {
    std::fs::create_dir_all(dir).unwrap();
    let started = Instant::now();
    let version = assets.version.clone();
    let mut suite = Suite::start(assets, dir.to_path_buf());
    eprintln!(
        "control-plane: {version} up in {:.1} s (work directory {})",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    for (name, case) in selected {
        let t = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&mut suite)));
        let secs = t.elapsed().as_secs_f64();
        match r {
            Ok(()) => {
                tally.passed += 1;
                println!("case {name} [{version}] ... ok ({secs:.1} s)");
            }
            Err(e) => match e.downcast_ref::<Skip>() {
                Some(Skip(why)) => {
                    tally.skipped += 1;
                    println!("case {name} [{version}] ... skipped: {why}");
                }
                None => {
                    println!("case {name} [{version}] ... FAILED ({secs:.1} s)");
                    tally.failed.push(format!("{name} [{version}]"));
                }
            },
        }
    }
    drop(suite);
    eprintln!(
        "control-plane: {version} took {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    // `cargo test` passes its own flags (`--nocapture`, `--quiet`, …); the rest are
    // name filters.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if layout::is_namespace_child() {
        std::process::exit(layout::namespace_child());
    }
    let assets = match Assets::from_env() {
        Ok(a) => a,
        Err(why) => {
            println!(
                "control-plane: skipped: {why} (point {} at a folder with kube-apiserver, etcd and kubectl, \
                 and kube-controller-manager and kube-scheduler, to run it; see README \"Tests\")",
                cluster::ASSETS_VAR
            );
            return;
        }
    };
    let legacy = assets.legacy();
    let chosen: Vec<(Case, Servers)> = cases()
        .into_iter()
        .filter(|((name, _), _)| {
            filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
        })
        .filter(|((name, _), _)| cost::wanted(name))
        .collect();
    if chosen.is_empty() {
        println!("control-plane: 0 passed, 0 failed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cborgate-cp-{}", std::process::id()));
    let started = Instant::now();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<Skip>() {
            default_hook(info)
        }
    }));
    let mut halves: Vec<(String, Tally)> = Vec::new();
    let current_version = assets.version.clone();
    let mut tally = Tally::default();
    let all: Vec<Case> = chosen.iter().map(|(c, _)| *c).collect();
    run_half(assets, &dir.join("current"), &all, &mut tally);
    halves.push((current_version, tally));
    let on_both: Vec<Case> = chosen
        .iter()
        .filter(|(_, servers)| *servers == Servers::Both)
        .map(|(c, _)| *c)
        .collect();
    match legacy {
        None => println!(
            "control-plane: pre-CBOR apiserver skipped: {} is not set (point it at a folder with \
             kube-apiserver 1.30, e.g. ../shared/k8s-1.30 unpacked; .ci/run does)",
            cluster::LEGACY_VAR
        ),
        Some(Err(why)) => {
            println!(
                "control-plane: pre-CBOR apiserver: {why} ({})",
                cluster::LEGACY_VAR
            );
            halves.push((
                "pre-CBOR".into(),
                Tally {
                    failed: vec![cluster::LEGACY_VAR.to_string()],
                    ..Tally::default()
                },
            ));
        }
        Some(Ok(_)) if on_both.is_empty() => {}
        Some(Ok(old)) => {
            let version = old.version.clone();
            let mut tally = Tally::default();
            run_half(old, &dir.join("legacy"), &on_both, &mut tally);
            halves.push((version, tally));
        }
    }
    let failed: Vec<String> = halves
        .iter()
        .flat_map(|(_, t)| t.failed.iter().cloned())
        .collect();
    if failed.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!(
            "failed: {}; logs kept in {}",
            failed.join(", "),
            dir.display()
        );
    }
    println!(
        "control-plane: took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let per_server: Vec<String> = halves
        .iter()
        .map(|(v, t)| {
            format!(
                "{v}: {} passed, {} failed, {} skipped",
                t.passed,
                t.failed.len(),
                t.skipped
            )
        })
        .collect();
    println!("control-plane: {}", per_server.join("; "));
    let passed: usize = halves.iter().map(|(_, t)| t.passed).sum();
    let skipped: usize = halves.iter().map(|(_, t)| t.skipped).sum();
    println!(
        "control-plane: {passed} passed, {} failed, {skipped} skipped",
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
