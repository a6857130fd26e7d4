//! The run reactor: moves workflow runs on (`projections/src/runs.rs`).
//!
//! - After `workflow.stage_finished`: starts the run's stages that may start now
//!   (`app::runs::advance`: `StartStage`, which records nothing for a stage that has an
//!   attempt already, then the task's worktree and its agent session).
//! - After `workflow.run_finished`: discards the run's other active tasks as `byre`
//!   ([`clean_up`]); the final stage's task stays for the human to merge.
//!
//! At start-up, before following the log, it redoes what a crash may have cut short: every
//! unfinished run is advanced (a stage that finished just before a `kill -9` starts its next
//! stages now, once: the writer refuses a second attempt), a stage task left without its
//! agent session gets it, and every finished run is cleaned up. One effect at a time.

use std::sync::Arc;

use byre_projections::sessions::SessionRole;
use byre_projections::tasks::TaskStatus;
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::runs as app;
use crate::Ctx;
use byre_log::subscription::subscribe;

/// Starts the reactor; it ends when `shutdown` turns true.
pub fn start(ctx: Arc<Ctx>, mut shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let from = ctx.writer.head();
        let work = async {
            reconcile(&ctx, from).await;
            let mut events = Box::pin(subscribe(ctx.writer.clone(), from));
            while let Some(next) = events.next().await {
                match next {
                    Ok(rec) => react(&ctx, &rec).await,
                    Err(e) => {
                        tracing::error!(error = %e, "run reactor cannot read the log");
                        return;
                    }
                }
            }
        };
        tokio::select! {
            () = work => {}
            _ = shutdown.changed() => {}
        }
    })
}

/// The run of stage task `task_id`, if it is one.
fn run_of(ctx: &Ctx, task_id: &str) -> Option<String> {
    ctx.writer
        .read(|s| s.attempt(task_id).map(|(r, _)| r.id.clone()))
}

async fn react(ctx: &Ctx, rec: &byre_log::Record) {
    let Some(run) = rec.task_id.as_deref().and_then(|t| run_of(ctx, t)) else {
        return;
    };
    match rec.kind.as_str() {
        "workflow.stage_finished" => advance(ctx, &run).await,
        "workflow.run_finished" => {
            clean_up(ctx, &run).await;
        }
        _ => {}
    }
}

async fn advance(ctx: &Ctx, run: &str) {
    if let Err(e) = app::advance(ctx, run).await {
        tracing::warn!(run, error = %e, "a workflow run's next stage could not start");
    }
}

/// Redoes what a crash cut short (see the module's doc). Only tasks created before this
/// server started (seq up to `head`) are given a missing session: a newer one belongs to a
/// request still starting it.
async fn reconcile(ctx: &Ctx, head: u64) {
    let (open, finished, sessionless) = ctx.writer.read(|s| {
        let mut open = Vec::new();
        let mut finished = Vec::new();
        for run in s.runs.values() {
            if run.finished {
                finished.push(run.id.clone());
            } else {
                open.push(run.id.clone());
            }
        }
        let sessionless: Vec<String> = s
            .runs
            .values()
            .flat_map(|r| r.attempts.iter())
            .filter(|a| {
                s.tasks.get(&a.task_id).is_some_and(|t| {
                    t.status == TaskStatus::Active && !t.discarding && t.created_seq <= head
                })
            })
            .filter(|a| {
                !s.sessions
                    .values()
                    .any(|x| x.task_id == a.task_id && x.role == SessionRole::Implementer)
            })
            .map(|a| a.task_id.to_string())
            .collect();
        (open, finished, sessionless)
    });
    for task_id in sessionless {
        let created_seq = ctx
            .writer
            .read(|s| s.tasks.get(&task_id).map(|t| t.created_seq))
            .unwrap_or(0);
        let started = async {
            crate::task_creation::wait_for_worktree(ctx, &task_id, created_seq).await?;
            app::start_stage_session(ctx, &task_id).await
        };
        if let Err(e) = started.await {
            tracing::warn!(task_id, error = %e, "a stage task's agent could not start");
        }
    }
    for run in open {
        advance(ctx, &run).await;
    }
    for run in finished {
        clean_up(ctx, &run).await;
    }
}

/// Once run `run_id` finished: discards its other active tasks as `byre`; the ones it
/// discarded. A refused discard is logged and skipped.
async fn clean_up(app: &Ctx, run_id: &str) -> Vec<String> {
    let tasks: Vec<String> = app.writer.read(|s| {
        s.runs
            .get(run_id)
            .map(|r| r.to_clean_up(s).into_iter().map(str::to_owned).collect())
            .unwrap_or_default()
    });
    let mut done = Vec::new();
    for task_id in tasks {
        match crate::finish::discard_task(app, "byre", &task_id, true).await {
            Ok(_) => done.push(task_id),
            Err(e) => {
                tracing::warn!(run = run_id, task_id, error = %e, "a finished run's task was not discarded")
            }
        }
    }
    done
}
