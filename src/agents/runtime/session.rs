//! One live agent process: a loop over a closed set of inputs (a stdout line, a command from
//! the runtime, the end of the process), in the style of an explicit event loop.
//!
//! When the process ends, whatever the way, every process it left behind (its group, and any
//! group holding a process marked with the session's [`SESSION_ENV`]) is killed. When it ends
//! without byre asking and the running turn's message never reached it (it printed nothing
//! after the message was written, or the message was not written yet), the message goes to a
//! fresh, resumed process of the session instead of failing the turn (at most once per
//! message written).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use byre_projections::sessions::{ProcessExited, Vendor, VendorItem};
use byre_projections::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::{Admit, Live, Runtime};
use crate::bounds::{cut_delta, cut_item, overflow, Line, LineReader};
use crate::exits::{exit_reason, stopped_by_byre, stopped_idle, vendor_name};
use crate::reaper::sweep;
use crate::{Driver, Image, Reaction, SpawnSpec};
use byre_process::groups::{kill_tree, own_session, SESSION_ENV};

/// What the runtime asks of a live session.
#[derive(Debug, Clone)]
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

impl Input {
    fn input_id(&self) -> Option<u64> {
        match self {
            Input::Message { input_id, .. } => Some(*input_id),
            _ => None,
        }
    }
}

/// What a process loop inherits from the one before it, when it replaces a process that
/// exited before answering its message.
#[derive(Debug, Clone, Default)]
pub(crate) struct Carry {
    /// Messages (input ids) already written once to a process that exited without a word:
    /// a second such exit fails the turn instead of starting yet another process.
    pub redelivered: HashSet<u64>,
    /// How many processes in a row ended without byre asking and without printing anything.
    pub n_silent_exits: u32,
}

/// Most processes in a row that may end silently before the turn fails (a CLI that cannot
/// start at all must not be restarted for ever).
const MAX_SILENT_EXITS: u32 = 2;

/// How long byre still reads an exited process's stdout when something else holds it open.
const EXITED_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a process asked to end (its stdin closed) has to exit, writing what it keeps
/// (Claude Code's transcript), before its group is killed.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Longest a process start waits for its task's worktree to be made.
const WORKTREE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

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
    me: Arc<Live>,
    driver: Arc<dyn Driver>,
    spec: SpawnSpec,
    task_id: String,
    carry: Carry,
    mut rx: mpsc::Receiver<Input>,
) {
    let mut spec = spec;
    // A CodeBolt agent talks over byre's WebSocket: its frames come from its link, lines for
    // it go there; its stdout is only logged.
    let hub = rt.codebolt().clone();
    let mut socket = None;
    if driver.vendor() == Vendor::Codebolt {
        let (token, frames) = hub.register(&spec.session_id, &task_id, spec.cwd.clone());
        let link = hub.link(&token);
        spec.socket_token = token;
        spec.socket_port = hub.port();
        socket = link.map(|l| (l, frames));
    }
    let token = spec.socket_token.clone();
    run_process(&rt, &me, driver, spec, task_id, carry, &mut rx, socket).await;
    if !token.is_empty() {
        hub.unregister(&token).await;
    }
}

/// What one process was handed and what it acknowledged.
#[derive(Default)]
struct Handed {
    /// Input ids written to this process or given to this loop (a message the runtime sends
    /// again after a replacement is not written twice).
    ids: HashSet<u64>,
    /// Messages written since the process last printed a line, oldest first.
    unanswered: Vec<Input>,
    /// Whether the process printed any line at all.
    printed: bool,
}

impl Handed {
    /// The process printed a line: it read everything written before it.
    fn line(&mut self) {
        self.printed = true;
        self.unanswered.clear();
    }
}

/// Writes `input` to the process (through its protocol), remembering a message as handed
/// and, until the process prints its next line, unanswered.
async fn hand(
    stdin: &mut ChildStdin,
    link: Option<&crate::codeboltjs::Link>,
    protocol: &mut dyn crate::Protocol,
    handed: &mut Handed,
    input: Input,
) {
    if let Some(id) = input.input_id() {
        handed.ids.insert(id);
        handed.unanswered.push(input.clone());
    }
    let lines = input_lines(protocol, input);
    emit(stdin, link, lines).await;
}

#[allow(clippy::too_many_arguments)]
async fn run_process(
    rt: &Arc<Runtime>,
    me: &Arc<Live>,
    driver: Arc<dyn Driver>,
    spec: SpawnSpec,
    task_id: String,
    carry: Carry,
    rx: &mut mpsc::Receiver<Input>,
    socket: Option<(Arc<crate::codeboltjs::Link>, mpsc::Receiver<String>)>,
) {
    let (link, mut frames) = match socket {
        Some((l, f)) => (Some(l), Some(f)),
        None => (None, None),
    };
    let span = tracing::info_span!("agent_session", session_id = %spec.session_id, task_id = %task_id, vendor = driver.vendor().as_str(), pid = tracing::field::Empty);
    let _enter = span.enter();
    let mut cmd = driver.command(&spec);
    cmd.env(SESSION_ENV, &spec.session_id);
    // Its own session, hence its own process group (pgid = pid) and no controlling terminal:
    // an agent cannot reach the terminal byre may run in (TIOCSTI).
    own_session(cmd.as_std_mut());
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // No process starts before its task's worktree is whole: made by the reactor (a new task,
    // or after a restart), or made again when removed while byre runs; a make under way is
    // waited for, never raced. A lead has no task (its directory is its own).
    if !task_id.is_empty() {
        rt.worktrees().made(&task_id, WORKTREE_WAIT).await;
    }
    // The memory floor: the start may wait until the machine has memory to spare.
    match rt.admit(&spec.session_id).await {
        Admit::Admitted => {}
        verdict => {
            rx.close();
            rt.forget(&spec.session_id, me);
            if verdict == Admit::Interrupted {
                rt.end_turn_unstarted(&spec.session_id).await;
            }
            return;
        }
    }
    // Confined, a missing CLI would be bwrap's failure to exec it: say so before, as the
    // spawn itself would unconfined.
    let missing = rt.sandbox().is_on()
        && crate::sandbox::resolve(
            std::path::Path::new(&driver.program().0),
            std::env::var_os("PATH").as_deref(),
        )
        .is_none();
    let spawned = if !spec.cwd.is_dir() {
        Err(None)
    } else if missing {
        Err(Some(std::io::Error::from(std::io::ErrorKind::NotFound)))
    } else {
        cmd.spawn().map_err(Some)
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(source) => {
            let (program, env_var) = driver.program();
            let err = match source {
                Some(source) => crate::VendorError::Spawn {
                    program,
                    env_var,
                    source,
                },
                None => crate::VendorError::NoWorktree(spec.cwd.display().to_string()),
            };
            tracing::error!(error = %err, "agent did not start");
            rx.close();
            rt.forget(&spec.session_id, me);
            rt.record(Command::RecordProcessExit {
                session_id: spec.session_id.clone().into(),
                exit: ProcessExited {
                    pid: 0,
                    code: None,
                    signal: None,
                    reason: err.to_string(),
                    redelivered_input_ids: Vec::new(),
                    idle_ms: 0,
                },
            })
            .await;
            return;
        }
    };
    let pid = child.id().unwrap_or(0);
    span.record("pid", pid);
    // The directory the process works in: when the worktree is removed (and perhaps made
    // again) while it lives, it works on in a directory that no longer exists.
    let cwd_at_spawn = dir_identity(&spec.cwd);
    let mut cwd_gone = false;
    rt.started(&spec.session_id, pid);
    let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        tracing::error!("agent started without pipes");
        return;
    };
    let stderr_tail =
        tokio::spawn(async move { stderr_tail(&mut stderr, STDERR_TAIL_BYTES).await });
    let limits = rt.output_limits();
    // Raw bytes per line, at most the hard line limit: a line that is not UTF-8 is read
    // lossily and recorded as unrecognised, never stops the reading; a longer one ends the
    // process and its turn (`overlong`, its bytes read when byre gave up on it).
    let mut lines = LineReader::new(BufReader::new(stdout), limits.max_line_bytes);
    let mut overlong: Option<u64> = None;
    // Whether byre asked the process to end (a stop, a shutdown, the runtime gone), and
    // whether because byre shuts down.
    let mut asked = false;
    let mut shutting_down = false;
    let mut stdin_open = true;
    let mut protocol = driver.protocol(&spec);
    let mut n_lines = 0u64;
    let mut handed = Handed::default();
    emit(&mut stdin, link.as_deref(), protocol.start()).await;
    // Messages (and interrupts after them) held until the snapshot reactor has answered the
    // task's last turn end, so its end-of-turn commit and snapshot hold that turn alone and
    // never race the agent's next turn in the worktree; with when the first was held.
    let mut held: Vec<Input> = Vec::new();
    let mut held_since = tokio::time::Instant::now();
    // When the process has exited: its last lines are read until its stdout ends, or for
    // [`EXITED_DRAIN`] if something it left holds the pipe open (the sweep then ends that).
    let mut exited_at: Option<tokio::time::Instant> = None;
    // Since when the process has had nothing to do (its last line or input), and whether byre
    // stopped it for that (`serve --agent-idle-stop`: zero is never).
    let idle_stop = rt.idle_stop();
    let mut active_at = tokio::time::Instant::now();
    let mut idle_stopped = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(active_at + idle_stop),
                if !idle_stop.is_zero() && stdin_open && exited_at.is_none() && held.is_empty() =>
            {
                if rt.is_idle(&spec.session_id) {
                    tracing::info!(idle_ms = idle_stop.as_millis() as u64, "stopping the idle agent process; its next message resumes it");
                    idle_stopped = true;
                    stdin_open = false;
                    let _ = stdin.shutdown().await;
                    let group = pid as i32;
                    tokio::spawn(async move {
                        tokio::time::sleep(STOP_GRACE).await;
                        kill_tree(group);
                    });
                } else {
                    active_at = tokio::time::Instant::now();
                }
            }
            _ = child.wait(), if exited_at.is_none() => {
                exited_at = Some(tokio::time::Instant::now());
            }
            _ = async {
                if let Some(at) = exited_at {
                    tokio::time::sleep_until(at + EXITED_DRAIN).await;
                }
            }, if exited_at.is_some() => break,
            input = rx.recv(), if stdin_open => {
                // Any input is activity: the idle clock starts again.
                active_at = tokio::time::Instant::now();
                match input {
                    Some(Input::Message { input_id, .. }) if handed.ids.contains(&input_id) => {
                        // Given to this process already, when it replaced one that exited.
                    }
                    Some(message @ Input::Message { .. })
                        if link.is_none() && dir_identity(&spec.cwd) != cwd_at_spawn =>
                    {
                        // The worktree was removed under this process: a fresh one (started in
                        // the worktree made again) gets the message, as after an exit before it.
                        tracing::warn!("the task's worktree was removed under the agent process; a fresh process takes the message");
                        if let Some(id) = message.input_id() {
                            handed.ids.insert(id);
                        }
                        held.push(message);
                        cwd_gone = true;
                        // Ended as a stop is, by closing its stdin: a CLI killed at once loses
                        // what it had not yet written of its transcript (Claude Code writes
                        // it lazily), and the fresh process would resume a conversation
                        // without the last turns, or none at all.
                        stdin_open = false;
                        let _ = stdin.shutdown().await;
                        let group = pid as i32;
                        tokio::spawn(async move {
                            tokio::time::sleep(STOP_GRACE).await;
                            kill_tree(group);
                        });
                    }
                    Some(message @ Input::Message { .. }) => {
                        if let Some(id) = message.input_id() {
                            handed.ids.insert(id);
                        }
                        if held.is_empty() && rt.snapshot_due(&task_id) {
                            held_since = tokio::time::Instant::now();
                        }
                        if !held.is_empty() || rt.snapshot_due(&task_id) {
                            held.push(message);
                        } else {
                            hand(&mut stdin, link.as_deref(), protocol.as_mut(), &mut handed, message).await;
                        }
                    }
                    Some(Input::Interrupt) if !held.is_empty() => held.push(Input::Interrupt),
                    Some(Input::Interrupt) => {
                        emit(&mut stdin, link.as_deref(), protocol.interrupt()).await;
                        if let Some(link) = link.as_deref() {
                            // The stop covers the agent's terminal commands too.
                            link.kill_terminals();
                            kill_if_deaf_to_stop(rt, &spec.session_id, pid as i32);
                        }
                    }
                    stop @ (None | Some(Input::Stop) | Some(Input::Shutdown)) => {
                        asked = true;
                        shutting_down = matches!(stop, Some(Input::Shutdown));
                        stdin_open = false;
                        let _ = stdin.shutdown().await;
                        let group = pid as i32;
                        tokio::spawn(async move {
                            tokio::time::sleep(STOP_GRACE).await;
                            kill_tree(group);
                        });
                    }
                }
            }
            _ = tokio::time::sleep(SNAPSHOT_POLL), if stdin_open && !held.is_empty() => {
                let waited = held_since.elapsed() >= SNAPSHOT_WAIT;
                if waited || !rt.snapshot_due(&task_id) {
                    if waited {
                        tracing::warn!("the previous turn's snapshot is still not taken; the next turn starts anyway");
                    }
                    for input in std::mem::take(&mut held) {
                        let interrupt = matches!(input, Input::Interrupt);
                        hand(&mut stdin, link.as_deref(), protocol.as_mut(), &mut handed, input).await;
                        if let (true, Some(link)) = (interrupt, link.as_deref()) {
                            link.kill_terminals();
                            kill_if_deaf_to_stop(rt, &spec.session_id, pid as i32);
                        }
                    }
                }
            }
            frame = async { frames.as_mut()?.recv().await }, if frames.is_some() => match frame {
                Some(line) => {
                    n_lines += 1;
                    active_at = tokio::time::Instant::now();
                    handed.line();
                    me.last_event_us.store(chrono::Utc::now().timestamp_micros(), Ordering::Relaxed);
                    let mut reaction = protocol.on_line(&line);
                    let replies = std::mem::take(&mut reaction.replies);
                    if stdin_open && !replies.is_empty() {
                        emit(&mut stdin, link.as_deref(), replies).await;
                    }
                    let ack = reaction.ack.take();
                    react(rt, &spec, &task_id, driver.vendor(), reaction).await;
                    // A store write waits for its record to be logged before it is answered.
                    if let (Some(n), Some(link)) = (ack, link.as_deref()) {
                        link.recorded.send_if_modified(|last| {
                            let newer = n > *last;
                            if newer {
                                *last = n;
                            }
                            newer
                        });
                    }
                }
                None => frames = None,
            },
            line = lines.next() => match line {
                Ok(None) | Err(_) => break,
                Ok(Some(Line::Whole(buf))) if link.is_some() => {
                    tracing::debug!(line = %String::from_utf8_lossy(&buf).trim_end(), "CodeBolt agent stdout");
                }
                Ok(Some(Line::Overlong(size_bytes))) if link.is_some() => {
                    tracing::debug!(size_bytes, "CodeBolt agent stdout: a line over the limit, skipped");
                }
                Ok(Some(Line::Overlong(size_bytes))) => {
                    // Its meaning is lost with it: the turn ends with the error, the process
                    // too (its next message resumes the conversation in a fresh one).
                    tracing::error!(size_bytes, max_line_bytes = limits.max_line_bytes, "an agent output line over the limit; ending the process");
                    n_lines += 1;
                    handed.line();
                    if overlong.is_none() {
                        overlong = Some(size_bytes);
                        stdin_open = false;
                        let _ = stdin.shutdown().await;
                        kill_tree(pid as i32);
                    }
                }
                Ok(Some(Line::Whole(buf))) => {
                    // Not copied when it is UTF-8 (a line may be tens of MiB).
                    let mut line = String::from_utf8(buf).unwrap_or_else(|e| {
                        String::from_utf8_lossy(e.as_bytes()).into_owned()
                    });
                    if line.ends_with('\r') {
                        line.pop();
                    }
                    n_lines += 1;
                    active_at = tokio::time::Instant::now();
                    handed.line();
                    me.last_event_us.store(chrono::Utc::now().timestamp_micros(), Ordering::Relaxed);
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
    drop(stdin);
    let status = child.wait().await;
    // Whatever the way it ended: nothing it started may outlive it (DESIGN.md invariant 7).
    let all_gone = sweep(pid as i32, &spec.session_id).await;
    // No input reaches this process any more: the runtime hands what comes next to a fresh
    // one. What was sent meanwhile is read here.
    rx.close();
    let mut pending: Vec<Input> = std::mem::take(&mut held);
    while let Ok(input) = rx.try_recv() {
        match input {
            Input::Stop | Input::Shutdown => {
                asked = true;
                shutting_down |= matches!(input, Input::Shutdown);
            }
            other => pending.push(other),
        }
    }
    let reason_tail = stderr_tail.await.unwrap_or_default();
    let (code, signal) = match &status {
        Ok(s) => (s.code(), std::os::unix::process::ExitStatusExt::signal(s)),
        Err(_) => (None, None),
    };
    tracing::info!(n_lines, ?code, ?signal, all_gone, "agent process ended");
    let vendor = driver.vendor();
    // The running turn's message, and whether a human asked to interrupt that turn (then it
    // ends, as interrupted, rather than going on in a fresh process).
    let (turn, interrupted) = rt
        .writer()
        .read(|s| {
            let x = s.sessions.get(&spec.session_id)?;
            Some((
                (x.turn_running && !x.completed)
                    .then(|| x.turn_input.clone())
                    .flatten(),
                x.interrupt_requested,
            ))
        })
        .unwrap_or((None, false));
    if idle_stopped {
        // Before a fresh process of the session may write its own.
        if all_gone {
            rt.clear_pid_file(&spec.session_id);
        }
        end_idle(
            rt,
            me,
            &spec,
            vendor,
            idle_stop,
            (pid, code, signal),
            pending,
            shutting_down,
        )
        .await;
        return;
    }
    let mut carry = carry;
    if !handed.printed {
        carry.n_silent_exits += 1;
    } else {
        carry.n_silent_exits = 0;
    }
    // The running turn's message, when this process never answered it: written with no line
    // after it (`unanswered`), held or sent but not written (`pending`), or still on its way
    // from the runtime (in neither).
    let redeliver = match &turn {
        Some(m) if !asked && !interrupted && link.is_none() && overlong.is_none() => {
            let id = m.input_id;
            let written = handed.unanswered.iter().any(|i| i.input_id() == Some(id));
            let answered = handed.ids.contains(&id)
                && !written
                && !pending.iter().any(|i| i.input_id() == Some(id));
            let again = written && carry.redelivered.contains(&id);
            (!answered && !again && carry.n_silent_exits <= MAX_SILENT_EXITS)
                .then_some((m.clone(), written))
        }
        _ => None,
    };
    let reason = if let Some(size_bytes) = overlong {
        format!(
            "{} printed an output line of more than {} bytes (at least {size_bytes}), over byre's limit (serve --max-line-bytes); byre ended the process and this turn. The next message resumes the conversation",
            vendor_name(vendor),
            limits.max_line_bytes
        )
    } else if cwd_gone {
        format!(
            "the task's worktree was removed while {} ran in it; byre ended it so that a fresh process works in the worktree made again",
            vendor_name(vendor)
        )
    } else if asked {
        stopped_by_byre(vendor, code, signal)
    } else {
        exit_reason(vendor, code, signal, turn.is_some(), &reason_tail)
    };
    if let Some((message, written)) = redeliver {
        if written {
            carry.redelivered.insert(message.input_id);
        }
        tracing::warn!(
            input_id = message.input_id,
            "the agent process exited before answering its message; a fresh process gets it"
        );
        rt.record(Command::RecordProcessExit {
            session_id: spec.session_id.clone().into(),
            exit: ProcessExited {
                pid,
                code,
                signal,
                reason,
                redelivered_input_ids: vec![message.input_id],
                idle_ms: 0,
            },
        })
        .await;
        if all_gone {
            rt.clear_pid_file(&spec.session_id);
        }
        let mut inputs = vec![Input::Message {
            text: message.text.clone(),
            images: rt.images(message.images.clone()).await,
            input_id: message.input_id,
            model: None,
        }];
        inputs.extend(
            pending
                .into_iter()
                .filter(|i| i.input_id() != Some(message.input_id)),
        );
        rt.replace(&spec.session_id, me, carry, inputs).await;
        return;
    }
    rt.forget(&spec.session_id, me);
    if all_gone {
        rt.clear_pid_file(&spec.session_id);
    }
    // What the cut turn streamed, its usage and time, before its end (or the restart's).
    rt.record_streamed(&spec.session_id).await;
    if shutting_down {
        // The log keeps the turn running: the next start resumes it (ResumeAfterRestart).
        return;
    }
    rt.record(Command::RecordProcessExit {
        session_id: spec.session_id.clone().into(),
        exit: ProcessExited {
            pid,
            code,
            signal,
            reason,
            redelivered_input_ids: Vec::new(),
            idle_ms: 0,
        },
    })
    .await;
}

/// After byre stopped an idle process: records its exit (`idle_ms`), then hands what came
/// for the session since the stop was decided (a message whose turn began meanwhile) to a
/// fresh process of the session, which resumes the conversation; with nothing, the session
/// waits without a process until its next message.
#[allow(clippy::too_many_arguments)]
async fn end_idle(
    rt: &Arc<Runtime>,
    me: &Arc<Live>,
    spec: &SpawnSpec,
    vendor: Vendor,
    idle_stop: std::time::Duration,
    (pid, code, signal): (u32, Option<i32>, Option<i32>),
    pending: Vec<Input>,
    shutting_down: bool,
) {
    let messages = pending.iter().any(|i| i.input_id().is_some());
    if shutting_down || !messages {
        // Unregistered before its exit is told, so that no one sees it live after.
        rt.forget(&spec.session_id, me);
        // No turn ran: nothing to record, only the session's text so far to drop.
        rt.record_streamed(&spec.session_id).await;
    }
    if shutting_down {
        return;
    }
    rt.record(Command::RecordProcessExit {
        session_id: spec.session_id.clone().into(),
        exit: ProcessExited {
            pid,
            code,
            signal,
            reason: stopped_idle(vendor, idle_stop),
            redelivered_input_ids: Vec::new(),
            idle_ms: idle_stop.as_millis() as u64,
        },
    })
    .await;
    if messages {
        rt.replace(&spec.session_id, me, Carry::default(), pending)
            .await;
    }
}

/// Reads `from` to its end, keeping only its last `cap` bytes as they arrive (a ring: an
/// agent may write any amount to stderr, byre holds at most `cap` plus one read's buffer,
/// DESIGN.md invariant 10); returns them as text, trimmed (lossily where a cut split a
/// character).
async fn stderr_tail(from: &mut (impl tokio::io::AsyncRead + Unpin), cap: usize) -> String {
    let mut chunk = [0u8; 8192];
    let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::with_capacity(cap);
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Only the last `cap` bytes of this read can survive it.
        let piece = &chunk[n.saturating_sub(cap)..n];
        let overflow = (tail.len() + piece.len()).saturating_sub(cap);
        tail.drain(..overflow);
        tail.extend(piece);
    }
    let (a, b) = tail.as_slices();
    String::from_utf8_lossy(&[a, b].concat()).trim().to_owned()
}

/// The device and inode of directory `path`, or `None` when it is gone: a directory removed
/// and made again at the same path has another identity.
fn dir_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The lines that hand `input` (a message or an interrupt) to the agent; none for the others.
fn input_lines(protocol: &mut dyn crate::Protocol, input: Input) -> Vec<String> {
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
    link: Option<&crate::codeboltjs::Link>,
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
            session_id: spec.session_id.clone().into(),
            vendor_session_id,
        })
        .await;
    }
    if let Some(limits) = reaction.rate_limits {
        rt.rate_limits(vendor, limits);
    }
    let limit = rt.output_limits().max_event_bytes;
    if let Some(mut text) = reaction.delta {
        cut_delta(&mut text, limit);
        rt.delta(&spec.session_id, task_id, &text);
    }
    if let Some(usage) = reaction.usage {
        rt.streamed_usage(&spec.session_id, usage);
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
                VendorItem::Unrecognized(_)
                | VendorItem::SubagentStarted(_)
                | VendorItem::SubagentEnded(_)
                | VendorItem::TurnBegan => {}
            }
        }
        // The one place output is bounded before the writer (`crate::bounds`): what is
        // over the event limit is cut, its whole kept as a blob of the session's first.
        for item in items.iter_mut() {
            let kept = match overflow(item, limit) {
                Some(whole) => rt.store_output_blob(&spec.session_id, whole).await,
                None => None,
            };
            cut_item(item, limit, kept, vendor);
        }
        for item in &items {
            if let VendorItem::Unrecognized(u) = item {
                rt.protocol_error(&spec.session_id, u);
            }
        }
        // What streamed before these items is logged by them (a text, a tool call), or the
        // turn started or ended: the text so far starts again after them.
        let turn_boundary = items
            .iter()
            .any(|i| matches!(i, VendorItem::TurnBegan | VendorItem::TurnEnded(_)));
        let logs_text = turn_boundary
            || items
                .iter()
                .any(|i| matches!(i, VendorItem::Text(_) | VendorItem::ToolCall(_)));
        let seq = rt
            .record_seq(Command::RecordVendorOutput {
                session_id: spec.session_id.clone().into(),
                items,
            })
            .await;
        if let (true, Some(seq)) = (logs_text, seq) {
            rt.streamed_logged(&spec.session_id, seq, turn_boundary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stderr_tail;

    #[tokio::test]
    async fn the_stderr_tail_keeps_only_the_last_bytes_of_any_amount() {
        // 1 MiB of `a`, then a last line: reads of any split keep the end alone.
        let mut text = vec![b'a'; 1 << 20];
        text.extend_from_slice(b"\nError: the last words\n");
        let tail = stderr_tail(&mut text.as_slice(), 16).await;
        assert_eq!(tail, "the last words");
        let tail = stderr_tail(&mut &b"short\n"[..], 2048).await;
        assert_eq!(tail, "short");
    }
}
