//! Agent text is untrusted: a message holding a `<script>`, an image with `onerror`, a
//! Markdown `javascript:` link, an HTML one and an `<iframe>` renders as harmless content.
//! Had any of them run, it would set `window.__pwned`; the page also raises no dialog, and the
//! rendered message holds no script, handler, `javascript:` URL or frame (the sanitiser removed
//! them; the Content-Security-Policy would block them too).

use serde_json::{json, Value};

use super::{AgentBench, Browser};

/// Records every CSP violation the page reports in `window.__csp`.
const CSP_WATCH: &str = r#"
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    window.__csp.push({ directive: e.violatedDirective, uri: e.blockedURI, source: e.sourceFile, line: e.lineNumber, element: e.target && e.target.outerHTML ? e.target.outerHTML.slice(0, 200) : String(e.target) });
  });
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_message_with_script_onerror_and_javascript_links_does_nothing() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "hostile", "prompt": "Write some hostile markdown"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();

    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(CSP_WATCH).await;
    b.goto(&format!("/tasks/{task_id}")).await;
    b.wait_js(
        "the hostile message is drawn",
        "[...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('End of the check.'))",
    )
    .await;
    // The text around the payloads is there: the message was rendered, not dropped.
    let item = b
        .js(
            "return [...document.querySelectorAll('[data-testid=item-agent-text]')].find(e => e.textContent.includes('End of the check.')).innerHTML;",
            vec![],
        )
        .await;
    let html = item.as_str().unwrap().to_owned();
    assert!(html.contains("Rendering check."), "{html}");
    let dangerous = b
        .js(
            r#"
            const item = [...document.querySelectorAll('[data-testid=item-agent-text]')].find(e => e.textContent.includes('End of the check.'));
            return {
              scripts: item.querySelectorAll('script').length,
              handlers: [...item.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
              js_links: [...item.querySelectorAll('[href],[src],[action],[formaction]')].filter(e => /^\s*javascript:/i.test(e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action') || e.getAttribute('formaction') || '')).length,
              frames: item.querySelectorAll('iframe, object, embed').length,
            };
            "#,
            vec![],
        )
        .await;
    assert_eq!(
        dangerous,
        json!({"scripts": 0, "handlers": 0, "js_links": 0, "frames": 0}),
        "{html}"
    );
    // Click what is left of the links: nothing runs and the page stays where it is.
    let before = b.path().await;
    let links = b
        .js(
            r#"
            const item = [...document.querySelectorAll('[data-testid=item-agent-text]')].find(e => e.textContent.includes('End of the check.'));
            const found = [...item.querySelectorAll('a')].filter(a => /markdown link|html link/.test(a.textContent));
            found.forEach(a => a.click());
            return found.length;
            "#,
            vec![],
        )
        .await;
    let _ = links;
    b.screenshots("hostile").await;
    assert_eq!(b.alert_text().await, None, "no dialog");
    assert_eq!(b.path().await, before);
    assert_eq!(
        b.js("return typeof window.__pwned;", vec![]).await,
        json!("undefined"),
        "nothing from the message ran"
    );
    // Chromium reports an inline handler met while DOMPurify parses the message in its inert
    // `DOMParser` document (nothing runs there); any other violation means something reached
    // the live page that the policy had to stop.
    let violations: Value = b.js("return window.__csp;", vec![]).await;
    let live: Vec<&Value> = violations
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| {
            !v["source"]
                .as_str()
                .unwrap_or("")
                .ends_with("/vendor/purify.es.mjs")
        })
        .collect();
    assert!(
        live.is_empty(),
        "the sanitiser, not only the CSP: {violations}"
    );
    b.close().await;
}
