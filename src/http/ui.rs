//! The web UI's assets (`src/ui/`), embedded in the binary, and the page for client-side
//! routes.
//!
//! Every file the browser loads is in [`ASSETS`], compiled in with `include_bytes!`, so
//! `cargo run` serves the UI with nothing to build and nothing fetched at run time. Caching:
//! every answer is `Cache-Control: no-cache` with a strong `ETag` (the SHA-256 of the bytes),
//! and a matching `If-None-Match` gets `304`: a reload revalidates each module in one
//! round trip and never runs a stale one after an upgrade, with no build step to put content
//! hashes into file names. Every answer carries the Content-Security-Policy of `security::CONTENT_SECURITY_POLICY` (added by that middleware), which forbids inline script. Any
//! other GET outside `/api/`, `/internal/` and the CodeBolt socket
//! paths that does not look like a file (no extension in its last segment) answers
//! `index.html`, so a reload on a client-side route (`/tasks/{id}`) works; everything else
//! falls through to the JSON 404.

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

/// One embedded file: its URL path, its content type, its bytes.
pub struct Asset {
    /// The path it is served at, e.g. `/js/main.js`.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes, from `src/ui/`.
    pub bytes: &'static [u8],
}

macro_rules! assets {
    ($($path:literal => $ty:expr),* $(,)?) => {
        &[$(Asset { path: concat!("/", $path), content_type: $ty, bytes: include_bytes!(concat!("../ui/", $path)) }),*]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the UI (a test checks that each `.html`, `.css`, `.js`, `.mjs` and `.svg`
/// under `src/ui/` is listed).
pub static ASSETS: &[Asset] = assets![
    "index.html" => "text/html; charset=utf-8",
    "app.css" => "text/css; charset=utf-8",
    "favicon.svg" => "image/svg+xml",
    "js/main.js" => JS,
    "js/router.js" => JS,
    "js/api.js" => JS,
    "js/store.js" => JS,
    "js/html.js" => JS,
    "js/markdown.js" => JS,
    "js/vlist.js" => JS,
    "js/util.js" => JS,
    "js/reviews.js" => JS,
    "js/views/layout.js" => JS,
    "js/views/projects.js" => JS,
    "js/views/tasks.js" => JS,
    "js/views/task.js" => JS,
    "js/views/transcript.js" => JS,
    "js/views/items.js" => JS,
    "js/views/composer.js" => JS,
    "js/views/pane.js" => JS,
    "js/views/eventlog.js" => JS,
    "js/views/changes.js" => JS,
    "js/views/files.js" => JS,
    "js/views/inbox.js" => JS,
    "js/views/finish.js" => JS,
    "js/views/reviews.js" => JS,
    "js/views/todo.js" => JS,
    "js/views/subtasks.js" => JS,
    "js/views/status.js" => JS,
    "js/views/workflow.js" => JS,
    "js/views/workflows.js" => JS,
    "js/views/lead.js" => JS,
    "js/lead.js" => JS,
    "js/views/terminal.js" => JS,
    "js/views/tooldiff.js" => JS,
    "js/views/termkeys.js" => JS,
    "vendor/preact.module.js" => JS,
    "vendor/hooks.module.js" => JS,
    "vendor/htm.module.js" => JS,
    "vendor/marked.esm.js" => JS,
    "vendor/purify.es.mjs" => JS,
    "vendor/xterm.mjs" => JS,
    "vendor/addon-fit.mjs" => JS,
    "vendor/jsdiff/diff/line.js" => JS,
    "vendor/jsdiff/diff/base.js" => JS,
    "vendor/jsdiff/util/params.js" => JS,
    "vendor/xterm.css" => "text/css; charset=utf-8",
];

/// The `ETag` of each asset, in [`ASSETS`] order, computed once.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.bytes);
                let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

/// Paths that belong to the API or to agents, never to the app.
fn is_reserved(path: &str) -> bool {
    path == "/api"
        || path.starts_with("/api/")
        || path.starts_with("/internal/")
        || ["/codebolt", "/agent-to-app", "/app-to-agent"].contains(&path)
}

/// The answer for a GET or HEAD that no route matched, when it is the UI's: an asset, or the
/// app's page for a client-side route. `None` for everything else (then the JSON 404).
pub fn serve(req: &HttpRequest) -> Option<HttpResponse> {
    if req.method() != actix_web::http::Method::GET && req.method() != actix_web::http::Method::HEAD
    {
        return None;
    }
    let path = req.path();
    if is_reserved(path) {
        return None;
    }
    let index = match ASSETS.iter().position(|a| a.path == path) {
        Some(i) => i,
        None => {
            let last = path.rsplit('/').next().unwrap_or("");
            if last.contains('.') {
                return None; // a missing file, not a route
            }
            ASSETS.iter().position(|a| a.path == "/index.html")?
        }
    };
    let asset = &ASSETS[index];
    let etag = &etags()[index];
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut res = if matches {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    res.insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::ETAG, etag.as_str()))
        .insert_header(("X-Content-Type-Options", "nosniff"));
    if matches {
        return Some(res.finish());
    }
    Some(res.content_type(asset.content_type).body(asset.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_under(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files_under(&path, root, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(format!("/{rel}"));
            }
        }
    }

    #[test]
    fn every_file_the_browser_loads_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ui");
        let mut files = Vec::new();
        files_under(&root, &root, &mut files);
        for f in files {
            let served = [".html", ".css", ".js", ".mjs", ".svg"]
                .iter()
                .any(|e| f.ends_with(e));
            // `signin/` is the sign-in page's, embedded and served by `http::auth`.
            if served && !f.starts_with("/signin/") {
                assert!(
                    ASSETS.iter().any(|a| a.path == f),
                    "{f} is under src/ui but not in ui::ASSETS"
                );
            }
        }
    }

    #[test]
    fn the_page_has_no_inline_script_style_or_handler() {
        let html = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        assert!(html.contains("<script type=\"module\" src=\"/js/main.js\"></script>"));
        assert_eq!(
            html.matches("<script").count(),
            1,
            "one external module only"
        );
        assert!(!html.contains("style="), "no inline style");
        assert!(!html.contains("<style"), "no style element");
        let lower = html.to_lowercase();
        let handler = lower.match_indices(" on").any(|(i, _)| {
            lower[i + 3..]
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .count()
                > 0
                && lower[i + 3..]
                    .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                    .starts_with('=')
        });
        assert!(!handler, "no inline event handler");
    }
}
