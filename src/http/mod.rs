//! The HTTP surface of `schema/byre.openapi.yaml`: the route table ([`routes`]) with all 64
//! operations, and one module per family of handlers. Handlers parse, call one
//! `byre_app` function, and answer (an `app::Error` becomes its status in `error.rs`);
//! they never open a redb write transaction, write git or spawn processes.

use actix_web::http::Method;
use actix_web::{web, HttpResponse};

mod agent_tools;
pub mod auth;
mod blobs;
pub mod edge;

mod events;
mod finish;
mod fork;
pub mod identity;
mod lead;
pub mod limits;
mod machines;
mod me;
mod projects;
mod reviews;
pub mod security;
pub mod serve_socket;
mod sessions;
mod snapshots;
mod status;
mod table;
mod tasks;
mod terminal;
mod todo;
pub mod ui;
mod views;
mod workflows;

pub use crate::error::ApiError;
pub use byre_app::tools::MAX_TOOL_ARGS_BYTES;
pub use serve_socket::serve_socket_path;
pub use table::json_errors;
use table::RouteTable;

/// Largest JSON request body, in bytes.
pub const MAX_JSON_BYTES: usize = 1024 * 1024;

/// What every handler shares: the application layer's context (`web::Data<App>`).
pub(crate) use byre_app::Ctx as App;

/// An optional field of a JSON request body that may be absent but not `null`, as the contract
/// types it (`type: string` without `nullable`): use as
/// `#[serde(default, deserialize_with = "crate::http::absent_or")]` on an `Option<T>`. Absent is
/// `None` (serde's `default`); `null` is refused as any other wrong type is (400 naming it).
/// # Errors
/// The value is not a `T` (e.g. `null` for a string).
pub(crate) fn absent_or<'de, D, T>(value: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(value).map(Some)
}

/// A JSON request body the contract makes optional (`requestBody.required: false`): a request
/// with no body and no Content-Type is `T::default()`; any other is read as `web::Json<T>`
/// (the same limit and errors: a wrong Content-Type or an unknown field is a 400).
pub(crate) struct OptionalJson<T>(pub T);

impl<T> actix_web::FromRequest for OptionalJson<T>
where
    T: serde::de::DeserializeOwned + Default + 'static,
{
    type Error = actix_web::Error;
    type Future = futures_util::future::LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(
        req: &actix_web::HttpRequest,
        payload: &mut actix_web::dev::Payload,
    ) -> Self::Future {
        use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
        let headers = req.headers();
        let empty = headers
            .get(CONTENT_LENGTH)
            .is_none_or(|v| v.as_bytes() == b"0");
        if empty && !headers.contains_key(CONTENT_TYPE) {
            return Box::pin(async { Ok(OptionalJson(T::default())) });
        }
        let json = web::Json::<T>::from_request(req, payload);
        Box::pin(async move { json.await.map(|j| OptionalJson(j.into_inner())) })
    }
}

/// An optional seq of a query (`type: integer, format: int64, minimum: 0` in the contract): a
/// `u64` no larger than `i64::MAX`, so a cursor the contract calls invalid is a 400, not a page.
/// Use as `#[serde(default, deserialize_with = "crate::http::optional_int64_seq")]`.
/// # Errors
/// Not a number, negative, or beyond `i64::MAX`.
pub(crate) fn optional_int64_seq<'de, D>(value: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let seq = <Option<u64> as serde::Deserialize>::deserialize(value)?;
    match seq {
        Some(n) if i64::try_from(n).is_err() => Err(serde::de::Error::custom(format!(
            "{n} is beyond the largest seq, {}",
            i64::MAX
        ))),
        other => Ok(other),
    }
}

/// Runs blocking work (redb reads, git) off the async workers.
/// # Errors
/// 500 when the closure panicked; otherwise the closure's own error.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
}

/// Reads a whole request body of at most `limit` bytes.
/// # Errors
/// 413 naming `what` and the limit; 400 when the body cannot be read.
pub async fn read_limited(
    mut payload: web::Payload,
    limit: usize,
    what: &str,
) -> Result<bytes::Bytes, ApiError> {
    use futures_util::StreamExt;
    let mut bytes = bytes::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge(format!(
                "{what} are limited to {} KiB",
                limit / 1024
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.freeze())
}

/// The route table: every operationId of the contract, each on its method; another method on a
/// known path answers 405 with `Allow`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(MAX_JSON_BYTES)
            .error_handler(|err, req| table::json_error(err, req).into()),
    )
    .app_data(
        web::QueryConfig::default()
            .error_handler(|err, _| ApiError::BadRequest(format!("invalid query: {err}")).into()),
    )
    .app_data(
        web::PathConfig::default()
            .error_handler(|err, _| ApiError::BadRequest(format!("invalid path: {err}")).into()),
    );
    let mut routes = RouteTable::new(cfg);
    routes
        // Me
        .route("/api/me", Method::GET, web::to(me::get_me))
        .route("/api/me", Method::PUT, web::to(me::update_me))
        .route(
            "/api/me/notifications",
            Method::PUT,
            web::to(me::update_notification_prefs),
        )
        .route(
            "/api/me/default-model",
            Method::PUT,
            web::to(me::update_default_model),
        )
        .route(
            "/api/me/lead/sessions",
            Method::GET,
            web::to(lead::list_lead_sessions),
        )
        .route(
            "/api/me/lead/events",
            Method::GET,
            web::to(lead::list_lead_events),
        )
        .route(
            "/api/me/lead/messages",
            Method::POST,
            web::to(lead::message_lead),
        )
        .route(
            "/api/me/lead/notes",
            Method::GET,
            web::to(lead::list_lead_notes),
        )
        .route(
            "/api/me/lead/notes/{noteId}",
            Method::DELETE,
            web::to(lead::delete_lead_note),
        )
        .route("/api/me/focus", Method::GET, web::to(me::get_focus))
        .route("/api/me/focus", Method::PUT, web::to(me::set_focus))
        .route(
            "/api/me/summary-reads",
            Method::GET,
            web::to(me::get_summary_reads),
        )
        .route(
            "/api/me/pane-focus",
            Method::PUT,
            web::to(me::set_pane_focus),
        )
        // Projects
        .route(
            "/api/projects",
            Method::GET,
            web::to(projects::list_projects),
        )
        .route(
            "/api/projects",
            Method::POST,
            web::to(projects::create_project),
        )
        .route(
            "/api/projects/{projectId}",
            Method::GET,
            web::to(projects::get_project),
        )
        .route(
            "/api/projects/{projectId}/tasks",
            Method::GET,
            web::to(tasks::list_tasks),
        )
        .route(
            "/api/projects/{projectId}/tasks",
            Method::POST,
            web::to(tasks::create_task),
        )
        .route(
            "/api/projects/{projectId}/todo",
            Method::GET,
            web::to(todo::get_todo),
        )
        .route(
            "/api/projects/{projectId}/todo/tasks",
            Method::POST,
            web::to(todo::start_todo_item),
        )
        // Tasks
        .route("/api/tasks/{taskId}", Method::GET, web::to(tasks::get_task))
        .route(
            "/api/tasks/{taskId}/workflow",
            Method::GET,
            web::to(workflows::get_task_workflow),
        )
        .route(
            "/api/tasks/{taskId}/summary-read",
            Method::PUT,
            web::to(me::mark_summary_read),
        )
        .route(
            "/api/tasks/{taskId}/workflow/run",
            Method::GET,
            web::to(workflows::get_workflow_run),
        )
        .route(
            "/api/tasks/{taskId}/unmerged",
            Method::GET,
            web::to(finish::get_unmerged),
        )
        .route(
            "/api/tasks/{taskId}/co-authors",
            Method::GET,
            web::to(finish::get_co_authors),
        )
        .route(
            "/api/tasks/{taskId}/merge",
            Method::POST,
            web::to(finish::merge_task),
        )
        .route(
            "/api/tasks/{taskId}/merge-after-review",
            Method::DELETE,
            web::to(reviews::cancel_merge_after_review),
        )
        .route(
            "/api/tasks/{taskId}/merge-in",
            Method::POST,
            web::to(finish::merge_in),
        )
        .route(
            "/api/tasks/{taskId}/discard",
            Method::POST,
            web::to(finish::discard_task),
        )
        .route(
            "/api/tasks/{taskId}/events",
            Method::GET,
            web::to(tasks::list_task_events),
        )
        .route(
            "/api/tasks/{taskId}/changes",
            Method::GET,
            web::to(views::get_task_changes),
        )
        .route(
            "/api/tasks/{taskId}/image",
            Method::GET,
            web::to(views::get_task_image),
        )
        .route(
            "/api/tasks/{taskId}/diff",
            Method::GET,
            web::to(views::get_task_diff),
        )
        .route(
            "/api/tasks/{taskId}/dir",
            Method::GET,
            web::to(views::get_task_dir),
        )
        .route(
            "/api/tasks/{taskId}/file",
            Method::GET,
            web::to(views::get_task_file),
        )
        .route(
            "/api/tasks/{taskId}/terminal",
            Method::GET,
            web::to(terminal::get_task_terminal),
        )
        .route(
            "/api/tasks/{taskId}/previews",
            Method::GET,
            web::to(tasks::list_previews),
        )
        .route(
            "/api/tasks/{taskId}/snapshots",
            Method::GET,
            web::to(snapshots::list_snapshots),
        )
        .route(
            "/api/tasks/{taskId}/reviews",
            Method::GET,
            web::to(reviews::list_reviews),
        )
        .route(
            "/api/reviews/{reviewId}/findings/{index}",
            Method::PUT,
            web::to(reviews::set_finding_state),
        )
        .route(
            "/api/reviews/{reviewId}/stop",
            Method::POST,
            web::to(reviews::stop_review),
        )
        .route(
            "/api/tasks/{taskId}/snapshots/{n}/fork",
            Method::POST,
            web::to(fork::fork_snapshot),
        )
        .route(
            "/api/tasks/{taskId}/sessions",
            Method::GET,
            web::to(sessions::list_sessions),
        )
        .route(
            "/api/tasks/{taskId}/sessions",
            Method::POST,
            web::to(sessions::create_session),
        )
        .route(
            "/api/tasks/{taskId}/queue/{inputId}",
            Method::DELETE,
            web::to(sessions::withdraw_message),
        )
        .route(
            "/api/sessions/{sessionId}",
            Method::GET,
            web::to(sessions::get_session),
        )
        .route(
            "/api/sessions/{sessionId}/messages",
            Method::POST,
            web::to(sessions::send_message),
        )
        .route(
            "/api/sessions/{sessionId}/compact",
            Method::POST,
            web::to(sessions::compact_session),
        )
        .route(
            "/api/sessions/{sessionId}/interrupt",
            Method::POST,
            web::to(sessions::interrupt_session),
        )
        // Blobs
        .route("/api/blobs", Method::POST, web::to(blobs::upload_blob))
        .route("/api/blobs/{blobId}", Method::GET, web::to(blobs::get_blob))
        // Inbox and clients
        .route("/api/inbox", Method::GET, web::to(sessions::list_inbox))
        .route(
            "/api/inbox/responses",
            Method::POST,
            web::to(sessions::respond_inbox),
        )
        .route(
            "/api/inbox/{itemId}",
            Method::GET,
            web::to(sessions::get_inbox_item),
        )
        .route(
            "/api/clients/connect",
            Method::GET,
            web::to(machines::connect_client),
        )
        .route(
            "/api/clients/transfers/{transferId}",
            Method::GET,
            web::to(machines::get_client_transfer),
        )
        .route(
            "/api/clients/transfers/{transferId}",
            Method::PUT,
            web::to(machines::put_client_transfer),
        )
        // Events, status, workflows
        .route("/api/events", Method::GET, web::to(events::stream_events))
        .route(
            "/api/admin/status",
            Method::GET,
            web::to(status::get_status),
        )
        .route(
            "/api/workflows",
            Method::GET,
            web::to(workflows::list_workflows),
        )
        .route(
            "/api/workflows/{name}",
            Method::GET,
            web::to(workflows::get_workflow),
        )
        .route(
            "/api/workflows/{name}",
            Method::PUT,
            web::to(workflows::put_workflow),
        )
        .route(
            "/api/workflows/{name}",
            Method::DELETE,
            web::to(workflows::delete_workflow),
        )
        // Outside the contract: the operator's view (README "Operating byre").
        .route("/metrics", Method::GET, web::to(status::metrics))
        .route("/api/openapi.yaml", Method::GET, web::to(status::openapi))
        // Outside the contract: browser sign-in in token mode (README.md "Authentication").
        .route("/signin", Method::GET, web::to(auth::signin_page))
        .route("/signin/signin.js", Method::GET, web::to(auth::signin_js))
        .route("/signin/signin.css", Method::GET, web::to(auth::signin_css))
        .route("/auth/signin", Method::POST, web::to(auth::signin))
        .route("/auth/signout", Method::POST, web::to(auth::signout))
        // Internal, not in the contract: agents' tool calls from `byre mcp`.
        .route(
            "/internal/mcp/tools/{tool}",
            Method::POST,
            web::to(agent_tools::call_tool),
        );
    routes.finish();
}

/// Middleware: a span per request (`request_id`, `method`, `path`, `status`), logged at warn
/// for 4xx and error for 5xx; and the client's last action for `getStatus`.
pub async fn trace_request(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    use tracing::Instrument;
    let request_id = uuid::Uuid::new_v4();
    let span = tracing::info_span!("request", %request_id, method = %req.method(), path = %req.path(), status = tracing::field::Empty);
    if req.path() != "/api/events" {
        if let Some(app) = req.app_data::<web::Data<App>>() {
            let (host, commit, page) = status::client_of(req.request());
            // A page's reads follow from what it shows; its state changes are the human's.
            if !host.is_empty() || (page && crate::http::identity::changes_state(req.method())) {
                if let Ok((login, _)) = crate::http::identity::resolve(req.request(), app) {
                    app.streams.acted(&login, &host, &commit);
                }
            }
        }
    }
    let res = next.call(req).instrument(span.clone()).await?;
    let status = res.status().as_u16();
    if let Some(requests) = res
        .request()
        .app_data::<web::Data<byre_app::metrics::Requests>>()
    {
        let r = res.request();
        requests.record(r.method().as_str(), r.match_pattern().as_deref(), status);
    }
    span.record("status", status);
    let _enter = span.enter();
    match status {
        501 => tracing::debug!("operation not built yet"),
        500.. => tracing::error!("request failed"),
        400..=499 => tracing::warn!("request refused"),
        _ => tracing::debug!("request served"),
    }
    Ok(res)
}

/// Answers requests no route matched: the web UI's files and client-side routes (`ui`),
/// else a JSON 404 (always for `/api/…`).
pub async fn no_route(req: actix_web::HttpRequest) -> Result<HttpResponse, ApiError> {
    if let Some(res) = ui::serve(&req) {
        return Ok(res);
    }
    Err(ApiError::NotFound(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}
