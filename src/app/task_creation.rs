//! What every operation that makes a task shares (`createTask`, a workflow run's stages, a
//! subtask, a fork, a TODO item): the new task's base (the tip of its project's default
//! branch), the command that creates it, and the wait for its worktree, which the worktree
//! reactor makes after `task.created`.

use std::path::PathBuf;

use byre_projections::Command;
use futures_util::StreamExt;

use super::{blocking, Ctx, Error};
use byre_log::subscription::subscribe;

/// How long an operation waits for the worktree reactor's outcome.
const WORKTREE_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The tip commit of the project's default branch (a new task's `base_ref`).
/// # Errors
/// Not found (unknown project); conflict (the branch cannot be read).
pub async fn default_branch_tip(app: &Ctx, project_id: &str) -> Result<String, Error> {
    let (repo_path, default_branch) = app
        .writer
        .read(|s| {
            s.projects
                .get(project_id)
                .map(|p| (p.repo_path.clone(), p.default_branch.clone()))
        })
        .ok_or_else(|| Error::NotFound(format!("no project `{project_id}`")))?;
    blocking(move || {
        byre_git::branch_tip(&PathBuf::from(&repo_path), &default_branch)
            .map_err(|e| Error::Conflict(format!("cannot read the default branch: {e}")))
    })
    .await
}

/// Submits a command that creates a task (its first event `task.created`), then waits until
/// the task's worktree exists. Returns the task's id.
/// # Errors
/// The command's rejection; internal when the worktree could not be made.
pub async fn create_with(app: &Ctx, cmd: Command) -> Result<String, Error> {
    let ack = app.submit(cmd).await?;
    let created = ack
        .events
        .first()
        .ok_or_else(|| Error::internal("task.created missing"))?;
    let task_id = created
        .task_id
        .clone()
        .ok_or_else(|| Error::internal("task.created without task_id"))?;
    wait_for_worktree(app, &task_id, created.seq).await?;
    Ok(task_id.into())
}

/// Waits until the worktree reactor recorded task `task_id`'s worktree (after seq `after`).
/// # Errors
/// Internal when it could not be made or it took too long; unavailable at shutdown.
pub async fn wait_for_worktree(app: &Ctx, task_id: &str, after: u64) -> Result<(), Error> {
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
            let r = r.map_err(Error::internal)?;
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
                    return Err(Error::internal(format!(
                        "the worktree of task {task_id} could not be made: {reason}"
                    )));
                }
                _ => {}
            }
        }
        Err(Error::Unavailable("the server is shutting down".into()))
    })
    .await;
    outcome.map_err(|_| {
        Error::internal(format!(
            "timed out waiting for the worktree of task {task_id}"
        ))
    })?
}
