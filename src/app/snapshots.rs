//! Snapshots (`listSnapshots`): a task's snapshots, from the fold. Snapshots are taken by the
//! snapshot reactor (`crate::reactors::snapshots`); their trees are shown by `getTaskChanges`
//! with `snapshot` ([`super::views`]).

use super::{Ctx, Error};
use crate::api;

/// `listSnapshots`: the task's snapshots, oldest first (also for a closed task: the rows
/// remain).
/// # Errors
/// Not found for an unknown task.
pub fn list_snapshots(app: &Ctx, task_id: &str) -> Result<Vec<api::Snapshot>, Error> {
    let list: Option<Vec<api::Snapshot>> = app.writer.read(|s| {
        s.tasks.get(task_id)?;
        Some(
            s.task_snapshots(task_id)
                .iter()
                .map(api::Snapshot::from)
                .collect(),
        )
    });
    list.ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}
