//! The subtask tree through the page, on the real Claude Code CLI against the fake model
//! (`fixtures/fake-model/o_subtasks.json`): the parent's agent starts a subtask; the project's
//! task list shows it under its parent, the task views link both ways, and the merge dialog of
//! the subtask merges it into its parent (the parent's agent runs `git merge`).

use serde_json::json;
use tempfile::TempDir;

use super::{AgentBench, Browser};
use crate::helpers::until_kind;

/// How long the test waits for the real CLI's turns.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_subtask_tree_and_merges_a_subtask_into_its_parent() {
    let fake = byre_fake_models::FakeAnthropic::fixture("o_subtasks")
        .await
        .expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let server = AgentBench::spawn(listener, TempDir::new().unwrap(), &fake.url, &bin).await;
    let bench = AgentBench { server, fake, bin };
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let parent = api
        .create_task_with(
            &project_id,
            json!({"title": "Parent", "prompt": "Please delegate the notes"}),
        )
        .await;
    let parent_id = parent["id"].as_str().unwrap().to_owned();
    let seen = until_kind(&mut sse, "task.subtask_started", TURN_WAIT).await;
    let sub_id = seen.last().unwrap().data["task_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let b = Browser::open(&bench.server.url).await;
    b.goto(&format!("/projects/{project_id}")).await;
    b.testid(
        "task-row",
        &format!(
            "[data-task-id=\"{sub_id}\"][data-parent-task-id=\"{parent_id}\"][data-depth=\"1\"]"
        ),
    )
    .await;
    let order = b
        .js(
            "return [...document.querySelectorAll('[data-testid=task-row]')].map(r => r.dataset.taskId);",
            vec![],
        )
        .await;
    let order: Vec<String> = serde_json::from_value(order).unwrap();
    let p = order.iter().position(|t| *t == parent_id).unwrap();
    assert_eq!(
        order.get(p + 1),
        Some(&sub_id),
        "the subtask right under its parent: {order:?}"
    );
    b.screenshots("subtask-tree").await;

    // The parent's view lists its subtask; the subtask's links its parent.
    b.goto(&format!("/tasks/{parent_id}")).await;
    b.testid("task-subtask-link", &format!("[data-task-id=\"{sub_id}\"]"))
        .await;
    b.goto(&format!("/tasks/{sub_id}")).await;
    let link = b.testid("task-parent-link", "").await;
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(format!("/tasks/{parent_id}").as_str())
    );

    // Once the subtask's turn and its end-of-turn commit are done, merge it into its parent.
    loop {
        let e = sse.next(TURN_WAIT).await.expect("the subtask's snapshot");
        if e.data["kind"] == "snapshot.taken" && e.data["task_id"] == sub_id.as_str() {
            break;
        }
    }
    b.testid("merge-button", "").await.click().await.unwrap();
    let into_parent = b.testid("merge-target-parent", "").await;
    assert_eq!(
        into_parent.prop("checked").await.unwrap().as_deref(),
        Some("true"),
        "a subtask merges into its parent by default"
    );
    b.screenshots("merge-into-parent").await;
    b.testid("merge-confirm", "").await.click().await.unwrap();
    b.testid("item-merge", "[data-kind=\"task.merged\"]").await;
    b.wait_js(
        "the subtask shows as merged",
        "document.querySelector('[data-testid=task-view]').dataset.state === 'merged'",
    )
    .await;
    let task = api.call("getTask", &[&sub_id], &[], None).await;
    assert_eq!(task.body["status"], "merged", "{:?}", task.body);
    b.close().await;
    bench.server.stop().await;
}
