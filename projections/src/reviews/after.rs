//! `mergeTask` with `after_review` and `cancelMergeAfterReview`: a merge recorded to be made,
//! as its caller and with its title, when the running review of the task's latest snapshot
//! ends `done` with no findings, that snapshot is still the latest and no turn runs. Else it
//! is dropped (`task.merge_after_review_dropped`, whose reason is the transcript's note). The
//! review reactor makes the merge (`Command::MergeTask`), whose `task.merge_requested` ends
//! the wait.

use crate::ids::{Login, ReviewId};
use serde::{Deserialize, Serialize};

use super::{Review, ReviewState};
use crate::event::{EventBody, NewEvent};
use crate::{Rejection, State};

/// `task.merge_after_review_set` payload. Envelope: the task; actor the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeAfterReviewSet {
    /// The merge commit's title.
    pub merge_title: String,
    /// The running review it waits for.
    pub review_id: ReviewId,
}

/// `task.merge_after_review_dropped` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeAfterReviewDropped {
    /// Why, for the transcript: withdrawn by a caller, findings, a newer snapshot, a turn.
    pub reason: String,
}

/// A merge waiting for a review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingMerge {
    /// Who asked; the merge is made as them.
    pub by: Login,
    /// The title.
    pub merge_title: String,
    /// The review.
    pub review_id: ReviewId,
}

fn task_event(state: &State, task_id: &str, actor: &str, body: EventBody) -> NewEvent {
    let mut e = NewEvent::new(actor, body).task(task_id);
    if let Some(t) = state.tasks.get(task_id) {
        e = e.project(&t.project_id);
    }
    e
}

/// Decides `MergeTask` with `after_review`: 400 no or bad title; 404; 409 closed, already
/// waiting, or the review of the latest snapshot not running.
pub(crate) fn request(
    state: &State,
    actor: &str,
    task_id: &str,
    merge_title: Option<&str>,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    let title = merge_title
        .ok_or_else(|| Rejection::Invalid("merge_title is required for target main".into()))?;
    crate::finish::check_merge_title(title)?;
    crate::finish::check_open(t)?;
    // Refused now, not dropped later, when the merge itself would be refused for it.
    crate::finish::check_identity(state, actor)?;
    if t.merge_after_review {
        return Err(Rejection::Conflict(format!(
            "task `{task_id}` already has a merge waiting for its review"
        )));
    }
    let latest = state.task_snapshots(task_id).len() as u32;
    let review = state
        .reviews
        .values()
        .find(|r| r.task_id == task_id && r.snapshot_n == latest && r.state == ReviewState::Running)
        .ok_or_else(|| {
            Rejection::Conflict(format!(
                "no review of task `{task_id}`'s latest snapshot is running"
            ))
        })?;
    Ok(vec![task_event(
        state,
        task_id,
        actor,
        EventBody::MergeAfterReviewSet(MergeAfterReviewSet {
            merge_title: title.into(),
            review_id: review.id.clone(),
        }),
    )])
}

/// Decides `CancelMergeAfterReview`: `reason` `None` is a caller's withdrawal; 404 unknown
/// task or no merge waiting.
pub(crate) fn cancel(
    state: &State,
    actor: &str,
    task_id: &str,
    reason: Option<&str>,
) -> Result<Vec<NewEvent>, Rejection> {
    let t = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if !t.merge_after_review {
        return Err(Rejection::NotFound(format!(
            "task `{task_id}` has no merge waiting for a review"
        )));
    }
    let reason = reason.map_or_else(|| format!("withdrawn by {actor}"), str::to_owned);
    Ok(vec![task_event(
        state,
        task_id,
        actor,
        EventBody::MergeAfterReviewDropped(MergeAfterReviewDropped { reason }),
    )])
}

/// The drop that goes with the end of `review` (`done` with `findings` findings, or failed),
/// when a merge waits for it and will not be made.
pub(crate) fn on_review_end(
    state: &State,
    review: &Review,
    done_findings: Option<usize>,
) -> Vec<NewEvent> {
    let Some(p) = state.after_review.get(&review.task_id) else {
        return Vec::new();
    };
    if p.review_id != review.id {
        return Vec::new();
    }
    let latest = state.task_snapshots(&review.task_id).len() as u32;
    let turn = state.sessions.values().any(|s| {
        s.task_id == review.task_id
            && s.role == crate::sessions::SessionRole::Implementer
            && s.turn_running
    });
    let reason = match done_findings {
        None => "the review failed".to_owned(),
        Some(n) if n > 0 => format!("the review found {n} findings"),
        Some(_) if review.snapshot_n != latest => "a newer snapshot was taken".to_owned(),
        Some(_) if turn => "a turn is running".to_owned(),
        Some(_) => return Vec::new(),
    };
    vec![task_event(
        state,
        &review.task_id,
        "byre",
        EventBody::MergeAfterReviewDropped(MergeAfterReviewDropped {
            reason: format!("The merge after review was dropped: {reason}."),
        }),
    )]
}

/// Folds the wait's events (and `task.merge_requested`, which ends it).
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let Some(task_id) = e.task_id.as_deref() else {
        return;
    };
    match &e.body {
        EventBody::MergeAfterReviewSet(p) => {
            if let Some(t) = state.tasks.get_mut(task_id) {
                t.merge_after_review = true;
                state.after_review.insert(
                    task_id.to_owned().into(),
                    PendingMerge {
                        by: e.actor.clone().into(),
                        merge_title: p.merge_title.clone(),
                        review_id: p.review_id.clone(),
                    },
                );
            }
        }
        EventBody::MergeAfterReviewDropped(_) | EventBody::MergeRequested(_) => {
            let was_waiting = state.after_review.remove(task_id).is_some();
            if let (true, Some(t)) = (was_waiting, state.tasks.get_mut(task_id)) {
                t.merge_after_review = false;
            }
        }
        _ => {}
    }
}
