//! Agent sessions on the real Claude Code CLI (pinned, installed from npm by the test set-up)
//! against the project's own fake Anthropic API (`byre-fake-models`, scripts in
//! `fixtures/fake-model/`).

use std::time::Duration;

use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{find, kinds, local_ada, until_kind, Api, Sse, SseEvent, TestServer};

/// How long a test waits for a turn of the real CLI to end.
pub(crate) const TURN_WAIT: Duration = Duration::from_secs(120);

pub(crate) async fn claude_bin() -> std::path::PathBuf {
    tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI")
}

/// A server whose agents talk to a fake API running `script`, a project, and an event stream.
pub(crate) struct Bench {
    pub(crate) server: TestServer,
    pub(crate) fake: FakeAnthropic,
    pub(crate) api: Api,
    pub(crate) project_id: String,
    pub(crate) sse: Sse,
    _repo: TempDir,
}

impl Bench {
    pub(crate) async fn start(script: &str) -> Bench {
        Self::start_with(script, None).await
    }

    async fn start_with(script: &str, claude: Option<std::path::PathBuf>) -> Bench {
        Self::start_with_credentials(script, claude, ("ANTHROPIC_API_KEY", "sk-ant-fake-key")).await
    }

    /// As [`Bench::start`], the CLI authenticated by `credential` (a variable and its value):
    /// `ANTHROPIC_API_KEY`, or `CLAUDE_CODE_OAUTH_TOKEN` for a claude.ai login.
    pub(crate) async fn start_with_credentials(
        script: &str,
        claude: Option<std::path::PathBuf>,
        credential: (&str, &str),
    ) -> Bench {
        let fake = FakeAnthropic::fixture(script).await.expect("fake API");
        let bin = match claude {
            Some(b) => b,
            None => claude_bin().await,
        };
        let url = fake.url.clone();
        let credential = (credential.0.to_owned(), credential.1.to_owned());
        let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
            c.claude_bin = Some(bin);
            c.agent_env = vec![
                ("ANTHROPIC_BASE_URL".into(), url),
                credential,
                ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
            ];
        })
        .await;
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

    pub(crate) async fn task_with_prompt(&self, prompt: &str) -> Value {
        self.api
            .create_task_with(
                &self.project_id,
                json!({"title": "agent task", "prompt": prompt}),
            )
            .await
    }

    pub(crate) async fn session_of(&self, task: &Value) -> Value {
        self.api.first_session(task["id"].as_str().unwrap()).await
    }

    /// Events up to the next `turn.ended`.
    pub(crate) async fn turn(&mut self) -> Vec<SseEvent> {
        until_kind(&mut self.sse, "turn.ended", TURN_WAIT).await
    }

    pub(crate) async fn until(&mut self, kind: &str) -> Vec<SseEvent> {
        until_kind(&mut self.sse, kind, TURN_WAIT).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_with_a_prompt_runs_a_text_turn_live_on_the_event_stream() {
    let mut b = Bench::start("a_text").await;
    let task = b.task_with_prompt("Say hello, please").await;
    assert_eq!(
        task["state"], "running",
        "the agent starts in the same request"
    );
    let events = b.turn().await;
    let ks = kinds(&events);
    for k in [
        "session.created",
        "user.message",
        "turn.started",
        "agent.text",
        "turn.ended",
    ] {
        assert!(ks.iter().any(|x| x == k), "{k} in {ks:?}");
    }
    assert_eq!(
        find(&events, "agent.text")["payload"]["text"],
        "Hello! This is the fake model speaking."
    );
    assert!(
        find(&events, "agent.text")["payload"]["raw"]
            .as_str()
            .unwrap()
            .contains("\"type\":\"assistant\""),
        "the raw vendor line is kept"
    );
    assert_eq!(
        find(&events, "user.message")["payload"]["head"],
        task["base_ref"],
        "user.message records the worktree HEAD"
    );
    let ended = find(&events, "turn.ended").clone();
    assert_eq!(ended["payload"]["outcome"], "completed");
    assert_eq!(ended["payload"]["summary"], true);
    assert!(ended["payload"]["usage"]["output_tokens"].as_u64().unwrap() > 0);
    b.until("task.state").await;
    let got = b
        .api
        .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(got.body["state"], "idle");
    assert_eq!(got.body["summary_seq"], ended["seq"]);
    let session = b.session_of(&task).await;
    assert_eq!(session["vendor"], "claude");
    assert_eq!(session["state"], "idle");
    let one = b
        .api
        .call("getSession", &[session["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(one.body, session);
    let calls = b.fake.messages_requests();
    assert_eq!(
        calls.last().unwrap().header("x-claude-code-session-id"),
        session["vendor_session_id"].as_str(),
        "the CLI runs the session id byre chose"
    );
    let status = b.api.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["live_agents"], 1);
    assert_eq!(status.body["agent_processes"][0]["health"], "ok");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_writes_a_file_and_the_end_of_turn_commit_puts_it_on_the_branch() {
    let mut b = Bench::start("b_write_file").await;
    let task = b.task_with_prompt("Please create hello.txt").await;
    let events = b.turn().await;
    let call = find(&events, "tool.call");
    assert_eq!(call["payload"]["name"], "Write");
    let result = find(&events, "tool.result");
    assert_eq!(result["payload"]["is_error"], false);
    assert_eq!(
        result["payload"]["tool_use_id"],
        call["payload"]["tool_use_id"]
    );
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    let worktree = std::path::Path::new(task["worktree_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("hello.txt")).unwrap(),
        "hello from the fake model\n"
    );

    // The end-of-turn commit and its snapshot.
    let turn_seq = events.last().unwrap().id.unwrap();
    let snapped = b.until("snapshot.taken").await;
    let taken = find(&snapped, "snapshot.taken");
    assert_eq!(taken["payload"]["trigger"], "turn_end");
    assert_eq!(taken["payload"]["cause_seq"], turn_seq);
    assert_eq!(taken["payload"]["branch_advanced"], true);
    let task_id = task["id"].as_str().unwrap();
    let list = b
        .api
        .call("listSnapshots", &[task_id], &[], None)
        .await
        .body;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let snap = &list[0];
    assert_eq!(snap["trigger"], "turn_end");
    assert_eq!(snap["n"], 1);
    assert!(snap["event_seq"].as_u64().unwrap() >= turn_seq);
    let repo = git2::Repository::open(worktree).unwrap();
    let branch = task["branch"].as_str().unwrap();
    let tip = repo
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_commit()
        .unwrap();
    assert_eq!(tip.id().to_string(), snap["commit_sha"].as_str().unwrap());
    assert_eq!(
        tip.parent_id(0).unwrap().to_string(),
        task["base_ref"].as_str().unwrap()
    );
    let blob = tip
        .tree()
        .unwrap()
        .get_path(std::path::Path::new("hello.txt"))
        .unwrap();
    let blob = repo.find_blob(blob.id()).unwrap();
    assert_eq!(
        blob.content(),
        b"hello from the fake model\n",
        "the branch holds the turn's work"
    );
    let status = repo
        .statuses(Some(git2::StatusOptions::new().include_untracked(true)))
        .unwrap();
    let dirty: Vec<_> = status
        .iter()
        .filter_map(|e| e.path().ok().map(str::to_owned))
        .collect();
    assert_eq!(
        dirty,
        Vec::<String>::new(),
        "index and branch hold the worktree"
    );
    let step = b
        .api
        .call(
            "getTaskChanges",
            &[task_id],
            &[("snapshot", "1"), ("step", "true")],
            None,
        )
        .await;
    assert_eq!(step.status, 200, "{:?}", step.body);
    assert_eq!(step.body["files"][0]["path"], "hello.txt");
    assert_eq!(step.body["files"][0]["status"], "added");
    assert_eq!(
        step.body["files"].as_array().unwrap().len(),
        1,
        "{:?}",
        step.body
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_turns_run_in_one_session_and_a_session_only_switches_within_its_vendor() {
    let mut b = Bench::start("c_two_turns").await;
    let task = b.task_with_prompt("first question").await;
    let first = b.turn().await;
    assert_eq!(find(&first, "agent.text")["payload"]["text"], "Answer one.");
    let session = b.session_of(&task).await;
    let sid = session["id"].as_str().unwrap();
    let r = b
        .api
        .call(
            "sendMessage",
            &[sid],
            &[],
            Some(json!({"text": "second question"})),
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body["state"], "running");
    let second = b.turn().await;
    assert_eq!(
        find(&second, "agent.text")["payload"]["text"],
        "Answer two."
    );
    assert_eq!(find(&second, "turn.started")["payload"]["turn"], 2);
    let refused = b
        .api
        .call(
            "sendMessage",
            &[sid],
            &[],
            Some(json!({"text": "third question", "model": "gpt-5.5"})),
        )
        .await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert!(refused.message().contains("vendor"));
    for (body, status) in [
        (json!({"text": ""}), 400),
        (json!({"text": "x", "images": ["no-such-blob"]}), 400),
        (json!({}), 400),
    ] {
        assert_eq!(
            b.api
                .call("sendMessage", &[sid], &[], Some(body))
                .await
                .status,
            status
        );
    }
    assert_eq!(
        b.api
            .call("sendMessage", &["nope"], &[], Some(json!({"text": "x"})))
            .await
            .status,
        404
    );
    let again = b
        .api
        .call(
            "createSession",
            &[task["id"].as_str().unwrap()],
            &[],
            Some(json!({"prompt": "x"})),
        )
        .await;
    assert_eq!(again.status, 409, "one live session per task");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_during_a_turn_is_queued_delivered_next_and_can_be_withdrawn() {
    let mut b = Bench::start("h_queued").await;
    let task = b.task_with_prompt("first task").await;
    let tid = task["id"].as_str().unwrap().to_owned();
    let session = b.session_of(&task).await;
    let sid = session["id"].as_str().unwrap().to_owned();
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "second task"})),
        )
        .await;
    assert_eq!(r.status, 202);
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "third, withdrawn"})),
        )
        .await;
    assert_eq!(r.status, 202);
    let queued = b.until("user.queued").await;
    let second_id = find(&queued, "user.queued")["payload"]["input_id"]
        .as_u64()
        .unwrap();
    let third = b.until("user.queued").await;
    let third_id = find(&third, "user.queued")["payload"]["input_id"]
        .as_u64()
        .unwrap();
    assert_eq!(
        b.api
            .call("withdrawMessage", &[&tid, &third_id.to_string()], &[], None)
            .await
            .status,
        204
    );
    assert_eq!(
        b.api
            .call("withdrawMessage", &[&tid, &third_id.to_string()], &[], None)
            .await
            .status,
        409,
        "already withdrawn"
    );
    assert_eq!(
        b.api
            .call("withdrawMessage", &[&tid, "999999"], &[], None)
            .await
            .status,
        404
    );
    let first = b.turn().await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    let next = b.turn().await;
    let handed = find(&next, "user.message");
    assert_eq!(
        handed["payload"]["input_id"], second_id,
        "the queued message is the next turn"
    );
    assert_eq!(
        find(&next, "agent.text")["payload"]["text"],
        "Second task done."
    );
    assert_eq!(
        b.api
            .call(
                "withdrawMessage",
                &[&tid, &second_id.to_string()],
                &[],
                None
            )
            .await
            .status,
        409,
        "handed over"
    );
    let texts: Vec<String> = b
        .fake
        .messages_requests()
        .iter()
        .filter_map(|r| r.last_user_text())
        .collect();
    assert!(
        !texts.iter().any(|t| t.contains("third, withdrawn")),
        "a withdrawn message never reaches the agent: {texts:?}"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_turn_ends_and_a_new_turn_runs() {
    let mut b = Bench::start("f_interrupt").await;
    let task = b.task_with_prompt("slow answer").await;
    let session = b.session_of(&task).await;
    let sid = session["id"].as_str().unwrap().to_owned();
    b.fake
        .wait_until(|rs| {
            rs.iter().any(|r| {
                r.is_messages()
                    && r.last_user_text()
                        .is_some_and(|t| t.contains("slow answer"))
            })
        })
        .await;
    let r = b.api.call("interruptSession", &[&sid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = b.turn().await;
    assert!(kinds(&events).contains(&"session.interrupt_requested".to_owned()));
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "interrupted"
    );
    assert_eq!(
        b.api
            .call("interruptSession", &[&sid], &[], None)
            .await
            .status,
        409,
        "nothing runs now"
    );
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "after interrupt, answer"})),
        )
        .await;
    assert_eq!(r.status, 202);
    let next = b.turn().await;
    assert_eq!(
        find(&next, "agent.text")["payload"]["text"],
        "Fresh answer after the interrupt."
    );
    assert_eq!(find(&next, "turn.ended")["payload"]["outcome"], "completed");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_500s_are_retried_and_the_turn_succeeds() {
    let mut b = Bench::start("i_500_then_ok").await;
    b.task_with_prompt("anything").await;
    let events = b.turn().await;
    let retries: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.data["kind"] == "agent.api_retry")
        .collect();
    assert_eq!(retries.len(), 2, "{:?}", kinds(&events));
    assert_eq!(retries[0].data["payload"]["error_status"], 500);
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
async fn a_rate_limit_that_outlives_the_retries_becomes_a_rate_limited_inbox_item() {
    let mut b = Bench::start("k_429_forever").await;
    let task = b.task_with_prompt("anything").await;
    let events = b.turn().await;
    let ended = find(&events, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "failed");
    assert_eq!(ended["payload"]["api_error_status"], 429);
    let item = find(&b.until("inbox.item_created").await, "inbox.item_created").clone();
    let _ = item;
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
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["kind"], "rate_limited");
    assert_eq!(items[0]["payload"]["vendor"], "claude");
    assert_eq!(items[0]["payload"]["rate_limit"]["api_error_status"], 429);
    assert_eq!(
        items[0]["payload"]["rate_limit"]["last_retry"]["error_status"],
        429
    );
    let one = b
        .api
        .call(
            "getInboxItem",
            &[items[0]["id"].as_str().unwrap()],
            &[],
            None,
        )
        .await;
    assert_eq!(one.body, items[0]);
    assert_eq!(
        b.api
            .call("getInboxItem", &["nope"], &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        b.api
            .call("listInbox", &[], &[("state", "answered")], None)
            .await
            .body,
        json!([])
    );
    let status = b.api.call("getStatus", &[], &[], None).await;
    assert_eq!(
        status.body["rate_limits"]["claude"]["api_error_status"],
        429
    );
    // Dismissing the item closes it and sends the agent nothing: no turn starts.
    let r = b
        .api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(json!({"responses": [{"item_id": items[0]["id"], "type": "dismiss"}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body[0]["state"], "dismissed");
    let responded = b.until("inbox.responded").await;
    let responded_seq = responded.last().unwrap().id.unwrap();
    let task_events = b
        .api
        .call("listTaskEvents", &[task["id"].as_str().unwrap()], &[], None)
        .await
        .body;
    assert!(
        task_events
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["seq"].as_u64().unwrap() <= responded_seq),
        "nothing follows the dismissal: {task_events}"
    );
    assert_eq!(b.session_of(&task).await["state"], "idle");
    // The process survives the error: the next message is answered.
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    b.api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "after the rate limit"})),
        )
        .await;
    let next = b.turn().await;
    assert_eq!(find(&next, "turn.ended")["payload"]["outcome"], "completed");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_message_reaches_the_model_as_an_image_block() {
    let mut b = Bench::start("j_image").await;
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let blob = b
        .api
        .call_raw("uploadBlob", &[], "image/png", png.to_vec())
        .await
        .body;
    let r = b.api.call("createTask", &[&b.project_id], &[], Some(json!({"title": "look", "prompt": "What is in this image?", "images": [blob["id"]]}))).await;
    assert_eq!(r.status, 201);
    let events = b.turn().await;
    assert_eq!(
        find(&events, "user.message")["payload"]["images"],
        json!([blob["id"]])
    );
    assert_eq!(
        find(&events, "agent.text")["payload"]["text"],
        "I see a single red pixel."
    );
    let calls = b.fake.messages_requests();
    let with_image = calls
        .iter()
        .find(|c| !c.image_blocks().is_empty())
        .expect("a request with an image");
    assert_eq!(
        with_image.image_blocks()[0]["source"]["media_type"],
        "image/png"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cli_gives_a_clear_session_error_and_no_hang() {
    let mut b = Bench::start_with("a_text", Some("/nonexistent/claude".into())).await;
    let task = b.task_with_prompt("Say hello").await;
    let events = b.turn().await;
    let ended = find(&events, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "failed");
    assert!(
        ended["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("could not start `/nonexistent/claude`"),
        "{ended}"
    );
    let inbox = b
        .api
        .call("listInbox", &[], &[("project_id", &b.project_id)], None)
        .await;
    assert_eq!(inbox.body[0]["kind"], "session_error");
    assert!(inbox.body[0]["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("BYRE_CLAUDE_BIN"));
    b.until("task.state").await;
    let got = b
        .api
        .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(
        got.body["state"], "idle",
        "the session's state is put right"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_hands_off_to_a_new_session_on_the_requested_model() {
    let mut b = Bench::start("m_compact").await;
    let task = b.task_with_prompt("begin the work").await;
    b.turn().await;
    let old = b.session_of(&task).await;
    let old_id = old["id"].as_str().unwrap().to_owned();
    let r = b
        .api
        .call(
            "compactSession",
            &[&old_id],
            &[],
            Some(json!({"model": "opus"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(
        b.api
            .call("compactSession", &[&old_id], &[], Some(json!({})))
            .await
            .status,
        409,
        "a turn runs"
    );
    assert_eq!(
        b.api
            .call("sendMessage", &[&old_id], &[], Some(json!({"text": "x"})))
            .await
            .status,
        409,
        "compacting"
    );
    let handoff = b.turn().await;
    assert_eq!(
        find(&handoff, "agent.text")["payload"]["text"],
        "HANDOFF: the goal is to greet the user; nothing is left to do."
    );
    let next = b.turn().await;
    let created = find(&next, "session.created");
    assert_eq!(created["payload"]["model"], "opus");
    assert!(kinds(&next).contains(&"session.completed".to_owned()));
    assert_eq!(
        find(&next, "agent.text")["payload"]["text"],
        "Continuing from the handoff."
    );
    let sessions = b
        .api
        .call("listSessions", &[task["id"].as_str().unwrap()], &[], None)
        .await
        .body;
    assert_eq!(sessions.as_array().unwrap().len(), 2);
    assert_eq!(sessions[0]["state"], "completed");
    assert_eq!(sessions[1]["model"], "opus");
    assert_ne!(
        sessions[1]["vendor_session_id"],
        sessions[0]["vendor_session_id"]
    );
    assert_eq!(
        b.api
            .call("compactSession", &[&old_id], &[], None)
            .await
            .status,
        409,
        "completed"
    );
    // The completed session's MCP token is refused and its file is gone; the successor's is
    // there.
    let tokens = b.server.data.path().join("mcp-tokens");
    assert!(!tokens.join(format!("{old_id}.token")).exists());
    let new_id = sessions[1]["id"].as_str().unwrap();
    assert!(tokens.join(format!("{new_id}.token")).exists());
    let host =
        byre_agents::mcp_launch::McpHost::open(b.server.data.path(), String::new(), "byre".into())
            .expect("the server's MCP secret");
    let call = |id: &str| {
        reqwest::Client::new()
            .post(format!(
                "{}/internal/mcp/tools/set_merge_title",
                b.server.url
            ))
            .bearer_auth(host.token(id))
            .json(&json!({"merge_title": "Greet the user"}))
            .send()
    };
    assert_eq!(
        call(&old_id).await.unwrap().status(),
        403,
        "a completed session's token"
    );
    assert_eq!(
        call(new_id).await.unwrap().status(),
        200,
        "the live session's token"
    );
    assert_eq!(
        b.api
            .call("compactSession", &["nope"], &[], None)
            .await
            .status,
        404
    );
    b.server.stop().await;
}
