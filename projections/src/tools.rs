//! Effects of a task agent's byre tools that are not inbox questions: `set_merge_title`
//! (`task.merge_title_set`) and `expose_port` (`preview.exposed`, read by `listPreviews`).
//! The MCP tool calls themselves are recorded from the vendor's stream (`tool.call`); these
//! are their effects. Actor `byre`, envelope the agent's session, task and project.

use crate::ids::{SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::EventBody;
use crate::sessions::session_event;
use crate::tasks::{TaskStatus, PORTS_PER_TASK};
use crate::{NewEvent, Rejection, State};

/// Longest merge title, in characters.
pub const MAX_MERGE_TITLE_CHARS: usize = 72;

/// `task.merge_title_set` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeTitleSet {
    /// The task.
    pub task_id: TaskId,
    /// Its new merge title: one line, at most 72 characters.
    pub merge_title: String,
}

/// `preview.exposed` payload: a port of the task's block, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewExposed {
    /// The task.
    pub task_id: TaskId,
    /// The preview's name.
    pub name: String,
    /// A port in the task's block.
    pub port: u32,
}

/// `task.subtask_started` payload: a task's agent started the task `task_id` (envelope: the
/// new task) as its subtask, with `start_subtask` or CodeBolt's `startAgent` (for the agent
/// `agent`), from the calling session (`crate::subtasks::start`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubtaskStarted {
    /// The new task.
    pub task_id: TaskId,
    /// The task of the agent that started it.
    pub parent_task_id: TaskId,
    /// The session of the agent that started it.
    pub parent_session_id: SessionId,
    /// The CodeBolt agent started on the new task (the `codebolt:<agent>` model's name);
    /// empty for a subtask started with `start_subtask`.
    pub agent: String,
}

/// A preview (spec `Preview`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// The task.
    pub task_id: TaskId,
    /// Name.
    pub name: String,
    /// Port.
    pub port: u32,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
}

fn task_session<'a>(
    state: &'a State,
    session_id: &str,
) -> Result<(&'a crate::sessions::Session, &'a crate::tasks::Task), Rejection> {
    let s = state
        .sessions
        .get(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{session_id}`")))?;
    let t = state
        .tasks
        .get(&s.task_id)
        .ok_or_else(|| Rejection::Forbidden("only a task's agent may use this tool".into()))?;
    if t.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{}` is closed", t.id)));
    }
    Ok((s, t))
}

/// Decides `SetMergeTitle`.
/// # Errors
/// 400 not one line of 1..=72 characters without control characters; 409 while a merge runs or is held (mergeTask fixed
/// the title); 404/409 as [`task_session`].
pub(crate) fn set_merge_title(
    state: &State,
    session_id: &str,
    title: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let (s, t) = task_session(state, session_id)?;
    if t.merging || t.merge_queued_at_us.is_some() {
        return Err(Rejection::Conflict(
            "the merge title was confirmed by mergeTask and is fixed until the task closes".into(),
        ));
    }
    let title = title.trim();
    // As mergeTask's check: a control character (NUL, tab, escape, …) would not survive a
    // commit title byte for byte, or would not be one line.
    if title.is_empty() || title.chars().any(char::is_control) {
        return Err(Rejection::Invalid(
            "the merge title must be one non-empty line without control characters".into(),
        ));
    }
    let n = title.chars().count();
    if n > MAX_MERGE_TITLE_CHARS {
        return Err(Rejection::Invalid(format!(
            "the merge title has {n} characters; at most {MAX_MERGE_TITLE_CHARS} are allowed"
        )));
    }
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::MergeTitleSet(MergeTitleSet {
            task_id: t.id.clone(),
            merge_title: title.into(),
        }),
    )])
}

/// Decides `ExposePort`: a port of the task's block (`port_base` to `port_base + 9`) under a
/// name; exposing a name or port again replaces its earlier preview.
/// # Errors
/// 400 a port outside the block or an empty or long name; 404/409 as [`task_session`].
pub(crate) fn expose_port(
    state: &State,
    session_id: &str,
    name: &str,
    port: u32,
) -> Result<Vec<NewEvent>, Rejection> {
    let (s, t) = task_session(state, session_id)?;
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.contains(['\n', '\r']) {
        return Err(Rejection::Invalid(
            "the name must be one line of 1 to 64 characters".into(),
        ));
    }
    let last = t.port_base + PORTS_PER_TASK - 1;
    if port < t.port_base || port > last {
        return Err(Rejection::Invalid(format!(
            "port {port} is not in this task's block: use one of {}..={last} (PORT is {})",
            t.port_base, t.port_base
        )));
    }
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::PreviewExposed(PreviewExposed {
            task_id: t.id.clone(),
            name: name.into(),
            port,
        }),
    )])
}

/// Folds `task.merge_title_set` and `preview.exposed` (`task.subtask_started` is folded by
/// `crate::subtasks`).
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    match &e.body {
        EventBody::MergeTitleSet(p) => {
            if let Some(t) = state.tasks.get_mut(&p.task_id) {
                t.merge_title.clone_from(&p.merge_title);
            }
        }
        EventBody::PreviewExposed(p) => {
            let list = state.previews.entry(p.task_id.clone()).or_default();
            list.retain(|x| x.name != p.name && x.port != p.port);
            list.push(Preview {
                task_id: p.task_id.clone(),
                name: p.name.clone(),
                port: p.port,
                created_at_us: e.created_at_us,
            });
        }
        _ => {}
    }
}
