//! Agent sessions: a vendor CLI's conversation on a task, turn by turn. Operations:
//! `createSession`, `listSessions`, `getSession`, `sendMessage`, `withdrawMessage`,
//! `interruptSession`; and the vendor runtime's outcomes (normalised output, process exits).
//!
//! A message sent while the session is idle is handed over at once (`user.message`, then
//! `turn.started`). One sent while a turn runs is queued (`user.queued`) and handed over as
//! the next turn when the running one ends, oldest first, one per turn; until then it can be
//! withdrawn (`user.unqueued`).

use crate::ids::{Login, SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::inbox::{InboxItemCreated, InboxKind};
use crate::tasks::TaskStatus;
use crate::{DecideCtx, Rejection, State};

/// Which CLI runs a session (spec `AgentSession.vendor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
    /// A CodeBolt agent (a Node program using `@codebolt/codeboltjs`) over byre's WebSocket.
    Codebolt,
}

impl Vendor {
    /// `codebolt:<agent>` models run CodeBolt agents, gpt-* models run on Codex, every other
    /// model on Claude Code.
    pub fn for_model(model: &str) -> Vendor {
        if model.starts_with("codebolt:") {
            Vendor::Codebolt
        } else if model.starts_with("gpt-") {
            Vendor::Codex
        } else {
            Vendor::Claude
        }
    }

    /// `claude` or `codex`.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Claude => "claude",
            Vendor::Codex => "codex",
            Vendor::Codebolt => "codebolt",
        }
    }
}

/// Spec `AgentSession.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for a message.
    Idle,
    /// A turn runs.
    Running,
    /// Ended for good (compacted or its task closed).
    Completed,
}

/// Spec `AgentSession.role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionRole {
    /// A task's agent.
    Implementer,
    /// A user's lead agent.
    Lead,
    /// A review's agent.
    Reviewer,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// Normally.
    Completed,
    /// Interrupted by a human (or by byre's restart).
    Interrupted,
    /// On an error (API error after retries, the process died, it could not start).
    Failed,
}

/// Token counts of a turn, as the vendor reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;
    /// Field by field (saturating).
    fn add(self, b: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(b.input_tokens),
            output_tokens: self.output_tokens.saturating_add(b.output_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .saturating_add(b.cache_read_input_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(b.cache_creation_input_tokens),
        }
    }
}

/// A queued message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedInput {
    /// Its id (`user.queued`'s `input_id`).
    pub input_id: u64,
    /// Text.
    pub text: String,
    /// Blob ids.
    pub images: Vec<String>,
    /// Model to switch to.
    pub model: Option<String>,
    /// Sender.
    pub actor: String,
    /// The worktree HEAD when it was sent.
    pub head: String,
}

/// An agent session (spec `AgentSession`, plus the facts its state follows from).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Id.
    pub id: SessionId,
    /// Task (empty for a lead session).
    pub task_id: TaskId,
    /// Lead owner (empty for a task's session).
    pub owner: Login,
    /// Vendor.
    pub vendor: Vendor,
    /// Model.
    pub model: String,
    /// The vendor's session id.
    pub vendor_session_id: String,
    /// State.
    pub state: SessionState,
    /// Role.
    pub role: SessionRole,
    /// Creator.
    pub created_by: Login,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Running subagents.
    pub subagents: u32,
    /// Turns started so far; the running or last turn's number.
    pub turns: u32,
    /// Whether a turn runs.
    pub turn_running: bool,
    /// Whether an interrupt was asked for the running turn.
    pub interrupt_requested: bool,
    /// Whether the session ended for good.
    pub completed: bool,
    /// Messages waiting for the next turn, oldest first.
    pub queue: Vec<QueuedInput>,
    /// While a compaction's handoff turn runs: the successor's model and the worktree HEAD
    /// when it was asked for.
    pub compact_to: Option<(String, String)>,
    /// The vendor's last API retry in the running turn (its rate-limit status, for Claude
    /// Code, which shows no rate-limit headers); cleared when a turn starts.
    pub last_api_retry: Option<serde_json::Value>,
    /// Seq of `session.created`.
    pub created_seq: u64,
    /// The running (or last) turn's message as it was handed over, so that a turn a restart
    /// cut short can hand it over again ([`resume_after_restart`]). Bookkeeping derived from
    /// the log, left out of the digest.
    #[serde(skip)]
    pub turn_input: Option<QueuedInput>,
    /// Whether the agent wrote text, used a tool or asked a question in the running turn, i.e.
    /// its CLI surely had the turn's message. Left out of the digest.
    #[serde(skip)]
    pub turn_answered: bool,
    /// A fork's origin (`forkSnapshot`): the vendor session its first start resumes and where
    /// that conversation is cut (spec `AgentSession.forked_from` / `forked_at`). (This and
    /// the next field are left out of the digest while empty, so older logs' digests hold.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<crate::fork::ForkPoint>,
    /// Where a fork of the session as it stands now would be cut: the vendor session and the
    /// `last_vendor_id` of its latest turn end that named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_kept: Option<crate::fork::ForkPoint>,
    /// The running turn's usage and time as byre recorded them when it stopped the session's
    /// process (`agent.streamed`), for the turn's end; cleared when a turn starts or ends.
    /// Left out of the digest while empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<StreamedSoFar>,
}

impl Session {
    /// A new, idle session as its `session.created` `p` makes it, by `actor` at `at_us`
    /// (µs since the epoch) with the event's `seq`: the fold's constructor, also used by a
    /// decision that needs the session before its event has a seq (then 0).
    pub fn created(p: &SessionCreated, actor: &str, at_us: i64, seq: u64) -> Session {
        Session {
            id: p.id.clone(),
            task_id: p.task_id.clone(),
            owner: Login::default(),
            vendor: p.vendor,
            model: p.model.clone(),
            vendor_session_id: p.vendor_session_id.clone(),
            state: SessionState::Idle,
            role: p.role,
            created_by: actor.to_owned().into(),
            created_at_us: at_us,
            subagents: 0,
            turns: 0,
            turn_running: false,
            interrupt_requested: false,
            completed: false,
            queue: Vec::new(),
            last_api_retry: None,
            compact_to: None,
            created_seq: seq,
            turn_input: None,
            turn_answered: false,
            forked_from: crate::fork::ForkPoint::of(&p.forked_from, &p.forked_at),
            last_kept: None,
            streamed: None,
        }
    }

    /// Who started the running (or last) turn, on behalf of a task owned by `owner`: the
    /// sender of the message the turn was handed (`user.message`'s actor: a human's message or
    /// inbox answer; one byre hands again after a restart keeps its sender), or `owner` when no
    /// other human chose it: byre's own messages (a restart note, a compaction's handoff, a
    /// discard's summary turn) and a turn the agent's CLI started by itself. A subtask's or a
    /// workflow stage's first message is sent as its creator, the owner already.
    /// (docs/security.md, "A user's machine serves only its owner".)
    pub fn turn_started_by<'a>(&'a self, owner: &'a str) -> &'a str {
        match &self.turn_input {
            Some(m) if m.actor != "byre" => &m.actor,
            _ => owner,
        }
    }

    /// The state its facts imply.
    pub fn computed_state(&self) -> SessionState {
        if self.completed {
            SessionState::Completed
        } else if self.turn_running {
            SessionState::Running
        } else {
            SessionState::Idle
        }
    }
}

/// Where a message input stands, for `withdrawMessage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputState {
    /// Queued.
    Queued,
    /// Handed to the agent.
    Handed,
    /// Withdrawn.
    Withdrawn,
}

/// A message input's bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// Its session.
    pub session_id: SessionId,
    /// Its task.
    pub task_id: TaskId,
    /// Where it stands.
    pub state: InputState,
}

mod compact;
mod fold;
mod payloads;
mod restart;

pub(crate) use compact::compact;
use compact::compact_into_successor;
pub use compact::HANDOFF_PROMPT;
pub(crate) use fold::apply;
pub use payloads::*;
pub(crate) use restart::{record_deferred, record_exit, resume_after_restart};

pub(crate) fn session<'a>(state: &'a State, id: &str) -> Result<&'a Session, Rejection> {
    state
        .sessions
        .get(id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{id}`")))
}

pub(crate) fn session_event(s: &Session, state: &State, actor: &str, body: EventBody) -> NewEvent {
    let mut e = NewEvent::new(actor, body);
    e.agent_session_id = Some(s.id.clone());
    // A lead session's events reach only its user (`crate::lead`).
    if !s.owner.is_empty() {
        e.owner = Some(s.owner.clone());
    }
    if !s.task_id.is_empty() {
        e.task_id = Some(s.task_id.clone());
        e.project_id = state.tasks.get(&s.task_id).map(|t| t.project_id.clone());
    }
    e
}

/// Refuses blob ids that `uploadBlob` never stored.
/// # Errors
/// `Rejection::Invalid` naming the first unknown blob.
pub fn check_images(state: &State, images: &[String]) -> Result<(), Rejection> {
    match images.iter().find(|b| !state.blobs.contains_key(*b)) {
        Some(b) => Err(Rejection::Invalid(format!(
            "no blob `{b}`: upload images with uploadBlob first"
        ))),
        None => Ok(()),
    }
}

/// Refuses a human's message to a task that is merging or being discarded: nothing else is
/// admitted while its merge or summary turn runs and the task is finished.
fn check_not_finishing(task: &crate::tasks::Task) -> Result<(), Rejection> {
    if task.merging {
        return Err(Rejection::Conflict(format!(
            "task `{}` is merging; nothing else is handed to its agent meanwhile",
            task.id
        )));
    }
    if task.discarding {
        return Err(Rejection::Conflict(format!(
            "task `{}` is being discarded; nothing else is handed to its agent meanwhile",
            task.id
        )));
    }
    Ok(())
}

/// A message's hand-over: `user.message` then `turn.started`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn hand_over(
    state: &State,
    s: &Session,
    actor: &str,
    input_id: u64,
    text: &str,
    images: &[String],
    head: &str,
    model: Option<String>,
) -> Vec<NewEvent> {
    vec![
        session_event(
            s,
            state,
            actor,
            EventBody::UserMessage(UserMessage {
                input_id,
                text: text.into(),
                images: images.to_vec(),
                head: head.into(),
                model,
            }),
        ),
        session_event(
            s,
            state,
            actor,
            EventBody::TurnStarted(TurnStarted {
                turn: s.turns + 1,
                input_ids: vec![input_id],
            }),
        ),
    ]
}

/// Decides `CreateSession`: a new implementer session on an active task with no live one,
/// whose first turn is the prompt.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    task_id: &str,
    model: Option<&str>,
    prompt: &str,
    images: &[String],
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if task.status != TaskStatus::Active {
        return Err(Rejection::Conflict(format!("task `{task_id}` is closed")));
    }
    check_not_finishing(task)?;
    if let Some(live) = state
        .sessions
        .values()
        .find(|s| s.task_id == task_id && s.role == SessionRole::Implementer && !s.completed)
    {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` already has a live session `{}`; send it a message instead",
            live.id
        )));
    }
    if prompt.trim().is_empty() && images.is_empty() {
        return Err(Rejection::Invalid("prompt must not be empty".into()));
    }
    check_images(state, images)?;
    let model = match model.filter(|m| !m.is_empty()) {
        Some(m) => m.to_owned(),
        None => state
            .users
            .get(actor)
            .map(|u| u.default_model.clone())
            .unwrap_or_default(),
    };
    crate::users::check_model(&model)?;
    let id = ctx.id(0);
    let vendor = Vendor::for_model(&model);
    let vendor_session_id = match vendor {
        Vendor::Claude => ctx.id(1),
        Vendor::Codex | Vendor::Codebolt => String::new(),
    };
    let created = SessionCreated {
        id: id.clone().into(),
        task_id: task_id.into(),
        vendor,
        model,
        vendor_session_id,
        role: SessionRole::Implementer,
        forked_from: None,
        forked_at: None,
    };
    let s = Session::created(&created, actor, ctx.now_us, 0);
    let mut events = vec![session_event(
        &s,
        state,
        actor,
        EventBody::SessionCreated(created),
    )];
    events.extend(hand_over(
        state,
        &s,
        actor,
        state.last_input_id + 1,
        prompt,
        images,
        head,
        None,
    ));
    Ok(events)
}

/// Decides `SendMessage`: hand over when idle, queue while a turn runs. A model of the other
/// vendor is refused.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    state: &State,
    actor: &str,
    session_id: &str,
    text: &str,
    images: &[String],
    model: Option<&str>,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if s.completed {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is completed"
        )));
    }
    if let Some(task) = state.tasks.get(&s.task_id) {
        if task.status != TaskStatus::Active {
            return Err(Rejection::Conflict(format!("task `{}` is closed", task.id)));
        }
        check_not_finishing(task)?;
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err(Rejection::Invalid(
            "text may be empty only when images are given".into(),
        ));
    }
    check_images(state, images)?;
    let model = model
        .filter(|m| !m.is_empty() && *m != s.model)
        .map(str::to_owned);
    if let Some(m) = &model {
        crate::users::check_model(m)?;
        if Vendor::for_model(m) != s.vendor {
            return Err(Rejection::Invalid(format!("model `{m}` runs on another vendor than this {} session; a session only switches among its own vendor's models", s.vendor.as_str())));
        }
    }
    if s.compact_to.is_some() {
        return Err(Rejection::Conflict(format!("session `{session_id}` is writing its handoff for compaction; send to its successor once it starts")));
    }
    let input_id = state.last_input_id + 1;
    if s.turn_running {
        return Ok(vec![session_event(
            s,
            state,
            actor,
            EventBody::UserQueued(UserQueued {
                input_id,
                text: text.into(),
                images: images.to_vec(),
                head: head.into(),
                model,
            }),
        )]);
    }
    Ok(hand_over(
        state, s, actor, input_id, text, images, head, model,
    ))
}

/// Decides `WithdrawMessage`.
pub(crate) fn withdraw(
    state: &State,
    actor: &str,
    task_id: &str,
    input_id: u64,
) -> Result<Vec<NewEvent>, Rejection> {
    let input = state
        .inputs
        .get(&input_id)
        .filter(|i| i.task_id == task_id)
        .ok_or_else(|| {
            Rejection::NotFound(format!("no queued message {input_id} in task `{task_id}`"))
        })?;
    match input.state {
        InputState::Queued => {}
        InputState::Handed => {
            return Err(Rejection::Conflict(format!(
                "message {input_id} was already handed to the agent"
            )))
        }
        InputState::Withdrawn => {
            return Err(Rejection::Conflict(format!(
                "message {input_id} was already withdrawn"
            )))
        }
    }
    let s = session(state, &input.session_id)?;
    Ok(vec![session_event(
        s,
        state,
        actor,
        EventBody::UserUnqueued(UserUnqueued { input_id }),
    )])
}

/// Decides `InterruptSession`.
pub(crate) fn interrupt(
    state: &State,
    actor: &str,
    session_id: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if !s.turn_running {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` has no running turn"
        )));
    }
    if s.interrupt_requested {
        return Ok(Vec::new());
    }
    Ok(vec![session_event(
        s,
        state,
        actor,
        EventBody::InterruptRequested(InterruptRequested { turn: s.turns }),
    )])
}

/// The end of the running turn, with its inbox item and the next queued message's
/// hand-over.
fn end_turn(
    state: &State,
    ctx: &DecideCtx,
    s: &Session,
    mut ended: TurnEnded,
    rate_limited: bool,
) -> Vec<NewEvent> {
    if s.interrupt_requested && ended.outcome == TurnOutcome::Failed {
        ended.outcome = TurnOutcome::Interrupted;
    }
    ended.turn = s.turns;
    ended.review = ctx.reviews_on && s.role == crate::sessions::SessionRole::Implementer;
    ended.summary = ended.outcome == TurnOutcome::Completed && !ended.result.trim().is_empty();
    let outcome = ended.outcome;
    let mut events = Vec::new();
    // A reviewer's failure is the review's (`review.failed`, in words), not a session error
    // in the inbox; its rate limits still reach the inbox (`getStatus.rate_limits`).
    // A lead's errors stay in its own transcript (its turn.ended): an inbox item would reach
    // the whole team.
    let reviewer_error =
        (s.role == SessionRole::Reviewer && !rate_limited) || s.role == SessionRole::Lead;
    if ended.outcome == TurnOutcome::Failed && !reviewer_error {
        let id = ctx.id(0);
        let (kind, payload) = if rate_limited {
            let mut rate_limit = serde_json::json!({ "api_error_status": ended.api_error_status, "last_retry": s.last_api_retry });
            if let Some(status) = &ended.rate_limits {
                rate_limit["vendor_status"] = status.clone();
            }
            (
                InboxKind::RateLimited,
                serde_json::json!({ "vendor": s.vendor.as_str(), "rate_limit": rate_limit, "error": ended.error }),
            )
        } else {
            (
                InboxKind::SessionError,
                serde_json::json!({ "error": ended.error }),
            )
        };
        events.push(session_event(
            s,
            state,
            "byre",
            EventBody::InboxItemCreated(InboxItemCreated {
                thread_id: id.clone(),
                id,
                kind,
                payload,
            }),
        ));
    }
    let handoff = (ended.outcome == TurnOutcome::Completed && !ended.result.trim().is_empty())
        .then(|| ended.result.clone());
    events.insert(
        0,
        session_event(s, state, "byre", EventBody::TurnEnded(ended)),
    );
    if let (Some((model, head)), Some(handoff)) = (&s.compact_to, handoff) {
        events.extend(compact_into_successor(state, ctx, s, model, head, &handoff));
        return events;
    }
    let mut hook = crate::finish::turn_end_hook(state, s, outcome, "");
    events.append(&mut hook.events);
    if hook.hold_queue {
        return events;
    }
    if let Some(next) = s.queue.first() {
        let after = Session {
            turn_running: false,
            ..s.clone()
        };
        events.extend(hand_over(
            state,
            &after,
            &next.actor,
            next.input_id,
            &next.text,
            &next.images,
            &next.head,
            next.model.clone(),
        ));
    } else if !s.completed && crate::inbox::deliverable(state, s) {
        let after = Session {
            turn_running: false,
            ..s.clone()
        };
        let (answers, _) = crate::inbox::deliver(state, &after, &[], state.last_input_id, "");
        events.extend(answers);
    }
    events
}

/// Decides `RecordVendorOutput`: the items become events; a turn end also ends the turn.
pub(crate) fn record_output(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    items: &[VendorItem],
) -> Result<Vec<NewEvent>, Rejection> {
    let mut s = session(state, session_id)?.clone();
    let s = &mut s;
    let mut running = state.subagents.get(&s.id).cloned().unwrap_or_default();
    let mut events = Vec::new();
    for item in items {
        let body = match item.clone() {
            VendorItem::TurnBegan => {
                events.extend(crate::subagents::open_turn(state, s));
                continue;
            }
            VendorItem::SubagentStarted(p) => {
                events.extend(crate::subagents::started(state, s, &mut running, p));
                continue;
            }
            VendorItem::SubagentEnded(p) => {
                events.extend(crate::subagents::ended(state, s, &mut running, p));
                continue;
            }
            VendorItem::Text(p) => EventBody::AgentText(p),
            VendorItem::ToolCall(p) => EventBody::ToolCall(p),
            VendorItem::ToolResult(p) => EventBody::ToolResult(p),
            VendorItem::ApiRetry(p) => EventBody::ApiRetry(p),
            VendorItem::Unrecognized(p) => EventBody::VendorUnrecognized(p),
            VendorItem::TurnEnded(p) => {
                if s.turn_running {
                    let rate_limited = p.api_error_status == Some(429);
                    let ended = end_turn(state, ctx, s, p, rate_limited);
                    // The next queued message may start the next turn in the same command.
                    s.turn_running = false;
                    for e in &ended {
                        if let EventBody::TurnStarted(t) = &e.body {
                            if e.agent_session_id.as_deref() == Some(s.id.as_str()) {
                                s.turn_running = true;
                                s.turns = t.turn;
                            }
                        }
                    }
                    events.extend(ended);
                } else {
                    // A result with no turn open (e.g. after byre ended the turn itself): kept.
                    events.push(session_event(
                        s,
                        state,
                        "byre",
                        EventBody::VendorUnrecognized(VendorUnrecognized {
                            vendor: s.vendor,
                            reason: "a turn end while no turn was running".into(),
                            size: p.raw.len() as u64,
                            raw: cut_bytes(&p.raw, 4096).to_owned(),
                        }),
                    ));
                }
                continue;
            }
        };
        events.push(session_event(s, state, "byre", body));
    }
    Ok(events)
}

/// Decides `RecordStreamed`: what the running turn had streamed when byre stopped the
/// session's process, recorded for the turn's end; nothing when that turn no longer runs.
pub(crate) fn record_streamed(
    state: &State,
    session_id: &str,
    streamed: &AgentStreamed,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if !s.turn_running || s.completed || s.turns != streamed.turn {
        return Ok(Vec::new());
    }
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::AgentStreamed(streamed.clone()),
    )])
}

/// Decides `RecordVendorSession`: the vendor named its conversation (a Codex thread started);
/// recorded once per new id, so a later process resumes it.
pub(crate) fn record_vendor_session(
    state: &State,
    session_id: &str,
    vendor_session_id: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if vendor_session_id.is_empty() || s.vendor_session_id == vendor_session_id {
        return Ok(Vec::new());
    }
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::VendorSessionStarted(VendorSessionStarted {
            vendor_session_id: vendor_session_id.into(),
        }),
    )])
}

/// The message byre sends an agent whose turn a restart cut short.
pub const RESTART_NOTE: &str = "byre restarted while you were working and your last turn was cut short. Continue where you left off.";

/// How [`RESTART_NOTE`] and [`RESENT_NOTE`] start: such a message is handed over again as it is.
const RESTART_NOTE_START: &str = "byre restarted";

/// What precedes a message byre hands over again because a restart cut its turn short before
/// the agent answered it.
pub const RESENT_NOTE: &str = "byre restarted before you answered the message below, so it may not have reached you. Here it is again; if you already saw it, just continue:";

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn cut_bytes(s: &str, max: usize) -> &str {
    let mut cut = max.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// Derived `session.state` events for the sessions in `ids`.
pub(crate) fn derived_states<'a>(
    state: &State,
    ids: impl Iterator<Item = &'a str>,
) -> Vec<NewEvent> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        if let Some(s) = state.sessions.get(id) {
            let computed = s.computed_state();
            if computed != s.state {
                out.push(session_event(
                    s,
                    state,
                    "byre",
                    EventBody::SessionState(SessionStateChanged { state: computed }),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
