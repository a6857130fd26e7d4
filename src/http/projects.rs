//! `listProjects`, `createProject`, `getProject`.

use std::path::PathBuf;

use actix_web::{web, HttpResponse};
use byre_projections::Command;
use serde::Deserialize;

use super::{blocking, ApiError, App};
use crate::api;
use crate::git::{self, GitError};
use crate::identity::Caller;

/// `listProjects` — GET /api/projects → 200 `[Project]`, in creation order.
pub async fn list_projects(_caller: Caller, app: web::Data<App>) -> Result<HttpResponse, ApiError> {
    let projects: Vec<api::Project> = app.writer.read(|s| {
        s.projects_in_order()
            .into_iter()
            .map(api::Project::from)
            .collect()
    });
    Ok(HttpResponse::Ok().json(projects))
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
    let body = body.into_inner();
    let path = PathBuf::from(&body.repo_path);
    if !path.is_absolute() || body.repo_path.contains('\0') {
        return Err(ApiError::BadRequest(
            "repo_path must be an absolute path".into(),
        ));
    }
    let facts = blocking(move || {
        git::inspect_repo(&path).map_err(|e| match e {
            GitError::Other(m) => ApiError::internal(m),
            user_facing => ApiError::BadRequest(user_facing.to_string()),
        })
    })
    .await?;
    let ack = app
        .submit(Command::CreateProject {
            actor: caller.login,
            name: body.name,
            repo_path: facts.repo_path,
            default_branch: facts.default_branch,
            remote: without_credentials(&facts.remote),
            worktrees_root: app.config.worktrees_root().to_string_lossy().into_owned(),
        })
        .await?;
    let id = ack
        .events
        .iter()
        .find_map(|e| e.project_id.clone())
        .ok_or_else(|| ApiError::internal("project.created missing"))?;
    let project = app
        .writer
        .read(|s| s.projects.get(&id).map(api::Project::from))
        .ok_or_else(|| ApiError::internal("project missing after commit"))?;
    Ok(HttpResponse::Created().json(project))
}

/// `getProject` — GET /api/projects/{projectId} → 200 `Project`; 404.
pub async fn get_project(
    _caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let project = app
        .writer
        .read(|s| s.projects.get(&id).map(api::Project::from))
        .ok_or_else(|| ApiError::NotFound(format!("no project `{id}`")))?;
    Ok(HttpResponse::Ok().json(project))
}

/// An http(s) remote URL without its `user:password@` part, so credentials never reach the
/// log. Other URLs (ssh's `git@host`) are kept as they are: their user is not a secret.
fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    // A query may carry a token (`?access_token=`): never kept.
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let http = scheme.to_ascii_lowercase().ends_with("http")
        || scheme.to_ascii_lowercase().ends_with("https");
    let authority = match authority.rsplit_once('@') {
        // http(s): any user info is a credential. Elsewhere (ssh's `git@`) the user is kept
        // and only a password dropped.
        Some((_, host)) if http => host.to_owned(),
        Some((user, host)) => format!("{}@{host}", user.split_once(':').map_or(user, |(u, _)| u)),
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{path}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_are_stripped_from_remote_urls() {
        assert_eq!(
            super::without_credentials("https://u:tok@github.com/a/b.git"),
            "https://github.com/a/b.git"
        );
        assert_eq!(
            super::without_credentials("https://github.com/a/b.git"),
            "https://github.com/a/b.git"
        );
        assert_eq!(
            super::without_credentials("git@github.com:a/b.git"),
            "git@github.com:a/b.git"
        );
        assert_eq!(
            super::without_credentials("ssh://git@host/x"),
            "ssh://git@host/x"
        );
        assert_eq!(
            super::without_credentials("ssh://git:hunter2@host/x"),
            "ssh://git@host/x"
        );
        assert_eq!(
            super::without_credentials("git+https://u:tok@host/x"),
            "git+https://host/x"
        );
        assert_eq!(
            super::without_credentials("https://host/x?access_token=S"),
            "https://host/x"
        );
    }
}
