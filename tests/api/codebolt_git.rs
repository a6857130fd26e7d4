//! CodeBolt's `editFileWithDiff` and git remotes through the agent socket, as a v2 client
//! sends them (`fixtures/codebolt/edits`, raw frames): a good diff applies, the same diff
//! again is refused with the file byte-identical; `gitInit` is refused; `gitPush` sends the
//! task branch to the project's origin; `gitPull` merges what the default branch gained.

use std::path::Path;

use serde_json::{json, Value};

use crate::helpers::{git, local_ada, make_repo, until_kind, TestServer};

/// The JSON the agent said last in `events`.
fn report(events: &[crate::helpers::SseEvent]) -> Value {
    let said = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "agent.text")
        .expect("the agent's report");
    serde_json::from_str(said.data["payload"]["text"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_file_with_diff_and_git_pull_and_push_through_the_agent_socket() {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let server =
        TestServer::spawn_configured(tempfile::TempDir::new().unwrap(), local_ada(), move |c| {
            c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())]
        })
        .await;
    let api = server.api();
    let repo = make_repo("basic");
    let origin = tempfile::TempDir::new().unwrap();
    git(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
    git(
        repo.path(),
        &["remote", "add", "origin", origin.path().to_str().unwrap()],
    );
    git(repo.path(), &["push", "-q", "origin", "main"]);
    let project = api.create_project("basic", repo.path()).await;
    let mut sse = api.events(&[], None).await;
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/edits");
    let task = api
        .create_task_with(
            project["id"].as_str().unwrap(),
            json!({"title": "edits", "prompt": "edit", "model": format!("codebolt:{}", agent.display())}),
        )
        .await;
    let worktree = Path::new(task["worktree_path"].as_str().unwrap()).to_owned();
    let branch = task["branch"].as_str().unwrap().to_owned();
    let events = until_kind(&mut sse, "turn.ended", std::time::Duration::from_secs(90)).await;
    let r = report(&events);
    assert_eq!(r["good"]["type"], "editFileAndApplyDiffResponse", "{r}");
    assert_eq!(r["good"]["success"], true, "{r}");
    assert_eq!(r["bad"]["success"], false, "{r}");
    assert!(
        r["bad"]["error"]
            .as_str()
            .unwrap()
            .contains("does not apply"),
        "{r}"
    );
    assert_eq!(r["read"]["content"], "a\nB\nc\n", "{r}");
    assert_eq!(
        std::fs::read(worktree.join("notes.txt")).unwrap(),
        b"a\nB\nc\n"
    );
    assert_eq!(r["init"]["type"], "gitInitResponse");
    assert_eq!(r["init"]["success"], false);
    assert!(
        r["init"]["error"]
            .as_str()
            .unwrap()
            .contains("already a git repository"),
        "{r}"
    );
    assert_eq!(r["commit"]["success"], true, "{r}");
    assert_eq!(r["push"]["type"], "PushResponse");
    assert_eq!(r["push"]["success"], true, "{r}");
    // The task branch, and only it, is on origin, at the agent's commit.
    let head = git(&worktree, &["rev-parse", "HEAD"]);
    assert_eq!(git(origin.path(), &["rev-parse", &branch]), head);
    assert_eq!(
        git(origin.path(), &["rev-parse", "main"]),
        git(repo.path(), &["rev-parse", "main"])
    );

    // main gains a file; the agent's pull merges it into the task branch.
    std::fs::write(repo.path().join("from-main.txt"), "main\n").unwrap();
    git(repo.path(), &["add", "from-main.txt"]);
    git(repo.path(), &["commit", "-q", "-m", "main moves on"]);
    let main = git(repo.path(), &["rev-parse", "main"]);
    let session = api.first_session_id(task["id"].as_str().unwrap()).await;
    let sent = api
        .call(
            "sendMessage",
            &[&session],
            &[],
            Some(json!({"text": "pull"})),
        )
        .await;
    assert!(sent.status < 300, "{:?}", sent.body);
    let events = until_kind(&mut sse, "turn.ended", std::time::Duration::from_secs(90)).await;
    let r = report(&events);
    assert_eq!(r["pull"]["type"], "PullResponse", "{r}");
    assert_eq!(r["pull"]["success"], true, "{r}");
    assert_eq!(
        std::fs::read_to_string(worktree.join("from-main.txt")).unwrap(),
        "main\n"
    );
    git(&worktree, &["merge-base", "--is-ancestor", &main, "HEAD"]);
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        branch
    );
    server.stop().await;
}
