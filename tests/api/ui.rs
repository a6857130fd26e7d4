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
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404, "only GET and HEAD serve the app");
}
