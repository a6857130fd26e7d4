//! Middleware: the security headers every response carries (README.md "Authentication").
//!
//! The Content-Security-Policy forbids inline script, `eval`, plugins, `<base>` and framing,
//! and lets images come only from byre itself or `data:` URLs; so agent text or a
//! repository's file that slips into a page cannot run script or load from elsewhere. It is
//! sent on every response, not only the page's: a file byre serves (an SVG, an HTML file of a
//! worktree) opened on its own is held to the same policy. A handler that sets its own header
//! keeps it.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;

/// The Content-Security-Policy of every response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'; \
img-src 'self' data:; style-src 'self'";

const HEADERS: [(&str, &str); 3] = [
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

/// Adds [`CONTENT_SECURITY_POLICY`], `X-Content-Type-Options: nosniff` and
/// `Referrer-Policy: no-referrer` to a response that lacks them.
pub async fn security_headers(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = next.call(req).await?;
    let headers = res.headers_mut();
    for (name, value) in HEADERS {
        let name = HeaderName::from_static(name);
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    Ok(res)
}
