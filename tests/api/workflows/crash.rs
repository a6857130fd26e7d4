//! A workflow run across a `kill -9` of byre right after a stage finished: at the next start
//! the next stage starts, exactly once (the real binary; Claude Code against
//! `fixtures/fake-model/x_workflow.json`).

use std::time::Duration;

use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{make_repo, Api};
use crate::process::ServeProcess;

const TURN_WAIT: Duration = Duration::from_secs(180);

/// docs (no after stages) → review.
const TWO: &str = "stages:
  - name: docs
    model: sonnet
    prompt: Document the login page in docs.md. DOCS-STAGE
  - name: review
    model: sonnet
    prompt: Review the docs. REVIEW-STAGE
";

async fn get(api: &Api, op: &str, id: &str) -> Value {
    let r = api.call(op, &[id], &[], None).await;
    assert_eq!(r.status, 200, "{op}: {:?}", r.body);
    r.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_kill_9_right_after_a_stage_finished_the_next_stage_starts_once() {
    let fake = FakeAnthropic::fixture("x_workflow")
        .await
        .expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let bin = bin.to_string_lossy().into_owned();
    let env = [
        ("BYRE_CLAUDE_BIN", bin.as_str()),
        ("ANTHROPIC_BASE_URL", fake.url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake-key"),
        ("CLAUDE_CODE_MAX_RETRIES", "2"),
    ];
    let data = TempDir::new().unwrap();
    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let repo = make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let r = api
        .call_raw(
            "putWorkflow",
            &["two"],
            "application/yaml",
            TWO.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut sse = api.events(&[], None).await;
    let r = api
        .call(
            "createTask",
            &[&project_id],
            &[],
            Some(json!({"title": "Docs", "workflow": "two"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let docs_id = r.body["id"].as_str().unwrap().to_owned();
    // kill -9 as soon as the stage's finish is on the stream: the next stage is at most on its
    // way, not (surely) started.
    loop {
        let e = sse.next(TURN_WAIT).await.expect("docs finishes");
        if e.data["kind"] == "workflow.stage_finished" && e.data["task_id"] == docs_id.as_str() {
            break;
        }
    }
    server.kill_9();

    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let mut sse = api.events(&[], None).await;
    // The run goes on to its end: review starts (once), finishes, and the run finishes.
    let mut review_started = Vec::new();
    loop {
        let e = sse.next(TURN_WAIT).await.expect("the run finishes");
        if e.data["kind"] == "workflow.stage_started" && e.data["payload"]["stage"] == "review" {
            review_started.push(e.data["task_id"].clone());
        }
        if e.data["kind"] == "workflow.run_finished" {
            break;
        }
    }
    assert_eq!(review_started.len(), 1, "review started once");
    let run = get(&api, "getWorkflowRun", &docs_id).await;
    assert_eq!(run["finished"], true);
    let review = &run["stages"][1];
    assert_eq!(review["name"], "review");
    assert_eq!(
        review["attempts"].as_array().unwrap().len(),
        1,
        "one attempt: {review}"
    );
    assert_eq!(review["attempts"][0]["task_id"], review_started[0]);
    assert_eq!(
        review["attempts"][0]["inputs"],
        json!([{"stage": "docs", "task_id": docs_id}])
    );
    let tasks = get(&api, "listTasks", &project_id).await;
    assert_eq!(tasks.as_array().unwrap().len(), 2, "{tasks}");
    server.kill_9();
}
