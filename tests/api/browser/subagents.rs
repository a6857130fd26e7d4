//! The agent's own subagents on the page: while a real Claude Code background subagent
//! (`fixtures/fake-model/w_subagents.json`) runs after its turn ended, the composer shows how
//! many run, and the transcript draws its start and end with the count.

use serde_json::{json, Value};

use super::Browser;
use crate::claude::Bench;

/// An instrument for [`Browser::on_every_page`]: each distinct text the composer's subagent
/// count shows (`""` while it is absent), in order, in `window.__subagentTexts`.
const COUNT_WATCH: &str = r#"
(() => {
  window.__subagentTexts = [];
  const look = () => {
    const el = document.querySelector('[data-testid=composer-subagents]');
    const t = el ? el.textContent.trim() : "";
    const seen = window.__subagentTexts;
    if (seen[seen.length - 1] !== t) seen.push(t);
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true });
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_composer_shows_a_background_subagent_while_it_runs() {
    let b = Bench::start("w_subagents").await;
    let task = b.api.create_task(&b.project_id, "helpers").await;
    let task_id = task["id"].as_str().unwrap().to_owned();

    let page = Browser::open(&b.server.url).await;
    page.on_every_page(COUNT_WATCH).await;
    page.goto(&format!("/tasks/{task_id}")).await;
    page.testid("composer-input", "").await;
    // The page is live before the agent starts.
    let r = b
        .api
        .call(
            "createSession",
            &[&task_id],
            &[],
            Some(json!({"prompt": "Now run a background helper"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    page.wait_js(
        "the subagent's end is drawn",
        "[...document.querySelectorAll('[data-testid=item-subagent]')].length === 2",
    )
    .await;
    page.wait_js(
        "the turn the CLI started by itself is drawn",
        "document.querySelectorAll('[data-testid=item-turn-end]').length === 2",
    )
    .await;
    let texts = page.js("return window.__subagentTexts;", vec![]).await;
    let texts: Vec<&str> = texts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        texts.windows(2).any(|w| w == ["1 subagent running", ""]),
        "the count showed, then went: {texts:?}"
    );
    let items = page
        .js(
            "return [...document.querySelectorAll('[data-testid=item-subagent]')].map(e => e.textContent);",
            vec![],
        )
        .await;
    let items: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        items[0].contains("started: Background helper") && items[0].contains("1 running"),
        "{items:?}"
    );
    assert!(
        items[1].contains("ended (completed)") && items[1].contains("0 running"),
        "{items:?}"
    );
    page.close().await;
    b.server.stop().await;
}
