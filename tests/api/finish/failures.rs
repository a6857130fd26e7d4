//! Finishing tasks when something goes wrong: a dirty checkout, a push origin rejects, a merge
//! turn cut short by a restart, a kill -9 right after the push; and refused merge requests.

use super::*;
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
