//! A task from start to merge through the page alone, on the real Claude Code CLI against the
//! fake model (`fixtures/fake-model/u_browser.json`): add a project, create a task with a
//! prompt and watch the agent's text stream in, answer its `ask_human` question in the inbox
//! form and see it act, read the change and its diff in the changes tab, merge it into a bare
//! origin. Screenshots of each view on the way.

use serde_json::json;

use super::{AgentBench, Browser, LIVE_DELTA_WATCH, WIRE_TAP};

use crate::helpers::git;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_from_prompt_to_merge_through_the_page() {
    let bench = AgentBench::start().await;
    let repo = crate::helpers::make_repo("basic");
    let origin = tempfile::TempDir::new().unwrap();
    git(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
    git(
        repo.path(),
        &["remote", "add", "origin", origin.path().to_str().unwrap()],
    );
    git(repo.path(), &["push", "-q", "origin", "main"]);
    let api = bench.server.api();
    let r = api
        .call(
            "updateMe",
            &[],
            &[],
            Some(json!({"git_name": "Ada Lovelace", "git_email": "ada@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200);

    let b = Browser::open(&bench.server.url).await;
    b.on_every_page(WIRE_TAP).await;
    b.on_every_page(LIVE_DELTA_WATCH).await;
    b.goto("/").await;
    b.testid("project-add-form", "").await;
    b.wait_js(
        "the page's stream is live",
        "document.body.dataset.stream === 'live'",
    )
    .await;

    // A wrong path: the server's refusal, shown as is.
    let path_input = b.testid("project-add-path", "").await;
    path_input.send_keys("/no/such/repository").await.unwrap();
    b.testid("project-add-submit", "")
        .await
        .click()
        .await
        .unwrap();
    let error = b.testid("project-add-error", "").await;
    let shown = error.text().await.unwrap();
    let server_says = api
        .call(
            "createProject",
            &[],
            &[],
            Some(json!({"name": "repository", "repo_path": "/no/such/repository"})),
        )
        .await;
    assert_eq!(server_says.status, 400);
    assert_eq!(shown, server_says.message());

    // Add the project.
    let path_input = b.testid("project-add-path", "").await;
    path_input.clear().await.unwrap();
    path_input
        .send_keys(repo.path().to_str().unwrap())
        .await
        .unwrap();
    let name_input = b.testid("project-add-name", "").await;
    name_input.clear().await.unwrap();
    name_input.send_keys("basic").await.unwrap();
    b.testid("project-add-submit", "")
        .await
        .click()
        .await
        .unwrap();
    // The page goes to the new project.
    let path = b
        .wait_js(
            "the project's page",
            "location.pathname.startsWith('/projects/') && location.pathname.split('/')[2]",
        )
        .await;
    let project_id = path.as_str().unwrap().to_owned();
    b.goto("/").await;
    b.testid(
        "project-item",
        &format!("[data-project-id=\"{project_id}\"]"),
    )
    .await;
    b.screenshots("projects").await;

    // A task with a prompt, on the real CLI: its text streams in live.
    b.goto(&format!("/projects/{project_id}/new")).await;
    b.testid("new-task-title", "")
        .await
        .send_keys("colour")
        .await
        .unwrap();
    b.testid("new-task-prompt", "")
        .await
        .send_keys("Please pick a colour for colour.txt")
        .await
        .unwrap();
    b.screenshots("new-task").await;
    b.testid("new-task-submit", "").await.click().await.unwrap();
    let view = b.testid("task-view", "").await;
    let task_id = view.attr("data-task-id").await.unwrap().unwrap();
    let first = b.testid("item-agent-text", "").await.text().await.unwrap();
    assert!(first.contains("I need the humans' decision."), "{first}");
    // Before the finished text, the page showed it growing, piece by piece.
    let live: Vec<String> =
        serde_json::from_value(b.js("return window.__liveTexts;", vec![]).await).unwrap();
    assert!(
        live.len() >= 2,
        "the live text was drawn at least twice while it streamed: {live:?}"
    );
    assert!(
        live.windows(2)
            .any(|w| w[1].len() > w[0].len() && w[1].starts_with(w[0].as_str())),
        "it grew: {live:?}"
    );
    assert!(
        live.iter().all(|t| "Let me look at colour.txt first. It needs a colour, and picking one is a decision I should not make alone, so I need the humans' decision.".starts_with(t.as_str())),
        "{live:?}"
    );
    b.screenshots("task").await;

    // The question, answered through the inbox form; the agent acts on the answer.
    b.testid("pane-tab-inbox", "").await.click().await.unwrap();
    let question = b
        .testid("inbox-item", "[data-kind=question][data-state=open]")
        .await;
    let text = question
        .find(fantoccini::Locator::Css("[data-testid=inbox-question]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text, "Which colour should colour.txt hold?");
    b.screenshots("inbox").await;
    b.testid("inbox-choice", "[value=blue]")
        .await
        .click()
        .await
        .unwrap();
    b.testid("inbox-submit", "").await.click().await.unwrap();
    b.wait_js(
        "the agent's answer to the answer",
        "[...document.querySelectorAll('[data-testid=item-agent-text]')].some(e => e.textContent.includes('Wrote colour.txt.'))",
    )
    .await;
    let inbox = api.call("listInbox", &[], &[], None).await;
    assert_eq!(inbox.body, json!([]), "nothing left open");

    // Edits as diffs: the Write and the Edit of colour.txt show their lines, not JSON.
    let edits = b
        .wait_js(
            "the Edit call's diff",
            "(() => { const out = {}; for (const c of document.querySelectorAll('[data-testid=item-tool-call]')) {
               const name = c.querySelector('[data-testid=tool-name]').textContent;
               const d = c.querySelector('[data-testid=tool-diff]');
               out[name] = !d ? 'no diff' : { path: d.dataset.path,
                 add: [...d.querySelectorAll('[data-testid=tool-diff-add] td.code')].map(e => e.textContent),
                 del: [...d.querySelectorAll('[data-testid=tool-diff-del] td.code')].map(e => e.textContent),
                 json: !!c.querySelector('[data-testid=tool-input]') }; }
               return out.Edit && out.Write && out; })()",
        )
        .await;
    assert_eq!(
        edits["Edit"],
        json!({"path": "colour.txt", "add": ["+navy blue"], "del": ["−blue"], "json": false}),
        "{edits}"
    );
    assert_eq!(
        edits["Write"],
        json!({"path": "colour.txt", "add": ["+blue"], "del": [], "json": false}),
        "{edits}"
    );
    // byre's own tool is named as byre's.
    assert_eq!(edits["byre · ask_human"], json!("no diff"), "{edits}");
    assert!(
        !b.js("return document.querySelector('[data-testid=transcript]').textContent.includes('mcp__byre__');", vec![])
            .await
            .as_bool()
            .unwrap(),
        "no raw MCP name in the transcript"
    );
    // The inbox answer is one line: ada's answer, not also the message handing it over.
    let answers = b
        .js(
            "return { answers: [...document.querySelectorAll('[data-testid=item-answer]')].map(e => e.textContent.trim()),
                      handed: [...document.querySelectorAll('[data-testid=item-user-message]')].filter(e => e.textContent.includes('Answer to your question')).length };",
            vec![],
        )
        .await;
    assert_eq!(
        answers,
        json!({"answers": ["ada answered blue"], "handed": 0}),
        "one line per answer"
    );

    // The change and its diff.
    b.wait_js(
        "the end-of-turn snapshot",
        "document.querySelector('[data-testid=task-view]').dataset.state !== 'working'",
    )
    .await;
    b.testid("pane-tab-changes", "")
        .await
        .click()
        .await
        .unwrap();
    let file = b.testid("changes-file", "[data-path=\"colour.txt\"]").await;
    file.click().await.unwrap();
    let diff = b.testid("diff", "[data-path=\"colour.txt\"]").await;
    let added = diff
        .find_all(fantoccini::Locator::Css("[data-testid=diff-add]"))
        .await
        .unwrap();
    let mut added_text = Vec::new();
    for a in added {
        added_text.push(a.text().await.unwrap());
    }
    assert!(
        added_text.iter().any(|t| t.contains("blue")),
        "{added_text:?}"
    );
    b.screenshots("changes").await;

    // The project's tasks.
    b.testid("task-header-branch", "").await;
    b.js(
        "history.pushState(null, '', arguments[0]); dispatchEvent(new PopStateEvent('popstate'));",
        vec![json!(format!("/projects/{project_id}"))],
    )
    .await;
    b.testid("task-row", &format!("[data-task-id=\"{task_id}\"]"))
        .await;
    b.screenshots("tasks").await;
    b.testid("task-row", &format!("[data-task-id=\"{task_id}\"]"))
        .await
        .click()
        .await
        .unwrap();
    b.testid("task-view", "").await;

    // The status page names the task's agent by the task's title, loaded by itself.
    b.goto("/status").await;
    b.wait_js(
        "the agent's row names its task",
        "(document.querySelector('[data-testid=status-agents]') || {}).textContent?.includes('colour')",
    )
    .await;
    // Back in the same document: each page load keeps its event stream until the browser
    // lets it go, and the browser allows few connections to one host.
    b.js(
        "history.pushState(null, '', arguments[0]); dispatchEvent(new PopStateEvent('popstate'));",
        vec![json!(format!("/tasks/{task_id}"))],
    )
    .await;
    // "Update from main" says which way; Discard says it costs an agent turn.
    let merge_in = b.testid("merge-in-button", "").await.text().await.unwrap();
    assert_eq!(merge_in, "Update from main");
    b.testid("discard-button", "").await.click().await.unwrap();
    let cost = b.testid("discard-cost", "").await.text().await.unwrap();
    assert!(cost.contains("one more agent turn"), "{cost}");
    b.client
        .find(fantoccini::Locator::Css(
            "[data-testid=discard-dialog] .actions button",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The task is among the sidebar's active tasks until it is merged.
    let in_sidebar = format!(
        "!!document.querySelector('.side-tasks [data-testid=task-row][data-task-id=\"{task_id}\"]')"
    );
    b.wait_js("the task among the active ones", &in_sidebar)
        .await;

    // Merge into the bare origin.
    b.testid("merge-button", "").await.click().await.unwrap();
    let title = b.testid("merge-title", "").await;
    assert_eq!(
        title.prop("value").await.unwrap().as_deref(),
        Some("colour")
    );
    // Typed as a person would (WebDriver's clear() bypasses the page's input handlers):
    // end, six backspaces, the new title.
    title
        .send_keys(&format!(
            "\u{E010}{}Pick blue for colour.txt",
            "\u{E003}".repeat(6)
        ))
        .await
        .unwrap();
    b.screenshots("merge").await;
    b.testid("merge-confirm", "").await.click().await.unwrap();
    b.testid("item-merge", "[data-kind=\"task.merged\"]").await;
    // It leaves the sidebar's active tasks at once, from the event.
    assert_eq!(
        b.js(&format!("return {in_sidebar};"), vec![]).await,
        json!(false),
        "a merged task is no longer listed as active"
    );
    let tip = git(origin.path(), &["rev-parse", "main"]);
    assert_eq!(
        git(origin.path(), &["log", "-1", "--format=%s", &tip]),
        "Pick blue for colour.txt"
    );
    assert_eq!(
        git(origin.path(), &["show", &format!("{tip}:colour.txt")]),
        "navy blue"
    );
    let task = api.call("getTask", &[&task_id], &[], None).await;
    assert_eq!(task.body["status"], "merged", "{:?}", task.body);

    // The status page lists this page with the commit byre was built from.
    b.js(
        "history.pushState(null, '', arguments[0]); dispatchEvent(new PopStateEvent('popstate'));",
        vec![json!("/status")],
    )
    .await;
    let clients = b.testid("status-clients", "").await.text().await.unwrap();
    assert!(
        clients.contains(byre::BUILD_COMMIT.get(..7).unwrap_or(byre::BUILD_COMMIT)),
        "{clients}"
    );
    b.screenshots("status").await;

    // A refused request's error shows once: where it happened, not again as a toast.
    b.js(
        "history.pushState(null, '', arguments[0]); dispatchEvent(new PopStateEvent('popstate'));",
        vec![json!("/tasks/no-such-task")],
    )
    .await;
    let refused = api.call("getTask", &["no-such-task"], &[], None).await;
    assert_eq!(refused.status, 404);
    let message = refused.message();
    b.wait_js(
        "the task page's error",
        &format!("[...document.querySelectorAll('[role=alert]')].some(e => e.textContent.includes({message:?}))"),
    )
    .await;
    // The toast would be told in a task queued when the request failed, before the error
    // was drawn: a task queued now runs after it.
    b.js_async("await new Promise(r => setTimeout(r, 0));", vec![])
        .await;
    let shown = b
        .js(
            &format!("return [...document.querySelectorAll('[role=alert]')].filter(e => e.textContent.includes({message:?})).length;"),
            vec![],
        )
        .await;
    assert_eq!(shown, json!(1), "the refusal shown once");
    assert_eq!(b.alert_text().await, None);
    b.close().await;
}
