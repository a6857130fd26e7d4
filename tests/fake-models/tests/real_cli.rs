//! The pinned real Claude Code CLI ([`claude_bin`]) against the fake, with the scripts of
//! `fixtures/fake-model/`: proves the fake speaks the Messages API well enough for the CLI,
//! and that the scripts do what their notes say. Environment and flags as in
//! `vendors/claude-code/PROTOCOL.md` §1.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use byre_fake_models::{claude_bin, FakeAnthropic, RecordedRequest};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// How long a test waits for one expected line or request before failing.
const WAIT: Duration = Duration::from_secs(60);

/// One `claude -p` stream-json process in its own temp HOME, config dir and cwd.
struct Claude {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far, parsed.
    lines: Vec<Value>,
    dir: TempDir,
    session_id: String,
}

impl Claude {
    /// Spawns the CLI against `fake` with PROTOCOL.md §1's environment plus `extra_env`.
    fn spawn(fake: &FakeAnthropic, extra_env: &[(&str, &str)]) -> Claude {
        let dir = TempDir::new().expect("temp dir");
        for sub in ["home", "config", "work"] {
            std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
        }
        let session_id = uuid::Uuid::new_v4().to_string();
        let stderr = std::fs::File::create(dir.path().join("stderr.txt")).expect("stderr file");
        let mut command = Command::new(claude_bin());
        command
            .args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
            ])
            .args([
                "--model",
                "claude-sonnet-4-5",
                "--permission-mode",
                "bypassPermissions",
            ])
            .args(["--session-id", &session_id])
            .current_dir(dir.path().join("work"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path().join("home"))
            .env("CLAUDE_CONFIG_DIR", dir.path().join("config"))
            .env("ANTHROPIC_BASE_URL", &fake.url)
            .env("ANTHROPIC_API_KEY", "sk-ant-fake-key")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            // Tests run as root; bypassPermissions refuses root without it.
            .env("IS_SANDBOX", "1")
            .envs(extra_env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn claude");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Claude {
            child,
            stdin,
            stdout,
            lines: Vec::new(),
            dir,
            session_id,
        }
    }

    fn cwd(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes one JSON line to stdin.
    async fn send(&mut self, line: Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Sends a user message whose content is `content` (a string or blocks).
    async fn say(&mut self, content: Value) {
        self.send(json!({"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": null}))
            .await;
    }

    /// Reads stdout until a line satisfies `wanted`; returns it.
    async fn read_until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = match timeout(WAIT, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => panic!("stdout closed before {what}; {}", self.report()),
                Ok(Err(error)) => panic!("reading stdout: {error}"),
                Err(_) => panic!("no {what} within {WAIT:?}; {}", self.report()),
            };
            let value: Value =
                serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
            self.lines.push(value.clone());
            if wanted(&value) {
                return value;
            }
        }
    }

    /// Reads until the next `result` line (the end of a turn, PROTOCOL.md §2).
    async fn next_result(&mut self) -> Value {
        self.read_until("result line", |line| line["type"] == "result")
            .await
    }

    /// Closes stdin, reads the rest of stdout and waits for the exit.
    async fn finish(mut self) -> (Vec<Value>, ExitStatus) {
        drop(self.stdin.take());
        while let Ok(Ok(Some(line))) = timeout(WAIT, self.stdout.next_line()).await {
            self.lines
                .push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
        let status = timeout(WAIT, self.child.wait())
            .await
            .expect("claude exits after stdin EOF")
            .expect("wait");
        (self.lines, status)
    }

    fn report(&self) -> String {
        let stderr =
            std::fs::read_to_string(self.dir.path().join("stderr.txt")).unwrap_or_default();
        format!("stdout so far: {:#?}\nstderr: {stderr}", self.lines)
    }

    fn lines_of(&self, kind: &str, subtype: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|line| line["type"] == kind && line["subtype"] == subtype)
            .collect()
    }
}

fn step_of(request: &RecordedRequest) -> Option<usize> {
    request.messages.as_ref().and_then(|call| call.step)
}

async fn start(fixture: &str) -> FakeAnthropic {
    FakeAnthropic::fixture(fixture)
        .await
        .expect("start the fake")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_turn_ends_in_a_successful_result_with_the_scripted_text() {
    let fake = start("a_text").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!("Say hello, please.")).await;
    let result = claude.next_result().await;
    assert_eq!(
        (result["subtype"].as_str(), result["is_error"].as_bool()),
        (Some("success"), Some(false)),
        "{result}"
    );
    assert_eq!(result["result"], "Hello! This is the fake model speaking.");
    assert_eq!(result["session_id"], claude.session_id.as_str());
    assert_eq!(claude.lines_of("system", "init").len(), 1);

    let calls = fake.messages_requests();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0].path, "/v1/messages?beta=true");
    assert_eq!(calls[0].session_id(), Some(claude.session_id.as_str()));
    assert_eq!(calls[0].header("x-api-key"), Some("sk-ant-fake-key"));
    assert_eq!(step_of(&calls[0]), Some(0));
    let cwd = calls[0]
        .messages
        .as_ref()
        .and_then(|call| call.cwd.clone())
        .expect("cwd in the system prompt");
    assert_eq!(
        Path::new(&cwd).canonicalize().unwrap(),
        claude.cwd().canonicalize().unwrap()
    );
    let others: Vec<(String, String)> = fake
        .requests()
        .iter()
        .filter(|r| !r.is_messages())
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert!(
        others
            .iter()
            .all(|(method, path)| method == "HEAD" && path == "/"),
        "unexpected requests: {others:?}"
    );

    let (_, status) = claude.finish().await;
    assert!(status.success(), "{status}");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_write_file_creates_hello_txt_in_the_working_directory() {
    let fake = start("b_write_file").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!("Please create hello.txt.")).await;
    let result = claude.next_result().await;
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "Created hello.txt.");
    assert_eq!(result["num_turns"], 2);
    let written =
        std::fs::read_to_string(claude.cwd().join("hello.txt")).expect("hello.txt exists");
    assert_eq!(written, "hello from the fake model\n");

    let calls = fake.messages_requests();
    assert_eq!(
        calls.iter().map(step_of).collect::<Vec<_>>(),
        vec![Some(0), Some(1)]
    );
    assert!(
        calls[1]
            .last_user_text()
            .unwrap()
            .contains("File created successfully"),
        "{calls:#?}"
    );
    claude.finish().await;
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_two_turns_run_in_one_process_and_the_second_call_carries_the_first() {
    let fake = start("c_two_turns").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!("The first question.")).await;
    assert_eq!(claude.next_result().await["result"], "Answer one.");
    claude
        .say(json!([{"type": "text", "text": "The second question."}]))
        .await;
    assert_eq!(claude.next_result().await["result"], "Answer two.");
    assert_eq!(
        claude.lines_of("system", "init").len(),
        2,
        "an init per turn"
    );

    let calls = fake.messages_requests();
    let roles: Vec<&str> = calls[1].body.as_ref().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["role"].as_str())
        .collect();
    assert_eq!(roles, vec!["user", "assistant", "user"]);
    let (_, status) = claude.finish().await;
    assert!(status.success());
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i_two_500s_are_retried_and_the_turn_then_succeeds() {
    let fake = start("i_500_then_ok").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!("Hello despite errors.")).await;
    let result = claude.next_result().await;
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "Recovered after two 500s.");
    let retries = claude.lines_of("system", "api_retry");
    assert_eq!(retries.len(), 2, "{retries:#?}");
    assert!(retries
        .iter()
        .all(|retry| retry["error_status"] == 500 && retry["error"] == "server_error"));
    assert_eq!(
        fake.messages_requests()
            .iter()
            .map(step_of)
            .collect::<Vec<_>>(),
        vec![Some(0), Some(0), Some(1)]
    );
    claude.finish().await;
    fake.stop().await;
}

/// Without `CLAUDE_CODE_MAX_RETRIES` the CLI retries a 429 ten times, each after the longer
/// of `retry-after` and its own backoff (1, 1.2, 2.3, 4.9, 9, 19, 35, 36, 35, 36 s seen):
/// the error result came after 180 s. 2 retries keep this test at about 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_endless_429s_end_in_an_error_result_and_the_process_survives() {
    let fake = start("k_429_forever").await;
    let mut claude = Claude::spawn(&fake, &[("CLAUDE_CODE_MAX_RETRIES", "2")]);
    claude.say(json!("Hello into the rate limit.")).await;
    let result = claude.next_result().await;
    assert_eq!(
        (result["subtype"].as_str(), result["is_error"].as_bool()),
        (Some("success"), Some(true)),
        "{result}"
    );
    assert_eq!(result["api_error_status"], 429);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("fake rate limit"),
        "{result}"
    );
    let retries = claude.lines_of("system", "api_retry");
    assert_eq!(retries.len(), 2, "{retries:#?}");
    // The delay is `retry-after` (1 s) or the CLI's own backoff with jitter, whichever is longer.
    let honours_retry_after = |retry: &&Value| {
        retry["retry_delay_ms"]
            .as_f64()
            .is_some_and(|delay_ms| delay_ms >= 1000.0)
    };
    assert!(
        retries
            .iter()
            .all(|retry| retry["error_status"] == 429 && honours_retry_after(retry)),
        "{retries:#?}"
    );
    assert_eq!(
        fake.messages_requests().len(),
        3,
        "the first try and two retries"
    );

    claude.say(json!("Hello after the rate limit.")).await;
    let result = claude.next_result().await;
    assert_eq!(
        (result["is_error"].as_bool(), result["result"].as_str()),
        (Some(false), Some("The rate limit is over."))
    );
    let (_, status) = claude.finish().await;
    assert!(
        status.success(),
        "exit 0 as the last result was not an error: {status}"
    );
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j_an_image_block_reaches_the_api_with_its_source_unchanged() {
    // A 1x1 PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let fake = start("j_image").await;
    let mut claude = Claude::spawn(&fake, &[]);
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}});
    claude
        .say(json!([{"type": "text", "text": "What is in this image?"}, image.clone()]))
        .await;
    assert_eq!(
        claude.next_result().await["result"],
        "I see a single red pixel."
    );
    let calls = fake.messages_requests();
    // The CLI adds `cache_control` to the last block of the last message; the rest is ours.
    let sent: Vec<(&Value, &Value)> = calls[0]
        .image_blocks()
        .iter()
        .map(|block| (&block["type"], &block["source"]))
        .collect();
    assert_eq!(sent, vec![(&image["type"], &image["source"])]);
    claude.finish().await;
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f_an_interrupt_mid_stream_drops_the_connection_and_the_next_turn_works() {
    let fake = start("f_interrupt").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!("Give me a slow answer.")).await;
    let slow_call =
        |requests: &[RecordedRequest]| requests.iter().any(|request| step_of(request) == Some(1));
    timeout(WAIT, fake.wait_until(slow_call))
        .await
        .expect("the slow call reaches the fake");
    claude.send(json!({"type": "control_request", "request_id": "interrupt-1", "request": {"subtype": "interrupt"}})).await;
    let result = claude.next_result().await;
    assert_eq!(
        (result["subtype"].as_str(), result["is_error"].as_bool()),
        (Some("error_during_execution"), Some(true)),
        "{result}"
    );
    assert_eq!(result["terminal_reason"], "aborted_streaming");
    let abandoned =
        |requests: &[RecordedRequest]| requests.iter().any(|request| request.abandoned_by_client);
    timeout(WAIT, fake.wait_until(abandoned))
        .await
        .expect("the CLI drops the stalled stream");

    claude.say(json!("Anything after interrupt?")).await;
    assert_eq!(
        claude.next_result().await["result"],
        "Fresh answer after the interrupt."
    );
    claude.finish().await;
    fake.stop().await;
}

/// Sends `first`, then "And a second task." once the fake has the first model call (so
/// during its 3 s stall), and returns the `result` texts of the next `n_results` turns.
async fn queue_a_second_message(first: &str, n_results: usize) -> Vec<Value> {
    let fake = start("h_queued").await;
    let mut claude = Claude::spawn(&fake, &[]);
    claude.say(json!(first)).await;
    let has_a_call =
        |requests: &[RecordedRequest]| requests.iter().any(RecordedRequest::is_messages);
    timeout(WAIT, fake.wait_until(has_a_call))
        .await
        .expect("the first call reaches the fake");
    claude.say(json!("And a second task.")).await;
    let mut results = Vec::new();
    for _ in 0..n_results {
        let result = claude.next_result().await;
        assert_eq!(result["is_error"], false, "{result}");
        results.push(result["result"].clone());
    }
    let (lines, _) = claude.finish().await;
    let n_results_in_all = lines.iter().filter(|line| line["type"] == "result").count();
    assert_eq!(n_results_in_all, n_results, "{lines:#?}");
    fake.stop().await;
    results
}

/// PROTOCOL.md §6: a message that arrives while a turn runs is folded into the turn's next
/// tool result — even when it arrives while the model is still streaming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h_a_message_sent_during_a_turn_with_a_tool_is_folded_into_that_turn() {
    let results = queue_a_second_message("Do the first task.", 1).await;
    assert_eq!(
        results,
        vec![json!("First task done, and I saw your second task.")]
    );
}

/// PROTOCOL.md §6: with no tool result to fold it into, the message runs as its own turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h_a_message_sent_during_a_text_only_turn_runs_as_its_own_turn() {
    let results = queue_a_second_message("A slow text, please.", 2).await;
    assert_eq!(
        results,
        vec![json!("Slow text answer."), json!("Second task done.")]
    );
}
