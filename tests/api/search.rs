//! `searchAll` (byre's extension) and its index: built from the log, rebuilt when deleted,
//! caught up after `kill -9`, owner-only items found only by their owner, bad queries 400.

use std::path::Path;

use byre_projections::sessions::{AgentText, VendorItem};
use byre_projections::Command;
use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{append_offline, team_auth as team, turn_ended, Api, TestServer};
use crate::process::ServeProcess;

/// A stopped team server's data dir whose log holds a project, a task "Fix the walrus
/// login", its session's prompt (pelican) and agent text (narwhal), and ada's lead agent's
/// message (octopus); the index has never seen any of it but the project and the task.
struct Seeded {
    data: TempDir,
    _repo: TempDir,
    project_id: String,
    task_id: String,
}

async fn seeded() -> Seeded {
    let server = TestServer::spawn_team().await;
    let api = server.api_as("ada");
    let (repo, project_id) = api.basic_project().await;
    let task = api.create_task(&project_id, "Fix the walrus login").await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let data = server.stop().await;
    let created = append_offline(
        data.path(),
        vec![
            Command::CreateSession {
                actor: "ada".into(),
                task_id: task_id.clone().into(),
                model: None,
                prompt: "Make the pelican page load faster".into(),
                images: vec![],
                head: String::new(),
            },
            Command::MessageLead {
                login: "ada".into(),
                text: "remember the octopus plan".into(),
                images: vec![],
                model: None,
            },
        ],
    )
    .await;
    let session_of = |events: &Vec<byre_projections::Event>| {
        events
            .iter()
            .find_map(|e| e.agent_session_id.clone())
            .expect("a session's events")
    };
    let (session, lead) = (session_of(&created[0]), session_of(&created[1]));
    append_offline(
        data.path(),
        vec![
            Command::RecordVendorOutput {
                session_id: session,
                items: vec![
                    VendorItem::Text(AgentText {
                        cut: None,
                        text: "I moved the narwhal cache out of the <b>request</b> path.".into(),
                        message_id: "msg_1".into(),
                        raw: String::new(),
                    }),
                    VendorItem::TurnEnded(turn_ended()),
                ],
            },
            Command::RecordVendorOutput {
                session_id: lead,
                items: vec![VendorItem::TurnEnded(turn_ended())],
            },
        ],
    )
    .await;
    Seeded {
        data,
        _repo: repo,
        project_id,
        task_id,
    }
}

async fn search(api: &Api, query: &[(&str, &str)]) -> Value {
    let r = api.call("searchAll", &[], query, None).await;
    assert_eq!(r.status, 200, "searchAll {query:?}: {:?}", r.body);
    assert_eq!(r.body["complete"], true, "{:?}", r.body);
    r.body
}

/// The matched words of an item's snippet.
fn marked(item: &Value) -> Vec<String> {
    item["snippet"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["hit"] == true)
        .map(|p| p["text"].as_str().unwrap().to_lowercase())
        .collect()
}

fn private_mode(dir: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(dir).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn search_finds_titles_prompts_and_agent_text_indexed_from_the_log() {
    let s = seeded().await;
    let server = TestServer::spawn_on(s.data, team()).await;
    let ada = server.api_as("ada");

    let found = search(&ada, &[("q", "walrus")]).await;
    assert_eq!(found["tasks"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["tasks"][0]["task_id"], s.task_id.as_str());
    assert_eq!(found["tasks"][0]["title"], "Fix the walrus login");
    assert_eq!(found["tasks"][0]["status"], "active");

    let found = search(&ada, &[("q", "pelican")]).await;
    let item = &found["items"][0];
    assert_eq!(item["kind"], "user.message", "{found}");
    assert_eq!(item["task_id"], s.task_id.as_str());
    assert_eq!(item["task_title"], "Fix the walrus login");
    assert_eq!(marked(item), ["pelican"]);

    // The item's seq is the event's: listTaskEvents has an agent.text there.
    let found = search(
        &ada,
        &[("q", "narwhal cache"), ("project_id", &s.project_id)],
    )
    .await;
    let item = &found["items"][0];
    assert_eq!(item["kind"], "agent.text", "{found}");
    assert_eq!(marked(item), ["narwhal", "cache"]);
    let text: String = item["snippet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert!(
        text.contains("<b>request</b>"),
        "snippets are plain text: {text}"
    );
    let events = ada
        .call("listTaskEvents", &[&s.task_id], &[("limit", "1000")], None)
        .await;
    let at = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["seq"] == item["seq"]);
    assert_eq!(at.map(|e| e["kind"].clone()), Some("agent.text".into()));

    // Every word must match; a project filter narrows.
    let found = search(&ada, &[("q", "narwhal walrus")]).await;
    assert!(found["items"].as_array().unwrap().is_empty(), "{found}");
    let r = ada
        .call(
            "searchAll",
            &[],
            &[("q", "walrus"), ("project_id", "nope")],
            None,
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);

    // Kept from now on: a new task is found by the next search.
    let task = ada
        .create_task(&s.project_id, "Teach the heron to sing")
        .await;
    let found = search(&ada, &[("q", "heron")]).await;
    assert_eq!(found["tasks"][0]["task_id"], task["id"], "{found}");
    assert_eq!(private_mode(&server.data.path().join("search")), 0o700);
}

#[tokio::test]
async fn an_index_deleted_while_stopped_is_rebuilt_at_start_up() {
    let s = seeded().await;
    let server = TestServer::spawn_on(s.data, team()).await;
    search(&server.api_as("ada"), &[("q", "narwhal")]).await;
    let data = server.stop().await;
    std::fs::remove_dir_all(data.path().join("search")).unwrap();
    let server = TestServer::spawn_on(data, team()).await;
    let found = search(&server.api_as("ada"), &[("q", "narwhal")]).await;
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["items"][0]["task_id"], s.task_id.as_str());
}

#[tokio::test]
async fn a_kill_9_between_events_is_caught_up_at_the_next_start() {
    let data = TempDir::new().unwrap();
    let server = ServeProcess::start(data.path());
    let api = Api::for_url(&server.url);
    let (_repo, project_id) = api.basic_project().await;
    let first = api.create_task(&project_id, "Fix the walrus login").await;
    // Indexed and committed before the kill.
    assert_eq!(
        search(&api, &[("q", "walrus")]).await["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    server.kill_9();
    // Written while byre is down: only the log has it.
    let created = append_offline(
        data.path(),
        vec![Command::CreateTask {
            actor: "ada".into(),
            project_id: project_id.clone().into(),
            title: "Catch the walrus heron".into(),
            base_ref: first["base_ref"].as_str().unwrap().to_owned(),
        }],
    )
    .await;
    assert!(!created[0].is_empty());
    let server = ServeProcess::start(data.path());
    let api = Api::for_url(&server.url);
    let found = search(&api, &[("q", "walrus")]).await;
    let titles: Vec<&str> = found["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 2, "each task once: {found}");
    assert!(titles.contains(&"Catch the walrus heron"), "{found}");
    server.kill_9();
}

#[tokio::test]
async fn a_lead_s_items_are_found_only_by_its_owner() {
    let s = seeded().await;
    let server = TestServer::spawn_on(s.data, team()).await;
    let found = search(&server.api_as("ada"), &[("q", "octopus")]).await;
    let item = &found["items"][0];
    assert_eq!(item["lead"], true, "{found}");
    assert_eq!(item["kind"], "user.message");
    assert!(item.get("task_id").is_none());
    let found = search(&server.api_as("bob"), &[("q", "octopus")]).await;
    assert!(found["items"].as_array().unwrap().is_empty(), "{found}");
    // What everyone may see, bob finds too.
    let found = search(&server.api_as("bob"), &[("q", "narwhal")]).await;
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
}

#[tokio::test]
async fn a_bad_query_is_a_400_with_a_message() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let long = "walrus ".repeat(100);
    let cases: [(&[(&str, &str)], &str); 7] = [
        (&[], "q"),
        (&[("q", "")], "empty"),
        (&[("q", "   ")], "empty"),
        (&[("q", &long)], "bytes"),
        (&[("q", "title:(walrus")], "not a query"),
        (&[("q", "walrus"), ("limit", "0")], "limit"),
        (&[("q", "walrus"), ("limit", "51")], "limit"),
    ];
    for (query, says) in cases {
        let r = api.call("searchAll", &[], query, None).await;
        assert_eq!(r.status, 400, "{query:?}: {:?}", r.body);
        assert!(r.message().contains(says), "{query:?}: {:?}", r.body);
    }
}
