//! Acceptance: `cborgate demo` starts, and every command line it prints works
//! exactly as printed (run through bash with pipefail).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::harness::{eventually, free_port};

/// Kills the demo even when an assertion fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn demo_prints_lines_that_work_as_printed() {
    let (proxy, standin, admin) = (free_port(), free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args([
            "demo",
            "--listen",
            &proxy.to_string(),
            "--standin",
            &standin.to_string(),
            "--admin",
            &admin.to_string(),
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _guard = KillOnDrop(child);
    let mut lines = Vec::new();
    loop {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap() == 0 {
            panic!("demo exited early: {lines:?}");
        }
        if l.contains("Ctrl-C stops") {
            break;
        }
        lines.push(l.trim_end().to_string());
    }
    eventually(10, "the demo's proxy listening", || {
        std::net::TcpStream::connect(proxy).is_ok()
    });
    let commands: Vec<&String> = lines
        .iter()
        .filter(|l| l.trim_start().starts_with("curl ") || l.trim_start().starts_with("echo "))
        .collect();
    assert!(commands.len() >= 5, "{lines:?}");
    let mut outputs = Vec::new();
    for cmd in &commands {
        let o = Command::new("bash")
            .args(["-o", "pipefail", "-c", cmd.trim()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "failed: {cmd}\n{text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!text.trim().is_empty(), "no output: {cmd}");
        outputs.push(text);
    }
    assert!(
        outputs[0].starts_with("55799({'kind': 'ConfigMap'"),
        "{}",
        outputs[0]
    );
    // JSON passes through as the apiserver wrote it (pretty for curl).
    assert!(
        outputs[1].contains("\"kind\": \"ConfigMap\""),
        "{}",
        outputs[1]
    );
    assert!(outputs[2].contains("'name': 'from-cbor'"), "{}", outputs[2]);
    assert!(
        outputs[3].contains("55799({'type': 'ADDED', 'object': 55799("),
        "{}",
        outputs[3]
    );
    assert!(
        outputs[4].contains("UnsupportedMediaType"),
        "{}",
        outputs[4]
    );
    assert!(
        outputs[5].contains("cborgate_requests_total{"),
        "{}",
        outputs[5]
    );
}

#[test]
fn demo_on_a_taken_port_fails_before_printing_anything() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    let (standin, admin) = (free_port(), free_port());
    let o = Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args([
            "demo",
            "--listen",
            &taken,
            "--standin",
            &standin.to_string(),
        ])
        .args(["--admin", &admin.to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("works as printed"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&taken) && err.contains("--listen"), "{err}");
    drop(busy);
}
