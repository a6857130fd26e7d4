//! Workflows (`listWorkflows`, `getWorkflow`, `putWorkflow`, `deleteWorkflow`). A workflow's
//! file is YAML (JSON accepted on put); it is parsed here ([`parse_definition`]) and validated
//! by the writer.

use byre_projections::workflows::WorkflowDefinition;
use byre_projections::Command;

use super::{Ctx, Error};
use crate::api;

/// `listWorkflows`: every workflow, by name.
pub fn list_workflows(app: &Ctx) -> Vec<api::WorkflowSummary> {
    app.writer.read(|s| {
        s.workflows
            .values()
            .map(api::WorkflowSummary::from)
            .collect()
    })
}

/// `getWorkflow`: workflow `name`'s definition.
/// # Errors
/// Not found for an unknown name.
pub fn get_workflow(app: &Ctx, name: &str) -> Result<WorkflowDefinition, Error> {
    app.writer
        .read(|s| s.workflows.get(name).map(|w| w.definition.clone()))
        .ok_or_else(|| Error::NotFound(format!("no workflow named `{name}`")))
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
/// Invalid naming the expected Content-Type when it is missing or another; invalid with the
/// parser's message.
pub fn parse_definition(content_type: &str, body: &[u8]) -> Result<WorkflowDefinition, Error> {
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
        return Err(Error::Invalid(format!(
            "a workflow file is YAML: send it with `Content-Type: application/yaml` (or JSON with `application/json`), not {got}"
        )));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::Invalid("the workflow file is not UTF-8 text".into()))?;
    if mime == "application/json" {
        serde_json::from_str(text)
            .map_err(|e| Error::Invalid(format!("invalid workflow JSON: {e}")))
    } else {
        serde_norway::from_str(text)
            .map_err(|e| Error::Invalid(format!("invalid workflow YAML: {e}")))
    }
}

/// `putWorkflow`: creates or replaces workflow `name`; answers its summary.
/// # Errors
/// Invalid with the reason (bad name, unknown `after`, a cycle, `base` on a stage with several
/// after stages).
pub async fn put_workflow(
    app: &Ctx,
    actor: &str,
    name: &str,
    definition: WorkflowDefinition,
) -> Result<api::WorkflowSummary, Error> {
    app.submit(Command::PutWorkflow {
        actor: actor.to_owned(),
        name: name.to_owned(),
        definition,
    })
    .await?;
    app.writer
        .read(|s| s.workflows.get(name).map(api::WorkflowSummary::from))
        .ok_or_else(|| Error::internal("workflow missing after commit"))
}

/// `deleteWorkflow`: removes workflow `name`.
/// # Errors
/// Not found for an unknown name.
pub async fn delete_workflow(app: &Ctx, actor: &str, name: &str) -> Result<(), Error> {
    app.submit(Command::DeleteWorkflow {
        actor: actor.to_owned(),
        name: name.to_owned(),
    })
    .await?;
    Ok(())
}
