//! [`FakeOpenAi`] over real HTTP, without the CLI: the Responses API wire format of each reply
//! kind, step selection on Codex-shaped bodies, headers, and the other endpoints.
//! (`real_codex.rs` proves the real Codex CLI accepts it.)

use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi, RecordedRequest, Script};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

const SCRIPT: &str = r#"{
  "steps": [
    {"when": {"match": "run it", "last_is_tool_result": false}, "reply": {"content": [
      {"type": "thinking", "thinking": "Let me think."},
      {"type": "text", "text": "Running #{{n}}."},
      {"type": "tool_use", "id": "call_1", "name": "exec_command", "input": {"cmd": "ls", "workdir": "{{cwd}}"}}]}},
    {"when": {"match": "run it", "tool_result_contains": "exited with code 0"},
     "reply": {"content": [{"type": "text", "text": "It ran."}], "usage": {"input_tokens": 50, "output_tokens": 5}}},
    {"when": {"match": "patch"}, "reply": {"content": [
      {"type": "custom_tool_call", "id": "call_2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}]}},
    {"when": {"match": "limited"}, "times": 2,
     "reply": {"status": 429, "error_message": "slow down", "headers": {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}}},
    {"when": {"match": "broken stream"}, "times": 2, "reply": {"stream_error": "server_error", "error_message": "fake failure"}},
    {"when": {"match": "stall"}, "reply": {"stall_after_start_ms": 5000, "content": [{"type": "text", "text": "late"}]}},
    {"when": {"session": "thread-b"}, "times": "always", "reply": {"content": [{"type": "text", "text": "hello b"}]}}
  ],
  "default": {"content": [{"type": "text", "text": "default answer"}]}
}"#;

async fn fake() -> FakeOpenAi {
    FakeOpenAi::start(Script::parse(SCRIPT).expect("script"))
        .await
        .expect("start")
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// A Codex-like request body: developer message, environment context, the prompt, and
/// `extra` items after it (a tool loop's calls and outputs).
fn body(text: &str, stream: bool, extra: &[Value]) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}),
        user("<environment_context>\n  <cwd>/tmp/w</cwd>\n</environment_context>"),
        user(text),
    ];
    input.extend_from_slice(extra);
    json!({"model": "gpt-5.5", "stream": stream, "store": false, "input": input,
           "tools": [{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"}]})
}

async fn post(fake: &FakeOpenAi, body: &Value, thread_id: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/responses", fake.base_url()))
        .header("authorization", "Bearer sk-test")
        .header("thread-id", thread_id)
        .json(body)
        .send()
        .await
        .expect("send")
}

/// Splits an SSE body into (event name, data) pairs, checking each event's framing, that
/// `data.type` is the name and that `sequence_number` counts from 0.
fn events(text: &str) -> Vec<(String, Value)> {
    let events: Vec<(String, Value)> = text
        .split_terminator("\n\n")
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
        .collect();
    for (idx, (_, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], idx, "{data}");
    }
    events
}

fn steps(requests: &[RecordedRequest]) -> Vec<Option<usize>> {
    requests
        .iter()
        .filter_map(|request| request.messages.as_ref())
        .map(|call| call.step)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_follows_the_responses_event_order() {
    let fake = fake().await;
    let response = post(&fake, &body("please run it", true, &[]), "thread-a").await;
    assert_eq!(response.status(), 200);
    let headers = response.headers();
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(headers["x-ratelimit-remaining-requests"], "9999");
    assert!(headers["x-request-id"]
        .to_str()
        .unwrap()
        .starts_with("req_"));
    let events = events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    let expected = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ];
    assert_eq!(names, expected);
    assert_eq!(events[10].1["delta"], "Running #1.");
    let call = &events[18].1["item"];
    assert_eq!(
        (&call["call_id"], &call["name"]),
        (&json!("call_1"), &json!("exec_command"))
    );
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"cmd": "ls", "workdir": "/tmp/w"}));
    let completed = &events[19].1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"].as_array().unwrap().len(), 3);
    assert!(completed["usage"]["total_tokens"].as_u64().unwrap() > 10);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_loop_follow_up_and_a_custom_tool_call_pick_their_steps() {
    let fake = fake().await;
    let output = [
        json!({"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "call_1"}),
        json!({"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0\nOutput:\n"}),
    ];
    let answer: Value = post(&fake, &body("please run it", false, &output), "thread-a")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["output"][0]["content"][0]["text"], "It ran.");
    assert_eq!(
        (
            &answer["usage"]["input_tokens"],
            &answer["usage"]["total_tokens"]
        ),
        (&json!(50), &json!(55))
    );
    let response = post(&fake, &body("now patch", true, &[]), "thread-a").await;
    let events = events(&response.text().await.unwrap());
    let input: String = events
        .iter()
        .filter(|(name, _)| name == "response.custom_tool_call_input.delta")
        .map(|(_, data)| data["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(input, "*** Begin Patch\n*** End Patch\n");
    assert_eq!(
        events[events.len() - 2].1["item"]["type"],
        "custom_tool_call"
    );
    let answer: Value = post(&fake, &body("anything", false, &[]), "thread-b")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        answer["output"][0]["content"][0]["text"], "hello b",
        "`session` is the thread-id"
    );
    assert_eq!(steps(&fake.requests()), vec![Some(1), Some(2), Some(6)]);
    let calls = fake.responses_requests();
    assert_eq!(calls[0].thread_id(), Some("thread-a"));
    assert_eq!(calls[0].last_user_text().as_deref(), Some("please run it"));
    assert_eq!(calls[0].tool_names(), vec!["exec_command", "apply_patch"]);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_step_answers_the_openai_error_shape_and_its_headers() {
    let fake = fake().await;
    for _ in 0..2 {
        let response = post(&fake, &body("limited", true, &[]), "thread-a").await;
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()["retry-after"], "7");
        assert_eq!(
            response.headers()["x-ratelimit-remaining-requests"],
            "0",
            "the script wins"
        );
        assert_eq!(response.headers()["x-ratelimit-limit-requests"], "10000");
        let error: Value = response.json().await.unwrap();
        assert_eq!(
            error,
            json!({"error": {"message": "slow down", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
        );
    }
    let third: Value = post(&fake, &body("limited", false, &[]), "thread-a")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(third["output"][0]["content"][0]["text"], "default answer");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_error_is_response_failed_after_response_created() {
    let fake = fake().await;
    let response = post(&fake, &body("broken stream", true, &[]), "thread-a").await;
    assert_eq!(response.status(), 200);
    let events = events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "response.created",
            "response.in_progress",
            "response.failed"
        ]
    );
    assert_eq!(
        events[2].1["response"]["error"],
        json!({"code": "server_error", "message": "fake failure"})
    );
    let plain = post(&fake, &body("broken stream", false, &[]), "thread-a").await;
    assert_eq!(
        plain.status(),
        500,
        "without streaming, the same error as an HTTP error"
    );
    let error: Value = plain.json().await.unwrap();
    assert_eq!(
        error["error"],
        json!({"message": "fake failure", "type": "server_error", "param": null, "code": null})
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_a_stalled_stream_is_recorded() {
    let fake = fake().await;
    let response = post(&fake, &body("stall", true, &[]), "thread-a").await;
    let mut chunks = response.bytes_stream();
    let first = timeout(WAIT, chunks.next())
        .await
        .expect("response.created at once")
        .unwrap()
        .unwrap();
    assert!(first.starts_with(b"event: response.created"));
    drop(chunks);
    let abandoned = |requests: &[RecordedRequest]| requests.iter().any(|r| r.abandoned_by_client);
    timeout(WAIT, fake.wait_until(abandoned))
        .await
        .expect("the drop is noticed");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_endpoints_answer_like_the_api_and_are_recorded() {
    let fake = fake().await;
    let client = reqwest::Client::new();
    let models: Value = client
        .get(format!("{}/models", fake.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "gpt-5.5");
    let unknown = client
        .get(format!("{}/v1/files", fake.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap()["error"]["code"],
        "unknown_url"
    );
    let compressed = client
        .post(format!("{}/responses", fake.base_url()))
        .header("content-encoding", "zstd")
        .body(vec![0x28, 0xb5, 0x2f, 0xfd])
        .send()
        .await
        .unwrap();
    assert_eq!(compressed.status(), 400);
    let seen: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        seen,
        vec!["GET /v1/models", "GET /v1/files", "POST /v1/responses"]
    );
    assert!(
        fake.responses_requests().is_empty(),
        "none was a model call"
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fake_refuses_a_script_with_the_other_apis_parts() {
    let for_codex = Script::fixture("codex_b_shell").expect("fixture");
    let error = FakeAnthropic::start(for_codex)
        .await
        .err()
        .expect("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("custom_tool_call"), "{error}");
    assert!(
        FakeOpenAi::fixture("a_text").await.is_ok(),
        "a plain text script suits both"
    );
}
