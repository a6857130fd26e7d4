//! A hostile page of another site, in real Chromium (with its own Fetch Metadata), against
//! byre in local mode — where no credential stands between a page and the API. The attacker's
//! site is a page server on `127.0.0.2`, another origin and another site than byre on
//! `127.0.0.1`. From its top-level page and from a sandboxed frame (whose origin is `null`) it
//! opens the task's terminal and sends every kind of request a page may send without a CORS
//! preflight (a form post, a `text/plain` fetch, a keep-alive one as `sendBeacon` sends) to
//! discard, merge, answer the inbox and sign out. None opens or changes anything.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Browser;
use crate::helpers::TestServer;

/// Serves `page` at every path of a listener on `127.0.0.2`; its base URL.
async fn attacker_site(page: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind 127.0.0.2");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let page = page.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(page.as_bytes()).await;
            });
        }
    });
    url
}

/// The attack, run in the attacker's page: `BYRE` and `TASK` are filled in.
const ATTACK: &str = r#"
const socket = (url) => new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => { ws.close(); resolve('open'); };
  ws.onerror = () => resolve('refused');
});
const term = BYRE.replace('http://', 'ws://') + '/api/tasks/' + TASK + '/terminal?cols=80&rows=24';
const targets = ['/api/tasks/' + TASK + '/discard', '/api/tasks/' + TASK + '/merge',
  '/api/inbox/responses', '/auth/signout', '/auth/signin'];
const results = { top: await socket(term), connect: await socket(BYRE.replace('http://', 'ws://') + '/api/clients/connect') };
// The same from a sandboxed frame: an opaque origin, `Origin: null`.
const frame = document.createElement('iframe');
frame.setAttribute('sandbox', 'allow-scripts');
const inner = `
  const socket = ${socket.toString()};
  (async () => {
    const out = { term: await socket(${JSON.stringify(term)}) };
    for (const t of ${JSON.stringify(targets)}) {
      await fetch(${JSON.stringify(BYRE)} + t, { method: 'POST', mode: 'no-cors', body: 'x' }).catch(() => {});
    }
    parent.postMessage(out, '*');
  })();`;
const fromFrame = new Promise((resolve) => window.addEventListener('message', (e) => resolve(e.data)));
frame.srcdoc = '<scr' + 'ipt>' + inner + '</scr' + 'ipt>';
document.body.appendChild(frame);
results.sandboxed = (await fromFrame).term;
for (const t of targets) {
  await fetch(BYRE + t, { method: 'POST', mode: 'no-cors', credentials: 'include', body: 'reason=x' }).catch(() => {});
  await fetch(BYRE + t, { method: 'POST', mode: 'no-cors', credentials: 'include', keepalive: true,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'token=x' }).catch(() => {});
  // A real form post, into a frame of its own.
  const sink = document.createElement('iframe');
  sink.name = 'sink' + targets.indexOf(t);
  document.body.appendChild(sink);
  const loaded = new Promise((resolve) => sink.addEventListener('load', resolve, { once: true }));
  const form = document.createElement('form');
  form.method = 'POST'; form.action = BYRE + t; form.target = sink.name;
  form.enctype = 'text/plain';
  const field = document.createElement('input');
  field.name = '{"answer":"yes","x'; field.value = '":1}';
  form.appendChild(field);
  document.body.appendChild(form);
  form.submit();
  await loaded;
}
return results;
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_opens_no_terminal_and_changes_nothing_in_local_mode() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    let task = api.create_task(&project, "Target").await;
    let task_id = task["id"].as_str().expect("id").to_owned();
    let before = api.call("getTask", &[&task_id], &[], None).await.body;

    let site = attacker_site("<!doctype html><title>innocent</title><body></body>".into()).await;
    let b = Browser::open(&server.url).await;
    b.client
        .goto(&format!("{site}/"))
        .await
        .expect("attacker page");
    let body = format!(
        "const BYRE = {}; const TASK = {};\n{ATTACK}",
        json!(server.url),
        json!(task_id)
    );
    let results = b.js_async(&body, vec![]).await;
    assert_eq!(
        results,
        json!({"top": "refused", "connect": "refused", "sandboxed": "refused"}),
        "no socket opens for another site's page"
    );
    let after = api.call("getTask", &[&task_id], &[], None).await.body;
    for field in ["state", "merge", "updated_at"] {
        assert_eq!(
            after.get(field),
            before.get(field),
            "{field}: the task is untouched: {after}"
        );
    }
    let me = api.call("getMe", &[], &[], None).await;
    assert_eq!(me.status, 200, "still signed in as the local user");
    b.close().await;
    server.stop().await;
}
