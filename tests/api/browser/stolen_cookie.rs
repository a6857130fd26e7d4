//! A sign-in cookie that reaches another port of byre's host (C5 of the break-it review):
//! cookies are scoped by host, not port, and `SameSite=Strict` counts another port of the
//! same host as the same site, so a task's preview server (a page an agent wrote, on
//! `127.0.0.1:PORT`) receives ada's `byre_session` when she opens it. Replayed, it must be
//! worth nothing: byre wants the sign-in's key, which only byre's own origin holds
//! (`localStorage` is scoped by port), on every request the cookie signs, REST, SSE and the
//! terminal socket alike (`docs/security.md`).

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::signin::sign_in;
use super::Browser;
use crate::helpers::{handshake_status, TestServer, TOKENS};

/// A "preview" on another loopback port: answers every request with a small page and keeps
/// the request heads it got (what a bob's agent would log).
struct Preview {
    url: String,
    heads: tokio::sync::mpsc::UnboundedReceiver<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Preview {
    async fn start() -> Preview {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, heads) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                    let page = "<!doctype html><title>my preview</title><h1>my preview</h1>";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                        page.len()
                    );
                    let _ = tcp.write_all(answer.as_bytes()).await;
                });
            }
        });
        Preview { url, heads, task }
    }

    /// The `byre_session` cookie of the first request that carried one.
    async fn stolen_cookie(&mut self) -> String {
        loop {
            let head = tokio::time::timeout(crate::helpers::WAIT, self.heads.recv())
                .await
                .expect("the preview was asked for its page")
                .expect("preview running");
            let cookie = head
                .lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("cookie:"))
                .flat_map(|l| l[7..].split(';'))
                .map(str::trim)
                .find_map(|c| c.strip_prefix("byre_session="));
            if let Some(value) = cookie {
                return value.to_owned();
            }
        }
    }
}

impl Drop for Preview {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The status of a replayed request with the stolen `cookie`, `csrf` as `X-Byre-CSRF` (when
/// `Some`) and `query` appended.
async fn replay(
    base: &str,
    method: reqwest::Method,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("Cookie", format!("byre_session={cookie}"));
    if let Some(csrf) = csrf {
        req = req.header("X-Byre-CSRF", csrf);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_cookie_another_port_received_is_worth_nothing_replayed() {
    let server = TestServer::spawn_team().await;
    let ada = server.api_as("ada");
    let (_repo, project) = ada.basic_project().await;
    let task = ada.create_task(&project, "Mine").await;
    let task_id = task["id"].as_str().unwrap();
    let mut preview = Preview::start().await;

    let b = Browser::open(&server.url).await;
    b.goto("/").await;
    b.wait_path("/signin?next=%2F").await;
    sign_in(&b, TOKENS[0].0).await;
    b.wait_path("/").await;
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;
    // Ada opens bob's task's preview, on another port of the same host.
    b.client.goto(&preview.url).await.expect("open the preview");
    let cookie = preview.stolen_cookie().await;
    assert_eq!(
        b.js("return JSON.stringify(localStorage);", vec![]).await,
        json!("{}"),
        "the preview's origin holds nothing of byre's"
    );

    let base = &server.url;
    let terminal = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
    for csrf in [Some("1"), Some("not-the-sign-in-key"), None] {
        let (status, body) =
            replay(base, reqwest::Method::GET, "/api/me", &cookie, csrf, None).await;
        assert_eq!(
            status, 401,
            "getMe on the stolen cookie, X-Byre-CSRF {csrf:?}: {body}"
        );
        assert!(body["message"].is_string(), "{body}");
        let (status, body) = replay(
            base,
            reqwest::Method::PUT,
            "/api/me",
            &cookie,
            csrf,
            Some(json!({"git_name": "owned by bob", "git_email": "bob@evil.example"})),
        )
        .await;
        assert_eq!(
            status, 401,
            "updateMe on the stolen cookie, X-Byre-CSRF {csrf:?}: {body}"
        );
        for path in [
            "/api/events?after=0".to_owned(),
            format!("/api/events?after=0&signin_key={}", csrf.unwrap_or("")),
            "/api/tasks".to_owned() + &format!("/{task_id}"),
        ] {
            let (status, body) =
                replay(base, reqwest::Method::GET, &path, &cookie, csrf, None).await;
            assert_eq!(
                status, 401,
                "{path} on the stolen cookie, X-Byre-CSRF {csrf:?}: {body}"
            );
        }
        let cookie_header = format!("byre_session={cookie}");
        let mut headers = vec![("Cookie", cookie_header.as_str())];
        headers.extend(csrf.map(|c| ("X-Byre-CSRF", c)));
        let status = handshake_status(base, &terminal, &headers).await;
        assert_eq!(
            status, 401,
            "the terminal on the stolen cookie, X-Byre-CSRF {csrf:?}"
        );
    }
    let me = ada.get_me().await;
    assert_ne!(me.body["git_name"], "owned by bob", "{:?}", me.body);

    // Back on byre, ada's own page goes on working with the same cookie.
    b.goto("/").await;
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;
    let who = b.testid("signed-in-as", "").await.text().await.unwrap();
    assert!(who.contains("ada"), "{who}");
    b.close().await;
}
