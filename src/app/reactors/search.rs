//! The search reactor: keeps the full-text index (`byre_search`, behind `searchAll`) up to
//! date with the log. It follows committed records from the seq the index's last commit
//! covers (0 for an index made anew, so the whole log is indexed again), takes every record
//! ready at once (at most [`BATCH_ENTRIES`] entries), and commits them with the batch's last
//! seq in one tantivy commit, off the async threads. A batch with nothing to index commits
//! nothing; its seq is covered by the next commit. After `kill -9` it starts again from the
//! last commit; what it indexes is derived from the log alone, so nothing is lost or doubled.
//!
//! What is indexed (`byre_search::EntryKind`): a project's name, a task's title and branch,
//! the `user.message`s and `agent.text`s of task and lead sessions (not of reviewers, whose
//! instructions would match everything), and each `review.done`'s summary and findings. A
//! lead session's entries keep the event's `owner`, so only its user finds them.

use std::sync::Arc;

use byre_projections::sessions::SessionRole;
use byre_search::{Entry, EntryKind};
use futures_util::{FutureExt, StreamExt};
use tokio::sync::watch;

use crate::search::SearchIndex;
use byre_log::subscription::subscribe;
use byre_log::{Record, Writer};

/// Most entries committed in one batch (a rebuild of a long log commits every this many).
const BATCH_ENTRIES: usize = 20_000;

/// Starts the reactor; it ends when `shutdown` turns true or the log ends.
pub fn start(
    writer: Writer,
    search: SearchIndex,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(index) = search.index.clone() else {
            return;
        };
        let from = search.indexed_seq();
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            let first = tokio::select! {
                next = events.next() => next,
                _ = shutdown.changed() => return,
            };
            let mut batch = Vec::new();
            let mut through = match first {
                Some(Ok(r)) => {
                    batch.extend(entry(&writer, &r));
                    r.seq
                }
                Some(Err(e)) => {
                    tracing::error!(error = %e, "search reactor cannot read the log");
                    return;
                }
                None => return,
            };
            // Everything ready now joins the batch: one commit for a burst or a rebuild's chunk.
            while batch.len() < BATCH_ENTRIES {
                match events.next().now_or_never() {
                    Some(Some(Ok(r))) => {
                        batch.extend(entry(&writer, &r));
                        through = r.seq;
                    }
                    _ => break,
                }
            }
            if !batch.is_empty() {
                let index = Arc::clone(&index);
                let added = tokio::task::spawn_blocking(move || index.add(&batch, through)).await;
                match added {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "cannot write the search index; search stops following the log");
                        return;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "search indexing panicked");
                        return;
                    }
                }
            }
            search.indexed_seq.send_replace(through);
        }
    })
}

/// The entry record `r` makes, if any.
fn entry(writer: &Writer, r: &Record) -> Option<Entry> {
    let kind = match r.kind.as_str() {
        "project.created" => EntryKind::Project,
        "task.created" => EntryKind::Task,
        "user.message" => EntryKind::UserMessage,
        "agent.text" => EntryKind::AgentText,
        "review.done" => EntryKind::ReviewFindings,
        _ => return None,
    };
    let session = r.agent_session_id.clone().unwrap_or_default();
    if matches!(kind, EntryKind::UserMessage | EntryKind::AgentText) {
        let role = writer.read(|s| s.sessions.get(session.as_str()).map(|x| x.role));
        if role.is_none_or(|role| role == SessionRole::Reviewer) {
            return None;
        }
    }
    let event: serde_json::Value = serde_json::from_str(&r.json).ok()?;
    let payload = &event["payload"];
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or("").to_owned();
    let text = match kind {
        EntryKind::Project => str_of(&payload["name"]),
        EntryKind::Task => format!(
            "{}\n{}",
            str_of(&payload["title"]),
            str_of(&payload["branch"])
        ),
        EntryKind::UserMessage | EntryKind::AgentText => str_of(&payload["text"]),
        EntryKind::ReviewFindings => findings_text(&payload["result"]),
    };
    if text.trim().is_empty() {
        return None;
    }
    Some(Entry {
        seq: r.seq,
        kind,
        project_id: str_of(&event["project_id"]),
        task_id: r.task_id.clone().unwrap_or_default(),
        agent_session_id: session,
        owner: r.owner.clone().unwrap_or_default(),
        text,
    })
}

/// A review's summary, then each finding's title, path and detail, a line each.
fn findings_text(result: &serde_json::Value) -> String {
    let mut text = result["summary"].as_str().unwrap_or("").to_owned();
    for f in result["findings"].as_array().into_iter().flatten() {
        for key in ["title", "path", "detail"] {
            if let Some(s) = f[key].as_str() {
                text.push('\n');
                text.push_str(s);
            }
        }
    }
    text
}
