//! Workflow runs' refusals: `createTask` with a bad `workflow`, `finish_stage` as a tool error
//! off a stage, with bad arguments or twice, and `getWorkflowRun` / `getTaskWorkflow` on a task
//! that is no stage. Claude Code is missing here: sessions exist, their turns fail at once.

use serde_json::json;
use tempfile::TempDir;

use crate::helpers::{agent_tool, local_ada, until_kind, TestServer, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_runs_and_bad_finish_stage_calls_are_refused_with_the_reason() {
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), |c| {
        c.claude_bin = Some("/nonexistent/claude".into());
    })
    .await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let yaml = "stages:\n  - name: one\n    model: sonnet\n    prompt: p\n  - name: two\n    model: sonnet\n    prompt: q\n";
    let r = api
        .call_raw("putWorkflow", &["w"], "application/yaml", yaml.into())
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for (what, body, needle) in [
        (
            "unknown workflow",
            json!({"title": "x", "workflow": "nope"}),
            "no workflow",
        ),
        (
            "prompt and workflow",
            json!({"title": "x", "prompt": "p", "workflow": "w"}),
            "not both",
        ),
        (
            "a title too long for its stages",
            json!({"title": "x".repeat(197), "workflow": "w"}),
            "longer than 200",
        ),
    ] {
        let r = api.call("createTask", &[&pid], &[], Some(body)).await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
        assert!(r.message().contains(needle), "{what}: {}", r.message());
    }
    assert_eq!(
        api.call("listTasks", &[&pid], &[], None)
            .await
            .body
            .as_array()
            .map(Vec::len),
        Some(0),
        "a refused run leaves no task"
    );

    // A plain task: finish_stage is a tool error; the run queries are 404.
    let plain = api
        .create_task_with(&pid, json!({"title": "plain", "prompt": "hello"}))
        .await;
    let plain_id = plain["id"].as_str().unwrap();
    let plain_session = api.first_session_id(plain_id).await;
    let r = agent_tool(
        &server,
        &plain_session,
        "finish_stage",
        json!({"status": "done", "output": "x"}),
    )
    .await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(r["text"].as_str().unwrap().contains("not a stage"), "{r}");
    for op in ["getWorkflowRun", "getTaskWorkflow"] {
        for id in [plain_id, "no-such-task"] {
            let r = api.call(op, &[id], &[], None).await;
            assert_eq!(r.status, 404, "{op} {id}: {:?}", r.body);
        }
    }

    // A stage task: bad arguments, then a done, then a second finish.
    let r = api
        .call(
            "createTask",
            &[&pid],
            &[],
            Some(json!({"title": "Run", "workflow": "w"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let stage_id = r.body["id"].as_str().unwrap().to_owned();
    assert_eq!(r.body["workflow_stage"], "one");
    until_kind(&mut sse, "workflow.stage_started", WAIT).await;
    let sid = api.first_session_id(&stage_id).await;
    // No agent CLI here: the stage's first turn fails at once. A `done` after it waits for a
    // next turn's snapshot, so the next stage stays waiting; one before it would finish the
    // stage at that failed turn's snapshot (as happened under load).
    sse.until("the stage's failed turn", |e| {
        e.data["kind"] == "turn.ended" && e.data["task_id"] == stage_id.as_str()
    })
    .await;
    for (what, args, needle) in [
        (
            "an unknown status",
            json!({"status": "maybe", "output": "x"}),
            "`done` or `blocked`",
        ),
        ("no output", json!({"status": "done"}), "`output`"),
        (
            "an empty output",
            json!({"status": "done", "output": " "}),
            "must not be empty",
        ),
        (
            "blocked without a reason",
            json!({"status": "blocked", "output": "x"}),
            "reason",
        ),
    ] {
        let r = agent_tool(&server, &sid, "finish_stage", args).await;
        assert_eq!(r["is_error"], true, "{what}: {r}");
        assert!(r["text"].as_str().unwrap().contains(needle), "{what}: {r}");
    }
    let r = agent_tool(
        &server,
        &sid,
        "finish_stage",
        json!({"status": "done", "output": "All done."}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(r["text"].as_str().unwrap().contains("End your turn"), "{r}");
    let r = agent_tool(
        &server,
        &sid,
        "finish_stage",
        json!({"status": "done", "output": "Again."}),
    )
    .await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        r["text"].as_str().unwrap().contains("already finished"),
        "{r}"
    );
    let run = api.call("getWorkflowRun", &[&stage_id], &[], None).await;
    assert_eq!(run.status, 200);
    assert_eq!(run.body["stages"][1]["state"], "waiting");
    server.stop().await;
}
