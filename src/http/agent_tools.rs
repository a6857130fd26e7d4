//! `POST /internal/mcp/tools/{tool}`: a task agent's byre tool call, forwarded by its `byre mcp`
//! child (`crate::mcp::stdio`). Internal, not in the public contract.
//!
//! Request: `Authorization: Bearer <session token>` (`crate::mcp::McpHost::token`), the tool's
//! arguments as a JSON object of at most [`MAX_TOOL_ARGS_BYTES`]. Answer: 200
//! `{"is_error": bool, "text": "…"}`, the tool result the model reads — a refused, malformed
//! or oversized call is a tool error, never an HTTP error; 401
//! without a token, 403 for a token that is not a live session's (forged, of no session, or of
//! a completed one) and for a call that does not come straight from this host: a non-loopback
//! peer, or a request a proxy forwarded (`X-Forwarded-For`, `Forwarded` or Tailscale identity
//! headers, as `tailscale serve` adds). `byre mcp` always calls over loopback, so session
//! tokens are never accepted from the network, whatever `--auth` and `--listen` are.

use actix_web::{web, HttpRequest, HttpResponse};
use byre_projections::sessions::SessionRole;
use byre_projections::{Command, EventBody};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::{ApiError, App};
use crate::log::SubmitError;

/// Largest tool call arguments, in bytes (JSON); larger ones are a tool error.
pub const MAX_TOOL_ARGS_BYTES: usize = 256 * 1024;

fn answer(is_error: bool, text: impl Into<String>) -> HttpResponse {
    HttpResponse::Ok().json(json!({"is_error": is_error, "text": text.into()}))
}

fn text_arg(args: &Value, name: &str, required: bool) -> Result<String, String> {
    match &args[name] {
        Value::String(s) => Ok(s.clone()),
        Value::Null if !required => Ok(String::new()),
        Value::Null => Err(format!("`{name}` is required")),
        _ => Err(format!("`{name}` must be a string")),
    }
}

/// Whether a request comes straight from a process on this host: a loopback peer and no
/// proxy's forwarding headers.
fn from_this_host(req: &HttpRequest) -> bool {
    let loopback = req
        .peer_addr()
        .is_some_and(|a| a.ip().to_canonical().is_loopback());
    let proxied = ["x-forwarded-for", "forwarded", "tailscale-user-login"]
        .iter()
        .any(|h| req.headers().contains_key(*h));
    loopback && !proxied
}

/// `POST /internal/mcp/tools/{tool}` — 200 `{is_error, text}`; 401; 403.
pub async fn call_tool(
    req: HttpRequest,
    tool: web::Path<String>,
    mut payload: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    if !from_this_host(&req) {
        return Err(ApiError::Forbidden(
            "agent tool calls are accepted only from byre mcp on this host".into(),
        ));
    }
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::Unauthorized("a session token is required".into()))?;
    let session_id = app
        .mcp
        .session_of(token.trim())
        .ok_or_else(|| ApiError::Forbidden("not a valid session token".into()))?;
    let role = app
        .writer
        .read(|s| s.sessions.get(&session_id).map(|x| (x.role, x.completed)))
        .ok_or_else(|| ApiError::Forbidden("the token's session does not exist".into()))?;
    if role.1 {
        return Err(ApiError::Forbidden(
            "the token's session has completed".into(),
        ));
    }
    let tool = tool.into_inner();
    tracing::info!(session_id, tool, "agent tool call");
    if role.0 != SessionRole::Implementer {
        return Ok(answer(
            true,
            format!(
                "`{tool}` is for a task's implementing agent only; this session may not use it"
            ),
        ));
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("cannot read the body: {e}")))?;
        if body.len() + chunk.len() > MAX_TOOL_ARGS_BYTES {
            return Ok(answer(
                true,
                format!(
                    "the arguments are larger than {} KiB: shorten them (summarise long context, point to files instead of pasting them)",
                    MAX_TOOL_ARGS_BYTES / 1024
                ),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    let args: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(Value::Null) => json!({}),
        _ => return Ok(answer(true, "the arguments must be a JSON object")),
    };
    let task_id = app
        .writer
        .read(|s| s.sessions.get(&session_id).map(|x| x.task_id.clone()))
        .unwrap_or_default();
    let cmd = match parse(&tool, &session_id, &task_id, &args) {
        Ok(cmd) => cmd,
        Err(message) => return Ok(answer(true, message)),
    };
    match app.writer.submit(cmd, None).await {
        Ok(ack) => Ok(answer(false, success_text(&tool, &ack))),
        Err(SubmitError::Rejected(r)) => Ok(answer(true, r.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// The command a call asks for; `Err` a message for the model (unknown tool, bad arguments).
pub(crate) fn parse(
    tool: &str,
    session_id: &str,
    task_id: &str,
    args: &Value,
) -> Result<Command, String> {
    let session_id = session_id.to_owned();
    match tool {
        "ask_human" => {
            let context = text_arg(args, "context", false)?;
            let question = text_arg(args, "question", true)?;
            let why_blocked = text_arg(args, "why_blocked", false)?;
            let attachments = match &args["attachments"] {
                Value::Null => Vec::new(),
                Value::Array(a) if a.iter().all(Value::is_object) => a.clone(),
                _ => return Err("`attachments` must be an array of objects".into()),
            };
            let choices = crate::mcp::choices::parse(&context);
            Ok(Command::AskHuman {
                session_id,
                question: byre_projections::inbox::Question {
                    context,
                    question,
                    why_blocked,
                    options: choices.options,
                    multiple: choices.multiple,
                    recommended: choices.recommended,
                    attachments,
                },
            })
        }
        "take_snapshot" => Ok(Command::RequestSnapshot {
            task_id: task_id.to_owned(),
            trigger: byre_projections::snapshots::SnapshotTrigger::Requested,
        }),
        "set_merge_title" => Ok(Command::SetMergeTitle {
            session_id,
            merge_title: text_arg(args, "merge_title", true)?,
        }),
        "expose_port" => {
            let port = args["port"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or("`port` must be a port number")?;
            Ok(Command::ExposePort {
                session_id,
                name: text_arg(args, "name", true)?,
                port,
            })
        }
        other => Err(format!(
            "byre has no tool `{other}`; its tools are ask_human, take_snapshot, set_merge_title and expose_port"
        )),
    }
}

/// The tool result the agent reads after `tool` succeeded.
pub(crate) fn success_text(tool: &str, ack: &crate::log::Ack) -> String {
    match tool {
        "ask_human" => {
            let id = ack
                .events
                .iter()
                .find_map(|e| match &e.body {
                    EventBody::InboxItemCreated(p) => Some(p.id.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            format!("Your question is posted to the humans' inbox (item {id}). End your turn now: do not wait, poll or ask again. Their answer will arrive as the next user message.")
        }
        "set_merge_title" => "The merge title is set.".into(),
        "take_snapshot" => "A snapshot of the worktree as it is now is being taken; it appears in the task's snapshots. Your branch and index are not touched.".into(),
        "expose_port" => {
            "The port is exposed as a preview; the humans see its link in the task.".into()
        }
        _ => "Done.".into(),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::from_this_host;

    #[test]
    fn only_direct_loopback_calls_count_as_from_this_host() {
        let peer = |addr: &str| TestRequest::default().peer_addr(addr.parse().unwrap());
        assert!(from_this_host(&peer("127.0.0.1:5000").to_http_request()));
        assert!(from_this_host(&peer("[::1]:5000").to_http_request()));
        assert!(from_this_host(
            &peer("[::ffff:127.0.0.1]:5000").to_http_request()
        ));
        assert!(!from_this_host(&peer("10.1.2.3:5000").to_http_request()));
        assert!(!from_this_host(
            &peer("[fd7a:115c::1]:5000").to_http_request()
        ));
        assert!(
            !from_this_host(&TestRequest::default().to_http_request()),
            "no peer"
        );
        for header in ["X-Forwarded-For", "Forwarded", "Tailscale-User-Login"] {
            let proxied = peer("127.0.0.1:5000")
                .insert_header((header, "100.64.0.1"))
                .to_http_request();
            assert!(!from_this_host(&proxied), "{header}");
        }
    }
}
