//! byre's tools for task agents over MCP (`ask_human`, `take_snapshot`, `set_merge_title`,
//! `expose_port`): the adapter.
//!
//! # Design
//!
//! Each agent CLI starts byre's MCP server as a stdio child: the hidden `byre mcp` subcommand
//! ([`stdio`], on the official SDK `rmcp`), launched by argv with byre's own binary
//! (`byre_agents::mcp_launch::McpHost::launch`; Claude Code: `--mcp-config`, Codex:
//! `-c mcp_servers.byre.*`). It forwards each tool call to the running server over loopback
//! HTTP (`POST /internal/mcp/tools/{tool}`, not part of the public contract;
//! `src/http/agent_tools.rs`) with the session's token (`byre_agents::mcp_launch`), and hands back
//! the answer as the tool's result. What a tool does is `byre_app::tools`.

pub mod stdio;
