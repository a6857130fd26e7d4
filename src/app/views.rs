//! Views of a task's worktree (`getTaskDir`, `getTaskFile`, `getTaskImage`,
//! `getTaskChanges`, `getTaskDiff`), read-only. Each operation finds the task's worktree in
//! the fold, runs the git and filesystem work of `git::views` off the async threads, and
//! answers. Every path it is given goes through `git::views::TreePath` / `WorkPath` before
//! anything is read.
//!
//! The answers are the contract's `DirListing`, `FileContent`, `TaskChanges` and `FileDiff`,
//! defined here (converted from the `git::views` results, which know nothing of the
//! contract).

use std::path::PathBuf;

use byre_projections::tasks::TaskStatus;
use serde::Serialize;

use super::{blocking, Ctx, Error};
use byre_git::boxed::{Answer, Job as GitJob};
use byre_git::views::{
    self as git_views, ChangeStatus, EntryKind, SnapshotBase, TreePath, ViewError, WorkPath,
    Worktree,
};
use byre_git::GitError;

/// What a view needs of its task: where the worktree is, its branch, the default branch.
pub(crate) struct TaskPlace {
    /// The task's worktree.
    pub(crate) worktree: PathBuf,
    branch: String,
    default_branch: String,
    /// The first of the task's ports (`PORT` for its agent and terminal).
    pub(crate) port_base: u32,
}

/// The task's worktree facts, its worktree made again first if it was removed while byre
/// runs. Not found for an unknown task; conflict for a closed task or one whose worktree is
/// not made yet.
pub(crate) async fn task_place(app: &Ctx, task_id: &str) -> Result<TaskPlace, Error> {
    app.worktrees.restore_if_missing(task_id).await;
    app.writer.read(|s| {
        let task = s
            .tasks
            .get(task_id)
            .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))?;
        if task.status != TaskStatus::Active {
            return Err(Error::Conflict(format!(
                "task `{task_id}` is closed; it has no worktree"
            )));
        }
        if !task.worktree_ready {
            return Err(Error::Conflict(format!(
                "the worktree of task `{task_id}` is not made yet"
            )));
        }
        let default_branch = s
            .projects
            .get(&task.project_id)
            .map(|p| p.default_branch.clone())
            .ok_or_else(|| Error::internal(format!("task {task_id} without its project")))?;
        Ok(TaskPlace {
            worktree: PathBuf::from(&task.worktree_path),
            branch: task.branch.clone(),
            default_branch,
            port_base: task.port_base,
        })
    })
}

impl From<ViewError> for Error {
    /// A path leaving the worktree is invalid input everywhere but `getTaskImage`, which
    /// refuses it as forbidden ([`image_refusal`]).
    fn from(e: ViewError) -> Self {
        match e {
            ViewError::Invalid(m) | ViewError::Outside(m) => Error::Invalid(m),
            ViewError::NotFound(m) => Error::NotFound(m),
            ViewError::Conflict(m) => Error::Conflict(m),
            ViewError::Other(m) => Error::internal(m),
        }
    }
}

/// A boxed git job's failure: a worktree not in a state for it is a conflict.
fn git_error(e: GitError) -> Error {
    match e {
        GitError::Conflict(m) => Error::Conflict(m),
        other => Error::internal(other.to_string()),
    }
}

/// `getTaskImage`'s mapping: a path outside the worktree is forbidden, as its spec lists.
fn image_refusal(e: ViewError) -> Error {
    match e {
        ViewError::Outside(m) => Error::Forbidden(m),
        other => other.into(),
    }
}

/// Spec `DirListing`.
#[derive(Serialize)]
pub struct DirListing {
    path: String,
    entries: Vec<DirEntry>,
    truncated: bool,
}

/// Spec `DirEntry`.
#[derive(Serialize)]
struct DirEntry {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    symlink: bool,
    size: u64,
    ignored: bool,
}

impl From<git_views::DirListing> for DirListing {
    fn from(l: git_views::DirListing) -> Self {
        let entries = l
            .entries
            .into_iter()
            .map(|e| DirEntry {
                name: e.name,
                kind: match e.kind {
                    EntryKind::Dir => "dir",
                    EntryKind::File => "file",
                    EntryKind::Other => "other",
                },
                symlink: e.symlink,
                size: e.size,
                ignored: e.ignored,
            })
            .collect();
        DirListing {
            path: l.path,
            entries,
            truncated: l.truncated,
        }
    }
}

/// `getTaskDir`: one directory of the worktree (`raw` relative, empty for the root),
/// directories first then by name, `.git` left out, ignored entries marked, at most 5,000
/// entries (`truncated` beyond).
/// # Errors
/// Invalid for a bad path, one leaving the worktree (`..`, absolute, a symlink out) or a
/// file; not found for an unknown task or nothing there; conflict for a closed task or no
/// worktree.
pub async fn get_task_dir(app: &Ctx, task_id: &str, raw: String) -> Result<DirListing, Error> {
    let place = task_place(app, task_id).await?;
    let worktree_path = place.worktree.clone();
    let mut listing = blocking(move || {
        let worktree = Worktree::open(&worktree_path)?;
        let dir = WorkPath::parse(&raw, &worktree)?;
        Ok(git_views::task_dir(&worktree, &dir)?)
    })
    .await?;
    // Which entries git ignores: the ignore files are the agent's, read in its sandbox.
    let job = GitJob::Ignored {
        worktree: place.worktree,
        paths: listing.entry_paths(),
    };
    if let Answer::Ignored { ignored } = app.git_box.run(&job).await.map_err(git_error)? {
        for (entry, ignored) in listing.entries.iter_mut().zip(ignored) {
            entry.ignored = ignored;
        }
    }
    Ok(DirListing::from(listing))
}

/// Spec `FileContent`.
#[derive(Serialize)]
pub struct FileContent {
    path: String,
    size: u64,
    binary: bool,
    truncated: bool,
    text: String,
}

/// `getTaskFile`: a regular file's UTF-8 text up to 1 MiB (`truncated` beyond; never more
/// than that is read), or `binary` with empty text; `size` in bytes.
/// # Errors
/// Invalid for a bad path, one leaving the worktree, a directory or a non-regular file; not
/// found for an unknown task or no such file; conflict for a closed task or no worktree.
pub async fn get_task_file(app: &Ctx, task_id: &str, raw: String) -> Result<FileContent, Error> {
    let place = task_place(app, task_id).await?;
    let file = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let path = WorkPath::parse(&raw, &worktree)?;
        Ok(git_views::task_file(&path)?)
    })
    .await?;
    Ok(FileContent {
        path: file.path,
        size: file.size,
        binary: file.binary,
        truncated: file.truncated,
        text: file.text,
    })
}

/// `getTaskImage`: the bytes of a PNG, JPEG, GIF, WebP or SVG file (by extension; at most
/// 32 MiB) and that content type; `raw` is relative to the worktree or absolute under it.
/// # Errors
/// Invalid for a bad path, another extension, a directory or a file too large; forbidden when
/// the path (symlinks resolved) is outside the worktree; not found for an unknown task or no
/// such file; conflict for a closed task or no worktree.
pub async fn get_task_image(
    app: &Ctx,
    task_id: &str,
    raw: String,
) -> Result<git_views::Image, Error> {
    let place = task_place(app, task_id).await?;
    blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let path = WorkPath::parse_absolute_or_relative(&raw, &worktree).map_err(image_refusal)?;
        git_views::task_image(&path).map_err(image_refusal)
    })
    .await
}

/// Input of `getTaskChanges`.
pub struct ChangesOf {
    /// Compare with this commit instead of the merge-base.
    pub since: Option<String>,
    /// Show snapshot `n` instead of the worktree.
    pub snapshot: Option<i64>,
    /// With `snapshot`, compare with the previous snapshot.
    pub step: Option<bool>,
}

/// Spec `TaskChanges`.
#[derive(Serialize)]
pub struct TaskChanges {
    base: String,
    tree: String,
    files: Vec<FileChange>,
}

/// Spec `FileChange`.
#[derive(Serialize)]
struct FileChange {
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    old_path: Option<String>,
    status: &'static str,
    additions: usize,
    deletions: usize,
    binary: bool,
}

impl From<git_views::Changes> for TaskChanges {
    fn from(c: git_views::Changes) -> Self {
        let files = c
            .files
            .into_iter()
            .map(|f| FileChange {
                path: f.path,
                old_path: f.old_path,
                status: match f.status {
                    ChangeStatus::Added => "added",
                    ChangeStatus::Modified => "modified",
                    ChangeStatus::Deleted => "deleted",
                    ChangeStatus::Renamed => "renamed",
                    ChangeStatus::TypeChanged => "type_changed",
                },
                additions: f.additions,
                deletions: f.deletions,
                binary: f.binary,
            })
            .collect();
        TaskChanges {
            base: c.base,
            tree: c.tree,
            files,
        }
    }
}

/// `getTaskChanges`: the worktree as if everything were staged (ignored files left out; the
/// worktree's own index untouched), compared with the merge-base of the task branch and the
/// default branch, or with commit `since`; per-file stats, renames detected, files over 8 MiB
/// counted as binary. With `snapshot` (its `n`), the tree is that snapshot's, compared with the
/// merge-base of its commit and the default branch, or with `step=true` with the previous
/// snapshot's tree (the snapshot commit's parent for the first).
/// # Errors
/// Invalid for a `since` that is not a commit, `since` with `snapshot`, or `step=true`
/// without `snapshot`; not found for an unknown task or snapshot; conflict for a closed task,
/// no worktree, or a branch gone.
pub async fn get_task_changes(
    app: &Ctx,
    task_id: &str,
    query: ChangesOf,
) -> Result<TaskChanges, Error> {
    let place = task_place(app, task_id).await?;
    let Some(n) = query.snapshot else {
        // `step=false` is the default spelled out (a client's unchecked toggle): allowed.
        if query.step == Some(true) {
            return Err(Error::Invalid("step needs snapshot".into()));
        }
        // The worktree as a tree, made where the worktree may be read: in its sandbox.
        let job = GitJob::StagedTree {
            worktree: place.worktree.clone(),
        };
        let tree = match app.git_box.run(&job).await.map_err(git_error)? {
            Answer::Tree { tree } => tree,
            _ => return Err(Error::internal("the staged tree's answer was not a tree")),
        };
        let changes = blocking(move || {
            let worktree = Worktree::open(&place.worktree)?;
            Ok(git_views::task_changes(
                &worktree,
                &place.branch,
                &place.default_branch,
                query.since.as_deref(),
                &tree,
            )?)
        })
        .await?;
        return Ok(TaskChanges::from(changes));
    };
    if query.since.is_some() {
        return Err(Error::Invalid("since is not allowed with snapshot".into()));
    }
    let step = query.step.unwrap_or(false);
    // The snapshot's commit and, for step, the previous snapshot's tree.
    let (commit, previous_tree) = app.writer.read(|s| {
        let snaps = s.task_snapshots(task_id);
        let idx = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .filter(|i| *i < snaps.len())
            .ok_or_else(|| Error::NotFound(format!("task `{task_id}` has no snapshot {n}")))?;
        let previous = idx.checked_sub(1).map(|p| snaps[p].tree.clone());
        Ok::<_, Error>((snaps[idx].commit.clone(), previous))
    })?;
    let changes = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let base = match (&previous_tree, step) {
            (_, false) => SnapshotBase::MergeBase,
            (Some(tree), true) => SnapshotBase::Tree(tree),
            (None, true) => SnapshotBase::Parent,
        };
        Ok(git_views::snapshot_changes(
            &worktree,
            &place.default_branch,
            &commit,
            base,
        )?)
    })
    .await?;
    Ok(TaskChanges::from(changes))
}

/// Input of `getTaskDiff`.
pub struct DiffOf {
    /// A commit or tree (40 hex).
    pub base: String,
    /// A tree from `getTaskChanges` (40 hex).
    pub tree: String,
    /// The file.
    pub path: String,
    /// A rename's source.
    pub old_path: Option<String>,
}

/// Spec `FileDiff`.
#[derive(Serialize)]
pub struct FileDiff {
    path: String,
    patch: String,
}

/// `getTaskDiff`: the unified patch of one file between `base` (commit or tree) and `tree`
/// (from getTaskChanges, both 40 hex); `old_path` names a rename's source. Empty for an
/// unchanged file.
/// # Errors
/// Invalid for a bad path or sha; not found for an unknown task or object; conflict for a
/// closed task or no worktree.
pub async fn get_task_diff(app: &Ctx, task_id: &str, query: DiffOf) -> Result<FileDiff, Error> {
    let place = task_place(app, task_id).await?;
    let path = TreePath::parse(&query.path)?;
    let old_path = query.old_path.as_deref().map(TreePath::parse).transpose()?;
    let patch = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        Ok(git_views::task_diff(
            &worktree,
            &query.base,
            &query.tree,
            &path,
            old_path.as_ref(),
        )?)
    })
    .await?;
    Ok(FileDiff {
        path: query.path,
        patch,
    })
}
