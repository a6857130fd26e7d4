//! Finishing a task in git: what a task holds that the default branch doesn't
//! ([`unmerged`]), the squash merge onto the default branch ([`squash_merge`]), and the
//! removal of a task's worktree and branch with its last state kept ([`remove_task_worktree`]).
//!
//! Safety rules (issue 7, point 5), which every function here keeps:
//! - The user's own checkout is never modified except by a fast-forward of the default branch
//!   when that checkout is on it with a clean working tree and index (no change, no untracked
//!   file). When the default branch is checked out in a checkout that is not clean, the merge
//!   is refused before anything moves ([`MergeError::Refused`]): byre neither moves a branch
//!   under a dirty checkout nor lets the local default branch fall behind what it pushed.
//!   What the fast-forward writes gets the modes of the user's umask, not byre's 077.
//! - A merge is refused while a rebase, merge, cherry-pick (any operation libgit2 reports in
//!   `Repository::state`) is in progress in the task's worktree or the project's checkout.
//! - A conflict (content, binary, rename/delete, …) moves no ref: the squash commit is
//!   written to the object database only once the merge is clean, and refs move only after.
//! - Removing a task's worktree keeps its last state first: the worktree as if everything
//!   were staged becomes a commit (parent HEAD) at `refs/byre/tasks/{task_id}/snap/{n}`.
//!   Sibling worktrees, other branches and the object store are untouched.
//! - Push runs the `git` binary by argv (`git push origin <sha>:refs/heads/<default>`), never
//!   a shell and never `--force`: git's own credential helpers and ssh configuration apply;
//!   a rejection is reported with git's message.
//!
//! Every function blocks: call it from `spawn_blocking`, one at a time per repository.

use std::path::Path;
use std::time::Duration;

use git2::build::CheckoutBuilder;
use git2::{
    BranchType, ErrorCode, MergeOptions, Oid, Repository, RepositoryState, Signature, Sort,
    StatusOptions, WorktreePruneOptions,
};

use super::GitError;

/// What a task's worktree holds that the default branch doesn't (spec `Unmerged`, served as
/// it is: byre-app's `api::Unmerged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Unmerged {
    /// Commits on the task branch that aren't on the default branch.
    pub commits: u64,
    /// Files that differ between the merge-base and the worktree as if everything were staged.
    pub files: u64,
    /// Lines added in those files (binary files count none).
    pub insertions: u64,
    /// Lines deleted in those files.
    pub deletions: u64,
    /// Paths with uncommitted changes in the worktree (staged, unstaged or untracked).
    pub uncommitted: u64,
}

/// A git identity (`user.name`, `user.email`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Name.
    pub name: String,
    /// Email.
    pub email: String,
}

/// Why a squash merge did not happen.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The merge cannot be made as things stand (a conflict, an operation in progress, a dirty
    /// checkout of the default branch, a rejected push); the message says what to do. Nothing
    /// moved.
    #[error("{0}")]
    Refused(String),
    /// libgit2 or the filesystem failed.
    #[error(transparent)]
    Git(#[from] GitError),
}

impl From<git2::Error> for MergeError {
    fn from(e: git2::Error) -> Self {
        MergeError::Git(e.into())
    }
}

fn open(path: &Path) -> Result<Repository, GitError> {
    Repository::open_ext(
        path,
        git2::RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .map_err(|e| GitError::Other(format!("cannot open {}: {}", path.display(), e.message())))
}

fn local_tip(repo: &Repository, branch: &str) -> Result<Oid, GitError> {
    let b = repo
        .find_branch(branch, BranchType::Local)
        .map_err(|e| GitError::Conflict(format!("cannot read branch {branch}: {}", e.message())))?;
    Ok(b.get().peel_to_commit()?.id())
}

/// What byre's merges need of a task's worktree, read in its sandbox (`git::boxed`, `Job::Facts`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreeFacts {
    /// The worktree as a tree, as if everything were staged (40 hex, written).
    pub tree: String,
    /// Its HEAD commit (40 hex), if it has one.
    pub head: Option<String>,
    /// The operation in progress in it (`merge`, `rebase`, …), if any.
    pub operation: Option<String>,
    /// How many paths have changes not committed (staged, unstaged, untracked, not ignored).
    pub n_uncommitted: u64,
}

/// The [`WorktreeFacts`] of `worktree`: libgit2 walks the worktree, so only `git::boxed`'s
/// [`super::boxed::serve`] calls it, inside the task's sandbox.
/// # Errors
/// Not a worktree; git cannot read it.
pub fn worktree_facts(worktree: &Path) -> Result<WorktreeFacts, GitError> {
    let wt = super::views::Worktree::open(worktree)?;
    let repo = wt.repo()?;
    let tree = super::views::staged_index(&wt, &repo)?
        .write_tree_to(&repo)?
        .to_string();
    let head = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .map(|c| c.id().to_string());
    let operation = match repo.state() {
        RepositoryState::Clean => None,
        other => Some(operation_name(other).to_owned()),
    };
    Ok(WorktreeFacts {
        tree,
        head,
        operation,
        n_uncommitted: changed_paths(&repo)?,
    })
}

/// The worktree's tree of `facts` (read in the task's sandbox).
fn staged_tree(facts: &WorktreeFacts) -> Result<Oid, GitError> {
    Ok(Oid::from_str(&facts.tree)?)
}

/// The worktree's HEAD of `facts`.
fn worktree_head(facts: &WorktreeFacts) -> Result<Oid, GitError> {
    let head = facts
        .head
        .as_deref()
        .ok_or_else(|| GitError::Conflict("the task's worktree has no HEAD commit".into()))?;
    Ok(Oid::from_str(head)?)
}

/// Paths with changes in a checkout: staged, unstaged, or untracked (not ignored).
pub(super) fn changed_paths(repo: &Repository) -> Result<u64, GitError> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(false);
    Ok(repo.statuses(Some(&mut opts))?.len() as u64)
}

/// `getUnmerged`: commits on `task_branch` not on `default_branch`; files, insertions and
/// deletions between their merge-base and the worktree as if everything were staged; and the
/// worktree's paths with uncommitted changes (both of `worktree`, read in its sandbox).
///
/// # Errors
/// [`GitError::Conflict`] when a branch is gone, the two share no history, or the worktree is
/// missing; [`GitError::Other`] for libgit2.
pub fn unmerged(
    repo_path: &Path,
    worktree: &WorktreeFacts,
    task_branch: &str,
    default_branch: &str,
) -> Result<Unmerged, GitError> {
    let repo = open(repo_path)?;
    let task_tip = local_tip(&repo, task_branch)?;
    let default_tip = local_tip(&repo, default_branch)?;
    let base = repo.merge_base(task_tip, default_tip).map_err(|e| {
        GitError::Conflict(format!(
            "branches {task_branch} and {default_branch} have no merge-base: {}",
            e.message()
        ))
    })?;
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::NONE)?;
    walk.push(task_tip)?;
    walk.hide(default_tip)?;
    let commits = walk.count() as u64;
    let tree = repo.find_tree(staged_tree(worktree)?)?;
    let base_tree = repo.find_commit(base)?.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&base_tree), Some(&tree), None)?;
    let stats = diff.stats()?;
    Ok(Unmerged {
        commits,
        files: stats.files_changed() as u64,
        insertions: stats.insertions() as u64,
        deletions: stats.deletions() as u64,
        uncommitted: worktree.n_uncommitted,
    })
}

/// What a squash merge asks for.
#[derive(Debug, Clone)]
pub struct SquashRequest<'a> {
    /// The project's checkout (its top directory).
    pub repo_path: &'a Path,
    /// The task's worktree, as read in its sandbox.
    pub worktree: WorktreeFacts,
    /// Where byre keeps tasks' worktrees (`DATA/worktrees`): a checkout of the default branch
    /// in there is an agent's, which byre never reads or writes outside its sandbox for another
    /// task's merge.
    pub task_worktrees: &'a Path,
    /// The task's branch.
    pub task_branch: &'a str,
    /// The project's default branch.
    pub default_branch: &'a str,
    /// The commit's title, used byte for byte (one line).
    pub title: &'a str,
    /// The commit's author and committer.
    pub author: &'a Identity,
    /// Each gets a `Co-authored-by: Name <email>` trailer, in order.
    pub co_authors: &'a [Identity],
    /// The commit's author and committer time, microseconds since the epoch (UTC): the
    /// merge's start, fixed, so that a redo after a crash makes the very same commit (a push
    /// that landed before the crash is then up to date, never a second commit).
    pub time_us: i64,
}

/// The commit message: the title, then (when there are co-authors) a blank line and one
/// `Co-authored-by` trailer per co-author.
pub fn commit_message(title: &str, co_authors: &[Identity]) -> String {
    let mut msg = format!("{title}\n");
    if !co_authors.is_empty() {
        msg.push('\n');
        for c in co_authors {
            msg.push_str(&format!("Co-authored-by: {} <{}>\n", c.name, c.email));
        }
    }
    msg
}

/// Refuses when an operation (rebase, merge, cherry-pick, revert, bisect, …) is in progress.
pub(super) fn check_no_operation(repo: &Repository, what: &str) -> Result<(), MergeError> {
    match repo.state() {
        RepositoryState::Clean => Ok(()),
        other => Err(MergeError::Refused(format!(
            "a {} is in progress in {what}; finish or abort it, then merge again",
            operation_name(other)
        ))),
    }
}

pub(super) fn operation_name(s: RepositoryState) -> &'static str {
    match s {
        RepositoryState::Merge => "merge",
        RepositoryState::Revert | RepositoryState::RevertSequence => "revert",
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => "cherry-pick",
        RepositoryState::Bisect => "bisect",
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge => "rebase",
        RepositoryState::ApplyMailbox | RepositoryState::ApplyMailboxOrRebase => "git am",
        RepositoryState::Clean => "nothing",
    }
}

/// Whether a rebase of `refname` is in progress in the checkout `r`: its HEAD is detached
/// then, but the rebase's end moves `refname` (`rebase-merge/head-name`, `rebase-apply/…`).
/// A task worktree's git dir is its agent's to write: read by handle, a regular file of at
/// most 4 KiB reached through no link (a FIFO there never blocks a merge).
fn rebasing(r: &Repository, refname: &str) -> bool {
    let Ok(git_dir) = byre_beneath::Dir::open(r.path()) else {
        return false;
    };
    ["rebase-merge", "rebase-apply"].iter().any(|d| {
        git_dir
            .read(
                &Path::new(d).join("head-name"),
                byre_beneath::Links::Refuse,
                4096,
            )
            .is_ok_and(|h| String::from_utf8_lossy(&h).trim() == refname)
    })
}

/// The checkouts (the main one and every linked worktree) that have `refname` checked out,
/// or are rebasing it.
fn checkouts_of(repo: &Repository, refname: &str) -> Result<Vec<Repository>, GitError> {
    let on_it = |r: &Repository| {
        rebasing(r, refname)
            || r.find_reference("HEAD")
                .ok()
                .and_then(|h| h.symbolic_target().ok().flatten().map(str::to_owned))
                .as_deref()
                == Some(refname)
    };
    let mut out = Vec::new();
    if !repo.is_bare() {
        let main = open(repo.workdir().unwrap_or(repo.path()))?;
        if on_it(&main) {
            out.push(main);
        }
    }
    for name in repo.worktrees()?.iter().flatten().flatten() {
        let Ok(wt) = repo.find_worktree(name) else {
            continue;
        };
        if wt.validate().is_err() {
            continue;
        }
        if let Ok(r) = Repository::open_from_worktree(&wt) {
            if on_it(&r) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Whether the checkout `c` already holds `tree_id` exactly, index and files (nothing
/// untracked): the fast-forward of a squash that a crash cut short before the branch moved.
/// Its changes against HEAD are then that squash's own, and the redo may finish it.
fn fast_forwarded_already(c: &Repository, tree_id: Oid) -> bool {
    let index_tree = c.index().and_then(|mut i| i.write_tree());
    if index_tree.ok() != Some(tree_id) {
        return false;
    }
    let mut opts = StatusOptions::new();
    opts.show(git2::StatusShow::Workdir)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    c.statuses(Some(&mut opts)).is_ok_and(|s| s.is_empty())
}

/// Refuses, before anything moves, a fast-forward of the clean checkout `c` to `tree_id` that
/// would overwrite a file it has outside git: an ignored file (which `git status` does not
/// show) at a path the squash adds, or at one of that path's parent directories. Reads only.
fn check_fast_forward(c: &Repository, tree_id: Oid) -> Result<(), MergeError> {
    let Some(workdir) = c.workdir() else {
        return Ok(());
    };
    let head_tree = c.head()?.peel_to_tree()?;
    let new_tree = c.find_tree(tree_id)?;
    let diff = c.diff_tree_to_tree(Some(&head_tree), Some(&new_tree), None)?;
    let mut in_the_way: Vec<String> = Vec::new();
    for delta in diff.deltas() {
        if delta.status() != git2::Delta::Added {
            continue;
        }
        let Some(path) = delta.new_file().path() else {
            continue;
        };
        if std::fs::symlink_metadata(workdir.join(path)).is_ok() {
            in_the_way.push(path.display().to_string());
            continue;
        }
        for parent in path.ancestors().skip(1) {
            if parent.as_os_str().is_empty() || head_tree.get_path(parent).is_ok() {
                continue;
            }
            if std::fs::symlink_metadata(workdir.join(parent)).is_ok_and(|m| !m.is_dir()) {
                in_the_way.push(parent.display().to_string());
            }
        }
    }
    if in_the_way.is_empty() {
        return Ok(());
    }
    in_the_way.sort();
    in_the_way.dedup();
    Err(MergeError::Refused(format!(
        "fast-forwarding the checkout at {} would overwrite files that are not in git \
         (ignored): {}; move them away, then merge again",
        workdir.display(),
        in_the_way.join(", ")
    )))
}

/// `mergeTask`'s git part: squashes the worktree (as if everything were staged) onto the
/// default branch with a three-way merge of trees (merge-base, default branch tip, worktree),
/// commits it with [`commit_message`] as `author`, pushes it to `origin` when the repository
/// has that remote, advances the local default branch and fast-forwards each checkout of it
/// (all clean, checked first). Returns the commit's sha, or None when the worktree adds
/// nothing to the default branch (nothing is committed, pushed or moved).
///
/// # Errors
/// [`MergeError::Refused`] with nothing moved: an operation in progress in the worktree or the
/// project's checkout; a conflict (the paths are named); a checkout of the default branch that
/// is not clean; a rejected push; the default branch moved meanwhile. [`MergeError::Git`]
/// for libgit2, the filesystem, or a `git` binary that could not run.
pub fn squash_merge(req: &SquashRequest<'_>) -> Result<Option<String>, MergeError> {
    let repo = open(req.repo_path)?;
    if let Some(op) = &req.worktree.operation {
        return Err(MergeError::Refused(format!(
            "a {op} is in progress in the task's worktree; finish or abort it, then merge again"
        )));
    }
    check_no_operation(&repo, "the project's checkout")?;
    let refname = format!("refs/heads/{}", req.default_branch);
    let checkouts = checkouts_of(&repo, &refname)?;
    // An agent may check out the default branch in its own worktree (`git switch
    // --ignore-other-worktrees`): byre would then check that worktree's files and fast-forward
    // them outside the sandbox, where the agent's links lead anywhere. It is refused instead.
    let task_worktrees =
        std::fs::canonicalize(req.task_worktrees).unwrap_or_else(|_| req.task_worktrees.to_owned());
    if let Some(at) = checkouts
        .iter()
        .filter_map(|c| c.workdir())
        .find(|w| w.starts_with(&task_worktrees))
    {
        return Err(MergeError::Refused(format!(
            "{} is checked out in a task's worktree at {}; byre does not write one task's \
             worktree for another's merge: check out that task's own branch there, then merge again",
            req.default_branch,
            at.display()
        )));
    }
    for c in &checkouts {
        check_no_operation(c, "a checkout of the default branch")?;
    }

    let default_tip = local_tip(&repo, req.default_branch)?;
    let head = worktree_head(&req.worktree)?;
    let base = repo.merge_base(head, default_tip).map_err(|e| {
        MergeError::Refused(format!(
            "the task shares no history with {}: {}",
            req.default_branch,
            e.message()
        ))
    })?;
    let task_tree = repo.find_tree(staged_tree(&req.worktree)?)?;
    let ours = repo.find_commit(default_tip)?.tree()?;
    let ancestor = repo.find_commit(base)?.tree()?;
    let mut opts = MergeOptions::new();
    opts.find_renames(true).fail_on_conflict(false);
    let mut index = repo.merge_trees(&ancestor, &ours, &task_tree, Some(&opts))?;
    if index.has_conflicts() {
        let mut paths: Vec<String> = Vec::new();
        for c in index.conflicts()? {
            let c = c?;
            let entry = c.our.or(c.their).or(c.ancestor);
            if let Some(e) = entry {
                paths.push(String::from_utf8_lossy(&e.path).into_owned());
            }
        }
        paths.sort();
        paths.dedup();
        return Err(MergeError::Refused(format!(
            "the task's changes conflict with {} in: {}; merge {} into the task first (mergeIn)",
            req.default_branch,
            paths.join(", "),
            req.default_branch
        )));
    }
    let tree_id = index.write_tree_to(&repo)?;
    let time = git2::Time::new(req.time_us.div_euclid(1_000_000), 0);
    let sig = Signature::new(&req.author.name, &req.author.email, &time)?;
    let message = commit_message(req.title, req.co_authors);
    if tree_id == ours.id() {
        // A redo after a crash that came after the squash landed: the tip is this very
        // commit (same message, author and time), so report it rather than "nothing".
        let tip = repo.find_commit(default_tip)?;
        let a = tip.author();
        let same = tip.message_bytes() == message.as_bytes()
            && a.name_bytes() == sig.name_bytes()
            && a.email_bytes() == sig.email_bytes()
            && a.when().seconds() == time.seconds();
        return Ok(same.then(|| default_tip.to_string()));
    }
    // A checkout that already holds the squash (a redo after a crash) needs no checkout.
    let done: Vec<bool> = checkouts
        .iter()
        .map(|c| fast_forwarded_already(c, tree_id))
        .collect();
    for (c, done) in checkouts.iter().zip(&done) {
        if !done && changed_paths(c)? > 0 {
            let at = c.workdir().unwrap_or(c.path()).display().to_string();
            return Err(MergeError::Refused(format!(
                "{} is checked out at {at} with uncommitted changes or untracked files; commit or stash them, then merge again",
                req.default_branch
            )));
        }
    }
    for (c, done) in checkouts.iter().zip(&done) {
        if !done {
            check_fast_forward(c, tree_id)?;
        }
    }
    let tree = repo.find_tree(tree_id)?;
    let parent = repo.find_commit(default_tip)?;
    let commit = repo.commit(None, &sig, &sig, &message, &tree, &[&parent])?;

    if repo.find_remote("origin").is_ok() {
        push(req.repo_path, commit, req.default_branch)?;
    }
    if local_tip(&repo, req.default_branch)? != default_tip {
        return Err(MergeError::Refused(format!(
            "{} moved during the merge; merge again",
            req.default_branch
        )));
    }
    for c in checkouts
        .iter()
        .zip(&done)
        .filter(|(_, done)| !**done)
        .map(|(c, _)| c)
    {
        // Clean (checked above) and HEAD still on the old tip, the baseline of a safe
        // checkout: the new tree replaces the old one, index included.
        let own_tree = c.find_tree(tree_id)?;
        let mut written = Vec::new();
        {
            let mut opts = CheckoutBuilder::new();
            opts.safe().overwrite_ignored(false);
            if let (Some(workdir), Some(_)) =
                (c.workdir(), byre_process::private_files::user_umask())
            {
                opts.notify_on(git2::CheckoutNotificationType::UPDATED)
                    .notify(|_, path, _, target, _| {
                        if let (Some(path), Some(target)) = (path, target) {
                            written.push(Written::before(workdir, path, target.mode()));
                        }
                        true
                    });
            }
            c.checkout_tree(own_tree.as_object(), Some(&mut opts))?;
        }
        restore_user_modes(&written);
    }
    // Compare-and-swap: the branch must still be where the squash started.
    repo.reference_matching(
        &refname,
        commit,
        true,
        default_tip,
        &format!("byre: squash merge of {}", req.task_branch),
    )
    .map_err(|e| {
        MergeError::Refused(format!(
            "{} moved during the merge: {}",
            req.default_branch,
            e.message()
        ))
    })?;
    Ok(Some(commit.to_string()))
}

/// A file the fast-forward of a user's checkout writes, noted before it is written: the
/// directories it makes are those of its parents that do not exist yet.
struct Written {
    path: std::path::PathBuf,
    executable: bool,
    /// The mode of the file it replaces, kept when the executable bit stays the same.
    previous_mode: Option<u32>,
    new_dirs: Vec<std::path::PathBuf>,
}

impl Written {
    fn before(workdir: &Path, path: &Path, mode: git2::FileMode) -> Written {
        let new_dirs = path
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty() && !workdir.join(d).exists())
            .map(|d| workdir.join(d))
            .collect();
        use std::os::unix::fs::PermissionsExt;
        let executable = mode == git2::FileMode::BlobExecutable;
        let previous_mode = std::fs::symlink_metadata(workdir.join(path))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.permissions().mode() & 0o7777)
            .filter(|m| (m & 0o111 != 0) == executable);
        Written {
            path: workdir.join(path),
            executable,
            previous_mode,
            new_dirs,
        }
    }
}

/// Gives what a fast-forward wrote in the user's checkout the modes it had (a replaced file
/// whose executable bit stays) or the user's own umask would give it (byre's is 077:
/// `crate::private_files`); symlinks are left as they are.
fn restore_user_modes(written: &[Written]) {
    use std::os::unix::fs::PermissionsExt;
    let set = |path: &Path, exec_or_dir: bool, previous: Option<u32>| {
        let Some(mode) = byre_process::private_files::user_mode(exec_or_dir) else {
            return;
        };
        let mode = previous.unwrap_or(mode);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_symlink() => {
                if let Err(e) =
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                {
                    tracing::warn!(path = %path.display(), error = %e, "cannot give a fast-forwarded file the user's mode");
                }
            }
            _ => {}
        }
    };
    for w in written {
        for dir in &w.new_dirs {
            set(dir, true, None);
        }
        set(&w.path, w.executable, w.previous_mode);
    }
}

/// How long `git push` may take before byre stops it.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// `git push origin <sha>:refs/heads/<branch>` by argv in the repository, never forced; git's
/// own credential helpers and ssh configuration apply; no terminal prompt and a time limit
/// ([`super::binary::run_git`]'s rules). Also the task branch's push (`gitPush`).
pub(crate) fn push(repo_path: &Path, commit: Oid, branch: &str) -> Result<(), MergeError> {
    let refspec = format!("{commit}:refs/heads/{branch}");
    let ran = super::binary::run_git(
        repo_path,
        &["push", "--porcelain", "origin", &refspec],
        &[],
        PUSH_TIMEOUT,
    )?;
    match ran.status {
        Some(s) if s.success() => Ok(()),
        Some(_) => Err(MergeError::Refused(format!(
            "the push of {branch} to origin failed (nothing moved here; never forced): {}",
            ran.text
        ))),
        None => Err(MergeError::Refused(format!(
            "the push of {branch} to origin did not finish within {} s and was stopped; it may \
             have landed: fetch, then try again",
            PUSH_TIMEOUT.as_secs()
        ))),
    }
}

/// Keeps the worktree's state as a snapshot commit (the worktree as if everything were
/// staged, parent HEAD: `worktree`, read in its sandbox) at
/// `refs/byre/tasks/{task_id}/snap/{n}`, n one more than the highest there. Returns the ref's
/// name.
///
/// # Errors
/// [`GitError::Other`] for libgit2.
pub fn keep_snapshot(
    repo_path: &Path,
    worktree: &WorktreeFacts,
    task_id: &str,
) -> Result<String, GitError> {
    let repo = open(repo_path)?;
    let head = repo.find_commit(worktree_head(worktree)?)?;
    let tree = repo.find_tree(staged_tree(worktree)?)?;
    let sig = Signature::now("byre", "byre@localhost")?;
    let msg = format!("byre: the worktree of task {task_id} before its removal\n");
    let commit = repo.commit(None, &sig, &sig, &msg, &tree, &[&head])?;
    let name = next_snap_ref(&repo, task_id)?;
    repo.reference(&name, commit, false, "byre: keep the worktree")?;
    Ok(name)
}

/// The next snapshot ref's name for `task_id`: `refs/byre/tasks/{task_id}/snap/{n}`, n one
/// more than the highest there.
fn next_snap_ref(repo: &Repository, task_id: &str) -> Result<String, GitError> {
    let prefix = format!("refs/byre/tasks/{task_id}/snap/");
    let mut n = 0u64;
    for r in repo.references_glob(&format!("{prefix}*"))?.flatten() {
        if let Some(k) = r
            .name()
            .ok()
            .and_then(|s| s.strip_prefix(&prefix))
            .and_then(|s| s.parse::<u64>().ok())
        {
            n = n.max(k);
        }
    }
    Ok(format!("{prefix}{}", n + 1))
}

/// [`keep_snapshot`] for a worktree directory whose link in the repository
/// (`.git/worktrees/{name}`) is gone: its files on disk (`.gitignore` respected) become a
/// commit whose parent is the task branch's tip (none when the branch is gone too), through
/// an in-memory index (no index file is written).
fn keep_orphan_snapshot(
    repo: &Repository,
    worktree_path: &Path,
    task_id: &str,
    branch: &str,
) -> Result<String, GitError> {
    let files = Repository::open_bare(repo.path())?;
    files.set_workdir(worktree_path, false)?;
    files.set_index(&mut git2::Index::new()?)?;
    let mut index = files.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    let tree = files.find_tree(index.write_tree_to(&files)?)?;
    let parent = match files.find_branch(branch, BranchType::Local) {
        Ok(b) => Some(b.get().peel_to_commit()?),
        Err(e) if e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let sig = Signature::now("byre", "byre@localhost")?;
    let msg = format!("byre: the worktree of task {task_id} before its removal\n");
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let commit = files.commit(None, &sig, &sig, &msg, &tree, &parents)?;
    let name = next_snap_ref(&files, task_id)?;
    files.reference(&name, commit, false, "byre: keep the worktree")?;
    Ok(name)
}

/// Removes a task's worktree (directory and `.git/worktrees/{worktree_name}`) and its branch,
/// after keeping the worktree's state with [`keep_snapshot`] (when the directory exists: its
/// `facts`, read in its sandbox, must be given then).
/// Idempotent: what is already gone is skipped. Returns the snapshot ref kept, if any.
///
/// # Errors
/// [`GitError::Other`] when keeping the snapshot or removing fails (nothing is removed when
/// the snapshot could not be kept).
pub fn remove_task_worktree(
    repo_path: &Path,
    worktree_path: &Path,
    facts: Option<&WorktreeFacts>,
    worktree_name: &str,
    task_id: &str,
    branch: &str,
) -> Result<Option<String>, GitError> {
    let repo = open(repo_path)?;
    let linked = match repo.find_worktree(worktree_name) {
        Ok(wt) => Some(wt),
        Err(e) if e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let kept = if !worktree_path.join(".git").exists() {
        None
    } else if linked.is_some() {
        let facts = facts.ok_or_else(|| {
            GitError::Other("the worktree could not be read to keep its state".into())
        })?;
        Some(keep_snapshot(repo_path, facts, task_id)?)
    } else {
        // Cut off from the repository (`.git/worktrees/{name}` gone, say a removal cut
        // short by an older byre, or by hand): its files are kept all the same.
        Some(keep_orphan_snapshot(&repo, worktree_path, task_id, branch)?)
    };
    // The files first, the link to the repository last: a removal cut short (a crash, a file
    // that cannot be deleted) leaves a worktree that the redo can still read and snapshot.
    if worktree_path.exists() {
        std::fs::remove_dir_all(worktree_path)
            .map_err(|e| GitError::Other(format!("{}: {e}", worktree_path.display())))?;
    }
    if let Some(wt) = linked {
        let mut opts = WorktreePruneOptions::new();
        opts.valid(true).locked(false).working_tree(true);
        wt.prune(Some(&mut opts)).map_err(|e| {
            GitError::Other(format!(
                "cannot remove worktree {worktree_name}: {}",
                e.message()
            ))
        })?;
    }
    match repo.find_branch(branch, BranchType::Local) {
        Ok(mut b) => b.delete()?,
        Err(e) if e.code() == ErrorCode::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    remove_branch_namespace(&repo, task_id, branch)?;
    Ok(kept)
}

/// Removes the task's ref directory, `refs/heads/byre/<id8>/` (its branch's own, the only one
/// of `refs/` its sandbox could write), with whatever its agent left there: other refs, links,
/// files that are no ref. By handle, each link removed itself, never followed, so a link an
/// agent planted to another repository's refs outlives neither the task nor into a later
/// `git gc` or push of the user's, which would walk it. Nothing for a branch made before
/// branch namespaces (`byre/<slug>-<id8>`), whose directory other tasks share.
fn remove_branch_namespace(repo: &Repository, task_id: &str, branch: &str) -> Result<(), GitError> {
    let namespace = Path::new("byre").join(task_id.get(..8).unwrap_or(task_id));
    if Path::new(branch).parent() != Some(namespace.as_path()) {
        return Ok(());
    }
    let heads = repo.commondir().join("refs/heads");
    let dir = match byre_beneath::Dir::open(&heads) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(GitError::Other(format!("{}: {e}", heads.display()))),
    };
    match dir.remove_dir_all(&namespace) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GitError::Other(format!(
            "{}: {e}",
            heads.join(&namespace).display()
        ))),
    }
}

#[cfg(test)]
mod tests;
