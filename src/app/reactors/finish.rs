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
//!   session is idle;
//! - a subtask merging into its parent whose parent's agent is idle after a turn (its
//!   end-of-turn commit made): when the subtask's branch is in the parent's HEAD
//!   (`git::subtasks`), keep a snapshot and remove the subtask's worktree and branch as a
//!   merge does, then `RecordMergeIntoParent`; when it is not, nothing (checked again after
//!   the parent's next turn).
//!
//! The same scan runs at start-up, which redoes work a crash cut short: a landed merge is
//! recorded (`task.merge_landed`) before the worktree is removed, so a redo only removes; the
//! removal is idempotent. Only a squash that landed in the moment before that record is redone
//! from the worktree: the squash commit's time is the merge's start, so the redo makes the
//! same commit (a landed push is up to date) or finds it on the default branch. One effect at
//! a time.

use std::path::{Path, PathBuf};

use byre_projections::finish::{self, MergeDone};
use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use futures_util::StreamExt;
use tokio::sync::watch;

use byre_agents::git_box::GitBox;
use byre_git::merge::{Identity, MergeError, SquashRequest};
use byre_log::subscription::subscribe;
use byre_log::Writer;

/// The event kinds after which the reactor scans.
const TRIGGERS: &[&str] = &[
    "turn.ended",
    "task.merge_requested",
    "task.merge_started",
    "task.merge_failed",
    "task.merge_landed",
    "task.merged",
    "task.discard_requested",
    "task.discarded",
    "task.cleanup_failed",
    "session.completed",
    "snapshot.taken",
    "snapshot.failed",
    "task.merge_into_parent_requested",
];

/// What a merge's git work needs, read from the state.
struct MergeJob {
    task_id: String,
    repo: PathBuf,
    worktree: PathBuf,
    branch: String,
    default_branch: String,
    title: String,
    /// The git identity of who asked for the merge; None when they have none (any more).
    author: Option<Identity>,
    merge_by: String,
    co_authors: Vec<Identity>,
    /// The commit already landed by an earlier run (`task.merge_landed`).
    landed: Option<String>,
    /// The squash commit's time (the merge's start), microseconds since the epoch.
    time_us: i64,
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
    /// A subtask merging into its parent, and the parent's worktree.
    IntoParent(CleanupJob, PathBuf),
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
                    task_id: t.id.clone().into(),
                    repo: PathBuf::from(&p.repo_path),
                    worktree: PathBuf::from(&t.worktree_path),
                    branch: t.branch.clone(),
                    default_branch: p.default_branch.clone(),
                    title: t.merge_title.clone(),
                    author: identity(s, &t.merge_by),
                    merge_by: t.merge_by.clone(),
                    co_authors: finish::co_authors(t, &t.merge_by)
                        .filter_map(|login| identity(s, login))
                        .collect(),
                    landed: t.merge_landed.clone(),
                    // A merge started by an older byre has no start time: now.
                    time_us: t
                        .merge_started_at_us
                        .unwrap_or_else(|| chrono::Utc::now().timestamp_micros()),
                }));
            } else if let Some(parent) = byre_projections::subtasks::into_parent_check_due(s, t) {
                out.push(Work::IntoParent(
                    CleanupJob {
                        task_id: t.id.clone().into(),
                        repo: PathBuf::from(&p.repo_path),
                        worktree: PathBuf::from(&t.worktree_path),
                        branch: t.branch.clone(),
                    },
                    PathBuf::from(&parent.worktree_path),
                ));
            } else if finish::discard_due(s, t) {
                out.push(Work::Discard(CleanupJob {
                    task_id: t.id.clone().into(),
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
                    t.id.clone().into(),
                    PathBuf::from(&t.worktree_path),
                ));
            }
        }
        out
    })
}

/// The squash, push and fast-forward: the commit landed (None when nothing was to merge).
async fn land(git_box: &GitBox, job: &MergeJob) -> Result<Option<String>, String> {
    // mergeTask checked it, but a held merge starts later: never author under a made-up name.
    let Some(author) = job.author.clone() else {
        return Err(format!(
            "`{}` no longer has a git identity to author the squash commit: set git_name and \
             git_email with updateMe, then merge again",
            job.merge_by
        ));
    };
    let time_us = job.time_us;
    // The worktree is read in its sandbox (`git::boxed`); the merge reads objects and refs.
    let worktree = git_box
        .facts(&job.worktree)
        .await
        .map_err(|e| e.to_string())?;
    let job_worktree = job.worktree.clone();
    let (repo, branch, default_branch, title, author, co_authors) = (
        job.repo.clone(),
        job.branch.clone(),
        job.default_branch.clone(),
        job.title.clone(),
        author,
        job.co_authors.clone(),
    );
    tokio::task::spawn_blocking(move || {
        // DATA/worktrees/<project>/<task>: where byre keeps tasks' worktrees.
        let task_worktrees = job_worktree
            .parent()
            .and_then(Path::parent)
            .unwrap_or(&job_worktree)
            .to_owned();
        let req = SquashRequest {
            repo_path: &repo,
            worktree,
            task_worktrees: &task_worktrees,
            task_branch: &branch,
            default_branch: &default_branch,
            title: &title,
            author: &author,
            co_authors: &co_authors,
            time_us,
        };
        byre_git::merge::squash_merge(&req).map_err(|e| match e {
            MergeError::Refused(m) => m,
            MergeError::Git(e) => e.to_string(),
        })
    })
    .await
    .map_err(|e| format!("the merge stopped: {e}"))?
}

/// A merge's git work in two recorded steps: land the commit (recorded as
/// `task.merge_landed`), then keep a snapshot and remove the worktree and branch. A restart
/// after the first step only redoes the second.
async fn run_merge(writer: &Writer, git_box: &GitBox, job: MergeJob) -> Result<MergeDone, String> {
    let merge_commit = match &job.landed {
        Some(commit) => commit.clone(),
        None => {
            let commit = land(git_box, &job).await?.unwrap_or_default();
            submit(
                writer,
                Command::RecordMergeLanded {
                    task_id: job.task_id.clone().into(),
                    merge_commit: commit.clone(),
                },
            )
            .await;
            commit
        }
    };
    let (kept_ref, cleanup_error) = match run_cleanup(
        git_box,
        CleanupJob {
            task_id: job.task_id.clone(),
            repo: job.repo.clone(),
            worktree: job.worktree.clone(),
            branch: job.branch.clone(),
        },
    )
    .await
    {
        Ok(kept) => (kept, String::new()),
        Err(e) => (String::new(), e),
    };
    Ok(MergeDone {
        merge_commit,
        kept_ref,
        cleanup_error,
    })
}

async fn run_cleanup(git_box: &GitBox, job: CleanupJob) -> Result<String, String> {
    // What is kept of the worktree is read in its sandbox (`git::boxed`); none when it is gone.
    let facts = git_box.facts(&job.worktree).await.ok();
    tokio::task::spawn_blocking(move || {
        byre_git::merge::remove_task_worktree(
            &job.repo,
            &job.worktree,
            facts.as_ref(),
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

/// A subtask merging into its parent: when its branch is in the parent's HEAD, removes its
/// worktree and branch (keeping a snapshot) and records it merged; whether it did.
async fn into_parent(
    writer: &Writer,
    git_box: &GitBox,
    job: CleanupJob,
    parent_worktree: PathBuf,
) -> bool {
    let branch = job.branch.clone();
    let merged = tokio::task::spawn_blocking(move || {
        byre_git::subtasks::merged_into_head(&parent_worktree, &branch)
    })
    .await;
    let parent_head = match merged {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => return false,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot tell whether the subtask is merged into its parent");
            return false;
        }
        Err(e) => {
            tracing::error!(error = %e, "the merge-into-parent check stopped");
            return false;
        }
    };
    let task_id = job.task_id.clone();
    let (kept_ref, cleanup_error) = match run_cleanup(git_box, job).await {
        Ok(kept) => (kept, String::new()),
        Err(e) => (String::new(), e),
    };
    submit(
        writer,
        Command::RecordMergeIntoParent {
            task_id: task_id.into(),
            done: MergeDone {
                merge_commit: parent_head,
                kept_ref,
                cleanup_error,
            },
        },
    )
    .await;
    true
}

async fn submit(writer: &Writer, cmd: Command) {
    if let Err(e) = writer.submit(cmd, None).await {
        tracing::error!(error = %e, "the finish reactor could not record an outcome");
    }
}

/// Does all the work due, until none is (a recorded outcome may make more due).
async fn scan(writer: &Writer, git_box: &GitBox) {
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
                    let outcome = run_merge(writer, git_box, job).await;
                    if let Err(e) = &outcome {
                        tracing::warn!(reason = %e, "merge refused");
                    }
                    submit(
                        writer,
                        Command::RecordMerge {
                            task_id: task_id.into(),
                            outcome,
                        },
                    )
                    .await;
                    progressed = true;
                }
                Work::Discard(job) => {
                    let span = tracing::info_span!("discard", task_id = %job.task_id);
                    let _enter = span.enter();
                    let task_id = job.task_id.clone();
                    let outcome = run_cleanup(git_box, job).await;
                    submit(
                        writer,
                        Command::RecordDiscard {
                            task_id: task_id.into(),
                            outcome,
                        },
                    )
                    .await;
                    progressed = true;
                }
                Work::IntoParent(job, parent_worktree) => {
                    let span = tracing::info_span!("merge_into_parent", task_id = %job.task_id);
                    let _enter = span.enter();
                    progressed |= into_parent(writer, git_box, job, parent_worktree).await;
                }
                Work::StartHeld(task_id, worktree) => {
                    let head = tokio::task::spawn_blocking(move || {
                        byre_git::worktree_head(&worktree).unwrap_or_default()
                    })
                    .await
                    .unwrap_or_default();
                    let before = writer.head();
                    submit(
                        writer,
                        Command::StartHeldMerge {
                            task_id: task_id.into(),
                            head,
                        },
                    )
                    .await;
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
pub fn start(
    writer: Writer,
    git_box: GitBox,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let from = writer.head();
        scan(&writer, &git_box).await;
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(r)) if TRIGGERS.contains(&r.kind.as_str()) => scan(&writer, &git_box).await,
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
