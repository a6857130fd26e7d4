//! A failed agent can be cleared (dismissing a `session_error` closes it and sends the agent
//! nothing; a task's items close with it; a missing CLI shows in `getStatus` and in `serve`'s
//! start-up warning); a worktree removed while byre runs comes back at the next view, turn or
//! snapshot, and the next turn runs in it
//! (not in the removed directory a live CLI was left in); an answer that could never reach
//! the agent of a task being discarded is refused; Claude Code's `rate_limit_event` reaches `getStatus`;
//! a start-up on a data dir whose repository was moved away says so in one line, not one per task.

use std::io::{BufRead, Read};

use byre_projections::snapshots::SnapshotTrigger;
use byre_projections::Command;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::Bench as ClaudeBench;
use crate::helpers::{event_kinds, find, local_ada, until_kind, Api, Sse, TestServer, WAIT};

/// A server whose Claude Code CLI is missing, a project, and an event stream.
struct Bench {
    server: TestServer,
    api: Api,
    project_id: String,
    sse: Sse,
    _repo: TempDir,
}

impl Bench {
    async fn start() -> Bench {
        let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), |c| {
            c.claude_bin = Some("/nonexistent/claude".into());
        })
        .await;
        let api = server.api();
        let (repo, project_id) = api.basic_project().await;
        let sse = api.events(&[], None).await;
        Bench {
            server,
            api,
            project_id,
            sse,
            _repo: repo,
        }
    }

    /// Every inbox item of task `task_id`, whatever its state.
    async fn inbox_of(&self, task_id: &str) -> Vec<Value> {
        let mut items = Vec::new();
        for state in ["open", "answered", "dismissed", "superseded"] {
            let r = self
                .api
                .call(
                    "listInbox",
                    &[],
                    &[("task_id", task_id), ("state", state)],
                    None,
                )
                .await;
            assert_eq!(r.status, 200);
            items.extend(r.body.as_array().unwrap().iter().cloned());
        }
        items
    }

    async fn respond(&self, responses: Value) -> u16 {
        self.api
            .call(
                "respondInbox",
                &[],
                &[],
                Some(json!({ "responses": responses })),
            )
            .await
            .status
    }

    /// The kinds of task `task_id`'s events after seq `after`.
    async fn kinds_after(&self, task_id: &str, after: u64) -> Vec<String> {
        let events = self
            .api
            .call("listTaskEvents", &[task_id], &[], None)
            .await
            .body;
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["seq"].as_u64().unwrap() > after)
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_while_the_cli_is_missing_leaves_one_item_whose_dismissal_starts_no_turn() {
    let mut b = Bench::start().await;
    let status = b.api.call("getStatus", &[], &[], None).await.body;
    let claude = status["agent_clis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["vendor"] == "claude")
        .unwrap()
        .clone();
    assert_eq!(
        claude,
        json!({"vendor": "claude", "program": "/nonexistent/claude", "env_var": "BYRE_CLAUDE_BIN", "found": false})
    );
    let task = b
        .api
        .create_task_with(&b.project_id, json!({"title": "no cli", "prompt": "hello"}))
        .await;
    let tid = task["id"].as_str().unwrap().to_owned();
    until_kind(&mut b.sse, "turn.ended", WAIT).await;
    let items = b.inbox_of(&tid).await;
    assert_eq!(items.len(), 1, "exactly one item: {items:?}");
    assert_eq!(items[0]["kind"], "session_error");
    assert!(items[0]["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("BYRE_CLAUDE_BIN"));
    let item_id = items[0]["id"].as_str().unwrap().to_owned();

    assert_eq!(
        b.respond(json!([{"item_id": item_id, "type": "dismiss"}]))
            .await,
        200
    );
    let responded = until_kind(&mut b.sse, "inbox.responded", WAIT).await;
    let seq = responded.last().unwrap().id.unwrap();
    // Delivery is decided in the respondInbox command itself: a turn would be in its batch.
    // (The failed turn's snapshot may still be recorded after it.)
    let after = b.kinds_after(&tid, seq).await;
    assert!(
        after
            .iter()
            .all(|k| k == "snapshot.taken" || k == "snapshot.failed"),
        "nothing reaches the agent: {after:?}"
    );
    let items = b.inbox_of(&tid).await;
    assert_eq!(items.len(), 1, "still one item");
    assert_eq!(items[0]["state"], "dismissed");
    let session = b.api.first_session(&tid).await;
    assert_eq!(session["state"], "idle", "no turn started");
    assert_eq!(
        b.respond(json!([{"item_id": item_id, "type": "dismiss"}]))
            .await,
        409,
        "closed"
    );

    // Answering such an item with text still hands the text over.
    let sid = session["id"].as_str().unwrap();
    b.api
        .call("sendMessage", &[sid], &[], Some(json!({"text": "again"})))
        .await;
    until_kind(&mut b.sse, "turn.ended", WAIT).await;
    let second = b
        .inbox_of(&tid)
        .await
        .into_iter()
        .find(|i| i["state"] == "open")
        .expect("the second failure's item");
    assert_eq!(
        b.respond(json!([{"item_id": second["id"], "type": "other", "text": "try again"}]))
            .await,
        200
    );
    let handed = until_kind(&mut b.sse, "user.message", WAIT).await;
    assert!(find(&handed, "user.message")["payload"]["text"]
        .as_str()
        .unwrap()
        .contains("try again"));
    until_kind(&mut b.sse, "turn.ended", WAIT).await;
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_items_of_a_task_close_when_the_task_closes() {
    let mut b = Bench::start().await;
    let task = b
        .api
        .create_task_with(
            &b.project_id,
            json!({"title": "closing", "prompt": "hello"}),
        )
        .await;
    let tid = task["id"].as_str().unwrap().to_owned();
    until_kind(&mut b.sse, "turn.ended", WAIT).await;
    assert_eq!(b.inbox_of(&tid).await[0]["state"], "open");
    let r = b.api.call("discardTask", &[&tid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = until_kind(&mut b.sse, "task.discarded", WAIT).await;
    let mut closing = until_kind(&mut b.sse, "inbox.closed", WAIT).await;
    closing.extend(events);
    let closed = find(&closing, "inbox.closed");
    assert_eq!(closed["payload"]["reason"], "task_closed");
    let items = b.inbox_of(&tid).await;
    assert!(!items.is_empty());
    for item in &items {
        assert_eq!(item["state"], "dismissed", "{item}");
        assert_eq!(item["resolved_by"], "byre", "{item}");
    }
    let open = b
        .api
        .call("listInbox", &[], &[("state", "open")], None)
        .await;
    assert_eq!(open.body, json!([]));
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_warns_at_start_up_when_an_agent_cli_is_missing() {
    let data = TempDir::new().unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = crate::process::serve_command(data.path())
        .env("BYRE_CLAUDE_BIN", "/nonexistent/claude")
        .stdout(std::process::Stdio::piped())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    // The URL line comes once start-up is done, after the warning.
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    child.wait().unwrap();
    let mut stderr = String::new();
    log.reopen().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(
        stderr.contains("Claude Code was not found") && stderr.contains("BYRE_CLAUDE_BIN"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_worktree_comes_back_at_the_next_view_turn_and_snapshot() {
    let mut b = Bench::start().await;
    let task = b.api.create_task(&b.project_id, "removed").await;
    let tid = task["id"].as_str().unwrap().to_owned();
    until_kind(&mut b.sse, "task.worktree_created", WAIT).await;
    let path = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    let branch = format!("refs/heads/{}", task["branch"].as_str().unwrap());
    let on_branch = |path: &std::path::Path| {
        let repo = git2::Repository::open(path).expect("a worktree again");
        let head = repo.head().unwrap().name().map(str::to_owned).ok();
        head
    };

    std::fs::remove_dir_all(&path).unwrap();
    let dir = b.api.call("getTaskDir", &[&tid], &[], None).await;
    assert_eq!(dir.status, 200, "{:?}", dir.body);
    assert!(
        dir.body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "README.md"),
        "{}",
        dir.body
    );
    assert_eq!(
        on_branch(&path),
        Some(branch.clone()),
        "at the same path, on the task branch"
    );

    std::fs::remove_dir_all(&path).unwrap();
    let r = b
        .api
        .call(
            "createSession",
            &[&tid],
            &[],
            Some(json!({"prompt": "hello"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let turn = until_kind(&mut b.sse, "turn.ended", WAIT).await;
    let error = find(&turn, "turn.ended")["payload"]["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains("could not start"),
        "the turn found its worktree and failed only on the missing CLI: {error}"
    );
    assert_eq!(on_branch(&path), Some(branch.clone()));
    // That turn's end-of-turn snapshot is taken; then a requested one, the worktree gone again.
    until_kind(&mut b.sse, "snapshot.taken", WAIT).await;

    std::fs::remove_dir_all(&path).unwrap();
    b.server
        .submit(Command::RequestSnapshot {
            task_id: tid.clone().into(),
            trigger: SnapshotTrigger::Requested,
        })
        .await;
    let snapped = until_kind(&mut b.sse, "snapshot.taken", WAIT).await;
    assert!(
        !event_kinds(&Value::Array(
            snapped.iter().map(|e| e.data.clone()).collect()
        ))
        .contains(&"snapshot.failed"),
        "no snapshot failed"
    );
    assert_eq!(on_branch(&path), Some(branch));
    b.server.stop().await;
}

/// The pid of the session's agent process, from `getStatus`.
async fn agent_pid(api: &Api, session_id: &str) -> i64 {
    let status = api.call("getStatus", &[], &[], None).await;
    status.body["agent_processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["session_id"] == session_id)
        .unwrap_or_else(|| panic!("no process of {session_id}: {}", status.body))["pid"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_after_the_worktree_was_removed_runs_in_the_remade_worktree_not_the_removed_one() {
    let mut b = ClaudeBench::start("c_two_turns").await;
    let task = b.task_with_prompt("first question").await;
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    let first = b.turn().await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    b.until("snapshot.taken").await;
    let path = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    let idle_pid = agent_pid(&b.api, &sid).await;

    // Removed while the CLI waits between turns (its working directory is now a removed one);
    // a view makes the worktree again at the same path before the next message.
    std::fs::remove_dir_all(&path).unwrap();
    let dir = b
        .api
        .call("getTaskDir", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(dir.status, 200, "{:?}", dir.body);
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "second question"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let second = b.turn().await;
    let ended = find(&second, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    assert_eq!(ended["payload"]["result"], "Answer two.");
    let pid = agent_pid(&b.api, &sid).await;
    assert_ne!(
        pid, idle_pid,
        "the CLI sitting in the removed directory was replaced"
    );
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(
        cwd, path,
        "the agent works in the remade worktree, not the removed one"
    );
    let asked = b
        .fake
        .messages_requests()
        .iter()
        .filter(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("second question"))
        })
        .count();
    assert_eq!(asked, 1, "the second message reached the model once");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_removed_while_its_agent_lives_is_made_again_before_the_next_turn_which_resumes_the_conversation(
) {
    let mut b = ClaudeBench::start("c_two_turns").await;
    let task = b.task_with_prompt("first question").await;
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    let first = b.turn().await;
    assert_eq!(
        find(&first, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    b.until("snapshot.taken").await;
    let path = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    let idle_pid = agent_pid(&b.api, &sid).await;

    // Removed under the live CLI, and nothing else makes it again before the next message:
    // the turn's own start must.
    std::fs::remove_dir_all(&path).unwrap();
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "second question"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let second = b.turn().await;
    let ended = find(&second, "turn.ended");
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    assert_eq!(ended["payload"]["result"], "Answer two.");
    let pid = agent_pid(&b.api, &sid).await;
    assert_ne!(
        pid, idle_pid,
        "the CLI left in the removed directory was replaced"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        path,
        "the fresh CLI works in the worktree made again"
    );
    assert!(path.join("README.md").is_file(), "the worktree is whole");
    // The model's request for the second answer carries the first exchange: the fresh CLI
    // resumed the conversation rather than starting one without it.
    let asked: Vec<_> = b
        .fake
        .messages_requests()
        .into_iter()
        .filter(|r| {
            r.last_user_text()
                .is_some_and(|t| t.contains("second question"))
        })
        .collect();
    assert_eq!(asked.len(), 1, "the second message reached the model once");
    let history = asked[0].body.as_ref().unwrap()["messages"].to_string();
    assert!(history.contains("first question"), "{history}");
    assert!(history.contains("Answer one."), "{history}");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_item_of_a_task_being_discarded_is_refused_and_a_dismissal_closes_it() {
    let mut b = ClaudeBench::start("s_signals").await;
    let task = b.task_with_prompt("sleep in a tool").await;
    let tid = task["id"].as_str().unwrap().to_owned();
    let sid = b.session_of(&task).await["id"].as_str().unwrap().to_owned();
    b.until("tool.call").await;
    // SAFETY: sending a signal has no memory-safety effect.
    unsafe { libc::kill(agent_pid(&b.api, &sid).await as i32, libc::SIGKILL) };
    let failed = b.turn().await;
    assert_eq!(find(&failed, "turn.ended")["payload"]["outcome"], "failed");
    let items = b
        .api
        .call("listInbox", &[], &[("task_id", &tid)], None)
        .await;
    let item = items.body[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(items.body[0]["kind"], "session_error");
    // A turn runs (Bash sleep 600), so the discard waits for it: the task is being discarded.
    let r = b
        .api
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "sleep in a tool again"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    b.until("tool.call").await;
    let r = b.api.call("discardTask", &[&tid], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);

    let answer = b
        .api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(json!({"responses": [{"item_id": item, "type": "other", "text": "try again"}]})),
        )
        .await;
    assert_eq!(
        answer.status, 409,
        "the text could never reach the agent: {:?}",
        answer.body
    );
    assert!(answer.message().contains("dismiss"), "{}", answer.message());
    let dismiss = b
        .api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(json!({"responses": [{"item_id": item, "type": "dismiss"}]})),
        )
        .await;
    assert_eq!(dismiss.status, 200, "{:?}", dismiss.body);
    assert_eq!(dismiss.body[0]["state"], "dismissed");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_rate_limit_events_reach_get_status() {
    let mut b = ClaudeBench::start_with_credentials(
        "t_rate_limit_event",
        None,
        ("CLAUDE_CODE_OAUTH_TOKEN", "fake-claude-ai-token"),
    )
    .await;
    b.task_with_prompt("hello").await;
    let events = b.turn().await;
    assert_eq!(
        find(&events, "turn.ended")["payload"]["outcome"],
        "completed"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.data["kind"] == "vendor.unrecognized"),
        "the rate_limit_event line is understood"
    );
    let status = b.api.call("getStatus", &[], &[], None).await.body;
    let claude = &status["rate_limits"]["claude"];
    assert_eq!(
        claude["vendor_status"]["status"], "allowed_warning",
        "{status}"
    );
    assert_eq!(claude["vendor_status"]["rateLimitType"], "five_hour");
    assert_eq!(claude["vendor_status"]["utilization"], 0.91);
    assert!(claude["vendor_reports"].as_u64().unwrap() >= 1, "{claude}");
    assert_eq!(status["protocol_errors"]["counts"], json!({}));
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_up_without_a_projects_repository_says_so_in_one_line_for_all_its_tasks() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (moved, moved_id) = api.basic_project().await;
    let kept = crate::helpers::make_repo("basic");
    let kept_id = api.create_project("kept", kept.path()).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut sse = api.events(&[], None).await;
    let mut moved_worktrees = Vec::new();
    for i in 0..3 {
        let task = api.create_task(&moved_id, &format!("t{i}")).await;
        moved_worktrees.push(task["worktree_path"].as_str().unwrap().to_owned());
        until_kind(&mut sse, "task.worktree_created", WAIT).await;
    }
    let kept_task = api.create_task(&kept_id, "kept").await;
    until_kind(&mut sse, "task.worktree_created", WAIT).await;
    drop(sse);
    let kept_worktree = std::path::PathBuf::from(kept_task["worktree_path"].as_str().unwrap());
    let data = server.stop().await;
    // While byre is stopped: one project's repository moves away (one of its tasks' worktrees
    // goes too); the other's task loses its worktree directory (its repository stays).
    let moved_repo = crate::helpers::canonical(moved.path());
    let away = TempDir::new().unwrap();
    std::fs::rename(moved.path(), away.path().join("basic")).unwrap();
    std::fs::remove_dir_all(&kept_worktree).unwrap();
    std::fs::remove_dir_all(&moved_worktrees[0]).unwrap();

    let mut child = crate::process::serve_command(data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    // The summary ends start-up's reconcile of worktrees: wait for it.
    let summary = loop {
        let line = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no summary line; byre printed:\n{}", lines.join("\n")));
        lines.push(line.clone());
        if line.contains("repository is missing") {
            break line;
        }
    };
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    child.wait().unwrap();
    // The reader ends at the pipe's end: every line byre printed is in.
    lines.extend(rx.iter());
    let all = lines.join("\n");
    assert!(
        summary.contains("ERROR")
            && summary.contains(
                "3 active tasks have no usable worktree because their project's repository is missing"
            )
            && summary.contains(&format!("basic ({moved_repo}, 3 tasks)"))
            && summary.contains("Put each repository back at its path and restart byre"),
        "{summary}"
    );
    assert_eq!(
        all.lines().filter(|l| l.contains("ERROR")).count(),
        1,
        "one error line, not one per task:\n{all}"
    );
    assert!(
        kept_worktree.is_dir(),
        "the task whose repository is there got its worktree back before the summary"
    );
    drop(away);
}
