//! Each user's lead agent (issue 16) with the real Claude Code CLI against the fake Messages
//! API (`fixtures/fake-model/l_lead.json`, `r_restart.json`): the lead creates a task, messages
//! its agent, remembers a note and moves its user's pane, none of which another user sees;
//! `show` while the human is drafting; `listLeadEvents`' pages of whole turns; a kill -9 of
//! byre mid-lead-turn.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use byre::config::AuthMode;
use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{local_ada, Api, Sse, SseEvent, TestServer, TOKENS};

/// How long a test waits for the real CLI's turns.
const TURN_WAIT: Duration = Duration::from_secs(120);

async fn claude_bin() -> PathBuf {
    tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI")
}

/// A server (`auth`) whose Claude Code talks to the fake model `script`.
async fn bench(script: &str, auth: AuthMode) -> (TestServer, FakeAnthropic) {
    let fake = FakeAnthropic::fixture(script).await.expect("fake API");
    let bin = claude_bin().await;
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), auth, move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
    })
    .await;
    (server, fake)
}

fn team() -> AuthMode {
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    AuthMode::Token { tokens }
}

/// Events on `sse` until one satisfies `pred` (returned last), within [`TURN_WAIT`].
async fn until(sse: &mut Sse, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<SseEvent> {
    let mut seen: Vec<SseEvent> = Vec::new();
    loop {
        let e = sse.next(TURN_WAIT).await.unwrap_or_else(|| {
            panic!(
                "no {what}; saw {:?}",
                seen.iter()
                    .map(|e| e.data["kind"].clone())
                    .collect::<Vec<_>>()
            )
        });
        let done = pred(&e.data);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

/// `messageLead`, expecting 202; the lead session.
async fn message_lead(api: &Api, text: &str) -> Value {
    let r = api
        .call("messageLead", &[], &[], Some(json!({ "text": text })))
        .await;
    assert_eq!(r.status, 202, "messageLead: {:?}", r.body);
    r.body
}

/// `listLeadEvents` with `query`, expecting 200; (events, more).
async fn lead_events(api: &Api, query: &[(&str, &str)]) -> (Vec<Value>, bool) {
    let r = api.call("listLeadEvents", &[], query, None).await;
    assert_eq!(r.status, 200, "listLeadEvents: {:?}", r.body);
    (
        r.body["events"].as_array().unwrap().clone(),
        r.body["more"].as_bool().unwrap(),
    )
}

fn kinds_of(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

fn n_kind(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

fn is_turn_end_of(d: &Value, session_id: &str) -> bool {
    d["kind"] == "turn.ended" && d["agent_session_id"] == session_id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lead_creates_a_task_messages_its_agent_remembers_and_moves_the_pane_and_another_user_sees_none_of_it(
) {
    let (server, fake) = bench("l_lead", team()).await;
    let ada = server.api_as("ada");
    let bob = server.api_as("bob");
    assert_eq!(bob.get_me().await.status, 200);
    let (_repo, project_id) = ada.basic_project().await;
    let mut bob_sse = bob.events(&[], None).await;
    let mut ada_sse = ada.events(&[("lead", "true")], None).await;

    let lead = message_lead(&ada, "LEAD-SETUP: please set up a greeting task").await;
    assert_eq!(lead["role"], "lead");
    assert_eq!(lead["owner"], "ada");
    assert_eq!(lead["task_id"], "");
    let lead_id = lead["id"].as_str().unwrap().to_owned();

    // The lead's whole turn, on ada's lead stream: its tool calls and the pane's move.
    let seen = until(&mut ada_sse, "the lead's turn end", |d| {
        is_turn_end_of(d, &lead_id)
    })
    .await;
    assert!(
        seen.iter()
            .all(|e| e.data["owner"] == "ada" && e.data["agent_session_id"] == lead_id.as_str()),
        "a lead stream holds only the caller's lead events"
    );
    let tools: Vec<&str> = seen
        .iter()
        .filter(|e| e.data["kind"] == "tool.call")
        .map(|e| e.data["payload"]["name"].as_str().unwrap())
        .collect();
    let results: Vec<&Value> = seen
        .iter()
        .filter(|e| e.data["kind"] == "tool.result")
        .map(|e| &e.data["payload"]["output"])
        .collect();
    assert_eq!(
        tools,
        [
            "mcp__byre__lead_create_task",
            "mcp__byre__lead_message_task",
            "mcp__byre__remember",
            "mcp__byre__show"
        ],
        "the tools' results: {results:?}"
    );
    let failed: Vec<&Value> = seen
        .iter()
        .filter(|e| e.data["kind"] == "tool.result" && e.data["payload"]["is_error"] == true)
        .map(|e| &e.data)
        .collect();
    assert!(failed.is_empty(), "no tool failed: {failed:?}");
    assert_eq!(seen.last().unwrap().data["payload"]["outcome"], "completed");
    let moved = seen
        .iter()
        .find(|e| e.data["kind"] == "focus.updated")
        .expect("show moved the pane");
    assert_eq!(moved.data["owner"], "ada");

    // The task it made, as ada, with its agent on the prompt and the lead's message.
    let tasks = ada.call("listTasks", &[&project_id], &[], None).await.body;
    let task = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Greeting")
        .expect("the lead created the task")
        .clone();
    let task_id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(task["created_by"], "ada", "the lead acts for its user");
    fake.wait_until(|rs| {
        rs.iter().any(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("Also say goodbye") && t.contains("ada's lead agent"))
        })
    })
    .await;
    // Each agent is offered its own role's tools: the lead its lead tools, the task's agent
    // the task tools.
    let offered = |needle: &str| -> Vec<String> {
        let rs = fake.messages_requests();
        let r = rs
            .iter()
            .find(|r| r.last_user_text().is_some_and(|t| t.contains(needle)))
            .unwrap_or_else(|| panic!("no request holds {needle}"));
        r.tool_names()
            .into_iter()
            .filter(|n| n.starts_with("mcp__byre__"))
            .map(str::to_owned)
            .collect()
    };
    let lead_tools = offered("LEAD-SETUP");
    assert!(
        lead_tools.contains(&"mcp__byre__lead_create_task".to_owned()),
        "{lead_tools:?}"
    );
    assert!(
        !lead_tools.contains(&"mcp__byre__ask_human".to_owned()),
        "{lead_tools:?}"
    );
    let task_tools = offered("Say hello to the team");
    assert!(
        task_tools.contains(&"mcp__byre__ask_human".to_owned()),
        "{task_tools:?}"
    );
    assert!(
        task_tools
            .iter()
            .all(|t| !t.contains("lead_") && !t.ends_with("__remember")),
        "{task_tools:?}"
    );
    let focus = ada.call("getFocus", &[], &[], None).await.body;
    assert_eq!(focus["task_id"], task_id.as_str());
    assert_eq!(focus["project_id"], project_id.as_str());
    assert_eq!(focus["tab"], "changes");
    assert_eq!(focus["tabs"], json!(["changes", "transcript"]));

    let notes = ada.call("listLeadNotes", &[], &[], None).await.body;
    assert_eq!(notes.as_array().unwrap().len(), 1, "{notes}");
    assert_eq!(notes[0]["text"], "Ada likes short greetings.");
    let note_id = notes[0]["id"].as_str().unwrap().to_owned();

    // Bob: no notes, no lead events, no sessions; ada's note and lead session are not his.
    assert_eq!(
        bob.call("listLeadNotes", &[], &[], None).await.body,
        json!([])
    );
    assert_eq!(
        bob.call("deleteLeadNote", &[&note_id], &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        bob.call("listLeadSessions", &[], &[], None).await.body,
        json!([])
    );
    assert_eq!(lead_events(&bob, &[]).await, (vec![], false));
    assert_eq!(
        bob.call("getSession", &[&lead_id], &[], None).await.status,
        404
    );
    assert_eq!(
        bob.call("sendMessage", &[&lead_id], &[], Some(json!({"text": "hi"})))
            .await
            .status,
        404
    );
    assert_eq!(
        ada.call("listLeadNotes", &[], &[], None).await.body[0]["id"],
        note_id.as_str(),
        "bob's refused delete left the note"
    );
    // Bob's stream up to an event he causes after all of this: none of ada's lead events.
    let marker = bob.create_task(&project_id, "Marker").await;
    let bob_seen = until(&mut bob_sse, "bob's marker task", |d| {
        d["kind"] == "task.created" && d["task_id"] == marker["id"]
    })
    .await;
    let leaked: Vec<&Value> = bob_seen
        .iter()
        .map(|e| &e.data)
        .filter(|d| d["owner"] == "ada" || d["agent_session_id"] == lead_id.as_str())
        .collect();
    assert!(leaked.is_empty(), "bob saw ada's lead events: {leaked:?}");
    assert!(
        bob_seen
            .iter()
            .any(|e| e.data["kind"] == "task.created" && e.data["task_id"] == task_id.as_str()),
        "the task the lead made is the team's, like any task"
    );
    assert!(
        bob_sse
            .ephemeral
            .iter()
            .all(|d| d["agent_session_id"] != lead_id.as_str()),
        "no delta of ada's lead reached bob"
    );

    // The lead's events, for ada: the turn, with its tool calls.
    let (events, more) = lead_events(&ada, &[]).await;
    assert!(!more);
    assert_eq!(events[0]["kind"], "session.created");
    assert_eq!(n_kind(&events, "tool.call"), 4);
    // Ada deletes the note.
    assert_eq!(
        ada.call("deleteLeadNote", &[&note_id], &[], None)
            .await
            .status,
        204
    );
    assert_eq!(
        ada.call("listLeadNotes", &[], &[], None).await.body,
        json!([])
    );
    assert_eq!(
        ada.call("deleteLeadNote", &[&note_id], &[], None)
            .await
            .status,
        404
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn show_while_the_human_is_drafting_is_refused_and_moves_the_pane_once_they_ask() {
    let (server, _fake) = bench("l_lead", local_ada()).await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let task = api.create_task(&project_id, "Greeting").await;
    let mut sse = api.events(&[("lead", "true")], None).await;
    let r = api
        .call(
            "setPaneFocus",
            &[],
            &[],
            Some(json!({"focused": true, "drafting": true})),
        )
        .await;
    assert_eq!(r.status, 204);

    let lead = message_lead(&api, "LEAD-PEEK: anything new?").await;
    let lead_id = lead["id"].as_str().unwrap().to_owned();
    let seen = until(&mut sse, "the first turn's end", |d| {
        is_turn_end_of(d, &lead_id)
    })
    .await;
    let result = seen
        .iter()
        .find(|e| e.data["kind"] == "tool.result")
        .expect("show's result");
    assert_eq!(result.data["payload"]["is_error"], true);
    assert!(
        result.data["payload"]["output"]
            .as_str()
            .unwrap_or("")
            .contains("the human is busy in the right pane"),
        "{}",
        result.data
    );
    assert!(!seen.iter().any(|e| e.data["kind"] == "focus.updated"));
    assert!(api.call("getFocus", &[], &[], None).await.body["task_id"].is_null());

    message_lead(&api, "LEAD-ASKED: please show me the greeting task").await;
    let seen = until(&mut sse, "the second turn's end", |d| {
        is_turn_end_of(d, &lead_id)
    })
    .await;
    assert!(seen.iter().any(|e| e.data["kind"] == "focus.updated"));
    let focus = api.call("getFocus", &[], &[], None).await.body;
    assert_eq!(focus["task_id"], task["id"]);
    assert_eq!(focus["tab"], "files");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn list_lead_events_pages_back_by_whole_turns() {
    let (server, _fake) = bench("l_lead", local_ada()).await;
    let api = server.api();
    assert_eq!(lead_events(&api, &[]).await, (vec![], false), "no lead yet");
    let mut sse = api.events(&[("lead", "true")], None).await;
    let mut lead_id = String::new();
    for n in 1..=3 {
        let lead = message_lead(&api, &format!("message number {n}")).await;
        lead_id = lead["id"].as_str().unwrap().to_owned();
        until(&mut sse, "a turn end", |d| is_turn_end_of(d, &lead_id)).await;
    }
    let (all, more) = lead_events(&api, &[("turns", "500")]).await;
    assert!(!more);
    assert_eq!(all[0]["kind"], "session.created");
    assert_eq!(n_kind(&all, "turn.ended"), 3);
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert_eq!(lead_events(&api, &[]).await.0, all, "default 50 turns");

    // turns=1 from the end: the last turn; paging back with the first seq gives the one before.
    let (page, more) = lead_events(&api, &[("turns", "1")]).await;
    assert!(more);
    assert_eq!(n_kind(&page, "turn.ended"), 1, "{:?}", kinds_of(&page));
    assert_eq!(page.last(), all.last());
    let at = all.len() - page.len();
    assert_eq!(
        all[at - 1]["kind"],
        "turn.ended",
        "the page starts after a turn end"
    );
    let first = page[0]["seq"].to_string();
    let (page2, more) = lead_events(&api, &[("turns", "1"), ("before", &first)]).await;
    assert!(more);
    assert_eq!(page2, all[at - page2.len()..at].to_vec());
    assert_eq!(n_kind(&page2, "turn.ended"), 1);
    let first = page2[0]["seq"].to_string();
    let (page1, more) = lead_events(&api, &[("turns", "1"), ("before", &first)]).await;
    assert!(!more, "nothing before the first turn");
    assert_eq!(page1[0]["kind"], "session.created");
    assert_eq!(
        [page1.clone(), page2.clone(), page.clone()].concat(),
        all,
        "the pages join up"
    );
    let first = page1[0]["seq"].to_string();
    assert_eq!(
        lead_events(&api, &[("before", &first)]).await,
        (vec![], false)
    );

    // before in the middle of the last turn: that turn's events before it, and one whole turn.
    let middle = page
        .iter()
        .find(|e| e["kind"] == "turn.started")
        .expect("the last turn's start");
    let middle_seq = middle["seq"].as_u64().unwrap();
    let (mid, more) =
        lead_events(&api, &[("turns", "1"), ("before", &middle_seq.to_string())]).await;
    assert!(more);
    assert_eq!(n_kind(&mid, "turn.ended"), 1);
    assert_eq!(mid.last().unwrap()["seq"].as_u64().unwrap(), middle_seq - 1);
    assert_eq!(mid.last().unwrap()["kind"], "user.message");
    assert_eq!(mid[0], page2[0]);

    // A running turn, with no before: included after the last whole turn.
    message_lead(&api, "LEAD-SLOW: think hard").await;
    let (running, more) = lead_events(&api, &[("turns", "1")]).await;
    assert!(more);
    assert_eq!(
        n_kind(&running, "turn.ended"),
        1,
        "{:?}",
        kinds_of(&running)
    );
    let started = running
        .iter()
        .rposition(|e| e["kind"] == "turn.started")
        .unwrap();
    let ended = running
        .iter()
        .rposition(|e| e["kind"] == "turn.ended")
        .unwrap();
    assert!(
        started > ended,
        "the running turn follows the last whole one"
    );
    assert_eq!(running[0], page[0]);

    // turns outside 1–500 is a 400.
    for bad in ["0", "501", "-1", "many"] {
        let r = api
            .call("listLeadEvents", &[], &[("turns", bad)], None)
            .await;
        assert_eq!(r.status, 400, "turns={bad}: {:?}", r.body);
    }
    let sessions = api.call("listLeadSessions", &[], &[], None).await.body;
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["id"], lead_id.as_str());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_kill_9_mid_lead_turn_the_turn_resumes_and_the_held_message_is_delivered_once() {
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
    let lead = message_lead(&api, "long work, please").await;
    let lead_id = lead["id"].as_str().unwrap().to_owned();
    fake.wait_until(|rs| {
        rs.iter()
            .any(|r| r.is_messages() && r.last_user_text().is_some_and(|t| t.contains("long work")))
    })
    .await;
    let held = message_lead(&api, "queued before the kill").await;
    assert_eq!(held["id"], lead_id.as_str(), "held for the same session");
    let (events, _) = lead_events(&api, &[]).await;
    assert_eq!(n_kind(&events, "user.queued"), 1, "{:?}", kinds_of(&events));
    server.kill_9();

    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let mut sse = api.events(&[("lead", "true")], None).await;
    let mut outcomes = Vec::new();
    let mut texts = Vec::new();
    while outcomes.len() < 3 {
        let e = sse
            .next(TURN_WAIT)
            .await
            .unwrap_or_else(|| panic!("turns so far: {outcomes:?} {texts:?}"));
        match e.data["kind"].as_str().unwrap_or("") {
            "turn.ended" => {
                outcomes.push(e.data["payload"]["outcome"].as_str().unwrap().to_owned())
            }
            "agent.text" => texts.push(e.data["payload"]["text"].as_str().unwrap().to_owned()),
            _ => {}
        }
    }
    assert_eq!(outcomes, ["interrupted", "completed", "completed"]);
    assert_eq!(
        texts,
        ["Resumed after the restart.", "Handled the queued message."]
    );
    let (events, _) = lead_events(&api, &[("turns", "500")]).await;
    let delivered = events
        .iter()
        .filter(|e| e["kind"] == "user.message" && e["payload"]["text"] == "queued before the kill")
        .count();
    assert_eq!(delivered, 1, "the held message is handed over once");
    assert!(events.iter().all(|e| e["owner"] == "ada"));
    let asked = fake
        .messages_requests()
        .iter()
        .filter(|r| {
            !r.tool_names().is_empty()
                && r.last_user_text()
                    .is_some_and(|t| t.contains("queued before the kill"))
        })
        .count();
    assert_eq!(asked, 1, "the model got the held message once");
    let sessions = api.call("listLeadSessions", &[], &[], None).await.body;
    assert_eq!(
        sessions.as_array().unwrap().len(),
        1,
        "the same lead session"
    );
    assert_eq!(server.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_sent_to_a_users_lead_its_process_and_its_route_counts_are_theirs_alone() {
    let (server, _fake) = bench("a_text", team()).await;
    let ada = server.api_as("ada");
    let bob = server.api_as("bob");
    let mut bob_sse = bob.events(&[], None).await;
    let mut ada_sse = ada.events(&[], None).await;
    let up = ada
        .call_raw("uploadBlob", &[], "image/png", crate::blobs::PNG.to_vec())
        .await;
    assert_eq!(up.status, 201, "{:?}", up.body);
    let blob_id = up.body["id"].as_str().unwrap().to_owned();
    let r = ada
        .call(
            "messageLead",
            &[],
            &[],
            Some(json!({ "text": "Say hello", "images": [blob_id] })),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let lead_session = r.body["id"].as_str().unwrap().to_owned();
    until(&mut ada_sse, "the lead's turn end", |e| {
        e["kind"] == "turn.ended"
    })
    .await;

    // The image: ada's, not bob's (the same 404 as an unknown blob).
    assert_eq!(
        ada.call("getBlob", &[&blob_id], &[], None).await.status,
        200
    );
    let theirs = bob.call("getBlob", &[&blob_id], &[], None).await;
    assert_eq!(theirs.status, 404, "{:?}", theirs.body);

    // The lead's process and turns: in ada's getStatus, not in bob's.
    let names_lead = |status: &Value| {
        ["agent_processes", "running_turns"].iter().any(|k| {
            status[*k]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["session_id"] == lead_session.as_str())
        })
    };
    let ada_status = ada.call("getStatus", &[], &[], None).await.body;
    assert!(names_lead(&ada_status), "{ada_status}");
    let bob_status = bob.call("getStatus", &[], &[], None).await.body;
    assert!(!names_lead(&bob_status), "{bob_status}");
    assert_eq!(bob_status["live_agents"], 0, "{bob_status}");

    // /metrics counts no per-user route (how often ada messaged her lead), for anyone.
    for api in [&ada, &bob] {
        let (status, _, text) = api.get_path("/metrics").await;
        assert_eq!(status, 200);
        assert!(!text.contains("route=\"/api/me"), "{text}");
    }
    let (_, _, ada_metrics) = ada.get_path("/metrics").await;
    assert!(ada_metrics.contains("vendor=\"claude\""), "{ada_metrics}");
    let (_, _, bob_metrics) = bob.get_path("/metrics").await;
    assert!(
        !bob_metrics.contains("vendor=\"claude\""),
        "bob's figures count no process of ada's lead: {bob_metrics}"
    );

    // bob's stream never carried the upload: a later event of his own comes first.
    let (_repo, _project) = bob.basic_project().await;
    let seen = until(&mut bob_sse, "bob's project", |e| {
        e["kind"] == "project.created"
    })
    .await;
    assert!(
        seen.iter().all(|e| e.data["kind"] != "blob.uploaded"),
        "{:?}",
        seen.iter()
            .map(|e| e.data["kind"].clone())
            .collect::<Vec<_>>()
    );
    server.stop().await;
}
