//! `forkSnapshot`: a fork of a two-turn task at snapshot 1, on the real Claude Code and the
//! real Codex CLIs against the project's fake model APIs (`fixtures/fake-model/v_fork.json`,
//! `codex_v_fork.json`); and its refusals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi, RecordedRequest};
use byre_projections::snapshots::SnapshotTrigger;
use byre_projections::Command;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{local_ada, Api, Sse, SseEvent, TestServer, WAIT};

/// How long a test waits for a turn of a real CLI to end.
const TURN_WAIT: Duration = Duration::from_secs(120);

/// What the scripts tell apart, in the order a full conversation holds them.
const MARKERS: [&str; 6] = [
    "first step",
    "Answer one",
    "second step",
    "Answer two",
    "fork message",
    "original again",
];

/// The fake model API the agents talk to.
enum Fake {
    Claude(FakeAnthropic),
    Codex(FakeOpenAi),
}

impl Fake {
    fn model_requests(&self) -> Vec<RecordedRequest> {
        match self {
            Fake::Claude(f) => f.messages_requests(),
            Fake::Codex(f) => f.responses_requests(),
        }
    }
}

/// The conversation a model call carries: Messages API `messages`, Responses API `input`.
fn conversation(r: &RecordedRequest) -> String {
    let body = r.body.as_ref().expect("a JSON body");
    body.get("messages")
        .or_else(|| body.get("input"))
        .expect("a conversation")
        .to_string()
}

/// The [`MARKERS`] a conversation holds, ordered by where they first appear.
fn markers(conversation: &str) -> Vec<&'static str> {
    let mut found: Vec<(usize, &str)> = MARKERS
        .iter()
        .filter_map(|m| conversation.find(m).map(|at| (at, *m)))
        .collect();
    found.sort();
    found.into_iter().map(|(_, m)| m).collect()
}

/// The last model call whose last user message holds `text`.
fn call_with(fake: &Fake, text: &str) -> RecordedRequest {
    fake.model_requests()
        .into_iter()
        .rev()
        .find(|r| r.last_user_text().is_some_and(|t| t.contains(text)))
        .unwrap_or_else(|| panic!("no model call for `{text}`"))
}

struct Bench {
    server: TestServer,
    fake: Fake,
    api: Api,
    project_id: String,
    sse: Sse,
    _repo: TempDir,
}

impl Bench {
    /// A server whose Claude Code or Codex agents (per `codex`) talk to the fork script's fake;
    /// reviews off (the other vendor has no fake here).
    async fn start(codex: bool) -> Bench {
        // Not under /tmp: there Codex will not create its helper binaries (PROTOCOL.md §15.12).
        let data = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
        let (fake, env, claude, codex_bin) = if codex {
            let fake = FakeOpenAi::fixture("codex_v_fork").await.expect("fake API");
            let env = vec![
                ("OPENAI_BASE_URL".into(), fake.base_url()),
                ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
                ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "0".into()),
                ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
            ];
            let bin = tokio::task::spawn_blocking(byre_fake_models::codex_bin)
                .await
                .expect("install the CLI");
            (Fake::Codex(fake), env, None, Some(bin))
        } else {
            let fake = FakeAnthropic::fixture("v_fork").await.expect("fake API");
            let env = vec![
                ("ANTHROPIC_BASE_URL".into(), fake.url.clone()),
                ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
                ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
            ];
            let bin = crate::claude::claude_bin().await;
            (Fake::Claude(fake), env, Some(bin), None)
        };
        let server = TestServer::spawn_configured(data, local_ada(), move |c| {
            c.claude_bin = claude;
            c.codex_bin = codex_bin;
            c.agent_env = env;
            c.reviews.enabled = false;
        })
        .await;
        let api = server.api();
        let (repo, project_id) = api.basic_project().await;
        let sse = api.events(&[], None).await;
        Bench {
            server,
            fake,
            api,
            project_id,
            sse,
            _repo: repo,
        }
    }

    /// Events up to task `task_id`'s next event of `kind`.
    async fn until(&mut self, task_id: &str, kind: &str) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        loop {
            let e = self
                .sse
                .next(TURN_WAIT)
                .await
                .unwrap_or_else(|| panic!("no {kind} of task {task_id}"));
            let done = e.data["kind"] == kind && e.data["task_id"] == task_id;
            seen.push(e);
            if done {
                return seen;
            }
        }
    }

    async fn send(&self, session_id: &str, text: &str) {
        let r = self
            .api
            .call(
                "sendMessage",
                &[session_id],
                &[],
                Some(json!({"text": text})),
            )
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
    }

    async fn get(&self, op: &str, id: &str) -> Value {
        let r = self.api.call(op, &[id], &[], None).await;
        assert_eq!(r.status, 200, "{op}: {:?}", r.body);
        r.body
    }

    async fn fork(&self, task_id: &str, n: &str) -> crate::helpers::Resp {
        self.api
            .call("forkSnapshot", &[task_id, n], &[], None)
            .await
    }
}

fn id(v: &Value) -> &str {
    v["id"].as_str().expect("an id")
}

/// Whether `worktree` holds exactly the tree `tree`: its HEAD's tree, and nothing changed or
/// untracked.
fn assert_worktree_is(worktree: &Path, tree: &str) {
    let repo = git2::Repository::open(worktree).expect("the fork's worktree is a repository");
    let head_tree = repo
        .head()
        .unwrap()
        .peel_to_tree()
        .unwrap()
        .id()
        .to_string();
    assert_eq!(head_tree, tree, "the fork's HEAD holds snapshot 1's tree");
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true);
    let changed: Vec<String> = repo
        .statuses(Some(&mut opts))
        .unwrap()
        .iter()
        .map(|s| String::from_utf8_lossy(s.path_bytes()).into_owned())
        .collect();
    assert!(
        changed.is_empty(),
        "the fork's worktree is clean: {changed:?}"
    );
}

/// A two-turn task on `model`, forked at snapshot 1; then a message to the fork and one to
/// the original. The fork's first model call holds turn 1 and the new message only.
async fn fork_a_two_turn_task_at_snapshot_1(codex: bool, model: &str) {
    let mut b = Bench::start(codex).await;
    let body = json!({"title": "two steps", "prompt": "Please do the first step.", "model": model});
    let task = b.api.create_task_with(&b.project_id, body).await;
    let task_id = id(&task).to_owned();
    b.until(&task_id, "snapshot.taken").await;
    let session = b.api.first_session(&task_id).await;
    b.send(id(&session), "Please do the second step.").await;
    b.until(&task_id, "snapshot.taken").await;

    let snapshots = b.get("listSnapshots", &task_id).await;
    assert_eq!(snapshots.as_array().unwrap().len(), 2, "{snapshots:?}");
    let snap1 = &snapshots[0];
    let original_task = b.get("getTask", &task_id).await;
    let original_sessions = b.get("listSessions", &task_id).await;

    let r = b.fork(&task_id, "1").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let fork = r.body;
    let fork_id = id(&fork).to_owned();
    assert_eq!(fork["forked_from"], task_id.as_str());
    assert_eq!(fork["forked_at"], 1);
    assert_eq!(fork["base_ref"], snap1["commit_sha"]);
    assert_eq!(fork["state"], "idle", "its session waits for a message");
    assert_ne!(fork["branch"], original_task["branch"]);
    let worktree = PathBuf::from(fork["worktree_path"].as_str().unwrap());
    assert_worktree_is(&worktree, snap1["tree_sha"].as_str().unwrap());
    assert!(worktree.join("one.txt").exists() && !worktree.join("two.txt").exists());

    let fork_sessions = b.get("listSessions", &fork_id).await;
    let fork_session = &fork_sessions[0];
    assert_eq!(fork_sessions.as_array().unwrap().len(), 1);
    assert_eq!(fork_session["state"], "idle");
    assert_eq!(fork_session["vendor"], session["vendor"]);
    assert_eq!(fork_session["model"], session["model"]);
    let original_session = &original_sessions[0];
    assert_eq!(
        fork_session["forked_from"], original_session["vendor_session_id"],
        "the fork resumes the original's conversation"
    );
    assert!(!fork_session["forked_at"].as_str().unwrap_or("").is_empty());
    assert_ne!(
        fork_session["vendor_session_id"],
        original_session["vendor_session_id"]
    );
    assert_eq!(
        b.get("getTask", &task_id).await,
        original_task,
        "the original is unchanged"
    );
    assert_eq!(b.get("listSessions", &task_id).await, original_sessions);

    b.send(id(fork_session), "Please handle this fork message.")
        .await;
    let events = b.until(&fork_id, "turn.ended").await;
    let ended = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "turn.ended")
        .unwrap();
    assert_eq!(
        ended.data["payload"]["outcome"], "completed",
        "{:?}",
        ended.data
    );
    assert!(ended.data["payload"]["result"]
        .as_str()
        .unwrap()
        .contains("Answer from the fork"));
    let call = call_with(&b.fake, "fork message");
    assert_eq!(
        markers(&conversation(&call)),
        ["first step", "Answer one", "fork message"],
        "the fork's first turn carries turn 1 and the new message, nothing of turn 2: {}",
        conversation(&call)
    );
    let fork_session = b.get("getSession", id(fork_session)).await;
    match &b.fake {
        Fake::Claude(_) => assert_eq!(
            call.session_id(),
            fork_session["vendor_session_id"].as_str(),
            "under byre's own id for the fork"
        ),
        Fake::Codex(_) => assert_ne!(
            call.thread_id(),
            original_session["vendor_session_id"].as_str(),
            "a thread of its own"
        ),
    }
    b.until(&fork_id, "snapshot.taken").await;
    assert_worktree_is(&worktree, snap1["tree_sha"].as_str().unwrap());

    b.send(id(original_session), "Please handle original again.")
        .await;
    let events = b.until(&task_id, "turn.ended").await;
    let ended = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "turn.ended")
        .unwrap();
    assert_eq!(
        ended.data["payload"]["outcome"], "completed",
        "{:?}",
        ended.data
    );
    let call = call_with(&b.fake, "original again");
    assert_eq!(
        markers(&conversation(&call)),
        [
            "first step",
            "Answer one",
            "second step",
            "Answer two",
            "original again"
        ],
        "the original goes on with its own whole history"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_fork_at_snapshot_1_holds_turn_1_only_and_the_original_goes_on() {
    fork_a_two_turn_task_at_snapshot_1(false, "sonnet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_fork_at_snapshot_1_holds_turn_1_only_and_the_original_goes_on() {
    fork_a_two_turn_task_at_snapshot_1(true, "gpt-5.5").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_are_refused_for_unknown_snapshots_snapshots_without_a_message_and_closed_tasks() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api.create_task(&project_id, "no agent yet").await;
    let task_id = id(&task).to_owned();
    server
        .submit(Command::RequestSnapshot {
            task_id: task_id.clone().into(),
            trigger: SnapshotTrigger::Requested,
        })
        .await;
    tokio::time::timeout(
        WAIT,
        sse.until("snapshot.taken", |e| e.data["kind"] == "snapshot.taken"),
    )
    .await
    .expect("snapshot 1 is taken");

    let fork = |t: String, n: &'static str| {
        let api = &api;
        async move { api.call("forkSnapshot", &[&t, n], &[], None).await }
    };
    for (t, n, status, why) in [
        (
            task_id.clone(),
            "1",
            409,
            "no agent message at or before it",
        ),
        (task_id.clone(), "2", 404, "no snapshot 2"),
        ("no-such-task".to_owned(), "1", 404, "no such task"),
        (task_id.clone(), "0", 400, "snapshots count from 1"),
        (task_id.clone(), "abc", 400, "not a number"),
        (task_id.clone(), "-1", 400, "negative"),
        (task_id.clone(), "+1", 400, "a sign is no digit"),
        (task_id.clone(), "1.0", 400, "not an integer"),
        (
            task_id.clone(),
            "4294967296",
            404,
            "a number from 1 past any snapshot",
        ),
        (
            task_id.clone(),
            "99999999999999999999999",
            404,
            "a number from 1 past any snapshot",
        ),
    ] {
        let r = fork(t, n).await;
        assert_eq!(r.status, status, "{why}: {:?}", r.body);
        assert!(!r.message().is_empty(), "{why}: a message");
    }

    let r = api.call("discardTask", &[&task_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    tokio::time::timeout(
        WAIT,
        sse.until("task.discarded", |e| e.data["kind"] == "task.discarded"),
    )
    .await
    .expect("the task is discarded");
    let r = fork(task_id.clone(), "1").await;
    assert_eq!(r.status, 409, "a closed task: {:?}", r.body);
    let tasks = api.call("listTasks", &[&project_id], &[], None).await;
    assert_eq!(tasks.body.as_array().unwrap().len(), 1, "no task was made");
}
