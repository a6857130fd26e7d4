//! The review reactor: runs the reviews the fold asks for (`review.requested`). For the oldest
//! waiting review of a task with none running, while fewer than `max_running` reviewers run
//! across the server, it works out the step (`git::reviews::step`): no files changed →
//! `Command::SkipReview`; else it writes the snapshot's tree to a read-only checkout
//! (`DATA/reviews/{review_id}`, no `.git`) and starts the reviewer (`Command::StartReview`:
//! a reviewer session on the vendor the task's agent does not use, whose first message is the
//! instructions). The agent runtime runs it there like any session; the reviewer reports with
//! `submit_review` (`review.done`). A reviewer turn that ends while its review still runs, a
//! reviewer process that exits, or one that runs past the timeout fails the review; an ended
//! review's session is completed (its process group goes) and its checkout removed.
//!
//! At start-up, a review that was running is failed (byre stopped under its reviewer), and
//! ended reviews' sessions and checkouts are cleaned up before anything new starts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use byre_projections::reviews::{Review, ReviewState};
use byre_projections::sessions::Vendor;
use byre_projections::{Command, State};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::settings::ReviewConfig;
use byre_log::subscription::subscribe;
use byre_log::Writer;

/// The vendor that reviews a task whose agent runs on `task_vendor`: Claude Code tasks get a
/// Codex reviewer; Codex and CodeBolt tasks a Claude Code one.
pub fn reviewer_model(cfg: &ReviewConfig, task_vendor: Option<Vendor>) -> String {
    match task_vendor {
        Some(Vendor::Claude) | None => cfg.codex_model.clone(),
        Some(Vendor::Codex | Vendor::Codebolt) => cfg.claude_model.clone(),
    }
}

struct Reactor {
    writer: Writer,
    /// The application layer, for the operations this reactor makes as a human (a merge
    /// after review).
    app: Arc<crate::Ctx>,
    cfg: ReviewConfig,
    data_dir: PathBuf,
    /// When each running review started here (for the timeout).
    started: HashMap<String, Instant>,
}

/// Starts the reactor; it ends when `shutdown` turns true.
pub fn start(
    app: Arc<crate::Ctx>,
    cfg: ReviewConfig,
    data_dir: PathBuf,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let writer = app.writer.clone();
        let from = writer.head();
        let mut r = Reactor {
            writer,
            app,
            cfg,
            data_dir,
            started: HashMap::new(),
        };
        r.reconcile().await;
        r.schedule().await;
        let mut events = Box::pin(subscribe(r.writer.clone(), from));
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(rec)) => r.react(&rec).await,
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "review reactor cannot read the log");
                        return;
                    }
                    None => return,
                },
                _ = tick.tick() => r.time_out().await,
                _ = shutdown.changed() => return,
            }
        }
    })
}

impl Reactor {
    async fn submit(&self, cmd: Command) {
        if let Err(e) = self.writer.submit(cmd, None).await {
            tracing::warn!(error = %e, "review reactor: command refused");
        }
    }

    /// Fails reviews whose reviewer was running when byre stopped; ends what ended reviews
    /// left (sessions, checkouts).
    async fn reconcile(&mut self) {
        let running: Vec<String> = self.writer.read(|s| {
            s.reviews
                .values()
                .filter(|r| r.state == ReviewState::Running)
                .map(|r| r.id.clone())
                .map(|x| x.to_string())
                .collect()
        });
        for id in running {
            self.submit(Command::FailReview {
                review_id: id.into(),
                error: byre_projections::reviews::STOPPED_UNDER_REVIEWER.into(),
            })
            .await;
        }
        let ended: Vec<String> = self.writer.read(|s| {
            s.reviews
                .values()
                .filter(|r| !matches!(r.state, ReviewState::Pending | ReviewState::Running))
                .map(|r| r.id.clone())
                .map(|x| x.to_string())
                .collect()
        });
        for id in ended {
            self.end(&id).await;
        }
    }

    /// Completes an ended review's reviewer session and removes its checkout.
    async fn end(&mut self, review_id: &str) {
        self.started.remove(review_id);
        self.submit(Command::EndReviewer {
            review_id: review_id.into(),
        })
        .await;
        let dir = byre_agents::review_checkout_dir(&self.data_dir, review_id);
        let _ = tokio::task::spawn_blocking(move || byre_git::reviews::remove_export(&dir)).await;
    }

    async fn react(&mut self, rec: &byre_log::Record) {
        match rec.kind.as_str() {
            "review.requested" => self.schedule().await,
            "review.done" | "review.failed" | "review.skipped" => {
                let v: serde_json::Value = serde_json::from_str(&rec.json).unwrap_or_default();
                if let Some(id) = v["payload"]["review_id"].as_str() {
                    self.end(id).await;
                    if rec.kind == "review.done" {
                        self.merge_after(id).await;
                    }
                }
                self.schedule().await;
            }
            "turn.ended" | "session.process_exited" => {
                let Some(session) = rec.agent_session_id.as_deref() else {
                    return;
                };
                let running = self.writer.read(|s| {
                    s.review_of_session(session)
                        .filter(|r| r.state == ReviewState::Running)
                        .map(|r| r.id.clone())
                });
                let Some(review_id) = running else {
                    return;
                };
                let v: serde_json::Value = serde_json::from_str(&rec.json).unwrap_or_default();
                let error = if rec.kind == "turn.ended" {
                    turn_error(&v["payload"])
                } else {
                    format!(
                        "the reviewer's process exited before it reported: {}",
                        v["payload"]["reason"].as_str().unwrap_or("")
                    )
                };
                self.submit(Command::FailReview { review_id, error }).await;
            }
            _ => {}
        }
    }

    /// Makes the merge that waited for review `review_id` (its decide left it waiting only
    /// when the review was clean, on the latest snapshot, with no turn running), as its caller;
    /// a refused merge is dropped with the refusal as its note.
    async fn merge_after(&mut self, review_id: &str) {
        let pending = self.writer.read(|s| {
            s.after_review
                .iter()
                .find(|(_, p)| p.review_id == review_id)
                .and_then(|(task_id, p)| {
                    s.tasks.get(task_id)?;
                    Some((task_id.clone(), p.clone()))
                })
        });
        let Some((task_id, p)) = pending else {
            return;
        };
        // mergeTask's own path, as the human who asked for it.
        let merge = crate::finish::Merge {
            merge_title: Some(p.merge_title.clone()),
            target: crate::finish::MergeTarget::Main,
            after_review: false,
        };
        if let Err(e) = crate::finish::merge_task(&self.app, &p.by, &task_id, merge).await {
            self.submit(Command::CancelMergeAfterReview {
                actor: "byre".into(),
                task_id,
                reason: Some(format!("The merge after review was dropped: {e}.")),
            })
            .await;
        }
    }

    async fn time_out(&mut self) {
        let over: Vec<String> = self
            .started
            .iter()
            .filter(|(_, t)| t.elapsed() > self.cfg.timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in over {
            self.started.remove(&id);
            self.submit(Command::FailReview {
                review_id: id.into(),
                error: format!(
                    "the reviewer ran longer than {} s and was stopped",
                    self.cfg.timeout.as_secs()
                ),
            })
            .await;
        }
    }

    /// Starts (or skips) what may start now: per task its oldest waiting review when none of
    /// its reviews runs, up to `max_running` across the server.
    async fn schedule(&mut self) {
        loop {
            let next = self.writer.read(|s| next_review(s, self.cfg.max_running));
            let Some(plan) = next else { return };
            self.begin(plan).await;
        }
    }

    async fn begin(&mut self, plan: Plan) {
        let review_id = plan.review.id.clone();
        if plan.closing {
            self.submit(Command::SkipReview {
                review_id,
                reason: "the task was being merged or discarded, or was closed, before its review could start: nobody could act on its findings".into(),
            })
            .await;
            return;
        }
        let dir = byre_agents::review_checkout_dir(&self.data_dir, &review_id);
        let (repo, commit, base, base_ref) = (
            plan.repo.clone(),
            plan.commit.clone(),
            plan.base.clone(),
            plan.base_ref.clone(),
        );
        let export_dir = dir.clone();
        let step = tokio::task::spawn_blocking(move || {
            let step = byre_git::reviews::step(&repo, &commit, base.as_deref(), &base_ref)?;
            if !step.files.is_empty() {
                byre_git::reviews::export(&repo, &commit, &export_dir)?;
            }
            Ok::<_, byre_git::GitError>(step)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
        let step = match step {
            Ok(s) => s,
            Err(e) => {
                self.submit(Command::FailReview {
                    review_id,
                    error: format!("could not prepare the reviewer's checkout: {e}"),
                })
                .await;
                return;
            }
        };
        if step.files.is_empty() {
            self.submit(Command::SkipReview {
                review_id,
                reason: "the step changed no files".into(),
            })
            .await;
            return;
        }
        let instructions = instructions(&plan, &step, &self.writer).await;
        self.started
            .insert(review_id.clone().into(), Instant::now());
        let model = reviewer_model(&self.cfg, plan.task_vendor);
        let cmd = Command::StartReview {
            review_id: review_id.clone(),
            model,
            instructions,
            head: plan.commit.clone(),
        };
        if let Err(e) = self.writer.submit(cmd, None).await {
            self.started.remove(review_id.as_str());
            self.submit(Command::FailReview {
                review_id,
                error: format!("the reviewer could not start: {e}"),
            })
            .await;
        }
    }
}

/// What starting one review needs.
struct Plan {
    review: Review,
    task_title: String,
    repo: PathBuf,
    commit: String,
    /// The step's base commit; `None`: the merge-base with `base_ref`.
    base: Option<String>,
    base_ref: String,
    /// The task log's seqs the step spans (for its human messages).
    from_seq: u64,
    to_seq: u64,
    task_vendor: Option<Vendor>,
    /// The task is closed, or being merged or discarded: nobody could act on findings.
    closing: bool,
}

fn next_review(s: &State, max_running: usize) -> Option<Plan> {
    let running = s
        .reviews
        .values()
        .filter(|r| r.state == ReviewState::Running)
        .count();
    if running >= max_running {
        return None;
    }
    let mut pending: Vec<&Review> = s
        .reviews
        .values()
        .filter(|r| r.state == ReviewState::Pending)
        .filter(|r| {
            !s.reviews
                .values()
                .any(|o| o.task_id == r.task_id && o.state == ReviewState::Running)
        })
        .collect();
    pending.sort_by_key(|r| r.seq);
    let r = pending.first()?;
    let task = s.tasks.get(&r.task_id)?;
    let project = s.projects.get(&task.project_id)?;
    let snaps = s.task_snapshots(&r.task_id);
    let snap = snaps.get(r.snapshot_n as usize - 1)?;
    let base_snap = (r.base_n > 0)
        .then(|| snaps.get(r.base_n as usize - 1))
        .flatten();
    let task_vendor = s
        .sessions
        .values()
        .filter(|x| {
            x.task_id == r.task_id && x.role == byre_projections::sessions::SessionRole::Implementer
        })
        .max_by_key(|x| x.created_seq)
        .map(|x| x.vendor);
    Some(Plan {
        review: (*r).clone(),
        task_title: task.title.clone(),
        repo: PathBuf::from(&project.repo_path),
        commit: snap.commit.clone(),
        base: base_snap.map(|b| b.commit.clone()),
        base_ref: task.base_ref.clone(),
        from_seq: base_snap.map_or(0, |b| b.seq),
        to_seq: snap.seq,
        task_vendor,
        closing: task.status != byre_projections::tasks::TaskStatus::Active
            || task.merging
            || task.discarding,
    })
}

/// Words for a reviewer turn that ended while its review still ran.
fn turn_error(p: &serde_json::Value) -> String {
    let status = p["api_error_status"].as_u64();
    let error = p["error"].as_str().unwrap_or("");
    match (status, p["outcome"].as_str()) {
        (Some(429), _) => format!("the reviewer's model refused with 429 (rate limited): {error}"),
        (Some(401), _) => {
            format!("the reviewer's model refused with 401 (not authorised): {error}")
        }
        (Some(code), _) => format!("the reviewer's model answered {code}: {error}"),
        (None, Some("completed")) => {
            "the reviewer's turn ended without calling submit_review".into()
        }
        (None, outcome) => format!(
            "the reviewer's turn ended {} without calling submit_review: {error}",
            outcome.unwrap_or("")
        ),
    }
}

/// The reviewer's one message: the task, the step's human messages, files and stat, and how
/// to report.
async fn instructions(plan: &Plan, step: &byre_git::reviews::Step, writer: &Writer) -> String {
    let store = writer.store().clone();
    let (task_id, from, to) = (plan.review.task_id.clone(), plan.from_seq, plan.to_seq);
    let messages = tokio::task::spawn_blocking(move || {
        let records = store
            .task_records(&task_id, from, 10_000)
            .unwrap_or_default();
        records
            .iter()
            .filter(|r| r.seq <= to && r.kind == "user.message")
            .filter_map(|r| {
                let v: serde_json::Value = serde_json::from_str(&r.json).ok()?;
                let actor = v["actor"].as_str()?;
                (actor != "byre").then(|| {
                    format!(
                        "- {actor}: {}",
                        v["payload"]["text"]
                            .as_str()
                            .unwrap_or("")
                            .replace('\n', "\n  ")
                    )
                })
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let messages = if messages.is_empty() {
        "(none)".to_owned()
    } else {
        messages.join("\n")
    };
    let files = step
        .files
        .iter()
        .map(|f| format!("- {f}"))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "You are reviewing one step of an AI agent's work on the task \"{title}\". The current \
         directory is a read-only copy of the repository at the end of that step; read the \
         code yourself. Do not change any file.\n\n\
         What the humans asked for in this step:\n{messages}\n\n\
         Files the step changed:\n{files}\n\nDiff stat:\n{stat}\n\
         Review the change for correctness, security, tests and clarity. When done, call the \
         `submit_review` tool exactly once with `summary` (Markdown) and `findings` (each with \
         `severity` one of {sev}, `category`, `title`, `detail`, `path` relative to the \
         repository root, `line` from 1; an empty list when nothing needs fixing), then end \
         your turn.",
        title = plan.task_title,
        stat = step.stat,
        sev = byre_projections::reviews::SEVERITIES.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_vendor_reviews() {
        let cfg = ReviewConfig::default();
        assert_eq!(reviewer_model(&cfg, Some(Vendor::Claude)), cfg.codex_model);
        assert_eq!(reviewer_model(&cfg, Some(Vendor::Codex)), cfg.claude_model);
        assert_eq!(
            reviewer_model(&cfg, Some(Vendor::Codebolt)),
            cfg.claude_model
        );
    }

    #[test]
    fn a_429_is_said_in_words() {
        let e = turn_error(
            &serde_json::json!({"api_error_status": 429, "outcome": "failed", "error": "slow down"}),
        );
        assert!(e.contains("429") && e.contains("rate limited"), "{e}");
        let e = turn_error(&serde_json::json!({"outcome": "completed"}));
        assert!(e.contains("without calling submit_review"), "{e}");
    }
}
