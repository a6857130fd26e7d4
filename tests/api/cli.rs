//! `byre log`, `byre rebuild`, `byre replay` against a log a running server writes.

use serde_json::Value;

use crate::helpers::make_repo;
use crate::process::{run_cli, ServeProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_rebuild_and_replay_read_a_log_while_the_server_runs() {
    let data = tempfile::TempDir::new().unwrap();
    let server = ServeProcess::start(data.path());
    let client = reqwest::Client::new();
    let repo = make_repo("basic");
    let project: Value = client
        .post(format!("{}/api/projects", server.url))
        .json(&serde_json::json!({"name": "basic", "repo_path": repo.path()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let pid = project["id"].as_str().unwrap();
    let task: Value = client
        .post(format!("{}/api/projects/{pid}/tasks", server.url))
        .json(&serde_json::json!({"title": "cli"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tid = task["id"].as_str().unwrap();
    let d = data.path().to_str().unwrap();

    let (code, out, err) = run_cli(&["log", "--data", d, "--json"]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user.created",
            "project.created",
            "task.created",
            "task.worktree_created"
        ]
    );
    for e in &events {
        crate::schema::Contract::get()
            .check_schema("Event", e)
            .unwrap();
    }
    let (_, out, _) = run_cli(&["log", "--data", d, "--task", tid, "--json"]);
    assert_eq!(out.lines().count(), 2, "only the task's events");
    let (_, out, _) = run_cli(&["log", "--data", d, "--kind", "project.created"]);
    assert_eq!(out.lines().count(), 1);
    assert!(out.contains("project.created"), "{out}");
    let (_, out, _) = run_cli(&["log", "--data", d, "--from", "2", "--to", "3", "--json"]);
    assert_eq!(out.lines().count(), 2);

    let created_seq = events[2]["seq"].as_u64().unwrap().to_string();
    let (code, out, err) = run_cli(&[
        "replay",
        "--data",
        d,
        "--task",
        tid,
        "--until",
        &created_seq,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\"state\": \"no_agent\"")
            && out.contains("task.created")
            && !out.contains("task.worktree_created"),
        "{out}"
    );
    let (code, _, err) = run_cli(&["replay", "--data", d, "--task", tid, "--until", "1"]);
    assert_ne!(code, 0);
    assert!(err.contains("does not exist at seq 1"), "{err}");

    let (code, out, err) = run_cli(&["rebuild", "--data", d]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("tasks       1") && out.contains("digest      sha256:"),
        "{out}"
    );
    assert_eq!(server.terminate(), Some(0));
    let (code, out, _) = run_cli(&["rebuild", "--data", d, "--verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("verify      ok: the fold up to seq 4"),
        "the graceful stop checkpointed the last seq: {out}"
    );
    let (code, _, err) = run_cli(&["log", "--data", "/no/such/dir"]);
    assert_ne!(code, 0);
    assert!(err.contains("no log at"), "{err}");
}

#[test]
fn a_sigterm_sent_as_soon_as_serve_says_it_listens_stops_it_gracefully() {
    // A supervisor may signal the moment it reads the line: byre listens for the signal
    // before printing it, so the stop is graceful (exit 0), never SIGTERM's default kill.
    // Several rounds, since without that order it depends on timing.
    for round in 0..20 {
        let data = tempfile::TempDir::new().unwrap();
        let server = ServeProcess::start(data.path());
        assert_eq!(server.terminate(), Some(0), "round {round}");
    }
}

#[test]
fn serve_refuses_to_listen_beyond_loopback_without_authentication() {
    let (code, _, err) = run_cli(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--data",
        "/tmp/never-used-byre",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("refusing to listen"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_of_an_unknown_task_says_so_and_exits_2() {
    let data = tempfile::TempDir::new().unwrap();
    let server = ServeProcess::start(data.path());
    reqwest::get(format!("{}/api/me", server.url))
        .await
        .unwrap();
    let d = data.path().to_str().unwrap();
    let (code, out, err) = run_cli(&["log", "--data", d, "--task", "no-such-task"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no task no-such-task in this log"), "{err}");
    // Without --to, the log runs to its last seq; --help says so rather than a number.
    let (code, out, _) = run_cli(&["log", "--data", d, "--from", "1", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "user.created: {out}");
    let (_, help, _) = run_cli(&["log", "--help"]);
    assert!(help.contains("the last seq of the log"), "{help}");
    assert!(!help.contains("18446744073709551615"), "{help}");
    let (_, help, _) = run_cli(&["serve", "--help"]);
    for var in [
        "BYRE_CLAUDE_BIN",
        "BYRE_CODEX_BIN",
        "ANTHROPIC_",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "BYRE_LOG",
        "BYRE_STREAM_BUFFER",
    ] {
        assert!(help.contains(var), "serve --help names {var}: {help}");
    }
    assert_eq!(server.terminate(), Some(0));
}
