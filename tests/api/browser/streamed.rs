//! Streamed text on the page (src/ui/README.md, "Live text"): a reload and a second tab mid-turn
//! show the text streamed so far at once, then the rest, each sentence once; after a graceful
//! restart mid-turn the cut turn's text and its usage are shown, live and after a reload. The
//! real Claude Code CLI against the fake model ("streamed sentences": seven pieces a second
//! apart).

use serde_json::{json, Value};

use super::{AgentBench, Browser, LIVE_DELTA_WATCH};
use crate::streamed::{ask_again, start_sentences, SENTENCES};

/// Waits until the page's live text holds at least `n` bytes; the texts it showed so far.
async fn live_of_at_least(b: &Browser, n: usize) -> Vec<String> {
    b.wait_js(
        "the live text grows",
        &format!("window.__liveTexts.some(t => t.length >= {n})"),
    )
    .await;
    serde_json::from_value(b.js("return window.__liveTexts;", vec![]).await).unwrap()
}

/// Every text the page's live text showed is a start of the answer, each longer than the one
/// before: the text so far, then the rest, nothing twice and nothing skipped.
fn growing_starts(texts: &[String]) {
    for pair in texts.windows(2) {
        assert!(pair[1].len() > pair[0].len(), "{texts:?}");
    }
    for t in texts {
        assert!(SENTENCES.starts_with(t.as_str()), "{t:?} of {texts:?}");
    }
}

/// Waits for the turn's text in the transcript, then checks it is there once and no live text
/// is left.
async fn finished_once(b: &Browser) {
    b.wait_js(
        "the turn's text",
        "[...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('Foxtrot sentence ends the answer.'))",
    )
    .await;
    let counts = b
        .js(
            "const t = document.querySelector('[data-testid=transcript]').textContent; \
             return ['Alpha sentence', 'Charlie sentence', 'Foxtrot sentence'].map(s => t.split(s).length - 1) \
               .concat([document.querySelectorAll('[data-testid=live-delta]').length]);",
            vec![],
        )
        .await;
    assert_eq!(
        counts,
        json!([1, 1, 1, 0]),
        "each sentence once, no live text left"
    );
    let texts: Vec<String> =
        serde_json::from_value(b.js("return window.__liveTexts;", vec![]).await).unwrap();
    growing_starts(&texts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_a_second_tab_and_a_restart_mid_turn_show_the_streamed_text_once() {
    let bench = AgentBench::start().await;
    let api = bench.server.api();
    let (_repo, project_id) = api.basic_project().await;
    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(LIVE_DELTA_WATCH).await;
    let (task_id, sid) = start_sentences(&api, &project_id).await;
    b.goto(&format!("/tasks/{task_id}")).await;
    live_of_at_least(&b, 24).await;

    // A reload mid-turn: the first live text the new page shows is already the text so far.
    b.client.refresh().await.expect("reload");
    let texts = live_of_at_least(&b, 24).await;
    assert!(texts[0].len() >= 24, "{texts:?}");
    growing_starts(&texts);

    // A second tab mid-turn, once two pieces streamed, likewise.
    live_of_at_least(&b, 48).await;
    let first_tab = b.client.window().await.expect("this tab");
    let tab = b.client.new_window(true).await.expect("a second tab");
    b.client
        .switch_to_window(tab.handle)
        .await
        .expect("to the second tab");
    b.on_every_page(LIVE_DELTA_WATCH).await;
    b.goto(&format!("/tasks/{task_id}")).await;
    let texts = live_of_at_least(&b, 48).await;
    assert!(texts[0].len() >= 48, "the text so far at once: {texts:?}");
    finished_once(&b).await;
    b.client
        .switch_to_window(first_tab)
        .await
        .expect("back to the first tab");
    finished_once(&b).await;

    // A graceful restart mid-turn: the cut turn's text and usage stay.
    ask_again(&api, &sid).await;
    b.js("window.__liveTexts = [];", vec![]).await;
    live_of_at_least(&b, 48).await;
    let bench = bench.restart().await;
    let api = bench.server.api();
    for view in ["live", "reloaded"] {
        let cut = b
            .wait_js(
                &format!("the cut turn's text ({view})"),
                "(() => { const e = document.querySelector('[data-testid=item-agent-streamed]'); \
                 const end = document.querySelector('[data-testid=item-turn-end][data-outcome=interrupted]'); \
                 return e && end ? [e.querySelector('.live-text').textContent, end.textContent] : null; })()",
            )
            .await;
        let (said, end) = (cut[0].as_str().unwrap(), cut[1].as_str().unwrap());
        assert!(
            said.len() >= 48 && SENTENCES.starts_with(said),
            "{view}: {said:?}"
        );
        // Its usage and time, not "0 in · 0 out · 0 ms".
        let log = api
            .call("listTaskEvents", &[&task_id], &[], None)
            .await
            .body;
        let ended: &Value = log
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "turn.ended" && e["payload"]["outcome"] == "interrupted")
            .expect("the cut turn's end");
        let input = ended["payload"]["usage"]["input_tokens"].as_u64().unwrap();
        assert!(input > 0, "{ended}");
        assert!(
            !end.contains("0 in · 0 out") && end.contains(" in") && !end.contains(" 0 ms"),
            "{view}: {end:?}"
        );
        if view == "live" {
            b.client.refresh().await.expect("reload");
        }
    }
    b.screenshots("streamed-cut").await;
    b.close().await;
}
