//! The Anthropic Messages API as Claude Code 2.1.197 uses it (claude-code PROTOCOL.md §9):
//! the marker [`AnthropicMessages`] for [`crate::FakeAnthropic`], its routes (`routes.rs`) and
//! the pure rendering of a reply as JSON or SSE (`sse.rs`).

mod routes;
mod sse;

use crate::script::{Block, ReplyKind, Script};
use crate::server::{ModelApi, Sealed};

/// The Anthropic Messages API (`POST /v1/messages`), spoken by [`crate::FakeAnthropic`].
pub enum AnthropicMessages {}

impl Sealed for AnthropicMessages {}

impl ModelApi for AnthropicMessages {
    fn routes(config: &mut actix_web::web::ServiceConfig) {
        routes::routes(config);
    }

    /// Rejects the Responses-only parts: `custom_tool_call` blocks, a `namespace` on
    /// `tool_use`, `error_code`.
    fn check(script: &Script) -> Result<(), String> {
        for (step, reply) in script.replies() {
            let at = step.map_or("default".to_owned(), |idx| format!("step {idx}"));
            let problem = match &reply.kind {
                ReplyKind::Message(message) => {
                    message.content.iter().find_map(|block| match block {
                        Block::CustomToolCall { .. } => {
                            Some("a `custom_tool_call` block is a Responses API item")
                        }
                        Block::ToolUse {
                            namespace: Some(_), ..
                        } => Some("`namespace` on a `tool_use` block is Responses API only"),
                        _ => None,
                    })
                }
                ReplyKind::HttpError(error) | ReplyKind::StreamError { error, .. } => error
                    .code
                    .as_ref()
                    .map(|_| "`error_code` is OpenAI's `error.code`; the Messages API has none"),
            };
            if let Some(problem) = problem {
                return Err(format!("{at}: {problem} (FakeAnthropic)"));
            }
        }
        Ok(())
    }
}
