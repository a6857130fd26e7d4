//! Users: one per login, created the first time a login is seen (`user.created`).
//! Operations: `getMe`, `updateMe`, `updateNotificationPrefs`, `updateDefaultModel`.

use crate::ids::Login;
use serde::{Deserialize, Serialize};

use crate::event::{
    DefaultModelUpdated, EventBody, NewEvent, NotificationPrefsUpdated, UserCreated, UserUpdated,
};
use crate::{Rejection, State};

/// Which new inbox items and finished turns notify the user (spec `NotificationPrefs`).
/// All on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationPrefs {
    /// Questions.
    pub questions: bool,
    /// Turns that end with a summary.
    pub reports: bool,
    /// `session_error` items.
    pub errors: bool,
    /// `rate_limited` items.
    pub rate_limits: bool,
}

impl Default for NotificationPrefs {
    fn default() -> Self {
        NotificationPrefs {
            questions: true,
            reports: true,
            errors: true,
            rate_limits: true,
        }
    }
}

/// A user (spec `User`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The login (identity from the auth mode).
    pub login: Login,
    /// Display name.
    pub display_name: String,
    /// Git `user.name`; empty until set.
    pub git_name: String,
    /// Git `user.email`; empty until set.
    pub git_email: String,
    /// Notification preferences.
    pub notification_prefs: NotificationPrefs,
    /// The model new tasks start on.
    pub default_model: String,
    /// Seq of `user.created`.
    pub created_seq: u64,
}

/// Longest git name or email accepted, in bytes.
const MAX_IDENTITY_BYTES: usize = 256;

/// Checks a git identity: one line, no angle brackets (git would mangle them), and an email of
/// the form `local@domain` (or both empty).
fn check_identity(git_name: &str, git_email: &str) -> Result<(), Rejection> {
    let bad_char = |c: char| c.is_control() || c == '<' || c == '>';
    if git_name.len() > MAX_IDENTITY_BYTES || git_name.chars().any(bad_char) {
        return Err(Rejection::Invalid(
            "git_name must be one line without `<` or `>`, at most 256 bytes".into(),
        ));
    }
    if git_name.trim() != git_name {
        return Err(Rejection::Invalid(
            "git_name must not start or end with spaces".into(),
        ));
    }
    if git_email.is_empty() {
        return Ok(());
    }
    let well_formed = git_email.len() <= MAX_IDENTITY_BYTES
        && !git_email.chars().any(|c| bad_char(c) || c.is_whitespace())
        && matches!(git_email.split_once('@'), Some((local, domain)) if !local.is_empty() && !domain.is_empty() && !domain.contains('@'));
    if !well_formed {
        return Err(Rejection::Invalid(format!(
            "git_email `{git_email}` is not an email address like `name@example.com`"
        )));
    }
    Ok(())
}

/// Checks a model name: one line of 1 to 200 printable characters.
pub fn check_model(model: &str) -> Result<(), Rejection> {
    if model.is_empty()
        || model.len() > 200
        || model.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(Rejection::Invalid(
            "model must be 1 to 200 characters without spaces or control characters".into(),
        ));
    }
    Ok(())
}

fn existing<'a>(state: &'a State, login: &str) -> Result<&'a User, Rejection> {
    state
        .users
        .get(login)
        .ok_or_else(|| Rejection::NotFound(format!("no user `{login}`")))
}

/// Decides `EnsureUser`: `user.created` unless the login exists.
pub(crate) fn ensure(
    state: &State,
    login: &str,
    display_name: &str,
    default_model: &str,
) -> Vec<NewEvent> {
    if state.users.contains_key(login) {
        return Vec::new();
    }
    vec![NewEvent::new(
        login,
        EventBody::UserCreated(UserCreated {
            login: login.to_owned().into(),
            display_name: display_name.to_owned(),
            default_model: default_model.to_owned(),
        }),
    )]
}

/// Decides `UpdateMe`.
pub(crate) fn update_me(
    state: &State,
    login: &str,
    git_name: &str,
    git_email: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    existing(state, login)?;
    check_identity(git_name, git_email)?;
    Ok(vec![NewEvent::new(
        login,
        EventBody::UserUpdated(UserUpdated {
            login: login.to_owned().into(),
            git_name: git_name.to_owned(),
            git_email: git_email.to_owned(),
        }),
    )])
}

/// Decides `UpdateNotificationPrefs`; the event is owned by the user.
pub(crate) fn update_prefs(
    state: &State,
    login: &str,
    prefs: NotificationPrefs,
) -> Result<Vec<NewEvent>, Rejection> {
    existing(state, login)?;
    Ok(vec![NewEvent::new(
        login,
        EventBody::NotificationPrefsUpdated(NotificationPrefsUpdated {
            login: login.to_owned().into(),
            notification_prefs: prefs,
        }),
    )
    .owned_by(login)])
}

/// Decides `UpdateDefaultModel`; the event is owned by the user.
pub(crate) fn update_default_model(
    state: &State,
    login: &str,
    model: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    existing(state, login)?;
    check_model(model)?;
    Ok(vec![NewEvent::new(
        login,
        EventBody::DefaultModelUpdated(DefaultModelUpdated {
            login: login.to_owned().into(),
            model: model.to_owned(),
        }),
    )
    .owned_by(login)])
}

/// Folds the user events.
pub(crate) fn apply(state: &mut State, seq: u64, body: &EventBody) {
    match body {
        EventBody::UserCreated(p) => {
            state.users.entry(p.login.clone()).or_insert_with(|| User {
                login: p.login.clone(),
                display_name: p.display_name.clone(),
                git_name: String::new(),
                git_email: String::new(),
                notification_prefs: NotificationPrefs::default(),
                default_model: p.default_model.clone(),
                created_seq: seq,
            });
        }
        EventBody::UserUpdated(p) => {
            if let Some(u) = state.users.get_mut(&p.login) {
                u.git_name.clone_from(&p.git_name);
                u.git_email.clone_from(&p.git_email);
            }
        }
        EventBody::NotificationPrefsUpdated(p) => {
            if let Some(u) = state.users.get_mut(&p.login) {
                u.notification_prefs = p.notification_prefs;
            }
        }
        EventBody::DefaultModelUpdated(p) => {
            if let Some(u) = state.users.get_mut(&p.login) {
                u.default_model.clone_from(&p.model);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_checked() {
        assert!(check_identity("Ada Lovelace", "ada@example.com").is_ok());
        assert!(check_identity("", "").is_ok());
        for (name, email) in [
            ("Ada\nEvil", "ada@example.com"),
            ("Ada <x>", "ada@example.com"),
            (" Ada", "ada@example.com"),
            ("Ada", "not-an-email"),
            ("Ada", "a b@example.com"),
            ("Ada", "@example.com"),
            ("Ada", "ada@"),
            ("Ada", "a@b@c"),
        ] {
            assert!(
                check_identity(name, email).is_err(),
                "{name:?} {email:?} should be refused"
            );
        }
    }
}
