//! Finishing tasks (issue 7): merge, merge-in, discard, unmerged and co-authors, on the real
//! Claude Code CLI against the fake model (`fixtures/fake-model/n_finish.json`), with a bare
//! origin repository. The git-safety rules are proven one by one on temporary repositories in
//! `src/git/merge/tests.rs`; here they are seen through the API.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use byre::config::AuthMode;
use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

mod failures;

use crate::helpers::{event_kinds, kinds, make_repo, Api, Resp, Sse, SseEvent, TestServer, TOKENS};

/// How long a test waits for the real CLI's turns and byre's git work.
const TURN_WAIT: Duration = Duration::from_secs(120);

pub(super) use crate::helpers::git;

/// A copy of the `basic` repository with a bare `origin` it was pushed to; (repo, origin).
pub(super) fn repo_with_origin() -> (TempDir, TempDir) {
    let repo = make_repo("basic");
    let origin = TempDir::new().unwrap();
    git(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
    git(
        repo.path(),
        &["remote", "add", "origin", origin.path().to_str().unwrap()],
    );
    git(repo.path(), &["push", "-q", "origin", "main"]);
    (repo, origin)
}

/// A team server (ada and bob, both with a git identity) whose agents talk to the fake model,
/// a project whose repository has a bare origin, and an event stream.
struct Bench {
    server: TestServer,
    url: String,
    bin: PathBuf,
    _fake: FakeAnthropic,
    ada: Api,
    bob: Api,
    project_id: String,
    repo: TempDir,
    origin: TempDir,
    sse: Sse,
}

impl Bench {
    async fn start() -> Bench {
        let fake = FakeAnthropic::fixture("n_finish").await.expect("fake API");
        let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
            .await
            .expect("install the CLI");
        let url = fake.url.clone();
        let server = spawn(TempDir::new().unwrap(), &url, &bin).await;
        let (ada, bob) = (server.api_as("ada"), server.api_as("bob"));
        for (api, name) in [(&ada, "Ada Lovelace"), (&bob, "Bob Ünïcode")] {
            let login = if name.starts_with("Ada") {
                "ada"
            } else {
                "bob"
            };
            let r = api
                .call(
                    "updateMe",
                    &[],
                    &[],
                    Some(json!({"git_name": name, "git_email": format!("{login}@example.com")})),
                )
                .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
        }
        let (repo, origin) = repo_with_origin();
        let project_id = ada.create_project("basic", repo.path()).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let sse = ada.events(&[], None).await;
        Bench {
            server,
            url,
            bin,
            _fake: fake,
            ada,
            bob,
            project_id,
            repo,
            origin,
            sse,
        }
    }

    /// Stops the server gracefully and starts it again on its data dir; the event stream
    /// resumes after `last_seq`.
    async fn restart(mut self, last_seq: u64) -> Bench {
        let data = self.server.stop().await;
        self.server = spawn(data, &self.url, &self.bin).await;
        self.ada = self.server.api_as("ada");
        self.bob = self.server.api_as("bob");
        self.sse = self.ada.events(&[], Some(last_seq)).await;
        self
    }

    async fn task_with_prompt(&self, api: &Api, title: &str, prompt: &str) -> Value {
        api.create_task_with(&self.project_id, json!({"title": title, "prompt": prompt}))
            .await
    }

    /// Events up to the first that satisfies `pred`; panics after [`TURN_WAIT`].
    async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<SseEvent> {
        let mut seen = Vec::new();
        loop {
            let e = self
                .sse
                .next(TURN_WAIT)
                .await
                .unwrap_or_else(|| panic!("no {what}; saw {:?}", kinds(&seen)));
            let done = pred(&e.data);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }

    /// Events up to the next of `kind` for `task`.
    async fn until_task(&mut self, task: &Value, kind: &str) -> Vec<SseEvent> {
        let id = task["id"].clone();
        self.until(kind, |d| d["kind"] == kind && d["task_id"] == id)
            .await
    }

    async fn get_task(&self, task: &Value) -> Value {
        let r = self
            .ada
            .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
            .await;
        assert_eq!(r.status, 200);
        r.body
    }
}

/// A team server (tokens for ada and bob) whose Claude Code talks to the fake at `url`.
pub(super) async fn spawn(data: TempDir, url: &str, bin: &Path) -> TestServer {
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    let (url, bin) = (url.to_owned(), bin.to_owned());
    TestServer::spawn_configured(data, AuthMode::Token { tokens }, move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
    })
    .await
}

/// `mergeTask` of `task_id` by `api`'s caller with merge title `title`.
pub(super) async fn merge(api: &Api, task_id: &str, title: &str) -> Resp {
    api.call(
        "mergeTask",
        &[task_id],
        &[],
        Some(json!({"merge_title": title})),
    )
    .await
}

pub(super) fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

/// The payload of the first event of `kind` in `events`.
pub(super) fn payload<'a>(events: &'a [SseEvent], kind: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e.data["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(events)))
        .data["payload"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_agent_wrote_files_is_squash_merged_pushed_and_removed() {
    let mut b = Bench::start().await;
    // bob starts the task: his message makes him a co-author of ada's merge.
    let task = b
        .task_with_prompt(&b.bob, "Add the feature", "Please create feature.txt")
        .await;
    b.until_task(&task, "turn.ended").await;
    // The end-of-turn commit puts the agent's work on the task branch.
    b.until_task(&task, "snapshot.taken").await;
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(worktree.join("feature.txt").exists());

    let unmerged = b.ada.call("getUnmerged", &[id(&task)], &[], None).await;
    assert_eq!(unmerged.status, 200);
    assert_eq!(
        unmerged.body,
        json!({"commits": 1, "files": 1, "insertions": 1, "deletions": 0, "uncommitted": 0})
    );
    std::fs::write(worktree.join("notes.txt"), "one\ntwo\n").unwrap();
    let unmerged = b.ada.call("getUnmerged", &[id(&task)], &[], None).await;
    assert_eq!(
        unmerged.body,
        json!({"commits": 1, "files": 2, "insertions": 3, "deletions": 0, "uncommitted": 1}),
        "uncommitted work counts too"
    );
    std::fs::remove_file(worktree.join("notes.txt")).unwrap();
    let co = b.ada.call("getCoAuthors", &[id(&task)], &[], None).await;
    assert_eq!(co.status, 200);
    assert_eq!(co.body.as_array().unwrap().len(), 1);
    assert_eq!(co.body[0]["login"], "bob");
    assert_eq!(co.body[0]["git_name"], "Bob Ünïcode");
    let own = b.bob.call("getCoAuthors", &[id(&task)], &[], None).await;
    assert_eq!(own.body, json!([]), "the caller is not their own co-author");

    let title = "Add `feature` with $(echo no) and \"quotes\" — café ✓";
    let r = merge(&b.ada, id(&task), title).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["merging"], true);
    assert_eq!(r.body["state"], "merging");
    assert_eq!(r.body["merge_title"], title);
    let again = merge(&b.ada, id(&task), title).await;
    assert_eq!(again.status, 409, "already merging");

    let events = b.until_task(&task, "task.merged").await;
    let ks: Vec<String> = kinds(&events);
    for k in [
        "task.merge_requested",
        "user.message",
        "turn.started",
        "turn.ended",
        "snapshot.taken",
        "task.merge_landed",
        "task.merged",
    ] {
        assert!(ks.iter().any(|x| x == k), "{k} in {ks:?}");
    }
    let at = |k: &str| ks.iter().position(|x| x == k).unwrap();
    assert!(at("turn.ended") < at("snapshot.taken"));
    assert!(
        at("snapshot.taken") < at("task.merge_landed"),
        "the end-of-turn commit first"
    );
    assert!(at("task.merge_landed") < at("task.merged"));
    assert_eq!(payload(&events, "turn.ended")["outcome"], "completed");
    let merged = payload(&events, "task.merged").clone();
    let sha = merged["merge_commit"].as_str().unwrap().to_owned();
    assert_eq!(sha.len(), 40);
    assert_eq!(
        payload(&events, "task.merge_landed")["merge_commit"],
        sha.as_str()
    );
    b.until_task(&task, "task.state").await;

    let repo = b.repo.path();
    assert_eq!(git(repo, &["rev-parse", "main"]), sha);
    assert_eq!(git(b.origin.path(), &["rev-parse", "main"]), sha, "pushed");
    assert_eq!(
        git(repo, &["rev-list", "--count", "main"]),
        "2",
        "one commit"
    );
    let raw = git(repo, &["cat-file", "commit", &sha]);
    let message = raw.split_once("\n\n").unwrap().1;
    assert_eq!(
        message,
        format!("{title}\n\nCo-authored-by: Bob Ünïcode <bob@example.com>")
    );
    assert_eq!(
        git(repo, &["log", "-1", "--format=%an <%ae>", &sha]),
        "Ada Lovelace <ada@example.com>"
    );
    assert_eq!(
        git(repo, &["show", &format!("{sha}:feature.txt")]),
        "feature from the fake model"
    );
    // The user's clean checkout on main was fast-forwarded.
    assert_eq!(
        std::fs::read_to_string(repo.join("feature.txt")).unwrap(),
        "feature from the fake model\n"
    );
    // byre runs with umask 077; what it writes in the user's checkout gets the user's modes.
    let user_umask =
        byre_process::private_files::user_umask().expect("a server tightened the umask");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(repo.join("feature.txt"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o666 & !user_umask, "{mode:o}");
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
    // Worktree and branch gone, the last state kept, the object store intact.
    assert!(!worktree.exists());
    assert_eq!(
        git(
            repo,
            &["branch", "--list", task["branch"].as_str().unwrap()]
        ),
        ""
    );
    let kept = merged["kept_ref"].as_str().unwrap();
    assert!(kept.starts_with(&format!("refs/byre/tasks/{}/snap/", id(&task))));
    assert_eq!(
        git(repo, &["show", &format!("{kept}:feature.txt")]),
        "feature from the fake model"
    );
    git(repo, &["fsck", "--strict", "--no-progress"]);

    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "merged");
    assert_eq!(t["state"], "merged");
    assert_eq!(t["merge_commit"], sha.as_str());
    assert_eq!(t["merging"], false);
    assert!(t["closed_at"].is_string());
    assert_eq!(b.ada.first_session(id(&task)).await["state"], "completed");
    let late = b.ada.call("discardTask", &[id(&task)], &[], None).await;
    assert_eq!(late.status, 409, "a merged task is closed");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_merges_requested_together_run_one_after_the_other() {
    let mut b = Bench::start().await;
    let one = b
        .task_with_prompt(&b.ada, "First", "Please create feature.txt")
        .await;
    b.until_task(&one, "turn.ended").await;
    let two = b
        .task_with_prompt(&b.ada, "Second", "Please create second.txt")
        .await;
    b.until_task(&two, "turn.ended").await;

    let (r1, r2) = tokio::join!(
        merge(&b.ada, id(&one), "First"),
        merge(&b.ada, id(&two), "Second"),
    );
    assert_eq!(
        (r1.status, r2.status),
        (202, 202),
        "{:?} {:?}",
        r1.body,
        r2.body
    );
    // Whichever the writer decided second is held.
    let (first, second, held) = if r2.body["merge_queued_at"].is_string() {
        (&one, &two, &r2.body)
    } else {
        (&two, &one, &r1.body)
    };
    assert_eq!(held["merging"], false);
    assert_eq!(held["state"], "idle");
    let dup = merge(&b.ada, id(second), "Again").await;
    assert_eq!(dup.status, 409, "the merge is already held");

    let (fid, sid) = (first["id"].clone(), second["id"].clone());
    let events = b
        .until("the second task.merged", |d| {
            d["kind"] == "task.merged" && d["task_id"] == sid
        })
        .await;
    let at = |kind: &str, task: &Value| {
        events
            .iter()
            .position(|e| e.data["kind"] == kind && e.data["task_id"] == *task)
            .unwrap_or_else(|| panic!("no {kind} of {task}"))
    };
    assert!(at("task.merged", &fid) < at("task.merge_started", &sid));
    assert!(at("task.merge_started", &sid) < at("task.merged", &sid));
    let repo = b.repo.path();
    assert_eq!(git(repo, &["rev-list", "--count", "main"]), "3");
    assert_eq!(
        git(repo, &["log", "--format=%s", "-2", "main"])
            .lines()
            .count(),
        2
    );
    assert_eq!(
        git(b.origin.path(), &["rev-parse", "main"]),
        git(repo, &["rev-parse", "main"])
    );
    for t in [&one, &two] {
        let got = b.get_task(t).await;
        assert_eq!(got["status"], "merged");
        assert!(got.get("merge_queued_at").is_none());
    }
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_merge_whose_author_dropped_their_git_identity_fails_instead_of_inventing_one() {
    let mut b = Bench::start().await;
    let one = b
        .task_with_prompt(&b.ada, "First", "Please create feature.txt")
        .await;
    b.until_task(&one, "turn.ended").await;
    let two = b
        .task_with_prompt(&b.bob, "Second", "Please create second.txt")
        .await;
    b.until_task(&two, "turn.ended").await;
    let r = merge(&b.ada, id(&one), "First").await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let r = merge(&b.bob, id(&two), "Second").await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert!(r.body["merge_queued_at"].is_string(), "held: {:?}", r.body);
    // bob drops his git identity while his merge is held.
    let r = b
        .bob
        .call(
            "updateMe",
            &[],
            &[],
            Some(json!({"git_name": "", "git_email": ""})),
        )
        .await;
    assert_eq!(r.status, 200);
    let tid = two["id"].clone();
    let events = b
        .until("the held merge's outcome", |d| {
            d["task_id"] == tid && (d["kind"] == "task.merge_failed" || d["kind"] == "task.merged")
        })
        .await;
    let reason = payload(&events, "task.merge_failed")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("git identity"), "{reason}");
    assert_eq!(b.get_task(&one).await["status"], "merged");
    let t = b.get_task(&two).await;
    assert_eq!(
        (t["status"].as_str(), t["merging"].as_bool()),
        (Some("active"), Some(false))
    );
    let authors = git(b.repo.path(), &["log", "--format=%ae", "main"]);
    assert!(!authors.contains("localhost"), "{authors}");
    assert_eq!(git(b.repo.path(), &["rev-list", "--count", "main"]), "2");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_a_task_that_changed_nothing_closes_it_with_an_empty_merge_commit() {
    let mut b = Bench::start().await;
    let task = b.ada.create_task(&b.project_id, "Nothing").await;
    b.until_task(&task, "task.worktree_created").await;
    let (main, origin) = (
        git(b.repo.path(), &["rev-parse", "main"]),
        git(b.origin.path(), &["rev-parse", "main"]),
    );
    let r = merge(&b.ada, id(&task), "Nothing").await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = b.until_task(&task, "task.merged").await;
    assert_eq!(payload(&events, "task.merged")["merge_commit"], "");
    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "merged");
    assert!(
        t.get("merge_commit").is_none_or(|c| c.is_null() || c == ""),
        "{t}"
    );
    assert_eq!(git(b.repo.path(), &["rev-parse", "main"]), main);
    assert_eq!(git(b.origin.path(), &["rev-parse", "main"]), origin);
    assert!(!PathBuf::from(task["worktree_path"].as_str().unwrap()).exists());
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discarding_a_running_task_waits_for_its_turn_writes_the_summary_and_keeps_the_record() {
    let mut b = Bench::start().await;
    let task = b
        .task_with_prompt(&b.ada, "Slow", "Do some slow work please")
        .await;
    assert_eq!(task["state"], "running");
    let busy = merge(&b.ada, id(&task), "Slow").await;
    assert_eq!(busy.status, 409, "no merge while a turn runs");
    let busy = b.ada.call("mergeIn", &[id(&task)], &[], None).await;
    assert_eq!(busy.status, 409, "no merge-in while a turn runs");

    let r = b.ada.call("discardTask", &[id(&task)], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["discarding"], true);
    assert_eq!(r.body["state"], "discarding");
    assert_eq!(r.body["status"], "active");
    let twice = b.ada.call("discardTask", &[id(&task)], &[], None).await;
    assert_eq!(twice.status, 409, "already being discarded");
    let session = b.ada.first_session(id(&task)).await;
    let msg = b
        .ada
        .call(
            "sendMessage",
            &[id(&session)],
            &[],
            Some(json!({"text": "one more thing"})),
        )
        .await;
    assert_eq!(msg.status, 409, "nothing else is admitted: {:?}", msg.body);

    let events = b.until_task(&task, "task.discarded").await;
    let ks = kinds(&events);
    let first_end = ks.iter().position(|k| k == "turn.ended").unwrap();
    let started = ks
        .iter()
        .position(|k| k == "task.discard_turn_started")
        .unwrap();
    assert!(
        first_end < started,
        "the summary turn waits for the running one: {ks:?}"
    );
    let summary = events
        .iter()
        .filter(|e| e.data["kind"] == "turn.ended")
        .nth(1)
        .expect("the summary turn ended");
    assert_eq!(summary.data["payload"]["summary"], true);
    assert_eq!(
        summary.data["payload"]["result"],
        "Summary: the work was started and then dropped."
    );
    b.until_task(&task, "task.state").await;

    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "discarded");
    assert_eq!(t["state"], "discarded");
    assert_eq!(t["summary_seq"], summary.data["seq"]);
    assert!(t.get("merge_commit").is_none());
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(!worktree.exists());
    let repo = b.repo.path();
    assert_eq!(
        git(
            repo,
            &["branch", "--list", task["branch"].as_str().unwrap()]
        ),
        ""
    );
    assert_eq!(
        git(repo, &["rev-list", "--count", "main"]),
        "1",
        "nothing merged"
    );
    git(repo, &["fsck", "--strict", "--no-progress"]);
    let record = b.ada.call("listTaskEvents", &[id(&task)], &[], None).await;
    let record_kinds = event_kinds(&record.body);
    for k in [
        "task.created",
        "turn.ended",
        "task.discard_requested",
        "task.discarded",
    ] {
        assert!(record_kinds.contains(&k), "{k} in {record_kinds:?}");
    }
    let closed = b.ada.call("discardTask", &[id(&task)], &[], None).await;
    assert_eq!(closed.status, 409, "a discarded task is closed");
    let unmerged = b.ada.call("getUnmerged", &[id(&task)], &[], None).await;
    assert_eq!(unmerged.status, 409);
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discarding_without_a_summary_waits_for_the_running_turn_and_runs_no_other() {
    let mut b = Bench::start().await;
    let task = b
        .task_with_prompt(&b.ada, "Slow", "Do some slow work please")
        .await;
    assert_eq!(task["state"], "running");
    for bad in [
        json!({"summary": "no"}),
        json!({"summary": false, "why": 1}),
    ] {
        let r = b
            .ada
            .call("discardTask", &[id(&task)], &[], Some(bad))
            .await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert!(r.body["message"].is_string(), "{:?}", r.body);
    }
    let r = b
        .ada
        .call(
            "discardTask",
            &[id(&task)],
            &[],
            Some(json!({"summary": false})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["state"], "discarding");

    let events = b.until_task(&task, "task.discarded").await;
    let ks = kinds(&events);
    assert_eq!(
        ks.iter().filter(|k| *k == "turn.ended").count(),
        1,
        "the running turn ends first: {ks:?}"
    );
    assert!(
        !ks.iter().any(|k| k == "task.discard_turn_started"),
        "{ks:?}"
    );
    let record = b.ada.call("listTaskEvents", &[id(&task)], &[], None).await;
    let requested = record
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "task.discard_requested")
        .expect("task.discard_requested");
    assert_eq!(requested["payload"]["summary"], false, "{requested}");
    let started = event_kinds(&record.body)
        .iter()
        .filter(|k| **k == "turn.started")
        .count();
    assert_eq!(started, 1, "only the task's own turn ran");
    b.until_task(&task, "task.state").await;
    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "discarded");
    assert!(!PathBuf::from(task["worktree_path"].as_str().unwrap()).exists());
    b.server.stop().await;
}
