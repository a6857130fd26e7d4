//! The fake over real HTTP, without the CLI: the wire format of each reply kind, step
//! selection, and the other endpoints. (`real_cli.rs` proves the real CLI accepts it.)

use std::time::Duration;

use byre_fake_models::{FakeAnthropic, RecordedRequest, Script};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

const SCRIPT: &str = r#"{
  "steps": [
    {"when": {"match": "write it"}, "reply": {"content": [
      {"type": "thinking", "thinking": "Let me think."},
      {"type": "text", "text": "Writing #{{n}}."},
      {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "{{cwd}}/a.txt"}}]}},
    {"when": {"match": "limited"}, "times": 2,
     "reply": {"status": 429, "error_message": "slow down", "headers": {"retry-after": "7"}}},
    {"when": {"match": "broken stream"}, "reply": {"stream_error": "overloaded_error"}},
    {"when": {"match": "stall"}, "reply": {"stall_after_start_ms": 5000, "content": [{"type": "text", "text": "late"}]}},
    {"when": {"session": "agent-b"}, "times": "always", "reply": {"content": [{"type": "text", "text": "hello b"}]}},
    {"when": {"requires_tools": false, "match": "title"}, "reply": {"content": [{"type": "text", "text": "A title"}]}}
  ],
  "default": {"content": [{"type": "text", "text": "default answer"}]}
}"#;

async fn fake() -> FakeAnthropic {
    FakeAnthropic::start(Script::parse(SCRIPT).expect("script"))
        .await
        .expect("start")
}

/// A Claude-Code-like request body: system prompt with the cwd, one tool, one user message.
fn body(text: &str, stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a fake.\n - Primary working directory: /tmp/w\n"}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    })
}

async fn post(fake: &FakeAnthropic, body: &Value, session: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/messages?beta=true", fake.url))
        .header("x-api-key", "sk-test")
        .header("x-claude-code-session-id", session)
        .json(body)
        .send()
        .await
        .expect("send")
}

/// Splits an SSE body into (event name, data) pairs, checking each event's framing.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split_terminator("\n\n")
        .map(|event| {
            let (name_line, data_line) = event.split_once('\n').expect("two lines");
            let name = name_line
                .strip_prefix("event: ")
                .expect("event line")
                .to_owned();
            let data: Value =
                serde_json::from_str(data_line.strip_prefix("data: ").expect("data line")).unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

fn steps(requests: &[RecordedRequest]) -> Vec<Option<usize>> {
    requests
        .iter()
        .filter_map(|request| request.messages.as_ref())
        .map(|call| call.step)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_follows_the_apis_event_order() {
    let fake = fake().await;
    let response = post(&fake, &body("please write it", true), "agent-a").await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    let block = |delta: &[&'static str]| {
        let mut names = vec!["content_block_start"];
        names.extend(delta.iter().map(|_| "content_block_delta"));
        names.push("content_block_stop");
        names
    };
    let mut expected = vec!["message_start", "ping"];
    expected.extend(block(&["thinking_delta", "signature_delta"]));
    expected.extend(block(&["text_delta"]));
    expected.extend(block(&["input_json_delta"; 3]));
    expected.extend(["message_delta", "message_stop"]);
    assert_eq!(names, expected);
    assert_eq!(events[7].1["delta"]["text"], "Writing #1.");
    let json: String = events
        .iter()
        .filter_map(|(_, data)| data["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json).unwrap(),
        json!({"file_path": "/tmp/w/a.txt"})
    );
    assert_eq!(
        events[events.len() - 2].1["delta"]["stop_reason"],
        "tool_use"
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_streaming_call_gets_the_whole_message_as_json() {
    let fake = fake().await;
    let message: Value = post(&fake, &body("please write it", false), "agent-a")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][2],
        json!({"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "/tmp/w/a.txt"}})
    );
    assert!(message["usage"]["input_tokens"].as_u64().unwrap() > 10);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_step_answers_its_status_and_headers_until_used_up() {
    let fake = fake().await;
    for _ in 0..2 {
        let response = post(&fake, &body("limited", true), "agent-a").await;
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()["retry-after"], "7");
        let error: Value = response.json().await.unwrap();
        assert_eq!(
            error["error"],
            json!({"type": "rate_limit_error", "message": "slow down"})
        );
    }
    let third = post(&fake, &body("limited", false), "agent-a").await;
    assert_eq!(
        third.json::<Value>().await.unwrap()["content"][0]["text"],
        "default answer"
    );
    assert_eq!(steps(&fake.requests()), vec![Some(1), Some(1), None]);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_error_is_an_error_event_after_message_start() {
    let fake = fake().await;
    let response = post(&fake, &body("broken stream", true), "agent-a").await;
    assert_eq!(response.status(), 200);
    let events = events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, vec!["message_start", "ping", "error"]);
    assert_eq!(events[2].1["error"]["type"], "overloaded_error");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_less_requests_and_other_sessions_pick_only_their_steps() {
    let fake = fake().await;
    let mut no_tools = body("please write it", false);
    no_tools.as_object_mut().unwrap().remove("tools");
    let answer: Value = post(&fake, &no_tools, "agent-a")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        answer["content"][0]["text"], "default answer",
        "a tool-less request uses no step"
    );
    let mut title = body("make a title", false);
    title.as_object_mut().unwrap().remove("tools");
    let answer: Value = post(&fake, &title, "agent-a").await.json().await.unwrap();
    assert_eq!(
        answer["content"][0]["text"], "A title",
        "unless the step says requires_tools: false"
    );
    let answer: Value = post(&fake, &body("anything", false), "agent-b")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["content"][0]["text"], "hello b");
    let answer: Value = post(&fake, &body("please write it", false), "agent-a")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["content"][1]["text"], "Writing #4.");
    assert_eq!(
        steps(&fake.requests()),
        vec![None, Some(5), Some(4), Some(0)]
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_a_stalled_stream_is_recorded() {
    let fake = fake().await;
    let response = post(&fake, &body("stall", true), "agent-a").await;
    let mut chunks = response.bytes_stream();
    let first = timeout(WAIT, chunks.next())
        .await
        .expect("message_start at once")
        .unwrap()
        .unwrap();
    assert!(first.starts_with(b"event: message_start"));
    drop(chunks);
    let abandoned =
        |requests: &[RecordedRequest]| requests.iter().any(|request| request.abandoned_by_client);
    timeout(WAIT, fake.wait_until(abandoned))
        .await
        .expect("the drop is noticed");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_endpoints_answer_like_the_api_and_are_recorded() {
    let fake = fake().await;
    let client = reqwest::Client::new();
    assert_eq!(client.head(&fake.url).send().await.unwrap().status(), 200);
    let count: Value = client
        .post(format!("{}/v1/messages/count_tokens?beta=true", fake.url))
        .json(&body("count me", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(count["input_tokens"].as_u64().unwrap() > 0);
    let models: Value = client
        .get(format!("{}/v1/models", fake.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!models["data"].as_array().unwrap().is_empty());
    let unknown = client
        .get(format!("{}/v1/files", fake.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap()["error"]["type"],
        "not_found_error"
    );
    let seen: Vec<(String, String)> = fake
        .requests()
        .into_iter()
        .map(|request| (request.method, request.path))
        .collect();
    let expected = [
        ("HEAD", "/"),
        ("POST", "/v1/messages/count_tokens?beta=true"),
        ("GET", "/v1/models"),
        ("GET", "/v1/files"),
    ];
    assert_eq!(
        seen,
        expected.map(|(method, path)| (method.to_owned(), path.to_owned()))
    );
    assert!(
        fake.messages_requests().is_empty(),
        "count_tokens is not a model call"
    );
    fake.stop().await;
}
