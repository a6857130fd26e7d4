//! [`FakeAnthropic`]: an actix-web server on `127.0.0.1` (routes in `routes.rs`), the state
//! the script's steps are used up in, and the request log.

use std::io;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpServer};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::request::{MessagesCall, MessagesView, RecordedRequest};
use crate::routes::routes;
use crate::script::{Reply, Script};

/// Largest request body accepted (images make bodies big).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

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

    /// Numbers a model call, picks the step that answers it (using it up) and records it.
    pub(crate) fn pick(
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

    pub(crate) fn mark_abandoned(&self, idx: usize) {
        if let Some(entry) = self.lock().requests.get_mut(idx) {
            entry.abandoned_by_client = true;
        }
        self.changed.send_modify(|n| *n += 1);
    }
}
