//! A `codex app-server` child for tests: its CODEX_HOME (`config.toml` pointing at a
//! [`FakeOpenAi`]), its environment, and JSON-RPC over its stdio (codex PROTOCOL.md §2–§4):
//! one JSON object per line; a line with `id` and `method` is a server request, `method` only
//! a notification, `id` with `result`/`error` the answer to one of ours.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use byre_fake_models::{codex_bin, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// How long a test waits for one expected line or request before failing.
pub const WAIT: Duration = Duration::from_secs(60);
/// The env var named by the provider's `env_key`; its value goes out as `Authorization: Bearer`.
const KEY_VAR: &str = "BYRE_FAKE_OPENAI_KEY";
/// The API key the app-server gets in [`KEY_VAR`].
pub const KEY: &str = "sk-byre-fake-key";

/// The provider's retry budgets (codex PROTOCOL.md §11), as measured with 0.171.0:
/// - `request_max_retries` (default 4): a 5xx is retried silently (no notification), with a
///   short backoff (the 2nd call ~0.2 s later). It does not apply to a 429.
/// - `stream_max_retries` (default 5): a 429 (after its `retry-after`), a cut or failed
///   stream, and a 5xx once the request retries are spent; each retry is announced by an
///   `error` notification with `willRetry: true` and the message `Reconnecting... n/N`.
///
/// So with the defaults an endless 429 (`retry-after: 1`) fails the turn after 6 calls and
/// about 5 s, and an endless 500 after 30 calls ((4 + 1) × (5 + 1)) and about 25 s.
#[derive(Clone, Copy)]
pub struct Retries {
    /// `request_max_retries`.
    pub request: u32,
    /// `stream_max_retries`.
    pub stream: u32,
}

/// Both budgets 0: every error fails the turn at once.
pub const NO_RETRIES: Retries = Retries {
    request: 0,
    stream: 0,
};

/// `CODEX_HOME/config.toml`: the fake as the only model provider, nothing that calls home
/// (update check, analytics, feedback, plugins off; plain HTTP+SSE, no websockets), and
/// commands that run without asking (`approval_policy = "never"`, no sandbox).
fn config_toml(base_url: &str, retries: Retries) -> String {
    format!(
        r#"model = "gpt-5.5"
model_provider = "byre_fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false

[model_providers.byre_fake]
name = "byre fake"
base_url = "{base_url}"
env_key = "{KEY_VAR}"
wire_api = "responses"
request_max_retries = {request}
stream_max_retries = {stream}
supports_websockets = false
"#,
        request = retries.request,
        stream = retries.stream,
    )
}

/// One `codex app-server` process with its own HOME, CODEX_HOME and cwd in a temp dir.
pub struct Codex {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far, parsed.
    pub lines: Vec<Value>,
    /// Both directions in order, `{"dir": ">"|"<", "msg"}` as vendors/codex/README.md's
    /// transcripts; written to `$BYRE_CODEX_TRANSCRIPTS/<name>.jsonl` by `finish` if set.
    transcript: Vec<Value>,
    dir: TempDir,
    next_id: u64,
}

impl Codex {
    /// Spawns `codex app-server` (argv only, no shell) with a clean environment, in a new temp
    /// dir under `target/tmp` (not `/tmp`: there Codex refuses to create its helper
    /// binaries and warns on stderr; byre's CODEX_HOME is not in `/tmp` either). The work dir
    /// is a git repository of its own, as byre's worktrees are: else Codex would take the
    /// enclosing byre checkout as the project (its diff paths, its AGENTS.md).
    pub fn spawn(fake: &FakeOpenAi, retries: Retries) -> Codex {
        let dir = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        for sub in ["home", "codex-home", "work"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        let git_init = std::process::Command::new("git")
            .args(["init", "--quiet"])
            .arg(dir.path().join("work"))
            .status()
            .expect("run git init");
        assert!(git_init.success(), "git init: {git_init}");
        std::fs::write(
            dir.path().join("codex-home/config.toml"),
            config_toml(&fake.base_url(), retries),
        )
        .expect("config.toml");
        Codex::spawn_in(dir)
    }

    /// Spawns `codex app-server` in a dir made by [`Codex::spawn`] (a restart: same
    /// CODEX_HOME, so its threads can be resumed).
    pub fn spawn_in(dir: TempDir) -> Codex {
        let stderr = std::fs::File::create(dir.path().join("stderr.txt")).expect("stderr file");
        // The first call installs from npm (seconds): off the async threads' duty meanwhile.
        let bin = tokio::task::block_in_place(codex_bin);
        let mut command = Command::new(bin);
        command
            .arg("app-server")
            .current_dir(dir.path().join("work"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path().join("home"))
            .env("CODEX_HOME", dir.path().join("codex-home"))
            .env(KEY_VAR, KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn codex app-server");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Codex {
            child,
            stdin,
            stdout,
            lines: Vec::new(),
            transcript: Vec::new(),
            dir,
            next_id: 0,
        }
    }

    pub fn cwd(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes one JSON line to stdin.
    pub async fn send(&mut self, line: Value) {
        self.transcript.push(json!({"dir": ">", "msg": line}));
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Sends a request with the next id; returns the id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Reads stdout until a line satisfies `wanted`; returns it. A server→client request
    /// (an approval) fails the test: with `approval_policy = "never"` none should come.
    pub async fn read_until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = match timeout(WAIT, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => panic!("stdout closed before {what}; {}", self.report()),
                Ok(Err(error)) => panic!("reading stdout: {error}"),
                Err(_) => panic!("no {what} within {WAIT:?}; {}", self.report()),
            };
            let value: Value =
                serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
            self.transcript.push(json!({"dir": "<", "msg": value}));
            self.lines.push(value.clone());
            if value.get("id").is_some() && value.get("method").is_some() {
                panic!("unexpected server request {value}; {}", self.report());
            }
            if wanted(&value) {
                return value;
            }
        }
    }

    /// Sends a request and reads until its response (`result` or `error`), returned whole.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        let is_response = move |line: &Value| line["id"] == id && line.get("method").is_none();
        self.read_until(&format!("the response to {method}"), is_response)
            .await
    }

    /// As [`Codex::call`], expecting a `result`.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {response}"))
    }

    /// `initialize` + `initialized` (PROTOCOL.md §4).
    pub async fn initialize(&mut self) {
        let init = self
            .request(
                "initialize",
                json!({"clientInfo": {"name": "byre", "title": null, "version": "0.1.0"},
                       "capabilities": {"experimentalApi": false, "requestAttestation": false}}),
            )
            .await;
        assert!(
            init["userAgent"]
                .as_str()
                .unwrap_or_default()
                .contains("0.171.0"),
            "{init}"
        );
        self.send(json!({"method": "initialized"})).await;
    }

    /// [`Codex::initialize`], then `thread/start` in the work dir; returns the thread id.
    pub async fn start_thread(&mut self) -> String {
        self.initialize().await;
        let cwd = self.cwd().to_string_lossy().into_owned();
        let started = self
            .request(
                "thread/start",
                json!({"cwd": cwd, "approvalPolicy": "never", "sandbox": "danger-full-access"}),
            )
            .await;
        assert_eq!(
            (started["model"].as_str(), started["modelProvider"].as_str()),
            (Some("gpt-5.5"), Some("byre_fake")),
            "{started}"
        );
        assert_eq!(started["sandbox"]["type"], "dangerFullAccess", "{started}");
        started["thread"]["id"]
            .as_str()
            .expect("thread.id")
            .to_owned()
    }

    /// `turn/start` with `input` (UserInput items); returns the turn id.
    pub async fn start_turn(&mut self, thread_id: &str, input: Value) -> String {
        let result = self
            .request("turn/start", json!({"threadId": thread_id, "input": input}))
            .await;
        assert_eq!(result["turn"]["status"], "inProgress", "{result}");
        result["turn"]["id"].as_str().expect("turn.id").to_owned()
    }

    /// `turn/start` with one text input.
    pub async fn say(&mut self, thread_id: &str, text: &str) -> String {
        self.start_turn(
            thread_id,
            json!([{"type": "text", "text": text, "text_elements": []}]),
        )
        .await
    }

    /// Reads until `turn/completed` for `turn_id`; returns its `turn`.
    pub async fn turn_completed(&mut self, turn_id: &str) -> Value {
        let done = |line: &Value| {
            line["method"] == "turn/completed" && line["params"]["turn"]["id"] == turn_id
        };
        self.read_until("turn/completed", done).await["params"]["turn"].clone()
    }

    /// The params of every notification `method` read so far for `turn_id`.
    pub fn notifications(&self, method: &str, turn_id: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|line| line["method"] == method && line["params"]["turnId"] == turn_id)
            .map(|line| &line["params"])
            .collect()
    }

    /// The final items of `turn_id` of this `type` (from `item/completed`).
    pub fn items(&self, turn_id: &str, kind: &str) -> Vec<&Value> {
        self.notifications("item/completed", turn_id)
            .into_iter()
            .map(|params| &params["item"])
            .filter(|item| item["type"] == kind)
            .collect()
    }

    /// Closes stdin and waits for the exit (PROTOCOL.md §2: exit 0 within ~0.1 s); returns
    /// the exit status and the temp dir (for [`Codex::spawn_in`]). With
    /// `BYRE_CODEX_TRANSCRIPTS=<dir>` set, writes the transcript to `<dir>/<name>.jsonl`.
    pub async fn finish(mut self, name: &str) -> (ExitStatus, TempDir) {
        drop(self.stdin.take());
        while let Ok(Ok(Some(line))) = timeout(WAIT, self.stdout.next_line()).await {
            let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
            self.transcript.push(json!({"dir": "<", "msg": value}));
            self.lines.push(value);
        }
        if let Some(dir) = std::env::var_os("BYRE_CODEX_TRANSCRIPTS") {
            let text: String = self
                .transcript
                .iter()
                .map(|line| format!("{line}\n"))
                .collect();
            std::fs::write(Path::new(&dir).join(format!("{name}.jsonl")), text)
                .expect("transcript");
        }
        let status = timeout(WAIT, self.child.wait())
            .await
            .expect("app-server exits after stdin EOF")
            .expect("wait");
        (status, self.dir)
    }

    pub fn report(&self) -> String {
        let stderr =
            std::fs::read_to_string(self.dir.path().join("stderr.txt")).unwrap_or_default();
        format!("stdout so far: {:#?}\nstderr: {stderr}", self.lines)
    }
}
