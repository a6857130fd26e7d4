//! `stream-memory`: byre's RSS while slow SSE readers fall behind a large write burst.
//!
//! Starts the real `byre serve` as a child process (so its RSS is byre's alone), opens R raw
//! SSE connections that read at a trickle (1 KiB/s by default), writes a burst of B bytes of
//! events (`putWorkflow` of eight workflows over and over with a large description, 8
//! producers), then lets the readers read
//! as fast as they can until each has every seq of the burst. It samples the child's VmRSS
//! every 50 ms and checks that every reader got every seq once, in order.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::http::{read_head, request, Dechunker};
use crate::stats::{emit, note_load, Machine};

/// What the bench is asked to do.
pub struct Params {
    /// Slow SSE readers.
    pub readers: usize,
    /// Bytes of events written in the burst.
    pub burst_bytes: u64,
    /// Size of one event's payload.
    pub event_bytes: usize,
    /// `serve --stream-buffer`.
    pub stream_buffer: String,
    /// Bytes per second a reader reads during the burst.
    pub read_rate: usize,
    /// The `byre` binary.
    pub byre: Option<PathBuf>,
}

/// The child's resident set size now, in bytes (VmRSS).
pub(crate) fn rss(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// A `kB` field of `/proc/<pid>/status` (e.g. `VmHWM:`), in bytes; 0 when unreadable.
pub(crate) fn status_field(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// CPU seconds the child has used (utime + stime).
pub(crate) fn cpu_s(pid: u32) -> f64 {
    // SAFETY: sysconf is always safe to call.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(close) = stat.rfind(')') else {
        return 0.0;
    };
    let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let ticks: u64 = rest.get(11).and_then(|x| x.parse().ok()).unwrap_or(0)
        + rest.get(12).and_then(|x| x.parse().ok()).unwrap_or(0);
    ticks as f64 / hz
}

/// Bytes in MiB.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// What one reader saw.
#[derive(Default)]
struct ReaderLog {
    received: u64,
    out_of_order: u64,
    last: u64,
    error: Option<String>,
}

/// Reads `/api/events?after={after}` slowly until `fast` turns true, then as fast as it can,
/// until it has seen `until` (sent on `target`).
async fn reader(
    addr: SocketAddr,
    after: u64,
    read_rate: usize,
    mut fast: watch::Receiver<bool>,
    mut target: watch::Receiver<u64>,
    progress: Arc<AtomicU64>,
) -> ReaderLog {
    let mut log = ReaderLog {
        last: after,
        ..ReaderLog::default()
    };
    let result = async {
        let mut s = TcpStream::connect(addr).await?;
        let req = format!(
            "GET /api/events?after={after} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        let (head, rest) = read_head(&mut s, &mut buf).await?;
        anyhow::ensure!(head.status == 200, "GET /api/events answered {}", head.status);
        anyhow::ensure!(head.chunked, "the event stream is chunked");
        let mut dechunker = Dechunker::default();
        let mut lines = LineScan::default();
        let mut on_bytes = |bytes: &[u8], log: &mut ReaderLog| -> anyhow::Result<()> {
            dechunker.feed(bytes, |p| {
                lines.feed(p, |seq| {
                    if seq != log.last + 1 {
                        log.out_of_order += 1;
                    }
                    log.last = seq;
                    log.received += 1;
                })
            })
        };
        on_bytes(&rest, &mut log)?;
        let mut chunk = vec![0u8; 256 * 1024];
        let slow = read_rate.clamp(1, chunk.len());
        loop {
            let until = *target.borrow();
            if until > 0 && log.last >= until {
                return Ok(());
            }
            if *fast.borrow() {
                tokio::select! {
                    n = s.read(&mut chunk) => {
                        let n = n?;
                        anyhow::ensure!(n > 0, "the server closed the stream");
                        on_bytes(&chunk[..n], &mut log)?;
                    }
                    _ = target.changed() => {}
                }
            } else {
                // A trickle: at most `slow` bytes, once a second.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        let n = tokio::time::timeout(Duration::from_millis(1), s.read(&mut chunk[..slow])).await;
                        if let Ok(n) = n {
                            let n = n?;
                            anyhow::ensure!(n > 0, "the server closed the stream");
                            on_bytes(&chunk[..n], &mut log)?;
                        }
                    }
                    _ = fast.changed() => {}
                }
            }
            progress.store(log.last, Ordering::Relaxed);
        }
    }
    .await;
    if let Err(e) = result {
        log.error = Some(e.to_string());
    }
    log
}

/// Finds `id: N` lines in SSE payload bytes without keeping the (large) data lines.
#[derive(Default)]
struct LineScan {
    /// The start of the current line, when it may be an `id:` line (at most a few bytes).
    head: Vec<u8>,
    /// Whether the current line is already known not to be an `id:` line.
    skipping: bool,
}

impl LineScan {
    fn feed(&mut self, mut bytes: &[u8], mut on_id: impl FnMut(u64)) {
        while !bytes.is_empty() {
            let nl = memchr::memchr(b'\n', bytes);
            let (part, rest) = match nl {
                Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
                None => (bytes, None),
            };
            if !self.skipping {
                self.head.extend_from_slice(part);
                if self.head.len() > 32
                    || !self.head.starts_with(&b"id: "[..self.head.len().min(4)])
                {
                    self.skipping = true;
                    self.head.clear();
                }
            }
            match rest {
                Some(r) => {
                    if !self.skipping && self.head.len() > 4 {
                        if let Some(seq) = std::str::from_utf8(&self.head[4..])
                            .ok()
                            .and_then(|s| s.trim().parse().ok())
                        {
                            on_id(seq);
                        }
                    }
                    self.head.clear();
                    self.skipping = false;
                    bytes = r;
                }
                None => bytes = &[],
            }
        }
    }
}

/// The head seq, from getStatus.
pub(crate) async fn head_seq(addr: SocketAddr) -> anyhow::Result<u64> {
    let mut s = TcpStream::connect(addr).await?;
    let (status, body) = request(&mut s, "GET", "/api/admin/status", None).await?;
    anyhow::ensure!(status == 200, "getStatus answered {status}");
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    v["last_event_seq"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no last_event_seq"))
}

/// The `byre` binary the benches that run `byre serve` start: `given`, else `byre` beside this
/// bench binary (`cargo build --release -p byre` puts it there).
/// # Errors
/// When it does not exist.
pub(crate) fn byre_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let byre = match given {
        Some(b) => b,
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("byre"))
            .ok_or_else(|| anyhow::anyhow!("no directory of the bench binary"))?,
    };
    anyhow::ensure!(
        byre.exists(),
        "{} is missing: cargo build --release -p byre (or pass --byre)",
        byre.display()
    );
    Ok(byre)
}

/// `byre serve` on a loopback port with login `bench`, its data in `data`, warnings only on
/// stderr, stdout piped (its first line names the URL: [`listen_addr`]), killed when dropped.
/// Callers add their own flags before spawning.
pub(crate) fn serve_command(byre: &Path, data: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(byre);
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--login",
            "bench",
            "--data",
        ])
        .arg(data)
        .env("BYRE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The address in `byre serve`'s first line (`listening on http://127.0.0.1:PORT/ …`).
/// # Errors
/// When the line names no `http://` address.
pub(crate) fn listen_addr(line: &str) -> anyhow::Result<SocketAddr> {
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| anyhow::anyhow!("no URL in {line:?}"))?;
    Ok(url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()?)
}

/// Runs the bench.
pub async fn run(p: Params, dir: &Path) -> anyhow::Result<()> {
    note_load("stream-memory");
    let byre = crate::memory::byre_binary(p.byre.clone())?;
    let tmp = tempfile::tempdir_in(dir)?;
    let mut child = serve_command(&byre, tmp.path())
        .args(["--stream-buffer", &p.stream_buffer])
        .spawn()?;
    let pid = child.id().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    let mut out = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let line = out
        .next_line()
        .await?
        .ok_or_else(|| anyhow::anyhow!("byre serve printed nothing"))?;
    let addr = listen_addr(&line)?;
    let after = head_seq(addr).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_idle = rss(pid);

    // RSS sampler.
    let (phase_tx, phase_rx) = watch::channel(0u8); // 0 burst, 1 catch-up, 2 done
    let sampler = tokio::spawn(async move {
        let mut max = [0u64; 2];
        loop {
            let phase = *phase_rx.borrow();
            if phase >= 2 {
                return max;
            }
            let r = rss(pid);
            max[phase as usize] = max[phase as usize].max(r);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });

    let (fast_tx, fast_rx) = watch::channel(false);
    let (target_tx, target_rx) = watch::channel(0u64);
    let mut readers = Vec::new();
    let mut progress = Vec::new();
    for _ in 0..p.readers {
        let pr = Arc::new(AtomicU64::new(after));
        progress.push(pr.clone());
        readers.push(tokio::spawn(reader(
            addr,
            after,
            p.read_rate,
            fast_rx.clone(),
            target_rx.clone(),
            pr,
        )));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The burst: 8 producers PUT workflows whose description is `event_bytes` long.
    let n_events = (p.burst_bytes / p.event_bytes as u64).max(1);
    let next = Arc::new(AtomicU64::new(0));
    let filler: Arc<str> = "x".repeat(p.event_bytes).into();
    let machine = Machine::start();
    let byre_cpu_before = cpu_s(pid);
    let started = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..8 {
        let (next, filler) = (next.clone(), filler.clone());
        producers.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n_events {
                    return anyhow::Ok(());
                }
                let body = format!(
                    "{{\"description\":\"{filler}\",\"stages\":[{{\"name\":\"s\",\"model\":\"m\",\"prompt\":\"p{i}\"}}]}}"
                );
                // Eight names, saved over and over: the log grows by every event while the
                // state (which keeps each workflow's latest definition) stays the same size,
                // so what grows is what streams hold.
                let (status, resp) = request(
                    &mut s,
                    "PUT",
                    &format!("/api/workflows/burst-{}", i % 8),
                    Some(&body),
                )
                .await?;
                anyhow::ensure!(
                    status == 200,
                    "putWorkflow answered {status}: {}",
                    String::from_utf8_lossy(&resp)
                );
            }
        }));
    }
    for pr in producers {
        pr.await??;
    }
    let burst_s = started.elapsed().as_secs_f64();
    let head = head_seq(addr).await?;
    let rss_after_burst = rss(pid);
    let behind: Vec<u64> = progress
        .iter()
        .map(|p| head - p.load(Ordering::Relaxed))
        .collect();
    println!(
        "burst: {n_events} events of {} KiB ({:.0} MiB) in {burst_s:.1} s; RSS {:.0} MiB after it; readers behind by {}..{} events",
        p.event_bytes / 1024,
        mib(n_events * p.event_bytes as u64),
        mib(rss_after_burst),
        behind.iter().min().copied().unwrap_or(0),
        behind.iter().max().copied().unwrap_or(0),
    );

    // Catch-up: every reader reads everything.
    let _ = phase_tx.send(1);
    let caught_up_started = Instant::now();
    let _ = target_tx.send(head);
    let _ = fast_tx.send(true);
    let mut logs = Vec::new();
    for r in readers {
        logs.push(r.await?);
    }
    let catch_up_s = caught_up_started.elapsed().as_secs_f64();
    let _ = phase_tx.send(2);
    let max = sampler.await?;
    let others_with_byre = machine.report("stream-memory");
    let byre_pct = (cpu_s(pid) - byre_cpu_before) / started.elapsed().as_secs_f64() * 100.0;
    let others = (others_with_byre - byre_pct).max(0.0);
    println!(
        "  of which byre (the child) {byre_pct:.0}% of a core: the rest of the machine used {others:.0}%"
    );
    let rss_end = rss(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_end_2s = rss(pid);
    let hwm = status_field(pid, "VmHWM:");

    let expected = head - after;
    let complete = logs
        .iter()
        .filter(|l| l.received == expected && l.out_of_order == 0 && l.error.is_none())
        .count();
    for (i, l) in logs.iter().enumerate().filter(|(_, l)| l.error.is_some()) {
        println!("  reader {i}: {:?}", l.error);
    }
    let out_of_order: u64 = logs.iter().map(|l| l.out_of_order).sum();
    println!(
        "readers: {complete}/{} got every seq {}..={head} once and in order ({out_of_order} out of order); catch-up {catch_up_s:.1} s",
        p.readers,
        after + 1
    );
    println!(
        "byre RSS: idle {:.0} MiB; max during the burst {:.0} MiB; max during catch-up {:.0} MiB; peak (VmHWM) {:.0} MiB; at the end {:.0} MiB, 2 s later {:.0} MiB; --stream-buffer {}",
        mib(rss_idle),
        mib(max[0]),
        mib(max[1]),
        mib(hwm),
        mib(rss_end),
        mib(rss_end_2s),
        p.stream_buffer
    );
    emit(serde_json::json!({
        "bench": "stream-memory",
        "readers": p.readers,
        "events": n_events,
        "event_bytes": p.event_bytes,
        "stream_buffer": p.stream_buffer,
        "burst_s": burst_s,
        "catch_up_s": catch_up_s,
        "rss_idle": rss_idle,
        "rss_max_burst": max[0],
        "rss_max_catch_up": max[1],
        "rss_hwm": hwm,
        "rss_end": rss_end,
        "rss_end_2s": rss_end_2s,
        "complete_readers": complete,
        "out_of_order": out_of_order,
        "byre_cpu_pct": byre_pct,
        "others_pct": others,
    }));
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    anyhow::ensure!(
        complete == p.readers,
        "{} reader(s) missed seqs",
        p.readers - complete
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{listen_addr, LineScan};

    #[test]
    fn the_address_is_read_from_serves_first_line() {
        let line = "byre listening on http://127.0.0.1:41234 (data: /tmp/x)";
        assert_eq!(
            listen_addr(line).unwrap(),
            "127.0.0.1:41234".parse().unwrap()
        );
        assert!(listen_addr("byre: cannot bind").is_err());
    }

    #[test]
    fn ids_are_found_across_any_split() {
        let text =
            b": connected\nretry: 2000\n\nid: 7\ndata: {\"x\":\"id: 9\"}\n\nid: 8\ndata: {}\n\n";
        for split in 0..text.len() {
            let mut scan = LineScan::default();
            let mut ids = Vec::new();
            scan.feed(&text[..split], |s| ids.push(s));
            scan.feed(&text[split..], |s| ids.push(s));
            assert_eq!(ids, [7, 8], "split at {split}");
        }
    }
}
