//! Forks: `forkSnapshot`, a new task started at one of a task's snapshots, with an idle
//! agent session that continues the snapshot's conversation through the vendor's own fork.
//!
//! What a fork needs is recorded when it happens, never guessed later: every `turn.ended`
//! carries the vendor's id of the last thing the turn left in the conversation
//! (`last_vendor_id`: Claude Code's last assistant message uuid, Codex's turn id), the
//! session keeps the latest as [`crate::sessions::Session::last_kept`], a snapshot's cause
//! takes the session's fork point as it stood then, and `snapshot.taken` records it
//! (`fork_from`, `fork_at`). A fork's `task.created` names its origin (`forked_from`,
//! `forked_at`: the task and the snapshot's `n`), and its `session.created` the vendor session
//! its first start resumes and where it is cut.

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::sessions::{SessionCreated, SessionRole, Vendor};
use crate::tasks::TaskStatus;
use crate::{DecideCtx, Rejection, State};

/// Where a conversation is cut for a fork: a vendor session and the vendor's id of the last
/// thing kept in it (a Claude Code assistant message uuid, a Codex turn id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    /// The vendor's session id (Claude Code's session, Codex's thread).
    pub vendor_session_id: String,
    /// The vendor's id of the last thing kept.
    pub at: String,
}

impl ForkPoint {
    /// The point two optional payload fields name; `None` unless both are there.
    pub fn of(from: &Option<String>, at: &Option<String>) -> Option<ForkPoint> {
        Some(ForkPoint {
            vendor_session_id: from.clone()?,
            at: at.clone()?,
        })
    }
}

/// The longest title a fork gets (task titles are at most 200 characters).
const MAX_TITLE_CHARS: usize = 200;

/// A fork's title: its origin's, with the snapshot it starts at.
fn fork_title(title: &str, n: u32) -> String {
    let suffix = format!(" (fork at snapshot {n})");
    let keep = MAX_TITLE_CHARS.saturating_sub(suffix.chars().count());
    let mut out: String = title.chars().take(keep).collect();
    out.push_str(&suffix);
    out
}

/// Decides `ForkSnapshot`: `task.created` (branch at snapshot `n`'s commit, `forked_from` /
/// `forked_at`) and the fork's idle `session.created` (same vendor and model as the
/// snapshot's session, `forked_from` / `forked_at` its fork point), in one batch.
/// 404 unknown task or snapshot; 409 task closed, or the snapshot follows no recorded agent
/// message (no turn of its session had ended naming its last message), or its session is
/// one whose vendor cannot fork (CodeBolt).
pub(crate) fn fork_snapshot(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    n: u32,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    let snap = state
        .task_snapshots(task_id)
        .iter()
        .find(|s| s.n == n)
        .ok_or_else(|| Rejection::NotFound(format!("task `{task_id}` has no snapshot {n}")))?;
    if task.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` is closed; only an open task's snapshots can be forked"
        )));
    }
    let no_message = || {
        Rejection::Conflict(format!(
            "snapshot {n} of task `{task_id}` follows no recorded agent message: there is no conversation to fork"
        ))
    };
    let fork = snap.fork.as_ref().ok_or_else(no_message)?;
    let source = state
        .sessions
        .get(&snap.agent_session_id)
        .filter(|s| s.role == SessionRole::Implementer)
        .ok_or_else(no_message)?;
    if source.vendor == Vendor::Codebolt {
        return Err(Rejection::Conflict(
            "a CodeBolt agent's conversation cannot be forked".into(),
        ));
    }
    let title = fork_title(&task.title, n);
    let mut events =
        crate::tasks::create(state, ctx, actor, &task.project_id, &title, &snap.commit)?;
    let new_task_id = ctx.id(0);
    for e in &mut events {
        if let EventBody::TaskCreated(p) = &mut e.body {
            p.forked_from = Some(task_id.to_owned());
            p.forked_at = Some(n);
        }
    }
    let session_id = ctx.id(1);
    let created = SessionCreated {
        id: session_id.clone().into(),
        task_id: new_task_id.clone().into(),
        vendor: source.vendor,
        model: source.model.clone(),
        vendor_session_id: match source.vendor {
            Vendor::Claude => ctx.id(2),
            Vendor::Codex | Vendor::Codebolt => String::new(),
        },
        role: SessionRole::Implementer,
        forked_from: Some(fork.vendor_session_id.clone()),
        forked_at: Some(fork.at.clone()),
    };
    let mut e = NewEvent::new(actor, EventBody::SessionCreated(created))
        .project(task.project_id.clone())
        .task(new_task_id.clone());
    e.agent_session_id = Some(session_id.into());
    events.push(e);
    // A fork of a stage task is a new attempt of its stage (`crate::runs`).
    events.extend(crate::runs::fork_attempt(
        state,
        actor,
        task_id,
        &new_task_id,
    ));
    Ok(events)
}

#[cfg(test)]
mod tests {
    //! Given / when / then for `ForkSnapshot`.
    use super::*;
    use crate::sessions::TurnOutcome;
    use crate::snapshots::TakenSnapshot;
    use crate::testkit::World;
    use crate::Command;

    impl World {
        /// A task with a made worktree, a session, one ended turn (naming `last`) and its
        /// snapshot 1.
        fn with_snapshot(last: Option<&str>) -> World {
            let mut w = World::with_task();
            let task_id = w.task_id();
            w.ok(Command::RecordWorktree {
                task_id: task_id.clone().into(),
                outcome: Ok("abc".into()),
            });
            w.start("go");
            let sid = w.session().id.clone();
            let ended = crate::sessions::TurnEnded {
                cut: None,
                turn: 0,
                outcome: TurnOutcome::Completed,
                summary: false,
                result: "done".into(),
                error: String::new(),
                usage: crate::sessions::Usage::default(),
                cost_micro_usd: 0,
                duration_ms: 1,
                num_turns: 1,
                api_error_status: None,
                rate_limits: None,
                last_vendor_id: last.map(str::to_owned),
                review: false,
                raw: "{}".into(),
            };
            let events = w.ok(Command::RecordVendorOutput {
                session_id: sid,
                items: vec![crate::sessions::VendorItem::TurnEnded(ended)],
            });
            let cause_seq = events
                .iter()
                .find(|e| e.body.kind() == "turn.ended")
                .unwrap()
                .seq;
            w.ok(Command::RecordSnapshot {
                task_id: task_id.into(),
                cause_seq,
                outcome: Ok(TakenSnapshot {
                    n: 1,
                    commit: "c".repeat(40),
                    tree: "t".repeat(40),
                    event_seq: cause_seq,
                    branch_advanced: true,
                }),
                review: false,
            });
            w
        }

        fn fork(&mut self, n: u32) -> Result<Vec<crate::Event>, Rejection> {
            let task_id = self.task_id();
            self.when(Command::ForkSnapshot {
                actor: "ada".into(),
                task_id: task_id.into(),
                n,
            })
        }
    }

    #[test]
    fn a_fork_is_a_task_at_the_snapshot_with_an_idle_session_cut_at_its_last_message() {
        let mut w = World::with_snapshot(Some("msg-uuid-1"));
        let source = w.session().clone();
        let snap = w.state.task_snapshots(&w.task_id())[0].clone();
        assert_eq!(
            snap.fork,
            Some(ForkPoint {
                vendor_session_id: source.vendor_session_id.clone(),
                at: "msg-uuid-1".into()
            })
        );
        let events = w.fork(1).unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.body.kind()).collect();
        assert!(
            kinds.starts_with(&["task.created", "session.created"]),
            "{kinds:?}"
        );
        let EventBody::TaskCreated(t) = &events[0].body else {
            panic!()
        };
        assert_eq!(t.base_ref, "c".repeat(40));
        assert_eq!(t.forked_from.as_deref(), Some(w.task_id().as_str()));
        assert_eq!(t.forked_at, Some(1));
        let fork_task = &w.state.tasks[&t.id];
        assert_eq!(fork_task.forked_from, Some((w.task_id(), 1)));
        let EventBody::SessionCreated(s) = &events[1].body else {
            panic!()
        };
        let fork_session = &w.state.sessions[&s.id];
        assert_eq!(fork_session.task_id, t.id);
        assert_eq!(
            (fork_session.vendor, fork_session.model.as_str()),
            (source.vendor, source.model.as_str())
        );
        assert_ne!(fork_session.vendor_session_id, source.vendor_session_id);
        assert!(!fork_session.turn_running);
        assert_eq!(fork_session.forked_from, snap.fork);
        assert_eq!(
            fork_task.state,
            crate::tasks::TaskState::Idle,
            "an idle session, no turn"
        );
    }

    #[test]
    fn forks_are_refused_for_unknown_snapshots_closed_tasks_and_snapshots_without_a_message() {
        let mut w = World::with_snapshot(None);
        assert!(matches!(w.fork(2), Err(Rejection::NotFound(_))));
        assert!(
            matches!(w.fork(1), Err(Rejection::Conflict(_))),
            "no message to cut at"
        );
        assert!(matches!(
            w.when(Command::ForkSnapshot {
                actor: "ada".into(),
                task_id: "nope".into(),
                n: 1
            }),
            Err(Rejection::NotFound(_))
        ));
        let mut w = World::with_snapshot(Some("m"));
        let tid = w.task_id();
        w.state.tasks.get_mut(&tid).unwrap().status = TaskStatus::Discarded;
        assert!(matches!(w.fork(1), Err(Rejection::Conflict(_))));
    }

    #[test]
    fn fork_titles_stay_within_the_title_limit() {
        assert_eq!(fork_title("Fix it", 2), "Fix it (fork at snapshot 2)");
        assert_eq!(fork_title(&"é".repeat(200), 3).chars().count(), 200);
    }
}
