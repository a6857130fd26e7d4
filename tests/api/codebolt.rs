//! CodeBolt agents: the real `@codebolt/codeboltjs@1.1.99` client (installed from npm by the
//! test set-up) running `fixtures/codebolt/agent/index.js` against byre's `/codebolt`
//! WebSocket, and the captured frames of both client generations
//! (`fixtures/codebolt/frames.jsonl`, from `vendors/codebolt/`) replayed against it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{kinds, local_ada, until_kind, Api, Sse, SseEvent, TestServer};

const TURN_WAIT: Duration = Duration::from_secs(90);

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/codebolt")
        .join(rel)
}

async fn node_modules() -> PathBuf {
    tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs")
}

struct Bench {
    server: TestServer,
    fake: byre_fake_models::FakeOpenAi,
    api: Api,
    project_id: String,
    sse: Sse,
    _repo: TempDir,
}

impl Bench {
    async fn start() -> Bench {
        Self::start_with_agents(Vec::new()).await
    }

    /// A bench whose agents directories (`serve --codebolt-agents`) are the fixtures' and
    /// `agents`.
    async fn start_with_agents(agents: Vec<PathBuf>) -> Bench {
        let modules = node_modules().await;
        let fake = byre_fake_models::FakeOpenAi::fixture("codebolt_inference")
            .await
            .expect("fake API");
        let base_url = fake.base_url();
        let server = TestServer::spawn_configured(
            TempDir::new().expect("data dir"),
            local_ada(),
            move |c| {
                c.agent_env = vec![
                    ("NODE_PATH".into(), modules.display().to_string()),
                    ("OPENAI_BASE_URL".into(), base_url),
                    ("OPENAI_API_KEY".into(), "sk-fake-openai-key".into()),
                ];
                c.codebolt_agents.extend(agents);
            },
        )
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

    async fn task(&self, agent: &Path, prompt: &str) -> Value {
        let model = format!("codebolt:{}", agent.display());
        let body = json!({"title": "codebolt task", "prompt": prompt, "model": model});
        self.api.create_task_with(&self.project_id, body).await
    }
}

/// Answers every agent question that reaches the inbox, as `login`: the first option when it
/// has options, else the text "blue". Runs until aborted.
fn answer_questions(api: Api) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut sse = api.events(&[], None).await;
        loop {
            let Some(e) = sse.next(Duration::from_secs(3600)).await else {
                return;
            };
            if e.data["kind"] != "inbox.item_created" || e.data["payload"]["kind"] != "question" {
                continue;
            }
            let item = &e.data["payload"];
            let options = item["payload"]["options"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let response = match options.first() {
                Some(o) => json!({"item_id": item["id"], "type": "option", "options": [o]}),
                None => json!({"item_id": item["id"], "type": "other", "text": "blue"}),
            };
            let r = api
                .call(
                    "respondInbox",
                    &[],
                    &[],
                    Some(json!({ "responses": [response] })),
                )
                .await;
            assert!(r.status < 300, "{:?}", r.body);
        }
    })
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
    let answering = answer_questions(b.api.clone());
    let task = b.task(&fixture("agent"), "Add some notes").await;
    let events = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    let texts = texts(&events);
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(has("Working on: Add some notes"), "{texts:?}");
    assert!(
        has("notes.txt says: written by a CodeBolt agent"),
        "{texts:?}"
    );
    assert!(has("reading outside the worktree: refused"), "{texts:?}");
    assert!(has("committed: true"), "{texts:?}");
    assert!(
        has("terminal printed: written by a CodeBolt agent"),
        "{texts:?}"
    );
    assert!(has("stream gave: streamed-one,streamed-two"), "{texts:?}");
    assert!(
        has("the model said: Teal, said the fake model."),
        "{texts:?}"
    );
    // Its questions went to the inbox; the answers came back over the socket, recorded as
    // delivered there (input_id 0), not as messages.
    assert!(has("the human said: blue"), "{texts:?}");
    // byre's agent tools are its toolbox `byre`.
    assert!(
        has("byre tools: byre--ask_human,byre--take_snapshot,byre--set_merge_title,byre--expose_port,byre--start_subtask,byre--list_subtasks,byre--finish_stage,byre--bash,byre--read_file,byre--write_file,byre--upload,byre--download,byre--hands"),
        "{texts:?}"
    );
    assert!(has("set_merge_title: The merge title is set."), "{texts:?}");
    assert!(has("confirmed: yes"), "{texts:?}");
    assert_eq!(all(&events, "inbox.item_created").len(), 2);
    let delivered = all(&events, "inbox.delivered");
    assert_eq!(delivered.len(), 2);
    assert!(delivered.iter().all(|d| d["payload"]["input_id"] == 0));
    assert_eq!(all(&events, "user.message").len(), 1);
    answering.abort();
    let calls: Vec<_> = b
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect();
    assert_eq!(calls.len(), 1);
    assert!(calls[0]
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == "Bearer sk-fake-openai-key"));
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
        "inference",
        "waitforReply",
        "confirmationRequest",
    ] {
        assert!(calls.iter().any(|c| c == name), "{name} in {calls:?}");
    }
    let results = all(&events, "tool.result");
    assert_eq!(results.len(), calls.len(), "{:?}", kinds(&events));
    // Each result answers its own call (the v1 client's frames carry no id: byre gives one).
    let ids = |kind: &str| -> std::collections::BTreeSet<String> {
        all(&events, kind)
            .iter()
            .map(|e| e["payload"]["tool_use_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids("tool.call"), ids("tool.result"));
    assert_eq!(ids("tool.call").len(), calls.len());
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
    // The turn ends in a snapshot, as any agent's does.
    let snap = until_kind(&mut b.sse, "snapshot.taken", TURN_WAIT).await;
    let taken = all(&snap, "snapshot.taken")[0];
    assert_eq!(taken["payload"]["trigger"], "turn_end");
    assert_eq!(taken["task_id"], task["id"]);
    let task_now = b
        .api
        .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(
        task_now.body["merge_title"],
        "Add notes from a CodeBolt agent"
    );
    // The session is a codebolt one.
    let sessions = b
        .api
        .call("listSessions", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(sessions.body[0]["vendor"], "codebolt");
    b.server.stop().await;
}

/// The type (or, for v1 browser and crawler calls, the `event`) a captured request's client
/// resolved on: the stub's last reply to it.
fn awaited(client: &str, captured: &[Value]) -> Option<String> {
    let last = captured.last()?;
    let event = last["event"]
        .as_str()
        .filter(|_| client.starts_with("codeboltjs@1"));
    Some(event.or(last["type"].as_str())?.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_frames_of_both_generations_each_get_the_reply_their_client_awaits() {
    // The agent reads the frames beside its own code: in its sandbox it reaches its agents
    // directory, here one of its own.
    let agent = TempDir::new().unwrap();
    let mut b = Bench::start_with_agents(vec![agent.path().to_owned()]).await;
    let answering = answer_questions(b.api.clone());
    std::fs::copy(fixture("replay/index.js"), agent.path().join("index.js")).unwrap();
    let frames = agent.path().join("frames.jsonl");
    std::fs::copy(fixture("frames.jsonl"), &frames).unwrap();
    let task = b.task(agent.path(), frames.to_str().unwrap()).await;
    let events = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    let ended = all(&events, "turn.ended")[0];
    assert_eq!(
        ended["payload"]["result"],
        "replayed",
        "{:?}",
        kinds(&events)
    );
    let worktree = Path::new(task["worktree_path"].as_str().unwrap());
    let report: Value =
        serde_json::from_slice(&std::fs::read(worktree.join("codebolt-replay.json")).unwrap())
            .unwrap();
    let replays = report["replays"].as_array().expect("replays");
    let (mut v1, mut v2) = (0, 0);
    for r in replays {
        let client = r["client"].as_str().unwrap();
        let request = &r["request"];
        let got = r["got"].as_array().unwrap();
        // Only valid JSON objects ever come back.
        assert!(
            got.iter()
                .all(|f| f.get("__invalid").is_none() && f.is_object()),
            "{r}"
        );
        let captured = r["captured"].as_array().unwrap();
        let Some(want) = awaited(client, captured) else {
            // Fire-and-forget: nothing awaited, nothing answered.
            assert!(got.is_empty(), "{r}");
            continue;
        };
        let key = if want == captured.last().unwrap()["event"] && client.starts_with("codeboltjs@1")
        {
            "event"
        } else {
            "type"
        };
        let replies: Vec<&Value> = got.iter().filter(|f| f[key] == want.as_str()).collect();
        assert_eq!(replies.len(), 1, "one {want} for {request}: {got:?}");
        match request["requestId"].as_str() {
            Some(id) => {
                v2 += 1;
                assert_eq!(replies[0]["requestId"], id, "{request}");
                // Nothing of this request came back without its id.
                assert!(
                    got.iter().all(|f| f["requestId"] == id),
                    "{request}: {got:?}"
                );
            }
            None => {
                v1 += 1;
                assert!(replies[0].get("requestId").is_none(), "{request}");
            }
        }
    }
    // Every awaited request of the capture (frames_table.md), none skipped.
    assert_eq!((v1, v2), (81, 90));
    // Malformed frames were ignored, the socket stayed open, an unknown request was answered.
    // (The captured `startSubagentTaskRequest` notification's result, for an agent byre does not
    // have, may come back meanwhile: it is a notification of its own, not a reply.)
    let unknown = report["edge"]["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["requestId"] == "edge-unknown")
        .unwrap_or_else(|| panic!("{}", report["edge"]));
    assert_eq!(unknown["success"], false);
    let after = report["edge"]["after"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["type"] != "agentnotify")
        .unwrap_or_else(|| panic!("{}", report["edge"]));
    assert_eq!(after["type"], "readFileResponse");
    assert!(after["content"].as_str().unwrap().starts_with("# basic"));
    // A client written from the AsyncAPI file gets a ServiceResponse.
    let spec = &report["spec"][0];
    assert_eq!(spec["requestId"], "spec-1", "{spec}");
    assert_eq!(spec["success"], true);
    assert!(
        spec["data"].is_object() && spec["timestamp"].is_string(),
        "{spec}"
    );
    // A frame spelled as the real client spells it, on the spec's channel, too.
    let spec2 = report["spec2"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["requestId"] == "spec-2")
        .unwrap();
    assert_eq!(spec2["type"], "readFileResponse");
    assert!(
        spec2["data"]["content"]
            .as_str()
            .unwrap()
            .starts_with("# basic"),
        "{spec2}"
    );
    assert!(spec2["timestamp"].is_string());
    answering.abort();
    // Every served request is in the log as a tool call with its result.
    let calls = all(&events, "tool.call").len();
    assert!(calls > 180, "{calls}");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_needs_the_token_byre_started_its_agent_with() {
    let server = TestServer::spawn().await;
    let url = server.api().url("getMe", &[]).1.replace("/api/me", "");
    let client = reqwest::Client::new();
    for query in [
        "",
        "?id=&agentId=cb-guess&threadToken=cb-guess",
        "?agentId=x",
    ] {
        let r = client
            .get(format!("{url}/codebolt{query}"))
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{query}");
        let body: Value = r.json().await.unwrap();
        assert!(body["message"].is_string());
    }
    server.stop().await;
}

/// Starts `fixture_name`, waits for its first text `said`, interrupts it; the events up to its
/// turn's end, which must be `interrupted`.
async fn interrupt(fixture_name: &str, said: &str) -> Vec<SseEvent> {
    let mut b = Bench::start().await;
    let task = b.task(&fixture(fixture_name), "go").await;
    let events = b
        .sse
        .until("the agent's text", |e| e.data["kind"] == "agent.text")
        .await;
    assert_eq!(all(&events, "agent.text")[0]["payload"]["text"], said);
    let session = b.api.first_session_id(task["id"].as_str().unwrap()).await;
    let r = b.api.call("interruptSession", &[&session], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let events = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    assert_eq!(
        all(&events, "turn.ended")[0]["payload"]["outcome"],
        "interrupted"
    );
    b.server.stop().await;
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_codebolt_turn_sends_stop_and_ends_it_interrupted() {
    let events = interrupt("stoppable", "working until stopped").await;
    assert!(texts(&events).contains(&"stopping on request".to_owned()));
    assert!(all(&events, "session.process_exited").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_agent_deaf_to_the_stop_is_killed_and_its_turn_interrupted() {
    let events = interrupt("deaf", "busy forever").await;
    assert_eq!(all(&events, "session.process_exited").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_wait_beside_other_requests_and_a_newer_one_replaces_the_older() {
    let mut b = Bench::start().await;
    b.task(&fixture("questions"), "ask").await;
    // Nobody answers yet: the read is served, the first question's wait ends as replaced.
    let mut seen = Vec::new();
    while !(seen
        .iter()
        .any(|t: &String| t.starts_with("read while waiting"))
        && seen.iter().any(|t| t.starts_with("q1:")))
    {
        let events = b
            .sse
            .until("the agent's text", |e| e.data["kind"] == "agent.text")
            .await;
        seen.extend(texts(&events));
    }
    assert!(
        seen.contains(&"read while waiting: readFileResponse".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|t| t.starts_with("q1: false") && t.contains("replaced")),
        "{seen:?}"
    );
    let open = b.api.call("listInbox", &[], &[], None).await;
    let items: Vec<&Value> = open
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["state"] == "open")
        .collect();
    assert_eq!(items.len(), 1, "{:?}", open.body);
    assert_eq!(items[0]["payload"]["question"], "Second question?");
    let r = b
        .api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(json!({"responses": [{"item_id": items[0]["id"], "type": "other", "text": "green"}]})),
        )
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let events = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    assert!(texts(&events).contains(&"q2: green".to_owned()));
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_agent_that_left_its_socket_comes_as_the_next_message() {
    let mut b = Bench::start().await;
    b.task(&fixture("leaves"), "ask and leave").await;
    let first = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    let said = texts(&first);
    assert!(
        said.contains(&"asked".to_owned()) && said.contains(&"reconnected".to_owned()),
        "{said:?}"
    );
    let open = b.api.call("listInbox", &[], &[], None).await;
    let item = open.body.as_array().unwrap()[0].clone();
    assert_eq!(
        item["payload"]["question"],
        "Which colour, while I am away?"
    );
    let r = b
        .api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(
                json!({"responses": [{"item_id": item["id"], "type": "other", "text": "purple"}]}),
            ),
        )
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let second = until_kind(&mut b.sse, "turn.ended", TURN_WAIT).await;
    let delivered = all(&second, "inbox.delivered");
    assert_eq!(delivered.len(), 1);
    assert_ne!(
        delivered[0]["payload"]["input_id"], 0,
        "delivered as a message"
    );
    assert!(
        texts(&second)
            .iter()
            .any(|t| t.starts_with("got: ") && t.contains("purple")),
        "{:?}",
        texts(&second)
    );
    b.server.stop().await;
}

/// The frames one check of the `abuse` fixture got back for its request.
fn got<'a>(report: &'a Value, check: &str) -> &'a [Value] {
    report[check]
        .as_array()
        .unwrap_or_else(|| panic!("{check}: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_each_get_one_reply_and_never_close_the_socket() {
    let mut b = Bench::start().await;
    let task = b.task(&fixture("abuse"), "abuse").await;
    let events = until_kind(&mut b.sse, "turn.ended", Duration::from_secs(400)).await;
    assert_eq!(all(&events, "turn.ended")[0]["payload"]["result"], "abused");
    let worktree = Path::new(task["worktree_path"].as_str().unwrap());
    let report: Value =
        serde_json::from_slice(&std::fs::read(worktree.join("codebolt-abuse.json")).unwrap())
            .unwrap();
    assert!(report.get("error").is_none(), "{report}");
    // Only JSON objects came back, and the socket stayed open throughout.
    assert_eq!(report["invalid"], 0);
    assert_eq!(report["closed"], false);
    assert_eq!(report["second"], 409);
    let one = |check: &str, ty: &str| -> Value {
        let frames: Vec<&Value> = got(&report, check)
            .iter()
            .filter(|f| f["type"] == ty)
            .collect();
        assert_eq!(frames.len(), 1, "{check}: {:?}", got(&report, check));
        frames[0].clone()
    };
    // A command that left a child holding its output is answered when its shell ends, and
    // the child goes with it.
    let bg = one("bg", "commandFinish");
    assert!(bg["stdout"].as_str().unwrap().contains("now"), "{bg}");
    assert!(!bg["stdout"].as_str().unwrap().contains("late"), "{bg}");
    assert_eq!(one("bgstream", "commandFinish")["exitCode"], 0);
    // A stream of 40 MB is cut at 16 MiB of frames, with one notice, and still finishes.
    let out = &report["floodOut"];
    assert!(
        out["bytes"].as_u64().unwrap() <= 16 * 1024 * 1024 + 4096,
        "{out}"
    );
    assert_eq!(out["finish"], json!([0]), "{out}");
    assert_eq!(out["notice"].as_array().unwrap().len(), 1, "{out}");
    // Any JSON requestId is echoed as sent.
    assert_eq!(one("numid", "readFileResponse")["requestId"], 42);
    assert_eq!(
        one("objid", "readFileResponse")["requestId"],
        json!({"a": [1]})
    );
    // Malformed frames were ignored; bad fields get a failed reply, not silence.
    assert_eq!(one("afterBad", "readFileResponse")["success"], true);
    for check in ["nomsg", "numsg"] {
        assert_eq!(one(check, "readFileResponse")["success"], false, "{check}");
    }
    assert_eq!(one("wrongtypes", "createFileResponse")["success"], false);
    assert_eq!(one("gitbad", "gitCommitResponse")["requestId"], "gitbad");
    // No path leads out of the worktree or into its .git.
    for (i, frames) in got(&report, "escapes").iter().enumerate() {
        let replies = frames.as_array().unwrap();
        assert_eq!(replies.len(), 1, "escape {i}: {replies:?}");
        assert_eq!(replies[0]["success"], false, "escape {i}: {replies:?}");
    }
    let outside = worktree.parent().unwrap();
    assert!(!outside.join("outside.txt").exists() && !outside.join("outside2.txt").exists());
    // A 10 MB frame is served.
    assert_eq!(one("bigWrite", "writeToFileResponse")["success"], true);
    let read = &got(&report, "bigRead")[0];
    assert_eq!(read["length"], 10 * 1024 * 1024, "{read}");
    // A flood of 1000 requests: each answered exactly once.
    assert_eq!(report["flood"], json!({"ids": 1000, "max": 1}));
    // Mid-rebase, git requests are answered; a commit is refused (it would land on the
    // rebase's detached HEAD, not the task branch).
    let rebase = one("rebase", "commandFinish");
    assert!(
        rebase["stdout"]
            .as_str()
            .unwrap()
            .contains("rebase in progress"),
        "{rebase}"
    );
    assert_eq!(one("rebaseStatus", "gitStatusResponse")["success"], true);
    one("rebaseAdd", "AddResponse");
    let commit = one("rebaseCommit", "gitCommitResponse");
    assert_eq!(commit["success"], false, "{commit}");
    assert!(
        commit["error"].as_str().unwrap().contains("rebase"),
        "{commit}"
    );
    assert_eq!(one("rebaseAbort", "commandFinish")["success"], true);
    // A command that never ends holds up no other request, and an interrupt ends it.
    assert_eq!(one("fast", "readFileResponse")["success"], true);
    assert_eq!(report["slowBeforeFast"], 0);
    one("interrupt", "terminalInterrupted");
    assert_eq!(got(&report, "slow").len(), 1, "{report}");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_codebolt_turn_ends_its_running_terminal_commands() {
    let events = interrupt("hold", "command running").await;
    // The stop ended the command, so the agent saw its end and stopped by itself.
    assert!(
        texts(&events).contains(&"command ended".to_owned()),
        "{:?}",
        texts(&events)
    );
    assert!(all(&events, "session.process_exited").is_empty());
}

/// Sandboxed, a command ends with byre itself (`--die-with-parent`, like the agent: see
/// `agent_exits.rs`); without the sandbox only the next start can end it, which this proves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_command_outlives_no_kill_9_of_byre() {
    use crate::process::ServeProcess;
    let modules = node_modules().await;
    let data = TempDir::new().unwrap();
    let env = [
        ("NODE_PATH", modules.to_str().unwrap()),
        ("BYRE_SANDBOX", "off"),
    ];
    let server = ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let repo = crate::helpers::make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let model = format!("codebolt:{}", fixture("hold").display());
    let r = api
        .call(
            "createTask",
            &[project["id"].as_str().unwrap()],
            &[],
            Some(json!({"title": "hold", "prompt": "go", "model": model})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let worktree = PathBuf::from(r.body["worktree_path"].as_str().unwrap());
    let mut sse = api.events(&[], None).await;
    sse.until("the command runs", |e| {
        e.data["kind"] == "agent.text" && e.data["payload"]["text"] == "command running"
    })
    .await;
    let pgid: i32 = std::fs::read_to_string(worktree.join(".hold.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pgid: i32| {
        // SAFETY: signal 0 only checks that the group exists.
        unsafe { libc::kill(-pgid, 0) == 0 }
    };
    assert!(alive(pgid));
    server.kill_9();
    // The restarted byre finds what the dead one's agent left running, and ends it.
    let server = ServeProcess::start_with_env(data.path(), &env);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while alive(pgid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !alive(pgid),
        "the command byre ran for the agent outlived byre"
    );
    server.terminate();
}
