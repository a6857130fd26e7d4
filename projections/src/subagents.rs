//! The agent's own subagents: Claude Code's Task/Agent tool calls, each a `task_started` …
//! `task_notification` pair of `system` lines (`vendors/claude-code/PROTOCOL.md` §4;
//! `fixtures/claude/w_subagents.jsonl`). A background one (`run_in_background`) keeps running
//! after the turn that started it ended; `AgentSession.subagents` counts those running.
//!
//! The vendor's output becomes `subagent.started` / `subagent.ended`, each carrying the
//! session's running count after it, so `/api/events` shows the count rise and fall. A process
//! exit ends every subagent still running in it (they run inside the CLI's process). This
//! module also opens the turn a CLI starts by itself ([`open_turn`]): Claude Code reports a
//! finished background subagent to the model in a turn no message of byre's started.

use crate::ids::SessionId;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::sessions::{session_event, Session, TurnStarted};
use crate::State;

/// `subagent.started` payload: one of the agent's subagents started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentStarted {
    /// The vendor's id of the subagent (Claude Code's `task_id`).
    pub id: String,
    /// The tool call that started it (its `tool.call`'s `tool_use_id`).
    pub tool_use_id: String,
    /// What it was asked to do, in a few words.
    #[serde(default)]
    pub description: String,
    /// The vendor's kind of subagent (Claude Code's `subagent_type`, e.g. `general-purpose`).
    #[serde(default)]
    pub kind: String,
    /// How many of the session's subagents run once it started (filled in by `decide`).
    #[serde(default)]
    pub subagents: u32,
}

/// `subagent.ended` payload: one of the agent's subagents ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentEnded {
    /// The vendor's id of the subagent, as in its `subagent.started`.
    pub id: String,
    /// The tool call that started it.
    pub tool_use_id: String,
    /// How it ended: the vendor's status (`completed`, `failed`, `killed`, …), or
    /// `process_exited` when the agent's process ended under it.
    pub status: String,
    /// The vendor's one-line summary (may be empty).
    #[serde(default)]
    pub summary: String,
    /// How many of the session's subagents run once it ended (filled in by `decide`).
    #[serde(default)]
    pub subagents: u32,
}

/// The running subagents of each session: vendor id → tool use id.
pub type Running = BTreeMap<SessionId, BTreeMap<String, String>>;

/// Events for a subagent's start as the vendor reported it; nothing when it already runs.
pub(crate) fn started(
    state: &State,
    s: &mut Session,
    running: &mut BTreeMap<String, String>,
    mut p: SubagentStarted,
) -> Vec<NewEvent> {
    if running.contains_key(&p.id) {
        return Vec::new();
    }
    running.insert(p.id.clone(), p.tool_use_id.clone());
    p.subagents = running.len() as u32;
    s.subagents = p.subagents;
    vec![session_event(
        s,
        state,
        "byre",
        EventBody::SubagentStarted(p),
    )]
}

/// Events for a subagent's end as the vendor reported it; nothing for one not running (a
/// background Bash command's notification, or a second report).
pub(crate) fn ended(
    state: &State,
    s: &mut Session,
    running: &mut BTreeMap<String, String>,
    mut p: SubagentEnded,
) -> Vec<NewEvent> {
    let Some(tool_use_id) = running.remove(&p.id) else {
        return Vec::new();
    };
    if p.tool_use_id.is_empty() {
        p.tool_use_id = tool_use_id;
    }
    p.subagents = running.len() as u32;
    s.subagents = p.subagents;
    vec![session_event(s, state, "byre", EventBody::SubagentEnded(p))]
}

/// `subagent.ended` with `status` (`process_exited`, `byre_restarted`, `task_closed`) for
/// every subagent still running in the session's process, which has ended or is stopped.
pub(crate) fn end_all(state: &State, s: &Session, status: &str) -> Vec<NewEvent> {
    let mut s = s.clone();
    let mut running = state.subagents.get(&s.id).cloned().unwrap_or_default();
    let ids: Vec<String> = running.keys().cloned().collect();
    ids.into_iter()
        .flat_map(|id| {
            ended(
                state,
                &mut s,
                &mut running,
                SubagentEnded {
                    id,
                    tool_use_id: String::new(),
                    status: status.into(),
                    summary: String::new(),
                    subagents: 0,
                },
            )
        })
        .collect()
}

/// The vendor began a turn (Claude Code's `system/init`). Inside a running turn (every turn
/// byre hands a message to) nothing; otherwise the CLI started it by itself, and it becomes a
/// turn like any other: `turn.started` with no input, ended by the vendor's turn end.
pub(crate) fn open_turn(state: &State, s: &mut Session) -> Vec<NewEvent> {
    if s.turn_running || s.completed {
        return Vec::new();
    }
    s.turns += 1;
    s.turn_running = true;
    s.turn_input = None;
    vec![session_event(
        s,
        state,
        "byre",
        EventBody::TurnStarted(TurnStarted {
            turn: s.turns,
            input_ids: Vec::new(),
        }),
    )]
}

/// Folds `subagent.started` / `subagent.ended`: the running set and the session's count.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let sid = e.agent_session_id.as_deref().unwrap_or("");
    let count = match &e.body {
        EventBody::SubagentStarted(p) => {
            let running = state.subagents.entry(sid.to_owned().into()).or_default();
            running.insert(p.id.clone(), p.tool_use_id.clone());
            running.len()
        }
        EventBody::SubagentEnded(p) => {
            let running = state.subagents.entry(sid.to_owned().into()).or_default();
            running.remove(&p.id);
            let n = running.len();
            if n == 0 {
                state.subagents.remove(sid);
            }
            n
        }
        // A completed session's process is stopped: nothing of it runs any more.
        EventBody::SessionCompleted(_) => {
            state.subagents.remove(sid);
            0
        }
        _ => return,
    };
    if let Some(s) = state.sessions.get_mut(sid) {
        s.subagents = count as u32;
    }
}

#[cfg(test)]
mod tests;
