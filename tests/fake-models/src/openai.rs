//! The OpenAI Responses API as Codex 0.171 uses it (codex PROTOCOL.md §14): the marker
//! [`OpenAiResponses`] for [`crate::FakeOpenAi`], its routes (`routes.rs`), the pure rendering
//! of a reply as a response object or SSE events (`sse.rs`), and the reading of request
//! bodies (`view.rs`).

mod routes;
mod sse;
mod view;

pub(crate) use view::last_user_text;

use crate::script::{ReplyKind, Script};
use crate::server::{ModelApi, Sealed};

/// The OpenAI Responses API (`POST /v1/responses`), spoken by [`crate::FakeOpenAi`].
pub enum OpenAiResponses {}

impl Sealed for OpenAiResponses {}

impl ModelApi for OpenAiResponses {
    fn routes(config: &mut actix_web::web::ServiceConfig) {
        routes::routes(config);
    }

    /// Rejects the Anthropic-only part: `stop_reason` (a response's end is implied by its
    /// items: a `function_call` makes Codex run the tool and call again).
    fn check(script: &Script) -> Result<(), String> {
        for (step, reply) in script.replies() {
            if let ReplyKind::Message(message) = &reply.kind {
                if message.stop_reason.is_some() {
                    let at = step.map_or("default".to_owned(), |idx| format!("step {idx}"));
                    return Err(format!(
                        "{at}: `stop_reason` is Messages API only (FakeOpenAi)"
                    ));
                }
            }
        }
        Ok(())
    }
}
