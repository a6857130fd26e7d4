//! `streamEvents`: which records of the log a stream sends, from which seq. The HTTP adapter
//! (`src/http/events.rs`) frames them as Server-Sent Events, adds the live-only deltas and
//! heartbeats, and ends the stream on shutdown or sign-out.

use std::sync::Arc;

use futures_util::Stream;

use super::{Ctx, Error};
use byre_log::subscription::subscribe;
use byre_log::Record;

/// Which events a stream keeps: those `login` may see, of one task or of the caller's lead
/// agent when asked.
pub struct EventFilter {
    login: String,
    task_id: Option<String>,
    lead: bool,
}

impl EventFilter {
    /// Whether the stream sends committed record `r`: events with an owner reach only that
    /// user; `task_id` keeps one task's events; `lead` keeps the caller's lead agent's events.
    pub fn keeps(&self, r: &Record) -> bool {
        if !r.visible_to(&self.login) {
            return false;
        }
        if let Some(t) = &self.task_id {
            if r.task_id.as_deref() != Some(t.as_str()) {
                return false;
            }
        }
        !(self.lead
            && (r.owner.as_deref() != Some(self.login.as_str()) || r.agent_session_id.is_none()))
    }

    /// Whether the stream sends a live-only delta of task `task_id` (empty for a lead's) whose
    /// session belongs to `owner` (a lead's user; `None` for a task's session): a lead's
    /// deltas go only to its user, and a lead stream sends only the caller's lead's.
    pub fn keeps_delta(&self, task_id: &str, owner: Option<&str>) -> bool {
        if let Some(o) = owner {
            return o == self.login && self.task_id.is_none();
        }
        !(self.task_id.as_deref().is_some_and(|t| t != task_id) || self.lead)
    }
}

/// Where a stream starts: `after` and the name the client gave it by (`Last-Event-ID` or
/// `after`), for the error.
pub struct Cursor<'a> {
    /// Events with a seq above it are sent.
    pub after: u64,
    /// `Last-Event-ID` or `after`.
    pub source: &'a str,
}

/// `streamEvents`: the records after the cursor, from the log and then live, each seq once
/// and in order (`byre_log::subscription`), and the filter the stream applies to them.
/// # Errors
/// Invalid for a cursor beyond the log's last seq; not found for an unknown `task_id`.
pub fn open_stream(
    app: &Ctx,
    login: &str,
    cursor: Cursor<'_>,
    task_id: Option<String>,
    lead: bool,
) -> Result<(impl Stream<Item = Result<Arc<Record>, String>>, EventFilter), Error> {
    let after = cursor.after;
    // A cursor ahead of the log (a log replaced under the client, or a made-up seq) would
    // otherwise skip every event up to it without a word.
    let head = app.writer.head();
    if after > head {
        let source = cursor.source;
        return Err(Error::Invalid(format!(
            "{source} {after} is beyond the log's last seq {head}: reload, then resume from a seq of at most {head}"
        )));
    }
    if let Some(task_id) = &task_id {
        if !app.writer.read(|s| s.tasks.contains_key(task_id)) {
            return Err(Error::NotFound(format!("no task `{task_id}`")));
        }
    }
    let filter = EventFilter {
        login: login.to_owned(),
        task_id,
        lead,
    };
    Ok((subscribe(app.writer.clone(), after), filter))
}
