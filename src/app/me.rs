//! The calling user: `getMe`, `updateMe`, `updateNotificationPrefs`, `updateDefaultModel`,
//! `getFocus`, `setFocus`, `getSummaryReads`, `setPaneFocus`, and `markSummaryRead`; and
//! [`ensure_user`], which records a first-seen login before any of them runs.

use std::collections::BTreeMap;

use byre_projections::focus::Focus;
use byre_projections::users::NotificationPrefs;
use byre_projections::Command;

use super::{Ctx, Error};
use crate::api;

/// Records `login` as a user (`EnsureUser`, with `display_name`, else the login, and the
/// configured default model) unless the fold already knows it.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped; the rejection of a malformed login.
pub async fn ensure_user(
    app: &Ctx,
    login: &str,
    display_name: Option<String>,
) -> Result<(), Error> {
    if !app.writer.read(|s| s.users.contains_key(login)) {
        let cmd = Command::EnsureUser {
            display_name: display_name.unwrap_or_else(|| login.to_owned()),
            login: login.to_owned().into(),
            default_model: app.settings.default_model.clone(),
        };
        app.writer.submit(cmd, None).await?;
    }
    Ok(())
}

/// `getMe`: the user `login`.
/// # Errors
/// [`Error::Internal`] when the user is missing (it is ensured before any operation).
pub fn get_me(app: &Ctx, login: &str) -> Result<api::User, Error> {
    app.writer
        .read(|s| s.users.get(login).map(api::User::from))
        .ok_or_else(|| Error::internal(format!("user {login} missing after it was ensured")))
}

/// `updateMe`: the user's git identity; answers the user.
/// # Errors
/// Invalid for a malformed identity.
pub async fn update_me(
    app: &Ctx,
    login: &str,
    git_name: String,
    git_email: String,
) -> Result<api::User, Error> {
    app.submit(Command::UpdateMe {
        login: login.to_owned().into(),
        git_name,
        git_email,
    })
    .await?;
    get_me(app, login)
}

/// `updateNotificationPrefs`: which inbox items notify the user; answers the user.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped.
pub async fn update_notification_prefs(
    app: &Ctx,
    login: &str,
    prefs: NotificationPrefs,
) -> Result<api::User, Error> {
    app.submit(Command::UpdateNotificationPrefs {
        login: login.to_owned().into(),
        prefs,
    })
    .await?;
    get_me(app, login)
}

/// `updateDefaultModel`: the model of the user's new sessions; answers the user.
/// # Errors
/// Invalid for an empty or malformed model name.
pub async fn update_default_model(
    app: &Ctx,
    login: &str,
    model: String,
) -> Result<api::User, Error> {
    super::sessions::check_agent_model(app, &model, None)?;
    app.submit(Command::UpdateDefaultModel {
        login: login.to_owned().into(),
        model,
    })
    .await?;
    get_me(app, login)
}

/// `getFocus`: what the user looks at (the transcript tab of nothing until set).
pub fn get_focus(app: &Ctx, login: &str) -> Focus {
    app.writer
        .read(|s| s.ui.get(login).map(|u| u.focus.clone()).unwrap_or_default())
}

/// `setFocus`: records what the user looks at (an empty project or task id reads as none);
/// answers the focus as stored. The `focus.updated` event is owned by the user.
/// # Errors
/// Invalid (bad tab, task outside project), not found (unknown project or task).
pub async fn set_focus(app: &Ctx, login: &str, focus: Focus) -> Result<Focus, Error> {
    let focus = Focus {
        project_id: focus.project_id.filter(|p| !p.is_empty()),
        task_id: focus.task_id.filter(|t| !t.is_empty()),
        tabs: focus.tabs,
        tab: focus.tab,
    };
    app.submit(Command::SetFocus {
        login: login.to_owned().into(),
        focus,
    })
    .await?;
    Ok(get_focus(app, login))
}

/// `getSummaryReads`: the seq up to which the user read each active task's summary.
pub fn get_summary_reads(app: &Ctx, login: &str) -> BTreeMap<String, u64> {
    app.writer
        .read(|s| byre_projections::focus::active_summary_reads(s, login))
}

/// `setPaneFocus`: whether the user's pane has focus and whether they are drafting.
/// # Errors
/// [`Error::Unavailable`] when the writer stopped.
pub async fn set_pane_focus(
    app: &Ctx,
    login: &str,
    focused: bool,
    drafting: bool,
) -> Result<(), Error> {
    app.submit(Command::SetPaneFocus {
        login: login.to_owned().into(),
        focused,
        drafting,
    })
    .await?;
    Ok(())
}

/// `markSummaryRead`: the user read task `task_id`'s summary up to `seq`; a higher seq emits
/// `summary.read`, owned by the user.
/// # Errors
/// Invalid (seq beyond the log), not found (unknown task).
pub async fn mark_summary_read(
    app: &Ctx,
    login: &str,
    task_id: &str,
    seq: u64,
) -> Result<(), Error> {
    app.submit(Command::MarkSummaryRead {
        login: login.to_owned().into(),
        task_id: task_id.to_owned().into(),
        seq,
    })
    .await?;
    Ok(())
}
