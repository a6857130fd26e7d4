//! Trying to break the code utilities and MCP toolboxes through the agent socket
//! (`fixtures/codebolt/codeutil-break`, raw v2 frames): every bad toolbox name, a missing
//! program, a server that dies mid-call or never answers, and matchers and paths that should
//! be refused, each answered with a clear error; no toolbox process outlives its failure.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::helpers::{local_ada, make_repo, until_kind, TestServer};

/// Waits (at most 10 s) until `is_gone` holds; whether it did.
async fn gone(is_gone: impl Fn() -> bool) -> bool {
    for _ in 0..200 {
        if is_gone() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// A refusal: `success: false` and a message that holds `says`.
fn refused(r: &Value, name: &str, says: &str) {
    assert_eq!(r[name]["success"], false, "{name}: {}", r[name]);
    let why = r[name]["error"]
        .as_str()
        .or(r[name]["message"].as_str())
        .or(r[name]["data"][1].as_str())
        .unwrap_or("");
    assert!(
        why.contains(says),
        "{name}: {why:?} lacks {says:?}: {}",
        r[name]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_toolboxes_matchers_and_paths_are_refused_with_a_reason() {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let server =
        TestServer::spawn_configured(tempfile::TempDir::new().unwrap(), local_ada(), |c| {
            c.agent_env = vec![
                ("NODE_PATH".into(), modules.display().to_string()),
                ("BYRE_TEST_PYTHON".into(), crate::helpers::system_python()),
            ]
        })
        .await;
    let api = server.api();
    let repo = make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let mut sse = api.events(&[], None).await;
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/codeutil-break");
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "break", "prompt": "go", "model": format!("codebolt:{}", agent.display())}),
        )
        .await;
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    let events = until_kind(&mut sse, "turn.ended", std::time::Duration::from_secs(180)).await;
    let said = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "agent.text")
        .expect("the agent's report");
    let r: Value = serde_json::from_str(said.data["payload"]["text"].as_str().unwrap()).unwrap();

    for name in ["traversal", "slash", "dashes"] {
        refused(&r, name, "a toolbox's name");
    }
    assert!(!server.data.path().join("etc").exists());
    refused(&r, "noCommand", "command");
    assert_eq!(r["missing"]["success"], true, "{}", r["missing"]);
    refused(&r, "missingCall", "could not start");
    refused(&r, "unknownBox", "nobox");
    assert_eq!(r["noSeparator"]["success"], false, "{}", r["noSeparator"]);
    refused(&r, "diesCall", "dies");
    refused(&r, "diesAgain", "dies");
    refused(&r, "hangsCall", "initialize");
    // The pids they wrote are of their sandbox's pid namespace: gone is no process of that
    // pid there carrying the session's mark.
    let session_id = api.first_session_id(task["id"].as_str().unwrap()).await;
    for name in ["dies", "hangs"] {
        let pid = std::fs::read_to_string(worktree.join(format!("{name}.pid"))).unwrap();
        let inner: u32 = pid.trim().parse().unwrap();
        assert!(
            gone(|| crate::helpers::host_pid(
                "BYRE_AGENT_SESSION",
                &session_id,
                inner,
                &format!("{name}.pid"),
            )
            .is_none())
            .await,
            "the toolbox server {name} ({pid}) still runs"
        );
    }
    assert_eq!(r["catastrophic"]["success"], true, "{}", r["catastrophic"]);
    refused(&r, "tooBig", "");
    refused(&r, "overLimit", "MiB");
    refused(&r, "unknownMatcher", "no-such-matcher");
    refused(&r, "defsEtc", "");
    refused(&r, "defsUp", "");
    server.stop().await;
}
