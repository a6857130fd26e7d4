//! The memory floor: an agent process starts only while the machine's available memory is at
//! or above it (`serve --agent-memory-floor`). A start that finds it below, or finds others
//! waiting, joins a queue (first come, first started), records `session.process_deferred` once
//! so its task shows why, and looks again every `admission_poll`; the queue's head starts as
//! soon as the memory is back above the floor, and a start that waited never sooner than a
//! poll after the previous admission, so each new process has a moment to take its memory
//! before the figure admits the next.
//!
//! The figure is Linux's `MemAvailable` (`/proc/meminfo`, or the file `AgentLimits::meminfo`
//! names, so tests can set it); where the file cannot be read (macOS) every start is admitted.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use byre_projections::sessions::ProcessDeferred;
use byre_projections::Command;

use super::Runtime;

/// The waiting starts and what admits them. One per runtime.
#[derive(Debug)]
pub(crate) struct Admission {
    /// Bytes of available memory a start needs; 0: every start is admitted at once.
    floor_bytes: u64,
    /// The `/proc/meminfo`-shaped file read for `MemAvailable`.
    meminfo: PathBuf,
    /// How often a waiting start looks again.
    poll: Duration,
    /// Tickets of the waiting starts, oldest first.
    queue: Mutex<VecDeque<u64>>,
    /// The next ticket's number.
    next_ticket: AtomicU64,
    /// When the last start was admitted: one that waited starts at least `poll` after it, so
    /// the process before it has a moment to take its memory before the figure is trusted.
    last_admitted: Mutex<Option<std::time::Instant>>,
}

/// How a start's wait for memory ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// The process may start.
    Admitted,
    /// byre stops: the start is dropped and the log keeps its turn running (the next start
    /// of byre resumes it).
    Stopping,
    /// The session ended (its task closed) or is unknown: nothing is to start.
    Gone,
    /// A human interrupted the turn the process was to run.
    Interrupted,
}

/// A place in the queue; leaving it (admitted, given up, or the waiting future dropped)
/// removes it.
struct Ticket<'a> {
    admission: &'a Admission,
    n: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut queue = self.admission.lock();
        queue.retain(|t| *t != self.n);
    }
}

impl Admission {
    /// The admission of `limits`.
    pub(crate) fn new(limits: &crate::AgentLimits) -> Admission {
        if limits.memory_floor_bytes > 0 && mem_available_bytes(&limits.meminfo).is_none() {
            // Agents then start as if there were enough: say so once, at start-up.
            tracing::warn!(
                meminfo = %limits.meminfo.display(),
                "cannot read MemAvailable: the agent memory floor is not enforced"
            );
        }
        Admission {
            floor_bytes: limits.memory_floor_bytes,
            meminfo: limits.meminfo.clone(),
            poll: limits.admission_poll.max(Duration::from_millis(10)),
            queue: Mutex::new(VecDeque::new()),
            next_ticket: AtomicU64::new(1),
            last_admitted: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<u64>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the queue's end; with how many wait ahead.
    fn join(&self) -> (Ticket<'_>, u64) {
        let n = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        let mut queue = self.lock();
        let ahead = queue.len() as u64;
        queue.push_back(n);
        (Ticket { admission: self, n }, ahead)
    }

    /// Whether `ticket` heads the queue.
    fn heads(&self, ticket: &Ticket<'_>) -> bool {
        self.lock().front() == Some(&ticket.n)
    }

    /// Admits the start holding `ticket` if it heads the queue and, for one that `waited`,
    /// the last admission is at least a poll ago; remembers when.
    fn try_admit(&self, ticket: &Ticket<'_>, waited: bool) -> bool {
        let mut last = self.last_admitted.lock().unwrap_or_else(|e| e.into_inner());
        let spaced = !waited || last.is_none_or(|t| t.elapsed() >= self.poll);
        if spaced && self.heads(ticket) {
            *last = Some(std::time::Instant::now());
            return true;
        }
        false
    }

    /// The machine's available memory in bytes; `None` when it cannot be read.
    fn available_bytes(&self) -> Option<u64> {
        mem_available_bytes(&self.meminfo)
    }

    /// Starts waiting now (the floor is on), not counting the caller.
    pub(crate) fn n_waiting(&self) -> usize {
        self.lock().len()
    }
}

/// `MemAvailable` of a `/proc/meminfo`-shaped file, in bytes; `None` when the file cannot be
/// read or has no such line.
pub(crate) fn mem_available_bytes(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_mem_available(&text)
}

/// The `MemAvailable:  123456 kB` line of a meminfo text, in bytes.
fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    let factor = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    n.checked_mul(factor)
}

impl Runtime {
    /// Waits until the session's process may start (see the module's doc). Records
    /// `session.process_deferred` once when it has to wait.
    pub(crate) async fn admit(&self, session_id: &str) -> Admit {
        let admission = &self.admission;
        if admission.floor_bytes == 0 {
            return Admit::Admitted;
        }
        let (ticket, n_ahead) = admission.join();
        let mut deferred = false;
        loop {
            let available = admission.available_bytes();
            let enough = available.is_none_or(|a| a >= admission.floor_bytes);
            if enough && admission.try_admit(&ticket, deferred) {
                if deferred {
                    tracing::info!(
                        session_id,
                        "memory is back above the floor: the agent starts"
                    );
                }
                return Admit::Admitted;
            }
            if !deferred {
                deferred = true;
                let available_bytes = available.unwrap_or(0);
                tracing::warn!(
                    session_id,
                    available_bytes,
                    floor_bytes = admission.floor_bytes,
                    n_ahead,
                    "an agent process waits for memory"
                );
                self.record(Command::RecordProcessDeferred {
                    session_id: session_id.into(),
                    deferred: ProcessDeferred {
                        available_bytes,
                        floor_bytes: admission.floor_bytes,
                        n_ahead,
                    },
                })
                .await;
            }
            tokio::time::sleep(admission.poll).await;
            if self.stopping.load(Ordering::Relaxed) {
                return Admit::Stopping;
            }
            let (known, completed, interrupted) = self.writer.read(|s| {
                s.sessions
                    .get(session_id)
                    .map_or((false, false, false), |x| {
                        (true, x.completed, x.turn_running && x.interrupt_requested)
                    })
            });
            if !known || completed {
                return Admit::Gone;
            }
            if interrupted {
                return Admit::Interrupted;
            }
        }
    }

    /// Ends, as interrupted, the running turn of a session whose process never started (a
    /// human interrupted it while it waited for memory), as its CLI would have.
    pub(crate) async fn end_turn_unstarted(&self, session_id: &str) {
        let Some(turn) = self.writer.read(|s| {
            s.sessions
                .get(session_id)
                .filter(|x| x.turn_running)
                .map(|x| x.turns)
        }) else {
            return;
        };
        let ended = byre_projections::sessions::TurnEnded::by_byre(
            turn,
            byre_projections::sessions::TurnOutcome::Interrupted,
            "interrupted before the agent started: it was waiting for memory".into(),
        );
        self.record(Command::RecordVendorOutput {
            session_id: session_id.into(),
            items: vec![byre_projections::sessions::VendorItem::TurnEnded(ended)],
        })
        .await;
    }

    /// Agent starts waiting for memory now.
    pub fn n_waiting_for_memory(&self) -> usize {
        self.admission.n_waiting()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes_from_its_meminfo_line() {
        let text = "MemTotal:       24683440 kB\nMemFree:          679172 kB\nMemAvailable:   23218756 kB\nBuffers:  1 kB\n";
        assert_eq!(parse_mem_available(text), Some(23218756 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: 12 MB\n"), None);
        assert_eq!(mem_available_bytes(Path::new("/nonexistent/meminfo")), None);
    }

    #[test]
    fn the_queue_admits_in_arrival_order_and_a_dropped_ticket_leaves_it() {
        let limits = crate::AgentLimits {
            memory_floor_bytes: 1,
            ..Default::default()
        };
        let admission = Admission::new(&limits);
        let (first, ahead_first) = admission.join();
        let (second, ahead_second) = admission.join();
        let (third, ahead_third) = admission.join();
        assert_eq!((ahead_first, ahead_second, ahead_third), (0, 1, 2));
        assert!(admission.heads(&first) && !admission.heads(&second));
        drop(second);
        assert_eq!(admission.n_waiting(), 2);
        drop(first);
        assert!(
            admission.heads(&third),
            "the one after the admitted heads it"
        );
        drop(third);
        assert_eq!(admission.n_waiting(), 0);
    }

    #[test]
    fn a_start_that_waited_is_admitted_no_sooner_than_a_poll_after_the_last() {
        let limits = crate::AgentLimits {
            memory_floor_bytes: 1,
            admission_poll: Duration::from_secs(3600),
            ..Default::default()
        };
        let admission = Admission::new(&limits);
        let (first, _) = admission.join();
        let (second, _) = admission.join();
        assert!(!admission.try_admit(&second, false), "not its turn");
        assert!(admission.try_admit(&first, true), "no admission before it");
        drop(first);
        assert!(
            !admission.try_admit(&second, true),
            "the first has had no time to take its memory"
        );
        assert!(
            admission.try_admit(&second, false),
            "one that never waited is not spaced"
        );
    }
}
