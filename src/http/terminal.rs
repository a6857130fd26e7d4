//! `getTaskTerminal` — GET /api/tasks/{taskId}/terminal?cols&rows → 101: the task terminal's
//! WebSocket. Parse the size, call [`byre_app::terminal`], then carry bytes both ways:
//! output as binary messages (the scrollback first, once, then live), input from binary
//! messages, resizes from text messages holding a `TerminalSize` (an invalid one is logged
//! and ignored). A socket silent for three ping intervals (`Config::terminal_ping`, 10 s) is
//! closed as half-open (`unresponsive`). When the shell
//! ends the socket closes with 4000 and the exit status as the reason (1001 when byre stops);
//! a viewer too slow for the output is closed with 4001 and may reconnect.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, CloseCode, CloseReason};

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::terminal as op;
use byre_terminal::shell::INPUT_QUEUE;
use byre_terminal::InputRefused;

/// Largest input message, in bytes (a paste).
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// `getTaskTerminal`: 400 bad `cols`/`rows` or not a WebSocket upgrade; 403 an `Origin` of
/// another site (refused by `http::edge` before routing: a WebSocket is not bound by CORS and
/// this one carries a shell's input); 404 unknown task; 409 closed task (or its worktree not
/// made yet).
pub async fn get_task_terminal(
    caller: Caller,
    task_id: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
    req: HttpRequest,
    body: web::Payload,
    app: web::Data<App>,
    config: web::Data<crate::config::Config>,
) -> Result<HttpResponse, ApiError> {
    let size = op::terminal_size(
        query.get("cols").map(String::as_str),
        query.get("rows").map(String::as_str),
    )?;
    op::terminal_place(&app, &task_id).await?;
    let (response, session, stream) = actix_ws::handle(&req, body)
        .map_err(|e| ApiError::BadRequest(format!("not a WebSocket upgrade: {e}")))?;
    let viewer = op::open_terminal(&app, &caller.login, &task_id, size).await?;
    tracing::info!(task_id = %task_id, viewer_id = %viewer.id, login = %caller.login, pid = viewer.shell_pid, "terminal opened");
    actix_web::rt::spawn(serve(viewer, session, stream, config.terminal_ping));
    Ok(response)
}

/// One viewer's socket until it or the shell ends.
async fn serve(
    mut viewer: byre_terminal::Viewer,
    mut session: actix_ws::Session,
    stream: actix_ws::MessageStream,
    ping_every: Duration,
) {
    let mut stream = stream
        .max_frame_size(MAX_MESSAGE_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE_BYTES);
    let silent_at_most = ping_every * 3;
    let mut ping = tokio::time::interval(ping_every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    // None: the client left (`reason` recorded); Some: the socket is closed with it.
    let (reason, close) = loop {
        tokio::select! {
            out = viewer.output.recv() => match out {
                Some(bytes) => match within(silent_at_most, session.binary(bytes)).await {
                    Some(Ok(())) => {}
                    Some(Err(_)) => break ("client", None),
                    // Its socket takes nothing: it cannot take a close frame either.
                    None => break ("unresponsive", None),
                },
                None => match viewer.ended() {
                    Some(ended) => break ("ended", Some(CloseReason {
                        code: CloseCode::Other(ended.code),
                        description: Some(ended.reason),
                    })),
                    None => break ("lagging", Some(CloseReason {
                        code: CloseCode::Other(4001),
                        description: Some("fell behind the terminal's output; reconnect".into()),
                    })),
                },
            },
            msg = stream.recv() => {
                last_heard = Instant::now();
                match msg {
                    Some(Ok(AggregatedMessage::Binary(b))) => match viewer.input(b) {
                        Ok(()) => {}
                        Err(InputRefused::NotReading) => tracing::warn!(
                            viewer_id = %viewer.id,
                            "dropped terminal input: its program has read none of the last {INPUT_QUEUE} messages"
                        ),
                        Err(InputRefused::Ended) => tracing::debug!("input to an ending terminal"),
                    },
                    Some(Ok(AggregatedMessage::Text(t))) => viewer.resize(&t),
                    Some(Ok(AggregatedMessage::Ping(p))) => {
                        let _ = session.pong(&p).await;
                    }
                    Some(Ok(AggregatedMessage::Pong(_))) => {}
                    Some(Ok(AggregatedMessage::Close(_))) | None => break ("client", None),
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "terminal socket ended with an error");
                        break ("client", Some(CloseReason {
                            code: CloseCode::Protocol,
                            description: Some(e.to_string()),
                        }));
                    }
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() > silent_at_most {
                    break ("unresponsive", Some(CloseReason {
                        code: CloseCode::Policy,
                        description: Some("no answer to pings".into()),
                    }));
                }
                match within(silent_at_most, session.ping(b"byre")).await {
                    Some(Ok(())) => {}
                    Some(Err(_)) => break ("client", None),
                    None => break ("unresponsive", None),
                }
            }
        }
    };
    if close.is_some() || reason == "client" {
        let _ = within(silent_at_most, session.close(close)).await;
    }
    if reason != "ended" {
        viewer.leave(reason).await;
    }
}

/// `fut`'s output, or `None` when it takes longer than `limit` (a socket whose peer reads
/// nothing: its send queue is full and stays so).
async fn within<T>(limit: Duration, fut: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::time::timeout(limit, fut).await.ok()
}
