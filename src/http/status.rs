//! `getStatus` — GET /api/admin/status (the figures come from [`byre_app::status`]); and,
//! outside the contract, `GET /metrics` and `GET /api/openapi.yaml`.

use actix_web::{web, HttpResponse};

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::metrics::Requests;

/// The client a request comes from, for `getStatus`: `(host, commit, is_page)` from its
/// `Byre-Host` and `Byre-Commit` headers. A page byre served itself cannot set headers on its
/// `EventSource`: a browser request that is same-origin (`Sec-Fetch-Site: same-origin`) or
/// signed in with the session cookie, and sends no `Byre-Commit`, is such a page, and its
/// commit is the one this binary was built from ([`crate::BUILD_COMMIT`]), which served it.
pub fn client_of(req: &actix_web::HttpRequest) -> (String, String, bool) {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    let host = header("Byre-Host");
    let commit = header("Byre-Commit");
    let page = commit.is_empty()
        && (header("Sec-Fetch-Site") == "same-origin"
            || req.cookie(super::auth::SIGNIN_COOKIE).is_some());
    if page {
        (host, crate::BUILD_COMMIT.to_owned(), true)
    } else {
        (host, commit, false)
    }
}

/// `getStatus` — 200 `Status`: real figures of this server and its agent processes.
pub async fn get_status(caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(byre_app::status::status(&app, &caller.login).await?))
}

/// `GET /metrics` (outside the contract) — 200, the server's figures as Prometheus text
/// ([`byre_app::metrics`]). Authenticated like every API request.
pub async fn metrics(
    caller: Caller,
    app: web::Data<App>,
    requests: web::Data<Requests>,
) -> Result<HttpResponse, ApiError> {
    let text = byre_app::metrics::render(&app, &requests, &caller.login).await?;
    Ok(HttpResponse::Ok()
        .content_type(byre_app::metrics::CONTENT_TYPE)
        .body(text))
}

/// `GET /api/openapi.yaml` (outside the contract) — 200, the contract this server implements,
/// `schema/byre.openapi.yaml` as built into the binary.
pub async fn openapi(_caller: Caller) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/yaml")
        .body(include_str!("../../schema/byre.openapi.yaml"))
}
