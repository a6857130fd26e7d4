//! The agent-to-app WebSocket: `/codebolt?…` as the real client builds it (one socket both
//! ways), and the same service at the AsyncAPI's channel addresses `/agent-to-app` and
//! `/app-to-agent` for clients written from the spec.
//!
//! Authentication: the query must carry the secret token byre gave the agent it started
//! (`threadToken` or `agentId`, see [`super`]); anything else is refused with 401 before the
//! upgrade. Every request gets exactly one reply of the type its client awaits
//! (`byre_agents::codeboltjs::frames`), v2's `requestId` echoed; v1 requests are served one at a time, so a
//! v1 client gets its replies in request order (a terminal stream, and a question waiting for
//! a human, run on beside them); v2 requests run side by side (at most 8 at a time). Only
//! valid JSON is sent. A frame that is not a JSON object with a `type` is logged and ignored
//! (its generation, so the awaited reply, is unknowable); the socket is never closed for it.

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::AggregatedMessage;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::ApiError;
use byre_agents::codeboltjs::frames::{self, Frame, Request};
use byre_agents::codeboltjs::Link;
use byre_app::Ctx as App;

/// The reply type of a request no reply is sent for (a fire-and-forget call byre acts on).
const SILENT: &str = "";

/// Most v2 requests of one agent served at the same time.
const V2_CONCURRENCY: usize = 8;

/// Largest frame accepted, in bytes (a file's content travels in one).
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The secret in a query string: `threadToken`, else `agentId`. Parsed leniently: the client
/// pastes some values raw (PROTOCOL.md §1).
pub fn token_of(query: &str) -> Option<String> {
    let mut agent_id = None;
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_decode(v);
        match k {
            "threadToken" if !v.is_empty() => return Some(v),
            "agentId" if v.starts_with("cb-") => agent_id = Some(v),
            _ => {}
        }
    }
    agent_id
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What CodeBolt requests use beside the application layer: the subsystems the agents'
/// browser and toolbox actions run on (startup registers it beside the routes).
pub struct Subsystems {
    /// Headless Chromium for the browser and crawler families.
    pub browsers: Arc<byre_browser::Browsers>,
    /// The sessions' toolbox servers, for the mcp family.
    pub toolboxes: Arc<byre_toolboxes::Toolboxes>,
}

/// The agent socket's routes: `/codebolt`, `/agent-to-app`, `/app-to-agent` (GET; another
/// method answers 405 with `Allow: GET`). `startup` registers them beside `http::routes`
/// (schema/codebolt.asyncapi.yaml; vendors/codebolt/PROTOCOL.md).
pub fn routes(cfg: &mut web::ServiceConfig) {
    for path in ["/codebolt", "/agent-to-app", "/app-to-agent"] {
        cfg.service(web::resource(path).route(web::get().to(socket)));
    }
}

/// `GET /codebolt` (and `/agent-to-app`, `/app-to-agent`): upgrades an agent's socket.
/// # Errors
/// 401 without the token of a live CodeBolt session; 400 when the request is no WebSocket
/// upgrade; 409 when the session's agent is already connected.
pub async fn socket(
    req: HttpRequest,
    body: web::Payload,
    app: web::Data<App>,
    subsystems: web::Data<Subsystems>,
) -> Result<HttpResponse, ApiError> {
    let hub = app.agents.codebolt();
    let link = token_of(req.query_string())
        .and_then(|t| hub.link(&t))
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "a CodeBolt socket needs the token byre started its agent with".into(),
            )
        })?;
    let (response, session, stream) = actix_ws::handle(&req, body)
        .map_err(|e| ApiError::BadRequest(format!("not a WebSocket upgrade: {e}")))?;
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    if !link.connect(tx.clone()) {
        let _ = session.close(None).await;
        return Err(ApiError::Conflict("this agent is already connected".into()));
    }
    tracing::info!(session_id = %link.session_id, "CodeBolt agent connected");
    let ctx = Arc::new(super::actions::Ctx {
        link: link.clone(),
        app: app.clone(),
        browsers: subsystems.browsers.clone(),
        toolboxes: subsystems.toolboxes.clone(),
        out: tx,
        llm: hub.llm(),
        closed: tokio::sync::watch::channel(false).0,
    });
    actix_web::rt::spawn(write_loop(session.clone(), rx, ctx.closed.subscribe()));
    // Clients at the AsyncAPI's addresses get its ServiceResponse fields on every reply.
    let spec_channel = req.path() != "/codebolt";
    actix_web::rt::spawn(read_loop(ctx, session, stream, spec_channel));
    Ok(response)
}

async fn write_loop(
    mut session: actix_ws::Session,
    mut rx: mpsc::UnboundedReceiver<String>,
    mut closed: tokio::sync::watch::Receiver<bool>,
) {
    // The client registers its message handlers just after the socket opens; a frame that
    // arrives before is dropped (PROTOCOL.md §2.3). The reference server waits too.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    loop {
        let frame = tokio::select! {
            f = rx.recv() => f,
            _ = closed.wait_for(|c| *c) => None,
        };
        let Some(frame) = frame else { break };
        if session.text(frame).await.is_err() {
            break;
        }
    }
    let _ = session.close(None).await;
}

async fn read_loop(
    ctx: Arc<super::actions::Ctx>,
    mut session: actix_ws::Session,
    stream: actix_ws::MessageStream,
    spec_channel: bool,
) {
    let mut stream = stream
        .max_frame_size(MAX_FRAME_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_FRAME_BYTES);
    // v1 requests are served in order by one worker (their replies are matched by type);
    // v2 requests, whose replies carry their id, each run on their own, at most
    // V2_CONCURRENCY at a time, so a long command holds up nothing else. The reader stays
    // free for pings and messages.
    let (req_tx, mut req_rx) = mpsc::unbounded_channel::<Request>();
    let worker_ctx = ctx.clone();
    // The page is one: browser and crawler calls of either generation go in order.
    let (page_tx, mut page_rx) = mpsc::unbounded_channel::<Request>();
    let page_ctx = ctx.clone();
    actix_web::rt::spawn(async move {
        while let Some(req) = page_rx.recv().await {
            serve(&page_ctx, req).await;
        }
    });
    actix_web::rt::spawn(async move {
        let permits = Arc::new(tokio::sync::Semaphore::new(V2_CONCURRENCY));
        while let Some(req) = req_rx.recv().await {
            let ctx = worker_ctx.clone();
            if matches!(req.ty.as_str(), "browserEvent" | "crawlerEvent") {
                let _ = page_tx.send(req);
            } else if matches!(req.ty.as_str(), "waitforReply" | "confirmationRequest")
                || (req.ty == "agentEvent" && req.action == "startAgent")
            {
                // A question waits for a human, a started agent for its turn: the agent's
                // other requests go on meanwhile.
                actix_web::rt::spawn(async move { serve(&ctx, req).await });
            } else if req.generation == frames::Generation::V2 {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                actix_web::rt::spawn(async move {
                    serve(&ctx, req).await;
                    drop(permit);
                });
            } else {
                serve(&ctx, req).await;
            }
        }
    });
    let mut v1_calls: u64 = 0;
    while let Some(msg) = stream.recv().await {
        let text = match msg {
            Ok(AggregatedMessage::Text(t)) => t.to_string(),
            Ok(AggregatedMessage::Binary(b)) => String::from_utf8_lossy(&b).into_owned(),
            Ok(AggregatedMessage::Ping(p)) => {
                let _ = session.pong(&p).await;
                continue;
            }
            Ok(AggregatedMessage::Pong(_)) => continue,
            Ok(AggregatedMessage::Close(_)) => break,
            Err(e) => {
                tracing::warn!(error = %e, "CodeBolt socket protocol error");
                break;
            }
        };
        match frames::classify(&text) {
            None => {
                tracing::warn!(
                    size = text.len(),
                    "CodeBolt frame is not a JSON object with a type; ignored"
                );
                forward(&ctx.link, json!({"__byre": "malformed", "raw": cut(&text)})).await;
            }
            // Fire-and-forget browser and crawler calls (`close`, `getPDF`, crawler
            // `goToPage`, …) act, in order with the awaited ones, and are logged; no reply.
            Some(Frame::Message { ty, action }) if ty == "browserEvent" || ty == "crawlerEvent" => {
                let frame = frames::normalize(serde_json::from_str(&text).unwrap_or_default());
                let generation = if frame.get("requestId").is_some() {
                    frames::Generation::V2
                } else {
                    v1_calls += 1;
                    frames::Generation::V1
                };
                let request_id = match generation {
                    frames::Generation::V2 => frame["requestId"].clone(),
                    frames::Generation::V1 => json!(format!("v1-{v1_calls}")),
                };
                let _ = req_tx.send(Request {
                    generation,
                    request_id,
                    ty,
                    action,
                    reply_type: SILENT,
                    by_event: false,
                    spec_client: false,
                    frame,
                });
            }
            Some(Frame::Message { ty, action }) => {
                if ty == "agentnotify" && action == "startSubagentTaskRequest" {
                    // A notification, not a request: the subtask runs beside the agent's
                    // other frames, and its end comes back as `startSubagentTaskResult`.
                    if let Ok(v) = serde_json::from_str::<Value>(&text) {
                        let ctx = ctx.clone();
                        actix_web::rt::spawn(async move {
                            super::agents::start_subagent_task(&ctx, &v).await
                        });
                    }
                }
                if ty == "sendMessage" {
                    if let Ok(v) = serde_json::from_str::<Value>(&text) {
                        let m = frames::text(&v["message"]);
                        ctx.link
                            .store
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .history
                            .push(json!({"role": "assistant", "content": m}));
                    }
                }
                let _ = ctx.link.to_session.send(text).await;
            }
            Some(Frame::UnknownV1 { ty, action }) => {
                tracing::warn!(%ty, %action, "unknown v1 CodeBolt request: no reply type to answer with");
                forward(&ctx.link, json!({"__byre": "unknown", "raw": cut(&text)})).await;
            }
            Some(Frame::Request(mut r)) => {
                r.spec_client |= spec_channel;
                if r.generation == frames::Generation::V1 {
                    // v1 frames carry no id; byre's own (never sent) pairs a stream's call
                    // with its result in the log.
                    v1_calls += 1;
                    r.request_id = json!(format!("v1-{v1_calls}"));
                }
                let _ = req_tx.send(r);
            }
        }
    }
    ctx.link.disconnect();
    ctx.closed.send_replace(true);
    tracing::info!(session_id = %ctx.link.session_id, "CodeBolt agent disconnected");
}

fn cut(s: &str) -> String {
    let mut end = s.len().min(4096);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

async fn forward(link: &Link, v: Value) {
    let _ = link.to_session.send(v.to_string()).await;
}

/// Serves one request: its effect, its one reply, and the served pair for the session's log.
async fn serve(ctx: &Arc<super::actions::Ctx>, req: Request) {
    if byre_projections::agent_memory::writes(&req.ty, &req.action) {
        // Logged before it is answered (the served record goes first).
        let answer = super::actions::store_write(ctx, &req, |f| reply(&req, f)).await;
        let _ = ctx.out.send(answer.to_string());
        return;
    }
    let mut fields = super::actions::serve(ctx, &req).await;
    if fields.get("__streamed").is_some() {
        // A terminal stream sends its own frames (ending with the awaited one).
        forward(&ctx.link, json!({"__byre": "served", "id": req.request_id, "request": req.frame, "reply": {"type": req.reply_type, "success": true, "streamed": true}})).await;
        return;
    }
    // What the log keeps instead of the reply (a screenshot by blob id, not inline).
    let logged = fields
        .as_object_mut()
        .and_then(|f| f.remove("__logged"))
        .map(|l| reply(&req, l));
    let reply = reply(&req, fields);
    if req.reply_type != SILENT {
        let _ = ctx.out.send(reply.to_string());
    }
    let logged = logged.unwrap_or(reply);
    forward(
        &ctx.link,
        json!({"__byre": "served", "id": req.request_id, "request": req.frame, "reply": logged}),
    )
    .await;
}

/// The reply to `req` with `fields`: `type` (and `event` for clients that match on it),
/// the echoed `requestId`, `success` (true unless the fields say otherwise), and for spec
/// clients the `ServiceResponse` fields `data` and `timestamp`.
pub fn reply(req: &Request, fields: Value) -> Value {
    let mut out = serde_json::Map::new();
    let ty = fields
        .get("__type")
        .and_then(Value::as_str)
        .unwrap_or(req.reply_type)
        .to_owned();
    out.insert("type".into(), ty.clone().into());
    if req.by_event {
        out.insert("event".into(), ty.into());
    }
    if req.generation == frames::Generation::V2 {
        out.insert("requestId".into(), req.request_id.clone());
    }
    out.insert("success".into(), true.into());
    if let Value::Object(f) = fields {
        for (k, v) in f {
            if !matches!(k.as_str(), "type" | "requestId" | "event" | "__type") {
                out.insert(k, v);
            }
        }
    }
    if req.spec_client {
        let data = out
            .get("data")
            .cloned()
            .unwrap_or_else(|| Value::Object(out.clone()));
        out.insert("data".into(), data);
        out.insert("timestamp".into(), chrono::Utc::now().to_rfc3339().into());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v2_request_id_of_any_json_type_is_echoed_as_sent() {
        for id in [
            json!("r-1"),
            json!(42),
            json!(1.5),
            json!({"a": [1, 2]}),
            json!(null),
            json!("x".repeat(100_000)),
        ] {
            let frame = json!({"type": "fsEvent", "action": "readFile", "message": {"filePath": "a"}, "requestId": id});
            let Some(Frame::Request(r)) = frames::classify(&frame.to_string()) else {
                panic!("{frame}")
            };
            assert_eq!(r.generation, frames::Generation::V2);
            let out = reply(&r, json!({"content": "x"}));
            assert_eq!(out["requestId"], id);
            assert_eq!(out["type"], "readFileResponse");
        }
    }
}
