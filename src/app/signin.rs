//! Token mode's sign-ins, a browser's sessions (README.md "Authentication"; "session" alone
//! is an agent's): a sign-in cookie's id, held only as its SHA-256, maps to a login until
//! sign-out, its lifetime, or byre's restart. Each sign-in also makes a **sign-in key**, a
//! second secret the sign-in page keeps in `localStorage` and sends on every request the
//! cookie signs (`X-Byre-CSRF`, or the query parameter `signin_key` where a header cannot be
//! set). Cookies are scoped by host, not port, so every other port of byre's host (a task's
//! preview, a page an agent wrote) is sent the cookie; `localStorage` is scoped by port, so
//! only byre's own pages hold the key, and a cookie alone signs nothing (docs/security.md).
//! [`sign_in`] and [`sign_out`] are the operations; the HTTP adapter (`http::auth`) sets and
//! clears the cookie; `http::identity` reads the login of a request's cookie and key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{Ctx, Error};
use crate::settings::AuthMode;

/// The sign-in cookie's name (its value, `byre_session`, is what browsers hold already).
pub const SIGNIN_COOKIE: &str = "byre_session";
/// The header byre's pages send on every request: the sign-in key on the sign-in cookie
/// (any non-empty value elsewhere, as proof of a same-origin page: `http::edge`).
pub const CSRF_HEADER: &str = "X-Byre-CSRF";
/// The query parameter that carries the sign-in key where a header cannot be set
/// (`EventSource`, WebSocket handshakes, `<img src>`, links to blobs).
pub const SIGNIN_KEY_PARAM: &str = "signin_key";
/// How long a sign-in lasts.
pub const SIGNIN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most sign-ins one login holds at once; a new one beyond it ends the oldest.
pub const MAX_SIGNINS_PER_LOGIN: usize = 64;

struct SignIn {
    login: String,
    /// The SHA-256 of the sign-in key.
    key_hash: [u8; 32],
    started: Instant,
    /// Turns true when the sign-in ends, so streams opened on it end too.
    ended: tokio::sync::watch::Sender<bool>,
}

/// A new sign-in: the cookie's value and the sign-in key, each 256 random bits in hex.
#[derive(Debug)]
pub struct NewSignIn {
    /// The sign-in cookie's value.
    pub id: String,
    /// The sign-in key.
    pub key: String,
}

/// What a sign-in cookie and key prove, from [`SignIns::check`].
#[derive(Debug, PartialEq, Eq)]
pub enum SignInCheck {
    /// A live sign-in, and its key: the login.
    SignedIn(String),
    /// A live sign-in without its key (none, or another).
    KeyMissing,
    /// No live sign-in: never opened, signed out, expired or forgotten by a restart.
    Ended,
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

/// 256 random bits in hex (two v4 UUIDs: 244 of them random).
fn random_hex() -> String {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl SignIns {
    /// Starts a sign-in for `login`; returns the cookie's value and the sign-in key.
    pub fn open(&self, login: &str) -> NewSignIn {
        let new = NewSignIn {
            id: random_hex(),
            key: random_hex(),
        };
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
            hash(&new.id),
            SignIn {
                login: login.to_owned(),
                key_hash: hash(&new.key),
                started: Instant::now(),
                ended: tokio::sync::watch::channel(false).0,
            },
        );
        new
    }

    /// The login of a live sign-in, whatever key comes with it: only for what a cookie alone
    /// may decide (sending a page load to `/signin` or not).
    pub fn login(&self, id: &str) -> Option<String> {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&hash(id))
            .filter(|s| s.started.elapsed() < SIGNIN_LIFETIME)
            .map(|s| s.login.clone())
    }

    /// What the cookie `id` and the sign-in `key` (if any) prove. The key is compared by its
    /// SHA-256, in time that does not depend on where it differs.
    pub fn check(&self, id: &str, key: Option<&str>) -> SignInCheck {
        let map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        let Some(signin) = map
            .get(&hash(id))
            .filter(|s| s.started.elapsed() < SIGNIN_LIFETIME)
        else {
            return SignInCheck::Ended;
        };
        match key {
            Some(key) if crate::settings::constant_time_eq(&hash(key), &signin.key_hash) => {
                SignInCheck::SignedIn(signin.login.clone())
            }
            _ => SignInCheck::KeyMissing,
        }
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

/// Signs in with a bearer `token`: a new sign-in for its login. Answers the login, the
/// sign-in cookie's value and the sign-in key.
/// # Errors
/// Unauthenticated for an unknown token; not found outside token mode.
pub fn sign_in(app: &Ctx, token: &str) -> Result<(String, NewSignIn), Error> {
    let tokens = token_mode(app)?;
    let login = crate::settings::login_for_token(tokens, token.trim())
        .ok_or_else(|| Error::Unauthenticated("unknown token".into()))?;
    let signin = app.signins.open(&login);
    tracing::info!(login = %login, "signed in");
    Ok((login, signin))
}

/// Signs out the sign-in whose cookie value is `id` when `key` is its sign-in key (also when
/// it had already ended), and ends the streams opened on it.
/// # Errors
/// Not found outside token mode; unauthenticated for a live sign-in without its key (a
/// cookie alone, say one another port of the host was sent, signs nothing out either).
pub fn sign_out(app: &Ctx, id: Option<&str>, key: Option<&str>) -> Result<(), Error> {
    token_mode(app)?;
    if let Some(id) = id {
        match app.signins.check(id, key) {
            SignInCheck::SignedIn(login) => {
                app.signins.close(id);
                tracing::info!(login = %login, "signed out");
            }
            SignInCheck::KeyMissing => return Err(key_missing()),
            SignInCheck::Ended => {}
        }
    }
    Ok(())
}

/// The refusal of a live sign-in's cookie without its sign-in key.
pub fn key_missing() -> Error {
    Error::Unauthenticated(format!(
        "a request signed in with the session cookie must carry the sign-in's key (the header `{CSRF_HEADER}`, or `{SIGNIN_KEY_PARAM}=` where a header cannot be sent), which byre's own page keeps: sign in again at /signin"
    ))
}
