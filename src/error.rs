//! `ApiError`: the one place an error becomes an HTTP status. Every body is
//! `{"message": …}`; 4xx messages are for the user, 5xx bodies are generic and the cause is
//! logged.

use actix_web::{http::StatusCode, HttpResponse, ResponseError};
use byre_projections::Rejection;

use byre_app as app;
use byre_log::SubmitError;

/// An error answered to an HTTP client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or invalid.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no valid identity.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such entity or route.
    #[error("{0}")]
    NotFound(String),
    /// 405: the path exists, the method does not (the caller adds `Allow`).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: conflicts with current state.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is too large.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 429: too many attempts from this peer; try again after `retry_after_secs`.
    #[error("{message}")]
    TooManyRequests {
        /// For the user.
        message: String,
        /// The `Retry-After` header's seconds.
        retry_after_secs: u64,
    },
    /// 501: built by a later issue.
    #[error("{0}")]
    NotImplemented(String),
    /// 503: the log is not accepting writes.
    #[error("{0}")]
    Unavailable(String),
    /// 500: anything else; the cause is logged, the body is generic.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 500 whose cause is logged with the request's span.
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        ApiError::Internal(cause.to_string())
    }
}

/// The status of each application error: the one mapping from domain errors to HTTP.
impl From<app::Error> for ApiError {
    fn from(e: app::Error) -> Self {
        match e {
            app::Error::Invalid(m) => ApiError::BadRequest(m),
            app::Error::Unauthenticated(m) => ApiError::Unauthorized(m),
            app::Error::Forbidden(m) => ApiError::Forbidden(m),
            app::Error::NotFound(m) => ApiError::NotFound(m),
            app::Error::Conflict(m) => ApiError::Conflict(m),
            app::Error::TooLarge(m) => ApiError::PayloadTooLarge(m),
            app::Error::NotImplemented(m) => ApiError::NotImplemented(m),
            app::Error::Unavailable(m) => ApiError::Unavailable(m),
            app::Error::Internal(m) => ApiError::Internal(m),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        app::Error::from(r).into()
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> Self {
        app::Error::from(e).into()
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let message = match self {
            ApiError::Internal(cause) => {
                tracing::error!(cause = %cause, "internal error");
                "internal error; see the server log".to_owned()
            }
            ApiError::Unavailable(cause) => {
                tracing::error!(cause = %cause, "unavailable");
                cause.clone()
            }
            other => {
                tracing::warn!(message = %other, "refused");
                other.to_string()
            }
        };
        let mut resp = HttpResponse::build(self.status_code());
        if let ApiError::Unauthorized(_) = self {
            resp.insert_header(("WWW-Authenticate", "Bearer"));
        }
        if let ApiError::TooManyRequests {
            retry_after_secs, ..
        } = self
        {
            resp.insert_header(("Retry-After", retry_after_secs.to_string()));
        }
        resp.json(serde_json::json!({ "message": message }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_map_to_the_spec_statuses() {
        let cases = [
            (ApiError::from(Rejection::NotFound("x".into())), 404),
            (ApiError::from(Rejection::Conflict("x".into())), 409),
            (ApiError::from(Rejection::Invalid("x".into())), 400),
            (ApiError::from(Rejection::Forbidden("x".into())), 403),
            (ApiError::from(SubmitError::Unavailable("x".into())), 503),
            (ApiError::PayloadTooLarge("x".into()), 413),
            (ApiError::NotImplemented("x".into()), 501),
            (
                ApiError::TooManyRequests {
                    message: "x".into(),
                    retry_after_secs: 1,
                },
                429,
            ),
        ];
        for (err, status) in cases {
            assert_eq!(err.status_code().as_u16(), status, "{err:?}");
        }
    }

    #[test]
    fn internal_errors_do_not_leak_their_cause() {
        let resp = ApiError::internal("secret path /etc/x").error_response();
        assert_eq!(resp.status().as_u16(), 500);
    }
}
