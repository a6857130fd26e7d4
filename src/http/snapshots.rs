//! `listSnapshots`: parse, call [`crate::app::snapshots`], answer.

use actix_web::{web, HttpResponse};

use super::{ApiError, App};
use crate::app::snapshots as op;
use crate::identity::Caller;

/// `listSnapshots` — GET /api/tasks/{taskId}/snapshots → 200 `Snapshot[]`, oldest first (also
/// for a closed task: the rows remain); 404 unknown task.
pub async fn list_snapshots(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_snapshots(&app, &task_id)?))
}
