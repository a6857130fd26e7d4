//! The web UI's files as `byre serve` answers them (`src/http/ui.rs`); the page itself is
//! driven in a real browser elsewhere.

use crate::helpers::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_is_served_at_root_and_on_client_routes_and_api_paths_stay_json_404s() {
    let server = TestServer::spawn().await;
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{}{path}", server.url)).send();
    for path in [
        "/",
        "/tasks/3f0c2d9e-0000-0000-0000-000000000000/changes",
        "/inbox",
    ] {
        let res = get(path).await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(
            res.headers()["content-type"],
            "text/html; charset=utf-8",
            "{path}"
        );
        let body = res.text().await.unwrap();
        assert!(
            body.contains(r#"<script type="module" src="/js/main.js">"#),
            "{path}"
        );
    }
    for (path, ty) in [
        ("/js/main.js", "text/javascript; charset=utf-8"),
        ("/app.css", "text/css; charset=utf-8"),
        ("/vendor/preact.module.js", "text/javascript; charset=utf-8"),
        ("/favicon.svg", "image/svg+xml"),
    ] {
        let res = get(path).await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(res.headers()["content-type"], ty, "{path}");
        assert_eq!(res.headers()["cache-control"], "no-cache", "{path}");
        let etag = res.headers()["etag"].to_str().unwrap().to_owned();
        let again = client
            .get(format!("{}{path}", server.url))
            .header("If-None-Match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path} revalidates");
    }
    for path in ["/api/nope", "/api", "/js/missing.js", "/internal/x"] {
        let res = get(path).await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
        let body: serde_json::Value = res.json().await.unwrap();
        assert!(
            body["message"].as_str().unwrap().contains("no route"),
            "{path}"
        );
    }
    let post = client
        .post(format!("{}/", server.url))
        .header("X-Byre-CSRF", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404, "only GET and HEAD serve the app");
}

/// Issue 12 (safety): the page is sent with a Content-Security-Policy that forbids inline
/// script, so nothing an agent writes can run even if it slipped past the sanitiser. It was
/// missing: the page came with no policy at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_sent_with_a_csp_that_forbids_inline_script() {
    let server = TestServer::spawn().await;
    let client = reqwest::Client::new();
    for path in [
        "/",
        "/tasks/3f0c2d9e-0000-0000-0000-000000000000",
        "/js/main.js",
    ] {
        let res = client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let csp = res
            .headers()
            .get("content-security-policy")
            .unwrap_or_else(|| panic!("{path}: no Content-Security-Policy"))
            .to_str()
            .unwrap()
            .to_owned();
        let directive = |name: &str| {
            csp.split(';')
                .map(str::trim)
                .find(|d| d.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("{path}: no {name} in {csp}"))
                .to_owned()
        };
        let script = directive("script-src");
        assert!(script.contains("'self'"), "{path}: {script}");
        for unsafe_source in ["'unsafe-inline'", "'unsafe-eval'", "data:", "*"] {
            assert!(
                !script.split_whitespace().any(|s| s == unsafe_source),
                "{path}: {script} allows {unsafe_source}"
            );
        }
        assert_eq!(directive("object-src"), "object-src 'none'", "{path}");
        assert_eq!(directive("base-uri"), "base-uri 'none'", "{path}");
        let img = directive("img-src");
        assert!(
            img.split_whitespace()
                .all(|s| ["img-src", "'self'", "data:"].contains(&s)),
            "{path}: images only from byre or data URLs: {img}"
        );
    }
}
