//! Test support for byre's agent vendors: scripted fakes of the two model APIs the agent CLIs
//! call — the Anthropic Messages API ([`FakeAnthropic`]) and the OpenAI Responses API
//! ([`FakeOpenAi`]) — and the pinned real CLIs from npm ([`claude_bin`], [`codex_bin`]).
//!
//! Tests cannot reach the internet, so byre runs the **real** `claude` (version
//! [`CLAUDE_CODE_VERSION`]) with `ANTHROPIC_BASE_URL` pointing at [`FakeAnthropic`], and the
//! real `codex app-server` (version [`CODEX_VERSION`]) with a CODEX_HOME whose model provider's
//! `base_url` is [`FakeOpenAi::base_url`]. Each fake's "model" follows a JSON script from
//! `fixtures/fake-model/` (one format for both). What the CLIs send and expect is written
//! down in `vendors/claude-code/PROTOCOL.md` and `vendors/codex/PROTOCOL.md` (shared notes);
//! the working Codex setup is `tests/codex_app_server/mod.rs`.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use byre_fake_models::{claude_bin, codex_bin, FakeAnthropic, FakeOpenAi, Script};
//! let fake = FakeAnthropic::start(Script::fixture("a_text")?).await?;
//! // spawn claude_bin() with ANTHROPIC_BASE_URL=fake.url (claude-code PROTOCOL.md §1) …
//! let model_calls = fake.messages_requests();
//! fake.stop().await;
//! let fake = FakeOpenAi::fixture("codex_a_text").await?;
//! // write CODEX_HOME/config.toml with base_url = fake.base_url() (codex PROTOCOL.md §2),
//! // spawn `codex_bin() app-server` …
//! let model_calls = fake.responses_requests();
//! fake.stop().await;
//! # let _ = (claude_bin, codex_bin, model_calls); Ok(()) }
//! ```
//!
//! # Layout
//! - `script.rs`: the script types and step conditions; `script/load.rs` reads and validates a file.
//! - `request.rs`: [`RecordedRequest`] (the log tests read) and the facts of a Messages body.
//! - `server.rs`: [`FakeModel`] (aliases [`FakeAnthropic`], [`FakeOpenAi`]), the actix-web
//!   server and its shared state, generic over the [`ModelApi`] it speaks.
//! - `http.rs`: what both APIs' handlers share: ids, headers, the stalling SSE body.
//! - `anthropic.rs` ([`AnthropicMessages`]): `anthropic/routes.rs` (routes and handlers),
//!   `anthropic/sse.rs` (a reply as the Messages API's JSON or SSE events, pure).
//! - `openai.rs` ([`OpenAiResponses`]): `openai/routes.rs` (routes, handlers, the standard
//!   headers), `openai/sse.rs` (a reply as a response object or SSE events, pure),
//!   `openai/view.rs` (reading Codex's request bodies).
//! - `install.rs`: [`claude_bin`], [`codex_bin`], the npm installs under one file lock.
//! - `bin/byre-fake-anthropic.rs`: either fake as a program, for exploring by hand.
//!
//! # Script format
//!
//! ```json
//! {
//!   "note": "free text, ignored",
//!   "default": {"content": [{"type": "text", "text": "ok"}]},
//!   "steps": [
//!     {"when": {"match": "create hello.txt"},
//!      "reply": {"content": [
//!        {"type": "text", "text": "I'll create it."},
//!        {"type": "tool_use", "name": "Write",
//!         "input": {"file_path": "{{cwd}}/hello.txt", "content": "hello\n"}}]}},
//!     {"when": {"last_is_tool_result": true},
//!      "reply": {"content": [{"type": "text", "text": "Done."}]}},
//!     {"times": "always",
//!      "reply": {"status": 429, "headers": {"retry-after": "1"}}}
//!   ]
//! }
//! ```
//!
//! **Selection.** Each model call (`POST /v1/messages`, `POST /v1/responses`) is answered by
//! the first step, in file order, that is not used up and whose `when` holds; if none, by
//! `default` (text "ok" when the script has none). [`RecordedRequest::messages`] tells which
//! step answered.
//!
//! **A step** has `when` (optional), `times` (a count, default 1, or `"always"`), `reply`,
//! and an ignored `note`.
//!
//! **`when`** — all given conditions must hold:
//! - `match`: substring of the last user message's text (text blocks + tool-result
//!   contents; an image reads as `[image]`);
//! - `match_any`: substring of the JSON of all the request's messages;
//! - `last_is_tool_result`: `true`/`false`: the last user message has a `tool_result`;
//! - `tool_result_contains`: substring of one of that message's tool results;
//! - `session`: equals the `X-Claude-Code-Session-Id` header (one fake, several agents);
//! - `requires_tools` (default `true`): the request offers tools. Tool-less side requests
//!   (title generation) then never use up a step; they get `default` unless a step says
//!   `"requires_tools": false`.
//!
//! **`reply`** is one of three kinds:
//! - a message: `content` (blocks `{"type":"text","text"}`, `{"type":"thinking","thinking",
//!   "signature"?}`, `{"type":"tool_use","name","input","id"?}`), `stop_reason` (default
//!   `tool_use` if a block is one, else `end_turn`), `usage` (overrides of the counted
//!   `input_tokens`/`output_tokens`/…), `stall_after_start_ms` (wait after `message_start`,
//!   pinging every second: time to interrupt or queue a message), `delta_gap_ms` (wait
//!   between the streamed events after that, so the text arrives piece by piece);
//! - an HTTP error: `status` (400–599), `error_type` (default from the status: 429
//!   `rate_limit_error`, 500 `api_error`, 529 `overloaded_error`, …), `error_message`;
//! - a stream error: `stream_error` (an error type): HTTP 200, `message_start`, then an SSE
//!   `error` event; `error_message`, `stall_after_start_ms`.
//!
//! Every kind also takes `delay_ms` (wait before answering at all) and `headers` (extra
//! response headers, e.g. `retry-after`, `anthropic-ratelimit-requests-remaining`).
//! Unknown fields are errors, so a typo fails at load.
//!
//! **Placeholders** in any string of a block or an error message: `{{cwd}}` (the rest of the
//! line after `Primary working directory:` in the system prompt, left as is if absent),
//! `{{last_user}}` (the last user message's text), `{{n}}` (1-based number of this model call).
//!
//! Streaming follows the real API (see `anthropic/sse.rs` for the event sequence).
//!
//! # The OpenAI Responses fake
//!
//! [`FakeOpenAi`] answers `POST /v1/responses` from the same kind of script (the `codex_*`
//! fixtures); a script with a part only the other API has is refused at start
//! (`InvalidInput`). What changes:
//!
//! - **Reading a request.** "The last user message" is the last `role:"user"` item of
//!   `input` that is not one of Codex's context envelopes (a whole `<tag>…</tag>` element
//!   such as `<environment_context>` or `<turn_aborted>`, or `# AGENTS.md …`); its text is its
//!   `input_text` parts, an `input_image` reading `[image]`. Its tool results are the
//!   `*_output` items after it (`function_call_output`, `custom_tool_call_output`, …), so a
//!   tool loop's follow-up calls match the prompt that started it with
//!   `last_is_tool_result: true`. `session` is Codex's `thread-id` header (the app-server
//!   thread id). `{{cwd}}` is the `<cwd>` of the latest `<environment_context>`.
//! - **Blocks become output items.** `text` → a `message` with one `output_text`;
//!   `thinking` → a `reasoning` item (summary = the text, `encrypted_content` = `signature`);
//!   `tool_use` → a `function_call` (`call_id` = `id`, `arguments` = `input` as a JSON string,
//!   optional `namespace`, e.g. `mcp__human`); and, Responses only, `{"type":
//!   "custom_tool_call","name","input","id"?}` → a `custom_tool_call` with text input (Codex's
//!   `apply_patch`). The tools Codex 0.171 offers are `exec_command` (`cmd`, `workdir`,
//!   `yield_time_ms`, …), `write_stdin`, `apply_patch` (custom), `view_image`, … (codex
//!   PROTOCOL.md §14). A call id given as `id` becomes the app-server's item id.
//! - **`usage`** overrides fields of the Responses usage (`input_tokens`,
//!   `input_tokens_details`, `output_tokens`, `output_tokens_details`, `total_tokens`;
//!   `total_tokens` is recomputed unless given). `stop_reason` is refused.
//! - **Errors** are `{"error":{"message","type","param":null,"code"}}`; `error_type`
//!   defaults from the status (429 `requests`, other 4xx `invalid_request_error`, 5xx
//!   `server_error`) and the new `error_code` too (401 `invalid_api_key`, 404
//!   `model_not_found`, 429 `rate_limit_exceeded`, else `null`). Codex reads
//!   `error_type: "usage_limit_reached"` on a 429 as the account's usage limit.
//! - **`stream_error`**: HTTP 200, `response.created`, `response.in_progress`, then
//!   `response.failed` with `error: {code: <error_code or stream_error>, message}`.
//! - **`stall_after_start_ms`** waits after `response.in_progress`, sending an SSE comment
//!   (`: keep-alive`) every second.
//! - **Headers.** Every answer carries `x-request-id`, `openai-version`,
//!   `openai-processing-ms` and a healthy `x-ratelimit-*` set, as the real API; the script's
//!   `headers` come last and win. ChatGPT's `x-codex-primary-*`/`x-codex-secondary-*` (the
//!   only ones Codex reports, in `account/rateLimits/updated`) are sent only when scripted.
//!
//! Streaming follows the real API (see `openai/sse.rs` for the event sequence).

#![warn(missing_docs)]

mod anthropic;
mod http;
mod install;
mod openai;
mod request;
mod script;
mod server;

pub use anthropic::AnthropicMessages;
pub use install::{
    agent_cli_cache, claude_bin, codeboltjs_node_modules, codex_bin, CLAUDE_CODE_PACKAGE,
    CLAUDE_CODE_VERSION, CODEBOLTJS_PACKAGE, CODEBOLTJS_VERSION, CODEX_PACKAGE, CODEX_VERSION,
};
pub use openai::OpenAiResponses;
pub use request::{MessagesCall, RecordedRequest};
pub use script::{
    fixtures_dir, ApiError, Block, Conditions, MessageReply, Reply, ReplyKind, Script, ScriptError,
    Step, Times,
};
pub use server::{FakeAnthropic, FakeModel, FakeOpenAi, ModelApi};
