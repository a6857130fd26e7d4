//! The live fan-out of committed records, bounded in bytes.
//!
//! The writer pushes each committed [`Record`] (its SSE frame serialized once) into one ring
//! shared by every subscriber. The ring holds at most `limit` bytes of frames: past that the
//! oldest records are dropped *from the ring*, never from a subscriber's view, since a
//! subscriber whose next seq is no longer in the ring reads it from the log instead
//! (`log::subscription`). So what byre holds for all event streams together is the ring plus,
//! per subscriber, the one chunk it is handing over — however many subscribers there are and
//! however slowly they read; and with nobody reading, the ring alone. Chunks read from the log
//! are shared too: readers replaying the same seqs hold the same records, and what all of them
//! hold from the log is kept within the same bound (`log::subscription::CatchUp`).
//!
//! Waking: the head seq of the ring is published on a `watch` channel; a subscriber that has
//! delivered everything up to it waits for the next change.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::Record;

/// Default byte bound of the ring (`serve --stream-buffer`).
pub const DEFAULT_LIMIT_BYTES: usize = 64 * 1024 * 1024;

/// Bytes a subscriber takes from the ring or the log at a time (at least one record).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// What a subscriber finds when it asks for records from a seq on.
pub enum Take {
    /// Records from the seq asked for on, in order, contiguous, at least one.
    Records(Vec<Arc<Record>>),
    /// The seq asked for is no longer (or not yet) in the ring although it is committed, up to
    /// this seq: read it from the log.
    FromLog {
        /// The last seq the ring has published (all of it is in the log).
        head: u64,
    },
    /// Nothing after the seq asked for has been published yet: wait.
    Wait,
}

struct Ring {
    records: VecDeque<Arc<Record>>,
    bytes: usize,
    /// Seq of the last record pushed (0 before the first).
    head: u64,
    closed: bool,
}

/// The ring and its wake-up channel. Cheap to clone.
#[derive(Clone)]
pub struct Bus {
    ring: Arc<Mutex<Ring>>,
    limit: usize,
    head_tx: Arc<watch::Sender<u64>>,
    /// The records read from the log for readers behind the ring, shared while any holds
    /// them (`log::subscription`), within the same byte bound.
    catch_up: Arc<CatchUp>,
}

impl Bus {
    /// An empty ring of at most `limit` bytes whose log ends at `head`.
    pub fn new(limit: usize, head: u64) -> Bus {
        let (head_tx, _) = watch::channel(head);
        Bus {
            ring: Arc::new(Mutex::new(Ring {
                records: VecDeque::new(),
                bytes: 0,
                head,
                closed: false,
            })),
            limit,
            head_tx: Arc::new(head_tx),
            catch_up: Arc::new(CatchUp::new(limit)),
        }
    }

    /// The shared catch-up reads from the log.
    pub fn catch_up(&self) -> &CatchUp {
        &self.catch_up
    }

    /// The byte bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes committed records (in seq order, after what was published before), dropping
    /// the oldest records of the ring until it fits its bound again (the newest always stays).
    pub fn publish(&self, records: Vec<Arc<Record>>) {
        let Some(last) = records.last().map(|r| r.seq) else {
            return;
        };
        {
            let mut ring = self.lock();
            for r in records {
                ring.bytes += r.size();
                ring.records.push_back(r);
            }
            while ring.bytes > self.limit && ring.records.len() > 1 {
                if let Some(old) = ring.records.pop_front() {
                    ring.bytes -= old.size();
                }
            }
            ring.head = last;
        }
        self.head_tx.send_replace(last);
    }

    /// Marks the end of publishing (the writer stopped): subscribers end once caught up.
    pub fn close(&self) {
        self.lock().closed = true;
        let head = *self.head_tx.borrow();
        self.head_tx.send_replace(head);
    }

    /// A receiver that changes whenever records are published or the bus closes.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.head_tx.subscribe()
    }

    /// Whether the bus is closed and holds nothing at or after `next`.
    pub fn finished(&self, next: u64) -> bool {
        let ring = self.lock();
        ring.closed && next > ring.head
    }

    /// Records from `next` on, at most [`CHUNK_BYTES`] of them (at least one).
    pub fn take(&self, next: u64) -> Take {
        let ring = self.lock();
        if next > ring.head {
            return Take::Wait;
        }
        let Some(first) = ring.records.front().map(|r| r.seq) else {
            return Take::FromLog { head: ring.head };
        };
        if next < first {
            return Take::FromLog { head: ring.head };
        }
        // Seqs in the ring are contiguous: the record for `next` is at `next - first`.
        let start = usize::try_from(next - first).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut bytes = 0;
        for r in ring.records.iter().skip(start) {
            if !out.is_empty() && bytes + r.size() > CHUNK_BYTES {
                break;
            }
            bytes += r.size();
            out.push(r.clone());
        }
        if out.is_empty() {
            Take::Wait
        } else {
            Take::Records(out)
        }
    }

    /// (records, bytes) held in the ring now.
    pub fn usage(&self) -> (usize, usize) {
        let ring = self.lock();
        (ring.records.len(), ring.bytes)
    }
}

/// Parses a byte size: a number with an optional `KiB`, `MiB` or `GiB` suffix (or `K`, `M`,
/// `G`; powers of 1024), e.g. `64MiB`.
/// # Errors
/// A message for the user when it is not such a size, or is 0.
pub fn parse_size(text: &str) -> Result<usize, String> {
    match parse_size_or_zero(text)? {
        0 => Err(format!("`{text}`: the size must be above 0")),
        v => Ok(v),
    }
}

/// As [`parse_size`], with 0 (in any unit) allowed.
/// # Errors
/// A message for the user when it is not such a size.
pub fn parse_size_or_zero(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 64MiB)"))?;
    let factor: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1024,
        "M" | "MiB" => 1024 * 1024,
        "G" | "GiB" => 1024 * 1024 * 1024,
        _ => return Err(format!("`{text}`: the unit is one of B, KiB, MiB, GiB")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// The records read from the log for catch-up, shared by every reader while any of them
/// holds one: many readers replaying the same seqs (a page load of every browser after a
/// restart, `after=0`) hold one copy of each record and its encoded SSE frame, not one
/// each. Entries are weak: a record no reader holds any more is freed and forgotten. What
/// they hold together is at most `budget` bytes (plus one chunk: a load may start while
/// under it), so many readers far behind cannot hold more than that, however large their
/// records (DESIGN.md invariant 10).
pub struct CatchUp {
    held: std::sync::Mutex<std::collections::BTreeMap<u64, (std::sync::Weak<Record>, usize)>>,
    pub(crate) loading: tokio::sync::Mutex<()>,
    pub(crate) budget: usize,
}

impl CatchUp {
    /// Shared reads bounded by `budget` bytes in total.
    pub fn new(budget: usize) -> CatchUp {
        CatchUp {
            held: Default::default(),
            loading: tokio::sync::Mutex::new(()),
            budget,
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u64, (std::sync::Weak<Record>, usize)>>
    {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Held records from `from` on (up to `to`), contiguous, at most [`CHUNK_BYTES`] (at
    /// least one); `None` when no reader holds `from`.
    pub(crate) fn held(&self, from: u64, to: u64) -> Option<Vec<Arc<Record>>> {
        let held = self.lock();
        let mut out: Vec<Arc<Record>> = Vec::new();
        let mut bytes = 0;
        for (seq, (weak, size)) in held.range(from..=to) {
            let expected = out.last().map_or(from, |r| r.seq + 1);
            if *seq != expected || (!out.is_empty() && bytes + size > CHUNK_BYTES) {
                break;
            }
            let Some(r) = weak.upgrade() else { break };
            bytes += size;
            out.push(r);
        }
        (!out.is_empty()).then_some(out)
    }

    /// Remembers a chunk just read, for the readers after.
    pub(crate) fn keep(&self, chunk: &[Arc<Record>]) {
        let mut held = self.lock();
        for r in chunk {
            held.insert(r.seq, (Arc::downgrade(r), r.size()));
        }
    }

    /// Bytes of the records some reader still holds; forgets the others.
    pub fn live_bytes(&self) -> usize {
        let mut held = self.lock();
        held.retain(|_, (weak, _)| weak.strong_count() > 0);
        held.values().map(|(_, size)| size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredEvent;

    fn record(seq: u64, payload_bytes: usize) -> Arc<Record> {
        Arc::new(Record::from_stored(&StoredEvent {
            format: 1,
            seq,
            created_at_us: 0,
            kind: "user.updated".into(),
            project_id: None,
            task_id: None,
            agent_session_id: None,
            owner: None,
            actor: "ada".into(),
            payload: format!("{{\"x\":\"{}\"}}", "a".repeat(payload_bytes)),
        }))
    }

    #[test]
    fn the_ring_keeps_at_most_its_bound_and_sends_older_seqs_to_the_log() {
        let one = record(1, 1000).size();
        // Room for three (seq 10 has one more digit than seq 1).
        let bus = Bus::new(3 * one + 16, 0);
        bus.publish((1..=10).map(|s| record(s, 1000)).collect());
        let (n, bytes) = bus.usage();
        assert_eq!(n, 3);
        assert!(bytes <= 3 * one + 16);
        assert!(matches!(bus.take(1), Take::FromLog { head: 10 }));
        match bus.take(8) {
            Take::Records(rs) => {
                assert_eq!(rs.iter().map(|r| r.seq).collect::<Vec<_>>(), [8, 9, 10])
            }
            _ => panic!("seq 8 is in the ring"),
        }
        assert!(matches!(bus.take(11), Take::Wait));
    }

    #[test]
    fn a_record_larger_than_the_bound_still_passes() {
        let bus = Bus::new(10, 0);
        bus.publish(vec![record(1, 100)]);
        assert!(matches!(bus.take(1), Take::Records(ref rs) if rs.len() == 1));
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("64MB").is_err());
        assert!(parse_size("lots").is_err());
    }
}
