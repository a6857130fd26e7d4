//! CodeBolt's `agentEvent` family with the real `@codebolt/codeboltjs@1.1.99` client: the
//! `boss` fixture (`fixtures/codebolt/agents/`) lists, details and finds the agents byre can
//! run, is told when a started agent's turn fails (`crasher`), then starts `scribe` through
//! `startAgent`, which runs as a new task, writes a file in its own worktree and finishes;
//! the boss gets its result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use byre::config::AuthMode;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{kinds, make_repo, SseEvent, TestServer};

const TURN_WAIT: Duration = Duration::from_secs(90);

fn agents_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/agents")
}

fn of_kind<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.data["kind"] == kind)
        .map(|e| &e.data)
        .collect()
}

fn texts_of(events: &[SseEvent], task_id: &str) -> Vec<String> {
    of_kind(events, "agent.text")
        .into_iter()
        .filter(|e| e["task_id"] == task_id)
        .map(|e| e["payload"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// A server whose agents directory is the fixture agents', with a project; its id.
async fn bench() -> (TestServer, String, TempDir) {
    bench_with(Vec::new()).await
}

/// As [`bench`], with `more_agents` directories of agents besides the fixture agents.
async fn bench_with(more_agents: Vec<PathBuf>) -> (TestServer, String, TempDir) {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let data = TempDir::new().expect("data dir");
    let server = TestServer::spawn_configured(
        data,
        AuthMode::Local {
            login: "ada".into(),
        },
        move |c| {
            c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())];
            // The fixture agents are the agents directory (`serve --codebolt-agents`).
            c.codebolt_agents = vec![agents_fixture()];
            c.codebolt_agents.extend(more_agents);
        },
    )
    .await;
    let repo = make_repo("basic");
    let project_id = server.api().create_project("basic", repo.path()).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (server, project_id, repo)
}

#[tokio::test]
async fn a_codebolt_agent_lists_finds_and_starts_another_agent_on_a_new_linked_task() {
    let (server, project_id, _repo) = bench().await;
    let api = server.api();
    let mut sse = api.events(&[], None).await;
    let r = api
        .call(
            "createTask",
            &[&project_id],
            &[],
            Some(json!({"title": "boss task", "prompt": "Put hi in hello.txt", "model": "codebolt:boss"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let parent = r.body;
    let parent_id = parent["id"].as_str().unwrap().to_owned();

    // Until the boss's own turn ends (the scribe's turn ends before it).
    let mut events = Vec::new();
    loop {
        let e = sse
            .next(TURN_WAIT)
            .await
            .unwrap_or_else(|| panic!("no turn end of the boss; saw {:?}", kinds(&events)));
        let done = e.data["kind"] == "turn.ended" && e.data["task_id"] == parent_id.as_str();
        events.push(e);
        if done {
            break;
        }
    }
    let texts = texts_of(&events, &parent_id);
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(
        has("agents: boss,crasher,leaver,scribe,waiter"),
        "{texts:?}"
    );
    // By unique_id; the unknown name is left out.
    assert!(has("detail: scribe=File Scribe"), "{texts:?}");
    // Only the scribe shares words with the task.
    assert!(has("found: scribe"), "{texts:?}");
    assert!(has("unknown: false nobody"), "{texts:?}");
    // A sub-agent whose turn fails: the reply says so, with the matching agentId.
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("crasher: false crasher ")
                && t.contains("`crasher`'s turn ended failed")),
        "{texts:?}"
    );
    assert!(
        has("sub-agent said: true scribe wrote hello.txt"),
        "{texts:?} {:?}",
        kinds(&events)
    );
    let ended = of_kind(&events, "turn.ended");
    let boss_end = ended.last().unwrap();
    assert_eq!(boss_end["payload"]["outcome"], "completed");
    assert_eq!(boss_end["payload"]["result"], "boss finished");

    // The link: one new task, made for the scribe, tied to the boss's task and session.
    // The links: one new task per started agent (none for the unknown one), tied to the
    // boss's task and session.
    let links = of_kind(&events, "task.subtask_started");
    assert_eq!(links.len(), 2, "{:?}", kinds(&events));
    assert_eq!(links[0]["payload"]["agent"], "crasher");
    let link = links[1];
    let child_id = link["task_id"].as_str().unwrap().to_owned();
    assert_ne!(child_id, parent_id);
    assert_eq!(link["payload"]["task_id"], child_id.as_str());
    assert_eq!(link["payload"]["parent_task_id"], parent_id.as_str());
    assert_eq!(link["payload"]["agent"], "scribe");
    let boss_session = of_kind(&events, "session.created")
        .into_iter()
        .find(|e| e["task_id"] == parent_id.as_str())
        .unwrap()["agent_session_id"]
        .clone();
    assert_eq!(link["payload"]["parent_session_id"], boss_session);
    let created: Vec<_> = of_kind(&events, "task.created")
        .into_iter()
        .filter(|e| e["task_id"] == child_id.as_str())
        .collect();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["payload"]["title"], "Put hi in hello.txt");
    assert_eq!(created[0]["project_id"], project_id.as_str());

    // The scribe's turn: its message was the task text; it completed with its result.
    let child_msgs: Vec<_> = of_kind(&events, "user.message")
        .into_iter()
        .filter(|e| e["task_id"] == child_id.as_str())
        .collect();
    assert_eq!(child_msgs.len(), 1);
    assert_eq!(child_msgs[0]["payload"]["text"], "Put hi in hello.txt");
    let child_end = ended
        .iter()
        .find(|e| e["task_id"] == child_id.as_str())
        .expect("the scribe's turn ended");
    assert_eq!(child_end["payload"]["result"], "scribe wrote hello.txt");
    assert_eq!(texts_of(&events, &child_id), ["wrote hello.txt"]);

    // The new task is listed with its codebolt session; the file is in ITS worktree only.
    let tasks = api.call("listTasks", &[&project_id], &[], None).await;
    assert_eq!(tasks.status, 200);
    let child = tasks
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == child_id.as_str())
        .expect("the new task is listed")
        .clone();
    assert_eq!(child["title"], "Put hi in hello.txt");
    let sessions = api.call("listSessions", &[&child_id], &[], None).await;
    assert_eq!(sessions.body[0]["model"], "codebolt:scribe");
    assert_eq!(sessions.body[0]["vendor"], "codebolt");
    let child_tree = Path::new(child["worktree_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(child_tree.join("hello.txt")).unwrap(),
        "Put hi in hello.txt\n"
    );
    let parent_tree = Path::new(parent["worktree_path"].as_str().unwrap());
    assert!(!parent_tree.join("hello.txt").exists());

    // The boss's startAgent calls are tool calls with their replies.
    let results: Vec<_> = of_kind(&events, "tool.result")
        .into_iter()
        .filter(|e| e["task_id"] == parent_id.as_str())
        .map(|e| e["payload"].to_string())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("scribe wrote hello.txt")),
        "{results:?}"
    );
    assert!(
        results.iter().any(|r| r.contains("no CodeBolt agent")),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_caller_that_drops_its_socket_gets_no_wait_and_the_started_task_goes_on() {
    let (server, project_id, _repo) = bench().await;
    let api = server.api();
    let mut sse = api.events(&[], None).await;
    let r = api
        .call(
            "createTask",
            &[&project_id],
            &[],
            Some(json!({"title": "leaver task", "prompt": "go", "model": "codebolt:leaver"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let parent_id = r.body["id"].as_str().unwrap().to_owned();
    // The startAgent is answered with an error once the caller's socket is gone, although
    // the waiter's turn still waits for its question.
    let events = sse
        .until("the startAgent's failed reply", |e| {
            e.data["kind"] == "tool.result"
                && e.data["task_id"] == parent_id.as_str()
                && e.data["payload"]
                    .to_string()
                    .contains("the calling agent disconnected")
        })
        .await;
    let links = of_kind(&events, "task.subtask_started");
    assert_eq!(links.len(), 1, "{:?}", kinds(&events));
    assert_eq!(links[0]["payload"]["agent"], "waiter");
    assert_eq!(links[0]["payload"]["parent_task_id"], parent_id.as_str());
    let child_id = links[0]["task_id"].as_str().unwrap();
    let sessions = api.call("listSessions", &[child_id], &[], None).await;
    assert_eq!(sessions.body[0]["model"], "codebolt:waiter");
    assert!(
        of_kind(&events, "turn.ended")
            .iter()
            .all(|e| e["task_id"] != child_id),
        "{:?}",
        kinds(&events)
    );
}

#[tokio::test]
async fn a_start_subagent_task_notification_runs_the_agent_as_a_subtask_and_reports_back() {
    // The caller is an agent of a directory of its own, not one of the fixture agents listed.
    let callers = TempDir::new().unwrap();
    let caller = callers.path().join("subagent");
    std::fs::create_dir_all(&caller).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/subagent/index.js"),
        caller.join("index.js"),
    )
    .unwrap();
    let (server, project_id, _repo) = bench_with(vec![callers.path().to_owned()]).await;
    let api = server.api();
    let mut sse = api.events(&[], None).await;
    let r = api
        .call(
            "createTask",
            &[&project_id],
            &[],
            Some(json!({"title": "parent", "prompt": "Put hi in hello.txt", "model": format!("codebolt:{}", caller.display())})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let parent_id = r.body["id"].as_str().unwrap().to_owned();
    let events = sse
        .until("the parent's turn end", |e| {
            e.data["kind"] == "turn.ended" && e.data["task_id"] == parent_id.as_str()
        })
        .await;
    let said = texts_of(&events, &parent_id);
    let results: Value = serde_json::from_str(said.last().expect("the caller's report")).unwrap();
    let ok = &results["tu-1"];
    assert_eq!(ok["isError"], false, "{results}");
    assert_eq!(ok["content"], "scribe wrote hello.txt", "{results}");
    assert_eq!(ok["requestId"], "req-tu-1");
    let missing = &results["tu-2"];
    assert_eq!(missing["isError"], true, "{results}");
    assert!(
        missing["content"]
            .as_str()
            .unwrap()
            .contains("no CodeBolt agent `nobody`"),
        "{results}"
    );
    // byre's subtask operation: one linked task for the scribe, its file in its own worktree.
    let links = of_kind(&events, "task.subtask_started");
    assert_eq!(links.len(), 1, "{:?}", kinds(&events));
    assert_eq!(links[0]["payload"]["agent"], "scribe");
    assert_eq!(links[0]["payload"]["parent_task_id"], parent_id.as_str());
    assert_eq!(ok["data"]["task_id"], links[0]["task_id"]);
}
