//! `searchAll` (GET /api/search, byre's extension): projects, tasks, and transcript items
//! and review findings found by their words, from the full-text index (`byre_search`) that
//! the search reactor (`reactors::search`) keeps from the log. Names, titles and statuses
//! come from the fold when the answer is made, so a hit always shows the current ones.
//!
//! Before searching, the operation waits (at most [`CATCH_UP_WAIT`]) until the index covers
//! the log as it was when the request came: what a caller has just written is found.
//! During a rebuild the answer says `complete: false`.

use std::sync::Arc;
use std::time::Duration;

use byre_search::{EntryKind, Found, Hit, SnippetPart};
use tokio::sync::watch;

use super::{api, Ctx, Error};

/// Longest a search waits for the index to cover the log's head.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// Hits a group holds when the caller gives no `limit`.
pub const DEFAULT_LIMIT: usize = 10;

/// The search index and how far it covers the log; shared by the operation and the reactor.
#[derive(Clone)]
pub struct SearchIndex {
    /// The index, `None` when it could not be opened (then searches answer 503).
    pub(crate) index: Option<Arc<byre_search::Index>>,
    /// The last seq the index covers (committed and visible).
    pub(crate) indexed_seq: watch::Sender<u64>,
}

impl SearchIndex {
    /// Opens (or makes anew) the index in `dir` for a log whose last seq is `log_head`,
    /// logging why it is rebuilt; without one (the directory cannot be written) searches
    /// answer 503 and the reactor does nothing. Blocking.
    pub fn open(dir: &std::path::Path, log_head: u64) -> SearchIndex {
        match byre_search::Index::open(dir, log_head) {
            Ok(opened) => {
                if let Some(why) = &opened.rebuilt {
                    tracing::info!(dir = %dir.display(), why = %why, "search index made anew, indexing the log");
                }
                SearchIndex {
                    index: Some(Arc::new(opened.index)),
                    indexed_seq: watch::Sender::new(opened.indexed_seq),
                }
            }
            Err(e) => {
                tracing::error!(dir = %dir.display(), error = %e, "cannot open the search index; search is off");
                SearchIndex {
                    index: None,
                    indexed_seq: watch::Sender::new(0),
                }
            }
        }
    }

    /// The last seq the index covers.
    pub fn indexed_seq(&self) -> u64 {
        *self.indexed_seq.borrow()
    }

    /// Follows the last seq the index covers.
    pub fn watch_indexed_seq(&self) -> watch::Receiver<u64> {
        self.indexed_seq.subscribe()
    }

    /// The index itself, when it opened (the benchmarks time its searches).
    pub fn index(&self) -> Option<Arc<byre_search::Index>> {
        self.index.clone()
    }
}

/// What `searchAll` was asked.
pub struct SearchParams {
    /// The query (`q`).
    pub q: String,
    /// Only this project (`project_id`).
    pub project_id: Option<String>,
    /// Hits a group (`limit`, 1 to 50).
    pub limit: Option<usize>,
}

/// `searchAll`: what `login` may see that matches `params.q`, by group.
/// # Errors
/// `Invalid` for an empty, too long or malformed query or a `limit` outside 1 to 50;
/// `NotFound` for an unknown `project_id`; `Unavailable` when the index could not be opened.
pub async fn search_all(
    ctx: &Ctx,
    login: &str,
    params: SearchParams,
) -> Result<api::SearchResults, Error> {
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=byre_search::MAX_LIMIT).contains(&limit) {
        return Err(Error::Invalid(format!(
            "limit must be 1 to {}",
            byre_search::MAX_LIMIT
        )));
    }
    if let Some(p) = &params.project_id {
        if !ctx.writer.read(|s| s.projects.contains_key(p.as_str())) {
            return Err(Error::NotFound(format!("no project {p}")));
        }
    }
    let search = &ctx.search;
    let Some(index) = search.index.clone() else {
        return Err(Error::Unavailable(
            "the search index could not be opened".into(),
        ));
    };
    let head = ctx.writer.head();
    let mut indexed = search.watch_indexed_seq();
    let complete = tokio::time::timeout(CATCH_UP_WAIT, indexed.wait_for(|s| *s >= head))
        .await
        .is_ok_and(|r| r.is_ok());
    let login_owned = login.to_owned();
    let found = tokio::task::spawn_blocking(move || {
        index.search(&byre_search::Search {
            text: &params.q,
            login: &login_owned,
            project_id: params.project_id.as_deref(),
            limit,
        })
    })
    .await
    .map_err(|e| Error::Internal(format!("search: {e}")))?
    .map_err(|e| match e {
        byre_search::Error::BadQuery(m) => Error::Invalid(m),
        other => Error::Internal(other.to_string()),
    })?;
    Ok(results(ctx, found, complete))
}

/// The answer: each hit with its project's name and its task's title from the fold.
fn results(ctx: &Ctx, found: Found, complete: bool) -> api::SearchResults {
    ctx.writer.read(|s| {
        let project_name = |id: &str| s.projects.get(id).map(|p| p.name.clone());
        let projects = found
            .projects
            .iter()
            .filter_map(|h| {
                Some(api::SearchProject {
                    project_id: h.project_id.clone(),
                    name: project_name(&h.project_id)?,
                })
            })
            .collect();
        let tasks = found
            .tasks
            .iter()
            .filter_map(|h| {
                let t = s.tasks.get(h.task_id.as_str())?;
                Some(api::SearchTask {
                    task_id: h.task_id.clone(),
                    project_id: h.project_id.clone(),
                    project_name: project_name(&h.project_id).unwrap_or_default(),
                    title: t.title.clone(),
                    branch: t.branch.clone(),
                    status: t.status,
                })
            })
            .collect();
        let items = found
            .items
            .iter()
            .filter_map(|h| {
                let title = if h.task_id.is_empty() {
                    None
                } else {
                    Some(s.tasks.get(h.task_id.as_str())?.title.clone())
                };
                Some(item(h, title))
            })
            .collect();
        api::SearchResults {
            projects,
            tasks,
            items,
            complete,
        }
    })
}

fn item(h: &Hit, task_title: Option<String>) -> api::SearchItem {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    api::SearchItem {
        seq: h.seq,
        kind: h.kind.as_str(),
        project_id: some(&h.project_id),
        task_id: some(&h.task_id),
        task_title,
        agent_session_id: some(&h.agent_session_id),
        lead: h.task_id.is_empty() && h.kind != EntryKind::Project,
        snippet: h.snippet.iter().map(part).collect(),
    }
}

fn part(p: &SnippetPart) -> api::SnippetPart {
    api::SnippetPart {
        text: p.text.clone(),
        hit: p.hit,
    }
}
