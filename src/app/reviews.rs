//! Reviews (`listReviews`, `setFindingState`, `stopReview`): reads of the fold and commands
//! decided in `projections/src/reviews.rs`. The reviewers themselves are run by the review
//! reactor (`crate::reactors::reviews`).

use byre_projections::reviews::FindingState;
use byre_projections::Command;

use super::{Ctx, Error};
use crate::api;

/// `listReviews`: the task's reviews that started or were skipped, oldest first.
/// # Errors
/// [`Error::NotFound`] for an unknown task.
pub fn list_reviews(app: &Ctx, task_id: &str) -> Result<Vec<api::Review>, Error> {
    app.writer
        .read(|s| {
            s.tasks.get(task_id)?;
            Some(
                s.task_reviews(task_id)
                    .into_iter()
                    .map(api::Review::from)
                    .collect(),
            )
        })
        .ok_or_else(|| Error::NotFound(format!("no task `{task_id}`")))
}

fn get_review(app: &Ctx, review_id: &str) -> Result<api::Review, Error> {
    app.writer
        .read(|s| s.reviews.get(review_id).map(api::Review::from))
        .ok_or_else(|| Error::NotFound(format!("no review `{review_id}`")))
}

/// `setFindingState`: marks finding `index` of a done review; `fixed` sends it to the task's
/// agent as `actor`'s message (queued while a turn runs).
/// # Errors
/// Not found (review); invalid (not done, index out of range, no live agent for `fixed`).
pub async fn set_finding_state(
    app: &Ctx,
    actor: &str,
    review_id: &str,
    index: u32,
    state: FindingState,
) -> Result<api::Review, Error> {
    let task_id = app
        .writer
        .read(|s| s.reviews.get(review_id).map(|r| r.task_id.clone()))
        .ok_or_else(|| Error::NotFound(format!("no review `{review_id}`")))?;
    let head = match state {
        FindingState::Fixed => super::sessions::worktree_head(app, &task_id).await?,
        FindingState::Ignored => String::new(),
    };
    app.submit(Command::SetFindingState {
        actor: actor.into(),
        review_id: review_id.into(),
        index,
        state,
        head,
    })
    .await?;
    get_review(app, review_id)
}

/// `stopReview`: the review is failed now; the review reactor then completes its reviewer
/// session, whose process group the agent runtime ends.
/// # Errors
/// Not found; conflict unless running.
pub async fn stop_review(app: &Ctx, actor: &str, review_id: &str) -> Result<api::Review, Error> {
    app.submit(Command::StopReview {
        actor: actor.into(),
        review_id: review_id.into(),
    })
    .await?;
    get_review(app, review_id)
}

/// `cancelMergeAfterReview`: withdraws a merge waiting for its review; nothing is merged.
/// # Errors
/// Not found: unknown task, or no merge waits.
pub async fn cancel_merge_after_review(
    app: &Ctx,
    actor: &str,
    task_id: &str,
) -> Result<api::Task, Error> {
    app.submit(Command::CancelMergeAfterReview {
        actor: actor.into(),
        task_id: task_id.into(),
        reason: None,
    })
    .await?;
    super::tasks::get_task(app, task_id)
}
