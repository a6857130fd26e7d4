//! Forking a snapshot from the page: a real Claude Code turn (the fake model's default text)
//! ends in snapshot 1; in the changes tab, with snapshot 1 chosen, the fork button makes the
//! fork (`forkSnapshot`) and the page goes to it; the server's task says where it came from.

use serde_json::json;

use super::layout::{assert_no_overflow, text_lines};
use super::{AgentBench, Browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_changes_tab_forks_a_snapshot_and_goes_to_the_fork() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, task_id) = bench
        .task_after_one_turn("to fork", "Say anything, this turn is forked")
        .await;

    let b = Browser::open(&bench.server.url).await;
    b.goto(&format!("/tasks/{task_id}/changes?snapshot=1"))
        .await;
    // The task page at 1280×800: nothing overflows, every tab of the pane's strip shows
    // whole, the fork button's words on one line.
    b.testid("changes-fork", "").await;
    b.testid("pane-tab-reviews", "").await;
    assert_no_overflow(&b, "1280×800").await;
    assert_eq!(
        text_lines(&b, "changes-fork").await,
        1,
        "\"Fork at snapshot 1\" on one line"
    );
    // On a phone (390×844): the pane is its own page, the top navigation a menu.
    b.set_viewport(390, 844).await;
    b.testid("nav-menu", "").await;
    assert_no_overflow(&b, "390×844, the pane").await;
    b.js(
        "history.pushState(null, '', arguments[0]); dispatchEvent(new PopStateEvent('popstate'));",
        vec![json!(format!("/tasks/{task_id}"))],
    )
    .await;
    b.testid("composer", "").await;
    assert_no_overflow(&b, "390×844, the conversation").await;
    b.testid("nav-menu", "").await.click().await.unwrap();
    b.testid("nav-status", "").await;
    assert_no_overflow(&b, "390×844, the menu open").await;
    b.testid("nav-status", "").await.click().await.unwrap();
    b.wait_path("/status").await;
    b.wait_js(
        "the menu closes on the way",
        "!document.querySelector('.topbar [data-testid=nav-status]') || document.querySelector('.topbar [data-testid=nav-status]').getBoundingClientRect().width === 0",
    )
    .await;
    b.set_viewport(1280, 800).await;
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
