//! The calling user: `getMe`, `updateMe`, `updateNotificationPrefs`, `updateDefaultModel`,
//! `getFocus`, `setFocus`, `getSummaryReads`, `setPaneFocus`, and `markSummaryRead`.

use actix_web::{web, HttpResponse};
use byre_projections::focus::{Focus, TaskTab};
use byre_projections::users::NotificationPrefs;
use byre_projections::Command;
use serde::Deserialize;

use super::{ApiError, App};
use crate::api;
use crate::identity::Caller;

fn me(app: &App, caller: &Caller) -> Result<api::User, ApiError> {
    app.writer
        .read(|s| s.users.get(&caller.login).map(api::User::from))
        .ok_or_else(|| {
            ApiError::internal(format!(
                "user {} missing after it was ensured",
                caller.login
            ))
        })
}

/// `getMe` — GET /api/me → 200 `User`.
pub async fn get_me(caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(me(&app, &caller)?))
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
    app.submit(Command::UpdateMe {
        login: caller.login.clone(),
        git_name: body.git_name,
        git_email: body.git_email,
    })
    .await?;
    Ok(HttpResponse::Ok().json(me(&app, &caller)?))
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
    app.submit(Command::UpdateNotificationPrefs {
        login: caller.login.clone(),
        prefs: NotificationPrefs {
            questions: b.questions,
            reports: b.reports,
            errors: b.errors,
            rate_limits: b.rate_limits,
        },
    })
    .await?;
    Ok(HttpResponse::Ok().json(me(&app, &caller)?))
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
    app.submit(Command::UpdateDefaultModel {
        login: caller.login.clone(),
        model: body.into_inner().model,
    })
    .await?;
    Ok(HttpResponse::Ok().json(me(&app, &caller)?))
}

/// `getFocus` — GET /api/me/focus → 200 `Focus` (the transcript tab of nothing until set).
pub async fn get_focus(caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    let focus = app.writer.read(|s| {
        s.ui.get(&caller.login)
            .map(|u| u.focus.clone())
            .unwrap_or_default()
    });
    Ok(HttpResponse::Ok().json(focus))
}

/// Body of `setFocus` (spec `Focus`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FocusBody {
    project_id: Option<String>,
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
        project_id: b.project_id.filter(|p| !p.is_empty()),
        task_id: b.task_id.filter(|t| !t.is_empty()),
        tabs: b.tabs,
        tab: b.tab,
    };
    app.submit(Command::SetFocus {
        login: caller.login.clone(),
        focus,
    })
    .await?;
    get_focus(caller, app).await
}

/// `getSummaryReads` — GET /api/me/summary-reads → 200 `{task_id: seq}` for active tasks.
pub async fn get_summary_reads(
    caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let reads = app
        .writer
        .read(|s| byre_projections::focus::active_summary_reads(s, &caller.login));
    Ok(HttpResponse::Ok().json(reads))
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
    app.submit(Command::SetPaneFocus {
        login: caller.login,
        focused: b.focused,
        drafting: b.drafting,
    })
    .await?;
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
    app.submit(Command::MarkSummaryRead {
        login: caller.login,
        task_id: task_id.into_inner(),
        seq: body.into_inner().seq,
    })
    .await?;
    Ok(HttpResponse::NoContent().finish())
}
