//! Given / when / then for reviews: request, pile-up, start, submit, fail, stop, findings,
//! and the task state they imply.
use super::*;
use crate::sessions::TurnOutcome;
use crate::snapshots::TakenSnapshot;
use crate::tasks::TaskState;
use crate::testkit::{kinds, World};
use crate::Command;

impl World {
    /// A task with a worktree and a live session whose first turn ended; returns the
    /// session and the seq of its `turn.ended`.
    fn reviewed_task() -> (World, String, u64) {
        let mut w = World::with_task();
        w.ok(Command::UpdateMe {
            login: "ada".into(),
            git_name: "Ada".into(),
            git_email: "ada@example.com".into(),
        });
        let task_id = w.task_id();
        w.ok(Command::RecordWorktree {
            task_id: task_id.into(),
            outcome: Ok("abc".into()),
        });
        let sid = w.start("go");
        let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
        let seq = ended
            .iter()
            .find(|e| e.body.kind() == "turn.ended")
            .unwrap()
            .seq;
        (w, sid, seq)
    }

    /// Records snapshot `n` for the cause at `cause_seq`, to be reviewed.
    fn snap(&mut self, cause_seq: u64, n: u32) -> Vec<crate::Event> {
        let task_id = self.task_id();
        self.ok(Command::RecordSnapshot {
            task_id: task_id.into(),
            cause_seq,
            outcome: Ok(TakenSnapshot {
                n,
                commit: format!("{n:040}"),
                tree: "t".repeat(40),
                event_seq: 1,
                branch_advanced: true,
            }),
            review: true,
        })
    }

    fn only_review(&self) -> Review {
        self.state
            .reviews
            .values()
            .max_by_key(|r| r.seq)
            .unwrap()
            .clone()
    }

    fn task_state(&self) -> TaskState {
        self.state.tasks[&self.task_id()].state
    }
}

fn result(findings: usize) -> ReviewResult {
    ReviewResult {
        summary: "ok".into(),
        findings: (0..findings)
            .map(|i| Finding {
                severity: "minor".into(),
                category: "tests".into(),
                title: format!("f{i}"),
                detail: "d".into(),
                path: "src/lib.rs".into(),
                line: 3,
            })
            .collect(),
    }
}

#[test]
fn a_snapshot_asks_for_its_review_and_the_task_waits_for_it() {
    let (mut w, _, seq) = World::reviewed_task();
    let events = w.snap(seq, 1);
    assert!(kinds(&events).contains(&"review.requested"));
    let r = w.only_review();
    assert_eq!(
        (r.snapshot_n, r.base_n, r.state),
        (1, 0, ReviewState::Pending)
    );
    assert_eq!(w.task_state(), TaskState::ReviewPending);
    assert!(
        w.state.task_reviews(&w.task_id()).is_empty(),
        "pending is not listed"
    );
}

#[test]
fn a_turn_end_on_a_reviewing_server_goes_straight_to_review_pending() {
    let mut w = World::with_task();
    w.reviews_on = true;
    let task_id = w.task_id();
    w.ok(Command::RecordWorktree {
        task_id: task_id.clone().into(),
        outcome: Ok("abc".into()),
    });
    let sid = w.start("go");
    assert_eq!(w.task_state(), TaskState::Running);
    let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    let turn_end = ended
        .iter()
        .find(|e| e.body.kind() == "turn.ended")
        .unwrap();
    assert!(
        matches!(&turn_end.body, crate::EventBody::TurnEnded(p) if p.review),
        "the turn end records that its snapshot will be reviewed"
    );
    let states: Vec<_> = ended
        .iter()
        .filter_map(|e| match &e.body {
            crate::EventBody::TaskState(p) => Some(p.state),
            _ => None,
        })
        .collect();
    assert_eq!(states, [TaskState::ReviewPending], "never idle in between");
    w.snap(turn_end.seq, 1);
    assert_eq!(w.task_state(), TaskState::ReviewPending);
}

#[test]
fn a_failed_turn_end_snapshot_ends_review_pending() {
    let mut w = World::with_task();
    w.reviews_on = true;
    let task_id = w.task_id();
    w.ok(Command::RecordWorktree {
        task_id: task_id.clone().into(),
        outcome: Ok("abc".into()),
    });
    let sid = w.start("go");
    let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    let seq = ended
        .iter()
        .find(|e| e.body.kind() == "turn.ended")
        .unwrap()
        .seq;
    assert_eq!(w.task_state(), TaskState::ReviewPending);
    w.ok(Command::RecordSnapshot {
        task_id: task_id.into(),
        cause_seq: seq,
        outcome: Err("a rebase is in progress".into()),
        review: true,
    });
    assert_eq!(
        w.task_state(),
        TaskState::Idle,
        "no snapshot, nothing to review"
    );
}

#[test]
fn no_review_unless_asked() {
    let (mut w, _, seq) = World::reviewed_task();
    let task_id = w.task_id();
    w.ok(Command::RecordSnapshot {
        task_id: task_id.into(),
        cause_seq: seq,
        outcome: Ok(TakenSnapshot {
            n: 1,
            commit: "1".repeat(40),
            tree: "t".repeat(40),
            event_seq: 1,
            branch_advanced: true,
        }),
        review: false,
    });
    assert!(w.state.reviews.is_empty());
    assert_eq!(w.task_state(), TaskState::Idle);
}

#[test]
fn a_newer_snapshot_skips_the_pending_review_and_covers_its_step() {
    let (mut w, sid, seq) = World::reviewed_task();
    w.snap(seq, 1);
    let first = w.only_review();
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "more".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    let seq2 = ended
        .iter()
        .find(|e| e.body.kind() == "turn.ended")
        .unwrap()
        .seq;
    w.snap(seq2, 2);
    assert_eq!(w.state.reviews[&first.id].state, ReviewState::Skipped);
    let second = w.only_review();
    assert_eq!((second.snapshot_n, second.base_n), (2, 0));
}

#[test]
fn start_submit_done_then_fixed_reaches_the_agent() {
    let (mut w, sid, seq) = World::reviewed_task();
    w.snap(seq, 1);
    let r = w.only_review();
    w.ok(Command::StartReview {
        review_id: r.id.clone(),
        model: "gpt-5-codex".into(),
        instructions: "review".into(),
        head: "h".into(),
    });
    let rev = w.only_review().agent_session_id;
    assert_eq!(w.task_state(), TaskState::Reviewing);
    let reviewer = &w.state.sessions[&rev];
    assert_eq!(reviewer.role, crate::sessions::SessionRole::Reviewer);
    assert_eq!(reviewer.vendor, crate::sessions::Vendor::Codex);
    assert!(w
        .state
        .task_sessions(&w.task_id())
        .iter()
        .all(|s| s.id != rev));
    let bad = ReviewResult {
        findings: vec![Finding {
            line: 0,
            ..result(1).findings[0].clone()
        }],
        ..result(0)
    };
    assert!(matches!(
        w.when(Command::SubmitReview {
            session_id: rev.clone(),
            result: bad
        }),
        Err(Rejection::Invalid(_))
    ));
    w.ok(Command::SubmitReview {
        session_id: rev.clone(),
        result: result(2),
    });
    assert_eq!(w.only_review().state, ReviewState::Done);
    assert_eq!(w.task_state(), TaskState::Idle);
    let ended = w.ok(Command::EndReviewer {
        review_id: r.id.clone(),
    });
    assert!(kinds(&ended).contains(&"session.completed"));
    assert!(w.state.sessions[&rev].completed);
    let set = |index, state| Command::SetFindingState {
        actor: "ada".into(),
        review_id: r.id.clone(),
        index,
        state,
        head: "h".into(),
    };
    assert!(matches!(
        w.when(set(2, FindingState::Ignored)),
        Err(Rejection::Invalid(_))
    ));
    let events = w.ok(set(1, FindingState::Fixed));
    assert!(kinds(&events).contains(&"user.message"));
    let msg = events
        .iter()
        .find(|e| e.body.kind() == "user.message")
        .unwrap();
    assert_eq!(msg.agent_session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(msg.actor, "ada");
    assert_eq!(
        w.only_review().finding_states.get(&1),
        Some(&FindingState::Fixed)
    );
    // Fixed again (a double click, two requests racing): nothing recorded, nothing sent twice.
    assert!(w.ok(set(1, FindingState::Fixed)).is_empty());
    let ignored = w.ok(set(1, FindingState::Ignored));
    assert_eq!(kinds(&ignored), ["review.finding_state_set"]);
}

#[test]
fn a_reviewer_running_when_byre_restarted_is_not_resumed_and_its_review_fails() {
    let (mut w, _, seq) = World::reviewed_task();
    w.snap(seq, 1);
    let r = w.only_review();
    w.ok(Command::StartReview {
        review_id: r.id.clone(),
        model: "gpt-5-codex".into(),
        instructions: "review".into(),
        head: "h".into(),
    });
    let rev = w.only_review().agent_session_id;
    assert!(w.state.sessions[&rev].turn_running);
    let events = w.restart(&rev);
    let k = kinds(&events);
    assert!(
        !k.contains(&"user.message") && !k.contains(&"turn.started"),
        "no second turn for the reviewer: {k:?}"
    );
    assert!(!k.contains(&"inbox.item_created"), "{k:?}");
    let failed = w.only_review();
    assert_eq!(failed.state, ReviewState::Failed);
    assert_eq!(failed.error, STOPPED_UNDER_REVIEWER);
    assert!(!w.state.sessions[&rev].turn_running);
    assert_eq!(w.task_state(), TaskState::Idle);
}

#[test]
fn stop_fails_a_running_review_and_refuses_otherwise() {
    let (mut w, _, seq) = World::reviewed_task();
    w.snap(seq, 1);
    let r = w.only_review();
    let stop = || Command::StopReview {
        actor: "ada".into(),
        review_id: r.id.clone(),
    };
    assert!(matches!(w.when(stop()), Err(Rejection::Conflict(_))));
    w.ok(Command::StartReview {
        review_id: r.id.clone(),
        model: "gpt-5-codex".into(),
        instructions: "review".into(),
        head: "h".into(),
    });
    w.ok(stop());
    let done = w.only_review();
    assert_eq!(done.state, ReviewState::Failed);
    assert!(done.error.contains("stopped"));
    assert!(w
        .ok(Command::FailReview {
            review_id: r.id.clone(),
            error: "late".into()
        })
        .is_empty());
    assert!(matches!(
        w.when(Command::StopReview {
            actor: "ada".into(),
            review_id: "nope".into()
        }),
        Err(Rejection::NotFound(_))
    ));
}

#[test]
fn a_merge_after_review_waits_for_the_running_review_and_is_dropped_on_findings() {
    let (mut w, _, seq) = World::reviewed_task();
    let task_id = w.task_id();
    let merge = |w: &mut World| {
        w.when(Command::MergeTask {
            actor: "ada".into(),
            task_id: w.task_id().into(),
            merge_title: Some("Add hello".into()),
            target_parent: false,
            after_review: true,
            head: "h".into(),
        })
    };
    assert!(
        matches!(merge(&mut w), Err(Rejection::Conflict(_))),
        "no review runs"
    );
    w.snap(seq, 1);
    let r = w.only_review();
    w.ok(Command::StartReview {
        review_id: r.id.clone(),
        model: "gpt-5.5".into(),
        instructions: "review".into(),
        head: "h".into(),
    });
    let rev = w.only_review().agent_session_id;
    merge(&mut w).unwrap();
    assert!(w.state.tasks[&task_id].merge_after_review);
    assert!(
        matches!(merge(&mut w), Err(Rejection::Conflict(_))),
        "already waiting"
    );
    let done = w.ok(Command::SubmitReview {
        session_id: rev,
        result: result(1),
    });
    assert!(kinds(&done).contains(&"task.merge_after_review_dropped"));
    assert!(!w.state.tasks[&task_id].merge_after_review);
    assert!(w.state.after_review.is_empty());
}

#[test]
fn a_clean_review_leaves_the_merge_waiting_and_cancel_withdraws_it() {
    let (mut w, _, seq) = World::reviewed_task();
    let task_id = w.task_id();
    w.snap(seq, 1);
    let r = w.only_review();
    w.ok(Command::StartReview {
        review_id: r.id.clone(),
        model: "gpt-5.5".into(),
        instructions: "review".into(),
        head: "h".into(),
    });
    let rev = w.only_review().agent_session_id;
    w.ok(Command::MergeTask {
        actor: "ada".into(),
        task_id: task_id.clone().into(),
        merge_title: Some("Add hello".into()),
        target_parent: false,
        after_review: true,
        head: "h".into(),
    });
    let done = w.ok(Command::SubmitReview {
        session_id: rev,
        result: result(0),
    });
    assert!(!kinds(&done).contains(&"task.merge_after_review_dropped"));
    assert_eq!(w.state.after_review[&task_id].by, "ada");
    let cancel = || Command::CancelMergeAfterReview {
        actor: "ada".into(),
        task_id: task_id.clone().into(),
        reason: None,
    };
    w.ok(cancel());
    assert!(!w.state.tasks[&task_id].merge_after_review);
    assert!(matches!(w.when(cancel()), Err(Rejection::NotFound(_))));
}
