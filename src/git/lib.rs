//! byre-git: git operations on the user's repositories, all through libgit2 (the `git2` crate)
//! but for the `git` binary [`remote`] runs by argv.
//!
//! Every function here blocks (filesystem and libgit2 I/O); call them from
//! `tokio::task::spawn_blocking`. None of them touches the user's own checkout
//! (its HEAD, index or working files): agents work in linked worktrees.

#![warn(missing_docs)]

pub mod actions;
pub mod binary;
pub mod boxed;
pub mod files;
pub mod merge;
pub mod remote;
pub mod reviews;
pub mod snapshots;
pub mod subtasks;
pub mod views;
pub mod worktree_files;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{
    BranchType, ErrorCode, Oid, Reference, Repository, RepositoryOpenFlags, WorktreeAddOptions,
    WorktreePruneOptions,
};

/// Why a git operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The path is not a git repository (message for the user: include the path).
    #[error("{0} is not a git repository")]
    NotARepository(String),
    /// The repository has no commit on its default branch / cannot determine one (user message).
    #[error("{0}")]
    NoDefaultBranch(String),
    /// A branch exists already and does not point where we need (user message).
    #[error("{0}")]
    Conflict(String),
    /// Anything else from libgit2 or the filesystem.
    #[error("git: {0}")]
    Other(String),
}

impl From<git2::Error> for GitError {
    fn from(e: git2::Error) -> Self {
        GitError::Other(e.message().to_owned())
    }
}

/// A view's refusal as git work's: a conflict stays a conflict (a message for the user).
impl From<views::ViewError> for GitError {
    fn from(e: views::ViewError) -> Self {
        match e {
            views::ViewError::Conflict(m) => GitError::Conflict(m),
            other => GitError::Other(other.to_string()),
        }
    }
}

/// Facts about a repository gathered before createProject is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFacts {
    /// Canonical absolute path of the working directory (non-bare) or of the git dir (bare).
    pub repo_path: String,
    /// Short name of the default branch, e.g. "main".
    pub default_branch: String,
    /// URL of the remote "origin", else of the first remote in libgit2's (alphabetical)
    /// listing, else "". Returned verbatim: it may carry credentials (`https://user:token@…`).
    pub remote: String,
    /// 40-hex sha of the default branch's tip commit.
    pub head_commit: String,
    /// Canonical absolute path of the repository's common git dir (where a linked worktree's
    /// objects and refs live, possibly far from `repo_path`).
    pub git_dir: PathBuf,
}

/// Inspects `path`, which must be absolute, an existing directory, and the top of a git
/// repository: the working directory of a non-bare repository (a linked worktree's top counts)
/// or the git dir of a bare one.
///
/// Default branch: the branch HEAD points at (symbolic ref `refs/heads/X`) if that branch has
/// a commit; else (HEAD detached or unborn) origin/HEAD's target branch if it exists locally,
/// else "main", else "master".
///
/// # Errors
/// - [`GitError::NotARepository`] if `path` is relative, missing, not a directory, not a
///   repository, or a subdirectory (or the `.git` dir) of a repository — so two projects can't
///   point into one repository.
/// - [`GitError::NoDefaultBranch`] if the repository has no commits, or no default branch can
///   be determined.
/// - [`GitError::Other`] for libgit2 / filesystem failures (e.g. the repository is owned by
///   another user, or the path is not UTF-8).
pub fn inspect_repo(path: &Path) -> Result<RepoFacts, GitError> {
    let (repo, top) = open_top(path)?;
    let shown = top.display().to_string();
    let repo_path = top
        .to_str()
        .ok_or_else(|| GitError::Other(format!("{shown} is not a UTF-8 path")))?
        .to_owned();
    let default_branch = default_branch(&repo, &shown)?;
    let head_commit = local_tip(&repo, &default_branch)
        .ok_or_else(|| {
            GitError::NoDefaultBranch(format!(
                "{shown} has no commits yet; commit something first"
            ))
        })?
        .to_string();
    let git_dir = fs::canonicalize(repo.commondir()).unwrap_or_else(|_| repo.commondir().into());
    Ok(RepoFacts {
        repo_path,
        default_branch,
        remote: remote_url(&repo),
        head_commit,
        git_dir,
    })
}

/// The 40-hex sha of the tip commit of local branch `branch` in the repository whose top is
/// `repo_path` (same rules for `repo_path` as [`inspect_repo`]).
///
/// # Errors
/// [`GitError::NotARepository`] as for [`inspect_repo`]; [`GitError::Other`] if the name is
/// invalid, the branch does not exist, or libgit2 fails.
pub fn branch_tip(repo_path: &Path, branch: &str) -> Result<String, GitError> {
    let (repo, top) = open_top(repo_path)?;
    let tip = tip_commit(&repo, &top, branch)?.id();
    Ok(tip.to_string())
}

/// The tip commit of local branch `branch` of `repo` (whose top is `top`, for messages).
///
/// # Errors
/// [`GitError::Other`] if the name is invalid, the branch does not exist, or libgit2 fails.
pub(crate) fn tip_commit<'r>(
    repo: &'r Repository,
    top: &Path,
    branch: &str,
) -> Result<git2::Commit<'r>, GitError> {
    if !is_valid_branch_name(branch) {
        return Err(GitError::Other(format!("invalid branch name {branch:?}")));
    }
    let b = match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => b,
        Err(e) if e.code() == ErrorCode::NotFound => {
            return Err(GitError::Other(format!(
                "branch {branch} does not exist in {}",
                top.display()
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(b.get().peel_to_commit()?)
}

/// The 40-hex sha of HEAD's commit in the worktree (or repository) at `worktree`.
///
/// # Errors
/// [`GitError::NotARepository`] when it is not one; [`GitError::Other`] when HEAD has no
/// commit or libgit2 fails.
pub fn worktree_head(worktree: &Path) -> Result<String, GitError> {
    let repo = git2::Repository::open(worktree)
        .map_err(|_| GitError::NotARepository(worktree.display().to_string()))?;
    let head = repo.head()?.peel_to_commit()?.id();
    Ok(head.to_string())
}

/// Makes sure local branch `branch` exists (created at `base_commit`, a 40-hex sha, if absent;
/// if present it is left where it is — it may have advanced) and that a linked worktree named
/// `worktree_name` exists at `worktree_path` with that branch checked out (a relative
/// `worktree_path` is resolved against the current directory; pass an absolute one).
/// Creates the parent directories of `worktree_path`. Returns the worktree's HEAD sha.
///
/// Idempotent: calling it again after success changes nothing. It also recovers from a crash
/// halfway (branch created but no worktree; checkout interrupted before the worktree's index
/// was written — the checkout is redone) and from a worktree directory removed by hand while
/// still registered in `.git/worktrees` (the stale entry is pruned and the worktree re-added).
/// Never touches the user's own checkout. Not safe to run concurrently with another call on
/// the same repository: callers should serialize per repository.
///
/// # Errors
/// - [`GitError::NotARepository`] as for [`inspect_repo`].
/// - [`GitError::Conflict`] if the branch is checked out in another worktree (including the
///   main checkout), if worktree `worktree_name` exists elsewhere or has another branch checked
///   out, or if `worktree_path` exists and is not that worktree (an empty directory is reused).
/// - [`GitError::Other`] for an invalid branch / worktree name (a worktree name must be a valid
///   branch name without '/'), an unknown `base_commit`, a locked stale worktree, or libgit2 /
///   filesystem failures.
pub fn ensure_worktree(
    repo_path: &Path,
    branch: &str,
    base_commit: &str,
    worktree_path: &Path,
    worktree_name: &str,
) -> Result<String, GitError> {
    if !is_valid_branch_name(branch) {
        return Err(GitError::Other(format!("invalid branch name {branch:?}")));
    }
    if worktree_name.contains('/') || !is_valid_branch_name(worktree_name) {
        return Err(GitError::Other(format!(
            "invalid worktree name {worktree_name:?}"
        )));
    }
    // A relative path is taken from the current directory, as libgit2 would.
    let worktree_path = &std::path::absolute(worktree_path)
        .map_err(|e| GitError::Other(format!("{}: {e}", worktree_path.display())))?;
    let (repo, top) = open_top(repo_path)?;
    let branch_ref = ensure_branch(&repo, &top, branch, base_commit)?;
    let refname = format!("refs/heads/{branch}");
    let wt_shown = worktree_path.display();

    match repo.find_worktree(worktree_name) {
        Ok(wt) if wt.validate().is_ok() => {
            if !same_path(wt.path(), worktree_path) {
                return Err(GitError::Conflict(format!(
                    "worktree {worktree_name} already exists at {}, not at {wt_shown}",
                    display_path(wt.path())
                )));
            }
            let wrepo = Repository::open_from_worktree(&wt)?;
            if head_branch(&wrepo).as_deref() != Some(refname.as_str()) {
                return Err(GitError::Conflict(format!(
                    "worktree {wt_shown} has something other than branch {branch} checked out"
                )));
            }
            finish_checkout(&wrepo)?;
            return head_sha(&wrepo);
        }
        Ok(wt) => {
            // Registered, but its directory is gone (or damaged): forget it, then re-add.
            let mut opts = WorktreePruneOptions::new();
            opts.valid(false).working_tree(false);
            wt.prune(Some(&mut opts))
                .map_err(|e| other(format!("cannot prune stale worktree {worktree_name}"), &e))?;
        }
        Err(e) if e.code() == ErrorCode::NotFound => {}
        Err(e) => return Err(other(format!("worktree {worktree_name} is damaged"), &e)),
    }

    if let Some(place) = checked_out_at(&repo, &refname, worktree_name)? {
        return Err(GitError::Conflict(format!(
            "branch {branch} is already checked out at {place}"
        )));
    }
    prepare_dir(worktree_path)?;
    let mut opts = WorktreeAddOptions::new();
    opts.reference(Some(&branch_ref));
    let wt = repo
        .worktree(worktree_name, worktree_path, Some(&opts))
        .map_err(|e| other(format!("cannot add worktree at {wt_shown}"), &e))?;
    let wrepo = Repository::open_from_worktree(&wt)?;
    head_sha(&wrepo)
}

/// Whether `branch` is a valid git branch name: `refs/heads/<branch>` passes git's
/// check-ref-format rules (via libgit2) and the name does not start with '-' and is not
/// "HEAD" or "@".
pub fn is_valid_branch_name(branch: &str) -> bool {
    !branch.starts_with('-')
        && branch != "HEAD"
        && branch != "@"
        && Reference::is_valid_name(&format!("refs/heads/{branch}"))
}

/// Opens the repository whose top is exactly `path`; returns it with the canonical top path.
fn open_top(path: &Path) -> Result<(Repository, PathBuf), GitError> {
    let shown = path.display().to_string();
    if !path.is_absolute() {
        return Err(GitError::NotARepository(format!(
            "{shown} (not an absolute path)"
        )));
    }
    let canon = match fs::canonicalize(path) {
        Ok(p) if p.is_dir() => p,
        Ok(_) => {
            return Err(GitError::NotARepository(format!(
                "{shown} (not a directory)"
            )))
        }
        Err(_) => {
            return Err(GitError::NotARepository(format!(
                "{shown} (no such directory)"
            )))
        }
    };
    let repo = match open_exact(&canon, RepositoryOpenFlags::empty()) {
        Ok(r) => r,
        Err(e) if e.code() == ErrorCode::NotFound => {
            // A subdirectory of a repository: name the top the user should give instead.
            let inside = Repository::discover(&canon)
                .ok()
                .and_then(|r| r.workdir().map(Path::to_path_buf));
            return Err(GitError::NotARepository(match inside {
                Some(top) => format!(
                    "{shown} (it is inside the repository {}; give that top directory)",
                    top.display()
                ),
                None => shown,
            }));
        }
        Err(e) => return Err(other(format!("cannot open {shown}"), &e)),
    };
    let top = if repo.is_bare() {
        Some(repo.path())
    } else {
        repo.workdir()
    };
    match top.map(fs::canonicalize) {
        Some(Ok(t)) if t == canon => Ok((repo, canon)),
        Some(Ok(t)) => Err(GitError::NotARepository(format!(
            "{shown} (it is inside the repository {}; give that top directory)",
            t.display()
        ))),
        _ => Err(GitError::NotARepository(shown)),
    }
}

/// Picks the default branch (see [`inspect_repo`]).
fn default_branch(repo: &Repository, shown: &str) -> Result<String, GitError> {
    let head = repo.find_reference("HEAD")?;
    if let Some(name) = head
        .symbolic_target()
        .ok()
        .flatten()
        .and_then(|t| t.strip_prefix("refs/heads/"))
    {
        if local_tip(repo, name).is_some() {
            return Ok(name.to_owned());
        }
    }
    let origin_head = repo.find_reference("refs/remotes/origin/HEAD").ok();
    let from_origin = origin_head
        .as_ref()
        .and_then(|r| r.symbolic_target().ok().flatten())
        .and_then(|t| t.strip_prefix("refs/remotes/origin/"));
    for name in from_origin.into_iter().chain(["main", "master"]) {
        if local_tip(repo, name).is_some() {
            return Ok(name.to_owned());
        }
    }
    let has_branches = repo.branches(Some(BranchType::Local))?.next().is_some();
    Err(GitError::NoDefaultBranch(if has_branches {
        format!("cannot determine the default branch of {shown}: HEAD is not on a branch and there is no origin/HEAD, main or master branch")
    } else {
        format!("{shown} has no commits yet; commit something first")
    }))
}

/// The tip commit of local branch `name`, if it exists and points at a commit.
fn local_tip(repo: &Repository, name: &str) -> Option<Oid> {
    let b = repo.find_branch(name, BranchType::Local).ok()?;
    let commit = b.get().peel_to_commit().ok()?;
    Some(commit.id())
}

/// URL of "origin", else of the first remote with a URL, else "".
fn remote_url(repo: &Repository) -> String {
    let url_of = |name: &str| {
        repo.find_remote(name)
            .ok()
            .and_then(|r| r.url().ok().map(str::to_owned))
    };
    if let Some(u) = url_of("origin") {
        return u;
    }
    let Ok(names) = repo.remotes() else {
        return String::new();
    };
    names
        .iter()
        .flatten()
        .flatten()
        .find_map(url_of)
        .unwrap_or_default()
}

/// Finds local branch `branch`, creating it at `base_commit` if absent.
fn ensure_branch<'r>(
    repo: &'r Repository,
    top: &Path,
    branch: &str,
    base_commit: &str,
) -> Result<Reference<'r>, GitError> {
    match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => return Ok(b.into_reference()),
        Err(e) if e.code() == ErrorCode::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let unknown = || {
        GitError::Other(format!(
            "commit {base_commit} not found in {}",
            top.display()
        ))
    };
    let oid = Oid::from_str(base_commit).map_err(|_| unknown())?;
    let commit = repo.find_commit(oid).map_err(|_| unknown())?;
    match repo.branch(branch, &commit, false) {
        Ok(b) => Ok(b.into_reference()),
        // Created concurrently: use it as it is.
        Err(e) if e.code() == ErrorCode::Exists => Ok(repo
            .find_branch(branch, BranchType::Local)?
            .into_reference()),
        Err(e) => Err(e.into()),
    }
}

/// Where `refname` is checked out, ignoring worktree `skip`: the main checkout (unless bare)
/// or any registered worktree, including one whose directory has gone missing.
fn checked_out_at(
    repo: &Repository,
    refname: &str,
    skip: &str,
) -> Result<Option<String>, GitError> {
    let main = open_exact(repo.commondir(), RepositoryOpenFlags::empty())?;
    if !main.is_bare() && head_branch(&main).as_deref() == Some(refname) {
        return Ok(Some(display_path(main.workdir().unwrap_or(main.path()))));
    }
    for name in main.worktrees()?.iter().flatten().flatten() {
        if name == skip {
            continue;
        }
        let Ok(wt) = main.find_worktree(name) else {
            continue;
        };
        // Open the worktree's git dir, not its working directory: that one may be gone.
        let gitdir = main.commondir().join("worktrees").join(name);
        let Ok(wrepo) = open_exact(&gitdir, RepositoryOpenFlags::BARE) else {
            continue;
        };
        if head_branch(&wrepo).as_deref() == Some(refname) {
            let stale = if wt.validate().is_err() {
                " (missing; `git worktree prune` forgets it)"
            } else {
                ""
            };
            return Ok(Some(format!("{}{stale}", display_path(wt.path()))));
        }
    }
    Ok(None)
}

/// A path for messages, without a trailing slash.
fn display_path(p: &Path) -> String {
    p.components().collect::<PathBuf>().display().to_string()
}

/// The full ref name HEAD points at symbolically, if any.
fn head_branch(repo: &Repository) -> Option<String> {
    let head = repo.find_reference("HEAD").ok()?;
    head.symbolic_target().ok().flatten().map(str::to_owned)
}

/// The sha HEAD resolves to.
fn head_sha(repo: &Repository) -> Result<String, GitError> {
    Ok(repo.head()?.peel_to_commit()?.id().to_string())
}

/// Redoes the checkout of a worktree whose index was never written (creation interrupted).
fn finish_checkout(wrepo: &Repository) -> Result<(), GitError> {
    if wrepo.path().join("index").exists() {
        return Ok(());
    }
    wrepo.checkout_head(Some(CheckoutBuilder::new().force()))?;
    Ok(())
}

/// Creates the parents of `path`; an existing empty directory at `path` is removed so that
/// libgit2 can create it, anything else there is a conflict.
fn prepare_dir(path: &Path) -> Result<(), GitError> {
    let io = |e: std::io::Error| GitError::Other(format!("{}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io)?;
    }
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(e)),
        Ok(m) if m.is_dir() && fs::read_dir(path).map_err(io)?.next().is_none() => {
            fs::remove_dir(path).map_err(io)
        }
        Ok(_) => Err(GitError::Conflict(format!(
            "{} already exists and is not a worktree of this repository",
            path.display()
        ))),
    }
}

/// Opens the repository at exactly `path` (no search upwards, no environment).
fn open_exact(path: &Path, flags: RepositoryOpenFlags) -> Result<Repository, git2::Error> {
    let flags = flags | RepositoryOpenFlags::NO_SEARCH;
    Repository::open_ext(path, flags, std::iter::empty::<&OsStr>())
}

/// [`GitError::Other`] with context.
fn other(context: String, e: &git2::Error) -> GitError {
    GitError::Other(format!("{context}: {}", e.message()))
}

/// Whether two paths name the same place (canonically when both exist).
fn same_path(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
