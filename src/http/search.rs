//! `searchAll` (byre's extension): parse, call [`byre_app::search`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::search as op;

/// Query of `searchAll`.
#[derive(Deserialize)]
pub struct SearchQuery {
    q: String,
    project_id: Option<String>,
    limit: Option<usize>,
}

/// `searchAll` — GET /api/search?q=…[&project_id=][&limit=] → 200 `SearchResults`: projects,
/// tasks, and transcript items and review findings the caller may see; 400 for an empty,
/// too long or malformed `q` or a `limit` outside 1 to 50; 404 for an unknown project.
pub async fn search_all(
    caller: Caller,
    query: web::Query<SearchQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let params = op::SearchParams {
        q: q.q,
        project_id: q.project_id,
        limit: q.limit,
    };
    Ok(HttpResponse::Ok().json(op::search_all(&app, &caller.login, params).await?))
}
