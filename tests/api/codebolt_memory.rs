//! CodeBolt agents' durable memory: what a real `@codebolt/codeboltjs@1.1.99` agent stores
//! (memory, agent state, a todo, a vector item) is folded from the log, so after a `kill -9`
//! of byre a new agent process of the same task reads it back, and `byre rebuild --verify`
//! finds the live server's stores in the fold of its log.

use std::path::Path;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{make_repo, Api, SseEvent};
use crate::process::{run_cli, ServeProcess};

fn text_of(e: &SseEvent) -> &str {
    e.data["payload"]["text"].as_str().unwrap_or("")
}

/// The `pid=<n>` an agent's text ends with.
fn pid_in(text: &str) -> String {
    text.rsplit("pid=").next().unwrap_or("").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_memory_set_before_kill_9_is_read_back_by_a_new_agent_after_the_restart() {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let data = TempDir::new().unwrap();
    let env = [("NODE_PATH", modules.to_str().unwrap())];
    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let repo = make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/memory");
    let model = format!("codebolt:{}", agent.display());
    let r = api
        .call(
            "createTask",
            &[project["id"].as_str().unwrap()],
            &[],
            Some(json!({"title": "remember", "prompt": "remember a colour", "model": model})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let task_id = r.body["id"].as_str().unwrap().to_owned();
    let mut sse = api.events(&[], None).await;
    let events = sse
        .until("the agent's stored text", |e| {
            e.data["kind"] == "agent.text" && text_of(e).starts_with("stored:")
        })
        .await;
    let stored = text_of(events.last().unwrap()).to_owned();
    // Read back within the same process: each write was logged before it was answered.
    assert!(stored.starts_with("stored: teal pid="), "{stored}");
    // The writes are tool calls of the agent's session, as every request is.
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["kind"] == "tool.call")
        .map(|e| &e.data["payload"]["name"])
        .collect();
    for name in [
        "memoryEvent/set",
        "agentStateEvent/addToAgentState",
        "taskEvent/addTask",
        "vectordbEvent/addVectorItem",
    ] {
        assert!(calls.iter().any(|c| *c == name), "{name} in {calls:?}");
    }
    server.kill_9();

    // A new byre on the same data: the cut-short turn goes on in a new agent process.
    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let mut sse = api.events(&[], None).await;
    let events = sse
        .until("the agent's recalled text", |e| {
            e.data["kind"] == "agent.text" && text_of(e).starts_with("recalled:")
        })
        .await;
    let recalled = events.last().unwrap();
    assert_eq!(recalled.data["task_id"], task_id.as_str());
    let recalled = text_of(recalled).to_owned();
    assert!(
        recalled.starts_with("recalled: teal state=stored todos=paint it teal vectors=1 pid="),
        "{recalled}"
    );
    assert_ne!(pid_in(&recalled), pid_in(&stored), "a new agent process");

    // The fold of the log holds what the live server held, stores included.
    assert_eq!(server.terminate(), Some(0), "graceful stop");
    let data_arg = data.path().to_str().unwrap();
    let (code, out, err) = run_cli(&["rebuild", "--data", data_arg, "--verify"]);
    assert_eq!(code, 0, "rebuild --verify: {out}{err}");
    assert!(out.contains("verify      ok"), "{out}");
}
