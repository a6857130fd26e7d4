//! TODO.md items as tasks (`getTodo`, `startTodoItem`) through the API, with the real Claude
//! Code CLI against the fake Messages API (fixture `v_todo`). The parser's rules on odd
//! Markdown are table-tested in `src/app/todo.rs`.

use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::{claude_bin, TURN_WAIT};
use crate::helpers::{local_ada, make_repo, until_kind, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todo_items_come_from_the_default_branch_and_start_one_task_each() {
    let fake = FakeAnthropic::fixture("v_todo").await.expect("fake API");
    let bin = claude_bin().await;
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
    })
    .await;
    let api = server.api();

    // No TODO.md: exists is false. Unknown project: 404.
    let (_basic, basic) = api.basic_project().await;
    let r = api.call("getTodo", &[&basic], &[], None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body, json!({"exists": false, "items": []}));
    let r = api.call("getTodo", &["nope"], &[], None).await;
    assert_eq!(r.status, 404);

    // The committed TODO.md is read, not the checkout's edited copy.
    let repo = make_repo("todo");
    std::fs::write(repo.path().join("TODO.md"), "- only in the checkout\n").unwrap();
    let project = api.create_project("todo", repo.path()).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api.call("getTodo", &[&project], &[], None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"exists": true, "items": [
            {"title": "Say hello to the team", "body": "Keep it short.\n\n- mention the release", "section": "Now"},
            {"title": "Fix the flaky upload test", "body": "", "section": "Now"},
            {"title": "Write the docs", "body": "", "section": "Later"},
        ]})
    );

    // Refusals: no such item (also the checkout-only one), an unknown field, unknown project.
    for title in ["No such item", "only in the checkout"] {
        let r = api
            .call(
                "startTodoItem",
                &[&project],
                &[],
                Some(json!({"title": title})),
            )
            .await;
        assert_eq!(r.status, 400, "{title}: {:?}", r.body);
        assert!(r.body["message"]
            .as_str()
            .unwrap()
            .contains("no item titled"));
    }
    let r = api
        .call(
            "startTodoItem",
            &[&project],
            &[],
            Some(json!({"title": "Write the docs", "prio": 1})),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = api
        .call("startTodoItem", &["nope"], &[], Some(json!({"title": "x"})))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        api.call("listTasks", &[&project], &[], None).await.body,
        json!([]),
        "no task was left behind by a refusal"
    );

    // Start an item to discuss: a task with todo_item, its agent on the item.
    let mut sse = api.events(&[], None).await;
    let r = api
        .call(
            "startTodoItem",
            &[&project],
            &[],
            Some(json!({"title": "Say hello to the team", "discuss": true})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let task: Value = r.body;
    assert_eq!(task["todo_item"], "Say hello to the team");
    assert_eq!(task["title"], "Say hello to the team");
    assert_eq!(task["project_id"], project.as_str());
    until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let asked = fake.messages_requests();
    let first = serde_json::to_string(&asked.last().expect("the agent asked").body).unwrap();
    for part in [
        "Say hello to the team",
        "Keep it short.",
        "mention the release",
        "Section: Now",
        "discuss this item with you first",
    ] {
        assert!(first.contains(part), "{part} in the first message: {first}");
    }

    // The same item again, while that task is active: 409; another item is fine.
    let r = api
        .call(
            "startTodoItem",
            &[&project],
            &[],
            Some(json!({"title": "Say hello to the team"})),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let listed = api.call("listTasks", &[&project], &[], None).await.body;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["todo_item"], "Say hello to the team");
    let other = api
        .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(other.body["todo_item"], "Say hello to the team");
    // A task not started from TODO.md has no todo_item.
    let plain = api.create_task(&project, "plain").await;
    assert!(plain.get("todo_item").is_none(), "{plain:?}");
}
