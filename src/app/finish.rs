//! Finishing a task: `getUnmerged`, `getCoAuthors`, `mergeTask`, `mergeIn`, `discardTask`.
//! The git work of a merge or discard is the finish reactor's (`reactors::finish`);
//! these operations read git (`getUnmerged`) or submit the intent.

use std::path::PathBuf;

use byre_projections::tasks::TaskStatus;
use byre_projections::Command;

use super::sessions::worktree_head;
use super::tasks::get_task;
use super::{blocking, Ctx, Error};
use crate::api;
use byre_git::GitError;
use byre_log::Ack;

/// Submits the intent `make` builds from the HEAD of task `task_id`'s worktree (the head the
/// intent records); the writer's ack, or the HEAD lookup's or the writer's error.
async fn submit_at_head(
    app: &Ctx,
    task_id: &str,
    make: impl FnOnce(String) -> Command,
) -> Result<Ack, Error> {
    let head = worktree_head(app, task_id).await?;
    app.submit(make(head)).await
}

/// `getUnmerged`: commits on the task branch not on the default branch, and files,
/// insertions, deletions and uncommitted paths of the worktree (as if everything were staged)
/// against their merge-base.
/// # Errors
/// Not found; conflict when the task is closed, its worktree is missing or its branches
/// share no history.
pub async fn get_unmerged(app: &Ctx, task_id: &str) -> Result<byre_git::merge::Unmerged, Error> {
    let facts = app.writer.read(|s| {
        let t = s.tasks.get(task_id)?;
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
        facts.ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))?;
    if status != TaskStatus::Active {
        return Err(Error::Conflict(format!(
            "task `{task_id}` is closed: its worktree is gone"
        )));
    }
    let refusal = |e| match e {
        GitError::Conflict(m) | GitError::NotARepository(m) => Error::Conflict(m),
        other => Error::internal(other),
    };
    // The worktree is read in its sandbox (`git::boxed`); the rest reads objects and refs.
    let worktree = app.git_box.facts(&worktree).await.map_err(refusal)?;
    blocking(move || {
        byre_git::merge::unmerged(&repo, &worktree, &branch, &default_branch).map_err(refusal)
    })
    .await
}

/// `getCoAuthors`: the humans other than `viewer` with a `user.message` in the task's
/// transcript (inbox answers are delivered as messages under the answering human), in order
/// of their first.
/// # Errors
/// [`Error::NotFound`] for an unknown task.
pub fn get_co_authors(
    app: &Ctx,
    viewer: &str,
    task_id: &str,
) -> Result<Vec<api::Participant>, Error> {
    let list: Option<Vec<api::Participant>> = app.writer.read(|s| {
        let t = s.tasks.get(task_id)?;
        Some(
            byre_projections::finish::co_authors(t, viewer)
                .filter_map(|login| s.users.get(login).map(api::Participant::from))
                .collect(),
        )
    });
    list.ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}

/// Input of `mergeTask`.
pub struct Merge {
    /// The squash commit's title; the task's merge title when absent.
    pub merge_title: Option<String>,
    /// Where the task's work goes.
    pub target: MergeTarget,
    /// Merge once the latest snapshot's review finishes clean.
    pub after_review: bool,
}

/// Where `mergeTask` takes a task's work (spec `mergeTask`'s `target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeTarget {
    /// Squashed onto the project's default branch (`main`, the default).
    #[default]
    Main,
    /// Into its parent task's branch, by the parent's agent (`parent`; subtasks only).
    Parent,
}

impl MergeTarget {
    /// Reads a request's `target`.
    /// # Errors
    /// Anything but `main` or `parent`, in words for the caller.
    pub fn parse(text: &str) -> Result<MergeTarget, String> {
        match text {
            "main" => Ok(MergeTarget::Main),
            "parent" => Ok(MergeTarget::Parent),
            other => Err(format!("target must be main or parent, not {other:?}")),
        }
    }
}

/// `mergeTask`: merging, or held with `merge_queued_at`; with target parent, merging into its
/// parent (`merging_into_parent`). Returns the task.
/// # Errors
/// Invalid (no or bad merge_title, after_review, a caller without a git identity,
/// target parent for a task that is no subtask), not found, conflict (closed, merging, held,
/// being discarded, a turn running, active subtasks, already merging into its parent).
pub async fn merge_task(
    app: &Ctx,
    actor: &str,
    task_id: &str,
    merge: Merge,
) -> Result<api::Task, Error> {
    let target_parent = merge.target == MergeTarget::Parent;
    // Target parent hands a message to the parent's agent: the head is its worktree's.
    let head_of = if target_parent {
        app.writer
            .read(|s| s.tasks.get(task_id).and_then(|t| t.parent_task_id.clone()))
            .unwrap_or_else(|| task_id.to_owned().into())
    } else {
        task_id.to_owned().into()
    };
    submit_at_head(app, &head_of, |head| Command::MergeTask {
        actor: actor.to_owned(),
        task_id: task_id.to_owned().into(),
        merge_title: merge.merge_title,
        target_parent,
        after_review: merge.after_review,
        head,
    })
    .await?;
    get_task(app, task_id)
}

/// `mergeIn`: the session running the merge-in turn (a new session when the task had none).
/// # Errors
/// Not found; conflict (closed, merging, being discarded, a turn running).
pub async fn merge_in(app: &Ctx, actor: &str, task_id: &str) -> Result<api::AgentSession, Error> {
    let ack = submit_at_head(app, task_id, |head| Command::MergeIn {
        actor: actor.to_owned(),
        task_id: task_id.to_owned().into(),
        head,
    })
    .await?;
    let session_id = ack
        .events
        .iter()
        .find_map(|e| e.agent_session_id.clone())
        .ok_or_else(|| Error::internal("the merge-in turn has no session"))?;
    app.writer
        .read(|s| s.sessions.get(&session_id).map(api::AgentSession::from))
        .ok_or_else(|| Error::internal("the merge-in session is missing"))
}

/// `discardTask`: discarding, after a summary turn when `summary` (else after the running
/// turn only); on a task whose clean-up failed, retries it. Returns the task.
/// # Errors
/// Not found; conflict (closed, merging, already being discarded, active subtasks).
pub async fn discard_task(
    app: &Ctx,
    actor: &str,
    task_id: &str,
    summary: bool,
) -> Result<api::Task, Error> {
    submit_at_head(app, task_id, |head| Command::DiscardTask {
        actor: actor.to_owned(),
        task_id: task_id.to_owned().into(),
        summary,
        head,
    })
    .await?;
    get_task(app, task_id)
}
