//! The user's machine as a client (issue 17 part 2): the real `byre client` process
//! connected to the test server, and a real Claude Code agent (fake model script
//! `fixtures/fake-model/x_client.json`) using it through byre's MCP tools: it runs a command,
//! uploads a worktree file and downloads one back; a second client of the same host replaces
//! the first; a client killed mid-request gives the agent a tool error at once; a machine that
//! answers a download with a `../` archive is refused; a machine serves only tasks no one but
//! its owner has written to (another user's message in the task or its family gets a tool
//! error, never a machine) and runs commands without the client's own environment. Plus the operations' refusals.
//!
//! The agent tests run in parallel, with each other and with the rest. They used to take turns:
//! under load two at once failed or hung. One cause was fixed (Claude Code gave up on byre's
//! MCP server after 5 s; byre sets `MCP_CONNECT_TIMEOUT_MS`), and every wait is bounded, so a
//! stuck test panics saying where; the `../` archive test's old hang was never explained. In
//! parallel, 20 runs in a row passed (issue 30: 10 of `client:: --test-threads=3`, 10 of
//! `client:: terminal:: --test-threads=8`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use byre_fake_models::FakeAnthropic;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::{
    agent_tool, fake_claude_env, kinds, local_ada, Api, Sse, SseEvent, TestServer,
};
use crate::process::byre_bin;

/// How long a test waits for the real CLI's turns, the client's lines and its exit.
const WAIT: Duration = Duration::from_secs(120);

/// A running `byre client`, its stdout lines on a channel; killed when dropped.
struct ClientProcess {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl ClientProcess {
    /// `byre client --server URL --host HOST` with `home` as its home directory.
    fn start(url: &str, host: &str, home: &Path) -> ClientProcess {
        Self::start_with(url, host, home, &[])
    }

    /// As [`ClientProcess::start`], with more arguments.
    fn start_with(url: &str, host: &str, home: &Path, more: &[&str]) -> ClientProcess {
        Self::start_env(url, host, home, more, &[])
    }

    /// As [`ClientProcess::start_with`], with more environment variables.
    fn start_env(
        url: &str,
        host: &str,
        home: &Path,
        more: &[&str],
        env: &[(&str, &str)],
    ) -> ClientProcess {
        let mut child = Command::new(byre_bin())
            .args(["client", "--server", url, "--host", host])
            .args(more)
            .env("HOME", home)
            .env("SHELL", "/bin/sh")
            .env("BYRE_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn byre client");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ClientProcess {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line (from now on) holding `needle`; panics after [`WAIT`] without one.
    async fn line(&mut self, needle: &str) -> String {
        loop {
            match tokio::time::timeout(WAIT, self.lines.recv()).await {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                _ => panic!(
                    "the client printed no {needle:?}; it printed {:?}",
                    self.seen
                ),
            }
        }
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A local server (ada) whose Claude Code talks to the fake model `x_client`, a project and
/// the event stream.
async fn bench() -> (TestServer, FakeAnthropic, Api, String, TempDir, Sse) {
    let fake = FakeAnthropic::fixture("x_client").await.expect("fake API");
    let bin: PathBuf = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = fake_claude_env(&url);
    })
    .await;
    let api = server.api();
    let (repo, project_id) = api.basic_project().await;
    let sse = api.events(&[], None).await;
    (server, fake, api, project_id, repo, sse)
}

/// Every event of task `task_id` up to its first `turn.ended`, which must come within twice
/// [`WAIT`] (however many other events come first).
async fn first_turn(sse: &mut Sse, task_id: &str) -> Vec<SseEvent> {
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let e = sse
            .next(left)
            .await
            .unwrap_or_else(|| panic!("no turn.ended; saw {:?}", kinds(&seen)));
        let end = e.data["kind"] == "turn.ended" && e.data["task_id"] == task_id;
        seen.push(e);
        if end {
            return seen;
        }
    }
}

/// The payloads of the `tool.result` events among `events`, as text.
fn tool_results(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.data["kind"] == "tool.result")
        .map(|e| e.data["payload"].to_string())
        .collect()
}

async fn start_task(api: &Api, project_id: &str, prompt: &str) -> (String, PathBuf) {
    let task = api
        .create_task_with(project_id, json!({"title": "Machine", "prompt": prompt}))
        .await;
    (
        task["id"].as_str().unwrap().to_owned(),
        PathBuf::from(task["worktree_path"].as_str().unwrap()),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_runs_a_command_on_the_users_machine_and_moves_files_both_ways() {
    let (server, _fake, api, project_id, _repo, mut sse) = bench().await;
    let home = TempDir::new().unwrap();
    let mut client = ClientProcess::start(&server.url, "laptop", home.path());
    client.line("connected to").await;
    let status = api.call("getStatus", &[], &[], None).await;
    assert!(
        status.body["clients"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["host"] == "laptop" && c["login"] == "ada"),
        "getStatus lists the machine: {}",
        status.body["clients"]
    );

    let (task_id, worktree) = start_task(&api, &project_id, "Please use my machine").await;
    let events = first_turn(&mut sse, &task_id).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 3, "bash, upload, download: {results:?}");
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    assert!(
        results[0].contains("exit code 0") && results[0].contains("BASH-RAN in"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains(home_dir.to_str().unwrap())
            || results[0].contains(home.path().to_str().unwrap()),
        "the command ran in the home directory: {}",
        results[0]
    );
    assert!(results[1].contains("Uploaded README.md"), "{}", results[1]);
    assert!(results[2].contains("Downloaded"), "{}", results[2]);
    assert_eq!(
        std::fs::read(home.path().join("uploads/README.md")).unwrap(),
        std::fs::read(worktree.join("README.md")).unwrap(),
        "the worktree file reached the machine"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("fetched/from-machine.txt")).unwrap(),
        "made on the machine\n",
        "the machine's file reached the worktree"
    );
    client.line("answered").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_client_of_the_same_host_replaces_the_first() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let home = TempDir::new().unwrap();
    let mut first = ClientProcess::start(&server.url, "laptop", home.path());
    first.line("connected to").await;
    let mut second = ClientProcess::start(&server.url, "laptop", home.path());
    second.line("connected to").await;
    first
        .line("another `byre client` for laptop took over")
        .await;
    let code = tokio::task::spawn_blocking(move || {
        let status = first.child.wait().expect("wait");
        status.code()
    })
    .await
    .unwrap();
    assert_eq!(
        code,
        Some(2),
        "the replaced client stops rather than reconnect"
    );
    let status = api.call("getStatus", &[], &[], None).await;
    let laptops: Vec<&Value> = status.body["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["host"] == "laptop")
        .collect();
    assert_eq!(laptops.len(), 1, "{}", status.body["clients"]);
    drop(second);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_killed_mid_request_gives_the_agent_a_tool_error_at_once() {
    let (server, _fake, api, project_id, _repo, mut sse) = bench().await;
    let home = TempDir::new().unwrap();
    let mut client = ClientProcess::start(&server.url, "laptop", home.path());
    client.line("connected to").await;
    let (task_id, _) = start_task(&api, &project_id, "Run a long command on my machine").await;
    client.line("LONG-STARTED").await;
    client.child.kill().expect("kill -9 the client");
    // The command's timeout is 600 s and the server waits beyond it: only the disconnect can
    // end this turn within WAIT.
    let events = first_turn(&mut sse, &task_id).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("disconnected before answering") && results[0].contains("is_error"),
        "{}",
        results[0]
    );
}

/// A gzipped tar whose one entry is named `../escaped.txt` (written header by header: the tar
/// crate's builder refuses such names).
fn escaping_archive() -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let mut header = tar::Header::new_gnu();
    let name = b"../escaped.txt";
    header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(4);
    header.set_cksum();
    builder.append(&header, &b"evil"[..]).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

/// A request to `path` of the server at `base` (local mode: no credentials needed).
/// A request as `byre client` makes it: transfers carry `application/gzip` (a type no
/// cross-site form can send, `http::edge`).
fn raw(base: &str, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("Content-Type", "application/gzip")
        .timeout(WAIT)
}

/// A machine played by the test: a raw WebSocket with `Byre-Host: host`.
async fn raw_machine(
    url: &str,
    host: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let ws = url.replacen("http://", "ws://", 1) + "/api/clients/connect";
    let mut request = ws.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Byre-Host", host.parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .expect("connectClient")
        .0
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_archive_with_dotdot_entries_is_refused_and_writes_nothing() {
    let (server, _fake, api, project_id, _repo, mut sse) = bench().await;
    let mut machine = raw_machine(&server.url, "laptop").await;
    let (task_id, worktree) = start_task(&api, &project_id, "Fetch the evil archive").await;
    let request: Value = loop {
        match tokio::time::timeout(WAIT, machine.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => break serde_json::from_str(&t).unwrap(),
            Ok(Some(Ok(_))) => continue,
            other => panic!("no ClientRequest: {other:?}"),
        }
    };
    assert_eq!(request["op"], "download", "{request}");
    assert_eq!(request["path"], "~/evil", "{request}");
    // A reply for no waiting request is ignored; the socket stays open.
    machine
        .send(Message::text(json!({"id": "no-such-request"}).to_string()))
        .await
        .unwrap();
    let transfer = request["transfer"].as_str().unwrap();
    let put = raw(
        &server.url,
        reqwest::Method::PUT,
        &format!("/api/clients/transfers/{transfer}"),
    )
    .header("content-type", "application/gzip")
    .body(escaping_archive())
    .send()
    .await
    .unwrap();
    assert_eq!(put.status().as_u16(), 400);
    let body: Value = put.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("leaves its destination"),
        "{body}"
    );
    machine
        .send(Message::text(json!({"id": request["id"]}).to_string()))
        .await
        .unwrap();
    let events = first_turn(&mut sse, &task_id).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("refused"), "{}", results[0]);
    assert!(
        !worktree.join("evil").exists(),
        "nothing at the destination"
    );
    assert!(!worktree.join("escaped.txt").exists());
    assert!(!worktree.parent().unwrap().join("escaped.txt").exists());
    // The transfer was for that request only: a second put finds nothing.
    let again = raw(
        &server.url,
        reqwest::Method::PUT,
        &format!("/api/clients/transfers/{transfer}"),
    )
    .body(escaping_archive())
    .send()
    .await
    .unwrap();
    assert_eq!(again.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_operations_refuse_what_they_cannot_serve() {
    let server = TestServer::spawn().await;
    // (what, method, path, headers, status)
    type Case<'a> = (
        &'a str,
        reqwest::Method,
        &'a str,
        Vec<(&'a str, &'a str)>,
        u16,
    );
    let cases: Vec<Case> = vec![
        (
            "connectClient without Byre-Host",
            reqwest::Method::GET,
            "/api/clients/connect",
            vec![],
            400,
        ),
        (
            "connectClient without an upgrade",
            reqwest::Method::GET,
            "/api/clients/connect",
            vec![("Byre-Host", "laptop")],
            400,
        ),
        (
            "getClientTransfer of no transfer",
            reqwest::Method::GET,
            "/api/clients/transfers/nope",
            vec![],
            404,
        ),
        (
            "putClientTransfer of no transfer",
            reqwest::Method::PUT,
            "/api/clients/transfers/nope",
            vec![],
            404,
        ),
    ];
    for (what, method, path, headers, status) in cases {
        let mut req = raw(&server.url, method, path);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{what}");
        let body: Value = resp.json().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(body["message"].is_string(), "{what}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn machine_tools_refuse_bad_calls_and_hand_on_a_hands_result_as_it_is() {
    // No agent CLI: the task's one turn fails at once and its session stays, idle.
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), |c| {
        c.claude_bin = Some("/nonexistent/claude".into());
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let (task_id, _) = start_task(&api, &project_id, "hello").await;
    first_turn(&mut sse, &task_id).await;
    let session_id = api.first_session_id(&task_id).await;

    let r = agent_tool(&server, &session_id, "bash", json!({"command": "true"})).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        r["text"]
            .as_str()
            .unwrap()
            .contains("no machine of ada is connected"),
        "{r}"
    );

    // The hands server: byre's own `byre mcp` with a token no session has, so each of its
    // tools answers a CallToolResult with isError.
    let home = TempDir::new().unwrap();
    let token_file = home.path().join("bad-token");
    std::fs::write(&token_file, "not-a-token").unwrap();
    let hands = format!(
        "{} mcp --url {} --token-file {}",
        byre_bin(),
        server.url,
        token_file.display()
    );
    let mut client =
        ClientProcess::start_with(&server.url, "laptop", home.path(), &["--hands-mcp", &hands]);
    client.line("connected to").await;

    let refusals: Vec<(&str, Value, &str)> = vec![
        (
            "read_file",
            json!({"path": "relative.txt"}),
            "absolute or starting with ~/",
        ),
        (
            "upload",
            json!({"path": "../outside", "dest": "~/x"}),
            "must not contain `..`",
        ),
        (
            "upload",
            json!({"path": "README.md", "dest": "x"}),
            "absolute or starting with ~/",
        ),
        (
            "download",
            json!({"path": "~/x", "dest": ".git/config"}),
            ".git",
        ),
        (
            "download",
            json!({"path": "~/x", "dest": ""}),
            "not its root",
        ),
        (
            "bash",
            json!({"command": "true", "timeout_seconds": 0}),
            "timeout_seconds",
        ),
        ("bash", json!({}), "`command` is required"),
        (
            "hands",
            json!({"tool": "x", "arguments": 3}),
            "`arguments` must be an object",
        ),
        ("read_file", json!({"path": "~/missing.txt"}), "missing.txt"),
    ];
    for (name, args, says) in refusals {
        let r = agent_tool(&server, &session_id, name, args.clone()).await;
        assert_eq!(r["is_error"], true, "{name} {args}: {r}");
        assert!(
            r["text"].as_str().unwrap().contains(says),
            "{name} {args}: {r}"
        );
    }

    let r = agent_tool(
        &server,
        &session_id,
        "write_file",
        json!({"path": "~/deep/note.txt", "content": "hi"}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("deep/note.txt")).unwrap(),
        "hi"
    );
    let r = agent_tool(
        &server,
        &session_id,
        "read_file",
        json!({"path": "~/deep/note.txt"}),
    )
    .await;
    assert_eq!(
        (r["is_error"].clone(), r["text"].clone()),
        (json!(false), json!("hi")),
        "{r}"
    );

    let r = agent_tool(
        &server,
        &session_id,
        "hands",
        json!({"tool": "take_snapshot", "arguments": {}}),
    )
    .await;
    assert_eq!(r["result"]["isError"], true, "the tool's own result: {r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("not a valid session token"),
        "{r}"
    );
    client.line("started the hands server").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn transfer_files_a_crashed_server_left_are_removed_at_the_next_start() {
    let data = TempDir::new().unwrap();
    let left = data.path().join("transfers");
    std::fs::create_dir_all(left.join(".tmpDIR")).unwrap();
    std::fs::write(left.join(".tmpA1b2C3"), b"half an archive").unwrap();
    std::fs::write(left.join(".tmpDIR/x"), b"x").unwrap();
    let server = TestServer::spawn_configured(data, local_ada(), |_| {}).await;
    let entries: Vec<_> = std::fs::read_dir(server.data.path().join("transfers"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(entries.is_empty(), "left: {entries:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_download_archive_announced_beyond_the_limit_is_refused_413_before_it_is_read() {
    // No agent CLI: the task's session stays idle and the test calls its tools itself.
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), |c| {
        c.claude_bin = Some("/nonexistent/claude".into());
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let (task_id, _) = start_task(&api, &project_id, "hello").await;
    first_turn(&mut sse, &task_id).await;
    let session_id = api.first_session_id(&task_id).await;
    let mut machine = raw_machine(&server.url, "laptop").await;
    let call = agent_tool(
        &server,
        &session_id,
        "download",
        json!({"path": "~/huge", "dest": "huge"}),
    );
    let answer_as_machine = async {
        let request: Value = loop {
            match tokio::time::timeout(WAIT, machine.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => break serde_json::from_str(&t).unwrap(),
                Ok(Some(Ok(_))) => continue,
                other => panic!("no ClientRequest: {other:?}"),
            }
        };
        // Headers only: a 2 GiB body is announced, none is sent.
        let addr = server.url.trim_start_matches("http://").to_owned();
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "PUT /api/clients/transfers/{} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/gzip\r\nContent-Length: 2147483648\r\n\r\n",
            request["transfer"].as_str().unwrap()
        );
        tokio::io::AsyncWriteExt::write_all(&mut tcp, head.as_bytes())
            .await
            .unwrap();
        let mut response = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = tokio::time::timeout(WAIT, tokio::io::AsyncReadExt::read(&mut tcp, &mut buf))
                .await
                .expect("byre answers without waiting for the body")
                .unwrap_or(0);
            response.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&response);
            if n == 0 || text.contains("MiB\"}") {
                break;
            }
        }
        machine
            .send(Message::text(json!({"id": request["id"]}).to_string()))
            .await
            .unwrap();
        String::from_utf8_lossy(&response).into_owned()
    };
    let (result, response) = tokio::join!(call, answer_as_machine);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(
        response.contains(r#"{"message":"transfers are limited to 1024 MiB"}"#),
        "{response}"
    );
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("transfers are limited to 1024 MiB"),
        "the agent learns why: {result}"
    );
}

/// A team server (ada and bob, [`crate::helpers::TOKENS`]) whose Claude Code talks to the fake
/// model `x_client`; ada's project and her event stream.
async fn team_bench() -> (TestServer, FakeAnthropic, Api, String, TempDir, Sse) {
    let fake = FakeAnthropic::fixture("x_client").await.expect("fake API");
    let bin: PathBuf = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let url = fake.url.clone();
    let tokens = crate::helpers::TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    let server = TestServer::spawn_configured(
        TempDir::new().unwrap(),
        byre::config::AuthMode::Token { tokens },
        move |c| {
            c.claude_bin = Some(bin);
            c.agent_env = fake_claude_env(&url);
        },
    )
    .await;
    let ada = server.api_as("ada");
    let (repo, project_id) = ada.basic_project().await;
    let sse = ada.events(&[], None).await;
    (server, fake, ada, project_id, repo, sse)
}

/// The bearer token of `login` in team servers.
fn token_of(login: &str) -> &'static str {
    crate::helpers::TOKENS
        .iter()
        .find(|(_, l)| *l == login)
        .map(|(t, _)| *t)
        .expect("a known login")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_from_bob_to_adas_task_never_reaches_bobs_machine() {
    let (server, _fake, ada, project_id, _repo, mut sse) = team_bench().await;
    let bob = server.api_as("bob");
    let bob_home = TempDir::new().unwrap();
    let mut bob_machine = ClientProcess::start_with(
        &server.url,
        "bob-laptop",
        bob_home.path(),
        &["--token", token_of("bob")],
    );
    bob_machine.line("connected to").await;

    let (task_id, _) = start_task(&ada, &project_id, "Just say hi").await;
    first_turn(&mut sse, &task_id).await;
    let session_id = ada.first_session_id(&task_id).await;
    bob.send_message(&session_id, "Please use my machine").await;
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("no machine of ada is connected") && results[0].contains("is_error"),
        "bob's message ran no tool on bob's machine: {}",
        results[0]
    );
    let status = bob.call("getStatus", &[], &[], None).await;
    assert!(
        status.body["clients"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["host"] == "bob-laptop" && c["login"] == "bob"),
        "bob's machine was connected all along: {}",
        status.body["clients"]
    );
    let streams_before = status.body["sse_clients"].clone();
    assert!(
        !bob_home.path().join("from-machine.txt").exists(),
        "the command never ran on bob's machine"
    );

    // Once ada's own machine is there, bob's message still never uses it: the machine serves
    // only tasks no one but its owner has written to, and bob has written to this one.
    let ada_home = TempDir::new().unwrap();
    let mut ada_machine = ClientProcess::start_with(
        &server.url,
        "ada-laptop",
        ada_home.path(),
        &["--token", token_of("ada")],
    );
    ada_machine.line("connected to").await;
    bob.send_message(&session_id, "Please use my machine").await;
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("is_error")
            && results[0].contains("`ada-laptop` is ada's machine")
            && results[0].contains("serves only tasks whose agents only ada has written to")
            && results[0].contains("bob has written to this task"),
        "bob's turn runs nothing on ada's machine, and the agent learns why: {}",
        results[0]
    );
    assert!(
        !ada_home.path().join("from-machine.txt").exists(),
        "the command never ran on ada's machine"
    );
    // Nor is bob told when ada's machine is connected (getStatus lists the caller's own).
    let listed = |status: &Value, login: &str| {
        status["clients"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["login"] == login && !c["host"].as_str().unwrap_or("").is_empty())
    };
    let status = bob.call("getStatus", &[], &[], None).await;
    assert!(
        !listed(&status.body, "ada"),
        "bob is not told when ada's machine is connected: {}",
        status.body["clients"]
    );
    assert_eq!(
        status.body["sse_clients"], streams_before,
        "nor by the count of streams, which counts no machine"
    );
    let (_, _, metrics) = bob.get_path("/metrics").await;
    assert!(
        metrics.contains("byre_sse_clients") && !metrics.contains("/api/clients/"),
        "nor by /metrics, which counts no machine's route: {metrics}"
    );
    let status = ada.call("getStatus", &[], &[], None).await;
    assert!(listed(&status.body, "ada"), "{}", status.body["clients"]);

    // Nor does ada's own message in that task: bob's words are in its agent's conversation
    // (and would be in any later turn: a restart note's, a background command's, a subtask's),
    // so her machine stays off for it.
    ada.send_message(&session_id, "Please use my machine").await;
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("is_error") && results[0].contains("bob has written to this task"),
        "{}",
        results[0]
    );
    assert!(!ada_home.path().join("from-machine.txt").exists());

    // In a task only ada has written to, her message runs on her machine, and on hers only.
    let (task_id, _) = start_task(&ada, &project_id, "Please use my machine").await;
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 3, "bash, upload, download: {results:?}");
    assert!(results[0].contains("on `ada-laptop`"), "{}", results[0]);
    assert!(ada_home.path().join("from-machine.txt").exists());
    assert!(ada_home.path().join("uploads/README.md").exists());
    assert!(
        !bob_home.path().join("from-machine.txt").exists()
            && !bob_home.path().join("uploads").exists(),
        "bob's machine saw none of it"
    );
    drop(bob_machine);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_machines_commands_run_without_the_clients_environment() {
    let (server, _fake, ada, project_id, _repo, mut sse) = team_bench().await;
    let home = TempDir::new().unwrap();
    // The token in the environment, as docs/agents.md shows it, and a variable of the
    // client's own: neither is the command's business.
    let mut client = ClientProcess::start_env(
        &server.url,
        "ada-laptop",
        home.path(),
        &[],
        &[
            ("BYRE_TOKEN", token_of("ada")),
            ("CLIENT_OWN_SECRET", "client-own-secret-value"),
        ],
    );
    client.line("connected to").await;
    let (task_id, _) = start_task(&ada, &project_id, "Show my machine's environment").await;
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 1, "{results:?}");
    let env = &results[0];
    assert!(env.contains("ENV-SHOWN"), "{env}");
    assert!(
        !env.contains(token_of("ada")) && !env.contains("BYRE_"),
        "no token and none of byre's variables: {env}"
    );
    assert!(
        !env.contains("client-own-secret-value") && !env.contains("CARGO"),
        "nothing else of the client's environment: {env}"
    );
    for kept in ["PATH=", "HOME="] {
        assert!(env.contains(kept), "{kept} is what a shell needs: {env}");
    }
}

/// The next `ClientRequest` a raw machine receives.
async fn next_request(
    machine: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Value {
    loop {
        match tokio::time::timeout(WAIT, machine.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => break serde_json::from_str(&t).unwrap(),
            Ok(Some(Ok(_))) => continue,
            other => panic!("no ClientRequest: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transfer_is_not_found_for_a_login_other_than_its_machines() {
    let (server, _fake, _ada, project_id, _repo, mut sse) = team_bench().await;
    let ws = server.url.replacen("http://", "ws://", 1) + "/api/clients/connect";
    let mut request = ws.into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("Byre-Host", "ada-laptop".parse().unwrap());
    headers.insert(
        "Authorization",
        format!("Bearer {}", token_of("ada")).parse().unwrap(),
    );
    let mut machine = tokio_tungstenite::connect_async(request)
        .await
        .expect("connectClient as ada")
        .0;
    let ada = server.api_as("ada");
    let (task_id, _) = start_task(&ada, &project_id, "Please use my machine").await;

    let bash = next_request(&mut machine).await;
    assert_eq!(bash["op"], "bash", "{bash}");
    let reply = json!({"id": bash["id"], "exit_code": 0, "output": "BASH-RAN in /home/ada\n"});
    machine
        .send(Message::text(reply.to_string()))
        .await
        .unwrap();

    let as_login = |login: &str, method: reqwest::Method, transfer: &str| {
        raw(
            &server.url,
            method,
            &format!("/api/clients/transfers/{transfer}"),
        )
        .bearer_auth(token_of(login))
    };
    let upload = next_request(&mut machine).await;
    assert_eq!(upload["op"], "upload", "{upload}");
    let transfer = upload["transfer"].as_str().unwrap();
    let stolen = as_login("bob", reqwest::Method::GET, transfer)
        .send()
        .await
        .unwrap();
    assert_eq!(
        stolen.status().as_u16(),
        404,
        "bob cannot fetch ada's upload"
    );
    let body: Value = stolen.json().await.unwrap();
    assert!(body["message"].is_string(), "{body}");
    let own = as_login("ada", reqwest::Method::GET, transfer)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status().as_u16(), 200, "ada's machine fetches it");
    assert!(!own.bytes().await.unwrap().is_empty());
    machine
        .send(Message::text(json!({"id": upload["id"]}).to_string()))
        .await
        .unwrap();

    let download = next_request(&mut machine).await;
    assert_eq!(download["op"], "download", "{download}");
    let transfer = download["transfer"].as_str().unwrap();
    let planted = as_login("bob", reqwest::Method::PUT, transfer)
        .header("content-type", "application/gzip")
        .body(escaping_archive())
        .send()
        .await
        .unwrap();
    assert_eq!(
        planted.status().as_u16(),
        404,
        "bob cannot answer ada's download"
    );
    // Ada's own put reaches the archive check (and is refused there for its `../` entry).
    let own = as_login("ada", reqwest::Method::PUT, transfer)
        .header("content-type", "application/gzip")
        .body(escaping_archive())
        .send()
        .await
        .unwrap();
    assert_eq!(own.status().as_u16(), 400);
    machine
        .send(Message::text(json!({"id": download["id"]}).to_string()))
        .await
        .unwrap();
    let results = tool_results(&first_turn(&mut sse, &task_id).await);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[2].contains("refused"), "{}", results[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn once_bob_wrote_to_adas_task_no_later_turn_of_it_or_its_subtasks_reaches_her_machine() {
    let (server, _fake, ada, project_id, _repo, mut sse) = team_bench().await;
    let home = TempDir::new().unwrap();
    let mut machine = ClientProcess::start_with(
        &server.url,
        "ada-laptop",
        home.path(),
        &["--token", token_of("ada")],
    );
    machine.line("connected to").await;
    let (task_id, _) = start_task(&ada, &project_id, "Just say hi").await;
    first_turn(&mut sse, &task_id).await;
    let session_id = ada.first_session_id(&task_id).await;
    // While only ada has written, her task's agent reaches her machine (in any turn: this
    // call comes between turns, as a background command's turn or a restart note's would).
    let r = agent_tool(
        &server,
        &session_id,
        "bash",
        json!({"command": "echo CONTROL > ~/control.txt"}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(home.path().join("control.txt").exists());

    // bob writes to ada's task; his turn ends. Then the agent starts a subtask, whose first
    // message is sent as ada (the subtask's creator): the route the break-it review took.
    server
        .api_as("bob")
        .send_message(&session_id, "Just say hi")
        .await;
    first_turn(&mut sse, &task_id).await;
    let r = agent_tool(
        &server,
        &session_id,
        "start_subtask",
        json!({"title": "Child", "prompt": "Just say hi"}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    let tasks = ada.call("listTasks", &[&project_id], &[], None).await;
    let child = tasks
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Child");
    let child = child.expect("the subtask")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    first_turn(&mut sse, &child).await;
    let child_session = ada.first_session_id(&child).await;
    for (sid, what) in [(&child_session, "its subtask"), (&session_id, "the task")] {
        let r = agent_tool(
            &server,
            sid,
            "bash",
            json!({"command": "echo PWNED > ~/pwned.txt"}),
        )
        .await;
        assert_eq!(r["is_error"], true, "{what}: {r}");
        assert!(
            r.to_string().contains("bob has written to this task"),
            "{what}: {r}"
        );
    }
    assert!(!home.path().join("pwned.txt").exists());
}
