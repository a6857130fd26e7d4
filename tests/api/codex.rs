//! Agent sessions on the real Codex CLI (`codex app-server`, pinned, installed from npm by the
//! test set-up) against the project's own fake OpenAI Responses API (`byre-fake-models`,
//! `codex_*` scripts in `fixtures/fake-model/`). A `gpt-*` model makes a Codex session; its
//! turns give the same event kinds as Claude Code's (`tests/api/claude.rs`).

use std::path::PathBuf;
use std::time::Duration;

use byre_fake_models::{FakeOpenAi, RecordedRequest};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{find, kinds, local_ada, until_kind, Api, Sse, SseEvent, TestServer};

/// How long a test waits for a turn of the real CLI to end.
const TURN_WAIT: Duration = Duration::from_secs(90);

async fn codex_bin() -> PathBuf {
    tokio::task::spawn_blocking(byre_fake_models::codex_bin)
        .await
        .expect("install the CLI")
}

/// The agent environment of a server whose Codex talks to `fake`: its URL and a key, and
/// retry budgets that keep failing turns short (`BYRE_CODEX_*_MAX_RETRIES`: 5xx answers are
/// retried as announced stream retries, twice).
fn agent_env(fake: &FakeOpenAi) -> Vec<(String, String)> {
    vec![
        ("OPENAI_BASE_URL".into(), fake.base_url()),
        ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
        ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
        ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
    ]
}

/// A server on `data` whose Codex agents use `fake`.
async fn server_on(data: TempDir, fake: &FakeOpenAi) -> TestServer {
    server_with(data, fake, codex_bin().await).await
}

/// A server on `data` whose Codex agents use `fake` and the program `bin`.
async fn server_with(data: TempDir, fake: &FakeOpenAi, bin: PathBuf) -> TestServer {
    let env = agent_env(fake);
    TestServer::spawn_configured(data, local_ada(), move |c| {
        c.codex_bin = Some(bin);
        c.agent_env = env;
    })
    .await
}

/// A server whose agents talk to a fake API running `script`, a project, and an event stream.
struct Bench {
    server: TestServer,
    fake: FakeOpenAi,
    api: Api,
    project_id: String,
    sse: Sse,
    _repo: TempDir,
}

impl Bench {
    async fn start(script: &str) -> Bench {
        let fake = FakeOpenAi::fixture(script).await.expect("fake API");
        // Not under /tmp: there Codex will not create its helper binaries (PROTOCOL.md §15.12).
        let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
        let server = server_on(data, &fake).await;
        let api = server.api();
        let (repo, project_id) = api.basic_project().await;
        let sse = api.events(&[], None).await;
        Bench {
            server,
            fake,
            api,
            project_id,
            sse,
            _repo: repo,
        }
    }

    /// A task on `gpt-5.5` whose first turn is `prompt` (with `images`).
    async fn task_with_prompt(&self, prompt: &str, images: Value) -> Value {
        let body =
            json!({"title": "codex task", "prompt": prompt, "model": "gpt-5.5", "images": images});
        self.api.create_task_with(&self.project_id, body).await
    }

    async fn session_of(&self, task: &Value) -> Value {
        self.api.first_session(task["id"].as_str().unwrap()).await
    }

    async fn send(&self, session_id: &str, body: Value) -> u16 {
        let r = self
            .api
            .call("sendMessage", &[session_id], &[], Some(body))
            .await;
        r.status
    }

    /// Events up to the next `turn.ended`.
    async fn turn(&mut self) -> Vec<SseEvent> {
        self.until("turn.ended").await
    }

    async fn until(&mut self, kind: &str) -> Vec<SseEvent> {
        until_kind(&mut self.sse, kind, TURN_WAIT).await
    }
}

fn all<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.data["kind"] == kind)
        .map(|e| &e.data)
        .collect()
}

fn texts(events: &[SseEvent]) -> Vec<&str> {
    all(events, "agent.text")
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap_or(""))
        .collect()
}

fn user_texts(requests: &[RecordedRequest]) -> Vec<String> {
    requests.iter().filter_map(|r| r.last_user_text()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpt_task_runs_a_codex_text_turn_with_the_same_events_as_claude() {
    let mut b = Bench::start("codex_a_text").await;
    let task = b.task_with_prompt("Say hello, please.", json!([])).await;
    assert_eq!(task["state"], "running");
    let events = b.turn().await;
    let ks = kinds(&events);
    for k in [
        "session.created",
        "user.message",
        "turn.started",
        "session.vendor_session_started",
        "agent.text",
        "turn.ended",
    ] {
        assert!(ks.iter().any(|x| x == k), "{k} in {ks:?}");
    }
    assert_eq!(
        find(&events, "session.created")["payload"]["vendor"],
        "codex"
    );
    assert_eq!(
        find(&events, "session.created")["payload"]["vendor_session_id"],
        "",
        "no thread before Codex starts one"
    );
    assert_eq!(
        texts(&events),
        ["Hello! This is the fake Responses API speaking."]
    );
    assert!(
        find(&events, "agent.text")["payload"]["raw"]
            .as_str()
            .unwrap()
            .contains("\"agentMessage\""),
        "the raw vendor line is kept"
    );
    let ended = &find(&events, "turn.ended")["payload"];
    assert_eq!(ended["outcome"], "completed");
    assert_eq!(ended["summary"], true);
    assert_eq!(
        ended["result"],
        "Hello! This is the fake Responses API speaking."
    );
    assert_eq!(
        ended["usage"],
        json!({"input_tokens": 200, "output_tokens": 35, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 0}),
        "the scripted usage, cached input apart"
    );
    let streamed: String = b
        .sse
        .ephemeral
        .iter()
        .filter(|d| d["kind"] == "agent.delta")
        .map(|d| d["payload"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(streamed, "Hello! This is the fake Responses API speaking.");

    let thread = find(&events, "session.vendor_session_started")["payload"]["vendor_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = b.session_of(&task).await;
    assert_eq!(session["vendor"], "codex");
    assert_eq!(session["model"], "gpt-5.5");
    assert_eq!(session["vendor_session_id"], thread.as_str());
    let calls = b.fake.responses_requests();
    assert_eq!(calls[0].thread_id(), Some(thread.as_str()));
    assert_eq!(
        calls[0].header("authorization"),
        Some("Bearer sk-fake-openai-key")
    );
    let cwd = calls[0].messages.as_ref().and_then(|m| m.cwd.clone());
    assert_eq!(
        cwd.map(PathBuf::from).and_then(|p| p.canonicalize().ok()),
        PathBuf::from(task["worktree_path"].as_str().unwrap())
            .canonicalize()
            .ok(),
        "Codex works in the task's worktree"
    );
    let status = b.api.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["live_agents"], 1);
    assert_eq!(status.body["agent_processes"][0]["vendor"], "codex");
    assert_eq!(status.body["protocol_errors"]["counts"], json!({}));
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_creates_a_file_in_the_worktree() {
    let mut b = Bench::start("codex_b_shell").await;
    let task = b
        .task_with_prompt("Please create the file.", json!([]))
        .await;
    let events = b.turn().await;
    let call = &find(&events, "tool.call")["payload"];
    assert_eq!(call["name"], "shell");
    assert_eq!(call["tool_use_id"], "call_b_shell");
    assert!(call["input"]["command"]
        .as_str()
        .unwrap()
        .contains("created_by_shell.txt"));
    let result = &find(&events, "tool.result")["payload"];
    assert_eq!(
        (
            &result["tool_use_id"],
            &result["is_error"],
            &result["output"]
        ),
        (
            &json!("call_b_shell"),
            &json!(false),
            &json!("created_by_shell.txt\n")
        )
    );
    assert_eq!(
        texts(&events),
        [
            "I'll create the file with a shell command.",
            "Created created_by_shell.txt."
        ]
    );
    let ended = &find(&events, "turn.ended")["payload"];
    assert_eq!(
        (&ended["outcome"], &ended["num_turns"]),
        (&json!("completed"), &json!(2))
    );
    let file = PathBuf::from(task["worktree_path"].as_str().unwrap()).join("created_by_shell.txt");
    assert_eq!(std::fs::read_to_string(file).unwrap(), "hello from codex\n");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_turns_share_a_thread_and_a_claude_model_is_refused() {
    let mut b = Bench::start("codex_c_two_turns").await;
    let task = b.task_with_prompt("The first question.", json!([])).await;
    assert_eq!(texts(&b.turn().await), ["Answer one."]);
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    assert_eq!(
        b.send(&sid, json!({"text": "The second question."})).await,
        202
    );
    let second = b.turn().await;
    assert_eq!(texts(&second), ["Answer two."]);
    assert_eq!(find(&second, "turn.started")["payload"]["turn"], 2);
    assert!(
        !kinds(&second).contains(&"session.vendor_session_started".to_owned()),
        "one thread for both turns"
    );
    let calls = b.fake.responses_requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].thread_id(), calls[1].thread_id());
    let refused = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "x", "model": "sonnet"})),
        )
        .await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert!(
        refused.message().contains("vendor"),
        "{}",
        refused.message()
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_during_a_turn_is_queued_and_runs_as_the_next_turn() {
    let mut b = Bench::start("codex_h_queued").await;
    let task = b.task_with_prompt("first task", json!([])).await;
    // A large file for the first turn's snapshot to hash: the queued turn still waits for it.
    let big = PathBuf::from(task["worktree_path"].as_str().unwrap()).join("big.bin");
    std::fs::write(&big, vec![7u8; 40 << 20]).unwrap();
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    assert_eq!(b.send(&sid, json!({"text": "second task"})).await, 202);
    let queued = b.until("user.queued").await;
    let input_id = find(&queued, "user.queued")["payload"]["input_id"].clone();
    let first = b.turn().await;
    assert_eq!(texts(&first), ["First task done."]);
    let first_end = find(&first, "turn.ended")["seq"].clone();
    let next = b.turn().await;
    assert_eq!(find(&next, "user.message")["payload"]["input_id"], input_id);
    assert_eq!(texts(&next), ["Second task done."]);
    // The queued turn reached the agent only once the first turn's snapshot (and end-of-turn
    // commit) was made: nothing of the agent's comes before it.
    let kinds_in_order: Vec<&str> = next
        .iter()
        .map(|e| e.data["kind"].as_str().unwrap_or(""))
        .collect();
    let snap_at = next
        .iter()
        .position(|e| {
            e.data["kind"] == "snapshot.taken" && e.data["payload"]["cause_seq"] == first_end
        })
        .unwrap_or_else(|| panic!("no snapshot of the first turn in {kinds_in_order:?}"));
    let text_at = next
        .iter()
        .position(|e| e.data["kind"] == "agent.text")
        .unwrap();
    assert!(snap_at < text_at, "{kinds_in_order:?}");
    assert_eq!(
        user_texts(&b.fake.responses_requests()),
        ["first task", "second task"]
    );
    b.server.stop().await;
}

/// Whether a descendant of `root` (the sandbox's bwrap, or Codex itself unconfined) runs
/// `sleep 30` (Codex runs commands in sessions of their own).
fn sleeping_child(root: u32) -> bool {
    descendants(root)
        .into_iter()
        .any(|p| sleeping_child_pid(p).is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_during_a_command_closes_it_stops_it_and_a_new_turn_runs() {
    let mut b = Bench::start("codex_f_interrupt").await;
    let task = b.task_with_prompt("Run the long command.", json!([])).await;
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    let started = b.until("tool.call").await;
    assert_eq!(find(&started, "tool.call")["payload"]["name"], "shell");
    let status = b.api.call("getStatus", &[], &[], None).await;
    let app_server = status.body["agent_processes"][0]["pid"].as_u64().unwrap() as u32;
    let r = b.api.call("interruptSession", &[&sid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = b.turn().await;
    let closed = &find(&events, "tool.result")["payload"];
    assert_eq!(
        (
            &closed["tool_use_id"],
            &closed["output"],
            &closed["is_error"]
        ),
        (&json!("call_f_sleep"), &json!("interrupted"), &json!(true)),
        "byre closes the command Codex left open"
    );
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "interrupted"
    );
    let mut stopped = false;
    for _ in 0..100 {
        if !sleeping_child(app_server) {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stopped, "the interrupted command is stopped");
    assert_eq!(
        b.api
            .call("interruptSession", &[&sid], &[], None)
            .await
            .status,
        409
    );
    assert_eq!(
        b.send(&sid, json!({"text": "Anything after interrupt?"}))
            .await,
        202
    );
    let next = b.turn().await;
    assert_eq!(texts(&next), ["Fresh answer after the interrupt."]);
    assert_eq!(find(&next, "turn.ended")["payload"]["outcome"], "completed");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_sent_right_after_the_message_ends_the_turn() {
    let mut b = Bench::start("codex_f_interrupt").await;
    let task = b.task_with_prompt("slow answer", json!([])).await;
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    // At once: byre knows the turn from Codex's answer to turn/start before Codex has
    // started it, when Codex still refuses to interrupt it.
    let r = b.api.call("interruptSession", &[&sid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = b.turn().await;
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "interrupted"
    );
    assert!(texts(&events).is_empty(), "{:?}", texts(&events));
    b.server.stop().await;
}

/// The pid of the `sleep 30` child of `parent`, if one runs.
fn sleeping_child_pid(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent) && cmd.starts_with(b"sleep\x0030")
        })
}

/// The pids of the descendants of `root`, at any depth.
fn descendants(root: u32) -> Vec<u32> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let more = children(found[i]);
        found.extend(
            more.into_iter()
                .filter(|p| !found.contains(p))
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    found
}

/// The pids of the children of `parent`.
fn children(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_killed_from_outside_fails_its_turn_and_leaves_no_command_running() {
    let mut b = Bench::start("codex_l_killed").await;
    b.task_with_prompt("Run the two step command.", json!([]))
        .await;
    b.until("tool.call").await;
    let status = b.api.call("getStatus", &[], &[], None).await;
    let app_server = status.body["agent_processes"][0]["pid"].as_u64().unwrap() as u32;
    // The command's bash runs in a session of its own, a child of the app-server (itself
    // under the sandbox's bwrap, whose pid byre shows); its `sleep 30` under it outlives a
    // killed Codex unless byre stops it.
    let mut sleeper = None;
    for _ in 0..100 {
        sleeper = descendants(app_server)
            .into_iter()
            .find_map(sleeping_child_pid);
        if sleeper.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sleeper = sleeper.expect("the command runs");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(app_server as i32, libc::SIGKILL);
    }
    let events = b.turn().await;
    let ended = &find(&events, "turn.ended")["payload"];
    assert_eq!(ended["outcome"], "failed");
    assert!(
        ended["error"]
            .as_str()
            .unwrap()
            .contains("killed by SIGKILL from outside byre"),
        "{ended}"
    );
    let mut stopped = false;
    for _ in 0..100 {
        if !running(sleeper) {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stopped, "the command Codex ran is not left running");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_next_message_resumes_the_codex_thread() {
    let fake = FakeOpenAi::fixture("codex_c_two_turns").await.unwrap();
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let server = server_on(data, &fake).await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let body = json!({"title": "restart", "prompt": "The first question.", "model": "gpt-5.5"});
    let task = api.call("createTask", &[&pid], &[], Some(body)).await.body;
    let first = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    assert_eq!(texts(&first), ["Answer one."]);
    let tid = task["id"].as_str().unwrap();
    let session = api.first_session(tid).await;
    let thread = session["vendor_session_id"].as_str().unwrap().to_owned();
    assert!(!thread.is_empty());

    let data = server.stop().await;
    let server = server_on(data, &fake).await;
    let api = server.api();
    let mut sse = api.events(&[("task_id", tid)], None).await;
    let sid = session["id"].as_str().unwrap();
    let r = api
        .call(
            "sendMessage",
            &[sid],
            &[],
            Some(json!({"text": "The third question."})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    // The stream replays the task's events from the start: skip to the second turn.
    let mut next = Vec::new();
    while !next
        .iter()
        .any(|e: &SseEvent| e.data["kind"] == "turn.ended" && e.data["payload"]["turn"] == 2)
    {
        next = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    }
    assert_eq!(texts(&next), ["Answer three."]);
    assert_eq!(find(&next, "turn.ended")["payload"]["outcome"], "completed");
    let calls = fake.responses_requests();
    let last = calls.last().unwrap();
    assert_eq!(last.thread_id(), Some(thread.as_str()), "the same thread");
    let history = last.body.as_ref().unwrap()["input"].to_string();
    assert!(history.contains("Answer one."), "{history}");
    let after = api.call("getSession", &[sid], &[], None).await.body;
    assert_eq!(after["vendor_session_id"], thread.as_str());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_500s_are_retried_and_the_turn_succeeds() {
    let mut b = Bench::start("codex_i_500_then_ok").await;
    b.task_with_prompt("Hello despite errors.", json!([])).await;
    let events = b.turn().await;
    let retries = all(&events, "agent.api_retry");
    assert_eq!(retries.len(), 2, "{:?}", kinds(&events));
    assert_eq!(
        (
            &retries[1]["payload"]["attempt"],
            &retries[1]["payload"]["max_retries"]
        ),
        (&json!(2), &json!(2))
    );
    assert_eq!(
        retries[0]["payload"]["error"], "responseStreamDisconnected",
        "Codex does not pass a 5xx's status on"
    );
    assert_eq!(texts(&events), ["Recovered after two 500s."]);
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    assert_eq!(
        b.api.call("listInbox", &[], &[], None).await.body,
        json!([])
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_that_outlives_the_retries_is_a_rate_limited_item_with_codexs_status() {
    let mut b = Bench::start("codex_k_429").await;
    // A first answer carries Codex's rate-limit headers (x-codex-primary-*).
    let task = b
        .task_with_prompt("Hello after the rate limit.", json!([]))
        .await;
    let first = b.turn().await;
    assert_eq!(texts(&first), ["The rate limit is over."]);
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    assert_eq!(
        b.send(&sid, json!({"text": "Hello into the rate limit."}))
            .await,
        202
    );
    let events = b.turn().await;
    let retries = all(&events, "agent.api_retry");
    assert_eq!(retries.len(), 2, "{:?}", kinds(&events));
    assert_eq!(retries[0]["payload"]["error_status"], 429);
    let ended = &find(&events, "turn.ended")["payload"];
    assert_eq!(ended["outcome"], "failed");
    assert_eq!(ended["api_error_status"], 429);
    assert!(ended["error"].as_str().unwrap().contains("429"), "{ended}");
    b.until("inbox.item_created").await;
    let inbox = b
        .api
        .call(
            "listInbox",
            &[],
            &[("task_id", task["id"].as_str().unwrap())],
            None,
        )
        .await;
    let items = inbox.body.as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["kind"], "rate_limited");
    assert_eq!(items[0]["payload"]["vendor"], "codex");
    let limit = &items[0]["payload"]["rate_limit"];
    assert_eq!(limit["api_error_status"], 429);
    assert_eq!(limit["last_retry"]["error_status"], 429);
    let primary = json!({"usedPercent": 13, "windowDurationMins": 300, "resetsAt": 1_900_000_000});
    assert_eq!(limit["vendor_status"]["primary"], primary, "{limit}");
    let status = b.api.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["rate_limits"]["codex"]["api_error_status"], 429);
    assert_eq!(
        status.body["rate_limits"]["codex"]["vendor_status"]["primary"],
        primary
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_message_reaches_the_model_as_a_data_url() {
    // A 1x1 PNG.
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let mut b = Bench::start("codex_j_image").await;
    let blob = b
        .api
        .call_raw("uploadBlob", &[], "image/png", png.to_vec())
        .await
        .body;
    b.task_with_prompt("What is in this image?", json!([blob["id"]]))
        .await;
    let events = b.turn().await;
    assert_eq!(texts(&events), ["I see a single red pixel."]);
    let calls = b.fake.responses_requests();
    let images = calls[0].image_blocks();
    assert_eq!(images.len(), 1, "{images:?}");
    let url = images[0]["image_url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_codex_gives_a_clear_session_error() {
    let fake = FakeOpenAi::fixture("codex_a_text").await.unwrap();
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let server = server_with(data, &fake, "/nonexistent/codex".into()).await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let body = json!({"title": "no codex", "prompt": "Say hello", "model": "gpt-5.5"});
    assert_eq!(
        api.call("createTask", &[&pid], &[], Some(body))
            .await
            .status,
        201
    );
    let events = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let ended = &find(&events, "turn.ended")["payload"];
    assert_eq!(ended["outcome"], "failed");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("could not start `/nonexistent/codex`") && error.contains("BYRE_CODEX_BIN"),
        "{error}"
    );
    let inbox = api.call("listInbox", &[], &[], None).await;
    assert_eq!(inbox.body[0]["kind"], "session_error");
    server.stop().await;
}
