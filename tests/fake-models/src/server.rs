//! The HTTP side: an actix-web server on `127.0.0.1`, its routes, the state the script's
//! steps are used up in, and the request log.
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
use std::io;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpResponseBuilder, HttpServer};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::request::{MessagesCall, MessagesView, RecordedRequest};
use crate::script::{ApiError, Reply, ReplyKind, Script};
use crate::sse::{self, SseEvent};

/// Largest request body accepted (images make bodies big).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// While a reply stalls, a `ping` is sent this often.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Model ids `GET /v1/models` lists.
const MODELS: [&str; 3] = [
    "claude-sonnet-4-5",
    "claude-opus-4-8",
    "claude-haiku-4-5-20251001",
];

/// A running fake Messages API. Dropping it stops the server without waiting; prefer
/// [`FakeAnthropic::stop`].
pub struct FakeAnthropic {
    /// Base URL for `ANTHROPIC_BASE_URL`: `http://127.0.0.1:PORT`, without `/v1`.
    pub url: String,
    shared: Arc<Shared>,
    handle: ServerHandle,
    /// The actix server future, spawned on the caller's tokio runtime; awaited by `stop`.
    task: Option<JoinHandle<io::Result<()>>>,
}

/// What the handlers share. `std` mutex: every critical section is short and none awaits.
struct Shared {
    script: Script,
    state: Mutex<State>,
    /// Bumped on every change of the log, so tests can await a request instead of sleeping.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// How many requests each step has answered, by step index.
    n_used: Vec<u32>,
    /// `/v1/messages` requests so far.
    n_messages: u64,
    requests: Vec<RecordedRequest>,
}

impl FakeAnthropic {
    /// Starts the fake on `127.0.0.1` with a free port, on the current tokio runtime.
    /// # Errors
    /// Binding or starting the listener failed.
    pub async fn start(script: Script) -> io::Result<FakeAnthropic> {
        FakeAnthropic::start_on_port(script, 0).await
    }

    /// Starts the fake on `127.0.0.1:port` (0 = a free one).
    /// # Errors
    /// Binding or starting the listener failed (e.g. the port is taken).
    pub async fn start_on_port(script: Script, port: u16) -> io::Result<FakeAnthropic> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                n_used: vec![0; script.steps.len()],
                ..State::default()
            }),
            script,
            changed: watch::channel(0).0,
        });
        let data = web::Data::from(shared.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
                .configure(routes)
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
        let handle = server.handle();
        let task = Some(tokio::spawn(server));
        Ok(FakeAnthropic {
            url,
            shared,
            handle,
            task,
        })
    }

    /// Loads a script file and starts the fake with it.
    /// # Errors
    /// The script is unreadable or invalid (`InvalidData`), or the server could not start.
    pub async fn from_file(path: impl AsRef<Path>) -> io::Result<FakeAnthropic> {
        FakeAnthropic::start(Script::load(path)?).await
    }

    /// Starts the fake with `fixtures/fake-model/<name>.json`.
    /// # Errors
    /// As [`FakeAnthropic::from_file`].
    pub async fn fixture(name: &str) -> io::Result<FakeAnthropic> {
        FakeAnthropic::start(Script::fixture(name)?).await
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The model calls (`POST /v1/messages`) received so far.
    pub fn messages_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_messages)
            .collect()
    }

    /// Waits until `condition` holds for the request log and returns the log then. Never
    /// times out by itself: wrap it in `tokio::time::timeout`.
    pub async fn wait_until(
        &self,
        mut condition: impl FnMut(&[RecordedRequest]) -> bool,
    ) -> Vec<RecordedRequest> {
        let mut changes = self.shared.changed.subscribe();
        loop {
            let requests = self.requests();
            if condition(&requests) {
                return requests;
            }
            // The sender lives in `self.shared`, so `changed` cannot fail while we hold it.
            let _ = changes.changed().await;
        }
    }

    /// Stops the server, closing open connections, and waits until it has.
    pub async fn stop(mut self) {
        self.handle.stop(false).await;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if self.task.is_some() {
            // Sends the stop command at once; nobody awaits its completion.
            drop(self.handle.stop(false));
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends to the log; returns the entry's index.
    fn record(&self, request: &HttpRequest, body: &[u8], messages: Option<MessagesCall>) -> usize {
        let entry = RecordedRequest {
            method: request.method().to_string(),
            path: request
                .uri()
                .path_and_query()
                .map_or_else(|| request.path().to_owned(), |pq| pq.to_string()),
            headers: request
                .headers()
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(body).ok(),
            body_len_bytes: body.len(),
            messages,
            abandoned_by_client: false,
        };
        let idx = {
            let mut state = self.lock();
            state.requests.push(entry);
            state.requests.len() - 1
        };
        self.changed.send_modify(|n| *n += 1);
        idx
    }

    /// Numbers a model call, picks the step that answers it (using it up) and records it.
    fn pick(
        &self,
        request: &HttpRequest,
        body: &[u8],
        json: &Value,
    ) -> (usize, MessagesView, Option<usize>, Reply) {
        let session = request
            .headers()
            .get("x-claude-code-session-id")
            .and_then(|value| value.to_str().ok());
        let (view, step) = {
            let mut state = self.lock();
            state.n_messages += 1;
            let view = MessagesView::new(json, session, state.n_messages);
            let step = self
                .script
                .steps
                .iter()
                .enumerate()
                .position(|(idx, step)| {
                    step.times.allows(state.n_used[idx]) && step.when.hold(&view)
                });
            if let Some(idx) = step {
                state.n_used[idx] += 1;
            }
            (view, step)
        };
        let reply = step
            .map_or(&self.script.default_reply, |idx| {
                &self.script.steps[idx].reply
            })
            .clone();
        let call = MessagesCall {
            number: view.number,
            step,
            cwd: view.cwd.clone(),
        };
        (self.record(request, body, Some(call)), view, step, reply)
    }

    fn mark_abandoned(&self, idx: usize) {
        if let Some(entry) = self.lock().requests.get_mut(idx) {
            entry.abandoned_by_client = true;
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

fn routes(config: &mut web::ServiceConfig) {
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
