//! The browser and crawler families on byre's headless Chromium (byre-browser; a task's
//! preview ports and a screenshot's blob through [`byre_app::browser`]),
//! replies shaped as `@codebolt/codeboltjs` reads them (PROTOCOL.md §4: v1 resolves
//! `screenshot` with the reply's `payload` and `getHTML` with its `htmlResponse`).
//!
//! A screenshot is stored as a blob: the agent gets it inline (`payload.screenshot`, base64,
//! as CodeBolt sends it) and by id (`payload.blobId`); the log gets only the id (the reply's
//! `__logged` twin, its message naming `blob:<id>`, which the web UI shows as the image).
//! `getPDF`, `pdfToText`, `close` and most crawler actions are fire-and-forget: they act and
//! are logged, nothing is sent back.

use serde_json::{json, Value};

use super::{err, Ctx};
use byre_agents::codeboltjs::frames::{text, Request};
use byre_app::{browser, Error};
use byre_browser::{Direction, Shown};

/// How far a crawler scroll goes, in pixels (the client names only a direction).
const CRAWLER_SCROLL: i64 = 500;

/// Serves one `browserEvent` or `crawlerEvent` request.
pub async fn serve(ctx: &Ctx, req: &Request) -> Value {
    let action = req.action.as_str();
    match act(ctx, req).await {
        Ok(v) => v,
        Err(e) => {
            let m = e.to_string();
            let mut v = err(m.clone());
            // v1's screenshot and snapshot callers read `payload`.
            v["payload"] = json!({"action": action, "success": false, "error": m});
            v
        }
    }
}

/// The reply fields of one browser or crawler request, or why it failed.
async fn act(ctx: &Ctx, req: &Request) -> Result<Value, Error> {
    let f = &req.frame;
    let b = &*ctx.browsers;
    let (session, task) = (ctx.link.session_id.as_str(), ctx.link.task_id.as_str());
    let app = &**ctx.app;
    let ports = || browser::preview_ports(app, task);
    let element = || {
        let e = text(&f["elementid"]);
        if e.is_empty() {
            text(&f["id"])
        } else {
            e
        }
    };
    let crawler = req.ty == "crawlerEvent";
    let action = req.action.as_str();
    Ok(match (crawler, action) {
        (_, "newPage" | "start") => moved(action, &b.new_page(session).await?),
        (_, "goToPage") => {
            let url = match f["url"].as_str() {
                Some(u) => u.to_owned(),
                None => text(&f["message"]["url"]),
            };
            moved(action, &b.go_to(session, ports(), &url).await?)
        }
        (false, "getUrl") => {
            let s = b.current(session).await?;
            json!({"url": s.url, "currentUrl": s.url, "title": s.title, "message": s.url})
        }
        (_, "screenshot") => {
            let shot = browser::screenshot(app, b, session).await?;
            let message = format!(
                "screenshot of {} (PNG, {} bytes): blob:{}",
                shot.url,
                shot.png.len(),
                shot.blob_id
            );
            let payload = |screenshot: Value| {
                json!({"action": "screenshot", "success": true, "screenshot": screenshot, "blobId": shot.blob_id, "url": shot.url, "fullPage": false})
            };
            json!({
                "payload": payload(shot.base64().into()),
                "blobId": shot.blob_id,
                "message": message,
                "__logged": {"payload": payload(format!("blob:{}", shot.blob_id).into()), "blobId": shot.blob_id, "message": message},
            })
        }
        (false, "getHTML") => {
            let h = b.html(session).await?;
            json!({"htmlResponse": h, "html": h, "content": h})
        }
        (false, "getMarkdown") => {
            let m = b.markdown(session).await?;
            json!({"markdown": m, "content": m})
        }
        (false, "getContent") => {
            let t = b.text(session).await?;
            json!({"content": t, "text": t})
        }
        (false, "extractText") => {
            let t = b.text(session).await?;
            json!({"text": t, "content": t})
        }
        (false, "getSnapShot") => {
            let els = b.snapshot(session).await?;
            json!({"payload": {"action": "getSnapShot", "success": true, "tree": els, "elements": els}, "elements": els, "content": els.to_string()})
        }
        (false, "getBrowserInfo") => {
            let info = b.info(session).await?;
            json!({"info": info, "payload": {"action": "getBrowserInfo", "success": true, "info": info, "viewport": info}, "content": info.to_string()})
        }
        (_, "scroll") => {
            let pixels = match &f["pixels"] {
                Value::Number(n) => n.as_i64(),
                other => text(other).trim().parse().ok(),
            };
            let pixels = pixels.unwrap_or(CRAWLER_SCROLL).clamp(-100_000, 100_000);
            let Some(d) = Direction::parse(&text(&f["direction"])) else {
                return Err(Error::Invalid(format!(
                    "no scroll direction `{}`: up, down, left or right",
                    text(&f["direction"])
                )));
            };
            let at = b.scroll(session, d, pixels).await?;
            json!({"message": format!("scrolled to {at}"), "payload": {"action": "scroll", "success": true, "info": at}})
        }
        (_, "click") => moved(action, &b.click(session, ports(), &element()).await?),
        (_, "type") => moved(
            action,
            &b.type_into(session, ports(), &element(), &text(&f["text"]), false)
                .await?,
        ),
        (false, "search") => moved(
            action,
            &b.type_into(session, ports(), &element(), &text(&f["query"]), true)
                .await?,
        ),
        (_, "enter") => moved(action, &b.enter(session, ports()).await?),
        (false, "close") => {
            b.close_page(session).await;
            json!({"message": "page closed"})
        }
        (false, "getPDF") => {
            let pdf = b.pdf(session).await?;
            json!({"message": format!("printed the page as a PDF of {} bytes (byre keeps no copy: blobs are images)", pdf.len())})
        }
        (false, "pdfToText") => return Err(Error::NotImplemented(
            "byre does not turn PDFs into text (no maintained pure-Rust PDF text extractor fits); extractText and getMarkdown read the page itself".into(),
        )),
        (true, "crawl") => return Err(Error::NotImplemented(
            "byre's crawler does not search the web; goToPage a page on the allow-list".into(),
        )),
        _ => {
            return Err(Error::NotImplemented(format!(
                "byre does not support `{}/{action}`",
                req.ty
            )))
        }
    })
}

/// The reply to an action that leaves the page somewhere: its URL and title.
fn moved(action: &str, s: &Shown) -> Value {
    json!({
        "url": s.url,
        "title": s.title,
        "message": format!("{action}: at {} ({})", s.url, s.title),
        "payload": {"action": action, "success": true, "url": s.url},
    })
}
