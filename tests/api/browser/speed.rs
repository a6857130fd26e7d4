//! The page-speed bench (ignored: run it by hand, `bench/README.md` "Page speed"): a project
//! with 1,000 tasks, a task with 10,000 events, a turn streaming 200 deltas/s, timed by the
//! page's own clock (`performance.now()`, read through WebDriver). Prints figures; asserts
//! none of them.

use futures_util::StreamExt;
use serde_json::json;

use super::{AgentBench, Browser};
use byre_projections::sessions::{AgentText, VendorItem};
use byre_projections::Command;

/// Records, by the page's clock: when the n-th task row first exists (`__rowsAt`), when an
/// agent text holding `__want` first exists (`__textAt`), and the longest gap between two
/// animation frames since `__gaps` was last reset (`__maxGap`).
const SPEED_WATCH: &str = r#"
(() => {
  window.__rowsAt = null; window.__rowsWanted = 1000;
  window.__textAt = null; window.__want = 'Event 9999:';
  window.__maxGap = 0; window.__frames = 0;
  new MutationObserver(() => {
    if (window.__rowsAt === null && document.querySelectorAll('[data-testid=task-row]').length >= window.__rowsWanted)
      window.__rowsAt = performance.now();
    if (window.__want && window.__textAt === null &&
        [...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes(window.__want)))
      window.__textAt = performance.now();
  }).observe(document, { subtree: true, childList: true, characterData: true });
  let last = performance.now();
  const tick = (t) => { window.__maxGap = Math.max(window.__maxGap, t - last); window.__frames++; last = t; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run by hand (bench/README.md, \"Page speed\")"]
async fn page_speed() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, busy) = api.basic_project().await;
    let (_repo2, big) = api.basic_project().await;
    let t0 = std::time::Instant::now();
    futures_util::stream::iter(0..1000)
        .map(|i| {
            let (api, busy) = (api.clone(), busy.clone());
            async move { api.create_task(&busy, &format!("task {i:04}")).await }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    eprintln!("made 1,000 tasks in {:?}", t0.elapsed());
    let task = api
        .create_task_with(
            &big,
            json!({"title": "long", "prompt": "fast deltas: a first short turn"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let session = loop {
        let s = api.call("listSessions", &[&task_id], &[], None).await;
        if let Some(id) = s.body[0]["id"].as_str() {
            break id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let t0 = std::time::Instant::now();
    for batch in 0..100 {
        let items = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                VendorItem::Text(AgentText {
                    cut: None,
                    text: format!("Event {n}: a paragraph of **Markdown** with `code` and a [link](https://example.com/{n})."),
                    message_id: format!("msg_bench_{n}"),
                    raw: String::new(),
                })
            })
            .collect();
        bench
            .server
            .submit(Command::RecordVendorOutput {
                session_id: session.clone().into(),
                items,
            })
            .await;
    }
    eprintln!("recorded 10,000 events in {:?}", t0.elapsed());

    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(SPEED_WATCH).await;
    let mut figures = Vec::new();
    for run in 0..3 {
        b.goto(&format!("/projects/{busy}")).await;
        let at = b.wait_js("1,000 rows", "window.__rowsAt").await;
        let loaded = b
            .js(
                "return performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd;",
                vec![],
            )
            .await;
        eprintln!("run {run}: 1,000 tasks drawn at {at} ms (DOMContentLoaded {loaded} ms)");
        figures.push(("tasks", at));
        b.goto(&format!("/tasks/{task_id}")).await;
        let at = b
            .wait_js("the newest of 10,000 events", "window.__textAt")
            .await;
        let nodes = b
            .js(
                "return document.querySelectorAll('[data-testid=transcript] [data-seq]').length;",
                vec![],
            )
            .await;
        eprintln!("run {run}: task with 10,000 events, newest drawn at {at} ms ({nodes} items in the DOM)");
        figures.push(("task", at));
    }
    // 200 deltas/s: 24 characters every 5 ms for ~6 s, while the 10,000-event task is open.
    let long: String = "fast deltas ".to_owned() + &"lorem ipsum dolor sit amet ".repeat(1000);
    b.js("window.__maxGap = 0; window.__frames = 0;", vec![])
        .await;
    let r = api
        .call("sendMessage", &[&session], &[], Some(json!({"text": long})))
        .await;
    assert!(r.status < 300, "{:?}", r.body);
    let start = std::time::Instant::now();
    b.wait_js("the streamed turn's text", "[...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('lorem ipsum dolor sit amet lorem'))")
        .await;
    let stats = b
        .js(
            "return {maxGap: window.__maxGap, frames: window.__frames};",
            vec![],
        )
        .await;
    eprintln!(
        "200 deltas/s for {:?}: longest frame gap {} ms over {} frames",
        start.elapsed(),
        stats["maxGap"],
        stats["frames"]
    );
    eprintln!(
        "RESULT {}",
        json!(figures
            .iter()
            .map(|(k, v)| json!({k.to_string(): v}))
            .collect::<Vec<_>>())
    );
    b.close().await;
}
