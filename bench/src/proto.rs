//! Prototypes of a faster `Store::fold`, built only on byre's pub API, to size the changes to
//! src/log/store.rs proposed in bench/README.md. Not byre's code: byre's figures are the ones
//! measured through `Store::fold`.
//!
//! - borrowed: the envelope is decoded borrowing its strings from the redb page (same bytes,
//!   same bincode format, no `String` per field), the payload is parsed straight from that
//!   slice, and only the envelope fields that `Event` keeps are allocated, once. Since
//!   bf2c204 this is what `Store::fold` itself does (`StoredEventRef`).
//! - pipelined: the same, with scan + decode + upcast on a second thread feeding `State::apply`
//!   on the caller's thread in chunks (2 cores: the two halves overlap).

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use byre_projections::upcast::upcast;
use byre_projections::{Event, State};
use redb::ReadableDatabase;
use serde::Deserialize;

use crate::gen;

/// byre's `StoredEvent`, borrowing its strings.
#[derive(Deserialize)]
struct EnvelopeRef<'a> {
    format: u16,
    seq: u64,
    created_at_us: i64,
    kind: &'a str,
    #[serde(borrow)]
    project_id: Option<&'a str>,
    #[serde(borrow)]
    task_id: Option<&'a str>,
    #[serde(borrow)]
    agent_session_id: Option<&'a str>,
    #[serde(borrow)]
    owner: Option<&'a str>,
    actor: &'a str,
    payload: &'a str,
}

/// Decodes the envelope only, borrowing (for the breakdown); returns its seq.
pub fn decode_ref(bytes: &[u8]) -> anyhow::Result<u64> {
    let (e, _): (EnvelopeRef, _) =
        bincode::serde::borrow_decode_from_slice(bytes, bincode::config::standard())?;
    Ok(e.seq)
}

fn event(bytes: &[u8]) -> anyhow::Result<Event> {
    let (e, _): (EnvelopeRef, _) =
        bincode::serde::borrow_decode_from_slice(bytes, bincode::config::standard())?;
    let body = upcast(e.format, e.kind, e.payload)?;
    Ok(Event {
        seq: e.seq,
        created_at_us: e.created_at_us,
        project_id: e.project_id.map(str::to_owned).map(Into::into),
        task_id: e.task_id.map(str::to_owned).map(Into::into),
        agent_session_id: e.agent_session_id.map(str::to_owned).map(Into::into),
        owner: e.owner.map(str::to_owned).map(Into::into),
        actor: e.actor.to_owned(),
        body,
    })
}

fn open(path: &Path) -> anyhow::Result<redb::Database> {
    let mut b = redb::Builder::new();
    b.set_cache_size(256 * 1024 * 1024);
    Ok(b.open(path)?)
}

/// Single thread, borrowed envelope.
pub fn fold_borrowed(path: &Path) -> anyhow::Result<(State, Duration)> {
    let t0 = Instant::now();
    let db = open(path)?;
    let txn = db.begin_read()?;
    let table = txn.open_table(gen::EVENTS)?;
    let mut state = State::default();
    for entry in table.range(1..=u64::MAX)? {
        let (_, v) = entry?;
        state.apply(&event(v.value())?);
    }
    Ok((state, t0.elapsed()))
}

/// Scan + decode + upcast on a second thread, apply on this one.
pub fn fold_pipelined(path: &Path) -> anyhow::Result<(State, Duration)> {
    const CHUNK: usize = 2048;
    let t0 = Instant::now();
    let db = open(path)?;
    let txn = db.begin_read()?;
    let table = txn.open_table(gen::EVENTS)?;
    let mut state = State::default();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let (tx, rx) = mpsc::sync_channel::<Vec<Event>>(8);
        // Applied chunks go back to the decoder thread, which frees their events: glibc's
        // malloc is slow when one thread frees what another allocated.
        let (back_tx, back_rx) = mpsc::channel::<Vec<Event>>();
        let decoder = s.spawn(move || -> anyhow::Result<()> {
            let mut chunk = Vec::with_capacity(CHUNK);
            for entry in table.range(1..=u64::MAX)? {
                let (_, v) = entry?;
                chunk.push(event(v.value())?);
                if chunk.len() == CHUNK {
                    let next = match back_rx.try_recv() {
                        Ok(mut used) => {
                            used.clear();
                            used
                        }
                        Err(_) => Vec::with_capacity(CHUNK),
                    };
                    if tx.send(std::mem::replace(&mut chunk, next)).is_err() {
                        return Ok(());
                    }
                }
            }
            let _ = tx.send(chunk);
            Ok(())
        });
        for chunk in rx {
            for e in &chunk {
                state.apply(e);
            }
            let _ = back_tx.send(chunk);
        }
        drop(back_tx);
        decoder
            .join()
            .map_err(|_| anyhow::anyhow!("the decoder thread panicked"))?
    })?;
    Ok((state, t0.elapsed()))
}
