//! byre's benchmarks (figures and how to run them: bench/README.md).
//!
//! - `append`: durable appends through `byre::log::Writer` (group commit), N producers.
//! - `plain-redb`: the same with raw redb 4.6 (one commit per insert, or a simple group
//!   commit thread), the baseline.
//! - `rebuild`: `Store::open` + `Store::fold` of a large log, with a breakdown and the plain
//!   redb scan baseline.
//! - `fanout`: the real server, C raw SSE clients, R events/s; commit-to-client latency.

mod append;
mod batches;
mod fanout;
mod gen;
mod http;
mod plain;
mod proto;
mod rebuild;
mod stats;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "byre-bench", about = "byre's benchmarks")]
struct Cli {
    /// Where temporary logs go (a fresh temp dir inside it per run).
    #[arg(long, global = true, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Durable appends through byre's writer.
    Append {
        /// Concurrent producers.
        #[arg(long, default_value_t = 1)]
        producers: usize,
        /// Measured seconds (after 0.5 s of warm-up).
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Durable appends with raw redb: one insert per commit, or group commit for N > 1.
    PlainRedb {
        /// Concurrent producers.
        #[arg(long, default_value_t = 1)]
        producers: usize,
        /// Measured seconds (after 0.5 s of warm-up).
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Writes a log of this many events, then times Store::open + Store::fold.
    Rebuild {
        /// Events in the log.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Warm runs (one cold run comes first).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also copy the generated log here (for `fold` and profiling).
        #[arg(long)]
        keep: Option<PathBuf>,
    },
    /// Times one way of folding an existing log (e.g. one kept by `rebuild --keep`) in this
    /// process; `rebuild` runs it as a child for every timed fold.
    Fold {
        /// The log file.
        #[arg(long)]
        log: PathBuf,
        /// Runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// What to time.
        #[arg(long, value_enum, default_value = "store")]
        mode: rebuild::Mode,
    },
    /// SSE fan-out through the real server.
    Fanout {
        /// SSE connections.
        #[arg(long, default_value_t = 1000)]
        clients: usize,
        /// Events per second.
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        /// Seconds of production.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    match cli.cmd {
        Cmd::Append { producers, seconds } => {
            batches::install();
            runtime()?.block_on(append::run(producers, seconds, &cli.dir))?;
        }
        Cmd::PlainRedb { producers, seconds } => {
            plain::append(producers, seconds, &cli.dir)?;
        }
        Cmd::Rebuild { events, runs, keep } => {
            rebuild::run(events, runs.max(1), &cli.dir, keep.as_deref())?
        }
        Cmd::Fold { log, runs, mode } => rebuild::fold_only(&log, runs.max(1), mode)?,
        Cmd::Fanout {
            clients,
            rate,
            seconds,
        } => {
            batches::install();
            runtime()?.block_on(fanout::run(clients, rate, seconds, &cli.dir))?;
        }
    }
    Ok(())
}
