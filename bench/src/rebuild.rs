//! `rebuild`: writes a log of many events, then times `Store::open` + `Store::fold` from
//! scratch, a step-by-step breakdown of the fold, and the plain redb scan baseline.

use std::path::Path;
use std::time::{Duration, Instant};

use byre::log::Store;
use byre_projections::State;
use redb::ReadableDatabase;
use serde_json::json;

use crate::gen;
use crate::plain;
use crate::proto;
use crate::stats::{emit, note_load};

/// Evicts a file's pages from the page cache (this file only), so the next read is cold.
fn evict(path: &Path) -> bool {
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
        "  state: {} users, {} projects, {} tasks, {} workflows",
        generated.state.users.len(),
        generated.state.projects.len(),
        generated.state.tasks.len(),
        generated.state.workflows.len()
    );

    // Store::open + Store::fold, cold (the file evicted from the page cache) then warm.
    let mut rows = Vec::new();
    for run in 0..runs + 1 {
        let cold = run == 0 && evict(&path);
        let t0 = Instant::now();
        let store = Store::open(&path)?;
        let t1 = Instant::now();
        let state = store.fold()?;
        let t2 = Instant::now();
        if run == 0 {
            anyhow::ensure!(
                state == generated.state,
                "the fold of the written log differs from the generated state"
            );
        }
        drop(store);
        drop(state);
        let (open, fold) = (ms(t1 - t0), ms(t2 - t1));
        println!(
            "  {} run {run}: open {open:.1} ms + fold {fold:.1} ms = {:.1} ms = {:.0} events/s",
            if cold { "cold" } else { "warm" },
            open + fold,
            n as f64 / ((open + fold) / 1e3)
        );
        rows.push((cold, open, fold));
    }
    let mut warm: Vec<f64> = rows.iter().filter(|r| !r.0).map(|r| r.1 + r.2).collect();
    warm.sort_by(f64::total_cmp);
    let median = warm[warm.len() / 2];
    println!(
        "byre rebuild of {n} events (Store::open + Store::fold), warm: median {median:.1} ms = {:.0} events/s (best {:.1} ms, worst {:.1} ms)",
        n as f64 / (median / 1e3),
        warm[0],
        warm[warm.len() - 1]
    );

    let stages = breakdown(&path)?;
    let mut prev = 0.0;
    println!("  breakdown (separate passes, each adding one step):");
    for (name, t) in &stages {
        println!("    {name:<46} {t:>8.1} ms  (+{:.1} ms)", t - prev);
        prev = *t;
    }

    // Prototypes of a faster fold (bench code on byre's pub API; see proto.rs).
    let mut protos = Vec::new();
    for (name, f) in [
        (
            "prototype: borrowed envelope",
            proto::fold_borrowed as fn(&Path) -> _,
        ),
        (
            "prototype: borrowed envelope + 2-thread pipeline",
            proto::fold_pipelined,
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..3 {
            let (state, d) = f(&path)?;
            anyhow::ensure!(state == generated.state, "{name}: the fold differs");
            times.push(ms(d));
        }
        times.sort_by(f64::total_cmp);
        println!(
            "  {name}: median {:.1} ms = {:.0} events/s (of 3 runs, state checked)",
            times[1],
            n as f64 / (times[1] / 1e3)
        );
        protos.push(json!([name, times[1]]));
    }

    // Plain redb baseline: same envelope bytes in a one-table file.
    let plain_path = tmp.path().join("plain.redb");
    plain::copy_values(&path, &plain_path)?;
    let mut plain_ms = Vec::new();
    for run in 0..runs + 1 {
        let cold = run == 0 && evict(&plain_path);
        let (pn, d) = plain::scan(&plain_path)?;
        anyhow::ensure!(pn == n);
        println!(
            "  plain {} run {run}: {:.1} ms = {:.0} events/s",
            if cold { "cold" } else { "warm" },
            ms(d),
            n as f64 / d.as_secs_f64()
        );
        if !cold {
            plain_ms.push(ms(d));
        }
    }
    plain_ms.sort_by(f64::total_cmp);
    let plain_median = plain_ms[plain_ms.len() / 2];
    println!(
        "plain redb scan + bincode decode + trivial fold, warm: median {plain_median:.1} ms = {:.0} events/s",
        n as f64 / (plain_median / 1e3)
    );
    emit(json!({
        "bench": "rebuild", "events": n, "file_bytes": bytes, "task_scoped_events": task_scoped,
        "kinds": generated.kinds,
        "byre_runs": rows.iter().map(|(c, o, f)| json!({"cold": c, "open_ms": o, "fold_ms": f})).collect::<Vec<_>>(),
        "byre_warm_median_ms": median, "byre_events_per_s": n as f64 / (median / 1e3),
        "breakdown_ms": stages.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "prototypes_ms": protos,
        "plain_warm_median_ms": plain_median, "plain_events_per_s": n as f64 / (plain_median / 1e3),
    }));
    Ok(())
}

/// Times `Store::open` + `Store::fold` of an existing log.
pub fn fold_only(path: &Path, runs: usize, prototypes: bool) -> anyhow::Result<()> {
    note_load("fold");
    for run in 0..runs {
        let t0 = Instant::now();
        let store = Store::open(path)?;
        let t1 = Instant::now();
        let state = store.fold()?;
        let t2 = Instant::now();
        println!(
            "run {run}: {} events, open {:.1} ms + fold {:.1} ms = {:.0} events/s",
            state.last_seq,
            ms(t1 - t0),
            ms(t2 - t1),
            state.last_seq as f64 / (t2 - t0).as_secs_f64()
        );
    }
    if prototypes {
        for run in 0..runs {
            let (a, da) = proto::fold_borrowed(path)?;
            let (b, db) = proto::fold_pipelined(path)?;
            anyhow::ensure!(a == b, "the prototypes disagree");
            println!(
                "run {run}: prototype borrowed {:.1} ms, borrowed + pipeline {:.1} ms",
                ms(da),
                ms(db)
            );
        }
    }
    Ok(())
}

/// Passes over the log, each adding one step of `Store::fold`: scan, envelope decode, upcast
/// (payload JSON → typed event, envelope strings cloned), fold.
fn breakdown(path: &Path) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let names = [
        "redb scan (open + iterate, touch the bytes)",
        "+ bincode envelope decode (StoredEvent)",
        "+ to_event (upcast: payload JSON → EventBody)",
        "+ State::apply (= Store::fold)",
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
                1 => sink += gen::decode(bytes)?.seq,
                2 => sink += gen::decode(bytes)?.to_event()?.seq,
                _ => state.apply(&gen::decode(bytes)?.to_event()?),
            }
        }
        let t = ms(t0.elapsed());
        std::hint::black_box((sink, &state));
        out.push((*name, t));
    }
    Ok(out)
}
