//! Finishing a task: `getUnmerged`, `getCoAuthors`, `mergeTask`, `mergeIn`, `discardTask`:
//! parse, call [`byre_app::finish`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App, OptionalJson};
use byre_app::finish as op;

/// `getUnmerged` — GET /api/tasks/{taskId}/unmerged → 200 `Unmerged`: commits on the task
/// branch not on the default branch, and files, insertions, deletions and uncommitted paths
/// of the worktree (as if everything were staged) against their merge-base; 404; 409 when the
/// task is closed, its worktree is missing or its branches share no history.
pub async fn get_unmerged(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_unmerged(&app, &task_id).await?))
}

/// `getCoAuthors` — GET /api/tasks/{taskId}/co-authors → 200 `[Participant]`: the humans other
/// than the caller with a `user.message` in the task's transcript (inbox answers are delivered
/// as messages under the answering human), in order of their first; 404.
pub async fn get_co_authors(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_co_authors(&app, &caller.login, &task_id)?))
}

/// Body of `mergeTask`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeBody {
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    merge_title: Option<String>,
    #[serde(default, deserialize_with = "merge_target")]
    target: op::MergeTarget,
    #[serde(default)]
    after_review: bool,
}

/// `target`, parsed as the body is read: `main` (also when absent) or `parent`; anything else
/// is the body's 400, naming the field.
fn merge_target<'de, D: serde::Deserializer<'de>>(value: D) -> Result<op::MergeTarget, D::Error> {
    let text = String::deserialize(value)?;
    op::MergeTarget::parse(&text).map_err(serde::de::Error::custom)
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
    let b = body.into_inner();
    let merge = op::Merge {
        merge_title: b.merge_title,
        target: b.target,
        after_review: b.after_review,
    };
    let task = op::merge_task(&app, &caller.login, &task_id, merge).await?;
    Ok(HttpResponse::Accepted().json(task))
}

/// `mergeIn` — POST /api/tasks/{taskId}/merge-in → 202 `AgentSession` running the merge-in
/// turn (a new session when the task had none); 404, 409 (closed, merging, being discarded,
/// a turn running).
pub async fn merge_in(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Accepted().json(op::merge_in(&app, &caller.login, &task_id).await?))
}

/// Body of `discardTask`, optional (no body: with the summary turn).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscardBody {
    #[serde(default = "with_summary")]
    summary: bool,
}

impl Default for DiscardBody {
    fn default() -> Self {
        DiscardBody {
            summary: with_summary(),
        }
    }
}

/// `summary` when absent: the agent writes the task's summary first.
fn with_summary() -> bool {
    true
}

/// `discardTask` — POST /api/tasks/{taskId}/discard [{"summary": false}] → 202 `Task`
/// (discarding); 400 (a bad body), 404, 409 (closed, merging, already being discarded). On a
/// task whose clean-up failed, retries it.
pub async fn discard_task(
    caller: Caller,
    task_id: web::Path<String>,
    body: OptionalJson<DiscardBody>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task = op::discard_task(&app, &caller.login, &task_id, body.0.summary).await?;
    Ok(HttpResponse::Accepted().json(task))
}
