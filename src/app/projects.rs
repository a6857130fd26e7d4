//! Projects: `listProjects`, `createProject`, `getProject`.

use std::path::{Component, Path, PathBuf};

use byre_projections::Command;

use super::{blocking, Ctx, Error};
use crate::api;
use byre_git::{self as git, GitError};

/// `listProjects`: every project, in creation order.
pub fn list_projects(app: &Ctx) -> Vec<api::Project> {
    app.writer.read(|s| {
        s.projects_in_order()
            .into_iter()
            .map(api::Project::from)
            .collect()
    })
}

/// `createProject`: a project on the git repository at `repo_path`, its default branch and
/// origin's URL (without credentials) detected. With [`crate::settings::Settings::repos_roots`]
/// set, the repository (symlinks and `..` resolved) and its git dir must be under one of them;
/// nothing outside is opened.
/// # Errors
/// Invalid when `repo_path` is not the absolute top of an existing git repository with a
/// commit, or is outside the roots, or another project has it, or the name is bad.
pub async fn create_project(
    app: &Ctx,
    actor: &str,
    name: String,
    repo_path: &str,
) -> Result<api::Project, Error> {
    let path = PathBuf::from(repo_path);
    if !path.is_absolute() || repo_path.contains('\0') {
        return Err(Error::Invalid("repo_path must be an absolute path".into()));
    }
    let roots = app.settings.repos_roots.clone();
    let facts = blocking(move || {
        if let Some(roots) = &roots {
            check_inside(roots, &resolved(&path), &path)?;
        }
        let facts = git::inspect_repo(&path).map_err(|e| match e {
            GitError::Other(m) => Error::internal(m),
            user_facing => Error::Invalid(user_facing.to_string()),
        })?;
        if let Some(roots) = &roots {
            check_inside(roots, Path::new(&facts.repo_path), &path)?;
            check_inside(roots, &facts.git_dir, &path)?;
        }
        Ok(facts)
    })
    .await?;
    let ack = app
        .submit(Command::CreateProject {
            actor: actor.to_owned(),
            name,
            repo_path: facts.repo_path,
            default_branch: facts.default_branch,
            remote: without_credentials(&facts.remote),
            worktrees_root: app.settings.worktrees_root().to_string_lossy().into_owned(),
        })
        .await?;
    let id = ack
        .events
        .iter()
        .find_map(|e| e.project_id.clone())
        .ok_or_else(|| Error::internal("project.created missing"))?;
    app.writer
        .read(|s| s.projects.get(&id).map(api::Project::from))
        .ok_or_else(|| Error::internal("project missing after commit"))
}

/// `path` with its symlinks resolved when it exists; else made normal by hand (`.` dropped,
/// `..` taking off the name before it), so a missing path is judged where it would be.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Refuses `real` (the resolved form of the `asked` path) unless it is under one of `roots`.
/// # Errors
/// [`Error::Invalid`] naming the roots, or saying there are none.
fn check_inside(roots: &[PathBuf], real: &Path, asked: &Path) -> Result<(), Error> {
    if roots.iter().any(|root| real.starts_with(root)) {
        return Ok(());
    }
    if roots.is_empty() {
        return Err(Error::Invalid(
            "this server takes no new projects: it runs without --repos-root, which names the directories repositories may be in (docs/security.md)".into(),
        ));
    }
    let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(Error::Invalid(format!(
        "{} is outside the directories this server takes repositories from: {}",
        asked.display(),
        names.join(", ")
    )))
}

/// `getProject`.
/// # Errors
/// [`Error::NotFound`] for an unknown project.
pub fn get_project(app: &Ctx, id: &str) -> Result<api::Project, Error> {
    app.writer
        .read(|s| s.projects.get(id).map(api::Project::from))
        .ok_or_else(|| Error::NotFound(format!("no project `{id}`")))
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
