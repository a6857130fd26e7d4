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
//! [`byre_app::events`]; this module frames them, adds the live-only deltas and heartbeats.

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use std::sync::Arc;

use futures_util::{stream, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast;

use super::identity::Caller;
use super::{ApiError, App};
use byre_agents::runtime::Ephemeral;
use byre_app::events as op;
use byre_log::Record;

/// Query of `streamEvents`.
#[derive(Deserialize)]
pub struct StreamQuery {
    #[serde(default, deserialize_with = "crate::http::optional_int64_seq")]
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
    config: web::Data<crate::config::Config>,
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
    let registration = app.streams.open(&caller.login, &host, &commit);
    let heartbeat = config.heartbeat;
    let login = caller.login;
    // Subscribed before the text so far is read: a delta is in that text, or after it, or
    // both (its `delta_seq` says so), never in neither.
    let deltas = app.agents.ephemeral();
    let so_far = app.agents.streaming();
    let agents = app.agents.clone();
    let shutdown = app.shutdown.clone();
    // A stream signed in by cookie ends when its session does (sign-out).
    let session_ended = super::auth::signin_end(&app, &req);
    tracing::debug!(login = %login, from_seq = after, "event stream opened");
    let body = async_stream::stream! {
        let _registration = registration; // dropped when the client goes away
        let ticker = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        yield Ok::<Bytes, actix_web::Error>(Bytes::from_static(b": connected\nretry: 2000\n\n"));
        // The running turns' text so far, then their live deltas.
        for d in so_far {
            if filter.keeps_delta(&d.task_id, d.owner.as_deref()) {
                yield Ok(live_frame(&d));
            }
        }
        let mut wakes = wakes(records, deltas, ticker, shutdown, session_ended);
        while let Some(wake) = wakes.next().await {
            match wake {
                Wake::Record(Ok(r)) => {
                    if filter.keeps(&r) {
                        // Serialized once by the writer, shared by every stream; handed over in
                        // slices of it (no copies), since the server copies each piece it is
                        // given into the connection's buffer: a slow reader then holds one
                        // slice of a large frame, not a copy of all of it.
                        let frame = r.frame();
                        let mut at = 0;
                        while at < frame.len() {
                            let end = (at + FRAME_SLICE_BYTES).min(frame.len());
                            yield Ok(frame.slice(at..end));
                            at = end;
                        }
                    }
                }
                Wake::Record(Err(e)) => {
                    tracing::error!(error = %e, "event stream failed; closing it");
                    break;
                }
                Wake::Delta(d) => {
                    if filter.keeps_delta(&d.task_id, d.owner.as_deref()) {
                        yield Ok(live_frame(&d));
                    }
                }
                Wake::DeltasLost => {
                    // This stream fell behind the deltas and missed some: the text so far
                    // again, which covers them.
                    for d in agents.streaming() {
                        if filter.keeps_delta(&d.task_id, d.owner.as_deref()) {
                            yield Ok(live_frame(&d));
                        }
                    }
                }
                Wake::Heartbeat => yield Ok(Bytes::from_static(b": heartbeat\n\n")),
                Wake::End => break,
            }
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body))
}

/// A live-only frame: no `id:`, so a reconnect neither skips nor replays it; a named SSE
/// event, so `data:` of the default `message` events is always an Event.
fn live_frame(d: &Ephemeral) -> Bytes {
    Bytes::from(format!("event: {}\ndata: {}\n\n", d.event, d.json))
}

/// Largest piece of a frame handed to the server at a time (see `stream_events`).
const FRAME_SLICE_BYTES: usize = 16 * 1024;

/// What wakes an event stream.
enum Wake {
    /// The next committed record (or why the stream cannot go on).
    Record(Result<Arc<Record>, String>),
    /// A live-only agent delta.
    Delta(Arc<Ephemeral>),
    /// The stream fell behind the live deltas and some were dropped for it.
    DeltasLost,
    /// Time for a `: heartbeat` comment.
    Heartbeat,
    /// The records ended, the server shuts down, or the stream's session ended.
    End,
}

/// One stream of everything that wakes an event stream. The records come first-hand; the
/// rarer sources (deltas, heartbeats, shutdown, sign-out) sit in a `SelectAll`, which polls
/// only the source that was woken. So a record costs one poll of the records alone, where a
/// `select!` over all five re-created, re-registered and dropped every other source's waiter
/// (the agents' broadcast and the shutdown watch, each behind a lock shared by every stream)
/// once per frame and client.
fn wakes(
    records: impl Stream<Item = Result<Arc<Record>, String>> + 'static,
    deltas: broadcast::Receiver<Arc<Ephemeral>>,
    ticker: tokio::time::Interval,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut session_ended: Option<tokio::sync::watch::Receiver<bool>>,
) -> impl Stream<Item = Wake> + Unpin {
    let records = Box::pin(records)
        .map(Wake::Record)
        .chain(stream::once(std::future::ready(Wake::End)));
    let deltas = stream::unfold(deltas, |mut rx| async move {
        match rx.recv().await {
            Ok(d) => Some((Wake::Delta(d), rx)),
            Err(broadcast::error::RecvError::Lagged(_)) => Some((Wake::DeltasLost, rx)),
            // No more deltas (the agents are gone); the stream goes on without them.
            Err(broadcast::error::RecvError::Closed) => None,
        }
    });
    let heartbeats = stream::unfold(ticker, |mut t| async move {
        t.tick().await;
        Some((Wake::Heartbeat, t))
    });
    let shutdown = stream::once(async move {
        let _ = shutdown.changed().await;
        Wake::End
    });
    let signed_out = stream::once(async move {
        signin_end(&mut session_ended).await;
        Wake::End
    });
    let rare = stream::select_all([
        deltas.boxed_local(),
        heartbeats.boxed_local(),
        shutdown.boxed_local(),
        signed_out.boxed_local(),
    ]);
    stream::select(records, rare)
}

/// Resolves when the session of a cookie-signed stream ends; never for other streams.
async fn signin_end(ended: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match ended {
        Some(rx) => {
            let _ = rx.wait_for(|ended| *ended).await;
        }
        None => std::future::pending().await,
    }
}
