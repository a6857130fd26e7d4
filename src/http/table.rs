//! What the route table adds to actix: a method on a known path that the contract does not
//! define answers 405 with `Allow`; JSON bodies that are too large, of another Content-Type,
//! or with fields the contract does not define get the contract's status and a message that
//! says what was expected; and any error actix itself answers (a text/plain 413, say) is
//! rewritten into the `{"message"}` shape every error has.

use std::collections::BTreeMap;

use actix_web::body::{to_bytes, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::JsonPayloadError;
use actix_web::http::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};

use super::{ApiError, MAX_JSON_BYTES};

/// Registers routes and remembers each path's methods, for the 405s of [`RouteTable::finish`].
pub struct RouteTable<'a> {
    cfg: &'a mut web::ServiceConfig,
    allowed: BTreeMap<&'static str, Vec<Method>>,
}

impl<'a> RouteTable<'a> {
    /// A table registering into `cfg`.
    pub fn new(cfg: &'a mut web::ServiceConfig) -> RouteTable<'a> {
        RouteTable {
            cfg,
            allowed: BTreeMap::new(),
        }
    }

    /// Routes `method path` to `route`.
    pub fn route(
        &mut self,
        path: &'static str,
        method: Method,
        route: actix_web::Route,
    ) -> &mut Self {
        self.cfg.route(path, route.method(method.clone()));
        self.allowed.entry(path).or_default().push(method);
        self
    }

    /// Registers, after every route, one resource per path that answers the methods no route
    /// took: 405 with `Allow` listing those that exist.
    pub fn finish(&mut self) {
        for (path, methods) in std::mem::take(&mut self.allowed) {
            let allow = methods
                .iter()
                .map(Method::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            self.cfg
                .service(web::resource(path).to(move |req: HttpRequest| {
                    let allow = allow.clone();
                    async move {
                        let mut resp = ApiError::MethodNotAllowed(format!(
                            "{} is not an operation of {}: use {allow}",
                            req.method(),
                            req.path()
                        ))
                        .error_response();
                        if let Ok(v) = HeaderValue::from_str(&allow) {
                            resp.headers_mut().insert(ALLOW, v);
                        }
                        resp
                    }
                }));
        }
    }
}

/// The error of a JSON body that could not be read: 413 over [`MAX_JSON_BYTES`], 400 naming the
/// expected Content-Type, 400 with serde's message (which names an unknown or missing field).
pub fn json_error(err: JsonPayloadError, _req: &HttpRequest) -> ApiError {
    let limit = MAX_JSON_BYTES / 1024;
    match err {
        JsonPayloadError::Overflow { .. } | JsonPayloadError::OverflowKnownLength { .. } => {
            ApiError::PayloadTooLarge(format!("JSON bodies are limited to {limit} KiB"))
        }
        JsonPayloadError::Payload(actix_web::error::PayloadError::Overflow) => {
            ApiError::PayloadTooLarge(format!("JSON bodies are limited to {limit} KiB"))
        }
        JsonPayloadError::ContentType => ApiError::BadRequest(
            "this operation takes a JSON body: send it with `Content-Type: application/json`"
                .into(),
        ),
        JsonPayloadError::Deserialize(e) => ApiError::BadRequest(format!("invalid JSON body: {e}")),
        other => ApiError::BadRequest(format!("invalid JSON body: {other}")),
    }
}

/// Drops the optional whitespace RFC 9110 allows around a Content-Type's `;`
/// (`application/json ; charset=utf-8`), which actix's media-type parser refuses, so such a
/// request is read like `application/json;charset=utf-8`.
fn tidy_content_type(headers: &mut actix_web::http::header::HeaderMap) {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return;
    };
    if !ct.contains(';') {
        return;
    }
    let tidy: Vec<&str> = ct.split(';').map(str::trim).collect();
    let tidy = tidy.join(";");
    if tidy != ct {
        if let Ok(v) = HeaderValue::from_str(&tidy) {
            headers.insert(CONTENT_TYPE, v);
        }
    }
}

/// Middleware: an error response that is not JSON (actix's own answers, such as a payload
/// error) is rewritten as `{"message": <its text>}` with the same status and headers. On the
/// way in, a Content-Type with spaces around its `;` is tidied first.
/// # Errors
/// Those of the wrapped service.
pub async fn json_errors(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    tidy_content_type(req.headers_mut());
    let res = next.call(req).await?;
    let status = res.status();
    let is_json = res
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return Ok(res.map_into_boxed_body());
    }
    let (req, res) = res.into_parts();
    let mut headers = res.headers().clone();
    let text = match to_bytes(res.into_body()).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut resp = HttpResponse::build(status).json(serde_json::json!({ "message": message }));
    headers.remove(CONTENT_TYPE);
    headers.remove(actix_web::http::header::CONTENT_LENGTH);
    for (name, value) in headers.iter() {
        resp.headers_mut().append(name.clone(), value.clone());
    }
    Ok(ServiceResponse::new(req, resp))
}
