//! `getStatus` — GET /api/admin/status (the figures come from [`crate::app::status`]).

use actix_web::{web, HttpResponse};

use super::{ApiError, App};
use crate::identity::Caller;

/// `getStatus` — 200 `Status`: real figures of this server and its agent processes.
pub async fn get_status(_caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(crate::app::status::status(&app).await?))
}
