//! Reviews with the real CLIs against the fake model APIs: a Claude Code task's turn that
//! changes a file is reviewed by a real Codex reviewer whose script calls `submit_review`
//! (`fixtures/fake-model/codex_r_review.json`); a turn that changes nothing is skipped with no
//! reviewer; `setFindingState` `fixed` reaches the task's agent.

use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{git, local_ada, until_kind, Api, Sse, SseEvent, TestServer};

/// The stream's events up to and including the first that `pred` accepts.
async fn until(
    sse: &mut Sse,
    timeout: Duration,
    pred: impl Fn(&SseEvent) -> bool,
) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        let e = sse
            .next(timeout)
            .await
            .unwrap_or_else(|| panic!("not seen; saw {:?}", crate::helpers::kinds(&seen)));
        let done = pred(&e);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

const WAIT: Duration = Duration::from_secs(180);

/// A server that reviews snapshots, its agents and reviewers on the fake model APIs, with the
/// `basic` project and an event stream opened at the start (the browser test uses it too).
pub(crate) struct Bench {
    pub(crate) server: TestServer,
    pub(crate) claude: FakeAnthropic,
    pub(crate) codex: FakeOpenAi,
    pub(crate) api: Api,
    pub(crate) project_id: String,
    pub(crate) sse: Sse,
    _repo: TempDir,
}

/// Starts a [`Bench`]: Claude Code on `claude_script`, Codex on `codex_script`
/// (`fixtures/fake-model/`); Claude Code tasks are reviewed by Codex and the reverse.
pub(crate) async fn bench(claude_script: &str, codex_script: &str) -> Bench {
    bench_with(claude_script, codex_script, Duration::from_secs(600)).await
}

/// [`bench`] with reviewers stopped after `review_timeout`.
async fn bench_with(claude_script: &str, codex_script: &str, review_timeout: Duration) -> Bench {
    let claude = FakeAnthropic::fixture(claude_script)
        .await
        .expect("fake API");
    let codex = FakeOpenAi::fixture(codex_script).await.expect("fake API");
    let (claude_bin, codex_bin, env) = crate::helpers::real_clis_on(&claude, &codex).await;
    // Not under /tmp: there Codex will not create its helper binaries.
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    let server = TestServer::spawn_configured(data, local_ada(), move |c| {
        c.claude_bin = Some(claude_bin);
        c.codex_bin = Some(codex_bin);
        c.agent_env = env;
        c.reviews.enabled = true;
        c.reviews.codex_model = "gpt-5.5".into();
        c.reviews.claude_model = "sonnet".into();
        c.reviews.timeout = review_timeout;
    })
    .await;
    let api = server.api();
    let me = json!({"git_name": "Ada", "git_email": "ada@example.com"});
    let r = api.call("updateMe", &[], &[], Some(me)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let (repo, project_id) = api.basic_project().await;
    let sse = api.events(&[], None).await;
    Bench {
        server,
        claude,
        codex,
        api,
        project_id,
        sse,
        _repo: repo,
    }
}

impl Bench {
    async fn task(&self, prompt: &str) -> String {
        self.titled("agent task", prompt).await
    }

    async fn titled(&self, title: &str, prompt: &str) -> String {
        let task = self
            .api
            .create_task_with(&self.project_id, json!({"title": title, "prompt": prompt}))
            .await;
        task["id"].as_str().unwrap().to_owned()
    }

    /// listReviews of `task_id` (asserting 200).
    pub(crate) async fn reviews(&self, task_id: &str) -> Vec<Value> {
        let got = self.api.call("listReviews", &[task_id], &[], None).await;
        assert_eq!(got.status, 200, "{:?}", got.body);
        got.body.as_array().unwrap().clone()
    }

    /// The task's `task.state` values on the stream until one of `kinds` ends it.
    async fn states_until(&mut self, task_id: &str, kind: &str) -> Vec<String> {
        let events = until_kind(&mut self.sse, kind, WAIT).await;
        events
            .iter()
            .filter(|e| e.data["kind"] == "task.state" && e.data["task_id"] == task_id)
            .map(|e| e.data["payload"]["state"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_turn_that_writes_a_file_is_reviewed_by_codex_and_a_fixed_finding_reaches_the_agent(
) {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let task_id = b.task("Please create hello.txt").await;
    let mut states = b.states_until(&task_id, "review.done").await;
    states.extend(b.states_until(&task_id, "task.state").await);
    assert_eq!(
        states,
        ["running", "review_pending", "reviewing", "idle"],
        "the task's states"
    );
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    let r = &reviews[0];
    assert_eq!(r["state"], "done", "{r:?}");
    assert_eq!(r["vendor"], "codex");
    assert_eq!(r["snapshot_n"], 1);
    let findings = r["result"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2);
    assert_eq!(findings[0]["title"], "No trailing period");
    assert_eq!(findings[1]["severity"], "nit");
    let sessions = b.api.call("listSessions", &[&task_id], &[], None).await;
    assert_eq!(
        sessions.body.as_array().unwrap().len(),
        1,
        "the reviewer is not among the task's sessions"
    );
    let codex_asked = b.codex.responses_requests();
    assert!(!codex_asked.is_empty(), "the Codex reviewer ran");
    let claude_before = b.claude.messages_requests().len();

    // Bad index → 400; unknown review → 404.
    let id = r["id"].as_str().unwrap();
    let bad = b
        .api
        .call(
            "setFindingState",
            &[id, "2"],
            &[],
            Some(json!({"state": "fixed"})),
        )
        .await;
    assert_eq!(bad.status, 400, "{:?}", bad.body);
    let none = b
        .api
        .call(
            "setFindingState",
            &["nope", "0"],
            &[],
            Some(json!({"state": "fixed"})),
        )
        .await;
    assert_eq!(none.status, 404);
    let set = b
        .api
        .call(
            "setFindingState",
            &[id, "0"],
            &[],
            Some(json!({"state": "fixed"})),
        )
        .await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    assert_eq!(set.body["finding_states"]["0"], "fixed");
    // The agent's own next turn (the reviewer's turn may end after its review is done).
    let agent = sessions.body[0]["id"].as_str().unwrap().to_owned();
    while !until_kind(&mut b.sse, "turn.ended", WAIT)
        .await
        .iter()
        .any(|e| e.data["kind"] == "turn.ended" && e.data["agent_session_id"] == agent.as_str())
    {
    }
    let asked = b.claude.messages_requests();
    assert!(asked.len() > claude_before, "the agent got a next message");
    let later: Vec<String> = asked[claude_before..]
        .iter()
        .map(|r| serde_json::to_string(&r.body).unwrap())
        .collect();
    assert!(
        later
            .iter()
            .any(|b| b.contains("No trailing period") && b.contains("hello.txt:1")),
        "the finding is the agent's next message: {later:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_changes_no_files_is_skipped_with_no_reviewer() {
    let mut b = bench("a_text", "codex_r_review").await;
    let task_id = b.task("Say hello, please").await;
    let states = b.states_until(&task_id, "review.skipped").await;
    assert_eq!(
        states,
        ["running", "review_pending"],
        "no idle between the turn and its review"
    );
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0]["state"], "skipped");
    assert_eq!(reviews[0]["agent_session_id"], "");
    let states = b.states_until(&task_id, "task.state").await;
    assert_eq!(states, ["idle"]);
    assert!(
        b.codex.responses_requests().is_empty(),
        "no reviewer process asked its model anything"
    );
}

/// Every Claude request asked only for the task's first turn: nothing of a review reached
/// the task's agent.
/// Whether `word` stands in `text` with no letter or digit right before or after it (so a
/// random id holding `429` does not count as the status).
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

fn agent_got_nothing_more(claude: &FakeAnthropic) {
    for r in claude.messages_requests() {
        let messages = serde_json::to_string(&r.body.as_ref().unwrap()["messages"]).unwrap();
        for word in [
            "You are reviewing",
            "review finding",
            "reviewer",
            "429",
            "submit_review",
        ] {
            assert!(
                !contains_word(&messages, word),
                "the task's agent was sent something of the review ({word}): {messages}"
            );
        }
    }
}

async fn failed_review(b: &mut Bench, task_id: &str) -> Value {
    until_kind(&mut b.sse, "review.failed", WAIT).await;
    let reviews = b.reviews(task_id).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0]["state"], "failed", "{reviews:?}");
    assert!(reviews[0].get("result").is_none(), "no findings");
    reviews[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_that_gets_429_fails_and_the_agent_gets_nothing() {
    let mut b = bench("b_write_file", "codex_k_429").await;
    let task_id = b.task("Please create hello.txt").await;
    let r = failed_review(&mut b, &task_id).await;
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("429"), "{error}");
    agent_got_nothing_more(&b.claude);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_that_ends_without_submit_review_fails() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let task_id = b.titled("silent review", "Please create hello.txt").await;
    let r = failed_review(&mut b, &task_id).await;
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("without calling submit_review"),
        "{r:?}"
    );
    agent_got_nothing_more(&b.claude);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_review_ends_the_reviewer_and_fails_the_review() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let task_id = b.titled("slow review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let running = b.reviews(&task_id).await;
    assert_eq!(running[0]["state"], "running");
    let id = running[0]["id"].as_str().unwrap().to_owned();
    let reviewer = running[0]["agent_session_id"].as_str().unwrap().to_owned();
    // Stop it once its process runs (a stop before that ends a start, not a process: the
    // reviewer's checkout is gone before the start can use it).
    for _ in 0..300 {
        if !crate::agent_exits::marked(&reviewer).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !crate::agent_exits::marked(&reviewer).is_empty(),
        "the reviewer's process never started"
    );
    let stopped = b.api.call("stopReview", &[&id], &[], None).await;
    assert_eq!(stopped.status, 200, "{:?}", stopped.body);
    assert_eq!(stopped.body["state"], "failed");
    assert!(stopped.body["error"].as_str().unwrap().contains("stopped"));
    let again = b.api.call("stopReview", &[&id], &[], None).await;
    assert_eq!(again.status, 409);
    let none = b.api.call("stopReview", &["nope"], &[], None).await;
    assert_eq!(none.status, 404);
    until_kind(&mut b.sse, "session.completed", WAIT).await;
    let s = b.api.call("getSession", &[&reviewer], &[], None).await;
    assert_eq!(s.body["state"], "completed", "{:?}", s.body);
    no_process_left(&reviewer).await;
    // byre ended the reviewer itself: its exit is not reported as a kill from outside byre.
    let exited = until(&mut b.sse, WAIT, |e| {
        e.data["kind"] == "session.process_exited"
            && e.data["agent_session_id"] == reviewer.as_str()
    })
    .await;
    let reason = exited.last().unwrap().data["payload"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("stopped by byre"), "{reason}");
    agent_got_nothing_more(&b.claude);
}

/// Waits (up to 10 s) until no process marked as session `session_id`'s is alive.
async fn no_process_left(session_id: &str) {
    for _ in 0..100 {
        if crate::agent_exits::marked(session_id).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the reviewer's processes outlived it: {:?}",
        crate::agent_exits::marked(session_id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_past_the_review_timeout_is_stopped_and_the_review_fails() {
    let mut b = bench_with("b_write_file", "codex_r_review", Duration::from_secs(3)).await;
    // The "slow review" reviewer answers only after 60 s.
    let task_id = b.titled("slow review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let reviewer = b.reviews(&task_id).await[0]["agent_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    until_kind(&mut b.sse, "review.failed", WAIT).await;
    let r = &b.reviews(&task_id).await[0];
    assert_eq!(r["state"], "failed", "{r:?}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("longer than 3 s"), "{error}");
    assert!(
        r.get("result").is_none_or(Value::is_null),
        "no findings: {r:?}"
    );
    no_process_left(&reviewer).await;
    let t = b.api.call("getTask", &[&task_id], &[], None).await.body;
    assert_eq!(t["state"], "idle", "{t:?}");
    agent_got_nothing_more(&b.claude);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_that_writes_leaves_the_task_worktree_and_branch_alone() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let task_id = b.titled("writer review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.done", WAIT).await;
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews[0]["state"], "done", "{reviews:?}");
    let task = b.api.call("getTask", &[&task_id], &[], None).await.body;
    let worktree = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(!worktree.join("reviewer.txt").exists());
    assert_eq!(
        std::fs::read_to_string(worktree.join("hello.txt")).unwrap(),
        "hello from the fake model\n"
    );
    let snaps = b
        .api
        .call("listSnapshots", &[&task_id], &[], None)
        .await
        .body;
    let repo = git2::Repository::open(&worktree).unwrap();
    let tip = repo
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    assert_eq!(
        tip, snaps[0]["commit_sha"],
        "the branch is where the snapshot left it"
    );
    let statuses = repo.statuses(None).unwrap();
    assert_eq!(statuses.len(), 0, "nothing changed in the worktree");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_turn_that_writes_a_file_is_reviewed_by_claude_code() {
    let mut b = bench("r_review", "codex_b_shell").await;
    let task = b
        .api
        .create_task_with(
            &b.project_id,
            json!({"title": "shell task", "prompt": "Please create the file", "model": "gpt-5.5"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let mut states = b.states_until(&task_id, "review.done").await;
    states.extend(b.states_until(&task_id, "task.state").await);
    assert_eq!(
        states,
        ["running", "review_pending", "reviewing", "idle"],
        "the task's states"
    );
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0]["state"], "done", "{reviews:?}");
    assert_eq!(reviews[0]["vendor"], "claude");
    let findings = reviews[0]["result"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2);
    assert_eq!(findings[0]["severity"], "major");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_running_when_byre_is_killed_is_failed_at_start_up() {
    let claude = FakeAnthropic::fixture("b_write_file")
        .await
        .expect("fake API");
    let codex = FakeOpenAi::fixture("codex_r_review")
        .await
        .expect("fake API");
    let claude_bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install Claude Code");
    let codex_bin = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
        .await
        .expect("install Codex");
    let env: Vec<(String, String)> = vec![
        (
            "BYRE_CLAUDE_BIN".into(),
            claude_bin.to_string_lossy().into(),
        ),
        ("BYRE_CODEX_BIN".into(), codex_bin.to_string_lossy().into()),
        ("ANTHROPIC_BASE_URL".into(), claude.url.clone()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ("OPENAI_BASE_URL".into(), codex.base_url()),
        ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
        ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
        ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
        ("BYRE_REVIEWS".into(), "true".into()),
        ("BYRE_REVIEW_MODEL_CODEX".into(), "gpt-5.5".into()),
    ];
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    let server = crate::process::ServeProcess::start_with_env(data.path(), &env_refs);
    let api = Api::for_url(&server.url);
    let (_repo, pid) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            &pid,
            json!({"title": "slow review", "prompt": "Please create hello.txt"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    until_kind(&mut sse, "review.started", WAIT).await;
    let reviews = api.call("listReviews", &[&task_id], &[], None).await.body;
    let review_id = reviews[0]["id"].as_str().unwrap().to_owned();
    assert!(data.path().join("reviews").join(&review_id).is_dir());
    drop(sse);
    server.kill_9();

    let server = crate::process::ServeProcess::start_with_env(data.path(), &env_refs);
    let api = Api::for_url(&server.url);
    let mut sse = api.events(&[("task_id", &task_id)], None).await;
    until_kind(&mut sse, "session.completed", WAIT).await;
    let reviews = api.call("listReviews", &[&task_id], &[], None).await.body;
    assert_eq!(reviews[0]["state"], "failed", "{reviews:?}");
    assert!(
        reviews[0]["error"]
            .as_str()
            .unwrap()
            .contains("byre stopped"),
        "{reviews:?}"
    );
    assert!(
        !data.path().join("reviews").join(&review_id).exists(),
        "the reviewer's copy is removed"
    );
    // The reviewer is not resumed (no second turn, no process started only to be killed), and
    // nothing of it reaches the inbox.
    let reviewer = reviews[0]["agent_session_id"].as_str().unwrap();
    let events = api
        .call("listTaskEvents", &[&task_id], &[("limit", "1000")], None)
        .await
        .body;
    let reviewer_kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["agent_session_id"] == reviewer)
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(
        reviewer_kinds
            .iter()
            .filter(|k| **k == "turn.started")
            .count(),
        1,
        "one reviewer turn: {reviewer_kinds:?}"
    );
    assert!(
        !reviewer_kinds.contains(&"session.process_exited")
            && !reviewer_kinds.contains(&"inbox.item_created"),
        "{reviewer_kinds:?}"
    );
    let inbox = api
        .call("listInbox", &[], &[("task_id", &task_id)], None)
        .await
        .body;
    assert_eq!(inbox, json!([]), "nothing in the inbox");
    for r in claude.messages_requests() {
        let messages = serde_json::to_string(&r.body.as_ref().unwrap()["messages"]).unwrap();
        assert!(!messages.contains("You are reviewing") && !messages.contains("byre stopped"));
    }
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_after_review_is_dropped_after_a_review_with_findings() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let merge = json!({"merge_title": "Add hello", "after_review": true});
    // The reviewer ("findings review") answers after 5 s with two findings.
    let task_id = b.titled("findings review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let r = b
        .api
        .call("mergeTask", &[&task_id], &[], Some(merge.clone()))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["merge_after_review"], true, "{:?}", r.body);
    let events = until_kind(&mut b.sse, "task.merge_after_review_dropped", WAIT).await;
    let note = &events.last().unwrap().data["payload"]["reason"];
    assert!(note.as_str().unwrap().contains("2 findings"), "{note}");
    let t = b.api.call("getTask", &[&task_id], &[], None).await.body;
    assert_eq!(t["merge_after_review"], false);
    assert_eq!(t["merging"], false, "nothing was merged");
    assert_eq!(t["status"], "active");
    // The review is over: a new merge after review is refused.
    let late = b.api.call("mergeTask", &[&task_id], &[], Some(merge)).await;
    assert_eq!(late.status, 409, "{:?}", late.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_after_review_is_made_after_a_clean_review() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    // The reviewer ("clean review") answers after 5 s with no findings.
    let task_id = b.titled("clean review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let main_before = git(b._repo.path(), &["rev-parse", "main"]);
    let merge = json!({"merge_title": "Add hello after review", "after_review": true});
    // With no git identity to author the squash commit, the request is refused at once.
    let none = json!({"git_name": "", "git_email": ""});
    let r = b.api.call("updateMe", &[], &[], Some(none)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = b
        .api
        .call("mergeTask", &[&task_id], &[], Some(merge.clone()))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains("git identity"));
    let me = json!({"git_name": "Ada", "git_email": "ada@example.com"});
    let r = b.api.call("updateMe", &[], &[], Some(me)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = b.api.call("mergeTask", &[&task_id], &[], Some(merge)).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["merge_after_review"], true);
    assert_eq!(
        r.body["merging"], false,
        "nothing starts before the review ends"
    );
    let events = until(&mut b.sse, WAIT, |e| {
        e.data["kind"] == "task.state"
            && e.data["task_id"] == task_id.as_str()
            && e.data["payload"]["state"] == "merged"
    })
    .await;
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e.data["task_id"] == task_id.as_str())
        .filter_map(|e| e.data["kind"].as_str())
        .collect();
    let done = kinds
        .iter()
        .position(|k| *k == "review.done")
        .expect("review.done");
    let merging = kinds
        .iter()
        .position(|k| *k == "task.merge_started" || *k == "task.merging")
        .unwrap_or(usize::MAX);
    assert!(
        merging == usize::MAX || merging > done,
        "the merge started after the review: {kinds:?}"
    );
    let t = b.api.call("getTask", &[&task_id], &[], None).await.body;
    assert_eq!(t["status"], "merged", "{t:?}");
    // The merge turn's own snapshot gets no reviewer: nobody could act on its findings.
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews[0]["state"], "done");
    for r in &reviews[1..] {
        assert_eq!(r["state"], "skipped", "{r:?}");
        assert!(
            r["error"].as_str().unwrap().contains("merged or discarded"),
            "{r:?}"
        );
    }
    assert!(
        reviews.len() >= 2,
        "the merge turn's snapshot was asked a review: {reviews:?}"
    );
    assert_eq!(t["merge_after_review"], false);
    let main_after = git(b._repo.path(), &["rev-parse", "main"]);
    assert_ne!(main_after, main_before, "main moved");
    assert_eq!(
        git(b._repo.path(), &["log", "-1", "--format=%s", "main"]),
        "Add hello after review"
    );
    assert_eq!(
        git(b._repo.path(), &["show", "main:hello.txt"]),
        "hello from the fake model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_merge_after_review_withdraws_a_waiting_merge() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    let merge = json!({"merge_title": "Add hello", "after_review": true});
    // A slow review: the merge waits, and cancelMergeAfterReview withdraws it.
    let slow = b.titled("slow review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let r = b
        .api
        .call("mergeTask", &[&slow], &[], Some(merge.clone()))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["merge_after_review"], true);
    let again = b.api.call("mergeTask", &[&slow], &[], Some(merge)).await;
    assert_eq!(again.status, 409, "already waiting");
    let c = b
        .api
        .call("cancelMergeAfterReview", &[&slow], &[], None)
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(c.body["merge_after_review"], false);
    let c = b
        .api
        .call("cancelMergeAfterReview", &[&slow], &[], None)
        .await;
    assert_eq!(c.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_a_task_merged_meanwhile_ends_with_its_reviewer() {
    let mut b = bench("b_write_file", "codex_r_review").await;
    // The "slow review" reviewer answers only after 60 s; the task is merged meanwhile.
    let task_id = b.titled("slow review", "Please create hello.txt").await;
    until_kind(&mut b.sse, "review.started", WAIT).await;
    let reviewer = b.reviews(&task_id).await[0]["agent_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let merge = json!({"merge_title": "Add hello"});
    let r = b.api.call("mergeTask", &[&task_id], &[], Some(merge)).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    until(&mut b.sse, WAIT, |e| {
        e.data["kind"] == "task.state"
            && e.data["task_id"] == task_id.as_str()
            && e.data["payload"]["state"] == "merged"
    })
    .await;
    let reviews = b.reviews(&task_id).await;
    if reviews[0]["state"] == "running" {
        until_kind(&mut b.sse, "review.failed", WAIT).await;
    }
    no_process_left(&reviewer).await;
    let reviews = b.reviews(&task_id).await;
    assert_eq!(reviews[0]["state"], "failed", "{reviews:?}");
    assert!(
        !reviews[0]["error"]
            .as_str()
            .unwrap()
            .contains("from outside byre"),
        "{reviews:?}"
    );
    // The reviewer's end is the review's: nothing of it in the inbox.
    let inbox = b
        .api
        .call("listInbox", &[], &[("task_id", &task_id)], None)
        .await
        .body;
    assert_eq!(inbox, json!([]), "nothing in the inbox");
}
