//! `byre mcp --url URL --token-file PATH --role ROLE`: the stdio MCP server an agent CLI
//! starts (rmcp's server over stdin/stdout). It lists the tools of the session's role
//! ([`byre_app::tools::definitions_for`]) and forwards each call to the running byre
//! (`POST {URL}/internal/mcp/tools/{tool}`, `Authorization: Bearer <token>`, the arguments as
//! the JSON body; answer `{"is_error": bool, "text": "…"}`), whose text becomes the tool's
//! result; an answer with a whole `result` (`hands`) is handed on as it is. Anything that goes wrong is a tool error the model reads, never a crash.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use byre_projections::sessions::SessionRole;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

/// What the model is told about byre's tools as a whole, by the session's role.
fn instructions(role: SessionRole) -> &'static str {
    match role {
        SessionRole::Implementer => "byre runs you as the agent of one task in a git worktree. Use ask_human when you cannot go on without a human's decision, set_merge_title to name your change, expose_port to show a running server to the humans, take_snapshot to keep the worktree's current state, and start_subtask / list_subtasks to hand a part of the work to another agent in a task of its own and follow it. bash, read_file, write_file, upload, download and hands act on the user's own machine (their laptop), not the worktree: use them only when the work needs that machine.",
        SessionRole::Lead => "byre runs you as a user's lead agent, across their projects. Manage their tasks with the lead_* tools, keep what you learn about how they work with remember and forget, and move their right pane with show.",
        SessionRole::Reviewer => "byre runs you as the reviewer of one snapshot of a task. Submit your review with submit_review.",
    }
}

/// The tools of `role`, their descriptions for the model and their argument schemas
/// ([`byre_app::tools::definitions_for`]) as MCP tools.
pub fn tools(role: SessionRole) -> Vec<Tool> {
    byre_app::tools::definitions_for(role)
        .into_iter()
        .map(|t| {
            let schema = t.input_schema.as_object().cloned().unwrap_or_default();
            Tool::new(t.name, t.description, Arc::new(schema))
        })
        .collect()
}

/// The MCP server: forwards tool calls to byre.
#[derive(Debug, Clone)]
struct Forwarder {
    url: String,
    token: String,
    client: reqwest::Client,
    role: SessionRole,
}

impl Forwarder {
    async fn forward(&self, tool: &str, arguments: serde_json::Value) -> CallToolResult {
        let answer = self
            .client
            .post(format!("{}/internal/mcp/tools/{tool}", self.url))
            .bearer_auth(&self.token)
            .json(&arguments)
            .send()
            .await;
        let (is_error, text) = match answer {
            Ok(r) if r.status().is_success() => match r.json::<serde_json::Value>().await {
                Ok(v) if v["result"].is_object() => {
                    match serde_json::from_value::<CallToolResult>(v["result"].clone()) {
                        Ok(whole) => return whole,
                        Err(e) => (
                            true,
                            format!("the machine's tool result was malformed: {e}"),
                        ),
                    }
                }
                Ok(v) => (
                    v["is_error"].as_bool().unwrap_or(true),
                    v["text"]
                        .as_str()
                        .unwrap_or("byre gave no answer")
                        .to_owned(),
                ),
                Err(e) => (true, format!("byre's answer was unreadable: {e}")),
            },
            Ok(r) => {
                let status = r.status();
                let body: serde_json::Value = r.json().await.unwrap_or_default();
                let message = body["message"].as_str().unwrap_or("").to_owned();
                (
                    true,
                    format!("byre refused the call (HTTP {status}): {message}"),
                )
            }
            Err(e) => (true, format!("byre could not be reached: {e}")),
        };
        let content = vec![ContentBlock::text(text)];
        if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
    }
}

impl ServerHandler for Forwarder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(instructions(self.role))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools(self.role)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: Cow<'static, str> = request.name;
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        Ok(self.forward(&name, arguments).await.into())
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
/// # Errors
/// The token file is unreadable, or the MCP session failed to start.
pub async fn serve(url: String, token_file: &Path, role: SessionRole) -> anyhow::Result<()> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", token_file.display()))?
        .trim()
        .to_owned();
    let forwarder = Forwarder {
        url: url.trim_end_matches('/').to_owned(),
        token,
        // Straight to the loopback server: never through the agent's HTTP(S)_PROXY, which
        // could not reach this host's loopback and which byre refuses anyway.
        client: reqwest::Client::builder().no_proxy().build()?,
        role,
    };
    let service = forwarder.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
