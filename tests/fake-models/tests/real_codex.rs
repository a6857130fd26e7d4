//! The pinned real Codex CLI ([`byre_fake_models::codex_bin`]) as `codex app-server` against
//! [`FakeOpenAi`], with the `codex_*` scripts of `fixtures/fake-model/`: proves the fake speaks
//! the Responses API well enough for the CLI, that the scripts do what their notes say, and
//! pins down the setup and JSON-RPC sequence byre's Codex driver uses (codex PROTOCOL.md
//! §2–§12). The child process and its config are `codex_app_server/mod.rs`.
//!
//! `BYRE_CODEX_TRANSCRIPTS=<dir>` writes each app-server's stdio as `<dir>/<name>.jsonl`.

mod codex_app_server;

use std::path::Path;

use byre_fake_models::{FakeOpenAi, RecordedRequest};
use codex_app_server::{Codex, Retries, KEY, NO_RETRIES, WAIT};
use serde_json::{json, Value};
use tokio::time::timeout;

fn step_of(request: &RecordedRequest) -> Option<usize> {
    request.messages.as_ref().and_then(|call| call.step)
}

fn steps(fake: &FakeOpenAi) -> Vec<Option<usize>> {
    fake.responses_requests().iter().map(step_of).collect()
}

async fn start(fixture: &str) -> FakeOpenAi {
    FakeOpenAi::fixture(fixture).await.expect("start the fake")
}

fn same_dir(a: &str, b: &Path) -> bool {
    Path::new(a).canonicalize().ok() == b.canonicalize().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_turn_streams_reasoning_and_the_scripted_text_and_completes() {
    let fake = start("codex_a_text").await;
    let mut codex = Codex::spawn(&fake, NO_RETRIES);
    let thread_id = codex.start_thread().await;
    let turn_id = codex.say(&thread_id, "Say hello, please.").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(turn["status"], "completed", "{turn}");
    assert_eq!(turn["error"], Value::Null);

    let messages = codex.items(&turn_id, "agentMessage");
    assert_eq!(messages.len(), 1, "{}", codex.report());
    assert_eq!(
        messages[0]["text"],
        "Hello! This is the fake Responses API speaking."
    );
    let streamed: String = codex
        .notifications("item/agentMessage/delta", &turn_id)
        .iter()
        .map(|params| params["delta"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(streamed, messages[0]["text"].as_str().unwrap());
    let reasoning = codex.items(&turn_id, "reasoning");
    assert_eq!(
        reasoning[0]["summary"],
        json!(["The user wants a greeting."])
    );
    let usage = codex.notifications("thread/tokenUsage/updated", &turn_id);
    assert_eq!(
        usage.last().expect("token usage")["tokenUsage"]["last"],
        json!({"totalTokens": 1235, "inputTokens": 1200, "cachedInputTokens": 1000,
               "cacheWriteInputTokens": 0, "outputTokens": 35, "reasoningOutputTokens": 20})
    );

    let calls = fake.responses_requests();
    assert_eq!(steps(&fake), vec![Some(0)]);
    assert_eq!(calls[0].path, "/v1/responses");
    assert_eq!(
        calls[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(calls[0].thread_id(), Some(thread_id.as_str()));
    assert_eq!(
        calls[0].last_user_text().as_deref(),
        Some("Say hello, please.")
    );
    let cwd = calls[0].messages.as_ref().and_then(|call| call.cwd.clone());
    assert!(same_dir(
        &cwd.expect("cwd in <environment_context>"),
        &codex.cwd()
    ));
    assert!(
        calls[0].tool_names().contains(&"exec_command"),
        "{:?}",
        calls[0].tool_names()
    );
    let others: Vec<String> = fake
        .requests()
        .iter()
        .filter(|request| !request.is_model_call())
        .map(|request| format!("{} {}", request.method, request.path))
        .collect();
    assert!(others.is_empty(), "unexpected requests: {others:?}");

    let (status, _) = codex.finish("a_text").await;
    assert!(status.success(), "{status}");
    fake.stop().await;
}

/// With `approval_policy = "never"` and `sandbox_mode = "danger-full-access"` (config and
/// `thread/start`), `exec_command` and `apply_patch` run without any approval request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_a_shell_command_creates_the_file_in_the_cwd_and_a_patch_updates_it() {
    let fake = start("codex_b_shell").await;
    let mut codex = Codex::spawn(&fake, NO_RETRIES);
    let thread_id = codex.start_thread().await;
    let turn_id = codex.say(&thread_id, "Please create the file.").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(turn["status"], "completed", "{turn}");
    let created = codex.cwd().join("created_by_shell.txt");
    assert_eq!(
        std::fs::read_to_string(&created).unwrap(),
        "hello from codex\n"
    );
    let commands = codex.items(&turn_id, "commandExecution");
    assert_eq!(commands.len(), 1, "{}", codex.report());
    assert_eq!(
        (
            commands[0]["id"].as_str(),
            commands[0]["status"].as_str(),
            commands[0]["exitCode"].as_i64()
        ),
        (Some("call_b_shell"), Some("completed"), Some(0)),
        "{}",
        commands[0]
    );
    assert_eq!(commands[0]["aggregatedOutput"], "created_by_shell.txt\n");
    let texts: Vec<&Value> = codex
        .items(&turn_id, "agentMessage")
        .iter()
        .map(|item| &item["text"])
        .collect();
    assert_eq!(
        texts,
        vec![
            "I'll create the file with a shell command.",
            "Created created_by_shell.txt."
        ]
    );
    assert_eq!(steps(&fake), vec![Some(0), Some(1)]);
    let calls = fake.responses_requests();
    assert!(calls[1]
        .last_user_text()
        .unwrap()
        .contains("create the file"));

    let turn_id = codex.say(&thread_id, "Now patch the file.").await;
    assert_eq!(codex.turn_completed(&turn_id).await["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(&created).unwrap(),
        "hello from codex, patched\n"
    );
    let changes = codex.items(&turn_id, "fileChange");
    assert_eq!(changes.len(), 1, "{}", codex.report());
    assert_eq!(changes[0]["id"], "call_b_patch");
    assert_eq!(
        changes[0]["changes"][0]["kind"]["type"], "update",
        "{}",
        changes[0]
    );
    let diffs = codex.notifications("turn/diff/updated", &turn_id);
    let diff = diffs
        .last()
        .and_then(|d| d["diff"].as_str())
        .unwrap_or_default();
    assert!(
        diff.contains("+++ b/created_by_shell.txt") && diff.contains("+hello from codex, patched"),
        "paths relative to the work dir's repository: {diffs:?}"
    );
    assert_eq!(steps(&fake), vec![Some(0), Some(1), Some(2), Some(3)]);
    assert!(codex.finish("b_shell").await.0.success());
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_two_turns_share_one_thread_and_a_new_process_resumes_it() {
    let fake = start("codex_c_two_turns").await;
    let mut codex = Codex::spawn(&fake, NO_RETRIES);
    let thread_id = codex.start_thread().await;
    let first = codex.say(&thread_id, "The first question.").await;
    assert_eq!(
        codex.turn_completed(&first).await["items"][0]["text"],
        "Answer one."
    );
    let second = codex.say(&thread_id, "The second question.").await;
    assert_ne!(first, second);
    assert_eq!(
        codex.turn_completed(&second).await["items"][0]["text"],
        "Answer two."
    );

    let calls = fake.responses_requests();
    assert_eq!(steps(&fake), vec![Some(0), Some(1)]);
    assert!(calls
        .iter()
        .all(|call| call.thread_id() == Some(thread_id.as_str())));
    let said: Vec<String> = calls[1].body.as_ref().unwrap()["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["role"] == "user" || item["role"] == "assistant")
        .map(|item| {
            format!(
                "{}: {}",
                item["role"].as_str().unwrap(),
                item["content"][0]["text"].as_str().unwrap_or("")
            )
        })
        .filter(|line| !line.contains(": <"))
        .collect();
    assert_eq!(
        said,
        vec![
            "user: The first question.",
            "assistant: Answer one.",
            "user: The second question."
        ]
    );
    let (status, dir) = codex.finish("c_two_turns").await;
    assert!(status.success());

    // A new process on the same CODEX_HOME resumes the thread (PROTOCOL.md §5).
    let mut codex = Codex::spawn_in(dir);
    codex.initialize().await;
    let resumed = codex
        .request(
            "thread/resume",
            json!({"threadId": thread_id, "excludeTurns": true}),
        )
        .await;
    assert_eq!(resumed["thread"]["id"], thread_id.as_str(), "{resumed}");
    let third = codex.say(&thread_id, "The third question.").await;
    assert_eq!(
        codex.turn_completed(&third).await["items"][0]["text"],
        "Answer three."
    );
    let history = fake.responses_requests()[2].body.as_ref().unwrap()["input"].to_string();
    assert!(
        history.contains("Answer one.") && history.contains("Answer two."),
        "{history}"
    );
    assert!(codex.finish("c_resume").await.0.success());
    fake.stop().await;
}

/// `turn/interrupt` answers `{}` and the turn completes `interrupted`, both while a command
/// runs and while the model stream is open; the thread stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f_an_interrupt_during_a_command_or_a_stream_ends_the_turn_interrupted() {
    let fake = start("codex_f_interrupt").await;
    let mut codex = Codex::spawn(&fake, NO_RETRIES);
    let thread_id = codex.start_thread().await;
    let turn_id = codex.say(&thread_id, "Run the long command.").await;
    let command_started = |line: &Value| {
        line["method"] == "item/started" && line["params"]["item"]["type"] == "commandExecution"
    };
    let started = codex
        .read_until("the command's item/started", command_started)
        .await;
    assert_eq!(started["params"]["item"]["id"], "call_f_sleep");
    assert_eq!(
        started["params"]["item"]["command"],
        "/bin/bash -lc 'sleep 30'"
    );
    let interrupted = codex
        .request(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    assert_eq!(interrupted, json!({}));
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(
        (turn["status"].as_str(), &turn["error"]),
        (Some("interrupted"), &Value::Null),
        "{turn}"
    );

    let turn_id = codex.say(&thread_id, "A slow answer, please.").await;
    let slow_call = |requests: &[RecordedRequest]| requests.iter().any(|r| step_of(r) == Some(3));
    let requests = timeout(WAIT, fake.wait_until(slow_call))
        .await
        .expect("the slow call");
    let slow = requests.iter().find(|r| step_of(r) == Some(3)).unwrap();
    let history = slow.body.as_ref().unwrap()["input"].to_string();
    assert!(
        history.contains("aborted by user") && history.contains("<turn_aborted>"),
        "{history}"
    );
    codex
        .request(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    assert_eq!(
        codex.turn_completed(&turn_id).await["status"],
        "interrupted"
    );
    let abandoned = |requests: &[RecordedRequest]| requests.iter().any(|r| r.abandoned_by_client);
    timeout(WAIT, fake.wait_until(abandoned))
        .await
        .expect("Codex drops the stalled stream");

    let turn_id = codex.say(&thread_id, "Anything after interrupt?").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(
        turn["items"][0]["text"], "Fresh answer after the interrupt.",
        "{turn}"
    );
    assert!(codex.finish("f_interrupt").await.0.success());
    fake.stop().await;
}

/// 5xx answers are retried silently, up to `request_max_retries`, with no notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i_two_500s_are_retried_silently_and_the_turn_then_succeeds() {
    let fake = start("codex_i_500_then_ok").await;
    let mut codex = Codex::spawn(
        &fake,
        Retries {
            request: 2,
            stream: 0,
        },
    );
    let thread_id = codex.start_thread().await;
    let turn_id = codex.say(&thread_id, "Hello despite errors.").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(turn["status"], "completed", "{turn}");
    assert_eq!(turn["items"][0]["text"], "Recovered after two 500s.");
    assert_eq!(steps(&fake), vec![Some(0), Some(0), Some(1)]);
    assert!(
        codex.notifications("error", &turn_id).is_empty(),
        "{}",
        codex.report()
    );
    assert!(codex.finish("i_500_then_ok").await.0.success());
    fake.stop().await;
}

/// A 429 is retried `stream_max_retries` times, each announced (`error`, `willRetry:true`) and
/// after `retry-after`; then the turn fails with `responseTooManyFailedAttempts`. The thread
/// and the process survive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_endless_429s_fail_the_turn_after_the_retries_and_the_thread_survives() {
    let fake = start("codex_k_429").await;
    let mut codex = Codex::spawn(
        &fake,
        Retries {
            request: 0,
            stream: 2,
        },
    );
    let thread_id = codex.start_thread().await;
    let turn_id = codex.say(&thread_id, "Hello into the rate limit.").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(turn["status"], "failed", "{turn}");
    let errors = codex.notifications("error", &turn_id);
    let messages: Vec<(bool, &str)> = errors
        .iter()
        .map(|error| {
            let message = error["error"]["message"].as_str().unwrap_or_default();
            (error["willRetry"] == true, message)
        })
        .collect();
    assert_eq!(messages.len(), 3, "{}", codex.report());
    assert_eq!(
        messages[..2],
        [(true, "Reconnecting... 1/2"), (true, "Reconnecting... 2/2")]
    );
    // The fake's `x-request-id` is appended: "…, request id: req_…".
    assert!(
        !messages[2].0
            && messages[2]
                .1
                .starts_with("exceeded retry limit, last status: 429 Too Many Requests"),
        "{messages:?}"
    );
    assert_eq!(
        errors[2]["error"]["codexErrorInfo"],
        json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}})
    );
    assert_eq!(turn["error"], errors[2]["error"]);
    assert_eq!(
        fake.responses_requests().len(),
        3,
        "the first try and two retries"
    );

    let turn_id = codex.say(&thread_id, "Hello after the rate limit.").await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(
        turn["items"][0]["text"], "The rate limit is over.",
        "{turn}"
    );
    // Only the 200's `x-codex-*` headers reach the client; a plain 429's are ignored.
    let limits: Vec<&Value> = codex
        .lines
        .iter()
        .filter(|line| line["method"] == "account/rateLimits/updated")
        .map(|line| &line["params"]["rateLimits"]["primary"])
        .collect();
    assert_eq!(
        limits,
        vec![&json!({"usedPercent": 13, "windowDurationMins": 300, "resetsAt": 1_900_000_000})],
        "{}",
        codex.report()
    );
    assert!(codex.finish("k_429").await.0.success());
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j_a_local_image_reaches_the_api_as_an_input_image_data_url() {
    // A 1x1 red PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let fake = start("codex_j_image").await;
    let mut codex = Codex::spawn(&fake, NO_RETRIES);
    let png = base64_decode(PNG);
    let image_path = codex.cwd().join("red.png");
    std::fs::write(&image_path, png).unwrap();
    let thread_id = codex.start_thread().await;
    let input = json!([
        {"type": "text", "text": "What is in this image?", "text_elements": []},
        {"type": "localImage", "path": image_path},
    ]);
    let turn_id = codex.start_turn(&thread_id, input).await;
    let turn = codex.turn_completed(&turn_id).await;
    assert_eq!(
        turn["items"][0]["text"], "I see a single red pixel.",
        "{turn}"
    );
    let calls = fake.responses_requests();
    let images = calls[0].image_blocks();
    assert_eq!(images.len(), 1, "{images:?}");
    assert_eq!(
        images[0]["image_url"],
        format!("data:image/png;base64,{PNG}")
    );
    assert!(codex.finish("j_image").await.0.success());
    fake.stop().await;
}

/// Standard base64 (with padding) to bytes; enough for a test fixture.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n_bits = 0;
    let mut bytes = Vec::new();
    for byte in text.bytes().filter(|&b| b != b'=') {
        let value = ALPHABET.iter().position(|&a| a == byte).expect("base64") as u32;
        bits = (bits << 6) | value;
        n_bits += 6;
        if n_bits >= 8 {
            n_bits -= 8;
            bytes.push((bits >> n_bits) as u8);
        }
    }
    bytes
}
