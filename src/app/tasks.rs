//! Tasks: `listTasks`, `createTask`, `getTask`, `listTaskEvents`, `listPreviews`.

use byre_projections::Command;

use super::{blocking, Ctx, Error};
use crate::api;

/// `listTasks`: the project's tasks, newest first.
/// # Errors
/// [`Error::NotFound`] for an unknown project.
pub fn list_tasks(app: &Ctx, project_id: &str) -> Result<Vec<api::Task>, Error> {
    let tasks: Option<Vec<api::Task>> = app.writer.read(|s| {
        s.projects.get(project_id)?;
        Some(
            s.project_tasks(project_id)
                .into_iter()
                .map(api::Task::from)
                .collect(),
        )
    });
    tasks.ok_or_else(|| Error::NotFound(format!("no project `{project_id}`")))
}

/// Input of `createTask` (the spec's `TaskCreate`).
pub struct NewTask {
    /// The task's title.
    pub title: String,
    /// With a prompt, the task's first agent session starts on it.
    pub prompt: Option<String>,
    /// The session's model; the caller's default when absent or empty.
    pub model: Option<String>,
    /// Blob ids of images sent with the prompt.
    pub images: Vec<String>,
    /// A workflow to run instead of a prompt (`super::runs::create_run`).
    pub workflow: Option<String>,
}

/// `createTask`: a task branched from the default branch's current tip (its `base_ref`), once
/// its branch and worktree exist, and with `prompt` its agent session started on `model`;
/// with `workflow`, a run of it (`super::runs::create_run`), answered as its first stage task.
///
/// The worktree is made by the worktree reactor after `task.created` commits; this waits for
/// the reactor's `task.worktree_created` (or `task.worktree_failed`, an internal error).
/// # Errors
/// Invalid (bad title, prompt with workflow, empty prompt, bad model, unknown image,
/// unknown workflow), not found (unknown project).
pub async fn create_task(
    app: &Ctx,
    actor: &str,
    project_id: &str,
    new: NewTask,
) -> Result<api::Task, Error> {
    if !app.writer.read(|s| s.projects.contains_key(project_id)) {
        return Err(Error::NotFound(format!("no project `{project_id}`")));
    }
    if new.prompt.is_some() && new.workflow.is_some() {
        return Err(Error::Invalid("give prompt or workflow, not both".into()));
    }
    if let Some(prompt) = &new.prompt {
        // Everything the session will check is checked before the task exists, so a refused
        // prompt leaves no task behind.
        if prompt.trim().is_empty() && new.images.is_empty() {
            return Err(Error::Invalid("prompt must not be empty".into()));
        }
        if let Some(model) = new.model.as_deref().filter(|m| !m.is_empty()) {
            byre_projections::users::check_model(model)?;
            super::sessions::check_agent_model(app, model, None)?;
        }
        app.writer
            .read(|s| byre_projections::sessions::check_images(s, &new.images))?;
    }
    if let Some(workflow) = &new.workflow {
        // Each stage runs on its own model: `model` is for a prompt only.
        return super::runs::create_run(app, actor, project_id, &new.title, workflow).await;
    }
    let task_id = create_at_default_branch(app, actor, project_id, new.title).await?;
    if let Some(prompt) = new.prompt {
        super::sessions::start_session(app, actor, &task_id, new.model, prompt, new.images).await?;
    }
    app.writer
        .read(|s| s.tasks.get(&task_id).map(api::Task::from))
        .ok_or_else(|| Error::internal("task missing after commit"))
}

/// `createTask`'s command path: `CreateTask` from the head of
/// the project's default branch, then waits until the task's worktree exists. Returns the
/// task's id.
/// # Errors
/// Conflict: unreadable default branch; the rejection (bad title, unknown project); internal
/// when the worktree could not be made.
pub async fn create_at_default_branch(
    app: &Ctx,
    actor: &str,
    project_id: &str,
    title: String,
) -> Result<String, Error> {
    let base_ref = super::task_creation::default_branch_tip(app, project_id).await?;
    super::task_creation::create_with(
        app,
        Command::CreateTask {
            actor: actor.to_owned(),
            project_id: project_id.to_owned().into(),
            title,
            base_ref,
        },
    )
    .await
}

/// `getTask`: task `id` as the contract's `Task`.
/// # Errors
/// [`Error::NotFound`] when there is none.
pub fn get_task(app: &Ctx, id: &str) -> Result<api::Task, Error> {
    app.writer
        .read(|s| s.tasks.get(id).map(api::Task::from))
        .ok_or_else(|| Error::NotFound(format!("no task `{id}`")))
}

/// Which page of a task's events `listTaskEvents` reads.
pub struct EventsPage {
    /// Events with seq above this (default 0).
    pub after: Option<u64>,
    /// The last `limit` events below this, still oldest first; not with `after`.
    pub before: Option<u64>,
    /// At most this many (default 500; below 1 reads as 1, above 1000 as 1000).
    pub limit: Option<u32>,
}

/// The most events one `listTaskEvents` page holds (the contract's `limit` maximum).
pub const MAX_EVENTS_PAGE: u32 = 1000;

/// `listTaskEvents`: a page of the task's events `viewer` may see, oldest first, as a JSON
/// array of the stored event documents. Events owned by another user are left out.
/// # Errors
/// Not found (unknown task); invalid (`after` and `before` together, `limit` outside 1 to
/// [`MAX_EVENTS_PAGE`]); internal (a log read).
pub async fn list_task_events(
    app: &Ctx,
    viewer: &str,
    task_id: &str,
    page: EventsPage,
) -> Result<String, Error> {
    let limit = page.limit.unwrap_or(500);
    if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
        return Err(Error::Invalid(format!(
            "limit must be 1 to {MAX_EVENTS_PAGE}, not {limit}"
        )));
    }
    if !app.writer.read(|s| s.tasks.contains_key(task_id)) {
        return Err(Error::NotFound(format!("no task `{task_id}`")));
    }
    let store = app.writer.store().clone();
    let limit = limit as usize;
    let task_id = task_id.to_owned();
    let viewer = viewer.to_owned();
    if let Some(before) = page.before {
        if page.after.is_some() {
            return Err(Error::Invalid("give after or before, not both".into()));
        }
        return blocking(move || {
            let mut visible: Vec<std::sync::Arc<byre_log::Record>> = Vec::new();
            let mut upto = before;
            loop {
                let chunk = store
                    .task_records_before(&task_id, upto, limit)
                    .map_err(Error::internal)?;
                let full = chunk.len() == limit;
                if let Some(first) = chunk.first() {
                    upto = first.seq;
                }
                let mut mine: Vec<_> = chunk
                    .into_iter()
                    .filter(|r| r.visible_to(&viewer))
                    .collect();
                mine.extend(visible);
                visible = mine;
                if visible.len() >= limit || !full {
                    break;
                }
            }
            let skip = visible.len().saturating_sub(limit);
            let mut out = String::from("[");
            for (i, r) in visible[skip..].iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&r.json);
            }
            out.push(']');
            Ok(out)
        })
        .await;
    }
    let after = page.after.unwrap_or(0);
    blocking(move || {
        let mut out = String::from("[");
        let mut n = 0;
        let mut from = after;
        loop {
            let chunk = store
                .task_records(&task_id, from, limit)
                .map_err(Error::internal)?;
            let full = chunk.len() == limit;
            for r in &chunk {
                from = r.seq;
                if n < limit && r.visible_to(&viewer) {
                    if n > 0 {
                        out.push(',');
                    }
                    out.push_str(&r.json);
                    n += 1;
                }
            }
            if n >= limit || !full {
                break;
            }
        }
        out.push(']');
        Ok(out)
    })
    .await
}

/// `listPreviews`: the ports the task's agent exposed with `expose_port`, oldest first.
/// # Errors
/// [`Error::NotFound`] for an unknown task.
pub fn list_previews(app: &Ctx, task_id: &str) -> Result<Vec<api::Preview>, Error> {
    app.writer
        .read(|s| {
            s.tasks.contains_key(task_id).then(|| {
                s.previews
                    .get(task_id)
                    .map(|v| v.iter().map(api::Preview::from).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
        })
        .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}
