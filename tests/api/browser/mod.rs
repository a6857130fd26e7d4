//! Browser tests: byre's page in real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), driven over WebDriver by `fantoccini`. Each test starts the real server
//! (port 0, `TestServer`) and its own `chromedriver` on a free port, in a process group of its
//! own that is killed when the [`Browser`] goes. The binaries come from `BYRE_CHROMIUM` and
//! `BYRE_CHROMEDRIVER`, else `PATH`; when they are missing and the tests run as root they are
//! installed with apt-get (as `.ci/run` does), otherwise the test fails saying how to get them.
//!
//! One browser session per test, and few tests: CI has 2 cores. Screenshots of each main view
//! at desktop (1280×800) and phone (390×844) width go to `target/screenshots/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use fantoccini::{elements::Element, Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{apt_get, on_path, WAIT};

mod cross_site;
mod discard;
mod fork;
mod hostile;
mod layout;
mod lead;
mod resume;
mod reviews;
mod signin;
mod speed;
mod stolen_cookie;
mod streamed;
mod subagents;
mod subtasks;
mod task_flow;
mod terminal;
mod todo;
mod workflows;

/// Desktop and phone viewports of the screenshots: (label, width, height).
pub const VIEWPORTS: [(&str, u32, u32); 2] = [("desktop", 1280, 800), ("phone", 390, 844)];

/// The Chromium and chromedriver programs.
#[derive(Clone, Debug)]
pub struct Programs {
    /// The browser.
    pub chromium: PathBuf,
    /// Its WebDriver server.
    pub chromedriver: PathBuf,
}

fn find_programs() -> Result<Programs, String> {
    let from_env = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let chromium = from_env("BYRE_CHROMIUM")
        .or_else(|| on_path(&["chromium", "chromium-browser", "google-chrome"]));
    let chromedriver = from_env("BYRE_CHROMEDRIVER").or_else(|| on_path(&["chromedriver"]));
    match (chromium, chromedriver) {
        (Some(chromium), Some(chromedriver)) => Ok(Programs {
            chromium,
            chromedriver,
        }),
        (c, d) => Err(format!(
            "the browser tests need Chromium and chromedriver (found chromium: {c:?}, chromedriver: {d:?}); \
             install them with `apt-get install chromium chromium-driver`, or name them with \
             BYRE_CHROMIUM and BYRE_CHROMEDRIVER"
        )),
    }
}

/// Finds Chromium and chromedriver, installing them with apt-get when missing and root.
/// # Panics
/// When they are missing and cannot be installed, with how to get them.
pub fn programs() -> Programs {
    static FOUND: OnceLock<Result<Programs, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            find_programs().or_else(|missing| {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    return Err(missing);
                }
                eprintln!("browser tests: installing chromium and chromium-driver with apt-get");
                apt_get(&["update", "-qq"])?;
                apt_get(&["install", "-y", "-qq", "chromium", "chromium-driver"])?;
                find_programs()
            })
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Where screenshots go: `<target>/screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("screenshots")
}

/// Percent-decodes `s` (invalid escapes kept as they are).
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Chrome DevTools command sent through chromedriver (`POST /session/{id}/goog/cdp/execute`).
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({ "cmd": self.cmd, "params": self.params }).to_string()),
        )
    }
}

/// An instrument for [`Browser::on_every_page`]: wraps `EventSource` so that every event the
/// page's streams receive is recorded, in order, in `window.__wire` (`{seq, kind, task_id}`;
/// live-only frames are not recorded), with `window.__opens` counting the `EventSource`s the
/// page made and `window.__connects` the connections they made (a reconnect counts again).
/// The page cannot tell: its own handlers get the same events.
pub const WIRE_TAP: &str = r#"
(() => {
  const Real = window.EventSource;
  window.__wire = [];
  window.__opens = 0;
  window.__connects = 0;
  window.EventSource = function (url, init) {
    const es = new Real(url, init);
    window.__opens++;
    es.addEventListener('open', () => { window.__connects++; });
    es.addEventListener('message', (m) => {
      try {
        const ev = JSON.parse(m.data);
        window.__wire.push({ seq: ev.seq, kind: ev.kind, task_id: ev.task_id || null, id: m.lastEventId });
      } catch (_) {}
    });
    return es;
  };
  window.EventSource.prototype = Real.prototype;
  window.EventSource.CONNECTING = Real.CONNECTING;
  window.EventSource.OPEN = Real.OPEN;
  window.EventSource.CLOSED = Real.CLOSED;
})();
"#;

/// An instrument for [`Browser::on_every_page`]: each distinct text the page's live-delta
/// element (`data-testid=live-delta`) shows, in order, in `window.__liveTexts`.
pub const LIVE_DELTA_WATCH: &str = r#"
(() => {
  window.__liveTexts = [];
  const look = () => {
    for (const el of document.querySelectorAll('[data-testid=live-delta]')) {
      const t = el.textContent.trim();
      const seen = window.__liveTexts;
      if (t && seen[seen.length - 1] !== t) seen.push(t);
    }
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true });
})();
"#;

/// A local server (user `ada`) whose Claude Code talks to the fake model scripted by
/// `fixtures/fake-model/u_browser.json`.
pub struct AgentBench {
    /// The server.
    pub server: crate::helpers::TestServer,
    /// The fake Messages API.
    pub fake: byre_fake_models::FakeAnthropic,
    /// The pinned Claude Code CLI.
    pub bin: PathBuf,
}

impl AgentBench {
    /// Starts the fake, installs the CLI (once) and starts byre.
    pub async fn start() -> AgentBench {
        let fake = byre_fake_models::FakeAnthropic::fixture("u_browser")
            .await
            .expect("fake API");
        let bin = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
            .await
            .expect("install the CLI");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let server =
            Self::spawn(listener, TempDir::new().expect("data dir"), &fake.url, &bin).await;
        AgentBench { server, fake, bin }
    }

    /// The `basic` project and a task on it whose first turn (`prompt`) ended in snapshot 1;
    /// (the project's repository, the task's id).
    pub async fn task_after_one_turn(&self, title: &str, prompt: &str) -> (TempDir, String) {
        let api = self.server.api();
        let (repo, project_id) = api.basic_project().await;
        let mut sse = api.events(&[], None).await;
        let task = api
            .create_task_with(
                &project_id,
                serde_json::json!({"title": title, "prompt": prompt}),
            )
            .await;
        let task_id = task["id"].as_str().unwrap().to_owned();
        tokio::time::timeout(
            crate::claude::TURN_WAIT,
            sse.until("snapshot 1", |e| {
                e.data["kind"] == "snapshot.taken" && e.data["task_id"] == task_id.as_str()
            }),
        )
        .await
        .expect("the turn's snapshot");
        (repo, task_id)
    }

    /// byre on `listener` and `data`, its agents on the fake.
    pub async fn spawn(
        listener: std::net::TcpListener,
        data: TempDir,
        fake_url: &str,
        bin: &Path,
    ) -> crate::helpers::TestServer {
        let (url, bin) = (fake_url.to_owned(), bin.to_owned());
        crate::helpers::TestServer::spawn_listening(
            listener,
            data,
            crate::helpers::local_ada(),
            move |c| {
                c.claude_bin = Some(bin);
                c.agent_env = vec![
                    ("ANTHROPIC_BASE_URL".into(), url),
                    ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
                    ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
                ];
            },
        )
        .await
    }

    /// Stops byre gracefully and starts it again on the same data dir and port, so open
    /// pages' streams drop and reconnect.
    pub async fn restart(self) -> AgentBench {
        let addr: std::net::SocketAddr = self
            .server
            .url
            .trim_start_matches("http://")
            .parse()
            .expect("the server's address");
        let data = self.server.stop().await;
        let deadline = tokio::time::Instant::now() + WAIT;
        let listener = loop {
            match std::net::TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("cannot listen on {addr} again: {e}"),
            }
        };
        let server = Self::spawn(listener, data, &self.fake.url, &self.bin).await;
        AgentBench {
            server,
            fake: self.fake,
            bin: self.bin,
        }
    }
}

/// A headless Chromium session on one byre server.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    /// byre's base URL.
    pub base: String,
    driver: Option<Child>,
    _profile: TempDir,
}

// Browser sessions start one at a time: two Chromiums starting at once on 2 cores time out.
static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Browser {
    /// Starts chromedriver and a headless Chromium at desktop size, for the server at `base`.
    pub async fn open(base: &str) -> Browser {
        let programs = programs();
        let profile = TempDir::new().expect("profile dir");
        let port = free_port();
        let log = std::fs::File::create(profile.path().join("chromedriver.log")).expect("log");
        let mut cmd = Command::new(&programs.chromedriver);
        cmd.arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let driver = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", programs.chromedriver.display()));
        let caps = json!({
            "browserName": "chrome",
            // Leave alerts open, so a test can see one a page should never have raised.
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": programs.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-breakpad",
                    "--disable-crash-reporter",
                    "--disable-extensions",
                    "--hide-scrollbars",
                    "--force-device-scale-factor=1",
                    "--window-size=1280,800",
                    format!("--user-data-dir={}", profile.path().join("profile").display()),
                ],
            },
        });
        let caps = match caps {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let webdriver = format!("http://127.0.0.1:{port}");
        let guard = STARTING.lock().await;
        let deadline = tokio::time::Instant::now() + WAIT * 2;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&webdriver)
                .await
            {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    let log = std::fs::read_to_string(profile.path().join("chromedriver.log"))
                        .unwrap_or_default();
                    panic!("no WebDriver session from chromedriver: {e}\n{log}");
                }
            }
        };
        drop(guard);
        let browser = Browser {
            client,
            base: base.trim_end_matches('/').to_owned(),
            driver: Some(driver),
            _profile: profile,
        };
        browser.set_viewport(1280, 800).await;
        browser
    }

    /// Runs `source` in every document this browser loads from now on, before the page's own
    /// scripts (Chrome DevTools' `Page.addScriptToEvaluateOnNewDocument`, through
    /// chromedriver; not subject to the page's CSP). For instruments such as [`WIRE_TAP`].
    pub async fn on_every_page(&self, source: &str) {
        self.client
            .issue_cmd(Cdp {
                cmd: "Page.addScriptToEvaluateOnNewDocument",
                params: json!({ "source": source }),
            })
            .await
            .expect("CDP addScriptToEvaluateOnNewDocument");
    }

    /// Loads `path` of byre.
    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("goto {path}: {e}"));
    }

    /// The current URL's path and query.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("current url");
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// Waits until the current path (and query) is `expected`, both percent-decoded (browsers
    /// differ in what they keep encoded).
    pub async fn wait_path(&self, expected: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let now = self.path().await;
            if decode(&now) == decode(expected) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "still at {now}, waiting for {expected}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the element with `data-testid` = `id` (CSS `extra` appended, e.g.
    /// `[data-state=open]`).
    pub async fn testid(&self, id: &str, extra: &str) -> Element {
        let css = format!("[data-testid=\"{id}\"]{extra}");
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(&css))
            .await
            .unwrap_or_else(|e| panic!("no element {css} within {WAIT:?}: {e}"))
    }

    /// Runs `body` (a function body; `arguments` are `args`) in the page; its return value.
    pub async fn js(&self, body: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(body, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{body}"))
    }

    /// Runs an async function body (awaits allowed) in the page; what it returns.
    pub async fn js_async(&self, body: &str, args: Vec<Value>) -> Value {
        let wrapped = format!(
            "const done = arguments[arguments.length - 1];\n\
             const args = Array.prototype.slice.call(arguments, 0, -1);\n\
             (async function() {{ {body} }}).apply(null, args)\n\
               .then(v => done({{ ok: v === undefined ? null : v }}), e => done({{ err: String(e && e.stack || e) }}));"
        );
        let out = self
            .client
            .execute_async(&wrapped, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{body}"));
        if let Some(err) = out.get("err") {
            panic!("script threw: {err}\n{body}");
        }
        out["ok"].clone()
    }

    /// Polls the expression `expr` in the page until it is truthy; its value.
    pub async fn wait_js(&self, what: &str, expr: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        let body = format!("return ({expr});");
        loop {
            let v = self.js(&body, vec![]).await;
            let truthy =
                !matches!(v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: `{expr}` still {v} after {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of an open alert, confirm or prompt, if any.
    pub async fn alert_text(&self) -> Option<String> {
        self.client.get_alert_text().await.ok()
    }

    /// Writes `<target>/screenshots/{name}-desktop.png` and `{name}-phone.png`, then returns
    /// to desktop size.
    pub async fn screenshots(&self, name: &str) {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        for (label, w, h) in VIEWPORTS {
            self.set_viewport(w, h).await;
            // Let layout settle: two animation frames after the resize.
            self.js_async(
                "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));",
                vec![],
            )
            .await;
            let png = self.client.screenshot().await.expect("screenshot");
            std::fs::write(dir.join(format!("{name}-{label}.png")), png).expect("write png");
        }
        self.set_viewport(1280, 800).await;
    }

    /// Sizes the window so that the page's viewport is `width`×`height` (the window's frame
    /// takes some of its size, differently per platform).
    pub async fn set_viewport(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("resize");
        let inner = self
            .js("return [window.innerWidth, window.innerHeight];", vec![])
            .await;
        let (iw, ih) = (
            inner[0].as_u64().unwrap_or(width as u64) as u32,
            inner[1].as_u64().unwrap_or(height as u64) as u32,
        );
        if (iw, ih) != (width, height) {
            self.client
                .set_window_size(
                    width + width.saturating_sub(iw),
                    height + height.saturating_sub(ih),
                )
                .await
                .expect("resize");
        }
    }

    /// Ends the WebDriver session and chromedriver.
    pub async fn close(mut self) {
        let client = self.client.clone();
        let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(mut driver) = self.driver.take() {
            // chromedriver and the Chromium it started share its process group.
            let pgid = driver.id() as i32;
            // SAFETY: kill has no memory preconditions; the group is ours and not yet reaped.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let _ = driver.wait();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}
