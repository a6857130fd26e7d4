//! Subtasks: tasks a task's agent starts (its `start_subtask` tool, CodeBolt's `startAgent`)
//! and their merge into the parent (`mergeTask` with target `parent`).
//!
//! - `StartSubtask` creates the task (`task.created`, actor the parent task's creator) and
//!   links it (`task.subtask_started`) in one batch, so no subtask ever exists unlinked. The
//!   link sets the new task's `parent_task_id`.
//! - `mergeTask` target `parent` (`task.merge_into_parent_requested`, on the subtask) sets
//!   `merging_into_parent` and, in the same batch, asks the parent's agent to merge the
//!   subtask's branch: a message under the caller's name, queued while the parent is
//!   mid-turn, a new session when it has none. The finish reactor checks, whenever the
//!   parent's agent is idle after a turn (its end-of-turn commit made), whether the subtask's
//!   branch tip is in the parent's HEAD; then it removes the subtask's worktree as a merge
//!   does and records `RecordMergeIntoParent`: `task.merged`, its `merge_commit` the parent's
//!   HEAD that holds the branch.
//! - A task with an active subtask can be neither merged (either target) nor discarded.

use crate::ids::{SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::finish::MergeDone;
use crate::sessions::{Session, SessionRole};
use crate::tasks::{Task, TaskStatus};
use crate::{DecideCtx, Rejection, State};

/// `task.merge_into_parent_requested` payload: `mergeTask` target `parent` was accepted.
/// Envelope: the subtask; actor the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeIntoParentRequested {
    /// The parent task, whose agent is asked to merge.
    pub parent_task_id: TaskId,
    /// The subtask's branch the parent's agent is asked to merge.
    pub branch: String,
    /// The parent's session the message went to (a new one when it had none).
    pub parent_session_id: SessionId,
    /// The message's input id (handed over at once, or queued).
    pub input_id: u64,
}

/// The tasks whose `parent_task_id` is `task_id` and that are still active.
pub fn active_subtasks<'a>(state: &'a State, task_id: &'a str) -> impl Iterator<Item = &'a Task> {
    state.tasks.values().filter(move |c| {
        c.status == TaskStatus::Active && c.parent_task_id.as_deref() == Some(task_id)
    })
}

/// Refuses to finish a task that has active subtasks (`mergeTask`, `discardTask`).
/// # Errors
/// 409 naming the first active subtask.
pub(crate) fn check_no_active_subtasks(state: &State, t: &Task) -> Result<(), Rejection> {
    match active_subtasks(state, &t.id).next() {
        Some(c) => Err(Rejection::Conflict(format!(
            "task `{}` has an active subtask `{}` (\"{}\"): merge or discard its subtasks first",
            t.id, c.id, c.title
        ))),
        None => Ok(()),
    }
}

fn live_session<'a>(state: &'a State, task_id: &str) -> Option<&'a Session> {
    state
        .sessions
        .values()
        .filter(|s| s.task_id == task_id && s.role == SessionRole::Implementer && !s.completed)
        .max_by_key(|s| s.created_seq)
}

/// Decides `StartSubtask`: `task.created` in the calling session's project from `base_ref`
/// (actor: the calling task's creator) and `task.subtask_started` linking it to the caller.
/// # Errors
/// 404 unknown session; 403 a session that is not a task's implementer; 409 the calling task
/// closed, merging, holding a merge or being discarded; 400 a bad title.
pub(crate) fn start(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    title: &str,
    base_ref: &str,
    agent: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = state
        .sessions
        .get(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{session_id}`")))?;
    let parent = state
        .tasks
        .get(&s.task_id)
        .filter(|_| s.role == SessionRole::Implementer)
        .ok_or_else(|| {
            Rejection::Forbidden("only a task's implementing agent may start subtasks".into())
        })?;
    crate::finish::check_open(parent)?;
    if parent.merging || parent.merge_queued_at_us.is_some() || parent.merge_after_review {
        return Err(Rejection::Conflict(format!(
            "task `{}` is being merged; it can start no subtask meanwhile",
            parent.id
        )));
    }
    let mut events = crate::tasks::create(
        state,
        ctx,
        &parent.created_by,
        &parent.project_id,
        title,
        base_ref,
    )?;
    let child_id = events
        .first()
        .and_then(|e| e.task_id.clone())
        .unwrap_or_default();
    events.push(
        NewEvent::new(
            "byre",
            EventBody::SubtaskStarted(crate::tools::SubtaskStarted {
                task_id: child_id.clone(),
                parent_task_id: parent.id.clone(),
                parent_session_id: s.id.clone(),
                agent: agent.to_owned(),
            }),
        )
        .project(&parent.project_id)
        .task(child_id),
    );
    Ok(events)
}

/// The message asking the parent's agent to merge subtask `sub`'s branch.
pub fn merge_into_parent_prompt(sub: &Task) -> String {
    format!(
        "Your subtask {} (\"{}\") is done: merge its branch `{}` into this task's branch. \
         Commit your own work first, run `git merge --no-edit {}` in this worktree, resolve any \
         conflicts keeping the intent of both sides, check that the project still builds and \
         its tests pass, and commit the result. byre closes the subtask as merged once its \
         branch is in this branch's HEAD at the end of one of your turns.",
        sub.id, sub.title, sub.branch, sub.branch
    )
}

/// Decides `MergeTask` with target `parent`. `head`: the parent's worktree HEAD (the
/// message's turn runs there).
/// # Errors
/// 400 not a subtask, or `after_review` (not built for this target); 404; 409 the subtask
/// closed, being discarded, merging (either target), its turn or end-of-turn commit still
/// running, or active subtasks of its own; 409 the parent closed or finishing.
pub(crate) fn merge_into_parent(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    after_review: bool,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    let Some(parent_id) = t.parent_task_id.as_deref() else {
        return Err(Rejection::Invalid(format!(
            "task `{task_id}` is not a subtask: target parent is only for a subtask; use target main"
        )));
    };
    if after_review {
        return Err(Rejection::Invalid(
            "after_review is only built for target main".into(),
        ));
    }
    crate::finish::check_open(t)?;
    if t.merging_into_parent {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is already merging into its parent"
        )));
    }
    if t.merging || t.merge_queued_at_us.is_some() {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is merging onto the default branch"
        )));
    }
    check_no_active_subtasks(state, t)?;
    if live_session(state, task_id).is_some_and(|s| s.turn_running) {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}`'s turn is running; merge into its parent once it is idle"
        )));
    }
    crate::finish::check_no_subagents(live_session(state, task_id))?;
    if !snapshots_settled(state, &t.id) {
        return Err(Rejection::Conflict(format!(
            "byre is still making task `{task_id}`'s end-of-turn commit; try again in a moment"
        )));
    }
    let parent = state
        .tasks
        .get(parent_id)
        .ok_or_else(|| Rejection::NotFound(format!("no parent task `{parent_id}`")))?;
    if parent.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!(
            "the parent task `{parent_id}` is closed"
        )));
    }
    let text = merge_into_parent_prompt(t);
    let mut events = match live_session(state, parent_id) {
        Some(s) => crate::sessions::send(state, actor, &s.id, &text, &[], None, head)?,
        None => crate::sessions::create(state, ctx, actor, parent_id, None, &text, &[], head)?,
    };
    let (parent_session_id, input_id) = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some((e.agent_session_id.clone(), m.input_id)),
            EventBody::UserQueued(m) => Some((e.agent_session_id.clone(), m.input_id)),
            _ => None,
        })
        .map(|(s, i)| (s.unwrap_or_default(), i))
        .unwrap_or_default();
    events.insert(
        0,
        NewEvent::new(
            actor,
            EventBody::MergeIntoParentRequested(MergeIntoParentRequested {
                parent_task_id: parent_id.to_owned().into(),
                branch: t.branch.clone(),
                parent_session_id,
                input_id,
            }),
        )
        .project(&t.project_id)
        .task(&t.id),
    );
    Ok(events)
}

fn snapshots_settled(state: &State, task_id: &str) -> bool {
    state
        .snapshots
        .get(task_id)
        .is_none_or(|s| s.pending.is_empty())
}

/// The parent of subtask `t` when `t` waits to be found merged into it and the parent's agent
/// is idle after a turn with its end-of-turn commit made (and `t`'s own snapshots settled):
/// the finish reactor then checks whether `t`'s branch is in the parent's HEAD.
pub fn into_parent_check_due<'a>(state: &'a State, t: &Task) -> Option<&'a Task> {
    if t.status != TaskStatus::Active || !t.merging_into_parent || t.discarding {
        return None;
    }
    let parent = state.tasks.get(t.parent_task_id.as_deref()?)?;
    let idle = live_session(state, &parent.id).is_none_or(|s| !s.turn_running);
    (parent.status == TaskStatus::Active
        && idle
        && snapshots_settled(state, &parent.id)
        && snapshots_settled(state, &t.id))
    .then_some(parent)
}

/// Decides `RecordMergeIntoParent`: the subtask's branch was found in its parent's HEAD and
/// its worktree removed: `task.merged` (its sessions complete, its open inbox items close).
/// Nothing when the subtask is not merging into its parent (a second outcome).
pub(crate) fn record_into_parent(
    state: &State,
    task_id: &str,
    done: &MergeDone,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if !t.merging_into_parent || t.status != TaskStatus::Active {
        return Ok(Vec::new());
    }
    let mut events = vec![NewEvent::new(
        "byre",
        EventBody::TaskMerged(crate::finish::TaskMerged {
            merge_commit: done.merge_commit.clone(),
            kept_ref: done.kept_ref.clone(),
            cleanup_error: done.cleanup_error.clone(),
        }),
    )
    .project(&t.project_id)
    .task(&t.id)];
    events.extend(crate::finish::complete_sessions(state, t));
    events.extend(crate::inbox::close_task_items(state, &t.id));
    Ok(events)
}

/// Folds the link (`task.subtask_started` sets `parent_task_id`) and the merge into the
/// parent (`task.merge_into_parent_requested` sets `merging_into_parent`; the task closing
/// clears it).
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    match &e.body {
        EventBody::SubtaskStarted(p) => {
            if let Some(t) = state.tasks.get_mut(&p.task_id) {
                t.parent_task_id = Some(p.parent_task_id.clone());
            }
        }
        EventBody::MergeIntoParentRequested(_) => {
            if let Some(t) = e.task_id.as_deref().and_then(|id| state.tasks.get_mut(id)) {
                t.merging_into_parent = true;
            }
        }
        EventBody::TaskMerged(_) | EventBody::TaskDiscarded(_) => {
            if let Some(t) = e.task_id.as_deref().and_then(|id| state.tasks.get_mut(id)) {
                t.merging_into_parent = false;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
