//! `streamEvents` — GET /api/events: Server-Sent Events.
//!
//! Each event is `id: {seq}` and `data: {Event JSON}`. Events after `Last-Event-ID` (or the
//! `after` query parameter; the header wins) are replayed from the log, then live events
//! follow, each seq exactly once and in order (see `log::subscription`); a cursor beyond the
//! log's last seq is a 400. Each frame is the record's own, serialized once by the writer.
//! `task_id` keeps one task's events (404 for an unknown task); `lead=true` keeps the
//! caller's lead agent's events. Events with an owner reach only that user. A stream signed
//! in with the session cookie ends when its session does. An idle stream gets a `: heartbeat`
//! comment every `Config::heartbeat`. Which records a stream sends is
//! [`crate::app::events`]; this module frames them, adds the live-only deltas and heartbeats.

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;

use super::{ApiError, App};
use crate::app::events as op;
use crate::identity::Caller;

/// Query of `streamEvents`.
#[derive(Deserialize)]
pub struct StreamQuery {
    after: Option<u64>,
    task_id: Option<String>,
    lead: Option<bool>,
}

/// `streamEvents` — 200 `text/event-stream`; 400 for a malformed `Last-Event-ID`, or a
/// `Last-Event-ID`/`after` beyond the log's last seq; 404 for an unknown `task_id`.
pub async fn stream_events(
    caller: Caller,
    req: HttpRequest,
    query: web::Query<StreamQuery>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let last_event_id = match req.headers().get("Last-Event-ID") {
        None => None,
        Some(v) => {
            let text = v.to_str().unwrap_or("").trim();
            Some(text.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!("Last-Event-ID `{text}` is not a seq"))
            })?)
        }
    };
    let cursor = op::Cursor {
        after: last_event_id.or(query.after).unwrap_or(0),
        source: if last_event_id.is_some() {
            "Last-Event-ID"
        } else {
            "after"
        },
    };
    let after = cursor.after;
    let lead = query.lead.unwrap_or(false);
    let (records, filter) = op::open_stream(&app, &caller.login, cursor, query.task_id, lead)?;
    let (host, commit, _) = super::status::client_of(&req);
    let registration = app.clients.open(&caller.login, &host, &commit);
    let heartbeat = app.config.heartbeat;
    let login = caller.login;
    let mut deltas = app.agents.ephemeral();
    let mut shutdown = app.shutdown.clone();
    // A stream signed in by cookie ends when its session does (sign-out).
    let mut session_ended = super::auth::session_end(&app, &req);
    tracing::debug!(login = %login, from_seq = after, "event stream opened");
    let body = async_stream::stream! {
        let _registration = registration; // dropped when the client goes away
        let mut records = Box::pin(records);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        yield Ok::<Bytes, actix_web::Error>(Bytes::from_static(b": connected\nretry: 2000\n\n"));
        loop {
            tokio::select! {
                next = records.next() => match next {
                    Some(Ok(r)) => {
                        if !filter.keeps(&r) {
                            continue;
                        }
                        // Serialized once by the writer, shared by every stream.
                        yield Ok(r.frame());
                    }
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "event stream failed; closing it");
                        break;
                    }
                    None => break,
                },
                delta = deltas.recv() => match delta {
                    Ok(d) => {
                        if !filter.keeps_delta(&d.task_id, d.owner.as_deref()) {
                            continue;
                        }
                        // Live-only: no `id:`, so a reconnect neither skips nor replays it; a named
                        // SSE event, so `data:` of the default `message` events is always an Event.
                        yield Ok(Bytes::from(format!("event: agent.delta\ndata: {}\n\n", d.json)));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {}
                },
                _ = ticker.tick() => yield Ok(Bytes::from_static(b": heartbeat\n\n")),
                _ = shutdown.changed() => break,
                _ = session_end(&mut session_ended) => break,
            }
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// Resolves when the session of a cookie-signed stream ends; never for other streams.
async fn session_end(ended: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match ended {
        Some(rx) => {
            let _ = rx.wait_for(|ended| *ended).await;
        }
        None => std::future::pending().await,
    }
}
