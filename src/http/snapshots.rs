//! `listSnapshots`: a task's snapshots, from the fold. Snapshots are taken by the snapshot
//! reactor (`reactors::snapshots`); their trees are shown by `getTaskChanges` with
//! `snapshot` (`views.rs`).

use actix_web::{web, HttpResponse};

use super::{ApiError, App};
use crate::api;
use crate::identity::Caller;

/// `listSnapshots` — GET /api/tasks/{taskId}/snapshots → 200 `Snapshot[]`, oldest first (also
/// for a closed task: the rows remain); 404 unknown task.
pub async fn list_snapshots(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let task_id = task_id.into_inner();
    let list: Option<Vec<api::Snapshot>> = app.writer.read(|s| {
        s.tasks.get(&task_id)?;
        Some(
            s.task_snapshots(&task_id)
                .iter()
                .map(api::Snapshot::from)
                .collect(),
        )
    });
    Ok(HttpResponse::Ok()
        .json(list.ok_or_else(|| ApiError::NotFound(format!("no task `{task_id}`")))?))
}
