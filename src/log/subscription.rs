//! Subscriptions: replay the log from a seq, then follow live records, never skipping one.
//!
//! The subscriber joins the broadcast *before* reading the head, so every record after the
//! head reaches it live. It tracks `next`, the seq it must deliver next: a live record below
//! `next` is a duplicate and dropped; one above `next` means records were missed (the
//! subscriber lagged, or joined mid-batch), and the gap is read from the log first. A lagged
//! broadcast receiver is likewise caught up from the log. Delivery is therefore exactly the
//! log's order, each seq once.

use std::sync::Arc;

use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::{Record, Writer};

/// Records read from the log per catch-up step.
const CATCH_UP_CHUNK: usize = 1_024;

/// The stream of committed records with seq > `after`: first replayed from the log, then live.
/// Ends when the writer shuts down, or with an error when the log cannot be read.
pub fn subscribe(writer: Writer, after: u64) -> impl Stream<Item = Result<Arc<Record>, String>> {
    async_stream::stream! {
        let mut rx = writer.bus();
        let mut next = after.saturating_add(1);
        loop {
            // Catch up from the log to the head.
            let head = writer.head();
            while next <= head {
                match read_chunk(&writer, next, head).await {
                    Ok(chunk) if chunk.is_empty() => break,
                    Ok(chunk) => {
                        for r in chunk {
                            next = r.seq + 1;
                            yield Ok(r);
                        }
                    }
                    Err(e) => {
                        yield Err(e);
                        return;
                    }
                }
            }
            // Follow live.
            loop {
                match rx.recv().await {
                    Ok(r) if r.seq < next => continue,
                    Ok(r) if r.seq == next => {
                        next += 1;
                        yield Ok(r);
                    }
                    Ok(r) => {
                        // A gap: fill it from the log, then deliver this one.
                        match read_chunk(&writer, next, r.seq - 1).await {
                            Ok(chunk) => {
                                for g in chunk {
                                    next = g.seq + 1;
                                    yield Ok(g);
                                }
                            }
                            Err(e) => {
                                yield Err(e);
                                return;
                            }
                        }
                        if r.seq == next {
                            next += 1;
                            yield Ok(r);
                        } else {
                            break; // still short of it: go back to the catch-up loop
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::debug!(lagged = n, from_seq = next, "subscriber lagged; catching up from the log");
                        break;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        }
    }
}

async fn read_chunk(writer: &Writer, from: u64, to: u64) -> Result<Vec<Arc<Record>>, String> {
    let store = writer.store().clone();
    tokio::task::spawn_blocking(move || store.records(from, to, CATCH_UP_CHUNK))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}
