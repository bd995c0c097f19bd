//! The layout ARCHITECTURE.md describes, checked: its code map names every module under
//! src/ and every module it names exists; `unsafe` stays where it says; imports point
//! inward, without a cycle; no file holds more than 1,000 lines of code besides its tests.

use std::collections::BTreeSet;
use std::path::Path;

fn files(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_code_map_matches_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut named = BTreeSet::new();
    for part in doc.split('`') {
        if part.starts_with("src/") && part.ends_with(".rs") {
            named.insert(part.to_string());
        }
    }
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
    let missing: Vec<_> = present.difference(&named).collect();
    let stale: Vec<_> = named.difference(&present).collect();
    assert!(
        missing.is_empty(),
        "modules not in ARCHITECTURE.md: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md names modules that do not exist: {stale:?}"
    );
    // Each module starts with a doc comment saying what it owns.
    for f in &present {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        assert!(
            text.trim_start().starts_with("//!"),
            "{f} has no module doc comment"
        );
    }
}

/// `unsafe` code lives only where ARCHITECTURE.md's invariants say: the
/// codec's fixed-size output copies and its SSE2 scanner, the process's calls into
/// the C library (`src/process/sys.rs`) and `dup_socket` (`src/limits/admission.rs`). Each block there
/// carries a `SAFETY:` argument.
#[test]
fn unsafe_code_is_confined() {
    const ALLOWED: [&str; 5] = [
        "src/codec/buf.rs",
        "src/codec/utf8.rs",
        "src/process/sys.rs",
        "src/limits/admission.rs",
        "src/inbound/connections.rs",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
    for f in &present {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !code.contains("unsafe ") && !code.contains("unsafe{") {
                continue;
            }
            assert!(
                ALLOWED.contains(&f.as_str()),
                "{f}:{}: unsafe outside {ALLOWED:?}",
                n + 1
            );
            let argued = lines[..n]
                .iter()
                .rev()
                .take(12)
                .any(|l| l.trim_start().starts_with("// SAFETY:"));
            assert!(
                argued,
                "{f}:{}: unsafe block without a SAFETY comment",
                n + 1
            );
        }
    }
}

/// A file's code with its `#[cfg(test)]` items left out (unit tests may reach
/// anywhere); the rest of the file, after them included, is read.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // Skip the item the attribute is on: one line (`mod tests;`), or up to the brace
        // that closes the one it opens.
        let mut depth = 0i32;
        for l in lines.by_ref() {
            let code = l.split("//").next().unwrap_or("");
            depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            if depth <= 0 && (code.contains('}') || code.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    out
}

/// The module a file is (`src/proxy/mod.rs` → `proxy`, `src/ops/metrics.rs` →
/// `ops::metrics`, `src/main.rs` → `main`).
fn module_of(file: &str) -> String {
    let path = file.trim_start_matches("src/").trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" {
        return String::new();
    }
    path.replace('/', "::")
}

/// The modules a file's code imports: every `crate::a::b` and `super::x` path, resolved
/// to the longest module of `modules` it names.
fn imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let line = line.split("//").next().unwrap_or("");
        for (anchor, base) in [("crate::", String::new()), ("super::", parent(module))] {
            for (i, _) in line.match_indices(anchor) {
                if i > 0 && line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest: String = line[i + anchor.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut path = base.clone();
                let mut best = None;
                for part in rest.split("::").filter(|p| !p.is_empty()) {
                    path = if path.is_empty() {
                        part.to_string()
                    } else {
                        format!("{path}::{part}")
                    };
                    if modules.contains(&path) {
                        best = Some(path.clone());
                    }
                }
                if anchor == "super::" && best.is_none() && !base.is_empty() {
                    best = Some(base.clone());
                }
                if let Some(m) = best.filter(|m| m != module) {
                    out.insert(m);
                }
            }
        }
    }
    out
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

fn ring(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

/// Every module under src/ and what its code imports.
fn import_graph() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
    let modules: BTreeSet<String> = present.iter().map(|f| module_of(f)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for f in &present {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let code = without_tests(&text);
        let m = module_of(f);
        let deps = imports(&m, &code, &modules);
        graph.insert(m, deps);
        for line in code.lines() {
            let t = line.trim_start();
            if t.starts_with("static ") || t.starts_with("pub static ") {
                assert!(
                    t.contains("OnceLock<Metrics>")
                        || !t.contains("Atomic") && !t.contains("Mutex"),
                    "{f}: process-wide mutable state: {t}"
                );
            }
        }
    }
    graph
}

/// The modules of src/ (each file) import one another without a cycle (ARCHITECTURE.md
/// "Invariants"), whole files read, submodules and `super::` paths included; and
/// admission and shutdown are objects passed in: the only process-wide static that is
/// not a constant table is the metrics registry.
#[test]
fn modules_have_no_cycle_and_no_state_statics() {
    let graph = import_graph();
    // Depth-first search for a cycle.
    fn visit(
        n: &str,
        g: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == n) {
            panic!("module cycle: {}", path[i..].join(" -> ") + " -> " + n);
        }
        if done.contains(n) {
            return;
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            visit(d, g, path, done);
        }
        path.pop();
        done.insert(n.to_string());
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        visit(n, &graph, &mut Vec::new(), &mut done);
    }
    assert!(
        graph["proxy"].contains("negotiate"),
        "the graph was read: {graph:?}"
    );
    assert!(
        graph["negotiate::plan"].contains("negotiate::auto"),
        "submodules were read: {:?}",
        graph["negotiate::plan"]
    );
}

/// The rings (ARCHITECTURE.md "Layout"): the pure core never imports outward, the glue
/// never imports the shell, and nothing imports the commands.
#[test]
fn imports_point_inward() {
    let graph = import_graph();
    // What each ring may import besides itself; `ops::metrics` is the one room of the
    // shell every ring may count into (with `ops::request_labels`, its requests' labels).
    let counted = |m: &str| matches!(m, "ops::metrics" | "ops::request_labels");
    let allowed = |from: &str, to: &str| -> bool {
        let (rf, rt) = (ring(from), ring(to));
        if rf == rt || counted(to) && from != "codec" && ring(from) != "negotiate" {
            return true;
        }
        match rf {
            "codec" => false,
            "negotiate" => rt == "codec",
            // The glue: the core, and what it leans on.
            "proxy" => matches!(
                rt,
                "codec" | "negotiate" | "limits" | "tls" | "inbound" | "outbound" | "config"
            ),
            "limits" | "tls" => matches!(rt, "codec" | "negotiate" | "config"),
            "inbound" | "outbound" => {
                matches!(rt, "codec" | "negotiate" | "limits" | "tls" | "config")
            }
            "config" => matches!(rt, "codec" | "negotiate"),
            // `ops::metrics` is imported by every ring: it imports only the core.
            "ops" if counted(from) => matches!(rt, "codec" | "negotiate"),
            "ops" | "process" => rt != "commands",
            "commands" | "main" | "" => true,
            other => panic!("{from}: a ring ARCHITECTURE.md does not name: {other}"),
        }
    };
    let mut wrong = Vec::new();
    for (from, deps) in &graph {
        for to in deps {
            if !allowed(from, to) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that point outward: {wrong:#?}");
    assert!(graph["codec"].is_empty() || graph["codec"].iter().all(|m| ring(m) == "codec"));
}

/// No file under src/ holds more than 1,000 lines of code besides its tests (the
/// `#[cfg(test)]` items left out): a file one can hold in one's head. A bigger one
/// splits by concern into a folder, as `src/codec/json_to_cbor/` did.
#[test]
fn files_stay_under_a_thousand_lines_of_code() {
    const MAX: usize = 1_000;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
    let mut big = Vec::new();
    let mut largest = 0;
    for f in &present {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let code = without_tests(&text).lines().count();
        largest = largest.max(code);
        if code > MAX {
            big.push(format!("{f}: {code} lines of code"));
        }
    }
    assert!(
        largest > 300,
        "files were read: the largest has {largest} lines"
    );
    assert!(big.is_empty(), "files over {MAX} lines of code: {big:#?}");
}
