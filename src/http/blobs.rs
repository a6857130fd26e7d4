//! `uploadBlob`, `getBlob`: images for messages, stored in the log's blob table.

use actix_web::{web, HttpResponse};
use byre_projections::Command;
use bytes::BytesMut;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::{blocking, ApiError, App};
use crate::api;
use crate::identity::Caller;

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

/// `uploadBlob` — POST /api/blobs (raw image body) → 201 `Blob`; 400 when the bytes are not a
/// PNG, JPEG, GIF or WebP image (whatever the Content-Type says); 413 over 5 MiB.
pub async fn upload_blob(
    caller: Caller,
    mut payload: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let mut bytes = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
        if bytes.len() + chunk.len() > MAX_BLOB_BYTES {
            return Err(ApiError::PayloadTooLarge(
                "images are limited to 5 MiB".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    let bytes = bytes.freeze();
    let content_type = sniff(&bytes).ok_or_else(|| {
        ApiError::BadRequest("the body is not a PNG, JPEG, GIF or WebP image".into())
    })?;
    let sha256: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cmd = Command::UploadBlob {
        actor: caller.login,
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
        .ok_or_else(|| ApiError::internal("blob.uploaded missing"))?;
    let blob = app
        .writer
        .read(|s| s.blobs.get(&blob_id).map(api::Blob::from))
        .ok_or_else(|| ApiError::internal("blob missing after commit"))?;
    Ok(HttpResponse::Created().json(blob))
}

/// `getBlob` — GET /api/blobs/{blobId} → 200 the bytes with their content type; 404.
pub async fn get_blob(
    _caller: Caller,
    blob_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let blob_id = blob_id.into_inner();
    let (sha256, content_type) = app
        .writer
        .read(|s| {
            s.blobs
                .get(&blob_id)
                .map(|b| (b.sha256.clone(), b.content_type.clone()))
        })
        .ok_or_else(|| ApiError::NotFound(format!("no blob `{blob_id}`")))?;
    let store = app.writer.store().clone();
    let bytes = blocking(move || {
        store
            .blob(&sha256)
            .map_err(ApiError::internal)?
            .ok_or_else(|| ApiError::internal("blob bytes missing"))
    })
    .await?;
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("Cache-Control", "private, max-age=31536000, immutable"))
        .body(bytes))
}
