//! Subtasks (issue 14 items 2 and 3) with the real Claude Code CLI against the fake model
//! (`fixtures/fake-model/o_subtasks.json`): the parent's agent calls byre's MCP tool
//! `start_subtask`, then `list_subtasks`; the subtask's agent writes `notes.txt`; while the
//! subtask is active the parent can be neither merged nor discarded; `mergeTask` with target
//! `parent` has the parent's agent run `git merge` on the subtask's branch, and the subtask
//! closes as merged.

use std::path::PathBuf;
use std::time::Duration;

use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{agent_tool, git_out, local_ada, Api, Resp, Seen, TestServer};

/// How long a test waits for the real CLI's turns and byre's git work.
const TURN_WAIT: Duration = Duration::from_secs(120);

/// A local server (ada) whose Claude Code talks to the fake model `o_subtasks`, a project and
/// the event stream; (server, fake, api, project id, repo, events).
async fn bench() -> (TestServer, FakeAnthropic, Api, String, TempDir, Seen) {
    let fake = FakeAnthropic::fixture("o_subtasks")
        .await
        .expect("fake API");
    let bin: PathBuf = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .expect("install the CLI");
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
    })
    .await;
    let api = server.api();
    let (repo, project_id) = api.basic_project().await;
    let sse = api.events(&[], None).await;
    let seen = Seen::new(sse, TURN_WAIT);
    (server, fake, api, project_id, repo, seen)
}

async fn merge(api: &Api, task_id: &str, body: Value) -> Resp {
    api.call("mergeTask", &[task_id], &[], Some(body)).await
}

async fn get_task(api: &Api, task_id: &str) -> Value {
    let r = api.call("getTask", &[task_id], &[], None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_agent_starts_a_subtask_and_merges_it_into_its_branch_when_asked() {
    let (server, _fake, api, project_id, repo, mut seen) = bench().await;
    let parent = api
        .create_task_with(
            &project_id,
            json!({"title": "Parent", "prompt": "Please delegate the notes"}),
        )
        .await;
    let parent_id = str_of(&parent, "id").to_owned();
    let parent_worktree = PathBuf::from(str_of(&parent, "worktree_path"));
    assert!(parent.get("parent_task_id").is_none(), "{parent}");

    // The parent's agent calls start_subtask: the new task is linked to it.
    let link = seen
        .first("task.subtask_started", |d| {
            d["kind"] == "task.subtask_started"
        })
        .await;
    let sub_id = str_of(&link["payload"], "task_id").to_owned();
    assert_eq!(link["task_id"], sub_id.as_str(), "envelope: the new task");
    assert_eq!(link["payload"]["parent_task_id"], parent_id.as_str());
    assert_eq!(link["payload"]["agent"], "");
    let sub = get_task(&api, &sub_id).await;
    assert_eq!(sub["parent_task_id"], parent_id.as_str());
    assert_eq!(sub["project_id"], project_id.as_str());
    assert_eq!(sub["title"], "Write notes");
    let (_, parent_head) = git_out(&parent_worktree, &["rev-parse", "HEAD"]);
    assert_eq!(
        sub["base_ref"],
        parent_head.as_str(),
        "branched from the parent's HEAD"
    );
    let sub_branch = str_of(&sub, "branch").to_owned();
    let sub_worktree = PathBuf::from(str_of(&sub, "worktree_path"));

    // Its agent runs on the prompt, on the parent's vendor and model.
    let started = seen.of_task("turn.started", &sub_id).await;
    let sub_session = str_of(&started, "agent_session_id").to_owned();
    let r = api.call("getSession", &[&sub_session], &[], None).await;
    assert_eq!(r.body["model"], "sonnet");

    // While the subtask is active: its turn runs (the fake answers after 5 s), so target
    // parent is refused; the parent can be neither merged (either target) nor discarded.
    let r = merge(&api, &sub_id, json!({"target": "parent"})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(str_of(&r.body, "message").contains("turn"), "{:?}", r.body);
    let r = merge(&api, &parent_id, json!({"merge_title": "Parent work"})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(str_of(&r.body, "message").contains(&sub_id), "{:?}", r.body);
    let r = merge(&api, &parent_id, json!({"target": "parent"})).await;
    assert_eq!(r.status, 400, "the parent is no subtask: {:?}", r.body);
    let r = api.call("discardTask", &[&parent_id], &[], None).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(str_of(&r.body, "message").contains(&sub_id), "{:?}", r.body);

    // The parent's agent read its subtasks with list_subtasks.
    let listed = seen
        .first("list_subtasks' result", |d| {
            d["kind"] == "tool.result"
                && d["task_id"] == parent_id.as_str()
                && d["payload"].to_string().contains("merging_into_parent")
        })
        .await;
    let text = listed["payload"].to_string();
    assert!(
        text.contains(&sub_id) && text.contains(&sub_branch),
        "{text}"
    );

    // The subtask's turn writes notes.txt; its end-of-turn commit puts it on its branch.
    let ended = seen.of_task("turn.ended", &sub_id).await;
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    seen.of_task("snapshot.taken", &sub_id).await;
    let (ok, notes) = git_out(repo.path(), &["show", &format!("{sub_branch}:notes.txt")]);
    assert!(ok, "notes.txt is on the subtask's branch");
    assert_eq!(notes, "notes from the subtask");
    let parent_ended = seen.of_task("turn.ended", &parent_id).await;
    assert_eq!(parent_ended["payload"]["outcome"], "completed");

    // Merge into the parent: the parent's agent is asked, under the caller's name.
    let r = merge(&api, &sub_id, json!({"target": "parent"})).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["merging_into_parent"], true);
    assert_eq!(r.body["state"], "merging");
    assert_eq!(r.body["status"], "active");
    let r = merge(&api, &sub_id, json!({"target": "parent"})).await;
    assert_eq!(
        r.status, 409,
        "already merging into its parent: {:?}",
        r.body
    );
    let asked = seen
        .of_task("task.merge_into_parent_requested", &sub_id)
        .await;
    assert_eq!(asked["payload"]["parent_task_id"], parent_id.as_str());
    assert_eq!(asked["payload"]["branch"], sub_branch.as_str());
    let message = seen
        .first("the merge message", |d| {
            d["kind"] == "user.message"
                && d["task_id"] == parent_id.as_str()
                && d["payload"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(&format!("git merge --no-edit {sub_branch}")))
        })
        .await;
    assert_eq!(
        message["actor"], "ada",
        "a byre message under the caller's name"
    );

    // The parent's agent merges; at its turn's end the subtask closes as merged.
    seen.first("the parent's git merge", |d| {
        d["kind"] == "tool.result"
            && d["task_id"] == parent_id.as_str()
            && d["payload"].to_string().contains("MERGED-OK")
    })
    .await;
    let merged = seen.of_task("task.merged", &sub_id).await;
    let (_, parent_head) = git_out(&parent_worktree, &["rev-parse", "HEAD"]);
    assert_eq!(merged["payload"]["merge_commit"], parent_head.as_str());
    let sub = get_task(&api, &sub_id).await;
    assert_eq!(sub["status"], "merged", "{sub}");
    assert_eq!(sub["state"], "merged");
    assert_eq!(sub["merging_into_parent"], false);
    assert_eq!(sub["merge_commit"], parent_head.as_str());
    assert_eq!(
        std::fs::read_to_string(parent_worktree.join("notes.txt")).unwrap(),
        "notes from the subtask\n"
    );
    assert!(!sub_worktree.exists(), "the subtask's worktree is removed");
    let (branch_left, _) = git_out(
        repo.path(),
        &["rev-parse", "--verify", &format!("refs/heads/{sub_branch}")],
    );
    assert!(!branch_left, "the subtask's branch is deleted");
    let r = api.call("getSession", &[&sub_session], &[], None).await;
    assert_eq!(r.body["state"], "completed", "{:?}", r.body);

    // With no active subtask left, the parent may finish.
    let r = api.call("discardTask", &[&parent_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    seen.of_task("task.discarded", &parent_id).await;
    server.stop().await;
}

#[tokio::test]
async fn merge_target_parent_is_400_for_a_task_that_is_no_subtask_and_404_for_none() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let task = api.create_task(&project_id, "plain").await;
    let id = str_of(&task, "id");
    for body in [
        json!({"target": "parent"}),
        json!({"target": "parent", "merge_title": "Anything"}),
        json!({"target": "sideways", "merge_title": "Anything"}),
    ] {
        let r = merge(&api, id, body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {:?}", r.body);
    }
    let r = merge(&api, "no-such-task", json!({"target": "parent"})).await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let t = get_task(&api, id).await;
    assert_eq!(t["merging_into_parent"], false);
    assert!(t.get("parent_task_id").is_none());
    server.stop().await;
}

/// A server whose Claude Code is missing (turns fail at once, sessions stay idle).
async fn server_without_cli(data: TempDir) -> TestServer {
    TestServer::spawn_configured(data, local_ada(), |c| {
        c.claude_bin = Some("/nonexistent/claude".into());
    })
    .await
}

#[tokio::test]
async fn start_subtask_refusals_are_tool_errors_and_the_link_survives_a_restart() {
    let server = server_without_cli(TempDir::new().unwrap()).await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let parent = api
        .create_task_with(&project_id, json!({"title": "Parent", "prompt": "hello"}))
        .await;
    let parent_id = str_of(&parent, "id").to_owned();
    crate::helpers::until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let session_id = api.first_session_id(&parent_id).await;

    let errors: Vec<(Value, &str)> = vec![
        (json!({"prompt": "p"}), "`title` is required"),
        (json!({"title": "t"}), "`prompt` is required"),
        (
            json!({"title": 3, "prompt": "p"}),
            "`title` must be a string",
        ),
        (json!({"title": "t", "prompt": " "}), "must not be empty"),
        (
            json!({"title": " ", "prompt": "p"}),
            "title must be one line",
        ),
    ];
    for (args, says) in errors {
        let r = agent_tool(&server, &session_id, "start_subtask", args.clone()).await;
        assert_eq!(r["is_error"], true, "{args}: {r}");
        assert!(str_of(&r, "text").contains(says), "{args}: {r}");
    }
    let r = agent_tool(&server, &session_id, "list_subtasks", json!({})).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(
        serde_json::from_str::<Value>(str_of(&r, "text")).unwrap(),
        json!([])
    );
    let tasks = api.call("listTasks", &[&project_id], &[], None).await;
    assert_eq!(
        tasks.body.as_array().unwrap().len(),
        1,
        "a refusal leaves no task"
    );

    let r = agent_tool(
        &server,
        &session_id,
        "start_subtask",
        json!({"title": "Child", "prompt": "do the part"}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    let list = agent_tool(&server, &session_id, "list_subtasks", json!({})).await;
    let list: Value = serde_json::from_str(str_of(&list, "text")).unwrap();
    let child_id = str_of(&list[0], "task_id").to_owned();
    assert!(str_of(&r, "text").contains(&child_id), "{r}");
    assert_eq!(list[0]["title"], "Child");
    assert_eq!(list[0]["status"], "active");
    assert_eq!(list[0]["unmerged"]["commits"], 0, "{list}");
    let child = get_task(&api, &child_id).await;
    assert_eq!(child["parent_task_id"], parent_id.as_str());
    let sessions = api.call("listSessions", &[&child_id], &[], None).await;
    assert_eq!(sessions.body[0]["model"], "sonnet", "the parent's model");

    // Consistent after a restart: still linked, the parent still refused.
    let data = server.stop().await;
    let server = server_without_cli(data).await;
    let api = server.api();
    let child = get_task(&api, &child_id).await;
    assert_eq!(child["parent_task_id"], parent_id.as_str());
    let r = api.call("discardTask", &[&parent_id], &[], None).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let r = merge(&api, &parent_id, json!({"merge_title": "Parent"})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);

    // Discarding the subtask ends it; then the parent may be discarded.
    let mut sse = api.events(&[], None).await;
    let r = api.call("discardTask", &[&child_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    loop {
        let e = sse.next(TURN_WAIT).await.expect("the subtask's discard");
        if e.data["kind"] == "task.discarded" && e.data["task_id"] == child_id.as_str() {
            break;
        }
    }
    let r = api.call("discardTask", &[&parent_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    server.stop().await;
}
