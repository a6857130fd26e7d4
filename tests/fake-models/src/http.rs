//! HTTP plumbing both fake APIs share: fresh ids, the script's extra headers, and a streamed
//! SSE body that can stall (sending keep-alives) and notices when the client drops it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpResponse, HttpResponseBuilder};
use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;

use crate::server::Shared;

/// Characters per text, reasoning or arguments delta.
const DELTA_CHARS: usize = 24;

/// While a reply stalls, a keep-alive is sent this often (it is also how a dropped client
/// is noticed: only a write fails).
const KEEPALIVE_EVERY: Duration = Duration::from_secs(1);

/// One server-sent event: `event: <name>` and `data: <json>`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    /// The event name, equal to `data.type` in both APIs.
    pub name: &'static str,
    /// The JSON payload.
    pub data: Value,
}

impl SseEvent {
    /// The event as bytes on the wire, blank line included.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(format!("event: {}\ndata: {}\n\n", self.name, self.data))
    }
}

/// `prefix` followed by 24 random hex digits, e.g. `msg_` + `3f2a…`.
pub(crate) fn fresh_id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..24]
    )
}

/// Adds (or replaces) headers: the script's extras, validated at load.
pub(crate) fn add_headers(response: &mut HttpResponseBuilder, headers: &[(String, String)]) {
    for (name, value) in headers {
        response.insert_header((name.as_str(), value.as_str()));
    }
}

/// The events of one streamed reply: `head`, then `stall` with a `keepalive` each second,
/// then `tail`.
pub(crate) struct SseBody {
    /// Sent at once.
    pub head: Vec<Bytes>,
    /// How long to wait after `head`.
    pub stall: Duration,
    /// Sent every [`KEEPALIVE_EVERY`] during the stall (a `ping` event, an SSE comment).
    pub keepalive: Bytes,
    /// Sent after the stall; the reply is complete once the last one is written.
    pub tail: Vec<Bytes>,
    /// Waited before each event of `tail` after the first.
    pub gap: Duration,
}

/// Marks the log entry abandoned when the body is dropped before its last event was sent.
struct AbandonGuard {
    shared: Arc<Shared>,
    idx: usize,
    finished: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.finished {
            tracing::info!(idx = self.idx, "client dropped the stream");
            self.shared.mark_abandoned(self.idx);
        }
    }
}

/// A `200 text/event-stream` response streaming `body`, with `headers` added to `response`
/// (which may carry headers of its own). The log entry `idx` is marked abandoned if the
/// client goes away before the end.
pub(crate) fn sse_response(
    shared: Arc<Shared>,
    idx: usize,
    body: SseBody,
    mut response: HttpResponseBuilder,
    headers: &[(String, String)],
) -> HttpResponse {
    let events = async_stream::stream! {
        let mut guard = AbandonGuard { shared, idx, finished: false };
        for event in body.head {
            yield Ok::<_, Infallible>(event);
        }
        let stall_end = Instant::now() + body.stall;
        while Instant::now() < stall_end {
            tokio::time::sleep(KEEPALIVE_EVERY.min(stall_end - Instant::now())).await;
            yield Ok(body.keepalive.clone());
        }
        for (i, event) in body.tail.into_iter().enumerate() {
            if i > 0 && !body.gap.is_zero() {
                tokio::time::sleep(body.gap).await;
            }
            yield Ok(event);
        }
        guard.finished = true;
    };
    response
        .content_type("text/event-stream; charset=utf-8")
        .insert_header(("cache-control", "no-cache"));
    add_headers(&mut response, headers);
    response.streaming(events)
}

/// `text` cut into pieces of [`DELTA_CHARS`] characters (on char boundaries; longer ones
/// for a text over [`MAX_PIECES`] of those); an empty text gives one empty piece when
/// `at_least_one`.
pub(crate) fn pieces(text: &str, at_least_one: bool) -> impl Iterator<Item = String> + '_ {
    let chars: Vec<char> = text.chars().collect();
    // A long text (a test's MiBs of model output) goes in at most MAX_PIECES pieces, not
    // millions of tiny ones.
    let size = DELTA_CHARS.max(chars.len().div_ceil(MAX_PIECES));
    let n_pieces = chars.len().div_ceil(size).max(usize::from(at_least_one));
    (0..n_pieces).map(move |idx| {
        let from = (idx * size).min(chars.len());
        let to = (from + size).min(chars.len());
        chars[from..to].iter().collect()
    })
}

/// Most pieces one text is streamed in (texts over `MAX_PIECES * DELTA_CHARS` characters get
/// longer pieces).
const MAX_PIECES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_on_char_boundaries() {
        let text = "ä".repeat(50);
        let parts: Vec<String> = pieces(&text, true).collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.concat(), text);
        assert_eq!(pieces("", true).collect::<Vec<_>>(), vec![String::new()]);
        assert_eq!(pieces("", false).count(), 0);
    }
}
