//! `forkSnapshot`: parse, call [`byre_app::fork`], answer.

use actix_web::{web, HttpResponse};

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::fork as op;

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
    let n = snapshot_n(&task_id, &n)?;
    let task = op::fork_snapshot(&app, &caller.login, op::ForkSnapshot { task_id, n }).await?;
    Ok(HttpResponse::Created().json(task))
}

/// The snapshot position `n` of a path: decimal digits only (no sign, no point) naming a
/// number from 1, else 400; a number too large for any snapshot is 404, as an unknown `n` is.
fn snapshot_n(task_id: &str, n: &str) -> Result<u32, ApiError> {
    let bad = || ApiError::BadRequest(format!("snapshot `{n}` is not a number from 1"));
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.bytes().all(|b| b == b'0') {
        return Err(bad());
    }
    n.parse()
        .map_err(|_| ApiError::NotFound(format!("task `{task_id}` has no snapshot {n}")))
}
