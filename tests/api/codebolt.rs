//! CodeBolt agents: the real `@codebolt/codeboltjs@1.1.99` client (installed from npm by the
//! test set-up) running `fixtures/codebolt/agent/index.js` against byre's `/codebolt`
//! WebSocket, and the captured frames of both client generations
//! (`fixtures/codebolt/frames.jsonl`, from `vendors/codebolt/`) replayed against it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use byre::config::AuthMode;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{kinds, make_repo, until_kind, Api, Sse, SseEvent, TestServer};

const TURN_WAIT: Duration = Duration::from_secs(90);

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt").join(rel)
}

async fn node_modules() -> PathBuf {
    tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs")
}

struct Bench {
    server: TestServer,
    api: Api,
    project_id: String,
    sse: Sse,
    _repo: TempDir,
}

impl Bench {
    async fn start() -> Bench {
        let modules = node_modules().await;
        let server = TestServer::spawn_configured(
            TempDir::new().expect("data dir"),
            AuthMode::Local {
                login: "ada".into(),
            },
            move |c| {
                c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())];
            },
        )
        .await;
        let api = server.api();
        let repo = make_repo("basic");
        let project_id = api.create_project("basic", repo.path()).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let sse = api.events(&[], None).await;
        Bench {
            server,
            api,
            project_id,
            sse,
            _repo: repo,
        }
    }

    async fn task(&self, agent: &Path, prompt: &str) -> Value {
        let model = format!("codebolt:{}", agent.display());
        let body = json!({"title": "codebolt task", "prompt": prompt, "model": model});
        let r = self
            .api
            .call("createTask", &[&self.project_id], &[], Some(body))
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        r.body
    }
}

fn all<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.data["kind"] == kind)
        .map(|e| &e.data)
        .collect()
}

fn texts(events: &[SseEvent]) -> Vec<String> {
    all(events, "agent.text")
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_codeboltjs_agent_writes_commits_runs_commands_and_chats() {
    let mut b = Bench::start().await;
    let task = b.task(&fixture("agent"), "Add some notes").await;
    let events = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    let texts = texts(&events);
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(has("Working on: Add some notes"), "{texts:?}");
    assert!(has("notes.txt says: written by a CodeBolt agent"), "{texts:?}");
    assert!(has("reading outside the worktree: refused"), "{texts:?}");
    assert!(has("committed: true"), "{texts:?}");
    assert!(has("terminal printed: written by a CodeBolt agent"), "{texts:?}");
    assert!(has("stream gave: streamed-one,streamed-two"), "{texts:?}");
    // Every request is a tool call with its result.
    let calls: Vec<String> = all(&events, "tool.call")
        .iter()
        .map(|e| e["payload"]["name"].as_str().unwrap().to_owned())
        .collect();
    for name in [
        "fsEvent/createFile",
        "fsEvent/readFile",
        "gitEvent/Add",
        "gitEvent/Commit",
        "executeCommand",
        "executeCommandWithStream",
        "waitforReply",
    ] {
        assert!(calls.iter().any(|c| c == name), "{name} in {calls:?}");
    }
    let results = all(&events, "tool.result");
    assert_eq!(results.len(), calls.len(), "{:?}", kinds(&events));
    let ended = all(&events, "turn.ended")[0];
    assert_eq!(ended["payload"]["outcome"], "completed");
    assert_eq!(ended["payload"]["result"], "CodeBolt agent finished");
    // The file is in the worktree, and committed on the task's branch.
    let worktree = Path::new(task["worktree_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "written by a CodeBolt agent\n"
    );
    let repo = git2::Repository::open(worktree).unwrap();
    let head = repo.head().unwrap();
    assert_eq!(head.shorthand().ok(), task["branch"].as_str());
    let commit = head.peel_to_commit().unwrap();
    assert_eq!(commit.message().ok(), Some("CodeBolt agent adds notes.txt"));
    assert!(commit.tree().unwrap().get_name("notes.txt").is_some());
    // The session is a codebolt one.
    let sessions = b
        .api
        .call("listSessions", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(sessions.body[0]["vendor"], "codebolt");
    b.server.stop().await;
}
