//! Embeds the git commit byre is built from as `BYRE_COMMIT` (`byre::BUILD_COMMIT`), which
//! `getStatus` reports for the pages this binary served. `BYRE_COMMIT` in the build's
//! environment wins (a build from a source archive); outside a git checkout, or when `git`
//! is missing or fails, it is `unknown`. Nothing else (no time, no host) goes in, so the
//! build stays reproducible from the same commit.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BYRE_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = std::env::var("BYRE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git_head(&dir))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BYRE_COMMIT={}", commit.trim());
}

/// `git rev-parse HEAD` in `dir`, and rerun-if-changed lines for the files that move when HEAD
/// does (HEAD itself, the branch it names, packed-refs).
fn git_head(dir: &Path) -> Option<String> {
    let head = git(dir, &["rev-parse", "--verify", "HEAD"])?;
    let mut watch = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(branch);
    }
    for name in watch {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            // A missing file would make cargo rerun this script on every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(head)
}

/// One git command's trimmed stdout, or `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_owned())
}
