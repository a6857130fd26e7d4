//! Discarding from the page without a summary: a real Claude Code turn (the fake model's
//! default text) ends; the discard dialog's "Discard without a summary" discards the task with
//! no further agent turn, and the transcript says so.

use super::{AgentBench, Browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discard_dialog_discards_without_a_summary_running_no_turn() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, task_id) = bench
        .task_after_one_turn("to drop", "Say anything, this task is dropped")
        .await;

    let b = Browser::open(&bench.server.url).await;
    b.goto(&format!("/tasks/{task_id}")).await;
    b.testid("discard-button", "").await.click().await.unwrap();
    b.testid("discard-no-summary", "")
        .await
        .click()
        .await
        .unwrap();
    b.testid("item-merge", "[data-kind=\"task.discarded\"]")
        .await;
    let said = b
        .testid("item-merge", "[data-kind=\"task.discard_requested\"]")
        .await
        .text()
        .await
        .unwrap();
    assert!(said.contains("without a summary"), "{said}");

    let record = api.call("listTaskEvents", &[&task_id], &[], None).await;
    let kinds = crate::helpers::event_kinds(&record.body);
    assert_eq!(
        kinds.iter().filter(|k| **k == "turn.started").count(),
        1,
        "only the task's own turn ran: {kinds:?}"
    );
    let task = api.call("getTask", &[&task_id], &[], None).await;
    assert_eq!(task.body["status"], "discarded", "{:?}", task.body);
    b.close().await;
}
