//! Given / when / then for workflow runs: starting, finishing, advancing, ending, forks.

use super::*;
use crate::inbox::InboxState;
use crate::sessions::{TurnEnded, TurnOutcome, Usage, VendorItem};
use crate::snapshots::TakenSnapshot;
use crate::testkit::{kinds, World};
use crate::workflows::Stage;
use crate::{Command, Event};

fn stage(name: &str, after: Option<&[&str]>, base: Option<StageBase>, model: &str) -> Stage {
    Stage {
        name: name.into(),
        after: after.map(|a| a.iter().map(|s| s.to_string()).collect()),
        base,
        model: model.into(),
        prompt: format!("do {name}"),
    }
}

/// plan → (build, docs with base main) → review.
fn diamond() -> WorkflowDefinition {
    WorkflowDefinition {
        description: String::new(),
        stages: vec![
            stage("plan", None, None, "sonnet"),
            stage("build", Some(&["plan"]), None, "gpt-5.5"),
            stage("docs", Some(&["plan"]), Some(StageBase::Main), "sonnet"),
            stage("review", Some(&["build", "docs"]), None, "sonnet"),
        ],
    }
}

impl World {
    /// A user, a project, the diamond workflow saved and a run of it started from `base0`;
    /// the run's id.
    fn run_world() -> (World, String) {
        let mut w = World::empty();
        w.ensure_user("ada", "Ada");
        w.create_project();
        w.ok(Command::PutWorkflow {
            actor: "ada".into(),
            name: "diamond".into(),
            definition: diamond(),
        });
        let events = w.ok(Command::StartWorkflowRun {
            actor: "ada".into(),
            project_id: w.project.clone(),
            workflow: "diamond".into(),
            title: "Login".into(),
            base_ref: "base0".into(),
        });
        let EventBody::RunStarted(p) = &events[0].body else {
            panic!("workflow.run_started expected")
        };
        (w, p.run.clone())
    }

    fn run(&self, id: &str) -> &Run {
        &self.state.runs[id]
    }

    /// Starts `stage` from `base`; the new task's id (or `None` when nothing was recorded).
    fn run_start(&mut self, run: &str, stage: &str, base: &str) -> Option<String> {
        let events = self.ok(Command::StartStage {
            run: run.into(),
            stage: stage.into(),
            base_ref: base.into(),
        });
        (events.first().and_then(|e| e.task_id.clone())).map(Into::into)
    }

    /// Task `task`'s worktree made and its agent session started; the session's id.
    fn run_session(&mut self, task: &str) -> String {
        self.ok(Command::RecordWorktree {
            task_id: task.into(),
            outcome: Ok("h".into()),
        });
        self.ok(Command::CreateSession {
            actor: "ada".into(),
            task_id: task.into(),
            model: None,
            prompt: "go".into(),
            images: vec![],
            head: "h".into(),
        });
        self.session().id.clone().into()
    }

    fn run_finish(
        &mut self,
        sid: &str,
        status: FinishStatus,
        reason: &str,
    ) -> Result<Vec<Event>, Rejection> {
        self.when(Command::FinishStage {
            session_id: sid.into(),
            output: format!("output of {sid}"),
            status,
            reason: reason.into(),
        })
    }

    /// Session `sid`'s turn ends and its snapshot is taken at `commit`; every event.
    fn run_turn_end(&mut self, task: &str, sid: &str, commit: &str) -> Vec<Event> {
        let ended = TurnEnded {
            cut: None,
            turn: 0,
            outcome: TurnOutcome::Completed,
            summary: false,
            result: "done".into(),
            error: String::new(),
            usage: Usage::default(),
            cost_micro_usd: 0,
            duration_ms: 1,
            num_turns: 1,
            api_error_status: None,
            rate_limits: None,
            last_vendor_id: Some("m1".into()),
            review: false,
            raw: "{}".into(),
        };
        let mut events = self.ok(Command::RecordVendorOutput {
            session_id: sid.into(),
            items: vec![VendorItem::TurnEnded(ended)],
        });
        let cause_seq = events
            .iter()
            .find(|e| e.body.kind() == "turn.ended")
            .unwrap()
            .seq;
        let n = self.state.task_snapshots(task).len() as u32 + 1;
        events.extend(self.ok(Command::RecordSnapshot {
            task_id: task.into(),
            cause_seq,
            outcome: Ok(TakenSnapshot {
                n,
                commit: commit.into(),
                tree: "t".repeat(40),
                event_seq: cause_seq,
                branch_advanced: true,
            }),
            review: false,
        }));
        events
    }

    /// Starts `stage` and finishes it `done` at `commit`; its task.
    fn run_stage_done(&mut self, run: &str, stage: &str, base: &str, commit: &str) -> String {
        let task = self.run_start(run, stage, base).expect("started");
        let sid = self.run_session(&task);
        self.run_finish(&sid, FinishStatus::Done, "").unwrap();
        self.run_turn_end(&task, &sid, commit);
        task
    }
}

#[test]
fn a_run_freezes_its_definition_and_starts_only_its_first_stage() {
    let (mut w, run) = World::run_world();
    assert_eq!(w.run(&run).definition, diamond());
    assert_eq!(w.run(&run).base_ref, "base0");
    assert_eq!(ready_stages(w.run(&run)), vec!["plan"]);
    assert_eq!(
        base_of(w.run(&run), "plan"),
        Some(StageBaseRef::Commit("base0".into()))
    );
    // Editing or deleting the workflow leaves the run's copy alone.
    w.ok(Command::DeleteWorkflow {
        actor: "ada".into(),
        name: "diamond".into(),
    });
    assert_eq!(w.run(&run).definition, diamond());
    let plan = w.run_start(&run, "plan", "base0").unwrap();
    let t = &w.state.tasks[&plan];
    assert_eq!(t.title, "Login: plan");
    assert_eq!(t.base_ref, "base0");
    assert_eq!(
        t.stage,
        Some(TaskStage {
            workflow: "diamond".into(),
            run: run.clone(),
            stage: "plan".into()
        })
    );
    // Asked again (a reactor after a crash, a racing request): nothing more.
    assert_eq!(w.run_start(&run, "plan", "base0"), None);
    assert_eq!(w.run(&run).attempts.len(), 1);
    // build waits on plan.
    assert!(matches!(
        w.when(Command::StartStage {
            run: run.clone(),
            stage: "build".into(),
            base_ref: "x".into()
        }),
        Err(Rejection::Conflict(_))
    ));
    assert_eq!(w.run(&run).waiting_on("review"), vec!["build", "docs"]);
}

#[test]
fn a_done_finishes_with_its_turns_snapshot_and_the_next_stages_follow_the_base_rules() {
    let (mut w, run) = World::run_world();
    let plan = w.run_start(&run, "plan", "base0").unwrap();
    let sid = w.run_session(&plan);
    let events = w.run_finish(&sid, FinishStatus::Done, "").unwrap();
    assert_eq!(kinds(&events), vec!["workflow.stage_reported"]);
    // Not finished until the turn's snapshot: nothing may start yet.
    assert!(ready_stages(w.run(&run)).is_empty());
    assert!(matches!(
        w.run_finish(&sid, FinishStatus::Done, ""),
        Err(Rejection::Conflict(_))
    ));
    let events = w.run_turn_end(&plan, &sid, "c-plan");
    let k = kinds(&events);
    let taken = k.iter().position(|k| *k == "snapshot.taken").unwrap();
    assert_eq!(k[taken + 1], "workflow.stage_finished", "{k:?}");
    let a = w.run(&run).latest_finished("plan").unwrap();
    assert_eq!(a.commit.as_deref(), Some("c-plan"));
    assert_eq!(
        a.output.as_deref(),
        Some(format!("output of {sid}").as_str())
    );
    assert_eq!(ready_stages(w.run(&run)), vec!["build", "docs"]);
    assert_eq!(
        base_of(w.run(&run), "build"),
        Some(StageBaseRef::Commit("c-plan".into()))
    );
    assert_eq!(
        base_of(w.run(&run), "docs"),
        Some(StageBaseRef::DefaultBranch)
    );
    let build = w.run_stage_done(&run, "build", "c-plan", "c-build");
    assert_eq!(
        w.run(&run).attempts_of("build").next().unwrap().inputs,
        vec![StageInput {
            stage: "plan".into(),
            task_id: plan.clone().into()
        }]
    );
    assert!(w.run(&run).waiting_on("review") == vec!["docs"]);
    let docs = w.run_stage_done(&run, "docs", "main0", "c-docs");
    assert_eq!(ready_stages(w.run(&run)), vec!["review"]);
    assert_eq!(
        base_of(w.run(&run), "review"),
        Some(StageBaseRef::DefaultBranch),
        "several after stages branch from the default branch"
    );
    let review = w.run_start(&run, "review", "main1").unwrap();
    assert_eq!(
        w.run(&run).attempts_of("review").next().unwrap().inputs,
        vec![
            StageInput {
                stage: "build".into(),
                task_id: build.clone().into()
            },
            StageInput {
                stage: "docs".into(),
                task_id: docs.clone().into()
            }
        ]
    );
    let sid = w.run_session(&review);
    w.run_finish(&sid, FinishStatus::Done, "").unwrap();
    let events = w.run_turn_end(&review, &sid, "c-review");
    let k = kinds(&events);
    let f = k
        .iter()
        .position(|k| *k == "workflow.run_finished")
        .unwrap();
    assert_eq!(k[f - 1], "workflow.stage_finished", "{k:?}");
    let r = w.run(&run);
    assert!(r.finished);
    assert_eq!(r.final_task.as_deref(), Some(review.as_str()));
    assert!(ready_stages(r).is_empty());
    let mut clean = r.to_clean_up(&w.state);
    clean.sort();
    let mut expected = vec![plan.as_str(), build.as_str(), docs.as_str()];
    expected.sort();
    assert_eq!(clean, expected, "every task but the final one");
    // The clean-up's discard records who discarded.
    w.ok(Command::DiscardTask {
        actor: "byre".into(),
        task_id: plan.clone().into(),
        summary: true,
        head: "h".into(),
    });
    let a = w.run(&run).attempts_of("plan").next().unwrap();
    assert_eq!(a.discarded_by.as_deref(), Some("byre"));
    assert!(!w.run(&run).to_clean_up(&w.state).contains(&plan.as_str()));
}

#[test]
fn a_blocked_finish_asks_the_humans_and_advances_nothing() {
    let (mut w, run) = World::run_world();
    let plan = w.run_start(&run, "plan", "base0").unwrap();
    let sid = w.run_session(&plan);
    assert!(matches!(
        w.run_finish(&sid, FinishStatus::Blocked, " "),
        Err(Rejection::Invalid(_))
    ));
    let events = w
        .run_finish(&sid, FinishStatus::Blocked, "Which database?")
        .unwrap();
    assert_eq!(
        kinds(&events),
        vec!["inbox.item_created", "workflow.stage_blocked"]
    );
    let EventBody::StageBlocked(b) = &events[1].body else {
        panic!()
    };
    let item = &w.state.inbox[&b.item_id];
    assert!(item.payload["question"]
        .as_str()
        .unwrap()
        .contains("Which database?"));
    w.run_turn_end(&plan, &sid, "c1");
    assert!(w.run(&run).latest_finished("plan").is_none());
    assert!(ready_stages(w.run(&run)).is_empty());
    // Once unblocked, a done in a later turn finishes it.
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: sid.clone().into(),
        text: "Use sqlite.".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    assert_eq!(w.state.inbox[&b.item_id].state, InboxState::Open);
    let done = w.run_finish(&sid, FinishStatus::Done, "").unwrap();
    // The question the blocked finish asked closes with the done (answered by a message).
    assert_eq!(
        kinds(&done),
        vec!["workflow.stage_reported", "inbox.closed"]
    );
    assert_eq!(w.state.inbox[&b.item_id].state, InboxState::Dismissed);
    w.run_turn_end(&plan, &sid, "c2");
    assert_eq!(
        w.run(&run)
            .latest_finished("plan")
            .unwrap()
            .commit
            .as_deref(),
        Some("c2")
    );
}

#[test]
fn finish_stage_is_refused_off_a_stage_with_empty_output_and_after_finishing() {
    let (mut w, run) = World::run_world();
    w.ok(Command::CreateTask {
        actor: "ada".into(),
        project_id: w.project.clone(),
        title: "plain".into(),
        base_ref: "abc".into(),
    });
    let plain = w
        .state
        .tasks
        .values()
        .find(|t| t.title == "plain")
        .unwrap()
        .id
        .clone();
    let sid = w.run_session(&plain);
    assert!(matches!(
        w.run_finish(&sid, FinishStatus::Done, ""),
        Err(Rejection::Invalid(_))
    ));
    let plan = w.run_start(&run, "plan", "base0").unwrap();
    let sid = w.run_session(&plan);
    assert!(matches!(
        w.when(Command::FinishStage {
            session_id: sid.clone().into(),
            output: "  ".into(),
            status: FinishStatus::Done,
            reason: String::new()
        }),
        Err(Rejection::Invalid(_))
    ));
    w.run_finish(&sid, FinishStatus::Done, "").unwrap();
    w.run_turn_end(&plan, &sid, "c");
    assert!(matches!(
        w.run_finish(&sid, FinishStatus::Done, ""),
        Err(Rejection::Conflict(_))
    ));
    assert!(matches!(
        w.when(Command::FinishStage {
            session_id: "nope".into(),
            output: "x".into(),
            status: FinishStatus::Done,
            reason: String::new()
        }),
        Err(Rejection::NotFound(_))
    ));
}

#[test]
fn a_fork_of_a_stage_task_is_a_new_attempt_with_its_sources_inputs() {
    let (mut w, run) = World::run_world();
    let plan = w.run_stage_done(&run, "plan", "base0", "c-plan");
    let build = w.run_start(&run, "build", "c-plan").unwrap();
    let sid = w.run_session(&build);
    w.run_turn_end(&build, &sid, "c-b1");
    let events = w.ok(Command::ForkSnapshot {
        actor: "ada".into(),
        task_id: build.clone().into(),
        n: 1,
    });
    assert_eq!(
        kinds(&events)[..3],
        ["task.created", "session.created", "workflow.stage_started"]
    );
    let fork = events[0].task_id.clone().unwrap();
    let attempts: Vec<&Attempt> = w.run(&run).attempts_of("build").collect();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1].task_id, fork);
    assert_eq!(attempts[1].forked_from.as_deref(), Some(build.as_str()));
    assert_eq!(
        attempts[1].inputs,
        vec![StageInput {
            stage: "plan".into(),
            task_id: plan.into()
        }]
    );
    assert_eq!(w.state.tasks[&fork].stage.as_ref().unwrap().stage, "build");
    // The fork finishing is the stage's latest finished attempt.
    let fork_sid = w.session().id.clone();
    w.ok(Command::SendMessage {
        actor: "ada".into(),
        session_id: fork_sid.clone(),
        text: "again".into(),
        images: vec![],
        model: None,
        head: "h".into(),
    });
    w.run_finish(&fork_sid, FinishStatus::Done, "").unwrap();
    w.run_turn_end(&fork, &fork_sid, "c-fork");
    assert_eq!(w.run(&run).latest_finished("build").unwrap().task_id, fork);
}

#[test]
fn the_final_stage_is_the_one_nothing_comes_after_and_two_are_refused() {
    assert_eq!(final_stage(&diamond()), Some("review"));
    let two = WorkflowDefinition {
        description: String::new(),
        stages: vec![
            stage("a", None, None, "m"),
            stage("b", Some(&["a"]), None, "m"),
            stage("c", Some(&["a"]), None, "m"),
        ],
    };
    let err = crate::workflows::validate("w", &two).unwrap_err();
    assert!(err.to_string().contains("one final stage"), "{err}");
    assert!(err.to_string().contains("`b`, `c`"), "{err}");
    // An older stored definition with several: the last of them in definition order.
    assert_eq!(final_stage(&two), Some("c"));
}

#[test]
fn a_run_with_an_unknown_workflow_or_an_overlong_title_is_refused() {
    let (mut w, _) = World::run_world();
    let start = |w: &World, workflow: &str, title: &str| Command::StartWorkflowRun {
        actor: "ada".into(),
        project_id: w.project.clone(),
        workflow: workflow.into(),
        title: title.into(),
        base_ref: "b".into(),
    };
    let c = start(&w, "nope", "t");
    assert!(matches!(w.when(c), Err(Rejection::Invalid(_))));
    let c = start(&w, "diamond", &"x".repeat(195));
    assert!(matches!(w.when(c), Err(Rejection::Invalid(_))));
    let mut c = start(&w, "diamond", "t");
    if let Command::StartWorkflowRun { project_id, .. } = &mut c {
        *project_id = "nope".into();
    }
    assert!(matches!(w.when(c), Err(Rejection::NotFound(_))));
}

#[test]
fn a_fork_made_after_the_run_finished_is_not_cleaned_up_with_it() {
    // byre cleans up a finished run again at every start-up; a human's later fork (to try the
    // final stage again, say) is theirs, not one of the run's leftovers.
    let (mut w, run) = World::run_world();
    w.run_stage_done(&run, "plan", "base0", "c-plan");
    w.run_stage_done(&run, "build", "c-plan", "c-build");
    w.run_stage_done(&run, "docs", "main0", "c-docs");
    let review = w.run_stage_done(&run, "review", "main1", "c-review");
    assert!(w.run(&run).finished);
    let leftovers = w.run(&run).to_clean_up(&w.state).len();
    assert_eq!(leftovers, 3, "plan, build and docs");
    let events = w.ok(Command::ForkSnapshot {
        actor: "ada".into(),
        task_id: review.clone().into(),
        n: 1,
    });
    let fork = events[0].task_id.clone().unwrap();
    assert_eq!(w.run(&run).attempts_of("review").count(), 2);
    let clean = w.run(&run).to_clean_up(&w.state);
    assert!(!clean.contains(&fork.as_str()), "{clean:?}");
    assert_eq!(clean.len(), leftovers);
}
