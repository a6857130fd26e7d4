//! CodeBolt's code utilities and MCP toolboxes through the agent socket, as a v2 client sends
//! them (`fixtures/codebolt/codeutil`, raw frames): tree-sitter definitions of a small Rust
//! and a small TypeScript file, all files as Markdown, the problem matchers on a captured
//! failing `cargo build`, and a toolbox (`fixtures/toolboxes/arith_mcp.py`, a stdio MCP
//! server) configured, listed and called by the agent, its process gone with byre.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::helpers::{
    commit_file, host_pid, local_ada, make_repo, system_python, until_kind, TestServer,
};

/// The JSON the agent said last in `events`.
fn report(events: &[crate::helpers::SseEvent]) -> Value {
    let said = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "agent.text")
        .expect("the agent's report");
    serde_json::from_str(said.data["payload"]["text"].as_str().unwrap()).unwrap()
}

/// Whether a process runs (exists and is not a zombie).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

fn names(defs: &Value) -> Vec<String> {
    defs.as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["kind"].as_str().unwrap(),
                d["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_definitions_matchers_and_a_toolbox_through_the_agent_socket() {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let server_script = fixtures.join("toolboxes/arith_mcp.py");
    let server =
        TestServer::spawn_configured(tempfile::TempDir::new().unwrap(), local_ada(), |c| {
            c.agent_env = vec![
                ("NODE_PATH".into(), modules.display().to_string()),
                ("BYRE_TEST_PYTHON".into(), system_python()),
                // The project's own server, in the worktree (the sandbox shows no other).
                ("BYRE_TEST_MCP_SERVER".into(), "arith_mcp.py".into()),
            ]
        })
        .await;
    let api = server.api();
    let repo = make_repo("basic");
    commit_file(repo.path(), "arith_mcp.py", &server_script);
    let project = api.create_project("basic", repo.path()).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let mut sse = api.events(&[], None).await;
    let agent = fixtures.join("codebolt/codeutil");
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "code", "prompt": "go", "model": format!("codebolt:{}", agent.display())}),
        )
        .await;
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    let events = until_kind(&mut sse, "turn.ended", std::time::Duration::from_secs(90)).await;
    let r = report(&events);

    // listCodeDefinitionNames: the Rust file's functions and types, the TypeScript
    // directory's functions, classes and methods, from the parsers.
    assert_eq!(
        r["defsRs"]["type"], "listCodeDefinitionNamesResponse",
        "{r}"
    );
    assert_eq!(r["defsRs"]["success"], true, "{r}");
    assert_eq!(
        names(&r["defsRs"]["definitions"]),
        ["struct Point", "impl Point", "fn norm", "fn area"],
        "{r}"
    );
    let rs_text = r["defsRs"]["result"].as_str().unwrap();
    assert!(rs_text.starts_with("src/shapes.rs:\n"), "{rs_text}");
    assert!(rs_text.contains("  13: fn area\n"), "{rs_text}");
    assert!(rs_text.contains("    8: fn norm\n"), "{rs_text}");
    assert_eq!(
        names(&r["defsTs"]["definitions"]),
        [
            "interface Greeter",
            "method greet",
            "function shout",
            "function double",
            "class Polite",
            "method greet"
        ],
        "{r}"
    );
    assert!(r["defsTs"]["definitions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["file"] == "web/app.ts"));
    assert_eq!(r["defsOutside"]["success"], false, "{r}");

    // getAllFilesMarkdown: each source file under a heading, its definitions, its text.
    let md = r["markdown"]["markdown"].as_str().unwrap();
    assert!(
        md.contains("## src/shapes.rs\n\n- 2: struct Point\n"),
        "{md}"
    );
    assert!(
        md.contains("```typescript\nexport interface Greeter"),
        "{md}"
    );

    // The matchers: listed, detailed, and the rustc one over a real failing cargo build.
    let listed: Vec<&str> = r["matchers"]["matchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for m in ["rustc", "tsc", "eslint-stylish", "gcc", "python"] {
        assert!(listed.contains(&m), "{listed:?}");
    }
    assert_eq!(r["detail"]["type"], "getMatchDetailResponse");
    assert_eq!(r["detail"]["matcher"]["owner"], "rust", "{r}");
    assert_eq!(r["match"]["type"], "matchProblemResponse");
    let problems: Vec<(String, u64, u64, String)> = r["match"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_owned(),
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
                p["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            ("src/main.rs".into(), 5, 20, "E0425".into()),
            ("src/main.rs".into(), 4, 22, "E0308".into()),
        ],
        "{r}"
    );
    assert_eq!(r["match"]["matches"][1]["message"], "mismatched types");
    assert_eq!(r["match"]["matches"][1]["severity"], "error");

    // The toolbox: configured into the project's file, listed beside byre, called.
    assert_eq!(r["configure"]["success"], true, "{r}");
    assert_eq!(r["badConfigure"]["success"], false, "{r}");
    let file = server
        .data
        .path()
        .join("toolboxes")
        .join(format!("{project_id}.json"));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        written["mcpServers"]["arith"]["args"],
        json!(["arith_mcp.py"])
    );
    let boxes: Vec<&str> = r["enabled"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(boxes, ["byre", "arith"], "{r}");
    let tools: Vec<&str> = r["tools"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["arith--add", "arith--where"], "{r}");
    assert_eq!(r["add"]["type"], "executeToolResponse");
    assert_eq!(r["add"]["data"], json!([false, "42"]), "{r}");
    // The server runs in the task's worktree.
    let where_ = r["where"]["data"][1].as_str().unwrap();
    assert_eq!(
        std::fs::canonicalize(where_).unwrap(),
        std::fs::canonicalize(&worktree).unwrap()
    );
    assert_eq!(r["badAdd"]["success"], false, "{r}");
    assert!(
        r["badAdd"]["error"]
            .as_str()
            .unwrap()
            .contains("bad arguments"),
        "{r}"
    );
    // The calls are in the log as the session's tool calls and results.
    assert!(
        events.iter().any(|e| e.data["kind"] == "tool.call"
            && e.data["payload"].to_string().contains("arith--add")),
        "no tool.call for arith--add"
    );

    // The toolbox's process lives with the agent's session, and not past byre.
    // (The pid it wrote is one of its sandbox's pid namespace: found on the host by its
    // session's mark.)
    let session_id = api.first_session_id(task["id"].as_str().unwrap()).await;
    let inner: u32 = std::fs::read_to_string(worktree.join("toolbox.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = host_pid("BYRE_AGENT_SESSION", &session_id, inner, "arith_mcp.py")
        .unwrap_or_else(|| panic!("the toolbox server {inner} should run"))
        .to_string();
    assert!(alive(&pid), "the toolbox server {pid} should run");
    server.stop().await;
    let mut gone = false;
    for _ in 0..200 {
        if !alive(&pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(gone, "the toolbox server {pid} outlived byre");
}
