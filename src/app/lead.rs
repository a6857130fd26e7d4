//! Each user's lead agent, as its user reaches it: `messageLead`, `listLeadSessions`,
//! `listLeadEvents`, `listLeadNotes`, `deleteLeadNote`. The lead's own tools are
//! [`super::tools::lead`]. The rules (one live lead per user, notes, `show`) are
//! `byre_projections::lead`'s; every lead event is owned by its user, so the event stream and
//! `listTaskEvents` send it to no one else, and these operations read only the caller's.

use byre_projections::Command;

use super::{blocking, Ctx, Error};
use crate::api;

/// The default and the bounds of `listLeadEvents`' `turns`.
pub const DEFAULT_TURNS: u32 = 50;
/// See [`DEFAULT_TURNS`].
pub const MAX_TURNS: u32 = 500;

/// `messageLead`: to the caller's live lead session (a new turn when it is idle, held as its
/// next turn while it is mid-turn), else a new lead session on `model` (else the caller's
/// default model). Returns the session.
/// # Errors
/// Invalid (empty text without images, unknown blob, bad model, a CodeBolt model, a model of
/// the other vendor than the live session's); conflict while the lead writes a compaction
/// handoff.
pub async fn message_lead(
    app: &Ctx,
    login: &str,
    message: super::sessions::Message,
) -> Result<api::AgentSession, Error> {
    let ack = app
        .submit(Command::MessageLead {
            login: login.to_owned().into(),
            text: message.text,
            images: message.images,
            model: message.model,
        })
        .await?;
    let id = ack
        .events
        .iter()
        .find_map(|e| e.agent_session_id.clone())
        .ok_or_else(|| Error::internal("messageLead wrote no session event"))?;
    super::sessions::get_session(app, login, &id)
}

/// `listLeadSessions`: the caller's lead sessions, oldest first.
pub fn list_lead_sessions(app: &Ctx, login: &str) -> Vec<api::AgentSession> {
    app.writer.read(|s| {
        byre_projections::lead::sessions_of(s, login)
            .into_iter()
            .map(api::AgentSession::from)
            .collect()
    })
}

/// `listLeadEvents`: a page of whole turns of the caller's lead events as the contract's
/// `EventPage` (JSON): the events after the `turns + 1`'th `turn.ended` before `before` (or
/// before the log's end, so a running turn is included), oldest first; `more` when earlier
/// events exist. Page back with the first event's seq as `before`.
/// # Errors
/// Invalid for `turns` outside 1 to [`MAX_TURNS`]; internal for a log read.
pub async fn list_lead_events(
    app: &Ctx,
    login: &str,
    before: Option<u64>,
    turns: Option<u32>,
) -> Result<String, Error> {
    let turns = turns.unwrap_or(DEFAULT_TURNS);
    if !(1..=MAX_TURNS).contains(&turns) {
        return Err(Error::Invalid(format!(
            "turns must be 1 to {MAX_TURNS}, not {turns}"
        )));
    }
    let store = app.writer.store().clone();
    let login = login.to_owned();
    blocking(move || {
        let (records, more) = store
            .lead_turns_before(&login, before, turns as usize)
            .map_err(Error::internal)?;
        let mut out = String::from("{\"events\":[");
        for (i, r) in records.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&r.json);
        }
        out.push_str(&format!("],\"more\":{more}}}"));
        Ok(out)
    })
    .await
}

/// `listLeadNotes`: the caller's notes, oldest first.
pub fn list_lead_notes(app: &Ctx, login: &str) -> Vec<api::LeadNote> {
    app.writer.read(|s| {
        byre_projections::lead::notes_of(s, login)
            .into_iter()
            .map(api::LeadNote::from)
            .collect()
    })
}

/// `deleteLeadNote`.
/// # Errors
/// Not found for a note that is not the caller's (unknown, or another user's).
pub async fn delete_lead_note(app: &Ctx, login: &str, note_id: &str) -> Result<(), Error> {
    app.submit(Command::DeleteLeadNote {
        login: login.to_owned().into(),
        session_id: None,
        note_id: note_id.to_owned(),
    })
    .await?;
    Ok(())
}
