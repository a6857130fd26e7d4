//! `listProjects`, `createProject`, `getProject`: parse, call [`byre_app::projects`],
//! answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::projects as op;

/// `listProjects` — GET /api/projects → 200 `[Project]`, in creation order.
pub async fn list_projects(_caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_projects(&app)))
}

/// Body of `createProject` (spec `ProjectCreate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectCreate {
    name: String,
    repo_path: String,
}

/// `createProject` — POST /api/projects → 201 `Project`; 400 when `repo_path` is not the top
/// of an existing git repository with a commit, or another project has it, or the name is bad.
/// The default branch and origin's URL are detected.
pub async fn create_project(
    caller: Caller,
    body: web::Json<ProjectCreate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let project = op::create_project(&app, &caller.login, b.name, &b.repo_path).await?;
    Ok(HttpResponse::Created().json(project))
}

/// `getProject` — GET /api/projects/{projectId} → 200 `Project`; 404.
pub async fn get_project(
    _caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_project(&app, &id)?))
}
