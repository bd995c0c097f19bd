//! The offline commands `transcode` and `diag` as a user runs them: exit
//! status, the one stderr line, and exactly what reaches stdout (docs/surface.md
//! "Commands", README "Commands").

use cborgate::codec::StringMode;
use cborgate::commands::tools::{self, Target};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Run the built binary with `args`, `stdin` piped in and stdout piped out
/// (so stdout is never a terminal here).
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Written from a thread so that a large output cannot block the write.
    let writer = std::thread::spawn(move || input.write_all(&data));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// Exit 1, nothing on stdout, one stderr line; returns that line.
fn failure(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(o.stdout.is_empty(), "stdout: {:?}", o.stdout);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

fn to_cbor(json: &[u8]) -> Vec<u8> {
    let o = run(&["transcode", "--to", "cbor"], json);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

const CONFIGMAP: &[u8] =
    br#"{"kind":"ConfigMap","data":{"app.conf":"a = 1\n\tb = 'x\\y'\r\n","bell":"\u0007"}}"#;

#[test]
fn diag_text_shows_utf8_byte_strings_with_control_characters_as_text() {
    let cbor = to_cbor(CONFIGMAP);
    let o = run(&["diag", "--text"], &cbor);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "55799({'kind': 'ConfigMap', 'data': {'app.conf': 'a = 1\\n\\tb = \\'x\\\\y\\'\\r\\n', 'bell': '\\u0007'}})\n"
    );
    // Without --text, hex as before; bytes that are not UTF-8 stay hex with it.
    let o = run(&["diag"], &cbor);
    assert!(String::from_utf8(o.stdout).unwrap().contains("h'6b696e64'"));
    let o = run(&["diag", "--text"], &[0x42, 0xff, b'\n']);
    assert_eq!(o.stdout, b"h'ff0a'\n");
}

#[test]
fn diag_on_empty_input_fails_like_transcode() {
    let diag = failure(&run(&["diag"], b""));
    assert!(diag.contains("at byte offset 0 (truncated)"), "{diag}");
    let transcode = failure(&run(&["transcode", "--to", "json"], b""));
    assert_eq!(diag, transcode);
}

#[test]
fn reading_the_other_format_says_so() {
    // JSON where CBOR is expected: `{` is a CBOR text-string head, so the
    // codec's own reason is misleading; the hint is not.
    for json in [&br#"{"kind":"Pod"}"#[..], b"\n  [1, 2]", b"\"x\""] {
        let err = failure(&run(&["transcode", "--to", "json"], json));
        assert!(
            err.trim_end()
                .ends_with(") (the input looks like JSON; use --to cbor)"),
            "{err}"
        );
        let err = failure(&run(&["diag"], json));
        assert!(
            err.contains("the input looks like JSON; diag reads CBOR"),
            "{err}"
        );
        // With --watch, what came before the error may be on stdout already.
        let o = run(&["transcode", "--to", "json", "--watch"], json);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1));
        assert!(err.contains("use --to cbor"), "{err}");
    }
    // CBOR where JSON is expected: the self-described tag, or plain binary.
    let cbor = to_cbor(br#"{"kind":"Pod"}"#);
    for input in [&cbor[..], &[0xa1, 0x61, b'a', 0x01], &[0x01]] {
        let err = failure(&run(&["transcode", "--to", "cbor"], input));
        assert!(
            err.trim_end()
                .ends_with(") (the input looks like CBOR; use --to json)"),
            "{err}"
        );
    }
    // Input of the right format that is merely broken gets no hint.
    for (args, input) in [
        (&["transcode", "--to", "cbor"][..], &b"{\"a\": [1, 2,]}"[..]),
        (&["transcode", "--to", "cbor"], b"nope"),
        (&["transcode", "--to", "json"], &cbor[..cbor.len() - 1]),
        (&["diag"], &cbor[..cbor.len() - 1]),
        (&["transcode", "--to", "cbor"], "\u{feff}{}".as_bytes()),
    ] {
        let err = failure(&run(args, input));
        assert!(!err.contains("looks like"), "{args:?}: {err}");
    }
}

#[test]
fn piped_output_is_exactly_the_codecs_bytes() {
    let cbor = to_cbor(br#"{"kind":"Pod"}"#);
    let o = run(&["transcode", "--to", "json"], &cbor);
    assert_eq!(o.stdout, br#"{"kind":"Pod"}"#);
    let events = b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n";
    let seq = run(&["transcode", "--to", "cbor", "--watch"], events).stdout;
    let o = run(&["transcode", "--to", "json", "--watch"], &seq);
    assert_eq!(o.stdout, events);
}

fn library(input: &[u8], to: Target, watch: bool, terminal: bool) -> Vec<u8> {
    let mut out = Vec::new();
    tools::transcode(
        &mut &input[..],
        &mut out,
        to,
        watch,
        StringMode::Bytes,
        terminal,
    )
    .unwrap();
    out
}

#[test]
fn on_a_terminal_json_output_ends_with_one_newline() {
    let cbor = to_cbor(br#"{"kind":"Pod"}"#);
    assert_eq!(
        library(&cbor, Target::Json, false, true),
        b"{\"kind\":\"Pod\"}\n"
    );
    assert_eq!(
        library(&cbor, Target::Json, false, false),
        b"{\"kind\":\"Pod\"}"
    );
    // Watch events already end in a newline: no second one.
    let events = b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n";
    let seq = library(events, Target::Cbor, true, false);
    assert_eq!(library(&seq, Target::Json, true, true), events);
    // CBOR output is never touched, terminal or not.
    assert_eq!(
        library(b"{}", Target::Cbor, false, true),
        library(b"{}", Target::Cbor, false, false)
    );
}

/// `--version` names the version and the git commit it was built from (`build.rs`:
/// `CBORGATE_GIT_COMMIT`, else `git rev-parse --short=12 HEAD`); from a checkout, the
/// commit checked out.
#[test]
fn version_names_the_commit() {
    let o = run(&["--version"], b"");
    assert_eq!(o.status.code(), Some(0));
    let line = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        line.trim_end(),
        format!(
            "cborgate {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            cborgate::GIT_COMMIT
        )
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if std::env::var("CBORGATE_GIT_COMMIT").is_err() {
        if let Some(h) = head.ok().filter(|h| h.status.success()) {
            assert_eq!(
                cborgate::GIT_COMMIT,
                String::from_utf8_lossy(&h.stdout).trim()
            );
        }
    }
}

/// A body whose CBOR runs to several MiB (kept in pieces until the end)
/// comes out whole and in order, and one that fails at its very end writes
/// nothing at all.
#[test]
fn a_large_body_is_written_whole_or_not_at_all() {
    let items: Vec<String> = (0..120_000)
        .map(|i| format!(r#"{{"name":"pod-{i}","n":{i}}}"#))
        .collect();
    let json = format!("[{}]", items.join(",")).into_bytes();
    let cbor = library(&json, Target::Cbor, false, false);
    assert!(cbor.len() > 2 << 20, "{} bytes", cbor.len());
    assert_eq!(library(&cbor, Target::Json, false, false), json);

    let mut bad = json.clone();
    bad.pop();
    bad.extend_from_slice(b",}");
    let mut out = Vec::new();
    let r = tools::transcode(
        &mut &bad[..],
        &mut out,
        Target::Cbor,
        false,
        StringMode::Bytes,
        false,
    );
    assert!(r.is_err());
    assert!(out.is_empty(), "{} bytes written", out.len());
}
