//! Forking a snapshot from the page: a real Claude Code turn (the fake model's default text)
//! ends in snapshot 1; in the changes tab, with snapshot 1 chosen, the fork button makes the
//! fork (`forkSnapshot`) and the page goes to it; the server's task says where it came from.

use serde_json::json;

use super::{AgentBench, Browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_changes_tab_forks_a_snapshot_and_goes_to_the_fork() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "to fork", "prompt": "Say anything, this turn is forked"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    tokio::time::timeout(
        crate::claude::TURN_WAIT,
        sse.until("snapshot 1", |e| {
            e.data["kind"] == "snapshot.taken" && e.data["task_id"] == task_id.as_str()
        }),
    )
    .await
    .expect("the turn's snapshot");

    let b = Browser::open(&bench.server.url).await;
    b.goto(&format!("/tasks/{task_id}/changes?snapshot=1"))
        .await;
    b.testid("changes-fork", "").await.click().await.unwrap();
    let fork_id = b
        .wait_js(
            "the page goes to the fork",
            &format!(
                "location.pathname.startsWith('/tasks/') && !location.pathname.includes('{task_id}') && location.pathname.split('/')[2]"
            ),
        )
        .await;
    let fork_id = fork_id.as_str().unwrap().to_owned();
    let view = b
        .testid("task-view", &format!("[data-task-id=\"{fork_id}\"]"))
        .await;
    assert!(view.text().await.unwrap().contains("fork at snapshot 1"));
    let fork = api.call("getTask", &[&fork_id], &[], None).await;
    assert_eq!(fork.status, 200);
    assert_eq!(fork.body["forked_from"], task_id.as_str());
    assert_eq!(fork.body["forked_at"], 1);
    assert_eq!(fork.body["state"], "idle");
    b.screenshots("fork").await;
    b.close().await;
}
