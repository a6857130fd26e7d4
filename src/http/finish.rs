//! Finishing a task: `getUnmerged`, `getCoAuthors`, `mergeTask`, `mergeIn`, `discardTask`.
//! The git work of a merge or discard is the finish reactor's (`src/reactors/finish.rs`);
//! these handlers read git (`getUnmerged`) or submit the intent.

use std::path::PathBuf;

use actix_web::{web, HttpResponse};
use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use serde::Deserialize;

use super::{blocking, ApiError, App};
use crate::api;
use crate::app::sessions::worktree_head;
use crate::app::tasks::get_task as task_json;
use crate::git::GitError;
use crate::identity::Caller;
use crate::log::Ack;

/// Submits the intent `make` builds from the HEAD of task `task_id`'s worktree (the head the
/// intent records); the writer's ack, or the HEAD lookup's or the writer's error.
async fn submit_at_head(
    app: &App,
    task_id: &str,
    make: impl FnOnce(String) -> Command,
) -> Result<Ack, ApiError> {
    let head = worktree_head(app, task_id).await?;
    Ok(app.submit(make(head)).await?)
}

/// `getUnmerged` — GET /api/tasks/{taskId}/unmerged → 200 `Unmerged`: commits on the task
/// branch not on the default branch, and files, insertions, deletions and uncommitted paths
/// of the worktree (as if everything were staged) against their merge-base; 404; 409 when the
/// task is closed, its worktree is missing or its branches share no history.
pub async fn get_unmerged(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let facts = app.writer.read(|s| {
        let t = s.tasks.get(&task_id)?;
        let p = s.projects.get(&t.project_id)?;
        Some((
            t.status,
            PathBuf::from(&p.repo_path),
            PathBuf::from(&t.worktree_path),
            t.branch.clone(),
            p.default_branch.clone(),
        ))
    });
    let (status, repo, worktree, branch, default_branch) =
        facts.ok_or_else(|| ApiError::NotFound(format!("no task `{task_id}`")))?;
    if status != TaskStatus::Active {
        return Err(ApiError::Conflict(format!(
            "task `{task_id}` is closed: its worktree is gone"
        )));
    }
    let u = blocking(move || {
        crate::git::merge::unmerged(&repo, &worktree, &branch, &default_branch).map_err(|e| match e
        {
            GitError::Conflict(m) | GitError::NotARepository(m) => ApiError::Conflict(m),
            other => ApiError::internal(other),
        })
    })
    .await?;
    Ok(HttpResponse::Ok().json(u))
}

/// `getCoAuthors` — GET /api/tasks/{taskId}/co-authors → 200 `[Participant]`: the humans other
/// than the caller with a `user.message` in the task's transcript (inbox answers are delivered
/// as messages under the answering human), in order of their first; 404.
pub async fn get_co_authors(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let list: Option<Vec<api::Participant>> = app.writer.read(|s| {
        let t = s.tasks.get(&task_id)?;
        Some(
            byre_projections::finish::co_authors(t, &caller.login)
                .filter_map(|login| s.users.get(login).map(api::Participant::from))
                .collect(),
        )
    });
    Ok(HttpResponse::Ok()
        .json(list.ok_or_else(|| ApiError::NotFound(format!("no task `{task_id}`")))?))
}

/// Body of `mergeTask`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeBody {
    merge_title: Option<String>,
    target: Option<String>,
    #[serde(default)]
    after_review: bool,
}

/// `mergeTask` — POST /api/tasks/{taskId}/merge → 202 `Task` (merging, or held with
/// `merge_queued_at`); 400 (no or bad merge_title, target parent or after_review — not built
/// yet —, a caller without a git identity), 404, 409 (closed, merging, held, being discarded,
/// a turn running).
pub async fn merge_task(
    caller: Caller,
    task_id: web::Path<String>,
    body: web::Json<MergeBody>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let b = body.into_inner();
    let target_parent = match b.target.as_deref() {
        None | Some("main") => false,
        Some("parent") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "target must be main or parent, not {other:?}"
            )))
        }
    };
    submit_at_head(&app, &task_id, |head| Command::MergeTask {
        actor: caller.login,
        task_id: task_id.clone(),
        merge_title: b.merge_title,
        target_parent,
        after_review: b.after_review,
        head,
    })
    .await?;
    Ok(HttpResponse::Accepted().json(task_json(&app, &task_id)?))
}

/// `mergeIn` — POST /api/tasks/{taskId}/merge-in → 202 `AgentSession` running the merge-in
/// turn (a new session when the task had none); 404, 409 (closed, merging, being discarded,
/// a turn running).
pub async fn merge_in(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let ack = submit_at_head(&app, &task_id, |head| Command::MergeIn {
        actor: caller.login,
        task_id: task_id.clone(),
        head,
    })
    .await?;
    let session_id = ack
        .events
        .iter()
        .find_map(|e| e.agent_session_id.clone())
        .ok_or_else(|| ApiError::internal("the merge-in turn has no session"))?;
    let session = app
        .writer
        .read(|s| s.sessions.get(&session_id).map(api::AgentSession::from))
        .ok_or_else(|| ApiError::internal("the merge-in session is missing"))?;
    Ok(HttpResponse::Accepted().json(session))
}

/// `discardTask` — POST /api/tasks/{taskId}/discard → 202 `Task` (discarding); 404, 409
/// (closed, merging, already being discarded). On a task whose clean-up failed, retries it.
pub async fn discard_task(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    submit_at_head(&app, &task_id, |head| Command::DiscardTask {
        actor: caller.login,
        task_id: task_id.clone(),
        head,
    })
    .await?;
    Ok(HttpResponse::Accepted().json(task_json(&app, &task_id)?))
}
