//! Blobs (`uploadBlob`, `getBlob`): images for messages, stored in the log's blob table.

use byre_projections::Command;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{blocking, Ctx, Error};
use crate::api;

/// Largest image accepted, in bytes (5 MiB).
pub const MAX_BLOB_BYTES: usize = 5 * 1024 * 1024;

/// The content type of an image from its bytes: PNG, JPEG, GIF or WebP whose header parses
/// (so it has dimensions); `None` for anything else, whatever its Content-Type said.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    use imagesize::ImageType;
    let content_type = match imagesize::image_type(bytes).ok()? {
        ImageType::Png => "image/png",
        ImageType::Jpeg => "image/jpeg",
        ImageType::Gif => "image/gif",
        ImageType::Webp => "image/webp",
        _ => return None,
    };
    let size = imagesize::blob_size(bytes).ok()?;
    (size.width > 0 && size.height > 0).then_some(content_type)
}

/// `uploadBlob`: stores an image `actor` uploaded, its type sniffed from its bytes; the bytes
/// are written in the same transaction as its `blob.uploaded`.
/// # Errors
/// Too large over [`MAX_BLOB_BYTES`]; invalid when the bytes are not a PNG, JPEG, GIF or WebP
/// image.
pub async fn upload_blob(app: &Ctx, actor: &str, bytes: Bytes) -> Result<api::Blob, Error> {
    if bytes.len() > MAX_BLOB_BYTES {
        return Err(Error::TooLarge("images are limited to 5 MiB".into()));
    }
    let content_type = sniff(&bytes)
        .ok_or_else(|| Error::Invalid("the body is not a PNG, JPEG, GIF or WebP image".into()))?;
    let sha256: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cmd = Command::UploadBlob {
        actor: actor.to_owned(),
        content_type: content_type.to_owned(),
        size_bytes: bytes.len() as u64,
        sha256,
    };
    let ack = app.writer.submit(cmd, Some(bytes)).await?;
    let blob_id = ack
        .events
        .iter()
        .find_map(|e| match &e.body {
            byre_projections::EventBody::BlobUploaded(b) => Some(b.id.clone()),
            _ => None,
        })
        .ok_or_else(|| Error::internal("blob.uploaded missing"))?;
    app.writer
        .read(|s| s.blobs.get(&blob_id).map(api::Blob::from))
        .ok_or_else(|| Error::internal("blob missing after commit"))
}

/// A stored image: its content type and bytes.
pub struct BlobBytes {
    /// Its sniffed content type (`image/png`, …).
    pub content_type: String,
    /// The image.
    pub bytes: Vec<u8>,
}

/// `getBlob`: the bytes of blob `blob_id` with their content type, as `viewer` may read it
/// (`State::blob_for`: an image only a user's own lead events name is theirs alone).
/// # Errors
/// Not found for an unknown blob, and for one `viewer` may not read.
pub async fn get_blob(app: &Ctx, viewer: &str, blob_id: &str) -> Result<BlobBytes, Error> {
    let (sha256, content_type) = app
        .writer
        .read(|s| {
            s.blob_for(blob_id, viewer)
                .map(|b| (b.sha256.clone(), b.content_type.clone()))
        })
        .ok_or_else(|| Error::NotFound(format!("no blob `{blob_id}`")))?;
    let store = app.writer.store().clone();
    let bytes = blocking(move || {
        store
            .blob(&sha256)
            .map_err(Error::internal)?
            .ok_or_else(|| Error::internal("blob bytes missing"))
    })
    .await?;
    Ok(BlobBytes {
        content_type,
        bytes,
    })
}
