//! However the real Claude Code CLI ends — SIGTERM or SIGINT from outside byre, byre's
//! graceful stop, a kill -9 of byre and the next start — no process of its session is left
//! (found by the `BYRE_AGENT_SESSION` marker in `/proc/*/environ`, as byre itself finds
//! them), a message handed to a CLI on its way out reaches the model exactly once, and a turn
//! byre's stop cut short is resumed, queued messages after it in order. The fake model runs
//! `fixtures/fake-model/s_signals.json` ("sleep in a tool" makes the CLI run Bash
//! `sleep 600`) or `r_restart.json`.

use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use byre_fake_models::FakeAnthropic;

use crate::claude::{claude_bin, Bench, TURN_WAIT};
use crate::helpers::{find, local_ada, Api, Sse, TestServer, WAIT};

/// The pids of live (not zombie) processes whose environment marks them as session
/// `session_id`'s (`BYRE_AGENT_SESSION=<id>`), with their command lines.
pub(crate) fn marked(session_id: &str) -> Vec<(i32, String)> {
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

/// The pid of the session's CLI itself: byre's process is the sandbox's `bwrap`, which runs
/// the CLI under a `bwrap` of its own (pid 1 of the sandbox); a signal to `bwrap` ends the
/// sandbox rather than reaching the CLI. Unconfined, the CLI is byre's process.
async fn cli_pid(api: &Api, session_id: &str) -> i32 {
    let top = agent_pid(api, session_id).await;
    let is_bwrap = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .next()
            .is_some_and(|argv0| argv0.ends_with(b"bwrap"))
    };
    if !is_bwrap(top) {
        return top;
    }
    let parent = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(1)?
                    .parse::<i32>()
                    .ok()
            })
    };
    marked(session_id)
        .into_iter()
        .map(|(pid, _)| pid)
        .find(|&pid| !is_bwrap(pid) && parent(pid).is_some_and(&is_bwrap))
        .unwrap_or_else(|| panic!("no CLI under {top}: {:?}", marked(session_id)))
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
    signal(cli_pid(&b.api, &sid).await, libc::SIGTERM);
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
async fn a_kill_9_of_byre_during_a_bash_tool_takes_the_sandboxed_session_down_with_it() {
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
    // bwrap's --die-with-parent: the sandbox, the CLI and its tool end with byre.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !marked(&sid).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "left running after byre's kill -9: {:?}",
            marked(&sid)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Unconfined (`BYRE_SANDBOX=off`), what a killed byre leaves is found and killed by the next
/// start (`reaper::clear_leftovers`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_kill_9_of_byre_during_a_bash_tool_the_next_start_leaves_no_old_process() {
    let fake = byre_fake_models::FakeAnthropic::fixture("s_signals")
        .await
        .unwrap();
    let bin = claude_bin().await;
    let data = TempDir::new().unwrap();
    let env = [
        ("BYRE_SANDBOX", "off"),
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
    signal(cli_pid(&b.api, &sid).await, libc::SIGINT);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_mid_turn_the_session_resumes_and_queued_messages_follow_in_order() {
    let fake = FakeAnthropic::fixture("r_restart").await.unwrap();
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
        .create_task_with(&pid, json!({"title": "restart", "prompt": "long work"}))
        .await;
    let tid = task["id"].as_str().unwrap().to_owned();
    fake.wait_until(|rs| {
        rs.iter()
            .any(|r| r.is_messages() && r.last_user_text().is_some_and(|t| t.contains("long work")))
    })
    .await;
    let sid = api.first_session_id(&tid).await;
    assert_eq!(
        api.call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "queued before the kill"}))
        )
        .await
        .status,
        202
    );
    let status = api.call("getStatus", &[], &[], None).await;
    let old_pid = status.body["agent_processes"][0]["pid"].as_i64().unwrap() as i32;
    server.kill_9();

    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    assert!(
        !alive(old_pid),
        "the old server's agent process is gone (or a zombie awaiting init)"
    );
    let mut sse = api.events(&[("task_id", &tid)], None).await;
    let (ends, texts) = turns(&mut sse, 3).await;
    assert_eq!(
        ends,
        ["interrupted", "completed", "completed"],
        "the cut turn, the resumed one, the queued one"
    );
    assert_eq!(
        texts,
        ["Resumed after the restart.", "Handled the queued message."]
    );
    let status = api.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["zombies"], json!([]));
    let requests = fake.messages_requests();
    let resumed = requests
        .iter()
        .find(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("byre restarted"))
        })
        .unwrap();
    let resumed_text = resumed.last_user_text().unwrap();
    assert!(
        resumed_text.contains(&format!(
            "{}\n\nlong work",
            byre_projections::sessions::RESENT_NOTE
        )),
        "the cut turn's message, unanswered, is handed over again: {resumed_text}"
    );
    assert_eq!(
        resumed.session_id(),
        Some(sid_vendor(&api, &sid).await.as_str()),
        "resumed under the same vendor session"
    );
    assert_eq!(server.terminate(), Some(0));
    let _ = WAIT;
}

async fn sid_vendor(api: &Api, sid: &str) -> String {
    api.call("getSession", &[sid], &[], None).await.body["vendor_session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_mid_turn_resumes_the_turn_at_the_next_start() {
    let fake = FakeAnthropic::fixture("r_restart").await.unwrap();
    let bin = claude_bin().await;
    let configure = |bin: std::path::PathBuf, url: String| {
        move |c: &mut byre::config::Config| {
            c.claude_bin = Some(bin);
            c.agent_env = vec![
                ("ANTHROPIC_BASE_URL".into(), url),
                ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ];
        }
    };
    let server = TestServer::spawn_configured(
        TempDir::new().unwrap(),
        local_ada(),
        configure(bin.clone(), fake.url.clone()),
    )
    .await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let task = api
        .call(
            "createTask",
            &[&pid],
            &[],
            Some(json!({"title": "stop", "prompt": "long work"})),
        )
        .await
        .body;
    let tid = task["id"].as_str().unwrap().to_owned();
    fake.wait_until(|rs| {
        rs.iter()
            .any(|r| r.is_messages() && r.last_user_text().is_some_and(|t| t.contains("long work")))
    })
    .await;
    let data = server.stop().await;
    let log = byre_log::store::ReadOnlyStore::open(&data.path().join("byre.redb")).unwrap();
    let mut kinds = Vec::new();
    log.for_each(1, u64::MAX, |e| {
        kinds.push(e.kind);
        true
    })
    .unwrap();
    assert!(
        !kinds.iter().any(|k| k == "turn.ended"),
        "a graceful stop leaves the turn running: {kinds:?}"
    );
    drop(log);
    let server =
        TestServer::spawn_configured(data, local_ada(), configure(bin, fake.url.clone())).await;
    let mut sse = server.api().events(&[("task_id", &tid)], None).await;
    let (outcomes, texts) = turns(&mut sse, 2).await;
    assert_eq!(outcomes, ["interrupted", "completed"]);
    assert_eq!(texts, ["Resumed after the restart."]);
    server.stop().await;
}

/// The outcomes of the next `n` turns on `sse`, and the agent texts seen meanwhile.
async fn turns(sse: &mut Sse, n: usize) -> (Vec<String>, Vec<String>) {
    let (mut outcomes, mut texts) = (Vec::new(), Vec::new());
    while outcomes.len() < n {
        let e = sse
            .next(TURN_WAIT)
            .await
            .unwrap_or_else(|| panic!("turns so far: {outcomes:?} {texts:?}"));
        match e.data["kind"].as_str().unwrap_or("") {
            "turn.ended" => outcomes.push(
                e.data["payload"]["outcome"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            ),
            "agent.text" => texts.push(e.data["payload"]["text"].as_str().unwrap_or("").to_owned()),
            _ => {}
        }
    }
    (outcomes, texts)
}
