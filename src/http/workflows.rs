//! `listWorkflows`, `getWorkflow`, `putWorkflow`, `deleteWorkflow`. A workflow's file is YAML
//! (JSON accepted on put); it is parsed here and validated by the writer.

use actix_web::{web, HttpRequest, HttpResponse};
use byre_projections::workflows::WorkflowDefinition;
use byre_projections::Command;

use super::{read_limited, ApiError, App};
use crate::api;
use crate::identity::Caller;

/// `listWorkflows` — GET /api/workflows → 200 `[WorkflowSummary]`, by name.
pub async fn list_workflows(
    _caller: Caller,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let list: Vec<api::WorkflowSummary> = app.writer.read(|s| {
        s.workflows
            .values()
            .map(api::WorkflowSummary::from)
            .collect()
    });
    Ok(HttpResponse::Ok().json(list))
}

/// `getWorkflow` — GET /api/workflows/{name} → 200 the `WorkflowDefinition` as YAML, as an
/// attachment named `{name}.yaml`; 404.
pub async fn get_workflow(
    _caller: Caller,
    name: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let def = app
        .writer
        .read(|s| s.workflows.get(&name).map(|w| w.definition.clone()))
        .ok_or_else(|| ApiError::NotFound(format!("no workflow named `{name}`")))?;
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

/// Largest workflow file accepted, in bytes.
pub const MAX_WORKFLOW_BYTES: usize = 256 * 1024;

/// Content-Types of a workflow file: YAML (the contract's), or JSON.
const WORKFLOW_TYPES: [&str; 5] = [
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
    "application/json",
];

/// Parses a workflow file: JSON when the Content-Type says so, YAML for the YAML types.
/// # Errors
/// 400 naming the expected Content-Type when it is missing or another; 400 with the parser's
/// message.
pub fn parse_definition(content_type: &str, body: &[u8]) -> Result<WorkflowDefinition, ApiError> {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !WORKFLOW_TYPES.contains(&mime.as_str()) {
        let got = if mime.is_empty() {
            "no Content-Type".to_owned()
        } else {
            format!("Content-Type `{mime}`")
        };
        return Err(ApiError::BadRequest(format!(
            "a workflow file is YAML: send it with `Content-Type: application/yaml` (or JSON with `application/json`), not {got}"
        )));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::BadRequest("the workflow file is not UTF-8 text".into()))?;
    if mime == "application/json" {
        serde_json::from_str(text)
            .map_err(|e| ApiError::BadRequest(format!("invalid workflow JSON: {e}")))
    } else {
        serde_norway::from_str(text)
            .map_err(|e| ApiError::BadRequest(format!("invalid workflow YAML: {e}")))
    }
}

/// `putWorkflow` — PUT /api/workflows/{name} (YAML or JSON body) → 200 `WorkflowSummary`; 400
/// with the reason (Content-Type, parse error, bad name, unknown `after`, a cycle, `base` on a
/// stage with several after stages); 413 over [`MAX_WORKFLOW_BYTES`].
pub async fn put_workflow(
    caller: Caller,
    req: HttpRequest,
    name: web::Path<String>,
    body: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let body = read_limited(body, MAX_WORKFLOW_BYTES, "workflow files").await?;
    let content_type = req
        .headers()
        .get("Content-Type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let definition = parse_definition(content_type, &body)?;
    app.submit(Command::PutWorkflow {
        actor: caller.login,
        name: name.clone(),
        definition,
    })
    .await?;
    let summary = app
        .writer
        .read(|s| s.workflows.get(&name).map(api::WorkflowSummary::from))
        .ok_or_else(|| ApiError::internal("workflow missing after commit"))?;
    Ok(HttpResponse::Ok().json(summary))
}

/// `deleteWorkflow` — DELETE /api/workflows/{name} → 204; 404.
pub async fn delete_workflow(
    caller: Caller,
    name: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    app.submit(Command::DeleteWorkflow {
        actor: caller.login,
        name: name.into_inner(),
    })
    .await?;
    Ok(HttpResponse::NoContent().finish())
}
