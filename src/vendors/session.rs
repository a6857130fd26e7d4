//! One live agent process: a loop over a closed set of inputs (a stdout line, a command from
//! the runtime, the end of the process), in the style of an explicit event loop.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use byre_projections::sessions::{ProcessExited, VendorItem};
use byre_projections::Command;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::runtime::Runtime;
use super::{Driver, Image, Reaction, SpawnSpec};

/// What the runtime asks of a live session.
#[derive(Debug)]
pub(crate) enum Input {
    /// Hand over a user message (a new turn), first switching the model if `model` is set.
    Message {
        /// Its text.
        text: String,
        /// Its images.
        images: Vec<Image>,
        /// byre's id of it.
        input_id: u64,
        /// A model to switch to first.
        model: Option<String>,
    },
    /// Interrupt the running turn.
    Interrupt,
    /// Close stdin, give the process a moment, then kill its group (and its descendants').
    Stop,
    /// As `Stop`, because byre shuts down: the exit is not recorded, so a running turn stays
    /// running in the log and the next start resumes it.
    Shutdown,
}

/// How long a CodeBolt agent has to end its turn after `stopProcessClicked`.
const CODEBOLT_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest stderr tail kept for an exit's reason, in bytes.
const STDERR_TAIL_BYTES: usize = 2048;

/// Longest a message waits for the snapshot of the task's previous turn end (a reactor that
/// never answers must not stall the task for good).
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How often a held message looks whether that snapshot is taken.
const SNAPSHOT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Runs the session's process until it exits or is stopped; records its output and its exit.
pub(crate) async fn run(
    rt: Arc<Runtime>,
    driver: Arc<dyn Driver>,
    spec: SpawnSpec,
    task_id: String,
    mut rx: mpsc::Receiver<Input>,
) {
    let mut spec = spec;
    // A CodeBolt agent talks over byre's WebSocket: its frames come from its link, lines for
    // it go there; its stdout is only logged.
    let hub = rt.codebolt().clone();
    let mut socket = None;
    if driver.vendor() == byre_projections::sessions::Vendor::Codebolt {
        let (token, frames) = hub.register(&spec.session_id, &task_id, spec.cwd.clone());
        let link = hub.link(&token);
        spec.socket_token = token;
        spec.socket_port = hub.port();
        socket = link.map(|l| (l, frames));
    }
    let token = spec.socket_token.clone();
    let result = run_process(&rt, driver, spec, task_id, &mut rx, socket).await;
    if !token.is_empty() {
        hub.unregister(&token);
    }
    result
}

async fn run_process(
    rt: &Arc<Runtime>,
    driver: Arc<dyn Driver>,
    spec: SpawnSpec,
    task_id: String,
    rx: &mut mpsc::Receiver<Input>,
    socket: Option<(Arc<crate::codebolt::Link>, mpsc::Receiver<String>)>,
) {
    let (link, mut frames) = match socket {
        Some((l, f)) => (Some(l), Some(f)),
        None => (None, None),
    };
    let span = tracing::info_span!("agent_session", session_id = %spec.session_id, task_id = %task_id, vendor = driver.vendor().as_str(), pid = tracing::field::Empty);
    let _enter = span.enter();
    let mut cmd = driver.command(&spec);
    cmd.env(SESSION_ENV, &spec.session_id);
    cmd.process_group(0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // After a restart the worktree reactor may still be making the worktree again.
    for _ in 0..300 {
        if spec.cwd.is_dir() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let spawned = if spec.cwd.is_dir() {
        cmd.spawn().map_err(Some)
    } else {
        Err(None)
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(source) => {
            let (program, env_var) = driver.program();
            let err = match source {
                Some(source) => super::VendorError::Spawn {
                    program,
                    env_var,
                    source,
                },
                None => super::VendorError::NoWorktree(spec.cwd.display().to_string()),
            };
            tracing::error!(error = %err, "agent did not start");
            rt.forget(&spec.session_id);
            rt.record(Command::RecordProcessExit {
                session_id: spec.session_id.clone(),
                exit: ProcessExited {
                    pid: 0,
                    code: None,
                    signal: None,
                    reason: err.to_string(),
                },
            })
            .await;
            return;
        }
    };
    let pid = child.id().unwrap_or(0);
    span.record("pid", pid);
    rt.started(&spec.session_id, pid);
    let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        tracing::error!("agent started without pipes");
        return;
    };
    let stderr_tail = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        let start = buf.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&buf[start..]).trim().to_owned()
    });
    let mut reader = BufReader::new(stdout);
    // Raw bytes per line: a line that is not UTF-8 is read lossily and recorded as
    // unrecognised, never stops the reading.
    let mut buf: Vec<u8> = Vec::new();
    let mut shutting_down = false;
    let mut protocol = driver.protocol(&spec);
    let mut n_lines = 0u64;
    let mut stdin_open = emit(&mut stdin, link.as_deref(), protocol.start()).await;
    // Messages (and interrupts after them) held until the snapshot reactor has answered the
    // task's last turn end, so its end-of-turn commit and snapshot hold that turn alone and
    // never race the agent's next turn in the worktree; with when the first was held.
    let mut held: Vec<Input> = Vec::new();
    let mut held_since = tokio::time::Instant::now();
    loop {
        tokio::select! {
            input = rx.recv(), if stdin_open => match input {
                Some(message @ Input::Message { .. }) => {
                    if held.is_empty() && rt.snapshot_due(&task_id) {
                        held_since = tokio::time::Instant::now();
                    }
                    if !held.is_empty() || rt.snapshot_due(&task_id) {
                        held.push(message);
                    } else {
                        let lines = input_lines(protocol.as_mut(), message);
                        emit(&mut stdin, link.as_deref(), lines).await;
                    }
                }
                Some(Input::Interrupt) if !held.is_empty() => held.push(Input::Interrupt),
                Some(Input::Interrupt) => {
                    emit(&mut stdin, link.as_deref(), protocol.interrupt()).await;
                    if link.is_some() {
                        kill_if_deaf_to_stop(rt, &spec.session_id, pid as i32);
                    }
                }
                stop @ (None | Some(Input::Stop) | Some(Input::Shutdown)) => {
                    shutting_down = matches!(stop, Some(Input::Shutdown));
                    stdin_open = false;
                    let _ = stdin.shutdown().await;
                    let group = pid as i32;
                    tokio::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                        kill_tree(group);
                    });
                }
            },
            _ = tokio::time::sleep(SNAPSHOT_POLL), if stdin_open && !held.is_empty() => {
                let waited = held_since.elapsed() >= SNAPSHOT_WAIT;
                if waited || !rt.snapshot_due(&task_id) {
                    if waited {
                        tracing::warn!("the previous turn's snapshot is still not taken; the next turn starts anyway");
                    }
                    for input in std::mem::take(&mut held) {
                        let interrupt = matches!(input, Input::Interrupt);
                        let lines = input_lines(protocol.as_mut(), input);
                        emit(&mut stdin, link.as_deref(), lines).await;
                        if interrupt && link.is_some() {
                            kill_if_deaf_to_stop(rt, &spec.session_id, pid as i32);
                        }
                    }
                }
            }
            frame = async { frames.as_mut()?.recv().await }, if frames.is_some() => match frame {
                Some(line) => {
                    n_lines += 1;
                    if let Some(l) = rt.live(&spec.session_id) {
                        l.last_event_us.store(chrono::Utc::now().timestamp_micros(), Ordering::Relaxed);
                    }
                    let mut reaction = protocol.on_line(&line);
                    let replies = std::mem::take(&mut reaction.replies);
                    if stdin_open && !replies.is_empty() {
                        emit(&mut stdin, link.as_deref(), replies).await;
                    }
                    react(rt, &spec, &task_id, driver.vendor(), reaction).await;
                }
                None => frames = None,
            },
            n = reader.read_until(b'\n', &mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) if link.is_some() => {
                    tracing::debug!(line = %String::from_utf8_lossy(&buf).trim_end(), "CodeBolt agent stdout");
                    buf.clear();
                }
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_owned();
                    buf.clear();
                    n_lines += 1;
                    if let Some(l) = rt.live(&spec.session_id) {
                        l.last_event_us.store(chrono::Utc::now().timestamp_micros(), Ordering::Relaxed);
                    }
                    let mut reaction = protocol.on_line(&line);
                    let replies = std::mem::take(&mut reaction.replies);
                    if stdin_open && !replies.is_empty() {
                        write_lines(&mut stdin, replies).await;
                    }
                    react(rt, &spec, &task_id, driver.vendor(), reaction).await;
                }
            },
        }
    }
    let status = child.wait().await;
    kill_group(pid as i32); // tools the agent left running in its group
    if status
        .as_ref()
        .is_ok_and(|s| std::os::unix::process::ExitStatusExt::signal(s).is_some())
    {
        // Killed, it could not stop the commands it ran in sessions of their own (Codex).
        kill_strays(&spec.session_id);
    }
    let reason_tail = stderr_tail.await.unwrap_or_default();
    rt.forget(&spec.session_id);
    let (code, signal) = match &status {
        Ok(s) => (s.code(), std::os::unix::process::ExitStatusExt::signal(s)),
        Err(_) => (None, None),
    };
    let reason = match (code, signal) {
        (Some(c), _) => format!(
            "the agent process exited with code {c}{}{}",
            if reason_tail.is_empty() { "" } else { ": " },
            reason_tail
        ),
        (None, Some(s)) => format!("the agent process was killed by signal {s}"),
        _ => "the agent process ended".to_owned(),
    };
    tracing::info!(n_lines, ?code, ?signal, "agent process ended");
    if shutting_down {
        // The log keeps the turn running: the next start resumes it (ResumeAfterRestart).
        return;
    }
    rt.record(Command::RecordProcessExit {
        session_id: spec.session_id.clone(),
        exit: ProcessExited {
            pid,
            code,
            signal,
            reason,
        },
    })
    .await;
}

/// The lines that hand `input` (a message or an interrupt) to the agent; none for the others.
fn input_lines(protocol: &mut dyn super::Protocol, input: Input) -> Vec<String> {
    match input {
        Input::Message {
            text,
            images,
            input_id,
            model,
        } => {
            let mut out = match model {
                Some(m) => protocol.set_model(&m),
                None => Vec::new(),
            };
            out.extend(protocol.message(&text, &images, input_id));
            out
        }
        Input::Interrupt => protocol.interrupt(),
        Input::Stop | Input::Shutdown => Vec::new(),
    }
}

/// After a stop sent to a CodeBolt agent: only agents that called processStarted listen for
/// it, so one whose turn still runs after [`CODEBOLT_STOP_GRACE`] has its process group killed
/// (its exit ends the turn as interrupted).
fn kill_if_deaf_to_stop(rt: &Arc<Runtime>, session_id: &str, group: i32) {
    let (rt, session_id) = (rt.clone(), session_id.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(CODEBOLT_STOP_GRACE).await;
        let still = rt.writer().read(|s| {
            s.sessions
                .get(&session_id)
                .is_some_and(|x| x.turn_running && x.interrupt_requested)
        });
        if still {
            tracing::warn!(%session_id, "CodeBolt agent ignored the stop; killing it");
            kill_tree(group);
        }
    });
}

/// Hands lines to the agent: over its socket link when it has one, else to its stdin.
async fn emit(
    stdin: &mut ChildStdin,
    link: Option<&crate::codebolt::Link>,
    lines: Vec<String>,
) -> bool {
    match link {
        Some(l) => {
            for line in lines {
                l.send(line);
            }
            true
        }
        None => write_lines(stdin, lines).await,
    }
}

/// Writes lines to the process's stdin, each with its `\n`, and flushes; false once stdin is
/// closed (the process is going away, and its exit is recorded then).
async fn write_lines(stdin: &mut ChildStdin, lines: Vec<String>) -> bool {
    for l in lines {
        if stdin.write_all(format!("{l}\n").as_bytes()).await.is_err() {
            return false;
        }
    }
    stdin.flush().await.is_ok()
}

/// Records what a line meant: the vendor's session id first (so a restart resumes it), then
/// the items; streams the delta; keeps the rate-limit status for `getStatus`.
async fn react(
    rt: &Runtime,
    spec: &SpawnSpec,
    task_id: &str,
    vendor: byre_projections::sessions::Vendor,
    reaction: Reaction,
) {
    if let Some(vendor_session_id) = reaction.vendor_session_id {
        rt.record(Command::RecordVendorSession {
            session_id: spec.session_id.clone(),
            vendor_session_id,
        })
        .await;
    }
    if let Some(limits) = reaction.rate_limits {
        rt.rate_limits(vendor, limits);
    }
    if let Some(text) = reaction.delta {
        rt.delta(&spec.session_id, task_id, &text);
    }
    if !reaction.items.is_empty() {
        let mut items = reaction.items;
        // One line can hold several items (parallel tool calls, several text blocks): its raw
        // text is kept once, on the first, not copied into every event.
        for item in items.iter_mut().skip(1) {
            match item {
                VendorItem::Text(p) => p.raw.clear(),
                VendorItem::ToolCall(p) => p.raw.clear(),
                VendorItem::ToolResult(p) => p.raw.clear(),
                VendorItem::ApiRetry(p) => p.raw.clear(),
                VendorItem::TurnEnded(p) => p.raw.clear(),
                VendorItem::Unrecognized(_) => {}
            }
        }
        for item in &items {
            if let VendorItem::Unrecognized(u) = item {
                rt.protocol_error(&spec.session_id, u);
            }
        }
        rt.record(Command::RecordVendorOutput {
            session_id: spec.session_id.clone(),
            items,
        })
        .await;
    }
}

/// SIGKILLs the process groups of `pgid`'s descendants that left it (Codex runs each command
/// in a session of its own), then the group itself. Descendants are found through `/proc`
/// while the group's leader lives; orphans of a leader that already died are not.
pub(crate) fn kill_tree(pgid: i32) {
    for group in descendant_groups(pgid) {
        kill_group(group);
    }
    kill_group(pgid);
}

/// Process groups other than `pid`'s own that hold descendants of `pid` (Linux `/proc`).
fn descendant_groups(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, ppid, pgid) of every process.
    let procs: Vec<(i32, i32, i32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let ppid = fields.next()?.parse().ok()?;
            let pgid = fields.next()?.parse().ok()?;
            Some((p, ppid, pgid))
        })
        .collect();
    let mut tree = vec![pid];
    let mut groups = Vec::new();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(p, ppid, pgid) in &procs {
            if ppid == parent && !tree.contains(&p) {
                tree.push(p);
                if pgid != pid && pgid > 1 && !groups.contains(&pgid) {
                    groups.push(pgid);
                }
            }
        }
        i += 1;
    }
    groups
}

/// The environment variable every agent process gets (and so every process it starts): its
/// byre session id. It finds what an agent left running once the agent is gone.
pub(crate) const SESSION_ENV: &str = "BYRE_AGENT_SESSION";

/// SIGKILLs the process group of every process whose environment has [`SESSION_ENV`] =
/// `session_id` (Linux `/proc`): the commands an agent killed by a signal left behind (Codex
/// runs each in a session of its own, which its death orphans, so [`kill_tree`] cannot find
/// them). Never byre's own group. Returns how many groups it killed.
pub(crate) fn kill_strays(session_id: &str) -> usize {
    let needle = format!("{SESSION_ENV}={session_id}");
    // SAFETY: getpgrp has no preconditions.
    let own = unsafe { libc::getpgrp() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut groups: Vec<i32> = Vec::new();
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            continue;
        }
        let pgid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(')')?;
                rest.split_whitespace().nth(2)?.parse::<i32>().ok()
            });
        if let Some(g) = pgid.filter(|g| *g > 1 && *g != own && !groups.contains(g)) {
            groups.push(g);
        }
    }
    for g in &groups {
        tracing::warn!(pgid = g, "killed a process group the agent left running");
        kill_group(*g);
    }
    groups.len()
}

/// SIGKILLs a process group; harmless when it is gone.
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory-safety preconditions; a stale group gives ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
