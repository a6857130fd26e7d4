//! Given / when / then for the users' lead agents: the session, privacy, notes and `show`.
use super::*;
use crate::focus::TaskTab;
use crate::ids::Login;
use crate::sessions::TurnOutcome;
use crate::testkit::{kinds, World};
use crate::Command;

impl World {
    fn message_lead(&mut self, login: &str, text: &str) -> Result<Vec<crate::Event>, Rejection> {
        self.when(Command::MessageLead {
            login: login.into(),
            text: text.into(),
            images: vec![],
            model: None,
        })
    }

    fn lead_of(&self, login: &str) -> String {
        (live_session(&self.state, login).unwrap().id.clone()).into()
    }

    fn remember(
        &mut self,
        sid: &str,
        id: Option<&str>,
        text: &str,
    ) -> Result<Vec<crate::Event>, Rejection> {
        self.when(Command::SaveLeadNote {
            session_id: sid.into(),
            note_id: id.map(str::to_owned),
            text: text.into(),
            project_id: None,
        })
    }

    fn show(&mut self, sid: &str, human_asked: bool) -> Result<Vec<crate::Event>, Rejection> {
        let task_id = self.task_id();
        self.when(Command::ShowFocus {
            session_id: sid.into(),
            focus: Focus {
                project_id: None,
                task_id: Some(task_id.into()),
                tabs: vec![TaskTab::Changes],
                tab: TaskTab::Changes,
            },
            human_asked,
        })
    }

    fn pane(&mut self, login: &str, focused: bool, drafting: bool) {
        self.ok(Command::SetPaneFocus {
            login: login.into(),
            focused,
            drafting,
        });
    }
}

#[test]
fn a_first_message_starts_an_owned_lead_session_on_the_users_default_model() {
    let mut w = World::with_task();
    let events = w.message_lead("ada", "hello lead").unwrap();
    assert_eq!(
        kinds(&events),
        [
            "session.created",
            "user.message",
            "turn.started",
            "session.state"
        ]
    );
    for e in &events {
        assert_eq!(e.owner.as_deref(), Some("ada"), "{e:?}");
        assert_eq!(e.task_id, None);
        assert_eq!(e.project_id, None);
    }
    let s = w.session();
    assert_eq!(s.role, SessionRole::Lead);
    assert_eq!(s.owner, "ada");
    assert_eq!(s.task_id, "");
    assert_eq!(s.model, "sonnet");
    let EventBody::UserMessage(m) = &events[1].body else {
        panic!()
    };
    assert!(m.text.starts_with(LEAD_INSTRUCTIONS), "{}", m.text);
    assert!(m.text.ends_with("hello lead"));
}

#[test]
fn a_message_while_the_lead_is_mid_turn_is_queued_and_becomes_its_next_turn() {
    let mut w = World::with_task();
    w.message_lead("ada", "one").unwrap();
    let sid = w.lead_of("ada");
    let events = w.message_lead("ada", "two").unwrap();
    assert_eq!(kinds(&events), ["user.queued"]);
    assert_eq!(events[0].owner.as_deref(), Some("ada"));
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "done", None);
    assert!(
        kinds(&events).contains(&"turn.started"),
        "{:?}",
        kinds(&events)
    );
    let handed = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(handed, "two", "a later message is sent as it is");
    assert_eq!(w.lead_of("ada"), sid, "one live lead session per user");
}

#[test]
fn each_user_has_a_lead_of_their_own_and_a_failed_turn_opens_no_inbox_item() {
    let mut w = World::with_task();
    w.ensure_user("bob", "Bob");
    w.message_lead("ada", "a").unwrap();
    w.message_lead("bob", "b").unwrap();
    let (ada, bob) = (w.lead_of("ada"), w.lead_of("bob"));
    assert_ne!(ada, bob);
    let events = w.record_turn_end(&bob, TurnOutcome::Failed, "", None);
    assert!(!kinds(&events).contains(&"inbox.item_created"));
    assert!(events.iter().all(|e| e.owner.as_deref() == Some("bob")));
    assert_eq!(sessions_of(&w.state, "ada").len(), 1);
}

#[test]
fn remember_adds_and_replaces_notes_and_new_sessions_are_told_them() {
    let mut w = World::with_task();
    w.ensure_user("bob", "Bob");
    w.message_lead("ada", "hi").unwrap();
    w.message_lead("bob", "hi").unwrap();
    let sid = w.lead_of("ada");
    let events = w.remember(&sid, None, "prefers small commits").unwrap();
    assert_eq!(kinds(&events), ["lead_note.saved"]);
    assert_eq!(events[0].owner.as_deref(), Some("ada"));
    let id = notes_of(&w.state, "ada")[0].id.clone();
    w.remember(&sid, Some(&id), "prefers tiny commits").unwrap();
    assert_eq!(notes_of(&w.state, "ada").len(), 1);
    assert_eq!(notes_of(&w.state, "ada")[0].text, "prefers tiny commits");
    assert!(notes_of(&w.state, "bob").is_empty());
    // Bob's lead cannot touch Ada's note.
    let bob = w.lead_of("bob");
    assert!(matches!(
        w.remember(&bob, Some(&id), "x"),
        Err(Rejection::NotFound(_))
    ));
    assert!(matches!(
        w.when(Command::DeleteLeadNote {
            login: "bob".into(),
            session_id: None,
            note_id: id.clone()
        }),
        Err(Rejection::NotFound(_))
    ));
    assert!(matches!(
        w.remember(&sid, None, "  "),
        Err(Rejection::Invalid(_))
    ));
    assert!(instructions(&w.state, "ada").contains("prefers tiny commits"));
    assert!(!instructions(&w.state, "bob").contains("tiny"));
    // forget
    let events = w
        .when(Command::DeleteLeadNote {
            login: Login::default(),
            session_id: Some(sid.into()),
            note_id: id,
        })
        .unwrap();
    assert_eq!(kinds(&events), ["lead_note.deleted"]);
    assert!(notes_of(&w.state, "ada").is_empty());
}

#[test]
fn a_task_agent_may_not_keep_notes_or_move_the_pane() {
    let mut w = World::with_task();
    let sid = w.start("work");
    assert!(matches!(
        w.remember(&sid, None, "x"),
        Err(Rejection::Forbidden(_))
    ));
    assert!(matches!(w.show(&sid, true), Err(Rejection::Forbidden(_))));
}

#[test]
fn show_moves_the_pane_unless_the_human_is_busy_there_and_did_not_ask() {
    let mut w = World::with_task();
    w.message_lead("ada", "hi").unwrap();
    let sid = w.lead_of("ada");
    let events = w.show(&sid, false).unwrap();
    assert_eq!(kinds(&events), ["focus.updated"]);
    assert_eq!(events[0].owner.as_deref(), Some("ada"));
    assert_eq!(events[0].agent_session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(w.state.ui["ada"].focus.tab, TaskTab::Changes);
    w.pane("ada", true, true);
    assert_eq!(
        w.show(&sid, false),
        Err(Rejection::Conflict(BUSY_PANE.into()))
    );
    // It claims the human asked, and the turn answers the human's own message: it moves.
    assert_eq!(kinds(&w.show(&sid, true).unwrap()), ["focus.updated"]);
    // A turn byre started (a restart's note) is not the human asking.
    let events = w.restart(&sid);
    assert!(kinds(&events).contains(&"turn.started"));
    w.record_turn_end(&sid, TurnOutcome::Completed, "ok", None);
    assert!(matches!(w.show(&sid, true), Err(Rejection::Conflict(_))));
}

#[test]
fn a_compacted_lead_is_followed_by_a_lead_of_the_same_user_told_its_instructions() {
    let mut w = World::with_task();
    w.message_lead("ada", "hi").unwrap();
    let sid = w.lead_of("ada");
    w.record_turn_end(&sid, TurnOutcome::Completed, "hello", None);
    w.ok(Command::CompactSession {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        model: None,
        head: String::new(),
    });
    let events = w.record_turn_end(&sid, TurnOutcome::Completed, "the handoff", None);
    assert!(events.iter().all(|e| e.owner.as_deref() == Some("ada")));
    let next = w.lead_of("ada");
    assert_ne!(next, sid);
    let s = &w.state.sessions[&next];
    assert_eq!((s.role, s.owner.as_str()), (SessionRole::Lead, "ada"));
    let text = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .unwrap();
    assert!(text.starts_with(LEAD_INSTRUCTIONS) && text.ends_with("the handoff"));
    assert_eq!(sessions_of(&w.state, "ada").len(), 2);
}

#[test]
fn a_message_while_the_lead_writes_its_handoff_becomes_its_successors_next_turn() {
    let mut w = World::with_task();
    w.message_lead("ada", "hi").unwrap();
    let sid = w.lead_of("ada");
    w.record_turn_end(&sid, TurnOutcome::Completed, "hello", None);
    w.ok(Command::CompactSession {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        model: None,
        head: String::new(),
    });
    let events = w.message_lead("ada", "while compacting").unwrap();
    assert_eq!(kinds(&events), ["user.queued"]);
    let input_id = match &events[0].body {
        EventBody::UserQueued(q) => q.input_id,
        _ => unreachable!(),
    };
    w.record_turn_end(&sid, TurnOutcome::Completed, "the handoff", None);
    let next = w.lead_of("ada");
    assert_ne!(next, sid);
    assert_eq!(w.state.sessions[&next].queue.len(), 1);
    assert_eq!(w.state.inputs[&input_id].session_id, next);
    let events = w.record_turn_end(&next, TurnOutcome::Completed, "took over", None);
    let handed: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(m.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(handed, ["while compacting"]);
}
