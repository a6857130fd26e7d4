//! The Anthropic fake's routes and handlers; the state they share is `server.rs`, the
//! streaming plumbing `http.rs`.
//!
//! Routes (claude-code PROTOCOL.md §9 lists what Claude Code 2.1.197 calls):
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/messages` (any query, e.g. `?beta=true`) | the script's reply: SSE if `stream:true`, else JSON |
//! | `POST /v1/messages/count_tokens` | `{"input_tokens": <body bytes / 4>}` |
//! | `GET /v1/models`, `GET /v1/models/{id}` | a small static list / that model |
//! | any method on `/` (the CLI's start-up `HEAD /`) | 200 `{}` |
//! | anything else | 404 `not_found_error` (recorded, so a test can see it) |

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use serde_json::{json, Value};

use super::sse;
use crate::http::{add_headers, fresh_id, sse_response, SseBody, SseEvent};
use crate::request::MessagesView;
use crate::script::{ApiError, ReplyKind};
use crate::server::Shared;
/// Model ids `GET /v1/models` lists.
const MODELS: [&str; 3] = [
    "claude-sonnet-4-5",
    "claude-opus-4-8",
    "claude-haiku-4-5-20251001",
];

pub(crate) fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/v1/messages", web::post().to(messages))
        .route("/v1/messages/count_tokens", web::post().to(count_tokens))
        .route("/v1/models", web::get().to(models))
        .route("/v1/models/{id}", web::get().to(model))
        .route("/", web::to(root))
        .default_service(web::to(unknown));
}

/// An error response in the API's shape, with the script's extra headers.
fn error_response(error: &ApiError, message: &str, headers: &[(String, String)]) -> HttpResponse {
    let request_id = fresh_id("req_fake_");
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = HttpResponseBuilder::new(status);
    response.insert_header(("request-id", request_id.as_str()));
    add_headers(&mut response, headers);
    response.json(sse::error_json(error, message, &request_id))
}

/// The error's message with the script's placeholders filled.
fn message_of(error: &ApiError, view: &MessagesView) -> String {
    view.fill(&error.message_or(error.anthropic_type()))
}

/// `POST /v1/messages`: the script's reply (module docs).
async fn messages(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let Some(json) = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(Value::is_object)
    else {
        shared.record(&request, &body, None);
        let error = ApiError {
            status: 400,
            error_type: None,
            code: None,
            message: None,
        };
        return error_response(&error, "fake: the body is not a JSON object", &[]);
    };
    let session = request
        .headers()
        .get("x-claude-code-session-id")
        .and_then(|value| value.to_str().ok());
    let (idx, view, step, reply) = shared.pick(&request, &body, |number| {
        MessagesView::new(&json, session, number)
    });
    tracing::info!(n = view.number, step, stream = view.stream, path = %request.uri(), "model call");
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    match &reply.kind {
        ReplyKind::HttpError(error) => {
            error_response(error, &message_of(error, &view), &reply.headers)
        }
        ReplyKind::StreamError {
            error,
            stall_after_start,
        } if view.stream => {
            let request_id = fresh_id("req_fake_");
            let head = vec![
                sse::bare_message_start(&fresh_id("msg_fake_"), &view.model),
                sse::ping(),
            ];
            let tail = vec![sse::error_event(
                error,
                &message_of(error, &view),
                &request_id,
            )];
            let stream = body_of(head, *stall_after_start, tail, std::time::Duration::ZERO);
            streamed(
                shared.into_inner(),
                idx,
                stream,
                &reply.headers,
                &request_id,
            )
        }
        ReplyKind::StreamError { error, .. } => {
            error_response(error, &message_of(error, &view), &reply.headers)
        }
        ReplyKind::Message(message) => {
            let input_tokens_estimate = (body.len() / 4).max(1) as u64;
            let message_id = format!("msg_fake_{:04}_{}", view.number, &fresh_id("")[..12]);
            let rendered =
                sse::render_message(message, &view, input_tokens_estimate, message_id, || {
                    fresh_id("toolu_fake_")
                });
            let request_id = fresh_id("req_fake_");
            if view.stream {
                let head = vec![sse::message_start(&rendered), sse::ping()];
                let tail = sse::content_events(&rendered);
                let stream = body_of(head, message.stall_after_start, tail, message.delta_gap);
                streamed(
                    shared.into_inner(),
                    idx,
                    stream,
                    &reply.headers,
                    &request_id,
                )
            } else {
                let mut response = HttpResponse::Ok();
                response.insert_header(("request-id", request_id.as_str()));
                add_headers(&mut response, &reply.headers);
                response.json(sse::message_json(&rendered))
            }
        }
    }
}

/// A streamed body: `head`, `stall` with a `ping` each second, then `tail`.
fn body_of(
    head: Vec<SseEvent>,
    stall: std::time::Duration,
    tail: Vec<SseEvent>,
    gap: std::time::Duration,
) -> SseBody {
    let bytes = |events: Vec<SseEvent>| events.iter().map(SseEvent::to_bytes).collect();
    SseBody {
        head: bytes(head),
        stall,
        keepalive: sse::ping().to_bytes(),
        tail: bytes(tail),
        gap,
    }
}

/// The SSE response with the API's `request-id` header.
fn streamed(
    shared: Arc<Shared>,
    idx: usize,
    body: SseBody,
    headers: &[(String, String)],
    request_id: &str,
) -> HttpResponse {
    let mut response = HttpResponse::Ok();
    response.insert_header(("request-id", request_id));
    sse_response(shared, idx, body, response, headers)
}

/// `POST /v1/messages/count_tokens`: a rough count (4 bytes a token).
async fn count_tokens(
    request: HttpRequest,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    shared.record(&request, &body, None);
    HttpResponse::Ok().json(json!({"input_tokens": (body.len() / 4).max(1)}))
}

fn model_json(id: &str) -> Value {
    json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"})
}

/// `GET /v1/models`.
async fn models(request: HttpRequest, body: web::Bytes, shared: web::Data<Shared>) -> HttpResponse {
    shared.record(&request, &body, None);
    let data: Vec<Value> = MODELS.iter().map(|id| model_json(id)).collect();
    HttpResponse::Ok()
        .json(json!({"data": data, "has_more": false, "first_id": MODELS[0], "last_id": MODELS[2]}))
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

/// Any method on `/`: the CLI's connectivity check (`HEAD /`).
async fn root(request: HttpRequest, body: web::Bytes, shared: web::Data<Shared>) -> HttpResponse {
    shared.record(&request, &body, None);
    HttpResponse::Ok().json(json!({}))
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
        error_type: None,
        code: None,
        message: None,
    };
    error_response(
        &error,
        &format!("fake: no route for {} {}", request.method(), request.path()),
        &[],
    )
}
