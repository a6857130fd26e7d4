//! `streamEvents`: replay, Last-Event-ID reconnects, filters, owner isolation, heartbeats.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{make_repo, Api, TestServer, WAIT};

/// Makes `n` public events (default-model changes are owned; workflows are public).
async fn make_events(api: &Api, n: usize) {
    for i in 0..n {
        let yaml = format!(
            "description: v{i}\nstages:\n  - name: only\n    model: sonnet\n    prompt: do it\n"
        );
        let r = api
            .call_raw(
                "putWorkflow",
                &[&format!("wf{i}")],
                "application/yaml",
                yaml.into_bytes(),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_replays_the_log_then_follows_live_events() {
    let server = TestServer::spawn().await;
    let api = server.api();
    make_events(&api, 3).await;
    let mut sse = api.events(&[], None).await;
    let replayed = sse
        .until("the third workflow", |e| e.data["payload"]["name"] == "wf2")
        .await;
    let seqs: Vec<u64> = replayed.iter().map(|e| e.id.unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gapless from seq 1"
    );
    assert_eq!(replayed[0].data["kind"], "user.created");

    let repo = make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let live = sse
        .until("project.created", |e| e.data["kind"] == "project.created")
        .await;
    assert_eq!(live.len(), 1, "nothing between");
    assert_eq!(live[0].data["payload"]["id"], project["id"]);
    assert_eq!(live[0].data["project_id"], project["id"]);
    assert_eq!(live[0].data["actor"], "ada");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_with_last_event_id_gives_exactly_the_rest_at_every_point() {
    let server = TestServer::spawn().await;
    let api = server.api();
    make_events(&api, 12).await;
    let status = api.call("getStatus", &[], &[], None).await;
    let last = status.body["last_event_seq"].as_u64().unwrap();
    assert_eq!(last, 13, "user.created + 12 workflows");
    for k in 0..=last {
        // Header form, and the `after` query form (the header wins when both are given).
        for how in ["header", "query", "both"] {
            let mut sse = match how {
                "header" => api.events(&[], Some(k)).await,
                "query" => api.events(&[("after", &k.to_string())], None).await,
                _ => api.events(&[("after", "0")], Some(k)).await,
            };
            for expected in k + 1..=last {
                let e = sse
                    .next(WAIT)
                    .await
                    .unwrap_or_else(|| panic!("{how} k={k}: missing seq {expected}"));
                assert_eq!(e.id, Some(expected), "{how} k={k}");
            }
            if k == last && how == "both" {
                // Nothing more is pending: the next event is the one made now.
                make_events(&api, 1).await;
                let e = sse.next(WAIT).await.expect("the new event");
                assert_eq!(e.id, Some(last + 1));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_every_seq_once_while_many_clients_write() {
    let server = TestServer::spawn().await;
    let api = server.api();
    api.get_me().await;
    let mut sse = api.events(&[], None).await;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    let yaml =
                        format!("stages:\n  - name: s\n    model: m\n    prompt: w{w} i{i}\n");
                    let r = api
                        .call_raw(
                            "putWorkflow",
                            &[&format!("w{w}-{i}")],
                            "application/yaml",
                            yaml.into_bytes(),
                        )
                        .await;
                    assert_eq!(r.status, 200);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let total = 1 + 8 * 25;
    for expected in 1..=total {
        let e = sse
            .next(WAIT)
            .await
            .unwrap_or_else(|| panic!("missing seq {expected}"));
        assert_eq!(e.id, Some(expected as u64));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_filter_keeps_one_task_and_unknown_tasks_are_404() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let a = api.create_task(&pid, "a").await;
    let b = api.create_task(&pid, "b").await;
    let mut sse = api
        .events(&[("task_id", b["id"].as_str().unwrap())], None)
        .await;
    let seen = sse
        .until("b's worktree", |e| {
            e.data["kind"] == "task.worktree_created"
        })
        .await;
    assert!(
        seen.iter().all(|e| e.data["task_id"] == b["id"]),
        "only b's events: {seen:?}"
    );
    assert_eq!(seen.len(), 2);
    let _ = a;
    let (_, url) = api.url("streamEvents", &[]);
    let client = reqwest::Client::new();
    let r = client
        .get(&url)
        .query(&[("task_id", "nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: serde_json::Value = r.json().await.unwrap();
    crate::schema::Contract::get()
        .check_response("streamEvents", 404, &body)
        .unwrap();
    let r = client
        .get(&url)
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400, "a malformed Last-Event-ID");
    let r = client
        .get(&url)
        .query(&[("after", "-1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400, "a negative after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_with_an_owner_reach_only_that_user() {
    let server = TestServer::spawn_team().await;
    let ada = server.api_as("ada");
    let bob = server.api_as("bob");
    ada.get_me().await;
    bob.get_me().await;
    let (_repo, pid) = ada.basic_project().await;
    let task = ada.create_task(&pid, "shared").await;
    let tid = task["id"].as_str().unwrap();
    let r = ada
        .call(
            "updateDefaultModel",
            &[],
            &[],
            Some(json!({"model": "opus"})),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = bob
        .call(
            "setFocus",
            &[],
            &[],
            Some(json!({"task_id": tid, "tabs": ["changes"], "tab": "files"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["project_id"].as_str(),
        Some(pid.as_str()),
        "the task's project is filled in"
    );
    make_events(&ada, 1).await; // a public marker at the end

    for (api, me, other) in [(&ada, "ada", "bob"), (&bob, "bob", "ada")] {
        let mut sse = api.events(&[], None).await;
        let seen = sse
            .until("the marker", |e| e.data["kind"] == "workflow.saved")
            .await;
        assert!(
            seen.iter()
                .all(|e| e.data["owner"].is_null() || e.data["owner"] == me),
            "{me} saw {other}'s event"
        );
        let owned = seen.iter().filter(|e| e.data["owner"] == me).count();
        assert_eq!(owned, 1, "{me} sees their own owned event");
        let task_events = api.call("listTaskEvents", &[tid], &[], None).await;
        assert!(task_events
            .body
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["owner"].is_null() || e["owner"] == me));
    }
    let bob_focus = bob.call("getFocus", &[], &[], None).await;
    assert_eq!(bob_focus.body["tab"], "files");
    let ada_focus = ada.call("getFocus", &[], &[], None).await;
    assert_eq!(
        ada_focus.body["tab"], "transcript",
        "ada's focus is her own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_gets_heartbeats() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let mut sse = api.events(&[], None).await;
    let _ = sse.next(Duration::from_millis(100)).await;
    sse.heartbeat().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_server_refuses_callers_without_a_known_token() {
    let server = TestServer::spawn_team().await;
    let anonymous = server.api();
    let r = anonymous.call("getMe", &[], &[], None).await;
    assert_eq!(r.status, 401);
    let wrong = server
        .api()
        .with_header("Authorization", "Bearer not-a-token-at-all-xx");
    assert_eq!(wrong.call("listProjects", &[], &[], None).await.status, 401);
    let ada = server.api_as("ada").get_me().await;
    assert_eq!(ada.body["login"], "ada");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_with_a_small_stream_buffer_still_gets_every_seq_in_order() {
    // A 32 KiB buffer holds about four of these 8 KiB events: a reader further behind than
    // that goes on from the log.
    let server = TestServer::spawn_with_stream_buffer(32 * 1024).await;
    let api = server.api();
    api.get_me().await;
    let mut sse = api.events(&[], None).await;
    let first = sse.next(WAIT).await.expect("user.created");
    assert_eq!(first.id, Some(1));
    // The reader reads nothing while 400 events (about 3.3 MB, far more than the buffer and
    // the sockets hold) are written.
    let filler = "x".repeat(8 * 1024);
    for i in 0..400 {
        let yaml = format!(
            "description: {filler}\nstages:\n  - name: only\n    model: sonnet\n    prompt: p{i}\n"
        );
        let r = api
            .call_raw(
                "putWorkflow",
                &[&format!("big{i}")],
                "application/yaml",
                yaml.into_bytes(),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    for expected in 2..=401u64 {
        let e = sse
            .next(WAIT)
            .await
            .unwrap_or_else(|| panic!("missing seq {expected}"));
        assert_eq!(e.id, Some(expected));
        assert_eq!(
            e.data["payload"]["name"],
            format!("big{}", expected - 2),
            "seq {expected} carries its own event"
        );
        if expected % 50 == 0 {
            // Slowly: others write meanwhile, and the reader stays behind the buffer.
            make_events(&api, 1).await;
        }
    }
    // Then the events written while it read, and nothing else.
    for k in 0..8u64 {
        let e = sse.next(WAIT).await.expect("a later event");
        assert_eq!(e.id, Some(402 + k));
        assert_eq!(e.data["kind"], "workflow.saved");
    }
}
