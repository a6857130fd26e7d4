//! byre-log: the event log on redb: the only code that opens a redb write transaction or assigns a seq.
//!
//! - [`store`]: the redb file, its tables, the stored envelope, reading, and the fold
//!   (`store::fold`: decoding on a second thread while the caller applies).
//! - [`writer`]: the single writer thread: decide, group commit, fold, publish.
//! - [`bus`]: the live fan-out of committed records, bounded in bytes.
//! - [`subscription`]: replay from a seq, then follow live, never skipping.
//! - [`projection_snapshot`]: checkpoints and projection snapshots, made off the writer thread; start-up
//!   folds only the events after the latest usable snapshot.
//! - [`stats`]: the writer's group-commit figures for `GET /metrics`.
//!
//! Durability: an event is acknowledged only after the redb transaction holding it committed
//! with `Durability::Immediate` (fsync'd). A commit error leaves the outcome unknown: the writer
//! stops accepting (callers get 503) and a restart refolds the log.

#![warn(missing_docs)]

pub mod bus;
pub mod projection_snapshot;
pub mod stats;
pub mod store;
pub mod subscription;
pub mod writer;

pub use projection_snapshot::Folded;
pub use store::{OpenError, Record, Store, StoreError};
pub use writer::{Ack, StartupFold, SubmitError, Writer};

/// Formats microseconds since the Unix epoch as RFC 3339 UTC with microseconds, e.g.
/// `2026-11-29T21:55:07.123456Z`: the `created_at` of an event's JSON (the SSE frame the
/// store builds once per record), and every time the API shows.
pub fn rfc3339(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
