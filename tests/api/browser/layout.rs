//! What a page's layout must never do, checked by script at a viewport: scroll sideways, or
//! let an element of the task's pane overflow its box (a cut tab, a wrapped button).

use serde_json::Value;

use super::Browser;

/// What overflows on the current page: `{scroll, inner, out: [..]}`, where `scroll` is the
/// document's width, `inner` the viewport's, and `out` each element inside the pane (or the
/// page's top bar) wider than its box or reaching past the viewport's right edge, as
/// `testid-or-tag.class: scrollWidth>clientWidth`.
pub async fn overflow(b: &Browser) -> Value {
    b.js_async(
        "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
         const out = [];
         const name = (e) => e.dataset.testid || `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`;
         for (const root of document.querySelectorAll('[data-testid=pane], .topbar, .task-head, .convo')) {
           for (const e of [root, ...root.querySelectorAll('*')]) {
             if (e.closest('pre, textarea, input, .xterm, .diff')) continue;
             const r = e.getBoundingClientRect();
             if (r.width === 0 && r.height === 0) continue;
             if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') out.push(`${name(e)}: ${e.scrollWidth}>${e.clientWidth}`);
             else if (r.right > innerWidth + 1) out.push(`${name(e)}: right ${Math.round(r.right)}>${innerWidth}`);
           }
         }
         return { scroll: document.documentElement.scrollWidth, inner: innerWidth, out };",
        vec![],
    )
    .await
}

/// Panics when [`overflow`] finds anything, naming `at`.
pub async fn assert_no_overflow(b: &Browser, at: &str) {
    let o = overflow(b).await;
    assert!(
        o["scroll"].as_u64() <= o["inner"].as_u64(),
        "{at}: the page scrolls sideways: {o}"
    );
    assert_eq!(o["out"], serde_json::json!([]), "{at}: overflowing: {o}");
}

/// How many lines the text of the element with `data-testid` = `id` takes.
pub async fn text_lines(b: &Browser, id: &str) -> u64 {
    b.js(
        "const e = document.querySelector(`[data-testid=${arguments[0]}]`);
         const r = document.createRange(); r.selectNodeContents(e);
         return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size;",
        vec![Value::String(id.to_owned())],
    )
    .await
    .as_u64()
    .unwrap_or(0)
}
