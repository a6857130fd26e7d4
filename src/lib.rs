//! byre: a server that runs AI coding agents on a team's git repositories, event-sourced on one
//! append-only redb log. See ARCHITECTURE.md for the map and its crate graph.
//!
//! This crate is the adapters and what starts them; the layers they call are crates of their
//! own (byre-app, byre-agents, byre-log, byre-git, …), so none of them can call back here.
//! - [`http`]: the REST, SSE and WebSocket handlers of `schema/byre.openapi.yaml`, and who is
//!   calling (`http::identity`: local, Tailscale headers, bearer tokens, sign-ins).
//! - [`mcp`]: the agents' byre tools over MCP (`byre mcp`, a stdio server).
//! - [`codebolt`]: the WebSocket CodeBolt agents speak, translated into operations.
//! - [`startup`]: builds the running server from a bound listener and a [`config::Config`].
//! - [`config`]: the CLI's configuration, which builds each layer's own settings.
//! - [`cli`]: `byre serve | client | log | rebuild | replay`.
#![warn(missing_docs)]

pub mod cli;
pub mod codebolt;
pub mod config;
pub mod error;
pub mod http;
pub mod mcp;
pub mod startup;

/// The git commit this binary was built from (`build.rs`: `git rev-parse HEAD`, the
/// `BYRE_COMMIT` build variable, else `unknown`). `getStatus` reports it as the `commit` of
/// the pages this server served.
pub const BUILD_COMMIT: &str = env!("BYRE_COMMIT");
