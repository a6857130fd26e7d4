//! `uploadBlob`, `getBlob`: read the body, call [`byre_app::blobs`], answer.

use actix_web::{web, HttpResponse};
use bytes::BytesMut;
use futures_util::StreamExt;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::blobs as op;

use op::MAX_BLOB_BYTES;

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
    let blob = op::upload_blob(&app, &caller.login, bytes.freeze()).await?;
    Ok(HttpResponse::Created().json(blob))
}

/// `getBlob` — GET /api/blobs/{blobId} → 200 the bytes with their content type; 404 (also
/// for a blob only another user's own lead events name).
pub async fn get_blob(
    caller: Caller,
    blob_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let blob = op::get_blob(&app, &caller.login, &blob_id).await?;
    Ok(HttpResponse::Ok()
        .content_type(blob.content_type)
        .insert_header(("Cache-Control", "private, max-age=31536000, immutable"))
        .body(blob.bytes))
}
