//! A task's branch and the project's `origin`, for its agent (CodeBolt's `gitPull` and
//! `gitPush`): [`pull_default`] fetches the default branch from origin and merges the local
//! default branch into the task's worktree, as the merge-in turn asks an agent to
//! (`git merge <default>`); [`push_task_branch`] pushes the task branch, and only it, to
//! origin, never forced ([`super::merge::push`], the merge's own push).
//!
//! The `git` binary runs by argv ([`super::binary::run_git`]). A refusal leaves the worktree
//! and every ref as they were.
//!
//! Every function blocks: call it from `spawn_blocking`.

use std::path::Path;

use git2::{BranchType, Repository, RepositoryState};

use super::binary::{run_git, GIT_TIMEOUT};
use super::merge::{check_no_operation, Identity, MergeError};
use super::GitError;

fn open(path: &Path) -> Result<Repository, GitError> {
    Repository::open(path)
        .map_err(|e| GitError::Other(format!("cannot open {}: {}", path.display(), e.message())))
}

/// What [`pull_default`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pulled {
    /// The worktree's HEAD before and after (equal when the default branch was merged
    /// already).
    pub head_before: String,
    /// See `head_before`.
    pub head_after: String,
    /// What happened, in words for the agent (git's own lines, and whether origin's default
    /// branch holds commits the local one lacks).
    pub message: String,
}

/// `gitPull`: when the repository at `repo_path` has `origin`, fetches its `default_branch`
/// (which updates only the remote-tracking ref `origin/<default>`); then merges the local
/// `default_branch`, the branch byre's squash merge lands on, into the task's worktree with
/// `git merge --no-edit` (a fast-forward when it can), the way the merge-in turn asks an
/// agent to. A merge commit is made as the worktree's git identity, else as `fallback`.
/// # Errors
/// [`MergeError::Refused`], with the worktree and refs as they were: an operation in
/// progress, HEAD not on a branch, a failed fetch, uncommitted changes in the way, or a
/// conflict (the merge is aborted; the paths are named, to merge by hand in a terminal).
/// [`MergeError::Git`] for libgit2 or a `git` that cannot run.
pub fn pull_default(
    repo_path: &Path,
    worktree_path: &Path,
    default_branch: &str,
    fallback: &Identity,
) -> Result<Pulled, MergeError> {
    let notes = fetch_default(repo_path, default_branch)?;
    let mut pulled = merge_default(worktree_path, default_branch, fallback)?;
    for n in notes {
        pulled.message.push('\n');
        pulled.message.push_str(&n);
    }
    Ok(pulled)
}

/// The first half of [`pull_default`], on the project's repository (never a worktree): when
/// it has `origin`, fetches its `default_branch`; returns notes for the agent (whether
/// origin's default branch holds commits the local one lacks).
/// # Errors
/// [`MergeError::Refused`]: the fetch failed; [`MergeError::Git`] for libgit2 or a `git` that
/// cannot run.
pub fn fetch_default(repo_path: &Path, default_branch: &str) -> Result<Vec<String>, MergeError> {
    let repo = open(repo_path)?;
    let mut notes = Vec::new();
    if repo.find_remote("origin").is_ok() {
        let ran = run_git(
            repo_path,
            &["fetch", "--no-tags", "origin", default_branch],
            &[],
            GIT_TIMEOUT,
        )?;
        if !ran.status.is_some_and(|s| s.success()) {
            return Err(MergeError::Refused(format!(
                "fetching {default_branch} from origin failed; nothing was merged: {}",
                ran.text
            )));
        }
        let local = repo
            .find_branch(default_branch, BranchType::Local)?
            .get()
            .peel_to_commit()?
            .id();
        let tracking = format!("origin/{default_branch}");
        if let Ok(remote) = repo.find_branch(&tracking, BranchType::Remote) {
            let remote = remote.get().peel_to_commit()?.id();
            let (_, behind) = repo.graph_ahead_behind(local, remote)?;
            if behind > 0 {
                notes.push(format!(
                    "origin/{default_branch} has {behind} commit(s) that the local \
                     {default_branch} lacks; byre merges onto the local {default_branch}, so \
                     they come once it is updated"
                ));
            }
        }
    }
    Ok(notes)
}

/// The second half of [`pull_default`], in the task's worktree: merges the local
/// `default_branch` into it with `git merge --no-edit`. It reads and writes what the agent
/// writes (the working files, the worktree's git dir), so byre runs it only in the task's
/// sandbox (`git::boxed`, `Job::MergeDefault`).
/// # Errors
/// As [`pull_default`], but for the fetch.
pub fn merge_default(
    worktree_path: &Path,
    default_branch: &str,
    fallback: &Identity,
) -> Result<Pulled, MergeError> {
    let wrepo = open(worktree_path)?;
    check_no_operation(&wrepo, "the task's worktree")?;
    let head = wrepo.head()?;
    if !head.is_branch() {
        return Err(MergeError::Refused(
            "HEAD is detached: check out the task's branch before pulling".into(),
        ));
    }
    let head_before = head.peel_to_commit()?.id();
    let mut env = Vec::new();
    if wrepo.signature().is_err() {
        env = vec![
            ("GIT_AUTHOR_NAME", fallback.name.as_str()),
            ("GIT_AUTHOR_EMAIL", fallback.email.as_str()),
            ("GIT_COMMITTER_NAME", fallback.name.as_str()),
            ("GIT_COMMITTER_EMAIL", fallback.email.as_str()),
        ];
    }
    let ran = run_git(
        worktree_path,
        &["merge", "--no-edit", default_branch],
        &env,
        GIT_TIMEOUT,
    )?;
    if !ran.status.is_some_and(|s| s.success()) {
        let wrepo = open(worktree_path)?;
        if wrepo.state() == RepositoryState::Merge {
            let mut paths: Vec<String> = Vec::new();
            if let Ok(index) = wrepo.index() {
                if let Ok(conflicts) = index.conflicts() {
                    for c in conflicts.flatten() {
                        if let Some(e) = c.our.or(c.their).or(c.ancestor) {
                            paths.push(String::from_utf8_lossy(&e.path).into_owned());
                        }
                    }
                }
            }
            paths.sort();
            paths.dedup();
            let abort = run_git(worktree_path, &["merge", "--abort"], &[], GIT_TIMEOUT)?;
            if !abort.status.is_some_and(|s| s.success()) {
                return Err(MergeError::Git(GitError::Other(format!(
                    "merging {default_branch} conflicted and `git merge --abort` failed: {}",
                    abort.text
                ))));
            }
            return Err(MergeError::Refused(format!(
                "merging {default_branch} into the task's branch conflicts in: {}; nothing was \
                 changed. Merge it by hand in a terminal (`git merge {default_branch}`), \
                 resolve the conflicts and commit",
                paths.join(", ")
            )));
        }
        return Err(MergeError::Refused(match ran.status {
            Some(_) => format!(
                "merging {default_branch} failed; nothing was changed: {}",
                ran.text
            ),
            None => format!(
                "merging {default_branch} did not finish within {} s and was stopped",
                GIT_TIMEOUT.as_secs()
            ),
        }));
    }
    let head_after = open(worktree_path)?.head()?.peel_to_commit()?.id();
    Ok(Pulled {
        head_before: head_before.to_string(),
        head_after: head_after.to_string(),
        message: ran.text,
    })
}

/// `gitPush`: pushes the tip of the local branch `task_branch` to the same branch on the
/// repository's `origin`, never forced (a push that is not a fast-forward there is
/// refused by origin); no other branch. Returns the commit pushed.
/// # Errors
/// [`MergeError::Refused`]: no `origin`, or the push refused or cut off (git's message).
/// [`MergeError::Git`] for libgit2 or a `git` that cannot run.
pub fn push_task_branch(repo_path: &Path, task_branch: &str) -> Result<String, MergeError> {
    let repo = open(repo_path)?;
    if repo.find_remote("origin").is_err() {
        return Err(MergeError::Refused(
            "the project's repository has no remote `origin`: there is nowhere to push".into(),
        ));
    }
    let tip = repo
        .find_branch(task_branch, BranchType::Local)?
        .get()
        .peel_to_commit()?
        .id();
    super::merge::push(repo_path, tip, task_branch)?;
    Ok(tip.to_string())
}

#[cfg(test)]
mod tests;
