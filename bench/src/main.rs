//! byre's benchmarks (figures and how to run them: bench/README.md).
//!
//! - `append`: durable appends through `byre_log::Writer` (group commit), N producers.
//! - `plain-redb`: the same with raw redb 4.6 (one commit per insert, or a simple group
//!   commit thread), the baseline.
//! - `rebuild`: `Store::open` + `Store::fold` of a large log, with a breakdown and the plain
//!   redb scan baseline.
//! - `startup`: start-up on a large log with and without a projection snapshot, and what
//!   making one costs.
//! - `fanout`: the real server, C raw SSE clients, R events/s; commit-to-client latency.
//! - `vendor-latency`: the real server running a fake `claude` (this binary, see
//!   `vendor::fake_claude`); vendor stdout line to SSE client latency.
//! - `stream-memory`: `byre serve` as a child, slow SSE readers behind a large write burst;
//!   the child's RSS, and every reader gets every seq in order.
//! - `state-memory`: `byre serve` as a child on a large log (10k tasks / 1M events), its RSS
//!   after start-up (without and with a projection snapshot) and after a burst.
//! - `agents`: `byre serve` as a child running S concurrent real Claude Code sessions against
//!   the fake Anthropic API; every turn completes; byre's CPU per streamed line and RSS per
//!   live session.
//! - `git-box`: the git work that reads a worktree (a snapshot, the changes views' staged
//!   tree) in byre's own process and in the task's sandbox (`byre sandboxed-git`).

mod agents;
mod append;
mod batches;
mod fanout;
mod gen;
mod git_box;
mod http;
mod memory;
mod plain;
mod proto;
mod rebuild;
mod startup;
mod state_memory;
mod stats;
mod vendor;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// byre's allocator (src/main.rs), so that the folds and appends timed here allocate as the
/// `byre` binary does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        /// Start on a log of this many generated events (0: a fresh log).
        #[arg(long, default_value_t = 0)]
        state_events: u64,
    },
    /// Durable appends with raw redb: one insert per commit, or group commit for N > 1.
    PlainRedb {
        /// Concurrent producers.
        #[arg(long, default_value_t = 1)]
        producers: usize,
        /// Measured seconds (after 0.5 s of warm-up).
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Open the file in redb's `SingleWriter` concurrency mode, as byre does (other
        /// processes may read it meanwhile), instead of the default `ExclusiveWriter`.
        #[arg(long)]
        single_writer: bool,
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
    /// Start-up (`Store::open` + fold) of a large log without and with a projection snapshot.
    Startup {
        /// Events in the log.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Warm runs of each (one cold run of each comes first).
        #[arg(long, default_value_t = 3)]
        runs: usize,
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
    /// Vendor stdout line to SSE client, through the real server and a fake `claude` (this
    /// binary).
    VendorLatency {
        /// `assistant` lines the fake CLI prints.
        #[arg(long, default_value_t = 2000)]
        lines: u64,
        /// Lines per second.
        #[arg(long, default_value_t = 200.0)]
        rate: f64,
        /// The SSE client acknowledges every read at once (TCP_QUICKACK), to show what the
        /// server's Nagle + the client's delayed ACK add.
        #[arg(long)]
        quickack: bool,
    },
    /// byre's RSS (a `byre serve` child) while slow SSE readers fall behind a write burst.
    StreamMemory {
        /// Slow SSE readers.
        #[arg(long, default_value_t = 100)]
        readers: usize,
        /// MiB of events written in the burst.
        #[arg(long, default_value_t = 1024)]
        burst_mib: u64,
        /// KiB of each event's payload.
        #[arg(long, default_value_t = 64)]
        event_kib: usize,
        /// `serve --stream-buffer`.
        #[arg(long, default_value = "64MiB")]
        stream_buffer: String,
        /// Bytes per second each reader reads during the burst.
        #[arg(long, default_value_t = 1024)]
        read_rate: usize,
        /// The `byre` binary (default: `byre` beside this one).
        #[arg(long)]
        byre: Option<PathBuf>,
    },
    /// byre's RSS (a `byre serve` child) holding a large state, after start-up and a burst.
    StateMemory {
        /// Events in the generated log.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Events written in the burst after each start.
        #[arg(long, default_value_t = 20_000)]
        burst: u64,
        /// The `byre` binary (default: `byre` beside this one).
        #[arg(long)]
        byre: Option<PathBuf>,
    },
    /// S concurrent real Claude Code sessions on a `byre serve` child, against the fake
    /// Anthropic API (`BYRE_TEST_CACHE` holds the pinned CLI).
    Agents {
        /// Tasks created at once, each with its own worktree and Claude Code session.
        #[arg(long, default_value_t = 20)]
        sessions: usize,
        /// Turns per session (the next message is sent when a turn completes).
        #[arg(long, default_value_t = 2)]
        turns: usize,
        /// Characters of each turn's message, streamed back by the fake (24 per delta).
        #[arg(long, default_value_t = 7200)]
        chars: usize,
        /// Seconds every turn together may take before the bench fails.
        #[arg(long, default_value_t = 900)]
        timeout: u64,
        /// The `byre` binary (default: `byre` beside this one).
        #[arg(long)]
        byre: Option<PathBuf>,
    },
    /// A snapshot and the changes views' staged tree, in byre's process and in the sandbox.
    GitBox {
        /// Files in the repository.
        #[arg(long, default_value_t = 2000)]
        files: usize,
        /// Jobs of each kind, each way.
        #[arg(long, default_value_t = 30)]
        rounds: usize,
        /// The `byre` binary (default: `byre` beside this one).
        #[arg(long)]
        byre: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    // Started by byre as its `claude` (`vendor-latency`): act as the agent CLI.
    if let Some(lines) = std::env::var_os(vendor::LINES_VAR) {
        let lines = lines
            .to_str()
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("{} is not a number", vendor::LINES_VAR))?;
        vendor::fake_claude(lines)?;
        return Ok(());
    }
    let cli = Cli::parse();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    match cli.cmd {
        Cmd::Append {
            producers,
            seconds,
            state_events,
        } => {
            batches::install();
            runtime()?.block_on(append::run(producers, seconds, &cli.dir, state_events))?;
        }
        Cmd::PlainRedb {
            producers,
            seconds,
            single_writer,
        } => {
            plain::append(producers, seconds, single_writer, &cli.dir)?;
        }
        Cmd::Rebuild { events, runs, keep } => {
            rebuild::run(events, runs.max(1), &cli.dir, keep.as_deref())?
        }
        Cmd::Startup { events, runs } => startup::run(events, runs.max(1), &cli.dir)?,
        Cmd::Fold { log, runs, mode } => rebuild::fold_only(&log, runs.max(1), mode)?,
        Cmd::Fanout {
            clients,
            rate,
            seconds,
        } => {
            batches::install();
            runtime()?.block_on(fanout::run(clients, rate, seconds, &cli.dir))?;
        }
        Cmd::VendorLatency {
            lines,
            rate,
            quickack,
        } => {
            anyhow::ensure!(rate > 0.0, "--rate must be positive");
            batches::install();
            runtime()?.block_on(vendor::run(lines, rate, quickack, &cli.dir))?;
        }
        Cmd::StreamMemory {
            readers,
            burst_mib,
            event_kib,
            stream_buffer,
            read_rate,
            byre,
        } => {
            let params = memory::Params {
                readers,
                burst_bytes: burst_mib * 1024 * 1024,
                event_bytes: event_kib.max(1) * 1024,
                stream_buffer,
                read_rate,
                byre,
            };
            runtime()?.block_on(memory::run(params, &cli.dir))?;
        }
        Cmd::StateMemory {
            events,
            burst,
            byre,
        } => runtime()?.block_on(state_memory::run(events, burst, byre, &cli.dir))?,
        Cmd::Agents {
            sessions,
            turns,
            chars,
            timeout,
            byre,
        } => {
            let params = agents::Params {
                sessions,
                turns,
                chars,
                timeout_s: timeout,
                byre,
            };
            runtime()?.block_on(agents::run(params, &cli.dir))?;
        }
        Cmd::GitBox {
            files,
            rounds,
            byre,
        } => {
            let params = git_box::Params {
                files,
                rounds,
                byre,
            };
            runtime()?.block_on(git_box::run(params, &cli.dir))?;
        }
    }
    Ok(())
}
