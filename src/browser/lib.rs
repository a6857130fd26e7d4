//! byre-browser: headless Chromium for agents (CodeBolt's browser and crawler actions): one browser per
//! byre, started on first use, with one browser context (its own cookies, storage and page)
//! per agent session.
//!
//! - The browser is Debian's `chromium` (`serve --chromium`), started by argv in a process
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

#![warn(missing_docs)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::page::{CaptureScreenshotFormat, PrintToPdfParams};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;
use serde_json::Value;

use chrome::Chrome;
use rules::selector_of;
pub use rules::{allowed, Direction};

mod chrome;
mod rules;

/// A task's preview ports (its `port_base` and the ports after it), which its pages may open
/// beside the allow-list.
pub type Ports = std::ops::Range<u32>;

/// The allow-list's default: loopback, any port.
pub const DEFAULT_ALLOW: &[&str] = &["127.0.0.1", "::1", "localhost"];

/// The viewport pages get, in CSS pixels.
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

/// A screenshot of a page.
#[derive(Debug, Clone)]
pub struct Screenshot {
    /// The PNG.
    pub png: Vec<u8>,
    /// The page it shows.
    pub url: String,
}

/// Why a browser action failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Chromium could not be started or driven, or did not answer in time.
    #[error("{0}")]
    Unavailable(String),
    /// The URL, or where the page went, is off the allow-list.
    #[error("{0}")]
    Forbidden(String),
    /// The page did not load or convert.
    #[error("{0}")]
    Invalid(String),
    /// No such element on the page.
    #[error("{0}")]
    NotFound(String),
    /// Anything else: a bug, the cause for the log.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    fn internal(cause: impl std::fmt::Display) -> Error {
        Error::Internal(cause.to_string())
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
        let c = Arc::new(chrome::launch(&self.bin, &self.data_dir).await?);
        *slot = Some(c.clone());
        Ok(c)
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

    /// Refuses (and blanks) a page that left the allow-list.
    async fn still_allowed(&self, ports: Ports, page: &Page) -> Result<Shown, Error> {
        let shown = shown(page).await?;
        if let Err(why) = allowed(&shown.url, &self.allow, ports) {
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
    pub async fn go_to(&self, session_id: &str, ports: Ports, url: &str) -> Result<Shown, Error> {
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
            let shown = self.still_allowed(tab.ports.clone(), &page).await?;
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
    pub async fn screenshot(&self, session_id: &str) -> Result<Screenshot, Error> {
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
        Ok(Screenshot { png, url })
    }

    /// `getHTML`: the page's HTML as it is now (scripts' changes included), at most
    /// [`MAX_REPLY_BYTES`] of it ([`cut`]).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn html(&self, session_id: &str) -> Result<String, Error> {
        Ok(cut(self.whole_html(session_id).await?))
    }

    /// The page's whole HTML.
    async fn whole_html(&self, session_id: &str) -> Result<String, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        timed("read the page", async {
            let page = self.page(&mut tab).await?;
            page.content().await.map_err(failed("read the page"))
        })
        .await
    }

    /// `getMarkdown`: the page's HTML as Markdown (`htmd`; scripts and styles left out), at
    /// most [`MAX_REPLY_BYTES`] of it ([`cut`]).
    /// # Errors
    /// Unavailable when the browser fails.
    pub async fn markdown(&self, session_id: &str) -> Result<String, Error> {
        let html = self.whole_html(session_id).await?;
        tokio::task::spawn_blocking(move || {
            htmd::HtmlToMarkdown::builder()
                .skip_tags(vec!["script", "style", "noscript", "head"])
                .build()
                .convert(&html)
                .map(cut)
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
        Ok(cut(match v {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        }))
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
        session_id: &str,
        ports: Ports,
        element: &str,
    ) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = ports;
        timed("click", async {
            let page = self.page(&mut tab).await?;
            Self::element(&page, element)
                .await?
                .click()
                .await
                .map_err(failed("click"))?;
            self.still_allowed(tab.ports.clone(), &page).await
        })
        .await
    }

    /// `type`: focuses the element and types `text` into it, key by key; `then_enter` presses
    /// Enter after (`search`).
    /// # Errors
    /// Not found for an unknown element; forbidden when Enter led off the allow-list.
    pub async fn type_into(
        &self,
        session_id: &str,
        ports: Ports,
        element: &str,
        text: &str,
        then_enter: bool,
    ) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = ports;
        timed("type", async {
            let page = self.page(&mut tab).await?;
            let el = Self::element(&page, element).await?;
            el.click().await.map_err(failed("focus the element"))?;
            el.type_str(text).await.map_err(failed("type"))?;
            if then_enter {
                el.press_key("Enter").await.map_err(failed("press Enter"))?;
            }
            self.still_allowed(tab.ports.clone(), &page).await
        })
        .await
    }

    /// `enter`: presses Enter in the focused element (the page's body when none is).
    /// # Errors
    /// Forbidden when Enter led off the allow-list.
    pub async fn enter(&self, session_id: &str, ports: Ports) -> Result<Shown, Error> {
        let tab = self.tab(session_id);
        let mut tab = tab.lock().await;
        tab.ports = ports;
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
            self.still_allowed(tab.ports.clone(), &page).await
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
                chrome::shut(chrome).await;
            }
        }
    }

    /// byre stops: the browser goes, every context with it.
    pub async fn stop(&self) {
        self.tabs.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let chrome = self.chrome.lock().await.take();
        if let Some(chrome) = chrome {
            chrome::shut(chrome).await;
        }
    }
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

/// Most bytes of page content (`getHTML`, `getMarkdown`, `extractText`) an agent gets in one
/// reply, as `readFile` reads at most 16 MiB of a file.
pub const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

/// `text` whole when it is at most [`MAX_REPLY_BYTES`]; else its first bytes up to that (at a
/// character boundary) and a last line saying it was cut and how long it was, so an agent
/// never takes a part for the whole.
pub fn cut(mut text: String) -> String {
    if text.len() <= MAX_REPLY_BYTES {
        return text;
    }
    let total = text.len();
    let mut end = MAX_REPLY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[byre: cut here; the page's content is {total} bytes and a reply holds at most {MAX_REPLY_BYTES}]"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::{cut, MAX_REPLY_BYTES};

    #[test]
    fn content_up_to_the_limit_is_whole_and_beyond_it_is_cut_at_a_character_with_a_note() {
        let whole = "a".repeat(MAX_REPLY_BYTES);
        assert_eq!(cut(whole.clone()), whole);

        // A two-byte character straddles the limit: the cut falls before it, never inside.
        let long = format!("{}é{}", "a".repeat(MAX_REPLY_BYTES - 1), "b".repeat(10));
        let total = long.len();
        let got = cut(long);
        let (kept, note) = got.split_once('\n').expect("a note line");
        assert_eq!(kept, "a".repeat(MAX_REPLY_BYTES - 1));
        assert!(note.contains(&format!("{total} bytes")), "{note}");
        assert!(note.starts_with("[byre: cut here"), "{note}");
    }
}
