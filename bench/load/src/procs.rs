//! The processes a run measures: `cborgate serve`, and the anchors: haproxy and nginx,
//! each started on loopback with a configuration generated into a temporary directory,
//! and `pingora-floor` (pingora's proxy with empty callbacks, built with this harness),
//! all in front of the same upstream. Every one is stopped by its PID when its
//! handle drops (SIGTERM, then SIGKILL for it and the workers it forked), and gets
//! SIGTERM from the kernel if the harness itself dies (`PR_SET_PDEATHSIG`), so no path
//! leaves a proxy running. CPU and memory are read from `/proc` for the process and its
//! children (nginx's workers), summed.

use crate::pki::Pki;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second in `/proc/PID/stat` (`getconf CLK_TCK`; 100 on Linux).
const CLK_TCK: f64 = 100.0;

/// The CPUs a measured proxy runs on: the ones the harness keeps clear of, so that the
/// load generator and the upstream (which move every body twice) do not preempt it.
/// Without the split, a transcoded LIST was preempted about 16 times (involuntary
/// context switches, 0.6 ms apart: the scheduler's slice) and its codec ran 1.6× slower
/// than the same codec in this process a moment later; pinned apart, 5 switches and the
/// codec's own speed.
#[derive(Clone, Copy)]
pub struct Cpus(Option<libc::cpu_set_t>);

impl Cpus {
    /// Wherever the scheduler puts them (`--shared-cores`, or one CPU only).
    pub fn shared() -> Cpus {
        Cpus(None)
    }

    /// Keep the harness (this thread, and every thread started after it) on the last CPU
    /// it may use, and give the proxies the others; `Err` says why not (one CPU).
    pub fn split() -> Result<(Cpus, String), String> {
        // SAFETY: cpu_set_t is plain bits; sched_{get,set}affinity write and read only it.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut all) != 0 {
                return Err(format!(
                    "sched_getaffinity: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let ours: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &all))
                .collect();
            let Some((&last, rest)) = ours.split_last().filter(|(_, r)| !r.is_empty()) else {
                return Err("one CPU only: the proxies share it with the harness".into());
            };
            let mut harness: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(last, &mut harness);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &harness) != 0 {
                return Err(format!(
                    "sched_setaffinity: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let mut proxies: libc::cpu_set_t = std::mem::zeroed();
            for &c in rest {
                libc::CPU_SET(c, &mut proxies);
            }
            let list = rest
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",");
            Ok((
                Cpus(Some(proxies)),
                format!("the proxy under test on CPU {list}, the harness (load generator, upstream) on CPU {last}"),
            ))
        }
    }

    /// `f`'s result, computed on these CPUs (a thread of its own, pinned there): the
    /// codec's own time is taken where the proxy ran, in the state its turn left that
    /// CPU in, not on the harness's CPU, which the load generator keeps busy.
    pub fn run_on<T: Send>(self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(move || {
                if let Some(set) = &self.0 {
                    // SAFETY: sets this new thread's own affinity from a set made above.
                    unsafe {
                        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                    }
                }
                f()
            })
            .join()
            .expect("the pinned thread")
        })
    }

    /// How many CPUs the proxies get (their thread or worker count, for the anchors).
    pub fn count(self) -> usize {
        match self.0 {
            // SAFETY: reads the bits of a set made above.
            Some(set) => unsafe { libc::CPU_COUNT(&set) as usize },
            None => std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// The proxy a turn measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub enum Kind {
    Haproxy,
    Nginx,
    /// pingora's own proxy with nothing in its callbacks (`src/bin/pingora-floor.rs`).
    Pingora,
    Cborgate,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Haproxy => "haproxy",
            Kind::Nginx => "nginx",
            Kind::Pingora => "pingora",
            Kind::Cborgate => "cborgate",
        }
    }
}

/// An anchor's executable: on `PATH`, or in `/usr/sbin` (where Debian puts both, and
/// which is not on a normal user's `PATH`).
pub fn find(kind: Kind) -> Option<PathBuf> {
    if kind == Kind::Pingora {
        // Built beside this harness, by the same cargo invocation.
        let floor = std::env::current_exe()
            .ok()?
            .with_file_name("pingora-floor");
        return floor.is_file().then_some(floor);
    }
    let name = kind.name();
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The first line of `exe -v` (`HAProxy version 2.6.12…`, `nginx version: nginx/1.22.1`,
/// which nginx writes to stderr); for pingora's floor, what it is (built with the harness,
/// it has no version of its own to print).
pub fn version(kind: Kind, exe: &Path) -> String {
    if kind == Kind::Pingora {
        return "pingora 0.9 with empty callbacks, cborgate's build and threads (pingora-floor)"
            .to_string();
    }
    Command::new(exe)
        .arg("-v")
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = [o.stdout, o.stderr].concat();
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_default()
}

/// A running proxy.
pub struct Proc {
    pub kind: Kind,
    child: Child,
    pub addr: SocketAddr,
    /// The anchors' configuration, pid file, temp paths and error log; removed on drop.
    dir: Option<PathBuf>,
}

impl Proc {
    /// `cborgate serve` in `mode` before `upstream` (a URL), with `extra` flags.
    pub fn cborgate(exe: &Path, upstream: &str, mode: &str, extra: &[String], cpus: Cpus) -> Proc {
        let addr = free_port();
        let admin = free_port();
        let mut cmd = Command::new(exe);
        cmd.args([
            "serve",
            "--listen",
            &addr.to_string(),
            "--admin",
            &admin.to_string(),
            "--upstream",
            upstream,
            "--mode",
            mode,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let p = Proc::spawn(Kind::Cborgate, cmd, addr, None, cpus).expect("start cborgate");
        p.ready().expect("cborgate did not start");
        p
    }

    /// haproxy or nginx at `exe` in front of `upstream`, with one thread or worker per
    /// core, keep-alive to the upstream, no logging, in the foreground; serving TLS with
    /// `tls`'s server certificate when given (haproxy and pingora's floor only).
    pub fn anchor(
        kind: Kind,
        exe: &Path,
        upstream: SocketAddr,
        tls: Option<&Pki>,
        cpus: Cpus,
    ) -> Result<Proc, String> {
        let addr = free_port();
        let dir = std::env::temp_dir().join(format!(
            "cborgate-load-{}-{}-{}",
            kind.name(),
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cores = cpus.count();
        let log = dir.join("stderr.log");
        let mut cmd = Command::new(exe);
        match kind {
            Kind::Haproxy => {
                let cfg = dir.join("haproxy.cfg");
                let crt = tls.map(|p| p.path("server-and-key.pem"));
                std::fs::write(&cfg, haproxy_config(addr, upstream, cores, crt.as_deref()))
                    .map_err(|e| e.to_string())?;
                // -db: foreground, no master process; -f: the configuration.
                cmd.arg("-db").arg("-f").arg(&cfg);
            }
            Kind::Nginx if tls.is_some() => return Err("nginx serves no TLS here".into()),
            Kind::Nginx => {
                let cfg = dir.join("nginx.conf");
                std::fs::write(&cfg, nginx_config(&dir, addr, upstream, cores))
                    .map_err(|e| e.to_string())?;
                // -p: prefix, -e: the error log from the start (before the configuration
                // is read, nginx would open the one compiled in).
                cmd.arg("-p")
                    .arg(&dir)
                    .arg("-c")
                    .arg(&cfg)
                    .arg("-e")
                    .arg(dir.join("error.log"));
            }
            Kind::Pingora => {
                cmd.arg(addr.to_string()).arg(upstream.to_string());
                if let Some(p) = tls {
                    cmd.arg(p.path("server.pem")).arg(p.path("server.key"));
                }
            }
            Kind::Cborgate => unreachable!("cborgate is started by Proc::cborgate"),
        }
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        cmd.stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out);
        let p = Proc::spawn(kind, cmd, addr, Some(dir.clone()), cpus)?;
        p.ready().map_err(|e| {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let err = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            format!("{e}: {}{}", said.trim(), err.trim())
        })?;
        Ok(p)
    }

    fn spawn(
        kind: Kind,
        mut cmd: Command,
        addr: SocketAddr,
        dir: Option<PathBuf>,
        cpus: Cpus,
    ) -> Result<Proc, String> {
        cmd.stdin(Stdio::null());
        // SAFETY: prctl and sched_setaffinity are async-signal-safe system calls; nothing
        // else runs between fork and exec. SIGTERM, not SIGKILL: nginx's master stops its
        // workers on SIGTERM.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if let Some(set) = &cpus.0 {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("start {}: {e}", kind.name()))?;
        Ok(Proc {
            kind,
            child,
            addr,
            dir,
        })
    }

    /// Wait (10 s at most) until the proxy accepts connections, or has exited.
    fn ready(&self) -> Result<(), String> {
        let t = Instant::now();
        loop {
            if std::net::TcpStream::connect(self.addr).is_ok() {
                return Ok(());
            }
            if t.elapsed() > Duration::from_secs(10) {
                return Err(format!("{} did not listen within 10 s", self.kind.name()));
            }
            if !alive(self.child.id()) {
                return Err(format!("{} exited at start", self.kind.name()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process and the processes it forked (nginx's workers).
    fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.child.id()];
        pids.extend(children(self.child.id()));
        pids
    }

    /// User and system CPU time, minor page faults and context switches so far, summed
    /// over the process's threads (`/proc/PID/stat` counts the whole process; context
    /// switches are counted per thread, in `/proc/PID/task/TID/status`) and its children.
    pub fn usage(&self) -> Usage {
        self.pids()
            .into_iter()
            .map(|p| {
                let (voluntary, involuntary) = switches(p);
                Usage {
                    voluntary,
                    involuntary,
                    ..stat_usage(p)
                }
            })
            .fold(Usage::default(), |a, b| Usage {
                user: a.user + b.user,
                sys: a.sys + b.sys,
                faults: a.faults + b.faults,
                voluntary: a.voluntary + b.voluntary,
                involuntary: a.involuntary + b.involuntary,
            })
    }

    /// Start counting this process's futex calls (its threads, the threads they start,
    /// and its children), with `perf` (see [`Futexes`]).
    pub fn count_futexes(&self) -> Result<Futexes, String> {
        Futexes::attach(&self.pids())
    }

    /// A `/proc/PID/status` field in KiB (`VmHWM:`, `VmRSS:`), summed over the processes.
    pub fn status_kib(&self, field: &str) -> u64 {
        self.pids().into_iter().map(|p| status_kib(p, field)).sum()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pids = self.pids();
        // pingora's SIGTERM waits out its grace period: the Rust proxies are killed.
        if matches!(self.kind, Kind::Cborgate | Kind::Pingora) {
            let _ = self.child.kill();
        } else {
            // SAFETY: a signal to the process this handle started, by its PID.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let t = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        // Workers that outlived their master (they should not): by their PIDs.
        for pid in pids.into_iter().skip(1) {
            if alive(pid) {
                // SAFETY: a worker of the process this handle started, by its PID.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The haproxy configuration: `nbthread` = cores, connections to the upstream reused by
/// every client (`http-reuse always`), no log section, generous timeouts; TLS on the
/// listener with the certificate and key in `crt` when given (haproxy's defaults
/// otherwise: TLS 1.3 offered, its session cache and tickets on).
fn haproxy_config(
    listen: SocketAddr,
    upstream: SocketAddr,
    cores: usize,
    crt: Option<&str>,
) -> String {
    let ssl = crt.map_or(String::new(), |c| format!(" ssl crt {c}"));
    format!(
        "global\n\
         \x20   nbthread {cores}\n\
         \x20   maxconn 4096\n\
         defaults\n\
         \x20   mode http\n\
         \x20   option http-keep-alive\n\
         \x20   http-reuse always\n\
         \x20   timeout connect 5s\n\
         \x20   timeout client 120s\n\
         \x20   timeout server 120s\n\
         frontend load\n\
         \x20   bind {listen}{ssl}\n\
         \x20   default_backend upstream\n\
         backend upstream\n\
         \x20   server static {upstream}\n"
    )
}

/// The nginx configuration: one worker per core, `daemon off`, keep-alive to the
/// upstream, `access_log off`, every path under `dir`. Keep-alive request limits are
/// lifted (nginx closes a connection after 1,000 requests by default, which the load
/// generator would count as errors). Responses are buffered in memory only
/// (`proxy_max_temp_file_size 0`: a 5.8 MB LIST is not written to a temp file).
fn nginx_config(dir: &Path, listen: SocketAddr, upstream: SocketAddr, cores: usize) -> String {
    let d = dir.display();
    format!(
        "daemon off;\n\
         master_process on;\n\
         worker_processes {cores};\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/error.log error;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   client_body_temp_path {d}/client_body;\n\
         \x20   proxy_temp_path {d}/proxy;\n\
         \x20   fastcgi_temp_path {d}/fastcgi;\n\
         \x20   uwsgi_temp_path {d}/uwsgi;\n\
         \x20   scgi_temp_path {d}/scgi;\n\
         \x20   keepalive_requests 100000000;\n\
         \x20   keepalive_timeout 120s;\n\
         \x20   upstream static {{\n\
         \x20       server {upstream};\n\
         \x20       keepalive 64;\n\
         \x20       keepalive_requests 100000000;\n\
         \x20   }}\n\
         \x20   server {{\n\
         \x20       listen {listen};\n\
         \x20       location / {{\n\
         \x20           proxy_pass http://static;\n\
         \x20           proxy_http_version 1.1;\n\
         \x20           proxy_set_header Connection \"\";\n\
         \x20           proxy_max_temp_file_size 0;\n\
         \x20       }}\n\
         \x20   }}\n\
         }}\n"
    )
}

pub fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The fields after the parenthesised command name of `/proc/PID/stat` (state is the
/// first of them).
fn stat_fields(pid: u32) -> Vec<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| stat_fields(p).get(1).and_then(|v| v.parse::<u32>().ok()) == Some(pid))
        .collect()
}

fn stat_usage(pid: u32) -> Usage {
    let f = stat_fields(pid);
    // After the name: minflt is the 8th field, utime the 12th, stime the 13th.
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Usage {
        user: Duration::from_secs_f64(n(11) / CLK_TCK),
        sys: Duration::from_secs_f64(n(12) / CLK_TCK),
        faults: n(7) as u64,
        ..Usage::default()
    }
}

/// Voluntary and involuntary context switches of every thread of `pid`, summed
/// (`/proc/PID/status` has the main thread's only). A thread that ended takes its
/// counts with it: the proxies' worker threads live as long as the process.
fn switches(pid: u32) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .map(|status| {
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            (
                field("voluntary_ctxt_switches:"),
                field("nonvoluntary_ctxt_switches:"),
            )
        })
        .fold((0, 0), |(v, i), (dv, di)| (v + dv, i + di))
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What the proxy processes have used so far (`/proc/PID/stat`).
#[derive(Clone, Copy, Default, Debug)]
pub struct Usage {
    pub user: Duration,
    pub sys: Duration,
    /// Minor page faults: fresh pages the kernel handed out (and zeroed).
    pub faults: u64,
    /// Context switches: the thread gave up the CPU (it waited: a futex, epoll), or was
    /// preempted.
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Usage {
    /// What was used between `earlier` and `self`, per one of `n` requests, with the
    /// futex calls counted meanwhile (`None`: not counted).
    pub fn per(self, earlier: Usage, n: u64, futexes: Option<u64>) -> PerRequest {
        let n = n.max(1) as f64;
        let per = |now: u64, then: u64| now.saturating_sub(then) as f64 / n;
        PerRequest {
            user: self.user.saturating_sub(earlier.user).div_f64(n),
            sys: self.sys.saturating_sub(earlier.sys).div_f64(n),
            faults: per(self.faults, earlier.faults),
            voluntary: per(self.voluntary, earlier.voluntary),
            involuntary: per(self.involuntary, earlier.involuntary),
            futexes: futexes.map_or(f64::NAN, |f| f as f64 / n),
        }
    }
}

/// Proxy cost per request (or per watch event, or per TLS connection).
#[derive(Clone, Copy, Debug)]
pub struct PerRequest {
    pub user: Duration,
    pub sys: Duration,
    pub faults: f64,
    pub voluntary: f64,
    pub involuntary: f64,
    /// futex(2) calls; NaN when not counted (no `perf`).
    pub futexes: f64,
}

impl Default for PerRequest {
    fn default() -> PerRequest {
        PerRequest {
            user: Duration::ZERO,
            sys: Duration::ZERO,
            faults: 0.0,
            voluntary: 0.0,
            involuntary: 0.0,
            futexes: f64::NAN,
        }
    }
}

impl PerRequest {
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }

    /// Context switches, voluntary and involuntary.
    pub fn switches(&self) -> f64 {
        self.voluntary + self.involuntary
    }
}

/// The tracepoint counted: every futex(2) system call (glibc's locks and condition
/// variables, Rust's `std` locks and parking, tokio's parked workers all use it).
pub const FUTEX_EVENT: &str = "syscalls:sys_enter_futex";

/// Whether `perf` can count futex calls here: `Ok`, or one line saying why not (not
/// installed, no tracepoints, not permitted). A software tracepoint: it needs no
/// hardware counters (which virtual machines often lack).
pub fn futexes_countable() -> Result<(), String> {
    let out = Command::new("perf")
        .args([
            "stat",
            "-x,",
            "-e",
            FUTEX_EVENT,
            "-o",
            "/dev/null",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("perf is not installed ({e})"))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let first = said.lines().map(str::trim).find(|l| !l.is_empty());
    Err(format!(
        "perf cannot count {FUTEX_EVENT}: {}",
        first.unwrap_or("it failed")
    ))
}

/// `perf stat` attached to a proxy's processes, counting futex calls only while enabled:
/// it starts disabled (`-D -1`) and is switched by commands on a control FIFO, each
/// acknowledged, so the count covers exactly the turn and not perf's own start. Counted
/// in the kernel (no tracing to user space, unlike `strace`), so the turn is hardly
/// slowed; perf runs as a process of its own, whose CPU is not the proxy's. Killed by
/// its PID on drop.
pub struct Futexes {
    perf: Child,
    dir: PathBuf,
    ctl: std::fs::File,
    ack: std::fs::File,
}

impl Futexes {
    fn attach(pids: &[u32]) -> Result<Futexes, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cborgate-load-perf-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let fifo = |name: &str| -> Result<(PathBuf, std::fs::File), String> {
            use std::os::unix::ffi::OsStrExt;
            use std::os::unix::fs::OpenOptionsExt;
            let path = dir.join(name);
            let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                return Err(format!("mkfifo: {}", std::io::Error::last_os_error()));
            }
            // Read-write, so opening never waits for perf, and without blocking reads,
            // so a perf that died cannot hang the harness (see `command`).
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, f))
        };
        let (ctl_path, ctl) = fifo("ctl")?;
        let (ack_path, ack) = fifo("ack")?;
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let mut cmd = Command::new("perf");
        cmd.args(["stat", "-x,", "-e", FUTEX_EVENT, "-D", "-1", "-o"])
            .arg(dir.join("out"))
            .arg("--control")
            .arg(format!(
                "fifo:{},{}",
                ctl_path.display(),
                ack_path.display()
            ))
            .arg("-p")
            .arg(list.join(","))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; perf goes when the harness does.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let perf = cmd.spawn().map_err(|e| format!("start perf: {e}"))?;
        Ok(Futexes {
            perf,
            dir,
            ctl,
            ack,
        })
    }

    /// Send `what` (`enable`, `disable`) and wait (5 s at most) for perf's `ack`: once
    /// perf acknowledges, it is attached and counting (or not).
    fn command(&mut self, what: &str) -> Result<(), String> {
        use std::io::{Read, Write};
        self.ctl
            .write_all(format!("{what}\n").as_bytes())
            .map_err(|e| format!("perf control: {e}"))?;
        let t = Instant::now();
        let mut got = Vec::new();
        while !got.windows(3).any(|w| w == b"ack") {
            if t.elapsed() > Duration::from_secs(5) || !alive(self.perf.id()) {
                return Err(format!("perf did not acknowledge `{what}`"));
            }
            let mut buf = [0u8; 16];
            match self.ack.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(format!("perf control: {e}")),
            }
        }
        Ok(())
    }

    pub fn enable(&mut self) -> Result<(), String> {
        self.command("enable")
    }

    /// Stop counting; the futex calls counted while enabled.
    pub fn stop(mut self) -> Result<u64, String> {
        self.command("disable")?;
        // SAFETY: a signal to the perf this handle started, by its PID.
        unsafe { libc::kill(self.perf.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while matches!(self.perf.try_wait(), Ok(None)) {
            if t.elapsed() > Duration::from_secs(5) {
                return Err("perf did not stop within 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = std::fs::read_to_string(self.dir.join("out")).map_err(|e| e.to_string())?;
        parse_perf_count(&out, FUTEX_EVENT)
    }
}

impl Drop for Futexes {
    fn drop(&mut self) {
        let _ = self.perf.kill();
        let _ = self.perf.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The count of `event` in `perf stat -x,` output (`COUNT,UNIT,EVENT,…`), summed over
/// its lines; `<not counted>` (no thread of the process ran while enabled) is 0.
fn parse_perf_count(out: &str, event: &str) -> Result<u64, String> {
    let mut found = None;
    for line in out.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < 3 || fields[2] != event {
            continue;
        }
        let n = match fields[0] {
            "<not counted>" => 0,
            v => v
                .parse::<u64>()
                .map_err(|_| format!("perf counted {event} as `{v}`"))?,
        };
        found = Some(found.unwrap_or(0) + n);
    }
    found.ok_or_else(|| format!("perf wrote no count of {event}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_the_addresses_and_the_core_count() {
        let l: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let u: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let h = haproxy_config(l, u, 3, None);
        assert!(h.contains("nbthread 3\n"));
        assert!(h.contains("bind 127.0.0.1:4000\n"));
        let tls = haproxy_config(l, u, 3, Some("/tmp/x/s.pem"));
        assert!(tls.contains("bind 127.0.0.1:4000 ssl crt /tmp/x/s.pem\n"));
        assert!(h.contains("server static 127.0.0.1:5000\n"));
        assert!(h.contains("http-reuse always\n"));
        assert!(!h.contains("log "));
        let n = nginx_config(Path::new("/tmp/x"), l, u, 3);
        assert!(n.contains("worker_processes 3;\n"));
        assert!(n.contains("daemon off;\n"));
        assert!(n.contains("access_log off;\n"));
        assert!(n.contains("listen 127.0.0.1:4000;\n"));
        assert!(n.contains("server 127.0.0.1:5000;\n"));
        assert!(n.contains("pid /tmp/x/nginx.pid;\n"));
    }

    #[test]
    fn perf_counts_are_read_and_summed() {
        let out = "# started on Sat Nov 28 09:52:38 2026\n\n\
                   1234,,syscalls:sys_enter_futex,226565360,100.00,,\n\
                   <not counted>,,syscalls:sys_enter_futex,0,100.00,,\n\
                   7,,syscalls:sys_enter_futex,1000,100.00,,\n\
                   9,,syscalls:sys_enter_read,1000,100.00,,\n";
        assert_eq!(parse_perf_count(out, FUTEX_EVENT), Ok(1241));
        assert!(parse_perf_count("", FUTEX_EVENT).is_err());
        assert!(parse_perf_count(
            "<not supported>,,syscalls:sys_enter_futex,0,100.00,,\n",
            FUTEX_EVENT
        )
        .is_err());
    }

    #[test]
    fn context_switches_of_every_thread_are_summed() {
        // This test's process has several threads (the test harness's); the sum over
        // them is at least the main thread's own count.
        let me = std::process::id();
        let status = std::fs::read_to_string(format!("/proc/{me}/status")).unwrap();
        let main_thread: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap();
        let t = std::thread::spawn(|| std::thread::sleep(Duration::from_millis(20)));
        let (v, _) = switches(me);
        t.join().unwrap();
        assert!(v >= main_thread, "{v} < {main_thread}");
        assert!(v > 0);
    }

    #[test]
    fn a_child_is_counted_with_its_parent() {
        let mut c = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(children(me).contains(&c.id()));
        assert!(alive(c.id()));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(!alive(c.id()));
        assert!(!children(me).contains(&c.id()));
    }
}
