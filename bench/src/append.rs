//! `append`: N concurrent producers submit one cheap command each, await the durable ack, and
//! loop; events/s and ack latency. The log is fresh, in a temp dir, or (`--state-events N`)
//! starts with N generated events (`gen::write_log`), so that the state the snapshotter
//! checkpoints every 10 s is large: any stall of the writer for it would show in the acks.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use byre_log::{Store, Writer};
use byre_projections::Command;
use serde_json::json;

use crate::batches;
use crate::stats::{emit, note_load, Machine, Summary};

/// Runs the byre append bench.
pub async fn run(
    producers: usize,
    seconds: f64,
    dir: &Path,
    state_events: u64,
) -> anyhow::Result<()> {
    note_load("append");
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("byre.redb");
    let folded = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            if state_events > 0 {
                let t = Instant::now();
                let generated = crate::gen::write_log(&path, state_events)?;
                // A first writer writes the snapshot of the generated state and stops, so the
                // measured one starts as a restarted server does.
                let (w, thread) = Writer::start(Store::open(&path)?, generated.state);
                drop(w);
                thread.join();
                println!(
                    "  generated {state_events} events and their snapshot in {:.1} s",
                    t.elapsed().as_secs_f64()
                );
            }
            let store = Store::open(&path)?;
            let folded = store.fold_from_projection_snapshot()?;
            Ok((store, folded))
        })
        .await??
    };
    let (store, folded) = folded;
    let (writer, thread) =
        Writer::start_with(store, folded, byre_log::bus::DEFAULT_LIMIT_BYTES, false);
    let ensure = Command::EnsureUser {
        login: "bench".into(),
        display_name: "bench".into(),
        default_model: "sonnet".into(),
    };
    writer.submit(ensure, None).await?;

    // Warm up for 0.5 s (not measured), then measure for `seconds`.
    let warmup = Duration::from_millis(500);
    let start = Instant::now() + warmup;
    let end = start + Duration::from_secs_f64(seconds);
    let machine = Machine::start();
    let go = Arc::new(tokio::sync::Barrier::new(producers));
    let mut tasks = Vec::new();
    for p in 0..producers {
        let writer = writer.clone();
        let go = go.clone();
        tasks.push(tokio::spawn(async move {
            go.wait().await;
            let mut lat = Vec::with_capacity(1 << 16);
            let mut events = 0u64;
            let mut i = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let model = if (i + p as u64).is_multiple_of(2) {
                    "opus"
                } else {
                    "sonnet"
                };
                i += 1;
                let cmd = Command::UpdateDefaultModel {
                    login: "bench".into(),
                    model: model.into(),
                };
                let ack = writer.submit(cmd, None).await?;
                let t1 = Instant::now();
                if t0 >= start {
                    lat.push(t1 - t0);
                    events += ack.events.len() as u64;
                }
            }
            anyhow::Ok((lat, events))
        }));
    }
    let mut lat = Vec::new();
    let mut events = 0;
    for t in tasks {
        let (l, e) = t.await??;
        lat.extend(l);
        events += e;
    }
    let measured_end = Instant::now();
    let elapsed = measured_end.saturating_duration_since(start);
    let others = machine.report("the run");
    writer.stop().await;
    tokio::task::spawn_blocking(move || thread.join()).await?;
    let file_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    drop(writer);

    let batches = batches::take();
    let ack = Summary::of(&lat);
    let rate = events as f64 / elapsed.as_secs_f64();
    println!("byre append, {producers} producer(s), {seconds} s, on a state of {state_events} generated events:");
    println!(
        "  {events} events in {:.3} s = {rate:.0} events/s",
        elapsed.as_secs_f64()
    );
    println!("  ack latency: {}", ack.line());
    let mut commit = Vec::new();
    let mut group = Vec::new();
    for b in &batches {
        commit.push(b.commit_ms);
        group.push(b.n_commands as f64);
    }
    let commit = Summary::of_ms(&mut commit);
    let group = Summary::of_ms(&mut group);
    println!(
        "  writer: {} group commits (incl. warm-up), commands per group mean {:.2} (p50 {}, max {}); begin_write..commit {}",
        batches.len(),
        group.mean_ms,
        group.p50_ms,
        group.max_ms,
        commit.line()
    );
    println!("  log file: {:.1} MiB", file_bytes as f64 / 1048576.0);
    emit(json!({
        "bench": "append", "impl": "byre", "producers": producers, "seconds": elapsed.as_secs_f64(),
        "state_events": state_events,
        "events": events, "events_per_s": rate, "ack": ack,
        "group_commits": batches.len(), "commands_per_group_mean": group.mean_ms,
        "commit_ms": commit, "others_cpu_percent": others,
    }));
    Ok(())
}
