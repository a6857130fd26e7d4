//! Workflow runs: `createTask` with `workflow`, starting stages, `getWorkflowRun`,
//! `getTaskWorkflow`. The decisions are `projections/src/runs.rs`; the run reactor
//! (`reactors::runs`) calls [`advance`] after stages finish, and cleans a finished run up.
//!
//! Starting a stage ([`start_stage`]): its base resolved (`runs::base_of`: a commit, or the
//! default branch's tip now), `StartStage` (the task and its `workflow.stage_started`, or
//! nothing when it has an attempt already), the wait for its worktree, then its agent session
//! on the stage's model with [`stage_prompt`] as the first message, as the run's creator.

use byre_projections::runs::{self, Run, StageBaseRef};
use byre_projections::tasks::{TaskState, TaskStatus};
use byre_projections::{Command, EventBody, State};

use super::{Ctx, Error};
use crate::api;

/// `createTask` with `workflow`: starts a run of workflow `workflow` from the default
/// branch's tip, and every stage with no after stages as its own task; answers the first of
/// them (in definition order).
/// # Errors
/// Not found (unknown project); invalid (unknown workflow, a title too long for its stage
/// tasks); conflict (unreadable default branch); internal (a worktree that could not be made).
pub async fn create_run(
    app: &Ctx,
    actor: &str,
    project_id: &str,
    title: &str,
    workflow: &str,
) -> Result<api::Task, Error> {
    let base_ref = super::task_creation::default_branch_tip(app, project_id).await?;
    let ack = app
        .submit(Command::StartWorkflowRun {
            actor: actor.to_owned(),
            project_id: project_id.to_owned().into(),
            workflow: workflow.to_owned(),
            title: title.to_owned(),
            base_ref,
        })
        .await?;
    let run_id = ack
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::RunStarted(p) => Some(p.run.clone()),
            _ => None,
        })
        .ok_or_else(|| Error::internal("workflow.run_started missing"))?;
    advance(app, &run_id).await?;
    let first = app.writer.read(|s| {
        let run = s.runs.get(&run_id)?;
        run.definition
            .stages
            .iter()
            .find_map(|st| run.attempts_of(&st.name).next())
            .and_then(|a| s.tasks.get(&a.task_id).map(api::Task::from))
    });
    first.ok_or_else(|| Error::internal("the run started no stage"))
}

/// Starts every stage of run `run_id` that may start now (`runs::ready_stages`); the tasks it
/// started.
/// # Errors
/// The first stage that could not be started (its base unreadable, its worktree not made).
pub async fn advance(app: &Ctx, run_id: &str) -> Result<Vec<String>, Error> {
    let ready = app
        .writer
        .read(|s| s.runs.get(run_id).map(runs::ready_stages))
        .unwrap_or_default();
    let mut started = Vec::new();
    for stage in ready {
        if let Some(task_id) = start_stage(app, run_id, &stage).await? {
            started.push(task_id);
        }
    }
    Ok(started)
}

/// Starts stage `stage` of run `run_id`: see the module's doc. `None` when it had an attempt
/// already (someone else started it).
/// # Errors
/// Not found (unknown run or stage); conflict (an after stage unfinished, the default branch
/// unreadable); internal (the worktree could not be made); the session's refusal.
pub async fn start_stage(app: &Ctx, run_id: &str, stage: &str) -> Result<Option<String>, Error> {
    let (project_id, base) = app
        .writer
        .read(|s| {
            let run = s.runs.get(run_id)?;
            Some((run.project_id.clone(), runs::base_of(run, stage)))
        })
        .ok_or_else(|| Error::NotFound(format!("no workflow run `{run_id}`")))?;
    let base_ref = match base {
        Some(StageBaseRef::Commit(c)) => c,
        Some(StageBaseRef::DefaultBranch) => {
            super::task_creation::default_branch_tip(app, &project_id).await?
        }
        None => {
            return Err(Error::Conflict(format!(
                "stage `{stage}` of run `{run_id}` cannot start yet"
            )))
        }
    };
    let ack = app
        .submit(Command::StartStage {
            run: run_id.to_owned(),
            stage: stage.to_owned(),
            base_ref,
        })
        .await?;
    let Some(created) = ack.events.first() else {
        return Ok(None);
    };
    let task_id = created
        .task_id
        .clone()
        .ok_or_else(|| Error::internal("task.created without task_id"))?;
    super::task_creation::wait_for_worktree(app, &task_id, created.seq).await?;
    start_stage_session(app, &task_id).await?;
    Ok(Some(task_id.into()))
}

/// Starts the agent session of stage task `task_id` (its stage's model, [`stage_prompt`]), as
/// the run's creator.
/// # Errors
/// Not found when the task is no stage; the session's refusal (a live session already, …).
pub async fn start_stage_session(app: &Ctx, task_id: &str) -> Result<String, Error> {
    let (actor, model, prompt) = app
        .writer
        .read(|s| {
            let (run, attempt) = s.attempt(task_id)?;
            let def = run
                .definition
                .stages
                .iter()
                .find(|st| st.name == attempt.stage)?;
            Some((
                run.created_by.clone(),
                def.model.clone(),
                stage_prompt(s, run, &attempt.stage, &attempt.inputs),
            ))
        })
        .ok_or_else(|| Error::NotFound(format!("task `{task_id}` is no workflow stage")))?;
    super::sessions::start_session(app, &actor, task_id, Some(model), prompt, Vec::new()).await
}

/// A stage agent's first message: who it is in the run, the run's brief, the stage's prompt,
/// the outputs of the attempts it starts from, and how to finish with `finish_stage`.
pub fn stage_prompt(state: &State, run: &Run, stage: &str, inputs: &[runs::StageInput]) -> String {
    let prompt = run
        .definition
        .stages
        .iter()
        .find(|s| s.name == stage)
        .map(|s| s.prompt.as_str())
        .unwrap_or_default();
    let mut out = format!(
        "You are the agent of stage `{stage}` of the workflow `{}` (run {}), in this task's own \
         worktree and branch.\n\n## The run's brief\n\n{}\n\n## Your instructions\n\n{}\n\n",
        run.name, run.id, run.brief, prompt
    );
    if inputs.is_empty() {
        out.push_str("## Earlier stages\n\nThis stage starts from the brief alone.\n\n");
    } else {
        out.push_str("## What the earlier stages handed you\n\n");
        for i in inputs {
            let output = run
                .attempts
                .iter()
                .find(|a| a.task_id == i.task_id)
                .and_then(|a| a.output.as_deref())
                .unwrap_or_default();
            let title = state
                .tasks
                .get(&i.task_id)
                .map(|t| t.title.as_str())
                .unwrap_or_default();
            out.push_str(&format!(
                "### Stage `{}` (task {}, \"{title}\")\n\n{output}\n\n",
                i.stage, i.task_id
            ));
        }
    }
    out.push_str(
        "## Finishing\n\nbyre commits your worktree at the end of each of your turns. When the \
         stage's work is done, call byre's `finish_stage` tool with `status` `done` and \
         `output`: Markdown that tells the later stages what you did and what they need, then \
         end your turn. If you cannot finish without the humans, call `finish_stage` with \
         `status` `blocked`, your work so far as `output` and the `reason`, then end your \
         turn: their answer arrives as your next message. Saying you are done in a message \
         does not finish the stage; only `finish_stage` does.",
    );
    out
}

fn run_of_task<'s>(s: &'s State, task_id: &str) -> Result<&'s Run, Error> {
    let task = s
        .tasks
        .get(task_id)
        .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))?;
    let stage = task.stage.as_ref().ok_or_else(|| {
        Error::NotFound(format!("task `{task_id}` was not started from a workflow"))
    })?;
    s.runs
        .get(&stage.run)
        .ok_or_else(|| Error::internal(format!("run `{}` missing", stage.run)))
}

/// `getTaskWorkflow`: the workflow task `task_id` froze, its definition as YAML.
/// # Errors
/// Not found: unknown task, or one not started from a workflow.
pub fn get_task_workflow(app: &Ctx, task_id: &str) -> Result<api::TaskWorkflow, Error> {
    let (name, def) = app.writer.read(|s| {
        let run = run_of_task(s, task_id)?;
        Ok::<_, Error>((run.name.clone(), run.definition.clone()))
    })?;
    let definition = serde_norway::to_string(&def).map_err(Error::internal)?;
    Ok(api::TaskWorkflow { name, definition })
}

/// `getWorkflowRun`: the progress of the run task `task_id` belongs to.
/// # Errors
/// Not found: unknown task, or one not started from a workflow.
pub fn get_workflow_run(app: &Ctx, task_id: &str) -> Result<api::WorkflowRun, Error> {
    app.writer
        .read(|s| run_of_task(s, task_id).map(|run| workflow_run(s, run)))
}

/// Run `run` as the contract's `WorkflowRun`.
pub fn workflow_run(s: &State, run: &Run) -> api::WorkflowRun {
    let after = run.definition.effective_after();
    let stages = run
        .definition
        .stages
        .iter()
        .zip(after)
        .map(|(st, after)| {
            let attempts: Vec<api::StageAttempt> =
                run.attempts_of(&st.name).map(|a| attempt(s, a)).collect();
            let state = run
                .latest_finished(&st.name)
                .map(|a| attempt_state(s, a))
                .or_else(|| attempts.last().map(|a| a.state.clone()))
                .unwrap_or_else(|| "waiting".to_owned());
            api::WorkflowRunStage {
                name: st.name.clone(),
                waiting_on: run.waiting_on(&st.name),
                after,
                state,
                attempts,
            }
        })
        .collect();
    api::WorkflowRun {
        name: run.name.clone(),
        run: run.id.clone(),
        title: run.title.clone(),
        brief: run.brief.clone(),
        definition: run.definition.clone(),
        finished: run.finished,
        stages,
    }
}

/// An attempt's state (spec `StageAttempt.state`).
fn attempt_state(s: &State, a: &runs::Attempt) -> String {
    let Some(t) = s.tasks.get(&a.task_id) else {
        return "idle".into();
    };
    match (t.status, a.output.is_some()) {
        (TaskStatus::Merged, _) => "merged",
        (TaskStatus::Discarded, true) => "cleaned_up",
        (TaskStatus::Discarded, false) => "discarded",
        (TaskStatus::Active, true) => "finished",
        (TaskStatus::Active, false) if t.state == TaskState::Running => "running",
        (TaskStatus::Active, false) => "idle",
    }
    .into()
}

fn attempt(s: &State, a: &runs::Attempt) -> api::StageAttempt {
    let task = s.tasks.get(&a.task_id);
    let closed_discarded = task.is_some_and(|t| t.status == TaskStatus::Discarded);
    api::StageAttempt {
        task_id: a.task_id.clone().into(),
        title: task.map(|t| t.title.clone()).unwrap_or_default(),
        state: attempt_state(s, a),
        discarding: task.is_some_and(|t| t.discarding && t.status == TaskStatus::Active),
        forked_from: a.forked_from.clone(),
        output: a.output.clone(),
        commit: a.commit.clone(),
        discarded_by: a
            .discarded_by
            .clone()
            .filter(|_| closed_discarded)
            .or_else(|| closed_discarded.then(|| "byre".to_owned())),
        inputs: a.inputs.clone(),
    }
}
