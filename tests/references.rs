//! References point at something that exists. In the documentation (ARCHITECTURE.md,
//! README.md, docs/*.md, deploy/README.md, bench/README.md, fuzz/README.md) and in every
//! comment under src/, standin/, tests/ and bench/:
//! - a repository path (`src/…`, `tests/…`, `docs/…`, `deploy/…`, `bench/…`, `standin/…`)
//!   names a file or folder that exists;
//! - a Markdown file named (`docs/wire.md`, `README.md`) exists, spelled as it is;
//! - a section of docs/wire.md cited after its name, as in "docs/wire.md §2" (or a list
//!   such as "§2, §3 and §5a"), and every bare section sign and number inside
//!   docs/wire.md, names one of its numbered headings (`## 5a. …`);
//! - a quoted section after a Markdown file (`docs/surface.md "Logs"`) is one of its
//!   headings;
//! - nothing cites an issue or pull-request number (a number sign before digits, or the
//!   word issue before a number): they mean nothing inside the repository; comments cite
//!   docs/wire.md or recorded evidence instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A piece of text to check: a whole Markdown file, or a run of comment lines joined by
/// spaces, with where each of its lines starts.
struct Text {
    file: String,
    /// (offset in `text`, line number in the file)
    lines: Vec<(usize, usize)>,
    text: String,
}

impl Text {
    fn line_at(&self, offset: usize) -> usize {
        let i = self.lines.partition_point(|&(o, _)| o <= offset);
        self.lines[i.saturating_sub(1)].1
    }

    fn push(&mut self, line: usize, s: &str) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.lines.push((self.text.len(), line));
        self.text.push_str(s);
    }
}

const DOCS: [&str; 5] = [
    "ARCHITECTURE.md",
    "README.md",
    "deploy/README.md",
    "bench/README.md",
    "fuzz/README.md",
];
const COMMENT_DIRS: [&str; 4] = ["src", "standin", "tests", "bench"];
const PATH_ROOTS: [&str; 6] = ["src/", "tests/", "docs/", "deploy/", "bench/", "standin/"];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && name != "data" && !name.starts_with('.') {
                walk(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// The Markdown files and the comments, as texts.
fn texts() -> Vec<Text> {
    let mut out = Vec::new();
    let mut docs: Vec<String> = DOCS.iter().map(|s| s.to_string()).collect();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(rel(&p));
        }
    }
    for f in docs {
        let content = std::fs::read_to_string(root().join(&f)).unwrap();
        let mut t = Text {
            file: f,
            lines: Vec::new(),
            text: String::new(),
        };
        for (n, l) in content.lines().enumerate() {
            t.push(n + 1, l);
        }
        out.push(t);
    }
    let mut files = Vec::new();
    for d in COMMENT_DIRS {
        walk(&root().join(d), &mut files);
    }
    for p in files {
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let content = std::fs::read_to_string(&p).unwrap();
        let file = rel(&p);
        let mut cur: Option<Text> = None;
        for (n, line) in content.lines().enumerate() {
            match comment_of(line) {
                Some(c) => cur
                    .get_or_insert_with(|| Text {
                        file: file.clone(),
                        lines: Vec::new(),
                        text: String::new(),
                    })
                    .push(n + 1, c),
                None => out.extend(cur.take()),
            }
        }
        out.extend(cur);
    }
    out
}

/// The comment on a line of Rust: after `//`, `///` or `//!` at its start, or after
/// code whose string literals are closed.
fn comment_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if let Some(c) = t.strip_prefix("//") {
        return Some(c.trim_start_matches(['/', '!']));
    }
    let i = line.find(" //")?;
    let before = &line[..i];
    (before.matches('"').count().is_multiple_of(2) && !before.contains("r#\""))
        .then(|| line[i + 3..].trim_start_matches(['/', '!']))
}

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// `a/{b,c}/d` → `a/b/d`, `a/c/d`.
fn expand(p: &str) -> Vec<String> {
    match (p.find('{'), p.find('}')) {
        (Some(a), Some(b)) if a < b => p[a + 1..b]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &p[..a], &p[b + 1..])))
            .collect(),
        _ => vec![p.to_string()],
    }
}

/// Whether `p` exists from the repository's root, from the folder of `file`, or from
/// the crate `file` belongs to (the stand-in's and the load harness's own `src/`).
fn exists(p: &str, file: &str) -> bool {
    let p = p.trim_start_matches("./");
    let mut bases = vec![root().to_path_buf()];
    let mut dir = root().join(file);
    while dir.pop() && dir.starts_with(root()) && dir != root() {
        bases.push(dir.clone());
    }
    bases.iter().any(|b| b.join(p).exists())
}

/// The numbered sections of a Markdown file: `## 5a. Title` → `5a`.
fn numbered_sections(file: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start_matches('#');
            (t.len() < l.len()).then_some(t.trim_start())?;
            let id: String = t
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let rest = &t.trim_start()[id.len()..];
            (id.starts_with(|c: char| c.is_ascii_digit()) && rest.starts_with('.')).then_some(id)
        })
        .collect()
}

/// A Markdown file's headings, and its paragraphs' bold titles (`**Credentials.** …`).
fn headings(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            if l.starts_with('#') {
                Some(l.trim_start_matches('#').trim().to_string())
            } else {
                let title = l.strip_prefix("**")?.split("**").next()?;
                Some(title.trim_end_matches('.').to_string())
            }
        })
        .collect()
}

/// A `§` reference's section id at the start of `s` (`5a` of `5a). …`).
fn section_id(s: &str) -> String {
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let letter = s[digits.len()..]
        .chars()
        .next()
        .filter(|c| c.is_ascii_lowercase())
        .filter(|_| {
            // `5a` but not `2 a…` or `3's`: a letter right after, then no other letter.
            !s[digits.len() + 1..].starts_with(|c: char| c.is_ascii_alphanumeric())
        });
    digits + &letter.map(String::from).unwrap_or_default()
}

/// Every `§N` of a list starting at `s` (`§2, §3 and §5a`): (offset in `s`, id).
fn section_list(s: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while s[i..].starts_with('§') {
        i += '§'.len_utf8();
        let id = section_id(&s[i..]);
        out.push((i, id.clone()));
        i += id.len();
        let rest = &s[i..];
        let skip = rest.len() - rest.trim_start_matches([',', ' ']).len();
        let after = &rest[skip..];
        let word = ["and ", "or "]
            .iter()
            .find(|w| after.starts_with(*w))
            .map_or(0, |w| w.len());
        if !after[word..].starts_with('§') {
            break;
        }
        i += skip + word;
    }
    out
}

fn names_in_repo() -> BTreeSet<String> {
    let mut files = Vec::new();
    walk(root(), &mut files);
    files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect()
}

#[test]
fn references_name_what_exists() {
    let wire = numbered_sections("docs/wire.md");
    assert!(
        wire.contains("1") && wire.contains("5a") && wire.contains("6a"),
        "docs/wire.md's sections were read: {wire:?}"
    );
    let names = names_in_repo();
    let mut wrong = Vec::new();
    let texts = texts();
    assert!(texts.len() > 1000, "comments were read: {}", texts.len());
    for t in &texts {
        let s = t.text.as_str();
        let at = |o: usize| format!("{}:{}", t.file, t.line_at(o));
        for (o, c) in s.char_indices() {
            let before = s[..o].chars().next_back();
            if before.is_some_and(|b| path_char(b) || b == ':') {
                continue;
            }
            let token: String = s[o..]
                .chars()
                .take_while(|&c| path_char(c) || matches!(c, '{' | '}' | ','))
                .collect();
            let token = token.trim_end_matches([',', '.', '-']);
            // Repository paths.
            if PATH_ROOTS.iter().any(|r| token.starts_with(r)) && c != '.' {
                let backticked = before == Some('`');
                let file_like = token.rsplit('/').next().is_some_and(|n| n.contains('.'));
                if backticked || file_like {
                    for p in expand(token) {
                        if !exists(&p, &t.file) {
                            wrong.push(format!("{}: `{p}` does not exist", at(o)));
                        }
                    }
                }
            }
            // Markdown files, and the sections named after them.
            if let Some(md) = token.strip_suffix(".md").filter(|m| !m.is_empty()) {
                let name = format!("{md}.md");
                let resolved = if name.contains('/') {
                    exists(&name, &t.file).then(|| name.clone())
                } else {
                    names.contains(&name).then(|| name.clone())
                };
                let Some(resolved) = resolved else {
                    wrong.push(format!("{}: {name} does not exist", at(o)));
                    continue;
                };
                let rest = &s[o + name.len()..];
                let rest = rest.trim_start_matches('`');
                if resolved.ends_with("wire.md") {
                    for (_, id) in section_list(rest.trim_start()) {
                        if !id.is_empty() && !wire.contains(&id) {
                            wrong.push(format!("{}: docs/wire.md has no §{id}", at(o)));
                        }
                    }
                }
                let quoted = rest.trim_start_matches([',', ':', ' ']);
                if let Some(q) = quoted.strip_prefix('"') {
                    let title = q.split('"').next().unwrap_or("");
                    let file = if resolved.contains('/') {
                        resolved.clone()
                    } else {
                        // A bare name: the file of that name nearest the text.
                        let mut dir = root().join(&t.file);
                        loop {
                            dir.pop();
                            if dir.join(&resolved).exists() || dir == root() {
                                break rel(&dir.join(&resolved));
                            }
                        }
                    };
                    if !headings(&file).iter().any(|h| h.starts_with(title)) {
                        wrong.push(format!("{}: {file} has no section \"{title}\"", at(o)));
                    }
                }
            }
        }
        // Bare `§N` inside docs/wire.md are its own sections (RFC sections aside).
        if t.file == "docs/wire.md" {
            for (o, _) in s.match_indices('§') {
                let lead = &s[o.saturating_sub(40)..o];
                if lead.contains("RFC ") || s[..o].ends_with("wire.md ") {
                    continue;
                }
                let id = section_id(&s[o + '§'.len_utf8()..]);
                if !id.is_empty() && !wire.contains(&id) {
                    wrong.push(format!("{}: docs/wire.md has no §{id}", at(o)));
                }
            }
        }
        // Issue and pull-request numbers.
        let lower = s.to_ascii_lowercase();
        for word in ["issue", "issues", "pr", "pull request"] {
            for (o, _) in lower.match_indices(word) {
                if lower[..o].ends_with(|c: char| c.is_ascii_alphanumeric()) {
                    continue;
                }
                let rest = lower[o + word.len()..].trim_start_matches([' ', '#']);
                if rest.len() < lower.len() - o - word.len()
                    && rest.starts_with(|c: char| c.is_ascii_digit())
                {
                    wrong.push(format!("{}: cites an issue number", at(o)));
                }
            }
        }
        for (o, _) in s.match_indices('#') {
            let prev = s[..o].chars().next_back();
            let digits: String = s[o + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let number = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit());
            if number && prev.is_none_or(|p| p.is_whitespace() || matches!(p, '(' | '[' | ',')) {
                wrong.push(format!("{}: cites #{digits}", at(o)));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "{} references to nothing:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A file's doc lines: (line index, the text after `///` or `//!`).
type DocLines = Vec<(usize, String)>;

/// The module a file under src/ is, as its segments (`src/proxy/mod.rs` → `[proxy]`).
fn module_segments(file: &str) -> Vec<String> {
    let path = file.trim_start_matches("src/").trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if matches!(path, "lib" | "main") {
        return Vec::new();
    }
    path.split('/').map(String::from).collect()
}

/// The file of a module (`[proxy, hold]` → `src/proxy/hold.rs`), if there is one.
fn module_file(segments: &[String]) -> Option<String> {
    if segments.is_empty() {
        return Some("src/lib.rs".to_string());
    }
    let base = format!("src/{}", segments.join("/"));
    [format!("{base}.rs"), format!("{base}/mod.rs")]
        .into_iter()
        .find(|f| root().join(f).is_file())
}

/// Whether `code` (a file's lines without comments) defines or re-exports `name`.
fn defines(code: &str, name: &str) -> bool {
    let word = |line: &str| {
        line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == name)
    };
    code.lines().any(|line| {
        let t = line.trim_start();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = t.strip_prefix("const fn ").map_or(t, |_| &t[6..]);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let kinds = [
            "fn ",
            "struct ",
            "enum ",
            "trait ",
            "type ",
            "const ",
            "static ",
            "mod ",
            "macro_rules! ",
            "union ",
        ];
        kinds.iter().any(|k| {
            t.strip_prefix(k).is_some_and(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    == Some(name)
            })
        }) || (t.starts_with("use ") && line.trim_start().starts_with("pub") && word(t))
    })
}

/// A file's lines without their comments, each `use` statement on one line.
fn code_of(file: &str) -> String {
    let mut out = String::new();
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_default();
    for l in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let open = out.lines().last().is_some_and(|last| {
            let t = last.trim_start();
            (t.starts_with("use ") || t.starts_with("pub ") && t.contains(" use "))
                && !t.contains(';')
        });
        if open {
            out.pop();
            out.push_str(l.trim());
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

/// The items doc comments name exist. In every `//!` and `///` comment under src/ and in
/// ARCHITECTURE.md, a
/// backticked path with `::` whose first segment is a module of the crate (from the
/// crate's root, the comment's own module or one around it; `crate::` too) names a
/// module file and then an item that file defines or re-exports (`proxy::hold::Hold`,
/// `negotiate::pool::retry`); a segment after that item (a method, a variant, a field)
/// is defined somewhere under src/. `Type::member` with a type of the crate is checked
/// the same way. Paths into other crates (`pingora::…`, `std::…`) are not read.
#[test]
fn doc_comments_name_items_that_exist() {
    let mut files = Vec::new();
    walk(&root().join("src"), &mut files);
    let files: Vec<String> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| rel(p))
        .collect();
    let codes: std::collections::BTreeMap<String, String> =
        files.iter().map(|f| (f.clone(), code_of(f))).collect();
    let all_code: String = codes.values().map(String::as_str).collect();
    let anywhere = |name: &str| {
        all_code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == name)
    };
    let type_defined = |name: &str| codes.values().any(|c| defines(c, name));
    let mut wrong = Vec::new();
    let mut checked = 0;
    // Each file's doc lines, and ARCHITECTURE.md's, read from the crate's root.
    let mut docs: Vec<(String, Vec<String>, DocLines)> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let lines = text.lines().enumerate().filter_map(|(n, line)| {
            let t = line.trim_start();
            let doc = t.strip_prefix("///").or_else(|| t.strip_prefix("//!"))?;
            Some((n, doc.to_string()))
        });
        docs.push((file.clone(), module_segments(file), lines.collect()));
    }
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let lines = architecture.lines().map(String::from).enumerate().collect();
    docs.push(("ARCHITECTURE.md".to_string(), Vec::new(), lines));
    for (file, here, lines) in &docs {
        for (n, doc) in lines {
            // Backticked spans, and intra-doc link targets `[…](path)`.
            let mut spans: Vec<&str> = doc.split('`').skip(1).step_by(2).collect();
            for (i, _) in doc.match_indices("](") {
                let rest = &doc[i + 2..];
                spans.push(&rest[..rest.find(')').unwrap_or(rest.len())]);
            }
            for span in spans {
                let path = span.trim_end_matches("()");
                let path = path.strip_prefix("crate::").unwrap_or(path);
                let ok_chars = path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
                if !ok_chars || !path.contains("::") || path.contains(":::") {
                    continue;
                }
                let segs: Vec<String> = path.split("::").map(String::from).collect();
                if segs.iter().any(|s| s.is_empty()) {
                    continue;
                }
                // `Type::member`, with a type of the crate.
                if segs[0].starts_with(|c: char| c.is_ascii_uppercase()) {
                    if type_defined(&segs[0]) {
                        checked += 1;
                        if let Some(m) = segs[1..].iter().find(|s| !anywhere(s)) {
                            wrong.push(format!("{file}:{}: `{span}`: no {m}", n + 1));
                        }
                    }
                    continue;
                }
                // The longest module prefix, from the root, this module or one around it.
                let mut best: Option<(usize, Vec<String>)> = None;
                for up in 0..=here.len() {
                    let base = &here[..here.len() - up];
                    for k in 1..=segs.len() {
                        let mut m = base.to_vec();
                        m.extend_from_slice(&segs[..k]);
                        if module_file(&m).is_some() && best.as_ref().is_none_or(|b| k > b.0) {
                            best = Some((k, m));
                        }
                    }
                }
                let Some((k, module)) = best else {
                    continue;
                };
                checked += 1;
                let Some(item) = segs.get(k) else { continue };
                let code = &codes[&module_file(&module).unwrap()];
                if !defines(code, item) {
                    wrong.push(format!(
                        "{file}:{}: `{span}`: {} defines no {item}",
                        n + 1,
                        module.join("::")
                    ));
                } else if let Some(m) = segs[k + 1..].iter().find(|s| !anywhere(s)) {
                    wrong.push(format!("{file}:{}: `{span}`: no {m}", n + 1));
                }
            }
        }
    }
    assert!(checked > 100, "doc comments were read: {checked} paths");
    assert!(
        wrong.is_empty(),
        "{} doc comments name what does not exist:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
