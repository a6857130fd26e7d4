//! One `codex app-server` process's conversation (codex PROTOCOL.md §4–§12): byre is the
//! JSON-RPC client, with one thread per byre session and one Codex turn per byre turn.
//!
//! ```text
//! start()         > initialize {clientInfo, capabilities: {experimentalApi: true}}      id 0
//! (its answer)    > initialized;  > thread/start {cwd, model, …}  or  thread/resume {threadId}
//! (its answer)    the thread id (a new one → Reaction::vendor_session_id); queued turns go out
//! message()       > turn/start {threadId, input, model?}   (queued until the thread is known)
//! interrupt()     > turn/interrupt {threadId, turnId}      (deferred until turn/started; a refusal
//!                 while the turn runs is asked again at its next notification)
//! turn/completed  turn.ended; tool items it left open get an `interrupted` tool.result; after
//!                 an interrupt that left commands running, > thread/backgroundTerminals/clean
//! ```
//!
//! Every state change is keyed on ids, not on the order of answers and notifications (they
//! interleave). A server request (an approval) is answered at once with a refusal. A failed
//! answer to `thread/start` or `turn/start` ends the waiting turn as failed, so byre never
//! waits on a turn Codex will not run; a failed `thread/resume` (the thread's files are gone)
//! starts a new thread.

use std::collections::BTreeMap;

use base64::Engine;
use byre_projections::sessions::{ToolResult, TurnEnded, TurnOutcome, Usage, VendorItem};
use serde_json::{json, Value};

use super::wire::{self, Incoming};
use crate::{Image, Protocol, Reaction};

/// What one of our requests was, by its id.
#[derive(Debug, Clone, PartialEq)]
enum Sent {
    Initialize,
    ThreadStart,
    ThreadResume,
    /// A `thread/fork` (a fork's first start).
    ThreadFork,
    TurnStart,
    /// A `turn/interrupt`.
    Interrupt,
    Other,
}

/// The turn byre handed over and Codex has not ended.
#[derive(Debug, Default)]
struct Turn {
    /// Whether one runs (from `message` to `turn/completed`).
    running: bool,
    /// Codex's turn id, once known.
    id: Option<String>,
    /// Whether Codex said `turn/started`: before it, the `turn/start` answer already names the
    /// turn but Codex refuses to interrupt it ("no active turn to interrupt").
    started: bool,
    /// Tool items started and not completed: id → item type, in start order.
    open: Vec<(String, String)>,
    /// Summed usage of its model requests.
    usage: Usage,
    /// Its model requests (token-usage reports that moved the thread's total).
    requests: u32,
    /// The status of its last `error` notification.
    error_status: Option<u16>,
    /// Its last agent message.
    last_text: String,
}

/// The state of one app-server process (module docs).
#[derive(Debug)]
pub struct CodexProtocol {
    cwd: String,
    model: String,
    /// A model to switch to with the next `turn/start`.
    next_model: Option<String>,
    /// The thread to resume at start-up (the session's recorded one).
    resume: Option<String>,
    /// A fork's first start: the thread to fork and the last turn it keeps.
    fork: Option<(String, String)>,
    /// The thread, once started or resumed.
    thread_id: Option<String>,
    next_id: u64,
    sent: BTreeMap<u64, Sent>,
    /// `turn/start` params waiting for the thread.
    waiting: Vec<Value>,
    turn: Turn,
    /// An interrupt asked before the turn had started (or refused: tried again).
    interrupt_wanted: bool,
    /// The thread's cumulative token total last reported.
    total_tokens: Option<u64>,
    /// The last `account/rateLimits/updated`'s `rateLimits`.
    rate_limits: Option<Value>,
}

impl CodexProtocol {
    /// A protocol for a process in `cwd` on `model`, resuming thread `resume` if given.
    pub fn new(cwd: &str, model: &str, resume: Option<String>) -> CodexProtocol {
        CodexProtocol {
            cwd: cwd.to_owned(),
            model: model.to_owned(),
            next_model: None,
            resume: resume.filter(|t| !t.is_empty()),
            fork: None,
            thread_id: None,
            next_id: 0,
            sent: BTreeMap::new(),
            waiting: Vec::new(),
            turn: Turn::default(),
            interrupt_wanted: false,
            total_tokens: None,
            rate_limits: None,
        }
    }

    /// Starts the process's thread as a fork of `thread` cut after its turn `last_turn`
    /// (`thread/fork`, PROTOCOL.md §4), unless a thread is resumed.
    pub fn forking(mut self, thread: &str, last_turn: &str) -> CodexProtocol {
        self.fork = Some((thread.to_owned(), last_turn.to_owned()));
        self
    }

    fn request(&mut self, what: Sent, method: &str, params: Value) -> String {
        let id = self.next_id;
        self.next_id += 1;
        self.sent.insert(id, what);
        wire::request(id, method, params)
    }

    fn thread_params(&self) -> Value {
        json!({"cwd": self.cwd, "model": self.model, "approvalPolicy": "never", "sandbox": "danger-full-access"})
    }

    fn start_thread(&mut self) -> String {
        let params = self.thread_params();
        self.request(Sent::ThreadStart, "thread/start", params)
    }

    /// The thread is known: record it, send the turns that waited for it.
    fn thread_ready(&mut self, id: &str, out: &mut Reaction) {
        if self.thread_id.as_deref() == Some(id) {
            return;
        }
        if self.resume.as_deref() != Some(id) {
            out.vendor_session_id = Some(id.to_owned());
        }
        self.thread_id = Some(id.to_owned());
        for mut params in std::mem::take(&mut self.waiting) {
            params["threadId"] = json!(id);
            let line = self.request(Sent::TurnStart, "turn/start", params);
            out.replies.push(line);
        }
    }

    /// Sends the wanted interrupt once both the thread and the turn are known.
    fn maybe_interrupt(&mut self, out: &mut Reaction) {
        if !self.interrupt_wanted {
            return;
        }
        if !self.turn.started {
            return;
        }
        if let (Some(thread), Some(turn)) = (self.thread_id.clone(), self.turn.id.clone()) {
            self.interrupt_wanted = false;
            let line = self.request(
                Sent::Interrupt,
                "turn/interrupt",
                json!({"threadId": thread, "turnId": turn}),
            );
            out.replies.push(line);
        }
    }

    /// The waiting or running turn fails without Codex running it.
    fn fail_turn(&mut self, error: String, out: &mut Reaction) {
        if !self.turn.running {
            tracing::warn!(error, "codex app-server refused a request");
            return;
        }
        self.waiting.clear();
        self.interrupt_wanted = false;
        self.turn = Turn::default();
        out.items.push(VendorItem::TurnEnded(TurnEnded::by_byre(
            0,
            TurnOutcome::Failed,
            error,
        )));
    }

    fn on_response(&mut self, id: Option<u64>, outcome: Result<Value, String>, out: &mut Reaction) {
        let Some(what) = id.and_then(|id| self.sent.remove(&id)) else {
            return;
        };
        match (what, outcome) {
            (Sent::Initialize, Ok(_)) => {
                out.replies
                    .push(json!({"method": "initialized"}).to_string());
                let line = match (self.resume.clone(), self.fork.clone()) {
                    (Some(thread), _) => {
                        let mut params = self.thread_params();
                        params["threadId"] = json!(thread);
                        params["excludeTurns"] = json!(true);
                        self.request(Sent::ThreadResume, "thread/resume", params)
                    }
                    (None, Some((thread, last_turn))) => {
                        let mut params = self.thread_params();
                        params["threadId"] = json!(thread);
                        params["lastTurnId"] = json!(last_turn);
                        params["excludeTurns"] = json!(true);
                        self.request(Sent::ThreadFork, "thread/fork", params)
                    }
                    (None, None) => self.start_thread(),
                };
                out.replies.push(line);
            }
            (Sent::ThreadStart | Sent::ThreadResume | Sent::ThreadFork, Ok(result)) => {
                let thread = result.get("thread").unwrap_or(&Value::Null);
                let id = wire::str_of(thread, "id");
                if !id.is_empty() {
                    self.thread_ready(id, out);
                }
            }
            (Sent::ThreadResume, Err(e)) => {
                tracing::warn!(
                    error = e,
                    "codex could not resume the thread; starting a new one"
                );
                self.resume = None;
                let line = self.start_thread();
                out.replies.push(line);
            }
            (Sent::TurnStart, Ok(result)) => {
                let turn = result.get("turn").unwrap_or(&Value::Null);
                if self.turn.running && self.turn.id.is_none() {
                    self.turn.id =
                        Some(wire::str_of(turn, "id").to_owned()).filter(|t| !t.is_empty());
                }
                self.maybe_interrupt(out);
            }
            (Sent::Initialize, Err(e)) => {
                self.fail_turn(format!("codex app-server did not initialize: {e}"), out)
            }
            (Sent::ThreadStart, Err(e)) => {
                self.fail_turn(format!("codex could not start a thread: {e}"), out)
            }
            (Sent::ThreadFork, Err(e)) => {
                self.fail_turn(format!("codex could not fork the thread: {e}"), out)
            }
            (Sent::TurnStart, Err(e)) => {
                self.fail_turn(format!("codex could not start the turn: {e}"), out)
            }
            (Sent::Interrupt, Err(e)) if self.turn.running => {
                // Asked again at the turn's next notification, until it ends.
                tracing::warn!(
                    error = e,
                    "codex app-server refused an interrupt; asking again"
                );
                self.interrupt_wanted = true;
            }
            (Sent::Other | Sent::Interrupt, Err(e)) => {
                tracing::warn!(error = e, "codex app-server refused a request")
            }
            (Sent::Other | Sent::Interrupt, Ok(_)) => {}
        }
    }

    fn on_notification(&mut self, method: &str, params: &Value, line: &str, out: &mut Reaction) {
        let item = params.get("item").unwrap_or(&Value::Null);
        match method {
            "thread/started" => {
                let pending = self.sent.values().any(|s| *s == Sent::ThreadStart);
                let id = wire::str_of(params.get("thread").unwrap_or(&Value::Null), "id");
                if pending && self.thread_id.is_none() && !id.is_empty() {
                    self.thread_ready(id, out);
                }
            }
            "turn/started" => {
                if self.turn.running {
                    let id = wire::str_of(params.get("turn").unwrap_or(&Value::Null), "id");
                    self.turn.id = Some(id.to_owned()).filter(|t| !t.is_empty());
                    self.turn.started = true;
                }
            }
            "item/started" => {
                if let Some(call) = wire::tool_call(item, line) {
                    let kind = wire::str_of(item, "type").to_owned();
                    self.turn
                        .open
                        .push((wire::str_of(item, "id").to_owned(), kind));
                    out.items.push(call);
                }
            }
            "item/completed" => {
                let id = wire::str_of(item, "id");
                let kind = wire::str_of(item, "type");
                if wire::is_tool(kind) {
                    let before = self.turn.open.len();
                    self.turn.open.retain(|(open, _)| open != id);
                    if self.turn.open.len() == before {
                        out.items.extend(wire::tool_call(item, line));
                    }
                }
                if kind == "agentMessage" {
                    self.turn.last_text = wire::str_of(item, "text").to_owned();
                }
                out.items.extend(wire::item_completed(item, line));
            }
            "item/agentMessage/delta" => {
                out.delta = Some(wire::str_of(params, "delta").to_owned());
            }
            "error" => {
                let error = params.get("error").unwrap_or(&Value::Null);
                self.turn.error_status = wire::error_status(error).or(self.turn.error_status);
                if params.get("willRetry").and_then(Value::as_bool) == Some(true) {
                    out.items
                        .push(VendorItem::ApiRetry(wire::api_retry(params, line)));
                }
            }
            "thread/tokenUsage/updated" => {
                let usage = params.get("tokenUsage").unwrap_or(&Value::Null);
                let total = usage
                    .get("total")
                    .and_then(|t| t.get("totalTokens"))
                    .and_then(Value::as_u64);
                let this_turn = self.turn.id.is_some()
                    && self.turn.id.as_deref() == params.get("turnId").and_then(Value::as_str);
                if self.turn.running && this_turn && total.is_some() && total != self.total_tokens {
                    let last = wire::usage_of(usage.get("last").unwrap_or(&Value::Null));
                    self.turn.usage = self.turn.usage + last;
                    out.usage = Some(self.turn.usage);
                    self.turn.requests += 1;
                }
                self.total_tokens = total.or(self.total_tokens);
            }
            "account/rateLimits/updated" => {
                // All null but its `limitId` with an API key (no ChatGPT plan): nothing to keep.
                let limits = params.get("rateLimits").cloned().unwrap_or(Value::Null);
                let reported = limits
                    .as_object()
                    .is_some_and(|o| o.iter().any(|(k, v)| k != "limitId" && !v.is_null()));
                if reported {
                    self.rate_limits = Some(limits.clone());
                    out.rate_limits = Some(limits);
                }
            }
            "turn/completed" => self.turn_completed(params, line, out),
            m if wire::NOTIFICATIONS.contains(&m) => {}
            other => out.items.push(wire::unrecognized(
                line,
                format!("unknown notification `{other}`"),
            )),
        }
    }

    fn turn_completed(&mut self, params: &Value, line: &str, out: &mut Reaction) {
        let thread = params.get("threadId").and_then(Value::as_str);
        if thread.is_some() && thread != self.thread_id.as_deref() {
            return; // another thread's turn (a subagent's)
        }
        let done = params.get("turn").unwrap_or(&Value::Null);
        let status = wire::str_of(done, "status");
        let error = done.get("error").filter(|e| !e.is_null());
        let outcome = match status {
            "completed" => TurnOutcome::Completed,
            "interrupted" => TurnOutcome::Interrupted,
            _ => TurnOutcome::Failed,
        };
        let turn = std::mem::take(&mut self.turn);
        self.interrupt_wanted = false;
        let turn_id = Some(wire::str_of(done, "id").to_owned())
            .filter(|t| !t.is_empty())
            .or(turn.id.clone());
        let left_commands = turn.open.iter().any(|(_, kind)| kind == "commandExecution");
        for (id, _) in &turn.open {
            out.items.push(VendorItem::ToolResult(ToolResult {
                cut: None,
                tool_use_id: id.clone(),
                output: if outcome == TurnOutcome::Interrupted {
                    "interrupted".into()
                } else {
                    format!("the turn ended ({status}) before the tool finished")
                },
                is_error: true,
                raw: String::new(),
            }));
        }
        let error_text = match (error, outcome) {
            (Some(e), _) => wire::error_text(e),
            (None, TurnOutcome::Failed) => format!("the turn ended with status `{status}`"),
            _ => String::new(),
        };
        out.items.push(VendorItem::TurnEnded(TurnEnded {
            cut: None,
            turn: 0,
            outcome,
            summary: false,
            result: if outcome == TurnOutcome::Completed {
                turn.last_text
            } else {
                String::new()
            },
            error: error_text,
            usage: turn.usage,
            cost_micro_usd: 0,
            duration_ms: done.get("durationMs").and_then(Value::as_u64).unwrap_or(0),
            num_turns: turn.requests,
            api_error_status: error.and_then(wire::error_status).or(turn.error_status),
            rate_limits: self.rate_limits.clone(),
            review: false,
            last_vendor_id: turn_id,
            raw: line.to_owned(),
        }));
        if left_commands && outcome == TurnOutcome::Interrupted {
            // Interrupted commands keep running as background terminals (PROTOCOL.md §7).
            if let Some(thread) = self.thread_id.clone() {
                let line = self.request(
                    Sent::Other,
                    "thread/backgroundTerminals/clean",
                    json!({"threadId": thread}),
                );
                out.replies.push(line);
            }
        }
    }
}

/// A message as Codex `UserInput`s: its text, then each image as a data URL.
fn user_input(text: &str, images: &[Image]) -> Value {
    let mut input = Vec::new();
    if !text.is_empty() || images.is_empty() {
        input.push(json!({"type": "text", "text": text, "text_elements": []}));
    }
    for image in images {
        let data = base64::engine::general_purpose::STANDARD.encode(&image.bytes);
        input.push(
            json!({"type": "image", "url": format!("data:{};base64,{data}", image.content_type)}),
        );
    }
    Value::Array(input)
}

impl Protocol for CodexProtocol {
    fn start(&mut self) -> Vec<String> {
        let params = json!({
            "clientInfo": {"name": "byre", "title": "byre", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": true},
        });
        vec![self.request(Sent::Initialize, "initialize", params)]
    }

    fn message(&mut self, text: &str, images: &[Image], input_id: u64) -> Vec<String> {
        self.turn = Turn {
            running: true,
            ..Turn::default()
        };
        self.interrupt_wanted = false;
        let mut params =
            json!({"input": user_input(text, images), "clientUserMessageId": input_id.to_string()});
        if let Some(model) = self.next_model.take() {
            params["model"] = json!(model);
        }
        match self.thread_id.clone() {
            Some(thread) => {
                params["threadId"] = json!(thread);
                vec![self.request(Sent::TurnStart, "turn/start", params)]
            }
            None => {
                self.waiting.push(params);
                Vec::new()
            }
        }
    }

    fn interrupt(&mut self) -> Vec<String> {
        if !self.turn.running {
            return Vec::new();
        }
        self.interrupt_wanted = true;
        let mut out = Reaction::default();
        self.maybe_interrupt(&mut out);
        out.replies
    }

    fn set_model(&mut self, model: &str) -> Vec<String> {
        model.clone_into(&mut self.model);
        self.next_model = Some(model.to_owned());
        Vec::new()
    }

    fn on_line(&mut self, line: &str) -> Reaction {
        let mut out = Reaction::default();
        match wire::classify(line) {
            Incoming::Request { id, method, .. } => {
                tracing::warn!(method, "codex asked byre something; refused");
                out.replies.push(wire::refusal(&id, &method));
            }
            Incoming::Notification { method, params } => {
                self.on_notification(&method, &params, line, &mut out);
                if self.interrupt_wanted && self.turn.running {
                    self.maybe_interrupt(&mut out);
                }
            }
            Incoming::Response { id, outcome } => self.on_response(id, outcome, &mut out),
            Incoming::Invalid(item) => out.items.push(item),
        }
        out
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
