//! Forks: `forkSnapshot`. A new task whose branch and worktree start at one of a task's
//! snapshots, made as `createTask` makes one (the same `task.created`, the same worktree
//! reactor, the same wait), with an idle agent session that continues the snapshot's
//! conversation through the vendor's own fork when the first message reaches it (Claude
//! Code: `--resume … --fork-session --resume-session-at`; Codex: `thread/fork` with
//! `lastTurnId`). The decision is `projections/src/fork.rs`; the vendor side is the drivers'
//! `SpawnSpec::fork`.

use byre_projections::Command;

use super::{Ctx, Error};
use crate::api;

/// Input of `forkSnapshot`.
pub struct ForkSnapshot {
    /// The task forked.
    pub task_id: String,
    /// The position of its snapshot to fork at, from 1.
    pub n: u32,
}

/// `forkSnapshot`: submits `ForkSnapshot` (the task and its idle session in one batch), then
/// waits until the fork's worktree exists; answers the new task.
/// # Errors
/// Not found (unknown task or snapshot); conflict (the task is closed, or the snapshot follows
/// no recorded agent message, or its agent cannot be forked); internal when the worktree could
/// not be made.
pub async fn fork_snapshot(app: &Ctx, actor: &str, fork: ForkSnapshot) -> Result<api::Task, Error> {
    let ack = app
        .submit(Command::ForkSnapshot {
            actor: actor.to_owned(),
            task_id: fork.task_id.into(),
            n: fork.n,
        })
        .await?;
    let created = ack
        .events
        .iter()
        .find(|e| matches!(e.body, byre_projections::EventBody::TaskCreated(_)))
        .ok_or_else(|| Error::internal("task.created missing"))?;
    let task_id = created
        .task_id
        .clone()
        .ok_or_else(|| Error::internal("task.created without task_id"))?;
    super::task_creation::wait_for_worktree(app, &task_id, created.seq).await?;
    super::tasks::get_task(app, &task_id)
}
