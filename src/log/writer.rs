//! The single writer: every command is decided here against the latest state, and concurrent
//! commands share one durable redb transaction (group commit).
//!
//! Loop (one OS thread, so redb never blocks the async workers):
//! 1. take the first waiting submission, then every other already waiting (up to
//!    [`MAX_GROUP`]);
//! 2. for each: `decide` against the writer's own state, fold its events and the derived
//!    `task.state` events into that state, write them (and any blob bytes) in the transaction;
//! 3. commit with `Durability::Immediate`, and hand the group to the publisher thread;
//! 4. (publisher thread, while the writer goes on with the next group) fold the same events
//!    into the shared query state, advance the head, publish the records, hand the events to
//!    the [`ProjectionSnapshotter`] (checkpoints and projection snapshots are made there, never on the
//!    writer's thread), and only then answer each caller. Groups are published in commit
//!    order, so the head and the fan-out only ever move forward.
//!
//! A failure after step 2 began leaves the writer's state ahead of the durable log, so the
//! writer stops: every later submission gets [`SubmitError::Unavailable`] until a restart
//! refolds the log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use byre_projections::{decide, derived_events, Command, DecideCtx, Event, Rejection, State};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::bus::Bus;
use super::projection_snapshot::{Folded, ProjectionSnapshotter};
use super::store::{
    Record, Store, StoreError, StoredEvent, BLOBS, EVENTS, LEAD_EVENTS, TASK_EVENTS,
};

/// Most submissions folded into one transaction.
pub const MAX_GROUP: usize = 512;
/// Submissions waiting for the writer before `submit` waits for room (bounded queue).
pub const QUEUE_CAPACITY: usize = 16_384;

/// What a successful submission committed.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The command's events (derived ones included), durable, in seq order. Empty when the
    /// command changed nothing (e.g. an existing user).
    pub events: Vec<Event>,
}

/// Why a submission was not committed.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// `decide` refused it; nothing was written.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The writer stopped after a storage error (the outcome of the failed batch is unknown) or
    /// is shutting down. Answered as 503.
    #[error("the event log is not accepting writes: {0}")]
    Unavailable(String),
}

// A submission is moved into the channel once; boxing it would add an allocation per command.
#[allow(clippy::large_enum_variant)]
enum Msg {
    Submit(Submission),
    /// Finish what is queued before this, write a checkpoint, stop.
    Stop,
}

struct Submission {
    cmd: Command,
    attachment: Option<Bytes>,
    reply: oneshot::Sender<Result<Ack, SubmitError>>,
}

/// The handle every command goes through. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Msg>,
    state: Arc<RwLock<State>>,
    bus: Bus,
    head: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
    store: Store,
    stats: super::stats::CommitStats,
    startup: StartupFold,
}

/// How start-up folded the log (for `GET /metrics`).
#[derive(Debug, Clone, Copy, Default)]
pub struct StartupFold {
    /// Seq of the projection snapshot start-up began from; 0 when it folded from seq 1.
    pub projection_snapshot_seq: u64,
    /// Events folded at start-up (those after the snapshot).
    pub n_events_folded: u64,
}

/// Owns the writer thread; [`WriterThread::join`] waits for it after the last handle dropped.
pub struct WriterThread(std::thread::JoinHandle<()>);

impl WriterThread {
    /// Waits for the thread to drain its queue, write a final checkpoint and projection
    /// snapshot, and stop.
    pub fn join(self) {
        if self.0.join().is_err() {
            tracing::error!("the writer thread panicked");
        }
    }
}

impl Writer {
    /// Starts the writer over `store`, whose log folds to `state` (folded from seq 1), with the
    /// default bound of the live fan-out ([`super::bus::DEFAULT_LIMIT_BYTES`]).
    pub fn start(store: Store, state: State) -> (Writer, WriterThread) {
        let folded = Folded {
            projection_snapshot_seq: 0,
            n_events_folded: state.n_events,
            state,
        };
        Writer::start_with(store, folded, super::bus::DEFAULT_LIMIT_BYTES, false)
    }

    /// Starts the writer over `store`, whose log folds to `folded.state`
    /// ([`Store::fold_from_projection_snapshot`]); the live fan-out to subscribers holds at most
    /// `stream_bytes` of records (see [`super::bus`]); every command is decided with
    /// `reviews_on`, whether this server reviews snapshots (`DecideCtx::reviews_on`).
    pub fn start_with(
        store: Store,
        folded: Folded,
        stream_bytes: usize,
        reviews_on: bool,
    ) -> (Writer, WriterThread) {
        let Folded {
            state,
            projection_snapshot_seq,
            n_events_folded,
        } = folded;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let bus = Bus::new(stream_bytes, state.last_seq);
        let head = Arc::new(AtomicU64::new(state.last_seq));
        let shared = Arc::new(RwLock::new(state.clone()));
        let failed = Arc::new(AtomicBool::new(false));
        let stats = super::stats::CommitStats::default();
        let snapshotter = ProjectionSnapshotter::start(
            store.clone(),
            state.clone(),
            projection_snapshot_seq,
            failed.clone(),
        );
        let writer = Writer {
            tx,
            state: shared.clone(),
            bus: bus.clone(),
            head: head.clone(),
            failed: failed.clone(),
            store: store.clone(),
            stats: stats.clone(),
            startup: StartupFold {
                projection_snapshot_seq,
                n_events_folded,
            },
        };
        let thread = std::thread::Builder::new()
            .name("byre-writer".into())
            .spawn(move || {
                run(
                    rx,
                    store,
                    state,
                    WriterSide {
                        failed,
                        stats,
                        reviews_on,
                    },
                    Outputs {
                        shared,
                        bus,
                        head,
                        snapshotter,
                    },
                )
            })
            .expect("the OS lets us start a thread");
        (writer, WriterThread(thread))
    }

    /// Decides and appends one command, with optional blob bytes stored under the command's
    /// SHA-256. Returns only after the transaction holding its events committed durably, so the
    /// caller may acknowledge.
    /// # Errors
    /// `Rejected` when `decide` refuses it; `Unavailable` when the writer has stopped (a
    /// failed commit: the outcome of that batch is unknown until restart) or is shutting down.
    pub async fn submit(
        &self,
        cmd: Command,
        attachment: Option<Bytes>,
    ) -> Result<Ack, SubmitError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(SubmitError::Unavailable(
                "a previous commit failed; restart byre".into(),
            ));
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Submit(Submission {
                cmd,
                attachment,
                reply,
            }))
            .await
            .map_err(|_| SubmitError::Unavailable("the writer has stopped".into()))?;
        rx.await
            .map_err(|_| SubmitError::Unavailable("the writer has stopped".into()))?
    }

    /// Reads the shared state (the fold of every committed event). Keep the closure short: the
    /// writer waits for it to fold the next batch.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        f(&state)
    }

    /// Seq of the last committed event.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// The live fan-out of committed records (read by `log::subscription`).
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Asks the writer thread to stop after what is already queued; later submissions get
    /// `Unavailable`. Join the [`WriterThread`] to wait for it.
    pub async fn stop(&self) {
        let _ = self.tx.send(Msg::Stop).await;
    }

    /// The store, for reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The writer's group-commit figures (for `GET /metrics`).
    pub fn stats(&self) -> &super::stats::CommitStats {
        &self.stats
    }

    /// How start-up folded the log (for `GET /metrics`).
    pub fn startup(&self) -> StartupFold {
        self.startup
    }
}

/// What the publisher thread updates after each group commit, shared with the [`Writer`]
/// handles.
struct Outputs {
    shared: Arc<RwLock<State>>,
    bus: Bus,
    head: Arc<AtomicU64>,
    snapshotter: ProjectionSnapshotter,
}

/// What the writer thread keeps for itself (and shares with the handles).
struct WriterSide {
    failed: Arc<AtomicBool>,
    stats: super::stats::CommitStats,
    /// The server setting every command is decided with.
    reviews_on: bool,
}

/// A committed group on its way from the writer thread to the publisher thread: each
/// submission's reply and outcome, in submission order.
struct Committed {
    replies: Vec<oneshot::Sender<Result<Ack, SubmitError>>>,
    outcomes: Vec<Result<Vec<Event>, Rejection>>,
}

/// Committed groups waiting for the publisher before the writer waits for room. Small: the
/// publisher's work per group is a fraction of a commit's.
const PUBLISH_QUEUE: usize = 64;

fn run(rx: mpsc::Receiver<Msg>, store: Store, state: State, side: WriterSide, out: Outputs) {
    let (tx, publish_rx) = std::sync::mpsc::sync_channel::<Committed>(PUBLISH_QUEUE);
    let publisher = std::thread::Builder::new()
        .name("byre-publish".into())
        .spawn(move || {
            for group in publish_rx {
                publish(&out, group);
            }
            out.bus.close();
            // The last checkpoint and snapshot, from the snapshotter's state (the committed
            // events).
            out.snapshotter.stop();
        })
        .expect("the OS lets us start a thread");
    run_loop(rx, &store, state, &side, &tx);
    drop(tx);
    if publisher.join().is_err() {
        tracing::error!("the publisher thread panicked");
    }
}

/// Step 4 of the loop, on the publisher thread so that the writer commits the next group
/// meanwhile: the shared state, the head, the fan-out and the snapshotter learn of the
/// group's events, and only then is each caller answered (a caller that reads after its ack
/// sees its events).
fn publish(out: &Outputs, group: Committed) {
    let committed: Vec<&Event> = group
        .outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .flatten()
        .collect();
    if let Some(last) = committed.last() {
        let last_seq = last.seq;
        let records: Vec<Arc<Record>> = committed
            .iter()
            .map(|e| Arc::new(Record::from_stored(&StoredEvent::from_event(e))))
            .collect();
        {
            let mut live = out.shared.write().unwrap_or_else(|e| e.into_inner());
            for e in &committed {
                live.apply(e);
            }
        }
        out.head.store(last_seq, Ordering::Release);
        out.bus.publish(records);
        out.snapshotter
            .committed(committed.iter().map(|e| (*e).clone()).collect());
    }
    for (reply, outcome) in group.replies.into_iter().zip(group.outcomes) {
        let _ = reply.send(
            outcome
                .map(|events| Ack { events })
                .map_err(SubmitError::from),
        );
    }
}

fn run_loop(
    mut rx: mpsc::Receiver<Msg>,
    store: &Store,
    mut state: State,
    side: &WriterSide,
    publish_tx: &std::sync::mpsc::SyncSender<Committed>,
) {
    let WriterSide {
        failed,
        stats,
        reviews_on,
    } = side;
    let mut stopping = false;
    while !stopping {
        let Some(first) = rx.blocking_recv() else {
            break;
        };
        let mut group = Vec::new();
        match first {
            Msg::Submit(s) => group.push(s),
            Msg::Stop => break,
        }
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(Msg::Submit(s)) => group.push(s),
                Ok(Msg::Stop) => {
                    stopping = true;
                    break;
                }
                Err(_) => break,
            }
        }
        if failed.load(Ordering::Acquire) {
            for s in group {
                let _ = s.reply.send(Err(SubmitError::Unavailable(
                    "a previous commit failed; restart byre".into(),
                )));
            }
            continue;
        }
        let span = tracing::debug_span!(
            "writer_batch",
            n_commands = group.len(),
            n_events = tracing::field::Empty,
            first_seq = tracing::field::Empty,
            last_seq = tracing::field::Empty,
            commit_ms = tracing::field::Empty
        );
        let _enter = span.enter();
        let first_seq = state.last_seq + 1;
        let started = Instant::now();
        match write_group(store, &mut state, &group, *reviews_on) {
            Ok(outcomes) => {
                let n_events = outcomes
                    .iter()
                    .filter_map(|o| o.as_ref().ok())
                    .map(Vec::len)
                    .sum::<usize>();
                stats.record(group.len(), n_events, started.elapsed().as_secs_f64());
                span.record("n_events", n_events);
                span.record("first_seq", first_seq);
                span.record("last_seq", state.last_seq);
                let replies = group.into_iter().map(|s| s.reply).collect();
                if publish_tx.send(Committed { replies, outcomes }).is_err() {
                    // Only if the publisher panicked: nobody can be answered any more.
                    tracing::error!("the publisher thread is gone; the writer stops");
                    failed.store(true, Ordering::Release);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "commit failed: the batch's outcome is unknown; the writer stops until restart");
                failed.store(true, Ordering::Release);
                for s in group {
                    let _ = s.reply.send(Err(SubmitError::Unavailable(
                        "the event log could not commit; restart byre".into(),
                    )));
                }
                continue;
            }
        }
    }
    // Refuse whatever is still queued; once closed, later submissions fail to send and are
    // told the writer has stopped (not that a commit failed: none did).
    rx.close();
    while let Ok(msg) = rx.try_recv() {
        if let Msg::Submit(s) = msg {
            let _ = s.reply.send(Err(SubmitError::Unavailable(
                "byre is shutting down".into(),
            )));
        }
    }
}

/// Decides every submission of the group and writes the accepted ones in one transaction.
/// Returns each submission's outcome; `Err(StoreError)` when the transaction failed (the
/// writer's state is then ahead of the log and must not be used again).
fn write_group(
    store: &Store,
    state: &mut State,
    group: &[Submission],
    reviews_on: bool,
) -> Result<Vec<Result<Vec<Event>, Rejection>>, StoreError> {
    let started = Instant::now();
    let mut txn = store.db.begin_write()?;
    // Persistent once commit returns: the acknowledgement rule (ARCHITECTURE.md "Durability").
    txn.set_durability(redb::Durability::Immediate)?;
    let mut outcomes = Vec::with_capacity(group.len());
    {
        let mut events_table = txn.open_table(EVENTS)?;
        let mut index = txn.open_table(TASK_EVENTS)?;
        let mut lead_index = txn.open_table(LEAD_EVENTS)?;
        let mut blobs = txn.open_table(BLOBS)?;
        let now_us = chrono::Utc::now().timestamp_micros();
        for s in group {
            let ctx = DecideCtx {
                now_us,
                seed: uuid::Uuid::new_v4().as_u128(),
                reviews_on,
            };
            let new_events = match decide(state, &s.cmd, &ctx) {
                Ok(evs) => evs,
                Err(rejection) => {
                    outcomes.push(Err(rejection));
                    continue;
                }
            };
            let mut committed = Vec::with_capacity(new_events.len() + 1);
            for ne in new_events {
                let e = ne.commit(state.last_seq + 1, now_us);
                state.apply(&e);
                committed.push(e);
            }
            for ne in derived_events(state, &committed) {
                let e = ne.commit(state.last_seq + 1, now_us);
                state.apply(&e);
                committed.push(e);
            }
            for e in &committed {
                events_table.insert(e.seq, StoredEvent::from_event(e).encode().as_slice())?;
                if let Some(task_id) = &e.task_id {
                    index.insert((task_id.as_str(), e.seq), ())?;
                }
                // A user's lead events: owned, of a session (`app::events::EventFilter`).
                if let (Some(owner), Some(_)) = (&e.owner, &e.agent_session_id) {
                    lead_index.insert((owner.as_str(), e.seq), ())?;
                }
            }
            if let (
                Some(bytes),
                Command::UploadBlob { sha256, .. } | Command::StoreOutputBlob { sha256, .. },
            ) = (&s.attachment, &s.cmd)
            {
                blobs.insert(sha256.as_str(), bytes.as_ref())?;
            }
            outcomes.push(Ok(committed));
        }
    }
    txn.commit()?;
    tracing::Span::current().record("commit_ms", started.elapsed().as_secs_f64() * 1e3);
    Ok(outcomes)
}
