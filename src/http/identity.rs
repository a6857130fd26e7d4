//! Who is calling: the [`Caller`] extractor. The first request of a login records the user
//! (`user.created`) before the handler runs.
//!
//! In token mode a caller proves who it is with `Authorization: Bearer <token>` or with the
//! session cookie the sign-in page trades a token for (`http::auth`). A state-changing request
//! (anything but GET, HEAD, OPTIONS) on the cookie must carry `X-Byre-CSRF: 1`, a header a
//! cross-site form or script cannot send without a CORS preflight byre never grants. In every
//! mode, a state-changing request the browser marks `Sec-Fetch-Site: cross-site` or
//! `same-site` is refused: only byre's own pages act on its API from a browser. Before any of
//! this, `http::edge` has refused a `Host` byre does not serve and an `Origin` of another site,
//! so the Tailscale headers below count only on requests with a served `Host`.

use std::future::Future;
use std::pin::Pin;

use actix_web::{dev::Payload, http::Method, web, FromRequest, HttpRequest};

use byre_app::settings::login_for_token;
use byre_app::signin::{CSRF_HEADER, SIGNIN_COOKIE};
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

/// Refuses a state-changing request without `X-Byre-CSRF: 1`.
/// # Errors
/// `Forbidden` naming the header.
pub fn require_csrf_header(req: &HttpRequest) -> Result<(), ApiError> {
    let ok = req
        .headers()
        .get(CSRF_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1");
    if changes_state(req.method()) && !ok {
        return Err(ApiError::Forbidden(format!(
            "a request signed in with the session cookie must carry the header `{CSRF_HEADER}: 1` to change anything"
        )));
    }
    Ok(())
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
/// `Unauthorized` when the mode's credentials are missing or wrong, or (Tailscale) the peer
/// is not loopback; `Forbidden` for a state-changing request from another site, or on the
/// session cookie without `X-Byre-CSRF: 1`.
pub fn resolve(req: &HttpRequest, app: &App) -> Result<(String, Option<String>), ApiError> {
    refuse_cross_site(req)?;
    match &app.settings.auth {
        AuthMode::Local { login } => Ok((login.clone(), None)),
        AuthMode::Tailscale => {
            let peer_is_loopback = req
                .peer_addr()
                .is_some_and(|a| a.ip().to_canonical().is_loopback());
            if !peer_is_loopback {
                return Err(ApiError::Unauthorized("Tailscale identity headers are accepted only from tailscale serve on this host".into()));
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
            let login = app.signins.login(cookie.value()).ok_or_else(|| {
                ApiError::Unauthorized("the session has ended: sign in again at /signin".into())
            })?;
            require_csrf_header(req)?;
            Ok((login, None))
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
