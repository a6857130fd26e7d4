//! `agents`: many concurrent real Claude Code sessions on one byre (issue 19, item 6).
//!
//! Starts the project's fake Anthropic API in this process (script
//! `fixtures/fake-model/z_bench_agents.json`: each turn's message is echoed back as streamed
//! text, one `text_delta` of 24 characters every 20 ms, with one `Write`), and the real
//! `byre serve` as a child process pointed at it and at the pinned Claude Code CLI through its
//! environment (`BYRE_CLAUDE_BIN`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`), so the CPU and
//! RSS read from `/proc/<pid>` are byre's alone. One project (a one-commit git repo), then S
//! tasks created at once, each with a prompt (its own worktree and Claude session); as each
//! turn ends `completed` (seen on the event stream) the session gets its next message, until T
//! turns each. A turn that ends otherwise, or does not end before the timeout, fails the bench.
//! Meanwhile a sampler reads byre's RSS and, from the process tree under it, each Claude Code
//! process's and each `byre mcp` helper's RSS and CPU.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use byre_fake_models::{FakeAnthropic, Script};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::http::{read_head, request, Dechunker};
use crate::memory::{cpu_s, head_seq, mib, rss};
use crate::stats::{emit, note_load, Machine};

/// What the bench is asked to do.
pub struct Params {
    /// Concurrent tasks, each with its own Claude Code session.
    pub sessions: usize,
    /// Turns per session.
    pub turns: usize,
    /// Characters of each turn's message, which the fake streams back (24 per delta).
    pub chars: usize,
    /// Seconds all turns together may take.
    pub timeout_s: u64,
    /// The `byre` binary (default: `byre` beside this one).
    pub byre: Option<PathBuf>,
}

/// The fake model's script for this bench.
const SCRIPT: &str = "z_bench_agents";

/// The message of `turn` (from 1) of task `i`: the marker the script answers, then filler
/// text to `chars` characters.
fn message(i: usize, turn: usize, chars: usize) -> String {
    const WORDS: [&str; 16] = [
        "the", "agent", "reads", "module", "and", "checks", "every", "caller", "before", "it",
        "writes", "a", "short", "note", "about", "them",
    ];
    let mut text = format!("BENCH-TURN {turn} of task {i}:");
    let mut k = i * 7 + turn;
    while text.len() < chars {
        text.push(' ');
        text.push_str(WORDS[k % WORDS.len()]);
        k = k.wrapping_mul(31).wrapping_add(17) >> 1;
        if k.is_multiple_of(11) {
            text.push('.');
        }
    }
    text
}

/// One process under byre, as the sampler last saw it.
#[derive(Clone, Copy, Default)]
struct ProcSeen {
    cpu_s: f64,
}

/// What the sampler collected.
#[derive(Default)]
struct Samples {
    /// Largest byre RSS while all S agent processes ran.
    byre_rss_live_max: u64,
    /// Largest byre RSS at all.
    byre_rss_max: u64,
    /// Most Claude Code processes alive at once.
    claude_max: usize,
    /// Largest sum of the Claude Code processes' RSS.
    claude_rss_sum_max: u64,
    /// Largest sum of the `byre mcp` helpers' RSS.
    mcp_rss_sum_max: u64,
    /// Smallest MemAvailable seen.
    mem_available_min: u64,
    /// Every Claude Code process seen, by pid.
    claude: HashMap<u32, ProcSeen>,
    /// Every `byre mcp` helper seen, by pid.
    mcp: HashMap<u32, ProcSeen>,
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn mem_available() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Every process: pid → (ppid, CPU seconds, RSS bytes), from /proc/<pid>/stat.
fn process_table() -> HashMap<u32, (u32, f64, u64)> {
    // SAFETY: sysconf is always safe to call.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let ppid = num(1) as u32;
        let cpu = (num(11) + num(12)) as f64 / hz;
        out.insert(pid, (ppid, cpu, num(21) * page));
    }
    out
}

/// Whether `pid` runs `exe` (its /proc/<pid>/exe resolves to it).
fn runs_exe(pid: u32, exe: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe)
}

/// Whether `pid` runs `exe`, remembering only a yes: a child caught between fork and exec
/// still runs its parent's program, and is looked at again next time.
fn is_exe(known: &mut std::collections::HashSet<u32>, pid: u32, exe: &Path) -> bool {
    if known.contains(&pid) {
        return true;
    }
    let yes = runs_exe(pid, exe);
    if yes {
        known.insert(pid);
    }
    yes
}

/// Reads the process tree under byre every 200 ms until `stop` is set.
async fn sample(
    byre_pid: u32,
    claude_exe: PathBuf,
    byre_exe: PathBuf,
    sessions: usize,
    samples: Arc<Mutex<Samples>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut known_claude = std::collections::HashSet::new();
    let mut known_mcp = std::collections::HashSet::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let table = process_table();
        let byre_rss = rss(byre_pid);
        let mut claude_now = Vec::new();
        for (&pid, &(ppid, _, _)) in &table {
            if ppid == byre_pid && is_exe(&mut known_claude, pid, &claude_exe) {
                claude_now.push(pid);
            }
        }
        let mut mcp_now = Vec::new();
        for (&pid, &(ppid, _, _)) in &table {
            if claude_now.contains(&ppid) && is_exe(&mut known_mcp, pid, &byre_exe) {
                mcp_now.push(pid);
            }
        }
        let avail = mem_available();
        {
            let mut s = samples.lock().expect("sampler lock");
            s.byre_rss_max = s.byre_rss_max.max(byre_rss);
            if claude_now.len() >= sessions {
                s.byre_rss_live_max = s.byre_rss_live_max.max(byre_rss);
            }
            s.claude_max = s.claude_max.max(claude_now.len());
            let mut sum = 0;
            for pid in &claude_now {
                let (_, cpu, rss) = table[pid];
                s.claude.insert(*pid, ProcSeen { cpu_s: cpu });
                sum += rss;
            }
            s.claude_rss_sum_max = s.claude_rss_sum_max.max(sum);
            let mut sum = 0;
            for pid in &mcp_now {
                let (_, cpu, rss) = table[pid];
                s.mcp.insert(*pid, ProcSeen { cpu_s: cpu });
                sum += rss;
            }
            s.mcp_rss_sum_max = s.mcp_rss_sum_max.max(sum);
            if avail > 0 && (s.mem_available_min == 0 || avail < s.mem_available_min) {
                s.mem_available_min = avail;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the event stream showed, per task.
#[derive(Default, Clone)]
struct TaskSeen {
    deltas: u64,
    /// Completed turns.
    completed: usize,
    /// `agent.text`, `tool.call`, `tool.result`, `turn.ended` events.
    vendor_events: u64,
    /// Every event kind seen for the task, counted.
    kinds: BTreeMap<String, u64>,
    last_kind: String,
}

/// Sends one request on a fresh connection.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let body = body.map(Value::to_string);
    let (status, resp) = request(&mut s, method, path, body.as_deref()).await?;
    let v = serde_json::from_slice(&resp).unwrap_or(Value::Null);
    Ok((status, v))
}

/// Reads the event stream (opened before the tasks), counts each task's deltas and events,
/// sends each session its next message when a turn completes, and returns when every task has
/// `turns` completed turns. A turn that ends otherwise is an error, with its payload.
#[allow(clippy::too_many_arguments)]
async fn follow(
    mut s: TcpStream,
    chunked: bool,
    rest: Vec<u8>,
    addr: SocketAddr,
    n_tasks: usize,
    turns: usize,
    chars: usize,
    tasks: Arc<Mutex<HashMap<String, usize>>>,
    seen: Arc<Mutex<HashMap<String, TaskSeen>>>,
    errors: mpsc::UnboundedSender<String>,
) -> anyhow::Result<()> {
    let mut dechunker = Dechunker::default();
    let mut line: Vec<u8> = Vec::new();
    let mut frames: Vec<(String, Vec<u8>)> = Vec::new();
    let mut event_name = String::new();
    let mut data: Vec<u8> = Vec::new();
    let mut split = |payload: &[u8], frames: &mut Vec<(String, Vec<u8>)>| {
        let mut rest = payload;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            line.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            if line.is_empty() {
                if !data.is_empty() {
                    frames.push((std::mem::take(&mut event_name), std::mem::take(&mut data)));
                }
                event_name.clear();
            } else if let Some(d) = line.strip_prefix(b"data: ") {
                data.extend_from_slice(d);
            } else if let Some(e) = line.strip_prefix(b"event: ") {
                event_name = String::from_utf8_lossy(e).into_owned();
            }
            line.clear();
        }
        line.extend_from_slice(rest);
    };
    let mut feed = |bytes: &[u8], frames: &mut Vec<(String, Vec<u8>)>| -> anyhow::Result<()> {
        if chunked {
            let mut payload = Vec::with_capacity(bytes.len());
            dechunker.feed(bytes, |p| payload.extend_from_slice(p))?;
            split(&payload, frames);
        } else {
            split(bytes, frames);
        }
        Ok(())
    };
    feed(&rest, &mut frames)?;
    let mut chunk = vec![0u8; 256 * 1024];
    let mut done = 0usize;
    loop {
        for (name, d) in frames.drain(..) {
            let Ok(v) = serde_json::from_slice::<Value>(&d) else {
                continue;
            };
            let Some(task_id) = v["task_id"].as_str() else {
                continue;
            };
            let mut seen = seen.lock().expect("seen lock");
            let t = seen.entry(task_id.to_owned()).or_default();
            if name == "agent.delta" {
                t.deltas += 1;
                continue;
            }
            let kind = v["kind"].as_str().unwrap_or_default().to_owned();
            *t.kinds.entry(kind.clone()).or_insert(0) += 1;
            t.last_kind.clone_from(&kind);
            match kind.as_str() {
                "agent.text" | "tool.call" | "tool.result" => t.vendor_events += 1,
                "turn.ended" => {
                    t.vendor_events += 1;
                    let p = &v["payload"];
                    if p["outcome"] != "completed" {
                        let _ = errors.send(format!(
                            "task {task_id}: turn {} ended {}: {}",
                            p["turn"], p["outcome"], p["error"]
                        ));
                        continue;
                    }
                    t.completed += 1;
                    if t.completed == turns {
                        done += 1;
                    } else if t.completed < turns {
                        let i = tasks
                            .lock()
                            .expect("tasks lock")
                            .get(task_id)
                            .copied()
                            .unwrap_or(0);
                        let sid = v["agent_session_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned();
                        let body = json!({"text": message(i, t.completed + 1, chars)});
                        let errors = errors.clone();
                        tokio::spawn(async move {
                            let path = format!("/api/sessions/{sid}/messages");
                            match call(addr, "POST", &path, Some(&body)).await {
                                Ok((202, _)) => {}
                                Ok((st, b)) => {
                                    let _ = errors.send(format!("sendMessage answered {st}: {b}"));
                                }
                                Err(e) => {
                                    let _ = errors.send(format!("sendMessage: {e:#}"));
                                }
                            }
                        });
                    }
                }
                "inbox.item_created" | "session.process_exited" => {
                    // Not an error by itself (a failed turn is reported by its turn.ended),
                    // but worth seeing.
                    println!("  note: {kind} on task {task_id}: {}", v["payload"]);
                }
                _ => {}
            }
        }
        if done >= n_tasks {
            return Ok(());
        }
        let n = s.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the server closed the event stream");
        feed(&chunk[..n], &mut frames)?;
    }
}

/// The server as a child process, and what the sampler found under it.
struct Server {
    child: tokio::process::Child,
    pid: u32,
}

impl Server {
    /// Stops byre with SIGTERM (it stops its agents), waits for it, then waits for every
    /// agent and helper process the sampler saw under it to be gone; SIGKILLs (by pid, ours
    /// only) any that is not within 10 s. Returns how many had to be killed.
    async fn stop(mut self, ours: &[u32]) -> usize {
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            println!("  byre did not stop within 30 s of SIGTERM: killed");
            let _ = self.child.kill().await;
        }
        let alive = |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while ours.iter().any(alive) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let left: Vec<u32> = ours.iter().copied().filter(alive).collect();
        for pid in &left {
            // SAFETY: a signal to a process this bench's byre started (seen under it).
            unsafe {
                libc::kill(*pid as i32, libc::SIGKILL);
            }
        }
        left.len()
    }
}

/// Runs the bench.
pub async fn run(p: Params, dir: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        p.sessions > 0 && p.turns > 0,
        "--sessions and --turns must be positive"
    );
    note_load("agents");
    let byre = crate::memory::byre_binary(p.byre.clone())?;
    let byre = byre.canonicalize()?;
    let claude = tokio::task::spawn_blocking(byre_fake_models::claude_bin)
        .await
        .map_err(|e| anyhow::anyhow!("installing the pinned Claude Code failed: {e}"))?
        .canonicalize()?;
    println!(
        "agents: {} sessions × {} turns; Claude Code {} ({}); byre {}",
        p.sessions,
        p.turns,
        byre_fake_models::CLAUDE_CODE_VERSION,
        claude.display(),
        byre.display()
    );
    let fake = FakeAnthropic::start(Script::fixture(SCRIPT)?).await?;
    let tmp = tempfile::tempdir_in(dir)?;
    let data = tmp.path().join("data");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&repo)?;
    crate::vendor::make_repo(&repo)?;

    let mut child = crate::memory::serve_command(&byre, &data)
        // No Codex reviewer per snapshot, and agent processes stay up for the whole run.
        .args(["--reviews", "false", "--agent-idle-stop", "0"])
        .env("BYRE_CLAUDE_BIN", &claude)
        .env("ANTHROPIC_BASE_URL", &fake.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-fake-key")
        .spawn()?;
    let pid = child.id().ok_or_else(|| anyhow::anyhow!("no pid"))?;
    let mut out = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let server = Server { child, pid };
    let line = out.next_line().await?;
    // Drain the rest of byre's stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });

    let samples = Arc::new(Mutex::new(Samples::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn(sample(
        pid,
        claude.clone(),
        byre.clone(),
        p.sessions,
        samples.clone(),
        stop.clone(),
    ));
    let result = drive(&p, pid, line, &repo, samples.clone()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.await;
    let ours: Vec<u32> = {
        let s = samples.lock().expect("sampler lock");
        s.claude.keys().chain(s.mcp.keys()).copied().collect()
    };
    let killed = server.stop(&ours).await;
    fake.stop().await;
    println!(
        "  after byre stopped: {killed} of the {} agent and helper processes seen had to be killed",
        ours.len()
    );
    result?;
    anyhow::ensure!(killed == 0, "{killed} agent process(es) outlived byre");
    Ok(())
}

/// Everything between byre's start and its stop.
async fn drive(
    p: &Params,
    pid: u32,
    first_line: Option<String>,
    repo: &Path,
    samples: Arc<Mutex<Samples>>,
) -> anyhow::Result<()> {
    let line = first_line.ok_or_else(|| anyhow::anyhow!("byre serve printed nothing"))?;
    let addr = crate::memory::listen_addr(&line)?;

    let (st, project) = call(
        addr,
        "POST",
        "/api/projects",
        Some(&json!({"name": "bench", "repo_path": repo.display().to_string()})),
    )
    .await?;
    anyhow::ensure!(st == 201, "createProject answered {st}: {project}");
    let project_id = project["id"].as_str().unwrap_or_default().to_owned();
    let head0 = head_seq(addr).await?;

    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let req = format!(
        "GET /api/events?after={head0} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    let (h, rest) = read_head(&mut s, &mut buf).await?;
    anyhow::ensure!(h.status == 200, "GET /api/events answered {}", h.status);

    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_idle = rss(pid);
    let avail_before = mem_available();
    let tasks: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let seen: Arc<Mutex<HashMap<String, TaskSeen>>> = Arc::default();
    let (err_tx, mut err_rx) = mpsc::unbounded_channel();
    let follower = tokio::spawn(follow(
        s,
        h.chunked,
        rest,
        addr,
        p.sessions,
        p.turns,
        p.chars,
        tasks.clone(),
        seen.clone(),
        err_tx.clone(),
    ));

    let machine = Machine::start();
    let cpu0 = cpu_s(pid);
    let t0 = Instant::now();
    let mut creates = Vec::new();
    for i in 0..p.sessions {
        let body = json!({"title": format!("bench {i}"), "prompt": message(i, 1, p.chars)});
        let path = format!("/api/projects/{project_id}/tasks");
        creates.push(tokio::spawn(async move {
            let (st, task) = call(addr, "POST", &path, Some(&body)).await?;
            anyhow::ensure!(st == 201, "createTask answered {st}: {task}");
            Ok((i, task["id"].as_str().unwrap_or_default().to_owned()))
        }));
    }
    for c in creates {
        let (i, id) = c.await??;
        tasks.lock().expect("tasks lock").insert(id, i);
    }
    let created_s = t0.elapsed().as_secs_f64();

    let deadline = tokio::time::sleep(Duration::from_secs(p.timeout_s));
    tokio::pin!(deadline);
    let mut follower = follower;
    let outcome: anyhow::Result<()> = tokio::select! {
        r = &mut follower => r.map_err(anyhow::Error::from).and_then(|r| r),
        Some(e) = err_rx.recv() => Err(anyhow::anyhow!(e)),
        _ = &mut deadline => Err(anyhow::anyhow!("not every turn ended within {} s", p.timeout_s)),
    };
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_s(pid) - cpu0;
    let others_with_byre = machine.report("agents");
    let rss_end = rss(pid);
    follower.abort();

    let seen = seen.lock().expect("seen lock").clone();
    let task_ids: Vec<String> = tasks.lock().expect("tasks lock").keys().cloned().collect();
    let completed: usize = task_ids
        .iter()
        .map(|t| seen.get(t).map_or(0, |s| s.completed))
        .sum();
    let expected = p.sessions * p.turns;
    if let Err(e) = &outcome {
        println!("FAILED: {e:#}");
        for t in &task_ids {
            let s = seen.get(t).cloned().unwrap_or_default();
            if s.completed < p.turns {
                println!(
                    "  task {t}: {} of {} turns completed; last event {:?}; {} deltas; events {:?}",
                    s.completed, p.turns, s.last_kind, s.deltas, s.kinds
                );
            }
        }
    }
    let (st, status) = call(addr, "GET", "/api/admin/status", None).await?;
    anyhow::ensure!(st == 200, "getStatus answered {st}");
    let head1 = status["last_event_seq"].as_u64().unwrap_or(head0);
    let live_agents = status["live_agents"].as_u64().unwrap_or(0);

    let deltas: u64 = seen.values().map(|s| s.deltas).sum();
    let vendor_events: u64 = seen.values().map(|s| s.vendor_events).sum();
    let deferred: u64 = seen
        .values()
        .map(|s| {
            s.kinds
                .get("session.process_deferred")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    let lines = deltas + vendor_events;
    let events = head1 - head0;
    let s = samples.lock().expect("sampler lock");
    let claude_cpu: f64 = s.claude.values().map(|c| c.cpu_s).sum();
    let mcp_cpu: f64 = s.mcp.values().map(|c| c.cpu_s).sum();
    let rss_live = s.byre_rss_live_max;
    let per_session = rss_live.saturating_sub(rss_idle) / p.sessions as u64;
    // The machine's busy time, less the bench itself (Machine), byre, its agents and helpers.
    let others = (others_with_byre - (cpu + claude_cpu + mcp_cpu) / wall * 100.0).max(0.0);

    println!(
        "turns completed: {completed} / {expected}; wall {wall:.1} s from the first createTask ({created_s:.1} s to create the {} tasks); live agent processes at the end {live_agents} (most at once {})",
        p.sessions, s.claude_max
    );
    println!(
        "streamed lines: {lines} = {deltas} agent.delta frames (one per text_delta stdout line) + {vendor_events} agent.text/tool.call/tool.result/turn.ended events; {events} events appended in all; {deferred} session.process_deferred"
    );
    println!(
        "byre (serve) CPU: {cpu:.2} s = {:.0}% of a core; {:.1} µs per streamed line, {:.1} µs per event appended",
        cpu / wall * 100.0,
        cpu * 1e6 / lines.max(1) as f64,
        cpu * 1e6 / events.max(1) as f64
    );
    println!(
        "byre RSS: idle {:.1} MiB; with {} live sessions {:.1} MiB (max while all ran), {:.1} MiB at the end; ({:.0} − {:.0}) / {} = {:.2} MiB per session",
        mib(rss_idle),
        p.sessions,
        mib(rss_live),
        mib(rss_end),
        mib(rss_live),
        mib(rss_idle),
        p.sessions,
        mib(per_session)
    );
    println!(
        "byre mcp helpers (one per agent, started by the CLI): {} seen, RSS sum max {:.0} MiB, CPU {mcp_cpu:.2} s",
        s.mcp.len(),
        mib(s.mcp_rss_sum_max)
    );
    println!(
        "Claude Code processes: {} seen, RSS sum max {:.0} MiB ({:.0} MiB each), CPU {claude_cpu:.1} s",
        s.claude.len(),
        mib(s.claude_rss_sum_max),
        mib(s.claude_rss_sum_max / s.claude_max.max(1) as u64)
    );
    println!(
        "machine: MemAvailable {:.0} MiB before, {:.0} MiB at the lowest during; load {}; other processes {others:.0}% of 200% (besides the bench, byre, its agents and helpers)",
        mib(avail_before),
        mib(s.mem_available_min),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    emit(json!({
        "bench": "agents", "sessions": p.sessions, "turns": p.turns, "chars": p.chars,
        "turns_completed": completed, "turns_expected": expected, "wall_s": wall,
        "byre_cpu_s": cpu, "streamed_lines": lines, "delta_frames": deltas,
        "vendor_events": vendor_events, "events_appended": events,
        "byre_cpu_us_per_line": cpu * 1e6 / lines.max(1) as f64,
        "rss_idle": rss_idle, "rss_live": rss_live, "rss_end": rss_end,
        "rss_per_session": per_session,
        "mcp_helpers": s.mcp.len(), "mcp_rss_sum_max": s.mcp_rss_sum_max, "mcp_cpu_s": mcp_cpu,
        "claude_processes": s.claude.len(), "claude_rss_sum_max": s.claude_rss_sum_max,
        "claude_cpu_s": claude_cpu,
        "mem_available_before": avail_before, "mem_available_min": s.mem_available_min,
        "deferred": deferred, "others_pct": others, "ok": outcome.is_ok(),
    }));
    outcome?;
    anyhow::ensure!(
        completed == expected,
        "{completed} of {expected} turns completed"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::message;

    #[test]
    fn a_message_carries_the_scripts_marker_and_at_least_the_asked_length() {
        for (i, turn, chars) in [(0, 1, 0), (3, 2, 100), (19, 2, 7200)] {
            let m = message(i, turn, chars);
            assert!(
                m.starts_with(&format!("BENCH-TURN {turn} of task {i}:")),
                "{m}"
            );
            assert!(
                m.len() >= chars && m.len() < chars.max(40) + 16,
                "{}",
                m.len()
            );
            assert!(m.is_ascii() && !m.contains('"') && !m.contains('\\'));
        }
        assert_ne!(message(1, 1, 200), message(2, 1, 200));
    }
}
