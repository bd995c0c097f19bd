//! The git commit cborgate is built from, for `--version` and `cborgate_build_info`:
//! `CBORGATE_GIT_COMMIT` when set (a build without `.git`, such as the Dockerfile's,
//! whose context leaves `.git` out), else `git rev-parse --short=12 HEAD`, else
//! `unknown`. Rebuilt when the checked-out commit changes.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CBORGATE_GIT_COMMIT");
    let given = std::env::var("CBORGATE_GIT_COMMIT").unwrap_or_default();
    let commit = if !given.trim().is_empty() {
        given.trim().to_string()
    } else {
        // What changes when another commit is checked out or made: HEAD, the branch
        // it names, and the packed refs (in a worktree, the branch lives in the
        // common directory).
        if let (Some(dir), Some(common)) = (
            git(&["rev-parse", "--git-dir"]),
            git(&["rev-parse", "--git-common-dir"]),
        ) {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                println!("cargo:rerun-if-changed={common}/{r}");
            }
            println!("cargo:rerun-if-changed={common}/packed-refs");
        }
        git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
    };
    println!("cargo:rustc-env=CBORGATE_GIT_COMMIT={commit}");
}
