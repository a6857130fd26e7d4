//! Snapshots: commits of a task's worktree as if everything were staged, kept at
//! `refs/byre/tasks/{task_id}/snap/{n}`. Operations: `listSnapshots`, the `take_snapshot`
//! agent tool (`Command::RequestSnapshot`), and the snapshot reactor's outcome
//! (`Command::RecordSnapshot`).
//!
//! A snapshot has a cause: a `turn.ended` of the task's implementer session (trigger
//! `turn_end`) or a `snapshot.requested` (trigger `requested`). The fold keeps each task's
//! causes not yet answered ([`TaskSnapshots::pending`]) so the reactor can finish them after a
//! restart; a newer `turn.ended` replaces an unanswered older one (its snapshot would hold the
//! same worktree). If the reactor had already taken the older one's snapshot (its ref written,
//! the branch perhaps moved) when the newer one ended, that snapshot is still recorded, and the
//! newer turn's comes after it. The reactor answers with `snapshot.taken` or `snapshot.failed`.

use crate::ids::{SessionId, TaskId};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::sessions::SessionRole;
use crate::tasks::TaskStatus;
use crate::{DecideCtx, Rejection, State};

/// Why a snapshot was taken (spec `Snapshot.trigger`). Only `turn_end` and `requested` are
/// taken by this build; the others are the contract's values for snapshots of earlier builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotTrigger {
    /// The agent wrote text after tool calls (earlier builds only).
    Message,
    /// After byre's end-of-turn commit.
    TurnEnd,
    /// After a tool call (earlier builds only).
    ToolCall,
    /// When the agent asked a human (earlier builds only).
    AskHuman,
    /// On a timer (earlier builds only).
    Timer,
    /// The task's agent or the lead asked for it (`take_snapshot`).
    Requested,
}

/// `snapshot.requested` payload: a snapshot is to be taken (intent). Envelope: the task, the
/// task's agent session (if it has one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRequested {
    /// Always `requested` in this build.
    pub trigger: SnapshotTrigger,
}

/// `snapshot.taken` payload: the snapshot's commit exists at its ref (outcome). Envelope: the
/// task, the agent session of its cause; `created_at` is the snapshot's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotTaken {
    /// The snapshot's id.
    pub id: String,
    /// Seq of the event it answers (`turn.ended` or `snapshot.requested`).
    pub cause_seq: u64,
    /// Position in the task's snapshots, from 1.
    pub n: u32,
    /// The snapshot commit (40 hex); its parent is the worktree's HEAD when it was taken.
    pub commit: String,
    /// Its tree (40 hex).
    pub tree: String,
    /// `turn_end` or `requested`.
    pub trigger: SnapshotTrigger,
    /// The task's latest event seq when the snapshot was started.
    pub event_seq: u64,
    /// Whether the end-of-turn commit moved the task branch to `commit` (always false for
    /// `requested`).
    pub branch_advanced: bool,
    /// What a fork of this snapshot resumes (`forkSnapshot`): the vendor session of the
    /// envelope's agent session as it stood at the cause; absent when no turn of it had named
    /// its last message yet (such a snapshot cannot be forked) and in logs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_from: Option<String>,
    /// With `fork_from`: the vendor's id of the last thing the fork keeps (the
    /// `last_vendor_id` of the latest turn end at or before the cause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_at: Option<String>,
}

/// `snapshot.failed` payload: the snapshot could not be made; no ref was written (outcome).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotFailed {
    /// Seq of the event it answers.
    pub cause_seq: u64,
    /// The cause's trigger.
    pub trigger: SnapshotTrigger,
    /// Why, for the user.
    pub reason: String,
}

/// A snapshot (spec `Snapshot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Id.
    pub id: String,
    /// Task.
    pub task_id: TaskId,
    /// The agent session of its cause (empty for none).
    pub agent_session_id: SessionId,
    /// Position, from 1.
    pub n: u32,
    /// Commit (40 hex).
    pub commit: String,
    /// Tree (40 hex).
    pub tree: String,
    /// The task's latest event seq when it was started.
    pub event_seq: u64,
    /// Why.
    pub trigger: SnapshotTrigger,
    /// Whether the end-of-turn commit moved the task branch to it.
    pub branch_advanced: bool,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Seq of `snapshot.taken`.
    pub seq: u64,
    /// Where a fork of it resumes the agent's conversation; `None`: it cannot be forked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<crate::fork::ForkPoint>,
}

/// A cause waiting for its snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingSnapshot {
    /// `turn_end` or `requested`.
    pub trigger: SnapshotTrigger,
    /// The agent session of the cause (empty for none).
    pub agent_session_id: SessionId,
    /// For `turn_end`, the turn's number; else 0.
    pub turn: u32,
    /// For `turn_end`, whether its snapshot is to be reviewed (`turn.ended.review`): the
    /// task is `review_pending` meanwhile.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// The agent session's fork point when the cause happened (`Session::last_kept`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<crate::fork::ForkPoint>,
}

/// A task's snapshots and the causes still waiting for one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskSnapshots {
    /// Taken, oldest first: `taken[i].n == i + 1`.
    pub taken: Vec<Snapshot>,
    /// Causes not yet answered, by the cause's seq.
    pub pending: BTreeMap<u64, PendingSnapshot>,
}

/// What the reactor made for a cause (carried by `Command::RecordSnapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakenSnapshot {
    /// The position it was stored at (its ref's `n`).
    pub n: u32,
    /// Commit (40 hex).
    pub commit: String,
    /// Tree (40 hex).
    pub tree: String,
    /// The task's latest event seq when it was started.
    pub event_seq: u64,
    /// Whether the task branch now points at `commit` by byre's end-of-turn commit.
    pub branch_advanced: bool,
}

impl State {
    /// A task's snapshots, oldest first (`listSnapshots`); empty for a task without any.
    pub fn task_snapshots(&self, task_id: &str) -> &[Snapshot] {
        self.snapshots
            .get(task_id)
            .map_or(&[], |s| s.taken.as_slice())
    }
}

/// The task's agent session for a requested snapshot: its newest implementer session.
fn agent_session(state: &State, task_id: &str) -> Option<String> {
    (state
        .task_sessions(task_id)
        .into_iter()
        .rev()
        .find(|s| s.role == SessionRole::Implementer)
        .map(|s| s.id.clone()))
    .map(Into::into)
}

/// Decides `RequestSnapshot`. 404 unknown task; 409 closed task or no worktree yet; 400 for a
/// trigger other than `requested` (`turn_end` snapshots follow `turn.ended` by themselves).
pub(crate) fn request(
    state: &State,
    task_id: &str,
    trigger: SnapshotTrigger,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if trigger != SnapshotTrigger::Requested {
        return Err(Rejection::Invalid(
            "only `requested` snapshots can be asked for".into(),
        ));
    }
    if task.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{task_id}` is closed")));
    }
    if !task.worktree_ready {
        return Err(Rejection::Conflict(format!(
            "the worktree of task `{task_id}` is not made yet"
        )));
    }
    let mut e = NewEvent::new(
        "byre",
        EventBody::SnapshotRequested(SnapshotRequested { trigger }),
    )
    .project(task.project_id.clone())
    .task(task_id);
    e.agent_session_id = agent_session(state, task_id).map(Into::into);
    Ok(vec![e])
}

/// Decides `RecordSnapshot`: the reactor's outcome for the cause at `cause_seq`. Nothing when
/// that cause is already answered (a repeat after a restart). A snapshot taken for a turn end
/// that a newer one replaced meanwhile is recorded all the same ([`replaced_turn_end`]). 404
/// unknown task; 409 when `n` is not the task's next position. With `review`, a snapshot
/// taken is also given its review (`crate::reviews::request`) in the same batch.
pub(crate) fn record(
    state: &State,
    ctx: &DecideCtx,
    task_id: &str,
    cause_seq: u64,
    outcome: &Result<TakenSnapshot, String>,
    review: bool,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    let Some(snaps) = state.snapshots.get(task_id) else {
        return Ok(Vec::new());
    };
    let pending = match snaps.pending.get(&cause_seq) {
        Some(p) => p,
        None => match replaced_turn_end(snaps, cause_seq, outcome) {
            Some(p) => p,
            None => return Ok(Vec::new()),
        },
    };
    // A replaced turn end's pending entry is the newer turn's: its fork point is not this
    // snapshot's, so such a snapshot records none.
    let fork = snaps
        .pending
        .contains_key(&cause_seq)
        .then_some(pending.fork.as_ref())
        .flatten();
    let body = match outcome {
        Ok(t) => {
            let next = snaps.taken.len() as u32 + 1;
            if t.n != next {
                return Err(Rejection::Conflict(format!(
                    "snapshot {} of task `{task_id}` is not the next one ({next})",
                    t.n
                )));
            }
            EventBody::SnapshotTaken(SnapshotTaken {
                id: ctx.id(0),
                cause_seq,
                n: t.n,
                commit: t.commit.clone(),
                tree: t.tree.clone(),
                trigger: pending.trigger,
                event_seq: t.event_seq,
                branch_advanced: t.branch_advanced,
                fork_from: fork.map(|f| f.vendor_session_id.clone()),
                fork_at: fork.map(|f| f.at.clone()),
            })
        }
        Err(reason) => EventBody::SnapshotFailed(SnapshotFailed {
            cause_seq,
            trigger: pending.trigger,
            reason: reason.clone(),
        }),
    };
    let mut e = NewEvent::new("byre", body)
        .project(task.project_id.clone())
        .task(task_id);
    e.agent_session_id =
        (!pending.agent_session_id.is_empty()).then(|| pending.agent_session_id.clone());
    let mut out = vec![e];
    // A stage's `done` reported in this turn finishes with this turn's snapshot (only the
    // snapshot of its own cause: a replaced turn end's would be an older worktree).
    if pending.trigger == SnapshotTrigger::TurnEnd && snaps.pending.contains_key(&cause_seq) {
        out.extend(crate::runs::on_snapshot(
            state,
            task_id,
            &pending.agent_session_id,
            pending.turn,
            outcome.as_ref().ok().map(|t| t.commit.as_str()),
        ));
    }
    if let (true, Ok(t)) = (review, outcome) {
        out.extend(crate::reviews::request(
            state,
            ctx,
            1,
            task_id,
            &task.project_id,
            t.n,
        ));
    }
    Ok(out)
}

/// For the outcome of a cause no longer pending: the newer turn end that replaced it, when the
/// cause was a turn end and the reactor had taken its snapshot before the newer one ended (the
/// ref is written and the branch may have moved: the snapshot is recorded all the same, so the
/// newer turn's snapshot comes after it). `None` for a failure, an outcome already recorded
/// (its commit is a taken snapshot's) or a cause nothing replaced (answered already).
fn replaced_turn_end<'s>(
    snaps: &'s TaskSnapshots,
    cause_seq: u64,
    outcome: &Result<TakenSnapshot, String>,
) -> Option<&'s PendingSnapshot> {
    let taken = outcome.as_ref().ok()?;
    if snaps.taken.iter().any(|s| s.commit == taken.commit) {
        return None;
    }
    snaps
        .pending
        .range(cause_seq + 1..)
        .map(|(_, p)| p)
        .find(|p| p.trigger == SnapshotTrigger::TurnEnd)
}

/// Folds `turn.ended` (of a task's implementer session, while the task is active),
/// `snapshot.requested`, `snapshot.taken` and `snapshot.failed`.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let Some(task_id) = e.task_id.as_deref() else {
        return;
    };
    let session_id = e.agent_session_id.clone().unwrap_or_default();
    match &e.body {
        EventBody::TurnEnded(p) => {
            let implementer = state
                .sessions
                .get(&session_id)
                .is_some_and(|s| s.role == SessionRole::Implementer);
            let active = state
                .tasks
                .get(task_id)
                .is_some_and(|t| t.status == TaskStatus::Active);
            if !(implementer && active) {
                return;
            }
            let fork = state
                .sessions
                .get(&session_id)
                .and_then(|s| s.last_kept.clone());
            let snaps = state
                .snapshots
                .entry(task_id.to_owned().into())
                .or_default();
            snaps
                .pending
                .retain(|_, p| p.trigger != SnapshotTrigger::TurnEnd);
            snaps.pending.insert(
                e.seq,
                PendingSnapshot {
                    trigger: SnapshotTrigger::TurnEnd,
                    agent_session_id: session_id,
                    turn: p.turn,
                    review: p.review,
                    fork,
                },
            );
        }
        EventBody::SnapshotRequested(p) => {
            let fork = state
                .sessions
                .get(&session_id)
                .and_then(|s| s.last_kept.clone());
            state
                .snapshots
                .entry(task_id.to_owned().into())
                .or_default()
                .pending
                .insert(
                    e.seq,
                    PendingSnapshot {
                        trigger: p.trigger,
                        agent_session_id: session_id,
                        turn: 0,
                        review: false,
                        fork,
                    },
                );
        }
        EventBody::SnapshotTaken(p) => {
            let snaps = state
                .snapshots
                .entry(task_id.to_owned().into())
                .or_default();
            snaps.pending.remove(&p.cause_seq);
            if p.n as usize == snaps.taken.len() + 1 {
                snaps.taken.push(Snapshot {
                    id: p.id.clone(),
                    task_id: task_id.to_owned().into(),
                    agent_session_id: session_id,
                    n: p.n,
                    commit: p.commit.clone(),
                    tree: p.tree.clone(),
                    event_seq: p.event_seq,
                    trigger: p.trigger,
                    branch_advanced: p.branch_advanced,
                    created_at_us: e.created_at_us,
                    seq: e.seq,
                    fork: crate::fork::ForkPoint::of(&p.fork_from, &p.fork_at),
                });
            }
        }
        EventBody::SnapshotFailed(p) => {
            if let Some(snaps) = state.snapshots.get_mut(task_id) {
                snaps.pending.remove(&p.cause_seq);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    //! Given / when / then for snapshot causes and outcomes.
    use super::*;
    use crate::sessions::TurnOutcome;
    use crate::testkit::World;
    use crate::{Command, Event};

    impl World {
        /// A user, a project and a task whose worktree is made.
        fn with_worktree() -> World {
            let mut w = World::with_task();
            let task_id = w.task_id();
            w.ok(Command::RecordWorktree {
                task_id: task_id.into(),
                outcome: Ok("abc".into()),
            });
            w
        }

        /// Starts a session and ends its first turn; the seq of `turn.ended`.
        fn turn(&mut self) -> u64 {
            if self.state.sessions.is_empty() {
                self.start("go");
            } else {
                let sid = self.state.sessions.keys().next().unwrap().clone();
                self.ok(Command::SendMessage {
                    actor: "ada".into(),
                    session_id: sid,
                    text: "more".into(),
                    images: vec![],
                    model: None,
                    head: "h".into(),
                });
            }
            let sid = self.state.sessions.keys().next().unwrap().clone();
            let events = self.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
            events
                .iter()
                .find(|e| e.body.kind() == "turn.ended")
                .unwrap()
                .seq
        }

        fn record(&mut self, cause_seq: u64, n: u32) -> Result<Vec<Event>, Rejection> {
            let task_id = self.task_id();
            self.when(Command::RecordSnapshot {
                task_id: task_id.into(),
                cause_seq,
                outcome: Ok(TakenSnapshot {
                    n,
                    commit: format!("{n:040}"),
                    tree: "t".repeat(40),
                    event_seq: cause_seq,
                    branch_advanced: true,
                }),
                review: false,
            })
        }

        fn pending(&self) -> Vec<u64> {
            self.state.snapshots[&self.task_id()]
                .pending
                .keys()
                .copied()
                .collect()
        }
    }

    #[test]
    fn a_turn_end_waits_for_its_snapshot_and_a_newer_one_replaces_it() {
        let mut w = World::with_worktree();
        let first = w.turn();
        assert_eq!(w.pending(), [first]);
        let second = w.turn();
        assert_eq!(
            w.pending(),
            [second],
            "the older turn's snapshot is not needed"
        );
        let events = w.record(second, 1).unwrap();
        let EventBody::SnapshotTaken(t) = &events[0].body else {
            panic!("snapshot.taken expected")
        };
        assert_eq!(
            (t.n, t.trigger, t.cause_seq),
            (1, SnapshotTrigger::TurnEnd, second)
        );
        assert!(events[0].agent_session_id.is_some());
        assert!(w.pending().is_empty());
        let snaps = w.state.task_snapshots(&w.task_id());
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].seq, events[0].seq);
        assert_eq!(
            w.record(second, 2).unwrap(),
            vec![],
            "a repeated outcome changes nothing"
        );
    }

    #[test]
    fn a_snapshot_taken_for_a_turn_end_replaced_meanwhile_is_still_recorded_once() {
        let mut w = World::with_worktree();
        let first = w.turn();
        // The reactor is taking the first turn's snapshot when the next turn ends.
        let second = w.turn();
        assert_eq!(w.pending(), [second]);
        let events = w.record(first, 1).unwrap();
        let EventBody::SnapshotTaken(t) = &events[0].body else {
            panic!("snapshot.taken expected, got {events:?}")
        };
        assert_eq!(
            (t.n, t.trigger, t.cause_seq),
            (1, SnapshotTrigger::TurnEnd, first)
        );
        assert!(events[0].agent_session_id.is_some());
        assert_eq!(w.pending(), [second], "the newer turn still gets its own");
        assert_eq!(w.record(first, 1).unwrap(), vec![], "recorded once");
        let failed = w
            .when(Command::RecordSnapshot {
                task_id: w.task_id().into(),
                cause_seq: first,
                outcome: Err("late".into()),
                review: false,
            })
            .unwrap();
        assert_eq!(failed, vec![], "a replaced cause's failure is not recorded");
        w.record(second, 2).unwrap();
        assert!(w.pending().is_empty());
        let snaps = w.state.task_snapshots(&w.task_id());
        assert_eq!(snaps.iter().map(|s| s.n).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn requested_snapshots_need_an_open_task_and_take_the_next_position() {
        let mut w = World::with_worktree();
        let task_id = w.task_id();
        let ask = |trigger| Command::RequestSnapshot {
            task_id: task_id.clone().into(),
            trigger,
        };
        assert!(matches!(
            w.when(ask(SnapshotTrigger::TurnEnd)),
            Err(Rejection::Invalid(_))
        ));
        assert!(matches!(
            w.when(Command::RequestSnapshot {
                task_id: "nope".into(),
                trigger: SnapshotTrigger::Requested
            }),
            Err(Rejection::NotFound(_))
        ));
        let requested = w.ok(ask(SnapshotTrigger::Requested));
        assert_eq!(requested[0].body.kind(), "snapshot.requested");
        let turn = w.turn();
        assert_eq!(w.pending(), [requested[0].seq, turn]);
        assert!(matches!(w.record(turn, 2), Err(Rejection::Conflict(_))));
        w.record(requested[0].seq, 1).unwrap();
        let failed = w
            .when(Command::RecordSnapshot {
                task_id: task_id.clone().into(),
                cause_seq: turn,
                outcome: Err("a rebase is in progress".into()),
                review: false,
            })
            .unwrap();
        assert_eq!(failed[0].body.kind(), "snapshot.failed");
        assert!(w.pending().is_empty());
        let snaps = w.state.task_snapshots(&task_id);
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].trigger, SnapshotTrigger::Requested);
    }
}
