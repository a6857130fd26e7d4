//! Test support for byre's agent vendors: a scripted fake of the Anthropic Messages API
//! ([`FakeAnthropic`]) and the pinned real Claude Code CLI ([`claude_bin`]).
//!
//! Tests cannot reach the internet, so byre runs the **real** `claude` executable (from npm,
//! version [`CLAUDE_CODE_VERSION`]) with `ANTHROPIC_BASE_URL` pointing at this fake, whose
//! "model" follows a JSON script from `fixtures/fake-model/`. What the CLI sends and expects
//! is written down in `vendors/claude-code/PROTOCOL.md` (shared notes).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use byre_fake_models::{claude_bin, FakeAnthropic, Script};
//! let fake = FakeAnthropic::start(Script::fixture("a_text")?).await?;
//! // spawn claude_bin() with ANTHROPIC_BASE_URL=fake.url (PROTOCOL.md §1) …
//! let model_calls = fake.messages_requests();
//! fake.stop().await;
//! # let _ = (claude_bin, model_calls); Ok(()) }
//! ```
//!
//! # Layout
//! - `script.rs`: the script types and step conditions; `script/load.rs` reads and validates a file.
//! - `request.rs`: [`RecordedRequest`] (the log tests read) and the facts of a request body.
//! - `sse.rs`: a reply as the API's JSON message or SSE events (pure).
//! - `server.rs`: [`FakeAnthropic`], the actix-web server and its shared state.
//! - `routes.rs`: the routes and handlers, streaming included.
//! - `install.rs`: [`claude_bin`], the npm install under a file lock.
//! - `bin/byre-fake-anthropic.rs`: the fake as a program, for exploring by hand.
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
//! **Selection.** Each `POST /v1/messages` is answered by the first step, in file order,
//! that is not used up and whose `when` holds; if none, by `default` (text "ok" when the
//! script has none). [`RecordedRequest::messages`] tells which step answered.
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
//!   pinging every second: time to interrupt or queue a message);
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
//! Streaming follows the real API (see `sse.rs` for the event sequence).

#![warn(missing_docs)]

mod install;
mod request;
mod routes;
mod script;
mod server;
mod sse;

pub use install::{agent_cli_cache, claude_bin, CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION};
pub use request::{MessagesCall, RecordedRequest};
pub use script::{
    fixtures_dir, ApiError, Block, Conditions, MessageReply, Reply, ReplyKind, Script, ScriptError,
    Step, Times,
};
pub use server::FakeAnthropic;
