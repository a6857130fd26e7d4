//! The calling user: `getMe`, `updateMe`, `updateNotificationPrefs`, `updateDefaultModel`,
//! `getFocus`, `setFocus`, `getSummaryReads`, `setPaneFocus`, and `markSummaryRead`: parse,
//! call [`byre_app::me`], answer.

use actix_web::{web, HttpResponse};
use byre_projections::focus::{Focus, TaskTab};
use byre_projections::users::NotificationPrefs;
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::me as op;

/// `getMe` — GET /api/me → 200 `User`.
pub async fn get_me(caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_me(&app, &caller.login)?))
}

/// Body of `updateMe` (spec `UserUpdate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserUpdate {
    git_name: String,
    git_email: String,
}

/// `updateMe` — PUT /api/me → 200 `User`; 400 for a malformed identity.
pub async fn update_me(
    caller: Caller,
    body: web::Json<UserUpdate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let user = op::update_me(&app, &caller.login, body.git_name, body.git_email).await?;
    Ok(HttpResponse::Ok().json(user))
}

/// Body of `updateNotificationPrefs` (spec `NotificationPrefs`; the stored payload type
/// stays lenient, the request is not).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationPrefsBody {
    questions: bool,
    reports: bool,
    errors: bool,
    rate_limits: bool,
}

/// `updateNotificationPrefs` — PUT /api/me/notifications → 200 `User`; 400 for a malformed body.
pub async fn update_notification_prefs(
    caller: Caller,
    body: web::Json<NotificationPrefsBody>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let prefs = NotificationPrefs {
        questions: b.questions,
        reports: b.reports,
        errors: b.errors,
        rate_limits: b.rate_limits,
    };
    let user = op::update_notification_prefs(&app, &caller.login, prefs).await?;
    Ok(HttpResponse::Ok().json(user))
}

/// Body of `updateDefaultModel` (spec `DefaultModel`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultModel {
    model: String,
}

/// `updateDefaultModel` — PUT /api/me/default-model → 200 `User`; 400 for an empty or
/// malformed model name.
pub async fn update_default_model(
    caller: Caller,
    body: web::Json<DefaultModel>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let user = op::update_default_model(&app, &caller.login, body.into_inner().model).await?;
    Ok(HttpResponse::Ok().json(user))
}

/// `getFocus` — GET /api/me/focus → 200 `Focus` (the transcript tab of nothing until set).
pub async fn get_focus(caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_focus(&app, &caller.login)))
}

/// Body of `setFocus` (spec `Focus`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FocusBody {
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    project_id: Option<String>,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    task_id: Option<String>,
    tabs: Vec<TaskTab>,
    tab: TaskTab,
}

/// `setFocus` — PUT /api/me/focus → 200 `Focus`; 400 (bad tab, task outside project), 404
/// (unknown project or task). The `focus.updated` event is owned by the caller.
pub async fn set_focus(
    caller: Caller,
    body: web::Json<FocusBody>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let focus = Focus {
        project_id: b.project_id.map(Into::into),
        task_id: b.task_id.map(Into::into),
        tabs: b.tabs,
        tab: b.tab,
    };
    Ok(HttpResponse::Ok().json(op::set_focus(&app, &caller.login, focus).await?))
}

/// `getSummaryReads` — GET /api/me/summary-reads → 200 `{task_id: seq}` for active tasks.
pub async fn get_summary_reads(
    caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_summary_reads(&app, &caller.login)))
}

/// Body of `setPaneFocus` (spec `PaneFocus`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaneFocus {
    focused: bool,
    drafting: bool,
}

/// `setPaneFocus` — PUT /api/me/pane-focus → 204; 400 for a malformed body.
pub async fn set_pane_focus(
    caller: Caller,
    body: web::Json<PaneFocus>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    op::set_pane_focus(&app, &caller.login, b.focused, b.drafting).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Body of `markSummaryRead` (spec `SummaryRead`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryRead {
    seq: u64,
}

/// `markSummaryRead` — PUT /api/tasks/{taskId}/summary-read → 204; 400 (seq beyond the log),
/// 404 (unknown task). A higher seq emits `summary.read`, owned by the caller.
pub async fn mark_summary_read(
    caller: Caller,
    task_id: web::Path<String>,
    body: web::Json<SummaryRead>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    op::mark_summary_read(&app, &caller.login, &task_id, body.into_inner().seq).await?;
    Ok(HttpResponse::NoContent().finish())
}
