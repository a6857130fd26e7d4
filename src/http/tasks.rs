//! `listTasks`, `createTask`, `getTask`, `listTaskEvents`, `listPreviews`: parse, call
//! [`byre_app::tasks`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::tasks as op;

/// `listTasks` — GET /api/projects/{projectId}/tasks → 200 `[Task]`, newest first; 404.
pub async fn list_tasks(
    _caller: Caller,
    project_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_tasks(&app, &project_id)?))
}

/// Body of `createTask` (spec `TaskCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskCreate {
    title: String,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    prompt: Option<String>,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    model: Option<String>,
    #[serde(default)]
    images: Vec<String>,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    workflow: Option<String>,
}

/// `createTask` — POST /api/projects/{projectId}/tasks → 201 `Task` once its branch and
/// worktree exist, and with `prompt` its agent session started on `model` (else the caller's
/// default model), or with `workflow` a run of it answered as its first stage task; 400 (bad
/// title, prompt with workflow, empty prompt, unknown workflow), 404 (unknown project). See
/// [`op::create_task`].
pub async fn create_task(
    caller: Caller,
    project_id: web::Path<String>,
    body: web::Json<TaskCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let new = op::NewTask {
        title: b.title,
        prompt: b.prompt,
        model: b.model,
        images: b.images,
        workflow: b.workflow,
    };
    let task = op::create_task(&app, &caller.login, &project_id, new).await?;
    Ok(HttpResponse::Created().json(task))
}

/// `getTask` — GET /api/tasks/{taskId} → 200 `Task`; 404.
pub async fn get_task(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_task(&app, &task_id)?))
}

/// Query of `listTaskEvents`.
#[derive(Deserialize)]
pub struct EventsQuery {
    #[serde(default, deserialize_with = "crate::http::optional_int64_seq")]
    after: Option<u64>,
    #[serde(default, deserialize_with = "crate::http::optional_int64_seq")]
    before: Option<u64>,
    limit: Option<u32>,
}

/// `listTaskEvents` — GET /api/tasks/{taskId}/events?after&limit → 200 `[Event]` with seq >
/// after (default 0), oldest first, at most limit (default 500); 404. A non-numeric or negative
/// after, before or limit, a seq beyond `i64::MAX` or a limit outside 1 to 1000 is 400. Events
/// owned by another user are left out. With `before` (and no `after`), the page is the last
/// `limit` events with seq < before, still oldest first: the web UI reads a transcript
/// backwards from its end; `after` and `before` together are 400.
pub async fn list_task_events(
    caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<EventsQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let page = op::EventsPage {
        after: q.after,
        before: q.before,
        limit: q.limit,
    };
    let body = op::list_task_events(&app, &caller.login, &task_id, page).await?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

/// `listPreviews` — GET /api/tasks/{taskId}/previews → 200 `[Preview]` (the ports the task's
/// agent exposed with `expose_port`, oldest first); 404 unknown task.
pub async fn list_previews(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_previews(&app, &task_id)?))
}
