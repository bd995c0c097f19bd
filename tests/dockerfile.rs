//! The Dockerfile's builder stage, checked without Docker. Its dependency-cache
//! stage once failed (`failed to load manifest for workspace member …/bench/load`)
//! because it copied only Cargo.toml, Cargo.lock and vendor/ while Cargo.toml
//! declares `[workspace] members = ["bench/load"]`. Here the stage's COPY
//! instructions (those before its first RUN) are read from the Dockerfile, exactly
//! those files are copied from the repository into a fresh directory, and the
//! stage's own RUN command is run there with `sh -c`. Cheaper checks need no
//! cargo: every workspace member's manifest is among the copied files, and the
//! real build copies the whole context and installs the binary the runtime stage
//! starts.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------- parsing

/// One instruction: its keyword in upper case and its arguments, with
/// continuation lines joined as Docker joins them (backslash-newline removed).
#[derive(Debug)]
struct Instr {
    keyword: String,
    args: String,
}

#[derive(Debug)]
struct Stage {
    name: Option<String>,
    instrs: Vec<Instr>,
}

/// The stages of a Dockerfile. Comment lines are dropped, also inside a
/// continued instruction, as Docker does; parser directives are not used here.
fn parse(text: &str) -> Vec<Stage> {
    let mut logical = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('#') || (cur.is_empty() && t.is_empty()) {
            continue;
        }
        let line = line.trim_end();
        match line.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(line);
                logical.push(std::mem::take(&mut cur));
            }
        }
    }
    assert!(
        cur.is_empty(),
        "the Dockerfile ends inside a continued line"
    );
    let mut stages: Vec<Stage> = Vec::new();
    for l in logical {
        let l = l.trim();
        let (kw, args) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
        let instr = Instr {
            keyword: kw.to_ascii_uppercase(),
            args: args.trim().to_string(),
        };
        if instr.keyword == "FROM" {
            let words: Vec<&str> = instr.args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                _ => None,
            };
            stages.push(Stage {
                name,
                instrs: Vec::new(),
            });
        }
        stages
            .last_mut()
            .expect("an instruction before the first FROM")
            .instrs
            .push(instr);
    }
    stages
}

fn stage<'a>(stages: &'a [Stage], name: &str) -> &'a Stage {
    stages
        .iter()
        .find(|s| s.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no stage named {name}"))
}

/// One context path copied by a COPY: the repository path, where it lands
/// relative to WORKDIR, and whether it is a directory (whose contents land there).
#[derive(Debug)]
struct Copied {
    src: PathBuf,
    dest: PathBuf,
    dir: bool,
}

/// Docker's COPY rules for the forms used here: several sources or a
/// destination ending in `/` put each file under the destination by its name;
/// a directory source copies its contents. Anything else (flags, the JSON form,
/// wildcards, absolute destinations outside WORKDIR) is refused, so that a
/// change to the Dockerfile cannot be silently misread.
fn copy_sources(instr: &Instr, workdir: &Path) -> Vec<Copied> {
    let words: Vec<&str> = instr.args.split_whitespace().collect();
    assert!(
        !instr.args.starts_with('[') && !words.iter().any(|w| w.starts_with("--")),
        "COPY {}: form not understood by this test",
        instr.args
    );
    let (dest, srcs) = words.split_last().expect("COPY without arguments");
    assert!(!srcs.is_empty(), "COPY {}: no source", instr.args);
    let dest_path = Path::new(dest);
    let dest_rel = if dest_path.is_absolute() {
        dest_path
            .strip_prefix(workdir)
            .unwrap_or_else(|_| panic!("COPY to {dest}, outside WORKDIR {}", workdir.display()))
            .to_path_buf()
    } else {
        dest_path.to_path_buf()
    };
    let into_dir = dest.ends_with('/') || srcs.len() > 1;
    srcs.iter()
        .map(|s| {
            assert!(
                !s.contains(['*', '?', '[']),
                "COPY source {s}: wildcards not understood by this test"
            );
            let src = Path::new(s).components().collect::<PathBuf>();
            let dir = repo().join(&src).is_dir();
            let dest = if dir || !into_dir {
                dest_rel.clone()
            } else {
                dest_rel.join(src.file_name().expect("a file source has a name"))
            };
            Copied {
                src,
                dest: dest.components().collect(),
                dir,
            }
        })
        .collect()
}

/// The builder's dependency stage: the context files its COPYs bring in before
/// its first RUN, and that RUN's command.
fn deps_stage(dockerfile: &str) -> (Vec<Copied>, String) {
    let stages = parse(dockerfile);
    let builder = stage(&stages, "builder");
    let mut workdir = PathBuf::from("/");
    let mut copied = Vec::new();
    for i in &builder.instrs {
        match i.keyword.as_str() {
            "WORKDIR" => workdir = workdir.join(&i.args),
            "COPY" => copied.extend(copy_sources(i, &workdir)),
            "RUN" => return (copied, i.args.clone()),
            _ => {}
        }
    }
    panic!("the builder stage has no RUN")
}

/// Whether the repository file `rel` lands at the same path in the stage.
fn lands_in_place(copied: &[Copied], rel: &Path) -> bool {
    copied.iter().any(|c| {
        let rest = if c.dir {
            rel.strip_prefix(&c.src).ok()
        } else {
            (c.src == rel).then_some(Path::new(""))
        };
        rest.is_some_and(|r| c.dest.join(r).components().eq(rel.components()))
    })
}

/// Workspace members (from Cargo.toml) whose manifest the stage does not copy.
fn members_not_copied(dockerfile: &str, cargo_toml: &str) -> Vec<String> {
    let manifest: toml::Table = cargo_toml.parse().expect("Cargo.toml parses");
    let members = manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .cloned()
        .unwrap_or_default();
    let (copied, _) = deps_stage(dockerfile);
    members
        .iter()
        .map(|m| m.as_str().expect("a member is a string").to_string())
        .inspect(|m| assert!(!m.contains('*'), "member glob {m} not understood"))
        .filter(|m| !lands_in_place(&copied, &Path::new(m).join("Cargo.toml")))
        .collect()
}

// ---------------------------------------------------------------- cheap checks

#[test]
fn the_dependency_stage_copies_every_workspace_member_manifest() {
    assert_eq!(
        members_not_copied(&read("Dockerfile"), &read("Cargo.toml")),
        Vec::<String>::new(),
        "workspace members whose Cargo.toml the dependency stage does not copy \
         (cargo then fails: failed to load manifest for workspace member)"
    );
}

/// The check above catches the original bug: the same Dockerfile without the
/// member's COPY line is reported, by name.
#[test]
fn a_dependency_stage_without_the_member_manifest_is_caught() {
    let full = read("Dockerfile");
    let broken: String = full
        .lines()
        .filter(|l| !l.trim_start().starts_with("COPY bench/load/Cargo.toml"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        broken.len(),
        full.len(),
        "the member's COPY line was not found"
    );
    assert_eq!(
        members_not_copied(&broken, &read("Cargo.toml")),
        ["bench/load"]
    );
}

#[test]
fn the_parser_joins_continuations_and_skips_comments() {
    let stages = parse(
        "FROM a AS builder\nWORKDIR /src\n# c\nCOPY x y/\nRUN one \\\n# inside\n && two\nFROM b\n",
    );
    assert_eq!(stages.len(), 2);
    let b = &stages[0].instrs;
    assert_eq!(b[3].keyword, "RUN");
    assert_eq!(b[3].args, "one  && two");
    assert_eq!(stages[1].name, None);
}

/// The real build: after the dependency layer the whole context is copied, the
/// release binary named in Cargo.toml is installed at the path the runtime
/// stage copies, and the runtime stage starts it.
#[test]
fn the_build_stage_installs_the_binary_the_runtime_starts() {
    let dockerfile = read("Dockerfile");
    let stages = parse(&dockerfile);
    let builder = stage(&stages, "builder");
    let first_run = builder
        .instrs
        .iter()
        .position(|i| i.keyword == "RUN")
        .unwrap();
    let after = &builder.instrs[first_run + 1..];
    assert!(
        after.iter().any(|i| i.keyword == "COPY" && i.args == ". ."),
        "the build stage must copy the whole context (COPY . .)"
    );
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    let bin = manifest["bin"].as_array().unwrap()[0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let built = format!("target/release/{bin}");
    let last_run = &after.iter().rfind(|i| i.keyword == "RUN").unwrap().args;
    assert!(
        last_run.contains("cargo build --release --locked"),
        "{last_run}"
    );
    let install = last_run
        .split("&&")
        .map(str::trim)
        .find(|c| c.starts_with("install "))
        .expect("the build stage installs the binary");
    let words: Vec<&str> = install.split_whitespace().collect();
    let (out, from) = words.split_last().unwrap();
    assert_eq!(from.last(), Some(&built.as_str()), "{install}");

    let runtime = stages.last().unwrap();
    let copy = runtime
        .instrs
        .iter()
        .find(|i| i.keyword == "COPY")
        .expect("the runtime stage copies the binary");
    let words: Vec<&str> = copy.args.split_whitespace().collect();
    assert_eq!(words[..2], ["--from=builder", *out], "{}", copy.args);
    let entry = runtime
        .instrs
        .iter()
        .find(|i| i.keyword == "ENTRYPOINT")
        .unwrap();
    assert_eq!(entry.args, format!("[\"{}\"]", words[2]));
}

/// Every base image is pinned by digest (`name:tag@sha256:<64 hex>`), so a
/// rebuild fetches the bytes that were reviewed, not whatever the tag points
/// at that day.
#[test]
fn every_base_image_is_pinned_by_digest() {
    let stages = parse(&read("Dockerfile"));
    assert!(!stages.is_empty());
    for s in &stages {
        let from = &s.instrs[0].args;
        let image = from.split_whitespace().next().unwrap();
        let (_, digest) = image
            .split_once("@sha256:")
            .unwrap_or_else(|| panic!("FROM {from}: not pinned by digest"));
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "FROM {from}: a sha256 digest has 64 hex digits"
        );
    }
}

/// `docker run IMAGE` with no arguments shows what `serve` needs (its help,
/// exit 0) instead of starting one that exits 2 for want of --upstream.
#[test]
fn the_default_command_says_what_serve_needs() {
    let stages = parse(&read("Dockerfile"));
    let runtime = stages.last().unwrap();
    let cmd = &runtime
        .instrs
        .iter()
        .rfind(|i| i.keyword == "CMD")
        .expect("the runtime stage has a CMD")
        .args;
    let words: Vec<String> = serde_json::from_str(cmd).expect("CMD in JSON form");
    assert!(
        words.iter().any(|w| w == "--help") || words.iter().any(|w| w == "--upstream"),
        "CMD {cmd}: starts serve without --upstream (exit 2)"
    );
}

// ---------------------------------------------------------------- the stage, run

/// Copy `src` to `dest` keeping its mtime, so that cargo's fingerprints of path
/// crates (shims/libz-ng-sys) stay fresh between runs and a warm run is
/// incremental.
fn copy_file(src: &Path, dest: &Path) {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(src, dest).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let mtime = std::fs::metadata(src).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(dest)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

fn copy_tree(src: &Path, dest: &Path) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let (s, d) = (e.path(), dest.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            copy_tree(&s, &d);
        } else {
            copy_file(&s, &d);
        }
    }
}

/// The dependency stage's RUN, on exactly the files its COPYs bring in. Run
/// from a fresh context directory each time; the cargo target directory is kept
/// between runs, so only the first run compiles the dependency graph.
#[test]
fn the_dependency_stage_builds_from_exactly_its_copied_files() {
    let (copied, run) = deps_stage(&read("Dockerfile"));
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dockerfile-deps-stage");
    let ctx = base.join("ctx");
    if ctx.exists() {
        std::fs::remove_dir_all(&ctx).unwrap();
    }
    std::fs::create_dir_all(&ctx).unwrap();
    for c in &copied {
        let src = repo().join(&c.src);
        if c.dir {
            copy_tree(&src, &ctx.join(&c.dest));
        } else {
            copy_file(&src, &ctx.join(&c.dest));
        }
    }
    let mut cmd = Command::new("sh");
    // Without the variables cargo sets for this test process (CARGO_PKG_NAME,
    // CARGO_MANIFEST_DIR, …): as in a Docker build, and because build scripts
    // such as ring's rerun when they change, which would make every run after
    // one from a plain shell start over.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let set_by_cargo = ["CARGO_PKG_", "CARGO_BIN_EXE_"]
            .iter()
            .any(|p| k.starts_with(p))
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_MANIFEST_LINKS",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ]
            .contains(&k.as_ref());
        if set_by_cargo {
            cmd.env_remove(k.as_ref());
        }
    }
    let out = cmd
        .arg("-c")
        .arg(&run)
        .current_dir(&ctx)
        .env("CARGO_TARGET_DIR", base.join("target"))
        // The root package's dependencies are a subset of what this test
        // binary was built from, so they are in the local registry cache
        // already: no network, and the check is hermetic.
        .env("CARGO_NET_OFFLINE", "true")
        // The check is about which files the stage needs, not about
        // optimisation: a cheap release profile (no optimisation, debug info
        // or LTO, many codegen units) keeps it to a plain compile.
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_LTO", "off")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "false")
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "the Dockerfile's dependency stage failed ({}) on {:?}:\n{}",
        out.status,
        copied.iter().map(|c| &c.src).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The commit stamp: the context has no `.git`, so build.rs reads the commit from
/// `CBORGATE_GIT_COMMIT`. The builder stage must declare it as a build argument and
/// pass it on as the environment of the build, and every `docker build` the
/// Dockerfile, the README and the release workflow show must set it; otherwise
/// `--version` says `commit unknown`.
#[test]
fn every_image_build_stamps_the_commit() {
    let dockerfile = read("Dockerfile");
    let stages = parse(&dockerfile);
    let builder = stage(&stages, "builder");
    let pos = |kw: &str, needle: &str| {
        builder
            .instrs
            .iter()
            .position(|i| i.keyword == kw && i.args.contains(needle))
    };
    let arg = pos("ARG", "CBORGATE_GIT_COMMIT").expect("builder: no ARG CBORGATE_GIT_COMMIT");
    let env = pos("ENV", "CBORGATE_GIT_COMMIT=${CBORGATE_GIT_COMMIT}")
        .expect("builder: no ENV CBORGATE_GIT_COMMIT=${CBORGATE_GIT_COMMIT}");
    let build = builder
        .instrs
        .iter()
        .rposition(|i| i.keyword == "RUN" && i.args.contains("cargo build"))
        .expect("builder: no cargo build");
    assert!(
        arg < env && env < build,
        "the ARG and ENV must come before the real build"
    );
    let mut commands = 0;
    for file in ["Dockerfile", "README.md", ".github/workflows/release.yml"] {
        let text = read(file);
        // A command continued over several lines counts as one, up to its blank line.
        for (i, _) in text.match_indices("docker build ") {
            let rest = &text[i..];
            let end = rest.find("\n\n").unwrap_or(rest.len());
            commands += 1;
            assert!(
                rest[..end].contains("CBORGATE_GIT_COMMIT"),
                "{file}: a `docker build` without --build-arg CBORGATE_GIT_COMMIT: {}",
                &rest[..end.min(200)]
            );
        }
    }
    assert!(commands >= 2, "no documented docker build found");
}
