//! The processes the suite starts: each with its log in the work directory,
//! stopped (SIGTERM, then SIGKILL) when its handle drops, and killed by the
//! kernel if the test process dies first (`PR_SET_PDEATHSIG`), so a failed or
//! aborted run leaves nothing behind.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The one way the suites wait: for a condition, never for a fixed time.
pub use crate::support::harness::{eventually, poll};

/// A process the suite started.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    /// Start `program` with `args` and `env`, stdout and stderr to `<dir>/<name>.log`
    /// (appended: a process started again keeps one log).
    pub fn start(
        dir: &Path,
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        Proc {
            name: name.to_string(),
            log,
            child,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fail the test, with the tail of the log, if the process has exited.
    pub fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 30)
            );
        }
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Send `signal` (libc::SIGTERM, SIGHUP, …).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// SIGTERM, then wait up to `within` for the exit; its code (None: killed
    /// by a signal, or SIGKILLed after `within`).
    pub fn terminate(&mut self, within: Duration) -> Option<i32> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return s.code();
        }
        self.signal(libc::SIGTERM);
        match poll(within, || self.child.try_wait().ok().flatten()) {
            Some(s) => s.code(),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                None
            }
        }
    }
}

impl Drop for Proc {
    /// At the end of the suite (or of a case that failed): SIGTERM, and SIGKILL
    /// what has not exited 3 s later. A case that stops a process on purpose
    /// calls [`Proc::terminate`] with the time it allows.
    fn drop(&mut self) {
        self.terminate(Duration::from_secs(3));
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A loopback port nobody listens on, never the same twice in this process.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Whether something accepts connections at `addr`.
pub fn listening(addr: &str) -> bool {
    std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(1)).is_ok()
}
