//! The inbox: questions, session errors and rate limits waiting for a human. Operations:
//! `listInbox`, `getInboxItem`, `respondInbox`, and the agent's `ask_human` tool.
//! Dismissing a session error or a rate limit only closes it (the agent gets nothing);
//! closing a task closes its open items (`inbox.closed`).
//!
//! Answers reach the agent as one message per answering human (actor: that human), handed
//! over when its session is idle and none of its questions are open: in the same
//! transaction as the `respondInbox` that makes it so, or as the turn ends
//! ([`deliver`]). Answers to a completed (compacted) session's items go to the task's live
//! implementer session, its successor. Nothing outside the log is involved, so a restart between a question and
//! its answer changes nothing.

use crate::ids::{Login, ProjectId, SessionId, TaskId};
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::event::EventBody;
use crate::sessions::{hand_over, session_event, Session, UserQueued};
use crate::{DecideCtx, NewEvent, Rejection, State};

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

/// How a human answered (spec `InboxResponseType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseType {
    /// Chose among the question's options.
    Option,
    /// Wrote their own answer.
    Other,
    /// Dismissed the item.
    Dismiss,
}

/// One human's answer to one item (spec `InboxResponse`; the `inbox.responded` payload's
/// `response`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxResponse {
    /// Its id.
    pub id: String,
    /// The item answered.
    pub item_id: String,
    /// The answering human's login.
    pub user: Login,
    /// How they answered.
    #[serde(rename = "type")]
    pub kind: ResponseType,
    /// `option`: the chosen options (among the item's `options`).
    #[serde(default)]
    pub options: Vec<String>,
    /// Text for the agent; empty for none.
    #[serde(default)]
    pub text: String,
    /// Blob ids sent to the agent as images.
    #[serde(default)]
    pub images: Vec<String>,
    /// Attachments (spec `Attachment`), as sent.
    #[serde(default)]
    pub attachments: Vec<serde_json::Value>,
}

/// `inbox.responded` payload: one item answered or dismissed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxResponded {
    /// The response.
    pub response: InboxResponse,
}

/// `inbox.delivered` payload: answers handed to the agent as one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxDelivered {
    /// The message's input id (its `user.message` or `user.queued`).
    pub input_id: u64,
    /// The responses it carries.
    pub response_ids: Vec<String>,
}

/// `inbox.superseded` payload: a newer question of the same session replaced an open one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxSuperseded {
    /// The item replaced.
    pub id: String,
    /// The newer item.
    pub superseded_by: String,
}

/// `inbox.closed` payload: an open item closed without an answer because its task closed, or
/// (a stage's `blocked` question) its stage reported `done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxClosed {
    /// The item closed.
    pub id: String,
    /// Why: `task_closed` or `stage_finished`.
    pub reason: String,
}

/// A response as folded: the payload plus when it was given and delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseRecord {
    /// The response.
    pub response: InboxResponse,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Seq of its `inbox.responded`.
    pub seq: u64,
    /// When it was handed to the agent (`inbox.delivered`).
    pub delivered_at_us: Option<i64>,
}

/// An inbox item (spec `InboxItem`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    /// Id.
    pub id: String,
    /// Project.
    pub project_id: ProjectId,
    /// Task.
    pub task_id: TaskId,
    /// Session.
    pub agent_session_id: SessionId,
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
    /// Who answered, dismissed or superseded it (`byre` for superseded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
    /// When, in microseconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at_us: Option<i64>,
    /// Its responses, oldest first. (Left out of the digest while empty.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responses: Vec<ResponseRecord>,
}

/// What a human submits for one item (spec `InboxResponseCreate`), parsed at the edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseInput {
    /// The item.
    pub item_id: String,
    /// How.
    pub kind: ResponseType,
    /// `option`: chosen options.
    pub options: Vec<String>,
    /// Text.
    pub text: String,
    /// Blob ids.
    pub images: Vec<String>,
    /// Attachments as sent.
    pub attachments: Vec<serde_json::Value>,
}

/// A question from `ask_human`, its choices already parsed from the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Markdown with the choices inline.
    pub context: String,
    /// The question.
    pub question: String,
    /// Why the agent cannot go on without it.
    pub why_blocked: String,
    /// The choices' text, in order.
    pub options: Vec<String>,
    /// Whether several may be chosen (`- [ ]` items).
    pub multiple: bool,
    /// The marked choices (`- (*)`, `- [x]`).
    pub recommended: Vec<String>,
    /// Attachments as the agent gave them.
    pub attachments: Vec<serde_json::Value>,
}

/// Whether `item`'s answers go to `s`: its own items, and, when `s` is its task's live
/// implementer, the items of the task's completed implementer sessions (a compaction's
/// predecessors), whose agents can no longer take an answer.
fn routed_to(state: &State, item: &InboxItem, s: &Session) -> bool {
    use crate::sessions::SessionRole;
    if item.agent_session_id == s.id {
        return true;
    }
    s.role == SessionRole::Implementer
        && !s.completed
        && !s.task_id.is_empty()
        && item.task_id == s.task_id
        && state
            .sessions
            .get(&item.agent_session_id)
            .is_some_and(|o| o.completed && o.role == SessionRole::Implementer)
}

/// The session that takes `item`'s answers now: its own, or, once that completed, the task's
/// live implementer session (see [`routed_to`]).
fn recipient<'a>(state: &'a State, item: &InboxItem) -> Option<&'a Session> {
    let own = state.sessions.get(&item.agent_session_id)?;
    if !own.completed {
        return Some(own);
    }
    state
        .sessions
        .values()
        .find(|x| !x.completed && routed_to(state, item, x))
}

/// Whether response `r` to `item` carries anything for the agent: every answer does, and the
/// dismissal of a question (the agent waits for it); the dismissal of an item the agent did
/// not ask (a session error, a rate limit) only closes it, so the agent gets nothing.
fn for_agent(item: &InboxItem, r: &InboxResponse) -> bool {
    r.kind != ResponseType::Dismiss || item.kind == InboxKind::Question
}

/// The responses routed to `s` ([`routed_to`]) that carry something for its agent
/// ([`for_agent`]) and were not delivered yet.
fn undelivered_for<'a>(
    state: &'a State,
    s: &'a Session,
) -> impl Iterator<Item = &'a ResponseRecord> {
    state
        .inbox
        .values()
        .filter(move |i| routed_to(state, i, s))
        .flat_map(|i| {
            i.responses
                .iter()
                .filter(move |r| r.delivered_at_us.is_none() && for_agent(i, &r.response))
        })
}

/// The events closing the open items of task `task_id` (`inbox.closed`, reason
/// `task_closed`), written with the event that closes the task.
pub(crate) fn close_task_items(state: &State, task_id: &str) -> Vec<NewEvent> {
    close_items(state, |i| i.task_id == task_id, "task_closed")
}

/// The events closing the open items `which` accepts (`inbox.closed` with `reason`).
pub(crate) fn close_items(
    state: &State,
    which: impl Fn(&InboxItem) -> bool,
    reason: &str,
) -> Vec<NewEvent> {
    state
        .inbox
        .values()
        .filter(|i| i.state == InboxState::Open && which(i))
        .map(|i| {
            let mut e = NewEvent::new(
                "byre",
                EventBody::InboxClosed(InboxClosed {
                    id: i.id.clone(),
                    reason: reason.to_owned(),
                }),
            );
            e.project_id = Some(i.project_id.clone()).filter(|p| !p.is_empty());
            e.task_id = Some(i.task_id.clone()).filter(|t| !t.is_empty());
            e.agent_session_id = Some(i.agent_session_id.clone()).filter(|s| !s.is_empty());
            e
        })
        .collect()
}

/// The open questions whose answers go to session `s` ([`routed_to`]).
fn open_questions_for<'a>(state: &'a State, s: &'a Session) -> impl Iterator<Item = &'a InboxItem> {
    state.inbox.values().filter(move |i| {
        i.kind == InboxKind::Question && i.state == InboxState::Open && routed_to(state, i, s)
    })
}

/// Decides `AskHuman`: a `question` item for the session; its open questions are superseded.
/// # Errors
/// 404 unknown session; 409 a completed session or a closed task; 400 an empty question.
pub(crate) fn ask_human(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    q: &Question,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = state
        .sessions
        .get(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{session_id}`")))?;
    if s.completed {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is completed"
        )));
    }
    if q.question.trim().is_empty() {
        return Err(Rejection::Invalid("`question` must not be empty".into()));
    }
    let id = ctx.id(0);
    let mut events: Vec<NewEvent> = open_questions_for(state, s)
        .map(|old| {
            session_event(
                s,
                state,
                "byre",
                EventBody::InboxSuperseded(InboxSuperseded {
                    id: old.id.clone(),
                    superseded_by: id.clone(),
                }),
            )
        })
        .collect();
    let payload = serde_json::to_value(q).unwrap_or_default();
    events.push(session_event(
        s,
        state,
        "byre",
        EventBody::InboxItemCreated(InboxItemCreated {
            id: id.clone(),
            kind: InboxKind::Question,
            thread_id: id,
            payload,
        }),
    ));
    Ok(events)
}

fn check_response(state: &State, item: &InboxItem, r: &ResponseInput) -> Result<(), Rejection> {
    let options: Vec<&str> = item.payload["options"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let multiple = item.payload["multiple"].as_bool().unwrap_or(false);
    match r.kind {
        ResponseType::Option => {
            if item.kind != InboxKind::Question || options.is_empty() {
                return Err(Rejection::Invalid(format!(
                    "item `{}` has no options to choose from; answer with `other` or `dismiss`",
                    item.id
                )));
            }
            if let Some(o) = r.options.iter().find(|o| !options.contains(&o.as_str())) {
                return Err(Rejection::Invalid(format!(
                    "`{o}` is not one of item `{}`'s options",
                    item.id
                )));
            }
            let distinct: BTreeSet<&String> = r.options.iter().collect();
            if distinct.len() != r.options.len() {
                return Err(Rejection::Invalid("an option is chosen twice".into()));
            }
            if multiple && r.options.is_empty() {
                return Err(Rejection::Invalid(
                    "choose one or more options of a pick-any question".into(),
                ));
            }
            if !multiple && r.options.len() != 1 {
                return Err(Rejection::Invalid(
                    "choose exactly one option of a pick-one question".into(),
                ));
            }
            if !multiple && (!r.text.is_empty() || !r.images.is_empty()) {
                return Err(Rejection::Invalid(
                    "text and images go with `other`, or with options of a pick-any question"
                        .into(),
                ));
            }
        }
        ResponseType::Other => {
            if !r.options.is_empty() {
                return Err(Rejection::Invalid("`options` go with type `option`".into()));
            }
            if r.text.trim().is_empty() && r.images.is_empty() {
                return Err(Rejection::Invalid("`other` needs text, or images".into()));
            }
        }
        ResponseType::Dismiss => {
            if !r.options.is_empty() || !r.text.is_empty() || !r.images.is_empty() {
                return Err(Rejection::Invalid(
                    "`dismiss` takes no options, text or images".into(),
                ));
            }
        }
    }
    crate::sessions::check_images(state, &r.images)
}

/// Decides `RespondInbox`: all responses or none. Then hands the answers of each session that
/// is idle with no open question left to its agent ([`deliver`]).
/// # Errors
/// 400 a malformed response (options, images, an item twice); 404 an unknown item; 409 an item
/// that is not open (answered, dismissed, superseded), or an answer other than a dismissal to
/// an item of a task being discarded.
pub(crate) fn respond(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    responses: &[ResponseInput],
) -> Result<Vec<NewEvent>, Rejection> {
    if responses.is_empty() {
        return Err(Rejection::Invalid("`responses` must not be empty".into()));
    }
    let mut seen = BTreeSet::new();
    for r in responses {
        if !seen.insert(r.item_id.as_str()) {
            return Err(Rejection::Invalid(format!(
                "item `{}` is answered twice in one submission",
                r.item_id
            )));
        }
    }
    let mut items = Vec::new();
    for r in responses {
        let item = state
            .inbox
            .get(&r.item_id)
            .ok_or_else(|| Rejection::NotFound(format!("no inbox item `{}`", r.item_id)))?;
        items.push(item);
    }
    for (item, r) in items.iter().zip(responses) {
        if item.state != InboxState::Open {
            return Err(Rejection::Conflict(format!(
                "inbox item `{}` is not open: it is {}",
                item.id,
                match item.state {
                    InboxState::Answered => "already answered",
                    InboxState::Dismissed => "dismissed",
                    InboxState::Superseded => "superseded by a newer question",
                    InboxState::Open => "open",
                }
            )));
        }
        check_response(state, item, r)?;
        // An answer for the agent of a task being discarded would never reach it (nothing is
        // handed over until the task is discarded): refused like a message, so it is not lost
        // silently; a dismissal still closes the item. (A merging task's answers wait: a
        // failed merge hands them over.)
        if r.kind != ResponseType::Dismiss
            && state.tasks.get(&item.task_id).is_some_and(|t| t.discarding)
        {
            return Err(Rejection::Conflict(format!(
                "task `{}` is being discarded; nothing else is handed to its agent meanwhile, so an answer to inbox item `{}` would never reach it: dismiss the item instead",
                item.task_id, item.id
            )));
        }
    }
    let mut events = Vec::new();
    let mut fresh = Vec::new();
    for (n, (item, r)) in items.iter().zip(responses).enumerate() {
        let response = InboxResponse {
            id: ctx.id(n as u32),
            item_id: item.id.clone(),
            user: actor.into(),
            kind: r.kind,
            options: r.options.clone(),
            text: r.text.clone(),
            images: r.images.clone(),
            attachments: r.attachments.clone(),
        };
        let mut e = NewEvent::new(
            actor,
            EventBody::InboxResponded(InboxResponded {
                response: response.clone(),
            }),
        );
        e.project_id = Some(item.project_id.clone()).filter(|p| !p.is_empty());
        e.task_id = Some(item.task_id.clone()).filter(|t| !t.is_empty());
        e.agent_session_id = Some(item.agent_session_id.clone()).filter(|s| !s.is_empty());
        events.push(e);
        fresh.push(response);
    }
    let answered: BTreeSet<&str> = responses.iter().map(|r| r.item_id.as_str()).collect();
    let sessions: BTreeSet<&str> = items
        .iter()
        .filter_map(|i| recipient(state, i))
        .map(|s| s.id.as_str())
        .collect();
    let mut next_input = state.last_input_id;
    for sid in sessions {
        let Some(s) = state.sessions.get(sid) else {
            continue;
        };
        if s.turn_running || s.completed || s.compact_to.is_some() || !s.queue.is_empty() {
            continue;
        }
        // A merging or discarding task's agent gets nothing else until it is finished.
        if state
            .tasks
            .get(&s.task_id)
            .is_some_and(|t| t.merging || t.discarding)
        {
            continue;
        }
        if open_questions_for(state, s).any(|i| !answered.contains(i.id.as_str())) {
            continue;
        }
        let mine: Vec<InboxResponse> = fresh
            .iter()
            .filter(|r| {
                state
                    .inbox
                    .get(&r.item_id)
                    .is_some_and(|i| routed_to(state, i, s) && for_agent(i, r))
            })
            .cloned()
            .collect();
        let (evs, used) = deliver(state, s, &mine, next_input, "");
        next_input = used;
        events.extend(evs);
    }
    Ok(events)
}

/// Decides `RecordAnswersDelivered`: an `inbox.delivered` (`input_id` 0) for those of the
/// responses that answer the session's items and were not delivered yet; nothing when none
/// (so a repeat is harmless).
pub(crate) fn record_delivered(
    state: &State,
    session_id: &str,
    response_ids: &[String],
) -> Result<Vec<NewEvent>, Rejection> {
    let s = state
        .sessions
        .get(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{session_id}`")))?;
    let ids: Vec<String> = state
        .inbox
        .values()
        .filter(|i| i.agent_session_id == session_id)
        .flat_map(|i| i.responses.iter())
        .filter(|r| r.delivered_at_us.is_none() && response_ids.contains(&r.response.id))
        .map(|r| r.response.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::InboxDelivered(InboxDelivered {
            input_id: 0,
            response_ids: ids,
        }),
    )])
}

/// The events handing the session's undelivered answers (and `fresh` ones, not yet folded) to
/// its agent: per answering human, in order of their first answer, an `inbox.delivered` and a
/// message with that human as actor — the first handed over (`user.message`, `turn.started`),
/// the others queued behind it. The caller checked the session is idle with no open question.
/// Input ids start after `last_input_id`; returns the events and the last id used.
pub(crate) fn deliver(
    state: &State,
    s: &Session,
    fresh: &[InboxResponse],
    last_input_id: u64,
    head: &str,
) -> (Vec<NewEvent>, u64) {
    let mut pending: Vec<(u64, InboxResponse)> = undelivered_for(state, s)
        .map(|r| (r.seq, r.response.clone()))
        .collect();
    pending.sort_by_key(|(seq, _)| *seq);
    pending.extend(fresh.iter().map(|r| (u64::MAX, r.clone())));
    let mut users: Vec<Login> = Vec::new();
    for (_, r) in &pending {
        if !users.contains(&r.user) {
            users.push(r.user.clone());
        }
    }
    let mut events = Vec::new();
    let mut input_id = last_input_id;
    for (n, user) in users.iter().enumerate() {
        input_id += 1;
        let mine: Vec<&InboxResponse> = pending
            .iter()
            .map(|(_, r)| r)
            .filter(|r| &r.user == user)
            .collect();
        let text = message_text(state, &mine);
        let images: Vec<String> = mine.iter().flat_map(|r| r.images.iter().cloned()).collect();
        events.push(session_event(
            s,
            state,
            "byre",
            EventBody::InboxDelivered(InboxDelivered {
                input_id,
                response_ids: mine.iter().map(|r| r.id.clone()).collect(),
            }),
        ));
        if n == 0 {
            events.extend(hand_over(
                state, s, user, input_id, &text, &images, head, None,
            ));
        } else {
            events.push(session_event(
                s,
                state,
                user,
                EventBody::UserQueued(UserQueued {
                    input_id,
                    text,
                    images,
                    head: head.into(),
                    model: None,
                }),
            ));
        }
    }
    (events, input_id)
}

/// The message carrying one human's answers, e.g.
/// `Answer to your question "Which colour?": blue` (see `schema/events.md`, `inbox.delivered`).
fn message_text(state: &State, responses: &[&InboxResponse]) -> String {
    let mut parts = Vec::new();
    for r in responses {
        let question = state
            .inbox
            .get(&r.item_id)
            .map(|i| match i.payload["question"].as_str() {
                Some(q) => format!("your question \"{q}\""),
                None => format!("the inbox item about your session ({})", kind_name(i.kind)),
            })
            .unwrap_or_else(|| "your question".into());
        let mut answer = match r.kind {
            ResponseType::Option => r.options.join(", "),
            ResponseType::Other => r.text.clone(),
            ResponseType::Dismiss => {
                "(dismissed without an answer: decide for yourself, or ask differently)".into()
            }
        };
        if r.kind == ResponseType::Option && !r.text.trim().is_empty() {
            answer = format!("{answer}\n{}", r.text);
        }
        parts.push(format!("Answer to {question} from {}: {answer}", r.user));
    }
    parts.join("\n\n")
}

fn kind_name(k: InboxKind) -> &'static str {
    match k {
        InboxKind::Question => "question",
        InboxKind::SessionError => "session error",
        InboxKind::RateLimited => "rate limit",
    }
}

/// Whether a session's answers may be handed over now: idle, nothing queued, no open question,
/// and something undelivered.
pub(crate) fn deliverable(state: &State, s: &Session) -> bool {
    open_questions_for(state, s).next().is_none() && undelivered_for(state, s).next().is_some()
}

/// Folds the inbox events.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    match &e.body {
        EventBody::InboxResponded(p) => {
            if let Some(i) = state.inbox.get_mut(&p.response.item_id) {
                i.state = if p.response.kind == ResponseType::Dismiss {
                    InboxState::Dismissed
                } else {
                    InboxState::Answered
                };
                i.resolved_by = Some(p.response.user.clone().into());
                i.resolved_at_us = Some(e.created_at_us);
                i.responses.push(ResponseRecord {
                    response: p.response.clone(),
                    created_at_us: e.created_at_us,
                    seq: e.seq,
                    delivered_at_us: None,
                });
            }
            return;
        }
        EventBody::InboxDelivered(p) => {
            for i in state.inbox.values_mut() {
                for r in i.responses.iter_mut() {
                    if p.response_ids.contains(&r.response.id) {
                        r.delivered_at_us = Some(e.created_at_us);
                    }
                }
            }
            return;
        }
        EventBody::InboxSuperseded(p) => {
            if let Some(i) = state.inbox.get_mut(&p.id) {
                i.state = InboxState::Superseded;
                i.resolved_by = Some("byre".into());
                i.resolved_at_us = Some(e.created_at_us);
            }
            return;
        }
        EventBody::InboxClosed(p) => {
            if let Some(i) = state.inbox.get_mut(&p.id) {
                i.state = InboxState::Dismissed;
                i.resolved_by = Some("byre".into());
                i.resolved_at_us = Some(e.created_at_us);
            }
            return;
        }
        _ => {}
    }
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
                resolved_by: None,
                resolved_at_us: None,
                responses: Vec::new(),
            });
    }
}
