//! Token mode in a real browser: a page load goes to `/signin`, the form trades a token for
//! the session cookie and a sign-in key the page keeps in `localStorage`, the cookie works on
//! REST and on the page's `EventSource` only with that key, sign-out ends the session (and its
//! stream), and a second user signed in on the same browser sees none of the first one's
//! owner-only events. Behind `tailscale serve` the page needs no sign-in.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::Browser;
use crate::helpers::{TestServer, TOKENS, WAIT};
use crate::tailnet::{serve_socket, FakeServe};

/// Collects every event of a new `EventSource` on `/api/events` (with the sign-in key, as the
/// page's own opens it) into `window.__events`.
const OPEN_STREAM: &str = r#"
    window.__events = [];
    const key = localStorage.getItem('byre.signin_key');
    const es = new EventSource('/api/events?signin_key=' + encodeURIComponent(key));
    window.__es = es;
    es.onmessage = (m) => window.__events.push(JSON.parse(m.data));
"#;

/// Types `token` into the sign-in form and submits it.
pub(super) async fn sign_in(b: &Browser, token: &str) {
    let input = b.testid("signin-token", "").await;
    input.clear().await.expect("clear");
    input.send_keys(token).await.expect("type the token");
    b.testid("signin-submit", "")
        .await
        .click()
        .await
        .expect("submit");
}

/// `fetch` in the page, with the sign-in key the page keeps as `X-Byre-CSRF` when `key`;
/// `{status, body}`.
async fn fetch(b: &Browser, method: &str, path: &str, body: Option<Value>, key: bool) -> Value {
    b.js_async(
        r#"
        const [method, path, body, key] = args;
        const headers = { 'Content-Type': 'application/json' };
        if (key) headers['X-Byre-CSRF'] = localStorage.getItem('byre.signin_key');
        const init = { method, headers };
        if (body !== null) init.body = JSON.stringify(body);
        const res = await fetch(path, init);
        const text = await res.text();
        let parsed = text;
        try { parsed = JSON.parse(text); } catch (_) {}
        return { status: res.status, body: parsed };
        "#,
        vec![
            json!(method),
            json!(path),
            body.unwrap_or(Value::Null),
            json!(key),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_out_and_a_second_user_in_a_real_browser() {
    let server = TestServer::spawn_team().await;
    // Ada's owner-only events, made by a script with her bearer token.
    let ada_script = server.api_as("ada");
    for model in ["opus", "haiku"] {
        let r = ada_script
            .call(
                "updateDefaultModel",
                &[],
                &[],
                Some(json!({"model": model})),
            )
            .await;
        assert_eq!(r.status, 200);
    }

    let b = Browser::open(&server.url).await;
    // A page load without a session lands on the sign-in page, remembering where it went.
    b.goto("/inbox?x=1").await;
    b.wait_path("/signin?next=%2Finbox%3Fx%3D1").await;
    b.testid("signin-form", "").await;
    b.screenshots("signin").await;

    sign_in(&b, "not-a-real-token-at-all").await;
    let error = b.testid("signin-error", ":not([hidden])").await;
    assert_eq!(error.text().await.unwrap(), "unknown token");

    sign_in(&b, TOKENS[0].0).await;
    b.wait_path("/inbox?x=1").await;
    let cookie = b
        .client
        .get_named_cookie("byre_session")
        .await
        .expect("the session cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(format!("{:?}", cookie.same_site()), "Some(Strict)");
    assert_eq!(
        b.js("return document.cookie.includes('byre_session');", vec![])
            .await,
        json!(false),
        "HttpOnly: no script reads it"
    );

    // The page keeps the sign-in key, which the cookie needs on every request.
    let key = b
        .js("return localStorage.getItem('byre.signin_key');", vec![])
        .await;
    assert_eq!(key.as_str().map(str::len), Some(64), "{key}");
    let me = fetch(&b, "GET", "/api/me", None, true).await;
    assert_eq!(me["status"], 200);
    assert_eq!(me["body"]["login"], "ada");
    let alone = fetch(&b, "GET", "/api/me", None, false).await;
    assert_eq!(alone["status"], 401, "the cookie alone: {alone}");
    let refused = fetch(
        &b,
        "PUT",
        "/api/me/default-model",
        Some(json!({"model": "sneaky"})),
        false,
    )
    .await;
    assert_eq!(refused["status"], 401);
    assert!(
        refused["body"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Byre-CSRF"),
        "{refused}"
    );

    // SSE on the cookie: the page's EventSource gets the change made with the key.
    b.js(OPEN_STREAM, vec![]).await;
    let ok = fetch(
        &b,
        "PUT",
        "/api/me/default-model",
        Some(json!({"model": "from-the-page"})),
        true,
    )
    .await;
    assert_eq!(ok["status"], 200, "{ok}");
    b.wait_js(
        "the page's stream carries the change",
        "window.__events.some(e => e.payload && e.payload.model === 'from-the-page')",
    )
    .await;
    let models: Vec<Value> = b
        .js(
            "return window.__events.filter(e => e.kind === 'user.default_model_updated').map(e => e.payload.model);",
            vec![],
        )
        .await
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        models,
        [json!("opus"), json!("haiku"), json!("from-the-page")]
    );

    // getStatus lists the page as a client with the commit byre was built from.
    let status = ada_script.call("getStatus", &[], &[], None).await;
    let clients = status.body["clients"].as_array().unwrap();
    assert!(
        clients
            .iter()
            .any(|c| c["login"] == "ada" && c["commit"] == byre::BUILD_COMMIT),
        "{clients:?}"
    );

    // Sign-out: the cookie goes, the server forgets the session, the stream ends.
    let out = fetch(&b, "POST", "/auth/signout", None, true).await;
    assert_eq!(out["status"], 204);
    assert!(b.client.get_named_cookie("byre_session").await.is_err());
    b.wait_js(
        "the stream signed in by the ended session is closed",
        "window.__es.readyState === EventSource.CLOSED",
    )
    .await;
    let after = fetch(&b, "GET", "/api/me", None, true).await;
    assert_eq!(after["status"], 401);
    b.goto("/").await;
    b.wait_path("/signin?next=%2F").await;

    // Bob signs in on the same browser and reads the whole log from the start.
    sign_in(&b, TOKENS[1].0).await;
    b.wait_path("/").await;
    b.js(OPEN_STREAM, vec![]).await;
    let bobs = fetch(
        &b,
        "PUT",
        "/api/me/default-model",
        Some(json!({"model": "bobs-own"})),
        true,
    )
    .await;
    assert_eq!(bobs["status"], 200);
    b.wait_js(
        "bob's own change reaches his page",
        "window.__events.some(e => e.payload && e.payload.model === 'bobs-own')",
    )
    .await;
    let seen: Vec<Value> = b
        .js("return window.__events;", vec![])
        .await
        .as_array()
        .unwrap()
        .clone();
    let seen_seqs: BTreeSet<u64> = seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seen.iter().all(|e| e["owner"] != "ada"), "{seen:?}");
    // Ada's owner-only events are in the log (her own stream has them), and not in bob's.
    let mut ada_stream = ada_script.events(&[], None).await;
    let all = ada_stream
        .until("the last event", |e| {
            e.data["payload"]["model"] == "from-the-page"
        })
        .await;
    let adas: BTreeSet<u64> = all
        .iter()
        .filter(|e| e.data["owner"] == "ada")
        .map(|e| e.id.unwrap())
        .collect();
    assert_eq!(adas.len(), 3, "three model changes of ada's");
    assert!(seen_seqs.is_disjoint(&adas), "{seen_seqs:?} {adas:?}");
    assert_eq!(b.alert_text().await, None);

    // Bob signs out with the page's own control: the sign-in page, no cookie, no way back.
    b.goto("/").await;
    b.testid("sign-out", "").await.click().await.unwrap();
    b.wait_path("/signin").await;
    assert!(b.client.get_named_cookie("byre_session").await.is_err());
    assert_eq!(
        b.js("return localStorage.getItem('byre.signin_key');", vec![])
            .await,
        Value::Null,
        "the page dropped its key"
    );
    b.goto("/").await;
    b.wait_path("/signin?next=%2F").await;
    let _ = WAIT;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_tailscale_serve_the_page_works_as_is() {
    // The browser reaches byre through (a stand-in for) `tailscale serve`, which forwards to
    // byre's socket with grace's identity; its address is byre's public name here.
    let (listener, name) = FakeServe::bind();
    let server = TestServer::spawn_configured(
        tempfile::TempDir::new().unwrap(),
        byre::config::AuthMode::Tailscale,
        |c| c.public_hosts = vec![name],
    )
    .await;
    let serve = FakeServe::start(
        listener,
        serve_socket(server.data.path()),
        "grace@example.com",
    );
    let b = Browser::open(&serve.url).await;
    b.goto("/").await;
    assert_eq!(b.path().await, "/", "no sign-in in tailscale mode");
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;
    let who = b.testid("signed-in-as", "").await.text().await.unwrap();
    assert!(who.contains("grace@example.com"), "{who}");
    let sign_out = b
        .js(
            "return document.querySelectorAll('[data-testid=sign-out]').length;",
            vec![],
        )
        .await;
    assert_eq!(sign_out, 0, "tailscale mode has no sign-out");
    // A state change from the page, without a sign-in key: the mode needs none.
    let r = fetch(
        &b,
        "PUT",
        "/api/me/default-model",
        Some(json!({"model": "opus"})),
        false,
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["body"]["login"], "grace@example.com");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_that_leads_to_another_site_lands_on_byre_itself() {
    let server = TestServer::spawn_team().await;
    let b = Browser::open(&server.url).await;
    let own = url::Url::parse(&server.url).expect("server url");
    // Each `next` is the raw query text an attacker's link carries; the browser reads the tab,
    // the newline and the backslash as parts of a protocol-relative URL to another host.
    for next in [
        "/%09/evil.example",
        "/%0A/evil.example",
        "//evil.example",
        "/%5Cevil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "/\t/evil.example",
        // Dot segments: the resolved path is `//evil.example`, another site when read again.
        "/.//evil.example",
        "/a/..//evil.example",
        "/%2e%2e//evil.example",
    ] {
        // Signed out, so /signin shows its form rather than sending the visitor on.
        b.client.delete_all_cookies().await.expect("sign out");
        b.goto(&format!("/signin?next={next}")).await;
        b.testid("signin-form", "").await;
        sign_in(&b, TOKENS[0].0).await;
        b.wait_js("the page left /signin", "location.pathname !== '/signin'")
            .await;
        let at = url::Url::parse(b.client.current_url().await.expect("url").as_str()).expect("url");
        assert_eq!(
            (at.scheme(), at.host_str(), at.port()),
            (own.scheme(), own.host_str(), own.port()),
            "next={next} led to {at}"
        );
    }
    b.close().await;
}
