//! Projection snapshots and checkpoints, made off the writer thread.
//!
//! A projection snapshot is the folded state at a seq, in a file beside the log
//! (`byre.snapshot` next to `byre.redb`), so that start-up folds only the events after it
//! ([`load`]). It is disposable: a snapshot that is missing, damaged, of another format or made
//! by a build whose fold differs ([`byre_projections::persist::FINGERPRINT`]) is ignored (and
//! logged), and the fold starts from seq 1. `byre rebuild` never reads it to fold.
//!
//! # File format 1
//!
//! ```text
//! BYRESNAP 1\n
//! {"fingerprint":"…","seq":N,"digest":"sha256:…","state_bytes":S,"bookkeeping_bytes":B,"bookkeeping_sha256":"…"}\n
//! <S bytes: the state's JSON, whose SHA-256 is `digest`><B bytes: the fold's bookkeeping, JSON>
//! ```
//!
//! The digest is the checkpoint's: the [`ProjectionSnapshotter`] records it in the log's `checkpoints`
//! table before it writes the file, and [`load`] uses a snapshot only when the checkpoint at its
//! seq holds the same digest (so a snapshot never pairs with another log). The file is written
//! to `byre.snapshot.tmp`, fsync'd and renamed over the old one: a crash leaves the previous
//! snapshot or the new one, never half of one (a half-written `byre.snapshot.tmp` it may leave is
//! removed by the next server's start-up, `startup.rs`).
//!
//! # The snapshotter
//!
//! The writer thread hands every committed batch to the [`ProjectionSnapshotter`] thread, which folds it
//! into a state of its own. That thread, not the writer, serializes the state and hashes it: a
//! checkpoint every [`CHECKPOINT_EVERY`] while events arrive, after [`CHECKPOINT_IDLE_AFTER`]
//! without any, and at stop; a snapshot file with a checkpoint once [`PROJECTION_SNAPSHOT_EVERY_EVENTS`]
//! events were folded since the last snapshot, and at stop. So the writer never stops to digest
//! a large state (issue 19 measured 56–92 ms for a 1M-event state). The price is a third copy
//! of the state in memory (the writer's, the shared query state, the snapshotter's).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use byre_projections::digest::{digest_json, DIGEST_VERSION};
use byre_projections::persist::{self, FINGERPRINT};
use byre_projections::{Event, State};
use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::store::{ReadOnlyStore, Store, StoreError, CHECKPOINTS, EVENTS};

/// The file layout's version (the first line). A file of another version is ignored.
pub const PROJECTION_SNAPSHOT_FORMAT: u32 = 1;
/// How often a checkpoint is recorded while events arrive.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(10);
/// A checkpoint is recorded once no event arrived for this long.
pub const CHECKPOINT_IDLE_AFTER: Duration = Duration::from_secs(1);
/// A checkpoint also writes a snapshot file once this many events were folded since the last
/// one (start-up's fold of the tail included). A graceful stop always writes one.
pub const PROJECTION_SNAPSHOT_EVERY_EVENTS: u64 = 10_000;
/// Committed batches waiting for the snapshotter before the writer waits for room: reached
/// only if the snapshotter falls hopelessly behind.
const QUEUE_BATCHES: usize = 65_536;

/// The most a snapshot's two header lines take (the magic line ≤ 64 bytes, the header ≤ 4,096,
/// and their newlines).
const HEAD_MAX_BYTES: u64 = 64 + 4096 + 2;

/// The snapshot file of the log at `log_path`: `byre.snapshot` beside `byre.redb`.
pub fn projection_snapshot_path(log_path: &Path) -> PathBuf {
    log_path.with_extension("snapshot")
}

/// The header line of a snapshot file (format 1).
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    /// [`FINGERPRINT`] of the build that wrote it.
    fingerprint: String,
    /// The last seq folded into the state.
    seq: u64,
    /// `sha256:…` of the state's JSON (the checkpoint's digest).
    digest: String,
    /// Length of the state's JSON.
    state_bytes: u64,
    /// Length of the bookkeeping's JSON.
    bookkeeping_bytes: u64,
    /// SHA-256 of the bookkeeping's JSON, lowercase hex.
    bookkeeping_sha256: String,
}

/// A snapshot read and checked against itself: its state, the seq it covers and its digest.
#[derive(Debug)]
pub struct ProjectionSnapshot {
    /// The folded state (`state.last_seq == seq`).
    pub state: State,
    /// The last seq folded into it.
    pub seq: u64,
    /// `sha256:…`, as in the checkpoint at `seq`.
    pub digest: String,
}

/// Why a snapshot file was not used. Never an error of start-up: the fold starts from seq 1.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// No snapshot file.
    #[error("there is none")]
    Missing,
    /// The file could not be read.
    #[error("it cannot be read: {0}")]
    Io(#[from] std::io::Error),
    /// The first line is not `BYRESNAP {PROJECTION_SNAPSHOT_FORMAT}`.
    #[error("it is not a snapshot of format {PROJECTION_SNAPSHOT_FORMAT} (first line {0:?})")]
    Format(String),
    /// Made by a build whose fold may differ.
    #[error("it was made by another build (fold fingerprint {0}, this build's is {FINGERPRINT})")]
    OtherBuild(String),
    /// Cut short, a length or a hash does not match, or the JSON does not decode.
    #[error("it is damaged: {0}")]
    Damaged(String),
    /// It covers events the log does not hold, or the log's checkpoint at its seq differs.
    #[error("it does not belong to this log: {0}")]
    OtherLog(String),
}

/// Reads and checks the snapshot at `path` (magic, format, fingerprint, lengths, the state's
/// digest, the bookkeeping's hash, decoding).
/// # Errors
/// Why it cannot be used ([`Unusable`]); `Missing` when there is no file.
pub fn read(path: &Path) -> Result<ProjectionSnapshot, Unusable> {
    // Only a regular file: a FIFO would block start-up, a device (`/dev/zero`) never ends.
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
        Err(e) => return Err(e.into()),
    };
    if !meta.is_file() {
        return Err(Unusable::Damaged("it is not a regular file".into()));
    }
    // The two header lines first, so that a file of the wrong length is refused before it is
    // read (a damaged snapshot must not cost its size in memory).
    let mut head = Vec::new();
    std::fs::File::open(path)?
        .take(HEAD_MAX_BYTES)
        .read_to_end(&mut head)?;
    let (magic, rest) = split_line(&head, 64).ok_or_else(|| {
        Unusable::Format(String::from_utf8_lossy(&head[..head.len().min(16)]).into())
    })?;
    if magic != format!("BYRESNAP {PROJECTION_SNAPSHOT_FORMAT}").as_bytes() {
        return Err(Unusable::Format(String::from_utf8_lossy(magic).into()));
    }
    let (header, body_start) =
        split_line(rest, 4096).ok_or_else(|| Unusable::Damaged("no header line".into()))?;
    let header_len = (head.len() - body_start.len()) as u64;
    let header: Header =
        serde_json::from_slice(header).map_err(|e| Unusable::Damaged(format!("header: {e}")))?;
    if header.fingerprint != FINGERPRINT {
        return Err(Unusable::OtherBuild(header.fingerprint));
    }
    let expected = header.state_bytes.checked_add(header.bookkeeping_bytes);
    let body_len = meta.len().saturating_sub(header_len);
    if expected != Some(body_len) {
        return Err(Unusable::Damaged(format!(
            "{body_len} bytes after the header, the header says {} + {}",
            header.state_bytes, header.bookkeeping_bytes
        )));
    }
    let bytes = std::fs::read(path)?;
    let body = bytes.get(header_len as usize..).unwrap_or_default();
    if expected != Some(body.len() as u64) {
        return Err(Unusable::Damaged("it changed while it was read".into()));
    }
    let (state_json, bookkeeping_json) = body.split_at(header.state_bytes as usize);
    if digest_json(state_json) != header.digest {
        return Err(Unusable::Damaged(
            "the state's digest does not match".into(),
        ));
    }
    if hex(&Sha256::digest(bookkeeping_json)) != header.bookkeeping_sha256 {
        return Err(Unusable::Damaged(
            "the bookkeeping's hash does not match".into(),
        ));
    }
    let state = persist::decode(state_json, bookkeeping_json)
        .map_err(|e| Unusable::Damaged(format!("the state does not decode: {e}")))?;
    if state.last_seq != header.seq {
        return Err(Unusable::Damaged(format!(
            "the header says seq {}, the state is at {}",
            header.seq, state.last_seq
        )));
    }
    Ok(ProjectionSnapshot {
        state,
        seq: header.seq,
        digest: header.digest,
    })
}

/// [`read`], then checks that the snapshot belongs to the log in `txn`: the log holds its seq
/// and the checkpoint recorded at that seq has its digest.
/// # Errors
/// [`Unusable`], as [`read`], or `OtherLog`; a storage error is `Io`.
pub(crate) fn read_for(
    path: &Path,
    txn: &redb::ReadTransaction,
) -> Result<ProjectionSnapshot, Unusable> {
    let snapshot = read(path)?;
    let storage = |e: StoreError| Unusable::Io(std::io::Error::other(e.0));
    let head = match txn.open_table(EVENTS) {
        Ok(t) => t
            .last()
            .map_err(|e| storage(e.into()))?
            .map_or(0, |(k, _)| k.value()),
        Err(redb::TableError::TableDoesNotExist(_)) => 0,
        Err(e) => return Err(storage(e.into())),
    };
    if snapshot.seq > head {
        return Err(Unusable::OtherLog(format!(
            "it is at seq {}, the log ends at {head}",
            snapshot.seq
        )));
    }
    let checkpoint = match txn.open_table(CHECKPOINTS) {
        Ok(t) => t
            .get(snapshot.seq)
            .map_err(|e| storage(e.into()))?
            .map(|v| v.value().to_owned()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(storage(e.into())),
    };
    let ours = checkpoint_text(&snapshot.digest);
    match checkpoint {
        Some(c) if c == ours => Ok(snapshot),
        Some(c) => Err(Unusable::OtherLog(format!(
            "the log's checkpoint at seq {} is {c}, the snapshot's {ours}",
            snapshot.seq
        ))),
        None => Err(Unusable::OtherLog(format!(
            "the log has no checkpoint at seq {}",
            snapshot.seq
        ))),
    }
}

/// What start-up folded: the state, and from where.
#[derive(Debug)]
pub struct Folded {
    /// The fold of the whole log.
    pub state: State,
    /// Seq of the projection snapshot the fold started from; 0 when it started from seq 1.
    pub projection_snapshot_seq: u64,
    /// Events folded after the snapshot (all of them without one).
    pub n_events_folded: u64,
}

impl Store {
    /// Start-up's fold: the latest usable projection snapshot ([`read_for`]), then only the
    /// events after it; from seq 1 when there is none or it cannot be used (logged, never an
    /// error).
    /// # Errors
    /// As [`Store::fold`], for the events folded.
    pub fn fold_from_projection_snapshot(&self) -> Result<Folded, super::OpenError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        let path = projection_snapshot_path(self.path());
        let (start, snapshot_seq) = match read_for(&path, &txn) {
            Ok(snapshot) => (snapshot.state, snapshot.seq),
            Err(Unusable::Missing) => (State::default(), 0),
            Err(why) => {
                tracing::warn!(path = %path.display(), reason = %why, "the projection snapshot is not used; folding the log from seq 1");
                (State::default(), 0)
            }
        };
        let state = super::store::fold::fold_into(&txn, start, u64::MAX)?;
        Ok(Folded {
            n_events_folded: state.last_seq - snapshot_seq,
            state,
            projection_snapshot_seq: snapshot_seq,
        })
    }
}

/// A checkpoint's stored text: the digest with its digest version, so a build that digests
/// differently does not misreport (`byre rebuild --verify`).
pub(crate) fn checkpoint_text(digest: &str) -> String {
    format!("v{DIGEST_VERSION} {digest}")
}

/// The first line of `bytes` (without its `\n`, at most `max` bytes) and what follows it.
fn split_line(bytes: &[u8], max: usize) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().take(max + 1).position(|b| *b == b'\n')?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The temporary file a snapshot is written to before it is renamed over `snapshot`.
fn temporary_path(snapshot: &Path) -> PathBuf {
    snapshot.with_extension("snapshot.tmp")
}

/// Removes the `byre.snapshot.tmp` a server killed while writing a projection snapshot left
/// beside the log at `log_path`. Only the server holding `byre.lock` writes that file, so under
/// the lock it is always a leftover; without this it stayed until the next snapshot write
/// replaced it.
pub fn remove_leftover(log_path: &Path) {
    let tmp = temporary_path(&projection_snapshot_path(log_path));
    // A directory by that name is not byre's doing: left alone (the next snapshot write fails
    // and says so).
    if std::fs::symlink_metadata(&tmp).is_ok_and(|meta| !meta.is_dir()) {
        match std::fs::remove_file(&tmp) {
            Ok(()) => {
                tracing::warn!(path = %tmp.display(), "removed a half-written projection snapshot a killed server left")
            }
            Err(e) => {
                tracing::warn!(path = %tmp.display(), error = %e, "cannot remove a half-written projection snapshot a killed server left")
            }
        }
    }
}

/// Writes a snapshot of `encoded` (the state at `seq`, digest `digest`) at `path`, atomically:
/// a temporary file beside it, fsync'd, renamed over `path`, and the directory fsync'd.
/// # Errors
/// The file cannot be written, synced or renamed (the previous snapshot, if any, stays).
pub fn write(
    path: &Path,
    seq: u64,
    digest: &str,
    encoded: &persist::Encoded,
) -> std::io::Result<()> {
    let header = Header {
        fingerprint: FINGERPRINT.to_owned(),
        seq,
        digest: digest.to_owned(),
        state_bytes: encoded.state_json.len() as u64,
        bookkeeping_bytes: encoded.bookkeeping_json.len() as u64,
        bookkeeping_sha256: hex(&Sha256::digest(&encoded.bookkeeping_json)),
    };
    let tmp = temporary_path(path);
    let written = (|| -> std::io::Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        writeln!(file, "BYRESNAP {PROJECTION_SNAPSHOT_FORMAT}")?;
        serde_json::to_writer(&mut file, &header)?;
        file.write_all(b"\n")?;
        file.write_all(&encoded.state_json)?;
        file.write_all(&encoded.bookkeeping_json)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // A full disk, say: no half-written file is left beside the log.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

enum Msg {
    Committed(Vec<Event>),
    /// Record a last checkpoint and snapshot, then stop.
    Stop,
}

/// The thread that follows the writer's commits with a state of its own and records
/// checkpoints and snapshots from it (see the module's doc).
pub(crate) struct ProjectionSnapshotter {
    tx: SyncSender<Msg>,
    thread: std::thread::JoinHandle<()>,
}

impl ProjectionSnapshotter {
    /// Starts following from `state` (the log's fold, whose latest usable snapshot is at
    /// `snapshot_seq`, 0 for none). Sets `failed` when a checkpoint cannot be recorded (the
    /// log is then not written again until restart, as after a failed commit).
    pub(crate) fn start(
        store: Store,
        state: State,
        snapshot_seq: u64,
        failed: Arc<AtomicBool>,
    ) -> ProjectionSnapshotter {
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        let thread = std::thread::Builder::new()
            .name("byre-snapshots".into())
            .spawn(move || follow(rx, store, state, snapshot_seq, &failed))
            .expect("the OS lets us start a thread");
        ProjectionSnapshotter { tx, thread }
    }

    /// Hands over a committed batch (called by the writer thread after each group commit;
    /// waits only when [`QUEUE_BATCHES`] batches are already waiting).
    pub(crate) fn committed(&self, events: Vec<Event>) {
        let _ = self.tx.send(Msg::Committed(events));
    }

    /// Folds what was handed over, records a last checkpoint and snapshot (unless the log
    /// failed), and waits for the thread to end.
    pub(crate) fn stop(self) {
        let _ = self.tx.send(Msg::Stop);
        if self.thread.join().is_err() {
            tracing::error!("the snapshot thread panicked");
        }
    }
}

/// What the snapshotter has recorded so far.
struct Recorded {
    checkpoint_seq: u64,
    checkpoint_at: Instant,
    snapshot_seq: u64,
}

fn follow(
    rx: Receiver<Msg>,
    store: Store,
    mut state: State,
    snapshot_seq: u64,
    failed: &AtomicBool,
) {
    let path = projection_snapshot_path(store.path());
    let mut recorded = Recorded {
        checkpoint_seq: state.last_seq,
        checkpoint_at: Instant::now(),
        snapshot_seq,
    };
    // A start-up that folded many events (the first start of a build, or after a crash) saves
    // that work at once.
    if state.last_seq.saturating_sub(snapshot_seq) >= PROJECTION_SNAPSHOT_EVERY_EVENTS {
        record(&store, &path, &state, true, &mut recorded, failed);
    }
    loop {
        let behind = state.last_seq > recorded.checkpoint_seq;
        let wait = if behind {
            CHECKPOINT_IDLE_AFTER
        } else {
            Duration::from_secs(3600)
        };
        match rx.recv_timeout(wait) {
            Ok(Msg::Committed(events)) => {
                for e in &events {
                    state.apply(e);
                }
                if recorded.checkpoint_at.elapsed() >= CHECKPOINT_EVERY {
                    record(&store, &path, &state, false, &mut recorded, failed);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if behind {
                    record(&store, &path, &state, false, &mut recorded, failed);
                }
            }
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                if state.last_seq > recorded.checkpoint_seq
                    || state.last_seq > recorded.snapshot_seq
                {
                    record(&store, &path, &state, true, &mut recorded, failed);
                }
                return;
            }
        }
    }
}

/// Records a checkpoint of `state` and, when `force` or [`PROJECTION_SNAPSHOT_EVERY_EVENTS`] events came
/// since the last snapshot, writes a snapshot after it. Nothing once the log failed.
fn record(
    store: &Store,
    path: &Path,
    state: &State,
    force: bool,
    recorded: &mut Recorded,
    failed: &AtomicBool,
) {
    if failed.load(Ordering::Acquire) || state.last_seq == 0 {
        return;
    }
    let started = Instant::now();
    let encoded = persist::encode(state);
    let digest = digest_json(&encoded.state_json);
    let digested_ms = started.elapsed().as_secs_f64() * 1e3;
    let result = (|| -> Result<(), StoreError> {
        let mut txn = store.db.begin_write()?;
        txn.set_durability(redb::Durability::Immediate)?;
        txn.open_table(CHECKPOINTS)?
            .insert(state.last_seq, checkpoint_text(&digest).as_str())?;
        txn.commit()?;
        Ok(())
    })();
    if let Err(e) = result {
        tracing::error!(error = %e, "checkpoint failed; the writer stops until restart");
        failed.store(true, Ordering::Release);
        return;
    }
    recorded.checkpoint_seq = state.last_seq;
    recorded.checkpoint_at = Instant::now();
    if !force && state.last_seq - recorded.snapshot_seq < PROJECTION_SNAPSHOT_EVERY_EVENTS {
        tracing::debug!(seq = state.last_seq, digested_ms, "checkpoint recorded");
        return;
    }
    match write(path, state.last_seq, &digest, &encoded) {
        Ok(()) => {
            recorded.snapshot_seq = state.last_seq;
            tracing::info!(
                seq = state.last_seq,
                digested_ms,
                total_ms = started.elapsed().as_secs_f64() * 1e3,
                bytes = encoded.state_json.len() + encoded.bookkeeping_json.len(),
                "projection snapshot written"
            );
        }
        // Disposable: the next start folds more events, nothing else.
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot write the projection snapshot")
        }
    }
}

impl ReadOnlyStore {
    /// The projection snapshot beside this log, read and checked as start-up does
    /// ([`read_for`]).
    /// # Errors
    /// Why start-up would not use it.
    pub fn projection_snapshot(&self) -> Result<ProjectionSnapshot, Unusable> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| Unusable::Io(std::io::Error::other(e)))?;
        read_for(&projection_snapshot_path(&self.path), &txn)
    }
}

#[cfg(test)]
mod tests {
    use byre_projections::{persist, State};

    #[test]
    fn a_snapshot_that_cannot_be_put_in_place_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("byre.snapshot");
        let encoded = persist::encode(&State::default());
        super::write(&path, 0, "sha256:00", &encoded).unwrap();
        assert!(path.is_file());
        // A directory where the snapshot goes: the rename over it fails.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(super::write(&path, 0, "sha256:00", &encoded).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["byre.snapshot"]);
    }
}
