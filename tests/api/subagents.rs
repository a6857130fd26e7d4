//! The agent's own subagents on the real Claude Code CLI against the fake Anthropic API
//! (`fixtures/fake-model/w_subagents.json`): a background subagent (the Agent tool with
//! `run_in_background`) outlives the turn that started it, `AgentSession.subagents` rises and
//! falls on `/api/events`, and the turn the CLI starts by itself to report it is a turn of its
//! own with its own snapshot.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::claude::{Bench, TURN_WAIT};
use crate::helpers::{kinds, SseEvent};

/// Events of `b`'s stream until `done` holds for those seen; panics after [`TURN_WAIT`] (twice:
/// two turns and a 4 s subagent).
async fn collect(b: &mut Bench, done: impl Fn(&[SseEvent]) -> bool) -> Vec<SseEvent> {
    let deadline = Instant::now() + TURN_WAIT * 2;
    let mut seen = Vec::new();
    while !done(&seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = b
            .sse
            .next(left.max(Duration::from_millis(1)))
            .await
            .unwrap_or_else(|| panic!("stream ended or timed out; saw {:?}", kinds(&seen)));
        seen.push(e);
    }
    seen
}

fn of_kind<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a SseEvent> {
    events.iter().filter(|e| e.data["kind"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_subagent_is_counted_and_the_turn_reporting_it_is_snapshotted_once() {
    let mut b = Bench::start("w_subagents").await;
    let task = b.task_with_prompt("Now run a background helper").await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    // Two turns (byre's, then the CLI's own) and a snapshot answering the second.
    let events = collect(&mut b, |seen| {
        let ended = of_kind(seen, "turn.ended");
        ended.len() == 2
            && of_kind(seen, "snapshot.taken")
                .iter()
                .any(|s| Some(s.data["payload"]["cause_seq"].as_u64().unwrap()) == ended[1].id)
    })
    .await;
    let seq_of = |kind: &str, n: usize| of_kind(&events, kind)[n].id.unwrap();

    // The count rises to 1 and falls to 0, the fall after the starting turn ended.
    let started = of_kind(&events, "subagent.started");
    let ended = of_kind(&events, "subagent.ended");
    assert_eq!((started.len(), ended.len()), (1, 1), "{:?}", kinds(&events));
    let (started, ended) = (&started[0].data, &ended[0].data);
    assert_eq!(started["agent_session_id"], sid.as_str());
    assert_eq!(started["payload"]["subagents"], 1);
    assert_eq!(started["payload"]["tool_use_id"], "toolu_v_bg");
    assert_eq!(started["payload"]["description"], "Background helper");
    assert_eq!(ended["payload"]["subagents"], 0);
    assert_eq!(ended["payload"]["status"], "completed");
    assert_eq!(ended["payload"]["id"], started["payload"]["id"]);
    assert!(seq_of("subagent.started", 0) < seq_of("turn.ended", 0));
    assert!(
        seq_of("turn.ended", 0) < seq_of("subagent.ended", 0),
        "the background subagent outlived its turn"
    );

    // The CLI's report of the finished subagent is turn 2: started by byre, with no message.
    let turns = of_kind(&events, "turn.started");
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].data["payload"]["turn"], 2);
    assert_eq!(turns[1].data["payload"]["input_ids"], serde_json::json!([]));
    assert_eq!(turns[1].data["actor"], "byre");
    assert!(seq_of("subagent.ended", 0) < turns[1].id.unwrap());
    let second = &of_kind(&events, "turn.ended")[1].data["payload"];
    assert_eq!(second["turn"], 2);
    assert_eq!(second["outcome"], "completed");
    assert_eq!(second["result"], "The background helper finished.");
    assert!(
        of_kind(&events, "vendor.unrecognized").is_empty(),
        "every line understood, no turn end outside a turn"
    );

    // One snapshot per turn end, never two for one; the CLI's turn's holds the subagent's file.
    let taken: Vec<u64> = of_kind(&events, "snapshot.taken")
        .iter()
        .map(|s| s.data["payload"]["cause_seq"].as_u64().unwrap())
        .collect();
    let turn_ends: Vec<u64> = of_kind(&events, "turn.ended")
        .iter()
        .map(|e| e.id.unwrap())
        .collect();
    let mut distinct = taken.clone();
    distinct.dedup();
    assert_eq!(distinct, taken, "one snapshot per cause");
    assert!(taken.iter().all(|c| turn_ends.contains(c)), "{taken:?}");
    let list = b
        .api
        .call("listSnapshots", &[&task_id], &[], None)
        .await
        .body;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), taken.len());
    let last: &Value = list.last().unwrap();
    let repo = git2::Repository::open(task["worktree_path"].as_str().unwrap()).unwrap();
    let tree = repo
        .find_commit(git2::Oid::from_str(last["commit_sha"].as_str().unwrap()).unwrap())
        .unwrap()
        .tree()
        .unwrap();
    assert!(tree.get_path(std::path::Path::new("bg.txt")).is_ok());

    // The session, read back: idle, two turns, no subagent running.
    let session = b.api.call("getSession", &[&sid], &[], None).await.body;
    assert_eq!(session["subagents"], 0);
    assert_eq!(session["state"], "idle");
    b.fake.stop().await;
}

/// A merge while a background subagent runs would squash the task without the subagent's work
/// and kill it with the agent's process: `mergeTask` is refused (409) until it has ended, for
/// either target. The fixture's subagent waits 4 s before its first answer, so it still runs
/// when the first turn has just ended (the test reads the count before asking).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_is_refused_while_a_background_subagent_runs() {
    let mut b = Bench::start("w_subagents").await;
    let r = b
        .api
        .call(
            "updateMe",
            &[],
            &[],
            Some(serde_json::json!({"git_name": "Ada", "git_email": "ada@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let task = b.task_with_prompt("Now run a background helper").await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    b.until("turn.ended").await;
    let session = b.api.call("getSession", &[&sid], &[], None).await.body;
    assert_eq!(session["subagents"], 1, "the background subagent runs");
    let merge = serde_json::json!({"merge_title": "Background work"});
    let r = b
        .api
        .call("mergeTask", &[&task_id], &[], Some(merge.clone()))
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.message().contains("subagent"), "{:?}", r.body);

    // Once it has ended and the CLI's own turn reporting it is over, the merge goes ahead.
    collect(&mut b, |seen| of_kind(seen, "turn.ended").len() == 1).await;
    let session = b.api.call("getSession", &[&sid], &[], None).await.body;
    assert_eq!(session["subagents"], 0);
    let r = b.api.call("mergeTask", &[&task_id], &[], Some(merge)).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    b.fake.stop().await;
}
