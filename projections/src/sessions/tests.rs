//! Given / when / then for the session commands.
use super::*;
use crate::testkit::{answer, ask, kinds, World};
use crate::Command;

impl World {
    /// A first session that asked a red-or-blue question, ended its turn and was compacted;
    /// (its id, the question's inbox item, the successor's id, whose first turn runs).
    fn compacted_after_a_question(&mut self) -> (String, String, String) {
        let old = self.start("go");
        let q = ask(self, &old, "- ( ) red\n- (*) blue");
        self.record_turn_end(&old, TurnOutcome::Completed, "Asked.", None);
        self.ok(Command::CompactSession {
            actor: "ada".into(),
            session_id: old.clone().into(),
            model: None,
            head: "h".into(),
        });
        self.record_turn_end(&old, TurnOutcome::Completed, "the handoff", None);
        let successor = self.session().id.clone();
        (old, q, successor.into())
    }
}

#[test]
fn a_new_session_starts_its_first_turn_and_the_task_runs() {
    let mut w = World::with_task();
    let task_id = w.task_id();
    let events = w.ok(Command::CreateSession {
        actor: "ada".into(),
        task_id: task_id.clone().into(),
        model: None,
        prompt: "go".into(),
        images: vec![],
        head: "h".into(),
    });
    assert_eq!(
        kinds(&events),
        [
            "session.created",
            "user.message",
            "turn.started",
            "session.state",
            "task.state"
        ]
    );
    assert_eq!(w.session().model, "sonnet", "the caller's default model");
    assert_eq!(
        w.state.tasks[&task_id].state,
        crate::tasks::TaskState::Running
    );
    let again = w.when(Command::CreateSession {
        actor: "ada".into(),
        task_id: task_id.into(),
        model: None,
        prompt: "go".into(),
        images: vec![],
        head: "h".into(),
    });
    assert!(matches!(again, Err(Rejection::Conflict(_))));
}

#[test]
fn messages_queue_while_running_and_the_oldest_is_the_next_turn() {
    let mut w = World::with_task();
    let sid = w.start("one");
    let q1 = w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "two".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert_eq!(kinds(&q1), ["user.queued"]);
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "three".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    assert_eq!(
        kinds(&ended),
        ["turn.ended", "user.message", "turn.started"]
    );
    let EventBody::UserMessage(m) = &ended[1].body else {
        panic!()
    };
    assert_eq!(m.text, "two");
    assert_eq!(w.session().queue.len(), 1);
    assert_eq!(
        w.state.tasks[&w.task_id()].summary_seq,
        ended[0].seq,
        "a completed turn with text is a summary"
    );
}

#[test]
fn withdraw_works_only_while_queued() {
    let mut w = World::with_task();
    let task_id = w.task_id();
    let sid = w.start("one");
    let q = w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "two".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let EventBody::UserQueued(p) = &q[0].body else {
        panic!()
    };
    let withdraw = |id| Command::WithdrawMessage {
        actor: "ada".into(),
        task_id: task_id.clone().into(),
        input_id: id,
    };
    assert_eq!(kinds(&w.ok(withdraw(p.input_id))), ["user.unqueued"]);
    assert!(matches!(
        w.when(withdraw(p.input_id)),
        Err(Rejection::Conflict(_))
    ));
    assert!(
        matches!(w.when(withdraw(1)), Err(Rejection::Conflict(_))),
        "the first message was handed over"
    );
    assert!(matches!(w.when(withdraw(99)), Err(Rejection::NotFound(_))));
    let ended = w.record_turn_end(&sid, TurnOutcome::Completed, "", None);
    assert_eq!(
        kinds(&ended),
        ["turn.ended", "session.state", "task.state"],
        "nothing queued is left"
    );
}

#[test]
fn failures_become_inbox_items_and_an_interrupt_is_not_a_failure() {
    let mut w = World::with_task();
    let sid = w.start("one");
    let failed = w.record_turn_end(&sid, TurnOutcome::Failed, "", Some(429));
    assert!(kinds(&failed).contains(&"inbox.item_created"));
    let item = w.state.inbox.values().next().unwrap();
    assert_eq!(item.kind, InboxKind::RateLimited);
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "again".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    w.ok(Command::InterruptSession {
        actor: "ada".into(),
        session_id: sid.clone().into(),
    });
    let exit = ProcessExited {
        pid: 1,
        code: Some(0),
        signal: None,
        reason: "gone".into(),
        redelivered_input_ids: vec![],
        idle_ms: 0,
    };
    let events = w.ok(Command::RecordProcessExit {
        session_id: sid.clone().into(),
        exit,
    });
    let ended = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::TurnEnded(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(ended.outcome, TurnOutcome::Interrupted);
    assert_eq!(
        w.state.inbox.len(),
        1,
        "no new item for an interrupted turn"
    );
    assert!(matches!(
        w.when(Command::InterruptSession {
            actor: "ada".into(),
            session_id: sid.into()
        }),
        Err(Rejection::Conflict(_))
    ));
}

#[test]
fn a_model_of_the_other_vendor_is_refused() {
    let mut w = World::with_task();
    let sid = w.start("one");
    w.record_turn_end(&sid, TurnOutcome::Completed, "", None);
    let r = w.when(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.into(),
        text: "x".into(),
        images: vec![],
        model: Some("gpt-5.5".into()),
        head: "h".into(),
    });
    assert!(matches!(r, Err(Rejection::Invalid(_))));
}

#[test]
fn a_codex_session_records_its_thread_once_and_keeps_its_vendor() {
    let mut w = World::with_task();
    let task_id = w.task_id();
    w.ok(Command::CreateSession {
        actor: "ada".into(),
        task_id: task_id.into(),
        model: Some("gpt-5.5".into()),
        prompt: "hi".into(),
        images: vec![],
        head: "h".into(),
    });
    let sid = w.session().id.clone();
    assert_eq!(
        (w.session().vendor, w.session().vendor_session_id.as_str()),
        (Vendor::Codex, ""),
        "no thread until Codex starts one"
    );
    let record = |id: &str| Command::RecordVendorSession {
        session_id: sid.clone(),
        vendor_session_id: id.into(),
    };
    let events = w.ok(record("thread-1"));
    assert_eq!(kinds(&events), ["session.vendor_session_started"]);
    assert_eq!(w.session().vendor_session_id, "thread-1");
    assert!(w.ok(record("thread-1")).is_empty(), "the same id again");
    assert!(w.ok(record("")).is_empty());
    assert!(matches!(
        w.when(Command::RecordVendorSession {
            session_id: "nope".into(),
            vendor_session_id: "t".into()
        }),
        Err(Rejection::NotFound(_))
    ));
    let r = w.when(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid,
        text: "x".into(),
        images: vec![],
        model: Some("opus".into()),
        head: "h".into(),
    });
    assert!(matches!(r, Err(Rejection::Invalid(_))), "{r:?}");
}

#[test]
fn a_rate_limited_turn_carries_the_vendor_status_into_its_inbox_item() {
    let mut w = World::with_task();
    let sid = w.start("one");
    let ended = TurnEnded {
        cut: None,
        turn: 0,
        outcome: TurnOutcome::Failed,
        summary: false,
        result: String::new(),
        error: "429".into(),
        usage: Usage::default(),
        cost_micro_usd: 0,
        duration_ms: 1,
        num_turns: 1,
        api_error_status: Some(429),
        rate_limits: Some(serde_json::json!({"primary": {"usedPercent": 100}})),
        review: false,
        last_vendor_id: None,
        raw: "{}".into(),
    };
    w.ok(Command::RecordVendorOutput {
        session_id: sid.into(),
        items: vec![VendorItem::TurnEnded(ended)],
    });
    let item = w.state.inbox.values().next().unwrap();
    assert_eq!(item.kind, InboxKind::RateLimited);
    assert_eq!(
        item.payload["rate_limit"]["vendor_status"]["primary"]["usedPercent"],
        100
    );
    assert_eq!(item.payload["rate_limit"]["api_error_status"], 429);
}

#[test]
fn compaction_completes_the_session_and_starts_its_successor() {
    let mut w = World::with_task();
    let sid = w.start("one");
    w.record_turn_end(&sid, TurnOutcome::Completed, "", None);
    w.ok(Command::CompactSession {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        model: Some("opus".into()),
        head: "h".into(),
    });
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "the handoff", None);
    assert!(kinds(&events).starts_with(&[
        "turn.ended",
        "session.completed",
        "session.created",
        "user.message",
        "turn.started"
    ]));
    assert!(w.state.sessions[&sid].completed);
    assert_eq!(w.session().model, "opus");
    assert!(w.session().turn_running);
}

#[test]
fn a_restart_ends_the_cut_turn_and_resumes_with_a_note() {
    let mut w = World::with_task();
    let sid = w.start("one");
    w.agent_says(&sid, "Working on it.");
    let events = w.restart(&sid);
    assert_eq!(
        kinds(&events)[..3],
        ["turn.ended", "user.message", "turn.started"]
    );
    let EventBody::UserMessage(m) = &events[1].body else {
        panic!()
    };
    assert_eq!(m.text, RESTART_NOTE);
    w.record_turn_end(&sid, TurnOutcome::Completed, "", None);
    assert!(w.restart(&sid).is_empty(), "nothing to resume when idle");
}

#[test]
fn a_turn_byre_stopped_ends_with_the_usage_and_time_its_streamed_text_recorded() {
    let mut w = World::with_task();
    let sid = w.start("one");
    let usage = Usage {
        input_tokens: 120,
        output_tokens: 7,
        ..Usage::default()
    };
    let streamed = |turn| Command::RecordStreamed {
        session_id: sid.clone().into(),
        streamed: AgentStreamed {
            turn,
            text: "Half a sentence".into(),
            dropped_bytes: 0,
            usage,
            duration_ms: 5_000,
        },
    };
    // Another turn's figures are not this one's.
    assert!(w.ok(streamed(9)).is_empty());
    assert_eq!(kinds(&w.ok(streamed(1))), ["agent.streamed"]);
    let events = w.restart(&sid);
    let EventBody::TurnEnded(t) = &events[0].body else {
        panic!("{:?}", kinds(&events))
    };
    assert_eq!((t.usage, t.duration_ms), (usage, 5_000));
    // The text was the agent's answer: the restart asks it to carry on, not the message again.
    let EventBody::UserMessage(m) = &events[1].body else {
        panic!()
    };
    assert_eq!(m.text, RESTART_NOTE);
    assert_eq!(w.session().streamed, None, "a new turn starts afresh");
    w.record_turn_end(&sid, TurnOutcome::Completed, "", None);
    assert!(w.ok(streamed(2)).is_empty(), "no turn runs");
}

#[test]
fn a_restart_before_the_agent_answered_hands_the_message_over_again_from_its_sender() {
    let mut w = World::with_task();
    let sid = w.start("one");
    w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    w.ok(Command::SendMessage {
        actor: "bob".into(),
        session_id: sid.clone().into(),
        text: "the answer is blue".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let events = w.restart(&sid);
    assert_eq!(
        kinds(&events)[..3],
        ["turn.ended", "user.message", "turn.started"]
    );
    let EventBody::UserMessage(m) = &events[1].body else {
        panic!()
    };
    let resent = format!("{RESENT_NOTE}\n\nthe answer is blue");
    assert_eq!(m.text, resent);
    assert_eq!(events[1].actor, "bob", "from the message's sender");
    // Cut short again before any answer: the same message again, not a note about a note.
    let again = w.restart(&sid);
    let EventBody::UserMessage(m) = &again[1].body else {
        panic!()
    };
    assert_eq!(m.text, resent);
    assert_eq!(again[1].actor, "bob");
}

#[test]
fn a_turn_is_started_by_its_messages_sender_and_else_by_the_tasks_owner() {
    let mut w = World::with_task();
    let sid = w.start("one");
    assert_eq!(w.session().turn_started_by("ada"), "ada");
    w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    w.ok(Command::SendMessage {
        actor: "bob".into(),
        session_id: sid.clone().into(),
        text: "use her laptop".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert_eq!(w.session().turn_started_by("ada"), "bob");
    // Handed again after a restart, bob's message is still bob's turn.
    w.restart(&sid);
    assert_eq!(w.session().turn_started_by("ada"), "bob");
    // byre's own note, once the agent had answered, is no human's choice: the owner's.
    w.agent_says(&sid, "Working on it.");
    let events = w.restart(&sid);
    let EventBody::UserMessage(m) = &events[1].body else {
        unreachable!()
    };
    assert_eq!(m.text, RESTART_NOTE);
    assert_eq!(w.session().turn_started_by("ada"), "ada");
}

#[test]
fn an_answer_given_while_the_turn_runs_reaches_the_agent_when_the_turn_ends() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    let q = ask(&mut w, &sid, "- ( ) red\n- (*) blue");
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&q, ResponseType::Option, &["blue"], "")],
    });
    assert_eq!(kinds(&events), ["inbox.responded"], "the turn still runs");
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "Asked.", None);
    assert_eq!(
        kinds(&events),
        [
            "turn.ended",
            "inbox.delivered",
            "user.message",
            "turn.started"
        ]
    );
    let message = events
        .iter()
        .find(|e| e.body.kind() == "user.message")
        .unwrap();
    assert_eq!(message.actor, "ada");
    let EventBody::UserMessage(m) = &message.body else {
        unreachable!()
    };
    assert_eq!(m.text, "Answer to your question \"Which?\" from ada: blue");
    assert!(w.state.inbox[&q].responses[0].delivered_at_us.is_some());
    let again = w.record_turn_end(&sid, TurnOutcome::Completed, "Done.", None);
    assert_eq!(
        kinds(&again),
        ["turn.ended", "session.state", "task.state"],
        "delivered once"
    );
}

#[test]
fn an_answer_handed_over_on_a_socket_is_not_delivered_again_as_a_message() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    let q = ask(&mut w, &sid, "- ( ) red\n- (*) blue");
    let responded = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&q, ResponseType::Option, &["blue"], "")],
    });
    let EventBody::InboxResponded(r) = &responded[0].body else {
        unreachable!()
    };
    let record = Command::RecordAnswersDelivered {
        session_id: sid.clone().into(),
        response_ids: vec![r.response.id.clone(), "unknown".into()],
    };
    let events = w.ok(record.clone());
    assert_eq!(kinds(&events), ["inbox.delivered"]);
    let EventBody::InboxDelivered(d) = &events[0].body else {
        unreachable!()
    };
    assert_eq!(
        (d.input_id, d.response_ids.clone()),
        (0, vec![r.response.id.clone()])
    );
    assert!(w.ok(record).is_empty(), "a repeat records nothing");
    let end = w.record_turn_end(&sid, TurnOutcome::Completed, "Done.", None);
    assert_eq!(
        kinds(&end),
        ["turn.ended", "session.state", "task.state"],
        "no message carries it again"
    );
}

#[test]
fn answers_wait_for_the_open_question_then_each_human_gets_one_message_oldest_first() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    w.record_turn_end(&sid, TurnOutcome::Failed, "", None);
    let error_item = w.state.inbox.keys().next().unwrap().clone();
    let q = ask(&mut w, &sid, "- ( ) red\n- (*) blue");
    let events = w.ok(Command::RespondInbox {
        actor: "bob".into(),
        responses: vec![answer(&error_item, ResponseType::Other, &[], "try again")],
    });
    assert_eq!(
        kinds(&events),
        ["inbox.responded"],
        "a question is still open"
    );
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&q, ResponseType::Option, &["red"], "")],
    });
    let people: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| matches!(e.body.kind(), "user.message" | "user.queued"))
        .map(|e| (e.body.kind(), e.actor.as_str()))
        .collect();
    assert_eq!(people, [("user.message", "bob"), ("user.queued", "ada")]);
    assert_eq!(w.session().queue.len(), 1);
}

#[test]
fn a_newer_question_supersedes_the_open_one() {
    let mut w = World::with_task();
    let sid = w.start("go");
    let first = ask(&mut w, &sid, "");
    let second = ask(&mut w, &sid, "");
    assert_eq!(
        w.state.inbox[&first].state,
        crate::inbox::InboxState::Superseded
    );
    assert_eq!(w.state.inbox[&second].state, crate::inbox::InboxState::Open);
    let r = w.when(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&first, crate::inbox::ResponseType::Dismiss, &[], "")],
    });
    assert!(matches!(r, Err(Rejection::Conflict(_))), "{r:?}");
}

#[test]
fn answers_to_a_compacted_sessions_question_reach_its_successor() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let (old, q, successor) = w.compacted_after_a_question();
    assert_ne!(successor, old);
    // Answered while the successor's first turn runs: handed to it when that turn ends.
    let events = w.ok(Command::RespondInbox {
        actor: "bob".into(),
        responses: vec![answer(&q, ResponseType::Option, &["blue"], "")],
    });
    assert_eq!(kinds(&events), ["inbox.responded"]);
    let events = w.record_turn_end(&successor, TurnOutcome::Completed, "Took over.", None);
    assert_eq!(
        kinds(&events),
        [
            "turn.ended",
            "inbox.delivered",
            "user.message",
            "turn.started"
        ]
    );
    let message = &events[2];
    assert_eq!(
        message.agent_session_id.as_deref(),
        Some(successor.as_str())
    );
    assert_eq!(message.actor, "bob");
    assert!(w.state.inbox[&q].responses[0].delivered_at_us.is_some());
}

#[test]
fn an_answer_to_a_compacted_sessions_question_goes_at_once_to_an_idle_successor() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let (_, q, successor) = w.compacted_after_a_question();
    w.record_turn_end(&successor, TurnOutcome::Completed, "Took over.", None);
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&q, ResponseType::Option, &["red"], "")],
    });
    assert_eq!(
        kinds(&events)[..4],
        [
            "inbox.responded",
            "inbox.delivered",
            "user.message",
            "turn.started"
        ]
    );
    assert_eq!(
        events[2].agent_session_id.as_deref(),
        Some(successor.as_str())
    );
}

#[test]
fn a_successors_question_supersedes_its_predecessors_open_one() {
    let mut w = World::with_task();
    let (_, q, successor) = w.compacted_after_a_question();
    let q2 = ask(&mut w, &successor, "- ( ) red\n- (*) blue");
    assert_eq!(
        w.state.inbox[&q].state,
        crate::inbox::InboxState::Superseded
    );
    assert_eq!(w.state.inbox[&q2].state, crate::inbox::InboxState::Open);
}

#[test]
fn an_answer_given_before_a_restart_cut_the_asking_turn_is_delivered_once_after_it() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    let q = ask(&mut w, &sid, "- ( ) red\n- (*) blue");
    w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&q, ResponseType::Option, &["blue"], "")],
    });
    // byre is killed mid-turn; the restart ends the turn and resumes the session first.
    let resumed = w.restart(&sid);
    assert!(!kinds(&resumed).contains(&"inbox.delivered"));
    let EventBody::UserMessage(m) = &resumed[1].body else {
        panic!()
    };
    assert_eq!(
        m.text, RESTART_NOTE,
        "the agent had asked: it had the message"
    );
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "Resumed.", None);
    let delivered = kinds(&events)
        .iter()
        .filter(|k| **k == "inbox.delivered")
        .count();
    assert_eq!(delivered, 1, "{:?}", kinds(&events));
    let again = w.record_turn_end(&sid, TurnOutcome::Completed, "Blue it is.", None);
    assert!(!kinds(&again).contains(&"inbox.delivered"), "only once");
}

#[test]
fn an_exit_that_hands_the_turns_message_to_a_fresh_process_keeps_the_turn_running() {
    let mut w = World::with_task();
    let sid = w.start("go");
    let input_id = w.session().turn_input.as_ref().unwrap().input_id;
    let exit = |ids: Vec<u64>| ProcessExited {
        pid: 7,
        code: Some(0),
        signal: None,
        reason: "the agent process exited".into(),
        redelivered_input_ids: ids,
        idle_ms: 0,
    };
    let events = w.ok(Command::RecordProcessExit {
        session_id: sid.clone().into(),
        exit: exit(vec![input_id]),
    });
    assert_eq!(kinds(&events), ["session.process_exited"]);
    assert!(w.session().turn_running, "the fresh process runs the turn");
    assert!(w.state.inbox.is_empty());
    // An exit naming another message fails the running turn as before.
    let events = w.ok(Command::RecordProcessExit {
        session_id: sid.into(),
        exit: exit(vec![input_id + 100]),
    });
    assert!(kinds(&events).contains(&"turn.ended"));
    assert!(!w.session().turn_running);
    assert_eq!(w.state.inbox.len(), 1, "a session_error item");
}

#[test]
fn an_idle_stop_never_fails_a_turn_that_started_after_it_and_a_deferral_changes_nothing() {
    let mut w = World::with_task();
    let sid = w.start("go");
    let deferred = ProcessDeferred {
        available_bytes: 100 << 20,
        floor_bytes: 512 << 20,
        n_ahead: 1,
    };
    let before = w.session().clone();
    let events = w.ok(Command::RecordProcessDeferred {
        session_id: sid.clone().into(),
        deferred,
    });
    assert_eq!(kinds(&events), ["session.process_deferred"]);
    assert_eq!(*w.session(), before, "a deferral is a note, not a state");
    // The idle process was stopped before this turn's message came: the turn goes on in a
    // fresh process.
    let events = w.ok(Command::RecordProcessExit {
        session_id: sid.into(),
        exit: ProcessExited {
            pid: 7,
            code: Some(0),
            signal: None,
            reason: "Claude Code was stopped by byre after 15 minutes idle".into(),
            redelivered_input_ids: Vec::new(),
            idle_ms: 900_000,
        },
    });
    assert_eq!(kinds(&events), ["session.process_exited"]);
    assert!(w.session().turn_running);
    assert!(w.state.inbox.is_empty(), "no session_error item");
}

#[test]
fn dismissing_a_session_error_sends_nothing_but_answering_it_hands_the_text_over() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    w.record_turn_end(&sid, TurnOutcome::Failed, "", None);
    let item = w.state.inbox.values().next().unwrap().id.clone();
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&item, ResponseType::Dismiss, &[], "")],
    });
    assert_eq!(kinds(&events), ["inbox.responded"], "no turn starts");
    assert!(!w.session().turn_running);
    assert!(!crate::inbox::deliverable(&w.state, w.session()));
    // A later failure's item answered with text: the text reaches the agent.
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "again".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    w.record_turn_end(&sid, TurnOutcome::Failed, "", None);
    let second = w
        .state
        .inbox
        .values()
        .find(|i| i.id != item)
        .unwrap()
        .id
        .clone();
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&second, ResponseType::Other, &[], "try again")],
    });
    let text = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .expect("the answer is handed over");
    assert!(text.contains("try again"), "{text}");
    assert!(!text.contains("dismissed"), "the dismissal is not: {text}");
}

#[test]
fn an_answer_to_an_item_of_a_task_being_discarded_is_refused_and_a_dismissal_is_not() {
    use crate::inbox::ResponseType;
    let mut w = World::with_task();
    let sid = w.start("go");
    w.record_turn_end(&sid, TurnOutcome::Failed, "", None);
    let item = w.state.inbox.values().next().unwrap().id.clone();
    let task_id = w.session().task_id.clone();
    w.ok(Command::DiscardTask {
        actor: "ada".into(),
        task_id,
        summary: true,
        head: "h".into(),
    });
    // The summary turn runs; nothing else reaches the agent until the task is discarded, so
    // the text of this answer would be lost.
    let answered = w.when(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&item, ResponseType::Other, &[], "try again")],
    });
    assert!(
        matches!(&answered, Err(Rejection::Conflict(m)) if m.contains("being discarded") && m.contains("dismiss")),
        "{answered:?}"
    );
    let events = w.ok(Command::RespondInbox {
        actor: "ada".into(),
        responses: vec![answer(&item, ResponseType::Dismiss, &[], "")],
    });
    assert_eq!(kinds(&events), ["inbox.responded"]);
}
