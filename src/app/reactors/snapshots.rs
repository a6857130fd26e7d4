//! The snapshot reactor: after a `turn.ended` of a task's implementer session or a
//! `snapshot.requested`, takes the task's next snapshot (and, for a turn end, makes byre's
//! end-of-turn commit: `git::snapshots`) and records `snapshot.taken` or `snapshot.failed`
//! (`Command::RecordSnapshot`). At start-up it finishes every cause the fold still holds as
//! unanswered (byre was stopped between a cause and its outcome); a ref written before the
//! stop is reused, not duplicated.
//!
//! Which causes are due is the fold's to say (`TaskSnapshots::pending`): a cause already
//! answered, or replaced by a newer turn end, is skipped, so seeing an event twice after a
//! restart does nothing. One snapshot at a time, so positions `n` never race.
//!
//! A turn that ended `failed` or `interrupted` is snapshotted like a completed one: the agent
//! may have changed files before the error, and the branch should hold them.

use std::path::PathBuf;

use byre_projections::snapshots::{SnapshotTrigger, TakenSnapshot};
use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use futures_util::StreamExt;
use tokio::sync::watch;
use tracing::Instrument;

use crate::reactors::worktrees::Worktrees;
use byre_agents::git_box::GitBox;
use byre_git::boxed::Job as GitJob;
use byre_log::subscription::subscribe;
use byre_log::Writer;

/// One cause to answer, with what the git work needs.
struct Job {
    task_id: String,
    cause_seq: u64,
    /// `Err(reason)` when the task cannot be snapshotted at all (closed, no worktree).
    place: Result<Place, String>,
}

struct Place {
    worktree: PathBuf,
    branch: String,
    title: String,
    n: u32,
    turn: Option<u32>,
}

/// The job for cause `cause_seq` of `task_id`, if the fold still holds it as unanswered.
fn job(writer: &Writer, task_id: &str, cause_seq: u64) -> Option<Job> {
    writer.read(|s| {
        let snaps = s.snapshots.get(task_id)?;
        let pending = snaps.pending.get(&cause_seq)?;
        let place = match s.tasks.get(task_id) {
            Some(t) if t.status == TaskStatus::Active && t.worktree_ready => Ok(Place {
                worktree: PathBuf::from(&t.worktree_path),
                branch: t.branch.clone(),
                title: t.title.clone(),
                n: snaps.taken.len() as u32 + 1,
                turn: (pending.trigger == SnapshotTrigger::TurnEnd).then_some(pending.turn),
            }),
            Some(t) if t.status != TaskStatus::Active => Err("the task is closed".to_owned()),
            _ => Err("the task has no worktree".to_owned()),
        };
        Some(Job {
            task_id: task_id.to_owned(),
            cause_seq,
            place,
        })
    })
}

/// Does one job and records its outcome; a worktree removed while byre runs is made again
/// first.
async fn handle(writer: &Writer, worktrees: &Worktrees, git_box: &GitBox, job: Job, review: bool) {
    if job.place.is_ok() {
        worktrees.restore_if_missing(&job.task_id).await;
    }
    let span = tracing::info_span!("snapshot", task_id = %job.task_id, cause_seq = job.cause_seq);
    handle_in_span(writer, git_box, job, review)
        .instrument(span)
        .await;
}

/// Takes the snapshot in the task's sandbox (`git::boxed`: libgit2 walks the worktree only
/// where the agent could read it anyway) and records the outcome.
async fn handle_in_span(writer: &Writer, git_box: &GitBox, job: Job, review: bool) {
    let Job {
        task_id,
        cause_seq,
        place,
    } = job;
    let outcome = match place {
        Err(reason) => Err(reason),
        Ok(place) => {
            let w = writer.clone();
            let id = task_id.clone();
            let event_seq = tokio::task::spawn_blocking(move || w.store().task_last_seq(&id))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            match event_seq {
                Err(e) => Err(e),
                Ok(event_seq) => {
                    let git_job = GitJob::Snapshot {
                        worktree: place.worktree,
                        branch: place.branch,
                        task_id: task_id.clone(),
                        title: place.title,
                        n: place.n,
                        turn: place.turn,
                        event_seq,
                    };
                    match git_box.run(&git_job).await.map(|a| a.into_snapshot()) {
                        Ok(Some(snap)) => Ok(TakenSnapshot {
                            n: place.n,
                            commit: snap.commit,
                            tree: snap.tree,
                            event_seq: snap.event_seq,
                            branch_advanced: snap.branch_advanced,
                        }),
                        Ok(None) => Err("the snapshot's answer was not a snapshot".to_owned()),
                        Err(e) => Err(e.to_string()),
                    }
                }
            }
        }
    };
    if let Err(e) = &outcome {
        tracing::warn!(error = %e, "snapshot failed");
    }
    let cmd = Command::RecordSnapshot {
        task_id: task_id.into(),
        cause_seq,
        outcome,
        review,
    };
    if let Err(e) = writer.submit(cmd, None).await {
        tracing::error!(error = %e, "could not record a snapshot's outcome");
    }
}

/// Starts the reactor; it ends when `shutdown` turns true.
pub fn start(
    writer: Writer,
    worktrees: Worktrees,
    git_box: GitBox,
    review: bool,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let from = writer.head();
        // Reconcile: every cause still unanswered, oldest first.
        let mut due: Vec<(u64, String)> = writer.read(|s| {
            s.snapshots
                .iter()
                .flat_map(|(task, snaps)| {
                    snaps
                        .pending
                        .keys()
                        .map(move |seq| (*seq, task.to_string()))
                })
                .collect()
        });
        due.sort();
        for (seq, task_id) in due {
            if *shutdown.borrow() {
                return;
            }
            if let Some(j) = job(&writer, &task_id, seq) {
                handle(&writer, &worktrees, &git_box, j, review).await;
            }
        }
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(r)) if r.kind == "turn.ended" || r.kind == "snapshot.requested" => {
                        if let Some(j) = r.task_id.as_deref().and_then(|id| job(&writer, id, r.seq)) {
                            handle(&writer, &worktrees, &git_box, j, review).await;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "snapshot reactor cannot read the log");
                        return;
                    }
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
    })
}
