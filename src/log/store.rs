//! The redb file: tables, the stored event envelope, reads and the start-up fold.
//!
//! Tables:
//! - `events`: seq (u64) → bincode [`StoredEvent`] (format version, envelope, payload JSON).
//! - `task_events`: (task_id, seq) → () — the per-task index behind `listTaskEvents`.
//! - `lead_events`: (owner login, seq) → () — the events of each user's lead sessions (owned,
//!   with an `agent_session_id`), behind `listLeadEvents`.
//! - `blobs`: SHA-256 hex → image bytes (`uploadBlob`), written in the same transaction as the
//!   `blob.uploaded` event.
//! - `checkpoints`: seq → state digest, written by the live server (off the writer thread,
//!   `log::snapshot`) so that a rebuild can be compared with what it held
//!   (`byre rebuild --verify`) and a projection snapshot matched with its log.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use byre_projections::upcast::CURRENT_FORMAT;
use byre_projections::{Event, State};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

pub(crate) mod fold;

pub(crate) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub(crate) const TASK_EVENTS: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("task_events");
pub(crate) const LEAD_EVENTS: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("lead_events");
pub(crate) const BLOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("blobs");
pub(crate) const CHECKPOINTS: TableDefinition<u64, &str> = TableDefinition::new("checkpoints");

/// The envelope as stored (bincode 2, standard config). bincode is not self-describing, so
/// this shape never changes: a new envelope needs a new table or a leading version byte, and
/// payload changes are handled by `format` and the upcasters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Payload format version ([`CURRENT_FORMAT`] when written by this build).
    pub format: u16,
    /// Seq.
    pub seq: u64,
    /// Microseconds since the Unix epoch.
    pub created_at_us: i64,
    /// Kind.
    pub kind: String,
    /// Project id.
    pub project_id: Option<String>,
    /// Task id.
    pub task_id: Option<String>,
    /// Agent session id.
    pub agent_session_id: Option<String>,
    /// Owner login.
    pub owner: Option<String>,
    /// Actor.
    pub actor: String,
    /// The payload, a JSON object.
    pub payload: String,
}

impl StoredEvent {
    /// The envelope of a committed event.
    pub fn from_event(e: &Event) -> StoredEvent {
        StoredEvent {
            format: CURRENT_FORMAT,
            seq: e.seq,
            created_at_us: e.created_at_us,
            kind: e.body.kind().to_owned(),
            project_id: e.project_id.clone().map(Into::into),
            task_id: e.task_id.clone().map(Into::into),
            agent_session_id: e.agent_session_id.clone().map(Into::into),
            owner: e.owner.clone().map(Into::into),
            actor: e.actor.clone(),
            payload: e.body.payload_json(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        // Encoding plain strings and integers into a Vec cannot fail.
        bincode::serde::encode_to_vec(self, bincode::config::standard()).expect("envelope encodes")
    }

    pub(crate) fn decode(seq: u64, bytes: &[u8]) -> Result<StoredEvent, OpenError> {
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())
            .map(|(e, _)| e)
            .map_err(|e| OpenError::Undecodable {
                seq,
                reason: format!("envelope: {e}"),
            })
    }

    /// Upcasts and decodes the payload into a typed event.
    /// # Errors
    /// `OpenError::Undecodable` with the seq.
    pub fn to_event(&self) -> Result<Event, OpenError> {
        fold::StoredEventRef::from(self).to_event()
    }
}

/// A committed event as subscribers see it: routing fields plus the API `Event` JSON, made once
/// and shared by every subscriber.
#[derive(Debug, Clone)]
pub struct Record {
    /// Seq.
    pub seq: u64,
    /// Kind.
    pub kind: String,
    /// Task id, for `task_id` filters.
    pub task_id: Option<String>,
    /// Agent session id.
    pub agent_session_id: Option<String>,
    /// Owner: only this login may receive the event.
    pub owner: Option<String>,
    /// The spec's `Event` as compact JSON, inside the record's SSE frame.
    pub json: EventJson,
}

/// A record's `Event` JSON, held inside its SSE frame `id: {seq}\ndata: {json}\n\n`, which
/// is serialized once when the record is made and shared by every stream that sends it
/// ([`Record::frame`]). Reads as the JSON `str`.
#[derive(Debug, Clone)]
pub struct EventJson {
    frame: Arc<str>,
    start: usize,
}

impl std::ops::Deref for EventJson {
    type Target = str;
    fn deref(&self) -> &str {
        // The frame ends with the two newlines after the JSON.
        &self.frame[self.start..self.frame.len() - 2]
    }
}

impl std::fmt::Display for EventJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// An SSE frame's bytes, for [`bytes::Bytes::from_owner`].
struct FrameBytes(Arc<str>);

impl AsRef<[u8]> for FrameBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

#[derive(Serialize)]
struct ApiEvent<'a> {
    seq: u64,
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    actor: &'a str,
    payload: &'a serde_json::value::RawValue,
    created_at: String,
}

impl Record {
    /// Builds the record of a stored event. The payload is embedded as is, not re-parsed into
    /// a tree.
    pub fn from_stored(e: &StoredEvent) -> Record {
        let fallback;
        let payload: &serde_json::value::RawValue = match serde_json::from_str(&e.payload) {
            Ok(p) => p,
            Err(_) => {
                // Only a payload that was never valid JSON gets here; show it as a string.
                fallback =
                    serde_json::value::to_raw_value(&e.payload).expect("a string serializes");
                &fallback
            }
        };
        let api = ApiEvent {
            seq: e.seq,
            kind: &e.kind,
            project_id: e.project_id.as_deref(),
            task_id: e.task_id.as_deref(),
            agent_session_id: e.agent_session_id.as_deref(),
            owner: e.owner.as_deref(),
            actor: &e.actor,
            payload,
            created_at: crate::rfc3339(e.created_at_us),
        };
        let seq = e.seq.to_string();
        let mut frame = String::with_capacity(e.payload.len() + 256);
        frame.push_str("id: ");
        frame.push_str(&seq);
        frame.push_str("\ndata: ");
        let start = frame.len();
        frame.push_str(&serde_json::to_string(&api).expect("event serializes"));
        frame.push_str("\n\n");
        Record {
            seq: e.seq,
            kind: e.kind.clone(),
            task_id: e.task_id.clone(),
            agent_session_id: e.agent_session_id.clone(),
            owner: e.owner.clone(),
            json: EventJson {
                frame: frame.into(),
                start,
            },
        }
    }

    /// The SSE frame `id: {seq}\ndata: {Event JSON}\n\n`, shared (not copied).
    pub fn frame(&self) -> bytes::Bytes {
        bytes::Bytes::from_owner(FrameBytes(self.json.frame.clone()))
    }

    /// Bytes this record holds (its frame and routing fields), for the fan-out's byte bound.
    pub fn size(&self) -> usize {
        std::mem::size_of::<Record>()
            + self.json.frame.len()
            + self.kind.len()
            + self.task_id.as_ref().map_or(0, String::len)
            + self.agent_session_id.as_ref().map_or(0, String::len)
            + self.owner.as_ref().map_or(0, String::len)
    }

    /// Whether `login` may receive this event (DESIGN.md invariant 4).
    pub fn visible_to(&self, login: &str) -> bool {
        self.owner.as_deref().is_none_or(|o| o == login)
    }
}

/// Why the log could not be opened or folded.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file could not be opened as a redb database.
    #[error("cannot open the log {path}: {source}")]
    Database {
        /// The file.
        path: PathBuf,
        /// redb's error.
        source: redb::DatabaseError,
    },
    /// A storage error while reading.
    #[error("cannot read the log: {0}")]
    Storage(#[from] StoreError),
    /// An event this build cannot decode: start-up stops here, it is never skipped.
    #[error("event {seq} cannot be decoded: {reason}")]
    Undecodable {
        /// Its seq.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// The log has a gap or a seq out of order (never written by byre).
    #[error("the log is not gapless: expected seq {expected}, found {found}")]
    Gap {
        /// Expected seq.
        expected: u64,
        /// Found seq.
        found: u64,
    },
}

/// A redb error while reading or writing, flattened to its message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

macro_rules! store_err {
    ($($t:ty),*) => { $(impl From<$t> for StoreError { fn from(e: $t) -> Self { StoreError(e.to_string()) } })* };
}
store_err!(
    redb::Error,
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError,
    redb::DatabaseError,
    redb::SetDurabilityError
);

/// The log file, shared by the writer (which alone writes) and readers.
#[derive(Clone)]
pub struct Store {
    pub(crate) db: Arc<redb::Database>,
    path: PathBuf,
}

/// A read-only view of a log that another process may be writing (`byre log`, `byre rebuild`).
pub struct ReadOnlyStore {
    pub(crate) db: redb::ReadOnlyDatabase,
    pub(crate) path: PathBuf,
}

/// redb's page cache, in bytes. Every page a commit writes and every page a read touches goes
/// into it up to this size, and stays: a start-up fold of a 300 MiB log filled a 256 MiB cache
/// and kept it resident (bench/README.md "state-memory"). What byre reads again is the tail of
/// the log (event streams catching up, transcripts), which a few MiB of pages hold; a fold
/// reads every page once and gains nothing from a cache.
pub const CACHE_BYTES: usize = 32 * 1024 * 1024;

fn builder() -> redb::Builder {
    let mut b = redb::Builder::new();
    // One writing process; the CLI may read concurrently (`byre log` while the server runs).
    b.set_concurrency_mode(redb::ConcurrencyMode::SingleWriter);
    b.set_cache_size(CACHE_BYTES);
    b
}

impl Store {
    /// Opens (creating if absent) the log at `path` for writing, and creates its tables.
    /// # Errors
    /// `OpenError::Database` when the file is not a redb database or is held by another writer.
    pub fn open(path: &Path) -> Result<Store, OpenError> {
        let db = builder()
            .create(path)
            .map_err(|source| OpenError::Database {
                path: path.to_owned(),
                source,
            })?;
        let txn = db.begin_write().map_err(StoreError::from)?;
        {
            txn.open_table(EVENTS).map_err(StoreError::from)?;
            txn.open_table(TASK_EVENTS).map_err(StoreError::from)?;
            txn.open_table(LEAD_EVENTS).map_err(StoreError::from)?;
            txn.open_table(BLOBS).map_err(StoreError::from)?;
            txn.open_table(CHECKPOINTS).map_err(StoreError::from)?;
        }
        txn.commit().map_err(StoreError::from)?;
        Ok(Store {
            db: Arc::new(db),
            path: path.to_owned(),
        })
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many handles share the open database (this one included). The file is closed when
    /// the last is dropped.
    pub fn n_handles(&self) -> usize {
        Arc::strong_count(&self.db)
    }

    /// The file's size in bytes.
    pub fn file_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
    }

    /// The image stored under `sha256`, if any.
    /// # Errors
    /// A storage error.
    pub fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(BLOBS)?;
        Ok(table.get(sha256)?.map(|v| v.value().to_vec()))
    }

    /// Records with `from <= seq <= to`, at most `limit`, in order.
    /// # Errors
    /// A storage error, or an envelope that does not decode.
    pub fn records(&self, from: u64, to: u64, limit: usize) -> Result<Vec<Arc<Record>>, OpenError> {
        read_records(
            &self.db.begin_read().map_err(StoreError::from)?,
            from,
            to,
            limit,
        )
    }

    /// Records with `from <= seq <= to`, in order: at most `limit` of them and, past the first,
    /// at most `max_bytes` of them ([`Record::size`]).
    /// # Errors
    /// A storage error, or an envelope that does not decode.
    pub fn records_bounded(
        &self,
        from: u64,
        to: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<Arc<Record>>, OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let events = open_events(&txn)?;
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        let mut bytes = 0;
        for entry in events.range(from..=to).map_err(StoreError::from)? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = entry.map_err(StoreError::from)?;
            let r = Record::from_stored(&StoredEvent::decode(k.value(), v.value())?);
            bytes += r.size();
            out.push(Arc::new(r));
            if bytes >= max_bytes {
                break;
            }
        }
        Ok(out)
    }

    /// The task's records with seq > `after`, at most `limit`, in order.
    /// # Errors
    /// A storage error, or an envelope that does not decode.
    pub fn task_records(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<Record>>, OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let index = txn.open_table(TASK_EVENTS).map_err(StoreError::from)?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from)?;
        let mut out = Vec::new();
        let start = after.saturating_add(1);
        for entry in index
            .range((task_id, start)..=(task_id, u64::MAX))
            .map_err(StoreError::from)?
        {
            if out.len() >= limit {
                break;
            }
            let (key, _) = entry.map_err(StoreError::from)?;
            if let Some(record) = record_at(&events, key.value().1)? {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// The task's records with seq < `before`, the last `limit` of them, in order (oldest
    /// first): the page before a point, for reading a transcript backwards.
    /// # Errors
    /// A storage error, or an envelope that does not decode.
    pub fn task_records_before(
        &self,
        task_id: &str,
        before: u64,
        limit: usize,
    ) -> Result<Vec<Arc<Record>>, OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let index = txn.open_table(TASK_EVENTS).map_err(StoreError::from)?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from)?;
        let mut out = Vec::new();
        if before == 0 {
            return Ok(out);
        }
        for entry in index
            .range((task_id, 0)..(task_id, before))
            .map_err(StoreError::from)?
            .rev()
        {
            if out.len() >= limit {
                break;
            }
            let (key, _) = entry.map_err(StoreError::from)?;
            if let Some(record) = record_at(&events, key.value().1)? {
                out.push(record);
            }
        }
        out.reverse();
        Ok(out)
    }

    /// A page of whole turns of `login`'s lead events (`listLeadEvents`): walking back from
    /// `before` (exclusive; the log's end when `None`), the events after the `turns + 1`'th
    /// `turn.ended` met, oldest first, and whether earlier events exist (that `turn.ended`).
    /// Without `before` the events of a running turn (after the last `turn.ended`) are
    /// included; with `before` in the middle of a turn, that turn's events before it.
    /// # Errors
    /// A storage error, or an envelope that does not decode.
    pub fn lead_turns_before(
        &self,
        login: &str,
        before: Option<u64>,
        turns: usize,
    ) -> Result<(Vec<Arc<Record>>, bool), OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let index = txn.open_table(LEAD_EVENTS).map_err(StoreError::from)?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from)?;
        let mut out = Vec::new();
        let mut more = false;
        let mut ended = 0usize;
        let end = before.unwrap_or(u64::MAX);
        for entry in index
            .range((login, 0)..(login, end))
            .map_err(StoreError::from)?
            .rev()
        {
            let (key, _) = entry.map_err(StoreError::from)?;
            let Some(record) = record_at(&events, key.value().1)? else {
                continue;
            };
            if record.kind == "turn.ended" {
                ended += 1;
                if ended > turns {
                    more = true;
                    break;
                }
            }
            out.push(record);
        }
        out.reverse();
        Ok((out, more))
    }

    /// Seq of the task's latest event; 0 for none.
    /// # Errors
    /// A storage error.
    pub fn task_last_seq(&self, task_id: &str) -> Result<u64, StoreError> {
        let txn = self.db.begin_read()?;
        let index = txn.open_table(TASK_EVENTS)?;
        let last = index.range((task_id, 0)..=(task_id, u64::MAX))?.next_back();
        Ok(match last {
            Some(entry) => entry?.0.value().1,
            None => 0,
        })
    }

    /// Folds the whole log into a fresh state.
    /// # Errors
    /// The first event that cannot be decoded, with its seq; a gap; a storage error.
    pub fn fold(&self) -> Result<State, OpenError> {
        fold::fold_into(
            &self.db.begin_read().map_err(StoreError::from)?,
            State::default(),
            u64::MAX,
        )
    }
}

impl ReadOnlyStore {
    /// Opens a log read-only; works while the server writes it.
    /// # Errors
    /// `OpenError::Database` when the file is missing or not a redb database.
    pub fn open(path: &Path) -> Result<ReadOnlyStore, OpenError> {
        let db = builder()
            .open_read_only(path)
            .map_err(|source| OpenError::Database {
                path: path.to_owned(),
                source,
            })?;
        Ok(ReadOnlyStore {
            db,
            path: path.to_owned(),
        })
    }

    /// Folds events with seq ≤ `until`.
    /// # Errors
    /// As [`Store::fold`].
    pub fn fold_until(&self, until: u64) -> Result<State, OpenError> {
        fold::fold_into(
            &self.db.begin_read().map_err(StoreError::from)?,
            State::default(),
            until,
        )
    }

    /// Stored events with `from <= seq <= to`, in order, passed to `each`; stops when it
    /// returns false.
    /// # Errors
    /// A storage or decode error.
    pub fn for_each(
        &self,
        from: u64,
        to: u64,
        mut each: impl FnMut(StoredEvent) -> bool,
    ) -> Result<(), OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let events = open_events(&txn)?;
        for entry in events.range(from..=to).map_err(StoreError::from)? {
            let (k, v) = entry.map_err(StoreError::from)?;
            if !each(StoredEvent::decode(k.value(), v.value())?) {
                break;
            }
        }
        Ok(())
    }

    /// Whether any event of the log belongs to the task.
    /// # Errors
    /// A storage error.
    pub fn has_task(&self, task_id: &str) -> Result<bool, StoreError> {
        let txn = self.db.begin_read()?;
        let index = match txn.open_table(TASK_EVENTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let mut range = index.range((task_id, 0)..=(task_id, u64::MAX))?;
        Ok(range.next().transpose()?.is_some())
    }

    /// The latest checkpoint: (seq, digest).
    /// # Errors
    /// A storage error.
    pub fn last_checkpoint(&self) -> Result<Option<(u64, String)>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(CHECKPOINTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let last = table.last()?;
        Ok(last.map(|(k, v)| (k.value(), v.value().to_owned())))
    }
}

fn open_events(
    txn: &redb::ReadTransaction,
) -> Result<redb::ReadOnlyTable<u64, &'static [u8]>, OpenError> {
    txn.open_table(EVENTS)
        .map_err(|e| OpenError::Storage(StoreError::from(e)))
}

fn read_records(
    txn: &redb::ReadTransaction,
    from: u64,
    to: u64,
    limit: usize,
) -> Result<Vec<Arc<Record>>, OpenError> {
    let events = open_events(txn)?;
    let mut out = Vec::new();
    if from > to {
        return Ok(out);
    }
    for entry in events.range(from..=to).map_err(StoreError::from)? {
        if out.len() >= limit {
            break;
        }
        let (k, v) = entry.map_err(StoreError::from)?;
        out.push(Arc::new(Record::from_stored(&StoredEvent::decode(
            k.value(),
            v.value(),
        )?)));
    }
    Ok(out)
}

/// The record at `seq` of the events table, `None` when there is none: one task-index entry
/// read back for [`Store::task_records`] and [`Store::task_records_before`].
fn record_at(
    events: &redb::ReadOnlyTable<u64, &[u8]>,
    seq: u64,
) -> Result<Option<Arc<Record>>, OpenError> {
    match events.get(seq).map_err(StoreError::from)? {
        Some(bytes) => Ok(Some(Arc::new(Record::from_stored(&StoredEvent::decode(
            seq,
            bytes.value(),
        )?)))),
        None => Ok(None),
    }
}
