//! What an idle cborgate costs (a measurement, not a timed test; run with
//! `CBORGATE_CP_COST=1` and `CBORGATE_BIN` naming a release build, as the cost case):
//! a cborgate of its own in front of the suite's apiserver, TLS both sides with the
//! front-proxy client certificate upstream (as deploy/README.md sets it up; upgrade mode in front of the suite's second, CBOR-enabled apiserver), ready, and
//! then no client at all for `CBORGATE_CP_IDLE_SECONDS` (60). Its readiness probe still
//! runs every 2 s. Its CPU over that time, from the scheduler's per-thread nanoseconds
//! (`/proc/PID/task/*/schedstat`) and from the process's clock ticks (`/proc/PID/stat`,
//! which also counts threads that ended), as a share of one core, in legacy mode and in
//! upgrade mode (whose probe also asks for a SelfSubjectReview in CBOR). And the names
//! of its threads: pingora's timer wheel runs a thread that wakes every 10 ms for good
//! once any timeout is given to it.

use crate::cluster::Gate;
use crate::procs::{eventually, free_port};
use crate::Suite;
use std::time::{Duration, Instant};

pub const CASES: [crate::Case; 1] = [("cost_idle", idle)];

/// Nanoseconds on a CPU of every thread of `pid` now.
fn thread_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The names of `pid`'s threads.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

fn idle(s: &mut Suite) {
    let secs: u64 = std::env::var("CBORGATE_CP_IDLE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut lines = Vec::new();
    for mode in ["legacy", "upgrade"] {
        let listen = format!("127.0.0.1:{}", free_port());
        let name = format!("cborgate-idle-{mode}");
        // Upgrade mode is ready only in front of a server that speaks CBOR.
        let upstream = if mode == "upgrade" {
            s.api_cbor();
            s.api_cbor.as_ref().unwrap().addr.clone()
        } else {
            s.api.addr.clone()
        };
        let mut gate = Gate::start(&s.dir, &name, &s.pki, &upstream, mode, &listen, &[]);
        // One request through it, as a gate that has served traffic and gone quiet.
        let client = gate.client(&s.pki, &s.pki.admin);
        assert_eq!(client.get_json("/version")["major"], "1");
        eventually(30, "cborgate ready", || gate.readyz() == Some(200));
        // Let the start-up's own work settle first.
        std::thread::sleep(Duration::from_secs(3));
        let pid = gate.svc.pid();
        let (ns0, ticks0, t) = (
            thread_ns(pid),
            crate::cost::cpu_seconds(pid),
            Instant::now(),
        );
        // The measurement's own length, not a wait for something to happen.
        std::thread::sleep(Duration::from_secs(secs));
        let wall = t.elapsed().as_secs_f64();
        let ns = thread_ns(pid) - ns0;
        let ticks = crate::cost::cpu_seconds(pid) - ticks0;
        let names = thread_names(pid);
        gate.svc.check_alive();
        assert_eq!(gate.readyz(), Some(200), "{name}: still ready");
        gate.svc.stop();
        lines.push(format!(
            "| {mode} | {wall:.0} | {:.1} | {:.3}% | {:.1} | {} |",
            ns as f64 / 1e6,
            ns as f64 / 1e9 / wall * 100.0,
            ticks * 1000.0,
            names.join(", ")
        ));
    }
    let table = format!(
        "| mode | seconds idle | CPU ms (threads' schedstat) | share of one core | CPU ms (clock ticks, 10 ms each) | its threads |\n|---|---:|---:|---:|---:|---|\n{}\n",
        lines.join("\n")
    );
    println!("{table}");
    if let Some(out) = std::env::var_os("CBORGATE_CP_IDLE_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
