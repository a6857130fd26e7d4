//! Token mode's signed-in browser sessions (docs/operating.md "Signing in from a browser"): a
//! session cookie's id, held only as its SHA-256, maps to a login until sign-out, its lifetime,
//! or byre's restart. Each sign-in also makes a **sign-in key**, a second secret the sign-in
//! page keeps in `localStorage` and sends on every request the cookie signs (`X-Byre-CSRF`, or
//! the query parameter `signin_key` where a header cannot be set). Cookies are scoped by host,
//! not port, so every other port of byre's host (a task's preview, a page an agent wrote) is
//! sent the cookie; `localStorage` is scoped by port, so only byre's own pages hold the key,
//! and a cookie alone signs nothing (docs/security.md). [`sign_in`] and [`sign_out`] are the
//! operations; the HTTP adapter (`src/http/auth.rs`) sets and clears the cookie;
//! `crate::identity` reads the login of a request's cookie and key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{Ctx, Error};
use crate::config::AuthMode;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "byre_session";
/// The header byre's pages send on every request: the sign-in key on the session cookie
/// (any non-empty value elsewhere, as proof of a same-origin page: `http::edge`).
pub const CSRF_HEADER: &str = "X-Byre-CSRF";
/// The query parameter that carries the sign-in key where a header cannot be set
/// (`EventSource`, WebSocket handshakes, `<img src>`, links to blobs).
pub const SIGNIN_KEY_PARAM: &str = "signin_key";
/// How long a session lasts after sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most sessions one login holds at once; a new sign-in beyond it ends the oldest.
pub const MAX_SESSIONS_PER_LOGIN: usize = 64;

struct Session {
    login: String,
    /// The SHA-256 of the sign-in key.
    key_hash: [u8; 32],
    started: Instant,
    /// Turns true when the session ends, so streams opened on it end too.
    ended: tokio::sync::watch::Sender<bool>,
}

/// A new sign-in: the cookie's value and the sign-in key, each 256 random bits in hex.
#[derive(Debug)]
pub struct NewSession {
    /// The session cookie's value.
    pub id: String,
    /// The sign-in key.
    pub key: String,
}

/// What a session cookie and key prove, from [`Sessions::check`].
#[derive(Debug, PartialEq, Eq)]
pub enum SessionCheck {
    /// A live session, and its key: the login.
    SignedIn(String),
    /// A live session without its key (none, or another).
    KeyMissing,
    /// No live session: never opened, signed out, expired or forgotten by a restart.
    Ended,
}

/// The signed-in browser sessions of token mode, keyed by the SHA-256 of their cookie's id.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Sessions {
    by_hash: Arc<Mutex<HashMap<[u8; 32], Session>>>,
}

fn hash(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 256 random bits in hex (two v4 UUIDs: 244 of them random).
fn random_hex() -> String {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Sessions {
    /// Starts a session for `login`; returns the cookie's value and the sign-in key.
    pub fn open(&self, login: &str) -> NewSession {
        let new = NewSession {
            id: random_hex(),
            key: random_hex(),
        };
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.started.elapsed() < SESSION_LIFETIME);
        let mut mine: Vec<([u8; 32], Instant)> = map
            .iter()
            .filter(|(_, s)| s.login == login)
            .map(|(h, s)| (*h, s.started))
            .collect();
        if mine.len() >= MAX_SESSIONS_PER_LOGIN {
            mine.sort_by_key(|(_, at)| *at);
            for (h, _) in &mine[..=mine.len() - MAX_SESSIONS_PER_LOGIN] {
                map.remove(h);
            }
        }
        map.insert(
            hash(&new.id),
            Session {
                login: login.to_owned(),
                key_hash: hash(&new.key),
                started: Instant::now(),
                ended: tokio::sync::watch::channel(false).0,
            },
        );
        new
    }

    /// The login of a live session, whatever key comes with it: only for what a cookie alone
    /// may decide (sending a page load to `/signin` or not).
    pub fn login(&self, id: &str) -> Option<String> {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&hash(id))
            .filter(|s| s.started.elapsed() < SESSION_LIFETIME)
            .map(|s| s.login.clone())
    }

    /// What the cookie `id` and the sign-in `key` (if any) prove. The key is compared by its
    /// SHA-256, in time that does not depend on where it differs.
    pub fn check(&self, id: &str, key: Option<&str>) -> SessionCheck {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        let Some(session) = map
            .get(&hash(id))
            .filter(|s| s.started.elapsed() < SESSION_LIFETIME)
        else {
            return SessionCheck::Ended;
        };
        match key {
            Some(key) if crate::identity::constant_time_eq(&hash(key), &session.key_hash) => {
                SessionCheck::SignedIn(session.login.clone())
            }
            _ => SessionCheck::KeyMissing,
        }
    }

    /// A signal that turns true (or closes) when the session ends; `None` when it is not live.
    pub fn watch(&self, id: &str) -> Option<tokio::sync::watch::Receiver<bool>> {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&hash(id)).map(|s| s.ended.subscribe())
    }

    /// Ends a session, and the streams opened on it; whether it was live.
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
    match &app.config.auth {
        AuthMode::Token { tokens } => Ok(tokens),
        AuthMode::Local { .. } => Err(Error::NotFound(
            "this server runs with --auth local: there is nothing to sign in to".into(),
        )),
        AuthMode::Tailscale => Err(Error::NotFound(
            "this server runs with --auth tailscale: Tailscale says who you are".into(),
        )),
    }
}

/// Signs in with a bearer `token`: a new session for its login. Answers the login, the
/// session cookie's value and the sign-in key.
/// # Errors
/// Unauthenticated for an unknown token; not found outside token mode.
pub fn sign_in(app: &Ctx, token: &str) -> Result<(String, NewSession), Error> {
    let tokens = token_mode(app)?;
    let login = crate::identity::login_for_token(tokens, token.trim())
        .ok_or_else(|| Error::Unauthenticated("unknown token".into()))?;
    let session = app.sessions.open(&login);
    tracing::info!(login = %login, "signed in");
    Ok((login, session))
}

/// Signs out the session whose cookie value is `id` when `key` is its sign-in key (also when
/// it had already ended), and ends the streams opened on it.
/// # Errors
/// Not found outside token mode; unauthenticated for a live session without its key (a
/// cookie alone, say one another port of the host was sent, signs nothing out either).
pub fn sign_out(app: &Ctx, id: Option<&str>, key: Option<&str>) -> Result<(), Error> {
    token_mode(app)?;
    if let Some(id) = id {
        match app.sessions.check(id, key) {
            SessionCheck::SignedIn(login) => {
                app.sessions.close(id);
                tracing::info!(login = %login, "signed out");
            }
            SessionCheck::KeyMissing => return Err(key_missing()),
            SessionCheck::Ended => {}
        }
    }
    Ok(())
}

/// The refusal of a live session's cookie without its sign-in key.
pub fn key_missing() -> Error {
    Error::Unauthenticated(format!(
        "a request signed in with the session cookie must carry the sign-in's key (the header `{CSRF_HEADER}`, or `{SIGNIN_KEY_PARAM}=` where a header cannot be sent), which byre's own page keeps: sign in again at /signin"
    ))
}
