//! `forkSnapshot`: parse, call [`crate::app::fork`], answer.

use actix_web::{web, HttpResponse};

use super::{ApiError, App};
use crate::app::fork as op;
use crate::identity::Caller;

/// `forkSnapshot` — POST /api/tasks/{taskId}/snapshots/{n}/fork → 201 `Task`: the fork, its
/// worktree made at snapshot `n`'s commit, its agent session idle; 400 when `n` is not a
/// positive integer; 404 unknown task or snapshot; 409 when the task is closed, or the
/// snapshot follows no recorded agent message (nothing to fork; byre answers 409, not 400:
/// the request is well-formed, the snapshot's state refuses it).
pub async fn fork_snapshot(
    caller: Caller,
    path: web::Path<(String, String)>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let (task_id, n) = path.into_inner();
    let n: u32 =
        n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
            ApiError::BadRequest(format!("snapshot `{n}` is not a number from 1"))
        })?;
    let task = op::fork_snapshot(&app, &caller.login, op::ForkSnapshot { task_id, n }).await?;
    Ok(HttpResponse::Created().json(task))
}
