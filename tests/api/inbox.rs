//! `respondInbox`'s refusals (400, 404, 409, all or nothing), supersession, delivery
//! bookkeeping, the agent tools' errors and effects (`set_merge_title`, `expose_port` →
//! `listPreviews`). The agent's session is real; its CLI is missing, so no model runs: the tool
//! calls go to byre's internal route with the session's token, as `byre mcp` sends them (the
//! real CLIs drive that path in `ask_human.rs`).

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{find, local_ada, until_kind, Api, Sse, TestServer, WAIT};

struct Bench {
    server: TestServer,
    api: Api,
    sse: Sse,
    task: Value,
    session_id: String,
    token: String,
    _repo: TempDir,
}

impl Bench {
    /// A task whose session exists and is idle (its first turn failed: no CLI).
    async fn start() -> Bench {
        Self::start_with(None).await
    }

    /// As [`Bench::start`], with `tailscale` as the tailscale binary.
    async fn start_with(tailscale: Option<std::path::PathBuf>) -> Bench {
        let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), |c| {
            c.claude_bin = Some("/nonexistent/claude".into());
            c.tailscale_bin = tailscale;
        })
        .await;
        let api = server.api();
        let (repo, pid) = api.basic_project().await;
        let mut sse = api.events(&[], None).await;
        let task = api
            .create_task_with(&pid, json!({"title": "inbox", "prompt": "hello"}))
            .await;
        until_kind(&mut sse, "turn.ended", WAIT).await;
        let session_id = api.first_session_id(task["id"].as_str().unwrap()).await;
        let host = byre_agents::mcp_launch::McpHost::open(
            server.data.path(),
            String::new(),
            "byre".into(),
        )
        .expect("the server's MCP secret");
        let token = host.token(&session_id);
        Bench {
            server,
            api,
            sse,
            task,
            session_id,
            token,
            _repo: repo,
        }
    }

    fn task_id(&self) -> &str {
        self.task["id"].as_str().unwrap()
    }

    /// A tool call as `byre mcp` forwards it: HTTP status and `{is_error, text}`.
    async fn raw_tool(&self, tool: &str, token: Option<&str>, args: Value) -> (u16, Value) {
        let mut req = reqwest::Client::new()
            .post(format!("{}/internal/mcp/tools/{tool}", self.server.url))
            .json(&args);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("byre answers");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn tool(&self, tool: &str, args: Value) -> Value {
        let (status, body) = self.raw_tool(tool, Some(&self.token), args).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Asks a question; returns its inbox item id.
    async fn ask(&mut self, context: &str) -> String {
        let r = self
            .tool(
                "ask_human",
                json!({"context": context, "question": "Which?", "why_blocked": "It is your call."}),
            )
            .await;
        assert_eq!(r["is_error"], false, "{r}");
        loop {
            let e = until_kind(&mut self.sse, "inbox.item_created", WAIT).await;
            let created = &e.last().unwrap().data["payload"];
            if created["kind"] == "question" {
                return created["id"].as_str().unwrap().to_owned();
            }
        }
    }

    async fn respond(&self, responses: Value) -> (u16, Value) {
        let r = self
            .api
            .call(
                "respondInbox",
                &[],
                &[],
                Some(json!({ "responses": responses })),
            )
            .await;
        (r.status, r.body)
    }

    async fn item(&self, id: &str) -> Value {
        self.api.call("getInboxItem", &[id], &[], None).await.body
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respond_inbox_refuses_bad_answers_and_delivers_good_ones_once() {
    let mut b = Bench::start().await;
    let one = b.ask("- ( ) red\n- (*) blue\n- ( ) green\n").await;
    let item = b.item(&one).await;
    assert_eq!(item["payload"]["options"], json!(["red", "blue", "green"]));
    assert_eq!(item["payload"]["recommended"], json!(["blue"]));
    assert_eq!(item["payload"]["multiple"], false);

    let cases: Vec<(&str, Value, u16)> = vec![
        ("no responses", json!([]), 400),
        (
            "an unknown item",
            json!([{"item_id": "nope", "type": "dismiss"}]),
            404,
        ),
        (
            "an option not offered",
            json!([{"item_id": one, "type": "option", "options": ["pink"]}]),
            400,
        ),
        (
            "two options of a pick-one question",
            json!([{"item_id": one, "type": "option", "options": ["red", "blue"]}]),
            400,
        ),
        (
            "no option",
            json!([{"item_id": one, "type": "option", "options": []}]),
            400,
        ),
        (
            "text with a pick-one option",
            json!([{"item_id": one, "type": "option", "options": ["red"], "text": "because"}]),
            400,
        ),
        (
            "an empty other",
            json!([{"item_id": one, "type": "other", "text": "  "}]),
            400,
        ),
        (
            "options with other",
            json!([{"item_id": one, "type": "other", "text": "x", "options": ["red"]}]),
            400,
        ),
        (
            "a dismissal with text",
            json!([{"item_id": one, "type": "dismiss", "text": "no"}]),
            400,
        ),
        (
            "an unknown image",
            json!([{"item_id": one, "type": "other", "text": "see", "images": ["no-such-blob"]}]),
            400,
        ),
        (
            "the same item twice",
            json!([{"item_id": one, "type": "dismiss"}, {"item_id": one, "type": "dismiss"}]),
            400,
        ),
        (
            "a good answer with an unknown item",
            json!([{"item_id": one, "type": "option", "options": ["red"]}, {"item_id": "nope", "type": "dismiss"}]),
            404,
        ),
    ];
    for (name, responses, status) in cases {
        let (got, body) = b.respond(responses).await;
        assert_eq!(got, status, "{name}: {body}");
        assert!(body["message"].is_string(), "{name}: {body}");
    }
    assert_eq!(
        b.item(&one).await["state"],
        "open",
        "nothing was half-answered"
    );

    // A newer question supersedes the open one, which can no longer be answered.
    let any = b.ask("Pick:\n- [ ] tests\n- [x] docs\n").await;
    let old = b.item(&one).await;
    assert_eq!(old["state"], "superseded");
    let (status, _) = b
        .respond(json!([{"item_id": one, "type": "option", "options": ["red"]}]))
        .await;
    assert_eq!(status, 409, "a superseded item");
    let open = b
        .api
        .call("listInbox", &[], &[("task_id", b.task_id())], None)
        .await;
    let open_ids: Vec<&str> = open
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert!(
        open_ids.contains(&any.as_str()) && !open_ids.contains(&one.as_str()),
        "{open_ids:?}"
    );
    let superseded = b
        .api
        .call("listInbox", &[], &[("state", "superseded")], None)
        .await;
    assert_eq!(superseded.body[0]["id"], one.as_str());

    let (status, body) = b
        .respond(json!([{"item_id": any, "type": "option", "options": []}]))
        .await;
    assert_eq!(status, 400, "a pick-any answer needs an option: {body}");
    let (status, body) = b
        .respond(json!([{"item_id": any, "type": "option", "options": ["tests", "docs"], "text": "both"}]))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["state"], "answered");
    assert_eq!(body[0]["responses"][0]["options"], json!(["tests", "docs"]));
    // The session was idle with no open question: delivered at once, as ada's message.
    let events = until_kind(&mut b.sse, "user.message", WAIT).await;
    let delivered = find(&events, "inbox.delivered");
    assert_eq!(delivered["agent_session_id"], b.session_id.as_str());
    let message = find(&events, "user.message");
    assert_eq!(message["actor"], "ada");
    let text = message["payload"]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "Answer to your question \"Which?\" from ada: tests, docs\nboth"
    );
    assert!(b.item(&any).await["responses"][0]["delivered_at"].is_string());

    let (status, _) = b
        .respond(json!([{"item_id": any, "type": "dismiss"}]))
        .await;
    assert_eq!(status, 409, "already answered");

    // An answer with only an image: the image goes to the agent with the message.
    let blob = b
        .api
        .call_raw("uploadBlob", &[], "image/png", crate::blobs::PNG.to_vec())
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let three = b.ask("No list here.").await;
    let (status, body) = b
        .respond(json!([{"item_id": three, "type": "other", "text": "", "images": [blob]}]))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["responses"][0]["images"], json!([blob]));
    let events = until_kind(&mut b.sse, "user.message", WAIT).await;
    assert_eq!(
        find(&events, "user.message")["payload"]["images"],
        json!([blob])
    );
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tools_answer_bad_calls_with_tool_errors_and_set_titles_and_previews() {
    let b = Bench::start().await;
    let (status, _) = b
        .raw_tool("set_merge_title", None, json!({"merge_title": "x"}))
        .await;
    assert_eq!(status, 401, "no token");
    let (status, _) = b
        .raw_tool(
            "set_merge_title",
            Some("forged.0000"),
            json!({"merge_title": "x"}),
        )
        .await;
    assert_eq!(status, 403, "a forged token");
    let (status, _) = b
        .raw_tool(
            "set_merge_title",
            Some(&format!("{}x", b.token)),
            json!({"merge_title": "x"}),
        )
        .await;
    assert_eq!(status, 403, "a token of no session");
    // A proxied call (as `tailscale serve` forwards one) is refused even with a good token.
    let r = reqwest::Client::new()
        .post(format!(
            "{}/internal/mcp/tools/set_merge_title",
            b.server.url
        ))
        .bearer_auth(&b.token)
        .header("X-Forwarded-For", "100.64.0.7")
        .json(&json!({"merge_title": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a call through a proxy");
    // No secret to derive tokens from; only byre's user can read the session's token file.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: std::path::PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let data = b.server.data.path();
    assert!(!data.join("mcp.secret").exists());
    assert_eq!(mode(data.join("mcp-tokens")), 0o700);
    assert_eq!(
        mode(
            data.join("mcp-tokens")
                .join(format!("{}.token", b.session_id))
        ),
        0o600
    );

    // Arguments too large to post are a tool error the model can act on, not an HTTP error.
    let huge = "x".repeat(byre::http::MAX_TOOL_ARGS_BYTES + 1);
    let (status, body) = b
        .raw_tool(
            "ask_human",
            Some(&b.token),
            json!({"context": huge, "question": "?", "why_blocked": "b"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["is_error"], true);
    assert!(
        body["text"]
            .as_str()
            .unwrap()
            .contains("larger than 256 KiB"),
        "{body}"
    );

    let port_base = b.task["port_base"].as_u64().unwrap();
    let errors: Vec<(&str, Value, &str)> = vec![
        ("no_such_tool", json!({}), "no tool `no_such_tool`"),
        (
            "ask_human",
            json!({"context": "- ( ) a"}),
            "`question` is required",
        ),
        (
            "ask_human",
            json!({"question": 3}),
            "`question` must be a string",
        ),
        (
            "ask_human",
            json!({"question": "?", "attachments": "file"}),
            "`attachments` must be an array",
        ),
        (
            "set_merge_title",
            json!({"merge_title": "a".repeat(73)}),
            "at most 72",
        ),
        (
            "set_merge_title",
            json!({"merge_title": "two\nlines"}),
            "one non-empty line",
        ),
        ("set_merge_title", json!({}), "`merge_title` is required"),
        (
            "expose_port",
            json!({"port": port_base + 10, "name": "web"}),
            "not in this task's block",
        ),
        (
            "expose_port",
            json!({"port": -1, "name": "web"}),
            "`port` must be a port number",
        ),
        (
            "expose_port",
            json!({"port": port_base, "name": ""}),
            "1 to 64 characters",
        ),
    ];
    for (tool, args, says) in errors {
        let r = b.tool(tool, args.clone()).await;
        assert_eq!(r["is_error"], true, "{tool} {args}: {r}");
        assert!(
            r["text"].as_str().unwrap().contains(says),
            "{tool} {args}: {r}"
        );
    }

    let mut sse = b.api.events(&[("task_id", b.task_id())], None).await;
    let r = b.tool("take_snapshot", json!({})).await;
    assert_eq!(r["is_error"], false, "{r}");
    loop {
        let events = until_kind(&mut sse, "snapshot.taken", WAIT).await;
        if events.last().unwrap().data["payload"]["trigger"] == "requested" {
            break;
        }
    }
    let snapshots = b.api.call("listSnapshots", &[b.task_id()], &[], None).await;
    assert!(
        snapshots
            .body
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["trigger"] == "requested"),
        "{:?}",
        snapshots.body
    );

    let r = b
        .tool(
            "set_merge_title",
            json!({"merge_title": "Add the colour file"}),
        )
        .await;
    assert_eq!(r["is_error"], false, "{r}");
    let task = b.api.call("getTask", &[b.task_id()], &[], None).await.body;
    assert_eq!(task["merge_title"], "Add the colour file");

    let previews = b.api.call("listPreviews", &[b.task_id()], &[], None).await;
    assert_eq!(previews.status, 200);
    assert_eq!(previews.body, json!([]));
    for (port, name) in [
        (port_base + 1, "web"),
        (port_base + 2, "api"),
        (port_base + 3, "web"),
    ] {
        let r = b
            .tool("expose_port", json!({"port": port, "name": name}))
            .await;
        assert_eq!(r["is_error"], false, "{r}");
    }
    let previews = b
        .api
        .call("listPreviews", &[b.task_id()], &[], None)
        .await
        .body;
    let got: Vec<(u64, &str)> = previews
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["port"].as_u64().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [(port_base + 2, "api"), (port_base + 3, "web")],
        "a name exposed again moves"
    );
    assert_eq!(
        b.api
            .call("listPreviews", &["nope"], &[], None)
            .await
            .status,
        404
    );
    let status = b.api.call("getStatus", &[], &[], None).await.body;
    let installed = byre_process::find_on_path("tailscale").is_some();
    assert_eq!(status["previews_published"], json!(installed), "{status}");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exposed_port_is_published_with_tailscale_serve() {
    // A stand-in for tailscale that records its argv, one call per line.
    let dir = TempDir::new().unwrap();
    let calls = dir.path().join("calls");
    let fake = dir.path().join("tailscale");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", calls.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let b = Bench::start_with(Some(fake)).await;
    let status = b.api.call("getStatus", &[], &[], None).await.body;
    assert_eq!(status["previews_published"], true);
    let port = b.task["port_base"].as_u64().unwrap() + 4;
    let r = b
        .tool("expose_port", json!({"port": port, "name": "web"}))
        .await;
    assert_eq!(r["is_error"], false, "{r}");
    let expected = format!("serve --bg --https={port} http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let got = std::fs::read_to_string(&calls).unwrap_or_default();
        if got.lines().any(|l| l == expected) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tailscale calls: {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_answers_to_one_item_one_wins_the_others_get_409() {
    let mut b = Bench::start().await;
    let item = b.ask("- ( ) red\n- (*) blue").await;
    let answers = ["red", "blue", "red", "blue"].map(|o| {
        let api = b.server.api();
        let item = item.clone();
        tokio::spawn(async move {
            api.call(
                "respondInbox",
                &[],
                &[],
                Some(json!({"responses": [{"item_id": item, "type": "option", "options": [o]}]})),
            )
            .await
            .status
        })
    });
    let mut statuses = Vec::new();
    for a in answers {
        statuses.push(a.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409, 409, 409]);
    let got = b.item(&item).await;
    assert_eq!(got["state"], "answered");
    assert_eq!(got["responses"].as_array().unwrap().len(), 1);
    assert!(got["responses"][0]["delivered_at"].is_string(), "{got}");
    b.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_removes_token_files_of_sessions_that_are_not_live() {
    let b = Bench::start().await;
    let tokens = b.server.data.path().join("mcp-tokens");
    let live = tokens.join(format!("{}.token", b.session_id));
    let stray = tokens.join("no-such-session.token");
    std::fs::write(&stray, "no-such-session.00").unwrap();
    let data = b.server.stop().await;
    let server = TestServer::spawn_configured(data, local_ada(), |c| {
        c.claude_bin = Some("/nonexistent/claude".into())
    })
    .await;
    // Pruned while the server starts, before it serves.
    assert!(live.exists(), "the live session keeps its token");
    assert!(!stray.exists(), "a token of no session is removed");
    server.stop().await;
}
