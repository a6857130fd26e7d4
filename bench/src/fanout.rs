//! `fanout`: the real server in-process, C raw SSE connections, one producer submitting R
//! events/s over HTTP; commit-to-client latency per (client, event) and missed events.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use byre::config::{AuthMode, Config};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::http::{read_head, request, Dechunker};
use crate::stats::{cpu_time, emit, note_load, thread_cpu, Machine, Summary};

/// Raises the soft RLIMIT_NOFILE to at least `want` (up to the hard limit).
fn raise_nofile(want: u64) -> anyhow::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid struct.
    unsafe {
        anyhow::ensure!(
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0,
            "getrlimit failed"
        );
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            anyhow::ensure!(
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0,
                "setrlimit failed"
            );
        }
    }
    Ok(lim.rlim_cur)
}

/// What one SSE client saw.
#[derive(Default)]
struct ClientLog {
    /// (seq, receipt time) in arrival order.
    recv: Vec<(u64, Instant)>,
    /// (seq, producer request index, `created_at` in µs since the epoch), parsed from the
    /// event JSON (client 0 only).
    models: Vec<(u64, usize, i64)>,
    error: Option<String>,
}

struct Sse {
    chunked: bool,
    dechunker: Dechunker,
    line: Vec<u8>,
    last_id: u64,
    parse_models: bool,
    connected: bool,
    log: ClientLog,
    progress: Arc<Vec<AtomicU64>>,
    idx: usize,
}

impl Sse {
    fn feed(&mut self, bytes: &[u8], now: Instant) -> anyhow::Result<()> {
        if self.chunked {
            let mut payload = Vec::with_capacity(bytes.len());
            self.dechunker
                .feed(bytes, |p| payload.extend_from_slice(p))?;
            self.lines(&payload, now);
        } else {
            self.lines(bytes, now);
        }
        Ok(())
    }

    fn lines(&mut self, mut bytes: &[u8], now: Instant) {
        while let Some(i) = bytes.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&bytes[..i]);
            bytes = &bytes[i + 1..];
            let line = std::mem::take(&mut self.line);
            self.handle(line.strip_suffix(b"\r").unwrap_or(&line), now);
            self.line = line;
            self.line.clear();
        }
        self.line.extend_from_slice(bytes);
    }

    fn handle(&mut self, line: &[u8], now: Instant) {
        if let Some(id) = line.strip_prefix(b"id: ") {
            if let Some(seq) = std::str::from_utf8(id)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                self.log.recv.push((seq, now));
                self.last_id = seq;
                self.progress[self.idx].store(seq, Ordering::Relaxed);
            }
        } else if self.parse_models && line.starts_with(b"data: ") {
            const NEEDLE: &[u8] = b"\"model\":\"bench-";
            if let Some(at) = line.windows(NEEDLE.len()).position(|w| w == NEEDLE) {
                let digits: String = line[at + NEEDLE.len()..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .map(|&b| b as char)
                    .collect();
                let created_us = field(line, b"\"created_at\":\"")
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.timestamp_micros());
                if let (Ok(i), Some(c)) = (digits.parse(), created_us) {
                    self.log.models.push((self.last_id, i, c));
                }
            }
        } else if line == b": connected" {
            self.connected = true;
        }
    }
}

/// The string value after `key` (which ends with the opening quote).
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    let len = line[at..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&line[at..at + len]).ok()
}

async fn client(
    addr: SocketAddr,
    after: u64,
    idx: usize,
    progress: Arc<Vec<AtomicU64>>,
    ready: mpsc::Sender<()>,
    mut stop: watch::Receiver<bool>,
) -> ClientLog {
    let mut sse = Sse {
        chunked: false,
        dechunker: Dechunker::default(),
        line: Vec::new(),
        last_id: 0,
        parse_models: idx == 0,
        connected: false,
        log: ClientLog::default(),
        progress,
        idx,
    };
    let result = async {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let req = format!(
            "GET /api/events?after={after} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        let (head, rest) = read_head(&mut s, &mut buf).await?;
        anyhow::ensure!(head.status == 200, "GET /api/events answered {}", head.status);
        sse.chunked = head.chunked;
        let mut ready = Some(ready);
        sse.feed(&rest, Instant::now())?;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if sse.connected {
                if let Some(r) = ready.take() {
                    let _ = r.send(()).await;
                }
            }
            tokio::select! {
                n = s.read(&mut chunk) => {
                    let n = n?;
                    let now = Instant::now();
                    if n == 0 {
                        anyhow::bail!("the server closed the stream");
                    }
                    sse.feed(&chunk[..n], now)?;
                }
                _ = stop.changed() => return Ok(()),
            }
        }
    }
    .await;
    if let Err(e) = result {
        sse.log.error = Some(e.to_string());
    }
    sse.log
}

fn signed_ms(t: Instant, since: Instant) -> f64 {
    if t >= since {
        (t - since).as_secs_f64() * 1e3
    } else {
        -((since - t).as_secs_f64() * 1e3)
    }
}

/// Runs the fan-out bench.
pub async fn run(clients: usize, rate: f64, seconds: f64, dir: &Path) -> anyhow::Result<()> {
    note_load("fanout");
    let nofile = raise_nofile(clients as u64 * 2 + 1024)?;
    let tmp = tempfile::tempdir_in(dir)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let config = Config::new(
        tmp.path().to_path_buf(),
        AuthMode::Local {
            login: "bench".into(),
        },
    );
    let running = byre::startup::run(listener, config).await?;
    let addr = running.addr;

    // The user exists (its user.created is the first event), and the head before the stream.
    let mut admin = TcpStream::connect(addr).await?;
    let (st, _) = request(&mut admin, "GET", "/api/me", None).await?;
    anyhow::ensure!(st == 200, "GET /api/me answered {st}");
    let head0 = last_event_seq(addr).await?;

    // Connect the clients, 50 at a time (the listener's backlog is small).
    let (stop_tx, stop_rx) = watch::channel(false);
    let t_connect = Instant::now();
    let mut handles = Vec::with_capacity(clients);
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..clients).map(|_| AtomicU64::new(0)).collect());
    for wave in (0..clients).collect::<Vec<_>>().chunks(50) {
        let (ready_tx, mut ready_rx) = mpsc::channel(wave.len());
        for &c in wave {
            handles.push(tokio::spawn(client(
                addr,
                head0,
                c,
                progress.clone(),
                ready_tx.clone(),
                stop_rx.clone(),
            )));
        }
        drop(ready_tx);
        let mut n = 0;
        while n < wave.len() {
            match tokio::time::timeout(Duration::from_secs(30), ready_rx.recv()).await {
                Ok(Some(())) => n += 1,
                Ok(None) => break, // some clients failed; their logs say why
                Err(_) => anyhow::bail!("clients did not connect within 30 s"),
            }
        }
    }
    let connect_s = t_connect.elapsed().as_secs_f64();
    let sse_clients = status_field(addr, "sse_clients").await?;
    println!(
        "fanout: {clients} SSE clients connected in {connect_s:.2} s (server counts {sse_clients}); RLIMIT_NOFILE {nofile}"
    );

    // The producer: request i at start + i/rate, each on a pooled keep-alive connection.
    let total = (rate * seconds).round() as usize;
    let pool: Arc<Mutex<Vec<(TcpStream, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now() + Duration::from_millis(200);
    let cpu0 = cpu_time();
    let machine = Machine::start();
    let threads0 = thread_cpu();
    let anchor = Instant::now();
    let anchor_us = chrono::Utc::now().timestamp_micros();
    let mut reqs = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep_until((start + Duration::from_secs_f64(i as f64 / rate)).into()).await;
        let pool = pool.clone();
        reqs.push(tokio::spawn(async move {
            // Connections idle for over 2 s are dropped: the server closes idle keep-alive
            // connections after 5 s.
            let conn = {
                let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
                pool.retain(|(_, used)| used.elapsed() < Duration::from_secs(2));
                pool.pop()
            };
            let mut conn = match conn {
                Some((c, _)) => c,
                None => {
                    let c = TcpStream::connect(addr).await?;
                    c.set_nodelay(true)?;
                    c
                }
            };
            let body = format!("{{\"model\":\"bench-{i}\"}}");
            let t_send = Instant::now();
            let (st, _) = request(&mut conn, "PUT", "/api/me/default-model", Some(&body)).await?;
            let t_ack = Instant::now();
            anyhow::ensure!(st == 200, "PUT /api/me/default-model answered {st}");
            pool.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((conn, Instant::now()));
            Ok((t_send, t_ack))
        }));
    }
    let mut sent = Vec::with_capacity(total);
    for r in reqs {
        sent.push(r.await??);
    }
    let produce_s = (Instant::now() - start).as_secs_f64();
    let head_end = last_event_seq(addr).await?;
    let expected: Vec<u64> = (head0 + 1..=head_end).collect();

    // Let the streams drain (up to 10 s), then stop the clients.
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < drain_deadline
        && progress
            .iter()
            .any(|p| p.load(Ordering::Relaxed) < head_end)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut logs = Vec::new();
    let cpu = cpu_time() - cpu0;
    let others = machine.report("the run");
    let threads1 = thread_cpu();
    let wall = Instant::now() - start;
    let _ = stop_tx.send(true);
    for h in handles {
        logs.push(h.await?);
    }
    running.stop().await;
    let mut commit_ms: Vec<f64> = crate::batches::take().iter().map(|b| b.commit_ms).collect();
    let commit = Summary::of_ms(&mut commit_ms);

    // seq → producer request, from client 0's payloads.
    let mut by_seq = std::collections::HashMap::new();
    for &(seq, i, created_us) in &logs[0].models {
        by_seq.insert(seq, (i, created_us));
    }
    let mapped = expected.iter().filter(|s| by_seq.contains_key(s)).count();
    let mut from_ack = Vec::with_capacity(clients * total);
    let mut from_send = Vec::with_capacity(clients * total);
    let mut from_decide = Vec::with_capacity(clients * total);
    // Receipt instants as wall-clock µs, to compare with the events' `created_at`.
    let wall_us = |t: Instant| anchor_us + (signed_ms(t, anchor) * 1e3) as i64;
    let mut missed = 0usize;
    let mut out_of_order = 0usize;
    let mut errors = 0usize;
    for log in &logs {
        if let Some(e) = &log.error {
            errors += 1;
            if errors <= 3 {
                println!("  client error: {e}");
            }
        }
        let seqs: Vec<u64> = log.recv.iter().map(|r| r.0).collect();
        if seqs != expected {
            let got: std::collections::HashSet<u64> = seqs.iter().copied().collect();
            missed += expected.iter().filter(|s| !got.contains(s)).count();
            out_of_order += seqs.windows(2).filter(|w| w[1] != w[0] + 1).count();
        }
        for &(seq, t) in &log.recv {
            if let Some(&(i, created_us)) = by_seq.get(&seq) {
                from_ack.push(signed_ms(t, sent[i].1));
                from_send.push(signed_ms(t, sent[i].0));
                from_decide.push((wall_us(t) - created_us) as f64 / 1e3);
            }
        }
    }
    let mut ack_lat: Vec<f64> = sent.iter().map(|(s, a)| signed_ms(*a, *s)).collect();
    let ack = Summary::of_ms(&mut ack_lat);
    let lat_ack = Summary::of_ms(&mut from_ack);
    let lat_send = Summary::of_ms(&mut from_send);
    let lat_decide = Summary::of_ms(&mut from_decide);
    let negative = from_ack.iter().filter(|&&x| x < 0.0).count();
    println!(
        "  produced {} events in {produce_s:.2} s ({:.1}/s), seqs {}..={}; producer ack (PUT round trip): {}",
        expected.len(),
        expected.len() as f64 / produce_s,
        head0 + 1,
        head_end,
        ack.line()
    );
    println!(
        "  {} (client, event) pairs; {mapped}/{} seqs mapped to their request; missed {missed}; out of order {out_of_order}; client errors {errors}",
        from_ack.len(),
        expected.len()
    );
    println!(
        "  created_at-to-client (writer's decide time, just before its fsync): {}",
        lat_decide.line()
    );
    println!(
        "  ack-to-client (PUT response received): {} ({negative} pairs arrived before the PUT's response)",
        lat_ack.line()
    );
    println!(
        "  request-sent-to-client (upper bound): {}",
        lat_send.line()
    );
    println!(
        "  writer begin_write..commit (incl. fsync): {}",
        commit.line()
    );
    let mut by_thread: Vec<(String, f64)> = threads1
        .iter()
        .map(|(k, v)| (k.clone(), v - threads0.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.05)
        .collect();
    by_thread.sort_by(|a, b| b.1.total_cmp(&a.1));
    let by_thread_text: Vec<String> = by_thread
        .iter()
        .map(|(k, v)| format!("{k} {:.0}%", 100.0 * v / wall.as_secs_f64()))
        .collect();
    println!(
        "  CPU by thread (share of one core; actix-server wo = the server's HTTP workers, tokio-rt-worker = the bench's clients and producer, and the server's accept loop, byre-writer = the log writer): {}",
        by_thread_text.join(", ")
    );
    println!(
        "  process CPU over the run: {:.2} s in {:.2} s wall = {:.0}% of one core (2 cores = 200%)",
        cpu.as_secs_f64(),
        wall.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    );
    emit(json!({
        "bench": "fanout", "clients": clients, "rate": rate, "seconds": seconds,
        "events": expected.len(), "pairs": from_ack.len(), "mapped": mapped,
        "missed": missed, "out_of_order": out_of_order, "client_errors": errors,
        "created_at_to_client": lat_decide, "ack_to_client": lat_ack, "send_to_client": lat_send, "producer_ack": ack, "commit_ms": commit,
        "cpu_percent": 100.0 * cpu.as_secs_f64() / wall.as_secs_f64(), "others_cpu_percent": others,
        "thread_cpu_percent": by_thread.iter().map(|(k, v)| json!([k, 100.0 * v / wall.as_secs_f64()])).collect::<Vec<_>>(),
    }));
    Ok(())
}

/// A field of GET /api/admin/status, on a fresh connection (an idle keep-alive connection is
/// closed by the server after a few seconds).
async fn status_field(addr: SocketAddr, field: &str) -> anyhow::Result<u64> {
    let mut admin = TcpStream::connect(addr).await?;
    let (st, body) = request(&mut admin, "GET", "/api/admin/status", None).await?;
    anyhow::ensure!(st == 200, "GET /api/admin/status answered {st}");
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    v[field]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("status has no {field}"))
}

async fn last_event_seq(addr: SocketAddr) -> anyhow::Result<u64> {
    status_field(addr, "last_event_seq").await
}
