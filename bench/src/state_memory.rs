//! `state-memory`: the RSS of a `byre serve` holding a large state (by default the 1M-event
//! log of `rebuild`: 10,000 tasks, 1,000 projects, 20 users).
//!
//! Writes the log into a fresh data directory (`gen::write_log`), then starts the release
//! `byre serve` on it as a child process twice: first with no projection snapshot (it folds
//! from seq 1 and writes one), then from that snapshot. Each time it prints the time to the
//! first line (`listening on …`, i.e. the fold is done), the RSS a second after start-up, and
//! after a burst of small events (8 producers `PUT /api/me/default-model`), two seconds
//! later, and the peak (VmHWM); then stops the child with SIGTERM and waits for it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::net::TcpStream;

use crate::gen;
use crate::http::request;
use crate::memory::{cpu_s, head_seq, mib, rss, status_field};
use crate::stats::{emit, note_load, Machine};

/// One start of `byre serve` on `data` and a burst of `burst` events.
async fn one_start(byre: &Path, data: &Path, burst: u64) -> anyhow::Result<serde_json::Value> {
    // The generated projects' repositories do not exist, so start-up logs an error for every
    // active task's worktree: kept out of the bench's output, in a file shown if serve fails.
    let stderr_path = data.join("serve.stderr");
    let stderr = std::fs::File::create(&stderr_path)?;
    let tail = || {
        let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    };
    let started = Instant::now();
    let mut child = crate::memory::serve_command(byre, data)
        .stderr(stderr)
        .spawn()?;
    let pid = child.id().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    let mut out = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let line = out.next_line().await?.ok_or_else(|| {
        anyhow::anyhow!("byre serve printed nothing; its stderr ends:\n{}", tail())
    })?;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let addr = crate::memory::listen_addr(&line)?;
    let cpu_startup_s = cpu_s(pid);
    // Let the snapshotter finish what start-up gave it (a snapshot after a long fold).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_started = rss(pid);
    let hwm_started = status_field(pid, "VmHWM:");
    let head_before = head_seq(addr).await?;

    let next = Arc::new(AtomicU64::new(0));
    let burst_started = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..8 {
        let next = next.clone();
        producers.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= burst {
                    return anyhow::Ok(());
                }
                let body = format!("{{\"model\":\"bench-{i}\"}}");
                let (status, resp) =
                    request(&mut s, "PUT", "/api/me/default-model", Some(&body)).await?;
                anyhow::ensure!(
                    status == 200,
                    "updateDefaultModel answered {status}: {}",
                    String::from_utf8_lossy(&resp)
                );
            }
        }));
    }
    for p in producers {
        p.await??;
    }
    let burst_s = burst_started.elapsed().as_secs_f64();
    let head_after = head_seq(addr).await?;
    let rss_burst = rss(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_burst_2s = rss(pid);
    let hwm = status_field(pid, "VmHWM:");
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await??;
    anyhow::ensure!(
        status.success(),
        "byre serve ended {status}; its stderr ends:\n{}",
        tail()
    );
    println!(
        "  ready after {ready_ms:.0} ms (CPU {cpu_startup_s:.2} s, head {head_before}); RSS after start-up {:.0} MiB (peak so far {:.0} MiB); burst of {} events in {burst_s:.1} s: RSS {:.0} MiB, 2 s later {:.0} MiB; peak {:.0} MiB",
        mib(rss_started),
        mib(hwm_started),
        head_after - head_before,
        mib(rss_burst),
        mib(rss_burst_2s),
        mib(hwm)
    );
    Ok(json!({
        "ready_ms": ready_ms, "startup_cpu_s": cpu_startup_s, "head": head_before,
        "rss_started_mib": mib(rss_started), "hwm_started_mib": mib(hwm_started),
        "burst_events": head_after - head_before, "burst_s": burst_s,
        "rss_burst_mib": mib(rss_burst), "rss_burst_2s_mib": mib(rss_burst_2s),
        "hwm_mib": mib(hwm),
    }))
}

/// Runs the bench: a log of `n_events`, then two starts of `byre` (the binary beside this one
/// unless given), each followed by a burst of `burst` events.
pub async fn run(
    n_events: u64,
    burst: u64,
    byre: Option<PathBuf>,
    dir: &Path,
) -> anyhow::Result<()> {
    note_load("state-memory");
    let byre = crate::memory::byre_binary(byre)?;
    let tmp = tempfile::tempdir_in(dir)?;
    let log = byre::config::log_path(tmp.path());
    let t = Instant::now();
    let generated = gen::write_log(&log, n_events)?;
    println!(
        "generated {} events ({} tasks) in {:.1} s, log file {:.1} MiB",
        generated.state.last_seq,
        generated.state.tasks.len(),
        t.elapsed().as_secs_f64(),
        mib(std::fs::metadata(&log)?.len())
    );
    drop(generated);
    let machine = Machine::start();
    println!("first start (no projection snapshot: folds from seq 1, then writes one):");
    let first = one_start(&byre, tmp.path(), burst).await?;
    println!("second start (from the snapshot the first one left):");
    let second = one_start(&byre, tmp.path(), burst).await?;
    let others = machine.report("the two starts");
    emit(json!({
        "bench": "state-memory", "events": n_events, "burst": burst,
        "first_start": first, "second_start": second, "others_cpu_percent": others,
    }));
    Ok(())
}
