//! Given / when / then for the agent's own subagents and the turns its CLI starts by itself.
use super::*;
use crate::sessions::{ProcessExited, TurnOutcome, VendorItem};
use crate::testkit::{kinds, World};
use crate::Command;

fn started(id: &str) -> VendorItem {
    VendorItem::SubagentStarted(SubagentStarted {
        id: id.into(),
        tool_use_id: format!("toolu_{id}"),
        description: "Background helper".into(),
        kind: "general-purpose".into(),
        subagents: 0,
    })
}

fn ended(id: &str) -> VendorItem {
    VendorItem::SubagentEnded(SubagentEnded {
        id: id.into(),
        tool_use_id: format!("toolu_{id}"),
        status: "completed".into(),
        summary: "done".into(),
        subagents: 0,
    })
}

impl World {
    fn output(&mut self, sid: &str, items: Vec<VendorItem>) -> Vec<crate::Event> {
        self.ok(Command::RecordVendorOutput {
            session_id: sid.into(),
            items,
        })
    }
}

fn counts(events: &[crate::Event]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubagentStarted(p) => Some(p.subagents),
            EventBody::SubagentEnded(p) => Some(p.subagents),
            _ => None,
        })
        .collect()
}

#[test]
fn a_background_subagent_is_counted_after_its_turn_until_it_ends() {
    let mut w = World::with_task();
    let sid = w.start("run a background helper");
    let events = w.output(&sid, vec![started("a1")]);
    assert_eq!(kinds(&events), ["subagent.started"]);
    assert_eq!(counts(&events), [1]);
    assert_eq!(w.session().subagents, 1);
    // The same start reported again changes nothing.
    assert!(w.output(&sid, vec![started("a1")]).is_empty());
    w.record_turn_end(&sid, TurnOutcome::Completed, "Started it.", None);
    assert!(!w.session().turn_running);
    assert_eq!(w.session().subagents, 1, "still running after its turn");
    let events = w.output(&sid, vec![ended("a1")]);
    assert_eq!(kinds(&events), ["subagent.ended"]);
    assert_eq!(counts(&events), [0]);
    assert_eq!(w.session().subagents, 0);
    assert!(w.state.subagents.is_empty());
    // A task that is no subagent of this session (a Bash command's notification) is ignored.
    assert!(w.output(&sid, vec![ended("b9")]).is_empty());
}

#[test]
fn several_subagents_in_one_line_count_one_by_one() {
    let mut w = World::with_task();
    let sid = w.start("go");
    let events = w.output(&sid, vec![started("a1"), started("a2"), ended("a1")]);
    assert_eq!(counts(&events), [1, 2, 1]);
    assert_eq!(w.session().subagents, 1);
}

#[test]
fn a_turn_the_cli_starts_by_itself_is_a_turn() {
    let mut w = World::with_task();
    let sid = w.start("go");
    // Inside byre's own turn the vendor's turn start changes nothing.
    assert!(w.output(&sid, vec![VendorItem::TurnBegan]).is_empty());
    w.record_turn_end(&sid, TurnOutcome::Completed, "Started it.", None);
    let events = w.output(&sid, vec![VendorItem::TurnBegan]);
    assert_eq!(
        kinds(&events),
        ["turn.started", "session.state", "task.state"]
    );
    let EventBody::TurnStarted(t) = &events[0].body else {
        panic!("turn.started expected")
    };
    assert_eq!((t.turn, t.input_ids.len()), (2, 0));
    assert_eq!(events[0].actor, "byre");
    assert!(w.session().turn_running);
    assert!(w.session().turn_input.is_none(), "no message of byre's");
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "It finished.", None);
    assert!(kinds(&events).contains(&"turn.ended"));
    let EventBody::TurnEnded(t) = &events[0].body else {
        panic!("turn.ended expected")
    };
    assert_eq!(t.turn, 2);
    assert!(!w.session().turn_running);
}

#[test]
fn a_message_sent_during_a_turn_the_cli_started_waits_for_it() {
    let mut w = World::with_task();
    let sid = w.start("go");
    w.record_turn_end(&sid, TurnOutcome::Completed, "ok", None);
    w.output(&sid, vec![VendorItem::TurnBegan]);
    let events = w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "next".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert_eq!(kinds(&events), ["user.queued"]);
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "It finished.", None);
    assert!(kinds(&events).contains(&"user.message"));
    assert_eq!(w.session().turns, 3);
}

#[test]
fn a_process_exit_ends_its_running_subagents() {
    let mut w = World::with_task();
    let sid = w.start("go");
    w.output(&sid, vec![started("a1"), started("a2")]);
    w.record_turn_end(&sid, TurnOutcome::Completed, "ok", None);
    let events = w.ok(Command::RecordProcessExit {
        session_id: sid.clone().into(),
        exit: ProcessExited {
            pid: 7,
            code: Some(0),
            signal: None,
            reason: "the agent process exited".into(),
            redelivered_input_ids: vec![],
            idle_ms: 0,
        },
    });
    assert_eq!(
        kinds(&events),
        ["session.process_exited", "subagent.ended", "subagent.ended"]
    );
    assert_eq!(counts(&events), [1, 0]);
    assert!(events.iter().all(|e| match &e.body {
        EventBody::SubagentEnded(p) =>
            p.status == "process_exited" && p.tool_use_id.starts_with("toolu_"),
        _ => true,
    }));
    assert_eq!(w.session().subagents, 0);
}

#[test]
fn a_restart_ends_the_subagents_of_an_idle_session_and_resumes_no_turn() {
    let mut w = World::with_task();
    let sid = w.start("go");
    w.output(&sid, vec![started("a1")]);
    w.record_turn_end(&sid, TurnOutcome::Completed, "ok", None);
    let events = w.restart(&sid);
    assert_eq!(kinds(&events), ["subagent.ended"]);
    assert_eq!(counts(&events), [0]);
    assert!(!w.session().turn_running);
    assert_eq!(w.session().turns, 1);
}

#[test]
fn a_restart_mid_turn_ends_the_subagents_then_the_turn() {
    let mut w = World::with_task();
    let sid = w.start("go");
    w.output(&sid, vec![started("a1")]);
    let events = w.restart(&sid);
    let ks = kinds(&events);
    assert_eq!(&ks[..2], ["subagent.ended", "turn.ended"]);
    assert_eq!(w.session().subagents, 0);
}

#[test]
fn a_closed_tasks_running_subagents_end_before_its_sessions_complete() {
    let mut w = World::with_task();
    let task_id = w.task_id();
    let sid = w.start("run a background helper");
    w.output(&sid, vec![started("a1")]);
    w.record_turn_end(&sid, TurnOutcome::Completed, "Started it.", None);
    w.ok(Command::DiscardTask {
        actor: "ada".into(),
        task_id: task_id.clone().into(),
        summary: true,
        head: "h".into(),
    });
    let events = w.ok(Command::RecordDiscard {
        task_id: task_id.into(),
        outcome: Ok(String::new()),
    });
    let ended: Vec<&SubagentEnded> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubagentEnded(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 1, "{:?}", kinds(&events));
    assert_eq!(ended[0].status, "task_closed");
    assert_eq!(ended[0].subagents, 0);
    assert_eq!(ended[0].tool_use_id, "toolu_a1");
    let order = kinds(&events);
    let pos = |k: &str| order.iter().position(|x| *x == k).unwrap();
    assert!(
        pos("subagent.ended") < pos("session.completed"),
        "{order:?}"
    );
    assert_eq!(w.session().subagents, 0);
}

#[test]
fn compaction_ends_the_old_sessions_running_subagents() {
    let mut w = World::with_task();
    let sid = w.start("run a background helper");
    w.output(&sid, vec![started("a1")]);
    w.record_turn_end(&sid, TurnOutcome::Completed, "Started it.", None);
    w.ok(Command::CompactSession {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        model: None,
        head: "h".into(),
    });
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "the handoff", None);
    let order = kinds(&events);
    let pos = |k: &str| order.iter().position(|x| *x == k).unwrap();
    assert!(
        pos("subagent.ended") < pos("session.completed"),
        "{order:?}"
    );
    assert_eq!(counts(&events), [0]);
    assert_eq!(w.state.sessions[&sid].subagents, 0);
    assert_eq!(w.session().subagents, 0, "the successor starts with none");
}
