//! `createSession`, `listSessions`, `getSession`, `sendMessage`, `withdrawMessage`,
//! `interruptSession`, `compactSession`, and `listInbox`, `getInboxItem`, `respondInbox`:
//! parse, call [`byre_app::sessions`] / [`byre_app::inbox`], answer.

use actix_web::{web, HttpResponse};
use byre_projections::inbox::InboxState;
use serde::{Deserialize, Serialize};

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::{inbox, sessions as op};

/// Body of `createSession` (spec `SessionCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionCreate {
    prompt: String,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    model: Option<String>,
    #[serde(default)]
    images: Vec<String>,
}

/// `createSession` — POST /api/tasks/{taskId}/sessions → 201 `AgentSession` (its first turn
/// running); 400 (empty prompt, unknown blob, bad model), 404, 409 (task closed, or it has a
/// live session already); 501 for a Codex model until Codex sessions are built.
pub async fn create_session(
    caller: Caller,
    task_id: web::Path<String>,
    body: web::Json<SessionCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let session =
        op::create_session(&app, &caller.login, &task_id, b.model, b.prompt, b.images).await?;
    Ok(HttpResponse::Created().json(session))
}

/// `listSessions` — GET /api/tasks/{taskId}/sessions → 200 `[AgentSession]`, oldest first
/// (reviewers left out); 404.
pub async fn list_sessions(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_sessions(&app, &task_id)?))
}

/// `getSession` — GET /api/sessions/{sessionId} → 200 `AgentSession`; 404 (also for another
/// user's lead session).
pub async fn get_session(
    caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_session(&app, &caller.login, &id)?))
}

/// Body of `sendMessage` and `messageLead` (spec `MessageCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageCreate {
    text: String,
    #[serde(default)]
    images: Vec<String>,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    model: Option<String>,
}

impl MessageCreate {
    /// The app layer's message.
    pub fn into_message(self) -> op::Message {
        op::Message {
            text: self.text,
            images: self.images,
            model: self.model,
        }
    }
}

/// `sendMessage` — POST /api/sessions/{sessionId}/messages → 202 `AgentSession`: a new turn
/// when idle, queued (`user.queued`) while a turn runs; 400 (empty text without images,
/// unknown blob, a model of the other vendor), 404, 409 (session completed, task closed).
pub async fn send_message(
    caller: Caller,
    id: web::Path<String>,
    body: web::Json<MessageCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let message = body.into_inner().into_message();
    let session = op::send_message(&app, &caller.login, &id, message).await?;
    Ok(HttpResponse::Accepted().json(session))
}

/// `withdrawMessage` — DELETE /api/tasks/{taskId}/queue/{inputId} → 204; 404; 409 once the
/// message was handed to the agent.
pub async fn withdraw_message(
    caller: Caller,
    path: web::Path<(String, u64)>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let (task_id, input_id) = path.into_inner();
    op::withdraw_message(&app, &caller.login, &task_id, input_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `interruptSession` — POST /api/sessions/{sessionId}/interrupt → 202 `AgentSession`; 404;
/// 409 when no turn runs.
pub async fn interrupt_session(
    caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let session = op::interrupt_session(&app, &caller.login, &id).await?;
    Ok(HttpResponse::Accepted().json(session))
}

/// Query of `listInbox`.
#[derive(Deserialize)]
pub struct InboxQuery {
    project_id: Option<String>,
    task_id: Option<String>,
    state: Option<InboxState>,
}

/// `listInbox` — GET /api/inbox → 200 `[InboxItem]`, oldest first; open items unless `state`
/// says otherwise; narrowed by `project_id` and `task_id`.
pub async fn list_inbox(
    _caller: Caller,
    query: web::Query<InboxQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let filter = inbox::InboxFilter {
        project_id: q.project_id,
        task_id: q.task_id,
        state: q.state,
    };
    Ok(HttpResponse::Ok().json(inbox::list_inbox(&app, &filter)))
}

/// `getInboxItem` — GET /api/inbox/{itemId} → 200 `InboxItem`; 404.
pub async fn get_inbox_item(
    _caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(inbox::get_inbox_item(&app, &id)?))
}

/// One response of `respondInbox` (spec `InboxResponseCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxResponseCreate {
    item_id: String,
    #[serde(rename = "type")]
    kind: byre_projections::inbox::ResponseType,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    images: Vec<String>,
    #[serde(default)]
    attachments: Vec<AttachmentCreate>,
}

/// One attachment of a response (spec `Attachment`): the contract's fields only, so a typo
/// (`pth`) or a missing `kind` is a 400 naming it, not an attachment stored without its
/// content. Stored as the JSON object that came in.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentCreate {
    kind: AttachmentKind,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    path: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    start_line: Option<i64>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    end_line: Option<i64>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        rename = "ref",
        skip_serializing_if = "Option::is_none"
    )]
    git_ref: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    url: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    mermaid: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    image: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    task_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    snapshot_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::http::absent_or",
        skip_serializing_if = "Option::is_none"
    )]
    caption: Option<String>,
}

/// What an attachment is (spec `Attachment.kind`).
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    /// A file of the repository.
    File,
    /// A diff of a git revision range.
    Diff,
    /// An image.
    Image,
    /// A Mermaid diagram.
    Diagram,
    /// A task.
    Task,
    /// A snapshot.
    Snapshot,
    /// A URL.
    Url,
}

/// Body of `respondInbox` (spec `InboxRespond`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxRespond {
    responses: Vec<InboxResponseCreate>,
}

/// `respondInbox` — POST /api/inbox/responses → 200 `[InboxItem]` (the answered items, in the
/// submission's order); 400 a malformed response (options not among the item's, not exactly
/// one for pick-one, none for pick-any, unknown images, an item twice); 404 an unknown item;
/// 409 an item that is not open. All responses or none.
pub async fn respond_inbox(
    caller: Caller,
    body: web::Json<InboxRespond>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let responses: Vec<byre_projections::inbox::ResponseInput> = body
        .into_inner()
        .responses
        .into_iter()
        .map(|r| byre_projections::inbox::ResponseInput {
            item_id: r.item_id,
            kind: r.kind,
            options: r.options,
            text: r.text,
            images: r.images,
            attachments: r
                .attachments
                .iter()
                .map(|a| serde_json::to_value(a).unwrap_or_default())
                .collect(),
        })
        .collect();
    Ok(HttpResponse::Ok().json(inbox::respond_inbox(&app, &caller.login, responses).await?))
}

/// Body of `compactSession` (spec `CompactCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactCreate {
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    model: Option<String>,
}

/// `compactSession` — POST /api/sessions/{sessionId}/compact → 202 `AgentSession`: the idle
/// session's agent writes a handoff; when that turn ends normally the session is completed
/// and a new session on the task starts with the handoff as its first message, on `model`
/// (else the old session's). 404; 409 while a turn runs or once completed; 501 for a Codex
/// model until Codex sessions are built.
pub async fn compact_session(
    caller: Caller,
    req: actix_web::HttpRequest,
    id: web::Path<String>,
    body: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    // The body is optional: none, or a `CompactCreate` held to the same rules as `Json`.
    let body = super::read_limited(body, super::MAX_JSON_BYTES, "JSON bodies").await?;
    let model = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let json = req
            .headers()
            .get("Content-Type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
        if !json {
            return Err(super::table::json_error(
                actix_web::error::JsonPayloadError::ContentType,
                &req,
            ));
        }
        serde_json::from_slice::<CompactCreate>(&body)
            .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?
            .model
    };
    let session = op::compact_session(&app, &caller.login, &id, model).await?;
    Ok(HttpResponse::Accepted().json(session))
}
