//! The harness's own smoke test: `cborgate-load --smoke --no-anchors` (a fraction of a
//! second per turn, small watches, the anchors left out as on a machine without them)
//! against the debug `cborgate` must complete, say which anchors it skipped, and write
//! RESULTS.md and the chart.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `cborgate` binary of this workspace's debug build (`cargo test -p cborgate`
/// builds it); built here when it is missing.
fn cborgate() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let exe = target.join("debug/cborgate");
    if !exe.exists() {
        let ok = Command::new(env!("CARGO"))
            .args(["build", "-p", "cborgate", "--bin", "cborgate"])
            .current_dir(&root)
            .status()
            .expect("run cargo")
            .success();
        assert!(ok, "cargo build -p cborgate failed");
    }
    exe
}

#[test]
fn a_run_without_anchors_completes_and_writes_the_report() {
    let out = std::env::temp_dir().join(format!("cborgate-load-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cborgate-load"))
        .arg("--cborgate")
        .arg(cborgate())
        .args(["--smoke", "--no-anchors", "--out"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cborgate-load");
    // Bounded: a harness that hangs is killed (by its PID) and the test fails.
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cborgate-load --smoke did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    for anchor in ["haproxy", "nginx"] {
        let line = format!("anchor {anchor} skipped: --no-anchors");
        assert!(stderr.contains(&line), "{stderr}");
    }
    assert!(
        stdout.contains("SKIP 7 KB GET: cborgate JSON passthrough CPU / haproxy's"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("RESULTS.md")).unwrap();
    for row in [
        "| GET pod (7 KB) | cborgate, JSON passthrough |",
        "| GET pod (7 KB) | cborgate, CBOR transcoded |",
        "| POST pod | cborgate, CBOR transcoded |",
        "| LIST 700 pods | cborgate, CBOR transcoded |",
        "| LIST 700 pods, gzip | cborgate, JSON passthrough |",
        "| watch, 300 events | cborgate, CBOR transcoded |",
        "- **Skipped:** anchor haproxy skipped: --no-anchors",
        "| 7 KB GET: CBOR transcoded − JSON passthrough CPU (goal: 1.5 × the codec's) |",
        "| TLS new connections, full handshake, 0% resumed | cborgate, JSON passthrough |",
        "| TLS new connections, resumption offered, ",
        "| futex calls per request | context switches per request (vol + invol) |",
        "| 7 KB GET: cborgate JSON passthrough futex calls (goal: floor's + 0.1) |",
        "| new TLS connection (RSA-2048) + GET: cborgate CPU / haproxy's |",
    ] {
        assert!(md.contains(row), "no `{row}` in\n{md}");
    }
    assert!(!md.contains("| haproxy, passthrough |"), "{md}");
    let png = std::fs::read(out.join("results.png")).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "results.png is no PNG"
    );
    let _ = std::fs::remove_dir_all(&out);
}
