//! The test harness: a real byre server on a loopback port (port 0) with a temp data dir,
//! temp git repositories made from `fixtures/repos/`, an HTTP client whose helpers are named
//! for operationIds and validate every JSON body against `schema/byre.openapi.yaml`, and an
//! SSE reader. Logs stay silent unless `TEST_LOG=1`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Once;
use std::time::Duration;

use byre::config::{AuthMode, Config};
use byre::startup::Running;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tempfile::TempDir;

use crate::schema::Contract;

/// How long a test waits for an expected event before failing.
pub const WAIT: Duration = Duration::from_secs(30);

fn init_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("TEST_LOG").is_some() {
            let filter = tracing_subscriber::EnvFilter::try_from_env("BYRE_LOG")
                .unwrap_or_else(|_| "debug".into());
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .init();
        }
    });
}

/// Tokens of the users in token-mode servers.
pub const TOKENS: [(&str, &str); 2] = [
    ("ada-token-0123456789abcdef", "ada"),
    ("bob-token-0123456789abcdef", "bob"),
];

/// A running server.
pub struct TestServer {
    /// Base URL.
    pub url: String,
    /// The data dir (kept so a test can restart on it).
    pub data: TempDir,
    running: Option<Running>,
}

/// Local mode (no tokens) with every request made as `ada`.
pub fn local_ada() -> AuthMode {
    AuthMode::Local {
        login: "ada".into(),
    }
}

impl TestServer {
    /// A server with one local user `ada`.
    pub async fn spawn() -> TestServer {
        Self::spawn_on(TempDir::new().expect("temp dir"), local_ada()).await
    }

    /// A server with bearer tokens for `ada` and `bob` ([`TOKENS`]).
    pub async fn spawn_team() -> TestServer {
        let tokens: HashMap<String, String> = TOKENS
            .iter()
            .map(|(t, l)| (t.to_string(), l.to_string()))
            .collect();
        Self::spawn_on(
            TempDir::new().expect("temp dir"),
            AuthMode::Token { tokens },
        )
        .await
    }

    /// A server with one local user `ada` whose stream buffer (`--stream-buffer`) holds
    /// `bytes`.
    pub async fn spawn_with_stream_buffer(bytes: usize) -> TestServer {
        Self::spawn_configured(TempDir::new().expect("temp dir"), local_ada(), |c| {
            c.stream_buffer_bytes = bytes
        })
        .await
    }

    /// A server on an existing data dir.
    pub async fn spawn_on(data: TempDir, auth: AuthMode) -> TestServer {
        Self::spawn_configured(data, auth, |_| {}).await
    }

    /// A server on an existing data dir, with its config adjusted by `configure`.
    pub async fn spawn_configured(
        data: TempDir,
        auth: AuthMode,
        configure: impl FnOnce(&mut Config),
    ) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        Self::spawn_listening(listener, data, auth, configure).await
    }

    /// A server on `listener` (e.g. the address of a server just stopped, so a page's
    /// `EventSource` reconnects to it), on an existing data dir.
    pub async fn spawn_listening(
        listener: TcpListener,
        data: TempDir,
        auth: AuthMode,
        configure: impl FnOnce(&mut Config),
    ) -> TestServer {
        init_logs();
        ensure_bubblewrap();
        let mut config = Config::new(data.path().to_owned(), auth);
        config.heartbeat = Duration::from_millis(500);
        // Agents start the real binary as their MCP server, not this test binary.
        config.byre_bin = Some(crate::process::byre_bin().into());
        // The fixture CodeBolt agents are an agents directory (`serve --codebolt-agents`): a
        // `codebolt:` model names only an agent there or in its task's worktree.
        config.codebolt_agents =
            vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt")];
        configure(&mut config);
        let running = byre::startup::run(listener, config)
            .await
            .expect("server starts");
        TestServer {
            url: running.url(),
            data,
            running: Some(running),
        }
    }

    /// Submits a command straight to the server's writer (what no HTTP operation carries, such
    /// as an agent tool's command); panics when it is refused.
    pub async fn submit(&self, cmd: byre_projections::Command) -> byre_log::Ack {
        let running = self.running.as_ref().expect("a running server");
        running
            .writer()
            .submit(cmd, None)
            .await
            .expect("command accepted")
    }

    /// Stops the server gracefully and gives back its data dir.
    pub async fn stop(mut self) -> TempDir {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
        self.data
    }

    /// A client acting as the local user (or, on a team server, with no token).
    pub fn api(&self) -> Api {
        Api {
            base: self.url.clone(),
            client: client(),
            token: None,
            headers: Vec::new(),
        }
    }

    /// A client acting as `login` on a team server.
    pub fn api_as(&self, login: &str) -> Api {
        let token = TOKENS
            .iter()
            .find(|(_, l)| *l == login)
            .map(|(t, _)| t.to_string())
            .expect("a known login");
        Api {
            base: self.url.clone(),
            client: client(),
            token: Some(token),
            headers: Vec::new(),
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// A response: status, headers and the body (JSON when the body was JSON, else a string).
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body as JSON, or `Value::String` of the text for non-JSON bodies.
    pub body: Value,
    /// Raw bytes.
    pub bytes: Vec<u8>,
}

impl Resp {
    /// The `message` of an error body.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }
}

/// A client for one caller. Every call names its operationId; the method and path come from
/// the contract, and a JSON response is validated against the contract's schema for that
/// operation and status (an error body too).
#[derive(Clone)]
pub struct Api {
    /// Base URL.
    pub base: String,
    client: reqwest::Client,
    token: Option<String>,
    headers: Vec<(String, String)>,
}

impl Api {
    /// A client of a server at `url` (e.g. a `byre serve` child), as its local user.
    pub fn for_url(url: &str) -> Api {
        Api {
            base: url.to_owned(),
            client: client(),
            token: None,
            headers: Vec::new(),
        }
    }

    /// Adds a header to every request of this client.
    pub fn with_header(mut self, name: &str, value: &str) -> Api {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The URL of `operation_id` with its path parameters filled in order.
    pub fn url(&self, operation_id: &str, params: &[&str]) -> (reqwest::Method, String) {
        let (method, template) = Contract::get()
            .route(operation_id)
            .unwrap_or_else(|| panic!("no operation {operation_id}"));
        let mut path = String::new();
        let mut rest = template.as_str();
        let mut params = params.iter();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').expect("closing brace") + open;
            path.push_str(&rest[..open]);
            let p = params
                .next()
                .unwrap_or_else(|| panic!("{operation_id} needs more path parameters"));
            path.push_str(&encode_segment(p));
            rest = &rest[close + 1..];
        }
        path.push_str(rest);
        (
            method.parse().expect("method"),
            format!("{}{}", self.base, path),
        )
    }

    /// GETs a path outside the contract (`/metrics`): its status, Content-Type and body text.
    pub async fn get_path(&self, path: &str) -> (u16, String, String) {
        let resp = self
            .request(reqwest::Method::GET, &format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        (status, ct, resp.text().await.expect("body"))
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        for (n, v) in &self.headers {
            req = req.header(n, v);
        }
        req
    }

    /// Calls an operation with an optional JSON body and query.
    pub async fn call(
        &self,
        operation_id: &str,
        params: &[&str],
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Resp {
        let (method, url) = self.url(operation_id, params);
        let changes_state = !matches!(
            method,
            reqwest::Method::GET | reqwest::Method::HEAD | reqwest::Method::OPTIONS
        );
        let mut req = self.request(method, &url).query(query);
        match body {
            Some(b) => req = req.json(&b),
            // A non-browser client says so on a request without a JSON body (`http::edge`),
            // unless it sends the header already (a page's sign-in key).
            None if changes_state && !self.headers.iter().any(|(n, _)| n == "X-Byre-CSRF") => {
                req = req.header("X-Byre-CSRF", "1")
            }
            None => {}
        }
        self.finish(operation_id, req).await
    }

    /// Calls an operation with a raw body of the given content type.
    pub async fn call_raw(
        &self,
        operation_id: &str,
        params: &[&str],
        content_type: &str,
        body: Vec<u8>,
    ) -> Resp {
        let (method, url) = self.url(operation_id, params);
        let req = self
            .request(method, &url)
            .header("Content-Type", content_type)
            .body(body);
        self.finish(operation_id, req).await
    }

    async fn finish(&self, operation_id: &str, req: reqwest::RequestBuilder) -> Resp {
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{operation_id}: request failed: {e}"));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let is_json = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("application/json"));
        let bytes = resp.bytes().await.expect("body").to_vec();
        let body = if is_json {
            let v: Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{operation_id}: invalid JSON: {e}"));
            // Generic protocol errors the contract does not list per operation (a malformed
            // query or body is 400 everywhere; 401 without identity; 403 a cookie request without
            // the CSRF header or a cross-site one, README "Authentication"; 405 another method; 413
            // a body over its limit; 501 not built yet; 503 writer stopped): their bodies are
            // still the contract's Error.
            let listed = Contract::get()
                .check_response(operation_id, status, &serde_json::json!({"message": ""}))
                .is_ok();
            if !listed && matches!(status, 400 | 401 | 403 | 405 | 413 | 501 | 503) {
                Contract::get()
                    .check_schema("Error", &v)
                    .unwrap_or_else(|e| panic!("{operation_id} {status}: {e}\n{v}"));
            } else {
                Contract::get()
                    .check_response(operation_id, status, &v)
                    .unwrap_or_else(|e| {
                        panic!(
                            "{operation_id} {status} does not match the contract: {e}\nbody: {v}"
                        )
                    });
            }
            v
        } else {
            assert!(
                status < 400,
                "{operation_id}: error {status} without a JSON body: {}",
                String::from_utf8_lossy(&bytes)
            );
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        };
        Resp {
            status,
            headers,
            body,
            bytes,
        }
    }

    // ---- named helpers (operationIds) ----

    /// `sendMessage` of `text` to session `session_id`, expecting 202.
    pub async fn send_message(&self, session_id: &str, text: &str) -> Resp {
        let r = self
            .call(
                "sendMessage",
                &[session_id],
                &[],
                Some(serde_json::json!({ "text": text })),
            )
            .await;
        assert_eq!(r.status, 202, "sendMessage: {:?}", r.body);
        r
    }

    /// `updateDefaultModel` to `model`.
    pub async fn update_default_model(&self, model: &str) -> Resp {
        self.call(
            "updateDefaultModel",
            &[],
            &[],
            Some(serde_json::json!({ "model": model })),
        )
        .await
    }

    /// `getMe`.
    pub async fn get_me(&self) -> Resp {
        self.call("getMe", &[], &[], None).await
    }

    /// `createProject`, expecting 201; returns the project.
    pub async fn create_project(&self, name: &str, repo: &Path) -> Value {
        let r = self
            .call(
                "createProject",
                &[],
                &[],
                Some(serde_json::json!({"name": name, "repo_path": repo})),
            )
            .await;
        assert_eq!(r.status, 201, "createProject: {:?}", r.body);
        r.body
    }

    /// A project `basic` on a fresh copy of the `basic` fixture repository (see
    /// [`make_repo`]); (the repository's directory, to keep alive; the project's id).
    pub async fn basic_project(&self) -> (TempDir, String) {
        let repo = make_repo("basic");
        let id = self.create_project("basic", repo.path()).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        (repo, id)
    }

    /// `createTask` without prompt, expecting 201; returns the task.
    pub async fn create_task(&self, project_id: &str, title: &str) -> Value {
        self.create_task_with(project_id, serde_json::json!({"title": title}))
            .await
    }

    /// `createTask` with `body` (title, and prompt, model, images as the test needs),
    /// expecting 201; returns the task.
    pub async fn create_task_with(&self, project_id: &str, body: Value) -> Value {
        let r = self
            .call("createTask", &[project_id], &[], Some(body))
            .await;
        assert_eq!(r.status, 201, "createTask: {:?}", r.body);
        r.body
    }

    /// `listSessions` of task `task_id`, expecting 200; its first (oldest) session.
    pub async fn first_session(&self, task_id: &str) -> Value {
        let r = self.call("listSessions", &[task_id], &[], None).await;
        assert_eq!(r.status, 200, "listSessions: {:?}", r.body);
        r.body[0].clone()
    }

    /// The id of task `task_id`'s first session (see [`Api::first_session`]).
    pub async fn first_session_id(&self, task_id: &str) -> String {
        self.first_session(task_id).await["id"]
            .as_str()
            .expect("the task has a session")
            .to_owned()
    }

    /// Opens `/api/events` with the query and optional `Last-Event-ID`.
    pub async fn events(&self, query: &[(&str, &str)], last_event_id: Option<u64>) -> Sse {
        let (_, url) = self.url("streamEvents", &[]);
        let mut req = self.request(reqwest::Method::GET, &url).query(query);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let client = reqwest::Client::builder().build().expect("client");
        let _ = client;
        let resp = req
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .expect("event stream");
        assert_eq!(resp.status().as_u16(), 200, "streamEvents status");
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        assert_eq!(
            resp.headers()
                .get("x-accel-buffering")
                .and_then(|v| v.to_str().ok()),
            Some("no")
        );
        Sse {
            stream: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
            comments: 0,
            ephemeral: Vec::new(),
        }
    }
}

fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// `id:` (the seq).
    pub id: Option<u64>,
    /// `data:` parsed as JSON.
    pub data: Value,
}

/// An open event stream.
pub struct Sse {
    stream: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: Vec<u8>,
    /// Comment lines seen (heartbeats).
    pub comments: usize,
    /// Live-only records seen (frames with no `id:`), such as `agent.delta`.
    pub ephemeral: Vec<Value>,
}

impl Sse {
    /// The next event (comments skipped), or None after `timeout` or at the end of the stream.
    /// Every event's data is validated as the contract's `Event`.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(pos) = find_blank_line(&self.buf) {
                let frame: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let text = String::from_utf8(frame).expect("UTF-8 frame");
                let mut id = None;
                let mut event_name = None;
                let mut data = String::new();
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.parse().expect("numeric id"));
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event_name = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    } else if line.starts_with(':') {
                        self.comments += 1;
                    }
                }
                if data.is_empty() {
                    continue;
                }
                if let Some(name) = event_name {
                    // A live-only record (a text delta): a named event, not an Event.
                    assert!(id.is_none(), "{name} frames carry no id");
                    self.ephemeral
                        .push(serde_json::from_str(&data).expect("ephemeral JSON"));
                    continue;
                }
                let data: Value = serde_json::from_str(&data).expect("event JSON");
                Contract::get()
                    .check_schema("Event", &data)
                    .unwrap_or_else(|e| panic!("event does not match the contract: {e}\n{data}"));
                assert_eq!(id, data["seq"].as_u64(), "id is the seq");
                return Some(SseEvent { id, data });
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(Some(Err(e))) => panic!("event stream failed: {e}"),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Events until one satisfies `pred` (returned with all before it), or panics after WAIT.
    pub async fn until(&mut self, what: &str, pred: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        loop {
            let e = self.next(WAIT).await.unwrap_or_else(|| {
                panic!(
                    "no {what} within {WAIT:?}; saw {:?}",
                    seen.iter()
                        .map(|e: &SseEvent| e.data["kind"].clone())
                        .collect::<Vec<_>>()
                )
            });
            let done = pred(&e);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }

    /// Waits until a heartbeat comment arrives (or panics after WAIT).
    pub async fn heartbeat(&mut self) {
        let before = self.comments;
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.comments <= before + 1 {
            // `: connected` counts once; wait for a later comment.
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => {
                    self.comments += String::from_utf8_lossy(&chunk)
                        .lines()
                        .filter(|l| l.starts_with(':'))
                        .count();
                }
                _ => panic!("no heartbeat"),
            }
        }
    }
}

fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n")
}

/// A git repository made from `fixtures/repos/{name}`, on branch `main`, one commit.
pub fn make_repo(name: &str) -> TempDir {
    let dir = TempDir::new().expect("temp dir");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/repos")
        .join(name);
    copy_dir(&src, dir.path());
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dir.path(), &opts).expect("git init");
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("find tree");
    let sig = git2::Signature::now("Fixture", "fixture@example.com").expect("signature");
    repo.commit(Some("HEAD"), &sig, &sig, "Initial commit", &tree, &[])
        .expect("commit");
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("fixture dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The canonical path string of a directory (what byre reports as repo_path).
pub fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .expect("canonical")
        .to_string_lossy()
        .into_owned()
}

/// The environment that points Claude Code at the fake Anthropic API at `url`.
pub fn fake_claude_env(url: &str) -> Vec<(String, String)> {
    vec![
        ("ANTHROPIC_BASE_URL".into(), url.to_owned()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
    ]
}

/// The status of a WebSocket handshake to `base` (`http://host:port`) + `path` with
/// `headers`: 101 when it opened, else what byre answered.
pub async fn handshake_status(base: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
    let url = format!("{}{path}", base.replacen("http://", "ws://", 1));
    let mut req = url.clone().into_client_request().expect("ws request");
    for (n, v) in headers {
        req.headers_mut().insert(
            HeaderName::from_bytes(n.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("{url}: the handshake failed without an answer: {e}"),
    }
}

/// The events of `sse` up to and including the next of kind `kind`; panics after `timeout`,
/// naming the kinds seen.
pub async fn until_kind(sse: &mut Sse, kind: &str, timeout: Duration) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        let e = sse
            .next(timeout)
            .await
            .unwrap_or_else(|| panic!("no {kind}; saw {:?}", kinds(&seen)));
        let done = e.data["kind"] == kind;
        seen.push(e);
        if done {
            return seen;
        }
    }
}

/// The `kind` of each event in a JSON array of events (a `listTaskEvents` body), in order.
pub fn event_kinds(events: &Value) -> Vec<&str> {
    events
        .as_array()
        .expect("an array of events")
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

/// The kinds of `events`, in order.
pub fn kinds(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.data["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The first event of kind `kind`; panics naming the kinds there are.
pub fn find<'a>(events: &'a [SseEvent], kind: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e.data["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(events)))
        .data
}

/// Calls byre's agent tool `tool` as session `session_id`'s `byre mcp` forwards it (the
/// internal route, the session's token); the answer, `{is_error, text}`.
pub async fn agent_tool(server: &TestServer, session_id: &str, tool: &str, args: Value) -> Value {
    let host =
        byre_agents::mcp_launch::McpHost::open(server.data.path(), String::new(), "byre".into())
            .expect("the server's MCP secret");
    let r = reqwest::Client::new()
        .post(format!("{}/internal/mcp/tools/{tool}", server.url))
        .bearer_auth(host.token(session_id))
        .json(&args)
        .send()
        .await
        .expect("byre answers");
    assert_eq!(r.status(), 200);
    r.json().await.expect("JSON")
}

/// `git -C dir args…` (argv, no shell) with a set-up identity for any commit it makes; its
/// stdout without the trailing newline. Panics, with git's stderr, when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Setup",
            "-c",
            "user.email=setup@example.com",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// `git -C dir args…`: (success, trimmed stdout).
pub fn git_out(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
    )
}

/// Every event seen so far on a stream, and the stream for more.
pub struct Seen {
    /// The stream.
    pub sse: Sse,
    /// What it sent so far.
    pub events: Vec<SseEvent>,
    wait: Duration,
}

impl Seen {
    /// Follows `sse`, waiting at most `wait` for each event.
    pub fn new(sse: Sse, wait: Duration) -> Seen {
        Seen {
            sse,
            events: Vec::new(),
            wait,
        }
    }

    /// The first event (seen already, or next on the stream) whose data satisfies `pred`;
    /// panics when none comes within the wait.
    pub async fn first(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(e) = self.events.iter().find(|e| pred(&e.data)) {
            return e.data.clone();
        }
        loop {
            let e = self
                .sse
                .next(self.wait)
                .await
                .unwrap_or_else(|| panic!("no {what}; saw {:?}", kinds(&self.events)));
            let hit = pred(&e.data);
            self.events.push(e);
            if hit {
                return self.events.last().unwrap().data.clone();
            }
        }
    }

    /// The first event of `kind` for task `task_id`.
    pub async fn of_task(&mut self, kind: &str, task_id: &str) -> Value {
        self.first(&format!("{kind} of {task_id}"), |d| {
            d["kind"] == kind && d["task_id"] == task_id
        })
        .await
    }
}

/// The pid, as the host sees it, of the process whose pid in its own (sandbox) pid namespace
/// is `inner` and whose environment holds `var` with a value starting with `value_prefix`: a
/// sandboxed shell's `$$` or `$!`, or a pid a sandboxed program wrote down, is a pid of its
/// namespace (`NSpid` in `/proc/<pid>/status`: the host's first, the innermost last; one
/// entry, the same pid, for an unconfined process), and whose command line holds `cmdline`
/// (each sandbox numbers its processes from 1, so two sandboxes of one session both have a
/// pid 2). `None` when no such process runs.
pub fn host_pid(var: &str, value_prefix: &str, inner: u32, cmdline: &str) -> Option<u32> {
    let wanted = format!("{var}={value_prefix}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
            let innermost: u32 = nspid.split_whitespace().last()?.parse().ok()?;
            if innermost != inner {
                return None;
            }
            let args = std::fs::read(entry.path().join("cmdline")).ok()?;
            if !String::from_utf8_lossy(&args).contains(cmdline) {
                return None;
            }
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|kv| kv.starts_with(wanted.as_bytes()))
                .then_some(pid)
        })
}

/// The real Claude Code and Codex CLIs (installed on first use) and the agent environment that
/// points them at the fakes `claude` and `codex`: (claude, codex, environment).
pub async fn real_clis_on(
    claude: &byre_fake_models::FakeAnthropic,
    codex: &byre_fake_models::FakeOpenAi,
) -> (PathBuf, PathBuf, Vec<(String, String)>) {
    let claude_bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install Claude Code");
    let codex_bin = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
        .await
        .expect("install Codex");
    let env = vec![
        ("ANTHROPIC_BASE_URL".to_owned(), claude.url.clone()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ("OPENAI_BASE_URL".into(), codex.base_url()),
        ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
        ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
        ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
    ];
    (claude_bin, codex_bin, env)
}

/// A token-mode server (the users of [`TOKENS`]) whose agents are the real Claude Code and
/// Codex CLIs pointed at `claude` and `codex`, with `more_env` added to their environment;
/// `configure` sets the rest. Its data dir is not under /tmp: there Codex will not create its
/// helper binaries.
pub async fn token_server_on_real_clis(
    claude: &byre_fake_models::FakeAnthropic,
    codex: &byre_fake_models::FakeOpenAi,
    more_env: Vec<(String, String)>,
    configure: impl FnOnce(&mut Config),
) -> TestServer {
    let (claude_bin, codex_bin, mut env) = real_clis_on(claude, codex).await;
    env.extend(more_env);
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    TestServer::spawn_configured(data, AuthMode::Token { tokens }, move |c| {
        c.claude_bin = Some(claude_bin);
        c.codex_bin = Some(codex_bin);
        c.agent_env = env;
        configure(c);
    })
    .await
}

/// The system's Python (`/usr/bin/python3`): a toolbox server's program must be one its
/// sandbox shows (the system directories, node's install, the task's worktree), which a
/// Python of the user's own (pyenv's, under `~`) is not.
pub fn system_python() -> String {
    let python = Path::new("/usr/bin/python3");
    assert!(python.exists(), "the tests need /usr/bin/python3");
    python.display().to_string()
}

/// Copies `from` into the repository at `repo` as `name` and commits it on its checked-out
/// branch (so the worktrees of tasks created after hold it).
pub fn commit_file(repo: &Path, name: &str, from: &Path) {
    std::fs::copy(from, repo.join(name)).expect("copy into the repository");
    let repo = git2::Repository::open(repo).expect("the repository opens");
    let mut index = repo.index().expect("index");
    index.add_path(Path::new(name)).expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("find tree");
    let parent = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = git2::Signature::now("Fixture", "fixture@example.com").expect("signature");
    repo.commit(
        Some("HEAD"),
        &sig,
        &sig,
        &format!("Add {name}"),
        &tree,
        &[&parent],
    )
    .expect("commit");
}

/// The first program of `names` found on `PATH`.
pub fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

/// Runs `apt-get` with `args`, non-interactive, its output discarded.
pub fn apt_get(args: &[&str]) -> Result<(), String> {
    let status = std::process::Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run apt-get: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("apt-get {args:?} failed: {status}"))
    }
}

/// Every test server runs its agents in the sandbox (the default), so the suite needs
/// bubblewrap: installs Debian's `bubblewrap` with apt-get when `bwrap` is missing and the
/// tests run as root, the way the browser tests install Chromium.
/// # Panics
/// When `bwrap` is missing and cannot be installed, with how to get it.
fn ensure_bubblewrap() {
    static FOUND: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            if on_path(&["bwrap"]).is_some() {
                return Ok(());
            }
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err(
                    "the tests run every agent in the sandbox and need bubblewrap: \
                            install it with `apt-get install bubblewrap`"
                        .into(),
                );
            }
            eprintln!("tests: installing bubblewrap with apt-get");
            apt_get(&["update", "-qq"])?;
            apt_get(&["install", "-y", "-qq", "bubblewrap"])?;
            on_path(&["bwrap"])
                .map(|_| ())
                .ok_or_else(|| "apt-get installed bubblewrap, yet no bwrap on PATH".into())
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}
