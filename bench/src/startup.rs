//! `startup`: byre's start-up on a large log with and without a projection snapshot, and what
//! making the snapshot costs (off the writer thread, but CPU and disk all the same).
//!
//! Writes a log of N events (`gen::write_log`, as `rebuild` does), then times in fresh child
//! processes `Store::open` + `Store::fold` (no snapshot: from seq 1) and `Store::open` +
//! `Store::fold_from_projection_snapshot` once a snapshot exists. The snapshot is made the way a server
//! makes it: a `Writer` started on the folded state, whose snapshotter writes one at once
//! (more than `PROJECTION_SNAPSHOT_EVERY_EVENTS` events were folded), then stopped. Every fold's digest is
//! checked against the generator's state.

use std::path::Path;
use std::time::Instant;

use byre_log::{projection_snapshot, Store, Writer};
use serde_json::json;

use crate::gen;
use crate::rebuild::{child, evict, median};
use crate::stats::{emit, note_load, Machine};

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the start-up bench: `runs` warm runs of each way (after one cold run of each).
pub fn run(n_events: u64, runs: usize, dir: &Path) -> anyhow::Result<()> {
    note_load("startup");
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("byre.redb");
    let t = Instant::now();
    let generated = gen::write_log(&path, n_events)?;
    let n = generated.state.last_seq;
    let digest = byre_projections::digest::digest(&generated.state);
    println!(
        "generated {n} events in {:.1} s, log file {:.1} MiB",
        t.elapsed().as_secs_f64(),
        std::fs::metadata(&path)?.len() as f64 / 1048576.0
    );

    // What the snapshotter does, step by step, on this state (timed here, in this process).
    let t = Instant::now();
    let encoded = byre_projections::persist::encode(&generated.state);
    let encode_ms = ms(t.elapsed());
    let t = Instant::now();
    let snapshot_digest = byre_projections::digest::digest_json(&encoded.state_json);
    let hash_ms = ms(t.elapsed());
    anyhow::ensure!(snapshot_digest == digest);
    let scratch = tmp.path().join("scratch.snapshot");
    let t = Instant::now();
    projection_snapshot::write(&scratch, n, &snapshot_digest, &encoded)?;
    let write_ms = ms(t.elapsed());
    let snapshot_bytes = std::fs::metadata(&scratch)?.len();
    let t = Instant::now();
    let read = projection_snapshot::read(&scratch).map_err(|e| anyhow::anyhow!("{e}"))?;
    let read_ms = ms(t.elapsed());
    anyhow::ensure!(
        read.state == generated.state,
        "the snapshot decodes to its state"
    );
    std::fs::remove_file(&scratch)?;
    drop((encoded, read));
    println!(
        "  snapshot of this state: {:.1} MiB; serialize {encode_ms:.1} ms + digest {hash_ms:.1} ms + write and fsync {write_ms:.1} ms (snapshotter thread); read + check + decode {read_ms:.1} ms",
        snapshot_bytes as f64 / 1048576.0
    );

    // A server's snapshot and checkpoint: a writer on the folded state, stopped.
    let t = Instant::now();
    let store = Store::open(&path)?;
    let (writer, thread) = Writer::start(store, generated.state);
    drop(writer);
    thread.join();
    println!(
        "  a writer started on the folded state and stopped (its snapshotter wrote the snapshot and checkpoint): {:.1} ms",
        ms(t.elapsed())
    );

    let machine = Machine::start();
    let mut results = serde_json::Map::new();
    for mode in ["store", "snapshot"] {
        let mut warm = Vec::new();
        for r in 0..=runs {
            let cold = r == 0
                && evict(&path)
                && evict(&projection_snapshot::projection_snapshot_path(&path));
            let out = child(&path, mode)?;
            anyhow::ensure!(
                out["digest"].as_str() == Some(digest.as_str()),
                "{mode}: the fold differs from the generated state"
            );
            let total =
                out["open_ms"].as_f64().unwrap_or(0.0) + out["fold_ms"].as_f64().unwrap_or(0.0);
            println!(
                "  {mode} {} run {r}: open + fold {total:.1} ms (CPU time {:.1} ms)",
                if cold { "cold" } else { "warm" },
                out["cpu_ms"].as_f64().unwrap_or(0.0)
            );
            if !cold {
                warm.push(total);
            }
        }
        let m = median(&mut warm);
        println!(
            "byre start-up fold of {n} events, {}: warm median {m:.1} ms",
            if mode == "store" {
                "no snapshot (from seq 1)"
            } else {
                "from a snapshot at the head"
            }
        );
        results.insert(format!("{mode}_warm_median_ms"), json!(m));
    }
    let others = machine.report("the start-up runs");
    emit(json!({
        "bench": "startup", "events": n, "snapshot_bytes": snapshot_bytes,
        "serialize_ms": encode_ms, "digest_ms": hash_ms, "write_ms": write_ms, "read_ms": read_ms,
        "results": results, "others_cpu_percent": others,
    }));
    Ok(())
}
