//! Projects: one per git repository. Operations: `listProjects`, `createProject`, `getProject`.

use crate::ids::{Login, ProjectId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent, ProjectCreated};
use crate::{DecideCtx, Rejection, State};

/// A project (spec `Project`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    /// Id.
    pub id: ProjectId,
    /// Name.
    pub name: String,
    /// The repository's canonical absolute path.
    pub repo_path: String,
    /// Default branch, short name.
    pub default_branch: String,
    /// origin's URL or empty.
    pub remote: String,
    /// Login that created it.
    pub created_by: Login,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Where the project's task worktrees go.
    pub worktrees_root: String,
    /// Seq of `project.created`.
    pub created_seq: u64,
}

/// Checks a name: one line of 1 to 100 characters, not only spaces.
pub fn check_name(what: &str, name: &str) -> Result<(), Rejection> {
    let n = name.chars().count();
    if name.trim().is_empty() || n > 100 || name.chars().any(char::is_control) {
        return Err(Rejection::Invalid(format!(
            "{what} must be one line of 1 to 100 characters"
        )));
    }
    Ok(())
}

/// Decides `CreateProject` (its arguments are the command's fields).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    name: &str,
    repo_path: &str,
    default_branch: &str,
    remote: &str,
    worktrees_root: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    check_name("name", name)?;
    if let Some(p) = state.projects.values().find(|p| p.repo_path == repo_path) {
        return Err(Rejection::Invalid(format!(
            "the repository {repo_path} is already project `{}` ({})",
            p.name, p.id
        )));
    }
    let id = ctx.id(0);
    Ok(vec![NewEvent::new(
        actor,
        EventBody::ProjectCreated(ProjectCreated {
            worktrees_root: format!("{}/{id}", worktrees_root.trim_end_matches('/')),
            id: id.clone().into(),
            name: name.to_owned(),
            repo_path: repo_path.to_owned(),
            default_branch: default_branch.to_owned(),
            remote: remote.to_owned(),
        }),
    )
    .project(id)])
}

/// Folds `project.created`.
pub(crate) fn apply(
    state: &mut State,
    seq: u64,
    created_at_us: i64,
    actor: &str,
    body: &EventBody,
) {
    if let EventBody::ProjectCreated(p) = body {
        state
            .projects
            .entry(p.id.clone())
            .or_insert_with(|| Project {
                id: p.id.clone(),
                name: p.name.clone(),
                repo_path: p.repo_path.clone(),
                default_branch: p.default_branch.clone(),
                remote: p.remote.clone(),
                created_by: actor.to_owned().into(),
                created_at_us,
                worktrees_root: p.worktrees_root.clone(),
                created_seq: seq,
            });
    }
}
