//! The processes a run measures: `cborgate serve`, and the anchors: haproxy and nginx,
//! each started on loopback with a configuration generated into a temporary directory,
//! and `pingora-floor` (pingora's proxy with empty callbacks, built with this harness),
//! all in front of the same upstream. Every one is stopped by its PID when its
//! handle drops (SIGTERM, then SIGKILL for it and the workers it forked), and gets
//! SIGTERM from the kernel if the harness itself dies (`PR_SET_PDEATHSIG`), so no path
//! leaves a proxy running. CPU and memory are read from `/proc` for the process and its
//! children (nginx's workers), summed.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second in `/proc/PID/stat` (`getconf CLK_TCK`; 100 on Linux).
const CLK_TCK: f64 = 100.0;

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
    pub fn cborgate(exe: &Path, upstream: &str, mode: &str, extra: &[String]) -> Proc {
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
        let p = Proc::spawn(Kind::Cborgate, cmd, addr, None).expect("start cborgate");
        p.ready().expect("cborgate did not start");
        p
    }

    /// haproxy or nginx at `exe` in front of `upstream`, with one thread or worker per
    /// core, keep-alive to the upstream, no logging, in the foreground.
    pub fn anchor(kind: Kind, exe: &Path, upstream: SocketAddr) -> Result<Proc, String> {
        let addr = free_port();
        let dir = std::env::temp_dir().join(format!(
            "cborgate-load-{}-{}-{}",
            kind.name(),
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let log = dir.join("stderr.log");
        let mut cmd = Command::new(exe);
        match kind {
            Kind::Haproxy => {
                let cfg = dir.join("haproxy.cfg");
                std::fs::write(&cfg, haproxy_config(addr, upstream, cores))
                    .map_err(|e| e.to_string())?;
                // -db: foreground, no master process; -f: the configuration.
                cmd.arg("-db").arg("-f").arg(&cfg);
            }
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
            }
            Kind::Cborgate => unreachable!("cborgate is started by Proc::cborgate"),
        }
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        cmd.stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out);
        let p = Proc::spawn(kind, cmd, addr, Some(dir.clone()))?;
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
    ) -> Result<Proc, String> {
        cmd.stdin(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        // SIGTERM, not SIGKILL: nginx's master stops its workers on SIGTERM.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
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

    /// User and system CPU time and minor page faults so far, summed over the process's
    /// threads (`/proc/PID/stat` counts the whole process) and its children.
    pub fn usage(&self) -> Usage {
        self.pids()
            .into_iter()
            .map(stat_usage)
            .fold(Usage::default(), |a, b| Usage {
                user: a.user + b.user,
                sys: a.sys + b.sys,
                faults: a.faults + b.faults,
            })
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
/// every client (`http-reuse always`), no log section, generous timeouts.
fn haproxy_config(listen: SocketAddr, upstream: SocketAddr, cores: usize) -> String {
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
         \x20   bind {listen}\n\
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
    }
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
}

impl Usage {
    /// What was used between `earlier` and `self`, per one of `n` requests.
    pub fn per(self, earlier: Usage, n: u64) -> PerRequest {
        let n = n.max(1) as f64;
        PerRequest {
            user: self.user.saturating_sub(earlier.user).div_f64(n),
            sys: self.sys.saturating_sub(earlier.sys).div_f64(n),
            faults: self.faults.saturating_sub(earlier.faults) as f64 / n,
        }
    }
}

/// Proxy cost per request (or per watch event).
#[derive(Clone, Copy, Default, Debug)]
pub struct PerRequest {
    pub user: Duration,
    pub sys: Duration,
    pub faults: f64,
}

impl PerRequest {
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_the_addresses_and_the_core_count() {
        let l: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let u: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let h = haproxy_config(l, u, 3);
        assert!(h.contains("nbthread 3\n"));
        assert!(h.contains("bind 127.0.0.1:4000\n"));
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
