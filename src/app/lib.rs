//! byre-app: the application layer. Every operation byre offers, once, for every caller —
//! the HTTP handlers, the agents' MCP tool route and the CodeBolt actions of the byre crate's
//! adapters, and the [`reactors`] here — and the effects that follow committed events. An
//! operation takes a [`Ctx`] and typed input, gathers the outside facts it needs (git, the
//! fold), submits commands to the writer, and answers typed output ([`api`], the contract's
//! JSON types) or an [`Error`] that says what went wrong in domain terms. Choosing an HTTP
//! status for an [`Error`] is the HTTP adapter's job.
//!
//! One module per family of the contract: [`me`], [`projects`], [`tasks`], [`sessions`],
//! [`inbox`], [`finish`], [`fork`], [`reviews`], [`snapshots`], [`views`], [`blobs`],
//! [`workflows`], [`runs`] (workflow runs), [`events`], [`signin`], [`tools`] (the agents'
//! byre tools, every tool's definition in it or its submodules), [`subtasks`], [`todo`],
//! [`status`] (the server's figures and open streams), [`metrics`], [`lead`] (each user's lead
//! agent), [`terminal`] (attaching to a task's terminal), [`machines`] (the users' connected
//! machines); for a CodeBolt agent, [`agent_git`] (its own git), [`toolboxes`] (third-party
//! MCP servers) and [`browser`] (the application's part of the browser actions).
//!
//! The subsystems these operations drive are crates of their own beside git: byre-terminal,
//! byre-machines, byre-browser, byre-toolboxes and byre-code; the operations never reach past
//! them to a process or a socket. [`settings`] is what the server starts the layer with.

#![warn(missing_docs)]

use std::sync::Arc;

use byre_projections::Rejection;

use crate::settings::Settings;
use byre_log::{SubmitError, Writer};

pub mod agent_git;
pub mod agent_memory;
pub mod api;
pub mod blobs;
pub mod browser;
pub mod events;
pub mod finish;
pub mod fork;
pub mod inbox;
pub mod lead;
pub mod machines;
pub mod me;
pub mod metrics;
pub mod projects;
pub mod reactors;
pub mod reviews;
pub mod runs;
pub mod sessions;
pub mod settings;
pub mod signin;
pub mod snapshots;
pub mod status;
pub mod subtasks;
pub mod task_creation;
pub mod tasks;
pub mod terminal;
pub mod todo;
pub mod toolboxes;
pub mod tools;
pub mod views;
pub mod workflows;

/// What every operation shares: the writer, the settings, the agent runtime and the
/// subsystems operations drive. One per server; HTTP, MCP and CodeBolt hold the same one.
pub struct Ctx {
    /// The single writer (and, through it, the shared projections and the log).
    pub writer: Writer,
    /// What the layer was started with.
    pub settings: Arc<Settings>,
    /// When this server started, in microseconds since the epoch.
    pub started_at_us: i64,
    /// Open event streams (and connected machines), for `getStatus`.
    pub streams: status::Streams,
    /// The users' machines connected over `connectClient`, and their waiting requests.
    pub machines: byre_machines::Machines,
    /// The agent runtime (live processes, live-only deltas, agent figures for getStatus).
    pub agents: Arc<byre_agents::runtime::Runtime>,
    /// Session tokens of the agents' MCP servers (`/internal/mcp/tools/{tool}`).
    pub mcp: Arc<byre_agents::mcp_launch::McpHost>,
    /// Brings back a task's worktree removed while byre runs, before a view reads it.
    pub worktrees: crate::reactors::worktrees::Worktrees,
    /// Task terminals (shells on ptys, their viewers).
    pub terminals: Arc<byre_terminal::Terminals>,
    /// Token mode's sign-ins (browser sessions, not agent sessions).
    pub signins: signin::SignIns,
    /// Turns true when the server shuts down; event streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Git work that reads a task's worktree, in the task's sandbox (`git::boxed`).
    pub git_box: byre_agents::git_box::GitBox,
}

impl Ctx {
    /// Submits a command to the writer.
    /// # Errors
    /// The rejection, or [`Error::Unavailable`] when the writer stopped.
    pub async fn submit(&self, cmd: byre_projections::Command) -> Result<byre_log::Ack, Error> {
        Ok(self.writer.submit(cmd, None).await?)
    }
}

/// Why an operation failed, in domain terms. Each adapter says it in its own way: HTTP maps
/// it to a status (`src/http/error.rs`), a tool call or a CodeBolt action to an error text.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The input is malformed or breaks a rule.
    #[error("{0}")]
    Invalid(String),
    /// No valid identity.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// No such entity.
    #[error("{0}")]
    NotFound(String),
    /// Conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// The input is larger than byre accepts.
    #[error("{0}")]
    TooLarge(String),
    /// Built by a later issue.
    #[error("{0}")]
    NotImplemented(String),
    /// The log is not accepting writes (shutting down, or the writer stopped).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: a bug or an outside failure; the cause is for the log, not the user.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// An internal error with `cause` for the log.
    pub fn internal(cause: impl std::fmt::Display) -> Error {
        Error::Internal(cause.to_string())
    }
}

impl From<Rejection> for Error {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::NotFound(m) => Error::NotFound(m),
            Rejection::Conflict(m) => Error::Conflict(m),
            Rejection::Invalid(m) => Error::Invalid(m),
            Rejection::Forbidden(m) => Error::Forbidden(m),
        }
    }
}

impl From<SubmitError> for Error {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::Rejected(r) => r.into(),
            SubmitError::Unavailable(m) => Error::Unavailable(m),
        }
    }
}

/// Runs blocking work (redb reads, git) off the async workers.
/// # Errors
/// [`Error::Internal`] when the closure panicked; otherwise the closure's own error.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(Error::internal)?
}
