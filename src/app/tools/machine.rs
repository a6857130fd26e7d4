//! The agents' tools that use a human's own machine (issue 17 part 2): `bash`, `read_file`,
//! `write_file`, `upload`, `download` and `hands`, each one `ClientRequest` to a machine
//! connected over `connectClient` ([`crate::clients`]). Declared once here, so Claude Code and
//! Codex (over MCP) and CodeBolt agents get the same tools.
//!
//! The machine: a connected machine of the task's owner (its creator; a subtask's or a
//! workflow stage's is the creator of its parent or run), the most recently connected first,
//! and only while no one else has written to the task's family (`State::other_participant`:
//! a message or answer of someone else's in the task, its parent or subtasks, or its workflow
//! run) nor started the running turn (`Session::turn_started_by`); it never reaches the
//! sender's machine either (docs/security.md). In
//! another user's turn, with no machine connected, or when the machine fails, goes or says the
//! request failed, the call is a tool error saying so; never a fallback to another machine. Worktree paths (`upload`'s `path`, `download`'s `dest`) are
//! checked like the worktree views (`git::views::TreePath`, `WorkPath`): relative, no `..` or
//! `.git`, and inside the worktree with symlinks resolved.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use byre_projections::tasks::TaskStatus;
use serde_json::{json, Value};

use super::{ToolResult, ToolSpec};
use crate::{Ctx, Error};
use byre_git::views::TreePath;
use byre_machines::{InWorktree, Machine};

/// The names of these tools.
pub const NAMES: [&str; 6] = [
    "bash",
    "read_file",
    "write_file",
    "upload",
    "download",
    "hands",
];

/// `bash`'s timeout when the agent names none, in seconds.
const DEFAULT_BASH_TIMEOUT_S: u64 = 120;
/// Longest `bash` timeout an agent may ask for, in seconds.
const MAX_BASH_TIMEOUT_S: u64 = 3600;
/// How long byre waits beyond a command's own timeout for the machine's reply.
const REPLY_MARGIN: Duration = Duration::from_secs(30);
/// How long byre waits for a file, transfer or hands request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The tools' definitions, for [`crate::definitions`].
pub fn definitions() -> Vec<ToolSpec> {
    let path = |what: &str| json!({"type": "string", "description": what});
    vec![
        ToolSpec {
            name: "bash",
            description: "Run a shell command on the user's own machine (their laptop, connected with `byre client`), not in the worktree: zsh as a login shell (else their login shell) in their home directory. Returns the exit code and the last 64 KiB of stdout and stderr together; a command still running at its timeout is killed (exit code -1). Fails when the user has no machine connected.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT_S, "description": "Kill it after this long; default 120."}
                },
                "required": ["command"]
            }),
        },
        ToolSpec {
            name: "read_file",
            description: "Read a file on the user's own machine (absolute, or starting with ~/). Returns its text (or says it is binary).",
            input_schema: json!({
                "type": "object",
                "properties": {"path": path("The file on the machine: absolute or ~/…")},
                "required": ["path"]
            }),
        },
        ToolSpec {
            name: "write_file",
            description: "Write a text file on the user's own machine (absolute, or starting with ~/), replacing it; parent directories are made.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": path("The file on the machine: absolute or ~/…"),
                    "content": {"type": "string", "description": "The file's new text."}
                },
                "required": ["path", "content"]
            }),
        },
        ToolSpec {
            name: "upload",
            description: "Copy a file or directory of this task's worktree to the user's own machine. Whatever is at `dest` is replaced.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": path("The file or directory in the worktree, relative to its root."),
                    "dest": path("Where it ends up on the machine: absolute or ~/…, the new name included.")
                },
                "required": ["path", "dest"]
            }),
        },
        ToolSpec {
            name: "download",
            description: "Copy a file or directory of the user's own machine into this task's worktree. Whatever is at `dest` is replaced; parent directories are made.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": path("The file or directory on the machine: absolute or ~/…"),
                    "dest": path("Where it ends up in the worktree, relative to its root, the new name included.")
                },
                "required": ["path", "dest"]
            }),
        },
        ToolSpec {
            name: "hands",
            description: "Call a tool of the byre-hands MCP server running on the user's own machine (started by `byre client --hands-mcp`). Returns that tool's result as it is.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "description": "The hands tool's name."},
                    "arguments": {"type": "object", "description": "Its arguments."}
                },
                "required": ["tool"]
            }),
        },
    ]
}

fn text_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    match &args[name] {
        Value::String(s) => Ok(s),
        Value::Null => Err(format!("`{name}` is required")),
        _ => Err(format!("`{name}` must be a string")),
    }
}

/// A machine path as an agent gives it: absolute or `~/…`, no NUL.
fn machine_path(args: &Value, name: &str) -> Result<String, String> {
    let p = text_arg(args, name)?;
    if p.contains('\0') || !(p.starts_with('/') || p.starts_with("~/")) {
        return Err(format!(
            "`{name}` must be a path on the machine, absolute or starting with ~/"
        ));
    }
    Ok(p.to_owned())
}

/// Runs one of these tools for session `session_id`; `None` for another tool. A refusal or a
/// failed request is a tool error.
/// # Errors
/// None today; the `Result` matches the other tool families.
pub async fn call(
    app: &Ctx,
    session_id: &str,
    tool: &str,
    args: &Value,
) -> Option<Result<ToolResult, Error>> {
    if !NAMES.contains(&tool) {
        return None;
    }
    Some(Ok(match run(app, session_id, tool, args).await {
        Ok(r) => r,
        Err(message) => ToolResult::error(message),
    }))
}

/// What a tool needs of its session: the login whose machines it may use (the task's owner),
/// another human who drives the task's agents (else who started the running turn), and the
/// task's worktree.
fn place(app: &Ctx, session_id: &str) -> Result<(String, String, PathBuf), String> {
    app.writer.read(|s| {
        let session = s
            .sessions
            .get(session_id)
            .ok_or_else(|| format!("no session `{session_id}`"))?;
        let task = s
            .tasks
            .get(&session.task_id)
            .ok_or("this session has no task")?;
        if task.status != TaskStatus::Active || !task.worktree_ready {
            return Err("this task has no worktree now".to_owned());
        }
        let owner = task.created_by.as_str();
        // Whoever else has written into the task's family drives its agents too, in whatever
        // turn (a restart note, a background command's turn, a subtask, a later stage): the
        // owner's machine is off for it, not only for that human's own turns.
        let driver = s
            .other_participant(&session.task_id, owner)
            .unwrap_or_else(|| session.turn_started_by(owner));
        Ok((
            owner.to_owned(),
            driver.to_owned(),
            PathBuf::from(&task.worktree_path),
        ))
    })
}

async fn run(app: &Ctx, session_id: &str, tool: &str, args: &Value) -> Result<ToolResult, String> {
    let args = if args.is_null() { &json!({}) } else { args };
    let (owner, starter, worktree) = place(app, session_id)?;
    let machine: Machine = app.machines.of(&owner).ok_or_else(|| {
        format!(
            "no machine of {owner} is connected (the task's owner: only their machines serve it); they must run `byre client --server <this byre's URL>` on one first"
        )
    })?;
    if starter != owner {
        return Err(format!(
            "`{}` is {owner}'s machine: it serves only tasks whose agents only {owner} has written to, and {starter} has written to this task (or to a task of its family: its parent, its subtasks, its workflow run). Do the work in the worktree, or ask {owner} to do it in a task of their own",
            machine.host
        ));
    }
    let machines = &app.machines;
    match tool {
        "bash" => {
            let command = text_arg(args, "command")?;
            let timeout_s = match &args["timeout_seconds"] {
                Value::Null => DEFAULT_BASH_TIMEOUT_S,
                v => v
                    .as_u64()
                    .filter(|t| (1..=MAX_BASH_TIMEOUT_S).contains(t))
                    .ok_or(format!(
                        "`timeout_seconds` must be a whole number from 1 to {MAX_BASH_TIMEOUT_S}"
                    ))?,
            };
            let request = json!({"op": "bash", "command": command, "timeout_ms": timeout_s * 1000});
            let wait = Duration::from_secs(timeout_s) + REPLY_MARGIN;
            let reply = machines.request(&machine, request, wait).await?;
            let code = reply["exit_code"].as_i64().unwrap_or(-1);
            let output = reply["output"].as_str().unwrap_or_default();
            let killed = if code == -1 {
                " (killed at its timeout)"
            } else {
                ""
            };
            Ok(ToolResult::text(format!(
                "exit code {code}{killed} on `{}`\n{output}",
                machine.host
            )))
        }
        "read_file" => {
            let path = machine_path(args, "path")?;
            let request = json!({"op": "read_file", "path": path});
            let reply = machines.request(&machine, request, REQUEST_TIMEOUT).await?;
            let data = base64::engine::general_purpose::STANDARD
                .decode(reply["data"].as_str().unwrap_or_default())
                .map_err(|e| format!("the machine's answer was not base64: {e}"))?;
            Ok(ToolResult::text(match String::from_utf8(data) {
                Ok(text) => text,
                Err(e) => format!(
                    "{path} is binary ({} bytes); use download to bring it into the worktree",
                    e.as_bytes().len()
                ),
            }))
        }
        "write_file" => {
            let path = machine_path(args, "path")?;
            let content = text_arg(args, "content")?;
            let data = base64::engine::general_purpose::STANDARD.encode(content);
            let request = json!({"op": "write_file", "path": path, "data": data});
            machines.request(&machine, request, REQUEST_TIMEOUT).await?;
            Ok(ToolResult::text(format!(
                "Wrote {} bytes to {path} on `{}`.",
                content.len(),
                machine.host
            )))
        }
        "upload" => {
            let raw = text_arg(args, "path")?.to_owned();
            let dest = machine_path(args, "dest")?;
            let path = in_worktree(&worktree, &raw).map_err(|e| e.to_string())?;
            let data_dir = app.settings.data_dir.clone();
            machines
                .upload(&machine, data_dir, path, &dest, REQUEST_TIMEOUT)
                .await?;
            Ok(ToolResult::text(format!(
                "Uploaded {} to {dest} on `{}`.",
                text_arg(args, "path")?,
                machine.host
            )))
        }
        "download" => {
            let path = machine_path(args, "path")?;
            let raw = text_arg(args, "dest")?.to_owned();
            let dest = in_worktree(&worktree, &raw).map_err(|e| e.to_string())?;
            if dest.rel.as_os_str().is_empty() {
                return Err(
                    "`dest` must name a file or directory in the worktree, not its root".into(),
                );
            }
            machines
                .download(&machine, &path, dest, REQUEST_TIMEOUT)
                .await?;
            Ok(ToolResult::text(format!(
                "Downloaded {path} from `{}` to {} in the worktree.",
                machine.host,
                text_arg(args, "dest")?
            )))
        }
        "hands" => {
            let name = text_arg(args, "tool")?;
            let arguments = match &args["arguments"] {
                Value::Null => json!({}),
                v @ Value::Object(_) => v.clone(),
                _ => return Err("`arguments` must be an object".into()),
            };
            let request = json!({"op": "hands", "tool": name, "arguments": arguments});
            let reply = machines.request(&machine, request, REQUEST_TIMEOUT).await?;
            let result = reply["result"].clone();
            if !result.is_object() {
                return Err("the machine answered without a tool result".into());
            }
            Ok(ToolResult::call_result(result))
        }
        _ => Err(format!("no machine tool `{tool}`")),
    }
}

/// `raw` (a worktree path from an agent's `upload` or `download`) checked as the worktree
/// views check theirs (`TreePath`: relative, no `..`, not into `.git`); the transfer then
/// resolves it beneath the worktree by handle, following no symlink.
fn in_worktree(worktree: &Path, raw: &str) -> Result<InWorktree, Error> {
    let tree = TreePath::parse(raw)?;
    Ok(InWorktree {
        worktree: worktree.to_owned(),
        rel: PathBuf::from(tree.as_ref()),
    })
}
