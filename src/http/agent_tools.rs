//! `POST /internal/mcp/tools/{tool}`: a task agent's byre tool call, forwarded by its `byre mcp`
//! child (`crate::mcp::stdio`). Internal, not in the public contract.
//!
//! Request: `Authorization: Bearer <session token>` (`byre_agents::mcp_launch::McpHost::token`), the tool's
//! arguments as a JSON object of at most `MAX_TOOL_ARGS_BYTES`. Answer: 200
//! `{"is_error": bool, "text": "…"}` (plus `result`, a whole MCP `CallToolResult` to hand on
//! as it is, for `hands`), the tool result the model reads — a refused, malformed
//! or oversized call is a tool error, never an HTTP error; 401
//! without a token, 403 for a token that is not a live session's (forged, of no session, or of
//! a completed one) and for a call that does not come straight from this host: a non-loopback
//! peer, or a request a proxy forwarded (`X-Forwarded-For`, `Forwarded` or Tailscale identity
//! headers, as `tailscale serve` adds). `byre mcp` always calls over loopback, so session
//! tokens are never accepted from the network, whatever `--auth` and `--listen` are.

use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::{ApiError, App};
use byre_app::tools::{self, ToolResult, MAX_TOOL_ARGS_BYTES};

fn answer(result: ToolResult) -> HttpResponse {
    let mut body = json!({"is_error": result.is_error, "text": result.text});
    if let Some(whole) = result.result {
        body["result"] = whole;
    }
    HttpResponse::Ok().json(body)
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
    let session_id = tools::session_of_token(&app, token)?;
    let tool = tool.into_inner();
    tracing::info!(session_id, tool, "agent tool call");
    if let Some(refused) = tools::refusal(&app, &session_id, &tool) {
        return Ok(answer(refused));
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("cannot read the body: {e}")))?;
        if body.len() + chunk.len() > MAX_TOOL_ARGS_BYTES {
            return Ok(answer(ToolResult::error(format!(
                "the arguments are larger than {} KiB: shorten them (summarise long context, point to files instead of pasting them)",
                MAX_TOOL_ARGS_BYTES / 1024
            ))));
        }
        body.extend_from_slice(&chunk);
    }
    // Unparsable JSON reads as a non-object: the tool error says what is expected.
    let args: Value = serde_json::from_slice(&body).unwrap_or(Value::Bool(false));
    Ok(answer(tools::call(&app, &session_id, &tool, &args).await?))
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
