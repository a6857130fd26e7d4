//! `getTaskDir`, `getTaskFile`, `getTaskImage`, `getTaskChanges`, `getTaskDiff`: read-only
//! views of a task's worktree. Each handler finds the task's worktree in the fold, runs the
//! git and filesystem work of `git::views` off the async threads, and answers. Every path
//! from the query goes through `git::views::TreePath` / `WorkPath` before anything is read.
//!
//! The response bodies are the contract's `DirListing`, `FileContent`, `TaskChanges` and
//! `FileDiff`, defined here (converted from the `git::views` results, which know nothing of
//! the contract).

use std::path::PathBuf;

use actix_web::{web, HttpResponse};
use byre_projections::tasks::TaskStatus;
use serde::{Deserialize, Serialize};

use super::{blocking, ApiError, App};
use crate::git::views::{
    self as git_views, ChangeStatus, EntryKind, SnapshotBase, TreePath, ViewError, WorkPath,
    Worktree,
};
use crate::identity::Caller;

/// What a view needs of its task: where the worktree is, its branch, the default branch.
struct TaskPlace {
    worktree: PathBuf,
    branch: String,
    default_branch: String,
}

/// The task's worktree facts, its worktree made again first if it was removed while byre
/// runs. 404 for an unknown task; 409 for a closed task or one whose worktree is not made yet.
async fn task_place(app: &App, task_id: &str) -> Result<TaskPlace, ApiError> {
    app.worktrees.restore_if_missing(task_id).await;
    app.writer.read(|s| {
        let task = s
            .tasks
            .get(task_id)
            .ok_or_else(|| ApiError::NotFound(format!("no task `{task_id}`")))?;
        if task.status != TaskStatus::Active {
            return Err(ApiError::Conflict(format!(
                "task `{task_id}` is closed; it has no worktree"
            )));
        }
        if !task.worktree_ready {
            return Err(ApiError::Conflict(format!(
                "the worktree of task `{task_id}` is not made yet"
            )));
        }
        let default_branch = s
            .projects
            .get(&task.project_id)
            .map(|p| p.default_branch.clone())
            .ok_or_else(|| ApiError::internal(format!("task {task_id} without its project")))?;
        Ok(TaskPlace {
            worktree: PathBuf::from(&task.worktree_path),
            branch: task.branch.clone(),
            default_branch,
        })
    })
}

impl From<ViewError> for ApiError {
    /// A path leaving the worktree is a bad request (400) everywhere but `getTaskImage`, which
    /// answers 403 ([`image_refusal`]).
    fn from(e: ViewError) -> Self {
        match e {
            ViewError::Invalid(m) | ViewError::Outside(m) => ApiError::BadRequest(m),
            ViewError::NotFound(m) => ApiError::NotFound(m),
            ViewError::Conflict(m) => ApiError::Conflict(m),
            ViewError::Other(m) => ApiError::internal(m),
        }
    }
}

/// `getTaskImage`'s mapping: a path outside the worktree is 403, as its spec lists.
fn image_refusal(e: ViewError) -> ApiError {
    match e {
        ViewError::Outside(m) => ApiError::Forbidden(m),
        other => other.into(),
    }
}

/// Query of `getTaskDir`.
#[derive(Deserialize)]
pub struct DirQuery {
    path: Option<String>,
}

/// Spec `DirListing`.
#[derive(Serialize)]
struct DirListing {
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

/// `getTaskDir` — GET /api/tasks/{taskId}/dir?path → 200 `DirListing`: one directory of the
/// worktree (path relative, empty or absent for the root), directories first then by name,
/// `.git` left out, ignored entries marked, at most 5,000 entries (`truncated` beyond).
/// 400 for a bad path, one leaving the worktree (`..`, absolute, a symlink out) or a file;
/// 404 unknown task or nothing there; 409 closed task or no worktree.
pub async fn get_task_dir(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<DirQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let place = task_place(&app, &task_id.into_inner()).await?;
    let raw = query.into_inner().path.unwrap_or_default();
    let listing = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let dir = WorkPath::parse(&raw, &worktree)?;
        Ok(git_views::task_dir(&worktree, &dir)?)
    })
    .await?;
    Ok(HttpResponse::Ok().json(DirListing::from(listing)))
}

/// Query of `getTaskFile` and `getTaskImage`.
#[derive(Deserialize)]
pub struct PathQuery {
    path: String,
}

/// Spec `FileContent`.
#[derive(Serialize)]
struct FileContent {
    path: String,
    size: u64,
    binary: bool,
    truncated: bool,
    text: String,
}

/// `getTaskFile` — GET /api/tasks/{taskId}/file?path → 200 `FileContent`: a regular file's
/// UTF-8 text up to 1 MiB (`truncated` beyond; never more than that is read), or `binary` with
/// empty text; `size` in bytes. 400 for a bad path, one leaving the worktree, a directory or
/// a non-regular file; 404 unknown task or no such file; 409 closed task or no worktree.
pub async fn get_task_file(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<PathQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let place = task_place(&app, &task_id.into_inner()).await?;
    let raw = query.into_inner().path;
    let file = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let path = WorkPath::parse(&raw, &worktree)?;
        Ok(git_views::task_file(&path)?)
    })
    .await?;
    Ok(HttpResponse::Ok().json(FileContent {
        path: file.path,
        size: file.size,
        binary: file.binary,
        truncated: file.truncated,
        text: file.text,
    }))
}

/// `getTaskImage` — GET /api/tasks/{taskId}/image?path → 200 with the bytes of a PNG, JPEG,
/// GIF, WebP or SVG file (by extension; at most 32 MiB) and that content type. path is
/// relative to the worktree or absolute under it. 400 for a bad path, another extension, a
/// directory or a file too large; 403 when the path (symlinks resolved) is outside the
/// worktree; 404 unknown task or no such file; 409 closed task or no worktree.
///
/// The answer forbids sniffing and scripts (`nosniff`, a sandboxing CSP), so an SVG cannot
/// run code in byre's origin.
pub async fn get_task_image(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<PathQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let place = task_place(&app, &task_id.into_inner()).await?;
    let raw = query.into_inner().path;
    let image = blocking(move || {
        let worktree = Worktree::open(&place.worktree)?;
        let path = WorkPath::parse_absolute_or_relative(&raw, &worktree).map_err(image_refusal)?;
        git_views::task_image(&path).map_err(image_refusal)
    })
    .await?;
    Ok(HttpResponse::Ok()
        .content_type(image.content_type)
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header((
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        ))
        .insert_header(("Cache-Control", "no-cache"))
        .body(image.bytes))
}

/// Query of `getTaskChanges`.
#[derive(Deserialize)]
pub struct ChangesQuery {
    since: Option<String>,
    snapshot: Option<i64>,
    step: Option<bool>,
}

/// Spec `TaskChanges`.
#[derive(Serialize)]
struct TaskChanges {
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

/// `getTaskChanges` — GET /api/tasks/{taskId}/changes?since&snapshot&step → 200
/// `TaskChanges`: the worktree as if everything were staged (ignored files left out; the
/// worktree's own index untouched), compared with the merge-base of the task branch and the
/// default branch, or with commit `since`; per-file stats, renames detected, files over 8 MiB
/// counted as binary. With `snapshot` (its `n`), the tree is that snapshot's, compared with the
/// merge-base of its commit and the default branch, or with `step=true` with the previous
/// snapshot's tree (the snapshot commit's parent for the first). 400 for a `since` that is not
/// a commit, `since` with `snapshot`, or `step=true` without `snapshot`; 404 unknown task or
/// snapshot; 409 closed task, no worktree, or a branch gone.
pub async fn get_task_changes(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<ChangesQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let place = task_place(&app, &task_id).await?;
    let query = query.into_inner();
    let Some(n) = query.snapshot else {
        // `step=false` is the default spelled out (a client's unchecked toggle): allowed.
        if query.step == Some(true) {
            return Err(ApiError::BadRequest("step needs snapshot".into()));
        }
        let changes = blocking(move || {
            let worktree = Worktree::open(&place.worktree)?;
            Ok(git_views::task_changes(
                &worktree,
                &place.branch,
                &place.default_branch,
                query.since.as_deref(),
            )?)
        })
        .await?;
        return Ok(HttpResponse::Ok().json(TaskChanges::from(changes)));
    };
    if query.since.is_some() {
        return Err(ApiError::BadRequest(
            "since is not allowed with snapshot".into(),
        ));
    }
    let step = query.step.unwrap_or(false);
    // The snapshot's commit and, for step, the previous snapshot's tree.
    let (commit, previous_tree) = app.writer.read(|s| {
        let snaps = s.task_snapshots(&task_id);
        let idx = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .filter(|i| *i < snaps.len())
            .ok_or_else(|| ApiError::NotFound(format!("task `{task_id}` has no snapshot {n}")))?;
        let previous = idx.checked_sub(1).map(|p| snaps[p].tree.clone());
        Ok::<_, ApiError>((snaps[idx].commit.clone(), previous))
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
    Ok(HttpResponse::Ok().json(TaskChanges::from(changes)))
}

/// Query of `getTaskDiff`.
#[derive(Deserialize)]
pub struct DiffQuery {
    base: String,
    tree: String,
    path: String,
    old_path: Option<String>,
}

/// Spec `FileDiff`.
#[derive(Serialize)]
struct FileDiff {
    path: String,
    patch: String,
}

/// `getTaskDiff` — GET /api/tasks/{taskId}/diff?base&tree&path&old_path → 200 `FileDiff`: the
/// unified patch of one file between `base` (commit or tree) and `tree` (from getTaskChanges,
/// both 40 hex); `old_path` names a rename's source. Empty for an unchanged file. 400 for a
/// bad path or sha; 404 unknown task or object; 409 closed task or no worktree.
pub async fn get_task_diff(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<DiffQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let place = task_place(&app, &task_id.into_inner()).await?;
    let query = query.into_inner();
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
    Ok(HttpResponse::Ok().json(FileDiff {
        path: query.path,
        patch,
    }))
}
