//! The OpenAI fake's routes and handlers; the state they share is `server.rs`, the
//! streaming plumbing `http.rs`.
//!
//! Routes (codex PROTOCOL.md §14; with the config of §2, Codex 0.171 calls only the first):
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/responses` | the script's reply: SSE if `stream:true`, else the response object |
//! | `POST /v1/chat/completions` | the script's reply as one chat completion (no streaming; for CodeBolt agents' `inference`, which byre forwards) |
//! | `GET /v1/models`, `GET /v1/models/{id}` | a small static list / that model |
//! | anything else | 404 `invalid_request_error` (recorded, so a test can see it) |
//!
//! Every `/v1/responses` answer, errors included, carries the headers the real API sends:
//! `x-request-id`, `openai-version`, `openai-processing-ms` and the `x-ratelimit-*` set
//! ([`RATE_LIMIT_HEADERS`]); the script's `headers` are added last and win (e.g. a 429's
//! `retry-after`, `x-ratelimit-remaining-requests: 0`, or ChatGPT's `x-codex-primary-*`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use bytes::Bytes;
use serde_json::{json, Value};

use super::sse;
use crate::http::{add_headers, fresh_id, sse_response, SseBody, SseEvent};
use crate::request::MessagesView;
use crate::script::{ApiError, ReplyKind};
use crate::server::Shared;

/// The rate-limit headers of a healthy account, sent with every `/v1/responses` answer.
const RATE_LIMIT_HEADERS: [(&str, &str); 6] = [
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-remaining-requests", "9999"),
    ("x-ratelimit-reset-requests", "6ms"),
    ("x-ratelimit-limit-tokens", "30000000"),
    ("x-ratelimit-remaining-tokens", "29990000"),
    ("x-ratelimit-reset-tokens", "0s"),
];
/// Model ids `GET /v1/models` lists (slugs of Codex 0.171's bundled catalog, `codex debug models`).
const MODELS: [&str; 3] = ["gpt-5.5", "gpt-5.6-sol", "gpt-6-sol"];
/// Sent while a reply stalls: an SSE comment, which clients ignore.
const KEEPALIVE: &str = ": keep-alive\n\n";

pub(crate) fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/v1/responses", web::post().to(responses))
        .route("/v1/chat/completions", web::post().to(chat_completions))
        .route("/v1/models", web::get().to(models))
        .route("/v1/models/{id}", web::get().to(model))
        .default_service(web::to(unknown));
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// A response builder with the real API's standard headers, then the script's.
fn answer(status: StatusCode, extra: &[(String, String)]) -> HttpResponseBuilder {
    let mut response = HttpResponseBuilder::new(status);
    response
        .insert_header(("x-request-id", fresh_id("req_").as_str()))
        .insert_header(("openai-version", "2020-10-01"))
        .insert_header(("openai-processing-ms", "7"));
    for header in RATE_LIMIT_HEADERS {
        response.insert_header(header);
    }
    add_headers(&mut response, extra);
    response
}

/// An error response in the API's shape: `{"error":{"message","type","param","code"}}`.
fn error_response(error: &ApiError, message: &str, headers: &[(String, String)]) -> HttpResponse {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    answer(status, headers).json(sse::error_json(error, message))
}

/// A 400 for a body the fake cannot read.
fn bad_request(message: &str) -> HttpResponse {
    let error = ApiError {
        status: 400,
        error_type: None,
        code: None,
        message: None,
    };
    error_response(&error, message, &[])
}

/// The error's message with the script's placeholders filled.
fn message_of(error: &ApiError, view: &MessagesView) -> String {
    view.fill(&error.message_or(error.openai_type()))
}

/// `POST /v1/responses`: the script's reply (crate docs, "The OpenAI Responses fake").
async fn responses(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let encoding = request
        .headers()
        .get("content-encoding")
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    if encoding.as_deref().is_some_and(|name| name != "identity") {
        shared.record(&request, &body, None);
        return bad_request("fake: compressed request bodies are not supported");
    }
    let Some(json) = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(Value::is_object)
    else {
        shared.record(&request, &body, None);
        return bad_request("fake: the body is not a JSON object");
    };
    let thread_id = request
        .headers()
        .get("thread-id")
        .and_then(|value| value.to_str().ok());
    let (idx, view, step, reply) = shared.pick(&request, &body, |number| {
        MessagesView::from_responses(&json, thread_id, number)
    });
    tracing::info!(
        n = view.number,
        step,
        stream = view.stream,
        "model call (responses)"
    );
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let response_id = format!("resp_fake_{:04}_{}", view.number, &fresh_id("")[..12]);
    match &reply.kind {
        ReplyKind::HttpError(error) => {
            error_response(error, &message_of(error, &view), &reply.headers)
        }
        ReplyKind::StreamError {
            error,
            stall_after_start,
        } if view.stream => {
            let empty = crate::script::MessageReply {
                content: Vec::new(),
                stop_reason: None,
                usage: serde_json::Map::new(),
                stall_after_start: Duration::ZERO,
                delta_gap: Duration::ZERO,
            };
            let rendered =
                sse::render_response(&empty, &view, 1, (response_id, unix_now_s()), fresh_id);
            let failure = sse::failure_json(error, &message_of(error, &view));
            let (head, tail) = sse::stream_events(&rendered, Some(failure));
            let stream = body_of(head, *stall_after_start, tail);
            let response = answer(StatusCode::OK, &[]);
            sse_response(shared.into_inner(), idx, stream, response, &reply.headers)
        }
        ReplyKind::StreamError { error, .. } => {
            error_response(error, &message_of(error, &view), &reply.headers)
        }
        ReplyKind::Message(message) => {
            let input_tokens_estimate = (body.len() / 4).max(1) as u64;
            let rendered = sse::render_response(
                message,
                &view,
                input_tokens_estimate,
                (response_id, unix_now_s()),
                fresh_id,
            );
            if view.stream {
                let (head, tail) = sse::stream_events(&rendered, None);
                let stream = body_of(head, message.stall_after_start, tail);
                let response = answer(StatusCode::OK, &[]);
                sse_response(shared.into_inner(), idx, stream, response, &reply.headers)
            } else {
                answer(StatusCode::OK, &reply.headers).json(sse::response_json(
                    &rendered,
                    "completed",
                    None,
                ))
            }
        }
    }
}

/// `POST /v1/chat/completions`: the script's reply as one (non-streamed) chat completion: text
/// blocks joined into `content`, tool uses as `tool_calls`. The script matches the last
/// `user` message as for `/v1/responses`.
async fn chat_completions(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let Some(json) = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(Value::is_object)
    else {
        shared.record(&request, &body, None);
        return bad_request("fake: the body is not a JSON object");
    };
    let as_responses = json!({
        "model": json.get("model").cloned().unwrap_or(Value::Null),
        "input": json.get("messages").cloned().unwrap_or_else(|| json!([])),
        "tools": json.get("tools").cloned().unwrap_or_else(|| json!([])),
    });
    let (_, view, step, reply) = shared.pick(&request, &body, |number| {
        MessagesView::from_responses(&as_responses, None, number)
    });
    tracing::info!(n = view.number, step, "model call (chat completions)");
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let message = match &reply.kind {
        ReplyKind::HttpError(error) | ReplyKind::StreamError { error, .. } => {
            return error_response(error, &message_of(error, &view), &reply.headers)
        }
        ReplyKind::Message(message) => message,
    };
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            crate::script::Block::Text { text: t } => text.push(view.fill(t)),
            crate::script::Block::ToolUse {
                id, name, input, ..
            } => tool_calls.push(json!({
                "id": id.clone().unwrap_or_else(|| fresh_id("call_")),
                "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            _ => {}
        }
    }
    let mut msg = json!({"role": "assistant", "content": text.join("")});
    if !tool_calls.is_empty() {
        msg["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = if msg.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let prompt_tokens = (body.len() / 4).max(1);
    answer(StatusCode::OK, &reply.headers).json(json!({
        "id": format!("chatcmpl-fake-{:04}", view.number),
        "object": "chat.completion",
        "created": unix_now_s(),
        "model": view.model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 10, "total_tokens": prompt_tokens + 10},
    }))
}

/// A streamed body: `head`, `stall` with an SSE comment each second, then `tail`.
fn body_of(head: Vec<SseEvent>, stall: Duration, tail: Vec<SseEvent>) -> SseBody {
    let bytes = |events: Vec<SseEvent>| events.iter().map(SseEvent::to_bytes).collect();
    SseBody {
        head: bytes(head),
        stall,
        keepalive: Bytes::from_static(KEEPALIVE.as_bytes()),
        tail: bytes(tail),
        gap: Duration::ZERO,
    }
}

fn model_json(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "openai"})
}

/// `GET /v1/models`.
async fn models(request: HttpRequest, body: web::Bytes, shared: web::Data<Shared>) -> HttpResponse {
    shared.record(&request, &body, None);
    let data: Vec<Value> = MODELS.iter().map(|id| model_json(id)).collect();
    HttpResponse::Ok().json(json!({"object": "list", "data": data}))
}

/// `GET /v1/models/{id}`: any id exists.
async fn model(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
    id: web::Path<String>,
) -> HttpResponse {
    shared.record(&request, &body, None);
    HttpResponse::Ok().json(model_json(&id))
}

/// Anything else: recorded, then 404 as the real API would.
async fn unknown(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    shared.record(&request, &body, None);
    tracing::warn!(method = %request.method(), path = %request.uri(), "unexpected request");
    let error = ApiError {
        status: 404,
        error_type: Some("invalid_request_error".into()),
        code: Some("unknown_url".into()),
        message: None,
    };
    let message = format!(
        "fake: invalid URL ({} {})",
        request.method(),
        request.path()
    );
    error_response(&error, &message, &[])
}
