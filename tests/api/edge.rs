//! The edge (DESIGN.md invariant 9, `http::edge`), attacked the way a hostile web page would:
//! a DNS-rebound page names its own host in `Host` and `Origin`, so every route refuses a
//! `Host` byre does not serve (421) and every socket an `Origin` of another site (403); a
//! form POST from a browser that sends no Fetch Metadata changes nothing.

use std::collections::HashMap;

use byre::config::AuthMode;
use serde_json::Value;
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::helpers::{local_ada, TestServer, TOKENS};

/// The three modes, each with the headers that make a request its user's.
fn modes() -> Vec<(&'static str, AuthMode, Vec<(&'static str, String)>)> {
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    vec![
        ("local", local_ada(), vec![]),
        (
            "token",
            AuthMode::Token { tokens },
            vec![("Authorization", format!("Bearer {}", TOKENS[0].0))],
        ),
        (
            "tailscale",
            AuthMode::Tailscale,
            vec![("Tailscale-User-Login", "ada@example.com".to_owned())],
        ),
    ]
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

/// A plain request to `path` with `Host: host` and the mode's credentials.
async fn get_with_host(
    server: &TestServer,
    creds: &[(&str, String)],
    path: &str,
    host: &str,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .header("Host", host);
    for (n, v) in creds {
        req = req.header(*n, v);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

/// A WebSocket handshake to `path` with the given `Host` and `Origin` (when `Some`); the
/// status byre answered (101 when it opened).
async fn socket_status(
    server: &TestServer,
    creds: &[(&str, String)],
    path: &str,
    host: &str,
    origin: Option<&str>,
) -> u16 {
    let url = format!("{}{path}", server.url.replacen("http://", "ws://", 1));
    let mut req = url.into_client_request().expect("ws request");
    let headers = req.headers_mut();
    headers.insert("Host", HeaderValue::from_str(host).expect("host"));
    if let Some(origin) = origin {
        headers.insert("Origin", HeaderValue::from_str(origin).expect("origin"));
    }
    for (n, v) in creds {
        let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(n.as_bytes())
            .expect("header name");
        headers.insert(name, HeaderValue::from_str(v).expect("header"));
    }
    headers.insert("Byre-Host", HeaderValue::from_static("laptop"));
    match tokio_tungstenite::connect_async(req).await {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("{path}: the handshake failed without an answer: {e}"),
    }
}

/// A project and task made through the API as the mode's user.
async fn a_task(server: &TestServer, creds: &[(&str, String)]) -> (TempDir, String) {
    let mut api = crate::helpers::Api::for_url(&server.url);
    for (n, v) in creds {
        api = api.with_header(n, v);
    }
    let (repo, project) = api.basic_project().await;
    let task = api.create_task(&project, "Edge").await;
    (repo, task["id"].as_str().expect("task id").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_host_is_refused_on_rest_sse_and_every_socket_in_every_mode() {
    for (mode, auth, creds) in modes() {
        let server = TestServer::spawn_configured(TempDir::new().expect("temp dir"), auth, |c| {
            c.public_hosts = vec!["byre.tail1234.ts.net".into()]
        })
        .await;
        let port = port_of(&server.url);
        let (_repo, task_id) = a_task(&server, &creds).await;
        let rebound = format!("rebind.attacker.example:{port}");

        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
            "byre.tail1234.ts.net".to_owned(),
        ] {
            let (status, body) = get_with_host(&server, &creds, "/api/me", &host).await;
            assert_eq!(status, 200, "{mode}: getMe with Host {host}: {body}");
        }

        for path in ["/api/me", "/api/events?after=0", "/", "/api/status"] {
            let (status, body) = get_with_host(&server, &creds, path, &rebound).await;
            assert_eq!(status, 421, "{mode}: {path} with a rebound Host: {body}");
            assert!(
                body["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&rebound)),
                "{mode}: {path}: the message names the host: {body}"
            );
        }
        // The page's own origin is the rebound one: no socket opens, whatever it sends.
        let rebound_origin = format!("http://{rebound}");
        for path in [
            format!("/api/tasks/{task_id}/terminal?cols=80&rows=24"),
            "/api/clients/connect".to_owned(),
            "/codebolt?token=x".to_owned(),
        ] {
            let status =
                socket_status(&server, &creds, &path, &rebound, Some(&rebound_origin)).await;
            assert_eq!(status, 421, "{mode}: {path} with a rebound Host");
        }
        // The same terminal opens when the page is byre's own.
        let own = format!("http://localhost:{port}");
        let path = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
        let status = socket_status(
            &server,
            &creds,
            &path,
            &format!("localhost:{port}"),
            Some(&own),
        )
        .await;
        assert_eq!(
            status, 101,
            "{mode}: the terminal opens from byre's own page"
        );
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_opens_no_socket_and_changes_nothing() {
    for (mode, auth, creds) in modes() {
        let server = TestServer::spawn_on(TempDir::new().expect("temp dir"), auth).await;
        let port = port_of(&server.url);
        let host = format!("127.0.0.1:{port}");
        let (_repo, task_id) = a_task(&server, &creds).await;
        for path in [
            format!("/api/tasks/{task_id}/terminal?cols=80&rows=24"),
            "/api/clients/connect".to_owned(),
            "/codebolt?token=x".to_owned(),
        ] {
            for origin in ["http://evil.example", "http://localhost:1", "null-ish://x"] {
                let status = socket_status(&server, &creds, &path, &host, Some(origin)).await;
                assert_eq!(status, 403, "{mode}: {path} from Origin {origin}");
            }
        }
        // A JSON request the page sent after a preflight it never got, or a simple one.
        let mut req = reqwest::Client::new()
            .post(format!("{}/api/tasks/{task_id}/discard", server.url))
            .header("Origin", "http://evil.example")
            .header("Content-Type", "application/json")
            .body("{}");
        for (n, v) in &creds {
            req = req.header(*n, v);
        }
        let resp = req.send().await.expect("request");
        assert_eq!(
            resp.status().as_u16(),
            403,
            "{mode}: discard from another site"
        );
        let (_, task) =
            get_with_host(&server, &creds, &format!("/api/tasks/{task_id}"), &host).await;
        assert_ne!(
            task["state"], "discarding",
            "{mode}: the task is untouched: {task}"
        );
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_post_from_a_browser_without_fetch_metadata_discards_nothing() {
    let server = TestServer::spawn().await;
    let (_repo, task_id) = a_task(&server, &[]).await;
    let url = format!("{}/api/tasks/{task_id}/discard", server.url);
    let client = reqwest::Client::new();
    let api = server.api();
    let before = api.call("getTask", &[&task_id], &[], None).await.body["state"].clone();
    // What an old browser sends for a cross-site `<form method=post>`: a browser's
    // User-Agent, a simple content type, and neither Origin, Referer nor Sec-Fetch-Site.
    let simple: [(Option<&str>, &str); 4] = [
        (Some("application/x-www-form-urlencoded"), "reason=x"),
        (Some("multipart/form-data; boundary=b"), "--b--\r\n"),
        (Some("text/plain"), "{}"),
        (None, ""),
    ];
    for (content_type, body) in simple {
        let mut req = client
            .post(&url)
            .header("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/68.0")
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("Content-Type", ct);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let answer: Value = resp.json().await.expect("JSON error");
        assert_eq!(status, 403, "{content_type:?}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.contains("X-Byre-CSRF")),
            "the message says what to send: {answer}"
        );
    }
    // A Referer of another site proves nothing either.
    let resp = client
        .post(&url)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Referer", "http://evil.example/page")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 403);
    let task = api.call("getTask", &[&task_id], &[], None).await;
    assert_eq!(
        task.body["state"], before,
        "nothing was discarded: {:?}",
        task.body
    );
    // byre's own page (its Referer) and a non-browser client that says so both may.
    let resp = client
        .post(&url)
        .header("Referer", format!("{}/tasks/{task_id}", server.url))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 202, "byre's own page may discard");
    server.stop().await;
}
