//! A task's agent's own git (CodeBolt's `gitEvent` family), each an operation like any other:
//! the worktree's status, log and diff (reads); everything staged and a commit on the task
//! branch (`git::actions`, checked as a snapshot is: no operation in progress, HEAD on the task
//! branch, the branch moved by compare-and-swap), all run in the task's sandbox
//! (`git::boxed`); the default branch merged in (`gitPull`) and the task's branch pushed
//! (`gitPush`). The CodeBolt adapter translates frames into these.

use std::path::PathBuf;

use byre_projections::tasks::TaskStatus;

use super::{blocking, Ctx, Error};
use byre_git::actions::{LogEntry, Status};
use byre_git::boxed::{Answer, Job};
use byre_git::GitError;

/// Most commits [`log`] lists.
const LOG_LENGTH: usize = 50;

/// The author of an agent's commit when the repository configures none.
const AGENT_AUTHOR: (&str, &str) = ("CodeBolt agent", "codebolt@byre.invalid");

/// A task's worktree and branch, as the fold records them.
fn worktree_of(app: &Ctx, task_id: &str) -> Result<(PathBuf, String), Error> {
    app.writer
        .read(|s| {
            s.tasks
                .get(task_id)
                .map(|t| (PathBuf::from(&t.worktree_path), t.branch.clone()))
        })
        .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}

/// A git error as an agent reads it: a refusal (an operation in progress, HEAD elsewhere, the
/// branch moved) is a conflict; the rest is git's own message.
fn git_error(e: GitError) -> Error {
    match e {
        GitError::Conflict(m) => Error::Conflict(m),
        other => Error::Invalid(other.to_string()),
    }
}

/// Does `job` in the task's sandbox (`git::boxed`): libgit2 reads the worktree, its index and
/// its refs, which the agent writes, only where the agent could read them anyway.
async fn boxed(app: &Ctx, job: Job) -> Result<Answer, Error> {
    app.git_box.run(&job).await.map_err(git_error)
}

/// An answer of another kind than its job's (`Answer::parse` refuses those first).
fn unexpected() -> Error {
    Error::internal("the sandboxed git process answered another job")
}

/// The worktree's status: its branch and changed paths.
/// # Errors
/// Not found; conflict: the worktree is missing; invalid: git failed (its message).
pub async fn status(app: &Ctx, task_id: &str) -> Result<Status, Error> {
    let (worktree, _) = worktree_of(app, task_id)?;
    match boxed(app, Job::Status { worktree }).await? {
        Answer::Status(st) => Ok(st),
        _ => Err(unexpected()),
    }
}

/// The branch the worktree's HEAD is on (empty: none).
/// # Errors
/// Not found; conflict: the worktree is missing; invalid: git failed.
pub async fn current_branch(app: &Ctx, task_id: &str) -> Result<String, Error> {
    let (worktree, _) = worktree_of(app, task_id)?;
    match boxed(app, Job::Branch { worktree }).await? {
        Answer::Branch { branch } => Ok(branch.unwrap_or_default()),
        _ => Err(unexpected()),
    }
}

/// Stages every change of the worktree.
/// # Errors
/// Not found; conflict: the worktree is missing; invalid: git failed.
pub async fn stage_all(app: &Ctx, task_id: &str) -> Result<(), Error> {
    let (worktree, _) = worktree_of(app, task_id)?;
    match boxed(app, Job::StageAll { worktree }).await? {
        Answer::Staged => Ok(()),
        _ => Err(unexpected()),
    }
}

/// Commits what is staged on the task branch; the new commit's id.
/// # Errors
/// Not found; conflict: an operation in progress, HEAD off the task branch, the branch moved,
/// the worktree missing; invalid: git failed.
pub async fn commit(app: &Ctx, task_id: &str, message: &str) -> Result<String, Error> {
    let (worktree, branch) = worktree_of(app, task_id)?;
    let job = Job::Commit {
        worktree,
        branch,
        message: message.to_owned(),
        author_name: AGENT_AUTHOR.0.to_owned(),
        author_email: AGENT_AUTHOR.1.to_owned(),
    };
    match boxed(app, job).await? {
        Answer::Committed { commit } => Ok(commit),
        _ => Err(unexpected()),
    }
}

/// The newest commits of the worktree's HEAD, newest first.
/// # Errors
/// Not found; conflict: the worktree is missing; invalid: git failed.
pub async fn log(app: &Ctx, task_id: &str) -> Result<Vec<LogEntry>, Error> {
    let (worktree, _) = worktree_of(app, task_id)?;
    let job = Job::Log {
        worktree,
        n: LOG_LENGTH,
    };
    match boxed(app, job).await? {
        Answer::Log { entries } => Ok(entries),
        _ => Err(unexpected()),
    }
}

/// The patch from `base` (`None`: HEAD) to the working files, at most about `max_bytes`.
/// # Errors
/// Not found; conflict: the worktree is missing; invalid: `base` names nothing, or git failed.
pub async fn diff(
    app: &Ctx,
    task_id: &str,
    base: Option<String>,
    max_bytes: usize,
) -> Result<String, Error> {
    let (worktree, _) = worktree_of(app, task_id)?;
    let job = Job::Diff {
        worktree,
        base,
        max_bytes,
    };
    match boxed(app, job).await? {
        Answer::Diff { patch } => Ok(patch),
        _ => Err(unexpected()),
    }
}

/// What the git work of [`pull_default_branch`] and [`push_task_branch`] needs of a task.
struct RemoteFacts {
    repo: PathBuf,
    worktree: PathBuf,
    branch: String,
    default_branch: String,
    identity: byre_git::merge::Identity,
}

/// The facts of an open task that no merge, discard or merge into its parent is working on.
fn remote_facts(app: &Ctx, task_id: &str) -> Result<RemoteFacts, Error> {
    let facts = app.writer.read(|s| {
        let t = s.tasks.get(task_id)?;
        let p = s.projects.get(&t.project_id)?;
        let identity = s
            .users
            .get(&t.created_by)
            .filter(|u| !u.git_name.is_empty() && !u.git_email.is_empty())
            .map(|u| byre_git::merge::Identity {
                name: u.git_name.clone(),
                email: u.git_email.clone(),
            })
            .unwrap_or_else(|| byre_git::merge::Identity {
                name: "byre agent".into(),
                email: "agent@byre.invalid".into(),
            });
        let busy = t.merging || t.discarding || t.merging_into_parent;
        Some((
            t.status,
            busy,
            RemoteFacts {
                repo: PathBuf::from(&p.repo_path),
                worktree: PathBuf::from(&t.worktree_path),
                branch: t.branch.clone(),
                default_branch: p.default_branch.clone(),
                identity,
            },
        ))
    });
    let (status, busy, facts) =
        facts.ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))?;
    if status != TaskStatus::Active {
        return Err(Error::Conflict(format!("task `{task_id}` is closed")));
    }
    if busy {
        return Err(Error::Conflict(format!(
            "task `{task_id}` is being merged or discarded: its branch is byre's until then"
        )));
    }
    Ok(facts)
}

fn refused(e: byre_git::merge::MergeError) -> Error {
    match e {
        byre_git::merge::MergeError::Refused(m) => Error::Conflict(m),
        byre_git::merge::MergeError::Git(g) => Error::internal(g),
    }
}

/// A task's agent's `gitPull` (CodeBolt): what merge-in asks of an agent, done by byre
/// itself — the default branch fetched from origin (when there is one) and the local default
/// branch, the one byre's squash lands on, merged into the task's worktree
/// (`git::remote::pull_default`). Returns what happened, in words.
/// # Errors
/// Not found; conflict: the task is closed or being merged or discarded, or the pull was
/// refused (a conflict, uncommitted changes in the way, a failed fetch; nothing changed).
pub async fn pull_default_branch(app: &Ctx, task_id: &str) -> Result<String, Error> {
    let f = remote_facts(app, task_id)?;
    // The fetch is on the project's repository, byre's own; the merge reads and writes the
    // worktree, so it runs in the task's sandbox (`git::boxed`).
    let (repo, default_branch) = (f.repo.clone(), f.default_branch.clone());
    let notes =
        blocking(move || byre_git::remote::fetch_default(&repo, &default_branch).map_err(refused))
            .await?;
    let job = Job::MergeDefault {
        worktree: f.worktree,
        default_branch: f.default_branch.clone(),
        author_name: f.identity.name,
        author_email: f.identity.email,
    };
    let Answer::Merged(pulled) = boxed(app, job).await? else {
        return Err(unexpected());
    };
    let mut message = pulled.message;
    for n in notes {
        message.push('\n');
        message.push_str(&n);
    }
    Ok(if pulled.head_before == pulled.head_after {
        format!(
            "{} is already merged into {}\n{message}",
            f.default_branch, f.branch
        )
    } else {
        format!(
            "merged {} into {} (now at {})\n{message}",
            f.default_branch, f.branch, pulled.head_after
        )
    })
}

/// A task's agent's `gitPush` (CodeBolt): the task's branch, and only it, pushed to the
/// project's origin, never forced, with the merge's own push (`git::merge::push`). Returns
/// the commit pushed.
/// # Errors
/// Not found; conflict: the task is closed or being merged or discarded, the repository has
/// no origin, or origin refused the push (git's message).
pub async fn push_task_branch(app: &Ctx, task_id: &str) -> Result<String, Error> {
    let f = remote_facts(app, task_id)?;
    blocking(move || byre_git::remote::push_task_branch(&f.repo, &f.branch).map_err(refused)).await
}
