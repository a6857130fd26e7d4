//! The edge (DESIGN.md invariant 9, `http::edge`), attacked the way a hostile web page would:
//! a DNS-rebound page names its own host in `Host` and `Origin`, so every route refuses a
//! `Host` byre does not serve (421) and every socket an `Origin` of another site (403); a
//! form POST from a browser that sends no Fetch Metadata changes nothing. Tailscale mode is
//! reached as a browser reaches it, through (a stand-in for) `tailscale serve` in front of
//! byre's socket ([`crate::tailnet::FakeServe`]).

use std::collections::HashMap;

use byre::config::AuthMode;
use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{local_ada, TestServer, TOKENS};
use crate::tailnet::{serve_socket, FakeServe};

/// A mode's name, the mode, and the headers that make a request its user's (none behind
/// `tailscale serve`, which adds them itself).
type Mode = (&'static str, AuthMode, Vec<(&'static str, String)>);

/// The three modes, each with the headers that make a request its user's.
fn modes() -> Vec<Mode> {
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
        ("tailscale", AuthMode::Tailscale, vec![]),
    ]
}

/// A server of a mode and where a browser reaches it: its TCP port, or in tailscale mode
/// `tailscale serve` (for ada) in front of its socket, whose address is then one of byre's
/// public names, as the tailnet name is.
struct Front {
    server: TestServer,
    /// The base URL requests go to.
    base: String,
    /// The `Host` a browser sends there (`host:port`).
    host: String,
    _serve: Option<FakeServe>,
}

/// A server of `auth` serving the public names `public` besides, and its [`Front`].
async fn front(auth: AuthMode, public: &[&str]) -> Front {
    let tailscale = matches!(auth, AuthMode::Tailscale);
    let (listener, name) = FakeServe::bind();
    let mut names: Vec<String> = public.iter().map(|p| p.to_string()).collect();
    if tailscale {
        names.push(name.clone());
    }
    let server = TestServer::spawn_configured(TempDir::new().expect("temp dir"), auth, |c| {
        c.public_hosts = names
    })
    .await;
    if tailscale {
        let serve = FakeServe::start(
            listener,
            serve_socket(server.data.path()),
            "ada@example.com",
        );
        Front {
            base: serve.url.clone(),
            host: name,
            server,
            _serve: Some(serve),
        }
    } else {
        let host = server.url.trim_start_matches("http://").to_owned();
        Front {
            base: server.url.clone(),
            host,
            server,
            _serve: None,
        }
    }
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

/// A plain request to `base` + `path` with `Host: host` and the mode's credentials.
async fn get_with_host(
    base: &str,
    creds: &[(&str, String)],
    path: &str,
    host: &str,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("Host", host);
    for (n, v) in creds {
        req = req.header(*n, v);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

/// A WebSocket handshake to `base` + `path` with the given `Host` and `Origin` (when
/// `Some`) and the mode's credentials; the status byre answered (101 when it opened).
async fn socket_status(
    base: &str,
    creds: &[(&str, String)],
    path: &str,
    host: &str,
    origin: Option<&str>,
) -> u16 {
    let origin: Vec<(&str, &str)> = origin.map(|o| ("Origin", o)).into_iter().collect();
    socket_status_with(base, creds, path, host, &origin).await
}

/// A project and task made through the API at `base` as the mode's user.
async fn a_task(base: &str, creds: &[(&str, String)]) -> (TempDir, String) {
    let mut api = crate::helpers::Api::for_url(base);
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
        let f = front(auth, &["byre.tail1234.ts.net"]).await;
        let port = port_of(&f.base);
        let (_repo, task_id) = a_task(&f.base, &creds).await;
        let rebound = format!("rebind.attacker.example:{port}");

        // Loopback names on byre's TCP port; behind tailscale serve, only its public names.
        let served = if mode == "tailscale" {
            vec![f.host.clone(), "byre.tail1234.ts.net".to_owned()]
        } else {
            vec![
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
                "byre.tail1234.ts.net".to_owned(),
            ]
        };
        for host in served {
            let (status, body) = get_with_host(&f.base, &creds, "/api/me", &host).await;
            assert_eq!(status, 200, "{mode}: getMe with Host {host}: {body}");
        }

        for path in ["/api/me", "/api/events?after=0", "/", "/api/status"] {
            let (status, body) = get_with_host(&f.base, &creds, path, &rebound).await;
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
                socket_status(&f.base, &creds, &path, &rebound, Some(&rebound_origin)).await;
            assert_eq!(status, 421, "{mode}: {path} with a rebound Host");
        }
        // The same terminal opens when the page is byre's own.
        let own = format!("http://{}", f.host);
        let path = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
        let status = socket_status(&f.base, &creds, &path, &f.host, Some(&own)).await;
        assert_eq!(
            status, 101,
            "{mode}: the terminal opens from byre's own page"
        );
        f.server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_opens_no_socket_and_changes_nothing() {
    for (mode, auth, creds) in modes() {
        let f = front(auth, &[]).await;
        let host = f.host.clone();
        let (_repo, task_id) = a_task(&f.base, &creds).await;
        for path in [
            format!("/api/tasks/{task_id}/terminal?cols=80&rows=24"),
            "/api/clients/connect".to_owned(),
            "/codebolt?token=x".to_owned(),
        ] {
            for origin in ["http://evil.example", "http://localhost:1", "null-ish://x"] {
                let status = socket_status(&f.base, &creds, &path, &host, Some(origin)).await;
                assert_eq!(status, 403, "{mode}: {path} from Origin {origin}");
            }
        }
        // A JSON request the page sent after a preflight it never got, or a simple one.
        let mut req = reqwest::Client::new()
            .post(format!("{}/api/tasks/{task_id}/discard", f.base))
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
            get_with_host(&f.base, &creds, &format!("/api/tasks/{task_id}"), &host).await;
        assert_ne!(
            task["state"], "discarding",
            "{mode}: the task is untouched: {task}"
        );
        f.server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_post_from_a_browser_without_fetch_metadata_discards_nothing() {
    let server = TestServer::spawn().await;
    let (_repo, task_id) = a_task(&server.url, &[]).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opaque_origin_opens_no_socket_in_any_mode() {
    // A sandboxed frame of any site, a `file://` or `data:` page: Chromium names its origin
    // `null` on the handshake. A socket is a GET, so no state-change rule stops it; in local
    // mode the terminal needs no credentials at all, so `null` counted as "no Origin" was a
    // shell for any page that wraps itself in `<iframe sandbox="allow-scripts">`.
    for (mode, auth, creds) in modes() {
        let f = front(auth, &[]).await;
        let host = f.host.clone();
        let (_repo, task_id) = a_task(&f.base, &creds).await;
        for path in [
            format!("/api/tasks/{task_id}/terminal?cols=80&rows=24"),
            "/api/clients/connect".to_owned(),
            "/codebolt?token=x".to_owned(),
        ] {
            for origin in ["null", "NULL", "file://"] {
                let status = socket_status(&f.base, &creds, &path, &host, Some(origin)).await;
                assert_eq!(status, 403, "{mode}: {path} from Origin {origin}");
            }
        }
        // A handshake the browser marks as another site's is refused whatever its Origin.
        let path = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
        let status = socket_status_with(
            &f.base,
            &creds,
            &path,
            &host,
            &[("Sec-Fetch-Site", "cross-site")],
        )
        .await;
        assert_eq!(status, 403, "{mode}: a cross-site handshake");
        // byre's own page still opens it.
        let own = format!("http://{host}");
        let status = socket_status(&f.base, &creds, &path, &host, Some(&own)).await;
        assert_eq!(
            status, 101,
            "{mode}: the terminal opens from byre's own page"
        );
        f.server.stop().await;
    }
}

/// A WebSocket handshake as [`socket_status`], with `extra` headers instead of an `Origin`.
async fn socket_status_with(
    base: &str,
    creds: &[(&str, String)],
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
) -> u16 {
    let mut headers = vec![("Host", host), ("Byre-Host", "laptop")];
    headers.extend(creds.iter().map(|(n, v)| (*n, v.as_str())));
    headers.extend(extra.iter().copied());
    crate::helpers::handshake_status(base, path, &headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_on_every_address_trusts_no_other_machine_s_page() {
    // On 0.0.0.0 any IP literal with the listen port is a Host byre serves (a literal cannot
    // be rebound), but an Origin of some other machine's address on that port is another
    // site: only the address the request itself went to is the page's own.
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("bind every address");
    let server = TestServer::spawn_listening(
        listener,
        TempDir::new().expect("temp dir"),
        AuthMode::Token { tokens },
        |_| {},
    )
    .await;
    let port = port_of(&server.url);
    let creds = vec![("Authorization", format!("Bearer {}", TOKENS[0].0))];
    let host = format!("127.0.0.1:{port}");
    let (_repo, task_id) = a_task(&server.url, &creds).await;
    let path = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
    let foreign = format!("http://203.0.113.9:{port}");
    let status = socket_status(&server.url, &creds, &path, &host, Some(&foreign)).await;
    assert_eq!(status, 403, "a page of another machine on the same port");
    let own = format!("http://{host}");
    let status = socket_status(&server.url, &creds, &path, &host, Some(&own)).await;
    assert_eq!(
        status, 101,
        "the address the request went to is the page's own"
    );
    server.stop().await;
}

/// Sends `request` as written to the server and gives back the status of its answer.
async fn raw_status(server: &TestServer, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.url.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match conn.read(&mut buf).await.expect("read") {
            0 => break,
            n => answer.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&answer).to_string();
    line.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line for {request:?}: {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_headers_a_rebinding_page_or_a_confused_proxy_could_send_are_refused() {
    let server = TestServer::spawn().await;
    let port = port_of(&server.url);
    let get =
        |host_lines: &str| format!("GET /api/me HTTP/1.1\r\n{host_lines}Connection: close\r\n\r\n");
    for (host_lines, want) in [
        (format!("Host: localhost:{port}\r\n"), 200),
        (format!("Host: LocalHost:{port}\r\n"), 200),
        (format!("Host:  localhost:{port} \r\n"), 200),
        (format!("Host: localhost.:{port}\r\n"), 421),
        (format!("Host: localhost:{port}@evil.example\r\n"), 421),
        (format!("Host: evil.example@localhost:{port}\r\n"), 421),
        (format!("Host: localhost:{port}.evil.example\r\n"), 421),
        (format!("Host: [::ffff:127.0.0.1]:{port}\r\n"), 421),
        (
            format!("Host: 127.0.0.1:{port}\r\nHost: evil.example:{port}\r\n"),
            400,
        ),
        (
            format!("Host: evil.example:{port}\r\nHost: 127.0.0.1:{port}\r\n"),
            400,
        ),
        ("".to_owned(), 400),
    ] {
        let status = raw_status(&server, &get(&host_lines)).await;
        assert_eq!(status, want, "{host_lines:?}");
    }
    // HTTP/1.0 without Host, and an absolute-form target naming byre with a rebound Host.
    let status = raw_status(&server, "GET /api/me HTTP/1.0\r\n\r\n").await;
    assert_eq!(status, 400, "HTTP/1.0 without Host");
    let status = raw_status(
        &server,
        &format!("GET http://127.0.0.1:{port}/api/me HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 421, "absolute-form target with a rebound Host");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_preflight_is_ever_granted() {
    let server = TestServer::spawn().await;
    let (_repo, task_id) = a_task(&server.url, &[]).await;
    for origin in ["http://evil.example", "null"] {
        let resp = reqwest::Client::new()
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/api/tasks/{task_id}/discard", server.url),
            )
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "x-byre-csrf, content-type",
            )
            .send()
            .await
            .expect("preflight");
        let granted: Vec<String> = resp
            .headers()
            .keys()
            .map(|k| k.as_str().to_owned())
            .filter(|k| k.starts_with("access-control-"))
            .collect();
        assert!(
            granted.is_empty(),
            "{origin}: the preflight granted {granted:?}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_changing_route_takes_a_simple_request_without_proof_in_local_mode() {
    // What an old browser (no Fetch Metadata) sends for another site's form, `text/plain`
    // fetch or beacon: no Origin, or `Origin: null` after a cross-site redirect; no Referer
    // (`referrerpolicy=no-referrer`). Every class of state change refuses it before its handler.
    let server = TestServer::spawn().await;
    let (_repo, task_id) = a_task(&server.url, &[]).await;
    let before = server
        .api()
        .call("getTask", &[&task_id], &[], None)
        .await
        .body;
    let client = reqwest::Client::new();
    for path in [
        format!("/api/tasks/{task_id}/discard"),
        format!("/api/tasks/{task_id}/merge"),
        "/api/sessions/s-1/messages".to_owned(),
        "/api/inbox/responses".to_owned(),
        "/api/me/lead/messages".to_owned(),
        "/auth/signout".to_owned(),
        "/auth/signin".to_owned(),
        "/api/blobs".to_owned(),
        "/internal/mcp/tools/finish".to_owned(),
    ] {
        for origin in [None, Some("null")] {
            for (ct, body) in [
                (Some("text/plain;charset=UTF-8"), "{\"text\":\"hi\"}"),
                (Some("application/x-www-form-urlencoded"), "a=b"),
                (None, ""),
            ] {
                let mut req = client.post(format!("{}{path}", server.url)).body(body);
                if let Some(ct) = ct {
                    req = req.header("Content-Type", ct);
                }
                if let Some(o) = origin {
                    req = req.header("Origin", o);
                }
                let status = req.send().await.expect("request").status().as_u16();
                assert_eq!(status, 403, "{path} {origin:?} {ct:?}");
            }
        }
    }
    let after = server
        .api()
        .call("getTask", &[&task_id], &[], None)
        .await
        .body;
    assert_eq!(after["state"], before["state"], "{after}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_preview_on_another_port_of_the_tailnet_name_is_not_byre() {
    // In tailscale mode a task's preview is published on `https://NAME:PORT`: a page the
    // task's agent wrote. `tailscale serve` adds the user's identity to what that page sends
    // to byre on `https://NAME`, so were the name served on any port, the page would be
    // byre's own: a terminal, and (in a browser without Fetch Metadata) any form post.
    let name = "byre.tail1234.ts.net";
    let f = front(AuthMode::Tailscale, &[name]).await;
    let creds = vec![];
    let (_repo, task_id) = a_task(&f.base, &creds).await;
    let preview = format!("https://{name}:5173");
    let path = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
    let status = socket_status(&f.base, &creds, &path, name, Some(&preview)).await;
    assert_eq!(status, 403, "the preview's page opens no terminal");
    let resp = reqwest::Client::new()
        .post(format!("{}/api/tasks/{task_id}/discard", f.base))
        .header("Host", name)
        .header("Origin", &preview)
        .header("Content-Type", "text/plain")
        .body("x")
        .send()
        .await
        .expect("request");
    assert_eq!(
        resp.status().as_u16(),
        403,
        "the preview's form discards nothing"
    );
    // byre's own page on the name still opens it.
    let own = format!("https://{name}");
    let status = socket_status(&f.base, &creds, &path, name, Some(&own)).await;
    assert_eq!(status, 101, "byre's own page on the tailnet name");
    f.server.stop().await;
}
