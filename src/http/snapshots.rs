//! `listSnapshots`: parse, call [`byre_app::snapshots`], answer.

use actix_web::{web, HttpResponse};

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::snapshots as op;

/// `listSnapshots` — GET /api/tasks/{taskId}/snapshots → 200 `Snapshot[]`, oldest first (also
/// for a closed task: the rows remain); 404 unknown task.
pub async fn list_snapshots(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_snapshots(&app, &task_id)?))
}
