//! The task pane's Terminal tab: xterm.js on the task's shell. The test types a command into
//! the terminal as a user would (keys into xterm's input) and reads its output from the
//! screen; then the shell exits and Enter starts a new one.

use fantoccini::Locator;

use super::Browser;
use crate::helpers::{TestServer, WAIT};

/// The text on the terminal's screen.
const SCREEN: &str =
    "((document.querySelector('[data-testid=terminal] .xterm-rows') || {}).textContent || '')";

/// Waits for the terminal to connect; xterm's input, to type into.
async fn connected_input(b: &Browser) -> fantoccini::elements::Element {
    b.wait_js(
        "the terminal connects",
        "document.querySelector('[data-testid=terminal-status]').textContent === 'connected'",
    )
    .await;
    b.client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("[data-testid=terminal] textarea"))
        .await
        .expect("xterm's input")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_into_the_terminal_tab_runs_the_command_in_the_task_shell() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    let task = api.create_task(&project, "Terminal tab").await;
    let task_id = task["id"].as_str().unwrap().to_owned();

    let b = Browser::open(&server.url).await;
    // Every refusal of the page's CSP (each one a console error), as the page sees it.
    b.on_every_page(
        "window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => \
         window.__csp.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sample}`));",
    )
    .await;
    b.goto(&format!("/tasks/{task_id}/terminal")).await;
    b.testid("terminal", "").await;
    let input = connected_input(&b).await;
    input
        .send_keys("echo \"typed$((20+1)) $(basename $(pwd))\"\n")
        .await
        .expect("type into the terminal");
    let expected = format!("typed21 {task_id}");
    b.wait_js(
        "the command's output shows on the terminal",
        &format!("{SCREEN}.includes({expected:?})"),
    )
    .await;
    b.screenshots("terminal").await;
    // Coloured output (a 24-bit colour is an inline style on its cell) and the screen's own
    // styles: none refused by the CSP, and the styles apply (the rows have their height).
    input
        .send_keys("printf '\\033[38;2;200;100;50mtruecolour\\033[0m\\n'\n")
        .await
        .expect("type into the terminal");
    b.wait_js(
        "the coloured text shows, in its colour",
        "[...document.querySelectorAll('[data-testid=terminal] .xterm-rows span')].some(s => s.textContent.includes('truecolour') && getComputedStyle(s).color === 'rgb(200, 100, 50)')",
    )
    .await;
    let row_height = b
        .js(
            "const r = document.querySelector('[data-testid=terminal] .xterm-rows > div'); return r ? r.getBoundingClientRect().height : 0;",
            vec![],
        )
        .await;
    assert!(
        row_height.as_f64().unwrap_or(0.0) > 5.0,
        "xterm's styles apply: {row_height}"
    );
    assert_eq!(
        b.js("return window.__csp;", vec![]).await,
        serde_json::json!([]),
        "the terminal tab makes the CSP refuse nothing"
    );

    // The shell exits: the tab says so, and Enter opens a new one.
    input.send_keys("exit 3\n").await.expect("type exit");
    b.wait_js(
        "the tab shows the exit status",
        "document.querySelector('[data-testid=terminal-status]').textContent === 'exited (3)'",
    )
    .await;
    input.send_keys("\n").await.expect("press Enter");
    b.wait_js(
        "a new shell connects",
        "document.querySelector('[data-testid=terminal-status]').textContent === 'connected'",
    )
    .await;
    input
        .send_keys("echo \"again$((20+2))\"\n")
        .await
        .expect("type into the new shell");
    b.wait_js(
        "the new shell answers",
        &format!("{SCREEN}.includes('again22')"),
    )
    .await;

    // On a phone: the keys its keyboard lacks, above the screen. `cat -vT` shows what they
    // send: Esc, Tab, Ctrl then "a", the up arrow.
    assert_eq!(
        b.js("return getComputedStyle(document.querySelector('[data-testid=terminal-keys]')).display;", vec![]).await,
        serde_json::json!("none"),
        "no key bar on a desktop"
    );
    b.set_viewport(390, 844).await;
    b.testid("terminal-key-ctrl", "").await;
    let input = connected_input(&b).await;
    input.send_keys("cat -vT\n").await.expect("start cat");
    for key in ["esc", "tab", "ctrl"] {
        b.testid(&format!("terminal-key-{key}"), "")
            .await
            .click()
            .await
            .unwrap();
    }
    input.send_keys("a").await.expect("Ctrl-a");
    b.testid("terminal-key-up", "").await.click().await.unwrap();
    input.send_keys("\n").await.expect("end the line");
    b.wait_js(
        "cat shows the keys' bytes",
        &format!("{SCREEN}.includes('^[^I^A^[[A')"),
    )
    .await;
    assert_eq!(
        b.js("return window.__csp;", vec![]).await,
        serde_json::json!([]),
        "nor on a phone"
    );
    b.close().await;
    server.stop().await;
}
