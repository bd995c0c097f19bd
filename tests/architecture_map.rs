//! The layout ARCHITECTURE.md describes, checked: its code map names every folder and
//! top-level file of src/ and everything it names exists; every file has a header;
//! `unsafe` stays where it says; imports point inward, without a cycle; no file holds
//! more than 1,000 lines of code besides its tests.

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
    let named: BTreeSet<&str> = doc.split('`').filter(|p| p.starts_with("src/")).collect();
    // The code map is by folder: every folder and top-level file of src/ is named.
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root.join("src")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let entry = if p.is_dir() {
            format!("src/{name}/")
        } else {
            format!("src/{name}")
        };
        if !named.contains(entry.as_str()) {
            missing.push(entry);
        }
    }
    assert!(
        missing.is_empty(),
        "folders and files not in ARCHITECTURE.md's code map: {missing:?}"
    );
    let stale: Vec<_> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md names what does not exist: {stale:?}"
    );
    let mut present = BTreeSet::new();
    files(&root.join("src"), &mut present);
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
    const ALLOWED: [&str; 4] = [
        "src/codec/buf.rs",
        "src/codec/utf8.rs",
        "src/process/sys.rs",
        "src/limits/admission.rs",
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

/// The module a file is (`src/proxy/mod.rs` → `proxy`, `src/ops/admin.rs` →
/// `ops::admin`, `src/main.rs` → `main`).
fn module_of(file: &str) -> String {
    let path = file.trim_start_matches("src/").trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" {
        return String::new();
    }
    path.replace('/', "::")
}

/// Names re-exported by a module from one of its own submodules (`pub use
/// exchange::Exchange;` in `proxy/mod.rs`): (module, name) → the submodule.
type Aliases = std::collections::BTreeMap<(String, String), String>;

/// One path a file's code names: the module it resolves to, the names after it (the
/// next segment, or each of a `{…}` group's), and whether it is a `pub use` of one of
/// the file's own submodules (a facade re-export, which is not a dependency).
struct PathUse {
    module: String,
    names: Vec<String>,
    facade: bool,
}

/// A file's code with each `use` statement on one line.
fn joined_uses(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let line = line.split("//").next().unwrap_or("");
        if open {
            out.last_mut().unwrap().push_str(line.trim());
        } else {
            out.push(line.to_string());
        }
        let t = out.last().unwrap().trim_start();
        let is_use = t.starts_with("use ") || t.starts_with("pub use ") || t.starts_with("pub(");
        open = is_use && t.contains("use ") && !t.contains(';');
    }
    out
}

/// Every `crate::a::b`, `super::x` and `self::x` path in a file's code, and every path
/// through one of the module's own submodules (`hold::Hold` in `proxy/mod.rs`), resolved
/// to the longest module of `modules` it names.
fn paths(module: &str, code: &str, modules: &BTreeSet<String>) -> Vec<PathUse> {
    let mut out = Vec::new();
    // Each anchor and the module a path after it starts from.
    let mut anchors = vec![
        ("crate::".to_string(), String::new()),
        ("super::".to_string(), parent(module)),
        ("self::".to_string(), module.to_string()),
    ];
    for m in modules
        .iter()
        .filter(|m| !m.is_empty() && parent(m) == module)
    {
        let name = m.rsplit("::").next().unwrap_or(m);
        anchors.push((format!("{name}::"), module.to_string()));
    }
    for line in joined_uses(code) {
        let reexport = line.trim_start().starts_with("pub use ");
        for (anchor, base) in &anchors {
            for (i, _) in line.match_indices(anchor.as_str()) {
                if i > 0
                    && line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                {
                    continue;
                }
                // A submodule's name is part of the path (`hold::` names `proxy::hold`).
                let own = !["crate::", "super::", "self::"].contains(&anchor.as_str());
                let skip = if own { 0 } else { anchor.len() };
                let rest: String = line[i + skip..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut path = base.to_string();
                let mut best = None;
                let mut names = Vec::new();
                for part in rest.split("::").filter(|p| !p.is_empty()) {
                    path = if path.is_empty() {
                        part.to_string()
                    } else {
                        format!("{path}::{part}")
                    };
                    if modules.contains(&path) {
                        best = Some(path.clone());
                        names.clear();
                    } else {
                        names.push(part.to_string());
                    }
                }
                if anchor == "super::" && best.is_none() && !base.is_empty() {
                    best = Some(base.to_string());
                }
                let Some(best) = best else { continue };
                let names = match names.first() {
                    Some(first) => vec![first.clone()],
                    None => group_names(&line[i + skip + rest.len()..]),
                };
                let facade = reexport && best.starts_with(&format!("{module}::"));
                out.push(PathUse {
                    module: best,
                    names,
                    facade,
                });
            }
        }
    }
    out
}

/// The first segment of each item of a `{a, b::C, D}` group at the start of `text`.
fn group_names(text: &str) -> Vec<String> {
    let Some(inner) = text.strip_prefix('{') else {
        return Vec::new();
    };
    let (mut depth, mut end) = (1, inner.len());
    for (i, c) in inner.char_indices() {
        depth += match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        if depth == 0 {
            end = i;
            break;
        }
    }
    inner[..end]
        .split(',')
        .filter_map(|item| {
            let first = item.trim().split("::").next()?.split(' ').next()?;
            (!first.is_empty()).then(|| first.to_string())
        })
        .collect()
}

/// The names each module re-exports from its own submodules.
fn aliases(module: &str, code: &str, modules: &BTreeSet<String>, out: &mut Aliases) {
    for p in paths(module, code, modules)
        .into_iter()
        .filter(|p| p.facade)
    {
        for name in p.names {
            out.insert((module.to_string(), name), p.module.clone());
        }
    }
}

/// The modules a file's code imports: each path's module, or, for a name its module
/// re-exports from a submodule (`super::Exchange` in `proxy/hold.rs`), that submodule.
/// A module's re-export of its own submodule's item is not itself an import.
fn imports(
    module: &str,
    code: &str,
    modules: &BTreeSet<String>,
    aliases: &Aliases,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for p in paths(module, code, modules)
        .into_iter()
        .filter(|p| !p.facade)
    {
        let mut plain = p.names.is_empty();
        for name in &p.names {
            match aliases.get(&(p.module.clone(), name.clone())) {
                Some(m) => {
                    out.insert(m.clone());
                }
                None => plain = true,
            }
        }
        if plain {
            out.insert(p.module);
        }
    }
    out.remove(module);
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
    let codes: Vec<(String, String)> = present
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(root.join(f)).unwrap();
            (f.clone(), without_tests(&text))
        })
        .collect();
    let mut reexports = Aliases::new();
    for (f, code) in &codes {
        aliases(&module_of(f), code, &modules, &mut reexports);
    }
    let mut graph = std::collections::BTreeMap::new();
    for (f, code) in &codes {
        let m = module_of(f);
        let deps = imports(&m, code, &modules, &reexports);
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

/// The file cycles known today, each to be removed by the work in its area, and then
/// deleted here (the test fails while one listed is no longer a cycle, so the list only
/// shrinks):
/// - `codec::json_to_cbor` ↔ `codec::json_to_cbor::emit`: the output half names the
///   encoder's type and constants, the encoder the output's slots and holes.
const KNOWN_CYCLES: [[&str; 2]; 1] = [["codec::json_to_cbor", "codec::json_to_cbor::emit"]];

/// The modules of src/ (each file) import one another without a cycle (ARCHITECTURE.md
/// "Invariants"), whole files read, submodules, `super::` and `self::` paths and paths
/// through a module's own submodules included; and admission and shutdown are objects
/// passed in: the only process-wide static that is not a constant table is the metrics
/// registry.
#[test]
fn modules_have_no_cycle_and_no_state_statics() {
    let mut graph = import_graph();
    for [from, to] in KNOWN_CYCLES {
        assert!(
            graph[from].contains(to) && graph[to].contains(from),
            "{from} <-> {to} is no longer a cycle: delete it from KNOWN_CYCLES"
        );
        graph.get_mut(to).unwrap().remove(from);
    }
    if let Some(cycle) = cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
    assert!(
        graph["proxy::steps"].iter().any(|m| ring(m) == "negotiate"),
        "the graph was read: {graph:?}"
    );
    assert!(
        graph["negotiate::plan"].contains("negotiate::auto"),
        "submodules were read: {:?}",
        graph["negotiate::plan"]
    );
    assert!(
        graph["proxy"].iter().any(|m| m.starts_with("proxy::")),
        "paths through a module's own submodules were read: {:?}",
        graph["proxy"]
    );
}

/// A cycle in `graph`, as the path around it (first node repeated at the end).
fn cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut found = path[i..].to_vec();
            found.push(n.to_string());
            return Some(found);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(found) = visit(d, g, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// The test finds a cycle through a module's own submodule (`a/mod.rs` naming
/// `b::Hold`, `a/b.rs` importing `super::S`) and through a re-exported name
/// (`super::Held`, which `a` re-exports from `c`); a facade's re-export alone is none.
#[test]
fn a_cycle_through_a_submodule_is_found() {
    let modules: BTreeSet<String> = ["a", "a::b", "a::c"].map(String::from).into();
    let facade = "pub use c::Held;\n";
    let mut reexports = Aliases::new();
    aliases("a", facade, &modules, &mut reexports);
    let graph = |files: [(&str, &str); 3]| {
        let mut g = std::collections::BTreeMap::new();
        for (m, code) in files {
            g.insert(m.to_string(), imports(m, code, &modules, &reexports));
        }
        g
    };
    let g = graph([
        ("a", "pub use c::Held;\nstruct S {\n    h: b::Hold,\n}\n"),
        ("a::b", "use super::{\n    S,\n    T,\n};\n"),
        ("a::c", ""),
    ]);
    assert_eq!(g["a"], BTreeSet::from(["a::b".to_string()]));
    assert_eq!(
        cycle(&g),
        Some(["a", "a::b", "a"].map(String::from).to_vec())
    );
    let g = graph([
        ("a", facade),
        ("a::b", "use super::Held;\n"),
        ("a::c", "use super::b::Hold;\n"),
    ]);
    assert_eq!(g["a"], BTreeSet::new());
    assert_eq!(g["a::b"], BTreeSet::from(["a::c".to_string()]));
    assert_eq!(
        cycle(&g),
        Some(["a::b", "a::c", "a::b"].map(String::from).to_vec())
    );
    let g = graph([("a", facade), ("a::b", "use super::Held;\n"), ("a::c", "")]);
    assert_eq!(cycle(&g), None);
}

/// The folders of src/, innermost first, each with the folders it may import besides
/// itself (ARCHITECTURE.md "Code map"): every folder imports only folders before it, so
/// the folder graph has no back-edge. `metrics` is the floor: it imports nothing of the
/// crate, and every ring outside the pure core may count into it.
const RINGS: &[(&str, &[&str])] = &[
    // The floor.
    ("metrics", &[]),
    // The pure core.
    ("codec", &[]),
    ("negotiate", &["codec"]),
    // What the glue leans on.
    ("config", &["metrics", "codec", "negotiate"]),
    ("tls", &["metrics", "codec", "negotiate", "config"]),
    ("limits", &["metrics", "codec", "negotiate", "config"]),
    (
        "inbound",
        &["metrics", "codec", "negotiate", "config", "tls", "limits"],
    ),
    (
        "outbound",
        &["metrics", "codec", "negotiate", "config", "tls", "limits"],
    ),
    // The glue: the core and all it leans on.
    ("proxy", ALL_BEFORE),
    // The shell: `ops` reads the configuration, counts, and writes the request lines
    // `proxy` hands it (`proxy::request_log::Lines`); `process` and `commands` wire
    // everything.
    ("ops", &["metrics", "config", "proxy"]),
    ("process", ALL_BEFORE),
    ("commands", ALL_BEFORE),
];

/// A folder that may import every folder before it.
const ALL_BEFORE: &[&str] = &["*"];

/// The rings (ARCHITECTURE.md "Code map"): each folder imports only the folders
/// [`RINGS`] gives it, all of them before it in the list; nothing imports the commands
/// but the binary and the crate root.
#[test]
fn imports_point_inward() {
    for (n, (folder, may)) in RINGS.iter().enumerate() {
        for m in may.iter().filter(|m| **m != "*") {
            let at = RINGS.iter().position(|(f, _)| f == m);
            assert!(
                at.is_some_and(|at| at < n),
                "{folder} may import {m}, which is not a folder before it"
            );
        }
    }
    let graph = import_graph();
    let mut wrong = Vec::new();
    for (from, deps) in &graph {
        let rf = ring(from);
        if matches!(rf, "main" | "") {
            continue;
        }
        let Some(n) = RINGS.iter().position(|(f, _)| *f == rf) else {
            panic!("{from}: a folder ARCHITECTURE.md does not name");
        };
        let may = |rt: &str| match RINGS[n].1 {
            ALL_BEFORE => RINGS[..n].iter().any(|(f, _)| *f == rt),
            only => only.contains(&rt),
        };
        for to in deps {
            let rt = ring(to);
            if rt != rf && !may(rt) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that point outward: {wrong:#?}");
    assert!(graph["metrics"].is_empty(), "{:?}", graph["metrics"]);
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
