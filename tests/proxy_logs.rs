//! The request log (SURFACE.md "Logs"): one line per request at info level with method,
//! path, status, request and response formats, upstream time and codec time; JSON with
//! `--log-format json`; plain text without colour escapes when stderr is not a terminal
//! (a container's log file).

mod support;

use cborgate::standin::StandInOptions;
use serde_json::Value;
use std::io::Read;
use support::harness::Harness;
use support::http::once;

const CM: &str = "/api/v1/namespaces/demo/configmaps/demo-config";

/// Start cborgate with info logs captured, make one CBOR GET and one JSON GET, stop it
/// and return everything it wrote to stderr.
fn logs_of(extra: &[&str], env: &[(&str, &str)]) -> String {
    let mut env = env.to_vec();
    env.push(("RUST_LOG", "info"));
    let mut h = Harness::start_env("legacy", extra, StandInOptions::default(), &env, true);
    let r = once(h.proxy, "GET", CM, &[("Accept", "application/cbor")], None);
    assert_eq!(r.status, 200);
    let r = once(h.proxy, "GET", CM, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 200);
    let mut stderr = h.child.stderr.take().expect("stderr is captured");
    // The log line is written when the request ends; give the writer a moment.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let _ = h.child.kill();
    let _ = h.child.wait();
    let mut text = String::new();
    stderr.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn json_logs_have_one_line_per_request_with_the_promised_fields() {
    let text = logs_of(&["--log-format", "json"], &[]);
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let requests: Vec<&Value> = lines
        .iter()
        .filter(|v| v["fields"]["message"] == "request")
        .collect();
    assert_eq!(requests.len(), 2, "one line per request:\n{text}");
    for (r, fmt) in requests.iter().zip(["cbor", "json"]) {
        assert_eq!(r["level"], "INFO", "{r}");
        let f = &r["fields"];
        assert_eq!(f["method"], "GET", "{r}");
        assert_eq!(f["path"], CM, "{r}");
        assert_eq!(f["status"], 200, "{r}");
        assert_eq!(f["request_format"], "none", "{r}");
        assert_eq!(f["response_format"], fmt, "{r}");
        for t in ["upstream_ms", "codec_ms", "total_ms"] {
            let ms = f[t].as_f64().unwrap_or_else(|| panic!("{t} missing: {r}"));
            assert!((0.0..60_000.0).contains(&ms), "{t} = {ms}: {r}");
        }
        assert!(f["upstream_ms"].as_f64() > Some(0.0), "{r}");
    }
    // Transcoding a response to CBOR takes codec time; passing JSON through takes none.
    assert!(requests[0]["fields"]["codec_ms"].as_f64() > Some(0.0));
    assert_eq!(requests[1]["fields"]["codec_ms"].as_f64(), Some(0.0));
}

#[test]
fn text_logs_to_a_pipe_carry_no_colour_escapes() {
    let text = logs_of(&[], &[]);
    let requests: Vec<&str> = text.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(requests.len(), 2, "one line per request:\n{text}");
    assert!(requests[0].contains("INFO"), "{text}");
    assert!(requests[0].contains("method=GET"), "{text}");
    assert!(requests[0].contains(&format!("path={CM}")), "{text}");
    assert!(requests[0].contains("status=200"), "{text}");
    assert!(requests[0].contains("response_format=\"cbor\""), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in logs written to a pipe:\n{text:?}"
    );
}
