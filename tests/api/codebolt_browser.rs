//! CodeBolt browser and crawler actions on byre's headless Chromium (Debian's
//! `/usr/bin/chromium`): a real `@codebolt/codeboltjs@1.1.99` agent, and raw v2 frames, drive
//! it to a page this test serves on loopback, read it as Markdown, click its button (whose
//! handler rewrites the page) and read the change, take a screenshot stored as a PNG blob,
//! and are refused a URL off the allow-list. The browser's processes are gone once the agent's
//! session ends, and once byre stops.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{local_ada, Api, Sse, SseEvent, TestServer};

const PAGE: &str = r#"<!doctype html>
<html><head><title>Byre test page</title></head>
<body>
<h1>Byre test page</h1>
<p id="status">Not clicked yet.</p>
<button id="go" onclick="document.getElementById('status').textContent = 'Clicked! The page changed.'">Go</button>
</body></html>"#;

/// Serves [`PAGE`] on a loopback port for every request; its URL.
async fn serve_page() -> String {
    serve_on("127.0.0.1", None).await
}

/// Serves [`PAGE`] on `ip` (a port of its own), and a redirect to `redirect` at `/redirect`;
/// the page's URL.
async fn serve_on(ip: &str, redirect: Option<String>) -> String {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let redirect = redirect.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                if let Some(to) = redirect.filter(|_| buf.starts_with(b"GET /redirect")) {
                    let head = format!(
                        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.shutdown().await;
                    return;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    PAGE.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(PAGE.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://{addr}/page")
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/codebolt")
        .join(rel)
}

/// Processes of the Chromium a byre on `data` started (their profile is under its data dir).
fn chromium_processes(data: &Path) -> Vec<i32> {
    let profile = format!(
        "--user-data-dir={}/chromium/",
        std::fs::canonicalize(data).unwrap().display()
    );
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&profile))
                .unwrap_or(false)
        })
        .collect()
}

/// Waits (up to 30 s) until no Chromium process of `data` is left; the ones left.
async fn chromium_gone(data: &Path) -> Vec<i32> {
    for _ in 0..300 {
        let left = chromium_processes(data);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    chromium_processes(data)
}

async fn start() -> (TestServer, Api, String, Sse, TempDir) {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let chromium = tokio::task::spawn_blocking(|| crate::browser::programs().chromium)
        .await
        .unwrap();
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())];
        c.chromium_bin = Some(chromium);
    })
    .await;
    let api = server.api();
    let (repo, project_id) = api.basic_project().await;
    let sse = api.events(&[], None).await;
    (server, api, project_id, sse, repo)
}

fn text_of(e: &SseEvent) -> &str {
    e.data["payload"]["text"].as_str().unwrap_or("")
}

/// The agent's text that starts with `prefix`, parsed as JSON after it; the events until then.
async fn said(sse: &mut Sse, prefix: &str) -> (Value, Vec<SseEvent>) {
    let events = sse
        .until(prefix, |e| {
            e.data["kind"] == "agent.text"
                && (text_of(e).starts_with(prefix) || text_of(e).starts_with("agent error"))
        })
        .await;
    let t = text_of(events.last().unwrap());
    let json = t
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("the agent failed: {t}"));
    (serde_json::from_str(json.trim()).expect(t), events)
}

async fn assert_png_blob(api: &Api, blob_id: &str) {
    let got = api.call("getBlob", &[blob_id], &[], None).await;
    assert_eq!(got.status, 200, "{blob_id}");
    assert_eq!(got.headers["content-type"], "image/png");
    assert!(
        got.bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "PNG magic: {:?}",
        &got.bytes[..got.bytes.len().min(8)]
    );
    assert!(
        got.bytes.len() > 1000,
        "a real screenshot, {} bytes",
        got.bytes.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_codebolt_agent_browses_a_loopback_page_and_the_browser_ends_with_its_session() {
    let url = serve_page().await;
    let (server, api, project_id, mut sse, _repo) = start().await;
    assert!(
        chromium_processes(server.data.path()).is_empty(),
        "started lazily"
    );
    let model = format!("codebolt:{}", fixture("browser").display());
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "browse", "prompt": url, "model": model}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let (got, events) = said(&mut sse, "browsed:").await;

    assert_eq!(got["went"], url.as_str(), "{got}");
    let md = got["markdown"].as_str().unwrap();
    assert!(md.contains("# Byre test page"), "{md}");
    assert!(md.contains("Not clicked yet."), "{md}");
    assert!(
        got["elements"].as_array().unwrap().contains(&json!("go")),
        "{got}"
    );
    assert_eq!(got["clicked"], true, "{got}");
    let after = got["after"].as_str().unwrap();
    assert!(after.contains("Clicked! The page changed."), "{after}");
    assert!(!after.contains("Not clicked yet."), "{after}");
    // The screenshot reaches the agent inline and is stored as a PNG blob.
    assert!(got["inline"].as_u64().unwrap() > 1000, "{got}");
    let blob_id = got["blobId"].as_str().expect("blobId");
    assert_png_blob(&api, blob_id).await;
    // Off the allow-list: refused, and the page did not move.
    assert_eq!(got["off"]["success"], false, "{got}");
    assert!(
        got["off"]["error"].as_str().unwrap().contains("allow-list"),
        "{got}"
    );
    assert_eq!(got["still"], url.as_str(), "{got}");
    assert!(
        !chromium_processes(server.data.path()).is_empty(),
        "Chromium runs"
    );

    // Each action is a logged tool call; the screenshot's result names its blob, not its bytes.
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e.data["kind"] == "tool.call")
        .filter_map(|e| e.data["payload"]["name"].as_str())
        .collect();
    for name in [
        "browserEvent/newPage",
        "browserEvent/goToPage",
        "browserEvent/getMarkdown",
        "browserEvent/click",
        "browserEvent/screenshot",
    ] {
        assert!(calls.contains(&name), "{name} in {calls:?}");
    }
    let shot_result = events
        .iter()
        .find(|e| {
            e.data["kind"] == "tool.result"
                && e.data["payload"]["output"]
                    .as_str()
                    .is_some_and(|o| o.contains(&format!("blob:{blob_id}")))
        })
        .expect("the screenshot's tool.result names its blob");
    let logged = shot_result.data.to_string();
    assert!(!logged.contains("iVBORw0KGgo"), "no inline PNG in the log");

    // The web UI shows the screenshot in the transcript, as an image that loaded.
    let b = crate::browser::Browser::open(&server.url).await;
    b.goto(&format!("/tasks/{task_id}")).await;
    let width = b
        .wait_js(
            "the screenshot in the transcript",
            &format!(
                "(() => {{ const i = document.querySelector('[data-testid=item-tool-call] img[src=\"/api/blobs/{blob_id}\"]'); return i && i.complete && i.naturalWidth; }})()"
            ),
        )
        .await;
    assert_eq!(width, 1280, "the PNG's width");
    b.close().await;

    // The session ends (the task is discarded): its browser goes with it.
    let r = api.call("discardTask", &[&task_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    sse.until("the agent's process exits", |e| {
        e.data["kind"] == "session.process_exited" && e.data["task_id"] == task_id.as_str()
    })
    .await;
    let left = chromium_gone(server.data.path()).await;
    assert!(left.is_empty(), "Chromium processes left: {left:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_v2_frames_drive_the_browser_and_crawler_and_the_browser_ends_with_byre() {
    // 127.0.0.2 is loopback but not on the default list (its port is no preview port).
    let elsewhere = serve_on("127.0.0.2", None).await;
    let url = serve_on("127.0.0.1", Some(elsewhere)).await;
    let (server, api, project_id, mut sse, _repo) = start().await;
    let model = format!("codebolt:{}", fixture("browser-raw").display());
    api.create_task_with(
        &project_id,
        json!({"title": "browse raw", "prompt": url, "model": model}),
    )
    .await;
    let (got, _) = said(&mut sse, "raw:").await;
    for (name, ty) in [
        ("newPage", "newPageResponse"),
        ("goToPage", "goToPageResponse"),
        ("markdown", "getMarkdownResponse"),
        ("click", "clickResponse"),
        ("html", "htmlReceived"),
        ("screenshot", "screenshotResponse"),
        ("info", "getBrowserInfoResponse"),
        ("off", "goToPageResponse"),
        ("crawlerClick", "crawlResponse"),
        ("after", "extractTextResponse"),
    ] {
        assert_eq!(got[name]["type"], ty, "{name}: {}", got[name]);
    }
    assert!(got["markdown"]["markdown"]
        .as_str()
        .unwrap()
        .contains("# Byre test page"));
    assert!(got["html"]["htmlResponse"]
        .as_str()
        .unwrap()
        .contains("Clicked! The page changed."));
    assert_eq!(got["info"]["info"]["width"], 1280, "{}", got["info"]);
    assert_eq!(got["off"]["success"], false);
    // A redirect off the list is refused too, and the page is blanked.
    assert_eq!(got["redirect"]["success"], false, "{}", got["redirect"]);
    assert!(
        got["redirect"]["error"]
            .as_str()
            .unwrap()
            .contains("allow-list"),
        "{}",
        got["redirect"]
    );
    assert_eq!(got["blanked"]["url"], "about:blank", "{}", got["blanked"]);
    // The crawler's fire-and-forget goToPage loaded the page afresh before its click.
    assert_eq!(
        got["crawlerClick"]["success"], true,
        "{}",
        got["crawlerClick"]
    );
    assert!(got["after"]["text"]
        .as_str()
        .unwrap()
        .contains("Clicked! The page changed."));
    let blob_id = got["screenshot"]["payload"]["blobId"].as_str().unwrap();
    assert_png_blob(&api, blob_id).await;

    // byre stops with the agent still connected: no Chromium is left.
    let data = server.data.path().to_owned();
    assert!(!chromium_processes(&data).is_empty(), "Chromium runs");
    let dir = server.stop().await;
    let left = chromium_gone(dir.path()).await;
    assert!(left.is_empty(), "Chromium processes left: {left:?}");
    drop(data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_a_killed_byre_left_is_ended_when_byre_starts_again() {
    let url = serve_page().await;
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let chromium = tokio::task::spawn_blocking(|| crate::browser::programs().chromium)
        .await
        .unwrap();
    let data = TempDir::new().unwrap();
    let env = [
        ("NODE_PATH", modules.to_str().unwrap()),
        ("BYRE_CHROMIUM", chromium.to_str().unwrap()),
    ];
    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let api = Api::for_url(&server.url);
    let repo = crate::helpers::make_repo("basic");
    let project = api.create_project("basic", repo.path()).await;
    let mut sse = api.events(&[], None).await;
    let model = format!("codebolt:{}", fixture("browser-raw").display());
    api.create_task_with(
        project["id"].as_str().unwrap(),
        json!({"title": "browse raw", "prompt": url, "model": model}),
    )
    .await;
    let (got, _) = said(&mut sse, "raw:").await;
    assert_eq!(got["goToPage"]["success"], true, "{got}");
    server.kill_9();
    // Nothing ended the browser: its processes outlive the killed server...
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = chromium_processes(data.path());
    assert!(!left.is_empty(), "Chromium runs after kill -9");

    // ...until byre starts again on the same data: it ends them before it serves (their
    // exits may still be settling when it answers).
    let server = crate::process::ServeProcess::start_with_env(data.path(), &env);
    let running = |p: &i32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            // A zombie (exited, not yet reaped by its new parent) runs nothing.
            s.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
        })
    };
    let mut alive: Vec<i32> = left.clone();
    for _ in 0..300 {
        alive.retain(running);
        if alive.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(alive.is_empty(), "stale Chromium processes: {alive:?}");
    assert_eq!(server.terminate(), Some(0), "graceful stop");
    let left = chromium_gone(data.path()).await;
    assert!(
        left.is_empty(),
        "Chromium processes left after the stop: {left:?}"
    );
}
