//! byre: a server that runs AI coding agents on a team's git repositories, event-sourced on one
//! append-only redb log. See ARCHITECTURE.md for the map.
//!
//! Layout:
//! - [`log`]: the redb log, the single writer (group commit), subscriptions.
//! - [`startup`]: builds the running server from a bound listener and a data dir.
//! - [`app`]: the application layer: every operation, once, for every adapter.
//! - [`http`]: the REST, SSE and WebSocket handlers of `schema/byre.openapi.yaml`.
//! - [`identity`]: who is calling (local, Tailscale headers, bearer tokens).
//! - [`git`]: repository facts and worktrees, through git2.
//! - [`reactors`]: effects that follow committed events (worktrees).
//! - [`mcp`]: the agents' byre tools over MCP (`byre mcp`, session tokens).
//! - [`api`]: the contract's JSON types, converted from the projections.
//! - [`codebolt`]: the WebSocket CodeBolt agents speak, and what their requests do.
//! - [`terminal`]: task terminals: login shells on ptys, their scrollback and viewers.
//! - [`client`]: `byre client`, the user's machine serving agents' requests.
//! - [`cli`]: `byre serve | client | log | rebuild | replay`.
#![warn(missing_docs)]

pub mod cli;
pub mod codebolt;
pub mod config;
pub use byre_git as git;
pub mod http;
pub use byre_log as log;
pub mod mcp;
pub mod startup;
pub use byre_agents as vendors;
pub use byre_terminal as terminal;

/// The git commit this binary was built from (`build.rs`: `git rev-parse HEAD`, the
/// `BYRE_COMMIT` build variable, else `unknown`). `getStatus` reports it as the `commit` of
/// the pages this server served.
pub const BUILD_COMMIT: &str = env!("BYRE_COMMIT");
