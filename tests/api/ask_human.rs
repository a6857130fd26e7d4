//! The inbox round trip through byre's MCP tools, with the real CLIs (Claude Code and Codex)
//! against the fake model APIs (`fixtures/fake-model/q_ask_human.json`,
//! `codex_q_ask_human.json`): the agent calls `ask_human` → an inbox `question` item on the
//! event stream → `respondInbox` → the answer is the agent's next message (the fake model
//! receives it) and the agent acts on it (writes `colour.txt`). Also across a `kill -9` of
//! byre between the question and the answer.

use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi, RecordedRequest};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{find, kinds, until_kind, Api, SseEvent};
use crate::process::ServeProcess;

const TURN_WAIT: Duration = Duration::from_secs(120);

enum Fake {
    Anthropic(FakeAnthropic),
    OpenAi(FakeOpenAi),
}

impl Fake {
    fn requests(&self) -> Vec<RecordedRequest> {
        match self {
            Fake::Anthropic(f) => f.messages_requests(),
            Fake::OpenAi(f) => f.responses_requests(),
        }
    }
}

/// The fake for `vendor`, the server's environment, and the task's model.
async fn setup(vendor: &str) -> (Fake, Vec<(String, String)>, &'static str) {
    if vendor == "claude" {
        let fake = FakeAnthropic::fixture("q_ask_human")
            .await
            .expect("fake API");
        let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
            .await
            .expect("install the CLI");
        let env = vec![
            ("BYRE_CLAUDE_BIN".into(), bin.to_string_lossy().into_owned()),
            ("ANTHROPIC_BASE_URL".into(), fake.url.clone()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
        (Fake::Anthropic(fake), env, "sonnet")
    } else {
        let fake = FakeOpenAi::fixture("codex_q_ask_human")
            .await
            .expect("fake API");
        let bin = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
            .await
            .expect("install the CLI");
        let env = vec![
            ("BYRE_CODEX_BIN".into(), bin.to_string_lossy().into_owned()),
            ("OPENAI_BASE_URL".into(), fake.base_url()),
            ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
            ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
            ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
        ];
        (Fake::OpenAi(fake), env, "gpt-5.5")
    }
}

fn start(data: &std::path::Path, env: &[(String, String)]) -> ServeProcess {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ServeProcess::start_with_env(data, &env)
}

/// The whole round trip on `vendor`; with `restart`, byre is killed (SIGKILL) and started
/// again between the question and the answer.
async fn round_trip(vendor: &str, restart: bool) {
    let (fake, env, model) = setup(vendor).await;
    // Not under /tmp: there Codex will not create its helper binaries (codex PROTOCOL.md §15.12).
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    let mut server = start(data.path(), &env);
    let mut api = Api::for_url(&server.url);
    let (_repo, pid) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            &pid,
            json!({"title": "colour", "prompt": "Please pick a colour for colour.txt", "model": model}),
        )
        .await;
    let tid = task["id"].as_str().unwrap().to_owned();
    let worktree = task["worktree_path"].as_str().unwrap().to_owned();

    let first: Vec<SseEvent> = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let item = find(&first, "inbox.item_created");
    assert_eq!(item["payload"]["kind"], "question", "{:?}", kinds(&first));
    let question = &item["payload"]["payload"];
    assert_eq!(question["question"], "Which colour should colour.txt hold?");
    assert_eq!(question["options"], json!(["red", "blue", "green"]));
    assert_eq!(question["multiple"], false);
    assert_eq!(question["recommended"], json!(["blue"]));
    let item_id = item["payload"]["id"].as_str().unwrap().to_owned();
    let ended = first
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "turn.ended")
        .unwrap();
    assert_eq!(ended.data["payload"]["outcome"], "completed");
    let tool_result = first
        .iter()
        .find(|e| e.data["kind"] == "tool.result")
        .unwrap_or_else(|| panic!("a tool.result in {:?}", kinds(&first)));
    assert!(
        tool_result.data["payload"]
            .to_string()
            .contains("End your turn"),
        "the agent is told to end its turn: {}",
        tool_result.data["payload"]
    );

    if restart {
        server.kill_9();
        server = start(data.path(), &env);
        api = Api::for_url(&server.url);
    }
    let open = api.call("listInbox", &[], &[("task_id", &tid)], None).await;
    assert_eq!(
        open.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        open.body
    );
    assert_eq!(open.body[0]["state"], "open");

    let last_seq = ended.data["seq"].as_u64().unwrap();
    let mut sse = api.events(&[("task_id", &tid)], Some(last_seq)).await;
    let r = api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(
                json!({"responses": [{"item_id": item_id, "type": "option", "options": ["blue"]}]}),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body[0]["state"], "answered");
    assert_eq!(r.body[0]["resolved_by"], "ada");

    let second = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let message = find(&second, "user.message");
    assert_eq!(
        message["actor"], "ada",
        "delivered under the answering human's name"
    );
    let text = message["payload"]["text"].as_str().unwrap();
    assert!(text.contains("from ada: blue"), "{text}");
    let delivered = find(&second, "inbox.delivered");
    assert_eq!(
        delivered["payload"]["input_id"],
        message["payload"]["input_id"]
    );
    let ended = second
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "turn.ended")
        .unwrap();
    assert_eq!(
        ended.data["payload"]["outcome"],
        "completed",
        "{:?}",
        kinds(&second)
    );

    let requests = fake.requests();
    assert!(
        requests.iter().any(|r| r
            .last_user_text()
            .is_some_and(|t| t.contains("from ada: blue"))),
        "the model received the answer"
    );
    let written = std::fs::read_to_string(std::path::Path::new(&worktree).join("colour.txt"))
        .expect("the agent acted on the answer");
    assert_eq!(written, "blue\n");

    let item = api.call("getInboxItem", &[&item_id], &[], None).await;
    assert_eq!(item.status, 200);
    let response: &Value = &item.body["responses"][0];
    assert_eq!(response["user"], "ada");
    assert_eq!(response["options"], json!(["blue"]));
    assert!(response["delivered_at"].is_string(), "{response}");
    assert_eq!(server.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_asks_a_human_through_mcp_and_acts_on_the_answer() {
    round_trip("claude", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_gets_the_answer_after_byre_is_killed_and_restarted_between() {
    round_trip("claude", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_asks_a_human_through_mcp_and_acts_on_the_answer() {
    round_trip("codex", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_gets_the_answer_after_byre_is_killed_and_restarted_between() {
    round_trip("codex", true).await;
}
