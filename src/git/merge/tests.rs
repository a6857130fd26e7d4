//! The squash merge, unmerged stats and worktree removal on real temporary repositories
//! (setup with the `git` binary by argv; byre's side through the functions under test).

use std::collections::BTreeMap;
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

struct Fixture {
    _dir: TempDir,
    repo: PathBuf,
    origin: PathBuf,
    wt: PathBuf,
}

const BRANCH: &str = "byre/task-1";

/// A checkout on `main` with two files, a bare origin it was pushed to, and a task worktree.
fn fixture() -> Fixture {
    let dir = TempDir::new().unwrap();
    let repo = dir.path().join("repo");
    let origin = dir.path().join("origin.git");
    fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("README.md"), "hello\n").unwrap();
    fs::write(repo.join("lib.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(repo.join("blob.bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
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

/// Every file under `dir` (with `.git`'s index, HEAD and refs), path → bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_owned();
            let in_git = rel.starts_with(".git");
            let keep_git = rel == Path::new(".git/index")
                || rel == Path::new(".git/HEAD")
                || rel.starts_with(".git/refs");
            if p.is_dir() {
                if !in_git || rel == Path::new(".git") || rel.starts_with(".git/refs") {
                    stack.push(p);
                }
            } else if !in_git || keep_git {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn refs(repo: &Path) -> String {
    git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

fn ada() -> Identity {
    Identity {
        name: "Ada Lovelace".into(),
        email: "ada@example.com".into(),
    }
}

/// The worktree's facts, read as the task's sandbox reads them (here in this process).
fn facts(wt: &Path) -> Option<WorktreeFacts> {
    worktree_facts(wt).ok()
}

/// [`remove_task_worktree`] of the fixture's task, with its worktree's facts when it has one.
fn remove(f: &Fixture) -> Result<Option<String>, GitError> {
    remove_task_worktree(
        &f.repo,
        &f.wt,
        facts(&f.wt).as_ref(),
        "task-1",
        "t1",
        BRANCH,
    )
}

fn request<'a>(
    f: &'a Fixture,
    title: &'a str,
    author: &'a Identity,
    co: &'a [Identity],
) -> SquashRequest<'a> {
    SquashRequest {
        repo_path: &f.repo,
        worktree: facts(&f.wt).expect("the worktree reads"),
        task_worktrees: f.wt.parent().expect("the tasks' worktrees"),
        task_branch: BRANCH,
        default_branch: "main",
        title,
        author,
        co_authors: co,
        time_us: 1_790_000_000_123_456,
    }
}

#[test]
fn unmerged_counts_commits_files_lines_and_uncommitted_paths() {
    let f = fixture();
    let zero = unmerged(&f.repo, &facts(&f.wt).unwrap(), BRANCH, "main").unwrap();
    assert_eq!(zero, Unmerged::default());
    fs::write(f.wt.join("new.txt"), "a\nb\n").unwrap();
    git(&f.wt, &["add", "new.txt"]);
    git(&f.wt, &["commit", "-q", "-m", "new"]);
    fs::write(f.wt.join("lib.txt"), "one\nTWO\nthree\n").unwrap(); // unstaged
    fs::write(f.wt.join("untracked.txt"), "x\n").unwrap(); // untracked
    let u = unmerged(&f.repo, &facts(&f.wt).unwrap(), BRANCH, "main").unwrap();
    assert_eq!(
        u,
        Unmerged {
            commits: 1,
            files: 3,
            insertions: 4,
            deletions: 1,
            uncommitted: 2
        }
    );
}

#[test]
fn a_squash_lands_byte_for_byte_is_pushed_and_fast_forwards_a_clean_checkout() {
    let f = fixture();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    git(&f.wt, &["add", "feature.txt"]);
    git(&f.wt, &["commit", "-q", "-m", "wip 1"]);
    fs::write(f.wt.join("uncommitted.txt"), "not committed yet\n").unwrap();
    let title = "Fix `rm -rf $(pwd)` and \"quotes\" 'single' — café ✓ $HOME \\n";
    let co = [Identity {
        name: "Bob Ünïcode".into(),
        email: "bob@example.com".into(),
    }];
    let author = ada();
    let sha = squash_merge(&request(&f, title, &author, &co))
        .unwrap()
        .expect("a commit");
    let raw = git(&f.repo, &["cat-file", "commit", &sha]);
    let message = raw.split_once("\n\n").unwrap().1;
    assert_eq!(
        format!("{message}\n"),
        format!("{title}\n\nCo-authored-by: Bob Ünïcode <bob@example.com>\n")
    );
    assert_eq!(
        git(&f.repo, &["log", "-1", "--format=%an <%ae>", &sha]),
        "Ada Lovelace <ada@example.com>"
    );
    assert_eq!(
        git(&f.repo, &["rev-parse", "main"]),
        sha,
        "local main advanced"
    );
    assert_eq!(
        git(&f.origin, &["rev-parse", "main"]),
        sha,
        "pushed to origin"
    );
    assert_eq!(
        git(&f.repo, &["rev-list", "--count", "main"]),
        "2",
        "one commit"
    );
    // The user's clean checkout on main was fast-forwarded: files and index.
    assert_eq!(
        fs::read_to_string(f.repo.join("feature.txt")).unwrap(),
        "feature\n"
    );
    assert_eq!(
        fs::read_to_string(f.repo.join("uncommitted.txt")).unwrap(),
        "not committed yet\n"
    );
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
}

#[test]
fn nothing_to_merge_makes_no_commit() {
    let f = fixture();
    let before = refs(&f.repo);
    let author = ada();
    assert_eq!(squash_merge(&request(&f, "t", &author, &[])).unwrap(), None);
    assert_eq!(refs(&f.repo), before);
}

#[test]
fn a_dirty_checkout_of_main_refuses_and_stays_byte_identical() {
    let f = fixture();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    fs::write(f.repo.join("README.md"), "my own edit\n").unwrap();
    fs::write(f.repo.join("lib.txt"), "staged edit\n").unwrap();
    git(&f.repo, &["add", "lib.txt"]);
    let (files, refs_before, origin) = (snapshot(&f.repo), refs(&f.repo), refs(&f.origin));
    let author = ada();
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("uncommitted")),
        "{err}"
    );
    assert_eq!(snapshot(&f.repo), files);
    assert_eq!(refs(&f.repo), refs_before);
    assert_eq!(refs(&f.origin), origin, "nothing pushed");
}

#[test]
fn a_checkout_on_another_branch_is_left_alone_while_main_advances() {
    let f = fixture();
    git(&f.repo, &["switch", "-q", "-c", "mine"]);
    fs::write(f.repo.join("README.md"), "my own edit\n").unwrap();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let files = snapshot(&f.repo);
    let files: BTreeMap<_, _> = files
        .into_iter()
        .filter(|(p, _)| {
            !p.starts_with(".git/refs/heads/main") && !p.starts_with(".git/refs/remotes")
        })
        .collect();
    let author = ada();
    let sha = squash_merge(&request(&f, "t", &author, &[]))
        .unwrap()
        .unwrap();
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), sha);
    let after: BTreeMap<_, _> = snapshot(&f.repo)
        .into_iter()
        .filter(|(p, _)| {
            !p.starts_with(".git/refs/heads/main") && !p.starts_with(".git/refs/remotes")
        })
        .collect();
    assert_eq!(after, files, "HEAD, index and files untouched");
}

/// Commits `change` on main in the checkout, `task_change` in the worktree, then expects
/// the squash to be refused as a conflict with no ref moved anywhere.
fn assert_conflict(change: impl Fn(&Path), task_change: impl Fn(&Path)) {
    let f = fixture();
    change(&f.repo);
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "theirs"]);
    task_change(&f.wt);
    let (r, o, files) = (refs(&f.repo), refs(&f.origin), snapshot(&f.repo));
    let author = ada();
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("conflict")),
        "{err}"
    );
    assert_eq!(refs(&f.repo), r);
    assert_eq!(refs(&f.origin), o);
    assert_eq!(snapshot(&f.repo), files);
}

#[test]
fn a_content_conflict_moves_no_ref() {
    assert_conflict(
        |d| fs::write(d.join("lib.txt"), "one\nmain\nthree\n").unwrap(),
        |d| fs::write(d.join("lib.txt"), "one\ntask\nthree\n").unwrap(),
    );
}

#[test]
fn a_binary_conflict_moves_no_ref() {
    assert_conflict(
        |d| fs::write(d.join("blob.bin"), [0u8, 9, 9, 0]).unwrap(),
        |d| fs::write(d.join("blob.bin"), [0u8, 7, 7, 0]).unwrap(),
    );
}

#[test]
fn a_rename_against_a_modify_and_delete_moves_no_ref() {
    // main renames lib.txt and edits it; the task edits the same line of it: rename/modify.
    assert_conflict(
        |d| {
            fs::remove_file(d.join("lib.txt")).unwrap();
            fs::write(d.join("moved.txt"), "one\nmain\nthree\n").unwrap();
        },
        |d| fs::write(d.join("lib.txt"), "one\ntask\nthree\n").unwrap(),
    );
    // main deletes it; the task renames it: rename/delete.
    assert_conflict(
        |d| fs::remove_file(d.join("lib.txt")).unwrap(),
        |d| fs::rename(d.join("lib.txt"), d.join("renamed.txt")).unwrap(),
    );
}

#[test]
fn an_operation_in_progress_refuses_the_merge() {
    for (in_checkout, file) in [
        (true, "MERGE_HEAD"),
        (true, "CHERRY_PICK_HEAD"),
        (false, "rebase-merge"),
        (false, "MERGE_HEAD"),
    ] {
        let f = fixture();
        fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
        let gitdir = if in_checkout {
            f.repo.join(".git")
        } else {
            f.repo.join(".git/worktrees/task-1")
        };
        let head = git(&f.repo, &["rev-parse", "main"]);
        if file == "rebase-merge" {
            fs::create_dir(gitdir.join(file)).unwrap();
        } else {
            fs::write(gitdir.join(file), format!("{head}\n")).unwrap();
        }
        let (r, files) = (refs(&f.repo), snapshot(&f.repo));
        let author = ada();
        let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
        assert!(
            matches!(err, MergeError::Refused(ref m) if m.contains("in progress")),
            "{file}: {err}"
        );
        assert_eq!(refs(&f.repo), r);
        assert_eq!(snapshot(&f.repo), files);
    }
}

#[test]
fn a_rejected_push_is_reported_and_moves_nothing_locally() {
    let f = fixture();
    // Someone else pushed to origin's main meanwhile.
    let other = f.repo.parent().unwrap().join("other");
    git(
        f.repo.parent().unwrap(),
        &["clone", "-q", f.origin.to_str().unwrap(), "other"],
    );
    fs::write(other.join("theirs.txt"), "theirs\n").unwrap();
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    git(&other, &["push", "-q", "origin", "main"]);
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let (r, files) = (refs(&f.repo), snapshot(&f.repo));
    let author = ada();
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("rejected")),
        "{err}"
    );
    assert_eq!(refs(&f.repo), r);
    assert_eq!(snapshot(&f.repo), files);
}

#[test]
fn removal_keeps_uncommitted_work_and_leaves_siblings_and_fsck_clean() {
    let f = fixture();
    let head = git(&f.repo, &["rev-parse", "main"]);
    let sibling = f.wt.parent().unwrap().join("task-2");
    crate::ensure_worktree(&f.repo, "byre/task-2", &head, &sibling, "task-2").unwrap();
    fs::write(sibling.join("sib.txt"), "sibling work\n").unwrap();
    fs::write(f.wt.join("work.txt"), "precious\n").unwrap();
    let kept = remove(&f).unwrap().expect("a snapshot ref");
    assert_eq!(kept, "refs/byre/tasks/t1/snap/1");
    assert_eq!(
        git(&f.repo, &["show", &format!("{kept}:work.txt")]),
        "precious"
    );
    assert_eq!(git(&f.repo, &["log", "-1", "--format=%P", &kept]), head);
    assert!(!f.wt.exists());
    assert!(!f.repo.join(".git/worktrees/task-1").exists());
    assert_eq!(git(&f.repo, &["branch", "--list", BRANCH]), "");
    assert_eq!(
        fs::read_to_string(sibling.join("sib.txt")).unwrap(),
        "sibling work\n"
    );
    assert!(git(&sibling, &["status", "--porcelain"]).contains("sib.txt"));
    git(&f.repo, &["fsck", "--strict", "--no-progress"]);
    // Again: nothing left to remove, nothing fails.
    assert_eq!(remove(&f).unwrap(), None);
}

#[test]
fn a_redo_after_the_squash_landed_reports_the_same_commit_and_makes_no_other() {
    let f = fixture();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    let sha = squash_merge(&request(&f, "Add feature", &author, &[]))
        .unwrap()
        .expect("a commit");
    // The commit's time is the request's (the merge's start), not the clock's.
    assert_eq!(
        git(&f.repo, &["log", "-1", "--format=%at %ct", &sha]),
        "1790000000 1790000000"
    );
    // byre stopped before recording it: the redo finds it rather than "nothing to merge".
    let again = squash_merge(&request(&f, "Add feature", &author, &[])).unwrap();
    assert_eq!(again.as_deref(), Some(sha.as_str()));
    assert_eq!(git(&f.repo, &["rev-list", "--count", "main"]), "2");
    assert_eq!(git(&f.origin, &["rev-parse", "main"]), sha);
    // Another merge whose changes are already there is still "nothing to merge".
    let other = squash_merge(&request(&f, "Another title", &author, &[])).unwrap();
    assert_eq!(other, None);
}

#[test]
fn a_redo_after_a_push_that_landed_before_the_local_update_makes_the_same_commit() {
    let f = fixture();
    let old = git(&f.repo, &["rev-parse", "main"]);
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    let sha = squash_merge(&request(&f, "Add feature", &author, &[]))
        .unwrap()
        .expect("a commit");
    // As if byre had died right after the push: origin has the commit, the checkout not.
    git(&f.repo, &["reset", "-q", "--hard", &old]);
    assert_eq!(git(&f.origin, &["rev-parse", "main"]), sha);
    let again = squash_merge(&request(&f, "Add feature", &author, &[]))
        .unwrap()
        .expect("a commit");
    assert_eq!(
        again, sha,
        "the very same commit, so the push is up to date"
    );
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), sha);
    assert_eq!(git(&f.origin, &["rev-parse", "main"]), sha);
    assert_eq!(git(&f.origin, &["rev-list", "--count", "main"]), "2");
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat` text.
fn stat_field(stat: &str, n: usize) -> i64 {
    let after = stat.rsplit_once(')').unwrap().1;
    after
        .split_whitespace()
        .nth(n - 3)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_push_runs_without_a_controlling_terminal_so_ssh_cannot_prompt() {
    let f = fixture();
    let out = f.repo.parent().unwrap().join("hook-stat");
    let hook = f.repo.join(".git/hooks/pre-push");
    fs::write(
        &hook,
        format!("#!/bin/sh\ncat /proc/$$/stat > '{}'\n", out.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    squash_merge(&request(&f, "t", &author, &[]))
        .unwrap()
        .expect("a commit");
    let stat = fs::read_to_string(&out).expect("the pre-push hook ran");
    // SAFETY: getsid(0) only reads this process's session id.
    let ours = unsafe { libc::getsid(0) } as i64;
    assert_ne!(stat_field(&stat, 6), ours, "git push left byre's session");
    assert_eq!(stat_field(&stat, 7), 0, "no controlling terminal");
}

#[test]
fn a_worktree_cut_off_from_its_repository_is_kept_in_a_snapshot_then_removed() {
    let f = fixture();
    fs::write(f.wt.join("work.txt"), "precious\n").unwrap();
    fs::write(f.wt.join(".gitignore"), "build/\n").unwrap();
    fs::create_dir(f.wt.join("build")).unwrap();
    fs::write(f.wt.join("build/out.o"), "ignored\n").unwrap();
    let branch_tip = git(&f.repo, &["rev-parse", BRANCH]);
    // A removal cut short inside libgit2's prune (or a hand) removed
    // `.git/worktrees/task-1`; the directory and its files are still there.
    fs::remove_dir_all(f.repo.join(".git/worktrees/task-1")).unwrap();
    let kept = remove(&f).unwrap().expect("a snapshot ref");
    assert_eq!(
        git(&f.repo, &["show", &format!("{kept}:work.txt")]),
        "precious"
    );
    assert_eq!(
        git(&f.repo, &["ls-tree", "-r", "--name-only", &kept]),
        ".gitignore\nREADME.md\nblob.bin\nlib.txt\nwork.txt"
    );
    assert_eq!(
        git(&f.repo, &["log", "-1", "--format=%P", &kept]),
        branch_tip
    );
    assert!(!f.wt.exists());
    assert_eq!(git(&f.repo, &["branch", "--list", BRANCH]), "");
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
    git(&f.repo, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn a_worktree_left_mid_merge_with_conflicts_is_kept_and_removed() {
    let f = fixture();
    fs::write(f.repo.join("lib.txt"), "one\nMAIN\nthree\n").unwrap();
    git(&f.repo, &["commit", "-q", "-am", "main side"]);
    fs::write(f.wt.join("lib.txt"), "one\nTASK\nthree\n").unwrap();
    git(&f.wt, &["commit", "-q", "-am", "task side"]);
    // The agent's `git merge main` stopped on the conflict and was never finished.
    let out = Command::new("git")
        .arg("-C")
        .arg(&f.wt)
        .args(["-c", "user.name=S", "-c", "user.email=s@e", "merge", "main"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a conflict");
    let kept = remove(&f).unwrap().expect("a snapshot ref");
    let text = git(&f.repo, &["show", &format!("{kept}:lib.txt")]);
    assert!(text.contains("<<<<<<<") && text.contains("TASK"), "{text}");
    assert!(!f.wt.exists());
    git(&f.repo, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn symlinks_modes_and_odd_file_names_land_as_they_are() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let odd = [
        "-rf",
        "new\nline.txt",
        "sp ace $(x) `y`.txt",
        "é→✓.txt",
        "a\\b.txt",
    ];
    for (i, name) in odd.iter().enumerate() {
        fs::write(f.wt.join(name), format!("{i}\n")).unwrap();
    }
    std::os::unix::fs::symlink("../outside/target", f.wt.join("link")).unwrap();
    fs::write(f.wt.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(f.wt.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let author = ada();
    let sha = squash_merge(&request(&f, "Odd files", &author, &[]))
        .unwrap()
        .expect("a commit");
    let tree = git(&f.repo, &["ls-tree", "-z", "--full-tree", &sha]);
    for name in odd {
        assert!(
            tree.contains(&format!("\t{name}\0")),
            "{name:?} in {tree:?}"
        );
    }
    assert!(
        tree.contains("120000 blob") && tree.contains("\tlink\0"),
        "{tree:?}"
    );
    assert_eq!(
        git(&f.repo, &["cat-file", "-p", &format!("{sha}:link")]),
        "../outside/target"
    );
    assert!(
        tree.contains("100755 blob"),
        "run.sh keeps its mode: {tree:?}"
    );
    // The user's clean checkout got them too, the symlink as a symlink.
    assert_eq!(
        fs::read_link(f.repo.join("link")).unwrap(),
        Path::new("../outside/target")
    );
    assert_eq!(
        fs::read_to_string(f.repo.join("new\nline.txt")).unwrap(),
        "1\n"
    );
    git(&f.repo, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn without_origin_nothing_is_pushed_and_an_unreachable_origin_moves_nothing() {
    let f = fixture();
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    git(
        &f.repo,
        &["remote", "set-url", "origin", "/nonexistent/origin.git"],
    );
    let (r, files) = (refs(&f.repo), snapshot(&f.repo));
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("/nonexistent/origin.git")),
        "{err}"
    );
    assert_eq!(refs(&f.repo), r);
    assert_eq!(snapshot(&f.repo), files);
    git(&f.repo, &["remote", "remove", "origin"]);
    let sha = squash_merge(&request(&f, "t", &author, &[]))
        .unwrap()
        .expect("a commit");
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), sha);
    assert_ne!(
        git(&f.origin, &["rev-parse", "main"]),
        sha,
        "nothing pushed"
    );
}

#[test]
fn deleted_files_and_a_submodule_gitlink_squash_as_they_are() {
    let f = fixture();
    // A submodule in main (registered, as `git submodule add` leaves it), uninitialised in
    // the task's worktree (its directory empty).
    let sub = f.repo.parent().unwrap().join("sub");
    fs::create_dir(&sub).unwrap();
    git(&sub, &["init", "-q", "-b", "main"]);
    fs::write(sub.join("s.txt"), "s\n").unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-q", "-m", "s"]);
    let sub_head = git(&sub, &["rev-parse", "HEAD"]);
    git(
        &f.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub.to_str().unwrap(),
            "vendor/sub",
        ],
    );
    git(&f.repo, &["commit", "-q", "-m", "add submodule"]);
    git(&f.repo, &["push", "-q", "origin", "main"]);
    git(&f.wt, &["merge", "-q", "main"]);
    assert!(f.wt.join("vendor/sub").is_dir());
    // The agent deletes one file (unstaged) and another with git rm (staged).
    fs::remove_file(f.wt.join("lib.txt")).unwrap();
    git(&f.wt, &["rm", "-q", "blob.bin"]);
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    let sha = squash_merge(&request(&f, "Delete and add", &author, &[]))
        .unwrap()
        .expect("a commit");
    let tree = git(&f.repo, &["ls-tree", "-r", "--full-tree", &sha]);
    assert!(
        !tree.contains("lib.txt") && !tree.contains("blob.bin"),
        "{tree}"
    );
    assert!(tree.contains("feature.txt"), "{tree}");
    assert!(
        tree.contains(&format!("160000 commit {sub_head}\tvendor/sub")),
        "the gitlink stays: {tree}"
    );
    assert!(
        !f.repo.join("lib.txt").exists(),
        "the clean checkout follows"
    );
}

#[test]
fn an_ignored_file_in_the_users_checkout_is_never_overwritten() {
    let f = fixture();
    fs::write(f.repo.join(".gitignore"), "local.cfg\n").unwrap();
    git(&f.repo, &["add", ".gitignore"]);
    git(&f.repo, &["commit", "-q", "-m", "ignore local.cfg"]);
    git(&f.repo, &["push", "-q", "origin", "main"]);
    git(&f.wt, &["merge", "-q", "main"]);
    // The user's own ignored file, which git status does not show.
    fs::write(f.repo.join("local.cfg"), "the user's secret\n").unwrap();
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
    // The agent un-ignores the path and adds a file there.
    fs::write(f.wt.join(".gitignore"), "").unwrap();
    fs::write(f.wt.join("local.cfg"), "the agent's file\n").unwrap();
    let (r, origin_main) = (refs(&f.repo), git(&f.origin, &["rev-parse", "main"]));
    let author = ada();
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("local.cfg")),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(f.repo.join("local.cfg")).unwrap(),
        "the user's secret\n"
    );
    assert_eq!(refs(&f.repo), r, "nothing moved");
    assert_eq!(
        git(&f.origin, &["rev-parse", "main"]),
        origin_main,
        "nothing pushed"
    );
}

#[test]
fn the_default_branch_checked_out_in_another_tasks_worktree_refuses_the_merge_untouched() {
    let f = fixture();
    let head = git(&f.repo, &["rev-parse", "main"]);
    let other = f.wt.parent().unwrap().join("task-2");
    crate::ensure_worktree(&f.repo, "byre/task-2", &head, &other, "task-2").unwrap();
    // The other task's agent checks out main in its worktree, where main is checked out already.
    git(
        &other,
        &["switch", "-q", "--ignore-other-worktrees", "main"],
    );
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let (r, files) = (refs(&f.repo), snapshot(&other));
    let err = squash_merge(&request(&f, "t", &ada(), &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("task's worktree")),
        "{err:?}"
    );
    assert_eq!(refs(&f.repo), r, "nothing moved");
    assert_eq!(
        snapshot(&other),
        files,
        "the other task's worktree untouched"
    );
}

#[test]
fn a_rebase_of_the_default_branch_in_a_users_linked_worktree_refuses_the_merge() {
    let f = fixture();
    let first = git(&f.repo, &["rev-parse", "main"]);
    git(&f.repo, &["checkout", "-q", "-b", "dev"]);
    let user_wt = f.repo.parent().unwrap().join("user-wt");
    git(
        &f.repo,
        &["worktree", "add", "-q", user_wt.to_str().unwrap(), "main"],
    );
    fs::write(user_wt.join("lib.txt"), "one\nUSER\nthree\n").unwrap();
    git(&user_wt, &["commit", "-q", "-am", "user"]);
    git(&f.repo, &["branch", "other", &first]);
    let other_wt = f.repo.parent().unwrap().join("other-wt");
    git(
        &f.repo,
        &["worktree", "add", "-q", other_wt.to_str().unwrap(), "other"],
    );
    fs::write(other_wt.join("lib.txt"), "one\nOTHER\nthree\n").unwrap();
    git(&other_wt, &["commit", "-q", "-am", "other"]);
    // The user's rebase of main stops on a conflict: HEAD detached, main to move at its end.
    let out = Command::new("git")
        .arg("-C")
        .arg(&user_wt)
        .args([
            "-c",
            "user.name=U",
            "-c",
            "user.email=u@e",
            "rebase",
            "other",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the rebase stops");
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let (r, files) = (refs(&f.repo), snapshot(&user_wt));
    let author = ada();
    let err = squash_merge(&request(&f, "t", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("rebase")),
        "{err}"
    );
    assert_eq!(refs(&f.repo), r);
    assert_eq!(snapshot(&user_wt), files);
}

#[test]
fn a_redo_after_the_checkout_was_fast_forwarded_but_not_the_branch_finishes_it() {
    let f = fixture();
    let old = git(&f.repo, &["rev-parse", "main"]);
    fs::write(f.wt.join("feature.txt"), "feature\n").unwrap();
    let author = ada();
    let sha = squash_merge(&request(&f, "Add feature", &author, &[]))
        .unwrap()
        .expect("a commit");
    // As if byre had died after the checkout's files and index, before main moved.
    git(&f.repo, &["update-ref", "refs/heads/main", &old]);
    assert!(git(&f.repo, &["status", "--porcelain"]).contains("feature.txt"));
    let again = squash_merge(&request(&f, "Add feature", &author, &[]))
        .unwrap()
        .expect("a commit");
    assert_eq!(again, sha);
    assert_eq!(git(&f.repo, &["rev-parse", "main"]), sha);
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
    assert_eq!(git(&f.origin, &["rev-list", "--count", "main"]), "2");
    // A user's own change on top of that is still refused.
    git(&f.repo, &["update-ref", "refs/heads/main", &old]);
    fs::write(f.repo.join("README.md"), "the user's edit\n").unwrap();
    let err = squash_merge(&request(&f, "Add feature", &author, &[])).unwrap_err();
    assert!(
        matches!(err, MergeError::Refused(ref m) if m.contains("uncommitted")),
        "{err}"
    );
}

#[test]
fn removal_takes_the_tasks_ref_directory_with_what_its_agent_left_there_following_no_link() {
    let f = fixture();
    let head = git(&f.repo, &["rev-parse", "main"]);
    let (task_id, branch) = ("0123abcd-5678-4000-8000-000000000000", "byre/0123abcd/fix");
    let wt = f.wt.parent().unwrap().join("task-3");
    crate::ensure_worktree(&f.repo, branch, &head, &wt, "task-3").unwrap();
    let namespace = f.repo.join(".git/refs/heads/byre/0123abcd");
    // What an agent may leave in the one directory of refs/ its sandbox writes: another ref,
    // and a link to another repository's refs (a later `git gc` there would walk it).
    fs::write(namespace.join("extra"), format!("{head}\n")).unwrap();
    let victim = f.repo.parent().unwrap().join("victim-refs");
    fs::create_dir_all(&victim).unwrap();
    fs::write(victim.join("keep"), format!("{head}\n")).unwrap();
    std::os::unix::fs::symlink(&victim, namespace.join("o")).unwrap();

    remove_task_worktree(&f.repo, &wt, facts(&wt).as_ref(), "task-3", task_id, branch).unwrap();
    assert!(!namespace.exists(), "the task's ref directory is gone");
    assert_eq!(
        fs::read_to_string(victim.join("keep")).unwrap(),
        format!("{head}\n"),
        "the link was removed, not followed"
    );
    assert!(
        !refs(&f.repo).contains("byre/0123abcd"),
        "{}",
        refs(&f.repo)
    );
    // The fixture's own task (a branch of the older form) is untouched.
    assert!(refs(&f.repo).contains(BRANCH), "{}", refs(&f.repo));
    git(&f.repo, &["fsck", "--strict", "--no-progress"]);
}
