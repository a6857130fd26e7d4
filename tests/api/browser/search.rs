//! Search in the page: the project page's filter box narrows the task rows; ⌘K / Ctrl-K opens
//! the palette, which finds a task by a word of its transcript and opens the task at that
//! item (paging the transcript back to it), with the snippet drawn as text.

use byre_projections::sessions::{AgentText, VendorItem};
use byre_projections::Command;

use super::Browser;
use crate::helpers::{append_offline, local_ada, turn_ended, TestServer};

/// WebDriver's keys (the WebDriver spec's code points).
const CONTROL: char = '\u{E009}';
const RELEASE: char = '\u{E000}';
const ENTER: char = '\u{E007}';
const ESCAPE: char = '\u{E00C}';
const BACKSPACE: char = '\u{E003}';

fn text(n: usize, text: String) -> VendorItem {
    VendorItem::Text(AgentText {
        cut: None,
        text,
        message_id: format!("msg_{n}"),
        raw: String::new(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_palette_finds_a_task_by_a_transcript_word_and_opens_it_there() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    api.create_task(&project_id, "Alpha: tidy the docs").await;
    let task = api
        .create_task(&project_id, "Beta: speed up the build")
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let data = server.stop().await;
    // The word is in an early agent text: more than a page of events (300) come after it.
    let created = append_offline(
        data.path(),
        vec![Command::CreateSession {
            actor: "ada".into(),
            task_id: task_id.clone().into(),
            model: None,
            prompt: "Look at the build".into(),
            images: vec![],
            head: String::new(),
        }],
    )
    .await;
    let session = created[0]
        .iter()
        .find_map(|e| e.agent_session_id.clone())
        .unwrap();
    let mut items = vec![text(
        0,
        "The <img src=x data-evil=1> zeppelin cache was cold.".into(),
    )];
    items.extend((1..=400).map(|n| text(n, format!("Step {n} of the build, nothing to see."))));
    items.push(VendorItem::TurnEnded(turn_ended()));
    let recorded = append_offline(
        data.path(),
        vec![Command::RecordVendorOutput {
            session_id: session,
            items,
        }],
    )
    .await;
    let hit_seq = recorded[0]
        .iter()
        .find(|e| e.body.kind() == "agent.text")
        .unwrap()
        .seq;
    let server = TestServer::spawn_on(data, local_ada()).await;

    let b = Browser::open(&server.url).await;
    // The filter box keeps the rows whose title or branch has every word.
    b.goto(&format!("/projects/{project_id}")).await;
    b.testid("task-row", "").await;
    let filter = b.testid("task-filter", "").await;
    filter.send_keys("speed BUILD").await.unwrap();
    b.wait_js(
        "one row left",
        "document.querySelectorAll('[data-testid=task-row]').length === 1",
    )
    .await;
    let shown = b
        .js(
            "return document.querySelector('[data-testid=task-row]').dataset.taskId;",
            vec![],
        )
        .await;
    assert_eq!(shown, task_id.as_str());
    filter
        .send_keys(&format!("{CONTROL}a{RELEASE}{BACKSPACE}"))
        .await
        .unwrap();
    b.wait_js(
        "both rows back",
        "document.querySelectorAll('[data-testid=task-row]').length === 2",
    )
    .await;

    // The search button opens the palette and Escape closes it.
    b.testid("search-button", "").await.click().await.unwrap();
    let input = b.testid("palette-input", "").await;
    input.send_keys(&ESCAPE.to_string()).await.unwrap();
    b.wait_js(
        "the palette closes",
        "!document.querySelector('[data-testid=palette]')",
    )
    .await;

    // Ctrl-K, a word of the transcript, Enter: the task opens at that item.
    filter
        .send_keys(&format!("{CONTROL}k{RELEASE}"))
        .await
        .unwrap();
    let input = b.testid("palette-input", "").await;
    input.send_keys("zeppelin").await.unwrap();
    let hit = b
        .testid(
            "palette-item",
            &format!("[data-kind=item][data-seq=\"{hit_seq}\"]"),
        )
        .await;
    let snippet = hit
        .find(fantoccini::Locator::Css("[data-testid=palette-snippet]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        snippet.contains("<img src=x data-evil=1> zeppelin"),
        "{snippet}"
    );
    let unsafe_nodes = b
        .js(
            "return document.querySelectorAll('[data-testid=palette] img, [data-evil]').length;",
            vec![],
        )
        .await;
    assert_eq!(unsafe_nodes, 0, "a snippet is text, never HTML");
    b.screenshots("palette").await;
    let first = b
        .js(
            "return document.querySelector('[data-testid=palette-item][aria-selected=true]').dataset.seq;",
            vec![],
        )
        .await;
    assert_eq!(first, hit_seq.to_string(), "the only match is selected");
    input.send_keys(&ENTER.to_string()).await.unwrap();
    b.wait_path(&format!("/tasks/{task_id}?seq={hit_seq}"))
        .await;
    let item = format!("[data-testid=transcript] .vitem.target [data-seq=\"{hit_seq}\"]");
    b.wait_js(
        "the item is shown and marked, in view",
        &format!(
            "(() => {{ const el = document.querySelector('{item}'); if (!el) return false;\
               const box = document.querySelector('[data-testid=transcript]').getBoundingClientRect();\
               const r = el.getBoundingClientRect();\
               return r.top >= box.top - 1 && r.top < box.bottom && el.textContent.includes('zeppelin'); }})()"
        ),
    )
    .await;
    b.screenshots("search-hit").await;
    b.close().await;
}
