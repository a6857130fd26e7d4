//! The fake's routes and handlers; the state they share is `server.rs`.
//!
//! Routes (PROTOCOL.md §9 lists what Claude Code 2.1.197 calls):
//!
//! | request | answer |
//! | --- | --- |
//! | `POST /v1/messages` (any query, e.g. `?beta=true`) | the script's reply: SSE if `stream:true`, else JSON |
//! | `POST /v1/messages/count_tokens` | `{"input_tokens": <body bytes / 4>}` |
//! | `GET /v1/models`, `GET /v1/models/{id}` | a small static list / that model |
//! | any method on `/` (the CLI's start-up `HEAD /`) | 200 `{}` |
//! | anything else | 404 `not_found_error` (recorded, so a test can see it) |

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::script::{ApiError, ReplyKind};
use crate::server::Shared;
use crate::sse::{self, SseEvent};

/// While a reply stalls, a `ping` is sent this often.
const PING_EVERY: Duration = Duration::from_secs(1);
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

fn fresh_id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..24]
    )
}

/// Adds the script's extra headers (validated at load).
fn add_headers(response: &mut HttpResponseBuilder, headers: &[(String, String)]) {
    for (name, value) in headers {
        response.insert_header((name.as_str(), value.as_str()));
    }
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
            error_type: "invalid_request_error".into(),
            message: String::new(),
        };
        return error_response(&error, "fake: the body is not a JSON object", &[]);
    };
    let (idx, view, step, reply) = shared.pick(&request, &body, &json);
    tracing::info!(n = view.number, step, stream = view.stream, path = %request.uri(), "model call");
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    match &reply.kind {
        ReplyKind::HttpError(error) => {
            error_response(error, &view.fill(&error.message), &reply.headers)
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
                &view.fill(&error.message),
                &request_id,
            )];
            let stream = SseBody {
                head,
                stall: *stall_after_start,
                tail,
            };
            sse_response(
                shared.into_inner(),
                idx,
                stream,
                &reply.headers,
                &request_id,
            )
        }
        ReplyKind::StreamError { error, .. } => {
            error_response(error, &view.fill(&error.message), &reply.headers)
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
                let stream = SseBody {
                    head,
                    stall: message.stall_after_start,
                    tail: sse::content_events(&rendered),
                };
                sse_response(
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

/// The events of one streamed reply: `head`, then `stall` with a ping each second, then `tail`.
struct SseBody {
    head: Vec<SseEvent>,
    stall: Duration,
    tail: Vec<SseEvent>,
}

/// Marks the log entry abandoned when the body is dropped before its last event was sent.
struct AbandonGuard {
    shared: Arc<Shared>,
    idx: usize,
    finished: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.finished {
            tracing::info!(idx = self.idx, "client dropped the stream");
            self.shared.mark_abandoned(self.idx);
        }
    }
}

fn sse_response(
    shared: Arc<Shared>,
    idx: usize,
    body: SseBody,
    headers: &[(String, String)],
    request_id: &str,
) -> HttpResponse {
    let events = async_stream::stream! {
        let mut guard = AbandonGuard { shared, idx, finished: false };
        for event in body.head {
            yield Ok::<_, Infallible>(event.to_bytes());
        }
        let stall_end = Instant::now() + body.stall;
        while Instant::now() < stall_end {
            tokio::time::sleep(PING_EVERY.min(stall_end - Instant::now())).await;
            yield Ok(sse::ping().to_bytes());
        }
        for event in body.tail {
            yield Ok(event.to_bytes());
        }
        guard.finished = true;
    };
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/event-stream; charset=utf-8")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("request-id", request_id));
    add_headers(&mut response, headers);
    response.streaming(events)
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
        error_type: "not_found_error".into(),
        message: String::new(),
    };
    error_response(
        &error,
        &format!("fake: no route for {} {}", request.method(), request.path()),
        &[],
    )
}
