//! Browser sign-in without a browser (docs/operating.md "Signing in from a browser"): the
//! session cookie on REST and SSE, only ever with its sign-in key (`X-Byre-CSRF`, or
//! `signin_key` in the query), sign-out, the page guard, the security headers, and the commit a
//! page's stream reports. `browser::signin` drives the same through real Chromium, and
//! `browser::stolen_cookie` replays a cookie another port of the host was sent.

use serde_json::{json, Value};

use crate::helpers::{Api, TestServer, TOKENS, WAIT};

const CSP_NEEDLES: [&str; 6] = [
    "default-src 'self'",
    "script-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "style-src 'self'",
];

fn raw() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `POST /auth/signin` with the token; the response.
async fn signin(url: &str, token: &str, csrf: bool) -> reqwest::Response {
    let mut req = raw()
        .post(format!("{url}/auth/signin"))
        .json(&json!({ "token": token }));
    if csrf {
        req = req.header("X-Byre-CSRF", "1");
    }
    req.send().await.unwrap()
}

/// A browser's sign-in: the session cookie's value and the sign-in key the page keeps.
struct SignedIn {
    cookie: String,
    key: String,
}

/// Signs `login` in.
async fn session_of(url: &str, login: &str) -> SignedIn {
    let token = TOKENS.iter().find(|(_, l)| *l == login).unwrap().0;
    let resp = signin(url, token, true).await;
    assert_eq!(resp.status(), 200);
    let set_cookie = resp
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["login"], login);
    let value = set_cookie
        .strip_prefix("byre_session=")
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("{set_cookie}"));
    SignedIn {
        cookie: value.to_owned(),
        key: body["signin_key"]
            .as_str()
            .expect("the sign-in key")
            .to_owned(),
    }
}

/// The cookie alone, as another port of the host is sent it.
fn cookie_only(server: &TestServer, session: &SignedIn) -> Api {
    server
        .api()
        .with_header("Cookie", &format!("byre_session={}", session.cookie))
}

/// The cookie and its key, as byre's page sends them.
fn with_cookie(server: &TestServer, session: &SignedIn) -> Api {
    cookie_only(server, session).with_header("X-Byre-CSRF", &session.key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_trades_a_token_for_an_http_only_strict_cookie() {
    let server = TestServer::spawn_team().await;
    let url = &server.url;

    let wrong = signin(url, "not-a-token-0123456789", true).await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["message"], "unknown token");

    let no_header = signin(url, TOKENS[0].0, false).await;
    assert_eq!(no_header.status(), 403, "sign-in is a state change too");
    let body: Value = no_header.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("X-Byre-CSRF"),
        "{body}"
    );

    let ok = signin(url, TOKENS[0].0, true).await;
    assert_eq!(ok.status(), 200);
    let cookie = ok.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=2592000"] {
        assert!(cookie.contains(attr), "{attr} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    // The answer carries the sign-in key, a secret of its own beside the cookie's.
    let body: Value = ok.json().await.unwrap();
    let key = body["signin_key"].as_str().unwrap();
    assert_eq!(key.len(), 64, "{body}");
    assert!(!cookie.contains(key), "the key is not the cookie");

    // The cookie is `Secure` when the request came over HTTPS (a TLS proxy in front).
    let https = raw()
        .post(format!("{url}/auth/signin"))
        .header("X-Byre-CSRF", "1")
        .header("X-Forwarded-Proto", "https")
        .json(&json!({ "token": TOKENS[1].0 }))
        .send()
        .await
        .unwrap();
    assert!(https.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Secure"));

    // Bad bodies are the usual 400.
    let bad = raw()
        .post(format!("{url}/auth/signin"))
        .header("X-Byre-CSRF", "1")
        .json(&json!({ "tokn": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_works_on_rest_and_sse_only_with_its_sign_in_key() {
    let server = TestServer::spawn_team().await;
    let session = session_of(&server.url, "ada").await;
    let api = with_cookie(&server, &session);

    let me = api.get_me().await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["login"], "ada");

    // The stream, as an EventSource opens it: the key in the query.
    let mut sse = cookie_only(&server, &session)
        .events(&[("signin_key", &session.key)], None)
        .await;
    // The cookie without its key, or with `1` or another key: 401 naming the header, reads
    // and changes alike, and nothing recorded.
    for wrong in [None, Some("1"), Some("0123456789abcdef0123456789abcdef")] {
        let mut without = cookie_only(&server, &session);
        if let Some(wrong) = wrong {
            without = without.with_header("X-Byre-CSRF", wrong);
        }
        let read = without.get_me().await;
        assert_eq!(read.status, 401, "getMe with {wrong:?}: {:?}", read.body);
        assert!(read.message().contains("X-Byre-CSRF"), "{:?}", read.body);
        let refused = without.update_default_model("opus").await;
        assert_eq!(refused.status, 401, "{wrong:?}: {:?}", refused.body);
    }
    let stream = raw()
        .get(format!("{}/api/events?signin_key=1", server.url))
        .header("Cookie", format!("byre_session={}", session.cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(
        stream.status(),
        401,
        "a stream on the cookie and a wrong key"
    );
    // With its key it goes through, and the stream (opened on the cookie) carries it.
    let accepted = api.update_default_model("haiku").await;
    assert_eq!(accepted.status, 200, "{:?}", accepted.body);
    let seen = sse
        .until("the model change", |e| {
            e.data["kind"] == "user.default_model_updated"
        })
        .await;
    let changes: Vec<&Value> = seen
        .iter()
        .filter(|e| e.data["kind"] == "user.default_model_updated")
        .map(|e| &e.data["payload"]["model"])
        .collect();
    assert_eq!(
        changes,
        [&json!("haiku")],
        "the refused changes left no event"
    );

    // Scripts keep using the bearer header, with no CSRF header.
    let script = server.api_as("ada");
    let r = script.update_default_model("opus").await;
    assert_eq!(r.status, 200);

    // A browser request another site makes is refused whatever the credentials.
    let cross = script
        .clone()
        .with_header("Sec-Fetch-Site", "cross-site")
        .update_default_model("opus")
        .await;
    assert_eq!(cross.status, 403);
    assert!(
        cross.message().contains("Sec-Fetch-Site"),
        "{:?}",
        cross.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_ends_the_session_on_the_server() {
    let server = TestServer::spawn_team().await;
    let session = session_of(&server.url, "ada").await;
    let other = session_of(&server.url, "ada").await;
    let api = with_cookie(&server, &session);
    assert_eq!(api.get_me().await.status, 200);

    let signout = |csrf: Option<&str>| {
        let mut req = raw()
            .post(format!("{}/auth/signout", server.url))
            .header("Cookie", format!("byre_session={}", session.cookie));
        if let Some(csrf) = csrf {
            req = req.header("X-Byre-CSRF", csrf);
        }
        req.send()
    };
    assert_eq!(signout(None).await.unwrap().status(), 403);
    // The cookie alone signs nothing out either (another port of the host was sent it).
    assert_eq!(signout(Some("1")).await.unwrap().status(), 401);
    assert_eq!(api.get_me().await.status, 200, "still signed in");
    let out = signout(Some(&session.key)).await.unwrap();
    assert_eq!(out.status(), 204);
    let cleared = out.headers()["set-cookie"].to_str().unwrap();
    assert!(cleared.starts_with("byre_session=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");

    // The old cookie, replayed, is refused on REST and SSE; the other session lives on.
    let gone = api.get_me().await;
    assert_eq!(gone.status, 401);
    assert!(gone.message().contains("/signin"), "{:?}", gone.body);
    let stream = raw()
        .get(format!(
            "{}/api/events?signin_key={}",
            server.url, session.key
        ))
        .header("Cookie", format!("byre_session={}", session.cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 401);
    assert_eq!(with_cookie(&server, &other).get_me().await.status, 200);
    // Signing out again is harmless.
    assert_eq!(signout(Some(&session.key)).await.unwrap().status(), 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_user_on_the_cookie_sees_none_of_the_firsts_owner_only_events() {
    let server = TestServer::spawn_team().await;
    let ada = server.api_as("ada");
    for model in ["opus", "haiku"] {
        let r = ada.update_default_model(model).await;
        assert_eq!(r.status, 200);
    }
    let bob = with_cookie(&server, &session_of(&server.url, "bob").await);
    let mut sse = bob.events(&[], None).await;
    let r = bob.update_default_model("bob-model").await;
    assert_eq!(r.status, 200);
    let seen = sse
        .until("bob's own change", |e| {
            e.data["payload"]["model"] == "bob-model"
        })
        .await;
    assert!(
        seen.iter().all(|e| e.data["owner"] != "ada"),
        "{:?}",
        seen.iter().map(|e| &e.data).collect::<Vec<_>>()
    );
    assert!(seen.iter().any(|e| e.data["kind"] == "user.created"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_loads_without_a_session_go_to_signin_and_api_calls_get_401_json() {
    let server = TestServer::spawn_team().await;
    let url = &server.url;
    let client = raw();
    for (path, next) in [
        ("/", "/"),
        ("/tasks/abc?tab=changes", "/tasks/abc%3Ftab%3Dchanges"),
    ] {
        let r = client.get(format!("{url}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 303, "{path}");
        assert_eq!(
            r.headers()["location"].to_str().unwrap(),
            format!("/signin?next={next}")
        );
    }
    let api = client
        .get(format!("{url}/api/projects"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 401);
    assert!(api.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let body: Value = api.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("Bearer"),
        "{body}"
    );

    // The sign-in page itself, its files, and (signed in) the way back.
    let page = client.get(format!("{url}/signin")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/signin/signin.js">"#));
    assert!(!html.contains("<script>"), "no inline script");
    for (file, kind) in [("signin.js", "text/javascript"), ("signin.css", "text/css")] {
        let r = client
            .get(format!("{url}/signin/{file}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(kind));
    }
    // Signed in, a page load (which cannot show the key) gets the page itself, and /signin
    // its form, whose script goes on by itself when the key it keeps still works.
    let session = session_of(url, "ada").await;
    let back = client
        .get(format!("{url}/signin"))
        .header("Cookie", format!("byre_session={}", session.cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    let page = client
        .get(format!("{url}/"))
        .header("Cookie", format!("byre_session={}", session.cookie))
        .send()
        .await
        .unwrap();
    assert_ne!(page.status(), 303, "signed in: the page itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_needs_no_signin() {
    let server = TestServer::spawn().await;
    let client = raw();
    let r = client
        .get(format!("{}/signin", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let r = client
        .post(format!("{}/auth/signin", server.url))
        .header("X-Byre-CSRF", "1")
        .json(&json!({"token": TOKENS[0].0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("--auth local"));
    let r = client.get(format!("{}/", server.url)).send().await.unwrap();
    assert_ne!(r.status(), 303, "no redirect in local mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_content_security_policy_and_its_companions() {
    let server = TestServer::spawn_team().await;
    let client = raw();
    for path in [
        "/signin",
        "/signin/signin.js",
        "/",
        "/api/me",
        "/no/such/thing",
    ] {
        let r = client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        let h = r.headers();
        let csp = h
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("CSP on {path}"))
            .to_str()
            .unwrap();
        for needle in CSP_NEEDLES {
            assert!(csp.contains(needle), "{needle} in {path}'s {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_stream_without_byre_commit_reports_the_commit_byre_was_built_from() {
    let server = TestServer::spawn().await;
    assert!(!byre::BUILD_COMMIT.is_empty());
    let api = server.api();
    // What an EventSource of byre's own page sends: no Byre-* headers, same-origin.
    let mut page = api
        .clone()
        .with_header("Sec-Fetch-Site", "same-origin")
        .events(&[], None)
        .await;
    // A client that names itself keeps its own commit; a script that names nothing, none.
    let _app = api
        .clone()
        .with_header("Byre-Host", "ada-mac")
        .with_header("Byre-Commit", "0123abc")
        .events(&[], None)
        .await;
    let _script = api.events(&[], None).await;
    let _ = page.next(std::time::Duration::from_millis(50)).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = api.call("getStatus", &[], &[], None).await;
        let clients = status.body["clients"].as_array().unwrap().clone();
        if clients.len() == 3 {
            let mut pairs: Vec<(String, String)> = clients
                .iter()
                .map(|c| {
                    (
                        c["host"].as_str().unwrap().to_owned(),
                        c["commit"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            pairs.sort();
            let mut expected = vec![
                (String::new(), String::new()),
                (String::new(), byre::BUILD_COMMIT.to_owned()),
                ("ada-mac".to_owned(), "0123abc".to_owned()),
            ];
            expected.sort();
            assert_eq!(pairs, expected);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{clients:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
