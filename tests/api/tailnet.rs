//! Tailscale mode attacked from inside (C4 of the break-it review, `docs/security.md`): an
//! agent shares the host's network, so a loopback TCP peer proves nothing. byre believes
//! `Tailscale-User-*` only on the Unix socket `tailscale serve` forwards to
//! (`DATA/tailscale/byre.sock`, never bound into a sandbox); on its TCP port the same headers
//! get 401. The real Claude Code (fake model `y_escape`) runs `curl` as "bob" from ada's task
//! and gets nothing; through the socket (a stand-in for `tailscale serve`, [`FakeServe`]) the
//! headers work.

use std::path::{Path, PathBuf};

use byre::config::AuthMode;
use byre_fake_models::FakeAnthropic;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::claude::TURN_WAIT;
use crate::helpers::{fake_claude_env, handshake_status, until_kind, Api, TestServer};

/// Where byre listens for `tailscale serve` in tailscale mode (docs/operating.md).
pub fn serve_socket(data: &Path) -> PathBuf {
    data.join("tailscale").join("byre.sock")
}

/// A stand-in for `tailscale serve --bg unix:SOCKET` on one tailnet user's behalf: a TCP
/// listener on loopback that forwards each HTTP/1.1 request to byre's Unix socket the way
/// tailscale does (`ipn/ipnlocal/serve.go`): the browser's `Host` moves to
/// `X-Forwarded-Host`, `Host` becomes `localhost`, `X-Forwarded-For` names the tailnet peer,
/// and any `Tailscale-User-*` the client sent is replaced by the user's own. Upgrades
/// (WebSockets) are carried through as bytes. Nothing answers when the socket is missing: the
/// client gets `502`.
pub struct FakeServe {
    /// `http://127.0.0.1:PORT`, what a tailnet browser would reach as `https://NAME`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServe {
    /// A listener on a free loopback port, and its `host:port` (to give byre as
    /// `--public-host` before it starts, as the tailnet name is given).
    pub fn bind() -> (std::net::TcpListener, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let host = listener.local_addr().expect("addr").to_string();
        (listener, host)
    }

    /// Serves `listener` as `login`'s `tailscale serve` in front of `socket`.
    pub fn start(listener: std::net::TcpListener, socket: PathBuf, login: &str) -> FakeServe {
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let login = login.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(forward(tcp, socket.clone(), login.clone()));
            }
        });
        FakeServe { url, task }
    }

    /// An [`Api`] that calls byre through this `tailscale serve`.
    pub fn api(&self) -> Api {
        Api::for_url(&self.url)
    }
}

impl Drop for FakeServe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection: requests rewritten one by one, answers copied back as they are.
async fn forward(tcp: tokio::net::TcpStream, socket: PathBuf, login: String) {
    let (client_read, mut client_write) = tcp.into_split();
    let unix = match tokio::net::UnixStream::connect(&socket).await {
        Ok(u) => u,
        Err(_) => {
            let _ = client_write
                .write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            return;
        }
    };
    let (mut byre_read, mut byre_write) = unix.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut byre_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut client = BufReader::new(client_read);
    loop {
        let mut head = Vec::new();
        let mut host = String::new();
        let mut body_bytes: u64 = 0;
        let mut raw_after = false;
        let mut first = true;
        loop {
            let mut line = String::new();
            match client.read_line(&mut line).await {
                Ok(0) | Err(_) => {
                    let _ = byre_write.shutdown().await;
                    let _ = back.await;
                    return;
                }
                Ok(_) => {}
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            if first {
                first = false;
                head.extend_from_slice(line.as_bytes());
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
            let name_lower = name.trim().to_ascii_lowercase();
            let value = value.trim().to_owned();
            match name_lower.as_str() {
                "host" => {
                    host = value;
                    continue;
                }
                "x-forwarded-host" | "x-forwarded-for" | "x-forwarded-proto" => continue,
                n if n.starts_with("tailscale-") => continue,
                "content-length" => body_bytes = value.parse().unwrap_or(0),
                "transfer-encoding" | "upgrade" => raw_after = true,
                _ => {}
            }
            head.extend_from_slice(line.as_bytes());
        }
        let added = format!(
            "Host: localhost\r\nX-Forwarded-Host: {host}\r\nX-Forwarded-For: 100.64.0.7\r\nTailscale-User-Login: {login}\r\nTailscale-User-Name: {login}\r\n\r\n"
        );
        head.extend_from_slice(added.as_bytes());
        if byre_write.write_all(&head).await.is_err() {
            return;
        }
        if raw_after {
            let _ = tokio::io::copy(&mut client, &mut byre_write).await;
            let _ = byre_write.shutdown().await;
            let _ = back.await;
            return;
        }
        let mut body = (&mut client).take(body_bytes);
        if tokio::io::copy(&mut body, &mut byre_write).await.is_err() {
            return;
        }
    }
}

/// A tailscale-mode server whose Claude Code talks to the fake model `y_escape`, behind a
/// [`FakeServe`] for ada; its TCP port is what agents reach.
struct Tailnet {
    server: TestServer,
    claude: FakeAnthropic,
    ada: FakeServe,
    /// The fake serve's `host:port`, byre's public name here.
    name: String,
}

async fn tailnet(with_agents: bool) -> Tailnet {
    let claude = FakeAnthropic::fixture("y_escape").await.expect("fake API");
    let claude_bin = if with_agents {
        Some(
            tokio::task::spawn_blocking(byre_fake_models::claude_bin)
                .await
                .expect("install Claude Code"),
        )
    } else {
        None
    };
    let url = claude.url.clone();
    let (listener, name) = FakeServe::bind();
    let public = name.clone();
    let server = TestServer::spawn_configured(
        TempDir::new().expect("data dir"),
        AuthMode::Tailscale,
        move |c| {
            c.public_hosts = vec![public];
            if let Some(bin) = claude_bin {
                c.claude_bin = Some(bin);
            }
            c.agent_env = fake_claude_env(&url);
        },
    )
    .await;
    let ada = FakeServe::start(
        listener,
        serve_socket(server.data.path()),
        "ada@example.com",
    );
    Tailnet {
        server,
        claude,
        ada,
        name,
    }
}

/// The status and JSON body of a GET on byre's TCP port with `headers`.
async fn get_tcp(server: &TestServer, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(format!("{}{path}", server.url));
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tailscale_headers_count_on_the_serve_socket_only_never_on_the_tcp_port() {
    let t = tailnet(false).await;
    let ada = t.ada.api();
    let (_repo, project) = ada.basic_project().await;
    let task = ada.create_task(&project, "Door").await;
    let task_id = task["id"].as_str().unwrap();
    let me = ada.get_me().await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["login"], "ada@example.com");

    // On the TCP port the headers are anyone's to send: they count for nothing.
    let claim = [("Tailscale-User-Login", "ada@example.com")];
    let port = t.server.url.rsplit(':').next().unwrap().to_owned();
    for host in [format!("127.0.0.1:{port}"), t.name.clone()] {
        let with_host = [claim[0], ("Host", host.as_str())];
        for path in ["/api/me", "/api/events?after=0", "/api/projects"] {
            let (status, body) = get_tcp(&t.server, path, &with_host).await;
            assert_eq!(status, 401, "{path} on TCP with Host {host}: {body}");
            assert!(body["message"].is_string(), "{body}");
        }
    }
    let terminal = format!("/api/tasks/{task_id}/terminal?cols=80&rows=24");
    for path in [terminal.as_str(), "/api/clients/connect"] {
        let status =
            handshake_status(&t.server.url, path, &[claim[0], ("Byre-Host", "laptop")]).await;
        assert_eq!(status, 401, "{path} on TCP");
        let status = handshake_status(&t.ada.url, path, &[("Byre-Host", "laptop")]).await;
        assert_eq!(status, 101, "{path} through tailscale serve");
    }

    // On the socket, only the public names are served: loopback names are the TCP door's.
    for host in [
        format!("localhost:{port}"),
        "rebind.attacker.example".to_owned(),
    ] {
        let resp = reqwest::Client::new()
            .get(format!("{}/api/me", t.ada.url))
            .header("Host", &host)
            .send()
            .await
            .expect("request");
        assert_eq!(
            resp.status().as_u16(),
            421,
            "Host {host} through tailscale serve"
        );
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["message"].as_str().unwrap().contains("tailnet name"),
            "{body}"
        );
    }

    // Only byre's user (and root, tailscaled) can reach the socket.
    let socket = serve_socket(t.server.data.path());
    use std::os::unix::fs::PermissionsExt;
    let dir_mode = std::fs::metadata(socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o077, 0, "the socket's directory is private");
    t.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_become_another_tailnet_user() {
    let t = tailnet(true).await;
    let ada = t.ada.api();
    let (_repo, project) = ada.basic_project().await;
    let mut sse = ada.events(&[], None).await;
    let task = ada
        .create_task_with(
            &project,
            json!({"title": "attacker", "prompt": "Say hello"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap();
    let session = ada.first_session_id(task_id).await;
    until_kind(&mut sse, "turn.ended", TURN_WAIT).await;

    let port = t.server.url.rsplit(':').next().unwrap().to_owned();
    let socket = serve_socket(t.server.data.path());
    let as_bob = "-H 'Tailscale-User-Login: bob@example.com' -H 'Tailscale-User-Name: Bob'";
    let script = format!(
        "code=$(curl -s -o me.json -w '%{{http_code}}' {as_bob} http://127.0.0.1:{port}/api/me)\n\
         echo \"ME-$code\"; grep -q 'bob@example.com' me.json && echo LEAK-me\n\
         code=$(curl -s -o /dev/null -w '%{{http_code}}' -X POST {as_bob} -H 'Content-Type: application/json' \
           -d '{{\"text\":\"hi from the agent as bob\"}}' http://127.0.0.1:{port}/api/me/lead/messages)\n\
         echo \"LEAD-$code\"\n\
         code=$(curl -s -o /dev/null -w '%{{http_code}}' -X PUT {as_bob} -H 'Content-Type: application/json' \
           -d '{{\"git_name\":\"pwned by agent\",\"git_email\":\"agent@evil.example\"}}' http://127.0.0.1:{port}/api/me)\n\
         echo \"PROFILE-$code\"\n\
         test -e '{socket}' && echo LEAK-socket-visible\n\
         curl -s --unix-socket '{socket}' -H 'X-Forwarded-Host: {name}' {as_bob} http://localhost/api/me \
           | grep -q 'bob@example.com' && echo LEAK-socket-me\n\
         echo SCRIPT-DONE\n",
        socket = socket.display(),
        name = t.name,
    );
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    std::fs::write(worktree.join("escape.sh"), script).unwrap();
    ada.send_message(&session, "Run the escape script").await;
    until_kind(&mut sse, "turn.ended", TURN_WAIT).await;

    let seen: String = t
        .claude
        .messages_requests()
        .iter()
        .filter_map(|r| r.body.as_ref().map(Value::to_string))
        .filter(|b| b.contains("SCRIPT-DONE"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(seen.contains("SCRIPT-DONE"), "the script ran: {seen}");
    assert!(!seen.contains("LEAK-"), "the agent became bob: {seen}");
    for marker in ["ME-401", "LEAD-401", "PROFILE-401"] {
        assert!(seen.contains(marker), "{marker} in {seen}");
    }

    // Bob, through his own tailscale serve, finds nothing done in his name.
    let (listener, _) = FakeServe::bind();
    let bob = FakeServe::start(listener, socket, "bob@example.com");
    let bob_api = bob.api().with_header("Host", &t.name);
    let leads = bob_api.call("listLeadSessions", &[], &[], None).await;
    assert_eq!(leads.status, 200, "{:?}", leads.body);
    assert_eq!(leads.body, json!([]), "no lead of bob's was started");
    let me = bob_api.get_me().await;
    assert_eq!(me.body["login"], "bob@example.com");
    assert_ne!(me.body["git_name"], "pwned by agent", "{:?}", me.body);
    t.server.stop().await;
}
