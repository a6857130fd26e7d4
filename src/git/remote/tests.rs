//! `gitPull` and `gitPush` on real temporary repositories (set up with the `git` binary by
//! argv; byre's side through the functions under test).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Setup",
            "-c",
            "user.email=setup@example.com",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

const BRANCH: &str = "byre/task-1";

struct Fixture {
    _dir: TempDir,
    repo: PathBuf,
    origin: PathBuf,
    wt: PathBuf,
}

/// A checkout on `main`, a bare origin it was pushed to, and a task worktree.
fn fixture() -> Fixture {
    let dir = TempDir::new().unwrap();
    let repo = dir.path().join("repo");
    let origin = dir.path().join("origin.git");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("lib.txt"), "one\ntwo\nthree\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(
        dir.path(),
        &["init", "-q", "--bare", "-b", "main", "origin.git"],
    );
    git(
        &repo,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&repo, &["push", "-q", "origin", "main"]);
    let wt = dir.path().join("wt").join("task-1");
    let head = git(&repo, &["rev-parse", "main"]);
    crate::ensure_worktree(&repo, BRANCH, &head, &wt, "task-1").unwrap();
    Fixture {
        _dir: dir,
        repo,
        origin,
        wt,
    }
}

fn agent() -> Identity {
    Identity {
        name: "CodeBolt agent".into(),
        email: "codebolt@byre.invalid".into(),
    }
}

#[test]
fn a_pull_merges_the_local_default_branch_into_the_task_branch() {
    let f = fixture();
    // The task commits a change; main moves on in another file.
    fs::write(f.wt.join("task.txt"), "task\n").unwrap();
    git(&f.wt, &["add", "-A"]);
    git(&f.wt, &["commit", "-q", "-m", "task work"]);
    fs::write(f.repo.join("main.txt"), "main\n").unwrap();
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "main work"]);
    let main = git(&f.repo, &["rev-parse", "main"]);
    let pulled = pull_default(&f.repo, &f.wt, "main", &agent()).unwrap();
    assert_ne!(pulled.head_before, pulled.head_after);
    assert_eq!(git(&f.wt, &["rev-parse", "HEAD"]), pulled.head_after);
    assert_eq!(git(&f.wt, &["rev-parse", "--abbrev-ref", "HEAD"]), BRANCH);
    // Both sides are in the task's worktree; main itself did not move.
    assert_eq!(fs::read_to_string(f.wt.join("main.txt")).unwrap(), "main\n");
    assert_eq!(fs::read_to_string(f.wt.join("task.txt")).unwrap(), "task\n");
    git(&f.wt, &["merge-base", "--is-ancestor", &main, "HEAD"]);
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), main);
    // Origin's main was fetched and lacks the local commit: nothing of it is said missing.
    assert!(!pulled.message.contains("lacks"), "{}", pulled.message);
    // Again: nothing to do.
    let again = pull_default(&f.repo, &f.wt, "main", &agent()).unwrap();
    assert_eq!(again.head_before, again.head_after);
}

#[test]
fn a_conflicting_pull_is_refused_and_leaves_the_worktree_as_it_was() {
    let f = fixture();
    fs::write(f.wt.join("lib.txt"), "one\nTASK\nthree\n").unwrap();
    git(&f.wt, &["commit", "-q", "-am", "task edits lib"]);
    fs::write(f.repo.join("lib.txt"), "one\nMAIN\nthree\n").unwrap();
    git(&f.repo, &["commit", "-q", "-am", "main edits lib"]);
    let head = git(&f.wt, &["rev-parse", "HEAD"]);
    let e = pull_default(&f.repo, &f.wt, "main", &agent()).unwrap_err();
    let MergeError::Refused(why) = e else {
        panic!("{e}")
    };
    assert!(why.contains("conflicts in: lib.txt"), "{why}");
    assert_eq!(git(&f.wt, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&f.wt, &["status", "--porcelain"]), "");
    assert_eq!(
        fs::read_to_string(f.wt.join("lib.txt")).unwrap(),
        "one\nTASK\nthree\n"
    );
}

#[test]
fn a_push_sends_the_task_branch_only_and_never_forces() {
    let f = fixture();
    let main_at_origin = git(&f.origin, &["rev-parse", "main"]);
    fs::write(f.wt.join("task.txt"), "task\n").unwrap();
    git(&f.wt, &["add", "-A"]);
    git(&f.wt, &["commit", "-q", "-m", "task work"]);
    // main moves locally too: it must not be pushed.
    fs::write(f.repo.join("main.txt"), "main\n").unwrap();
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "main work"]);
    let tip = push_task_branch(&f.repo, BRANCH).unwrap();
    assert_eq!(tip, git(&f.wt, &["rev-parse", "HEAD"]));
    assert_eq!(git(&f.origin, &["rev-parse", BRANCH]), tip);
    assert_eq!(git(&f.origin, &["rev-parse", "main"]), main_at_origin);
    // Rewritten history is not forced over what origin has.
    git(&f.wt, &["commit", "-q", "--amend", "-m", "rewritten"]);
    let e = push_task_branch(&f.repo, BRANCH).unwrap_err();
    assert!(e.to_string().contains("never forced"), "{e}");
    assert_eq!(git(&f.origin, &["rev-parse", BRANCH]), tip);
    // Without an origin there is nowhere to push.
    git(&f.repo, &["remote", "remove", "origin"]);
    let e = push_task_branch(&f.repo, BRANCH).unwrap_err();
    assert!(e.to_string().contains("no remote `origin`"), "{e}");
}
