//! Token mode's sign-ins, a browser's sessions (README.md "Authentication"; "session" alone
//! is an agent's): a sign-in cookie's id, held only as its SHA-256, maps to a login until
//! sign-out, its lifetime, or byre's restart. [`sign_in`] and [`sign_out`] are the
//! operations; the HTTP adapter (`http::auth`) sets and clears the cookie; `http::identity`
//! reads the login of a request's cookie.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{Ctx, Error};
use crate::settings::AuthMode;

/// The sign-in cookie's name (its value, `byre_session`, is what browsers hold already).
pub const SIGNIN_COOKIE: &str = "byre_session";
/// The header a state-changing request on the sign-in cookie must carry, with the value `1`.
pub const CSRF_HEADER: &str = "X-Byre-CSRF";
/// How long a sign-in lasts.
pub const SIGNIN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most sign-ins one login holds at once; a new one beyond it ends the oldest.
pub const MAX_SIGNINS_PER_LOGIN: usize = 64;

struct SignIn {
    login: String,
    started: Instant,
    /// Turns true when the sign-in ends, so streams opened on it end too.
    ended: tokio::sync::watch::Sender<bool>,
}

/// Token mode's sign-ins, keyed by the SHA-256 of their cookie's id.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct SignIns {
    by_hash: Arc<Mutex<HashMap<[u8; 32], SignIn>>>,
}

fn hash(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl SignIns {
    /// Starts a sign-in for `login`; returns the cookie's value.
    pub fn open(&self, login: &str) -> String {
        let mut bytes = Vec::with_capacity(32);
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.started.elapsed() < SIGNIN_LIFETIME);
        let mut mine: Vec<([u8; 32], Instant)> = map
            .iter()
            .filter(|(_, s)| s.login == login)
            .map(|(h, s)| (*h, s.started))
            .collect();
        if mine.len() >= MAX_SIGNINS_PER_LOGIN {
            mine.sort_by_key(|(_, at)| *at);
            for (h, _) in &mine[..=mine.len() - MAX_SIGNINS_PER_LOGIN] {
                map.remove(h);
            }
        }
        map.insert(
            hash(&id),
            SignIn {
                login: login.to_owned(),
                started: Instant::now(),
                ended: tokio::sync::watch::channel(false).0,
            },
        );
        id
    }

    /// The login of a live sign-in.
    pub fn login(&self, id: &str) -> Option<String> {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&hash(id))
            .filter(|s| s.started.elapsed() < SIGNIN_LIFETIME)
            .map(|s| s.login.clone())
    }

    /// A signal that turns true (or closes) when the sign-in ends; `None` when it is not live.
    pub fn watch(&self, id: &str) -> Option<tokio::sync::watch::Receiver<bool>> {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&hash(id)).map(|s| s.ended.subscribe())
    }

    /// Ends a sign-in, and the streams opened on it; whether it was live.
    pub fn close(&self, id: &str) -> bool {
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        match map.remove(&hash(id)) {
            Some(s) => {
                s.ended.send_replace(true);
                true
            }
            None => false,
        }
    }
}

/// The tokens of token mode.
/// # Errors
/// Not found outside token mode: there is nothing to sign in to.
pub fn token_mode(app: &Ctx) -> Result<&HashMap<String, String>, Error> {
    match &app.settings.auth {
        AuthMode::Token { tokens } => Ok(tokens),
        AuthMode::Local { .. } => Err(Error::NotFound(
            "this server runs with --auth local: there is nothing to sign in to".into(),
        )),
        AuthMode::Tailscale => Err(Error::NotFound(
            "this server runs with --auth tailscale: Tailscale says who you are".into(),
        )),
    }
}

/// Signs in with a bearer `token`: a new sign-in for its login. Answers the login and the
/// sign-in cookie's value.
/// # Errors
/// Unauthenticated for an unknown token; not found outside token mode.
pub fn sign_in(app: &Ctx, token: &str) -> Result<(String, String), Error> {
    let tokens = token_mode(app)?;
    let login = crate::settings::login_for_token(tokens, token.trim())
        .ok_or_else(|| Error::Unauthenticated("unknown token".into()))?;
    let id = app.signins.open(&login);
    tracing::info!(login = %login, "signed in");
    Ok((login, id))
}

/// Signs out the sign-in whose cookie value is `id` (also when it had already ended), and
/// ends the streams opened on it.
/// # Errors
/// Not found outside token mode.
pub fn sign_out(app: &Ctx, id: Option<&str>) -> Result<(), Error> {
    token_mode(app)?;
    if let Some(id) = id {
        if let Some(login) = app.signins.login(id) {
            tracing::info!(login = %login, "signed out");
        }
        app.signins.close(id);
    }
    Ok(())
}
