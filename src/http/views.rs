//! `getTaskDir`, `getTaskFile`, `getTaskImage`, `getTaskChanges`, `getTaskDiff`: parse the
//! query, call [`byre_app::views`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::views as op;

/// Query of `getTaskDir`.
#[derive(Deserialize)]
pub struct DirQuery {
    path: Option<String>,
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
    let raw = query.into_inner().path.unwrap_or_default();
    Ok(HttpResponse::Ok().json(op::get_task_dir(&app, &task_id, raw).await?))
}

/// Query of `getTaskFile` and `getTaskImage`.
#[derive(Deserialize)]
pub struct PathQuery {
    path: String,
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
    let raw = query.into_inner().path;
    Ok(HttpResponse::Ok().json(op::get_task_file(&app, &task_id, raw).await?))
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
    let image = op::get_task_image(&app, &task_id, query.into_inner().path).await?;
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

/// `getTaskChanges` — GET /api/tasks/{taskId}/changes?since&snapshot&step → 200
/// `TaskChanges` ([`op::get_task_changes`]). 400 for a `since` that is not a commit, `since`
/// with `snapshot`, or `step=true` without `snapshot`; 404 unknown task or snapshot; 409
/// closed task, no worktree, or a branch gone.
pub async fn get_task_changes(
    _caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<ChangesQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let of = op::ChangesOf {
        since: q.since,
        snapshot: q.snapshot,
        step: q.step,
    };
    Ok(HttpResponse::Ok().json(op::get_task_changes(&app, &task_id, of).await?))
}

/// Query of `getTaskDiff`.
#[derive(Deserialize)]
pub struct DiffQuery {
    base: String,
    tree: String,
    path: String,
    old_path: Option<String>,
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
    let q = query.into_inner();
    let of = op::DiffOf {
        base: q.base,
        tree: q.tree,
        path: q.path,
        old_path: q.old_path,
    };
    Ok(HttpResponse::Ok().json(op::get_task_diff(&app, &task_id, of).await?))
}
