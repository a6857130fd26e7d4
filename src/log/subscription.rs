//! Subscriptions: replay the log from a seq, then follow live records, never skipping one.
//!
//! A subscriber tracks `next`, the seq it must deliver next, and asks the bus
//! (`log::bus`) for the records from `next` on. When `next` is no longer in the bus's ring
//! (the subscriber fell further behind than the ring's byte bound, or it starts from an old
//! seq) it reads them from the log, one chunk of at most [`CHUNK_BYTES`] at a time, and asks
//! the bus again. Delivery is therefore exactly the log's order, each seq once, and what a
//! subscriber holds is at most one chunk, however slowly it is read. Chunks read from the log
//! are shared by the readers replaying the same seqs and bounded in total
//! ([`super::bus::CatchUp`]).

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

/// Records `from..=to` from the log, at most [`CHUNK_BYTES`] of them (at least one): the
/// ones another reader holds already when it does, else read (see [`super::bus::CatchUp`]).
async fn read_chunk(writer: &Writer, from: u64, to: u64) -> Result<Vec<Arc<Record>>, String> {
    let catch_up = writer.bus().catch_up();
    if let Some(held) = catch_up.held(from, to) {
        return Ok(held);
    }
    // One load at a time: readers at the same seqs wait for it and then share its records.
    let _loading = catch_up.loading.lock().await;
    if let Some(held) = catch_up.held(from, to) {
        return Ok(held);
    }
    // The bound in total: while readers hold this much read from the log, the next load
    // waits for them to let some go (one load always may, when nothing is held).
    while catch_up.live_bytes() >= catch_up.budget {
        tokio::time::sleep(BUDGET_POLL).await;
    }
    let store = writer.store().clone();
    let chunk = tokio::task::spawn_blocking(move || {
        store.records_bounded(from, to, CATCH_UP_RECORDS, CHUNK_BYTES)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    catch_up.keep(&chunk);
    Ok(chunk)
}

/// How often a load waiting for the catch-up budget looks again.
const BUDGET_POLL: std::time::Duration = std::time::Duration::from_millis(10);
