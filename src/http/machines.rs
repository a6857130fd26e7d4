//! `connectClient` (the WebSocket a user's machine opens), `getClientTransfer` and
//! `putClientTransfer` (the archives its `upload` and `download` requests move). What a
//! connection, request and transfer are is byre-machines (`byre_app::machines` its operations); here is the WebSocket and
//! HTTP framing: text messages both ways, pings to notice a half-open socket, the close
//! codes, and the archives' bytes streamed in and out.

use std::time::{Duration, Instant};

use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, CloseCode, CloseReason};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

use super::identity::Caller;
use super::{status, ApiError, App};
use byre_app::{self, machines};
use byre_machines::{Connection, Outgoing};

/// Largest WebSocket message from a machine (a `read_file` reply carries a whole file, base64).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// How often byre pings a machine; three periods without a word from it close the socket.
const PING_EVERY: Duration = Duration::from_secs(20);

/// `connectClient` — GET /api/clients/connect → 101; 400 without a `Byre-Host` header or
/// without a WebSocket upgrade. A newer connection of the same login and host closes this one
/// with code 4001 (`byre_connect::CLOSE_REPLACED`); byre stopping closes it with 1001.
pub async fn connect_client(
    caller: Caller,
    req: HttpRequest,
    body: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let (host, commit, _) = status::client_of(&req);
    if host.is_empty() {
        return Err(ApiError::BadRequest(
            "connectClient needs a Byre-Host header naming the machine".into(),
        ));
    }
    let (response, session, stream) = actix_ws::handle(&req, body)
        .map_err(|e| ApiError::BadRequest(format!("not a WebSocket upgrade: {e}")))?;
    let conn = machines::connect(&app, &caller.login, &host, &commit)?;
    actix_web::rt::spawn(serve(conn, session, stream, app.shutdown.clone()));
    Ok(response)
}

/// One machine's socket until it ends: requests out, replies in, pings both ways.
async fn serve(
    mut conn: Connection,
    mut session: actix_ws::Session,
    stream: actix_ws::MessageStream,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut stream = stream
        .max_frame_size(MAX_MESSAGE_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE_BYTES);
    let mut ping = tokio::time::interval(PING_EVERY);
    let mut last_heard = Instant::now();
    // Whether the socket stopped taking messages (then no close frame is sent).
    let mut stuck = false;
    let close = loop {
        tokio::select! {
            out = conn.outbox.recv() => match out {
                Some(Outgoing::Request(text)) => {
                    match tokio::time::timeout(PING_EVERY * 3, session.text(text)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break None,
                        // The machine reads nothing: its socket cannot take a close frame.
                        Err(_) => {
                            tracing::warn!(host = conn.host(), "client takes no messages; dropping its socket");
                            stuck = true;
                            break None;
                        }
                    }
                }
                Some(Outgoing::Close { code, reason }) => break Some(CloseReason {
                    code: CloseCode::Other(code),
                    description: Some(reason),
                }),
                None => break None,
            },
            msg = stream.recv() => {
                last_heard = Instant::now();
                match msg {
                    Some(Ok(AggregatedMessage::Text(t))) => conn.on_text(&t),
                    Some(Ok(AggregatedMessage::Binary(b))) => conn.on_text(&String::from_utf8_lossy(&b)),
                    Some(Ok(AggregatedMessage::Ping(p))) => {
                        let _ = session.pong(&p).await;
                    }
                    Some(Ok(AggregatedMessage::Pong(_))) => {}
                    Some(Ok(AggregatedMessage::Close(_))) | None => break None,
                    Some(Err(e)) => {
                        tracing::warn!(host = conn.host(), error = %e, "client socket protocol error");
                        break Some(CloseReason {
                            code: CloseCode::Protocol,
                            description: Some(e.to_string()),
                        });
                    }
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() > PING_EVERY * 3 {
                    tracing::warn!(host = conn.host(), "client answered no ping; closing its socket");
                    break Some(CloseReason {
                        code: CloseCode::Away,
                        description: Some("no answer to pings".into()),
                    });
                }
                match tokio::time::timeout(PING_EVERY * 3, session.ping(b"")).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break None,
                    Err(_) => {
                        stuck = true;
                        break None;
                    }
                }
            }
            _ = shutdown.wait_for(|stopping| *stopping) => break Some(CloseReason {
                code: CloseCode::Away,
                description: Some("byre is stopping".into()),
            }),
        }
    };
    // Unregistered first: the machine's waiting requests fail at once.
    drop(conn);
    if !stuck {
        let _ = tokio::time::timeout(PING_EVERY, session.close(close)).await;
    }
}

/// `getClientTransfer` — GET /api/clients/transfers/{transferId} → 200 `application/gzip`
/// (the upload's archive, streamed); 404 unless an upload request to one of the caller's
/// machines waits for it.
pub async fn get_client_transfer(
    caller: Caller,
    id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let file = machines::get_transfer(&app, &caller.login, &id).await?;
    let body = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("application/gzip")
        .streaming(body))
}

/// `putClientTransfer` — PUT /api/clients/transfers/{transferId} → 204 once the archive is
/// unpacked at its destination; 400 for an archive that is refused (an entry leaving its
/// destination, a link out, a hard link or device) or malformed; 404 unless a download
/// request to one of the caller's machines waits for it and it has not come yet; 413 beyond
/// the transfer limit.
pub async fn put_client_transfer(
    caller: Caller,
    id: web::Path<String>,
    req: HttpRequest,
    mut payload: web::Payload,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let mut receiving = machines::put_transfer(&app, &caller.login, &id).await?;
    // Refused before a byte is read when it says it is too large.
    let announced = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced {
        receiving.within_limit(n).map_err(byre_app::Error::from)?;
    }
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
        receiving
            .write(&chunk)
            .await
            .map_err(byre_app::Error::from)?;
    }
    receiving.finish().await.map_err(byre_app::Error::from)?;
    Ok(HttpResponse::NoContent().finish())
}
