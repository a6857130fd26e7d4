//! The calling user's lead agent: `listLeadSessions`, `listLeadEvents`, `messageLead`,
//! `listLeadNotes`, `deleteLeadNote`: parse, call [`byre_app::lead`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::sessions::MessageCreate;
use super::{ApiError, App};
use byre_app::lead as op;

/// `listLeadSessions` — GET /api/me/lead/sessions → 200 `[AgentSession]`, oldest first.
pub async fn list_lead_sessions(
    caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_lead_sessions(&app, &caller.login)))
}

/// Query of `listLeadEvents`.
#[derive(Deserialize)]
pub struct LeadEventsQuery {
    #[serde(default, deserialize_with = "crate::http::optional_int64_seq")]
    before: Option<u64>,
    turns: Option<i64>,
}

/// `listLeadEvents` — GET /api/me/lead/events?before&turns → 200 `EventPage`: whole turns
/// (default 50) of the caller's lead events before `before`, oldest first; 400 for `turns`
/// outside 1–500 or a non-numeric parameter.
pub async fn list_lead_events(
    caller: Caller,
    query: web::Query<LeadEventsQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let turns = match q.turns {
        None => None,
        Some(t) => Some(u32::try_from(t).map_err(|_| {
            ApiError::from(byre_app::Error::Invalid(format!(
                "turns must be 1 to {}, not {t}",
                op::MAX_TURNS
            )))
        })?),
    };
    let body = op::list_lead_events(&app, &caller.login, q.before, turns).await?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}

/// `messageLead` — POST /api/me/lead/messages → 202 `AgentSession` (the lead session the
/// message went to or is held for); 400 (empty text without images, unknown blob, bad
/// model).
pub async fn message_lead(
    caller: Caller,
    body: web::Json<MessageCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let session = op::message_lead(&app, &caller.login, body.into_inner().into_message()).await?;
    Ok(HttpResponse::Accepted().json(session))
}

/// `listLeadNotes` — GET /api/me/lead/notes → 200 `[LeadNote]`, oldest first.
pub async fn list_lead_notes(
    caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_lead_notes(&app, &caller.login)))
}

/// `deleteLeadNote` — DELETE /api/me/lead/notes/{noteId} → 204; 404 for another user's or an
/// unknown note.
pub async fn delete_lead_note(
    caller: Caller,
    note_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    op::delete_lead_note(&app, &caller.login, &note_id).await?;
    Ok(HttpResponse::NoContent().finish())
}
