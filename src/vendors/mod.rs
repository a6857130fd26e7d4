//! Agent vendors: every CLI behind one small interface ([`Driver`]), and the runtime that runs
//! one process per live session ([`runtime`]).
//!
//! A driver says how to start its CLI for a session (argv and environment, never a shell),
//! how to write a user message or an interrupt to it, and how to read its output lines
//! ([`claude::wire`]). The runtime owns the processes: each in its own process group, reaped,
//! none outliving the server (DESIGN.md invariant 7).

use std::path::PathBuf;

use byre_projections::sessions::Vendor;

pub mod claude;
pub mod runtime;
mod session;

/// Why an agent could not be started or spoken to.
#[derive(Debug, thiserror::Error)]
pub enum VendorError {
    /// The vendor has no driver in this build.
    #[error("{0} agents are not supported yet")]
    Unsupported(&'static str),
    /// The task's worktree, the agent's working directory, is missing.
    #[error("the task's worktree {0} is missing")]
    NoWorktree(String),
    /// The CLI could not be started.
    #[error("could not start `{program}`: {source}. Install it, or name it with {env_var}")]
    Spawn {
        /// The program.
        program: String,
        /// The variable naming it.
        env_var: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// An image sent with a message: its content type and bytes.
#[derive(Debug, Clone)]
pub struct Image {
    /// `image/png`, …
    pub content_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// What a driver needs to start a session's process.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// byre's session id.
    pub session_id: String,
    /// The vendor's session id.
    pub vendor_session_id: String,
    /// Model.
    pub model: String,
    /// The task's worktree (the process's cwd).
    pub cwd: PathBuf,
    /// The first of the task's ports (`PORT`).
    pub port_base: u32,
    /// Continue an existing vendor session rather than start one.
    pub resume: bool,
}

/// One agent CLI. Implementations are pure except [`Driver::command`], which reads the
/// environment.
pub trait Driver: Send + Sync {
    /// Which vendor.
    fn vendor(&self) -> Vendor;
    /// The command that starts the CLI for `spec` (argv, cwd and a minimal environment).
    fn command(&self, spec: &SpawnSpec) -> tokio::process::Command;
    /// The program, for error messages, and the variable that names it.
    fn program(&self) -> (String, &'static str);
    /// Whether the vendor already has the conversation `spec` names, so it must be resumed.
    fn has_conversation(&self, spec: &SpawnSpec) -> bool;
    /// A stdin line carrying a user message.
    fn message_line(&self, text: &str, images: &[Image], input_id: u64) -> String;
    /// A stdin line asking to interrupt the running turn.
    fn interrupt_line(&self, request_id: &str) -> String;
    /// A stdin line switching the model.
    fn set_model_line(&self, request_id: &str, model: &str) -> String;
    /// A stdin line refusing a request the CLI made of the host.
    fn refuse_line(&self, request_id: &str, why: &str) -> String;
    /// Parses one stdout line.
    fn parse(&self, line: &str) -> claude::wire::Parsed;
}
