//! However the real Claude Code CLI ends — SIGTERM or SIGINT from outside byre, byre's
//! graceful stop, a kill -9 of byre and the next start — no process of its session is left
//! (found by the `BYRE_AGENT_SESSION` marker in `/proc/*/environ`, as byre itself finds them),
//! and a message handed to a CLI on its way out reaches the model exactly once. The fake model
//! runs `fixtures/fake-model/s_signals.json`: "sleep in a tool" makes the CLI run Bash
//! `sleep 600`.

use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::{alive, claude_bin, turns, Bench, TURN_WAIT};
use crate::helpers::{find, Api};

/// The pids of live (not zombie) processes whose environment marks them as session
/// `session_id`'s (`BYRE_AGENT_SESSION=<id>`), with their command lines.
fn marked(session_id: &str) -> Vec<(i32, String)> {
    let needle = format!("BYRE_AGENT_SESSION={session_id}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) && alive(pid) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((pid, cmdline));
        }
    }
    found
}

/// Waits (up to [`TURN_WAIT`]) until the session's Bash tool runs `sleep 600`; its pid.
async fn sleeping_tool(session_id: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + TURN_WAIT;
    loop {
        if let Some((pid, _)) = marked(session_id)
            .into_iter()
            .find(|(_, cmd)| cmd.starts_with("sleep 600"))
        {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Bash tool's sleep never ran; marked: {:?}",
            marked(session_id)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pid of the session's agent process, from `getStatus`.
async fn agent_pid(api: &Api, session_id: &str) -> i32 {
    let status = api.call("getStatus", &[], &[], None).await;
    let p = status.body["agent_processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["session_id"] == session_id)
        .unwrap_or_else(|| panic!("no process of {session_id}: {}", status.body));
    p["pid"].as_i64().unwrap() as i32
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: sending a signal has no memory-safety effect.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "signal {sig} to {pid}");
}

/// A task whose agent runs Bash `sleep 600`; (the task, its session id).
async fn task_in_a_sleeping_tool(b: &mut Bench) -> (Value, String) {
    let task = b.task_with_prompt("sleep in a tool").await;
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    b.until("tool.call").await;
    sleeping_tool(&sid).await;
    (task, sid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_to_claude_code_during_a_bash_tool_leaves_no_process_of_the_session() {
    let mut b = Bench::start("s_signals").await;
    let (task, sid) = task_in_a_sleeping_tool(&mut b).await;
    let sleep_pid = sleeping_tool(&sid).await;
    signal(agent_pid(&b.api, &sid).await, libc::SIGTERM);
    let events = b.turn().await;
    let ended = find(&events, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "failed");
    let error = ended["payload"]["error"].as_str().unwrap();
    assert!(
        error.contains("SIGTERM from outside byre"),
        "the failure says why in words: {error}"
    );
    let exited = find(&events, "session.process_exited");
    assert_eq!(exited["payload"]["code"], 143, "{exited}");
    assert!(
        exited["payload"].get("redelivered_input_ids").is_none(),
        "the CLI had answered its message: nothing is handed again"
    );
    assert!(!alive(sleep_pid), "the orphaned tool is gone");
    assert_eq!(marked(&sid), vec![], "no process of the session is left");
    let inbox = b
        .api
        .call(
            "listInbox",
            &[],
            &[("task_id", task["id"].as_str().unwrap())],
            None,
        )
        .await;
    assert_eq!(inbox.body[0]["kind"], "session_error");
    assert_eq!(inbox.body[0]["payload"]["error"], error);
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_during_a_bash_tool_leaves_no_process_of_the_session() {
    let mut b = Bench::start("s_signals").await;
    let (_task, sid) = task_in_a_sleeping_tool(&mut b).await;
    let before = marked(&sid);
    assert!(before.len() >= 2, "the CLI and its tool run: {before:?}");
    b.server.stop().await;
    assert_eq!(
        marked(&sid),
        vec![],
        "nothing of the session outlives the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_kill_9_of_byre_during_a_bash_tool_the_next_start_leaves_no_old_process() {
    let fake = byre_fake_models::FakeAnthropic::fixture("s_signals")
        .await
        .unwrap();
    let bin = claude_bin().await;
    let data = TempDir::new().unwrap();
    let env = [
        ("BYRE_CLAUDE_BIN", bin.to_str().unwrap()),
        ("ANTHROPIC_BASE_URL", fake.url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake-key"),
        ("CLAUDE_CODE_MAX_RETRIES", "2"),
    ];
    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let (_repo, pid) = api.basic_project().await;
    let task = api
        .create_task_with(&pid, json!({"title": "kill", "prompt": "sleep in a tool"}))
        .await;
    let sid = api.first_session_id(task["id"].as_str().unwrap()).await;
    sleeping_tool(&sid).await;
    server.kill_9();
    let left = marked(&sid);
    assert!(
        left.len() >= 2,
        "byre's kill -9 leaves the CLI and its tool running: {left:?}"
    );

    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let still: Vec<&(i32, String)> = left.iter().filter(|(p, _)| alive(*p)).collect();
    assert_eq!(
        still,
        Vec::<&(i32, String)>::new(),
        "the next start killed every process the old session left"
    );
    // The cut turn is resumed by a fresh process.
    let api = Api::for_url(&server.url);
    let mut sse = api
        .events(&[("task_id", task["id"].as_str().unwrap())], None)
        .await;
    let (outcomes, _) = turns(&mut sse, 1).await;
    assert_eq!(
        outcomes,
        ["interrupted"],
        "the cut turn ends as interrupted"
    );
    assert_eq!(server.terminate(), Some(0));
    assert_eq!(marked(&sid), vec![], "and the graceful stop leaves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_when_claude_code_gets_sigint_reaches_the_model_once_and_its_turn_completes(
) {
    let mut b = Bench::start("s_signals").await;
    let (_task, sid) = task_in_a_sleeping_tool(&mut b).await;
    let text = "please handle this, queued while the tool ran";
    let r = b
        .api
        .call("sendMessage", &[&sid], &[], Some(json!({ "text": text })))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let queued = b.until("user.queued").await;
    let input_id = find(&queued, "user.queued")["payload"]["input_id"].clone();
    let old_pid = agent_pid(&b.api, &sid).await;
    // SIGINT from outside byre: the CLI ends its turn as interrupted and exits (code 0).
    signal(old_pid, libc::SIGINT);
    let first = b.turn().await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["outcome"],
        "interrupted"
    );
    let next = b.turn().await;
    assert_eq!(
        find(&next, "user.message")["payload"]["input_id"],
        input_id,
        "the queued message is the next turn"
    );
    let exited = find(&next, "session.process_exited");
    assert_eq!(
        exited["payload"]["redelivered_input_ids"],
        json!([input_id]),
        "the exiting CLI never answered it, so a fresh process got it: {exited}"
    );
    assert_eq!(
        find(&next, "agent.text")["payload"]["text"],
        "Handled the queued message."
    );
    assert_eq!(find(&next, "turn.ended")["payload"]["outcome"], "completed");
    let carrying: Vec<_> = b
        .fake
        .messages_requests()
        .into_iter()
        .filter(|r| r.last_user_text().is_some_and(|t| t.contains(text)))
        .collect();
    assert_eq!(
        carrying.len(),
        1,
        "the message reaches the model exactly once"
    );
    assert_ne!(agent_pid(&b.api, &sid).await, old_pid, "a fresh process");
    assert!(
        marked(&sid)
            .iter()
            .all(|(_, cmd)| !cmd.starts_with("sleep")),
        "the interrupted tool is gone: {:?}",
        marked(&sid)
    );
    b.server.stop().await;
    assert_eq!(marked(&sid), vec![]);
}
