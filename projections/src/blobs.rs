//! Blob metadata: images uploaded for messages. The bytes live in the log's blob table, keyed
//! by SHA-256; the fold keeps only what `getBlob` needs to find them.

use crate::ids::Login;
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
    pub created_by: Login,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lowercase hex SHA-256: the key of the bytes.
    pub sha256: String,
    /// Whether an event every user sees refers to it (a task's message or inbox answer):
    /// then every user may read it; until then (none, or only its uploader's own lead events
    /// do) only its uploader may (`getBlob`). Left out of the digest while false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

impl State {
    /// Blob `id` as `viewer` may read it (`getBlob`): its uploader always; anyone once it is
    /// [`Blob::shared`]; one an agent stored (`agent:<session>`, a browser screenshot) is
    /// its session's: everyone's for a task's session, its user's for a lead's. `None` for
    /// an unknown blob and for one `viewer` may not read (the same answer: 404).
    pub fn blob_for(&self, id: &str, viewer: &str) -> Option<&Blob> {
        let b = self.blobs.get(id)?;
        let visible = b.created_by == viewer
            || b.shared
            || b.created_by.strip_prefix("agent:").is_some_and(|sid| {
                self.sessions
                    .get(sid)
                    .is_some_and(|x| x.owner.is_empty() || x.owner == viewer)
            });
        visible.then_some(b)
    }
}

/// Decides `UploadBlob`. A human's upload is owned by them (no other user's stream carries
/// its `blob.uploaded`, DESIGN.md invariant 4); an agent's (`agent:<session>`) is not, since
/// the tool result naming it is the task's.
pub(crate) fn upload(
    ctx: &DecideCtx,
    actor: &str,
    content_type: &str,
    size_bytes: u64,
    sha256: &str,
) -> Vec<NewEvent> {
    let mut event = NewEvent::new(
        actor,
        EventBody::BlobUploaded(BlobUploaded {
            id: ctx.id(0),
            content_type: content_type.to_owned(),
            size_bytes,
            sha256: sha256.to_owned(),
        }),
    );
    if !actor.starts_with("agent:") {
        event.owner = Some(actor.to_owned().into());
    }
    vec![event]
}

/// Folds `blob.uploaded`, and marks blobs [`Blob::shared`] when an event without an owner
/// (a task's `user.message`, `user.queued` or `inbox.responded`) names them.
pub(crate) fn apply(state: &mut State, e: &crate::event::Event) {
    let images: &[String] = match &e.body {
        EventBody::BlobUploaded(p) => {
            state.blobs.entry(p.id.clone()).or_insert_with(|| Blob {
                id: p.id.clone(),
                content_type: p.content_type.clone(),
                created_by: e.actor.clone().into(),
                created_at_us: e.created_at_us,
                size_bytes: p.size_bytes,
                sha256: p.sha256.clone(),
                shared: false,
            });
            return;
        }
        EventBody::UserMessage(p) => &p.images,
        EventBody::UserQueued(p) => &p.images,
        EventBody::InboxResponded(p) => &p.response.images,
        _ => return,
    };
    if e.owner.is_some() {
        return;
    }
    for id in images {
        if let Some(b) = state.blobs.get_mut(id) {
            b.shared = true;
        }
    }
}

/// The content type of vendor output kept whole as a blob (`StoreOutputBlob`).
pub const OUTPUT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Decides `StoreOutputBlob`: a `blob.uploaded` of UTF-8 text by the session's agent, owned by the
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
    // Stored as the session's agent, so `blob_for` lets whoever sees the session read it.
    let event = NewEvent::new(
        format!("agent:{session_id}"),
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
