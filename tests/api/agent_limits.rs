//! Many agents on one machine (README "Many agents on one machine"): the memory floor holds a
//! new agent process back while the machine's available memory is below it (read here from a
//! fake meminfo file the test writes), and an agent process idle for `idle_stop` is stopped,
//! its next message resuming the conversation in a fresh process. The real Claude Code and
//! Codex CLIs against the project's fake model servers.

use std::path::Path;
use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::{claude_bin, TURN_WAIT};
use crate::helpers::{find, kinds, local_ada, until_kind, Api, Sse, SseEvent, TestServer};

/// A server whose Claude Code talks to `fake`, its agent limits set by `limits`.
async fn claude_server(
    fake: &FakeAnthropic,
    limits: impl FnOnce(&mut byre_agents::AgentLimits),
) -> TestServer {
    let bin = claude_bin().await;
    let url = fake.url.clone();
    TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
        limits(&mut c.agents);
    })
    .await
}

/// Writes a `/proc/meminfo`-shaped file saying `available_mib` MiB are available (written
/// whole to a temporary file, then renamed over it, so a reader never sees half).
fn write_meminfo(path: &Path, available_mib: u64) {
    let kib = available_mib * 1024;
    let text = format!(
        "MemTotal:       24683440 kB\nMemFree:          {kib} kB\nMemAvailable:   {kib} kB\nBuffers:            1024 kB\n"
    );
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The agent processes `getStatus` lists for `session_id` (each with its pid).
async fn processes_of(api: &Api, session_id: &str) -> Vec<Value> {
    let status = api.call("getStatus", &[], &[], None).await;
    assert_eq!(status.status, 200, "{:?}", status.body);
    status.body["agent_processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["session_id"] == session_id)
        .cloned()
        .collect()
}

/// The events of `sse` up to the next of `kind` for `session_id`.
async fn until_of(sse: &mut Sse, kind: &str, session_id: &str) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        let mut more = until_kind(sse, kind, TURN_WAIT).await;
        let done = more
            .last()
            .is_some_and(|e| e.data["agent_session_id"] == session_id);
        seen.append(&mut more);
        if done {
            return seen;
        }
    }
}

/// Whether process `pid` still runs (not a zombie).
fn runs(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_claude_code_process_is_stopped_and_the_next_message_resumes_its_conversation() {
    let fake = FakeAnthropic::fixture("c_two_turns").await.unwrap();
    let server = claude_server(&fake, |a| a.idle_stop = Duration::from_secs(2)).await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "idle", "prompt": "first question"}),
        )
        .await;
    let sid = api.first_session_id(task["id"].as_str().unwrap()).await;
    let first = until_of(&mut sse, "turn.ended", &sid).await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["result"],
        "Answer one."
    );

    // No turn for 2 s: byre stops the process, saying so, and the session stays idle.
    let stopped = until_of(&mut sse, "session.process_exited", &sid).await;
    let exit = &stopped.last().unwrap().data["payload"];
    assert_eq!(exit["idle_ms"], 2000, "{exit}");
    let pid = exit["pid"].as_i64().unwrap();
    assert!(pid > 0, "{exit}");
    assert!(
        exit["reason"]
            .as_str()
            .unwrap()
            .contains("the next message resumes the conversation"),
        "{exit}"
    );
    assert!(
        !kinds(&stopped).contains(&"turn.ended".to_owned()),
        "no turn ends with it: {:?}",
        kinds(&stopped)
    );
    assert!(!runs(pid), "the idle CLI is gone");
    assert!(processes_of(&api, &sid).await.is_empty());
    let session = api.call("getSession", &[&sid], &[], None).await.body;
    assert_eq!(session["state"], "idle", "{session}");

    // The next message starts a fresh process that resumes the conversation.
    let r = api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "second question"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let second = until_of(&mut sse, "turn.ended", &sid).await;
    let ended = find(&second, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    assert_eq!(ended["payload"]["result"], "Answer two.");
    assert_eq!(ended["payload"]["turn"], 2);
    // The fake's request for the second answer carries the first exchange: the conversation
    // was resumed, not started over.
    let asked: Vec<_> = fake
        .messages_requests()
        .into_iter()
        .filter(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("second question"))
        })
        .collect();
    assert_eq!(asked.len(), 1, "the second message reached the model once");
    let history = asked[0].body.as_ref().unwrap()["messages"].to_string();
    assert!(history.contains("first question"), "{history}");
    assert!(history.contains("Answer one."), "{history}");
    let inbox = api.call("listInbox", &[], &[], None).await;
    assert_eq!(inbox.body, json!([]), "the human was asked nothing");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_the_memory_floor_a_new_agent_waits_and_starts_when_memory_frees() {
    let fake = FakeAnthropic::fixture("a_text").await.unwrap();
    let dir = TempDir::new().unwrap();
    let meminfo = dir.path().join("meminfo");
    write_meminfo(&meminfo, 100);
    let path = meminfo.clone();
    let server = claude_server(&fake, move |a| {
        a.memory_floor_bytes = 512 << 20;
        a.meminfo = path;
        a.admission_poll = Duration::from_millis(200);
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let first = api
        .create_task_with(&project_id, json!({"title": "one", "prompt": "Say hello"}))
        .await;
    let first_sid = api.first_session_id(first["id"].as_str().unwrap()).await;
    let deferred = until_of(&mut sse, "session.process_deferred", &first_sid).await;
    let held = &deferred.last().unwrap().data;
    assert_eq!(held["task_id"], first["id"]);
    assert_eq!(
        held["payload"],
        json!({"available_bytes": 100u64 << 20, "floor_bytes": 512u64 << 20, "n_ahead": 0})
    );
    // A second start queues behind the first.
    let second = api
        .create_task_with(&project_id, json!({"title": "two", "prompt": "Say hello"}))
        .await;
    let second_sid = api.first_session_id(second["id"].as_str().unwrap()).await;
    let deferred = until_of(&mut sse, "session.process_deferred", &second_sid).await;
    assert_eq!(deferred.last().unwrap().data["payload"]["n_ahead"], 1);
    // Both wait: no CLI has called the model, the tasks show a running turn.
    assert!(fake.messages_requests().is_empty());
    let task = api
        .call("getTask", &[first["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(task.body["state"], "running");
    let (status, _, metrics) = api.get_path("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.lines().any(|l| l == "byre_agent_starts_waiting 2"),
        "{metrics}"
    );

    write_meminfo(&meminfo, 2048);
    // Both start and their turns complete (in either order; the script answers its step
    // once, the other "ok").
    let mut ended: Vec<SseEvent> = Vec::new();
    while ended.len() < 2 {
        let mut seen = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
        ended.extend(seen.pop());
    }
    let mut sessions: Vec<&str> = ended
        .iter()
        .map(|e| e.data["agent_session_id"].as_str().unwrap())
        .collect();
    sessions.sort_unstable();
    let mut expected = [first_sid.as_str(), second_sid.as_str()];
    expected.sort_unstable();
    assert_eq!(sessions, expected);
    for e in &ended {
        assert_eq!(e.data["payload"]["outcome"], "completed", "{:?}", e.data);
    }
    assert!(fake
        .messages_requests()
        .iter()
        .any(|r| r.last_user_text().is_some_and(|t| t.contains("Say hello"))));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_while_the_agent_waits_for_memory_ends_the_turn_as_interrupted() {
    let fake = FakeAnthropic::fixture("a_text").await.unwrap();
    let dir = TempDir::new().unwrap();
    let meminfo = dir.path().join("meminfo");
    write_meminfo(&meminfo, 100);
    let path = meminfo.clone();
    let server = claude_server(&fake, move |a| {
        a.memory_floor_bytes = 512 << 20;
        a.meminfo = path;
        a.admission_poll = Duration::from_millis(200);
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(&project_id, json!({"title": "one", "prompt": "Say hello"}))
        .await;
    let sid = api.first_session_id(task["id"].as_str().unwrap()).await;
    until_of(&mut sse, "session.process_deferred", &sid).await;
    let r = api.call("interruptSession", &[&sid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let turn = until_of(&mut sse, "turn.ended", &sid).await;
    let ended = &turn.last().unwrap().data["payload"];
    assert_eq!(ended["outcome"], "interrupted", "{ended}");
    assert!(fake.messages_requests().is_empty(), "the CLI never started");
    let inbox = api.call("listInbox", &[], &[], None).await;
    assert_eq!(inbox.body, json!([]), "an interrupt is no session error");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_codex_process_is_stopped_and_the_next_message_resumes_its_thread() {
    let fake = FakeOpenAi::fixture("codex_c_two_turns").await.unwrap();
    let bin = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
        .await
        .unwrap();
    let env = vec![
        ("OPENAI_BASE_URL".to_owned(), fake.base_url()),
        ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
        ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
        ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
    ];
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.codex_bin = Some(bin);
        c.agent_env = env;
        c.agents.idle_stop = Duration::from_secs(2);
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let body = json!({"title": "idle", "prompt": "The first question.", "model": "gpt-5.5"});
    let task = api.create_task_with(&project_id, body).await;
    let sid = api.first_session_id(task["id"].as_str().unwrap()).await;
    let first = until_of(&mut sse, "turn.ended", &sid).await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["result"],
        "Answer one."
    );
    let thread = api.call("getSession", &[&sid], &[], None).await.body["vendor_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stopped = until_of(&mut sse, "session.process_exited", &sid).await;
    assert_eq!(stopped.last().unwrap().data["payload"]["idle_ms"], 2000);
    assert!(processes_of(&api, &sid).await.is_empty());

    let r = api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "The third question."})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let second = until_of(&mut sse, "turn.ended", &sid).await;
    let ended = find(&second, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    assert_eq!(ended["payload"]["result"], "Answer three.");
    let calls = fake.responses_requests();
    let last = calls.last().unwrap();
    assert_eq!(last.thread_id(), Some(thread.as_str()), "the same thread");
    let history = last.body.as_ref().unwrap()["input"].to_string();
    assert!(history.contains("Answer one."), "{history}");
    server.stop().await;
}
