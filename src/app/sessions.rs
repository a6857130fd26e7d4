//! Agent sessions: `createSession`, `listSessions`, `getSession`, `sendMessage`,
//! `withdrawMessage`, `interruptSession`, `compactSession`.

use std::path::{Path, PathBuf};

use byre_projections::Command;

use super::{blocking, Ctx, Error};
use crate::api;

/// The worktree's HEAD (an outside fact carried in message commands); empty when unreadable.
/// # Errors
/// [`Error::NotFound`] for an unknown task.
pub async fn worktree_head(app: &Ctx, task_id: &str) -> Result<String, Error> {
    if task_id.is_empty() {
        // A lead session's: it has no worktree.
        return Ok(String::new());
    }
    let worktree = app
        .writer
        .read(|s| s.tasks.get(task_id).map(|t| t.worktree_path.clone()))
        .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))?;
    blocking(move || Ok(byre_git::worktree_head(&PathBuf::from(worktree)).unwrap_or_default()))
        .await
}

/// `getSession`: session `id` as the contract's `AgentSession`, as `viewer` may see it.
/// # Errors
/// [`Error::NotFound`] when there is none, or it is another user's lead session (which
/// nobody else may see or act on: DESIGN.md invariant 4).
pub fn get_session(app: &Ctx, viewer: &str, id: &str) -> Result<api::AgentSession, Error> {
    app.writer
        .read(|s| {
            s.sessions
                .get(id)
                .filter(|x| x.owner.is_empty() || x.owner == viewer)
                .map(api::AgentSession::from)
        })
        .ok_or_else(|| Error::NotFound(format!("no session `{id}`")))
}

/// The task of session `session_id` (empty for a lead's), for `actor`.
fn task_of(app: &Ctx, actor: &str, session_id: &str) -> Result<String, Error> {
    app.writer
        .read(|s| {
            s.sessions
                .get(session_id)
                .filter(|x| x.owner.is_empty() || x.owner == actor)
                .map(|x| x.task_id.to_string())
        })
        .ok_or_else(|| Error::NotFound(format!("no session `{session_id}`")))
}

/// Starts a session on `task_id` with its first turn, as `actor`, on `model` (else the
/// actor's default); returns the new session's id. `createTask` with a prompt,
/// `createSession` and CodeBolt's `startAgent` all start sessions here.
/// # Errors
/// Invalid (empty prompt, unknown blob, bad model), not found, conflict (task closed, or it
/// has a live session already).
pub async fn start_session(
    app: &Ctx,
    actor: &str,
    task_id: &str,
    model: Option<String>,
    prompt: String,
    images: Vec<String>,
) -> Result<String, Error> {
    if let Some(model) = &model {
        let worktree = app.writer.read(|s| {
            s.tasks
                .get(task_id)
                .map(|t| PathBuf::from(&t.worktree_path))
        });
        check_agent_model(app, model, worktree.as_deref())?;
    }
    let head = worktree_head(app, task_id).await?;
    let ack = app
        .submit(Command::CreateSession {
            actor: actor.to_owned(),
            task_id: task_id.into(),
            model,
            prompt,
            images,
            head,
        })
        .await?;
    (ack.events
        .iter()
        .find_map(|e| e.agent_session_id.clone())
        .ok_or_else(|| Error::internal("session.created missing")))
    .map(Into::into)
}

/// Refuses a `codebolt:` model that names no agent in the configured agents directories or in
/// `worktree` (the task's, when it has one): node would run the file it names
/// (`vendors::codebolt::entry_of`). Other models pass.
/// # Errors
/// [`Error::Invalid`] naming the allowed places.
pub fn check_agent_model(app: &Ctx, model: &str, worktree: Option<&Path>) -> Result<(), Error> {
    if !model.starts_with("codebolt:") {
        return Ok(());
    }
    byre_agents::codeboltjs::entry_of(&app.settings.codebolt_agents, model, worktree)
        .map(|_| ())
        .map_err(Error::Invalid)
}

/// `createSession`: [`start_session`], answered as the new `AgentSession` (its first turn
/// running).
/// # Errors
/// As [`start_session`].
pub async fn create_session(
    app: &Ctx,
    actor: &str,
    task_id: &str,
    model: Option<String>,
    prompt: String,
    images: Vec<String>,
) -> Result<api::AgentSession, Error> {
    let id = start_session(app, actor, task_id, model, prompt, images).await?;
    get_session(app, actor, &id)
}

/// `listSessions`: the task's sessions, oldest first (reviewers left out).
/// # Errors
/// [`Error::NotFound`] for an unknown task.
pub fn list_sessions(app: &Ctx, task_id: &str) -> Result<Vec<api::AgentSession>, Error> {
    let list: Option<Vec<api::AgentSession>> = app.writer.read(|s| {
        s.tasks.get(task_id)?;
        Some(
            s.task_sessions(task_id)
                .into_iter()
                .map(api::AgentSession::from)
                .collect(),
        )
    });
    list.ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}

/// A human's message to an agent (the spec's `MessageCreate`).
pub struct Message {
    /// The text.
    pub text: String,
    /// Blob ids of images sent with it.
    pub images: Vec<String>,
    /// The model of the turn it starts (same vendor as the session's).
    pub model: Option<String>,
}

/// `sendMessage`: a new turn when the session is idle, queued (`user.queued`) while a turn
/// runs. Returns the session.
/// # Errors
/// Invalid (empty text without images, unknown blob, a model of the other vendor), not
/// found, conflict (session completed, task closed).
pub async fn send_message(
    app: &Ctx,
    actor: &str,
    session_id: &str,
    message: Message,
) -> Result<api::AgentSession, Error> {
    let task_id = task_of(app, actor, session_id)?;
    let head = worktree_head(app, &task_id).await?;
    app.submit(Command::SendMessage {
        actor: actor.to_owned(),
        session_id: session_id.to_owned().into(),
        text: message.text,
        images: message.images,
        model: message.model,
        head,
    })
    .await?;
    get_session(app, actor, session_id)
}

/// `withdrawMessage`: takes a queued message back.
/// # Errors
/// Not found; conflict once the message was handed to the agent.
pub async fn withdraw_message(
    app: &Ctx,
    actor: &str,
    task_id: &str,
    input_id: u64,
) -> Result<(), Error> {
    app.submit(Command::WithdrawMessage {
        actor: actor.to_owned(),
        task_id: task_id.to_owned().into(),
        input_id,
    })
    .await?;
    Ok(())
}

/// `interruptSession`: stops the running turn. Returns the session.
/// # Errors
/// Not found; conflict when no turn runs.
pub async fn interrupt_session(
    app: &Ctx,
    actor: &str,
    session_id: &str,
) -> Result<api::AgentSession, Error> {
    task_of(app, actor, session_id)?;
    app.submit(Command::InterruptSession {
        actor: actor.to_owned(),
        session_id: session_id.to_owned().into(),
    })
    .await?;
    get_session(app, actor, session_id)
}

/// `compactSession`: the idle session's agent writes a handoff; when that turn ends normally
/// the session is completed and a new session on the task starts with the handoff as its
/// first message, on `model` (else the old session's). Returns the session.
/// # Errors
/// Not found; conflict while a turn runs or once completed.
pub async fn compact_session(
    app: &Ctx,
    actor: &str,
    session_id: &str,
    model: Option<String>,
) -> Result<api::AgentSession, Error> {
    let task_id = task_of(app, actor, session_id)?;
    let head = worktree_head(app, &task_id).await?;
    app.submit(Command::CompactSession {
        actor: actor.to_owned(),
        session_id: session_id.to_owned().into(),
        model,
        head,
    })
    .await?;
    get_session(app, actor, session_id)
}
