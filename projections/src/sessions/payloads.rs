//! The session events' payloads and the vendor-neutral [`VendorItem`].

use crate::ids::{SessionId, TaskId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{SessionRole, SessionState, TurnOutcome, Usage, Vendor};

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
    id: SessionId,
    /// Task.
    task_id: TaskId,
    /// Vendor.
    vendor: Vendor,
    /// Model.
    model: String,
    /// The vendor's session id (Claude Code: chosen by byre; Codex: empty until its thread starts).
    vendor_session_id: String,
    /// Role.
    role: SessionRole,
    /// A fork (`forkSnapshot`): the vendor session its first start resumes (spec
    /// `AgentSession.forked_from`); absent for other sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forked_from: Option<String>,
    /// With `forked_from`: the vendor's id of the last thing the fork keeps, a message uuid
    /// for Claude Code, a turn id for Codex (spec `AgentSession.forked_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forked_at: Option<String>,
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
    /// Set when byre cut `text` to the event limit (`serve --max-event-bytes`): the blob
    /// holding all of it. Absent otherwise, and in logs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut: Option<Cut>,
    /// The vendor's message id.
    message_id: String,
    /// The vendor line it came from.
    raw: String,
});
payload!(/// `agent.streamed` payload: what a turn byre stopped had streamed and not yet logged
/// (`agent.text`), and the turn's usage and time so far.
AgentStreamed {
    /// The turn's number.
    turn: u32,
    /// The text streamed since the session's last logged text, tool call or turn start
    /// (plain text; its end may be mid-sentence). At most the streamed-text bound of the
    /// runtime; what came before is dropped, counted in `dropped_bytes`.
    text: String,
    /// Bytes of the text's start that byre did not keep (over the bound); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    dropped_bytes: u64,
    /// Tokens so far, summed over the turn's model calls as the vendor streamed them.
    usage: Usage,
    /// Wall time of the turn until byre stopped it, ms.
    duration_ms: u64,
});
payload!(/// `tool.call` payload.
ToolCall {
    /// The vendor's tool-call id.
    tool_use_id: String,
    /// Tool name (e.g. `Write`, `Bash`, `mcp__byre__ask_human`).
    name: String,
    /// Its input.
    input: Value,
    /// Set when byre cut `input` (then a JSON string: the start of the input's JSON text and a marker) to the event limit (`serve --max-event-bytes`): the blob
    /// holding all of it. Absent otherwise, and in logs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut: Option<Cut>,
    /// The vendor line.
    raw: String,
});
payload!(/// `tool.result` payload.
ToolResult {
    /// The call it answers.
    tool_use_id: String,
    /// The output as text.
    output: String,
    /// Set when byre cut `output` to the event limit (`serve --max-event-bytes`): the blob
    /// holding all of it. Absent otherwise, and in logs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut: Option<Cut>,
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
    /// Set when byre cut `result` to the event limit (`serve --max-event-bytes`): the blob
    /// holding all of it. Absent otherwise, and in logs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut: Option<Cut>,
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
    /// Whether byre reviews the snapshot this turn ends in (set by byre when it records the
    /// end of an implementer's turn on a server that reviews snapshots; absent when false, and
    /// in logs written before reviews). The task is `review_pending` from this event on until
    /// that snapshot's review starts or is skipped, or no snapshot is taken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    review: bool,
    /// The vendor's id of the last thing the turn left in the conversation, where a fork of
    /// this turn's snapshot is cut (`forkSnapshot`): Claude Code, the uuid of the turn's last
    /// `assistant` line; Codex, the turn's id. Absent when the vendor named none (no
    /// assistant message, byre ended the turn itself, logs of earlier builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_vendor_id: Option<String>,
    /// The vendor line (empty when byre ended the turn itself).
    raw: String,
});
impl TurnEnded {
    /// A turn that byre ended itself, without the vendor reporting its end: no text, usage,
    /// cost, time or vendor line; `turn` is the session's turn number (0 where the projection
    /// fills it in, as for vendor output).
    pub fn by_byre(turn: u32, outcome: TurnOutcome, error: String) -> Self {
        TurnEnded {
            turn,
            outcome,
            summary: false,
            result: String::new(),
            error,
            usage: Usage::default(),
            cost_micro_usd: 0,
            duration_ms: 0,
            num_turns: 0,
            api_error_status: None,
            rate_limits: None,
            review: false,
            last_vendor_id: None,
            cut: None,
            raw: String::new(),
        }
    }
}

impl TurnEnded {
    /// This end (byre's own) with the turn's usage and time so far, when its session recorded
    /// them for this turn (`agent.streamed` on a graceful stop).
    pub fn with_streamed(mut self, so_far: Option<&StreamedSoFar>) -> Self {
        if let Some(f) = so_far.filter(|f| f.turn == self.turn) {
            self.usage = f.usage;
            self.duration_ms = f.duration_ms;
        }
        self
    }
}

/// A running turn's usage and time as its `agent.streamed` recorded them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamedSoFar {
    /// The turn.
    pub turn: u32,
    /// Tokens so far.
    pub usage: Usage,
    /// Wall time so far, ms.
    pub duration_ms: u64,
}

/// Where the whole of a field byre cut to the event limit is kept (`serve
/// --max-event-bytes`, docs/limits.md): the field holds the start of the text and a marker
/// saying so, the blob all of it (`getBlob`, `text/plain; charset=utf-8`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// The blob holding the whole text.
    pub blob_id: String,
    /// The whole text's size in bytes.
    pub size_bytes: u64,
}
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
    /// Messages (input ids) this process was handed but exited before producing anything
    /// for: byre hands them to a fresh (resumed) process of the session, so the running
    /// turn goes on rather than failing. Empty (and absent) otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    redelivered_input_ids: Vec<u64>,
    /// byre stopped the process because it had been idle this long, in milliseconds (no turn
    /// running, no subagent: `serve --agent-idle-stop`); the session's next message resumes
    /// its conversation in a fresh process. 0 (and absent) for every other exit.
    #[serde(default, skip_serializing_if = "is_zero")]
    idle_ms: u64,
});
payload!(/// `session.process_deferred` payload: the start of the session's agent process waits,
/// the machine's available memory being below byre's floor (`serve --agent-memory-floor`).
ProcessDeferred {
    /// The machine's available memory when the start was deferred (Linux `MemAvailable`), in
    /// bytes.
    available_bytes: u64,
    /// The floor a start needs, in bytes.
    floor_bytes: u64,
    /// How many starts were already waiting ahead of this one (they start first: FIFO).
    n_ahead: u64,
});

/// Whether `n` is 0 (a field left out of the payload while 0).
fn is_zero(n: &u64) -> bool {
    *n == 0
}
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
    /// One of the agent's subagents started (`subagents` is filled in by `decide`).
    SubagentStarted(crate::subagents::SubagentStarted),
    /// One of the agent's subagents ended (`subagents` is filled in by `decide`).
    SubagentEnded(crate::subagents::SubagentEnded),
    /// The vendor began a turn (Claude Code's `system/init`): a turn of its own when none runs.
    TurnBegan,
}
