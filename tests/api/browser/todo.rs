//! TODO.md items on the project page: sections and items from the default branch's TODO.md,
//! "Discuss" starts a task on an item (real Claude Code against the fake model, fixture
//! `v_todo`), and the item then links to its task instead of offering to start another.

use serde_json::Value;
use tempfile::TempDir;

use super::{AgentBench, Browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_page_lists_todo_items_by_section_and_starts_one() {
    let fake = byre_fake_models::FakeAnthropic::fixture("v_todo")
        .await
        .expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let server = AgentBench::spawn(listener, TempDir::new().unwrap(), &fake.url, &bin).await;
    let api = server.api();
    let repo = crate::helpers::make_repo("todo");
    let project = api.create_project("todo", repo.path()).await["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let b = Browser::open(&server.url).await;
    b.goto(&format!("/projects/{project}")).await;
    b.testid("todo-item", "").await;
    let shown = b
        .js(
            "return [...document.querySelectorAll('[data-testid=todo-section]')].map(e => e.textContent)\
               .concat([...document.querySelectorAll('[data-testid=todo-title]')].map(e => e.textContent));",
            vec![],
        )
        .await;
    let todo = api.call("getTodo", &[&project], &[], None).await.body;
    let mut want: Vec<Value> = vec!["Now".into(), "Later".into()];
    want.extend(
        todo["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["title"].clone()),
    );
    assert_eq!(
        shown,
        Value::Array(want),
        "sections, then items, as getTodo has them"
    );
    b.screenshots("todo").await;

    // Discuss the first item: a task on it opens, its agent asked to talk it over.
    let item = "[data-title=\"Say hello to the team\"]";
    b.testid("todo-item", item).await;
    b.js(
        "document.querySelector('[data-testid=todo-item][data-title=\"Say hello to the team\"] [data-testid=todo-discuss]').click();",
        vec![],
    )
    .await;
    let path = b
        .wait_js(
            "the task opens",
            "location.pathname.startsWith('/tasks/') && location.pathname",
        )
        .await;
    let task_id = path
        .as_str()
        .unwrap()
        .trim_start_matches("/tasks/")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let task = api.call("getTask", &[&task_id], &[], None).await.body;
    assert_eq!(task["todo_item"], "Say hello to the team");
    b.testid("task-state", "").await;
    b.wait_js(
        "the agent's answer shows",
        "document.body.textContent.includes('Shall we talk it over?')",
    )
    .await;
    let asked = fake.messages_requests();
    let first = serde_json::to_string(&asked[0].body).unwrap();
    assert!(
        first.contains("discuss this item with you first"),
        "{first}"
    );

    // Back on the project page the item links to its task; the others can still start.
    b.goto(&format!("/projects/{project}")).await;
    let link = b.testid("todo-task", "").await;
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(format!("/tasks/{task_id}").as_str())
    );
    let starts = b
        .js(
            "return document.querySelectorAll('[data-testid=todo-start]').length;",
            vec![],
        )
        .await;
    assert_eq!(starts, 2, "the two other items can start");
    b.close().await;
}
