//! The browser and crawler families on byre's headless Chromium ([`crate::app::browser`]),
//! replies shaped as `@codebolt/codeboltjs` reads them (PROTOCOL.md §4: v1 resolves
//! `screenshot` with the reply's `payload` and `getHTML` with its `htmlResponse`).
//!
//! A screenshot is stored as a blob: the agent gets it inline (`payload.screenshot`, base64,
//! as CodeBolt sends it) and by id (`payload.blobId`); the log gets only the id (the reply's
//! `__logged` twin, its message naming `blob:<id>`, which the web UI shows as the image).
//! `getPDF`, `pdfToText`, `close` and most crawler actions are fire-and-forget: they act and
//! are logged, nothing is sent back.

use serde_json::{json, Value};

use byre_agents::codebolt::frames::{text, Request};
use super::{err, Ctx};
use crate::app::browser::{Direction, Shown};

/// How far a crawler scroll goes, in pixels (the client names only a direction).
const CRAWLER_SCROLL: i64 = 500;

/// Serves one `browserEvent` or `crawlerEvent` request.
pub async fn serve(ctx: &Ctx, req: &Request) -> Value {
    let f = &req.frame;
    let b = &ctx.app.browsers;
    let (session, task) = (ctx.link.session_id.as_str(), ctx.link.task_id.as_str());
    let app = &**ctx.app;
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
    let r = match (crawler, action) {
        (_, "newPage" | "start") => b.new_page(session).await.map(|s| moved(action, &s)),
        (_, "goToPage") => {
            let url = match f["url"].as_str() {
                Some(u) => u.to_owned(),
                None => text(&f["message"]["url"]),
            };
            b.go_to(app, session, task, &url)
                .await
                .map(|s| moved(action, &s))
        }
        (false, "getUrl") => b
            .current(session)
            .await
            .map(|s| json!({"url": s.url, "currentUrl": s.url, "title": s.title, "message": s.url})),
        (_, "screenshot") => b.screenshot(app, session).await.map(|shot| {
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
        }),
        (false, "getHTML") => b
            .html(session)
            .await
            .map(|h| json!({"htmlResponse": h, "html": h, "content": h})),
        (false, "getMarkdown") => b
            .markdown(session)
            .await
            .map(|m| json!({"markdown": m, "content": m})),
        (false, "getContent") => b
            .text(session)
            .await
            .map(|t| json!({"content": t, "text": t})),
        (false, "extractText") => b
            .text(session)
            .await
            .map(|t| json!({"text": t, "content": t})),
        (false, "getSnapShot") => b.snapshot(session).await.map(|els| {
            json!({"payload": {"action": "getSnapShot", "success": true, "tree": els, "elements": els}, "elements": els, "content": els.to_string()})
        }),
        (false, "getBrowserInfo") => b.info(session).await.map(|info| {
            json!({"info": info, "payload": {"action": "getBrowserInfo", "success": true, "info": info, "viewport": info}, "content": info.to_string()})
        }),
        (_, "scroll") => {
            let pixels = match &f["pixels"] {
                Value::Number(n) => n.as_i64(),
                other => text(other).trim().parse().ok(),
            };
            let pixels = pixels.unwrap_or(CRAWLER_SCROLL).clamp(-100_000, 100_000);
            match Direction::parse(&text(&f["direction"])) {
                Some(d) => b.scroll(session, d, pixels).await.map(|at| {
                    json!({"message": format!("scrolled to {at}"), "payload": {"action": "scroll", "success": true, "info": at}})
                }),
                None => Err(crate::app::Error::Invalid(format!(
                    "no scroll direction `{}`: up, down, left or right",
                    text(&f["direction"])
                ))),
            }
        }
        (_, "click") => b
            .click(app, session, task, &element())
            .await
            .map(|s| moved(action, &s)),
        (_, "type") => b
            .type_into(app, session, task, &element(), &text(&f["text"]), false)
            .await
            .map(|s| moved(action, &s)),
        (false, "search") => b
            .type_into(app, session, task, &element(), &text(&f["query"]), true)
            .await
            .map(|s| moved(action, &s)),
        (_, "enter") => b
            .enter(app, session, task)
            .await
            .map(|s| moved(action, &s)),
        (false, "close") => {
            b.close_page(session).await;
            Ok(json!({"message": "page closed"}))
        }
        (false, "getPDF") => b.pdf(session).await.map(|pdf| {
            json!({"message": format!("printed the page as a PDF of {} bytes (byre keeps no copy: blobs are images)", pdf.len())})
        }),
        (false, "pdfToText") => Err(crate::app::Error::NotImplemented(
            "byre does not turn PDFs into text (no maintained pure-Rust PDF text extractor fits); extractText and getMarkdown read the page itself".into(),
        )),
        (true, "crawl") => Err(crate::app::Error::NotImplemented(
            "byre's crawler does not search the web; goToPage a page on the allow-list".into(),
        )),
        _ => Err(crate::app::Error::NotImplemented(format!(
            "byre does not support `{}/{action}`",
            req.ty
        ))),
    };
    match r {
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

/// The reply to an action that leaves the page somewhere: its URL and title.
fn moved(action: &str, s: &Shown) -> Value {
    json!({
        "url": s.url,
        "title": s.title,
        "message": format!("{action}: at {} ({})", s.url, s.title),
        "payload": {"action": action, "success": true, "url": s.url},
    })
}
