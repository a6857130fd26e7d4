//! `vendor-latency`: byre's added latency from one line on a vendor CLI's stdout to an SSE
//! client. The bench binary doubles as a fake `claude` ([`fake_claude`]), which writes the
//! wall-clock time (µs since the epoch) into the text of each `assistant` line; the client
//! subtracts it from its own receive time. Same machine, same clock: the figure is byre's
//! stdout read + parse + group commit (fsync) + fan-out + the client's socket read.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use byre::config::{AuthMode, Config};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{read_head, request, Dechunker};
use crate::stats::{cpu_time, emit, note_load, Machine, Summary};

/// Set in the agent's environment: the bench binary acts as the Claude CLI and prints this
/// many `assistant` lines.
pub const LINES_VAR: &str = "BYRE_BENCH_FAKE_CLAUDE_LINES";
/// Lines per second of the fake CLI.
pub const RATE_VAR: &str = "BYRE_BENCH_FAKE_CLAUDE_RATE";

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// The fake `claude`: one stdin line (the prompt), `system/init`, N `assistant` lines (text =
/// µs since the epoch when written) paced at the rate, `result`, then stdin until EOF.
pub fn fake_claude(lines: u64) -> std::io::Result<()> {
    let rate: f64 = std::env::var(RATE_VAR)
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|r: &f64| *r > 0.0)
        .unwrap_or(200.0);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    input.read_line(&mut line)?;
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(
        out,
        "{}",
        json!({"type": "system", "subtype": "init", "session_id": "x", "model": "fake",
               "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
               "tools": [], "mcp_servers": [], "permissionMode": "bypassPermissions"})
    )?;
    out.flush()?;
    let start = Instant::now();
    for i in 0..lines {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        writeln!(
            out,
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"msg_{i}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}},\"session_id\":\"x\"}}",
            now_us()
        )?;
        out.flush()?;
    }
    writeln!(
        out,
        r#"{{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{{"input_tokens":1,"output_tokens":1}},"total_cost_usd":0,"duration_ms":1,"num_turns":1}}"#
    )?;
    out.flush()?;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
    }
}

/// A git repository with one commit, on `main`.
pub(crate) fn make_repo(dir: &Path) -> anyhow::Result<()> {
    std::fs::write(dir.join("README.md"), "bench\n")?;
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &opts)?;
    let mut index = repo.index()?;
    index.add_path(Path::new("README.md"))?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("Bench", "bench@example.com")?;
    repo.commit(Some("HEAD"), &sig, &sig, "Initial commit", &tree, &[])?;
    Ok(())
}

/// What the SSE client collected.
#[derive(Default)]
struct Seen {
    /// receive time − the line's timestamp, ms, per `agent.text` of the task.
    latency_ms: Vec<f64>,
    /// `agent.text` events whose text was not a timestamp.
    unparsed: usize,
    turn_ended: bool,
}

impl Seen {
    fn data(&mut self, data: &[u8], recv_us: i64, task_id: &str) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
            return;
        };
        if v["task_id"].as_str() != Some(task_id) {
            return;
        }
        match v["kind"].as_str() {
            Some("agent.text") => match v["payload"]["text"]
                .as_str()
                .and_then(|t| t.parse::<i64>().ok())
            {
                Some(sent_us) => self.latency_ms.push((recv_us - sent_us) as f64 / 1e3),
                None => self.unparsed += 1,
            },
            Some("turn.ended") => self.turn_ended = true,
            _ => {}
        }
    }
}

/// Sets TCP_QUICKACK (the kernel clears it again after a while, so it is set after every
/// read): the client acknowledges at once instead of delaying its ACK up to 40 ms.
fn quick_ack(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Reads one SSE stream until the task's `turn.ended` (or `deadline`); the receive time of
/// each read is taken right after it returns, before any parsing.
async fn read_stream(
    mut s: TcpStream,
    chunked: bool,
    rest: Vec<u8>,
    task_id: tokio::sync::watch::Receiver<Option<String>>,
    deadline: Instant,
    quickack: bool,
) -> anyhow::Result<Seen> {
    if quickack {
        quick_ack(&s);
    }
    let mut seen = Seen::default();
    let mut dechunker = Dechunker::default();
    let mut line: Vec<u8> = Vec::new();
    let mut pending: Vec<(Vec<u8>, i64)> = Vec::new();
    let mut feed =
        |bytes: &[u8], recv_us: i64, pending: &mut Vec<(Vec<u8>, i64)>| -> anyhow::Result<()> {
            let mut payload = Vec::with_capacity(bytes.len());
            if chunked {
                dechunker.feed(bytes, |p| payload.extend_from_slice(p))?;
            } else {
                payload.extend_from_slice(bytes);
            }
            let mut rest = &payload[..];
            while let Some(i) = rest.iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&rest[..i]);
                rest = &rest[i + 1..];
                if let Some(d) = line.strip_prefix(b"data: ") {
                    pending.push((d.to_vec(), recv_us));
                }
                line.clear();
            }
            line.extend_from_slice(rest);
            Ok(())
        };
    feed(&rest, now_us(), &mut pending)?;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Events are kept until the task id is known (the stream opens before the task).
        if let Some(t) = task_id.borrow().as_deref() {
            for (d, at) in pending.drain(..) {
                seen.data(&d, at, t);
            }
        }
        if seen.turn_ended {
            return Ok(seen);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let n = match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(n) => n?,
            Err(_) => return Ok(seen),
        };
        let recv_us = now_us();
        anyhow::ensure!(n > 0, "the server closed the stream");
        if quickack {
            quick_ack(&s);
        }
        feed(&chunk[..n], recv_us, &mut pending)?;
    }
}

/// Runs the bench: N lines at R/s through one agent session, one SSE client.
pub async fn run(lines: u64, rate: f64, quickack: bool, dir: &Path) -> anyhow::Result<()> {
    note_load("vendor-latency");
    let tmp = tempfile::tempdir_in(dir)?;
    let data = tmp.path().join("data");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&repo)?;
    make_repo(&repo)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let mut config = Config::new(
        data,
        AuthMode::Local {
            login: "bench".into(),
        },
    );
    config.claude_bin = Some(std::env::current_exe()?);
    config.agent_env = vec![
        (LINES_VAR.into(), lines.to_string()),
        (RATE_VAR.into(), rate.to_string()),
    ];
    let running = byre::startup::run(listener, config).await?;
    let addr: SocketAddr = running.addr;

    let mut api = TcpStream::connect(addr).await?;
    api.set_nodelay(true)?;
    let (st, _) = request(&mut api, "GET", "/api/me", None).await?;
    anyhow::ensure!(st == 200, "GET /api/me answered {st}");
    let body = json!({"name": "bench", "repo_path": repo.display().to_string()}).to_string();
    let (st, resp) = request(&mut api, "POST", "/api/projects", Some(&body)).await?;
    anyhow::ensure!(
        st == 201,
        "createProject answered {st}: {}",
        String::from_utf8_lossy(&resp)
    );
    let project: serde_json::Value = serde_json::from_slice(&resp)?;
    let project_id = project["id"].as_str().unwrap_or_default().to_owned();
    let head: serde_json::Value = {
        let mut c = TcpStream::connect(addr).await?;
        let (st, b) = request(&mut c, "GET", "/api/admin/status", None).await?;
        anyhow::ensure!(st == 200, "GET /api/admin/status answered {st}");
        serde_json::from_slice(&b)?
    };
    let head = head["last_event_seq"].as_u64().unwrap_or(0);

    // The stream opens before the task exists (so no line is replayed from the log rather than
    // pushed live), unfiltered; the client keeps the task's events.
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let req = format!(
        "GET /api/events?after={head} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    let (h, rest) = read_head(&mut s, &mut buf).await?;
    anyhow::ensure!(h.status == 200, "GET /api/events answered {}", h.status);
    let (task_tx, task_rx) = tokio::sync::watch::channel(None);
    let expect_s = lines as f64 / rate;
    let deadline = Instant::now() + Duration::from_secs_f64(expect_s + 60.0);
    let reader = tokio::spawn(read_stream(s, h.chunked, rest, task_rx, deadline, quickack));

    let cpu0 = cpu_time();
    let machine = Machine::start();
    let t0 = Instant::now();
    let body = json!({"title": "vendor latency", "prompt": "go"}).to_string();
    let (st, resp) = request(
        &mut api,
        "POST",
        &format!("/api/projects/{project_id}/tasks"),
        Some(&body),
    )
    .await?;
    anyhow::ensure!(
        st == 201,
        "createTask answered {st}: {}",
        String::from_utf8_lossy(&resp)
    );
    let task: serde_json::Value = serde_json::from_slice(&resp)?;
    let task_id = task["id"].as_str().unwrap_or_default().to_owned();
    let _ = task_tx.send(Some(task_id.clone()));
    let mut seen = reader.await??;
    let wall = t0.elapsed();
    let cpu = cpu_time() - cpu0;
    let others = machine.report("the run");
    running.stop().await;
    let batches = crate::batches::take();
    let mut commit_ms: Vec<f64> = batches.iter().map(|b| b.commit_ms).collect();
    let commit = Summary::of_ms(&mut commit_ms);
    let events: u64 = batches.iter().map(|b| b.n_events).sum();

    let arrived = seen.latency_ms.len();
    let lat = Summary::of_ms(&mut seen.latency_ms);
    println!(
        "vendor-latency: {lines} lines at {rate}/s{}; {arrived}/{lines} agent.text events arrived ({} unparsed), turn.ended {}; {:.2} s from createTask",
        if quickack { ", client TCP_QUICKACK" } else { "" },
        seen.unparsed,
        if seen.turn_ended { "seen" } else { "NOT seen" },
        wall.as_secs_f64()
    );
    println!(
        "  vendor stdout line written -> SSE client read: {}",
        lat.line()
    );
    println!(
        "  writer: {} group commits, {events} events ({:.1} per commit); begin_write..commit (incl. fsync): {}",
        batches.len(),
        events as f64 / batches.len().max(1) as f64,
        commit.line()
    );
    println!(
        "  process CPU (byre + the SSE client; the fake CLI is a child): {:.2} s in {:.2} s wall = {:.0}% of one core",
        cpu.as_secs_f64(),
        wall.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    );
    emit(json!({
        "bench": "vendor-latency", "lines": lines, "rate": rate, "quickack": quickack, "arrived": arrived,
        "unparsed": seen.unparsed, "turn_ended": seen.turn_ended,
        "line_to_client": lat, "commit_ms": commit, "group_commits": batches.len(), "events": events, "others_cpu_percent": others,
        "cpu_percent": 100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
    }));
    anyhow::ensure!(
        arrived as u64 == lines,
        "{arrived} of {lines} lines arrived"
    );
    Ok(())
}
