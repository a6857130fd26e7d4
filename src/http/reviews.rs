//! `listReviews`, `setFindingState`, `stopReview`: parse, call `byre_app::reviews`, answer.

use actix_web::{web, HttpResponse};
use byre_projections::reviews::FindingState;
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::reviews as op;

/// `listReviews` — GET /api/tasks/{taskId}/reviews → 200 `Review[]`; 404 unknown task.
pub async fn list_reviews(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_reviews(&app, &task_id)?))
}

/// Body of `setFindingState`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingStateUpdate {
    state: FindingState,
}

/// `setFindingState` — PUT /api/reviews/{reviewId}/findings/{index} → 200 `Review`; 400 not
/// done or index out of range; 404 unknown review.
pub async fn set_finding_state(
    caller: Caller,
    path: web::Path<(String, String)>,
    body: web::Json<FindingStateUpdate>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let (review_id, index) = path.into_inner();
    let index: u32 = index.parse().map_err(|_| {
        ApiError::BadRequest(format!("finding index `{index}` is not a number from 0"))
    })?;
    let review = op::set_finding_state(
        &app,
        &caller.login,
        &review_id,
        index,
        body.into_inner().state,
    )
    .await?;
    Ok(HttpResponse::Ok().json(review))
}

/// `stopReview` — POST /api/reviews/{reviewId}/stop → 200 `Review`; 404; 409 unless running.
pub async fn stop_review(
    caller: Caller,
    review_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::stop_review(&app, &caller.login, &review_id).await?))
}

/// `cancelMergeAfterReview` — DELETE /api/tasks/{taskId}/merge-after-review → 200 `Task`; 404 unknown task
/// or no merge waiting.
pub async fn cancel_merge_after_review(
    caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(
        HttpResponse::Ok()
            .json(op::cancel_merge_after_review(&app, &caller.login, &task_id).await?),
    )
}
