//! Snapshot commits and byre's end-of-turn commit (README.md, "Snapshots and the end-of-turn
//! commit").
//!
//! A snapshot of a task's worktree is commit S: tree T of the worktree as if everything were
//! staged (an in-memory index, `.gitignore` respected, see [`views::staged_index`]), parent
//! the worktree's HEAD, stored at `refs/byre/tasks/{task_id}/snap/{n}`. For a `turn_end`
//! snapshot byre then makes its end-of-turn commit: when T differs from HEAD's tree and the
//! task branch still points at S's parent, it sets the worktree's index to T (the entries of
//! the in-memory index, stat data included, as `git add -A` would leave it) and moves the task
//! branch to S (compare-and-swap on the old tip). Files on disk are never touched.
//!
//! Nothing is written (no object beyond blobs and trees, no ref, no index) while a rebase,
//! merge, cherry-pick, revert or bisect is in progress in the worktree, or when its HEAD is
//! detached or on another branch than the task's.

use std::path::Path;

use git2::{Commit, ErrorCode, Index, Oid, Repository, RepositoryState, Signature};

use super::views::{self, Worktree};
use super::{open_exact, GitError};

/// The name and email byre commits its snapshots under (author and committer).
pub const SNAPSHOT_AUTHOR: (&str, &str) = ("byre", "byre@localhost");

/// What to snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotJob<'a> {
    /// The task's worktree (as recorded for the task).
    pub worktree: &'a Path,
    /// The task's branch (short name).
    pub branch: &'a str,
    /// The task's id (in the ref name).
    pub task_id: &'a str,
    /// The task's title (in the commit message).
    pub title: &'a str,
    /// The snapshot's position, from 1.
    pub n: u32,
    /// For an end-of-turn snapshot, the turn's number: the branch may then move to it.
    /// `None` for a requested snapshot, which never moves the branch or touches the index.
    pub turn: Option<u32>,
    /// The task's latest event seq now (recorded in the commit message too).
    pub event_seq: u64,
}

/// A snapshot made (or found at its ref, made before a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// S, 40 hex.
    pub commit: String,
    /// T, 40 hex.
    pub tree: String,
    /// The event seq the snapshot was started at (read back from a commit found at its ref).
    pub event_seq: u64,
    /// Whether the task branch now points at S because of this end-of-turn commit.
    pub branch_advanced: bool,
}

/// The ref of snapshot `n` of task `task_id`.
pub fn snapshot_ref(task_id: &str, n: u32) -> String {
    format!("refs/byre/tasks/{task_id}/snap/{n}")
}

/// Takes snapshot `job.n` and, for an end-of-turn one, makes the end-of-turn commit (module
/// docs). Idempotent: when the ref exists already (byre was stopped after writing it and
/// before recording it) its commit is reused if it still is this snapshot (the worktree's
/// tree, its parent HEAD or itself HEAD), else replaced by a new one; the end-of-turn step is
/// redone only if the branch still points at its parent. Blocks: call off the async threads.
///
/// # Errors
/// [`GitError::Conflict`] (a message for the user) when an operation is in progress in the
/// worktree or HEAD is not on the task branch: nothing was written then;
/// [`GitError::Other`] for the worktree missing or libgit2.
pub fn take_snapshot(job: &SnapshotJob<'_>) -> Result<Snapshot, GitError> {
    let worktree = Worktree::open(job.worktree).map_err(|e| GitError::Other(e.to_string()))?;
    let repo = open_exact(job.worktree, git2::RepositoryOpenFlags::empty())?;
    check_worktree(&repo, job.branch)?;
    let head = repo.head()?.peel_to_commit()?;
    // A second handle builds the staged tree: it swaps its index for an in-memory one.
    let view_repo = worktree
        .repo()
        .map_err(|e| GitError::Other(e.to_string()))?;
    let mut staged =
        views::staged_index(&worktree, &view_repo).map_err(|e| GitError::Other(e.to_string()))?;
    let staged_tree = staged.write_tree_to(&view_repo)?;

    let name = snapshot_ref(job.task_id, job.n);
    // A commit already at the ref is reused only when it is this snapshot made before a
    // restart: the worktree's tree, on top of HEAD (or HEAD itself once the branch moved).
    // Anything else there is a leftover no event records (its cause was replaced by a newer
    // turn end before it was recorded): it is replaced, never passed off as this snapshot.
    let found = match repo.find_reference(&name) {
        Ok(r) => Some(r.peel_to_commit()?),
        Err(e) if e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let reusable = found.filter(|c| {
        c.tree_id() == staged_tree
            && (c.id() == head.id() || c.parent_id(0).ok() == Some(head.id()))
    });
    let (snap, event_seq) = match reusable {
        Some(snap) => {
            let seq = recorded_event_seq(&snap).unwrap_or(job.event_seq);
            (snap, seq)
        }
        None => {
            let snap = make_commit(&repo, job, &head, staged_tree)?;
            repo.reference(&name, snap.id(), true, "byre: snapshot")?;
            (snap, job.event_seq)
        }
    };
    let tree = snap.tree_id();
    let mut branch_advanced = false;
    if job.turn.is_some() {
        let parent = snap.parent_id(0).ok();
        if head.id() == snap.id() {
            branch_advanced = true; // done before a restart
        } else if parent == Some(head.id()) && tree != head.tree_id() {
            // The snapshot exists at its ref from here on: a failure of this step leaves the
            // branch where it was and is logged, not returned, so the ref gets its event.
            branch_advanced =
                match end_of_turn(&repo, job.branch, &snap, &head, &mut staged, staged_tree) {
                    Ok(advanced) => advanced,
                    Err(e) => {
                        tracing::warn!(error = %e, "the end-of-turn commit could not be made");
                        false
                    }
                };
        }
    }
    Ok(Snapshot {
        commit: snap.id().to_string(),
        tree: tree.to_string(),
        event_seq,
        branch_advanced,
    })
}

/// Refuses a worktree in the middle of an operation, or whose HEAD is not the task branch.
pub(crate) fn check_worktree(repo: &Repository, branch: &str) -> Result<(), GitError> {
    let busy = match repo.state() {
        RepositoryState::Clean => None,
        RepositoryState::Merge => Some("a merge"),
        RepositoryState::Revert | RepositoryState::RevertSequence => Some("a revert"),
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => Some("a cherry-pick"),
        RepositoryState::Bisect => Some("a bisect"),
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge
        | RepositoryState::ApplyMailbox
        | RepositoryState::ApplyMailboxOrRebase => Some("a rebase"),
    };
    if let Some(op) = busy {
        return Err(GitError::Conflict(format!(
            "{op} is in progress in the worktree"
        )));
    }
    let head = repo
        .find_reference("HEAD")
        .map_err(|e| GitError::Conflict(format!("the worktree has no HEAD: {}", e.message())))?;
    let want = format!("refs/heads/{branch}");
    match head.symbolic_target().ok().flatten() {
        Some(target) if target == want => Ok(()),
        Some(target) => Err(GitError::Conflict(format!(
            "the worktree's HEAD is on {target}, not on the task branch {branch}"
        ))),
        None => Err(GitError::Conflict("the worktree's HEAD is detached".into())),
    }
}

/// Commit S: `tree`, parent `head`, byre as author and committer. Its message names the task,
/// the turn or "requested", and the event seq (read back by [`recorded_event_seq`]).
fn make_commit<'r>(
    repo: &'r Repository,
    job: &SnapshotJob<'_>,
    head: &Commit<'_>,
    tree: Oid,
) -> Result<Commit<'r>, GitError> {
    let sig = Signature::now(SNAPSHOT_AUTHOR.0, SNAPSHOT_AUTHOR.1)?;
    let title: String = job
        .title
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect();
    let subject = match job.turn {
        Some(turn) => format!("byre: turn {turn}: {title}"),
        None => format!("byre: snapshot {}: {title}", job.n),
    };
    let message = format!(
        "{subject}\n\nByre-Task: {}\nByre-Snapshot: {}\nByre-Event-Seq: {}\n",
        job.task_id, job.n, job.event_seq
    );
    let tree = repo.find_tree(tree)?;
    let oid = repo.commit(None, &sig, &sig, &message, &tree, &[head])?;
    Ok(repo.find_commit(oid)?)
}

/// The `Byre-Event-Seq` trailer of a snapshot commit.
fn recorded_event_seq(commit: &Commit<'_>) -> Option<u64> {
    commit
        .message()
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Byre-Event-Seq: "))
        .and_then(|v| v.trim().parse().ok())
}

/// The end-of-turn step for snapshot `snap` whose parent is `head`: the worktree's index
/// becomes its tree, then the task branch moves from `head` to it by compare-and-swap.
/// Whether the branch moved (not when the agent moved it meanwhile).
fn end_of_turn(
    repo: &Repository,
    branch: &str,
    snap: &Commit<'_>,
    head: &Commit<'_>,
    staged: &mut Index,
    staged_tree: Oid,
) -> Result<bool, GitError> {
    set_index(repo, staged, staged_tree, snap.tree_id())?;
    let branch_ref = format!("refs/heads/{branch}");
    let msg = format!("byre: end-of-turn commit {}", snap.id());
    match repo.reference_matching(&branch_ref, snap.id(), true, head.id(), &msg) {
        Ok(_) => Ok(true),
        // The branch moved meanwhile (the agent committed): leave it where it is.
        Err(e) if e.code() == ErrorCode::Modified || e.code() == ErrorCode::Exists => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Sets the worktree's index to `tree`: the in-memory `staged` index's entries when it is that
/// tree (keeping their stat data), else `tree` read as is. Written through the index lock.
fn set_index(
    repo: &Repository,
    staged: &mut Index,
    staged_tree: Oid,
    tree: Oid,
) -> Result<(), GitError> {
    let mut index = repo.index()?;
    if staged_tree == tree {
        index.clear()?;
        for entry in staged.iter() {
            index.add(&entry)?;
        }
    } else {
        index.read_tree(&repo.find_tree(tree)?)?;
    }
    index.write()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use git2::{IndexAddOption, RepositoryInitOptions};
    use tempfile::TempDir;

    use super::*;
    use crate::tests::statuses;

    const TASK: &str = "t1";
    const BRANCH: &str = "byre/t1";

    /// A repository on `main` with `keep.txt`, `gone.txt`, `edit.txt` and a `.gitignore` of
    /// `*.log`, and the task's linked worktree on [`BRANCH`], where the agent then edits
    /// `edit.txt`, deletes `gone.txt`, adds `new/file.txt` and an ignored `debug.log`.
    fn fixture() -> (TempDir, TempDir, std::path::PathBuf) {
        let dir = TempDir::new().unwrap();
        let repo = Repository::init_opts(
            dir.path(),
            RepositoryInitOptions::new().initial_head("main"),
        )
        .unwrap();
        for (name, content) in [
            ("keep.txt", "keep\n"),
            ("gone.txt", "gone\n"),
            ("edit.txt", "one\n"),
            (".gitignore", "*.log\n"),
        ] {
            fs::write(dir.path().join(name), content).unwrap();
        }
        let mut index = repo.index().unwrap();
        index.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = Signature::now("Test", "test@example.com").unwrap();
        let base = repo
            .commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        let place = TempDir::new().unwrap();
        let wt = place.path().join("w");
        crate::ensure_worktree(dir.path(), BRANCH, &base.to_string(), &wt, TASK).unwrap();
        fs::write(wt.join("edit.txt"), "two\n").unwrap();
        fs::remove_file(wt.join("gone.txt")).unwrap();
        fs::create_dir(wt.join("new")).unwrap();
        fs::write(wt.join("new/file.txt"), "new\n").unwrap();
        fs::write(wt.join("debug.log"), "noise\n").unwrap();
        (dir, place, wt)
    }

    fn job(wt: &Path, n: u32, turn: Option<u32>) -> SnapshotJob<'_> {
        SnapshotJob {
            worktree: wt,
            branch: BRANCH,
            task_id: TASK,
            title: "a task",
            n,
            turn,
            event_seq: 7,
        }
    }

    fn index_bytes(wt: &Path) -> Vec<u8> {
        let repo = Repository::open(wt).unwrap();
        fs::read(repo.path().join("index")).unwrap()
    }

    /// Paths and contents of a tree, recursively.
    fn files(repo: &Repository, tree: &str) -> Vec<(String, String)> {
        let tree = repo.find_tree(Oid::from_str(tree).unwrap()).unwrap();
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if let Ok(blob) = e.to_object(repo).and_then(|o| o.peel_to_blob()) {
                let content = String::from_utf8_lossy(blob.content()).into_owned();
                out.push((format!("{dir}{}", e.name().unwrap()), content));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        out
    }

    fn tip(repo: &Repository) -> Oid {
        repo.find_branch(BRANCH, git2::BranchType::Local)
            .unwrap()
            .get()
            .target()
            .unwrap()
    }

    #[test]
    fn a_requested_snapshot_holds_the_worktree_and_touches_nothing_else() {
        let (_dir, _place, wt) = fixture();
        let repo = Repository::open(&wt).unwrap();
        let head = tip(&repo);
        let before = index_bytes(&wt);
        let snap = take_snapshot(&job(&wt, 1, None)).unwrap();
        assert!(!snap.branch_advanced);
        assert_eq!(snap.event_seq, 7);
        assert_eq!(
            files(&repo, &snap.tree),
            [
                (".gitignore".to_owned(), "*.log\n".to_owned()),
                ("edit.txt".into(), "two\n".into()),
                ("keep.txt".into(), "keep\n".into()),
                ("new/file.txt".into(), "new\n".into()),
            ],
            "tracked edits, untracked files, deletions; ignored files left out"
        );
        let commit = repo
            .find_reference(&snapshot_ref(TASK, 1))
            .unwrap()
            .peel_to_commit()
            .unwrap();
        assert_eq!(commit.id().to_string(), snap.commit);
        assert_eq!(commit.parent_id(0).unwrap(), head);
        assert_eq!(commit.author().name().ok(), Some("byre"));
        assert_eq!(tip(&repo), head, "the branch stays");
        assert_eq!(index_bytes(&wt), before, "the index file is byte-identical");
        assert_eq!(fs::read_to_string(wt.join("debug.log")).unwrap(), "noise\n");
    }

    #[test]
    fn the_end_of_turn_commit_advances_the_branch_and_stages_the_turn_once() {
        let (_dir, _place, wt) = fixture();
        let repo = Repository::open(&wt).unwrap();
        let head = tip(&repo);
        let snap = take_snapshot(&job(&wt, 1, Some(1))).unwrap();
        assert!(snap.branch_advanced);
        assert_eq!(tip(&repo).to_string(), snap.commit);
        let commit = repo.find_commit(tip(&repo)).unwrap();
        assert_eq!(commit.parent_id(0).unwrap(), head);
        assert!(commit
            .message()
            .unwrap()
            .starts_with("byre: turn 1: a task"));
        assert_eq!(
            statuses(&repo),
            [],
            "index and HEAD hold the worktree; only the ignored file is outside"
        );
        assert!(wt.join("debug.log").exists() && !wt.join("gone.txt").exists());

        // Again for the same n (a restart after the ref was written): reused, no new commit.
        let again = take_snapshot(&job(&wt, 1, Some(1))).unwrap();
        assert_eq!(again, snap);

        // A turn that changed nothing: a snapshot on top, the branch stays.
        let idle = take_snapshot(&job(&wt, 2, Some(2))).unwrap();
        assert!(!idle.branch_advanced);
        assert_eq!(idle.tree, snap.tree);
        let second = repo
            .find_commit(Oid::from_str(&idle.commit).unwrap())
            .unwrap();
        assert_eq!(second.parent_id(0).unwrap().to_string(), snap.commit);
        assert_eq!(tip(&repo).to_string(), snap.commit);
    }

    #[test]
    fn a_leftover_commit_at_the_ref_that_is_not_this_snapshot_is_replaced() {
        let (_dir, _place, wt) = fixture();
        let repo = Repository::open(&wt).unwrap();
        let head = tip(&repo);
        // A ref written before a restart for a cause that a newer turn end replaced: it holds
        // an older tree (here HEAD's own commit, which lacks the agent's edits).
        repo.reference(&snapshot_ref(TASK, 1), head, false, "leftover")
            .unwrap();
        let snap = take_snapshot(&job(&wt, 1, Some(1))).unwrap();
        assert_ne!(snap.commit, head.to_string());
        assert!(snap.branch_advanced, "the turn's work lands on the branch");
        assert_eq!(tip(&repo).to_string(), snap.commit);
        assert_eq!(
            repo.find_reference(&snapshot_ref(TASK, 1))
                .unwrap()
                .target()
                .unwrap()
                .to_string(),
            snap.commit
        );
        assert!(files(&repo, &snap.tree).contains(&("new/file.txt".into(), "new\n".into())));
        assert_eq!(statuses(&repo), []);
    }

    #[test]
    fn a_worktree_mid_merge_or_off_its_branch_is_refused_without_writing_a_ref() {
        let (_dir, _place, wt) = fixture();
        let repo = Repository::open(&wt).unwrap();
        let head = tip(&repo);
        fs::write(repo.path().join("MERGE_HEAD"), format!("{head}\n")).unwrap();
        let r = take_snapshot(&job(&wt, 1, Some(1)));
        assert!(
            matches!(&r, Err(GitError::Conflict(m)) if m.contains("merge")),
            "{r:?}"
        );
        fs::remove_file(repo.path().join("MERGE_HEAD")).unwrap();

        repo.set_head_detached(head).unwrap();
        let r = take_snapshot(&job(&wt, 1, None));
        assert!(
            matches!(&r, Err(GitError::Conflict(m)) if m.contains("detached")),
            "{r:?}"
        );

        repo.branch("other", &repo.find_commit(head).unwrap(), false)
            .unwrap();
        repo.set_head("refs/heads/other").unwrap();
        let r = take_snapshot(&job(&wt, 1, Some(1)));
        assert!(
            matches!(&r, Err(GitError::Conflict(m)) if m.contains("not on the task branch")),
            "{r:?}"
        );
        assert!(
            repo.find_reference(&snapshot_ref(TASK, 1)).is_err(),
            "no ref written"
        );
        assert_eq!(tip(&repo), head);
    }
}
