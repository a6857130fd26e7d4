//! The reviews tab and the merge dialog's review notes, with the real CLIs against the fake
//! model APIs (the bench of `tests/api/reviews.rs`): a Claude Code turn the human starts from
//! the composer writes hello.txt (`fixtures/fake-model/b_write_file.json`), a real Codex
//! reviewer reports two findings with `submit_review` (`codex_r_review.json`), and the open
//! page shows them as they come over /api/events; "Fix it" on one records it (listReviews) and
//! sends it to the agent as its next message (the fake's request log). Then a slow review
//! (title "slow review": Codex answers after 60 s): the merge dialog offers "merge after
//! review", shows the waiting merge and withdraws it, and the review's "Stop" fails it.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use super::{Browser, WIRE_TAP};

/// How long a turn and its review may take (real CLIs on a loaded machine), as in
/// `tests/api/reviews.rs`.
const REVIEW_WAIT: Duration = Duration::from_secs(180);

/// Waits up to [`REVIEW_WAIT`] for the element with `data-testid` = `id` and CSS `extra`.
async fn wait_review(b: &Browser, id: &str, extra: &str) -> fantoccini::elements::Element {
    let css = format!("[data-testid=\"{id}\"]{extra}");
    b.client
        .wait()
        .at_most(REVIEW_WAIT)
        .for_element(Locator::Css(&css))
        .await
        .unwrap_or_else(|e| panic!("no element {css} within {REVIEW_WAIT:?}: {e}"))
}

/// Writes `<target>/screenshots/{name}-desktop.png` at the current (desktop) size only: a
/// dialog under the task's header has no phone counterpart on the pane's own page.
async fn desktop_screenshot(b: &Browser, name: &str) {
    let dir = super::screenshot_dir();
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let png = b.client.screenshot().await.expect("screenshot");
    std::fs::write(dir.join(format!("{name}-desktop.png")), png).expect("write png");
}

/// The text of every element matching `css` inside `el`.
async fn texts(el: &fantoccini::elements::Element, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in el.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap());
    }
    out
}

/// Polls the fake Messages API's log until a request made after the first `after` ends its
/// conversation with a user message carrying `needle` (Claude Code may append a system
/// message after it); that user message, as JSON.
async fn next_message_with(
    claude: &byre_fake_models::FakeAnthropic,
    after: usize,
    needle: &str,
) -> String {
    let deadline = tokio::time::Instant::now() + REVIEW_WAIT;
    loop {
        let asked = claude.messages_requests();
        let hit = asked.iter().skip(after).find_map(|r| {
            let messages = r.body.as_ref()?.get("messages")?.as_array()?;
            let last_user = messages.iter().rev().find(|m| m["role"] == "user")?;
            let text = serde_json::to_string(last_user).ok()?;
            text.contains(needle).then_some(text)
        });
        if let Some(last) = hit {
            return last;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request to the agent's model after #{after} carries {needle:?}: {:?}",
            asked
                .iter()
                .skip(after)
                .map(|r| r.body.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reviews_tab_shows_a_reviews_findings_live_and_marks_one_fixed() {
    let bench = crate::reviews::bench("b_write_file", "codex_r_review").await;
    let api = bench.api.clone();
    let task = api
        .create_task_with(&bench.project_id, json!({"title": "greeting"}))
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();

    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(WIRE_TAP).await;
    b.goto(&format!("/tasks/{task_id}/reviews")).await;
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;
    b.testid("reviews-empty", "").await;
    // Set once: still there at the end means the page was never reloaded.
    b.js("window.__sameDocument = true;", vec![]).await;

    // The human starts the agent from the composer; its turn writes hello.txt.
    b.testid("composer-input", "")
        .await
        .send_keys("Please create hello.txt")
        .await
        .unwrap();
    b.testid("composer-send", "").await.click().await.unwrap();

    // The review arrives over the event stream: running, then done with two findings.
    let review = wait_review(&b, "review", "[data-state=done][data-snapshot=\"1\"]").await;
    let findings = review
        .find_all(Locator::Css("[data-testid=finding]"))
        .await
        .unwrap();
    assert_eq!(findings.len(), 2, "both findings are shown");
    let titles = texts(&review, "[data-testid=finding-title]").await;
    let reviews = bench.reviews(&task_id).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    let r = &reviews[0];
    assert_eq!(
        r["vendor"], "codex",
        "a Claude Code task is reviewed by Codex"
    );
    let from_api: Vec<&Value> = r["result"]["findings"].as_array().unwrap().iter().collect();
    assert_eq!(
        titles,
        from_api
            .iter()
            .map(|f| f["title"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        "the page shows listReviews' findings, in order"
    );
    // (Drawn in capitals by the style sheet, which WebDriver's text applies.)
    let severities = texts(&review, "[data-testid=finding-severity]").await;
    assert_eq!(
        severities
            .iter()
            .map(|s| s.to_lowercase())
            .collect::<Vec<_>>(),
        from_api
            .iter()
            .map(|f| f["severity"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    );
    let locations = texts(&review, "[data-testid=finding-location]").await;
    assert_eq!(locations[0], "hello.txt:1");
    // The summary is Markdown ("The step adds **hello.txt**."), rendered.
    let bold = review
        .find(Locator::Css("[data-testid=review-summary] strong"))
        .await
        .expect("the summary's bold text is rendered as <strong>");
    assert_eq!(bold.text().await.unwrap(), "hello.txt");
    assert_eq!(
        b.js(
            "return document.querySelectorAll('[data-testid=finding][data-state=open] [data-testid=finding-fixed]').length;",
            vec![]
        )
        .await,
        json!(2),
        "each open finding offers \"Fix it\""
    );
    let tab = b.testid("pane-tab-reviews", "").await.text().await.unwrap();
    assert!(tab.contains('2'), "the tab counts the open findings: {tab}");
    assert_eq!(
        b.js("return window.__opens;", vec![]).await,
        json!(1),
        "one event stream"
    );
    b.screenshots("reviews").await;

    // On a phone the reviews are the pane's own page, and nothing spills sideways.
    b.set_viewport(390, 844).await;
    b.wait_js(
        "the phone layout",
        "!!document.querySelector('.shell.phone .pane-page [data-testid=finding-fixed]')",
    )
    .await;
    let spill = b
        .js(
            "const w = document.documentElement.clientWidth;
             const out = [...document.querySelectorAll('[data-testid=finding], [data-testid=finding-fixed], [data-testid=finding-ignored], [data-testid=review-summary]')]
               .filter(e => e.getBoundingClientRect().right > w + 1).map(e => e.dataset.testid);
             return { w, scroll: document.documentElement.scrollWidth, out };",
            vec![],
        )
        .await;
    assert_eq!(spill["out"], json!([]), "{spill}");
    assert!(
        spill["scroll"].as_u64() <= spill["w"].as_u64(),
        "no sideways scrolling on a phone: {spill}"
    );
    b.set_viewport(1280, 800).await;

    // The merge dialog warns about the two open findings.
    b.testid("merge-button", "").await.click().await.unwrap();
    let warning = b
        .testid("merge-open-findings", "")
        .await
        .text()
        .await
        .unwrap();
    assert!(warning.contains("2 review findings"), "{warning}");
    assert!(warning.contains("No trailing period"), "{warning}");
    desktop_screenshot(&b, "merge-open-findings").await;
    b.testid("merge-cancel", "").await.click().await.unwrap();

    // path:line opens the changes tab at that file, the line marked.
    b.testid("finding-location", "")
        .await
        .click()
        .await
        .unwrap();
    b.wait_path(&format!(
        "/tasks/{task_id}/changes?snapshot=1&path=hello.txt&line=1"
    ))
    .await;
    let diff = b.testid("diff", "[data-path=\"hello.txt\"]").await;
    let hit = diff
        .find(Locator::Css("tr.hit"))
        .await
        .expect("line 1 is marked");
    assert!(hit
        .text()
        .await
        .unwrap()
        .contains("hello from the fake model"));
    // The "since" picker offers the human's message, not the reviewer's instructions.
    let since: Vec<String> = serde_json::from_value(
        b.js(
            "return [...document.querySelectorAll('[data-testid=changes-since] option')].map(o => o.textContent);",
            vec![],
        )
        .await,
    )
    .unwrap();
    assert!(
        since.iter().any(|o| o.contains("Please create hello.txt")),
        "{since:?}"
    );
    assert!(
        !since
            .iter()
            .any(|o| o.contains("You are reviewing") || o.contains("byre's message")),
        "byre's own messages are no points to compare with: {since:?}"
    );
    b.testid("pane-tab-reviews", "")
        .await
        .click()
        .await
        .unwrap();

    // "Fix it" on the first finding: recorded, and sent to the agent as its next message.
    let claude_before = bench.claude.messages_requests().len();
    b.testid("finding", "[data-index=\"0\"][data-state=open]")
        .await
        .find(Locator::Css("[data-testid=finding-fixed]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let fixed = b
        .testid("finding", "[data-index=\"0\"][data-state=fixed]")
        .await;
    let shown = fixed
        .find(Locator::Css("[data-testid=finding-state]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains("fixed"), "{shown}");
    b.testid("finding", "[data-index=\"1\"][data-state=open]")
        .await;
    let r = &bench.reviews(&task_id).await[0];
    assert_eq!(
        r["finding_states"],
        json!({"0": "fixed"}),
        "listReviews records the first finding fixed, the second still open: {r:?}"
    );
    let last = next_message_with(&bench.claude, claude_before, "No trailing period").await;
    assert!(
        last.contains("No trailing period") && last.contains("hello.txt:1"),
        "the finding is the agent's next message: {last}"
    );
    // The transcript shows it as the human's message.
    b.wait_js(
        "the finding in the transcript under ada's name",
        "[...document.querySelectorAll('[data-testid=item-user-message][data-actor=ada]')].some(e => e.textContent.includes('No trailing period'))",
    )
    .await;
    // The reviewer's own conversation is not drawn as the task agent's.
    let reviewer_text = b
        .js(
            "return [...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('I read hello.txt.'));",
            vec![],
        )
        .await;
    assert_eq!(reviewer_text, json!(false));
    b.screenshots("reviews-fixed").await;

    assert_eq!(
        b.js(
            "return window.__sameDocument === true && window.__opens;",
            vec![]
        )
        .await,
        json!(1),
        "all of it live on one page load and one event stream"
    );
    assert_eq!(b.alert_text().await, None);
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_dialog_offers_merge_after_a_running_review_and_stop_fails_it() {
    let bench = crate::reviews::bench("b_write_file", "codex_r_review").await;
    let api = bench.api.clone();
    // Codex answers a reviewer of a task titled "slow review" after 60 s.
    let slow = api
        .create_task_with(
            &bench.project_id,
            json!({"title": "slow review", "prompt": "Please create hello.txt"}),
        )
        .await;
    let slow_id = slow["id"].as_str().unwrap().to_owned();
    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(WIRE_TAP).await;
    b.goto(&format!("/tasks/{slow_id}/reviews")).await;
    // Merge after review is offered while the review runs, shown while it waits, withdrawn.
    let running = wait_review(&b, "review", "[data-state=running][data-snapshot=\"1\"]").await;
    b.wait_js(
        "the task's state badge says it is being reviewed",
        "document.querySelector('[data-testid=task-header-state]').textContent === 'reviewing'",
    )
    .await;
    // The sidebar's task list says so too.
    let row = b
        .testid("task-row", &format!("[data-task-id=\"{slow_id}\"]"))
        .await;
    let badge = row
        .find(Locator::Css("[data-testid=task-state]"))
        .await
        .unwrap();
    assert_eq!(badge.text().await.unwrap(), "reviewing");
    assert_eq!(
        badge.attr("class").await.unwrap().as_deref(),
        Some("badge st-reviewing")
    );
    b.testid("merge-button", "").await.click().await.unwrap();
    b.testid("merge-after-review", "")
        .await
        .click()
        .await
        .unwrap();
    b.testid("merge-after-review-tag", "").await;
    let t = api.call("getTask", &[&slow_id], &[], None).await.body;
    assert_eq!(t["merge_after_review"], true, "{t:?}");
    // (Before reopening the dialog: on a phone the pane is its own page, without the dialog.)
    b.screenshots("review-running").await;
    b.testid("merge-button", "").await.click().await.unwrap();
    b.testid("merge-after-review-waiting", "").await;
    desktop_screenshot(&b, "merge-after-review").await;
    b.testid("merge-after-review-cancel", "")
        .await
        .click()
        .await
        .unwrap();
    b.wait_js(
        "the waiting merge is withdrawn",
        "!document.querySelector('[data-testid=merge-after-review-waiting]') && !!document.querySelector('[data-testid=merge-after-review]')",
    )
    .await;
    let t = api.call("getTask", &[&slow_id], &[], None).await.body;
    assert_eq!(t["merge_after_review"], false, "{t:?}");
    b.testid("merge-cancel", "").await.click().await.unwrap();

    // Stop: the review fails, saying who stopped it.
    running
        .find(Locator::Css("[data-testid=review-stop]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let failed = b
        .testid("review", "[data-state=failed][data-snapshot=\"1\"]")
        .await;
    let error = failed
        .find(Locator::Css("[data-testid=review-error]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(error.contains("stopped by ada"), "{error}");
    let r = &bench.reviews(&slow_id).await[0];
    assert_eq!(r["state"], "failed", "{r:?}");
    assert_eq!(r["error"], error, "the page shows the recorded error");

    assert_eq!(b.alert_text().await, None);
    b.close().await;
}
