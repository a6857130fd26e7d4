//! Who is calling: the [`Caller`] extractor. The first request of a login records the user
//! (`user.created`) before the handler runs.

use std::future::Future;
use std::pin::Pin;

use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use byre_projections::Command;

use crate::app::{Ctx as App, Error};
use crate::config::AuthMode;

/// The calling user, resolved from the auth mode and known to the projections.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The login.
    pub login: String,
}

/// Resolves the login of a request, without touching the log.
/// # Errors
/// `Unauthorized` when the mode's credentials are missing or wrong, or (Tailscale) the peer
/// is not loopback.
pub fn resolve(req: &HttpRequest, auth: &AuthMode) -> Result<(String, Option<String>), Error> {
    match auth {
        AuthMode::Local { login } => Ok((login.clone(), None)),
        AuthMode::Tailscale => {
            let peer_is_loopback = req
                .peer_addr()
                .is_some_and(|a| a.ip().to_canonical().is_loopback());
            if !peer_is_loopback {
                return Err(Error::Unauthenticated("Tailscale identity headers are accepted only from tailscale serve on this host".into()));
            }
            let header = |name: &str| {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
            };
            let login = header("Tailscale-User-Login").ok_or_else(|| {
                Error::Unauthenticated("missing Tailscale-User-Login header".into())
            })?;
            if crate::config::check_login(login).is_err() {
                return Err(Error::Unauthenticated(
                    "invalid Tailscale-User-Login header".into(),
                ));
            }
            Ok((
                login.to_owned(),
                header("Tailscale-User-Name").map(str::to_owned),
            ))
        }
        AuthMode::Token { tokens } => {
            let bearer = req
                .headers()
                .get("Authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    v.get(..7)
                        .filter(|p| p.eq_ignore_ascii_case("bearer "))
                        .map(|_| &v[7..])
                })
                .map(str::trim)
                .ok_or_else(|| {
                    Error::Unauthenticated("missing Authorization: Bearer token".into())
                })?;
            // Compare with every token in constant time, so timing tells nothing about them.
            let mut found = None;
            for (token, login) in tokens {
                if constant_time_eq(token.as_bytes(), bearer.as_bytes()) {
                    found = Some(login.clone());
                }
            }
            found
                .map(|l| (l, None))
                .ok_or_else(|| Error::Unauthenticated("unknown bearer token".into()))
        }
    }
}

impl FromRequest for Caller {
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Caller, Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let app = req
                .app_data::<web::Data<App>>()
                .ok_or_else(|| Error::Internal("app data missing".into()))?;
            let (login, display_name) = resolve(&req, &app.config.auth)?;
            if !app.writer.read(|s| s.users.contains_key(&login)) {
                let cmd = Command::EnsureUser {
                    display_name: display_name.unwrap_or_else(|| login.clone()),
                    login: login.clone(),
                    default_model: app.config.default_model.clone(),
                };
                app.writer.submit(cmd, None).await?;
            }
            Ok(Caller { login })
        })
    }
}

/// Whether two byte strings are equal, in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
