//! Each user's lead agent (`messageLead`, `listLeadSessions`, `listLeadNotes`,
//! `deleteLeadNote`, and the lead's `remember`, `forget` and `show` tools).
//!
//! A lead session is an ordinary [`Session`] (the same turns, queue, restart and compaction
//! code as a task's) with role `lead`, no task, and `owner` the user's login: every event of
//! it carries that owner ([`crate::sessions::session_event`]), so it reaches only that user
//! (DESIGN.md invariant 4). A user has at most one live lead session. A new one's first
//! message starts with [`LEAD_INSTRUCTIONS`] and the user's notes, so what the lead was told is
//! in the log.
//!
//! Notes (`lead_note.saved`, `lead_note.deleted`) are owned by the user too.

use crate::ids::{Login, ProjectId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::focus::Focus;
use crate::sessions::{
    check_images, hand_over, session_event, Session, SessionCreated, SessionRole, Vendor,
};
use crate::{DecideCtx, Rejection, State};

/// Longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 2000;

/// What a new lead session is told before the human's first message (and before a compacted
/// lead's handoff). The tools it names are `app::lead_tools`'s.
pub const LEAD_INSTRUCTIONS: &str = "You are this user's lead agent in byre, a server that runs coding agents on the team's git repositories. You manage tasks for the user: a task is a branch with its own worktree and its own agent. You have no repository of your own; work only through byre's tools (the `mcp__byre__lead_*` tools, `remember`, `forget` and `show`). Every action you take is a tool call recorded in byre's log, so never claim to have done something without its tool call.\n\nWhat you can do: list projects and tasks (lead_list_projects, lead_list_tasks), read a task's recent transcript (lead_read_transcript), create a task with a prompt, a model or a workflow (lead_create_task), message a task's agent (lead_message_task; it is queued while that agent is mid-turn), start a TODO.md item (lead_start_todo_item), take a snapshot of a task (lead_snapshot_task), move the user's right pane (show), and keep notes about how the user works (remember, forget). Merging, discarding and answering the inbox stay with the human: you have no tools for them; tell the user when one of those is due.";

/// The user's note the lead keeps (spec `LeadNote`), plus its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadNote {
    /// Id.
    pub id: String,
    /// The login whose lead keeps it.
    pub owner: Login,
    /// The note.
    pub text: String,
    /// The project it applies to; `None` for every project.
    pub project_id: Option<ProjectId>,
    /// µs since the epoch.
    pub created_at_us: i64,
    /// µs since the epoch.
    pub updated_at_us: i64,
    /// Seq of its first `lead_note.saved`, for ordering.
    pub created_seq: u64,
}

/// `lead_note.saved` payload: a note made or replaced by the lead's `remember`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadNoteSaved {
    /// The note's id.
    pub id: String,
    /// Its whole text.
    pub text: String,
    /// The project it applies to; absent for every project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
}

/// `lead_note.deleted` payload: the lead's `forget`, or `deleteLeadNote`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeadNoteDeleted {
    /// The note's id.
    pub id: String,
}

/// The user's live lead session, if any.
pub fn live_session<'a>(state: &'a State, login: &str) -> Option<&'a Session> {
    state
        .sessions
        .values()
        .find(|s| s.role == SessionRole::Lead && s.owner == login && !s.completed)
}

/// The user's lead sessions, oldest first (`listLeadSessions`).
pub fn sessions_of<'a>(state: &'a State, login: &str) -> Vec<&'a Session> {
    let mut out: Vec<&Session> = state
        .sessions
        .values()
        .filter(|s| s.role == SessionRole::Lead && s.owner == login)
        .collect();
    out.sort_by_key(|s| s.created_seq);
    out
}

/// The user's notes, oldest first (`listLeadNotes`).
pub fn notes_of<'a>(state: &'a State, login: &str) -> Vec<&'a LeadNote> {
    let mut out: Vec<&LeadNote> = state
        .lead_notes
        .values()
        .filter(|n| n.owner == login)
        .collect();
    out.sort_by_key(|n| n.created_seq);
    out
}

/// [`LEAD_INSTRUCTIONS`] and the user's notes: how every new lead session's first message
/// starts.
pub fn instructions(state: &State, login: &str) -> String {
    let notes = notes_of(state, login);
    let mut out = format!("{LEAD_INSTRUCTIONS}\n\nThe user is `{login}`.");
    if notes.is_empty() {
        out.push_str(" You have no notes about how they work yet; use `remember` when you learn something worth keeping.");
    } else {
        out.push_str(" Your notes about how they work (change one with `remember` and its id, drop one with `forget`):");
        for n in notes {
            let scope = n
                .project_id
                .as_deref()
                .map(|p| format!(" (project {p})"))
                .unwrap_or_default();
            out.push_str(&format!("\n- [{}]{scope} {}", n.id, n.text));
        }
    }
    out
}

/// The first message of a new lead session on the human's `text`.
fn first_message(state: &State, login: &str, text: &str) -> String {
    format!(
        "{}\n\n---\n\nThe user's message:\n\n{text}",
        instructions(state, login)
    )
}

/// The first message of a compacted lead session's successor.
pub(crate) fn successor_message(state: &State, login: &str, handoff: &str) -> String {
    format!(
        "{}\n\n---\n\nYou take over from a previous lead session of this user. Its handoff:\n\n{handoff}",
        instructions(state, login)
    )
}

/// Decides `MessageLead`: to the live lead session (handed over, or queued while it is
/// mid-turn, as `sendMessage`), else a new lead session on `model` (else the user's default
/// model) whose first turn is the instructions, the notes and the message.
/// # Errors
/// Invalid (empty text without images, unknown blob, bad model, a model of the other vendor
/// than the live session's); conflict while the live session writes a compaction handoff.
pub(crate) fn message(
    state: &State,
    ctx: &DecideCtx,
    login: &str,
    text: &str,
    images: &[String],
    model: Option<&str>,
) -> Result<Vec<NewEvent>, Rejection> {
    if let Some(s) = live_session(state, login) {
        if s.compact_to.is_some() {
            return held_for_successor(state, login, s, text, images, model);
        }
        return crate::sessions::send(state, login, &s.id, text, images, model, "");
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err(Rejection::Invalid(
            "text may be empty only when images are given".into(),
        ));
    }
    check_images(state, images)?;
    let model = match model.filter(|m| !m.is_empty()) {
        Some(m) => m.to_owned(),
        None => state
            .users
            .get(login)
            .map(|u| u.default_model.clone())
            .unwrap_or_default(),
    };
    crate::users::check_model(&model)?;
    let vendor = Vendor::for_model(&model);
    if vendor == Vendor::Codebolt {
        return Err(Rejection::Invalid(format!(
            "model `{model}` runs a CodeBolt agent on a task; a lead runs on Claude Code or Codex"
        )));
    }
    let created = SessionCreated {
        id: ctx.id(0).into(),
        task_id: TaskId::default(),
        vendor,
        model,
        vendor_session_id: match vendor {
            Vendor::Claude => ctx.id(1),
            Vendor::Codex | Vendor::Codebolt => String::new(),
        },
        role: SessionRole::Lead,
        forked_from: None,
        forked_at: None,
    };
    let mut s = Session::created(&created, login, ctx.now_us, 0);
    s.owner = login.to_owned().into();
    let mut events = vec![session_event(
        &s,
        state,
        login,
        EventBody::SessionCreated(created),
    )];
    events.extend(hand_over(
        state,
        &s,
        login,
        state.last_input_id + 1,
        &first_message(state, login, text),
        images,
        "",
        None,
    ));
    Ok(events)
}

/// A message to a lead writing its compaction handoff: queued on it (`user.queued`), and moved
/// to its successor with the rest of its queue when the handoff ends
/// (`sessions::compact_into_successor`), so it is the successor's next turn.
fn held_for_successor(
    state: &State,
    login: &str,
    s: &Session,
    text: &str,
    images: &[String],
    model: Option<&str>,
) -> Result<Vec<NewEvent>, Rejection> {
    if text.trim().is_empty() && images.is_empty() {
        return Err(Rejection::Invalid(
            "text may be empty only when images are given".into(),
        ));
    }
    check_images(state, images)?;
    let model = model.filter(|m| !m.is_empty()).map(str::to_owned);
    if let Some(m) = &model {
        crate::users::check_model(m)?;
    }
    Ok(vec![session_event(
        s,
        state,
        login,
        EventBody::UserQueued(crate::sessions::UserQueued {
            input_id: state.last_input_id + 1,
            text: text.into(),
            images: images.to_vec(),
            head: String::new(),
            model,
        }),
    )])
}

/// The live lead session `session_id` (a tool's caller).
fn lead_session<'a>(state: &'a State, session_id: &str) -> Result<&'a Session, Rejection> {
    state
        .sessions
        .get(session_id)
        .filter(|s| s.role == SessionRole::Lead && !s.completed)
        .ok_or_else(|| Rejection::Forbidden("only a user's live lead agent may do this".into()))
}

/// Decides `SaveLeadNote` (the lead's `remember`): a new note, or note `note_id` replaced.
/// # Errors
/// Forbidden (not a live lead session); invalid (empty or over [`MAX_NOTE_CHARS`]); not found
/// (an unknown project, or a note id that is not one of the user's notes).
pub(crate) fn save_note(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    note_id: Option<&str>,
    text: &str,
    project_id: Option<&str>,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = lead_session(state, session_id)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(Rejection::Invalid(
            "the note's text must not be empty".into(),
        ));
    }
    if text.chars().count() > MAX_NOTE_CHARS {
        return Err(Rejection::Invalid(format!(
            "a note holds at most {MAX_NOTE_CHARS} characters"
        )));
    }
    let project_id = project_id.filter(|p| !p.is_empty());
    if let Some(p) = project_id {
        if !state.projects.contains_key(p) {
            return Err(Rejection::NotFound(format!("no project `{p}`")));
        }
    }
    let id = match note_id.filter(|n| !n.is_empty()) {
        Some(n) => {
            note_of(state, &s.owner, n)?;
            n.to_owned()
        }
        None => ctx.id(0),
    };
    let mut e = session_event(
        s,
        state,
        &s.owner,
        EventBody::LeadNoteSaved(LeadNoteSaved {
            id,
            text: text.to_owned(),
            project_id: project_id.map(str::to_owned).map(Into::into),
        }),
    );
    e.project_id = project_id.map(str::to_owned).map(Into::into);
    Ok(vec![e])
}

fn note_of<'a>(state: &'a State, login: &str, note_id: &str) -> Result<&'a LeadNote, Rejection> {
    state
        .lead_notes
        .get(note_id)
        .filter(|n| n.owner == login)
        .ok_or_else(|| Rejection::NotFound(format!("no note `{note_id}`")))
}

/// Decides `DeleteLeadNote`: `deleteLeadNote` by `login` (`session_id` `None`), or the lead's
/// `forget` (`login` is then the session's owner).
/// # Errors
/// Not found for a note that is not one of the user's (another user's, or unknown);
/// forbidden for a session that is not a live lead.
pub(crate) fn delete_note(
    state: &State,
    login: &str,
    session_id: Option<&str>,
    note_id: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let body = EventBody::LeadNoteDeleted(LeadNoteDeleted {
        id: note_id.to_owned(),
    });
    match session_id {
        Some(sid) => {
            let s = lead_session(state, sid)?;
            note_of(state, &s.owner, note_id)?;
            Ok(vec![session_event(s, state, &s.owner, body)])
        }
        None => {
            note_of(state, login, note_id)?;
            Ok(vec![NewEvent::new(login, body).owned_by(login)])
        }
    }
}

/// What `show` answers while the human works in the pane and did not ask for the move.
pub const BUSY_PANE: &str = "the human is busy in the right pane (it has focus or holds unsent text), so show did not move it: only move it while they work there when their message you are answering asked to see something; otherwise tell them in your reply what to look at";

/// Decides `ShowFocus` (the lead's `show`): the user's focus moves (`focus.updated`, owned by
/// the user, with the lead session's id). While the human works in the pane (`setPaneFocus`
/// focused or drafting) it moves only when `human_asked` and the running turn answers a
/// message of the user's own (not a note of byre's).
/// # Errors
/// Forbidden (not a live lead); conflict ([`BUSY_PANE`]); as `setFocus` (unknown task or
/// project, a project that is not the task's, a tab listed twice).
pub(crate) fn show(
    state: &State,
    session_id: &str,
    focus: &Focus,
    human_asked: bool,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = lead_session(state, session_id)?;
    let login = s.owner.as_str();
    let busy = state
        .ui
        .get(login)
        .is_some_and(|u| u.pane_focused || u.pane_drafting);
    let asked =
        human_asked && s.turn_running && s.turn_input.as_ref().is_some_and(|m| m.actor == login);
    if busy && !asked {
        return Err(Rejection::Conflict(BUSY_PANE.into()));
    }
    let mut events = crate::focus::set_focus(state, login, focus)?;
    for e in &mut events {
        e.agent_session_id = Some(s.id.clone());
    }
    Ok(events)
}

/// Folds the note events.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let Some(owner) = e.owner.as_deref() else {
        return;
    };
    match &e.body {
        EventBody::LeadNoteSaved(p) => match state.lead_notes.get_mut(&p.id) {
            Some(n) => {
                n.text.clone_from(&p.text);
                n.project_id.clone_from(&p.project_id);
                n.updated_at_us = e.created_at_us;
            }
            None => {
                state.lead_notes.insert(
                    p.id.clone(),
                    LeadNote {
                        id: p.id.clone(),
                        owner: owner.to_owned().into(),
                        text: p.text.clone(),
                        project_id: p.project_id.clone(),
                        created_at_us: e.created_at_us,
                        updated_at_us: e.created_at_us,
                        created_seq: e.seq,
                    },
                );
            }
        },
        EventBody::LeadNoteDeleted(p) => {
            state.lead_notes.remove(&p.id);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
