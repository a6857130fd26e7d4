//! Given / when / then for finishing a task: held merges, the merge turn's end, discards.
use super::*;
use crate::testkit::{kinds, World};
use crate::{Command, Event};

impl World {
    fn new() -> World {
        let mut w = World::empty();
        for login in ["ada", "bob"] {
            w.ensure_user(login, login);
        }
        w.ok(Command::UpdateMe {
            login: "ada".into(),
            git_name: "Ada".into(),
            git_email: "ada@example.com".into(),
        });
        w.create_project();
        w
    }

    /// A task whose agent (started by `who`) finished its first turn; (task, session).
    fn idle_task(&mut self, title: &str, who: &str) -> (String, String) {
        let events = self.ok(Command::CreateTask {
            actor: "ada".into(),
            project_id: self.project.clone(),
            title: title.into(),
            base_ref: "abc".into(),
        });
        let task = events[0].task_id.clone().unwrap();
        let events = self.ok(Command::CreateSession {
            actor: who.into(),
            task_id: task.clone(),
            model: None,
            prompt: "work".into(),
            images: vec![],
            head: "h".into(),
        });
        let sid = events[0].agent_session_id.clone().unwrap();
        self.end_turn(&sid, TurnOutcome::Completed);
        (task.into(), sid.into())
    }

    /// `ada` starts a turn on session `sid`.
    fn start_turn(&mut self, sid: &str) {
        self.ok(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid.to_owned().into(),
            text: "slow".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        });
    }

    /// `ada` discards `task`, with the summary turn or without.
    fn discard(&mut self, task: &str, summary: bool) -> Vec<Event> {
        self.ok(Command::DiscardTask {
            actor: "ada".into(),
            task_id: task.to_owned().into(),
            summary,
            head: "h".into(),
        })
    }

    fn end_turn(&mut self, sid: &str, outcome: TurnOutcome) -> Vec<Event> {
        let mut events = self.record_turn_end(sid, outcome, "done", None);
        let task_id = self.state.sessions[sid].task_id.clone();
        assert!(
            !merge_due(&self.state, self.task(&task_id))
                && !discard_due(&self.state, self.task(&task_id)),
            "nothing is due before the turn's snapshot is recorded"
        );
        self.settle_snapshots(&task_id);
        events.retain(|e| !e.body.kind().starts_with("snapshot."));
        events
    }

    /// Answers the task's pending snapshots, as the snapshot reactor would.
    fn settle_snapshots(&mut self, task_id: &str) {
        let pending: Vec<u64> = self
            .state
            .snapshots
            .get(task_id)
            .map(|s| s.pending.keys().copied().collect())
            .unwrap_or_default();
        for cause_seq in pending {
            self.ok(Command::RecordSnapshot {
                task_id: task_id.into(),
                cause_seq,
                outcome: Err("not in this test".into()),
                review: false,
            });
        }
    }

    fn merge(&mut self, task: &str, title: &str) -> Result<Vec<Event>, Rejection> {
        self.when(Command::MergeTask {
            actor: "ada".into(),
            task_id: task.into(),
            merge_title: Some(title.into()),
            target_parent: false,
            after_review: false,
            head: "h".into(),
        })
    }

    fn task(&self, id: &str) -> &Task {
        &self.state.tasks[id]
    }
}

fn done() -> Result<MergeDone, String> {
    Ok(MergeDone {
        merge_commit: "c".repeat(40),
        kept_ref: "refs/byre/tasks/t/snap/1".into(),
        cleanup_error: String::new(),
    })
}

#[test]
fn a_second_merge_is_held_and_starts_after_the_first_lands() {
    let mut w = World::new();
    let (a, _) = w.idle_task("a", "ada");
    let (b, _) = w.idle_task("b", "ada");
    let events = w.merge(&a, "Merge a").unwrap();
    assert_eq!(
        kinds(&events),
        [
            "task.merge_requested",
            "user.message",
            "turn.started",
            "session.state",
            "task.state"
        ]
    );
    assert_eq!(events[1].actor, "byre", "the merge-in prompt is byre's");
    assert!(w.task(&a).merging);
    assert!(!finish_due(&w, &a), "not before the merge turn ends");
    w.merge(&b, "Merge b").unwrap();
    assert!(!w.task(&b).merging);
    assert!(w.task(&b).merge_queued_at_us.is_some());
    assert!(matches!(w.merge(&b, "again"), Err(Rejection::Conflict(_))));
    let nothing = w.ok(Command::StartHeldMerge {
        task_id: b.clone().into(),
        head: "h".into(),
    });
    assert!(nothing.is_empty(), "a's merge still runs");

    let sid = w.task(&a).merge_turn.clone().unwrap().0;
    w.end_turn(&sid, TurnOutcome::Completed);
    assert!(finish_due(&w, &a));
    let landed = w.ok(Command::RecordMergeLanded {
        task_id: a.clone().into(),
        merge_commit: "c".repeat(40),
    });
    assert_eq!(kinds(&landed), ["task.merge_landed"]);
    assert_eq!(
        w.task(&a).merge_landed.as_deref(),
        Some("c".repeat(40).as_str())
    );
    assert!(finish_due(&w, &a), "the removal is still due");
    let again = w.ok(Command::RecordMergeLanded {
        task_id: a.clone().into(),
        merge_commit: "d".repeat(40),
    });
    assert!(again.is_empty(), "recorded once");
    let closed = w.ok(Command::RecordMerge {
        task_id: a.clone().into(),
        outcome: done(),
    });
    assert!(kinds(&closed).contains(&"task.merged"));
    assert!(kinds(&closed).contains(&"session.completed"));
    assert_eq!(w.task(&a).status, TaskStatus::Merged);
    assert!(w
        .ok(Command::RecordMerge {
            task_id: a.clone().into(),
            outcome: done()
        })
        .is_empty());

    let started = w.ok(Command::StartHeldMerge {
        task_id: b.clone().into(),
        head: "h".into(),
    });
    assert_eq!(kinds(&started)[0], "task.merge_started");
    assert!(w.task(&b).merging);
    assert!(w.task(&b).merge_queued_at_us.is_none());
}

fn finish_due(w: &World, task: &str) -> bool {
    merge_due(&w.state, w.task(task))
}

#[test]
fn an_interrupted_merge_turn_fails_the_merge_and_a_refused_squash_too() {
    let mut w = World::new();
    let (a, _) = w.idle_task("a", "ada");
    w.merge(&a, "Merge a").unwrap();
    let sid = w.task(&a).merge_turn.clone().unwrap().0;
    let events = w.end_turn(&sid, TurnOutcome::Interrupted);
    assert!(kinds(&events).contains(&"task.merge_failed"));
    assert!(!w.task(&a).merging);
    assert_eq!(w.task(&a).status, TaskStatus::Active);

    w.merge(&a, "Merge a").unwrap();
    let sid = w.task(&a).merge_turn.clone().unwrap().0;
    w.end_turn(&sid, TurnOutcome::Completed);
    let failed = w.ok(Command::RecordMerge {
        task_id: a.clone().into(),
        outcome: Err("conflict in lib.txt".into()),
    });
    assert_eq!(kinds(&failed)[0], "task.merge_failed");
    assert!(!w.task(&a).merging);
}

#[test]
fn merge_refusals_follow_the_spec() {
    let mut w = World::new();
    let (a, sid) = w.idle_task("a", "ada");
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "more".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert!(
        matches!(w.merge(&a, "t"), Err(Rejection::Conflict(m)) if m.contains("running a turn"))
    );
    w.end_turn(&sid, TurnOutcome::Completed);
    assert!(matches!(
        w.merge(&a, &"x".repeat(73)),
        Err(Rejection::Invalid(_))
    ));
    assert!(matches!(w.merge(&a, "a\nb"), Err(Rejection::Invalid(_))));
    let no_identity = w.when(Command::MergeTask {
        actor: "bob".into(),
        task_id: a.clone().into(),
        merge_title: Some("t".into()),
        target_parent: false,
        after_review: false,
        head: "h".into(),
    });
    assert!(matches!(no_identity, Err(Rejection::Invalid(m)) if m.contains("git identity")));
    for bad in ["a\0b", "tab\there", "esc\u{1b}[31m"] {
        let r = w.when(Command::SetMergeTitle {
            session_id: sid.clone().into(),
            merge_title: bad.into(),
        });
        assert!(matches!(r, Err(Rejection::Invalid(_))), "{bad:?}: {r:?}");
    }
    w.merge(&a, "t").unwrap();
    let msg = w.when(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.into(),
        text: "meanwhile".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert!(
        matches!(msg, Err(Rejection::Conflict(_))),
        "nothing else while merging"
    );
    let merge_sid = w.task(&a).merge_turn.clone().unwrap().0;
    let retitle = w.when(Command::SetMergeTitle {
        session_id: merge_sid.clone(),
        merge_title: "Another title".into(),
    });
    assert!(
        matches!(retitle, Err(Rejection::Conflict(_))),
        "the title is fixed once confirmed"
    );
    assert_eq!(w.task(&a).merge_title, "t");
    w.end_turn(&merge_sid, TurnOutcome::Completed);
    let compact = w.when(Command::CompactSession {
        actor: "ada".into(),
        session_id: merge_sid,
        model: None,
        head: "h".into(),
    });
    assert!(
        matches!(compact, Err(Rejection::Conflict(_))),
        "no compaction while merging"
    );
    let discard = w.when(Command::DiscardTask {
        actor: "ada".into(),
        task_id: a.into(),
        summary: true,
        head: "h".into(),
    });
    assert!(matches!(discard, Err(Rejection::Conflict(m)) if m.contains("merging")));
}

#[test]
fn a_discard_without_a_summary_runs_no_turn() {
    let mut w = World::new();
    // Idle: due at once, no turn.
    let (a, _) = w.idle_task("a", "ada");
    let events = w.discard(&a, false);
    assert!(!kinds(&events).contains(&"turn.started"), "{events:?}");
    assert!(discard_due(&w.state, w.task(&a)));

    // Mid-turn: waits for that turn only, and starts no summary turn after it.
    let (b, sid) = w.idle_task("b", "ada");
    w.start_turn(&sid);
    let events = w.discard(&b, false);
    assert!(!kinds(&events).contains(&"turn.started"), "{events:?}");
    assert!(!discard_due(&w.state, w.task(&b)));
    let ended = w.end_turn(&sid, TurnOutcome::Completed);
    let ks = kinds(&ended);
    assert!(!ks.contains(&"task.discard_turn_started"), "{ks:?}");
    assert!(!ks.contains(&"turn.started"), "{ks:?}");
    assert!(discard_due(&w.state, w.task(&b)));

    // No session at all: due at once.
    let events = w.ok(Command::CreateTask {
        actor: "ada".into(),
        project_id: w.project.clone(),
        title: "c".into(),
        base_ref: "abc".into(),
    });
    let c: String = events[0].task_id.clone().unwrap().into();
    w.discard(&c, false);
    assert!(discard_due(&w.state, w.task(&c)));
}

#[test]
fn an_older_discard_request_asked_for_the_summary() {
    let p: DiscardRequested =
        serde_json::from_str(r#"{"session_id": "", "turn": 0, "retry": false}"#).unwrap();
    assert!(p.summary);
}

#[test]
fn a_discard_waits_for_the_running_turn_then_runs_only_the_summary_turn() {
    let mut w = World::new();
    let (a, sid) = w.idle_task("a", "ada");
    w.start_turn(&sid);
    let events = w.discard(&a, true);
    assert!(
        !kinds(&events).contains(&"turn.started"),
        "waits for the running turn"
    );
    assert!(w.task(&a).discarding);
    assert!(!discard_due(&w.state, w.task(&a)));
    let ended = w.end_turn(&sid, TurnOutcome::Completed);
    let ks = kinds(&ended);
    assert!(ks.contains(&"task.discard_turn_started"), "{ks:?}");
    let msg = ended
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(msg, SUMMARY_PROMPT);
    assert!(!discard_due(&w.state, w.task(&a)));
    w.end_turn(&sid, TurnOutcome::Failed);
    assert!(
        discard_due(&w.state, w.task(&a)),
        "however the summary turn ends"
    );

    let failed = w.ok(Command::RecordDiscard {
        task_id: a.clone().into(),
        outcome: Err("busy".into()),
    });
    assert_eq!(kinds(&failed)[0], "task.cleanup_failed");
    assert!(!discard_due(&w.state, w.task(&a)));
    let retry = w.ok(Command::DiscardTask {
        actor: "ada".into(),
        task_id: a.clone().into(),
        summary: true,
        head: "h".into(),
    });
    assert_eq!(kinds(&retry), ["task.discard_requested"]);
    assert!(discard_due(&w.state, w.task(&a)));
    let closed = w.ok(Command::RecordDiscard {
        task_id: a.clone().into(),
        outcome: Ok(String::new()),
    });
    assert!(kinds(&closed).contains(&"task.discarded"));
    assert_eq!(w.task(&a).status, TaskStatus::Discarded);
    assert!(w.state.sessions[&sid].completed);
    // The failed summary turn's session_error item closed with the task.
    assert!(
        kinds(&closed).contains(&"inbox.closed"),
        "{:?}",
        kinds(&closed)
    );
    let items: Vec<_> = w.state.inbox.values().filter(|i| i.task_id == a).collect();
    assert!(!items.is_empty());
    assert!(items
        .iter()
        .all(|i| i.state == crate::inbox::InboxState::Dismissed
            && i.resolved_by.as_deref() == Some("byre")));
}

#[test]
fn co_authors_are_the_other_humans_in_order_of_their_first_message() {
    let mut w = World::new();
    let (a, sid) = w.idle_task("a", "bob");
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.into(),
        text: "hi".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let t = w.task(&a);
    assert_eq!(t.participants, ["bob", "ada"]);
    assert_eq!(co_authors(t, "ada").collect::<Vec<_>>(), ["bob"]);
    assert_eq!(co_authors(t, "carl").collect::<Vec<_>>(), ["bob", "ada"]);
}

#[test]
fn an_inbox_answer_delivered_under_a_human_makes_them_a_co_author_but_not_while_merging() {
    use crate::inbox::ResponseType;
    use crate::testkit;
    let mut w = World::new();
    let (a, sid) = w.idle_task("a", "ada");
    let ask = |w: &mut World| testkit::ask(w, &sid, "- ( ) red\n- (*) blue");
    let answer = |item_id: &str| testkit::answer(item_id, ResponseType::Option, &["blue"], "");
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "go on".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let q = ask(&mut w);
    w.ok(Command::RespondInbox {
        actor: "bob".into(),
        responses: vec![answer(&q)],
    });
    w.end_turn(&sid, TurnOutcome::Completed); // delivers bob's answer as his message
    w.end_turn(&sid, TurnOutcome::Completed);
    assert_eq!(co_authors(w.task(&a), "ada").collect::<Vec<_>>(), ["bob"]);

    // While merging, an answer waits: nothing is handed to the agent.
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "one more".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let q = ask(&mut w);
    w.end_turn(&sid, TurnOutcome::Completed);
    w.merge(&a, "t").unwrap();
    w.end_turn(&sid, TurnOutcome::Completed);
    let events = w.ok(Command::RespondInbox {
        actor: "bob".into(),
        responses: vec![answer(&q)],
    });
    assert_eq!(
        kinds(&events),
        ["inbox.responded"],
        "not delivered while merging"
    );
    assert!(merge_due(&w.state, w.task(&a)));
}

#[test]
fn a_discard_drops_a_held_merge() {
    let mut w = World::new();
    let (a, _) = w.idle_task("a", "ada");
    let (b, _) = w.idle_task("b", "ada");
    w.merge(&a, "Merge a").unwrap();
    w.merge(&b, "Merge b").unwrap();
    assert!(w.task(&b).merge_queued_at_us.is_some());
    let events = w.ok(Command::DiscardTask {
        actor: "ada".into(),
        task_id: b.clone().into(),
        summary: true,
        head: "h".into(),
    });
    assert!(
        kinds(&events).contains(&"turn.started"),
        "the summary turn starts at once"
    );
    assert!(w.task(&b).merge_queued_at_us.is_none());
    assert!(w.task(&b).discarding);
    let started = w.ok(Command::StartHeldMerge {
        task_id: b.into(),
        head: "h".into(),
    });
    assert!(started.is_empty(), "the dropped merge never starts");
}
