//! The agents' byre tools, all defined here and in this module's own: `ask_human`
//! (a question's choices: [`choices`]), `take_snapshot`, `set_merge_title`, `expose_port`,
//! `start_subtask` and `list_subtasks` ([`subtasks`]), a workflow stage agent's `finish_stage`
//! (`crate::runs`), the tools that use the user's own machine ([`machine`]), a reviewer's
//! `submit_review`, and a lead's tools ([`lead`]):
//! who may call them, what a call's arguments mean, what it does and what the agent reads
//! back. Claude Code and Codex agents call them through their `byre mcp` child and the
//! internal HTTP route; CodeBolt agents through their socket's MCP actions. Both come here.

use byre_projections::sessions::SessionRole;
use byre_projections::{Command, EventBody};
use serde_json::{json, Value};

use super::{Ctx, Error};

pub mod choices;
pub mod lead;
pub mod machine;
pub mod subtasks;
use byre_log::SubmitError;

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
    /// A whole MCP `CallToolResult` to hand on as it is (`hands`: a tool of the user's
    /// machine), images included; `text` then holds its text for callers that take text only.
    pub result: Option<Value>,
}

impl ToolResult {
    /// A tool error saying `text`.
    pub fn error(text: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: true,
            text: text.into(),
            result: None,
        }
    }

    /// A successful result saying `text`.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: false,
            text: text.into(),
            result: None,
        }
    }

    /// An MCP `CallToolResult` (an object with `content` and maybe `isError`), handed on as
    /// it is; its text blocks, joined, are the text.
    pub fn call_result(result: Value) -> ToolResult {
        let text = result["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        ToolResult {
            is_error: result["isError"].as_bool().unwrap_or(false),
            text,
            result: Some(result),
        }
    }
}

/// The live session a session token (`byre_agents::mcp_launch::McpHost::token`) stands for.
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
/// `submit_review` is a reviewer's only tool; a lead has only the lead tools
/// (`lead::NAMES`), which only a lead may use; the others are for a task's
/// implementing agent only.
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
    let lead_tool = lead::NAMES.contains(&tool);
    if lead_tool || role == Some(SessionRole::Lead) {
        return (role != Some(SessionRole::Lead) || !lead_tool).then(|| {
            ToolResult::error(format!(
                "`{tool}`: a lead agent has only its lead tools ({}), and only a lead may use them",
                lead::NAMES.join(", ")
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
    if let Some(answer) = lead::call(app, session_id, tool, &args).await {
        return answer;
    }
    if let Some(answer) = subtasks::call(app, session_id, tool, &args).await {
        return answer;
    }
    if let Some(answer) = machine::call(app, session_id, tool, &args).await {
        return answer;
    }
    let task_id = app
        .writer
        .read(|s| s.sessions.get(session_id).map(|x| x.task_id.clone()))
        .unwrap_or_default();
    let cmd = match parse(tool, session_id, &task_id, &args) {
        Ok(cmd) => cmd,
        Err(message) => return Ok(ToolResult::error(message)),
    };
    match app.writer.submit(cmd, None).await {
        Ok(ack) => Ok(ToolResult::text(success_text(tool, &ack))),
        Err(SubmitError::Rejected(r)) => Ok(ToolResult::error(r.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// One of byre's agent tools as the model is told about it.
pub struct ToolSpec {
    /// The tool's name (`ask_human`, …).
    pub name: &'static str,
    /// What the model reads about it.
    pub description: &'static str,
    /// Its arguments' JSON Schema (an object).
    pub input_schema: Value,
}

/// Every tool, its description for the model and its argument schema: the same for every
/// vendor (MCP for the CLIs, the CodeBolt toolbox `byre`).
pub fn definitions() -> Vec<ToolSpec> {
    let mut tools = base_definitions();
    tools.extend(subtasks::definitions());
    tools.push(finish_stage_definition());
    tools.extend(machine::definitions());
    tools.extend(lead::definitions());
    tools
}

/// The tools a session of `role` is offered (the others would be refused, see [`refusal`]): a
/// reviewer has `submit_review` only, a lead its lead tools only, a task's agent the rest.
pub fn definitions_for(role: SessionRole) -> Vec<ToolSpec> {
    let lead = |t: &ToolSpec| lead::NAMES.contains(&t.name);
    definitions()
        .into_iter()
        .filter(|t| match role {
            SessionRole::Reviewer => t.name == "submit_review",
            SessionRole::Lead => lead(t),
            SessionRole::Implementer => t.name != "submit_review" && !lead(t),
        })
        .collect()
}

/// `finish_stage`, a workflow stage agent's tool (`super::runs`).
fn finish_stage_definition() -> ToolSpec {
    ToolSpec {
        name: "finish_stage",
        description: "Workflow stage agents only: finish this task's stage of its workflow run. With `status` `done`, `output` (Markdown) is what the later stages get: what you did, where it is, what they need to know; byre records it with the commit your worktree is at when this turn ends, and the stages after this one start. With `status` `blocked`, give your work so far as `output` and the `reason` you cannot finish: the humans get a question and the run waits; their answer arrives as your next message. Call it once per outcome, then END YOUR TURN. Writing that you are done does not finish the stage; only this tool does.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "output": {"type": "string", "description": "Markdown: what the later stages get (done), or your work so far (blocked)."},
                "status": {"type": "string", "enum": ["done", "blocked"]},
                "reason": {"type": "string", "description": "With blocked: why you cannot finish without the humans."}
            },
            "required": ["output", "status"]
        }),
    }
}

fn base_definitions() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "ask_human",
            description: "Ask the humans on this task a question you cannot answer yourself, when you are blocked without their decision. Put the background and the choices in `context` (Markdown): write each choice as a list item, `- ( ) choice` for pick-one questions or `- [ ] choice` for pick-any questions, and mark the choices you recommend as `- (*) choice` or `- [x] choice`. The question is posted to the humans' inbox and this tool returns at once; then END YOUR TURN. The answer arrives as the next user message.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "context": {"type": "string", "description": "Markdown: what you found, the options as `- ( )`/`- (*)` or `- [ ]`/`- [x]` list items, and their trade-offs."},
                    "question": {"type": "string", "description": "The question, in one or two sentences."},
                    "why_blocked": {"type": "string", "description": "Why you cannot go on without the answer."},
                    "attachments": {"type": "array", "items": {"type": "object"}, "description": "Optional: files, links or snippets that help answer (objects with e.g. path, url, title)."}
                },
                "required": ["context", "question", "why_blocked"]
            }),
        },
        ToolSpec {
            name: "take_snapshot",
            description: "Record a snapshot of the task's worktree as it is now (every tracked and untracked file, ignored ones left out) for the humans to review and compare against; it does not commit, move your branch or touch your index. byre also snapshots at the end of every turn, so use this only for a state worth keeping mid-turn, e.g. before a risky change.",
            input_schema: json!({"type": "object", "properties": {}}),
        },
        ToolSpec {
            name: "set_merge_title",
            description: "Set the title of the commit that will merge this task's work: one line of at most 72 characters, imperative mood (e.g. \"Add retry to the upload client\").",
            input_schema: json!({
                "type": "object",
                "properties": {"merge_title": {"type": "string", "description": "One line, at most 72 characters."}},
                "required": ["merge_title"]
            }),
        },
        ToolSpec {
            name: "expose_port",
            description: "Show the humans a server you run in this task: give the port it listens on (one of this task's ports: $PORT to $PORT+9) and a short name. byre publishes it as a preview link.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "description": "A port of this task's block ($PORT to $PORT+9)."},
                    "name": {"type": "string", "description": "A short name, e.g. \"web\"."}
                },
                "required": ["port", "name"]
            }),
        },
        ToolSpec {
            name: "submit_review",
            description: "Reviewers only: report your review of the step, once, then end your turn. `summary` is Markdown; each finding names a repository path and a line of the snapshot you read.",
            input_schema: json!({
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
            }),
        },
    ]
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
            let choices = choices::parse(&context);
            Ok(Command::AskHuman {
                session_id: session_id.into(),
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
            task_id: task_id.to_owned().into(),
            trigger: byre_projections::snapshots::SnapshotTrigger::Requested,
        }),
        "set_merge_title" => Ok(Command::SetMergeTitle {
            session_id: session_id.into(),
            merge_title: text_arg(args, "merge_title", true)?,
        }),
        "expose_port" => {
            let port = args["port"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or("`port` must be a port number")?;
            Ok(Command::ExposePort {
                session_id: session_id.into(),
                name: text_arg(args, "name", true)?,
                port,
            })
        }
        "finish_stage" => {
            let status = match text_arg(args, "status", true)?.as_str() {
                "done" => byre_projections::runs::FinishStatus::Done,
                "blocked" => byre_projections::runs::FinishStatus::Blocked,
                other => {
                    return Err(format!(
                        "`status` is `done` or `blocked`, not `{other}`"
                    ))
                }
            };
            Ok(Command::FinishStage {
                session_id: session_id.into(),
                output: text_arg(args, "output", true)?,
                status,
                reason: text_arg(args, "reason", false)?,
            })
        }
        "submit_review" => {
            let result: byre_projections::reviews::ReviewResult =
                serde_json::from_value(args.clone()).map_err(|e| {
                    format!("submit_review wants `summary` (a string) and `findings` (an array of objects with severity, category, title, detail, path, line): {e}")
                })?;
            result.check()?;
            Ok(Command::SubmitReview { session_id: session_id.into(), result })
        }
        other => Err(format!(
            "byre has no tool `{other}`; its tools are ask_human, take_snapshot, set_merge_title, expose_port, start_subtask, list_subtasks, finish_stage (for workflow stages), the machine tools bash, read_file, write_file, upload, download and hands, (for reviewers) submit_review and (for a lead) {}", lead::NAMES.join(", ")
        )),
    }
}

/// The tool result the agent reads after `tool` succeeded.
pub fn success_text(tool: &str, ack: &byre_log::Ack) -> String {
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
        "finish_stage" => {
            let done = ack
                .events
                .iter()
                .any(|e| matches!(e.body, EventBody::StageReported(_)));
            if done {
                "Stage finished: your output is recorded, with the commit your worktree is at when this turn ends; the later stages start from it. End your turn now.".into()
            } else {
                "Stage blocked: your question is posted to the humans' inbox and the run waits. End your turn now; their answer arrives as your next message.".into()
            }
        }
        _ => "Done.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(role: SessionRole) -> Vec<&'static str> {
        definitions_for(role).iter().map(|t| t.name).collect()
    }

    #[test]
    fn each_role_is_offered_only_the_tools_it_may_use() {
        assert_eq!(names(SessionRole::Reviewer), ["submit_review"]);
        let lead = names(SessionRole::Lead);
        assert_eq!(lead, super::lead::NAMES);
        let implementer = names(SessionRole::Implementer);
        for t in [
            "ask_human",
            "take_snapshot",
            "start_subtask",
            "finish_stage",
        ] {
            assert!(implementer.contains(&t), "{t} missing: {implementer:?}");
        }
        for t in implementer.iter().chain(lead.iter()) {
            assert_ne!(*t, "submit_review");
        }
        assert!(implementer.iter().all(|t| !lead.contains(t)));
        // Every tool is offered to some role.
        let all: Vec<&str> = definitions().iter().map(|t| t.name).collect();
        assert_eq!(all.len(), implementer.len() + lead.len() + 1);
    }
}
