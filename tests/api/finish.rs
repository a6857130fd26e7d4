//! Finishing tasks (issue 7): merge, merge-in, discard, unmerged and co-authors, on the real
//! Claude Code CLI against the fake model (`fixtures/fake-model/n_finish.json`), with a bare
//! origin repository. The git-safety rules are proven one by one on temporary repositories in
//! `src/git/merge/tests.rs`; here they are seen through the API.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use byre::config::AuthMode;
use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{event_kinds, kinds, make_repo, Api, Resp, Sse, SseEvent, TestServer, TOKENS};

/// How long a test waits for the real CLI's turns and byre's git work.
const TURN_WAIT: Duration = Duration::from_secs(120);

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Setup",
            "-c",
            "user.email=setup@example.com",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// A copy of the `basic` repository with a bare `origin` it was pushed to; (repo, origin).
fn repo_with_origin() -> (TempDir, TempDir) {
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
async fn spawn(data: TempDir, url: &str, bin: &Path) -> TestServer {
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
async fn merge(api: &Api, task_id: &str, title: &str) -> Resp {
    api.call(
        "mergeTask",
        &[task_id],
        &[],
        Some(json!({"merge_title": title})),
    )
    .await
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

/// The payload of the first event of `kind` in `events`.
fn payload<'a>(events: &'a [SseEvent], kind: &str) -> &'a Value {
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
async fn a_merge_into_a_dirty_checkout_fails_and_leaves_it_and_the_task_as_they_were() {
    let mut b = Bench::start().await;
    let task = b
        .task_with_prompt(&b.ada, "Feature", "Please create feature.txt")
        .await;
    b.until_task(&task, "snapshot.taken").await;
    let repo = b.repo.path().to_owned();
    std::fs::write(repo.join("README.md"), "the user's own edit\n").unwrap();
    let before = checkout_bytes(&repo);
    let r = merge(&b.ada, id(&task), "Feature").await;
    assert_eq!(r.status, 202);
    let events = b.until_task(&task, "task.merge_failed").await;
    let reason = payload(&events, "task.merge_failed")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("uncommitted"), "{reason}");
    assert_eq!(
        checkout_bytes(&repo),
        before,
        "the user's checkout is byte-identical"
    );
    assert_eq!(
        git(b.origin.path(), &["rev-list", "--count", "main"]),
        "1",
        "nothing pushed"
    );
    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "active");
    assert_eq!(t["merging"], false);
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(
        worktree.join("feature.txt").exists(),
        "the task's work is untouched"
    );

    // mergeIn: the same merge-in turn, with the invitation to revise the title.
    let r = b.ada.call("mergeIn", &[id(&task)], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["state"], "running");
    let events = b.until_task(&task, "turn.ended").await;
    let message = events
        .iter()
        .find(|e| e.data["kind"] == "user.message")
        .expect("the merge-in message");
    assert_eq!(message.data["actor"], "byre");
    let text = message.data["payload"]["text"].as_str().unwrap();
    assert!(text.contains("git merge main"), "{text}");
    assert!(text.contains("set_merge_title"), "{text}");
    assert_eq!(payload(&events, "turn.ended")["outcome"], "completed");
    assert_eq!(
        b.get_task(&task).await["status"],
        "active",
        "merge-in merges nothing itself"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_that_origin_rejects_fails_the_merge_and_the_next_merge_lands_once() {
    let mut b = Bench::start().await;
    let sibling = b.ada.create_task(&b.project_id, "Sibling").await;
    b.until_task(&sibling, "task.worktree_created").await;
    let sibling_wt = PathBuf::from(sibling["worktree_path"].as_str().unwrap());
    std::fs::write(sibling_wt.join("sibling.txt"), "sibling's own work\n").unwrap();
    let task = b
        .task_with_prompt(&b.ada, "Feature", "Please create feature.txt")
        .await;
    b.until_task(&task, "snapshot.taken").await;
    let hook = b.origin.path().join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'denied by policy' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let main_before = git(b.repo.path(), &["rev-parse", "main"]);
    assert_eq!(merge(&b.ada, id(&task), "Feature").await.status, 202);
    let events = b.until_task(&task, "task.merge_failed").await;
    let reason = payload(&events, "task.merge_failed")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("denied by policy"), "{reason}");
    assert!(!kinds(&events).contains(&"task.merge_landed".to_owned()));
    assert_eq!(git(b.repo.path(), &["rev-parse", "main"]), main_before);
    assert_eq!(git(b.origin.path(), &["rev-parse", "main"]), main_before);
    let t = b.get_task(&task).await;
    assert_eq!(
        (t["status"].as_str(), t["merging"].as_bool()),
        (Some("active"), Some(false))
    );
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(
        worktree.join("feature.txt").exists(),
        "the work is still there"
    );

    // Origin accepts again: the next merge lands exactly one commit.
    std::fs::remove_file(&hook).unwrap();
    assert_eq!(
        merge(&b.ada, id(&task), "Feature, second try").await.status,
        202
    );
    let events = b.until_task(&task, "task.merged").await;
    let sha = payload(&events, "task.merged")["merge_commit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(git(b.origin.path(), &["rev-parse", "main"]), sha);
    assert_eq!(git(b.repo.path(), &["rev-parse", "main"]), sha);
    assert_eq!(git(b.origin.path(), &["rev-list", "--count", "main"]), "2");
    assert_eq!(
        git(b.repo.path(), &["log", "-1", "--format=%s", &sha]),
        "Feature, second try"
    );
    assert!(!worktree.exists());
    // The sibling task's worktree is untouched.
    assert_eq!(
        std::fs::read_to_string(sibling_wt.join("sibling.txt")).unwrap(),
        "sibling's own work\n"
    );
    assert_eq!(b.get_task(&sibling).await["status"], "active");
    git(b.repo.path(), &["fsck", "--strict", "--no-progress"]);
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_turn_cut_short_by_a_restart_fails_the_merge_and_merges_nothing() {
    let mut b = Bench::start().await;
    let task = b
        .task_with_prompt(&b.ada, "Slow merge", "Please create feature.txt")
        .await;
    b.until_task(&task, "snapshot.taken").await;
    let main_before = git(b.repo.path(), &["rev-parse", "main"]);
    let r = merge(&b.ada, id(&task), "Slow merge").await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let started = b.until_task(&task, "turn.started").await;
    let last = started.last().unwrap().id.unwrap();
    let mut b = b.restart(last).await;
    let events = b.until_task(&task, "task.merge_failed").await;
    let ended = payload(&events, "turn.ended");
    assert_eq!(ended["outcome"], "interrupted");
    let reason = payload(&events, "task.merge_failed")["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("interrupted"), "{reason}");
    let t = b.get_task(&task).await;
    assert_eq!(t["status"], "active");
    assert_eq!(t["merging"], false);
    assert_eq!(git(b.repo.path(), &["rev-parse", "main"]), main_before);
    assert_eq!(git(b.origin.path(), &["rev-parse", "main"]), main_before);
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert!(
        worktree.join("feature.txt").exists(),
        "the work is still there"
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_requests_are_checked() {
    let b = Bench::start().await;
    let task = b.ada.create_task(&b.project_id, "No agent").await;
    let cases = [
        (json!({}), 400, "merge_title is required"),
        (json!({"merge_title": ""}), 400, "merge_title must be"),
        (
            json!({"merge_title": "a".repeat(73)}),
            400,
            "merge_title must be",
        ),
        (
            json!({"merge_title": "two\nlines"}),
            400,
            "merge_title must be",
        ),
        (
            json!({"merge_title": "t", "target": "parent"}),
            400,
            "is not a subtask",
        ),
        (
            json!({"merge_title": "t", "after_review": true}),
            409,
            "no review of task",
        ),
        (
            json!({"merge_title": "t", "target": "elsewhere"}),
            400,
            "target",
        ),
        (json!({"merge_title": "t", "unknown": 1}), 400, "unknown"),
    ];
    for (body, status, says) in cases {
        let r = b
            .ada
            .call("mergeTask", &[id(&task)], &[], Some(body.clone()))
            .await;
        assert_eq!(r.status, status, "{body}: {:?}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains(says),
            "{body}: {:?}",
            r.body
        );
    }
    let missing = merge(&b.ada, "no-such-task", "t").await;
    assert_eq!(missing.status, 404);
    for op in ["getUnmerged", "getCoAuthors", "mergeIn", "discardTask"] {
        let r = b.ada.call(op, &["no-such-task"], &[], None).await;
        assert_eq!(r.status, 404, "{op}");
    }
    // A caller without a git identity cannot author the squash commit.
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
    let r = merge(&b.bob, id(&task), "t").await;
    assert_eq!(r.status, 400);
    assert!(
        r.body["message"].as_str().unwrap().contains("git identity"),
        "{:?}",
        r.body
    );
    let t = b.get_task(&task).await;
    assert_eq!(t["merging"], false, "a refused merge changes nothing");
    assert_eq!(t["merge_title"], "No agent");
    b.server.stop().await;
}

/// The user's checkout as bytes: every file outside `.git`, and `.git`'s HEAD, index,
/// packed refs and loose refs other than byre's own (its task branches `refs/heads/byre/…`
/// and snapshot refs `refs/byre/…`, which its end-of-turn commits move).
fn checkout_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_owned();
            let in_git = rel.starts_with(".git");
            let wanted_git = ["HEAD", "index", "packed-refs"]
                .iter()
                .any(|f| rel == Path::new(".git").join(f))
                || rel.starts_with(".git/refs");
            if p.is_dir() {
                if !in_git || rel == Path::new(".git") || rel.starts_with(".git/refs") {
                    stack.push(p);
                }
            } else if (!in_git || wanted_git)
                && !rel.starts_with(".git/refs/byre")
                && !rel.starts_with(".git/refs/heads/byre")
            {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Polls `getTask` until `pred` holds; panics after [`TURN_WAIT`].
async fn wait_task(api: &Api, task_id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + TURN_WAIT;
    loop {
        let t = api.call("getTask", &[task_id], &[], None).await.body;
        if pred(&t) {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_right_after_the_push_then_restart_lands_the_same_commit_once() {
    use crate::process::ServeProcess;
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeAnthropic::fixture("n_finish").await.expect("fake API");
    let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let data = TempDir::new().unwrap();
    let env = [
        ("BYRE_CLAUDE_BIN", bin.to_str().unwrap()),
        ("ANTHROPIC_BASE_URL", fake.url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake-key"),
        ("CLAUDE_CODE_MAX_RETRIES", "2"),
    ];
    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let r = api
        .call(
            "updateMe",
            &[],
            &[],
            Some(json!({"git_name": "Ada Lovelace", "git_email": "ada@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let (repo, origin) = repo_with_origin();
    let project = api.create_project("basic", repo.path()).await;
    let task = api
        .create_task_with(
            project["id"].as_str().unwrap(),
            json!({"title": "Feature", "prompt": "Please create feature.txt"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    // The end-of-turn commit of the first turn: the branch is ahead of main.
    wait_task(&api, &task_id, "the first turn", |t| t["state"] == "idle").await;
    let branch = task["branch"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + TURN_WAIT;
    while git(
        repo.path(),
        &["rev-list", "--count", &format!("main..{branch}")],
    ) == "0"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no end-of-turn commit"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Origin takes the push, then byre dies before it records or moves anything locally.
    let hook = origin.path().join("hooks/post-receive");
    std::fs::write(&hook, format!("#!/bin/sh\nkill -9 {}\n", server.child.id())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let main_before = git(repo.path(), &["rev-parse", "main"]);
    let r = merge(&api, &task_id, "Feature").await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let mut server = server;
    let deadline = std::time::Instant::now() + TURN_WAIT;
    while server.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "byre was not killed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pushed = git(origin.path(), &["rev-parse", "main"]);
    assert_ne!(pushed, main_before, "the push landed before the kill");
    std::fs::remove_file(&hook).unwrap();
    // Git times have one-second resolution: restart in a later second, so that a redo that
    // took the clock's time would make a different commit (and origin would refuse it).
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let t = wait_task(&api, &task_id, "the merge's redo", |t| {
        t["status"] != "active" || t["merging"] == false
    })
    .await;
    assert_eq!(t["status"], "merged", "{t}");
    assert_eq!(
        t["merge_commit"],
        pushed.as_str(),
        "the pushed commit is recorded"
    );
    assert_eq!(git(origin.path(), &["rev-parse", "main"]), pushed);
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), pushed);
    assert_eq!(git(origin.path(), &["rev-list", "--count", "main"]), "2");
    assert_eq!(git(repo.path(), &["status", "--porcelain"]), "");
    assert!(!worktree.exists());
    git(repo.path(), &["fsck", "--strict", "--no-progress"]);
    server.kill_9();
}
