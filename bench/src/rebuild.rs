//! `rebuild`: writes a log of many events, then times `Store::open` + `Store::fold` from
//! scratch, a step-by-step breakdown of the fold, prototypes of a faster fold, and the plain
//! redb scan baseline.
//!
//! Every timed fold runs in a fresh child process (`byre-bench fold ...`), as at start-up: in
//! the generating process, the heap left by writing 1M events slows the fold down by a third
//! or more.

use std::path::Path;
use std::time::{Duration, Instant};

use byre_log::Store;
use byre_projections::State;
use redb::ReadableDatabase;
use serde_json::{json, Value};

use crate::gen;
use crate::plain;
use crate::proto;
use crate::stats::{cpu_time, emit, note_load, Machine};

/// What `fold` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// `Store::open` + `Store::fold` (a fold from seq 1).
    Store,
    /// `Store::open` + `Store::fold_from_projection_snapshot` (byre's start-up: the projection snapshot
    /// beside the log, then the events after it).
    Snapshot,
    /// Passes adding one step each: scan, envelope decode, upcast, apply.
    Breakdown,
    /// Prototype: borrowed envelope (bench/src/proto.rs).
    Borrowed,
    /// Prototype: borrowed envelope + 2-thread pipeline (bench/src/proto.rs).
    Pipelined,
    /// Plain redb: scan a one-table file, bincode decode, trivial fold (see `plain.rs`).
    Plain,
}

/// Evicts a file's pages from the page cache (this file only), so the next read is cold.
pub fn evict(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let _ = f.sync_all();
    // SAFETY: a valid open fd; offset 0 and len 0 mean the whole file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) == 0 }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs `byre-bench fold --log PATH --mode MODE` in a fresh process; returns its RESULT.
pub fn child(path: &Path, mode: &str) -> anyhow::Result<Value> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["fold", "--runs", "1", "--mode", mode, "--log"])
        .arg(path)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "fold --mode {mode} failed: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| anyhow::anyhow!("fold --mode {mode} printed no RESULT"))?;
    Ok(serde_json::from_str(line)?)
}

/// The middle value (sorts `v`).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the rebuild bench.
pub fn run(n_events: u64, runs: usize, dir: &Path, keep: Option<&Path>) -> anyhow::Result<()> {
    note_load("rebuild");
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("byre.redb");
    let t = Instant::now();
    let generated = gen::write_log(&path, n_events)?;
    let n = generated.state.last_seq;
    let bytes = std::fs::metadata(&path)?.len();
    println!(
        "generated {n} events in {:.1} s, log file {:.1} MiB ({:.0} bytes/event)",
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0,
        bytes as f64 / n as f64
    );
    if let Some(keep) = keep {
        std::fs::copy(&path, keep)?;
        println!("  kept a copy at {}", keep.display());
    }
    let task_scoped: u64 = [
        "task.created",
        "task.worktree_created",
        "task.worktree_failed",
        "task.state",
        "focus.updated",
        "summary.read",
    ]
    .iter()
    .map(|k| generated.kinds.get(k).copied().unwrap_or(0))
    .sum();
    println!("  kinds: {:?}", generated.kinds);
    println!(
        "  {task_scoped} task-scoped events; state: {} users, {} projects, {} tasks ({} active), {} workflows",
        generated.state.users.len(),
        generated.state.projects.len(),
        generated.state.tasks.len(),
        generated
            .state
            .tasks
            .values()
            .filter(|t| t.status == byre_projections::tasks::TaskStatus::Active)
            .count(),
        generated.state.workflows.len()
    );
    let t = Instant::now();
    let digest = byre_projections::digest::digest(&generated.state);
    println!(
        "  a checkpoint's digest of this state (the writer computes one every 10 s under load): {:.1} ms",
        ms(t.elapsed())
    );
    let t = Instant::now();
    let copy = generated.state.clone();
    println!("  a clone of this state: {:.1} ms", ms(t.elapsed()));
    drop(copy);
    let kinds = generated.kinds.clone();
    drop(generated);

    // byre: Store::open + Store::fold, one fresh process per run; cold first, then warm.
    let machine = Machine::start();
    let mut rows = Vec::new();
    for run in 0..=runs {
        let cold = run == 0 && evict(&path);
        let r = child(&path, "store")?;
        anyhow::ensure!(
            r["digest"].as_str() == Some(digest.as_str()),
            "the fold of the written log differs from the generated state"
        );
        let (open, fold) = (
            r["open_ms"].as_f64().unwrap_or(0.0),
            r["fold_ms"].as_f64().unwrap_or(0.0),
        );
        let cpu = r["cpu_ms"].as_f64().unwrap_or(0.0);
        println!(
            "  {} run {run}: open {open:.1} ms + fold {fold:.1} ms = {:.1} ms = {:.0} events/s (CPU time {cpu:.1} ms)",
            if cold { "cold" } else { "warm" },
            open + fold,
            n as f64 / ((open + fold) / 1e3)
        );
        rows.push((cold, open, fold, cpu));
    }
    let others = machine.report("the byre runs");
    let mut warm_cpu: Vec<f64> = rows.iter().filter(|r| !r.0).map(|r| r.3).collect();
    let byre_cpu = median(&mut warm_cpu);
    let mut warm: Vec<f64> = rows.iter().filter(|r| !r.0).map(|r| r.1 + r.2).collect();
    let byre_median = median(&mut warm);
    println!(
        "byre rebuild of {n} events (Store::open + Store::fold, fresh process), warm: median {byre_median:.1} ms = {:.0} events/s (best {:.1} ms, worst {:.1} ms; CPU time median {byre_cpu:.1} ms; state digest checked)",
        n as f64 / (byre_median / 1e3),
        warm[0],
        warm[warm.len() - 1]
    );

    let r = child(&path, "breakdown")?;
    println!("  breakdown (one fresh process; passes, each adding one step to the one above except the 2nd, an alternative to the 3rd):");
    let stages = r["stages"].as_array().cloned().unwrap_or_default();
    for (i, s) in stages.iter().enumerate() {
        let t = s[1].as_f64().unwrap_or(0.0);
        let base = match i {
            0 => 0.0,
            1 | 2 => stages[0][1].as_f64().unwrap_or(0.0),
            _ => stages[i - 1][1].as_f64().unwrap_or(0.0),
        };
        println!(
            "    {:<46} {t:>8.1} ms  (+{:.1} ms)",
            s[0].as_str().unwrap_or(""),
            t - base
        );
    }

    let mut protos = Vec::new();
    for (mode, name) in [
        ("borrowed", "prototype: borrowed envelope"),
        (
            "pipelined",
            "prototype: borrowed envelope + 2-thread pipeline",
        ),
    ] {
        let mut times = Vec::new();
        let mut cpus = Vec::new();
        for _ in 0..runs {
            let r = child(&path, mode)?;
            anyhow::ensure!(
                r["digest"].as_str() == Some(digest.as_str()),
                "{name}: the fold differs"
            );
            times.push(r["fold_ms"].as_f64().unwrap_or(0.0));
            cpus.push(r["cpu_ms"].as_f64().unwrap_or(0.0));
        }
        let m = median(&mut times);
        let c = median(&mut cpus);
        println!(
            "  {name}: median {m:.1} ms = {:.0} events/s, CPU time {c:.1} ms (of {runs} fresh processes, state digest checked)",
            n as f64 / (m / 1e3)
        );
        protos.push(json!([name, m, c]));
    }

    // Plain redb baseline: the same envelope bytes in a one-table file.
    let plain_path = tmp.path().join("plain.redb");
    plain::copy_values(&path, &plain_path)?;
    let mut plain_ms = Vec::new();
    for run in 0..=runs {
        let cold = run == 0 && evict(&plain_path);
        let r = child(&plain_path, "plain")?;
        anyhow::ensure!(r["events"].as_u64() == Some(n));
        let t = r["fold_ms"].as_f64().unwrap_or(0.0);
        println!(
            "  plain {} run {run}: {t:.1} ms = {:.0} events/s (CPU time {:.1} ms)",
            if cold { "cold" } else { "warm" },
            n as f64 / (t / 1e3),
            r["cpu_ms"].as_f64().unwrap_or(0.0)
        );
        if !cold {
            plain_ms.push(t);
        }
    }
    let plain_median = median(&mut plain_ms);
    println!(
        "plain redb scan + bincode decode + trivial fold, warm: median {plain_median:.1} ms = {:.0} events/s",
        n as f64 / (plain_median / 1e3)
    );
    emit(json!({
        "bench": "rebuild", "events": n, "file_bytes": bytes, "task_scoped_events": task_scoped,
        "kinds": kinds,
        "byre_runs": rows.iter().map(|(c, o, f, u)| json!({"cold": c, "open_ms": o, "fold_ms": f, "cpu_ms": u})).collect::<Vec<_>>(),
        "byre_warm_median_cpu_ms": byre_cpu,
        "byre_warm_median_ms": byre_median, "byre_events_per_s": n as f64 / (byre_median / 1e3),
        "others_cpu_percent": others,
        "breakdown_ms": stages, "prototypes_ms": protos,
        "plain_warm_median_ms": plain_median, "plain_events_per_s": n as f64 / (plain_median / 1e3),
    }));
    Ok(())
}

/// `fold`: times one way of folding an existing log `runs` times in this process; prints a
/// RESULT line (of the last run) with the state's digest.
pub fn fold_only(path: &Path, runs: usize, mode: Mode) -> anyhow::Result<()> {
    for run in 0..runs {
        let cpu0 = cpu_time();
        let (open, fold, state) = match mode {
            Mode::Store => {
                let t0 = Instant::now();
                let store = Store::open(path)?;
                let t1 = Instant::now();
                let state = store.fold()?;
                let t2 = Instant::now();
                (t1 - t0, t2 - t1, Some(state))
            }
            Mode::Snapshot => {
                let t0 = Instant::now();
                let store = Store::open(path)?;
                let t1 = Instant::now();
                let folded = store.fold_from_projection_snapshot()?;
                let t2 = Instant::now();
                println!(
                    "run {run}: from the snapshot at seq {}, {} events folded after it",
                    folded.projection_snapshot_seq, folded.n_events_folded
                );
                (t1 - t0, t2 - t1, Some(folded.state))
            }
            Mode::Borrowed => {
                let (s, d) = proto::fold_borrowed(path)?;
                (Duration::ZERO, d, Some(s))
            }
            Mode::Pipelined => {
                let (s, d) = proto::fold_pipelined(path)?;
                (Duration::ZERO, d, Some(s))
            }
            Mode::Plain => {
                let (events, d) = plain::scan(path)?;
                let cpu = ms(cpu_time() - cpu0);
                println!(
                    "run {run}: plain scan of {events} values: {:.1} ms, CPU time {cpu:.1} ms",
                    ms(d)
                );
                emit(
                    json!({"bench": "fold", "mode": "plain", "events": events, "fold_ms": ms(d), "cpu_ms": cpu}),
                );
                continue;
            }
            Mode::Breakdown => {
                let stages = breakdown(path)?;
                for (name, t) in &stages {
                    println!("run {run}: {name:<46} {t:>8.1} ms");
                }
                emit(json!({"bench": "fold", "mode": "breakdown", "stages": stages}));
                continue;
            }
        };
        let cpu = cpu_time() - cpu0;
        let state = state.expect("a state");
        let n = state.last_seq;
        println!(
            "run {run} ({mode:?}): {n} events, open {:.1} ms + fold {:.1} ms = {:.0} events/s; CPU time {:.1} ms",
            ms(open),
            ms(fold),
            n as f64 / (open + fold).as_secs_f64(),
            ms(cpu)
        );
        if run + 1 == runs {
            emit(json!({
                "bench": "fold", "mode": format!("{mode:?}"), "events": n,
                "open_ms": ms(open), "fold_ms": ms(fold), "cpu_ms": ms(cpu),
                "digest": byre_projections::digest::digest(&state),
            }));
        }
    }
    Ok(())
}

/// Passes over the log, each adding one step of `Store::fold`: scan, envelope decode, upcast
/// (payload JSON → typed event, envelope strings cloned), fold. The second pass decodes the
/// envelope borrowing its strings instead (an alternative to the third).
fn breakdown(path: &Path) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let names = [
        "redb scan (open + iterate, touch the bytes)",
        "+ envelope decode, borrowing its strings",
        "+ bincode envelope decode (owned StoredEvent)",
        "+ to_event (upcast: payload JSON → EventBody)",
        "+ State::apply (= Store::fold before bf2c204)",
    ];
    let mut out = Vec::new();
    for (stage, name) in names.iter().enumerate() {
        let t0 = Instant::now();
        let mut b = redb::Builder::new();
        b.set_cache_size(256 * 1024 * 1024);
        let db = b.open(path)?;
        let txn = db.begin_read()?;
        let table = txn.open_table(gen::EVENTS)?;
        let mut state = State::default();
        let mut sink = 0u64;
        for entry in table.range(1..=u64::MAX)? {
            let (_, v) = entry?;
            let bytes = v.value();
            match stage {
                0 => sink += bytes.len() as u64 + u64::from(bytes[bytes.len() / 2]),
                1 => sink += proto::decode_ref(bytes)?,
                2 => sink += gen::decode(bytes)?.seq,
                3 => sink += gen::decode(bytes)?.to_event()?.seq,
                _ => state.apply(&gen::decode(bytes)?.to_event()?),
            }
        }
        let t = ms(t0.elapsed());
        std::hint::black_box((sink, &state));
        out.push((*name, t));
    }
    Ok(out)
}
