//! Agent sessions: a vendor CLI's conversation on a task, turn by turn. Operations:
//! `createSession`, `listSessions`, `getSession`, `sendMessage`, `withdrawMessage`,
//! `interruptSession`; and the vendor runtime's outcomes (normalised output, process exits).
//!
//! A message sent while the session is idle is handed over at once (`user.message`, then
//! `turn.started`). One sent while a turn runs is queued (`user.queued`) and handed over as
//! the next turn when the running one ends, oldest first, one per turn; until then it can be
//! withdrawn (`user.unqueued`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
}

impl Vendor {
    /// gpt-* models run on Codex, every other model on Claude Code.
    pub fn for_model(model: &str) -> Vendor {
        if model.starts_with("gpt-") {
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

/// A queued message.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    /// Id.
    pub id: String,
    /// Task (empty for a lead session).
    pub task_id: String,
    /// Lead owner (empty for a task's session).
    pub owner: String,
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
    pub created_by: String,
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
}

impl Session {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Input {
    /// Its session.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// Where it stands.
    pub state: InputState,
}

macro_rules! payload {
    ($(#[$doc:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }
    };
}

payload!(/// `session.created` payload.
SessionCreated {
    /// Session id.
    id: String,
    /// Task.
    task_id: String,
    /// Vendor.
    vendor: Vendor,
    /// Model.
    model: String,
    /// The vendor's session id (Claude Code: chosen by byre; Codex: empty until its thread starts).
    vendor_session_id: String,
    /// Role.
    role: SessionRole,
});
payload!(/// `session.state` payload.
SessionStateChanged {
    /// The new state.
    state: SessionState,
});
payload!(/// `user.message` payload: a message handed to the agent.
UserMessage {
    /// The input's id.
    input_id: u64,
    /// Text.
    text: String,
    /// Blob ids sent as images.
    images: Vec<String>,
    /// The task worktree's HEAD when the message was sent.
    head: String,
    /// Model switched to for this turn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
});
payload!(/// `user.queued` payload.
UserQueued {
    /// The input's id (for `withdrawMessage`).
    input_id: u64,
    /// Text.
    text: String,
    /// Blob ids.
    images: Vec<String>,
    /// The worktree's HEAD when sent.
    head: String,
    /// Model to switch to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
});
payload!(/// `user.unqueued` payload.
UserUnqueued {
    /// The withdrawn input's id.
    input_id: u64,
});
payload!(/// `turn.started` payload.
TurnStarted {
    /// The turn's number in its session, from 1.
    turn: u32,
    /// The inputs it answers.
    input_ids: Vec<u64>,
});
payload!(/// `agent.text` payload.
AgentText {
    /// The text (Markdown).
    text: String,
    /// The vendor's message id.
    message_id: String,
    /// The vendor line it came from.
    raw: String,
});
payload!(/// `tool.call` payload.
ToolCall {
    /// The vendor's tool-call id.
    tool_use_id: String,
    /// Tool name (e.g. `Write`, `Bash`, `mcp__byre__ask_human`).
    name: String,
    /// Its input.
    input: Value,
    /// The vendor line.
    raw: String,
});
payload!(/// `tool.result` payload.
ToolResult {
    /// The call it answers.
    tool_use_id: String,
    /// The output as text.
    output: String,
    /// Whether the tool failed.
    is_error: bool,
    /// The vendor line.
    raw: String,
});
payload!(/// `agent.api_retry` payload.
ApiRetry {
    /// Attempt number.
    attempt: u32,
    /// The vendor's retry limit.
    max_retries: u32,
    /// Delay before the retry, in ms.
    retry_delay_ms: u64,
    /// HTTP status of the failed call, if any.
    #[serde(default)]
    error_status: Option<u16>,
    /// The vendor's error class (`server_error`, `rate_limit`, …).
    error: String,
    /// The vendor line.
    raw: String,
});
payload!(/// `turn.ended` payload.
TurnEnded {
    /// The turn's number.
    turn: u32,
    /// How it ended.
    outcome: TurnOutcome,
    /// Whether it ended with a summary: a final text of a normally completed turn.
    summary: bool,
    /// The final text (empty when none).
    result: String,
    /// Why it failed (empty otherwise).
    error: String,
    /// Tokens.
    usage: Usage,
    /// Cost in millionths of a US dollar, as the vendor computed it (0 when unknown).
    cost_micro_usd: u64,
    /// Wall time of the turn, ms.
    duration_ms: u64,
    /// Model round trips in the turn.
    num_turns: u32,
    /// HTTP status of the API error that ended it, if any.
    #[serde(default)]
    api_error_status: Option<u16>,
    /// The vendor's own rate-limit status when the turn ended, if it reports one (Codex: its
    /// last `account/rateLimits/updated`); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_limits: Option<Value>,
    /// The vendor line (empty when byre ended the turn itself).
    raw: String,
});
payload!(/// `session.vendor_session_started` payload.
VendorSessionStarted {
    /// The vendor's id of the conversation (Codex: its thread id), from now on resumed.
    vendor_session_id: String,
});
payload!(/// `session.compact_requested` payload.
CompactRequested {
    /// The successor session's model.
    model: String,
    /// The worktree's HEAD when asked.
    head: String,
});
payload!(/// `session.completed` payload.
SessionCompleted {
    /// Why: `compacted`.
    reason: String,
    /// The session that continues it, if any.
    successor_id: String,
});
payload!(/// `session.interrupt_requested` payload.
InterruptRequested {
    /// The turn to interrupt.
    turn: u32,
});
payload!(/// `session.process_exited` payload.
ProcessExited {
    /// Process id (0 when it never started).
    pid: u32,
    /// Exit code, if it exited.
    #[serde(default)]
    code: Option<i32>,
    /// Signal, if killed by one.
    #[serde(default)]
    signal: Option<i32>,
    /// Why, for the user: the last lines of stderr, or why it could not start.
    reason: String,
});
payload!(/// `vendor.unrecognized` payload.
VendorUnrecognized {
    /// `claude` or `codex`.
    vendor: Vendor,
    /// Why it was not understood.
    reason: String,
    /// The line, cut to its first 4 KiB.
    raw: String,
    /// The line's full length in bytes.
    size: u64,
});

/// One normalised piece of vendor output, vendor-neutral: what a vendor's wire parser turns
/// its lines into and the runtime records with `RecordVendorOutput`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum VendorItem {
    /// Agent text.
    Text(AgentText),
    /// A tool call.
    ToolCall(ToolCall),
    /// A tool result.
    ToolResult(ToolResult),
    /// An API retry.
    ApiRetry(ApiRetry),
    /// The turn's end as the vendor reported it (`turn` is filled in by `decide`).
    TurnEnded(TurnEnded),
    /// A line not understood.
    Unrecognized(VendorUnrecognized),
}

fn session<'a>(state: &'a State, id: &str) -> Result<&'a Session, Rejection> {
    state
        .sessions
        .get(id)
        .ok_or_else(|| Rejection::NotFound(format!("no session `{id}`")))
}

fn session_event(s: &Session, state: &State, actor: &str, body: EventBody) -> NewEvent {
    let mut e = NewEvent::new(actor, body);
    e.agent_session_id = Some(s.id.clone());
    if !s.task_id.is_empty() {
        e.task_id = Some(s.task_id.clone());
        e.project_id = state.tasks.get(&s.task_id).map(|t| t.project_id.clone());
    }
    e
}

fn check_images(state: &State, images: &[String]) -> Result<(), Rejection> {
    match images.iter().find(|b| !state.blobs.contains_key(*b)) {
        Some(b) => Err(Rejection::Invalid(format!(
            "no blob `{b}`: upload images with uploadBlob first"
        ))),
        None => Ok(()),
    }
}

/// A message's hand-over: `user.message` then `turn.started`.
#[allow(clippy::too_many_arguments)]
fn hand_over(
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
        Vendor::Codex => String::new(),
    };
    let created = SessionCreated {
        id: id.clone(),
        task_id: task_id.into(),
        vendor,
        model,
        vendor_session_id,
        role: SessionRole::Implementer,
    };
    let s = Session {
        id: id.clone(),
        task_id: task_id.into(),
        owner: String::new(),
        vendor,
        model: created.model.clone(),
        vendor_session_id: created.vendor_session_id.clone(),
        state: SessionState::Idle,
        role: SessionRole::Implementer,
        created_by: actor.into(),
        created_at_us: ctx.now_us,
        subagents: 0,
        turns: 0,
        turn_running: false,
        interrupt_requested: false,
        completed: false,
        queue: Vec::new(),
        last_api_retry: None,
        compact_to: None,
        created_seq: 0,
    };
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
    ended.summary = ended.outcome == TurnOutcome::Completed && !ended.result.trim().is_empty();
    let mut events = Vec::new();
    if ended.outcome == TurnOutcome::Failed {
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
    let s = session(state, session_id)?;
    let mut events = Vec::new();
    for item in items {
        let body = match item.clone() {
            VendorItem::Text(p) => EventBody::AgentText(p),
            VendorItem::ToolCall(p) => EventBody::ToolCall(p),
            VendorItem::ToolResult(p) => EventBody::ToolResult(p),
            VendorItem::ApiRetry(p) => EventBody::ApiRetry(p),
            VendorItem::Unrecognized(p) => EventBody::VendorUnrecognized(p),
            VendorItem::TurnEnded(p) => {
                if s.turn_running {
                    let rate_limited = p.api_error_status == Some(429);
                    events.extend(end_turn(state, ctx, s, p, rate_limited));
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

/// Decides `RecordProcessExit`: recorded; a running turn fails with a session error.
pub(crate) fn record_exit(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    exit: &ProcessExited,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    let mut events = vec![session_event(
        s,
        state,
        "byre",
        EventBody::ProcessExited(exit.clone()),
    )];
    if s.turn_running {
        let ended = TurnEnded {
            turn: s.turns,
            outcome: TurnOutcome::Failed,
            summary: false,
            result: String::new(),
            error: exit.reason.clone(),
            usage: Usage::default(),
            cost_micro_usd: 0,
            duration_ms: 0,
            num_turns: 0,
            api_error_status: None,
            rate_limits: None,
            raw: String::new(),
        };
        events.extend(end_turn(state, ctx, s, ended, false));
    }
    Ok(events)
}

/// Decides `ResumeAfterRestart`: a turn byre's restart cut short ends as interrupted and the
/// agent is asked, as the next turn, to carry on; queued messages follow it.
pub(crate) fn resume_after_restart(
    state: &State,
    session_id: &str,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if !s.turn_running || s.completed {
        return Ok(Vec::new());
    }
    let ended = TurnEnded {
        turn: s.turns,
        outcome: TurnOutcome::Interrupted,
        summary: false,
        result: String::new(),
        error: "byre restarted while the turn ran".into(),
        usage: Usage::default(),
        cost_micro_usd: 0,
        duration_ms: 0,
        num_turns: 0,
        api_error_status: None,
        rate_limits: None,
        raw: String::new(),
    };
    let mut events = vec![session_event(s, state, "byre", EventBody::TurnEnded(ended))];
    let after = Session {
        turn_running: false,
        ..s.clone()
    };
    events.extend(hand_over(
        state,
        &after,
        "byre",
        state.last_input_id + 1,
        RESTART_NOTE,
        &[],
        head,
        None,
    ));
    Ok(events)
}

/// What a compaction's handoff turn asks the agent.
pub const HANDOFF_PROMPT: &str = "Your session is being compacted: a fresh session will take over this task from your handoff alone. Write that handoff now, as your whole reply: the goal, the decisions made and why, the current state of the work, dead ends to avoid, open questions, and the files involved.";

/// The successor of a compacted session: the old one completes, a new one on `model` starts
/// with the handoff as its first message.
fn compact_into_successor(
    state: &State,
    ctx: &DecideCtx,
    s: &Session,
    model: &str,
    head: &str,
    handoff: &str,
) -> Vec<NewEvent> {
    let id = ctx.id(1);
    let vendor = Vendor::for_model(model);
    let vendor_session_id = match vendor {
        Vendor::Claude => ctx.id(2),
        Vendor::Codex => String::new(),
    };
    let created = SessionCreated {
        id: id.clone(),
        task_id: s.task_id.clone(),
        vendor,
        model: model.to_owned(),
        vendor_session_id: vendor_session_id.clone(),
        role: s.role,
    };
    let successor = Session {
        id: id.clone(),
        vendor,
        model: model.to_owned(),
        vendor_session_id,
        turns: 0,
        turn_running: false,
        compact_to: None,
        queue: Vec::new(),
        ..s.clone()
    };
    let mut events = vec![
        session_event(
            s,
            state,
            "byre",
            EventBody::SessionCompleted(SessionCompleted {
                reason: "compacted".into(),
                successor_id: id.clone(),
            }),
        ),
        session_event(
            &successor,
            state,
            &s.created_by,
            EventBody::SessionCreated(created),
        ),
    ];
    let text =
        format!("You take over this task from a previous session. Its handoff:\n\n{handoff}");
    events.extend(hand_over(
        state,
        &successor,
        "byre",
        state.last_input_id + 1,
        &text,
        &[],
        head,
        None,
    ));
    events
}

/// Decides `CompactSession`: the idle session's next turn writes a handoff.
pub(crate) fn compact(
    state: &State,
    actor: &str,
    session_id: &str,
    model: Option<&str>,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if s.completed {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is completed"
        )));
    }
    if s.turn_running {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is running a turn; compact it once it is idle"
        )));
    }
    let model = model
        .filter(|m| !m.is_empty())
        .unwrap_or(&s.model)
        .to_owned();
    crate::users::check_model(&model)?;
    let mut events = vec![session_event(
        s,
        state,
        actor,
        EventBody::CompactRequested(CompactRequested {
            model,
            head: head.to_owned(),
        }),
    )];
    events.extend(hand_over(
        state,
        s,
        actor,
        state.last_input_id + 1,
        HANDOFF_PROMPT,
        &[],
        head,
        None,
    ));
    Ok(events)
}

/// The message byre sends an agent whose turn a restart cut short.
pub const RESTART_NOTE: &str = "byre restarted while you were working and your last turn was cut short. Continue where you left off.";

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

/// Folds the session events.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let sid = e.agent_session_id.as_deref().unwrap_or("");
    match &e.body {
        EventBody::SessionCreated(p) => {
            state
                .sessions
                .entry(p.id.clone())
                .or_insert_with(|| Session {
                    id: p.id.clone(),
                    task_id: p.task_id.clone(),
                    owner: String::new(),
                    vendor: p.vendor,
                    model: p.model.clone(),
                    vendor_session_id: p.vendor_session_id.clone(),
                    state: SessionState::Idle,
                    role: p.role,
                    created_by: e.actor.clone(),
                    created_at_us: e.created_at_us,
                    subagents: 0,
                    turns: 0,
                    turn_running: false,
                    interrupt_requested: false,
                    completed: false,
                    queue: Vec::new(),
                    last_api_retry: None,
                    compact_to: None,
                    created_seq: e.seq,
                });
        }
        EventBody::SessionState(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.state = p.state;
            }
        }
        EventBody::UserMessage(p) => {
            state.last_input_id = state.last_input_id.max(p.input_id);
            let task_id = e.task_id.clone().unwrap_or_default();
            state.inputs.insert(
                p.input_id,
                Input {
                    session_id: sid.into(),
                    task_id,
                    state: InputState::Handed,
                },
            );
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.retain(|q| q.input_id != p.input_id);
                if let Some(m) = &p.model {
                    s.model.clone_from(m);
                }
            }
        }
        EventBody::UserQueued(p) => {
            state.last_input_id = state.last_input_id.max(p.input_id);
            let task_id = e.task_id.clone().unwrap_or_default();
            state.inputs.insert(
                p.input_id,
                Input {
                    session_id: sid.into(),
                    task_id,
                    state: InputState::Queued,
                },
            );
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.push(QueuedInput {
                    input_id: p.input_id,
                    text: p.text.clone(),
                    images: p.images.clone(),
                    model: p.model.clone(),
                    actor: e.actor.clone(),
                    head: p.head.clone(),
                });
            }
        }
        EventBody::UserUnqueued(p) => {
            if let Some(i) = state.inputs.get_mut(&p.input_id) {
                i.state = InputState::Withdrawn;
            }
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.retain(|q| q.input_id != p.input_id);
            }
        }
        EventBody::TurnStarted(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turns = s.turns.max(p.turn);
                s.turn_running = true;
                s.last_api_retry = None;
                s.interrupt_requested = false;
            }
        }
        EventBody::ApiRetry(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.last_api_retry = Some(serde_json::json!({
                    "attempt": p.attempt, "max_retries": p.max_retries, "retry_delay_ms": p.retry_delay_ms,
                    "error_status": p.error_status, "error": p.error,
                }));
            }
        }
        EventBody::VendorSessionStarted(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.vendor_session_id.clone_from(&p.vendor_session_id);
            }
        }
        EventBody::CompactRequested(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.compact_to = Some((p.model.clone(), p.head.clone()));
            }
        }
        EventBody::SessionCompleted(_) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.completed = true;
                s.compact_to = None;
            }
        }
        EventBody::InterruptRequested(_) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.interrupt_requested = true;
            }
        }
        EventBody::TurnEnded(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turn_running = false;
                s.interrupt_requested = false;
                s.compact_to = None;
            }
            if p.summary {
                if let Some(t) = e.task_id.as_deref().and_then(|t| state.tasks.get_mut(t)) {
                    t.summary_seq = e.seq;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    //! Given / when / then for the session commands.
    use super::*;
    use crate::{decide, derived_events, Command, Event};

    struct World {
        state: State,
        n: u128,
    }

    impl World {
        fn new() -> World {
            let mut w = World {
                state: State::default(),
                n: 1,
            };
            w.ok(Command::EnsureUser {
                login: "ada".into(),
                display_name: "Ada".into(),
                default_model: "sonnet".into(),
            });
            w.ok(Command::CreateProject {
                actor: "ada".into(),
                name: "p".into(),
                repo_path: "/r".into(),
                default_branch: "main".into(),
                remote: String::new(),
                worktrees_root: "/w".into(),
            });
            let pid = w.state.projects.keys().next().unwrap().clone();
            w.ok(Command::CreateTask {
                actor: "ada".into(),
                project_id: pid,
                title: "t".into(),
                base_ref: "abc".into(),
            });
            w
        }

        fn task(&self) -> String {
            self.state.tasks.keys().next().unwrap().clone()
        }

        fn session(&self) -> &Session {
            self.state
                .sessions
                .values()
                .max_by_key(|s| s.created_seq)
                .unwrap()
        }

        fn when(&mut self, cmd: Command) -> Result<Vec<Event>, Rejection> {
            self.n += 1;
            let ctx = DecideCtx {
                now_us: self.n as i64,
                seed: self.n << 64,
            };
            let events = decide(&self.state, &cmd, &ctx)?;
            let mut committed = Vec::new();
            for ne in events {
                let e = ne.commit(self.state.last_seq + 1, ctx.now_us);
                self.state.apply(&e);
                committed.push(e);
            }
            for ne in derived_events(&self.state, &committed) {
                let e = ne.commit(self.state.last_seq + 1, ctx.now_us);
                self.state.apply(&e);
                committed.push(e);
            }
            Ok(committed)
        }

        fn ok(&mut self, cmd: Command) -> Vec<Event> {
            self.when(cmd).expect("command passes")
        }

        fn kinds(events: &[Event]) -> Vec<&'static str> {
            events.iter().map(|e| e.body.kind()).collect()
        }

        fn start(&mut self, prompt: &str) -> String {
            let task_id = self.task();
            self.ok(Command::CreateSession {
                actor: "ada".into(),
                task_id,
                model: None,
                prompt: prompt.into(),
                images: vec![],
                head: "h".into(),
            });
            self.session().id.clone()
        }

        fn end_turn(
            &mut self,
            sid: &str,
            outcome: TurnOutcome,
            result: &str,
            status: Option<u16>,
        ) -> Vec<Event> {
            let ended = TurnEnded {
                turn: 0,
                outcome,
                summary: false,
                result: result.into(),
                error: if outcome == TurnOutcome::Failed {
                    "boom".into()
                } else {
                    String::new()
                },
                usage: Usage::default(),
                cost_micro_usd: 0,
                duration_ms: 1,
                num_turns: 1,
                api_error_status: status,
                rate_limits: None,
                raw: "{}".into(),
            };
            self.ok(Command::RecordVendorOutput {
                session_id: sid.into(),
                items: vec![VendorItem::TurnEnded(ended)],
            })
        }
    }

    #[test]
    fn a_new_session_starts_its_first_turn_and_the_task_runs() {
        let mut w = World::new();
        let task_id = w.task();
        let events = w.ok(Command::CreateSession {
            actor: "ada".into(),
            task_id: task_id.clone(),
            model: None,
            prompt: "go".into(),
            images: vec![],
            head: "h".into(),
        });
        assert_eq!(
            World::kinds(&events),
            [
                "session.created",
                "user.message",
                "turn.started",
                "session.state",
                "task.state"
            ]
        );
        assert_eq!(w.session().model, "sonnet", "the caller's default model");
        assert_eq!(
            w.state.tasks[&task_id].state,
            crate::tasks::TaskState::Running
        );
        let again = w.when(Command::CreateSession {
            actor: "ada".into(),
            task_id,
            model: None,
            prompt: "go".into(),
            images: vec![],
            head: "h".into(),
        });
        assert!(matches!(again, Err(Rejection::Conflict(_))));
    }

    #[test]
    fn messages_queue_while_running_and_the_oldest_is_the_next_turn() {
        let mut w = World::new();
        let sid = w.start("one");
        let q1 = w.ok(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid.clone(),
            text: "two".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        });
        assert_eq!(World::kinds(&q1), ["user.queued"]);
        w.ok(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid.clone(),
            text: "three".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        });
        let ended = w.end_turn(&sid, TurnOutcome::Completed, "done", None);
        assert_eq!(
            World::kinds(&ended),
            ["turn.ended", "user.message", "turn.started"]
        );
        let EventBody::UserMessage(m) = &ended[1].body else {
            panic!()
        };
        assert_eq!(m.text, "two");
        assert_eq!(w.session().queue.len(), 1);
        assert_eq!(
            w.state.tasks[&w.task()].summary_seq,
            ended[0].seq,
            "a completed turn with text is a summary"
        );
    }

    #[test]
    fn withdraw_works_only_while_queued() {
        let mut w = World::new();
        let task_id = w.task();
        let sid = w.start("one");
        let q = w.ok(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid.clone(),
            text: "two".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        });
        let EventBody::UserQueued(p) = &q[0].body else {
            panic!()
        };
        let withdraw = |id| Command::WithdrawMessage {
            actor: "ada".into(),
            task_id: task_id.clone(),
            input_id: id,
        };
        assert_eq!(World::kinds(&w.ok(withdraw(p.input_id))), ["user.unqueued"]);
        assert!(matches!(
            w.when(withdraw(p.input_id)),
            Err(Rejection::Conflict(_))
        ));
        assert!(
            matches!(w.when(withdraw(1)), Err(Rejection::Conflict(_))),
            "the first message was handed over"
        );
        assert!(matches!(w.when(withdraw(99)), Err(Rejection::NotFound(_))));
        let ended = w.end_turn(&sid, TurnOutcome::Completed, "", None);
        assert_eq!(
            World::kinds(&ended),
            ["turn.ended", "session.state", "task.state"],
            "nothing queued is left"
        );
    }

    #[test]
    fn failures_become_inbox_items_and_an_interrupt_is_not_a_failure() {
        let mut w = World::new();
        let sid = w.start("one");
        let failed = w.end_turn(&sid, TurnOutcome::Failed, "", Some(429));
        assert!(World::kinds(&failed).contains(&"inbox.item_created"));
        let item = w.state.inbox.values().next().unwrap();
        assert_eq!(item.kind, InboxKind::RateLimited);
        w.ok(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid.clone(),
            text: "again".into(),
            images: vec![],
            model: None,
            head: "h".into(),
        });
        w.ok(Command::InterruptSession {
            actor: "ada".into(),
            session_id: sid.clone(),
        });
        let exit = ProcessExited {
            pid: 1,
            code: Some(0),
            signal: None,
            reason: "gone".into(),
        };
        let events = w.ok(Command::RecordProcessExit {
            session_id: sid.clone(),
            exit,
        });
        let ended = events
            .iter()
            .find_map(|e| match &e.body {
                EventBody::TurnEnded(t) => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(ended.outcome, TurnOutcome::Interrupted);
        assert_eq!(
            w.state.inbox.len(),
            1,
            "no new item for an interrupted turn"
        );
        assert!(matches!(
            w.when(Command::InterruptSession {
                actor: "ada".into(),
                session_id: sid
            }),
            Err(Rejection::Conflict(_))
        ));
    }

    #[test]
    fn a_model_of_the_other_vendor_is_refused() {
        let mut w = World::new();
        let sid = w.start("one");
        w.end_turn(&sid, TurnOutcome::Completed, "", None);
        let r = w.when(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid,
            text: "x".into(),
            images: vec![],
            model: Some("gpt-5.5".into()),
            head: "h".into(),
        });
        assert!(matches!(r, Err(Rejection::Invalid(_))));
    }

    #[test]
    fn a_codex_session_records_its_thread_once_and_keeps_its_vendor() {
        let mut w = World::new();
        let task_id = w.task();
        w.ok(Command::CreateSession {
            actor: "ada".into(),
            task_id,
            model: Some("gpt-5.5".into()),
            prompt: "hi".into(),
            images: vec![],
            head: "h".into(),
        });
        let sid = w.session().id.clone();
        assert_eq!(
            (w.session().vendor, w.session().vendor_session_id.as_str()),
            (Vendor::Codex, ""),
            "no thread until Codex starts one"
        );
        let record = |id: &str| Command::RecordVendorSession {
            session_id: sid.clone(),
            vendor_session_id: id.into(),
        };
        let events = w.ok(record("thread-1"));
        assert_eq!(World::kinds(&events), ["session.vendor_session_started"]);
        assert_eq!(w.session().vendor_session_id, "thread-1");
        assert!(w.ok(record("thread-1")).is_empty(), "the same id again");
        assert!(w.ok(record("")).is_empty());
        assert!(matches!(
            w.when(Command::RecordVendorSession {
                session_id: "nope".into(),
                vendor_session_id: "t".into()
            }),
            Err(Rejection::NotFound(_))
        ));
        let r = w.when(Command::SendMessage {
            actor: "ada".into(),
            session_id: sid,
            text: "x".into(),
            images: vec![],
            model: Some("opus".into()),
            head: "h".into(),
        });
        assert!(matches!(r, Err(Rejection::Invalid(_))), "{r:?}");
    }

    #[test]
    fn a_rate_limited_turn_carries_the_vendor_status_into_its_inbox_item() {
        let mut w = World::new();
        let sid = w.start("one");
        let ended = TurnEnded {
            turn: 0,
            outcome: TurnOutcome::Failed,
            summary: false,
            result: String::new(),
            error: "429".into(),
            usage: Usage::default(),
            cost_micro_usd: 0,
            duration_ms: 1,
            num_turns: 1,
            api_error_status: Some(429),
            rate_limits: Some(serde_json::json!({"primary": {"usedPercent": 100}})),
            raw: "{}".into(),
        };
        w.ok(Command::RecordVendorOutput {
            session_id: sid,
            items: vec![VendorItem::TurnEnded(ended)],
        });
        let item = w.state.inbox.values().next().unwrap();
        assert_eq!(item.kind, InboxKind::RateLimited);
        assert_eq!(
            item.payload["rate_limit"]["vendor_status"]["primary"]["usedPercent"],
            100
        );
        assert_eq!(item.payload["rate_limit"]["api_error_status"], 429);
    }

    #[test]
    fn compaction_completes_the_session_and_starts_its_successor() {
        let mut w = World::new();
        let sid = w.start("one");
        w.end_turn(&sid, TurnOutcome::Completed, "", None);
        w.ok(Command::CompactSession {
            actor: "ada".into(),
            session_id: sid.clone(),
            model: Some("opus".into()),
            head: "h".into(),
        });
        let events = w.end_turn(&sid, TurnOutcome::Completed, "the handoff", None);
        assert!(World::kinds(&events).starts_with(&[
            "turn.ended",
            "session.completed",
            "session.created",
            "user.message",
            "turn.started"
        ]));
        assert!(w.state.sessions[&sid].completed);
        assert_eq!(w.session().model, "opus");
        assert!(w.session().turn_running);
    }

    #[test]
    fn a_restart_ends_the_cut_turn_and_resumes_with_a_note() {
        let mut w = World::new();
        let sid = w.start("one");
        let events = w.ok(Command::ResumeAfterRestart {
            session_id: sid.clone(),
            head: "h".into(),
        });
        assert_eq!(
            World::kinds(&events)[..3],
            ["turn.ended", "user.message", "turn.started"]
        );
        let EventBody::UserMessage(m) = &events[1].body else {
            panic!()
        };
        assert_eq!(m.text, RESTART_NOTE);
        w.end_turn(&sid, TurnOutcome::Completed, "", None);
        assert!(
            w.ok(Command::ResumeAfterRestart {
                session_id: sid,
                head: "h".into()
            })
            .is_empty(),
            "nothing to resume when idle"
        );
    }
}
