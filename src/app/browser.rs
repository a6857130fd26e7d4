//! The browser actions' part that is the application's (the browser itself is byre-browser):
//! the preview ports of a task, which its agent's pages may open beside the allow-list, and a
//! screenshot kept as a blob of the agent's session.

use base64::Engine as _;
use byre_browser::Browsers;

use super::{Ctx, Error};

/// The preview ports of task `task_id` (none for an unknown task).
pub fn preview_ports(app: &Ctx, task_id: &str) -> byre_browser::Ports {
    let base = app
        .writer
        .read(|s| s.tasks.get(task_id).map(|t| t.port_base))
        .unwrap_or(0);
    base..base + byre_projections::tasks::PORTS_PER_TASK
}

/// A screenshot stored as a blob.
#[derive(Debug, Clone)]
pub struct Screenshot {
    /// The blob (`getBlob`).
    pub blob_id: String,
    /// The PNG.
    pub png: Vec<u8>,
    /// The page it shows.
    pub url: String,
}

impl Screenshot {
    /// The PNG in base64.
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.png)
    }
}

/// `screenshot`: session `session_id`'s page's viewport as a PNG, stored as a blob of
/// `agent:<session>`.
/// # Errors
/// Unavailable when the browser fails; too large past the blob limit.
pub async fn screenshot(
    app: &Ctx,
    browsers: &Browsers,
    session_id: &str,
) -> Result<Screenshot, Error> {
    let shot = browsers.screenshot(session_id).await?;
    let blob = super::blobs::upload_blob(
        app,
        &format!("agent:{session_id}"),
        bytes::Bytes::from(shot.png.clone()),
    )
    .await?;
    Ok(Screenshot {
        blob_id: blob.id,
        png: shot.png,
        url: shot.url,
    })
}

impl From<byre_browser::Error> for Error {
    fn from(e: byre_browser::Error) -> Self {
        match e {
            byre_browser::Error::Unavailable(m) => Error::Unavailable(m),
            byre_browser::Error::Forbidden(m) => Error::Forbidden(m),
            byre_browser::Error::Invalid(m) => Error::Invalid(m),
            byre_browser::Error::NotFound(m) => Error::NotFound(m),
            byre_browser::Error::Internal(m) => Error::Internal(m),
        }
    }
}
