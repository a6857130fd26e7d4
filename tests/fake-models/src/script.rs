//! The script: which reply a fake gives to which model call (`POST /v1/messages` of the
//! Anthropic fake, `POST /v1/responses` of the OpenAI fake). One format serves both; the JSON
//! is described in the crate docs (`lib.rs`) and in `fixtures/fake-model/README.md`; reading
//! and validating it is `script/load.rs`. What each API renders, and which parts only one
//! of them takes, is in `anthropic.rs` and `openai.rs`.

mod load;

pub use load::{fixtures_dir, ScriptError};

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::request::MessagesView;

/// A parsed, validated script.
#[derive(Debug, Clone)]
pub struct Script {
    /// The steps, in file order; the first one that is not used up and whose conditions
    /// hold answers a request.
    pub steps: Vec<Step>,
    /// The answer when no step does (`default` in the file; a text block "ok" if absent).
    pub default_reply: Reply,
}

/// One step: conditions, how often it may answer, and the reply.
#[derive(Debug, Clone)]
pub struct Step {
    /// What a request must look like for this step to answer it (`when`).
    pub when: Conditions,
    /// How many requests this step may answer (`times`; default 1).
    pub times: Times,
    /// The answer (`reply`).
    pub reply: Reply,
}

/// The conditions of a step; all given ones must hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// `match`: a substring of the last user message's text (its text blocks and the
    /// contents of its tool results; `role:"system"` entries are skipped). Responses API:
    /// the last `role:"user"` item that is not a context envelope (`openai/view.rs`).
    #[serde(rename = "match")]
    pub last_user_contains: Option<String>,
    /// `match_any`: a substring of the JSON of all messages of the request.
    pub match_any: Option<String>,
    /// `last_is_tool_result`: whether the last user message carries a `tool_result` block
    /// (Responses API: whether tool outputs follow it).
    pub last_is_tool_result: Option<bool>,
    /// `tool_result_contains`: a substring of some tool result in the last user message
    /// (Responses API: of some `*_output` item after it).
    pub tool_result_contains: Option<String>,
    /// `session`: equal to the request's session header, so one fake can serve several
    /// agents: `X-Claude-Code-Session-Id` (claude-code PROTOCOL.md §7), or Codex's
    /// `thread-id` (the app-server thread id, codex PROTOCOL.md §14).
    pub session: Option<String>,
    /// `requires_tools` (default true): only requests that offer tools match. The CLI's
    /// tool-less side requests (title generation, summaries) then never use up a step.
    #[serde(default = "yes")]
    pub requires_tools: bool,
}

fn yes() -> bool {
    true
}

impl Default for Conditions {
    fn default() -> Self {
        Conditions {
            last_user_contains: None,
            match_any: None,
            last_is_tool_result: None,
            tool_result_contains: None,
            session: None,
            requires_tools: true,
        }
    }
}

impl Conditions {
    /// Whether every given condition holds for `request`.
    pub(crate) fn hold(&self, request: &MessagesView) -> bool {
        let contains = |needle: &Option<String>, haystack: &str| {
            needle
                .as_deref()
                .is_none_or(|needle| haystack.contains(needle))
        };
        (!self.requires_tools || request.has_tools)
            && contains(&self.last_user_contains, &request.last_user_text)
            && contains(&self.match_any, &request.all_messages_json)
            && self
                .last_is_tool_result
                .is_none_or(|want| want == request.last_is_tool_result)
            && self.tool_result_contains.as_deref().is_none_or(|needle| {
                request
                    .tool_result_texts
                    .iter()
                    .any(|text| text.contains(needle))
            })
            && self
                .session
                .as_deref()
                .is_none_or(|id| request.session_id.as_deref() == Some(id))
    }
}

/// How many requests a step may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// At most this many (`"times": 3`).
    Count(u32),
    /// Any number (`"times": "always"`).
    Always,
}

impl Times {
    /// Whether a step that has answered `n_used` requests may answer one more.
    pub fn allows(self, n_used: u32) -> bool {
        match self {
            Times::Count(limit) => n_used < limit,
            Times::Always => true,
        }
    }
}

/// What the fake answers.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Waited before anything is sent (`delay_ms`), headers included.
    pub delay: Duration,
    /// Extra response headers (`headers`), e.g. `retry-after` on a 429.
    pub headers: Vec<(String, String)>,
    /// The answer itself.
    pub kind: ReplyKind,
}

/// The three kinds of answer.
#[derive(Debug, Clone)]
pub enum ReplyKind {
    /// An assistant message: SSE when the request streams, JSON otherwise.
    Message(MessageReply),
    /// An HTTP error status with the API's error body (`status` ≠ 200).
    HttpError(ApiError),
    /// HTTP 200, `message_start`, then an SSE `error` event (`stream_error`); Responses API:
    /// `response.created`, `response.in_progress`, then `response.failed`. A non-streaming
    /// request gets the same error as an HTTP error (529 for `overloaded_error`, else 500).
    StreamError {
        /// The error's type (the `stream_error` value), code and message.
        error: ApiError,
        /// Waited after the stream's start (keep-alives are sent meanwhile).
        stall_after_start: Duration,
    },
}

/// An assistant message to send (for the Responses API: the output items of one response).
#[derive(Debug, Clone)]
pub struct MessageReply {
    /// The content blocks, in order (`content`).
    pub content: Vec<Block>,
    /// `stop_reason` (Anthropic only); when absent, `tool_use` if a block is one, else `end_turn`.
    pub stop_reason: Option<String>,
    /// Fields that override the counted usage (`usage`, e.g. `{"input_tokens": 10}`), in the
    /// API's own shape (Responses: `input_tokens_details`, `output_tokens_details`, …).
    pub usage: Map<String, Value>,
    /// Waited after `message_start` (Responses: `response.in_progress`), sending a keep-alive
    /// every second (`stall_after_start_ms`): time for a test to queue a message or interrupt
    /// while the model "streams".
    pub stall_after_start: Duration,
    /// Waited between the streamed events after the stall (`delta_gap_ms`; Messages API only),
    /// so a client sees the text arrive piece by piece.
    pub delta_gap: Duration,
}

/// One content block of a scripted message (Responses API: one output item). Strings may
/// hold the placeholders `{{cwd}}`, `{{last_user}}` and `{{n}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    /// `{"type":"text","text":"…"}`; Responses: a `message` item with one `output_text`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"thinking","thinking":"…","signature":"…"}` (signature optional); Responses:
    /// a `reasoning` item whose summary is `thinking` and `encrypted_content` the signature.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Sent as the `signature_delta`; a fixed fake one when absent.
        signature: Option<String>,
    },
    /// `{"type":"tool_use","name":"Write","input":{…},"id":"toolu_…"}` (id optional);
    /// Responses: a `function_call` item, `arguments` = `input` as a JSON string, `call_id` = `id`.
    ToolUse {
        /// The tool-use id (Responses: `call_id`); a fresh one when absent.
        id: Option<String>,
        /// The tool's name as the request offers it (`Write`, `Bash`, `exec_command`, …).
        name: String,
        /// The tool's input object.
        #[serde(default = "empty_object")]
        input: Value,
        /// Responses only: the function's `namespace`, e.g. `mcp__human` for an MCP tool
        /// (codex PROTOCOL.md §9).
        namespace: Option<String>,
    },
    /// Responses only: `{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch…"}`,
    /// a freeform tool call whose input is plain text (Codex's `apply_patch`).
    CustomToolCall {
        /// The `call_id`; a fresh one when absent.
        id: Option<String>,
        /// The tool's name as the request offers it.
        name: String,
        /// The tool's input text.
        input: String,
    },
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// An API error: HTTP status, error type, code and message. What the script leaves out is
/// filled in per API from the status (`anthropic_type`, `openai_type`, `openai_code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (400–599); for a stream error, the status a non-streaming request gets.
    pub status: u16,
    /// `error_type` (`error.type`, e.g. `rate_limit_error`, `usage_limit_reached`); None: the
    /// API's usual type for the status.
    pub error_type: Option<String>,
    /// `error_code` (OpenAI's `error.code`, e.g. `rate_limit_exceeded`); None: the usual
    /// code for the status.
    pub code: Option<String>,
    /// `error_message` (`error.message`); None: `fake <type>`. May hold placeholders.
    pub message: Option<String>,
}

impl ApiError {
    /// `error.type` in the Anthropic API: the script's, else from the status.
    pub fn anthropic_type(&self) -> &str {
        self.error_type.as_deref().unwrap_or(match self.status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        })
    }

    /// `error.type` in the OpenAI API: the script's, else from the status.
    pub fn openai_type(&self) -> &str {
        self.error_type.as_deref().unwrap_or(match self.status {
            429 => "requests",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        })
    }

    /// `error.code` in the OpenAI API: the script's, else from the status (None = `null`).
    pub fn openai_code(&self) -> Option<&str> {
        self.code.as_deref().or(match self.status {
            401 => Some("invalid_api_key"),
            404 => Some("model_not_found"),
            429 => Some("rate_limit_exceeded"),
            _ => None,
        })
    }

    /// The message before placeholders are filled: the script's, else `fake <type>`.
    pub fn message_or(&self, error_type: &str) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| format!("fake {error_type}"))
    }
}

impl Script {
    /// Every reply with where it is: `(Some(step index), reply)`, then `(None, default)`.
    pub fn replies(&self) -> impl Iterator<Item = (Option<usize>, &Reply)> {
        self.steps
            .iter()
            .enumerate()
            .map(|(idx, step)| (Some(idx), &step.reply))
            .chain(std::iter::once((None, &self.default_reply)))
    }
}

impl Reply {
    /// A reply with one text block and nothing else.
    pub fn text(text: &str) -> Reply {
        Reply {
            delay: Duration::ZERO,
            headers: Vec::new(),
            kind: ReplyKind::Message(MessageReply {
                content: vec![Block::Text {
                    text: text.to_owned(),
                }],
                stop_reason: None,
                usage: Map::new(),
                stall_after_start: Duration::ZERO,
                delta_gap: Duration::ZERO,
            }),
        }
    }
}
