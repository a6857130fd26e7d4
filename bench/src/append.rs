//! `append`: N concurrent producers submit one cheap command each, await the durable ack, and
//! loop; events/s and ack latency. The log is fresh, in a temp dir.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use byre::log::{Store, Writer};
use byre_projections::Command;
use serde_json::json;

use crate::batches;
use crate::stats::{emit, note_load, Machine, Summary};

/// Runs the byre append bench.
pub async fn run(producers: usize, seconds: f64, dir: &Path) -> anyhow::Result<()> {
    note_load("append");
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("byre.redb");
    let (store, state) = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let store = Store::open(&path)?;
            let state = store.fold()?;
            Ok((store, state))
        })
        .await??
    };
    let (writer, thread) = Writer::start(store, state);
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
    println!("byre append, {producers} producer(s), {seconds} s:");
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
        "events": events, "events_per_s": rate, "ack": ack,
        "group_commits": batches.len(), "commands_per_group_mean": group.mean_ms,
        "commit_ms": commit, "others_cpu_percent": others,
    }));
    Ok(())
}
