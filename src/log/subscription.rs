//! Subscriptions: replay the log from a seq, then follow live records, never skipping one.
//!
//! A subscriber tracks `next`, the seq it must deliver next, and asks the bus
//! (`log::bus`) for the records from `next` on. When `next` is no longer in the bus's ring
//! (the subscriber fell further behind than the ring's byte bound, or it starts from an old
//! seq) it reads them from the log, one chunk of at most [`CHUNK_BYTES`] at a time, and asks
//! the bus again. Delivery is therefore exactly the log's order, each seq once, and what a
//! subscriber holds is at most one chunk, however slowly it is read.

use std::sync::Arc;

use futures_util::Stream;

use super::bus::{Take, CHUNK_BYTES};
use super::{Record, Writer};

/// Most records read from the log per catch-up step (the chunk is also bounded by bytes).
const CATCH_UP_RECORDS: usize = 1_024;

/// The stream of committed records with seq > `after`: first replayed from the log, then live.
/// Ends when the writer shuts down, or with an error when the log cannot be read.
pub fn subscribe(writer: Writer, after: u64) -> impl Stream<Item = Result<Arc<Record>, String>> {
    async_stream::stream! {
        let mut head_rx = writer.bus().watch();
        let mut next = after.saturating_add(1);
        loop {
            // Seen before looking, so a publish after the look wakes the wait below.
            head_rx.borrow_and_update();
            match writer.bus().take(next) {
                Take::Records(records) => {
                    for r in records {
                        next = r.seq + 1;
                        yield Ok(r);
                    }
                }
                Take::FromLog { head } => match read_chunk(&writer, next, head).await {
                    Ok(chunk) if chunk.is_empty() => {
                        yield Err(format!("seq {next} is missing from the log"));
                        return;
                    }
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
                },
                Take::Wait => {
                    if writer.bus().finished(next) {
                        return;
                    }
                    if head_rx.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Records `from..=to` from the log, at most [`CHUNK_BYTES`] of them (at least one).
async fn read_chunk(writer: &Writer, from: u64, to: u64) -> Result<Vec<Arc<Record>>, String> {
    let store = writer.store().clone();
    tokio::task::spawn_blocking(move || {
        store.records_bounded(from, to, CATCH_UP_RECORDS, CHUNK_BYTES)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}
