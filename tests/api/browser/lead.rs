//! The lead's chat through the page, on the real Claude Code CLI against the fake model
//! (`fixtures/fake-model/l_lead.json`): the human asks the lead in its column; the lead creates
//! a task, messages its agent, remembers a note and calls `show`, and the page's right pane
//! moves to that task; the note is listed and deleted from the lead's notes.

use serde_json::json;
use tempfile::TempDir;

use super::{AgentBench, Browser};

/// How long the test waits for the real CLI's turns.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_human_talks_to_the_lead_and_the_pane_follows_its_show() {
    let fake = byre_fake_models::FakeAnthropic::fixture("l_lead")
        .await
        .expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let server = AgentBench::spawn(listener, TempDir::new().unwrap(), &fake.url, &bin).await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;

    let b = Browser::open(&server.url).await;
    b.goto(&format!("/projects/{project}")).await;
    b.testid("nav-lead", "").await.click().await.unwrap();
    b.testid("lead-panel", "").await;
    b.testid("lead-input", "").await;
    b.js(
        "const el = document.querySelector('[data-testid=lead-input]');\
         el.value = 'LEAD-SETUP: please set up a greeting task';\
         el.dispatchEvent(new Event('input', { bubbles: true }));",
        vec![],
    )
    .await;
    b.testid("lead-send", "").await.click().await.unwrap();

    // The lead's `show` moves the pane to the task it created, on its changes tab.
    let deadline = tokio::time::Instant::now() + TURN_WAIT;
    let task_id = loop {
        let tasks = api.call("listTasks", &[&project], &[], None).await.body;
        let greeting = tasks
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"] == "Greeting")
            .cloned();
        if let Some(t) = greeting {
            let id = t["id"].as_str().unwrap().to_owned();
            let path = b.path().await;
            if path == format!("/tasks/{id}/changes") {
                break id;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pane did not move to the lead's task: at {}",
            b.path().await
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    b.testid("task-view", &format!("[data-task-id=\"{task_id}\"]"))
        .await;
    let focus = api.call("getFocus", &[], &[], None).await.body;
    assert_eq!(focus["task_id"], task_id.as_str());
    assert_eq!(focus["tab"], "changes");

    // The lead's turn is in its column: the human's message and the tools it called.
    b.wait_js(
        "the lead's transcript shows its turn",
        "(() => { const t = document.querySelector('[data-testid=lead-panel]').textContent;\
           return t.includes('LEAD-SETUP') && t.includes('lead_create_task') && t.includes('remember'); })()",
    )
    .await;
    b.screenshots("lead").await;

    // Its note: listed in the notes tab, deleted there.
    b.testid("lead-tab-notes", "").await.click().await.unwrap();
    let note = b.testid("lead-note", "").await;
    assert!(note
        .text()
        .await
        .unwrap()
        .contains("Ada likes short greetings."));
    let notes = api.call("listLeadNotes", &[], &[], None).await.body;
    assert_eq!(notes.as_array().unwrap().len(), 1, "{notes}");
    b.testid("lead-note-delete", "")
        .await
        .click()
        .await
        .unwrap();
    b.wait_js(
        "the note is gone",
        "document.querySelectorAll('[data-testid=lead-note]').length === 0",
    )
    .await;
    assert_eq!(
        api.call("listLeadNotes", &[], &[], None).await.body,
        json!([])
    );

    // With the lead's column open, one navigation item is highlighted: the page's.
    b.js(
        "history.pushState(null, '', '/'); dispatchEvent(new PopStateEvent('popstate'));",
        vec![],
    )
    .await;
    b.testid("project-list", "").await;
    b.testid("lead-panel", "").await;
    // (The pointer leaves the nav: a hovered item is highlighted too.)
    b.testid("signed-in-as", "").await.click().await.unwrap();
    let lit = b
        .js(
            "return [...document.querySelectorAll('.sidebar .nav > *')]
               .filter(e => getComputedStyle(e).backgroundColor !== 'rgba(0, 0, 0, 0)')
               .map(e => e.dataset.testid);",
            vec![],
        )
        .await;
    assert_eq!(lit, json!(["nav-projects"]));
    b.close().await;
}
