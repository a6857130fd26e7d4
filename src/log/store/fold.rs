//! The start-up fold: the events table read in seq order into a [`State`], on both cores.
//!
//! A second thread scans the table and hands the entries over in chunks through a bounded
//! channel; the caller's thread applies them. Decoding an entry (its envelope, borrowing its
//! strings from the page, and its payload's JSON upcast into an [`Event`]) costs more than
//! applying it (bench/README.md, "rebuild"), so the scanning thread does not decode every chunk
//! itself: when the applying thread has fewer than [`BUSY`] chunks waiting, the next chunk goes
//! over as its raw bytes and the applying thread decodes it. The decoding thus splits between
//! the two threads by how busy each is. What the fold answers is what a one-thread fold would:
//! the same state, the gap found at the same seq, the first undecodable event with its seq, and
//! nothing applied after an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use byre_projections::upcast::{upcast, UpcastError};
use byre_projections::{Event, State};
use serde::Deserialize;

use super::{OpenError, StoreError, StoredEvent, EVENTS};

/// Entries per chunk sent from the scanning thread: large enough that the channel's cost per
/// event is nil, small enough that the first chunk is applied soon.
const CHUNK: usize = 2048;

/// Chunks scanned ahead of the applying thread (bounds the fold's extra memory to about
/// `CHUNK * AHEAD` events).
const AHEAD: usize = 8;

/// With at least this many chunks waiting for the applying thread, the scanning thread decodes
/// the next chunk itself; with fewer, it sends the raw bytes for the applying thread to decode.
const BUSY: usize = 2;

/// A chunk of consecutive entries.
enum Chunk {
    /// Decoded by the scanning thread: each event with the seq of its key.
    Decoded(Vec<(u64, Event)>),
    /// Left for the applying thread to decode.
    Raw(RawChunk),
}

/// Entries' stored bytes copied out of their pages, back to back.
#[derive(Default)]
struct RawChunk {
    bytes: Vec<u8>,
    /// Each entry's key seq and the end of its bytes in `bytes`.
    entries: Vec<(u64, usize)>,
}

/// What the scanning thread sends: the next chunk, or why it stopped (with the key's seq when an
/// entry was read, so the gap check still comes first).
type Scanned = Result<Chunk, (Option<u64>, OpenError)>;

/// Whether the scanning thread sends the next chunk raw, given how many chunks are waiting.
type Split = fn(waiting: usize) -> bool;

/// The fold's split: raw while the applying thread is about to run out of work.
fn by_load(waiting: usize) -> bool {
    waiting < BUSY
}

/// Folds the events after `state.last_seq` up to `until` into `state` (a fresh state: the whole
/// log; a projection snapshot's: its tail).
/// # Errors
/// A gap or a seq out of order; the first event that cannot be decoded, with its seq; a storage
/// error. Events before the error have been applied to a state that is dropped.
pub(crate) fn fold_into(
    txn: &redb::ReadTransaction,
    state: State,
    until: u64,
) -> Result<State, OpenError> {
    fold_split(txn, state, until, by_load)
}

fn fold_split(
    txn: &redb::ReadTransaction,
    mut state: State,
    until: u64,
    split: Split,
) -> Result<State, OpenError> {
    let events = match txn.open_table(EVENTS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(state),
        Err(e) => return Err(StoreError::from(e).into()),
    };
    let from = state.last_seq + 1;
    if from > until {
        return Ok(state);
    }
    let waiting = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<Scanned>(AHEAD);
        let scanner = Scanner {
            tx,
            waiting: &waiting,
            split,
        };
        scope.spawn(move || scanner.scan(&events, from, until));
        // Ends when the scanner has sent its last chunk and dropped `tx`; returning early
        // drops `rx`, and the scanner stops at its next send.
        for message in rx {
            waiting.fetch_sub(1, Ordering::Relaxed);
            match message {
                Ok(Chunk::Decoded(chunk)) => {
                    for (seq, event) in &chunk {
                        check_next(&state, *seq)?;
                        state.apply(event);
                    }
                }
                Ok(Chunk::Raw(chunk)) => {
                    let mut start = 0;
                    for &(seq, end) in &chunk.entries {
                        check_next(&state, seq)?;
                        let event = decode(seq, &chunk.bytes[start..end])?;
                        state.apply(&event);
                        start = end;
                    }
                }
                Err((seq, error)) => {
                    if let Some(seq) = seq {
                        check_next(&state, seq)?;
                    }
                    return Err(error);
                }
            }
        }
        Ok(state)
    })
}

/// The gap check: `seq` must follow the last applied event.
fn check_next(state: &State, seq: u64) -> Result<(), OpenError> {
    if seq == state.last_seq + 1 {
        Ok(())
    } else {
        Err(OpenError::Gap {
            expected: state.last_seq + 1,
            found: seq,
        })
    }
}

/// One stored entry into its event.
fn decode(seq: u64, bytes: &[u8]) -> Result<Event, OpenError> {
    StoredEventRef::decode(seq, bytes).and_then(|e| e.to_event())
}

/// The scanning thread's side of the channel.
struct Scanner<'a> {
    tx: mpsc::SyncSender<Scanned>,
    /// Chunks sent and not yet taken by the applying thread.
    waiting: &'a AtomicUsize,
    split: Split,
}

impl Scanner<'_> {
    /// Sends one message; false when the applying side has hung up.
    fn send(&self, message: Scanned) -> bool {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        self.tx.send(message).is_ok()
    }

    /// Entries `from..=until` in chunks, then the error that stopped it, if any. Returns when
    /// done or when the applying side has hung up.
    fn scan(self, events: &redb::ReadOnlyTable<u64, &'static [u8]>, from: u64, until: u64) {
        let mut range = match events.range(from..=until) {
            Ok(r) => r,
            Err(e) => {
                self.send(Err((None, StoreError::from(e).into())));
                return;
            }
        };
        loop {
            let raw = (self.split)(self.waiting.load(Ordering::Relaxed));
            let (chunk, stop) = if raw {
                let (chunk, stop) = raw_chunk(&mut range);
                (
                    (!chunk.entries.is_empty()).then_some(Chunk::Raw(chunk)),
                    stop,
                )
            } else {
                let (chunk, stop) = decoded_chunk(&mut range);
                ((!chunk.is_empty()).then_some(Chunk::Decoded(chunk)), stop)
            };
            if let Some(chunk) = chunk {
                if !self.send(Ok(chunk)) {
                    return;
                }
            }
            match stop {
                None => {}
                Some(Stop::End) => return,
                Some(Stop::Error(error)) => {
                    self.send(Err(error));
                    return;
                }
            }
        }
    }
}

/// Why a chunk ended before it was full.
enum Stop {
    /// No more entries.
    End,
    /// An entry could not be read or decoded.
    Error((Option<u64>, OpenError)),
}

type Range<'a> = redb::Range<'a, u64, &'static [u8]>;

/// Up to [`CHUNK`] entries decoded.
fn decoded_chunk(range: &mut Range<'_>) -> (Vec<(u64, Event)>, Option<Stop>) {
    let mut chunk = Vec::with_capacity(CHUNK);
    while chunk.len() < CHUNK {
        let Some(entry) = range.next() else {
            return (chunk, Some(Stop::End));
        };
        let decoded = entry
            .map_err(|e| (None, OpenError::from(StoreError::from(e))))
            .and_then(|(k, v)| {
                let seq = k.value();
                decode(seq, v.value())
                    .map(|event| (seq, event))
                    .map_err(|e| (Some(seq), e))
            });
        match decoded {
            Ok(item) => chunk.push(item),
            Err(stop) => return (chunk, Some(Stop::Error(stop))),
        }
    }
    (chunk, None)
}

/// Up to [`CHUNK`] entries' bytes, undecoded.
fn raw_chunk(range: &mut Range<'_>) -> (RawChunk, Option<Stop>) {
    let mut chunk = RawChunk {
        bytes: Vec::with_capacity(CHUNK * 320),
        entries: Vec::with_capacity(CHUNK),
    };
    while chunk.entries.len() < CHUNK {
        match range.next() {
            None => return (chunk, Some(Stop::End)),
            Some(Err(e)) => {
                let error = OpenError::from(StoreError::from(e));
                return (chunk, Some(Stop::Error((None, error))));
            }
            Some(Ok((k, v))) => {
                chunk.bytes.extend_from_slice(v.value());
                chunk.entries.push((k.value(), chunk.bytes.len()));
            }
        }
    }
    (chunk, None)
}

impl<'a> From<&'a StoredEvent> for StoredEventRef<'a> {
    fn from(e: &'a StoredEvent) -> StoredEventRef<'a> {
        StoredEventRef {
            format: e.format,
            seq: e.seq,
            created_at_us: e.created_at_us,
            kind: &e.kind,
            project_id: e.project_id.as_deref(),
            task_id: e.task_id.as_deref(),
            agent_session_id: e.agent_session_id.as_deref(),
            owner: e.owner.as_deref(),
            actor: &e.actor,
            payload: &e.payload,
        }
    }
}

/// [`super::store::StoredEvent`] borrowed from the stored bytes, for the fold: the kind and
/// payload (most of an event's bytes) are read in place rather than copied into new strings.
/// Same fields, same order, so the same bincode bytes decode into it.
#[derive(Deserialize)]
pub(super) struct StoredEventRef<'a> {
    format: u16,
    seq: u64,
    created_at_us: i64,
    kind: &'a str,
    project_id: Option<&'a str>,
    task_id: Option<&'a str>,
    agent_session_id: Option<&'a str>,
    owner: Option<&'a str>,
    actor: &'a str,
    payload: &'a str,
}

impl<'a> StoredEventRef<'a> {
    fn decode(seq: u64, bytes: &'a [u8]) -> Result<StoredEventRef<'a>, OpenError> {
        bincode::serde::borrow_decode_from_slice(bytes, bincode::config::standard())
            .map(|(e, _)| e)
            .map_err(|e| OpenError::Undecodable {
                seq,
                reason: format!("envelope: {e}"),
            })
    }

    /// Upcasts and decodes the payload into a typed event (what [`StoredEvent::to_event`]
    /// does for an owned envelope).
    /// # Errors
    /// `OpenError::Undecodable` with the seq.
    pub(super) fn to_event(&self) -> Result<Event, OpenError> {
        let body = upcast(self.format, self.kind, self.payload).map_err(|e: UpcastError| {
            OpenError::Undecodable {
                seq: self.seq,
                reason: e.to_string(),
            }
        })?;
        Ok(Event {
            seq: self.seq,
            created_at_us: self.created_at_us,
            project_id: self.project_id.map(str::to_owned).map(Into::into),
            task_id: self.task_id.map(str::to_owned).map(Into::into),
            agent_session_id: self.agent_session_id.map(str::to_owned).map(Into::into),
            owner: self.owner.map(str::to_owned).map(Into::into),
            actor: self.actor.to_owned(),
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use byre_projections::event::PaneFocusUpdated;
    use byre_projections::EventBody;
    use redb::ReadableDatabase;

    use super::*;
    use crate::store::StoredEvent;

    /// An event of user `u{seq % 3}`, toggling its pane focus.
    fn event(seq: u64) -> Event {
        Event {
            seq,
            created_at_us: 1_000 + seq as i64,
            project_id: None,
            task_id: None,
            agent_session_id: None,
            owner: Some(format!("u{}", seq % 3).into()),
            actor: format!("u{}", seq % 3),
            body: EventBody::PaneFocusUpdated(PaneFocusUpdated {
                focused: seq.is_multiple_of(2),
                drafting: seq.is_multiple_of(5),
            }),
        }
    }

    /// A log holding `entries` (key, stored bytes).
    fn log(
        entries: impl IntoIterator<Item = (u64, Vec<u8>)>,
    ) -> (tempfile::TempDir, redb::Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("log.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(EVENTS).unwrap();
            for (k, v) in entries {
                table.insert(k, v.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
        (dir, db)
    }

    fn stored(seq: u64) -> (u64, Vec<u8>) {
        (seq, StoredEvent::from_event(&event(seq)).encode())
    }

    /// One event at a time, on one thread: what the fold must equal.
    fn applied(seqs: impl IntoIterator<Item = u64>) -> State {
        let mut state = State::default();
        for seq in seqs {
            state.apply(&event(seq));
        }
        state
    }

    /// Every split the fold can take: all chunks decoded by the scanning thread, all by the
    /// applying thread, and the fold's own by load.
    const SPLITS: [Split; 3] = [|_| false, |_| true, by_load];

    /// The fold under each split; they must all answer the same.
    fn fold(db: &redb::Database, start: State, until: u64) -> Result<State, OpenError> {
        let answers: Vec<Result<State, OpenError>> = SPLITS
            .iter()
            .map(|split| fold_split(&db.begin_read().unwrap(), start.clone(), until, *split))
            .collect();
        let shown: Vec<String> = answers
            .iter()
            .map(|a| match a {
                Ok(state) => format!("state at {}", state.last_seq),
                Err(e) => format!("{e:?}"),
            })
            .collect();
        assert!(
            shown.windows(2).all(|w| w[0] == w[1]),
            "splits differ: {shown:?}"
        );
        let mut answers = answers.into_iter();
        let first = answers.next().unwrap();
        if let Ok(state) = &first {
            assert!(answers.all(|a| a.as_ref().unwrap() == state));
        }
        first
    }

    #[test]
    fn a_fold_over_several_chunks_equals_applying_each_event_in_order() {
        let n = 2 * CHUNK as u64 + 5;
        let (_dir, db) = log((1..=n).map(stored));
        let state = fold(&db, State::default(), u64::MAX).unwrap();
        assert_eq!(state.last_seq, n);
        assert_eq!(state, applied(1..=n));
        // A prefix, and a tail on top of it, end where the whole fold ends.
        let prefix = fold(&db, State::default(), CHUNK as u64 + 1).unwrap();
        assert_eq!(prefix, applied(1..=CHUNK as u64 + 1));
        assert_eq!(fold(&db, prefix, u64::MAX).unwrap(), state);
    }

    #[test]
    fn an_empty_log_or_an_empty_tail_folds_to_the_state_given() {
        let (_dir, db) = log([]);
        assert_eq!(
            fold(&db, State::default(), u64::MAX).unwrap(),
            State::default()
        );
        let (_dir, db) = log((1..=3).map(stored));
        let whole = fold(&db, State::default(), u64::MAX).unwrap();
        assert_eq!(fold(&db, whole.clone(), u64::MAX).unwrap(), whole);
    }

    #[test]
    fn a_gap_past_the_first_chunk_is_found_at_its_seq() {
        let last = CHUNK as u64 + 7;
        let (_dir, db) = log((1..=last).chain([last + 2]).map(stored));
        match fold(&db, State::default(), u64::MAX) {
            Err(OpenError::Gap { expected, found }) => {
                assert_eq!((expected, found), (last + 1, last + 2));
            }
            other => panic!("expected a gap, got {other:?}"),
        }
    }

    #[test]
    fn an_undecodable_event_stops_the_fold_with_its_seq() {
        let bad = CHUNK as u64 + 3;
        let entries = (1..=bad + 10).map(|seq| {
            if seq == bad {
                (seq, vec![0xff, 0x01])
            } else {
                stored(seq)
            }
        });
        let (_dir, db) = log(entries);
        match fold(&db, State::default(), u64::MAX) {
            Err(OpenError::Undecodable { seq, .. }) => assert_eq!(seq, bad),
            other => panic!("expected an undecodable event, got {other:?}"),
        }
    }

    #[test]
    fn a_gap_before_an_undecodable_event_is_reported_as_the_gap() {
        let entries = (1..=5).map(stored).chain([(7, vec![0xff])]);
        let (_dir, db) = log(entries);
        match fold(&db, State::default(), u64::MAX) {
            Err(OpenError::Gap { expected, found }) => assert_eq!((expected, found), (6, 7)),
            other => panic!("expected a gap, got {other:?}"),
        }
    }
}
