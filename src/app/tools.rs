//! The agents' byre tools (`ask_human`, `take_snapshot`, `set_merge_title`, `expose_port`, and
//! a reviewer's `submit_review`):
//! who may call them, what a call's arguments mean, what it does and what the agent reads
//! back. Claude Code and Codex agents call them through their `byre mcp` child and the
//! internal HTTP route; CodeBolt agents through their socket's MCP actions. Both come here.

use byre_projections::sessions::SessionRole;
use byre_projections::{Command, EventBody};
use serde_json::{json, Value};

use super::{Ctx, Error};
use crate::log::SubmitError;

/// Largest tool call arguments, in bytes (JSON); larger ones are a tool error.
pub const MAX_TOOL_ARGS_BYTES: usize = 256 * 1024;

/// What the agent reads after a tool call: its text, and whether the call failed (a refused,
/// malformed or oversized call is a tool error the model can correct, never a failure of the
/// transport).
pub struct ToolResult {
    /// Whether the call failed.
    pub is_error: bool,
    /// What the model reads.
    pub text: String,
}

impl ToolResult {
    /// A tool error saying `text`.
    pub fn error(text: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: true,
            text: text.into(),
        }
    }
}

/// The live session a session token (`crate::mcp::McpHost::token`) stands for.
/// # Errors
/// [`Error::Forbidden`] for a token that is not a live session's (forged, of no session, or
/// of a completed one).
pub fn session_of_token(app: &Ctx, token: &str) -> Result<String, Error> {
    let session_id = app
        .mcp
        .session_of(token.trim())
        .ok_or_else(|| Error::Forbidden("not a valid session token".into()))?;
    let completed = app
        .writer
        .read(|s| s.sessions.get(&session_id).map(|x| x.completed))
        .ok_or_else(|| Error::Forbidden("the token's session does not exist".into()))?;
    if completed {
        return Err(Error::Forbidden("the token's session has completed".into()));
    }
    Ok(session_id)
}

/// Why session `session_id` may not call `tool` (a tool error), or `None` when it may:
/// `submit_review` is a reviewer's only tool; the others are for a task's implementing agent
/// only.
pub fn refusal(app: &Ctx, session_id: &str, tool: &str) -> Option<ToolResult> {
    let role = app
        .writer
        .read(|s| s.sessions.get(session_id).map(|x| x.role));
    if tool == "submit_review" || role == Some(SessionRole::Reviewer) {
        return (role != Some(SessionRole::Reviewer) || tool != "submit_review").then(|| {
            ToolResult::error(format!(
                "`{tool}`: a reviewer has only `submit_review`, and only a reviewer may use it"
            ))
        });
    }
    let implementer = role == Some(SessionRole::Implementer);
    (!implementer).then(|| {
        ToolResult::error(format!(
            "`{tool}` is for a task's implementing agent only; this session may not use it"
        ))
    })
}

/// Calls `tool` for session `session_id` with `args` (a JSON object): checks the caller,
/// parses the arguments into a command, submits it. A refusal, bad arguments or a rejected
/// command are a tool error.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped.
pub async fn call(
    app: &Ctx,
    session_id: &str,
    tool: &str,
    args: &Value,
) -> Result<ToolResult, Error> {
    if let Some(refused) = refusal(app, session_id, tool) {
        return Ok(refused);
    }
    let args = match args {
        Value::Object(_) => args.clone(),
        Value::Null => json!({}),
        _ => return Ok(ToolResult::error("the arguments must be a JSON object")),
    };
    let task_id = app
        .writer
        .read(|s| s.sessions.get(session_id).map(|x| x.task_id.clone()))
        .unwrap_or_default();
    let cmd = match parse(tool, session_id, &task_id, &args) {
        Ok(cmd) => cmd,
        Err(message) => return Ok(ToolResult::error(message)),
    };
    match app.writer.submit(cmd, None).await {
        Ok(ack) => Ok(ToolResult {
            is_error: false,
            text: success_text(tool, &ack),
        }),
        Err(SubmitError::Rejected(r)) => Ok(ToolResult::error(r.to_string())),
        Err(e) => Err(e.into()),
    }
}

fn text_arg(args: &Value, name: &str, required: bool) -> Result<String, String> {
    match &args[name] {
        Value::String(s) => Ok(s.clone()),
        Value::Null if !required => Ok(String::new()),
        Value::Null => Err(format!("`{name}` is required")),
        _ => Err(format!("`{name}` must be a string")),
    }
}

/// The command a call asks for; `Err` a message for the model (unknown tool, bad arguments).
pub fn parse(tool: &str, session_id: &str, task_id: &str, args: &Value) -> Result<Command, String> {
    let session_id = session_id.to_owned();
    match tool {
        "ask_human" => {
            let context = text_arg(args, "context", false)?;
            let question = text_arg(args, "question", true)?;
            let why_blocked = text_arg(args, "why_blocked", false)?;
            let attachments = match &args["attachments"] {
                Value::Null => Vec::new(),
                Value::Array(a) if a.iter().all(Value::is_object) => a.clone(),
                _ => return Err("`attachments` must be an array of objects".into()),
            };
            let choices = crate::mcp::choices::parse(&context);
            Ok(Command::AskHuman {
                session_id,
                question: byre_projections::inbox::Question {
                    context,
                    question,
                    why_blocked,
                    options: choices.options,
                    multiple: choices.multiple,
                    recommended: choices.recommended,
                    attachments,
                },
            })
        }
        "take_snapshot" => Ok(Command::RequestSnapshot {
            task_id: task_id.to_owned(),
            trigger: byre_projections::snapshots::SnapshotTrigger::Requested,
        }),
        "set_merge_title" => Ok(Command::SetMergeTitle {
            session_id,
            merge_title: text_arg(args, "merge_title", true)?,
        }),
        "expose_port" => {
            let port = args["port"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or("`port` must be a port number")?;
            Ok(Command::ExposePort {
                session_id,
                name: text_arg(args, "name", true)?,
                port,
            })
        }
        "submit_review" => {
            let result: byre_projections::reviews::ReviewResult =
                serde_json::from_value(args.clone()).map_err(|e| {
                    format!("submit_review wants `summary` (a string) and `findings` (an array of objects with severity, category, title, detail, path, line): {e}")
                })?;
            result.check()?;
            Ok(Command::SubmitReview { session_id, result })
        }
        other => Err(format!(
            "byre has no tool `{other}`; its tools are ask_human, take_snapshot, set_merge_title, expose_port and (for reviewers) submit_review"
        )),
    }
}

/// The tool result the agent reads after `tool` succeeded.
pub fn success_text(tool: &str, ack: &crate::log::Ack) -> String {
    match tool {
        "ask_human" => {
            let id = ack
                .events
                .iter()
                .find_map(|e| match &e.body {
                    EventBody::InboxItemCreated(p) => Some(p.id.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            format!("Your question is posted to the humans' inbox (item {id}). End your turn now: do not wait, poll or ask again. Their answer will arrive as the next user message.")
        }
        "set_merge_title" => "The merge title is set.".into(),
        "take_snapshot" => "A snapshot of the worktree as it is now is being taken; it appears in the task's snapshots. Your branch and index are not touched.".into(),
        "expose_port" => {
            "The port is exposed as a preview; the humans see its link in the task.".into()
        }
        "submit_review" => "Your review is recorded. End your turn now.".into(),
        _ => "Done.".into(),
    }
}
