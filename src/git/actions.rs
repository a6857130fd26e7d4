//! The git a task's agent asks byre for in its worktree (CodeBolt's `gitEvent` family): its
//! status, staging everything, a commit on the task branch, the log and a diff. Branch
//! switches, `init` and `clone` are the adapter's refusals, not here.
//!
//! A commit is checked as a snapshot is ([`super::snapshots`]): nothing is written while an
//! operation (rebase, merge, cherry-pick, revert, bisect) is in progress in the worktree or
//! when its HEAD is not on the task branch, and the branch moves by compare-and-swap from the
//! commit's parent, so a branch moved meanwhile is never overwritten. Every function blocks.
//!
//! These read (and `stage_all` and `commit` write) the worktree, its index and its refs, which
//! the agent writes: byre runs them only inside the task's sandbox, as `git::boxed` jobs.

use std::path::Path;

use git2::{
    DiffFormat, ErrorCode, IndexAddOption, Repository, RepositoryOpenFlags, Signature,
    StatusOptions,
};

use super::snapshots::check_worktree;
use super::{open_exact, GitError};

/// One changed path of [`status`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStatus {
    /// The path, relative to the worktree.
    pub path: String,
    /// libgit2's status flags as it names them (`WT_NEW`, `INDEX_MODIFIED | WT_MODIFIED`, …).
    pub status: String,
}

/// The worktree's state: its HEAD's branch and every changed or untracked path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Status {
    /// The short name of the branch HEAD is on (`None`: no HEAD yet).
    pub branch: Option<String>,
    /// Changed and untracked paths (untracked directories recursed).
    pub files: Vec<FileStatus>,
}

/// One commit of [`log`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogEntry {
    /// The commit id, 40 hex.
    pub hash: String,
    /// Its whole message.
    pub message: String,
    /// Its author's name.
    pub author: String,
    /// Its time, in seconds since the epoch.
    pub date_s: i64,
}

fn open(worktree: &Path) -> Result<Repository, GitError> {
    Ok(open_exact(worktree, RepositoryOpenFlags::empty())?)
}

/// The worktree's [`Status`].
/// # Errors
/// [`GitError::Other`]: no repository there, or libgit2 failed.
pub fn status(worktree: &Path) -> Result<Status, GitError> {
    let repo = open(worktree)?;
    let mut opts = StatusOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true);
    let files = repo
        .statuses(Some(&mut opts))?
        .iter()
        .map(|s| FileStatus {
            path: s.path().unwrap_or("").to_owned(),
            status: format!("{:?}", s.status()),
        })
        .collect();
    Ok(Status {
        branch: head_branch(&repo),
        files,
    })
}

/// The short name of the branch HEAD is on, if any.
/// # Errors
/// [`GitError::Other`]: no repository there.
pub fn current_branch(worktree: &Path) -> Result<Option<String>, GitError> {
    Ok(head_branch(&open(worktree)?))
}

fn head_branch(repo: &Repository) -> Option<String> {
    repo.head()
        .ok()
        .and_then(|h| h.shorthand().ok().map(str::to_owned))
}

/// Stages every change in the worktree (`git add -A`: new, modified and deleted files,
/// `.gitignore` respected) and writes its index.
/// # Errors
/// [`GitError::Other`]: no repository there, or libgit2 failed (the index locked).
pub fn stage_all(worktree: &Path) -> Result<(), GitError> {
    let repo = open(worktree)?;
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    index.write()?;
    Ok(())
}

/// Commits the worktree's index on the task branch `branch` with `message` (the repository's
/// configured signature, else `fallback_author`), moving the branch from HEAD's commit to the
/// new one by compare-and-swap; returns the new commit's id.
/// # Errors
/// [`GitError::Conflict`] (a message for the agent) when an operation is in progress, HEAD is
/// not on the task branch, or the branch moved meanwhile: nothing moved then;
/// [`GitError::Other`] for libgit2.
pub fn commit(
    worktree: &Path,
    branch: &str,
    message: &str,
    fallback_author: (&str, &str),
) -> Result<String, GitError> {
    let repo = open(worktree)?;
    check_worktree(&repo, branch).map_err(|e| match e {
        GitError::Conflict(why) => GitError::Conflict(format!(
            "{why}: finish it or check out `{branch}` before committing"
        )),
        other => other,
    })?;
    let parent = repo.head()?.peel_to_commit()?;
    let tree = repo.find_tree(repo.index()?.write_tree()?)?;
    let sig = repo
        .signature()
        .or_else(|_| Signature::now(fallback_author.0, fallback_author.1))?;
    let id = repo.commit(None, &sig, &sig, message, &tree, &[&parent])?;
    let branch_ref = format!("refs/heads/{branch}");
    let reflog = format!("commit: {}", message.lines().next().unwrap_or_default());
    let moved = repo.reference_matching(&branch_ref, id, true, parent.id(), &reflog);
    match moved {
        Ok(_) => Ok(id.to_string()),
        Err(e) if e.code() == ErrorCode::Modified || e.code() == ErrorCode::Exists => {
            Err(GitError::Conflict(format!(
                "the branch `{branch}` moved meanwhile; commit again"
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// The newest `n` commits reachable from HEAD, newest first.
/// # Errors
/// [`GitError::Other`]: no repository or no HEAD there, or libgit2 failed.
pub fn log(worktree: &Path, n: usize) -> Result<Vec<LogEntry>, GitError> {
    let repo = open(worktree)?;
    let mut walk = repo.revwalk()?;
    walk.push_head()?;
    Ok(walk
        .take(n)
        .filter_map(|id| repo.find_commit(id.ok()?).ok())
        .map(|c| LogEntry {
            hash: c.id().to_string(),
            message: c.message().unwrap_or("").to_owned(),
            author: c.author().name().unwrap_or("").to_owned(),
            date_s: c.time().seconds(),
        })
        .collect())
}

/// The patch from `base` (a revision; `None`: HEAD) to the working files, index included, cut
/// once it holds `max_bytes` or more.
/// # Errors
/// [`GitError::Other`]: no repository there, `base` names nothing, or libgit2 failed.
pub fn diff(worktree: &Path, base: Option<&str>, max_bytes: usize) -> Result<String, GitError> {
    let repo = open(worktree)?;
    let base = match base {
        None => repo.head().ok().and_then(|h| h.peel_to_tree().ok()),
        Some(rev) => Some(repo.revparse_single(rev)?.peel_to_tree()?),
    };
    let diff = repo.diff_tree_to_workdir_with_index(base.as_ref(), None)?;
    let mut out = String::new();
    diff.print(DiffFormat::Patch, |_, _, l| {
        if matches!(l.origin(), '+' | '-' | ' ') {
            out.push(l.origin());
        }
        out.push_str(&String::from_utf8_lossy(l.content()));
        out.len() < max_bytes
    })
    .ok();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use git2::RepositoryInitOptions;
    use tempfile::TempDir;

    use super::*;

    const BRANCH: &str = "byre/t1";

    /// A repository on [`BRANCH`] with one commit of `a.txt`.
    fn repo() -> (TempDir, Repository) {
        let dir = TempDir::new().unwrap();
        let repo = Repository::init_opts(
            dir.path(),
            RepositoryInitOptions::new().initial_head(BRANCH),
        )
        .unwrap();
        fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        stage_all(dir.path()).unwrap();
        {
            let tree = repo
                .find_tree(repo.index().unwrap().write_tree().unwrap())
                .unwrap();
            let sig = Signature::now("Test", "test@example.com").unwrap();
            repo.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
                .unwrap();
        }
        (dir, repo)
    }

    #[test]
    fn a_commit_moves_the_task_branch_and_stages_nothing_else() {
        let (dir, repo) = repo();
        fs::write(dir.path().join("b.txt"), "b\n").unwrap();
        let st = status(dir.path()).unwrap();
        assert_eq!(st.branch.as_deref(), Some(BRANCH));
        assert_eq!(st.files.len(), 1, "{st:?}");
        stage_all(dir.path()).unwrap();
        let id = commit(dir.path(), BRANCH, "adds b", ("A", "a@example.com")).unwrap();
        let tip = repo
            .find_reference(&format!("refs/heads/{BRANCH}"))
            .unwrap();
        assert_eq!(tip.target().unwrap().to_string(), id);
        let entries = log(dir.path(), 50).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].message, "adds b");
        assert!(status(dir.path()).unwrap().files.is_empty());
        fs::write(dir.path().join("a.txt"), "A\n").unwrap();
        assert!(diff(dir.path(), None, 1 << 20).unwrap().contains("+A"));
    }

    #[test]
    fn a_commit_off_the_task_branch_or_mid_operation_is_refused_and_moves_nothing() {
        let (dir, repo) = repo();
        let before = repo.head().unwrap().target().unwrap();
        let other = commit(dir.path(), "byre/other", "x", ("A", "a@example.com")).unwrap_err();
        assert!(
            matches!(&other, GitError::Conflict(m) if m.contains("not on the task branch")),
            "{other}"
        );
        repo.set_head_detached(before).unwrap();
        let detached = commit(dir.path(), BRANCH, "x", ("A", "a@example.com")).unwrap_err();
        assert!(
            matches!(&detached, GitError::Conflict(m) if m.contains("detached")),
            "{detached}"
        );
        repo.set_head(&format!("refs/heads/{BRANCH}")).unwrap();
        fs::write(repo.path().join("MERGE_HEAD"), format!("{before}\n")).unwrap();
        let merging = commit(dir.path(), BRANCH, "x", ("A", "a@example.com")).unwrap_err();
        assert!(
            matches!(&merging, GitError::Conflict(m) if m.contains("merge")),
            "{merging}"
        );
        assert_eq!(repo.head().unwrap().target().unwrap(), before);
    }
}
