//! Browser sign-in for token mode (outside the OpenAPI contract): the page at `/signin`, which
//! trades a bearer token for a session cookie and a sign-in key (`POST /auth/signin`),
//! `POST /auth/signout`, and the guard that sends a page load without a sign-in to `/signin`.
//!
//! Sign-ins are held server-side, in memory (`byre_app::signin`): the cookie `byre_session`
//! carries a random id, the answer's `signin_key` a second secret; the server keeps only their
//! SHA-256 with the login, for 30 days. Signing out forgets them at once; a restart of the
//! server forgets every sign-in (everyone signs in again; tokens are never stored in the
//! browser). The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's
//! request carries it) and `Secure` when the request came over HTTPS; but cookies are not
//! scoped by port, so every other port of byre's host is sent it. `identity::resolve`
//! therefore accepts it only with its sign-in key, which the page keeps in `localStorage`
//! (scoped by port) and sends on every request.

use actix_web::body::MessageBody;
use actix_web::cookie::{time, Cookie, SameSite};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::identity;
use super::limits::{Limits, MAX_SIGNIN_BYTES};
use super::{ApiError, App};
use crate::config::AuthMode;
use byre_app::signin;

pub use byre_app::signin::{
    SignIns, CSRF_HEADER, MAX_SIGNINS_PER_LOGIN, SIGNIN_COOKIE, SIGNIN_KEY_PARAM, SIGNIN_LIFETIME,
};

const SIGNIN_HTML: &str = include_str!("../ui/signin/signin.html");
const SIGNIN_JS: &str = include_str!("../ui/signin/signin.js");
const SIGNIN_CSS: &str = include_str!("../ui/signin/signin.css");

/// The end signal of the session a request is signed in with, when it is signed in by
/// cookie rather than a bearer token.
pub fn signin_end(app: &App, req: &HttpRequest) -> Option<tokio::sync::watch::Receiver<bool>> {
    if identity::bearer(req).is_some() {
        return None;
    }
    app.signins.watch(req.cookie(SIGNIN_COOKIE)?.value())
}

/// Body of `POST /auth/signin`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigninBody {
    token: String,
}

fn session_cookie(req: &HttpRequest, value: String, max_age: time::Duration) -> Cookie<'static> {
    Cookie::build(SIGNIN_COOKIE, value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(req.connection_info().scheme() == "https")
        .max_age(max_age)
        .finish()
}

/// `POST /auth/signin` `{"token"}` with `X-Byre-CSRF` (any value) → 200 `{"login",
/// "signin_key"}` and the session cookie; 400 a body that is not that JSON, 401 for an unknown
/// token, 403 without the header, 404 outside token mode, 413 over [`MAX_SIGNIN_BYTES`], 429
/// with `Retry-After` past the peer's attempts (`serve --signin-attempts`, counted before the
/// body is read).
pub async fn signin(
    req: HttpRequest,
    payload: web::Payload,
    app: web::Data<App>,
    limits: web::Data<Limits>,
) -> Result<HttpResponse, ApiError> {
    signin::token_mode(&app)?;
    if let Some(peer) = req.peer_addr() {
        limits
            .signin
            .attempt(peer.ip())
            .map_err(|secs| ApiError::TooManyRequests {
                message: format!(
                    "too many sign-in attempts from your address: try again in {secs} s"
                ),
                retry_after_secs: secs,
            })?;
    }
    identity::refuse_cross_site(&req)?;
    identity::require_csrf_header(&req)?;
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !is_json {
        return Err(ApiError::BadRequest(
            "this operation takes a JSON body: send it with `Content-Type: application/json`"
                .into(),
        ));
    }
    let bytes = super::read_limited(payload, MAX_SIGNIN_BYTES, "sign-in bodies").await?;
    let body: SigninBody = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    let (login, new) = signin::sign_in(&app, &body.token)?;
    let max_age = time::Duration::seconds(SIGNIN_LIFETIME.as_secs() as i64);
    Ok(HttpResponse::Ok()
        .cookie(session_cookie(&req, new.id, max_age))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(serde_json::json!({ "login": login, "signin_key": new.key })))
}

/// `POST /auth/signout` with `X-Byre-CSRF: <the sign-in key>` → 204, the sign-in forgotten and
/// the cookie cleared (also when it had already ended); 401 a live sign-in's cookie without
/// its key, 403 without the header, 404 outside token mode.
pub async fn signout(req: HttpRequest, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    signin::token_mode(&app)?;
    identity::refuse_cross_site(&req)?;
    identity::require_csrf_header(&req)?;
    let cookie = req.cookie(SIGNIN_COOKIE);
    signin::sign_out(
        &app,
        cookie.as_ref().map(|c| c.value()),
        identity::signin_key(&req).as_deref(),
    )?;
    Ok(HttpResponse::NoContent()
        .cookie(session_cookie(&req, String::new(), time::Duration::ZERO))
        .finish())
}

/// `GET /signin`: the sign-in page in token mode (whose script goes on to `next` by itself
/// when the key it keeps still signs in: a page load cannot show the key); elsewhere a
/// redirect to `/`.
pub async fn signin_page(app: web::Data<App>) -> HttpResponse {
    if !matches!(app.settings.auth, AuthMode::Token { .. }) {
        return HttpResponse::SeeOther()
            .insert_header((header::LOCATION, "/"))
            .finish();
    }
    asset("text/html; charset=utf-8", SIGNIN_HTML)
}

/// `GET /signin/signin.js`.
pub async fn signin_js() -> HttpResponse {
    asset("text/javascript; charset=utf-8", SIGNIN_JS)
}

/// `GET /signin/signin.css`.
pub async fn signin_css() -> HttpResponse {
    asset("text/css; charset=utf-8", SIGNIN_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// Paths the guard never redirects: the API and `/metrics` (which answer 401 JSON), agents' routes and the
/// sign-in page itself.
const NOT_PAGES: [&str; 8] = [
    "/api",
    "/metrics",
    "/internal/",
    "/auth/",
    "/signin",
    "/codebolt",
    "/agent-to-app",
    "/app-to-agent",
];

/// Whether a request has a valid bearer token or a live sign-in cookie, with or without its
/// key: all a page load can show (the UI's files hold nothing of anyone's; what the page then
/// asks of the API needs the key).
fn has_signin(req: &HttpRequest, app: &App) -> bool {
    match &app.settings.auth {
        AuthMode::Token { tokens } => match identity::bearer(req) {
            Some(token) => byre_app::settings::login_for_token(tokens, token).is_some(),
            None => req
                .cookie(SIGNIN_COOKIE)
                .is_some_and(|c| app.signins.login(c.value()).is_some()),
        },
        AuthMode::Local { .. } | AuthMode::Tailscale => true,
    }
}

/// Middleware: in token mode, a page load (GET or HEAD outside the API) without a valid token
/// or a live sign-in cookie is sent to `/signin?next=<where it was going>` (303).
pub async fn page_guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let guarded = matches!(
        *req.method(),
        actix_web::http::Method::GET | actix_web::http::Method::HEAD
    ) && !NOT_PAGES.iter().any(|p| req.path().starts_with(p))
        && req
            .app_data::<web::Data<App>>()
            .is_some_and(|app| !has_signin(req.request(), app));
    if guarded {
        let target = match req.query_string() {
            "" => req.path().to_owned(),
            q => format!("{}?{q}", req.path()),
        };
        let location = format!("/signin?next={}", percent_encode(&target));
        let resp = HttpResponse::SeeOther()
            .insert_header((header::LOCATION, location))
            .finish();
        return Ok(req.into_response(resp).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// Percent-encodes all but unreserved characters and `/`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use byre_app::signin::SignInCheck;

    #[test]
    fn a_signin_names_its_login_with_its_key_until_closed() {
        let signins = SignIns::default();
        let new = signins.open("ada");
        assert_eq!((new.id.len(), new.key.len()), (64, 64));
        assert_ne!(new.id, new.key);
        let (id, key) = (&new.id, new.key.as_str());
        assert_eq!(signins.login(id).as_deref(), Some("ada"));
        assert_eq!(
            signins.check(id, Some(key)),
            SignInCheck::SignedIn("ada".into())
        );
        for wrong in [None, Some("1"), Some(""), Some(id.as_str())] {
            assert_eq!(
                signins.check(id, wrong),
                SignInCheck::KeyMissing,
                "{wrong:?}"
            );
        }
        assert_eq!(
            signins.check("not-a-session", Some(key)),
            SignInCheck::Ended
        );
        let mut ended = signins.watch(id).unwrap();
        assert!(!*ended.borrow_and_update());
        assert!(signins.close(id));
        assert!(ended.has_changed().unwrap_or(true) && *ended.borrow());
        assert_eq!(signins.login(id), None);
        assert_eq!(signins.check(id, Some(key)), SignInCheck::Ended);
        assert!(!signins.close(id));
    }

    #[test]
    fn a_login_holds_a_bounded_number_of_sessions_and_loses_the_oldest() {
        let signins = SignIns::default();
        let first = signins.open("ada").id;
        let bob = signins.open("bob").id;
        let mut last = String::new();
        for _ in 0..MAX_SIGNINS_PER_LOGIN {
            last = signins.open("ada").id;
        }
        assert_eq!(signins.login(&first), None, "the oldest ended");
        assert_eq!(signins.login(&last).as_deref(), Some("ada"));
        assert_eq!(signins.login(&bob).as_deref(), Some("bob"));
    }

    #[test]
    fn next_is_encoded_so_it_stays_one_query_parameter() {
        assert_eq!(
            percent_encode("/tasks/a b?x=1&y"),
            "/tasks/a%20b%3Fx%3D1%26y"
        );
    }
}
