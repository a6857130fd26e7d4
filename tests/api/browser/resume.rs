//! The server closes the page's stream mid-turn (byre restarts on the same data dir and
//! port while the agent's text streams) and the page resumes with `Last-Event-ID`: the events
//! its `EventSource` received are exactly the log's, each once and in order, and what the
//! task view shows matches `listTaskEvents`.
//!
//! Why a restart: it is how streams really drop (an upgrade, a crash) and it needs nothing in
//! byre that exists only for tests; a graceful stop ends every stream at once, mid-turn.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::{AgentBench, Browser, LIVE_DELTA_WATCH, WIRE_TAP};
use crate::helpers::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_resumes_a_stream_the_server_closed_mid_turn_with_nothing_lost_or_doubled() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;

    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(WIRE_TAP).await;
    b.on_every_page(LIVE_DELTA_WATCH).await;
    b.goto(&format!("/projects/{project_id}")).await;
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "slow", "prompt": "Please write some slow text"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    b.testid("task-row", &format!("[data-task-id=\"{task_id}\"]"))
        .await
        .click()
        .await
        .unwrap();
    b.testid("task-view", "").await;
    // Mid-turn: the text is streaming.
    b.wait_js("the text streams", "window.__liveTexts.length > 0")
        .await;
    let bench = bench.restart().await;
    let api = bench.server.api();
    b.wait_js(
        "the page reconnected and got the rest",
        "[...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('Resumed after the restart.'))",
    )
    .await;
    // Let the log settle: the page has folded up to the head and nothing more comes.
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    let head = loop {
        let status = api.call("getStatus", &[], &[], None).await;
        let head = status.body["last_event_seq"].as_u64().unwrap();
        let page: u64 = b
            .js("return Number(document.body.dataset.lastSeq);", vec![])
            .await
            .as_u64()
            .unwrap_or(0);
        let idle = status.body["running_turns"]
            .as_array()
            .is_some_and(|t| t.is_empty());
        if idle && page == head {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let again = api.call("getStatus", &[], &[], None).await;
            if again.body["last_event_seq"].as_u64() == Some(head) {
                break head;
            }
        }
        if tokio::time::Instant::now() > deadline {
            let page_state = b
                .js(
                    "return {stream: document.body.dataset.stream, opens: window.__opens, connects: window.__connects, wire: window.__wire.length};",
                    vec![],
                )
                .await;
            panic!(
                "not settled: head {head}, page at {page}, status {}, page {page_state}",
                status.body
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };

    // What the page's EventSource received: every seq from its first to the head, once each.
    // One EventSource, connected twice: the browser reconnected it (with Last-Event-ID); the
    // page did not start over.
    let counts = b
        .js("return [window.__opens, window.__connects];", vec![])
        .await;
    assert_eq!(counts[0], 1, "{counts}");
    assert!(counts[1].as_u64().unwrap() >= 2, "{counts}");
    let wire: Vec<Value> =
        serde_json::from_value(b.js("return window.__wire;", vec![]).await).unwrap();
    let seqs: Vec<u64> = wire.iter().map(|w| w["seq"].as_u64().unwrap()).collect();
    let first = *seqs.first().expect("events on the wire");
    assert_eq!(
        seqs,
        (first..=head).collect::<Vec<_>>(),
        "every seq once, in order, across the drop"
    );
    // The drop happened mid-turn: events of the interrupted turn came before it, and its
    // resumption after.
    let log = api
        .call("listTaskEvents", &[&task_id], &[], None)
        .await
        .body
        .as_array()
        .unwrap()
        .clone();
    let kinds: Vec<&str> = log.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(
        log.iter()
            .any(|e| e["kind"] == "turn.ended" && e["payload"]["outcome"] == "interrupted"),
        "{kinds:?}"
    );
    let task_seqs: BTreeSet<u64> = log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let wire_task: BTreeSet<u64> = wire
        .iter()
        .filter(|w| w["task_id"] == task_id.as_str())
        .map(|w| w["seq"].as_u64().unwrap())
        .collect();
    assert!(
        wire_task.is_subset(&task_seqs) && task_seqs.range(first..).all(|s| wire_task.contains(s)),
        "the task's events on the wire are listTaskEvents' from the stream's start"
    );

    // What the task view shows: each agent text once, as listTaskEvents has them.
    let shown: Vec<(u64, String)> = serde_json::from_value(
        b.js(
            "return [...document.querySelectorAll('[data-testid=item-agent-text]')].map(e => [Number(e.dataset.seq), e.textContent.trim()]);",
            vec![],
        )
        .await,
    )
    .unwrap();
    let expected: Vec<(u64, String)> = log
        .iter()
        .filter(|e| e["kind"] == "agent.text")
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["payload"]["text"].as_str().unwrap().trim().to_owned(),
            )
        })
        .collect();
    assert_eq!(shown, expected);
    let items: Vec<u64> = serde_json::from_value(
        b.js(
            "return [...document.querySelectorAll('[data-testid=transcript] [data-seq]')].map(e => Number(e.dataset.seq));",
            vec![],
        )
        .await,
    )
    .unwrap();
    let unique: BTreeSet<u64> = items.iter().copied().collect();
    assert_eq!(unique.len(), items.len(), "no item drawn twice: {items:?}");
    assert!(unique.is_subset(&task_seqs), "{items:?}");
    b.screenshots("resumed").await;
    b.close().await;
}
