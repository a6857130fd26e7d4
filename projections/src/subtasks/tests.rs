//! Given / when / then for subtasks: the link, the merge into the parent, and the refusals
//! while a task has active subtasks.
use super::*;
use crate::sessions::TurnOutcome;
use crate::testkit::{kinds, World};
use crate::{Command, Event};

impl World {
    /// `ada` (with a git identity) and project `p`; task "parent" whose agent finished a
    /// turn; (parent task, parent session).
    fn sub_parent() -> (World, String, String) {
        let mut w = World::empty();
        w.ensure_user("ada", "ada");
        w.ok(Command::UpdateMe {
            login: "ada".into(),
            git_name: "Ada".into(),
            git_email: "ada@example.com".into(),
        });
        w.create_project();
        let events = w.ok(Command::CreateTask {
            actor: "ada".into(),
            project_id: w.project.clone(),
            title: "parent".into(),
            base_ref: "abc".into(),
        });
        let task = events[0].task_id.clone().unwrap();
        let sid = w.sub_session(&task, "work");
        w.sub_end_turn(&sid);
        (w, task.into(), sid)
    }

    fn sub_session(&mut self, task: &str, prompt: &str) -> String {
        let events = self.ok(Command::CreateSession {
            actor: "ada".into(),
            task_id: task.into(),
            model: None,
            prompt: prompt.into(),
            images: vec![],
            head: "h".into(),
        });
        events[0].agent_session_id.clone().unwrap().into()
    }

    /// Ends session `sid`'s turn normally and answers its snapshot, as the reactor would.
    fn sub_end_turn(&mut self, sid: &str) {
        self.record_turn_end(sid, TurnOutcome::Completed, "done", None);
        let task_id = self.state.sessions[sid].task_id.clone();
        let pending: Vec<u64> = self.state.snapshots[&task_id]
            .pending
            .keys()
            .copied()
            .collect();
        for cause_seq in pending {
            self.ok(Command::RecordSnapshot {
                task_id: task_id.clone(),
                cause_seq,
                outcome: Err("not in this test".into()),
                review: false,
            });
        }
    }

    /// Session `sid` starts a subtask (titled after its number) from commit `def`.
    fn sub_start(&mut self, sid: &str) -> Result<Vec<Event>, Rejection> {
        self.when(Command::StartSubtask {
            session_id: sid.into(),
            title: format!("child {}", self.state.tasks.len()),
            base_ref: "def".into(),
            agent: String::new(),
        })
    }

    fn sub_merge(&mut self, task: &str, parent: bool) -> Result<Vec<Event>, Rejection> {
        self.when(Command::MergeTask {
            actor: "ada".into(),
            task_id: task.into(),
            merge_title: Some("Merge it".into()),
            target_parent: parent,
            after_review: false,
            head: "h".into(),
        })
    }

    fn sub_discard(&mut self, task: &str) -> Result<Vec<Event>, Rejection> {
        self.when(Command::DiscardTask {
            actor: "ada".into(),
            task_id: task.into(),
            summary: true,
            head: "h".into(),
        })
    }
}

/// A parent whose idle agent started a subtask whose agent finished its first turn;
/// (world, parent, parent session, subtask, subtask session).
fn with_idle_subtask() -> (World, String, String, String, String) {
    let (mut w, parent, psid) = World::sub_parent();
    let events = w.sub_start(&psid).unwrap();
    let child = events[0].task_id.clone().unwrap();
    let csid = w.sub_session(&child, "do the part");
    w.sub_end_turn(&csid);
    (w, parent, psid, child.into(), csid)
}

#[test]
fn start_subtask_creates_and_links_the_task_in_one_batch() {
    let (mut w, parent, psid) = World::sub_parent();
    let events = w.sub_start(&psid).unwrap();
    assert_eq!(
        kinds(&events),
        ["task.created", "task.subtask_started"],
        "no subtask exists unlinked"
    );
    assert_eq!(events[0].actor, "ada", "the parent task's creator");
    let child = events[0].task_id.clone().unwrap();
    assert_eq!(events[1].task_id.as_deref(), Some(child.as_str()));
    let t = &w.state.tasks[&child];
    assert_eq!(t.parent_task_id.as_deref(), Some(parent.as_str()));
    assert_eq!(t.base_ref, "def");
    assert_eq!(t.project_id, w.state.tasks[&parent].project_id);
    assert!(w.state.tasks[&parent].parent_task_id.is_none());
}

#[test]
fn only_an_open_tasks_implementer_starts_subtasks() {
    let (mut w, parent, psid) = World::sub_parent();
    assert!(matches!(
        w.when(Command::StartSubtask {
            session_id: "nope".into(),
            title: "child".into(),
            base_ref: "def".into(),
            agent: String::new(),
        }),
        Err(Rejection::NotFound(_))
    ));
    let bad_title = w.when(Command::StartSubtask {
        session_id: psid.clone().into(),
        title: " ".into(),
        base_ref: "def".into(),
        agent: String::new(),
    });
    assert!(matches!(bad_title, Err(Rejection::Invalid(_))));
    w.sub_merge(&parent, false).unwrap();
    assert!(
        matches!(w.sub_start(&psid), Err(Rejection::Conflict(_))),
        "a merging task starts no subtask"
    );
}

#[test]
fn a_task_with_an_active_subtask_is_neither_merged_nor_discarded() {
    let (mut w, parent, _, child, csid) = with_idle_subtask();
    let r = w.sub_merge(&parent, false);
    assert!(
        matches!(r, Err(Rejection::Conflict(ref m)) if m.contains(&child)),
        "{r:?}"
    );
    assert!(
        matches!(w.sub_discard(&parent), Err(Rejection::Conflict(ref m)) if m.contains(&child))
    );
    // A subtask with a subtask of its own: neither target.
    let grandchild = w.sub_start(&csid).unwrap()[0].task_id.clone().unwrap();
    for target_parent in [false, true] {
        let r = w.sub_merge(&child, target_parent);
        assert!(
            matches!(r, Err(Rejection::Conflict(ref m)) if m.contains(grandchild.as_str())),
            "target parent {target_parent}: {r:?}"
        );
    }
    w.sub_discard(&grandchild).unwrap();
    w.ok(Command::RecordDiscard {
        task_id: grandchild,
        outcome: Ok(String::new()),
    });
    // Once the subtask closes, both are admitted again.
    w.sub_discard(&child).unwrap();
    w.ok(Command::RecordDiscard {
        task_id: child.clone().into(),
        outcome: Ok(String::new()),
    });
    assert_eq!(w.state.tasks[&child].status, TaskStatus::Discarded);
    w.sub_discard(&parent).unwrap();
}

#[test]
fn target_parent_is_only_for_a_subtask_and_not_while_its_turn_runs() {
    let (mut w, parent, _, child, csid) = with_idle_subtask();
    assert!(matches!(
        w.sub_merge(&parent, true),
        Err(Rejection::Invalid(_))
    ));
    let r = w.when(Command::MergeTask {
        actor: "ada".into(),
        task_id: child.clone().into(),
        merge_title: None,
        target_parent: true,
        after_review: true,
        head: "h".into(),
    });
    assert!(matches!(r, Err(Rejection::Invalid(_))), "{r:?}");
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: csid.clone().into(),
        text: "more".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let r = w.sub_merge(&child, true);
    assert!(
        matches!(r, Err(Rejection::Conflict(ref m)) if m.contains("turn")),
        "{r:?}"
    );
}

#[test]
fn target_parent_on_a_task_without_parent_is_400() {
    let (mut w, parent, _) = World::sub_parent();
    let r = w.sub_merge(&parent, true);
    assert!(matches!(r, Err(Rejection::Invalid(_))), "{r:?}");
    assert!(matches!(
        w.sub_merge("nope", true),
        Err(Rejection::NotFound(_))
    ));
}

#[test]
fn merge_into_parent_asks_the_idle_parent_under_the_callers_name() {
    let (mut w, parent, psid, child, _) = with_idle_subtask();
    let events = w.sub_merge(&child, true).unwrap();
    assert_eq!(
        kinds(&events)[..3],
        [
            "task.merge_into_parent_requested",
            "user.message",
            "turn.started"
        ]
    );
    assert_eq!(events[0].task_id.as_deref(), Some(child.as_str()));
    assert_eq!(events[1].actor, "ada", "the caller's name");
    assert_eq!(events[1].agent_session_id.as_deref(), Some(psid.as_str()));
    let EventBody::UserMessage(m) = &events[1].body else {
        panic!("user.message expected")
    };
    let branch = w.state.tasks[&child].branch.clone();
    assert!(m.text.contains(&format!("git merge --no-edit {branch}")));
    let EventBody::MergeIntoParentRequested(p) = &events[0].body else {
        panic!("merge_into_parent_requested expected")
    };
    assert_eq!(p.parent_task_id, parent);
    assert_eq!(p.parent_session_id, psid);
    assert_eq!(p.input_id, m.input_id);
    let t = &w.state.tasks[&child];
    assert!(t.merging_into_parent);
    assert_eq!(t.state, crate::tasks::TaskState::Merging);
    assert!(
        into_parent_check_due(&w.state, t).is_none(),
        "not while the parent's turn runs"
    );
    let r = w.sub_merge(&child, true);
    assert!(matches!(r, Err(Rejection::Conflict(ref m)) if m.contains("already")));
    let r = w.sub_merge(&child, false);
    assert!(
        matches!(r, Err(Rejection::Conflict(ref m)) if m.contains("into its parent")),
        "{r:?}"
    );
    w.sub_end_turn(&psid);
    let t = &w.state.tasks[&child];
    assert_eq!(
        into_parent_check_due(&w.state, t).map(|p| p.id.clone()),
        Some(TaskId::from(&parent))
    );
}

#[test]
fn merge_into_a_busy_parent_is_queued_and_a_parent_without_agent_gets_a_session() {
    let (mut w, _, psid, child, _) = with_idle_subtask();
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: psid.clone().into(),
        text: "keep going".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    let events = w.sub_merge(&child, true).unwrap();
    assert_eq!(
        kinds(&events)[..2],
        ["task.merge_into_parent_requested", "user.queued"]
    );
    assert_eq!(w.state.sessions[&psid].queue.len(), 1);

    // A parent whose session completed: the message starts a new one.
    let (mut w2, parent2, psid2) = World::sub_parent();
    let child2 = w2.sub_start(&psid2).unwrap()[0].task_id.clone().unwrap();
    let completed = crate::NewEvent::new(
        "byre",
        EventBody::SessionCompleted(crate::sessions::SessionCompleted {
            reason: "test".into(),
            successor_id: String::new(),
        }),
    )
    .project(&w2.project)
    .task(&parent2);
    let mut completed = completed;
    completed.agent_session_id = Some(psid2.clone().into());
    crate::testkit::fold(&mut w2.state, vec![completed], 500);
    let events = w2.sub_merge(&child2, true).unwrap();
    assert_eq!(
        kinds(&events)[..4],
        [
            "task.merge_into_parent_requested",
            "session.created",
            "user.message",
            "turn.started"
        ]
    );
    assert_eq!(events[1].task_id.as_deref(), Some(parent2.as_str()));
}

#[test]
fn the_recorded_merge_closes_the_subtask_as_merged_once() {
    let (mut w, parent, psid, child, csid) = with_idle_subtask();
    w.sub_merge(&child, true).unwrap();
    w.sub_end_turn(&psid);
    let done = MergeDone {
        merge_commit: "c".repeat(40),
        kept_ref: format!("refs/byre/tasks/{child}/snap/2"),
        cleanup_error: String::new(),
    };
    let events = w.ok(Command::RecordMergeIntoParent {
        task_id: child.clone().into(),
        done: done.clone(),
    });
    assert_eq!(
        kinds(&events)[..2],
        ["task.merged", "session.completed"],
        "{:?}",
        kinds(&events)
    );
    let t = &w.state.tasks[&child];
    assert_eq!(t.status, TaskStatus::Merged);
    assert!(!t.merging_into_parent);
    assert_eq!(t.state, crate::tasks::TaskState::Merged);
    assert_eq!(t.merge_commit.as_deref(), Some("c".repeat(40).as_str()));
    assert!(w.state.sessions[&csid].completed);
    let again = w.ok(Command::RecordMergeIntoParent {
        task_id: child.clone().into(),
        done,
    });
    assert!(again.is_empty(), "a second outcome changes nothing");
    // The parent may finish now.
    w.sub_merge(&parent, false).unwrap();
}

#[test]
fn a_discarded_subtask_stops_merging_into_its_parent() {
    let (mut w, _, _, child, _) = with_idle_subtask();
    w.sub_merge(&child, true).unwrap();
    w.sub_discard(&child).unwrap();
    w.ok(Command::RecordDiscard {
        task_id: child.clone().into(),
        outcome: Ok(String::new()),
    });
    let t = &w.state.tasks[&child];
    assert!(!t.merging_into_parent);
    assert!(into_parent_check_due(&w.state, t).is_none());
}

#[test]
fn target_parent_is_409_while_the_subtasks_background_subagent_runs() {
    let (mut w, _, _, child, csid) = with_idle_subtask();
    let sub = |item| Command::RecordVendorOutput {
        session_id: csid.clone().into(),
        items: vec![item],
    };
    w.ok(sub(crate::sessions::VendorItem::SubagentStarted(
        crate::subagents::SubagentStarted {
            id: "bg".into(),
            tool_use_id: "toolu_bg".into(),
            description: "Background helper".into(),
            kind: "general-purpose".into(),
            subagents: 0,
        },
    )));
    let r = w.sub_merge(&child, true);
    assert!(
        matches!(r, Err(Rejection::Conflict(ref m)) if m.contains("subagent")),
        "{r:?}"
    );
    w.ok(sub(crate::sessions::VendorItem::SubagentEnded(
        crate::subagents::SubagentEnded {
            id: "bg".into(),
            tool_use_id: "toolu_bg".into(),
            status: "completed".into(),
            summary: String::new(),
            subagents: 0,
        },
    )));
    assert!(w.sub_merge(&child, true).is_ok());
}

#[test]
fn another_humans_message_anywhere_in_a_tasks_family_is_found_by_other_participant() {
    let (mut w, parent, psid, child, csid) = with_idle_subtask();
    // Only ada has written: neither task has another participant.
    assert_eq!(w.state.other_participant(&parent, "ada"), None);
    assert_eq!(w.state.other_participant(&child, "ada"), None);
    // bob writes to the subtask: his words can reach the parent (the subtask's report) and
    // any later subtask of it, so every task of the family names him.
    w.ensure_user("bob", "Bob");
    w.ok(Command::SendMessage {
        actor: "bob".into(),
        session_id: csid.clone().into(),
        text: "run this on the laptop".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert_eq!(w.state.other_participant(&child, "ada"), Some("bob"));
    assert_eq!(w.state.other_participant(&parent, "ada"), Some("bob"));
    let later = w.sub_start(&psid).unwrap()[0].task_id.clone().unwrap();
    assert_eq!(w.state.other_participant(&later, "ada"), Some("bob"));
    // As bob's own tasks would see it: ada is the other one.
    assert_eq!(w.state.other_participant(&parent, "bob"), Some("ada"));
    // Another family is not touched.
    let events = w.ok(Command::CreateTask {
        actor: "ada".into(),
        project_id: w.project.clone(),
        title: "apart".into(),
        base_ref: "abc".into(),
    });
    let apart = events[0].task_id.clone().unwrap();
    w.sub_session(&apart, "alone");
    assert_eq!(w.state.other_participant(&apart, "ada"), None);
}
