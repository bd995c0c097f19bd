//! ARCHITECTURE.md's code map names every module under src/, and every
//! module it names exists.

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
/// codec's fixed-size output copies and its SSE2 scanner, and the process's calls into
/// the C library (`src/sys.rs`). Each block there
/// carries a `SAFETY:` argument.
#[test]
fn unsafe_code_is_confined() {
    const ALLOWED: [&str; 3] = ["src/codec/buf.rs", "src/codec/utf8.rs", "src/sys.rs"];
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

/// The top-level modules of src/ import one another without a cycle (ARCHITECTURE.md
/// "Invariants"), and admission and shutdown are objects passed in: the only
/// process-wide static that is not a constant table is the metrics registry.
#[test]
fn modules_have_no_cycle_and_no_state_statics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
    let mut graph: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for f in &present {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        // Code only: unit tests may reach anywhere, comments do not import.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let top = f
            .trim_start_matches("src/")
            .split(['/', '.'])
            .next()
            .unwrap()
            .to_string();
        let deps = graph.entry(top.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    deps.insert(name);
                }
            }
        }
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
}
