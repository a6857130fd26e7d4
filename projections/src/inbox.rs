//! The inbox: questions, session errors and rate limits waiting for a human. Operations:
//! `listInbox`, `getInboxItem` (answering comes with the agent-tools issue).

use serde::{Deserialize, Serialize};

use crate::State;

/// What an item is (spec `InboxItem.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxKind {
    /// An agent's question.
    Question,
    /// An agent session failed.
    SessionError,
    /// The vendor's rate limit stopped a turn.
    RateLimited,
}

/// Where an item stands (spec `InboxState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxState {
    /// Waiting for a human.
    Open,
    /// Answered.
    Answered,
    /// Dismissed.
    Dismissed,
    /// Replaced by a newer question.
    Superseded,
}

/// `inbox.item_created` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItemCreated {
    /// The item's id.
    pub id: String,
    /// Its kind.
    pub kind: InboxKind,
    /// The thread it belongs to (its own id for a first item).
    pub thread_id: String,
    /// Kind-specific: `session_error`: `{error}`; `rate_limited`: `{vendor, rate_limit, error}`.
    pub payload: serde_json::Value,
}

/// An inbox item (spec `InboxItem`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxItem {
    /// Id.
    pub id: String,
    /// Project.
    pub project_id: String,
    /// Task.
    pub task_id: String,
    /// Session.
    pub agent_session_id: String,
    /// Thread.
    pub thread_id: String,
    /// Kind.
    pub kind: InboxKind,
    /// Payload.
    pub payload: serde_json::Value,
    /// State.
    pub state: InboxState,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Seq of `inbox.item_created`.
    pub created_seq: u64,
}

/// Folds `inbox.item_created`.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    if let crate::EventBody::InboxItemCreated(p) = &e.body {
        state
            .inbox
            .entry(p.id.clone())
            .or_insert_with(|| InboxItem {
                id: p.id.clone(),
                project_id: e.project_id.clone().unwrap_or_default(),
                task_id: e.task_id.clone().unwrap_or_default(),
                agent_session_id: e.agent_session_id.clone().unwrap_or_default(),
                thread_id: p.thread_id.clone(),
                kind: p.kind,
                payload: p.payload.clone(),
                state: InboxState::Open,
                created_at_us: e.created_at_us,
                created_seq: e.seq,
            });
    }
}
