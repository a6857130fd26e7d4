//! [`FakeModel`]: an actix-web server on `127.0.0.1` speaking one model API ([`ModelApi`]:
//! routes in `anthropic/routes.rs` or `openai/routes.rs`), the state the script's steps are
//! used up in, and the request log. [`FakeAnthropic`] and [`FakeOpenAi`] are its two kinds.

use std::io;
use std::marker::PhantomData;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpServer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::anthropic::AnthropicMessages;
use crate::openai::OpenAiResponses;
use crate::request::{MessagesCall, MessagesView, RecordedRequest};
use crate::script::{Reply, Script};

/// Largest request body accepted (images make bodies big).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The scripted fake of the Anthropic Messages API (Claude Code's model API).
pub type FakeAnthropic = FakeModel<AnthropicMessages>;
/// The scripted fake of the OpenAI Responses API (the Codex CLI's model API).
pub type FakeOpenAi = FakeModel<OpenAiResponses>;

mod sealed {
    /// Only this crate's API markers implement [`super::ModelApi`].
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// One model API a [`FakeModel`] can speak: [`AnthropicMessages`] or [`OpenAiResponses`].
/// Sealed: the routes and the rendering of script replies live in this crate.
pub trait ModelApi: Sealed + 'static {
    /// Registers the API's routes.
    #[doc(hidden)]
    fn routes(config: &mut web::ServiceConfig);
    /// Whether the script only uses what this API can send; the message says which step
    /// uses what (e.g. a `custom_tool_call` block for the Anthropic API).
    #[doc(hidden)]
    fn check(script: &Script) -> Result<(), String>;
}

/// A running fake model API on `127.0.0.1`. Dropping it stops the server without waiting;
/// prefer [`FakeModel::stop`].
pub struct FakeModel<A: ModelApi> {
    /// `http://127.0.0.1:PORT`, without `/v1`: `ANTHROPIC_BASE_URL` for Claude Code; Codex's
    /// provider `base_url` is this plus `/v1` ([`FakeOpenAi::base_url`]).
    pub url: String,
    shared: Arc<Shared>,
    handle: ServerHandle,
    /// The actix server future, spawned on the caller's tokio runtime; awaited by `stop`.
    task: Option<JoinHandle<io::Result<()>>>,
    api: PhantomData<fn() -> A>,
}

/// What the handlers share. `std` mutex: every critical section is short and none awaits.
pub(crate) struct Shared {
    script: Script,
    state: Mutex<State>,
    /// Bumped on every change of the log, so tests can await a request instead of sleeping.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// How many requests each step has answered, by step index.
    n_used: Vec<u32>,
    /// Model calls (`/v1/messages`, `/v1/responses`) so far.
    n_messages: u64,
    requests: Vec<RecordedRequest>,
}

impl<A: ModelApi> FakeModel<A> {
    /// Starts the fake on `127.0.0.1` with a free port, on the current tokio runtime.
    /// # Errors
    /// `InvalidInput` when the script uses what this API cannot send ([`ModelApi::check`]);
    /// binding or starting the listener failed.
    pub async fn start(script: Script) -> io::Result<FakeModel<A>> {
        FakeModel::start_on_port(script, 0).await
    }

    /// Starts the fake on `127.0.0.1:port` (0 = a free one).
    /// # Errors
    /// As [`FakeModel::start`]; also when the port is taken.
    pub async fn start_on_port(script: Script, port: u16) -> io::Result<FakeModel<A>> {
        A::check(&script)
            .map_err(|message| io::Error::new(io::ErrorKind::InvalidInput, message))?;
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
                .configure(A::routes)
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
        let handle = server.handle();
        let task = Some(tokio::spawn(server));
        Ok(FakeModel {
            url,
            shared,
            handle,
            task,
            api: PhantomData,
        })
    }

    /// Loads a script file and starts the fake with it.
    /// # Errors
    /// The script is unreadable or invalid (`InvalidData`), or the server could not start.
    pub async fn from_file(path: impl AsRef<Path>) -> io::Result<FakeModel<A>> {
        FakeModel::start(Script::load(path)?).await
    }

    /// Starts the fake with `fixtures/fake-model/<name>.json`.
    /// # Errors
    /// As [`FakeModel::from_file`].
    pub async fn fixture(name: &str) -> io::Result<FakeModel<A>> {
        FakeModel::start(Script::fixture(name)?).await
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The model calls (`POST /v1/messages` or `POST /v1/responses`) received so far.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_model_call)
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

impl FakeAnthropic {
    /// The model calls (`POST /v1/messages`) received so far; as [`FakeModel::model_requests`].
    pub fn messages_requests(&self) -> Vec<RecordedRequest> {
        self.model_requests()
    }
}

impl FakeOpenAi {
    /// The provider `base_url` for Codex's config: `http://127.0.0.1:PORT/v1` (Codex appends
    /// `/responses`; codex PROTOCOL.md §2).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url)
    }

    /// The model calls (`POST /v1/responses`) received so far; as [`FakeModel::model_requests`].
    pub fn responses_requests(&self) -> Vec<RecordedRequest> {
        self.model_requests()
    }
}

impl<A: ModelApi> Drop for FakeModel<A> {
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
    pub(crate) fn record(
        &self,
        request: &HttpRequest,
        body: &[u8],
        messages: Option<MessagesCall>,
    ) -> usize {
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
        tracing::debug!(method = %entry.method, path = %entry.path, "request");
        let idx = {
            let mut state = self.lock();
            state.requests.push(entry);
            state.requests.len() - 1
        };
        self.changed.send_modify(|n| *n += 1);
        idx
    }

    /// Numbers a model call, reads it with `view_of(body, number)`, picks the step that
    /// answers it (using it up) and records it.
    pub(crate) fn pick(
        &self,
        request: &HttpRequest,
        body: &[u8],
        view_of: impl FnOnce(u64) -> MessagesView,
    ) -> (usize, MessagesView, Option<usize>, Reply) {
        let (view, step) = {
            let mut state = self.lock();
            state.n_messages += 1;
            let view = view_of(state.n_messages);
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

    pub(crate) fn mark_abandoned(&self, idx: usize) {
        if let Some(entry) = self.lock().requests.get_mut(idx) {
            entry.abandoned_by_client = true;
        }
        self.changed.send_modify(|n| *n += 1);
    }
}
