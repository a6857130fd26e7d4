//! The worktree reactor: after `task.created`, makes the task's branch and worktree and
//! records `task.worktree_created` (or `task.worktree_failed`). At start-up it makes any
//! worktree an active task should have and does not (a crash between the intent and the
//! outcome, or a worktree directory removed by hand); tasks whose project's repository is
//! itself gone are summed up in one log line naming the projects. While byre runs, [`Worktrees`] does the
//! same for one task before its next turn, view or snapshot.

use std::path::PathBuf;
use std::sync::Arc;

use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use futures_util::StreamExt;
use tokio::sync::watch;

use byre_log::subscription::subscribe;
use byre_log::Writer;

struct Job {
    task_id: String,
    repo_path: PathBuf,
    branch: String,
    base_ref: String,
    worktree_path: PathBuf,
    recorded: bool,
}

fn job(writer: &Writer, task_id: &str) -> Option<Job> {
    writer.read(|s| {
        let t = s.tasks.get(task_id)?;
        let p = s.projects.get(&t.project_id)?;
        (t.status == TaskStatus::Active).then(|| Job {
            task_id: t.id.clone().into(),
            repo_path: PathBuf::from(&p.repo_path),
            branch: t.branch.clone(),
            base_ref: t.base_ref.clone(),
            worktree_path: PathBuf::from(&t.worktree_path),
            recorded: t.worktree_ready,
        })
    })
}

/// Restores removed worktrees of active tasks while byre runs, one git operation at a time
/// together with the reactor (they share one lock). Cheap to clone.
#[derive(Clone)]
pub struct Worktrees {
    writer: Writer,
    /// Held for each worktree operation, so a restore never races the reactor's creation.
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Worktrees {
    /// The restorer for the tasks of `writer`'s log.
    pub fn new(writer: Writer) -> Worktrees {
        Worktrees {
            writer,
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// When `task_id` is active, its worktree was made, and its directory is gone (removed
    /// while byre runs), makes it again at the same path on the task branch, as start-up's
    /// reconcile does (`git::ensure_worktree`: the branch keeps every commit; what was only in
    /// the removed directory is lost). Nothing for a task that is merging (into its parent
    /// too) or being discarded (its worktree goes on purpose) or one whose worktree is not made yet (the reactor
    /// makes it). Returns whether it made the worktree; a failure is logged and left to the
    /// caller's own error (a missing directory).
    ///
    /// The check is made under the lock: a directory that exists may be one another caller
    /// (the reactor, a view, the snapshot reactor) is still checking out, and this waits for
    /// it to be whole rather than answering "nothing to do" at once.
    pub async fn restore_if_missing(&self, task_id: &str) -> bool {
        let Some(path) = self.restorable(task_id) else {
            return false;
        };
        let _guard = self.lock.lock().await;
        if path.exists() {
            return false;
        }
        let Some(j) = job(&self.writer, task_id) else {
            return false;
        };
        tracing::warn!(task_id, path = %path.display(), "the task's worktree is gone; making it again");
        handle(&self.writer, j).await;
        path.exists()
    }

    /// The worktree path of `task_id` when it may be restored: active, made, not going away.
    fn restorable(&self, task_id: &str) -> Option<PathBuf> {
        self.writer.read(|s| {
            s.tasks
                .get(task_id)
                .filter(|t| {
                    t.status == TaskStatus::Active
                        && t.worktree_ready
                        && !t.merging
                        && !t.merging_into_parent
                        && !t.discarding
                })
                .map(|t| PathBuf::from(&t.worktree_path))
        })
    }

    /// Waits until `task_id`'s worktree is whole before a process starts in it (the agent
    /// runtime asks through `byre_agents::runtime::TaskWorktrees`): made by the
    /// reactor (its `task.worktree_created` folded; a new task's first agent may be started
    /// before the reactor has run), then made again if it was removed, a make under way
    /// waited for. Returns whether the worktree is there: `false` when the task is not active,
    /// its worktree failed, or `within` passed first (the caller's start then fails on the
    /// missing directory, recorded as the turn's error).
    pub async fn made(&self, task_id: &str, within: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        // Subscribed before the fold is read, so no `task.worktree_created` falls between.
        let mut events = Box::pin(subscribe(self.writer.clone(), self.writer.head()));
        loop {
            let pending = self.writer.read(|s| {
                s.tasks
                    .get(task_id)
                    .map(|t| t.status == TaskStatus::Active && !t.worktree_ready)
            });
            match pending {
                None | Some(false) => break,
                Some(true) => {}
            }
            match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(_))) => continue,
                _ => return false,
            }
        }
        self.restore_if_missing(task_id).await;
        // Whatever made it (the reactor, this call, another caller) has released the lock
        // only once the worktree was whole.
        let _guard = self.lock.lock().await;
        let path = self.writer.read(|s| {
            s.tasks
                .get(task_id)
                .map(|t| PathBuf::from(&t.worktree_path))
        });
        path.is_some_and(|p| p.is_dir())
    }
}

impl byre_agents::runtime::TaskWorktrees for Worktrees {
    fn made<'a>(
        &'a self,
        task_id: &'a str,
        within: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        Box::pin(Worktrees::made(self, task_id, within))
    }
}

/// Makes the job's worktree and logs a failure (`handle_quietly`).
async fn handle(writer: &Writer, job: Job) {
    let recorded = job.recorded;
    if let Err(e) = handle_quietly(writer, job).await {
        if recorded {
            tracing::error!(error = %e, "could not restore the worktree of an active task");
        } else {
            tracing::error!(error = %e, "worktree failed");
        }
    }
}

/// Makes the job's worktree (`git::ensure_worktree`) and, when its outcome was not recorded
/// yet, records it; returns the failure to make it for the caller to report.
async fn handle_quietly(writer: &Writer, job: Job) -> Result<(), String> {
    let span = tracing::info_span!("worktree", task_id = %job.task_id);
    let _enter = span.enter();
    let Job {
        task_id,
        repo_path,
        branch,
        base_ref,
        worktree_path,
        recorded,
    } = job;
    let name = task_id.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        byre_git::ensure_worktree(&repo_path, &branch, &base_ref, &worktree_path, &name)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r.map_err(|e| e.to_string()));
    let result = outcome.clone().map(|_| ());
    if recorded {
        return result;
    }
    if let Err(e) = writer
        .submit(
            Command::RecordWorktree {
                task_id: task_id.into(),
                outcome,
            },
            None,
        )
        .await
    {
        tracing::error!(error = %e, "could not record the worktree's outcome");
    }
    result
}

/// An active task start-up found without its worktree, or whose project's repository is gone.
struct Missing {
    task_id: String,
    recorded: bool,
    worktree_path: PathBuf,
    project: String,
    repo_path: PathBuf,
}

/// Start-up's reconcile: makes the worktree of every active task that has none (never
/// recorded, or gone from disk). Tasks whose project's repository is itself missing (moved or
/// removed while byre was stopped: their worktrees, if still there, are cut off from it) are
/// not tried (an outcome not recorded yet is recorded as failed), and all of them together get
/// one line naming the projects, rather than one error per task; other failures get one line
/// too, with their count and the first error.
async fn reconcile(writer: &Writer, worktrees: &Worktrees) {
    let active: Vec<Missing> = writer.read(|s| {
        s.tasks
            .values()
            // A merge (into a parent too) or discard under way removes the worktree itself: not
            // restored.
            .filter(|t| {
                t.status == TaskStatus::Active
                    && !t.merging
                    && !t.merging_into_parent
                    && !t.discarding
            })
            .map(|t| {
                let project = s.projects.get(&t.project_id);
                Missing {
                    task_id: t.id.to_string(),
                    recorded: t.worktree_ready,
                    worktree_path: PathBuf::from(&t.worktree_path),
                    project: project.map_or_else(|| t.project_id.to_string(), |p| p.name.clone()),
                    repo_path: project
                        .map(|p| PathBuf::from(&p.repo_path))
                        .unwrap_or_default(),
                }
            })
            .collect()
    });
    let (no_repo, with_repo): (Vec<Missing>, Vec<Missing>) =
        tokio::task::spawn_blocking(move || {
            let mut repo_there = std::collections::HashMap::<PathBuf, bool>::new();
            let mut no_repo = Vec::new();
            let mut with_repo = Vec::new();
            for m in active {
                let there = *repo_there
                    .entry(m.repo_path.clone())
                    .or_insert_with(|| m.repo_path.is_dir());
                if !there {
                    no_repo.push(m);
                } else if !m.recorded || !m.worktree_path.exists() {
                    with_repo.push(m);
                }
            }
            (no_repo, with_repo)
        })
        .await
        .unwrap_or_default();
    let mut failed = 0usize;
    let mut first_error = None;
    for m in with_repo {
        let _guard = worktrees.lock.lock().await;
        if let Some(j) = job(writer, &m.task_id) {
            if let Err(e) = handle_quietly(writer, j).await {
                failed += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        tracing::error!(
            tasks = failed,
            "could not make the worktrees of {failed} active tasks (the first: {e})"
        );
    }
    if no_repo.is_empty() {
        return;
    }
    let mut projects = std::collections::BTreeMap::<(String, PathBuf), usize>::new();
    for m in &no_repo {
        *projects
            .entry((m.project.clone(), m.repo_path.clone()))
            .or_default() += 1;
    }
    const NAMED: usize = 5;
    let mut named: Vec<String> = projects
        .iter()
        .take(NAMED)
        .map(|((name, repo), n)| format!("{name} ({}, {n} tasks)", repo.display()))
        .collect();
    if projects.len() > NAMED {
        named.push(format!("and {} more", projects.len() - NAMED));
    }
    tracing::error!(
        tasks = no_repo.len(),
        projects = projects.len(),
        "{} active tasks have no usable worktree because their project's repository is missing: {}. Put each repository back at its path and restart byre; until then their agents cannot run",
        no_repo.len(),
        named.join(", ")
    );
    // An outcome never recorded is recorded now (as failed), as the reactor would have.
    for m in no_repo.into_iter().filter(|m| !m.recorded) {
        let _guard = worktrees.lock.lock().await;
        if let Some(j) = job(writer, &m.task_id) {
            let _ = handle_quietly(writer, j).await;
        }
    }
}

/// Starts the reactor; it ends when `shutdown` turns true. It takes `worktrees`' lock for
/// each worktree it makes.
pub fn start(
    writer: Writer,
    worktrees: Worktrees,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let from = writer.head();
        reconcile(&writer, &worktrees).await;
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(r)) if r.kind == "task.created" => {
                        let _guard = worktrees.lock.lock().await;
                        if let Some(j) = r.task_id.as_deref().and_then(|id| job(&writer, id)) {
                            handle(&writer, j).await;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "worktree reactor cannot read the log");
                        return;
                    }
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
    })
}
