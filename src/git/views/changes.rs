//! `getTaskChanges` and `getTaskDiff`: the worktree as a tree (as if everything were staged),
//! compared with a base commit, file by file.

use std::path::Path;

use git2::{
    BranchType, Delta, DiffFindOptions, DiffOptions, Index, IndexAddOption, Oid, Patch, Repository,
    RepositoryOpenFlags,
};

use super::{TreePath, ViewError, Worktree};

/// Files larger than this (8 MiB) on either side of a diff count as binary: no line stats, no
/// patch text.
pub const MAX_DIFF_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// How a file changed (spec `FileChange.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStatus {
    /// Only in the tree.
    Added,
    /// In both, different content or mode.
    Modified,
    /// Only in the base.
    Deleted,
    /// Moved (and possibly edited); `old_path` is where it was.
    Renamed,
    /// Changed between file, symlink and submodule.
    TypeChanged,
}

/// One changed file (spec `FileChange`).
#[derive(Debug)]
pub struct FileChange {
    /// Path in the tree (in the base for a deleted file).
    pub path: String,
    /// Renamed: the path in the base.
    pub old_path: Option<String>,
    /// How it changed.
    pub status: ChangeStatus,
    /// Lines added (0 when binary).
    pub additions: usize,
    /// Lines deleted (0 when binary).
    pub deletions: usize,
    /// Either side is binary, or larger than [`MAX_DIFF_FILE_BYTES`].
    pub binary: bool,
}

/// A worktree's changes (spec `TaskChanges`).
#[derive(Debug)]
pub struct Changes {
    /// The commit compared with (40 hex).
    pub base: String,
    /// The worktree's tree, as if everything were staged (40 hex).
    pub tree: String,
    /// Changed files, by path.
    pub files: Vec<FileChange>,
}

/// `getTaskChanges`: everything in the worktree (committed, staged, unstaged and untracked,
/// respecting the ignore files) as a tree, compared with `since` (a commit sha, full or at
/// least 4 hex digits) or else the merge-base of local branches `task_branch` and
/// `default_branch`. Renames are detected.
///
/// `tree` is the worktree's tree as if everything were staged ([`staged_index`], written to the
/// object database), which the caller has made where the worktree may be read: in the task's
/// sandbox (`git::boxed::Job::StagedTree`). Only objects are read here.
///
/// # Errors
/// [`ViewError::Invalid`] for a `since` that is not a known commit; [`ViewError::Conflict`]
/// when a branch is gone or the two share no history; [`ViewError::Other`] for libgit2 or a
/// `tree` that is not one.
pub fn task_changes(
    worktree: &Worktree,
    task_branch: &str,
    default_branch: &str,
    since: Option<&str>,
    tree: &str,
) -> Result<Changes, ViewError> {
    let repo = worktree.repo()?;
    let base = match since {
        Some(since) => since_commit(&repo, since)?,
        None => merge_base(&repo, task_branch, default_branch)?,
    };
    let tree = Oid::from_str(tree)?;
    compare(&repo, base, tree)
}

/// What a snapshot's tree is compared with ([`snapshot_changes`]).
#[derive(Debug, Clone, Copy)]
pub enum SnapshotBase<'a> {
    /// The merge-base of the snapshot commit and the default branch.
    MergeBase,
    /// The previous snapshot's tree (40 hex); `step` of a later snapshot.
    Tree(&'a str),
    /// The snapshot commit's parent; `step` of the first snapshot.
    Parent,
}

/// `getTaskChanges` with `snapshot`: the tree of snapshot commit `commit` (40 hex) compared
/// with `base` (see [`SnapshotBase`]), as [`task_changes`] compares the live worktree.
///
/// # Errors
/// [`ViewError::NotFound`] when the commit or base tree is gone from the repository;
/// [`ViewError::Conflict`] when the default branch is gone or shares no history with it;
/// [`ViewError::Other`] for libgit2.
pub fn snapshot_changes(
    worktree: &Worktree,
    default_branch: &str,
    commit: &str,
    base: SnapshotBase<'_>,
) -> Result<Changes, ViewError> {
    let repo = worktree.repo()?;
    let gone = |what: &str| ViewError::NotFound(format!("{what} is not in the repository"));
    let snap = Oid::from_str(commit)
        .ok()
        .and_then(|oid| repo.find_commit(oid).ok())
        .ok_or_else(|| gone(&format!("snapshot commit {commit}")))?;
    let base = match base {
        SnapshotBase::MergeBase => {
            let tip = repo
                .find_branch(default_branch, BranchType::Local)
                .and_then(|b| b.get().peel_to_commit())
                .map_err(|e| {
                    ViewError::Conflict(format!(
                        "cannot read branch {default_branch}: {}",
                        e.message()
                    ))
                })?;
            repo.merge_base(snap.id(), tip.id()).map_err(|e| {
                ViewError::Conflict(format!(
                    "snapshot {commit} and {default_branch} have no merge-base: {}",
                    e.message()
                ))
            })?
        }
        SnapshotBase::Tree(tree) => Oid::from_str(tree)
            .ok()
            .filter(|oid| repo.find_tree(*oid).is_ok())
            .ok_or_else(|| gone(&format!("tree {tree}")))?,
        SnapshotBase::Parent => snap
            .parent_id(0)
            .map_err(|_| gone(&format!("the parent of snapshot commit {commit}")))?,
    };
    compare(&repo, base, snap.tree_id())
}

/// Per-file changes from `base` (a commit or tree) to tree `tree`, renames detected.
fn compare(repo: &Repository, base: Oid, tree: Oid) -> Result<Changes, ViewError> {
    let base_tree = repo.find_object(base, None)?.peel_to_tree()?;
    let new_tree = repo.find_tree(tree)?;
    let mut diff =
        repo.diff_tree_to_tree(Some(&base_tree), Some(&new_tree), Some(&mut diff_options()))?;
    diff.find_similar(Some(DiffFindOptions::new().renames(true)))?;
    let mut files = Vec::with_capacity(diff.deltas().len());
    for (idx, delta) in diff.deltas().enumerate() {
        let status = match delta.status() {
            Delta::Added | Delta::Untracked | Delta::Copied => ChangeStatus::Added,
            Delta::Deleted => ChangeStatus::Deleted,
            Delta::Renamed => ChangeStatus::Renamed,
            Delta::Typechange => ChangeStatus::TypeChanged,
            _ => ChangeStatus::Modified,
        };
        let path_of = |f: git2::DiffFile<'_>| {
            f.path()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let (mut additions, mut deletions, mut binary) = (0, 0, true);
        if let Some(patch) = Patch::from_diff(&diff, idx)? {
            binary = patch.delta().flags().is_binary();
            if !binary {
                (_, additions, deletions) = patch.line_stats()?;
            }
        }
        files.push(FileChange {
            path: path_of(delta.new_file()),
            old_path: (status == ChangeStatus::Renamed).then(|| path_of(delta.old_file())),
            status,
            additions,
            deletions,
            binary,
        });
    }
    Ok(Changes {
        base: base.to_string(),
        tree: tree.to_string(),
        files,
    })
}

/// The commit `since` names: hex digits only (no revision syntax), 4 to 40 of them.
fn since_commit(repo: &Repository, since: &str) -> Result<Oid, ViewError> {
    let hex = since.len() >= 4 && since.len() <= 40 && since.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(ViewError::Invalid(format!(
            "since {since:?} is not a commit sha"
        )));
    }
    let object = repo
        .revparse_single(since)
        .map_err(|e| ViewError::Invalid(format!("since {since:?}: {}", e.message())))?;
    let commit = object
        .peel_to_commit()
        .map_err(|_| ViewError::Invalid(format!("since {since:?} is not a commit")))?;
    Ok(commit.id())
}

/// The merge-base of two local branches.
fn merge_base(
    repo: &Repository,
    task_branch: &str,
    default_branch: &str,
) -> Result<Oid, ViewError> {
    let tip = |name: &str| -> Result<Oid, ViewError> {
        let branch = repo.find_branch(name, BranchType::Local).map_err(|e| {
            ViewError::Conflict(format!("cannot read branch {name}: {}", e.message()))
        })?;
        Ok(branch.get().peel_to_commit()?.id())
    };
    let (task_tip, default_tip) = (tip(task_branch)?, tip(default_branch)?);
    repo.merge_base(task_tip, default_tip).map_err(|e| {
        ViewError::Conflict(format!(
            "branches {task_branch} and {default_branch} have no merge-base: {}",
            e.message()
        ))
    })
}

/// An in-memory index of the worktree as if everything were staged (`git add -A`,
/// `.gitignore` respected): the worktree's index is read, never written: its entries (with
/// their stat data, so unchanged files are not hashed again) are copied into a new in-memory
/// index that `repo` (a handle of the caller's alone) then uses for `add_all`; new blobs go
/// to the object database. An untracked repository inside the worktree becomes a gitlink to
/// its HEAD, as `git add` makes it (left out when it has no commit). Paths through a
/// transfer's staging directory (`byre_connect::archive::STAGING_PREFIX`) are left out.
///
/// # Errors
/// [`ViewError::Other`] for libgit2 (an index with conflicts cannot be written as a tree).
pub fn staged_index(worktree: &Worktree, repo: &Repository) -> Result<Index, ViewError> {
    let mut index = Index::new()?;
    for entry in repo.index()?.iter() {
        index.add(&entry)?;
    }
    repo.set_index(&mut index)?;
    let mut nested = Vec::new();
    let mut skip_nested = |path: &Path, _: &[u8]| -> i32 {
        // A transfer's staging directory (`byre_connect::archive::STAGING_PREFIX`) is byre's, not the
        // agent's work: never staged.
        let staging = path.components().any(|c| {
            c.as_os_str()
                .as_encoded_bytes()
                .starts_with(byre_connect::archive::STAGING_PREFIX.as_bytes())
        });
        if staging {
            return 1;
        }
        // libgit2 names an untracked directory it did not enter (a repository) with a `/`.
        if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
            nested.push(path.to_owned());
            return 1;
        }
        0
    };
    // A pathspec, not none: git2 reads the matched pathspec, which is NULL without one.
    index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_nested))?;
    for path in nested {
        if let Some(entry) = gitlink(worktree, &path) {
            index.add(&entry)?;
        }
    }
    Ok(index)
}

/// A gitlink index entry for the repository at `path` (relative, ending in `/`) in the
/// worktree, pointing at its HEAD commit; None when it has none.
fn gitlink(worktree: &Worktree, path: &Path) -> Option<git2::IndexEntry> {
    let flags = RepositoryOpenFlags::NO_SEARCH;
    let nested = Repository::open_ext(
        worktree.root.join(path),
        flags,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .ok()?;
    let head = nested.head().ok()?.peel_to_commit().ok()?.id();
    let path = path.as_os_str().as_encoded_bytes();
    let zero = git2::IndexTime::new(0, 0);
    Some(git2::IndexEntry {
        ctime: zero,
        mtime: zero,
        dev: 0,
        ino: 0,
        mode: 0o160_000,
        uid: 0,
        gid: 0,
        file_size: 0,
        id: head,
        flags: 0,
        flags_extended: 0,
        path: path.strip_suffix(b"/").unwrap_or(path).to_vec(),
    })
}

fn diff_options() -> DiffOptions {
    let mut opts = DiffOptions::new();
    opts.include_typechange(true)
        .max_size(MAX_DIFF_FILE_BYTES as i64)
        .disable_pathspec_match(true);
    opts
}

/// `getTaskDiff`: the unified patch of `path` between `base` (a commit or tree) and `tree` (a
/// tree or commit), both full 40-hex shas. With `old_path`, a rename from it is shown as one.
/// An unchanged file gives an empty patch; a binary one git's "Binary files … differ".
///
/// # Errors
/// [`ViewError::Invalid`] for a malformed sha or an object that is not a commit or tree;
/// [`ViewError::NotFound`] for an unknown object; [`ViewError::Other`] for libgit2.
pub fn task_diff(
    worktree: &Worktree,
    base: &str,
    tree: &str,
    path: &TreePath,
    old_path: Option<&TreePath>,
) -> Result<String, ViewError> {
    if path.is_root() || old_path.is_some_and(TreePath::is_root) {
        return Err(ViewError::Invalid("path must name a file".into()));
    }
    let repo = worktree.repo()?;
    let base_tree = tree_of(&repo, "base", base)?;
    let new_tree = tree_of(&repo, "tree", tree)?;
    let mut opts = diff_options();
    opts.pathspec(&path.0);
    if let Some(old) = old_path {
        opts.pathspec(&old.0);
    }
    let mut diff = repo.diff_tree_to_tree(Some(&base_tree), Some(&new_tree), Some(&mut opts))?;
    if old_path.is_some() {
        diff.find_similar(Some(DiffFindOptions::new().renames(true)))?;
    }
    let wanted = |p: Option<&Path>, want: &TreePath| p == Some(Path::new(&want.0));
    let found = diff.deltas().position(|d| {
        let new_matches = wanted(d.new_file().path(), path);
        match old_path {
            Some(old) => new_matches && wanted(d.old_file().path(), old),
            None => new_matches,
        }
    });
    let Some(idx) = found else {
        return Ok(String::new());
    };
    let Some(mut patch) = Patch::from_diff(&diff, idx)? else {
        return Ok(String::new());
    };
    let buf = patch.to_buf()?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The tree of commit-or-tree `sha` (40 hex).
fn tree_of<'r>(repo: &'r Repository, what: &str, sha: &str) -> Result<git2::Tree<'r>, ViewError> {
    if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ViewError::Invalid(format!(
            "{what} {sha:?} is not a 40-hex sha"
        )));
    }
    let oid = Oid::from_str(sha)?;
    let object = repo
        .find_object(oid, None)
        .map_err(|_| ViewError::NotFound(format!("{what} {sha} is not in the repository")))?;
    object
        .peel_to_tree()
        .map_err(|_| ViewError::Invalid(format!("{what} {sha} is not a commit or tree")))
}
