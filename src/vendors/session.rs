//! One live agent process: a loop over a closed set of inputs (a stdout line, a command from
//! the runtime, the end of the process), in the style of an explicit event loop.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use byre_projections::sessions::{ProcessExited, VendorItem};
use byre_projections::Command;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::runtime::Runtime;
use super::{Driver, SpawnSpec};

/// What the runtime asks of a live session.
#[derive(Debug)]
pub(crate) enum Input {
    /// Write these stdin lines.
    Lines(Vec<String>),
    /// Interrupt the running turn.
    Interrupt,
    /// Close stdin, give the process a moment, then kill its group.
    Stop,
}

/// Longest stderr tail kept for an exit's reason, in bytes.
const STDERR_TAIL_BYTES: usize = 2048;

/// Runs the session's process until it exits or is stopped; records its output and its exit.
pub(crate) async fn run(
    rt: Arc<Runtime>,
    driver: Arc<dyn Driver>,
    spec: SpawnSpec,
    task_id: String,
    mut rx: mpsc::Receiver<Input>,
) {
    let span = tracing::info_span!("agent_session", session_id = %spec.session_id, task_id = %task_id, vendor = driver.vendor().as_str(), pid = tracing::field::Empty);
    let _enter = span.enter();
    let mut cmd = driver.command(&spec);
    cmd.process_group(0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
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
    let mut lines = BufReader::new(stdout).lines();
    let mut last_total_cost = 0u64;
    let mut n_lines = 0u64;
    let mut stdin_open = true;
    loop {
        tokio::select! {
            input = rx.recv(), if stdin_open => match input {
                Some(Input::Lines(ls)) => {
                    for l in ls {
                        if stdin.write_all(format!("{l}\n").as_bytes()).await.is_err() {
                            break;
                        }
                    }
                    let _ = stdin.flush().await;
                }
                Some(Input::Interrupt) => {
                    let line = driver.interrupt_line(&uuid::Uuid::new_v4().to_string());
                    let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
                    let _ = stdin.flush().await;
                }
                Some(Input::Stop) | None => {
                    stdin_open = false;
                    let _ = stdin.shutdown().await;
                    let group = pid as i32;
                    tokio::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                        kill_group(group);
                    });
                }
            },
            line = lines.next_line() => match line {
                Ok(Some(line)) => {
                    n_lines += 1;
                    if let Some(l) = rt.live(&spec.session_id) {
                        l.last_event_us.store(chrono::Utc::now().timestamp_micros(), Ordering::Relaxed);
                    }
                    match driver.parse(&line) {
                        super::claude::wire::Parsed::Items(mut items) => {
                            for item in &mut items {
                                match item {
                                    VendorItem::TurnEnded(t) => {
                                        let total = t.cost_micro_usd;
                                        t.cost_micro_usd = total.saturating_sub(last_total_cost);
                                        last_total_cost = total;
                                    }
                                    VendorItem::Unrecognized(u) => rt.protocol_error(&spec.session_id, u),
                                    _ => {}
                                }
                            }
                            rt.record(Command::RecordVendorOutput { session_id: spec.session_id.clone(), items }).await;
                        }
                        super::claude::wire::Parsed::Delta(text) => rt.delta(&spec.session_id, &task_id, &text),
                        super::claude::wire::Parsed::ControlRequest { request_id, subtype } => {
                            let line = driver.refuse_line(&request_id, &format!("byre does not answer `{subtype}` requests"));
                            let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
                        }
                        super::claude::wire::Parsed::Known => {}
                    }
                }
                Ok(None) | Err(_) => break,
            },
        }
    }
    let status = child.wait().await;
    kill_group(pid as i32); // tools the agent left running
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

/// SIGKILLs a process group; harmless when it is gone.
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory-safety preconditions; a stale group gives ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
