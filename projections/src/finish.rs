//! Finishing a task: `mergeTask` (target main), `mergeIn`, `discardTask`, and the outcomes the
//! finish reactor records (`src/reactors/finish.rs`).
//!
//! A merge is an intent (`task.merge_requested`, or `task.merge_started` for a held one) that
//! starts the merge-in agent turn; when that turn ends normally the reactor squashes, pushes,
//! fast-forwards and removes the worktree, then records `task.merged` (or `task.merge_failed`).
//! When it ends otherwise, `task.merge_failed` is decided with the turn's end. One merge runs
//! per project: a later one is held (`queued`, `merge_queued_at`) and started by the reactor
//! (`StartHeldMerge`), oldest first, once none runs and its session is idle.
//!
//! A discard gives the agent one summary turn (at once when idle, else as soon as the running
//! turn ends; nothing else is handed over meanwhile), drops a held merge, and when that turn
//! ends however it ends, the reactor removes the worktree and branch and records
//! `task.discarded` (or `task.cleanup_failed`, which `discardTask` retries).

use crate::ids::SessionId;
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::sessions::{Session, SessionCompleted, SessionRole, TurnOutcome};
use crate::tasks::{Task, TaskStatus};
use crate::{DecideCtx, Rejection, State};

macro_rules! payload {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct $name { $($(#[$fdoc])* pub $field: $ty,)* }
    };
}

payload!(/// `task.merge_requested` payload: `mergeTask` (target main) was accepted.
MergeRequested {
    /// The squash commit's title, from now on the task's `merge_title`.
    merge_title: String,
    /// Held behind another task's merge in the project (`merge_queued_at` is this event's
    /// time); its turn starts later with `task.merge_started`.
    queued: bool,
    /// Not held: the session whose next turn is the merge-in turn; empty when held.
    session_id: SessionId,
    /// Not held: that turn's number; 0 when held.
    turn: u32,
});
payload!(/// `task.merge_started` payload: a held merge starts its merge-in turn.
MergeStarted {
    /// The session running the merge-in turn.
    session_id: SessionId,
    /// The turn's number.
    turn: u32,
});
payload!(/// `task.merge_failed` payload: the merge stopped; the task stays active.
MergeFailed {
    /// Why, for the user (a conflict's paths, a rejected push, the turn's outcome).
    reason: String,
});
payload!(/// `task.merge_landed` payload: the squash commit is on the default branch (and origin);
/// the worktree's removal follows.
MergeLanded {
    /// The squash commit; empty when there was nothing to merge.
    merge_commit: String,
});
payload!(/// `task.merged` payload: the task is closed as merged.
TaskMerged {
    /// The squash commit on the default branch; empty when there was nothing to merge.
    merge_commit: String,
    /// The snapshot ref keeping the worktree's last state; empty when none was kept.
    kept_ref: String,
    /// Why removing the worktree or branch failed after the merge landed; empty when it
    /// did not.
    cleanup_error: String,
});
payload!(/// `task.discard_requested` payload: `discardTask` was accepted (or a failed clean-up
/// is retried).
DiscardRequested {
    /// The session whose next turn is the summary turn; empty while that turn waits for the
    /// running one (or on a retry).
    session_id: SessionId,
    /// That turn's number; 0 when waiting.
    turn: u32,
    /// A retry of a failed clean-up: no summary turn.
    retry: bool,
    /// Whether the agent writes the task's summary first (the default). `false`: no agent
    /// turn; `session_id` and `turn` name the turn the discard waits for (the running or
    /// last one; empty and 0 for a task with no session). Absent in events of older builds,
    /// which always asked for the summary.
    #[serde(default = "with_summary")]
    summary: bool,
});

/// [`DiscardRequested::summary`] where an older build's event has none.
fn with_summary() -> bool {
    true
}
payload!(/// `task.discard_turn_started` payload: a discard's summary turn started after the
/// turn that was running when the discard was asked for.
DiscardTurnStarted {
    /// The session.
    session_id: SessionId,
    /// The summary turn's number.
    turn: u32,
});
payload!(/// `task.discarded` payload: the task is closed without merging.
TaskDiscarded {
    /// The snapshot ref keeping the worktree's last state; empty when none was kept.
    kept_ref: String,
});
payload!(/// `task.cleanup_failed` payload: removing a discarded task's worktree or branch
/// failed; the task stays discarding, and `discardTask` retries.
CleanupFailed {
    /// Why.
    reason: String,
});

/// The merge-in turn's message: merge the default branch into the task branch.
pub fn merge_in_prompt(default_branch: &str, branch: &str) -> String {
    format!(
        "Merge the project's default branch `{default_branch}` into this task's branch `{branch}`: \
         commit your work, run `git merge {default_branch}` in this worktree, resolve any \
         conflicts keeping the intent of both sides, regenerate generated files (lock files, \
         generated code) rather than merging them by hand, check that the project still builds \
         and its tests pass, and commit the result."
    )
}

/// The invitation `mergeIn` adds (and `mergeTask` leaves out): revise the merge title.
pub fn title_invitation(merge_title: &str) -> String {
    format!(
        "\n\nThen, if the squash commit title `{merge_title}` no longer describes the work, set \
         a better one (one line, at most 72 characters) with your set_merge_title tool."
    )
}

/// The discard's summary turn.
pub const SUMMARY_PROMPT: &str = "This task is being discarded: its worktree and branch will be removed without merging. Write the task's summary now, as your whole reply: what was tried, what was learned, what state the work was in, and what someone picking it up again should know. Do not change any files.";

/// The longest merge title, in characters.
pub const MAX_MERGE_TITLE_CHARS: usize = 72;

fn task<'a>(state: &'a State, task_id: &str) -> Result<&'a Task, Rejection> {
    state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))
}

fn live_session<'a>(state: &'a State, task_id: &str) -> Option<&'a Session> {
    state
        .sessions
        .values()
        .filter(|s| s.task_id == task_id && s.role == SessionRole::Implementer && !s.completed)
        .max_by_key(|s| s.created_seq)
}

/// 409 while the session's own subagents run: a merge would close the task without their
/// work and stop them with the agent's process (target main and target parent alike).
pub(crate) fn check_no_subagents(session: Option<&Session>) -> Result<(), Rejection> {
    match session.filter(|s| s.subagents > 0) {
        Some(s) => Err(Rejection::Conflict(format!(
            "task `{}`'s agent has {} subagent(s) running; merge once they have ended",
            s.task_id, s.subagents
        ))),
        None => Ok(()),
    }
}

fn task_event(t: &Task, actor: &str, body: EventBody) -> NewEvent {
    NewEvent::new(actor, body)
        .project(&t.project_id)
        .task(&t.id)
}

/// Checks a merge title: one line of 1 to 72 characters.
pub(crate) fn check_merge_title(title: &str) -> Result<(), Rejection> {
    if title.trim().is_empty()
        || title.chars().count() > MAX_MERGE_TITLE_CHARS
        || title.chars().any(char::is_control)
    {
        return Err(Rejection::Invalid(format!(
            "merge_title must be one line of 1 to {MAX_MERGE_TITLE_CHARS} characters"
        )));
    }
    Ok(())
}

/// A new turn on the task's agent with `text` from byre: handed to the idle live session, or
/// in a new session on `actor`'s default model when the task has none. Returns the events and
/// the (session, turn) of the turn.
fn agent_turn(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    t: &Task,
    text: &str,
    head: &str,
) -> Result<(Vec<NewEvent>, String, u32), Rejection> {
    let mut events = match live_session(state, &t.id) {
        Some(s) => {
            if s.turn_running {
                return Err(Rejection::Conflict(format!(
                    "task `{}` is running a turn; try again once it is idle",
                    t.id
                )));
            }
            if s.compact_to.is_some() {
                return Err(Rejection::Conflict(format!(
                    "session `{}` is writing its handoff for compaction",
                    s.id
                )));
            }
            crate::sessions::hand_over(
                state,
                s,
                "byre",
                state.last_input_id + 1,
                text,
                &[],
                head,
                None,
            )
        }
        None => crate::sessions::create(state, ctx, actor, &t.id, None, text, &[], head)?,
    };
    for e in &mut events {
        if matches!(e.body, EventBody::UserMessage(_)) {
            "byre".clone_into(&mut e.actor);
        }
    }
    let (sid, turn) = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::TurnStarted(p) => {
                Some((e.agent_session_id.clone().unwrap_or_default(), p.turn))
            }
            _ => None,
        })
        .unwrap_or_default();
    Ok((events, sid.into(), turn))
}

/// 400 unless `actor` has a git identity to author the squash commit.
pub(crate) fn check_identity(state: &State, actor: &str) -> Result<(), Rejection> {
    let user = state.users.get(actor);
    if user.is_none_or(|u| u.git_name.is_empty() || u.git_email.is_empty()) {
        return Err(Rejection::Invalid(format!(
            "`{actor}` has no git identity to author the squash commit: set git_name and git_email with updateMe first"
        )));
    }
    Ok(())
}

pub(crate) fn check_open(t: &Task) -> Result<(), Rejection> {
    if t.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{}` is closed", t.id)));
    }
    if t.discarding {
        return Err(Rejection::Conflict(format!(
            "task `{}` is being discarded",
            t.id
        )));
    }
    Ok(())
}

/// Decides `MergeTask`: target main here, target `parent` in
/// [`crate::subtasks::merge_into_parent`]; `after_review` records a merge waiting for a review
/// (`crate::reviews::after`). Either target is refused (409) while the task has active
/// subtasks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    merge_title: Option<&str>,
    target_parent: bool,
    after_review: bool,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if target_parent {
        return crate::subtasks::merge_into_parent(state, ctx, actor, task_id, after_review, head);
    }
    if t.status == TaskStatus::Active {
        crate::subtasks::check_no_active_subtasks(state, t)?;
    }
    if after_review {
        return crate::reviews::after::request(state, actor, task_id, merge_title);
    }
    let title = merge_title
        .ok_or_else(|| Rejection::Invalid("merge_title is required for target main".into()))?;
    check_merge_title(title)?;
    check_open(t)?;
    if t.merging {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is already merging"
        )));
    }
    if t.merging_into_parent {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is merging into its parent task"
        )));
    }
    if t.merge_queued_at_us.is_some() {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}`'s merge is already held behind another merge in its project"
        )));
    }
    if live_session(state, task_id).is_some_and(|s| s.turn_running) {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is running a turn; merge once it is idle"
        )));
    }
    check_no_subagents(live_session(state, task_id))?;
    check_identity(state, actor)?;
    let queued = state.tasks.values().any(|o| {
        o.id != t.id && o.project_id == t.project_id && o.merging && o.status == TaskStatus::Active
    });
    let mut events = Vec::new();
    let (mut session_id, mut turn) = (String::new(), 0);
    if !queued {
        let project = state.projects.get(&t.project_id);
        let default_branch = project.map(|p| p.default_branch.as_str()).unwrap_or("main");
        let text = merge_in_prompt(default_branch, &t.branch);
        let (turn_events, sid, n) = agent_turn(state, ctx, actor, t, &text, head)?;
        events = turn_events;
        (session_id, turn) = (sid, n);
    }
    events.insert(
        0,
        task_event(
            t,
            actor,
            EventBody::MergeRequested(MergeRequested {
                merge_title: title.to_owned(),
                queued,
                session_id: session_id.into(),
                turn,
            }),
        ),
    );
    Ok(events)
}

/// Decides `StartHeldMerge`: the held merge of `task_id` starts its merge-in turn when no
/// other merge runs in its project and its session is idle; nothing otherwise.
pub(crate) fn start_held(
    state: &State,
    ctx: &DecideCtx,
    task_id: &str,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if t.status != TaskStatus::Active || t.merge_queued_at_us.is_none() || t.discarding {
        return Ok(Vec::new());
    }
    let busy = state
        .tasks
        .values()
        .any(|o| o.project_id == t.project_id && o.merging && o.status == TaskStatus::Active);
    if busy || live_session(state, task_id).is_some_and(|s| s.turn_running) {
        return Ok(Vec::new());
    }
    let default_branch = state
        .projects
        .get(&t.project_id)
        .map(|p| p.default_branch.as_str())
        .unwrap_or("main");
    let text = merge_in_prompt(default_branch, &t.branch);
    let (mut events, session_id, turn) = agent_turn(state, ctx, &t.merge_by, t, &text, head)?;
    events.insert(
        0,
        task_event(
            t,
            "byre",
            EventBody::MergeStarted(MergeStarted {
                session_id: session_id.into(),
                turn,
            }),
        ),
    );
    Ok(events)
}

/// Decides `MergeIn`: the merge-in turn with the title invitation.
pub(crate) fn merge_in(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    check_open(t)?;
    if t.merging {
        return Err(Rejection::Conflict(format!("task `{task_id}` is merging")));
    }
    let default_branch = state
        .projects
        .get(&t.project_id)
        .map(|p| p.default_branch.as_str())
        .unwrap_or("main");
    let text = merge_in_prompt(default_branch, &t.branch) + &title_invitation(&t.merge_title);
    Ok(agent_turn(state, ctx, actor, t, &text, head)?.0)
}

/// The outcome of a merge's git work, as the reactor records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeDone {
    /// The squash commit; empty when there was nothing to merge.
    pub merge_commit: String,
    /// The snapshot ref kept; empty for none.
    pub kept_ref: String,
    /// A clean-up failure after the merge landed; empty for none.
    pub cleanup_error: String,
}

/// Every live session of the task completes (its task closed), after `subagent.ended`
/// (`task_closed`) for each subagent still running in it: its process is stopped with it.
pub(crate) fn complete_sessions(state: &State, t: &Task) -> Vec<NewEvent> {
    state
        .sessions
        .values()
        .filter(|s| s.task_id == t.id && !s.completed)
        .flat_map(|s| {
            let mut events = crate::subagents::end_all(state, s, "task_closed");
            let mut e = task_event(
                t,
                "byre",
                EventBody::SessionCompleted(SessionCompleted {
                    reason: "task_closed".into(),
                    successor_id: String::new(),
                }),
            );
            e.agent_session_id = Some(s.id.clone());
            events.push(e);
            events
        })
        .collect()
}

/// Decides `RecordMerge`: `task.merged` (its sessions complete) or `task.merge_failed`.
/// Nothing when the task is not merging (a second outcome after a restart).
pub(crate) fn record_merge(
    state: &State,
    task_id: &str,
    outcome: &Result<MergeDone, String>,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if !t.merging || t.status != TaskStatus::Active {
        return Ok(Vec::new());
    }
    Ok(match outcome {
        Ok(done) => {
            let mut events = vec![task_event(
                t,
                "byre",
                EventBody::TaskMerged(TaskMerged {
                    merge_commit: done.merge_commit.clone(),
                    kept_ref: done.kept_ref.clone(),
                    cleanup_error: done.cleanup_error.clone(),
                }),
            )];
            events.extend(complete_sessions(state, t));
            events.extend(crate::inbox::close_task_items(state, &t.id));
            events
        }
        Err(reason) => vec![task_event(
            t,
            "byre",
            EventBody::MergeFailed(MergeFailed {
                reason: reason.clone(),
            }),
        )],
    })
}

/// Decides `RecordMergeLanded`: the squash commit landed. Nothing when the task is not merging
/// or it was recorded already.
pub(crate) fn record_landed(
    state: &State,
    task_id: &str,
    merge_commit: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if !t.merging || t.status != TaskStatus::Active || t.merge_landed.is_some() {
        return Ok(Vec::new());
    }
    Ok(vec![task_event(
        t,
        "byre",
        EventBody::MergeLanded(MergeLanded {
            merge_commit: merge_commit.to_owned(),
        }),
    )])
}

/// Decides `DiscardTask`: refused (409) while the task is closed, merging, already being
/// discarded (unless its clean-up failed: a retry) or has active subtasks.
pub(crate) fn discard(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    summary: bool,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if t.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{task_id}` is closed")));
    }
    if t.merging {
        return Err(Rejection::Conflict(format!("task `{task_id}` is merging")));
    }
    crate::subtasks::check_no_active_subtasks(state, t)?;
    if t.discarding {
        if t.cleanup_failed.is_none() {
            return Err(Rejection::Conflict(format!(
                "task `{task_id}` is already being discarded"
            )));
        }
        return Ok(vec![task_event(
            t,
            actor,
            EventBody::DiscardRequested(DiscardRequested {
                session_id: SessionId::default(),
                turn: 0,
                retry: true,
                summary: false,
            }),
        )]);
    }
    let mut events = Vec::new();
    let (mut session_id, mut turn) = (String::new(), 0);
    let live = live_session(state, task_id);
    let running = live.is_some_and(|s| s.turn_running || s.compact_to.is_some());
    if !summary {
        // No summary turn: the discard waits only for the running turn, if any.
        if let Some(s) = live {
            (session_id, turn) = (s.id.to_string(), s.turns);
        }
    } else if !running {
        let (turn_events, sid, n) = agent_turn(state, ctx, actor, t, SUMMARY_PROMPT, head)?;
        events = turn_events;
        (session_id, turn) = (sid, n);
    }
    events.insert(
        0,
        task_event(
            t,
            actor,
            EventBody::DiscardRequested(DiscardRequested {
                session_id: session_id.into(),
                turn,
                retry: false,
                summary,
            }),
        ),
    );
    Ok(events)
}

/// Decides `RecordDiscard`: `task.discarded` (its sessions complete) or
/// `task.cleanup_failed`. Nothing when the task is not discarding.
pub(crate) fn record_discard(
    state: &State,
    task_id: &str,
    outcome: &Result<String, String>,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = task(state, task_id)?;
    if !t.discarding || t.status != TaskStatus::Active {
        return Ok(Vec::new());
    }
    Ok(match outcome {
        Ok(kept_ref) => {
            let mut events = vec![task_event(
                t,
                "byre",
                EventBody::TaskDiscarded(TaskDiscarded {
                    kept_ref: kept_ref.clone(),
                }),
            )];
            events.extend(complete_sessions(state, t));
            events.extend(crate::inbox::close_task_items(state, &t.id));
            events
        }
        Err(reason) => vec![task_event(
            t,
            "byre",
            EventBody::CleanupFailed(CleanupFailed {
                reason: reason.clone(),
            }),
        )],
    })
}

/// What finishing a task does at the end of a session's turn (decided with the turn's end).
pub(crate) struct TurnEndHook {
    /// Events to add after `turn.ended`.
    pub events: Vec<NewEvent>,
    /// Whether the session's queued messages stay queued (a merge or discard goes on).
    pub hold_queue: bool,
}

/// At the end of turn `s.turns` of `s` with `outcome`: the merge turn ending abnormally fails
/// the merge; ending normally holds the queue for the reactor's squash. A discard's summary
/// turn ending holds the queue for the clean-up; a discard waiting for this turn starts its
/// summary turn now.
pub(crate) fn turn_end_hook(
    state: &State,
    s: &Session,
    outcome: TurnOutcome,
    head: &str,
) -> TurnEndHook {
    let mut hook = TurnEndHook {
        events: Vec::new(),
        hold_queue: false,
    };
    let Some(t) = state.tasks.get(&s.task_id) else {
        return hook;
    };
    if t.status != TaskStatus::Active || s.role != SessionRole::Implementer {
        return hook;
    }
    let this_turn = Some((s.id.clone(), s.turns));
    if t.discarding {
        hook.hold_queue = true;
        if t.discard_turn.is_none() {
            let after = Session {
                turn_running: false,
                ..s.clone()
            };
            let mut events = crate::sessions::hand_over(
                state,
                &after,
                "byre",
                state.last_input_id + 1,
                SUMMARY_PROMPT,
                &[],
                head,
                None,
            );
            hook.events.push(task_event(
                t,
                "byre",
                EventBody::DiscardTurnStarted(DiscardTurnStarted {
                    session_id: s.id.clone(),
                    turn: s.turns + 1,
                }),
            ));
            hook.events.append(&mut events);
        }
        return hook;
    }
    if t.merging && t.merge_turn == this_turn {
        if outcome == TurnOutcome::Completed {
            hook.hold_queue = true;
        } else {
            let how = match outcome {
                TurnOutcome::Interrupted => "was interrupted",
                _ => "failed",
            };
            hook.events.push(task_event(
                t,
                "byre",
                EventBody::MergeFailed(MergeFailed {
                    reason: format!("the merge-in turn {how}; nothing was merged"),
                }),
            ));
        }
    }
    hook
}

/// Folds the finishing events and the transcript's participants.
pub(crate) fn apply(
    state: &mut State,
    created_at_us: i64,
    actor: &str,
    body: &EventBody,
    task_id: Option<&str>,
) {
    // Most task-scoped events are none of these: skip them before the task lookup (a search of
    // the tasks' string keys for every one was 9% of a 1M-event fold, bench/README.md).
    if !matches!(
        body,
        EventBody::UserMessage(_)
            | EventBody::MergeRequested(_)
            | EventBody::MergeStarted(_)
            | EventBody::MergeLanded(_)
            | EventBody::MergeFailed(_)
            | EventBody::TaskMerged(_)
            | EventBody::DiscardRequested(_)
            | EventBody::DiscardTurnStarted(_)
            | EventBody::CleanupFailed(_)
            | EventBody::TaskDiscarded(_)
    ) {
        return;
    }
    let Some(t) = task_id.and_then(|id| state.tasks.get_mut(id)) else {
        return;
    };
    match body {
        EventBody::UserMessage(_)
            if actor != "byre" && !t.participants.iter().any(|p| p == actor) =>
        {
            t.participants.push(actor.to_owned());
        }
        EventBody::MergeRequested(p) => {
            t.merge_title.clone_from(&p.merge_title);
            actor.clone_into(&mut t.merge_by);
            if p.queued {
                t.merge_queued_at_us = Some(created_at_us);
            } else {
                t.merging = true;
                t.merge_turn = Some((p.session_id.clone(), p.turn));
                t.merge_started_at_us = Some(created_at_us);
            }
        }
        EventBody::MergeStarted(p) => {
            t.merge_queued_at_us = None;
            t.merging = true;
            t.merge_turn = Some((p.session_id.clone(), p.turn));
            t.merge_started_at_us = Some(created_at_us);
        }
        EventBody::MergeLanded(p) => {
            t.merge_landed = Some(p.merge_commit.clone());
        }
        EventBody::MergeFailed(_) => {
            t.merging = false;
            t.merge_turn = None;
            t.merge_started_at_us = None;
            t.merge_queued_at_us = None;
        }
        EventBody::TaskMerged(p) => {
            t.status = TaskStatus::Merged;
            t.closed_at_us = Some(created_at_us);
            t.merge_commit = Some(p.merge_commit.clone());
            t.merging = false;
        }
        EventBody::DiscardRequested(p) => {
            t.discarding = true;
            t.merge_queued_at_us = None;
            t.cleanup_failed = None;
            if !p.retry && (!p.session_id.is_empty() || !p.summary) {
                t.discard_turn = Some((p.session_id.clone().into(), p.turn));
            }
        }
        EventBody::DiscardTurnStarted(p) => {
            t.discard_turn = Some((p.session_id.clone().into(), p.turn));
        }
        EventBody::CleanupFailed(p) => {
            t.cleanup_failed = Some(p.reason.clone());
        }
        EventBody::TaskDiscarded(_) => {
            t.status = TaskStatus::Discarded;
            t.closed_at_us = Some(created_at_us);
            t.discarding = false;
        }
        _ => {}
    }
}

/// The co-authors of a merge by `caller`: the task's participants other than the caller, in
/// order of their first message (logins).
pub fn co_authors<'a>(t: &'a Task, caller: &str) -> impl Iterator<Item = &'a str> {
    let caller = caller.to_owned();
    t.participants
        .iter()
        .map(String::as_str)
        .filter(move |p| *p != caller)
}

/// Whether no snapshot of the task waits for the snapshot reactor (the end-of-turn commit
/// of the turn that just ended comes before the worktree is squashed or removed).
fn snapshots_settled(state: &State, t: &Task) -> bool {
    state
        .snapshots
        .get(&t.id)
        .is_none_or(|s| s.pending.is_empty())
}

/// Whether the task's merge turn has ended (normally: an abnormal end fails the merge) and
/// its end-of-turn snapshot is recorded, so the reactor's squash is due.
pub fn merge_due(state: &State, t: &Task) -> bool {
    snapshots_settled(state, t)
        && t.status == TaskStatus::Active
        && t.merging
        && t.merge_turn.as_ref().is_some_and(|(sid, turn)| {
            state
                .sessions
                .get(sid)
                .is_some_and(|s| s.turns >= *turn && !(s.turns == *turn && s.turn_running))
        })
}

/// Whether the task's discard summary turn has ended and its end-of-turn snapshot is
/// recorded, so the reactor's clean-up is due.
pub fn discard_due(state: &State, t: &Task) -> bool {
    if t.status != TaskStatus::Active
        || !t.discarding
        || t.cleanup_failed.is_some()
        || !snapshots_settled(state, t)
    {
        return false;
    }
    t.discard_turn.as_ref().is_some_and(|(sid, turn)| {
        state
            .sessions
            .get(sid)
            .is_none_or(|s| s.completed || s.turns > *turn || (s.turns == *turn && !s.turn_running))
    })
}

#[cfg(test)]
mod tests;
