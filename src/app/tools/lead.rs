//! The lead agent's byre tools: `remember`, `forget`, `show`, and the tools it manages tasks
//! with (`lead_list_projects`, `lead_list_tasks`, `lead_read_transcript`, `lead_create_task`,
//! `lead_message_task`, `lead_start_todo_item`, `lead_snapshot_task`). Each is the same
//! application operation a human's request runs (`app::projects`, `app::tasks`,
//! `app::sessions`, `app::todo`, …), acting for the lead's user; each call is a `tool.call`
//! in the lead's log and its effect the operation's own events, so what the lead says it did
//! can be checked. There is no tool to merge, discard or answer the inbox: those stay with
//! the human.

use byre_projections::focus::{Focus, TaskTab};
use byre_projections::sessions::SessionRole;
use byre_projections::Command;
use serde_json::{json, Value};

use super::{ToolResult, ToolSpec};
use crate::{Ctx, Error};
use byre_log::SubmitError;

/// How many of a task's latest events `lead_read_transcript` reads.
const TRANSCRIPT_EVENTS: usize = 400;
/// The most `lead_read_transcript` answers, in bytes (its latest part).
const TRANSCRIPT_BYTES: usize = 12_000;

/// Every lead tool's name.
pub const NAMES: &[&str] = &[
    "remember",
    "forget",
    "show",
    "lead_list_projects",
    "lead_list_tasks",
    "lead_read_transcript",
    "lead_create_task",
    "lead_message_task",
    "lead_start_todo_item",
    "lead_snapshot_task",
];

/// The lead's tools as the model is told about them (part of `app::tools::definitions`).
pub fn definitions() -> Vec<ToolSpec> {
    let tab = json!({"type": "string", "enum": ["transcript", "changes", "files", "terminal", "inbox", "reviews", "workflow", "project"]});
    vec![
        ToolSpec {
            name: "remember",
            description: "Lead only: keep a note about how your user works (preferences, conventions, people, recurring instructions) so later lead sessions know it; every new lead session is told all notes. Give `id` to replace an existing note instead of adding one. Keep notes short and few.",
            input_schema: json!({"type": "object", "properties": {
                "text": {"type": "string", "description": "The whole note, at most 2000 characters."},
                "project_id": {"type": "string", "description": "Optional: the project it applies to; omit for every project."},
                "id": {"type": "string", "description": "Optional: the id of a note to replace."}
            }, "required": ["text"]}),
        },
        ToolSpec {
            name: "forget",
            description: "Lead only: delete one of your notes about your user, by its id.",
            input_schema: json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        },
        ToolSpec {
            name: "show",
            description: "Lead only: move your user's right pane to a project or a task and a tab, with the tabs you want first in `tabs`. While the human is working in the pane (it has focus or holds text they have not sent), `show` moves it ONLY when the human's message you are answering asked to see it: then set `human_asked` true. Otherwise it fails with an error saying the human is busy there; do not retry, say in your reply what they should look at.",
            input_schema: json!({"type": "object", "properties": {
                "project_id": {"type": "string", "description": "The project to show, by id or name (implied by task_id)."},
                "task_id": {"type": "string", "description": "The task to show: its id, or the exact title of an active task."},
                "tab": tab,
                "tabs": {"type": "array", "items": tab, "description": "The tabs to put first, in order."},
                "human_asked": {"type": "boolean", "description": "True only when the human's message you are answering asked to see this."}
            }, "required": ["tab"]}),
        },
        ToolSpec {
            name: "lead_list_projects",
            description: "Lead only: the team's projects (id, name, default branch).",
            input_schema: json!({"type": "object", "properties": {}}),
        },
        ToolSpec {
            name: "lead_list_tasks",
            description: "Lead only: a project's tasks, newest first: id, title, status and state, the last turn's summary, unmerged changes (commits, files, lines), open inbox items and the latest review's state.",
            input_schema: json!({"type": "object", "properties": {
                "project_id": {"type": "string", "description": "The project's id or name."},
                "include_closed": {"type": "boolean", "description": "Also list merged and discarded tasks (default false)."}
            }, "required": ["project_id"]}),
        },
        ToolSpec {
            name: "lead_read_transcript",
            description: "Lead only: a task's recent transcript as text: messages to its agent, the agent's text, its tool calls and turn ends (the latest part when long).",
            input_schema: json!({"type": "object", "properties": {"task_id": {"type": "string", "description": "The task's id, or the exact title of an active task."}}, "required": ["task_id"]}),
        },
        ToolSpec {
            name: "lead_create_task",
            description: "Lead only: create a task in a project for your user, branched from the default branch: with `prompt` its agent starts on it (on `model`, else the user's default model), or with `workflow` (a workflow's name) a workflow run starts instead. Returns the task.",
            input_schema: json!({"type": "object", "properties": {
                "project_id": {"type": "string", "description": "The project's id or name."},
                "title": {"type": "string", "description": "One line."},
                "prompt": {"type": "string", "description": "The agent's first message."},
                "model": {"type": "string", "description": "Optional model: gpt-* runs on Codex, others on Claude Code."},
                "workflow": {"type": "string", "description": "A workflow's name, instead of a prompt."}
            }, "required": ["project_id", "title"]}),
        },
        ToolSpec {
            name: "lead_message_task",
            description: "Lead only: send a message to a task's agent on your user's behalf; the agent is told it comes from the user's lead. It is queued while the agent is mid-turn and handed over as its next turn.",
            input_schema: json!({"type": "object", "properties": {
                "task_id": {"type": "string", "description": "The task's id, or the exact title of an active task."},
                "text": {"type": "string"}
            }, "required": ["task_id", "text"]}),
        },
        ToolSpec {
            name: "lead_start_todo_item",
            description: "Lead only: start a task for an item of a project's TODO.md (on its default branch), by the item's exact title; its agent starts on the item (or, with `discuss`, talks it over first).",
            input_schema: json!({"type": "object", "properties": {
                "project_id": {"type": "string", "description": "The project's id or name."},
                "title": {"type": "string", "description": "The item's title as TODO.md has it."},
                "model": {"type": "string"},
                "discuss": {"type": "boolean"}
            }, "required": ["project_id", "title"]}),
        },
        ToolSpec {
            name: "lead_snapshot_task",
            description: "Lead only: take a snapshot of a task's worktree as it is now (it does not commit or move the branch); it appears in the task's snapshots.",
            input_schema: json!({"type": "object", "properties": {"task_id": {"type": "string", "description": "The task's id, or the exact title of an active task."}}, "required": ["task_id"]}),
        },
    ]
}

/// Runs lead tool `tool` for session `session_id`; `None` for a tool that is not a lead's.
/// A caller that is not a live lead session, bad arguments or a refused operation are a tool
/// error.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped.
pub async fn call(
    app: &Ctx,
    session_id: &str,
    tool: &str,
    args: &Value,
) -> Option<Result<ToolResult, Error>> {
    if !NAMES.contains(&tool) {
        return None;
    }
    let owner = app.writer.read(|s| {
        s.sessions
            .get(session_id)
            .filter(|x| x.role == SessionRole::Lead && !x.completed)
            .map(|x| x.owner.clone())
    });
    let Some(owner) = owner else {
        return Some(Ok(ToolResult::error(format!(
            "`{tool}` is a lead agent's tool; this session may not use it"
        ))));
    };
    let answer = run(app, session_id, &owner, tool, args).await;
    Some(match answer {
        Err(Error::Unavailable(m)) => Err(Error::Unavailable(m)),
        Err(e) => Ok(ToolResult::error(e.to_string())),
        Ok(r) => Ok(r),
    })
}

fn str_arg(args: &Value, name: &str) -> Result<Option<String>, Error> {
    match &args[name] {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(Error::Invalid(format!("`{name}` must be a string"))),
    }
}

fn required(args: &Value, name: &str) -> Result<String, Error> {
    str_arg(args, name)?.ok_or_else(|| Error::Invalid(format!("`{name}` is required")))
}

/// The project `arg` names: its id, or its name when one project has it.
fn project_of(app: &Ctx, arg: &str) -> Result<String, Error> {
    app.writer.read(|s| {
        if s.projects.contains_key(arg) {
            return Ok(arg.to_owned());
        }
        let named: Vec<&str> = s
            .projects
            .values()
            .filter(|p| p.name == arg)
            .map(|p| p.id.as_str())
            .collect();
        match named.as_slice() {
            [one] => Ok((*one).to_owned()),
            [] => Err(Error::NotFound(format!(
                "no project `{arg}` (by id or name)"
            ))),
            _ => Err(Error::Invalid(format!(
                "several projects are named `{arg}`: give its id"
            ))),
        }
    })
}

/// The task `arg` names: its id, or its title when one active task has it.
fn task_of(app: &Ctx, arg: &str) -> Result<String, Error> {
    app.writer.read(|s| {
        if s.tasks.contains_key(arg) {
            return Ok(arg.to_owned());
        }
        let titled: Vec<&str> = s
            .tasks
            .values()
            .filter(|t| t.title == arg && t.status == byre_projections::tasks::TaskStatus::Active)
            .map(|t| t.id.as_str())
            .collect();
        match titled.as_slice() {
            [one] => Ok((*one).to_owned()),
            [] => Err(Error::NotFound(format!(
                "no task `{arg}` (by id, or the title of an active task)"
            ))),
            _ => Err(Error::Invalid(format!(
                "several active tasks are titled `{arg}`: give its id"
            ))),
        }
    })
}

fn ok(text: impl Into<String>) -> Result<ToolResult, Error> {
    Ok(ToolResult::text(text))
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

async fn run(
    app: &Ctx,
    session_id: &str,
    owner: &str,
    tool: &str,
    args: &Value,
) -> Result<ToolResult, Error> {
    match tool {
        "remember" => {
            let ack = submit(
                app,
                Command::SaveLeadNote {
                    session_id: session_id.to_owned().into(),
                    note_id: str_arg(args, "id")?,
                    text: required(args, "text")?,
                    project_id: (str_arg(args, "project_id")?).map(Into::into),
                },
            )
            .await?;
            let id = ack
                .events
                .iter()
                .find_map(|e| match &e.body {
                    byre_projections::EventBody::LeadNoteSaved(p) => Some(p.id.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            ok(format!("Noted (note {id})."))
        }
        "forget" => {
            submit(
                app,
                Command::DeleteLeadNote {
                    login: owner.to_owned().into(),
                    session_id: Some(session_id.to_owned().into()),
                    note_id: required(args, "id")?,
                },
            )
            .await?;
            ok("The note is deleted.")
        }
        "show" => {
            let mut focus = parse_focus(args)?;
            focus.project_id =
                (focus.project_id.map(|p| project_of(app, &p)).transpose()?).map(Into::into);
            focus.task_id = (focus.task_id.map(|t| task_of(app, &t)).transpose()?).map(Into::into);
            let human_asked = args["human_asked"].as_bool().unwrap_or(false);
            submit(
                app,
                Command::ShowFocus {
                    session_id: session_id.to_owned().into(),
                    focus,
                    human_asked,
                },
            )
            .await?;
            ok("The user's right pane shows it now.")
        }
        "lead_list_projects" => {
            let list: Vec<Value> = crate::projects::list_projects(app)
                .into_iter()
                .map(|p| json!({"id": p.id, "name": p.name, "default_branch": p.default_branch}))
                .collect();
            ok(pretty(&list))
        }
        "lead_list_tasks" => list_tasks(app, args).await,
        "lead_read_transcript" => {
            let task_id = task_of(app, &required(args, "task_id")?)?;
            read_transcript(app, owner, &task_id).await
        }
        "lead_create_task" => {
            let project_id = project_of(app, &required(args, "project_id")?)?;
            let new = crate::tasks::NewTask {
                title: required(args, "title")?,
                prompt: str_arg(args, "prompt")?,
                model: str_arg(args, "model")?,
                images: Vec::new(),
                workflow: str_arg(args, "workflow")?,
            };
            let task = crate::tasks::create_task(app, owner, &project_id, new).await?;
            ok(format!(
                "Created task {} ({}) on branch `{}`.",
                task.id, task.title, task.branch
            ))
        }
        "lead_message_task" => message_task(app, owner, args).await,
        "lead_start_todo_item" => {
            let project_id = project_of(app, &required(args, "project_id")?)?;
            let start = crate::todo::TodoStart {
                title: required(args, "title")?,
                model: str_arg(args, "model")?,
                discuss: args["discuss"].as_bool().unwrap_or(false),
            };
            let task = crate::todo::start_todo_item(app, owner, &project_id, start).await?;
            ok(format!("Started task {} ({}).", task.id, task.title))
        }
        "lead_snapshot_task" => {
            let task_id = task_of(app, &required(args, "task_id")?)?;
            submit(
                app,
                Command::RequestSnapshot {
                    task_id: task_id.clone().into(),
                    trigger: byre_projections::snapshots::SnapshotTrigger::Requested,
                },
            )
            .await?;
            ok(format!(
                "A snapshot of task {task_id}'s worktree is being taken; it appears in its snapshots."
            ))
        }
        other => Err(Error::Invalid(format!("no lead tool `{other}`"))),
    }
}

async fn submit(app: &Ctx, cmd: Command) -> Result<byre_log::Ack, Error> {
    match app.writer.submit(cmd, None).await {
        Ok(ack) => Ok(ack),
        Err(SubmitError::Rejected(r)) => Err(Error::Invalid(r.to_string())),
        Err(e) => Err(e.into()),
    }
}

fn parse_tab(v: &Value) -> Result<TaskTab, Error> {
    serde_json::from_value(v.clone())
        .map_err(|_| Error::Invalid(format!("`{v}` is not a tab: transcript, changes, files, terminal, inbox, reviews, workflow or project")))
}

fn parse_focus(args: &Value) -> Result<Focus, Error> {
    let tab = parse_tab(&args["tab"])?;
    let tabs = match &args["tabs"] {
        Value::Null => Vec::new(),
        Value::Array(a) => a.iter().map(parse_tab).collect::<Result<_, _>>()?,
        _ => return Err(Error::Invalid("`tabs` must be an array of tabs".into())),
    };
    Ok(Focus {
        project_id: (str_arg(args, "project_id")?).map(Into::into),
        task_id: (str_arg(args, "task_id")?).map(Into::into),
        tabs,
        tab,
    })
}

async fn list_tasks(app: &Ctx, args: &Value) -> Result<ToolResult, Error> {
    let project_id = project_of(app, &required(args, "project_id")?)?;
    let include_closed = args["include_closed"].as_bool().unwrap_or(false);
    let tasks = crate::tasks::list_tasks(app, &project_id)?;
    let mut out = Vec::new();
    for t in tasks {
        let active = t.status == byre_projections::tasks::TaskStatus::Active;
        if !active && !include_closed {
            continue;
        }
        let (open_inbox, review) = app.writer.read(|s| {
            let open = s
                .inbox
                .values()
                .filter(|i| {
                    i.task_id == t.id && i.state == byre_projections::inbox::InboxState::Open
                })
                .count();
            let review = s
                .reviews
                .values()
                .filter(|r| r.task_id == t.id)
                .max_by_key(|r| r.snapshot_n)
                .map(|r| json!(r.state));
            (open, review)
        });
        let summary = match t.summary_seq {
            0 => String::new(),
            seq => turn_result(app, seq).await,
        };
        let unmerged = if active {
            crate::finish::get_unmerged(app, &t.id)
                .await
                .ok()
                .map(|u| json!({"commits": u.commits, "files": u.files, "insertions": u.insertions, "deletions": u.deletions, "uncommitted": u.uncommitted}))
        } else {
            None
        };
        out.push(json!({
            "id": t.id, "title": t.title, "status": t.status, "state": t.state,
            "branch": t.branch, "last_summary": summary, "unmerged": unmerged,
            "open_inbox_items": open_inbox, "latest_review": review,
        }));
    }
    ok(pretty(&out))
}

/// The `result` of the `turn.ended` at `seq`.
async fn turn_result(app: &Ctx, seq: u64) -> String {
    let store = app.writer.store().clone();
    let record = crate::blocking(move || store.records(seq, seq, 1).map_err(Error::internal))
        .await
        .ok()
        .and_then(|v| v.into_iter().next());
    record
        .and_then(|r| serde_json::from_str::<Value>(&r.json).ok())
        .and_then(|v| v["payload"]["result"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn read_transcript(app: &Ctx, owner: &str, task_id: &str) -> Result<ToolResult, Error> {
    crate::tasks::get_task(app, task_id)?;
    let store = app.writer.store().clone();
    let id = task_id.to_owned();
    let records = crate::blocking(move || {
        store
            .task_records_before(&id, u64::MAX, TRANSCRIPT_EVENTS)
            .map_err(Error::internal)
    })
    .await?;
    let mut lines = Vec::new();
    for r in records.iter().filter(|r| r.visible_to(owner)) {
        let Ok(v) = serde_json::from_str::<Value>(&r.json) else {
            continue;
        };
        let p = &v["payload"];
        let line = match r.kind.as_str() {
            "user.message" => format!(
                "[message from {}] {}",
                v["actor"].as_str().unwrap_or(""),
                p["text"].as_str().unwrap_or("")
            ),
            "user.queued" => format!(
                "[queued from {}] {}",
                v["actor"].as_str().unwrap_or(""),
                p["text"].as_str().unwrap_or("")
            ),
            "agent.text" => format!("[agent] {}", p["text"].as_str().unwrap_or("")),
            "tool.call" => format!("[tool call] {}", p["name"].as_str().unwrap_or("")),
            "turn.ended" => format!(
                "[turn {} ended: {}] {}",
                p["turn"],
                p["outcome"].as_str().unwrap_or(""),
                p["error"].as_str().filter(|e| !e.is_empty()).unwrap_or("")
            ),
            "inbox.item_created" => format!(
                "[inbox item {}] {}",
                p["id"].as_str().unwrap_or(""),
                p["payload"]["question"].as_str().unwrap_or("")
            ),
            _ => continue,
        };
        lines.push(line);
    }
    let mut text = lines.join("\n");
    if text.len() > TRANSCRIPT_BYTES {
        let mut cut = text.len() - TRANSCRIPT_BYTES;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = format!("[… earlier events left out]\n{}", &text[cut..]);
    }
    if text.is_empty() {
        text = "The task has no transcript yet.".into();
    }
    ok(text)
}

async fn message_task(app: &Ctx, owner: &str, args: &Value) -> Result<ToolResult, Error> {
    let task_id = task_of(app, &required(args, "task_id")?)?;
    let text = required(args, "text")?;
    let text =
        format!("(This message comes from {owner}'s lead agent, on their behalf.)\n\n{text}");
    let live = app.writer.read(|s| {
        s.task_sessions(&task_id)
            .into_iter()
            .rev()
            .find(|x| x.role == SessionRole::Implementer && !x.completed)
            .map(|x| (x.id.clone(), x.turn_running))
    });
    match live {
        Some((session_id, mid_turn)) => {
            let message = crate::sessions::Message {
                text,
                images: Vec::new(),
                model: None,
            };
            crate::sessions::send_message(app, owner, &session_id, message).await?;
            let how = if mid_turn {
                "it is mid-turn, so the message is queued as its next turn"
            } else {
                "it starts a turn on it now"
            };
            ok(format!("Sent to task {task_id}'s agent ({how})."))
        }
        None => {
            crate::tasks::get_task(app, &task_id)?;
            crate::sessions::start_session(app, owner, &task_id, None, text, Vec::new()).await?;
            ok(format!(
                "Task {task_id} had no live agent session: one started on your message."
            ))
        }
    }
}
