//! Workflows through the page: the definitions page writes, refuses (showing the server's
//! reason) and lists workflows.

use serde_json::{json, Value};

use super::{AgentBench, Browser};

/// Sets a Preact-controlled field's value the way typing would (an `input` event).
const SET_FIELD: &str = "const el = document.querySelector(arguments[0]);\
    el.value = arguments[1]; el.dispatchEvent(new Event('input', { bubbles: true }));";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflows_page_saves_refuses_and_lists_definitions() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let b = Browser::open(&bench.server.url).await;
    b.goto("/workflows").await;
    b.testid("workflow-list", "").await;
    b.testid("workflow-new", "").await.click().await.unwrap();
    b.testid("workflow-editor", "").await;
    // The starting file is a valid workflow; break it: a stage after one that does not exist.
    let bad =
        "stages:\n  - name: plan\n    model: sonnet\n    prompt: Plan.\n    after: [nowhere]\n";
    b.js(
        SET_FIELD,
        vec![json!("[data-testid=workflow-name]"), json!("ship")],
    )
    .await;
    b.js(
        SET_FIELD,
        vec![json!("[data-testid=workflow-yaml]"), json!(bad)],
    )
    .await;
    b.testid("workflow-save", "").await.click().await.unwrap();
    let shown = b.testid("workflow-error", "").await.text().await.unwrap();
    let put = api
        .call_raw(
            "putWorkflow",
            &["ship"],
            "application/yaml",
            bad.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(put.status, 400);
    assert_eq!(
        shown,
        put.body["message"].as_str().unwrap(),
        "the server's reason, as is"
    );
    assert_eq!(
        api.call("listWorkflows", &[], &[], None).await.body,
        json!([])
    );

    let good = "description: Plan, then build.\nstages:\n  - name: plan\n    model: sonnet\n    prompt: Plan it.\n  - name: build\n    model: gpt-5.5\n    prompt: Build it.\n";
    b.js(
        SET_FIELD,
        vec![json!("[data-testid=workflow-yaml]"), json!(good)],
    )
    .await;
    b.testid("workflow-save", "").await.click().await.unwrap();
    b.testid("workflow-item", "[data-name=ship]").await;
    let listed = api.call("listWorkflows", &[], &[], None).await.body;
    assert_eq!(
        listed,
        json!([{"name": "ship", "description": "Plan, then build."}])
    );
    let text = b
        .testid("workflow-item", "[data-name=ship]")
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("Plan, then build."), "{text}");
    b.screenshots("workflows").await;

    // Opening it shows its file as the server keeps it.
    b.testid("workflow-open", "").await.click().await.unwrap();
    let yaml: Value = b
        .wait_js(
            "the file loads",
            "document.querySelector('[data-testid=workflow-yaml]') && document.querySelector('[data-testid=workflow-yaml]').value",
        )
        .await;
    let served = api.call("getWorkflow", &["ship"], &[], None).await;
    assert_eq!(yaml, served.body);
    b.close().await;
}
