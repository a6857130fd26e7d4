//! byre-agents: every agent vendor behind one small interface ([`Driver`] and the per-process
//! [`Protocol`] it makes), and the runtime that runs one process per live session
//! ([`runtime`]).
//!
//! A driver says how to start its CLI for a session (argv and environment, never a shell)
//! and makes, for each process, a [`Protocol`]: the state of the conversation on its stdio —
//! the lines to write for a start-up handshake, a user message, an interrupt or a model
//! switch, and what each output line means ([`Reaction`]: items to record, live text, lines to
//! write back, the vendor's session id, its rate-limit status). Claude Code's stream-json is
//! nearly stateless ([`claude`]); Codex's app-server speaks JSON-RPC and keeps ids, threads
//! and turns ([`codex`]). The parsers behind them are pure and total. The runtime owns the
//! processes: each in its own process group, reaped, none outliving the server (DESIGN.md
//! invariant 7). CodeBolt's agents talk over a WebSocket instead of stdio: that transport, the
//! [`codeboltjs::Hub`] of links, is this crate's too.
//!
//! The other modules: [`sandbox`] (the one bubblewrap spawn path of every agent process),
//! [`mcp_launch`] (how a CLI starts `byre mcp`, and the sessions' tokens), [`bounds`] (what an agent
//! may send), `reaper` (what agents leave behind), [`versions`] (the CLI releases byre
//! supports) and the [`Settings`] the runtime starts with.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use byre_projections::sessions::{Vendor, VendorItem};

pub mod bounds;
pub mod claude;
pub mod codeboltjs;
pub mod codex;
mod exits;
pub mod git_box;
pub mod mcp_launch;
pub(crate) mod reaper;
pub mod runtime;
pub mod sandbox;
mod settings;
pub mod versions;

pub use settings::{AgentLimits, OutputLimits, Settings};

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
    /// The vendor's session id (Claude Code: chosen by byre; Codex: the thread id, empty
    /// until its first thread started).
    pub vendor_session_id: String,
    /// Model.
    pub model: String,
    /// The task's worktree (the process's cwd).
    pub cwd: PathBuf,
    /// The first of the task's ports (`PORT`).
    pub port_base: u32,
    /// Continue an existing vendor session rather than start one.
    pub resume: bool,
    /// CodeBolt: the session's secret socket token (empty for other vendors).
    pub socket_token: String,
    /// CodeBolt: the port the agent connects to (byre's own).
    pub socket_port: u16,
    /// How the CLI starts byre's MCP server for this session (`None`: no byre tools).
    pub mcp: Option<crate::mcp_launch::McpLaunch>,
    /// A fork's first start (`forkSnapshot`): the conversation to fork and where to cut it;
    /// `None` for other sessions and once the fork has a conversation of its own.
    pub fork: Option<ForkSpec>,
    /// What the process may reach in its sandbox, by its role (the driver adds the session's
    /// own directories and the CLI's install): [`sandbox`].
    pub access: sandbox::Access,
}

/// The configured agent variables (`Config::agent_env`) a process of `vendor` gets: never
/// another vendor's keys — Claude Code no `OPENAI_*`/`CODEX_*`, Codex no
/// `ANTHROPIC_*`/`CLAUDE_*`, a CodeBolt agent neither (its model calls go through byre, which
/// keeps the key; and v2 clients copy every variable into their URL). byre's own environment
/// (login tokens included) never reaches an agent: each driver clears it and passes on only
/// the variables it names.
pub(crate) fn for_vendor(
    env: &[(String, String)],
    vendor: Vendor,
) -> impl Iterator<Item = &(String, String)> {
    let refused: &[&str] = match vendor {
        Vendor::Claude => &["OPENAI_", "CODEX_"],
        Vendor::Codex => &["ANTHROPIC_", "CLAUDE_"],
        Vendor::Codebolt => &["OPENAI_", "CODEX_", "ANTHROPIC_", "CLAUDE_"],
    };
    env.iter()
        .filter(move |(k, _)| !refused.iter().any(|p| k.starts_with(p)))
}

/// Most bytes of one transcript or rollout file byre copies between sessions (a fork).
pub const MAX_TRANSCRIPT_BYTES: u64 = 512 * 1024 * 1024;

/// The program a driver starts: `given` (byre's configuration), else the environment
/// variable `var` when set and not empty, else `name` looked up on `PATH`.
pub fn program_or_env(given: Option<PathBuf>, var: &str, name: &str) -> PathBuf {
    given
        .or_else(|| {
            std::env::var_os(var)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A session's `HOME`: `home/` in its [`session_dir`].
pub fn session_home(data_dir: &Path, session_id: &str) -> PathBuf {
    session_dir(data_dir, session_id).join("home")
}

/// One session's own vendor state: `{data}/agents/sessions/{session_id}` (HOME, Claude Code's
/// config dir, Codex's `CODEX_HOME`), so no agent reaches another session's transcripts.
/// A session id byre did not make (a character outside `[A-Za-z0-9_-]`) is written with `_`.
pub fn session_dir(data_dir: &Path, session_id: &str) -> PathBuf {
    let name: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    data_dir.join("agents/sessions").join(name)
}

/// The repository's `fixtures/` (recorded transcripts and frames), for tests.
#[cfg(test)]
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Where a review's reviewer works: `{data}/reviews/{review_id}`, the read-only copy of the
/// snapshot that byre-app's review reactor writes and the reviewer's working directory.
pub fn review_checkout_dir(data_dir: &Path, review_id: &str) -> PathBuf {
    data_dir.join("reviews").join(review_id)
}

/// What a fork's first start resumes (`AgentSession.forked_from` / `forked_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct ForkSpec {
    /// byre's id of the forked session (whose own directory holds the conversation; empty
    /// when the fold no longer names it).
    pub session_id: String,
    /// The forked vendor session (Claude Code's session id, Codex's thread id).
    pub vendor_session_id: String,
    /// The vendor's id of the last thing kept: a Claude Code assistant message uuid, a Codex
    /// turn id.
    pub at: String,
    /// The working directory the forked session ran in (Claude Code keeps sessions per
    /// directory).
    pub cwd: PathBuf,
}

/// What one output line of an agent process means, once its [`Protocol`] read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reaction {
    /// Items to record in the log (an unrecognised line is one too).
    pub items: Vec<VendorItem>,
    /// Streamed text for live subscribers only (`agent.delta`), never logged.
    pub delta: Option<String>,
    /// The running turn's tokens so far, when this line moved them (kept with the turn's
    /// streamed text, recorded if byre stops the turn: `agent.streamed`).
    pub usage: Option<byre_projections::sessions::Usage>,
    /// Lines to write to the process's stdin now (answers to its requests, the next step of a
    /// handshake, a turn waiting for its thread).
    pub replies: Vec<String>,
    /// The vendor's id of the conversation, when this line revealed a new one (a Codex thread
    /// started); the runtime records it (`session.vendor_session_started`).
    pub vendor_session_id: Option<String>,
    /// The vendor's rate-limit status, when this line reported it (Codex's
    /// `account/rateLimits/updated`); the runtime shows the latest in `getStatus`.
    pub rate_limits: Option<serde_json::Value>,
    /// A CodeBolt served record's number (`ack`): once this line's items are logged, the
    /// session loop tells the link, whose store write then gets its reply.
    pub ack: Option<u64>,
}

/// The conversation with one agent process over its stdio: what to write and what its lines
/// mean. Made by [`Driver::protocol`] for each process and owned by that process's loop, so
/// it may keep state (request ids, the running turn). Every method returns the stdin lines to
/// write, without their `\n`. Never panics, whatever the process prints.
pub trait Protocol: Send {
    /// Lines to write as soon as the process runs (a handshake; none for Claude Code).
    fn start(&mut self) -> Vec<String>;
    /// Lines handing over a user message: a new turn. `input_id` is byre's id of it.
    fn message(&mut self, text: &str, images: &[Image], input_id: u64) -> Vec<String>;
    /// Lines asking to interrupt the running turn.
    fn interrupt(&mut self) -> Vec<String>;
    /// Lines switching the model from the next turn on.
    fn set_model(&mut self, model: &str) -> Vec<String>;
    /// Reads one stdout line.
    fn on_line(&mut self, line: &str) -> Reaction;
}

/// One agent CLI. Implementations are pure except [`Driver::command`], which reads the
/// environment (and may write the CLI's own configuration under byre's data dir).
pub trait Driver: Send + Sync {
    /// Which vendor.
    fn vendor(&self) -> Vendor;
    /// The command that starts the CLI for `spec` (argv, cwd and a minimal environment).
    fn command(&self, spec: &SpawnSpec) -> tokio::process::Command;
    /// The program, for error messages, and the variable that names it.
    fn program(&self) -> (String, &'static str);
    /// Whether the vendor already has the conversation `spec` names, so it must be resumed.
    fn has_conversation(&self, spec: &SpawnSpec) -> bool;
    /// The protocol state of one new process started for `spec`.
    fn protocol(&self, spec: &SpawnSpec) -> Box<dyn Protocol>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_vendor_gets_none_of_another_vendors_keys() {
        let env: Vec<(String, String)> = [
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "OPENAI_API_KEY",
            "CODEX_X",
            "NODE_PATH",
        ]
        .iter()
        .map(|k| (k.to_string(), "v".to_string()))
        .collect();
        let names = |v| -> Vec<&str> { for_vendor(&env, v).map(|(k, _)| k.as_str()).collect() };
        assert_eq!(
            names(Vendor::Claude),
            ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "NODE_PATH"]
        );
        assert_eq!(
            names(Vendor::Codex),
            ["OPENAI_API_KEY", "CODEX_X", "NODE_PATH"]
        );
        assert_eq!(names(Vendor::Codebolt), ["NODE_PATH"]);
    }

    #[test]
    fn a_session_dir_is_one_name_under_agents_sessions() {
        let d = Path::new("/data");
        assert_eq!(
            session_dir(d, "a-1_b"),
            Path::new("/data/agents/sessions/a-1_b")
        );
        assert_eq!(
            session_dir(d, "../x"),
            Path::new("/data/agents/sessions/___x")
        );
    }
}
