//! Blob metadata: images uploaded for messages. The bytes live in the log's blob table, keyed
//! by SHA-256; the fold keeps only what `getBlob` needs to find them.

use serde::{Deserialize, Serialize};

use crate::event::{BlobUploaded, EventBody, NewEvent};
use crate::{DecideCtx, State};

/// A stored image (spec `Blob`, plus where its bytes are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blob {
    /// Id.
    pub id: String,
    /// Content type sniffed from the bytes.
    pub content_type: String,
    /// Uploader's login.
    pub created_by: String,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lowercase hex SHA-256: the key of the bytes.
    pub sha256: String,
}

/// Decides `UploadBlob`.
pub(crate) fn upload(
    ctx: &DecideCtx,
    actor: &str,
    content_type: &str,
    size_bytes: u64,
    sha256: &str,
) -> Vec<NewEvent> {
    vec![NewEvent::new(
        actor,
        EventBody::BlobUploaded(BlobUploaded {
            id: ctx.id(0),
            content_type: content_type.to_owned(),
            size_bytes,
            sha256: sha256.to_owned(),
        }),
    )]
}

/// Folds `blob.uploaded`.
pub(crate) fn apply(state: &mut State, created_at_us: i64, actor: &str, body: &EventBody) {
    if let EventBody::BlobUploaded(p) = body {
        state.blobs.entry(p.id.clone()).or_insert_with(|| Blob {
            id: p.id.clone(),
            content_type: p.content_type.clone(),
            created_by: actor.to_owned(),
            created_at_us,
            size_bytes: p.size_bytes,
            sha256: p.sha256.clone(),
        });
    }
}

/// The content type of vendor output kept whole as a blob (`StoreOutputBlob`).
pub const OUTPUT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Decides `StoreOutputBlob`: a `blob.uploaded` of UTF-8 text by `byre`, owned by the
/// session's owner when it has one (a lead session's output reaches only its user).
/// # Errors
/// Not found for an unknown session.
pub(crate) fn store_output(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    size_bytes: u64,
    sha256: &str,
) -> Result<Vec<NewEvent>, crate::Rejection> {
    let session = crate::sessions::session(state, session_id)?;
    let event = NewEvent::new(
        "byre",
        EventBody::BlobUploaded(BlobUploaded {
            id: ctx.id(0),
            content_type: OUTPUT_CONTENT_TYPE.to_owned(),
            size_bytes,
            sha256: sha256.to_owned(),
        }),
    );
    Ok(vec![if session.owner.is_empty() {
        event
    } else {
        event.owned_by(session.owner.clone())
    }])
}
