//! `byre mcp --url URL --token-file PATH`: the stdio MCP server an agent CLI starts (rmcp's
//! server over stdin/stdout). It lists byre's tools and forwards each call to the running byre
//! (`POST {URL}/internal/mcp/tools/{tool}`, `Authorization: Bearer <token>`, the arguments as
//! the JSON body; answer `{"is_error": bool, "text": "…"}`), whose text becomes the tool's
//! result. Anything that goes wrong is a tool error the model reads, never a crash.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

/// What the model is told about byre's tools as a whole.
const INSTRUCTIONS: &str = "byre runs you as the agent of one task in a git worktree. Use ask_human when you cannot go on without a human's decision, set_merge_title to name your change, expose_port to show a running server to the humans, and take_snapshot to keep the worktree's current state.";

/// The tools, their descriptions for the model and their argument schemas.
pub fn tools() -> Vec<Tool> {
    let schema = |v: serde_json::Value| -> Arc<serde_json::Map<String, serde_json::Value>> {
        Arc::new(v.as_object().cloned().unwrap_or_default())
    };
    vec![
        Tool::new(
            "ask_human",
            "Ask the humans on this task a question you cannot answer yourself, when you are blocked without their decision. Put the background and the choices in `context` (Markdown): write each choice as a list item, `- ( ) choice` for pick-one questions or `- [ ] choice` for pick-any questions, and mark the choices you recommend as `- (*) choice` or `- [x] choice`. The question is posted to the humans' inbox and this tool returns at once; then END YOUR TURN. The answer arrives as the next user message.",
            schema(json!({
                "type": "object",
                "properties": {
                    "context": {"type": "string", "description": "Markdown: what you found, the options as `- ( )`/`- (*)` or `- [ ]`/`- [x]` list items, and their trade-offs."},
                    "question": {"type": "string", "description": "The question, in one or two sentences."},
                    "why_blocked": {"type": "string", "description": "Why you cannot go on without the answer."},
                    "attachments": {"type": "array", "items": {"type": "object"}, "description": "Optional: files, links or snippets that help answer (objects with e.g. path, url, title)."}
                },
                "required": ["context", "question", "why_blocked"]
            })),
        ),
        Tool::new(
            "take_snapshot",
            "Record a snapshot of the task's worktree as it is now (every tracked and untracked file, ignored ones left out) for the humans to review and compare against; it does not commit, move your branch or touch your index. byre also snapshots at the end of every turn, so use this only for a state worth keeping mid-turn, e.g. before a risky change.",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "set_merge_title",
            "Set the title of the commit that will merge this task's work: one line of at most 72 characters, imperative mood (e.g. \"Add retry to the upload client\").",
            schema(json!({
                "type": "object",
                "properties": {"merge_title": {"type": "string", "description": "One line, at most 72 characters."}},
                "required": ["merge_title"]
            })),
        ),
        Tool::new(
            "expose_port",
            "Show the humans a server you run in this task: give the port it listens on (one of this task's ports: $PORT to $PORT+9) and a short name. byre publishes it as a preview link.",
            schema(json!({
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "description": "A port of this task's block ($PORT to $PORT+9)."},
                    "name": {"type": "string", "description": "A short name, e.g. \"web\"."}
                },
                "required": ["port", "name"]
            })),
        ),
        Tool::new(
            "submit_review",
            "Reviewers only: report your review of the step, once, then end your turn. `summary` is Markdown; each finding names a repository path and a line of the snapshot you read.",
            schema(json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "Markdown: what the step does and your verdict."},
                    "findings": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "severity": {"type": "string", "enum": byre_projections::reviews::SEVERITIES},
                                "category": {"type": "string", "description": "e.g. correctness, security, tests, clarity"},
                                "title": {"type": "string"},
                                "detail": {"type": "string", "description": "Markdown"},
                                "path": {"type": "string", "description": "Relative to the repository root."},
                                "line": {"type": "integer", "minimum": 1}
                            },
                            "required": ["severity", "category", "title", "detail", "path", "line"]
                        }
                    }
                },
                "required": ["summary", "findings"]
            })),
        ),
    ]
}

/// The MCP server: forwards tool calls to byre.
#[derive(Debug, Clone)]
struct Forwarder {
    url: String,
    token: String,
    client: reqwest::Client,
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
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
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
pub async fn serve(url: String, token_file: &Path) -> anyhow::Result<()> {
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
    };
    let service = forwarder.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
