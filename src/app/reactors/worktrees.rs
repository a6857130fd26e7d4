//! The worktree reactor: after `task.created`, makes the task's branch and worktree and
//! records `task.worktree_created` (or `task.worktree_failed`). At start-up it makes any
//! worktree an active task should have and does not (a crash between the intent and the
//! outcome, or a worktree directory removed by hand). While byre runs, [`Worktrees`] does the
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

async fn handle(writer: &Writer, job: Job) {
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
    if recorded {
        if let Err(e) = outcome {
            tracing::error!(error = %e, "could not restore the worktree of an active task");
        }
        return;
    }
    if let Err(e) = &outcome {
        tracing::error!(error = %e, "worktree failed");
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
        // Reconcile: active tasks whose worktree was never recorded or is gone from disk.
        let candidates: Vec<(String, bool, PathBuf)> = writer.read(|s| {
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
                    (
                        t.id.to_string(),
                        t.worktree_ready,
                        PathBuf::from(&t.worktree_path),
                    )
                })
                .collect()
        });
        let missing = tokio::task::spawn_blocking(move || {
            candidates
                .into_iter()
                .filter(|(_, ready, path)| !ready || !path.exists())
                .map(|(id, _, _)| id)
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for id in missing {
            let _guard = worktrees.lock.lock().await;
            if let Some(j) = job(&writer, &id) {
                handle(&writer, j).await;
            }
        }
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
