//! `listWorkflows`, `getWorkflow`, `putWorkflow`, `deleteWorkflow`, and a run's `getTaskWorkflow`,
//! `getWorkflowRun`: parse, call [`byre_app::workflows`] or [`byre_app::runs`], answer (a
//! workflow's file as YAML).

use actix_web::{web, HttpRequest, HttpResponse};

use super::identity::Caller;
use super::{read_limited, ApiError, App};
use byre_app::workflows as op;

/// `listWorkflows` — GET /api/workflows → 200 `[WorkflowSummary]`, by name.
pub async fn list_workflows(
    _caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::list_workflows(&app)))
}

/// `getWorkflow` — GET /api/workflows/{name} → 200 the `WorkflowDefinition` as YAML, as an
/// attachment named `{name}.yaml`; 404.
pub async fn get_workflow(
    _caller: Caller,
    name: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let def = op::get_workflow(&app, &name)?;
    let yaml = serde_norway::to_string(&def).map_err(ApiError::internal)?;
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(HttpResponse::Ok()
        .content_type("application/yaml")
        .insert_header((
            "Content-Disposition",
            format!("attachment; filename=\"{safe}.yaml\""),
        ))
        .body(yaml))
}

/// `putWorkflow` — PUT /api/workflows/{name} (YAML or JSON body) → 200 `WorkflowSummary`; 400
/// with the reason (Content-Type, parse error, bad name, unknown `after`, a cycle, `base` on a
/// stage with several after stages); 413 over [`op::MAX_WORKFLOW_BYTES`].
pub async fn put_workflow(
    caller: Caller,
    req: HttpRequest,
    name: web::Path<String>,
    body: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let body = read_limited(body, op::MAX_WORKFLOW_BYTES, "workflow files").await?;
    let content_type = req
        .headers()
        .get("Content-Type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let definition = op::parse_definition(content_type, &body)?;
    let summary = op::put_workflow(&app, &caller.login, &name, definition).await?;
    Ok(HttpResponse::Ok().json(summary))
}

/// `deleteWorkflow` — DELETE /api/workflows/{name} → 204; 404.
pub async fn delete_workflow(
    caller: Caller,
    name: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    op::delete_workflow(&app, &caller.login, &name).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `getTaskWorkflow` — GET /api/tasks/{taskId}/workflow → 200 `TaskWorkflow`: the workflow
/// the task's run froze, as YAML; 404 (unknown task, or not started from a workflow).
pub async fn get_task_workflow(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(byre_app::runs::get_task_workflow(&app, &task_id)?))
}

/// `getWorkflowRun` — GET /api/tasks/{taskId}/workflow/run → 200 `WorkflowRun`; 404 (unknown
/// task, or not started from a workflow).
pub async fn get_workflow_run(
    _caller: Caller,
    task_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(byre_app::runs::get_workflow_run(&app, &task_id)?))
}
