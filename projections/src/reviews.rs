//! Reviews: one per snapshot of a task, run by an agent of the vendor the task's agent does not
//! use. Operations: `listReviews`, `setFindingState`, `stopReview`, and the review reactor's
//! steps (`Command::StartReview`, `Command::SkipReview`, `Command::SubmitReview`,
//! `Command::FailReview`).
//!
//! A review is asked for in the same command that records its snapshot (`review.requested`,
//! when the server reviews snapshots at all). It waits (`pending`, not a contract state: such
//! a review is not listed) until the reactor starts its reviewer (`review.started`) or finds the
//! step changed no files (`review.skipped`). **Pile-up:** when a snapshot is recorded while an
//! older review of the same task is still pending, the older one is skipped (its reason names
//! the newer snapshot) and the newer one reviews both steps: its `base_n` is the older one's.
//! So a task has at most one pending review, and reviews of a task run one at a time, oldest
//! first. A running review ends `done` (its reviewer's `submit_review`), or `failed`.

use crate::ids::{ReviewId, SessionId, TaskId};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent};
use crate::{DecideCtx, Rejection, State};

/// The severities a finding may have (`submit_review`), most serious first.
pub const SEVERITIES: &[&str] = &["critical", "major", "minor", "nit"];

/// A review's state. `Pending` is byre's own: the contract lists a review once it runs or is
/// skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    /// Asked for; no reviewer yet.
    Pending,
    /// Its reviewer runs.
    Running,
    /// The reviewer reported with `submit_review`.
    Done,
    /// The reviewer failed, was stopped, or byre stopped under it.
    Failed,
    /// The step changed no files (or a newer snapshot's review covers it).
    Skipped,
}

/// Spec `FindingState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingState {
    /// Sent to the task's agent to fix.
    Fixed,
    /// Dismissed; left out of the merge warning.
    Ignored,
}

/// One finding of a `submit_review`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// One of [`SEVERITIES`].
    pub severity: String,
    /// Free text, e.g. `correctness`, `security`, `tests`.
    pub category: String,
    /// One line.
    pub title: String,
    /// Markdown.
    pub detail: String,
    /// A repository path of the snapshot.
    pub path: String,
    /// From 1.
    pub line: u32,
}

/// The arguments of `submit_review`: the review's `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewResult {
    /// Markdown.
    pub summary: String,
    /// The findings, maybe none.
    pub findings: Vec<Finding>,
}

impl ReviewResult {
    /// Checks what JSON cannot: a non-empty summary; per finding, a known severity, non-empty
    /// title and path, a relative path without `..`, and a line from 1.
    /// # Errors
    /// Words for the reviewer, naming the finding by index.
    pub fn check(&self) -> Result<(), String> {
        if self.summary.trim().is_empty() {
            return Err("summary must not be empty".into());
        }
        for (i, f) in self.findings.iter().enumerate() {
            if !SEVERITIES.contains(&f.severity.as_str()) {
                return Err(format!(
                    "findings[{i}].severity `{}` is not one of {}",
                    f.severity,
                    SEVERITIES.join(", ")
                ));
            }
            if f.title.trim().is_empty() {
                return Err(format!("findings[{i}].title must not be empty"));
            }
            let bad_path = f.path.trim().is_empty()
                || f.path.starts_with('/')
                || f.path.split('/').any(|c| c == "..");
            if bad_path {
                return Err(format!(
                    "findings[{i}].path `{}` must be a relative repository path",
                    f.path
                ));
            }
            if f.line == 0 {
                return Err(format!("findings[{i}].line must be 1 or more"));
            }
        }
        Ok(())
    }
}

/// `review.requested` payload (intent). Envelope: the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRequested {
    /// The review's id.
    pub id: ReviewId,
    /// The snapshot it reviews.
    pub snapshot_n: u32,
    /// The snapshot the step starts from; 0 for the merge-base with the default branch.
    pub base_n: u32,
}

/// `review.skipped` payload: no reviewer runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewSkipped {
    /// The review.
    pub review_id: ReviewId,
    /// Why, for the user.
    pub reason: String,
}

/// `review.started` payload: the reviewer session exists. Envelope: the task, the reviewer's
/// session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewStarted {
    /// The review.
    pub review_id: ReviewId,
    /// The reviewer's vendor.
    pub vendor: String,
    /// The reviewer's model.
    pub model: String,
}

/// `review.done` payload: the reviewer's `submit_review` arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewDone {
    /// The review.
    pub review_id: ReviewId,
    /// The arguments.
    pub result: ReviewResult,
}

/// `review.failed` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewFailed {
    /// The review.
    pub review_id: ReviewId,
    /// Why, in words.
    pub error: String,
}

/// `review.finding_state_set` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingStateSet {
    /// The review.
    pub review_id: ReviewId,
    /// The finding's index in `result.findings`.
    pub index: u32,
    /// Its new state.
    pub state: FindingState,
}

/// A review (spec `Review`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// Id.
    pub id: ReviewId,
    /// Task.
    pub task_id: TaskId,
    /// The snapshot reviewed.
    pub snapshot_n: u32,
    /// Where its step starts (0: the merge-base).
    pub base_n: u32,
    /// The reviewer's session; empty before it starts or when skipped.
    pub agent_session_id: SessionId,
    /// The reviewer's vendor; empty likewise.
    pub vendor: String,
    /// The reviewer's model; empty likewise.
    pub model: String,
    /// State.
    pub state: ReviewState,
    /// `done`: the arguments of `submit_review`.
    pub result: Option<ReviewResult>,
    /// `failed`: why; `skipped`: why.
    pub error: String,
    /// Microseconds since the epoch, of `review.requested`.
    pub created_at_us: i64,
    /// When it ended (done, failed, skipped).
    pub finished_at_us: Option<i64>,
    /// How the human addressed findings, by index.
    pub finding_states: BTreeMap<u32, FindingState>,
    /// Seq of `review.requested`.
    pub seq: u64,
}

impl State {
    /// A task's reviews that started or were skipped, oldest first (`listReviews`).
    pub fn task_reviews(&self, task_id: &str) -> Vec<&Review> {
        let mut out: Vec<&Review> = self
            .reviews
            .values()
            .filter(|r| r.task_id == task_id && r.state != ReviewState::Pending)
            .collect();
        out.sort_by_key(|r| r.seq);
        out
    }

    /// The review a reviewer session runs for, if any.
    pub fn review_of_session(&self, session_id: &str) -> Option<&Review> {
        self.reviews
            .values()
            .find(|r| !r.agent_session_id.is_empty() && r.agent_session_id == session_id)
    }
}

fn review<'s>(state: &'s State, review_id: &str) -> Result<&'s Review, Rejection> {
    state
        .reviews
        .get(review_id)
        .ok_or_else(|| Rejection::NotFound(format!("no review `{review_id}`")))
}

fn event(state: &State, r: &Review, body: EventBody) -> NewEvent {
    let mut e = NewEvent::new("byre", body).task(&r.task_id);
    if let Some(t) = state.tasks.get(&r.task_id) {
        e = e.project(&t.project_id);
    }
    if !r.agent_session_id.is_empty() {
        e.agent_session_id = Some(r.agent_session_id.clone());
    }
    e
}

/// The events that ask for the review of snapshot `n` of a task (inside `RecordSnapshot`):
/// older pending reviews of the task are skipped and the new one covers their steps.
pub(crate) fn request(
    state: &State,
    ctx: &DecideCtx,
    id_n: u32,
    task_id: &str,
    project_id: &str,
    n: u32,
) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let mut base_n = n.saturating_sub(1);
    let mut older: Vec<&Review> = state
        .reviews
        .values()
        .filter(|r| r.task_id == task_id && r.state == ReviewState::Pending)
        .collect();
    older.sort_by_key(|r| r.seq);
    for r in older {
        base_n = base_n.min(r.base_n);
        out.push(event(
            state,
            r,
            EventBody::ReviewSkipped(ReviewSkipped {
                review_id: r.id.clone(),
                reason: format!(
                    "snapshot {n} was taken before this review started; its review covers this step"
                ),
            }),
        ));
    }
    out.push(
        NewEvent::new(
            "byre",
            EventBody::ReviewRequested(ReviewRequested {
                id: ctx.id(id_n).into(),
                snapshot_n: n,
                base_n,
            }),
        )
        .project(project_id)
        .task(task_id),
    );
    out
}

/// Decides `SkipReview`: a pending review's step changed no files. Nothing unless pending.
pub(crate) fn skip(
    state: &State,
    review_id: &str,
    reason: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let r = review(state, review_id)?;
    if r.state != ReviewState::Pending {
        return Ok(Vec::new());
    }
    Ok(vec![event(
        state,
        r,
        EventBody::ReviewSkipped(ReviewSkipped {
            review_id: review_id.into(),
            reason: reason.into(),
        }),
    )])
}

/// Decides `StartReview`: a pending review gets its reviewer, a new session (role `reviewer`,
/// on `model`'s vendor) whose first turn is `instructions`; `head` is the snapshot commit it
/// reviews. 409 unless pending, or while another review of the task runs.
pub(crate) fn start(
    state: &State,
    ctx: &DecideCtx,
    review_id: &str,
    model: &str,
    instructions: &str,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    use crate::sessions::{Session, SessionCreated, SessionRole, Vendor};
    let r = review(state, review_id)?;
    if r.state != ReviewState::Pending {
        return Err(Rejection::Conflict(format!(
            "review `{review_id}` is not waiting to start"
        )));
    }
    if state
        .reviews
        .values()
        .any(|o| o.task_id == r.task_id && o.state == ReviewState::Running)
    {
        return Err(Rejection::Conflict(format!(
            "another review of task `{}` runs",
            r.task_id
        )));
    }
    let vendor = Vendor::for_model(model);
    let id = ctx.id(0);
    let created = SessionCreated {
        id: id.clone().into(),
        task_id: r.task_id.clone(),
        vendor,
        model: model.into(),
        vendor_session_id: match vendor {
            Vendor::Claude => ctx.id(1),
            Vendor::Codex | Vendor::Codebolt => String::new(),
        },
        role: SessionRole::Reviewer,
        forked_from: None,
        forked_at: None,
    };
    let s = Session::created(&created, "byre", ctx.now_us, 0);
    let mut out = vec![crate::sessions::session_event(
        &s,
        state,
        "byre",
        EventBody::SessionCreated(created),
    )];
    let mut e = event(
        state,
        r,
        EventBody::ReviewStarted(ReviewStarted {
            review_id: review_id.into(),
            vendor: vendor.as_str().into(),
            model: model.into(),
        }),
    );
    e.agent_session_id = Some(id.into());
    out.push(e);
    out.extend(crate::sessions::hand_over(
        state,
        &s,
        "byre",
        state.last_input_id + 1,
        instructions,
        &[],
        head,
        None,
    ));
    Ok(out)
}

/// Decides `EndReviewer`: the reviewer session of an ended review completes (its process
/// stops). Nothing when it already did.
pub(crate) fn end_reviewer(state: &State, review_id: &str) -> Result<Vec<NewEvent>, Rejection> {
    let r = review(state, review_id)?;
    let Some(s) = state.sessions.get(&r.agent_session_id) else {
        return Ok(Vec::new());
    };
    if s.completed || matches!(r.state, ReviewState::Pending | ReviewState::Running) {
        return Ok(Vec::new());
    }
    Ok(vec![crate::sessions::session_event(
        s,
        state,
        "byre",
        EventBody::SessionCompleted(crate::sessions::SessionCompleted {
            reason: "review_ended".into(),
            successor_id: String::new(),
        }),
    )])
}

/// Decides `SubmitReview` (the reviewer's `submit_review`): 404 unknown session or not a
/// reviewer's; 409 unless its review runs; 400 bad arguments (a tool error it can correct).
pub(crate) fn submit(
    state: &State,
    session_id: &str,
    result: &ReviewResult,
) -> Result<Vec<NewEvent>, Rejection> {
    let r = state
        .review_of_session(session_id)
        .ok_or_else(|| Rejection::NotFound(format!("session `{session_id}` reviews nothing")))?;
    if r.state != ReviewState::Running {
        return Err(Rejection::Conflict(format!(
            "review `{}` is not running",
            r.id
        )));
    }
    result.check().map_err(Rejection::Invalid)?;
    let mut out = vec![event(
        state,
        r,
        EventBody::ReviewDone(ReviewDone {
            review_id: r.id.clone(),
            result: result.clone(),
        }),
    )];
    out.extend(after::on_review_end(state, r, Some(result.findings.len())));
    Ok(out)
}

/// The error of a review whose reviewer was running when byre stopped or died.
pub const STOPPED_UNDER_REVIEWER: &str =
    "byre stopped while the reviewer was running; the review was not finished";

/// Decides `FailReview`: a pending or running review failed. Nothing once it ended (a repeat,
/// or the reviewer's exit after its `submit_review`).
pub(crate) fn fail(
    state: &State,
    review_id: &str,
    error: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let r = review(state, review_id)?;
    if !matches!(r.state, ReviewState::Pending | ReviewState::Running) {
        return Ok(Vec::new());
    }
    let mut out = vec![event(
        state,
        r,
        EventBody::ReviewFailed(ReviewFailed {
            review_id: review_id.into(),
            error: error.into(),
        }),
    )];
    out.extend(after::on_review_end(state, r, None));
    Ok(out)
}

/// Decides `StopReview`: 404 unknown; 409 unless running.
pub(crate) fn stop(
    state: &State,
    actor: &str,
    review_id: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let r = review(state, review_id)?;
    if r.state != ReviewState::Running {
        return Err(Rejection::Conflict(format!(
            "review `{review_id}` is not running"
        )));
    }
    let mut out = vec![event(
        state,
        r,
        EventBody::ReviewFailed(ReviewFailed {
            review_id: review_id.into(),
            error: format!("stopped by {actor}"),
        }),
    )];
    out.extend(after::on_review_end(state, r, None));
    Ok(out)
}

/// Decides `SetFindingState`: 404 unknown review; 400 a review not done or an index out of
/// range; nothing when the finding is already in that state. `fixed` also sends the finding to the task's live agent as `actor`'s message (queued
/// if a turn runs); 400 when the task has no live agent.
pub(crate) fn set_finding_state(
    state: &State,
    actor: &str,
    review_id: &str,
    index: u32,
    finding_state: FindingState,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let r = review(state, review_id)?;
    let Some(result) = r.result.as_ref().filter(|_| r.state == ReviewState::Done) else {
        return Err(Rejection::Invalid(format!(
            "review `{review_id}` is not done"
        )));
    };
    let Some(f) = result.findings.get(index as usize) else {
        return Err(Rejection::Invalid(format!(
            "review `{review_id}` has {} findings; index {index} is out of range",
            result.findings.len()
        )));
    };
    if r.finding_states.get(&index) == Some(&finding_state) {
        // Already so (a double click, two requests racing): the finding is not sent twice.
        return Ok(Vec::new());
    }
    let mut e = event(
        state,
        r,
        EventBody::FindingStateSet(FindingStateSet {
            review_id: review_id.into(),
            index,
            state: finding_state,
        }),
    );
    e.actor = actor.into();
    let mut out = vec![e];
    if finding_state == FindingState::Fixed {
        let session = state
            .sessions
            .values()
            .filter(|s| {
                s.task_id == r.task_id
                    && s.role == crate::sessions::SessionRole::Implementer
                    && !s.completed
            })
            .max_by_key(|s| s.created_seq)
            .ok_or_else(|| {
                Rejection::Invalid(format!("task `{}` has no live agent to fix it", r.task_id))
            })?;
        let text = format!(
            "Please fix this review finding ({}, {}): {}\n\n{}\n\nAt {}:{}",
            f.severity, f.category, f.title, f.detail, f.path, f.line
        );
        out.extend(crate::sessions::send(
            state,
            actor,
            &session.id,
            &text,
            &[],
            None,
            head,
        )?);
    }
    Ok(out)
}

/// Folds the review events.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let review_id = match &e.body {
        EventBody::ReviewRequested(p) => {
            let Some(task_id) = e.task_id.clone() else {
                return;
            };
            state.reviews.insert(
                p.id.clone(),
                Review {
                    id: p.id.clone(),
                    task_id,
                    snapshot_n: p.snapshot_n,
                    base_n: p.base_n,
                    agent_session_id: SessionId::default(),
                    vendor: String::new(),
                    model: String::new(),
                    state: ReviewState::Pending,
                    result: None,
                    error: String::new(),
                    created_at_us: e.created_at_us,
                    finished_at_us: None,
                    finding_states: BTreeMap::new(),
                    seq: e.seq,
                },
            );
            return;
        }
        EventBody::ReviewSkipped(p) => &p.review_id,
        EventBody::ReviewStarted(p) => &p.review_id,
        EventBody::ReviewDone(p) => &p.review_id,
        EventBody::ReviewFailed(p) => &p.review_id,
        EventBody::FindingStateSet(p) => &p.review_id,
        _ => return,
    };
    let Some(r) = state.reviews.get_mut(review_id) else {
        return;
    };
    match &e.body {
        EventBody::ReviewSkipped(p) => {
            r.state = ReviewState::Skipped;
            r.error = p.reason.clone();
            r.finished_at_us = Some(e.created_at_us);
        }
        EventBody::ReviewStarted(p) => {
            r.state = ReviewState::Running;
            r.vendor = p.vendor.clone();
            r.model = p.model.clone();
            r.agent_session_id = e.agent_session_id.clone().unwrap_or_default();
        }
        EventBody::ReviewDone(p) => {
            r.state = ReviewState::Done;
            r.result = Some(p.result.clone());
            r.finished_at_us = Some(e.created_at_us);
        }
        EventBody::ReviewFailed(p) => {
            r.state = ReviewState::Failed;
            r.error = p.error.clone();
            r.finished_at_us = Some(e.created_at_us);
        }
        EventBody::FindingStateSet(p) => {
            r.finding_states.insert(p.index, p.state);
        }
        _ => {}
    }
}

/// A task's review state for `Task.state`: `Reviewing` while one runs, `ReviewPending` while
/// one waits or a turn end's snapshot that will be reviewed is still to be taken
/// (`turn.ended.review`), else `None`. So a reviewed turn goes running → review_pending →
/// reviewing → idle, with no idle between the turn's end and its snapshot.
pub(crate) fn task_review_state(state: &State, task_id: &str) -> Option<crate::tasks::TaskState> {
    let mut pending = state.snapshots.get(task_id).is_some_and(|s| {
        s.pending
            .values()
            .any(|p| p.review && p.trigger == crate::snapshots::SnapshotTrigger::TurnEnd)
    });
    for r in state.reviews.values().filter(|r| r.task_id == task_id) {
        match r.state {
            ReviewState::Running => return Some(crate::tasks::TaskState::Reviewing),
            ReviewState::Pending => pending = true,
            _ => {}
        }
    }
    pending.then_some(crate::tasks::TaskState::ReviewPending)
}

pub mod after;

#[cfg(test)]
mod tests;
