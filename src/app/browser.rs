//! Headless Chromium for agents (CodeBolt's browser and crawler actions): one browser per
//! byre, started on first use, with one browser context (its own cookies, storage and page)
//! per agent session.
//!
//! - The browser is Debian's `chromium` (`Config::chromium_bin`), started by argv in a process
//!   group of its own with a fresh profile under the data dir, driven over the DevTools
//!   protocol (`chromiumoxide`). `--no-sandbox` only when byre runs as root (Chromium's
//!   sandbox refuses root).
//! - No Chromium outlives what it serves: a session's context is closed when its agent
//!   process ends ([`Browsers::end_session`]), the browser itself when no session uses it any
//!   more and at byre's stop ([`Browsers::stop`]); dropped, it is killed. Its processes carry
//!   the reaper's marker and a pid file under `{data}/run/`, so a byre that was killed leaves
//!   nothing stale: the next start-up's `clear_leftovers` ends them.
//! - Every URL a page is sent to must pass the allow-list ([`allowed`]): by default loopback
//!   (`127.0.0.1`, `::1`, `localhost`, any port) and the task's own preview ports. A page that
//!   a redirect, a click or a script took off the list is blanked and the action refused
//!   (checked after each action that may move the page and before every other one). What a
//!   page on the list loads (images, scripts, fetches) is not filtered.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::page::{CaptureScreenshotFormat, PrintToPdfParams};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, Page};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::{Ctx, Error};

/// The allow-list's default: loopback, any port.
pub const DEFAULT_ALLOW: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// The viewport pages get, in CSS pixels.
const VIEWPORT: (u32, u32) = (1280, 800);

/// How long Chromium may take to print its DevTools address.
const LAUNCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long one page action may take (a navigation waits for the page's load).
const ACTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The browser of a byre and its sessions' contexts.
pub struct Browsers {
    bin: PathBuf,
    allow: Vec<String>,
    data_dir: PathBuf,
    chrome: tokio::sync::Mutex<Option<Arc<Chrome>>>,
    tabs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Tab>>>>,
}

/// A running Chromium.
struct Chrome {
    browser: Browser,
    pgid: i32,
    marker: String,
    pid_file: PathBuf,
    profile: PathBuf,
    handler: tokio::task::JoinHandle<()>,
    child: Mutex<Option<tokio::process::Child>>,
}

impl Drop for Chrome {
    fn drop(&mut self) {
        crate::vendors::kill_group(self.pgid);
        let marker = self.marker.clone();
        crate::vendors::reaper::kill_marked(|s| s == marker);
        self.handler.abort();
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One session's browser context and its page.
#[derive(Default)]
struct Tab {
    /// The browser the context lives in, and the context.
    context: Option<(Arc<Chrome>, BrowserContextId)>,
    page: Option<Page>,
    /// The task's preview ports, as last looked up.
    ports: std::ops::Range<u32>,
}

/// What a page shows: its URL and title.
#[derive(Debug, Clone)]
pub struct Shown {
    /// The page's URL.
    pub url: String,
    /// Its title.
    pub title: String,
}

/// A screenshot stored as a blob.
#[derive(Debug, Clone)]
pub struct Screenshot {
    /// The blob (`getBlob`).
    pub blob_id: String,
    /// The PNG.
    pub png: Vec<u8>,
    /// The page it shows.
    pub url: String,
}

impl Screenshot {
    /// The PNG in base64.
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.png)
    }
}

/// A scroll direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Towards the top.
    Up,
    /// Towards the bottom.
    Down,
    /// Towards the left.
    Left,
    /// Towards the right.
    Right,
}

impl Direction {
    /// `up`, `down`, `left`, `right` (any case); anything else is `None`.
    pub fn parse(s: &str) -> Option<Direction> {
        match s.trim().to_ascii_lowercase().as_str() {
            "up" => Some(Direction::Up),
            "down" | "" => Some(Direction::Down),
            "left" => Some(Direction::Left),
            "right" => Some(Direction::Right),
            _ => None,
        }
    }
}

/// Whether `url` may be opened: `about:blank`, or an http(s) URL whose host is on `allow`
/// (an entry `host` allows every port, `host:port` (`[::1]:port`) that port), or a loopback
/// URL on one of `preview_ports`.
/// # Errors
/// The reason, for the agent.
pub fn allowed(
    url: &str,
    allow: &[String],
    preview_ports: std::ops::Range<u32>,
) -> Result<(), String> {
    if url == "about:blank" {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "byre's browser opens http and https URLs only, not `{}:`",
            parsed.scheme()
        ));
    }
    let host = parsed
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = parsed.port_or_known_default().unwrap_or(0);
    let on_list = allow.iter().any(|entry| {
        let (h, p) = split_entry(entry);
        h.eq_ignore_ascii_case(&host) && p.is_none_or(|p| p == port)
    });
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if on_list || (loopback && preview_ports.contains(&u32::from(port))) {
        return Ok(());
    }
    Err(format!(
        "`{url}` is not on byre's browser allow-list (hosts {}, and the task's preview ports {}-{} on loopback): byre's browser is for checking the task's own servers",
        allow.join(", "),
        preview_ports.start,
        preview_ports.end.saturating_sub(1)
    ))
}

/// An allow-list entry's host and port (`host`, `host:port`, `[v6]:port`, `v6`).
fn split_entry(entry: &str) -> (&str, Option<u16>) {
    let e = entry.trim();
    if let Some(rest) = e.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').unwrap_or((rest, ""));
        return (h, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match e.split_once(':') {
        Some((h, p)) if !p.contains(':') => (h, p.parse().ok()),
        _ => (e, None),
    }
}

fn failed(what: &str) -> impl Fn(chromiumoxide::error::CdpError) -> Error + '_ {
    move |e| Error::Unavailable(format!("the browser could not {what}: {e}"))
}

async fn timed<T>(
    what: &str,
    f: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(ACTION_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| {
            Err(Error::Unavailable(format!(
                "the browser did not {what} within {} s",
                ACTION_TIMEOUT.as_secs()
            )))
        })
}

/// The DOM element an agent names: a CSS selector when it looks like one (`#`, `.`, `[`,
/// a space or `>`), else an element `id`, else the `data-byre-id` [`Browsers::snapshot`]
/// gave it.
fn selector_of(element: &str) -> String {
    let e = element.trim();
    if e.starts_with(['#', '.', '[']) || e.contains([' ', '>', ':']) {
        return e.to_owned();
    }
    let quoted = e.replace('\\', "\\\\").replace('"', "\\\"");
    format!("[id=\"{quoted}\"], [data-byre-id=\"{quoted}\"]")
}

impl Browsers {
    /// Browsers started from `bin`, pages limited to `allow` (and each task's preview ports),
    /// profiles and pid files under `data_dir`.
    pub fn new(bin: PathBuf, allow: Vec<String>, data_dir: PathBuf) -> Browsers {
        Browsers {
            bin,
            allow,
            data_dir,
            chrome: tokio::sync::Mutex::new(None),
            tabs: Mutex::new(HashMap::new()),
        }
    }

    /// The pid of the running Chromium, if one runs (for status and tests).
    pub async fn running_pid(&self) -> Option<i32> {
        self.chrome.lock().await.as_ref().map(|c| c.pgid)
    }

    fn tab(&self, session_id: &str) -> Arc<tokio::sync::Mutex<Tab>> {
        self.tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(session_id.to_owned())
            .or_default()
            .clone()
    }

    /// The running browser, started when none runs (or the last one died).
    async fn chrome(&self) -> Result<Arc<Chrome>, Error> {
        let mut slot = self.chrome.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.handler.is_finished() {
                return Ok(c.clone());
            }
        }
        *slot = None;
        let c = Arc::new(self.launch().await?);
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn launch(&self) -> Result<Chrome, Error> {
        let marker = format!("chromium-{}", uuid::Uuid::new_v4().simple());
        let run_dir = self.data_dir.join("run");
        let profile = self.data_dir.join("chromium").join(&marker);
        let _ = std::fs::create_dir_all(&run_dir);
        std::fs::create_dir_all(&profile).map_err(Error::internal)?;
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args([
            "--headless=new",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-component-update",
            "--disable-default-apps",
            "--metrics-recording-only",
            "--mute-audio",
            "--hide-scrollbars",
            "--password-store=basic",
            "--use-mock-keychain",
        ])
        .arg(format!("--window-size={},{}", VIEWPORT.0, VIEWPORT.1))
        .arg(format!("--user-data-dir={}", profile.display()));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--no-sandbox");
        }
        cmd.arg("about:blank")
            .env(crate::vendors::SESSION_ENV, &marker)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            Error::Unavailable(format!(
                "cannot start Chromium `{}` (install Debian's `chromium`, or set --chromium): {e}",
                self.bin.display()
            ))
        })?;
        let pgid = child.id().unwrap_or(0) as i32;
        let pid_file = run_dir.join(format!("{marker}.pgid"));
        let started = crate::vendors::reaper::start_time(pgid).unwrap_or(0);
        let _ = std::fs::write(&pid_file, format!("{pgid} {started}\n"));
        let guard = Guard {
            pgid,
            pid_file: pid_file.clone(),
            profile: profile.clone(),
            armed: true,
        };
        let Some(stderr) = child.stderr.take() else {
            return Err(Error::internal("Chromium's stderr is not piped"));
        };
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let found = tokio::time::timeout(LAUNCH_TIMEOUT, async {
            let mut said = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(at) = line.find("ws://") {
                    return Ok(line[at..].trim().to_owned());
                }
                said.push(line);
            }
            Err(said.join("\n"))
        })
        .await;
        let ws = match found {
            Ok(Ok(ws)) => ws,
            Ok(Err(said)) => {
                return Err(Error::Unavailable(format!(
                    "Chromium exited before it listened: {}",
                    said.chars().take(2000).collect::<String>()
                )))
            }
            Err(_) => {
                return Err(Error::Unavailable(format!(
                    "Chromium did not listen within {} s",
                    LAUNCH_TIMEOUT.as_secs()
                )))
            }
        };
        // The rest of its stderr is read (a full pipe would stall it) and dropped.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let config = chromiumoxide::handler::HandlerConfig {
            ignore_https_errors: false,
            viewport: Some(chromiumoxide::handler::viewport::Viewport {
                width: VIEWPORT.0,
                height: VIEWPORT.1,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (browser, mut handler) = Browser::connect_with_config(ws, config)
            .await
            .map_err(|e| Error::Unavailable(format!("cannot reach Chromium's DevTools: {e}")))?;
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    tracing::debug!(error = %e, "Chromium DevTools message");
                }
            }
        });
        let mut guard = guard;
        guard.armed = false;
        tracing::info!(pgid, "Chromium started for agents' browser actions");
        Ok(Chrome {
            browser,
            pgid,
            marker,
            pid_file,
            profile,
            handler,
            child: Mutex::new(Some(child)),
        })
    }

    /// The session's page, made when it has none; refused (and blanked) when something
    /// (a script, a late redirect) took it off the allow-list since the last action.
    async fn page(&self, tab: &mut Tab) -> Result<Page, Error> {
        let page = self.any_page(tab).await?;
        let url = shown(&page).await?.url;
        if let Err(why) = allowed(&url, &self.allow, tab.ports.clone()) {
            let _ = page.goto("about:blank").await;
            return Err(Error::Forbidden(format!(
                "the page went where byre's browser may not follow; it was blanked: {why}"
            )));
        }
        Ok(page)
    }

    /// The session's page wherever it is, made (with its context) when it has none.
    async fn any_page(&self, tab: &mut Tab) -> Result<Page, Error> {
        if let (Some((chrome, _)), Some(page)) = (&tab.context, &tab.page) {
            if !chrome.handler.is_finished() {
                return Ok(page.clone());
            }
        }
        self.open(tab).await
    }

    /// A new page for the session (the old one closed), in its context.
    async fn open(&self, tab: &mut Tab) -> Result<Page, Error> {
        if let Some(page) = tab.page.take() {
            let _ = page.close().await;
        }
        let live = tab
            .context
            .as_ref()
            .is_some_and(|(c, _)| !c.handler.is_finished());
        if !live {
            let chrome = self.chrome().await?;
            let id = chrome
                .browser
                .create_browser_context(CreateBrowserContextParams::default())
                .await
                .map_err(failed("make a browser context"))?;
            tab.context = Some((chrome, id));
        }
        let Some((chrome, id)) = &tab.context else {
            return Err(Error::internal("no browser context"));
        };
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = Some(id.clone());
        let page = chrome
            .browser
            .new_page(params)
            .await
            .map_err(failed("open a page"))?;
        tab.page = Some(page.clone());
        Ok(page)
    }

    fn preview_ports(app: &Ctx, task_id: &str) -> std::ops::Range<u32> {
        let base = app
            .writer
            .read(|s| s.tasks.get(task_id).map(|t| t.port_base))
            .unwrap_or(0);
        base..base + byre_projections::tasks::PORTS_PER_TASK
    }

    /// Refuses (and blanks) a page that left the allow-list.
    async fn still_allowed(&self, app: &Ctx, task_id: &str, page: &Page) -> Result<Shown, Error> {
        let shown = shown(page).await?;
        if let Err(why) = allowed(&shown.url, &self.allow, Self::preview_ports(app, task_id)) {
            let _ = page.goto("about:blank").await;
            return Err(Error::Forbidden(format!(
                "the page went where byre's browser may not follow; it was blanked: {why}"
            )));
        }
        Ok(shown)
    }

    /// `newPage`: a fresh, blank page for the session.
    /// # Errors
    /// Unavailable when Chromium cannot be started or driven.
    pub async fn new_page(&self, session_id: &str) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("open a page", async {
            let page = self.open(&mut tab).await?;
            shown(&page).await
        })
        .await
    }

    /// `goToPage`: the session's page goes to `url`, waiting for its load.
    /// # Errors
    /// Forbidden off the allow-list (also where a redirect led); unavailable when the
    /// browser fails, invalid when the page does not load.
    pub async fn go_to(
        &self,
        app: &Ctx,
        session_id: &str,
        task_id: &str,
        url: &str,
    ) -> Result<Shown, Error> {
        let ports = Self::preview_ports(app, task_id);
        allowed(url, &self.allow, ports.clone()).map_err(Error::Forbidden)?;
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = ports;
        timed("load the page", async {
            let page = self.any_page(&mut tab).await?;
            let loaded = page.goto(url).await;
            let at = shown(&page).await?;
            if at.url.starts_with("chrome-error:") {
                let _ = page.goto("about:blank").await;
                let why = loaded.err().map(|e| e.to_string()).unwrap_or_default();
                return Err(Error::Invalid(format!("`{url}` did not load: {why}")));
            }
            // Where a redirect led counts, not only what was asked for.
            let shown = self.still_allowed(app, task_id, &page).await?;
            loaded.map_err(|e| Error::Invalid(format!("`{url}` did not load: {e}")))?;
            Ok(shown)
        })
        .await
    }

    /// `getUrl`: the page's URL and title.
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn current(&self, session_id: &str) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("read the page", async {
            let page = self.page(&mut tab).await?;
            shown(&page).await
        })
        .await
    }

    /// `screenshot`: the page's viewport as a PNG, stored as a blob.
    /// # Errors
    /// Unavailable when the browser fails; too large past the blob limit.
    pub async fn screenshot(&self, app: &Ctx, session_id: &str) -> Result<Screenshot, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        let (png, url) = timed("take a screenshot", async {
            let page = self.page(&mut tab).await?;
            let png = page
                .screenshot(
                    ScreenshotParams::builder()
                        .format(CaptureScreenshotFormat::Png)
                        .build(),
                )
                .await
                .map_err(failed("take a screenshot"))?;
            Ok((png, shown(&page).await?.url))
        })
        .await?;
        let blob = super::blobs::upload_blob(
            app,
            &format!("agent:{session_id}"),
            bytes::Bytes::from(png.clone()),
        )
        .await?;
        Ok(Screenshot {
            blob_id: blob.id,
            png,
            url,
        })
    }

    /// `getHTML`: the page's HTML as it is now (scripts' changes included).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn html(&self, session_id: &str) -> Result<String, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("read the page", async {
            let page = self.page(&mut tab).await?;
            page.content().await.map_err(failed("read the page"))
        })
        .await
    }

    /// `getMarkdown`: the page's HTML as Markdown (`htmd`; scripts and styles left out).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn markdown(&self, session_id: &str) -> Result<String, Error> {
        let html = self.html(session_id).await?;
        tokio::task::spawn_blocking(move || {
            htmd::HtmlToMarkdown::builder()
                .skip_tags(vec!["script", "style", "noscript", "head"])
                .build()
                .convert(&html)
                .map_err(|e| Error::Invalid(format!("the page's HTML did not convert: {e}")))
        })
        .await
        .map_err(Error::internal)?
    }

    /// Evaluates `js` in the session's page; its JSON result.
    async fn eval(&self, session_id: &str, js: &str) -> Result<Value, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("run in the page", async {
            let page = self.page(&mut tab).await?;
            let r = page.evaluate(js).await.map_err(failed("run in the page"))?;
            Ok(r.value().cloned().unwrap_or(Value::Null))
        })
        .await
    }

    /// `extractText`, `getContent`: the text a reader sees (`innerText` of the body).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn text(&self, session_id: &str) -> Result<String, Error> {
        let v = self
            .eval(session_id, "document.body ? document.body.innerText : ''")
            .await?;
        Ok(match v {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        })
    }

    /// `getSnapShot`: the page's interactive elements (links, buttons, fields), each with the
    /// id [`Self::click`] and [`Self::type_into`] take: its own `id`, else one byre gives it
    /// (`data-byre-id`, `byre-<n>`).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn snapshot(&self, session_id: &str) -> Result<Value, Error> {
        const JS: &str = r#"(() => {
  const els = document.querySelectorAll('a, button, input, textarea, select, [role=button], [onclick], [contenteditable=true]');
  let n = 0;
  return Array.from(els).map((el) => {
    let id = el.id;
    if (!id) {
      id = el.getAttribute('data-byre-id') || `byre-${++n}`;
      el.setAttribute('data-byre-id', id);
    }
    const attributes = {};
    for (const a of el.attributes) attributes[a.name] = a.value;
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || el.getAttribute('placeholder') || '').trim().slice(0, 200);
    return { id, tag: el.tagName.toLowerCase(), text, attributes };
  });
})()"#;
        self.eval(session_id, JS).await
    }

    /// `getBrowserInfo`: the viewport's size, the scroll position, the URL and title.
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn info(&self, session_id: &str) -> Result<Value, Error> {
        self.eval(
            session_id,
            "({width: window.innerWidth, height: window.innerHeight, scrollX: window.scrollX, scrollY: window.scrollY, devicePixelRatio: window.devicePixelRatio, url: location.href, title: document.title, userAgent: navigator.userAgent})",
        )
        .await
    }

    /// `scroll`: by `pixels` in `direction`; the new scroll position.
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn scroll(
        &self,
        session_id: &str,
        direction: Direction,
        pixels: i64,
    ) -> Result<Value, Error> {
        let (x, y) = match direction {
            Direction::Up => (0, -pixels),
            Direction::Down => (0, pixels),
            Direction::Left => (-pixels, 0),
            Direction::Right => (pixels, 0),
        };
        self.eval(
            session_id,
            &format!(
                "window.scrollBy({x}, {y}); ({{scrollX: window.scrollX, scrollY: window.scrollY}})"
            ),
        )
        .await
    }

    /// Finds the element an agent names on the session's page.
    async fn element(page: &Page, element: &str) -> Result<chromiumoxide::Element, Error> {
        page.find_element(selector_of(element))
            .await
            .map_err(|_| Error::NotFound(format!("no element `{element}` on the page (getSnapShot lists the ids of its links, buttons and fields)")))
    }

    /// `click`: clicks the element (as a mouse does); where the page is then.
    /// # Errors
    /// Not found for an unknown element; forbidden when the click led off the allow-list.
    pub async fn click(
        &self,
        app: &Ctx,
        session_id: &str,
        task_id: &str,
        element: &str,
    ) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = Self::preview_ports(app, task_id);
        timed("click", async {
            let page = self.page(&mut tab).await?;
            Self::element(&page, element)
                .await?
                .click()
                .await
                .map_err(failed("click"))?;
            self.still_allowed(app, task_id, &page).await
        })
        .await
    }

    /// `type`: focuses the element and types `text` into it, key by key; `then_enter` presses
    /// Enter after (`search`).
    /// # Errors
    /// Not found for an unknown element; forbidden when Enter led off the allow-list.
    pub async fn type_into(
        &self,
        app: &Ctx,
        session_id: &str,
        task_id: &str,
        element: &str,
        text: &str,
        then_enter: bool,
    ) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = Self::preview_ports(app, task_id);
        timed("type", async {
            let page = self.page(&mut tab).await?;
            let el = Self::element(&page, element).await?;
            el.click().await.map_err(failed("focus the element"))?;
            el.type_str(text).await.map_err(failed("type"))?;
            if then_enter {
                el.press_key("Enter").await.map_err(failed("press Enter"))?;
            }
            self.still_allowed(app, task_id, &page).await
        })
        .await
    }

    /// `enter`: presses Enter in the focused element (the page's body when none is).
    /// # Errors
    /// Forbidden when Enter led off the allow-list.
    pub async fn enter(&self, app: &Ctx, session_id: &str, task_id: &str) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = Self::preview_ports(app, task_id);
        timed("press Enter", async {
            let page = self.page(&mut tab).await?;
            let el = match page.find_element(":focus").await {
                Ok(el) => el,
                Err(_) => page
                    .find_element("body")
                    .await
                    .map_err(failed("find the body"))?,
            };
            el.press_key("Enter").await.map_err(failed("press Enter"))?;
            self.still_allowed(app, task_id, &page).await
        })
        .await
    }

    /// `getPDF`: the page printed as a PDF.
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn pdf(&self, session_id: &str) -> Result<Vec<u8>, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("print the page", async {
            let page = self.page(&mut tab).await?;
            page.pdf(PrintToPdfParams::default())
                .await
                .map_err(failed("print the page"))
        })
        .await
    }

    /// `close`: closes the session's page (its context stays, for the next `newPage`).
    pub async fn close_page(&self, session_id: &str) {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        if let Some(page) = tab.page.take() {
            let _ = tokio::time::timeout(ACTION_TIMEOUT, page.close()).await;
        }
    }

    /// The session's agent process ended: its context goes, and the browser with it when no
    /// other session has one.
    pub async fn end_session(&self, session_id: &str) {
        let tab = self
            .tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session_id);
        if let Some(tab) = tab {
            let mut tab = tab.lock().await;
            tab.page = None;
            if let Some((chrome, id)) = tab.context.take() {
                let _ = tokio::time::timeout(
                    ACTION_TIMEOUT,
                    chrome.browser.dispose_browser_context(id),
                )
                .await;
            }
        }
        let mut slot = self.chrome.lock().await;
        let idle = self
            .tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if idle {
            if let Some(chrome) = slot.take() {
                drop(slot);
                shut(chrome).await;
            }
        }
    }

    /// byre stops: the browser goes, every context with it.
    pub async fn stop(&self) {
        self.tabs.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let chrome = self.chrome.lock().await.take();
        if let Some(chrome) = chrome {
            shut(chrome).await;
        }
    }
}

/// Kills a browser's process group and reaps its main process (waiting up to 5 s); the rest
/// happens when the last handle on it drops.
async fn shut(chrome: Arc<Chrome>) {
    crate::vendors::kill_group(chrome.pgid);
    let child = chrome
        .child
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(mut child) = child {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
    }
    let marker = chrome.marker.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for _ in 0..100 {
            if crate::vendors::reaper::kill_marked(|s| s == marker) == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
    .await;
    tracing::info!(pgid = chrome.pgid, "Chromium stopped");
}

async fn shown(page: &Page) -> Result<Shown, Error> {
    let url = page
        .url()
        .await
        .map_err(failed("read the page's URL"))?
        .unwrap_or_else(|| "about:blank".into());
    let title = page.get_title().await.ok().flatten().unwrap_or_default();
    Ok(Shown { url, title })
}

/// Kills and cleans up after a launch that failed half-way.
struct Guard {
    pgid: i32,
    pid_file: PathBuf,
    profile: PathBuf,
    armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            crate::vendors::kill_group(self.pgid);
            let _ = std::fs::remove_file(&self.pid_file);
            let _ = std::fs::remove_dir_all(&self.profile);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Vec<String> {
        DEFAULT_ALLOW.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn loopback_and_the_tasks_preview_ports_are_allowed_and_nothing_else() {
        let l = list();
        for ok in [
            "http://127.0.0.1:5000/x",
            "http://localhost/",
            "https://LOCALHOST:8443/a?b",
            "http://[::1]:9/",
            "about:blank",
        ] {
            assert_eq!(allowed(ok, &l, 0..0), Ok(()), "{ok}");
        }
        for bad in [
            "http://example.com/",
            "https://10.0.0.1/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/html,hi",
            "http://127.0.0.2.nip.io/",
            "not a url",
        ] {
            assert!(allowed(bad, &l, 0..0).is_err(), "{bad}");
        }
        // A narrowed list: one port, plus the task's preview ports on loopback.
        let narrow = vec!["127.0.0.1:3000".to_owned(), "[::1]:4000".to_owned()];
        assert_eq!(allowed("http://127.0.0.1:3000/", &narrow, 0..0), Ok(()));
        assert!(allowed("http://127.0.0.1:3001/", &narrow, 0..0).is_err());
        assert_eq!(allowed("http://[::1]:4000/", &narrow, 0..0), Ok(()));
        assert_eq!(
            allowed("http://127.0.0.2:41005/", &narrow, 41000..41010),
            Ok(())
        );
        assert!(allowed("http://example.com:41005/", &narrow, 41000..41010).is_err());
    }

    #[test]
    fn an_element_is_an_id_or_a_selector() {
        assert_eq!(selector_of("#go"), "#go");
        assert_eq!(selector_of("form > button"), "form > button");
        assert_eq!(selector_of("go"), "[id=\"go\"], [data-byre-id=\"go\"]");
        assert_eq!(Direction::parse("UP"), Some(Direction::Up));
        assert_eq!(Direction::parse("sideways"), None);
    }
}
