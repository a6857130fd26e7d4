//! A task's agent's tools for its subtasks: `start_subtask` and `list_subtasks`, over the
//! operations of `crate::subtasks`.

use serde_json::{json, Value};

use super::{ToolResult, ToolSpec};
use crate::subtasks::{list_subtasks, start_subtask, Base, NewSubtask};
use crate::{Ctx, Error};

/// The subtask tools' definitions, for [`super::definitions`].
pub fn definitions() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "start_subtask",
            description: "Start a subtask: a new task of this project with its own agent, worktree and branch, branched from this worktree's HEAD (commit what it needs first), its agent starting on `prompt`. Returns at once with the subtask's id and branch; the subtask works in parallel. Follow it with list_subtasks. When it is done, a human merges it into this task, and you will be asked to merge its branch with `git merge`. This task cannot be merged or discarded while it has active subtasks.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "The subtask's title: one line, at most 200 characters."},
                    "prompt": {"type": "string", "description": "The subtask agent's first message: everything it needs to know."},
                    "model": {"type": "string", "description": "Optional: the subtask agent's model (e.g. `sonnet`, `gpt-5.5`); yours when absent."}
                },
                "required": ["title", "prompt"]
            }),
        },
        ToolSpec {
            name: "list_subtasks",
            description: "Report this task's subtasks, oldest first, as JSON: for each its task_id, title, branch, status (active, merged, discarded), state (running, idle, merging, …), merging_into_parent, last_summary (its agent's latest turn result) and, while active, unmerged (commits, files, insertions, deletions, uncommitted against this task's branch).",
            input_schema: json!({"type": "object", "properties": {}}),
        },
    ]
}

fn text_arg(args: &Value, name: &str) -> Result<Option<String>, String> {
    match &args[name] {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Null => Ok(None),
        _ => Err(format!("`{name}` must be a string")),
    }
}

/// Runs `start_subtask` or `list_subtasks` for session `session_id`; `None` for another tool.
/// A refusal is a tool error.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped.
pub async fn call(
    app: &Ctx,
    session_id: &str,
    tool: &str,
    args: &Value,
) -> Option<Result<ToolResult, Error>> {
    let answer = match tool {
        "start_subtask" => start_tool(app, session_id, args).await,
        "list_subtasks" => list_subtasks(app, session_id)
            .await
            .map(|list| ToolResult::text(serde_json::to_string_pretty(&list).unwrap_or_default())),
        _ => return None,
    };
    Some(match answer {
        Err(Error::Unavailable(m)) => Err(Error::Unavailable(m)),
        Err(e) => Ok(ToolResult::error(e.to_string())),
        Ok(r) => Ok(r),
    })
}

async fn start_tool(app: &Ctx, session_id: &str, args: &Value) -> Result<ToolResult, Error> {
    let parsed = (|| {
        let title = text_arg(args, "title")?.ok_or("`title` is required")?;
        let prompt = text_arg(args, "prompt")?.ok_or("`prompt` is required")?;
        Ok::<_, String>((title, prompt, text_arg(args, "model")?))
    })();
    let (title, prompt, model) = match parsed {
        Ok(p) => p,
        Err(m) => return Ok(ToolResult::error(m)),
    };
    let started = start_subtask(
        app,
        session_id,
        NewSubtask {
            title,
            prompt,
            model,
            agent: String::new(),
            base: Base::ParentHead,
        },
    )
    .await?;
    let branch = app
        .writer
        .read(|s| s.tasks.get(&started.task_id).map(|t| t.branch.clone()))
        .unwrap_or_default();
    Ok(ToolResult::text(format!(
            "Subtask {} started on branch `{branch}`; its agent is working on your prompt now. Follow it with list_subtasks. You do not need to wait for it.",
            started.task_id
    )))
}
