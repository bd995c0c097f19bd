//! What cborgate costs next to the apiserver it fronts, and next to a plain proxy
//! doing the same job (a measurement, not a timed test; run with
//! `CBORGATE_CP_COST=1`, and `CBORGATE_BIN` naming a release build;
//! `bench/control-plane.md` keeps the table, `CBORGATE_CP_COST_OUT=FILE` writes it).
//!
//! The same workload runs twice against the suite's apiserver, each time in a
//! namespace of its own: once through a cborgate of its own, once through haproxy
//! in cborgate's place, each serving the same RSA-2048 certificate (kubeadm makes
//! RSA-2048 keys) with its own kube-controller-manager and kube-scheduler on x509
//! kubeconfigs pointing at it. The workload: the controller manager reconciles
//! 300 Deployments (300 ReplicaSets, 300 Pods, their scheduling events) while
//! 1,000 ConfigMaps are created, half of them by a CBOR client, then relists every
//! informer (it is restarted) and reconciles one more. CPU seconds (user + system,
//! from /proc) of the proxy, kube-apiserver, etcd, the controller manager and the
//! scheduler over each half, and peak RSS. Without haproxy
//! (`/usr/sbin/haproxy`, or `CBORGATE_HAPROXY`) its half is skipped in one line.

use crate::cbor::{self, Item};
use crate::cbor_client::{ACCEPT, UA};
use crate::cluster::{self, wait_gone, Gate, Service};
use crate::controllers::{create, deployment, namespace};
use crate::http::Client;
use crate::procs::{eventually, free_port, listening, poll};
use crate::support::pki::Leaf;
use crate::Suite;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const CASES: [crate::Case; 1] = [("cost_against_the_apiserver", cost)];

/// The cost case runs only when asked for.
pub fn wanted(name: &str) -> bool {
    !name.starts_with("cost_") || std::env::var_os("CBORGATE_CP_COST").is_some()
}

/// utime + stime of `pid` (all its threads), in seconds.
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

/// The proxies, in the table's order.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Cborgate,
    Haproxy,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cborgate => "cborgate",
            Kind::Haproxy => "haproxy",
        }
    }
}

/// A proxy started for one half: the process, where it listens, and haproxy's
/// stats socket.
struct Proxy {
    svc: Service,
    addr: String,
    stats: Option<PathBuf>,
}

/// A serving certificate on an RSA-2048 key, as kubeadm makes it, signed by the
/// cluster CA (rcgen on ring cannot make RSA keys: openssl does).
fn rsa_serving(s: &Suite) -> Leaf {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output();
    let pem = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        _ => crate::skip("no openssl to make an RSA-2048 serving key with"),
    };
    s.pki.ca.server_with_key(
        "cost-serving",
        "kube-apiserver",
        &["localhost", "127.0.0.1"],
        &pem,
    )
}

/// `cert` and `key` in one PEM file, as haproxy's `crt` takes them.
fn pem_pair(dir: &Path, stem: &str, leaf: &Leaf) -> String {
    let path = dir.join(format!("{stem}.pem"));
    let text = std::fs::read_to_string(&leaf.cert_path).unwrap()
        + &std::fs::read_to_string(&leaf.key_path).unwrap();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// haproxy's configuration as an operator would write it in front of
/// kube-apiserver, doing what cborgate does for the same clients: TLS with HTTP/2
/// and HTTP/1.1 to clients, client certificates verified against the cluster CA
/// (optional, so that token clients work, as the apiserver allows both), every
/// X-Remote-* header a client sent removed, then the verified certificate's CN and
/// each O (up to four) sent as front-proxy headers; X-Forwarded-For; upstream TLS
/// verified against the cluster CA with the front-proxy client certificate,
/// HTTP/2 offered (as cborgate's `upstream.http2 = "auto"`) and connections shared
/// between clients (`http-reuse always`); one log line per request (cborgate
/// writes one too).
fn haproxy_config(s: &Suite, serving: &Leaf, listen: &str, stats: &Path) -> String {
    let serving = pem_pair(&s.dir, "cost-haproxy-serving", serving);
    let front = pem_pair(
        &s.dir,
        "cost-haproxy-front-proxy",
        &s.pki.front_proxy_client,
    );
    let ca = &s.pki.ca.path;
    let groups: String = (1..=4)
        .map(|n| {
            format!(
                "    http-request add-header X-Remote-Group %[ssl_c_s_dn(O,{n})] if has_cert cert_ok {{ ssl_c_s_dn(O,{n}) -m found }}\n"
            )
        })
        .collect();
    format!(
        "global
    stats socket {stats} mode 600 level user
    log stdout format raw local0
defaults
    mode http
    log global
    option httplog
    option forwardfor
    timeout connect 10s
    timeout client 1h
    timeout server 1h
    timeout http-keep-alive 90s
frontend kube-apiserver
    bind {listen} ssl crt {serving} ca-file {ca} verify optional alpn h2,http/1.1
    acl has_cert ssl_c_used
    acl cert_ok ssl_c_verify 0
    http-request del-header X-Remote- -m beg
    http-request set-header X-Remote-User %[ssl_c_s_dn(CN)] if has_cert cert_ok
{groups}    default_backend apiserver
backend apiserver
    http-reuse always
    server api {upstream} ssl verify required verifyhost localhost ca-file {ca} crt {front} alpn h2,http/1.1
",
        stats = stats.display(),
        upstream = s.api.addr,
    )
}

/// haproxy's binary, if there is one.
fn haproxy_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("CBORGATE_HAPROXY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/haproxy"));
    bin.is_file().then_some(bin)
}

fn start_proxy(s: &mut Suite, kind: Kind, serving: &Leaf, haproxy: &Path) -> Proxy {
    let listen = format!("127.0.0.1:{}", free_port());
    match kind {
        Kind::Cborgate => {
            // The suite's Gate, on this half's serving certificate: the suite's own
            // (and its running cborgate) are unchanged.
            let suite_serving = std::mem::replace(&mut s.pki.gate_serving, clone_leaf(serving));
            // `CBORGATE_CP_COST_FLAGS`: more flags for this half's cborgate (`--threads 1`).
            let flags = std::env::var("CBORGATE_CP_COST_FLAGS").unwrap_or_default();
            let flags: Vec<&str> = flags.split_whitespace().collect();
            let gate = Gate::start(
                &s.dir,
                "cost-cborgate",
                &s.pki,
                &s.api.addr,
                "legacy",
                &listen,
                &flags,
            );
            s.pki.gate_serving = suite_serving;
            Proxy {
                svc: gate.svc,
                addr: listen,
                stats: None,
            }
        }
        Kind::Haproxy => {
            let stats = s.dir.join("cost-haproxy.sock");
            let cfg = s.dir.join("cost-haproxy.cfg");
            std::fs::write(&cfg, haproxy_config(s, serving, &listen, &stats)).unwrap();
            let check = std::process::Command::new(haproxy)
                .args(["-c", "-q", "-f"])
                .arg(&cfg)
                .output()
                .unwrap();
            assert!(
                check.status.success(),
                "haproxy refuses {}: {}",
                cfg.display(),
                String::from_utf8_lossy(&check.stderr)
            );
            let mut svc = Service::start(
                &s.dir,
                "cost-haproxy",
                haproxy.to_path_buf(),
                vec!["-db".into(), "-f".into(), cfg.to_str().unwrap().into()],
                &[],
            );
            eventually(30, "haproxy listening", || {
                svc.check_alive();
                listening(&listen)
            });
            Proxy {
                svc,
                addr: listen,
                stats: Some(stats),
            }
        }
    }
}

fn clone_leaf(l: &Leaf) -> Leaf {
    Leaf {
        cert_path: l.cert_path.clone(),
        key_path: l.key_path.clone(),
        der: l.der.clone(),
        key: l.key.clone_key(),
    }
}

/// haproxy's `show stat`: client connections its frontend accepted, and
/// connections its backend opened to the apiserver and reused.
fn haproxy_stats(sock: &Path) -> [u64; 3] {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(sock).unwrap();
    c.write_all(b"show stat\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let field = |sv: &str, name: &str| -> u64 {
        let i = head.iter().position(|h| *h == name).unwrap();
        let row = rows.iter().find(|r| r.get(1) == Some(&sv)).unwrap();
        row[i].parse().unwrap_or(0)
    };
    [
        field("FRONTEND", "conn_tot"),
        field("BACKEND", "connect"),
        field("BACKEND", "reuse"),
    ]
}

/// What the apiserver's audit log says of a half's requests.
#[derive(Default)]
struct Audit {
    /// Requests it finished (`ResponseComplete`).
    requests: u64,
    /// The test client's (the admin's).
    ours: u64,
    /// The 415s, by user, verb and resource.
    unsupported: std::collections::BTreeMap<String, u64>,
}

/// The audit log's events from byte `from` on.
fn audited(path: &Path, from: u64) -> Audit {
    let text = std::fs::read(path).unwrap();
    let mut a = Audit::default();
    for line in text[from as usize..].split(|b| *b == b'\n') {
        let Ok(e) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if e["stage"] != "ResponseComplete" {
            continue;
        }
        a.requests += 1;
        a.ours += u64::from(e["user"]["username"] == "kubernetes-admin");
        if e["responseStatus"]["code"] == 415 {
            let who = format!(
                "{} {} {}",
                e["user"]["username"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                e["objectRef"]["resource"].as_str().unwrap_or_default()
            );
            *a.unsupported.entry(who).or_default() += 1;
        }
    }
    a
}

/// The holder of leader-election Lease `name`, or "".
fn lease_holder(c: &Client, name: &str) -> String {
    c.try_request(
        "GET",
        &format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}"),
        &[("Accept", "application/json")],
        None,
    )
    .ok()
    .filter(|r| r.status == 200)
    .and_then(|r| {
        r.json()["spec"]["holderIdentity"]
            .as_str()
            .map(String::from)
    })
    .unwrap_or_default()
}

/// Wait until both leader-election Leases have a holder other than `old`'s.
fn new_leaders(c: &Client, old: &[String; 2]) {
    let names = ["kube-controller-manager", "kube-scheduler"];
    let mut now = [String::new(), String::new()];
    eventually(120, "the new controller manager and scheduler lead", || {
        for (i, n) in names.iter().enumerate() {
            now[i] = lease_holder(c, n);
        }
        (0..2).all(|i| !now[i].is_empty() && now[i] != old[i])
    });
}

/// Wait until `path` lists `n` items; the connections it took. The test asks for one item at a time (the
/// count is that and `remainingItemCount`) on one kept-alive connection, so that
/// its own waiting, which lasts as long as the controllers take, adds little to
/// either half.
fn wait_items(c: &Client, path: &str, n: u64) -> u64 {
    let url = format!("{path}?limit=1");
    let mut conn = c.conn();
    let mut connections = 1;
    let mut last = String::new();
    let found = poll(Duration::from_secs(600), || {
        c.send(
            &mut conn,
            "GET",
            &url,
            &[("Accept", "application/json")],
            None,
        );
        let Ok(r) = conn.try_response("GET") else {
            conn = c.conn();
            connections += 1;
            return None;
        };
        last = format!("{} {}", r.status, r.text());
        if r.status != 200 {
            return None;
        }
        let v = r.json();
        let count = v["items"].as_array().map_or(0, |i| i.len() as u64)
            + v["metadata"]["remainingItemCount"].as_u64().unwrap_or(0);
        (count == n).then_some(())
    });
    assert!(
        found.is_some(),
        "not within 600 s: {n} items at {path}; last answer to GET {url}: {last}"
    );
    connections
}

/// What one half measured.
struct Half {
    kind: Kind,
    secs: f64,
    /// CPU seconds and peak RSS (MiB) of each of `PROCS`.
    cpu: [f64; 5],
    peak: [f64; 5],
    audit: Audit,
    /// ConfigMaps the CBOR client got a CBOR answer for, and the 415s it got.
    cbor_answers: u64,
    cbor_415: u64,
    /// New TLS connections the test client opened.
    connections: u64,
    haproxy: Option<[u64; 3]>,
    /// Proxy CPU seconds per new TLS connection carrying one GET, after the workload.
    per_connection: f64,
}

/// New TLS connections, one GET each, that measure what a connection costs a proxy.
const CONNECTIONS: usize = 200;

const PROCS: [&str; 5] = [
    "proxy",
    "kube-apiserver",
    "etcd",
    "kube-controller-manager",
    "kube-scheduler",
];

/// ConfigMap `i`, by the CBOR client unless it fell back to JSON after a 415 (as
/// client-go does: later requests of that client go as JSON, docs/wire.md §5);
/// whether the answer was CBOR, and whether this one got the 415.
fn configmap(c: &Client, ns: &str, i: usize, cbor: bool) -> (bool, bool) {
    let name = format!("cm{i}");
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    if cbor {
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
        let r = c.request(
            "POST",
            &path,
            &[
                ("Accept", ACCEPT),
                ("User-Agent", UA),
                ("Content-Type", "application/cbor"),
            ],
            Some(&cbor::body(&cm)),
        );
        match r.status {
            201 => return (r.header("content-type") == Some("application/cbor"), false),
            415 => {}
            st => panic!("POST {path} as CBOR: {st} {}", r.text()),
        }
    }
    create(
        c,
        &path,
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name},"data":{"i":i.to_string(),"pad":"x".repeat(512)}}),
    );
    (false, cbor)
}

/// The workload through `c` in `ns`, measured; `kcm` is restarted for the relist.
fn workload(
    s: &Suite,
    kind: Kind,
    p: &Proxy,
    kcm: &mut Service,
    sched: &Service,
    ns: &str,
) -> Half {
    let c = Client::with_leaf(&p.addr, &s.pki.ca.path, &s.pki.admin);
    namespace(&c, ns);
    let pids = [
        p.svc.pid(),
        s.api.svc.pid(),
        s.etcd.pid(),
        kcm.pid(),
        sched.pid(),
    ];
    let stats0 = p.stats.as_deref().map(haproxy_stats);
    let audit0 = std::fs::metadata(&s.api.audit).unwrap().len();
    let before: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
    let t = Instant::now();
    // Every write on a new TLS connection (as kubectl runs make them).
    let mut connections = 0;
    for i in 0..300 {
        create(
            &c,
            &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            &deployment(ns, &format!("d{i}"), 1),
        );
    }
    connections += 300;
    let (mut cbor_answers, mut cbor_415, mut cbor) = (0, 0, true);
    for i in 0..1000 {
        let (answer, refused) = configmap(&c, ns, i, i % 2 == 1 && cbor);
        cbor_answers += u64::from(answer);
        cbor_415 += u64::from(refused);
        connections += 1 + u64::from(refused);
        cbor &= !refused;
    }
    let rs = format!("/apis/apps/v1/namespaces/{ns}/replicasets");
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    connections += wait_items(&c, &rs, 300) + wait_items(&c, &pods, 300);
    // Relist: a new controller manager lists every informer again, through the proxy.
    let old_kcm = cpu_seconds(pids[3]) - before[3];
    kcm.restart();
    create(
        &c,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &deployment(ns, "after-relist", 1),
    );
    connections += 1 + wait_items(&c, &rs, 301) + wait_items(&c, &pods, 301);
    let secs = t.elapsed().as_secs_f64();
    let now = [p.svc.pid(), pids[1], pids[2], kcm.pid(), pids[4]];
    let mut cpu = [0.0; 5];
    let mut peak = [0.0; 5];
    for i in 0..5 {
        cpu[i] = if i == 3 {
            old_kcm + cpu_seconds(now[3])
        } else {
            cpu_seconds(now[i]) - before[i]
        };
        peak[i] = peak_mib(now[i]);
    }
    let audit = audited(&s.api.audit, audit0);
    let haproxy = stats0.map(|a| {
        let b = haproxy_stats(p.stats.as_deref().unwrap());
        [b[0] - a[0], b[1] - a[1], b[2] - a[2]]
    });
    // After the workload: what one new TLS connection with one small GET costs
    // the proxy, to split the workload's CPU into handshakes and the rest.
    let before = cpu_seconds(pids[0]);
    for _ in 0..CONNECTIONS {
        let r = c.request("GET", "/version", &[("Accept", "application/json")], None);
        assert_eq!(r.status, 200, "GET /version: {}", r.text());
    }
    let per_connection = (cpu_seconds(pids[0]) - before) / CONNECTIONS as f64;
    Half {
        kind,
        secs,
        cpu,
        peak,
        audit,
        cbor_answers,
        cbor_415,
        connections,
        haproxy,
        per_connection,
    }
}

fn cost(s: &mut Suite) {
    let haproxy = haproxy_bin();
    let mut kinds = vec![Kind::Cborgate];
    match &haproxy {
        Some(_) if std::env::var("CBORGATE_CP_COST_FIRST").as_deref() == Ok("haproxy") => {
            kinds.insert(0, Kind::Haproxy)
        }
        Some(_) => kinds.push(Kind::Haproxy),
        None => println!(
            "cost: haproxy half skipped: no haproxy at /usr/sbin/haproxy (or CBORGATE_HAPROXY)"
        ),
    }
    let serving = rsa_serving(s);
    // The suite's controllers go through the suite's cborgate: they stop for the
    // measurement, and come back at the end.
    let mut leaders = [
        lease_holder(&s.direct, "kube-controller-manager"),
        lease_holder(&s.direct, "kube-scheduler"),
    ];
    s.kcm.as_mut().unwrap().stop();
    s.sched.as_mut().unwrap().stop();
    let mut halves = Vec::new();
    for kind in kinds {
        let p = start_proxy(
            s,
            kind,
            &serving,
            haproxy.as_deref().unwrap_or(Path::new("")),
        );
        let name = kind.name();
        let mut kcm = cluster::controller_manager(
            &s.assets,
            &s.dir,
            &s.pki,
            &format!("cost-kcm-{name}"),
            &p.addr,
            &[],
        );
        let sched = cluster::scheduler(&s.assets, &s.dir, &s.pki, &p.addr);
        new_leaders(&s.direct, &leaders);
        let ns = format!("cp-cost-{name}");
        halves.push(workload(s, kind, &p, &mut kcm, &sched, &ns));
        // The next half starts from the same objects: this one's go, through its
        // own controllers, outside the measurement.
        let c = Client::with_leaf(&p.addr, &s.pki.ca.path, &s.pki.admin);
        crate::controllers::delete(&c, &format!("/api/v1/namespaces/{ns}"));
        wait_gone(
            &s.direct,
            600,
            &format!("namespace {ns} deleted"),
            &format!("/api/v1/namespaces/{ns}"),
        );
        leaders = [
            lease_holder(&s.direct, "kube-controller-manager"),
            lease_holder(&s.direct, "kube-scheduler"),
        ];
        drop(kcm);
        drop(sched);
        drop(p);
    }
    s.kcm.as_mut().unwrap().restart();
    s.sched = Some(cluster::scheduler(&s.assets, &s.dir, &s.pki, &s.gate.addr));
    let table = table(&halves);
    println!("{table}");
    if let Some(out) = std::env::var_os("CBORGATE_CP_COST_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}

/// The table `bench/control-plane.md` keeps.
fn table(halves: &[Half]) -> String {
    let run = |args: &[&str], dir: Option<&str>| {
        let mut c = std::process::Command::new(args[0]);
        c.args(&args[1..]);
        if let Some(d) = dir {
            c.current_dir(d);
        }
        c.output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let commit = run(
        &["git", "rev-parse", "--short", "HEAD"],
        Some(env!("CARGO_MANIFEST_DIR")),
    );
    let date = run(&["date", "-u", "+%Y-%m-%d %H:%M UTC"], None);
    let bin = std::env::var("CBORGATE_BIN")
        .unwrap_or_else(|_| "debug build (set CBORGATE_BIN to a release build)".into());
    let order: Vec<&str> = halves.iter().map(|h| h.kind.name()).collect();
    let mut t = format!(
        "Measured {date} at commit {commit}, cborgate binary: {bin}; halves in the order {}.\n\n| | {} |\n|---|{}\n",
        order.join(", then "),
        order
            .iter()
            .map(|n| format!("through {n}"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---:|".repeat(halves.len()),
    );
    let mut row = |label: &str, cell: &dyn Fn(&Half) -> String| {
        let cells: Vec<String> = halves.iter().map(cell).collect();
        t.push_str(&format!("| {label} | {} |\n", cells.join(" | ")));
    };
    row("workload, s", &|h| format!("{:.0}", h.secs));
    for (i, name) in PROCS.iter().enumerate() {
        let label = if i == 0 {
            "proxy CPU s".to_string()
        } else {
            format!("{name} CPU s")
        };
        row(&label, &|h| format!("{:.1}", h.cpu[i]));
    }
    row("proxy / kube-apiserver CPU", &|h| {
        format!("{:.2}", h.cpu[0] / h.cpu[1])
    });
    for (i, name) in PROCS.iter().enumerate() {
        row(&format!("{name} peak RSS, MiB"), &|h| {
            format!("{:.0}", h.peak[i])
        });
    }
    row("requests the apiserver finished (audit)", &|h| {
        h.audit.requests.to_string()
    });
    row("of them the test client's", &|h| h.audit.ours.to_string());
    row("new TLS connections the test client opened", &|h| {
        h.connections.to_string()
    });
    row("415s (audit)", &|h| {
        h.audit.unsupported.values().sum::<u64>().to_string()
    });
    row("CBOR client: answers in CBOR / 415s then JSON", &|h| {
        format!("{} / {}", h.cbor_answers, h.cbor_415)
    });
    row(
        "haproxy: client connections / upstream opened / reused",
        &|h| {
            h.haproxy
                .map(|[a, b, c]| format!("{a} / {b} / {c}"))
                .unwrap_or_else(|| "–".into())
        },
    );
    row(
        &format!(
            "proxy CPU per new TLS connection with one GET, ms ({CONNECTIONS} after the workload)"
        ),
        &|h| format!("{:.2}", h.per_connection * 1e3),
    );
    row(
        "test client's connections × that, share of proxy CPU",
        &|h| {
            format!(
                "{:.0}%",
                100.0 * h.connections as f64 * h.per_connection / h.cpu[0]
            )
        },
    );
    for h in halves {
        if !h.audit.unsupported.is_empty() {
            let who: Vec<String> = h
                .audit
                .unsupported
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            t.push_str(&format!(
                "\n415s through {} (user verb resource: count): {}\n",
                h.kind.name(),
                who.join("; ")
            ));
        }
    }
    let of = |k: Kind| halves.iter().find(|h| h.kind == k);
    if let (Some(g), Some(h)) = (of(Kind::Cborgate), of(Kind::Haproxy)) {
        t.push_str(&format!(
            "\ncborgate / kube-apiserver: {:.3}; haproxy / kube-apiserver: {:.3}; cborgate / haproxy: {:.2}\n",
            g.cpu[0] / g.cpu[1],
            h.cpu[0] / h.cpu[1],
            g.cpu[0] / h.cpu[0],
        ));
    }
    t
}
