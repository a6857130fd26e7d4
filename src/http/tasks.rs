//! `listTasks`, `createTask`, `getTask`, `listTaskEvents`, `listSessions`.

use std::path::PathBuf;
use std::time::Duration;

use actix_web::{web, HttpResponse};
use byre_projections::Command;
use futures_util::StreamExt;
use serde::Deserialize;

use super::{blocking, ApiError, App};
use crate::api;
use crate::identity::Caller;
use crate::log::subscription::subscribe;

/// How long `createTask` waits for the worktree reactor's outcome.
const WORKTREE_WAIT: Duration = Duration::from_secs(120);

/// `listTasks` — GET /api/projects/{projectId}/tasks → 200 `[Task]`, newest first; 404.
pub async fn list_tasks(
    _caller: Caller,
    project_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let project_id = project_id.into_inner();
    let tasks: Option<Vec<api::Task>> = app.writer.read(|s| {
        s.projects.get(&project_id)?;
        Some(
            s.project_tasks(&project_id)
                .into_iter()
                .map(api::Task::from)
                .collect(),
        )
    });
    let tasks = tasks.ok_or_else(|| ApiError::NotFound(format!("no project `{project_id}`")))?;
    Ok(HttpResponse::Ok().json(tasks))
}

/// Body of `createTask` (spec `TaskCreate`).
#[derive(Deserialize)]
pub struct TaskCreate {
    title: String,
    prompt: Option<String>,
    model: Option<String>,
    #[serde(default)]
    images: Vec<String>,
    workflow: Option<String>,
}

/// `createTask` — POST /api/projects/{projectId}/tasks → 201 `Task` once its branch and
/// worktree exist, and with `prompt` its agent session started on `model` (else the caller's
/// default model); 400 (bad title, prompt with workflow, empty prompt), 404 (unknown project);
/// 501 with a workflow, or a Codex model, until those are built.
///
/// The task branches from the default branch's current tip (its `base_ref`). The worktree is
/// made by the worktree reactor after `task.created` commits; this handler waits for the
/// reactor's `task.worktree_created` (or `task.worktree_failed`, answered 500).
pub async fn create_task(
    caller: Caller,
    project_id: web::Path<String>,
    body: web::Json<TaskCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let project_id = project_id.into_inner();
    let body = body.into_inner();
    let (repo_path, default_branch) = app
        .writer
        .read(|s| {
            s.projects
                .get(&project_id)
                .map(|p| (p.repo_path.clone(), p.default_branch.clone()))
        })
        .ok_or_else(|| ApiError::NotFound(format!("no project `{project_id}`")))?;
    if body.prompt.is_some() && body.workflow.is_some() {
        return Err(ApiError::BadRequest(
            "give prompt or workflow, not both".into(),
        ));
    }
    if let Some(prompt) = &body.prompt {
        // Everything the session will check is checked before the task exists, so a refused
        // prompt leaves no task behind.
        if prompt.trim().is_empty() && body.images.is_empty() {
            return Err(ApiError::BadRequest("prompt must not be empty".into()));
        }
        if let Some(model) = body.model.as_deref().filter(|m| !m.is_empty()) {
            byre_projections::users::check_model(model)?;
        }
        app.writer
            .read(|s| byre_projections::sessions::check_images(s, &body.images))?;
    }
    if body.workflow.is_some() {
        return Err(ApiError::NotImplemented(
            "createTask with a workflow starts a workflow run, which is not built yet".into(),
        ));
    }
    let task_id = create_at_default_branch(
        &app,
        &caller.login,
        &project_id,
        body.title,
        repo_path,
        default_branch,
    )
    .await?;
    if let Some(prompt) = body.prompt {
        super::sessions::start_session(&app, &caller, &task_id, body.model, prompt, body.images)
            .await?;
    }
    let task = app
        .writer
        .read(|s| s.tasks.get(&task_id).map(api::Task::from))
        .ok_or_else(|| ApiError::internal("task missing after commit"))?;
    Ok(HttpResponse::Created().json(task))
}

/// `createTask`'s command path (also CodeBolt's `startAgent`): `CreateTask` from the head of
/// the project's default branch, then waits until the task's worktree exists. Returns the
/// task's id.
/// # Errors
/// 409 unreadable default branch; the rejection's status (400 bad title, 404 project); 500
/// when the worktree could not be made.
pub(crate) async fn create_at_default_branch(
    app: &App,
    actor: &str,
    project_id: &str,
    title: String,
    repo_path: String,
    default_branch: String,
) -> Result<String, ApiError> {
    let base_ref = blocking(move || {
        crate::git::branch_tip(&PathBuf::from(&repo_path), &default_branch)
            .map_err(|e| ApiError::Conflict(format!("cannot read the default branch: {e}")))
    })
    .await?;
    let ack = app
        .submit(Command::CreateTask {
            actor: actor.to_owned(),
            project_id: project_id.to_owned(),
            title,
            base_ref,
        })
        .await?;
    let created = ack
        .events
        .first()
        .ok_or_else(|| ApiError::internal("task.created missing"))?;
    let task_id = created
        .task_id
        .clone()
        .ok_or_else(|| ApiError::internal("task.created without task_id"))?;
    wait_for_worktree(app, &task_id, created.seq).await?;
    Ok(task_id)
}

async fn wait_for_worktree(app: &App, task_id: &str, after: u64) -> Result<(), ApiError> {
    let ready = app
        .writer
        .read(|s| s.tasks.get(task_id).map(|t| t.worktree_ready))
        .unwrap_or(false);
    if ready {
        return Ok(());
    }
    let mut events = Box::pin(subscribe(app.writer.clone(), after));
    let outcome = tokio::time::timeout(WORKTREE_WAIT, async {
        while let Some(r) = events.next().await {
            let r = r.map_err(ApiError::internal)?;
            if r.task_id.as_deref() != Some(task_id) {
                continue;
            }
            match r.kind.as_str() {
                "task.worktree_created" => return Ok(()),
                "task.worktree_failed" => {
                    let reason = app
                        .writer
                        .store()
                        .records(r.seq, r.seq, 1)
                        .ok()
                        .and_then(|v| v.first().map(|r| r.json.to_string()))
                        .unwrap_or_default();
                    return Err(ApiError::internal(format!(
                        "the worktree of task {task_id} could not be made: {reason}"
                    )));
                }
                _ => {}
            }
        }
        Err(ApiError::Unavailable("the server is shutting down".into()))
    })
    .await;
    outcome.map_err(|_| {
        ApiError::internal(format!(
            "timed out waiting for the worktree of task {task_id}"
        ))
    })?
}

/// `getTask` — GET /api/tasks/{taskId} → 200 `Task`; 404.
pub async fn get_task(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(task_json(&app, &task_id)?))
}

/// Task `id` as the contract's `Task`; 404 when there is none.
pub(super) fn task_json(app: &App, id: &str) -> Result<api::Task, ApiError> {
    app.writer
        .read(|s| s.tasks.get(id).map(api::Task::from))
        .ok_or_else(|| ApiError::NotFound(format!("no task `{id}`")))
}

/// Query of `listTaskEvents`.
#[derive(Deserialize)]
pub struct EventsQuery {
    after: Option<u64>,
    before: Option<u64>,
    limit: Option<u32>,
}

/// `listTaskEvents` — GET /api/tasks/{taskId}/events?after&limit → 200 `[Event]` with seq >
/// after (default 0), oldest first, at most limit (default 500; below 1 reads as 1, above 1000
/// as 1000, as the spec bounds it); 404. A non-numeric after, before or limit is 400. Events
/// owned by another user are left out. With `before` (and no `after`), the page is the last
/// `limit` events with seq < before, still oldest first: the web UI reads a transcript
/// backwards from its end; `after` and `before` together are 400.
pub async fn list_task_events(
    caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<EventsQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let limit = query.limit.unwrap_or(500).clamp(1, 1000);
    if !app.writer.read(|s| s.tasks.contains_key(&task_id)) {
        return Err(ApiError::NotFound(format!("no task `{task_id}`")));
    }
    let store = app.writer.store().clone();
    let limit = limit as usize;
    if let Some(before) = query.before {
        if query.after.is_some() {
            return Err(ApiError::BadRequest(
                "give after or before, not both".into(),
            ));
        }
        let body = blocking(move || {
            let mut visible: Vec<std::sync::Arc<crate::log::Record>> = Vec::new();
            let mut upto = before;
            loop {
                let chunk = store
                    .task_records_before(&task_id, upto, limit)
                    .map_err(ApiError::internal)?;
                let full = chunk.len() == limit;
                if let Some(first) = chunk.first() {
                    upto = first.seq;
                }
                let mut mine: Vec<_> = chunk
                    .into_iter()
                    .filter(|r| r.visible_to(&caller.login))
                    .collect();
                mine.extend(visible);
                visible = mine;
                if visible.len() >= limit || !full {
                    break;
                }
            }
            let skip = visible.len().saturating_sub(limit);
            let mut out = String::from("[");
            for (i, r) in visible[skip..].iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&r.json);
            }
            out.push(']');
            Ok(out)
        })
        .await?;
        return Ok(HttpResponse::Ok()
            .content_type("application/json")
            .body(body));
    }
    let after = query.after.unwrap_or(0);
    let body = blocking(move || {
        let mut out = String::from("[");
        let mut n = 0;
        let mut from = after;
        loop {
            let chunk = store
                .task_records(&task_id, from, limit)
                .map_err(ApiError::internal)?;
            let full = chunk.len() == limit;
            for r in &chunk {
                from = r.seq;
                if n < limit && r.visible_to(&caller.login) {
                    if n > 0 {
                        out.push(',');
                    }
                    out.push_str(&r.json);
                    n += 1;
                }
            }
            if n >= limit || !full {
                break;
            }
        }
        out.push(']');
        Ok(out)
    })
    .await?;
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
    let task_id = task_id.into_inner();
    let previews = app
        .writer
        .read(|s| {
            s.tasks.contains_key(&task_id).then(|| {
                s.previews
                    .get(&task_id)
                    .map(|v| v.iter().map(api::Preview::from).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
        })
        .ok_or_else(|| ApiError::NotFound(format!("no task `{task_id}`")))?;
    Ok(HttpResponse::Ok().json(previews))
}
