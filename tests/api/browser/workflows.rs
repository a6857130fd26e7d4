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

/// How long the test waits for the real CLI's turns.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_from_the_new_task_page_shows_its_graph_as_it_goes() {
    // Two Claude Code stages on the fake model (fixture x_workflow): docs writes docs.md and
    // finishes, then review (after docs) finishes too, which ends the run.
    let fake = byre_fake_models::FakeAnthropic::fixture("x_workflow")
        .await
        .expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let server =
        AgentBench::spawn(listener, tempfile::TempDir::new().unwrap(), &fake.url, &bin).await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    let def = "description: Document, then review.\nstages:\n  - name: docs\n    model: sonnet\n    prompt: DOCS-STAGE write the docs.\n  - name: review\n    model: sonnet\n    prompt: REVIEW-STAGE review them.\n";
    let put = api
        .call_raw(
            "putWorkflow",
            &["docs-review"],
            "application/yaml",
            def.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(put.status, 200, "{:?}", put.body);

    let b = Browser::open(&server.url).await;
    b.goto(&format!("/projects/{project}/new")).await;
    b.testid("new-task-workflow", " option[value=docs-review]")
        .await;
    b.js(
        "const s = document.querySelector('[data-testid=new-task-workflow]');\
         s.value = 'docs-review'; s.dispatchEvent(new Event('change', { bubbles: true }));",
        vec![],
    )
    .await;
    let about = b
        .testid("new-task-workflow-description", "")
        .await
        .text()
        .await
        .unwrap();
    assert!(about.contains("Document, then review."), "{about}");
    let prompts = b
        .js(
            "return document.querySelectorAll('[data-testid=new-task-prompt]').length;",
            vec![],
        )
        .await;
    assert_eq!(prompts, 0, "a run takes no prompt: its stages have theirs");
    b.js(
        SET_FIELD,
        vec![json!("[data-testid=new-task-title]"), json!("Login page")],
    )
    .await;
    b.testid("new-task-submit", "").await.click().await.unwrap();
    let path = b
        .wait_js(
            "the first stage's workflow tab opens",
            "location.pathname.endsWith('/workflow') && location.pathname",
        )
        .await;
    let task_id = path.as_str().unwrap().split('/').nth(2).unwrap().to_owned();
    let task = api.call("getTask", &[&task_id], &[], None).await.body;
    assert_eq!(task["title"], "Login page: docs");
    assert_eq!(task["workflow"], "docs-review");
    assert_eq!(task["workflow_stage"], "docs");

    // The graph: both stages, an edge docs → review, review waiting on docs at first.
    b.testid("workflow-node", "[data-stage=review]").await;
    let nodes = b
        .js(
            "return [...document.querySelectorAll('[data-testid=workflow-node]')].map(n => n.dataset.stage);",
            vec![],
        )
        .await;
    assert_eq!(nodes, json!(["docs", "review"]));
    let edge = b
        .js(
            "const e = document.querySelector('[data-testid=workflow-edge]'); return [e.dataset.from, e.dataset.to];",
            vec![],
        )
        .await;
    assert_eq!(edge, json!(["docs", "review"]));

    // As the run goes, the page follows it: both stages finish and the run ends.
    let deadline = tokio::time::Instant::now() + TURN_WAIT;
    loop {
        let run = api
            .call("getWorkflowRun", &[&task_id], &[], None)
            .await
            .body;
        // The run's end is followed by byre's clean-up of the docs task (`finished` →
        // `cleaned_up`): wait for both, so the states read below no longer change.
        if run["finished"] == true && run["stages"][0]["attempts"][0]["state"] == "cleaned_up" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not finish and clean up: {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    b.testid("workflow-run", "[data-finished=true]").await;
    let run = api
        .call("getWorkflowRun", &[&task_id], &[], None)
        .await
        .body;
    let want: Vec<Value> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["name"], s["state"]]))
        .collect();
    let shown = b
        .wait_js(
            "the graph shows the run's states",
            &format!(
                "(() => {{ const s = JSON.stringify([...document.querySelectorAll('[data-testid=workflow-node]')].map(n => [n.dataset.stage, n.dataset.state])); return s === {w:?} && s; }})()",
                w = serde_json::to_string(&want).unwrap()
            ),
        )
        .await;
    assert_eq!(
        shown.as_str().unwrap(),
        serde_json::to_string(&want).unwrap()
    );
    // Each stage's output is shown with the attempt that wrote it.
    let outputs = b
        .js(
            "return [...document.querySelectorAll('[data-testid=workflow-stage]')].map(s => { const o = s.querySelector('[data-testid=workflow-output]'); return o ? o.textContent : null; });",
            vec![],
        )
        .await;
    let docs_out = run["stages"][0]["attempts"][0]["output"].as_str().unwrap();
    assert!(
        outputs[0].as_str().unwrap().contains(docs_out.trim()),
        "{outputs}"
    );
    // The open tab is in view, though the pane's tabs are wider than it (the strip scrolls).
    for (w, h) in [(1280, 800), (390, 844)] {
        b.set_viewport(w, h).await;
        b.wait_js(
            &format!("the open tab in view at {w}x{h}"),
            "(() => { const l = document.querySelector('[data-testid=pane] [role=tablist]'); const t = l && l.querySelector('[aria-selected=true]'); if (!t) return false; const a = l.getBoundingClientRect(), r = t.getBoundingClientRect(); return r.left >= a.left - 1 && r.right <= a.right + 1; })()",
        )
        .await;
    }
    b.set_viewport(1280, 800).await;
    b.screenshots("workflow-run").await;

    // The review stage's task has the tab too, and the run's other task is linked from it.
    let review_task = run["stages"][1]["attempts"][0]["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    b.goto(&format!("/tasks/{review_task}/workflow")).await;
    let link = b
        .testid("workflow-attempt", &format!("[data-task-id=\"{task_id}\"]"))
        .await;
    let state = link.attr("data-state").await.unwrap();
    assert_eq!(
        state.as_deref(),
        run["stages"][0]["attempts"][0]["state"].as_str()
    );
    b.close().await;
}
