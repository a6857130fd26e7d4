//! The toolbox operations of a CodeBolt agent's session (the servers themselves are
//! byre-toolboxes): the project of the session names the configuration file, the session's
//! link the servers' place.

use byre_agents::codeboltjs::Link;
use byre_toolboxes::{Config, ToolOutput, Toolboxes};
use serde_json::Value;

use super::{Ctx, Error};

/// The project of a session's task.
fn project_of(app: &Ctx, session_id: &str) -> Result<String, Error> {
    (app.writer
        .read(|s| {
            let session = s.sessions.get(session_id)?;
            Some(s.tasks.get(&session.task_id)?.project_id.clone())
        })
        .ok_or_else(|| Error::NotFound(format!("no task session `{session_id}`"))))
    .map(Into::into)
}

/// The toolboxes configured for the project of session `session_id`.
/// # Errors
/// As `byre_toolboxes::read_config`; not found: an unknown session.
pub fn configured(app: &Ctx, session_id: &str) -> Result<Config, Error> {
    Ok(byre_toolboxes::read_config(
        &app.settings.data_dir,
        &project_of(app, session_id)?,
    )?)
}

/// `configureToolBox`: sets toolbox `name` of the project of session `session_id` to
/// `config` (a `ServerConfig` as JSON), or removes it when `config` is `null`; returns the
/// project's configuration as written.
/// # Errors
/// Invalid: a bad name or configuration, or an existing file that does not parse; not found:
/// an unknown session, or removing a toolbox that is not there; internal: the file could not
/// be written.
pub async fn configure(
    app: &Ctx,
    session_id: &str,
    name: &str,
    config: &Value,
) -> Result<Config, Error> {
    byre_toolboxes::check_name(name)?;
    let server = byre_toolboxes::parse_server_config(config)?;
    let project_id = project_of(app, session_id)?;
    Ok(byre_toolboxes::write_config(&app.settings.data_dir, &project_id, name, server).await?)
}

/// The tools of configured toolbox `name`, from `link`'s session's own server of it.
/// # Errors
/// Not found: no such toolbox for the session's project; unavailable: the server did not
/// start or answer.
pub async fn list_tools(
    app: &Ctx,
    toolboxes: &Toolboxes,
    link: &Link,
    name: &str,
) -> Result<Vec<rmcp::model::Tool>, Error> {
    let project = (
        app.settings.data_dir.clone(),
        project_of(app, &link.session_id)?,
    );
    Ok(toolboxes.of(link, project).list_tools(name).await?)
}

/// Calls tool `tool` of configured toolbox `name` on `link`'s session's own server of it.
/// # Errors
/// As [`list_tools`]; a tool's own failure is an output with `is_error`.
pub async fn call(
    app: &Ctx,
    toolboxes: &Toolboxes,
    link: &Link,
    name: &str,
    tool: &str,
    arguments: serde_json::Map<String, Value>,
) -> Result<ToolOutput, Error> {
    let project = (
        app.settings.data_dir.clone(),
        project_of(app, &link.session_id)?,
    );
    Ok(toolboxes
        .of(link, project)
        .call(name, tool, arguments)
        .await?)
}

impl From<byre_toolboxes::Error> for Error {
    fn from(e: byre_toolboxes::Error) -> Self {
        match e {
            byre_toolboxes::Error::Invalid(m) => Error::Invalid(m),
            byre_toolboxes::Error::NotFound(m) => Error::NotFound(m),
            byre_toolboxes::Error::Conflict(m) => Error::Conflict(m),
            byre_toolboxes::Error::Unavailable(m) => Error::Unavailable(m),
            byre_toolboxes::Error::Internal(m) => Error::Internal(m),
        }
    }
}
