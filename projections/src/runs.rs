//! Workflow runs: `createTask` with `workflow`, the stage agents' `finish_stage` tool,
//! advancing a run stage by stage, and `getWorkflowRun` / `getTaskWorkflow`.
//!
//! - `StartWorkflowRun` records `workflow.run_started`: the run's id, the workflow's
//!   definition as it is now (frozen: every task of the run reads this copy, however the
//!   workflow is edited or deleted later), its title and brief, and `base_ref`, the default
//!   branch's commit the run started from.
//! - `StartStage` starts one stage as its own task: `task.created` (titled `<title>: <stage>`,
//!   created by the run's creator) and `workflow.stage_started` (the run, the stage, the
//!   attempts whose outputs it starts from) in one batch. It records nothing when the stage
//!   already has an attempt or the run is finished, so a stage starts exactly once however
//!   often it is asked (a reactor after a crash, a racing request).
//! - A fork of a stage task (`forkSnapshot`) is a new attempt of its stage: the fork's batch
//!   also holds `workflow.stage_started`, with its source's inputs and `forked_from`.
//! - `FinishStage` (the `finish_stage` tool): `done` records `workflow.stage_reported` (the
//!   output); the attempt finishes (`workflow.stage_finished`, with the commit) in the batch
//!   that records the snapshot of the turn's end ([`on_snapshot`]), so its commit is that
//!   turn's end-of-turn commit. `blocked` records `workflow.stage_blocked` and a question in
//!   the inbox, and advances nothing.
//! - When the final stage (the one no other stage comes after) finishes, the same batch holds
//!   `workflow.run_finished`; the run reactor then discards the run's other active tasks as
//!   `byre`.
//! - Which stages may start, and from which commit, is [`ready_stages`] and [`base_of`]; the
//!   run reactor (`src/reactors/runs.rs`) asks and resolves the default branch's tip.
//!
//! A stage whose inputs change later (a new attempt of an earlier stage finishes) is not
//! restarted: its attempts keep the inputs they started from; fork it to start again.

use crate::ids::{Login, ProjectId, SessionId, TaskId};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::sessions::SessionRole;
use crate::tasks::TaskStatus;
use crate::workflows::{StageBase, WorkflowDefinition};
use crate::{DecideCtx, Rejection, State};

/// One input of a stage attempt: the attempt of an after stage whose output it got (spec
/// `StageInput`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageInput {
    /// The after stage.
    pub stage: String,
    /// Its attempt's task.
    pub task_id: TaskId,
}

/// `workflow.run_started` payload: `createTask` with `workflow` started a run. Envelope: the
/// project; actor the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    /// The run's id (every task of the run has it as `workflow_run`).
    pub run: String,
    /// The workflow's name.
    pub name: String,
    /// The run's title (its stage tasks are `<title>: <stage>`).
    pub title: String,
    /// The run's brief, given to every stage agent (the title, in this build).
    pub brief: String,
    /// The workflow's definition as it was when the run started (the frozen copy).
    pub definition: WorkflowDefinition,
    /// The default branch's commit the run started from: where a stage with no after stages
    /// and base `parent` branches.
    pub base_ref: String,
}

/// `workflow.stage_started` payload: a task is an attempt of a stage. Envelope: that task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStarted {
    /// The run.
    pub run: String,
    /// The stage's name.
    pub stage: String,
    /// The attempts whose outputs it starts from, one per after stage.
    pub inputs: Vec<StageInput>,
    /// A fork: the attempt it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

/// `workflow.stage_reported` payload: the stage's agent called `finish_stage` with `done`;
/// the attempt finishes with the snapshot of this turn's end. Envelope: the task and session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReported {
    /// The output (Markdown) the stages after it get.
    pub output: String,
    /// The session's turn it was reported in.
    pub turn: u32,
}

/// `workflow.stage_blocked` payload: the stage's agent called `finish_stage` with `blocked`;
/// a question is in the inbox (`inbox.item_created` in the same batch) and nothing advances.
/// Envelope: the task and session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageBlocked {
    /// What the agent has so far (Markdown).
    pub output: String,
    /// Why it cannot finish.
    pub reason: String,
    /// The inbox item asking the humans.
    pub item_id: String,
}

/// `workflow.stage_finished` payload: the attempt finished. Envelope: the task; actor `byre`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageFinished {
    /// The output the stages after it get.
    pub output: String,
    /// The commit the stage finished at: its turn's snapshot commit (the end-of-turn commit
    /// when the turn changed files).
    pub commit: String,
}

/// `workflow.run_finished` payload: the final stage finished, which ends the run. Envelope:
/// the final attempt's task; actor `byre`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinished {
    /// The run.
    pub run: String,
}

/// What a stage task knows of its run (spec `Task.workflow`, `workflow_run`,
/// `workflow_stage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStage {
    /// The workflow's name.
    pub workflow: String,
    /// The run.
    pub run: String,
    /// The stage.
    pub stage: String,
}

/// A `done` report waiting for its turn's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reported {
    /// The output.
    pub output: String,
    /// The reporting session.
    pub session_id: SessionId,
    /// Its turn.
    pub turn: u32,
}

/// One attempt of a stage: a task that ran it (spec `StageAttempt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The task.
    pub task_id: TaskId,
    /// The stage.
    pub stage: String,
    /// The attempts whose outputs it started from.
    pub inputs: Vec<StageInput>,
    /// A fork: its source attempt.
    pub forked_from: Option<String>,
    /// A `done` report waiting for its turn's snapshot.
    pub reported: Option<Reported>,
    /// Once finished: the output.
    pub output: Option<String>,
    /// Once finished: the commit.
    pub commit: Option<String>,
    /// Who discarded it (`task.discard_requested`'s actor).
    pub discarded_by: Option<String>,
    /// Started after the run finished (a human's fork): not one of the run's leftovers, so
    /// its clean-up leaves it alone.
    pub after_finish: bool,
}

/// A workflow run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Id.
    pub id: String,
    /// Project.
    pub project_id: ProjectId,
    /// The workflow's name.
    pub name: String,
    /// Title.
    pub title: String,
    /// Brief.
    pub brief: String,
    /// The frozen definition.
    pub definition: WorkflowDefinition,
    /// Where it started (a default branch commit).
    pub base_ref: String,
    /// Who started it (its tasks' creator).
    pub created_by: Login,
    /// Whether the final stage finished.
    pub finished: bool,
    /// Once finished: the final stage's attempt that finished it (it stays for the human to
    /// merge; the run's other active tasks are discarded).
    pub final_task: Option<TaskId>,
    /// Every attempt, oldest first.
    pub attempts: Vec<Attempt>,
}

impl Run {
    /// The attempts of `stage`, oldest first.
    pub fn attempts_of<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Attempt> {
        self.attempts.iter().filter(move |a| a.stage == stage)
    }

    /// The latest finished attempt of `stage` (the one later stages start from).
    pub fn latest_finished(&self, stage: &str) -> Option<&Attempt> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.stage == stage && a.output.is_some())
    }

    /// Stage `stage`'s after stages, defaults applied; `None` for an unknown stage.
    pub fn after(&self, stage: &str) -> Option<Vec<String>> {
        let i = self
            .definition
            .stages
            .iter()
            .position(|s| s.name == stage)?;
        self.definition.effective_after().into_iter().nth(i)
    }

    /// The after stages of `stage` with no finished attempt yet (spec `waiting_on`).
    pub fn waiting_on(&self, stage: &str) -> Vec<String> {
        self.after(stage)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| self.latest_finished(a).is_none())
            .collect()
    }
}

/// The final stage of a definition: the one no other stage comes after (the last such in
/// definition order, should an older stored definition have several; `putWorkflow` refuses
/// those now).
pub fn final_stage(def: &WorkflowDefinition) -> Option<&str> {
    let after = def.effective_after();
    def.stages
        .iter()
        .rev()
        .find(|s| !after.iter().any(|a| a.contains(&s.name)))
        .map(|s| s.name.as_str())
}

/// Where a stage's task branches from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageBaseRef {
    /// This commit: its one after stage's finish, or where the run started.
    Commit(String),
    /// The project's default branch's tip (base `main`, or several after stages).
    DefaultBranch,
}

/// Where stage `stage` of `run` branches from (spec `Stage.base`): with base `parent` (the
/// default) the commit its one after stage's latest finished attempt finished at, or the
/// run's start for a stage with none; with base `main`, or with several after stages, the
/// default branch. `None` for an unknown stage, or a one-after stage whose after stage has
/// not finished.
pub fn base_of(run: &Run, stage: &str) -> Option<StageBaseRef> {
    let s = run.definition.stages.iter().find(|s| s.name == stage)?;
    let after = run.after(stage)?;
    if s.base == Some(StageBase::Main) || after.len() > 1 {
        return Some(StageBaseRef::DefaultBranch);
    }
    match after.first() {
        None => Some(StageBaseRef::Commit(run.base_ref.clone())),
        Some(a) => Some(StageBaseRef::Commit(
            run.latest_finished(a)?.commit.clone()?,
        )),
    }
}

/// The stages of `run` that may start now, in definition order: the run is not finished, the
/// stage has no attempt, and every after stage has a finished attempt.
pub fn ready_stages(run: &Run) -> Vec<String> {
    if run.finished {
        return Vec::new();
    }
    run.definition
        .stages
        .iter()
        .filter(|s| run.attempts_of(&s.name).next().is_none())
        .filter(|s| run.waiting_on(&s.name).is_empty())
        .map(|s| s.name.clone())
        .collect()
}

impl Run {
    /// Once the run finished: its active tasks other than the final one, which byre discards
    /// (those already being discarded, and attempts forked after the run finished, left
    /// out).
    pub fn to_clean_up<'a>(&'a self, state: &'a State) -> Vec<&'a str> {
        if !self.finished {
            return Vec::new();
        }
        self.attempts
            .iter()
            .filter(|a| Some(&a.task_id) != self.final_task.as_ref() && !a.after_finish)
            .filter(|a| {
                state
                    .tasks
                    .get(&a.task_id)
                    .is_some_and(|t| t.status == TaskStatus::Active && !t.discarding)
            })
            .map(|a| a.task_id.as_str())
            .collect()
    }
}

impl State {
    /// The run and attempt of stage task `task_id`, if it is one.
    pub fn attempt(&self, task_id: &str) -> Option<(&Run, &Attempt)> {
        let stage = self.tasks.get(task_id)?.stage.as_ref()?;
        let run = self.runs.get(&stage.run)?;
        let attempt = run.attempts.iter().find(|a| a.task_id == task_id)?;
        Some((run, attempt))
    }
}

/// The title of stage `stage`'s tasks in a run titled `title`.
pub fn stage_title(title: &str, stage: &str) -> String {
    format!("{title}: {stage}")
}

/// Decides `StartWorkflowRun`: `workflow.run_started` with the workflow's definition as it is
/// now. 404 unknown project; 400 unknown workflow, a title that makes a stage task's title
/// invalid, or a stored definition this build refuses.
pub(crate) fn start_run(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    project_id: &str,
    workflow: &str,
    title: &str,
    base_ref: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    if !state.projects.contains_key(project_id) {
        return Err(Rejection::NotFound(format!("no project `{project_id}`")));
    }
    let w = state
        .workflows
        .get(workflow)
        .ok_or_else(|| Rejection::Invalid(format!("no workflow named `{workflow}`")))?;
    crate::workflows::validate(&w.name, &w.definition)?;
    crate::tasks::check_title(title)?;
    for s in &w.definition.stages {
        crate::tasks::check_title(&stage_title(title, &s.name)).map_err(|_| {
            Rejection::Invalid(format!(
                "the title makes stage `{}`'s task title \"{}\" longer than 200 characters",
                s.name,
                stage_title(title, &s.name)
            ))
        })?;
    }
    Ok(vec![NewEvent::new(
        actor,
        EventBody::RunStarted(RunStarted {
            run: ctx.id(0),
            name: w.name.clone(),
            title: title.to_owned(),
            brief: title.to_owned(),
            definition: w.definition.clone(),
            base_ref: base_ref.to_owned(),
        }),
    )
    .project(project_id)])
}

/// Decides `StartStage`: `task.created` and `workflow.stage_started` for stage `stage` of run
/// `run_id`, branched from `base_ref`. Nothing when the run is finished or the stage has an
/// attempt already. 404 unknown run or stage; 409 when an after stage has no finished
/// attempt.
pub(crate) fn start_stage(
    state: &State,
    ctx: &DecideCtx,
    run_id: &str,
    stage: &str,
    base_ref: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let run = state
        .runs
        .get(run_id)
        .ok_or_else(|| Rejection::NotFound(format!("no workflow run `{run_id}`")))?;
    let after = run.after(stage).ok_or_else(|| {
        Rejection::NotFound(format!("workflow run `{run_id}` has no stage `{stage}`"))
    })?;
    if run.finished || run.attempts_of(stage).next().is_some() {
        return Ok(Vec::new());
    }
    let waiting = run.waiting_on(stage);
    if !waiting.is_empty() {
        return Err(Rejection::Conflict(format!(
            "stage `{stage}` waits on {}",
            waiting.join(", ")
        )));
    }
    let inputs = after
        .iter()
        .filter_map(|a| {
            Some(StageInput {
                stage: a.clone(),
                task_id: run.latest_finished(a)?.task_id.clone(),
            })
        })
        .collect();
    let mut events = crate::tasks::create(
        state,
        ctx,
        &run.created_by,
        &run.project_id,
        &stage_title(&run.title, stage),
        base_ref,
    )?;
    let task_id = ctx.id(0);
    events.push(
        NewEvent::new(
            &run.created_by,
            EventBody::StageStarted(StageStarted {
                run: run.id.clone(),
                stage: stage.to_owned(),
                inputs,
                forked_from: None,
            }),
        )
        .project(&run.project_id)
        .task(task_id),
    );
    Ok(events)
}

/// For a fork of task `source` (new task `task_id`): `workflow.stage_started` making it an
/// attempt of the same stage with the source's inputs; nothing when the source is no stage.
pub(crate) fn fork_attempt(
    state: &State,
    actor: &str,
    source: &str,
    task_id: &str,
) -> Option<NewEvent> {
    let (run, attempt) = state.attempt(source)?;
    Some(
        NewEvent::new(
            actor,
            EventBody::StageStarted(StageStarted {
                run: run.id.clone(),
                stage: attempt.stage.clone(),
                inputs: attempt.inputs.clone(),
                forked_from: Some(source.to_owned()),
            }),
        )
        .project(&run.project_id)
        .task(task_id),
    )
}

/// `finish_stage`'s status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    /// The stage's work is done: later stages may start from it.
    Done,
    /// The agent cannot finish without the humans.
    Blocked,
}

/// Decides `FinishStage`. 404 unknown session; 400 not a stage task's agent, an empty output,
/// `blocked` without a reason; 409 the task closed, the attempt finished or its `done`
/// already reported.
pub(crate) fn finish_stage(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    output: &str,
    status: FinishStatus,
    reason: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = state
        .sessions
        .get(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{session_id}`")))?;
    let not_stage = || {
        Rejection::Invalid(
            "this task is not a stage of a workflow run: finish_stage is for stage agents only"
                .into(),
        )
    };
    if s.role != SessionRole::Implementer {
        return Err(not_stage());
    }
    let (run, attempt) = state.attempt(&s.task_id).ok_or_else(not_stage)?;
    let task = &state.tasks[&s.task_id];
    if task.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{}` is closed", task.id)));
    }
    if attempt.output.is_some() || attempt.reported.is_some() {
        return Err(Rejection::Conflict(format!(
            "stage `{}` of this task already finished: an attempt finishes once (fork the task to try again)",
            attempt.stage
        )));
    }
    if output.trim().is_empty() {
        return Err(Rejection::Invalid("`output` must not be empty".into()));
    }
    let event = |body| {
        let mut e = NewEvent::new("byre", body)
            .project(&run.project_id)
            .task(&task.id);
        e.agent_session_id = Some(session_id.to_owned().into());
        e
    };
    match status {
        FinishStatus::Done => {
            let mut events = vec![event(EventBody::StageReported(StageReported {
                output: output.to_owned(),
                turn: s.turns,
            }))];
            // The stage's own `blocked` questions still open have no one left to ask.
            let blocked = blocked_question(&attempt.stage, "");
            events.extend(crate::inbox::close_items(
                state,
                |i| {
                    i.task_id == task.id
                        && i.kind == crate::inbox::InboxKind::Question
                        && i.payload["question"]
                            .as_str()
                            .is_some_and(|q| q.starts_with(&blocked))
                },
                "stage_finished",
            ));
            Ok(events)
        }
        FinishStatus::Blocked => {
            if reason.trim().is_empty() {
                return Err(Rejection::Invalid(
                    "a `blocked` finish needs a `reason`".into(),
                ));
            }
            let question = crate::inbox::Question {
                context: output.to_owned(),
                question: blocked_question(&attempt.stage, reason),
                why_blocked: reason.to_owned(),
                options: Vec::new(),
                multiple: false,
                recommended: Vec::new(),
                attachments: Vec::new(),
            };
            let mut events = crate::inbox::ask_human(state, ctx, session_id, &question)?;
            events.push(event(EventBody::StageBlocked(StageBlocked {
                output: output.to_owned(),
                reason: reason.to_owned(),
                item_id: ctx.id(0),
            })));
            Ok(events)
        }
    }
}

/// The inbox question of a stage's `blocked` finish.
fn blocked_question(stage: &str, reason: &str) -> String {
    format!("Stage `{stage}` is blocked: {reason}")
}

/// For `RecordSnapshot` of a turn end (`session_id`'s turn `turn`) of task `task_id`: when
/// the task's attempt has a `done` reported in that turn or before, `workflow.stage_finished`
/// with `commit` (and `workflow.run_finished` when it is the run's final stage). `commit`:
/// the snapshot's, or when it failed the task's latest snapshot's (else its base).
pub(crate) fn on_snapshot(
    state: &State,
    task_id: &str,
    session_id: &str,
    turn: u32,
    commit: Option<&str>,
) -> Vec<NewEvent> {
    let Some((run, attempt)) = state.attempt(task_id) else {
        return Vec::new();
    };
    let Some(r) = &attempt.reported else {
        return Vec::new();
    };
    if r.session_id != session_id || r.turn > turn || attempt.output.is_some() {
        return Vec::new();
    }
    let commit = commit.map(str::to_owned).unwrap_or_else(|| {
        state
            .task_snapshots(task_id)
            .last()
            .map(|s| s.commit.clone())
            .unwrap_or_else(|| state.tasks[task_id].base_ref.clone())
    });
    let mut out = vec![NewEvent::new(
        "byre",
        EventBody::StageFinished(StageFinished {
            output: r.output.clone(),
            commit,
        }),
    )
    .project(&run.project_id)
    .task(task_id)];
    if !run.finished && final_stage(&run.definition) == Some(attempt.stage.as_str()) {
        out.push(
            NewEvent::new(
                "byre",
                EventBody::RunFinished(RunFinished {
                    run: run.id.clone(),
                }),
            )
            .project(&run.project_id)
            .task(task_id),
        );
    }
    out
}

fn attempt_mut<'a>(
    runs: &'a mut BTreeMap<String, Run>,
    run: &str,
    task_id: &str,
) -> Option<&'a mut Attempt> {
    runs.get_mut(run)?
        .attempts
        .iter_mut()
        .find(|a| a.task_id == task_id)
}

/// Folds the run events, and `task.discard_requested` of a stage task (who discarded it).
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let task_id = e.task_id.as_deref().unwrap_or_default();
    let run_of_task = |state: &State| {
        state
            .tasks
            .get(task_id)
            .and_then(|t| t.stage.as_ref())
            .map(|s| s.run.clone())
    };
    match &e.body {
        EventBody::RunStarted(p) => {
            state.runs.entry(p.run.clone()).or_insert_with(|| Run {
                id: p.run.clone(),
                project_id: e.project_id.clone().unwrap_or_default(),
                name: p.name.clone(),
                title: p.title.clone(),
                brief: p.brief.clone(),
                definition: p.definition.clone(),
                base_ref: p.base_ref.clone(),
                created_by: e.actor.clone().into(),
                finished: false,
                final_task: None,
                attempts: Vec::new(),
            });
        }
        EventBody::StageStarted(p) => {
            let Some(run) = state.runs.get_mut(&p.run) else {
                return;
            };
            if run.attempts.iter().any(|a| a.task_id == task_id) {
                return;
            }
            run.attempts.push(Attempt {
                task_id: task_id.to_owned().into(),
                stage: p.stage.clone(),
                inputs: p.inputs.clone(),
                forked_from: p.forked_from.clone(),
                reported: None,
                output: None,
                commit: None,
                discarded_by: None,
                after_finish: run.finished,
            });
            let workflow = run.name.clone();
            if let Some(t) = state.tasks.get_mut(task_id) {
                t.stage = Some(TaskStage {
                    workflow,
                    run: p.run.clone(),
                    stage: p.stage.clone(),
                });
            }
        }
        EventBody::StageReported(p) => {
            let session_id = e.agent_session_id.clone().unwrap_or_default();
            if let Some(run) = run_of_task(state) {
                if let Some(a) = attempt_mut(&mut state.runs, &run, task_id) {
                    a.reported = Some(Reported {
                        output: p.output.clone(),
                        session_id,
                        turn: p.turn,
                    });
                }
            }
        }
        EventBody::StageFinished(p) => {
            if let Some(run) = run_of_task(state) {
                if let Some(a) = attempt_mut(&mut state.runs, &run, task_id) {
                    a.output = Some(p.output.clone());
                    a.commit = Some(p.commit.clone());
                }
            }
        }
        EventBody::RunFinished(p) => {
            if let Some(run) = state.runs.get_mut(&p.run) {
                run.finished = true;
                run.final_task = Some(task_id.to_owned().into());
            }
        }
        EventBody::DiscardRequested(p) if !p.retry => {
            if let Some(run) = run_of_task(state) {
                if let Some(a) = attempt_mut(&mut state.runs, &run, task_id) {
                    a.discarded_by = Some(e.actor.clone());
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
