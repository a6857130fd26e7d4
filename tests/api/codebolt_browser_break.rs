//! Trying to break byre's browser with raw v2 frames (`fixtures/codebolt/browser-break`): a
//! click on a missing element and a malformed selector, URLs off the allow-list in disguise,
//! a huge page, and two agents' sessions that must not share cookies.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{local_ada, Sse, SseEvent, TestServer};

/// A page's size past every frame limit on the way (CDP's and the agent endpoint's 16 MiB).
const HUGE: usize = 8 << 20;

const COOKIE_PAGE: &str = "<!doctype html><title>cookie</title><body><script>\
document.write('cookie=[' + document.cookie + ']'); document.cookie = 'seen=1; path=/';\
</script></body>";

/// Serves `/page`, `/cookie` and `/huge` on a loopback port; its base URL.
async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = if buf.starts_with(b"GET /cookie") {
                    COOKIE_PAGE.to_owned()
                } else if buf.starts_with(b"GET /huge") {
                    let p = "<p>all work and no play makes jack a dull boy</p>\n";
                    format!(
                        "<!doctype html><title>huge</title>{}",
                        p.repeat(HUGE / p.len())
                    )
                } else {
                    "<!doctype html><title>page</title><button id=\"go\">Go</button>".to_owned()
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(body.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

fn text_of(e: &SseEvent) -> &str {
    e.data["payload"]["text"].as_str().unwrap_or("")
}

/// The task's agent's "broke:" JSON. Its actions are many and slow on a loaded machine (each
/// may take up to byre's 30 s), so the wait is long and counts no time between events.
async fn broke(sse: &mut Sse, task_id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let e = sse
            .next(left)
            .await
            .unwrap_or_else(|| panic!("no \"broke:\" from {task_id}"));
        let t = text_of(&e);
        if e.data["kind"] != "agent.text" || e.data["task_id"] != task_id {
            continue;
        }
        if let Some(json) = t.strip_prefix("broke:") {
            return serde_json::from_str(json.trim()).expect(t);
        }
        assert!(!t.starts_with("agent error"), "the agent failed: {t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disguised_urls_missing_elements_huge_pages_and_cookies_across_sessions() {
    let base = serve().await;
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    let chromium = tokio::task::spawn_blocking(|| crate::browser::programs().chromium)
        .await
        .unwrap();
    let server =
        TestServer::spawn_configured(tempfile::TempDir::new().unwrap(), local_ada(), move |c| {
            c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())];
            c.chromium_bin = Some(chromium);
        })
        .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let model = format!(
        "codebolt:{}/fixtures/codebolt/browser-break",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut runs = Vec::new();
    for title in ["break one", "break two"] {
        let task = api
            .create_task_with(
                &project_id,
                json!({"title": title, "prompt": base, "model": model}),
            )
            .await;
        let task_id = task["id"].as_str().unwrap().to_owned();
        runs.push(broke(&mut sse, &task_id).await);
    }
    let got = &runs[0];
    assert_eq!(got["page"]["success"], true, "{}", got["page"]);
    for name in ["missing", "badSelector"] {
        assert_eq!(got[name]["success"], false, "{name}: {}", got[name]);
        assert!(
            got[name]["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{name}: {}",
            got[name]
        );
    }
    for name in ["javascript", "data", "file", "dotted", "userinfo", "mapped"] {
        assert_eq!(got[name]["success"], false, "{name}: {}", got[name]);
        let why = got[name]["error"].as_str().unwrap_or("");
        assert!(
            why.contains("allow-list") || why.contains("http and https"),
            "{name}: {why}"
        );
    }
    assert_eq!(
        got["still"]["url"],
        format!("{base}/page"),
        "{}",
        got["still"]
    );
    // One session's cookie is its own: the second load sees it, the other session never does.
    for (i, run) in runs.iter().enumerate() {
        assert_eq!(run["cookieFirst"]["text"], "cookie=[]", "run {i}: {run}");
        assert_eq!(
            run["cookieAgain"]["text"], "cookie=[seen=1]",
            "run {i}: {run}"
        );
    }
    // A huge page loads and reads whole, or is refused with a reason; the browser still works.
    for name in ["huge", "hugeHtml"] {
        let r = &got[name];
        assert!(
            r["success"] == true || r["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{name}: {r}"
        );
    }
    if got["hugeHtml"]["success"] == true {
        assert!(got["hugeHtml"]["length"].as_u64().unwrap() > HUGE as u64);
    }
    assert_eq!(got["afterHuge"]["success"], true, "{}", got["afterHuge"]);
    server.stop().await;
}
