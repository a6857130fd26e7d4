//! Who is calling: the [`Caller`] extractor. The first request of a login records the user
//! (`user.created`) before the handler runs.
//!
//! In token mode a caller proves who it is with `Authorization: Bearer <token>`, or with the
//! session cookie the sign-in page trades a token for together with that sign-in's key
//! (`X-Byre-CSRF: <key>`, or `signin_key=<key>` in the query where a header cannot be set):
//! the cookie reaches every port of byre's host, the key only byre's own pages
//! (`byre_app::signin`). In tailscale mode, the `Tailscale-User-Login` header counts only on a
//! request that came in on the Unix socket `tailscale serve` forwards to ([`ServeSocket`],
//! `http::serve_socket`): an agent shares the host's network, so a loopback TCP peer proves
//! nothing. In every mode, a state-changing request the browser marks `Sec-Fetch-Site:
//! cross-site` or `same-site` is refused: only byre's own pages act on its API from a browser.
//! Before any of this, `http::edge` has refused a `Host` byre does not serve and an `Origin`
//! of another site.

use std::future::Future;
use std::pin::Pin;

use actix_web::{dev::Payload, http::Method, web, FromRequest, HttpRequest};

use byre_app::settings::login_for_token;
use byre_app::signin::{SignInCheck, CSRF_HEADER, SIGNIN_COOKIE, SIGNIN_KEY_PARAM};
use byre_app::Ctx as App;

use super::ApiError;
use crate::config::AuthMode;

/// The calling user, resolved from the auth mode and known to the projections.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The login.
    pub login: String,
}

/// Whether a request may change state (anything but GET, HEAD, OPTIONS).
pub fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Refuses a state-changing request that a browser says comes from another site.
/// # Errors
/// `Forbidden` naming the header.
pub fn refuse_cross_site(req: &HttpRequest) -> Result<(), ApiError> {
    let site = req
        .headers()
        .get("Sec-Fetch-Site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if changes_state(req.method()) && matches!(site, "cross-site" | "same-site") {
        return Err(ApiError::Forbidden(format!(
            "a browser request from another site (Sec-Fetch-Site: {site}) may not change byre's state"
        )));
    }
    Ok(())
}

/// The `X-Byre-CSRF` header's value, when it has a non-empty one.
fn csrf_header(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Refuses a state-changing request without the `X-Byre-CSRF` header (any value: no page of
/// another site can add a header without a CORS preflight, which byre never grants). For
/// sign-in and sign-out, which the sign-in page sends before it has a key.
/// # Errors
/// `Forbidden` naming the header.
pub fn require_csrf_header(req: &HttpRequest) -> Result<(), ApiError> {
    if changes_state(req.method()) && csrf_header(req).is_none() {
        return Err(ApiError::Forbidden(format!(
            "this request must carry the header `{CSRF_HEADER}` (byre's page sends it)"
        )));
    }
    Ok(())
}

/// The sign-in key a request carries: the `X-Byre-CSRF` header, else the query parameter
/// `signin_key` (for `EventSource`, WebSockets, images and links, which cannot set headers).
pub fn signin_key(req: &HttpRequest) -> Option<String> {
    if let Some(key) = csrf_header(req) {
        return Some(key.to_owned());
    }
    web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().remove(SIGNIN_KEY_PARAM))
        .filter(|k| !k.is_empty())
}

/// The mark of a connection accepted on tailscale mode's Unix socket, the one `tailscale
/// serve` forwards to (a connection-data extension; `http::serve_socket`).
#[derive(Debug, Clone, Copy)]
pub struct ServeSocket;

/// Marks a connection accepted on a Unix socket (byre's only one is `tailscale serve`'s); for
/// `HttpServer::on_connect`.
pub fn mark_serve_socket(conn: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    if conn.is::<tokio::net::UnixStream>() {
        data.insert(ServeSocket);
    }
}

/// Whether the request came in on the Unix socket `tailscale serve` forwards to.
fn on_serve_socket(req: &HttpRequest) -> bool {
    req.conn_data::<ServeSocket>().is_some()
}

/// The token of an `Authorization: Bearer` header, if the request has one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get("Authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.get(..7)
                .filter(|p| p.eq_ignore_ascii_case("bearer "))
                .map(|_| &v[7..])
        })
        .map(str::trim)
}

/// Resolves the login of a request, without touching the log.
/// # Errors
/// `Unauthorized` when the mode's credentials are missing or wrong: (Tailscale) a request
/// that did not come in on `tailscale serve`'s socket, (token) the session cookie without its
/// sign-in's key; `Forbidden` for a state-changing request from another site.
pub fn resolve(req: &HttpRequest, app: &App) -> Result<(String, Option<String>), ApiError> {
    refuse_cross_site(req)?;
    match &app.settings.auth {
        AuthMode::Local { login } => Ok((login.clone(), None)),
        AuthMode::Tailscale => {
            if !on_serve_socket(req) {
                return Err(ApiError::Unauthorized(
                    "in tailscale mode byre knows who you are only from tailscale serve, on the socket it forwards to (docs/operating.md); this port serves agents' tools, not people".into(),
                ));
            }
            let header = |name: &str| {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
            };
            let login = header("Tailscale-User-Login").ok_or_else(|| {
                ApiError::Unauthorized("missing Tailscale-User-Login header".into())
            })?;
            if crate::config::check_login(login).is_err() {
                return Err(ApiError::Unauthorized(
                    "invalid Tailscale-User-Login header".into(),
                ));
            }
            Ok((
                login.to_owned(),
                header("Tailscale-User-Name").map(str::to_owned),
            ))
        }
        AuthMode::Token { tokens } => {
            if let Some(given) = bearer(req) {
                return login_for_token(tokens, given)
                    .map(|l| (l, None))
                    .ok_or_else(|| ApiError::Unauthorized("unknown bearer token".into()));
            }
            let Some(cookie) = req.cookie(SIGNIN_COOKIE) else {
                return Err(ApiError::Unauthorized(
                    "missing Authorization: Bearer token (or sign in at /signin)".into(),
                ));
            };
            match app
                .signins
                .check(cookie.value(), signin_key(req).as_deref())
            {
                SignInCheck::SignedIn(login) => Ok((login, None)),
                SignInCheck::KeyMissing => Err(byre_app::signin::key_missing().into()),
                SignInCheck::Ended => Err(ApiError::Unauthorized(
                    "the session has ended: sign in again at /signin".into(),
                )),
            }
        }
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Caller, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let app = req
                .app_data::<web::Data<App>>()
                .ok_or_else(|| ApiError::Internal("app data missing".into()))?;
            let (login, display_name) = resolve(&req, app)?;
            byre_app::me::ensure_user(app, &login, display_name).await?;
            Ok(Caller { login })
        })
    }
}
