//! The finish reactor: the git work of merges and discards (`projections::finish`). It
//! follows the log, and after every event that may make work due (a turn's end, a merge or
//! discard asked for, a task closed, a merge failed) it scans the state:
//! Both wait for the snapshot reactor's end-of-turn commit of that turn (no snapshot of the
//! task pending), so the two never work on one worktree at once.
//! - a merging task whose merge-in turn ended normally: squash, push, fast-forward, keep a
//!   snapshot and remove the worktree and branch (`git::merge`), then `RecordMerge`;
//! - a discarding task whose summary turn ended: keep a snapshot, remove the worktree and
//!   branch, then `RecordDiscard`;
//! - a project with no merge running and held merges: `StartHeldMerge` for the oldest whose
//!   session is idle.
//!
//! The same scan runs at start-up, which redoes work a crash cut short: the git steps are
//! idempotent except a squash that landed but was not recorded, which the redo finds
//! already on the default branch and records with an empty `merge_commit`. One effect at a
//! time.

use std::path::PathBuf;

use byre_projections::finish::{self, MergeDone};
use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::git::merge::{Identity, MergeError, SquashRequest};
use crate::log::subscription::subscribe;
use crate::log::Writer;

/// The event kinds after which the reactor scans.
const TRIGGERS: &[&str] = &[
    "turn.ended",
    "task.merge_requested",
    "task.merge_started",
    "task.merge_failed",
    "task.merged",
    "task.discard_requested",
    "task.discarded",
    "task.cleanup_failed",
    "session.completed",
    "snapshot.taken",
    "snapshot.failed",
];

/// What a merge's git work needs, read from the state.
struct MergeJob {
    task_id: String,
    repo: PathBuf,
    worktree: PathBuf,
    branch: String,
    default_branch: String,
    title: String,
    author: Identity,
    co_authors: Vec<Identity>,
}

/// What a discard's clean-up needs.
struct CleanupJob {
    task_id: String,
    repo: PathBuf,
    worktree: PathBuf,
    branch: String,
}

enum Work {
    Merge(MergeJob),
    Discard(CleanupJob),
    StartHeld(String, PathBuf),
}

fn identity(s: &byre_projections::State, login: &str) -> Option<Identity> {
    let u = s.users.get(login)?;
    (!u.git_name.is_empty() && !u.git_email.is_empty()).then(|| Identity {
        name: u.git_name.clone(),
        email: u.git_email.clone(),
    })
}

/// The work due now, in a fixed order: merges, discards, then held merges to start.
fn due(writer: &Writer) -> Vec<Work> {
    writer.read(|s| {
        let mut out = Vec::new();
        for t in s.tasks.values() {
            let Some(p) = s.projects.get(&t.project_id) else {
                continue;
            };
            if finish::merge_due(s, t) {
                out.push(Work::Merge(MergeJob {
                    task_id: t.id.clone(),
                    repo: PathBuf::from(&p.repo_path),
                    worktree: PathBuf::from(&t.worktree_path),
                    branch: t.branch.clone(),
                    default_branch: p.default_branch.clone(),
                    title: t.merge_title.clone(),
                    author: identity(s, &t.merge_by).unwrap_or(Identity {
                        name: t.merge_by.clone(),
                        email: format!("{}@localhost", t.merge_by),
                    }),
                    co_authors: finish::co_authors(t, &t.merge_by)
                        .filter_map(|login| identity(s, login))
                        .collect(),
                }));
            } else if finish::discard_due(s, t) {
                out.push(Work::Discard(CleanupJob {
                    task_id: t.id.clone(),
                    repo: PathBuf::from(&p.repo_path),
                    worktree: PathBuf::from(&t.worktree_path),
                    branch: t.branch.clone(),
                }));
            }
        }
        for p in s.projects.values() {
            let tasks = || {
                s.tasks
                    .values()
                    .filter(|t| t.project_id == p.id && t.status == TaskStatus::Active)
            };
            if tasks().any(|t| t.merging) {
                continue;
            }
            let oldest = tasks()
                .filter(|t| t.merge_queued_at_us.is_some() && !t.discarding)
                .filter(|t| {
                    !s.sessions
                        .values()
                        .any(|x| x.task_id == t.id && !x.completed && x.turn_running)
                })
                .min_by_key(|t| (t.merge_queued_at_us, t.created_seq));
            if let Some(t) = oldest {
                out.push(Work::StartHeld(
                    t.id.clone(),
                    PathBuf::from(&t.worktree_path),
                ));
            }
        }
        out
    })
}

async fn run_merge(job: MergeJob) -> Result<MergeDone, String> {
    tokio::task::spawn_blocking(move || {
        let req = SquashRequest {
            repo_path: &job.repo,
            worktree_path: &job.worktree,
            task_branch: &job.branch,
            default_branch: &job.default_branch,
            title: &job.title,
            author: &job.author,
            co_authors: &job.co_authors,
        };
        let commit = crate::git::merge::squash_merge(&req).map_err(|e| match e {
            MergeError::Refused(m) => m,
            MergeError::Git(e) => e.to_string(),
        })?;
        let (kept_ref, cleanup_error) = match crate::git::merge::remove_task_worktree(
            &job.repo,
            &job.worktree,
            &job.task_id,
            &job.task_id,
            &job.branch,
        ) {
            Ok(kept) => (kept.unwrap_or_default(), String::new()),
            Err(e) => (String::new(), e.to_string()),
        };
        Ok(MergeDone {
            merge_commit: commit.unwrap_or_default(),
            kept_ref,
            cleanup_error,
        })
    })
    .await
    .map_err(|e| format!("the merge stopped: {e}"))?
}

async fn run_cleanup(job: CleanupJob) -> Result<String, String> {
    tokio::task::spawn_blocking(move || {
        crate::git::merge::remove_task_worktree(
            &job.repo,
            &job.worktree,
            &job.task_id,
            &job.task_id,
            &job.branch,
        )
        .map(Option::unwrap_or_default)
        .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("the clean-up stopped: {e}"))?
}

async fn submit(writer: &Writer, cmd: Command) {
    if let Err(e) = writer.submit(cmd, None).await {
        tracing::error!(error = %e, "the finish reactor could not record an outcome");
    }
}

/// Does all the work due, until none is (a recorded outcome may make more due).
async fn scan(writer: &Writer) {
    // Bounded: each round records at least one outcome or starts a held merge.
    for _ in 0..64 {
        let work = due(writer);
        if work.is_empty() {
            return;
        }
        let mut progressed = false;
        for w in work {
            match w {
                Work::Merge(job) => {
                    let span = tracing::info_span!("merge", task_id = %job.task_id);
                    let _enter = span.enter();
                    let task_id = job.task_id.clone();
                    let outcome = run_merge(job).await;
                    if let Err(e) = &outcome {
                        tracing::warn!(reason = %e, "merge refused");
                    }
                    submit(writer, Command::RecordMerge { task_id, outcome }).await;
                    progressed = true;
                }
                Work::Discard(job) => {
                    let span = tracing::info_span!("discard", task_id = %job.task_id);
                    let _enter = span.enter();
                    let task_id = job.task_id.clone();
                    let outcome = run_cleanup(job).await;
                    submit(writer, Command::RecordDiscard { task_id, outcome }).await;
                    progressed = true;
                }
                Work::StartHeld(task_id, worktree) => {
                    let head = tokio::task::spawn_blocking(move || {
                        crate::git::worktree_head(&worktree).unwrap_or_default()
                    })
                    .await
                    .unwrap_or_default();
                    let before = writer.head();
                    submit(writer, Command::StartHeldMerge { task_id, head }).await;
                    progressed |= writer.head() != before;
                }
            }
        }
        if !progressed {
            return;
        }
    }
}

/// Starts the reactor; it ends when `shutdown` turns true.
pub fn start(writer: Writer, mut shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let from = writer.head();
        scan(&writer).await;
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(r)) if TRIGGERS.contains(&r.kind.as_str()) => scan(&writer).await,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "finish reactor cannot read the log");
                        return;
                    }
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
    })
}
