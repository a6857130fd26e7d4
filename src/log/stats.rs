//! The writer's figures for `GET /metrics`: group commits (how many, how many commands and
//! events each held, how long each took to commit durably). Kept in prometheus-client metrics,
//! which are cheap to record (atomics; a histogram takes a short lock) and shared by cloning.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// What the writer thread records per group commit. Cloning shares the same metrics.
#[derive(Clone, Debug)]
pub struct CommitStats {
    /// Events appended by this server since it started.
    pub events: Counter,
    /// Group commits written since start.
    pub commits: Counter,
    /// Commands per group commit (accepted and refused alike).
    pub group_commands: Histogram,
    /// Seconds from the start of a group's transaction to its durable commit.
    pub commit_seconds: Histogram,
}

impl Default for CommitStats {
    fn default() -> Self {
        CommitStats {
            events: Counter::default(),
            commits: Counter::default(),
            // 1, 2, 4, … 512 commands (the writer groups at most MAX_GROUP).
            group_commands: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            // 0.25 ms … ~4 s.
            commit_seconds: Histogram::new(exponential_buckets(0.000_25, 2.0, 15)),
        }
    }
}

impl CommitStats {
    /// Records one group commit of `commands` commands that appended `events` events in
    /// `seconds`.
    pub fn record(&self, commands: usize, events: usize, seconds: f64) {
        self.commits.inc();
        self.events.inc_by(events as u64);
        self.group_commands.observe(commands as f64);
        self.commit_seconds.observe(seconds);
    }
}
