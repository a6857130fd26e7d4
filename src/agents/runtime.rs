//! The agent runtime: a reactor that follows the log and keeps one process per live session.
//!
//! - `user.message` → the session's process (started, or resumed with the vendor's own resume,
//!   when none runs) gets the message;
//! - `session.interrupt_requested` → the process gets an interrupt;
//! - every stdout line → its [`super::Protocol`]'s reaction: `RecordVendorOutput`, a new
//!   vendor session id → `RecordVendorSession`, lines written back, a delta broadcast, a
//!   rate-limit status kept for `getStatus`; the process's end → `RecordProcessExit`.
//!
//! Start-up: process groups a previous server left (found by their pid files under
//! `{data}/run/`) are killed; sessions whose turn was running are resumed
//! (`ResumeAfterRestart`). Shutdown: every process is stopped and reaped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use byre_projections::ids::SessionId;
use byre_projections::sessions::{SessionRole, Vendor, VendorUnrecognized};
use byre_projections::Command;
use dashmap::DashMap;
use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};

use super::claude::ClaudeDriver;
use super::codeboltjs::CodeboltDriver;
use super::codex::CodexDriver;
use super::{Driver, Image, SpawnSpec};
use byre_log::subscription::subscribe;
use byre_log::Writer;

mod admission;
mod session;
mod spawn;
mod status;
mod streaming;

use session::Input;

pub(crate) use admission::Admit;

pub use super::reaper::{clear_leftovers, Zombie};
use streaming::Streaming;
pub use streaming::STREAMED_TEXT_BYTES;

/// Most recent protocol errors kept for `getStatus`.
const RECENT_PROTOCOL_ERRORS: usize = 50;

/// A live agent process.
pub struct Live {
    tx: mpsc::Sender<Input>,
    /// Its pid (also its process group), 0 until started.
    pub pid: AtomicU32,
    /// Its task.
    pub task_id: String,
    /// Its vendor.
    pub vendor: Vendor,
    /// When it last wrote a line (or started), µs since the epoch.
    pub last_event_us: AtomicI64,
    model: Mutex<String>,
    handle: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// A live-only record for event streams: streamed text deltas (and the text streamed so far,
/// for a stream that opens mid-turn), never logged, sent with no `id:`.
#[derive(Debug)]
pub struct Ephemeral {
    /// The SSE event's name: `agent.delta`, or `agent.streaming` (the text so far).
    pub event: &'static str,
    /// The task (empty for a lead session's).
    pub task_id: String,
    /// A lead session's user: only they are sent it; `None` for a task's session.
    pub owner: Option<String>,
    /// JSON `{"kind":"agent.delta","task_id","agent_session_id","payload":{"text","delta_seq","after_seq"}}`
    /// (schema/events.md, "Live-only frames").
    pub json: Arc<str>,
}

/// Spec `ProtocolError`.
#[derive(Debug, Clone, Serialize)]
pub struct ProtocolError {
    vendor: String,
    session_id: String,
    at: String,
    reason: String,
    raw: String,
    size: u64,
    /// A lead session's user (only they see it); empty for a task's session.
    #[serde(skip)]
    owner: String,
}

/// The directory a user's lead agent works in: `{data}/lead/{login}`, the login's bytes
/// outside `[A-Za-z0-9._-]` written `%XX` (so two logins never share one, and none escapes).
pub fn lead_dir(data_dir: &Path, login: &str) -> PathBuf {
    let mut name = String::new();
    for b in login.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && !name.is_empty()) {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    data_dir.join("lead").join(name)
}

/// A session's driver, the spec of its next process, and its task.
type SpawnPlan = (Arc<dyn Driver>, SpawnSpec, String);

/// Whether an agent CLI can be found (`getStatus.agent_clis`, and the start-up warning).
#[derive(Debug, Clone, Serialize)]
pub struct AgentCli {
    /// `claude` or `codex`.
    pub vendor: &'static str,
    /// What people call it: `Claude Code`, `Codex`.
    #[serde(skip)]
    pub name: &'static str,
    /// The program byre starts: a path, or a name looked up on `PATH`.
    pub program: String,
    /// The environment variable that names the program.
    pub env_var: &'static str,
    /// Whether the program is there (a file at the path, or in a directory of `PATH`).
    pub found: bool,
}

/// Whether `program` (a path, or a bare name looked up on `PATH`) names a file.
fn program_found(program: &str) -> bool {
    if program.contains('/') {
        Path::new(program).is_file()
    } else {
        byre_process::find_on_path(program).is_some()
    }
}

/// Makes sure a task's worktree is whole before an agent process starts in it. byre-app's
/// worktree reactor implements it (it makes worktrees, records their outcome, and brings back
/// one removed while byre runs); the runtime only asks, so this crate needs nothing of it.
pub trait TaskWorktrees: Send + Sync {
    /// Waits until `task_id`'s worktree is whole (made, or made again if it was removed);
    /// whether it is there: `false` when the task is not active, its worktree failed, or
    /// `within` passed first.
    fn made<'a>(
        &'a self,
        task_id: &'a str,
        within: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>>;
}

/// The runtime. Shared as `Arc<Runtime>`.
pub struct Runtime {
    me: std::sync::Weak<Runtime>,
    writer: Writer,
    run_dir: PathBuf,
    claude: Arc<ClaudeDriver>,
    codex: Arc<CodexDriver>,
    codebolt: Arc<CodeboltDriver>,
    codebolt_hub: Arc<crate::codeboltjs::Hub>,
    live: DashMap<String, Arc<Live>>,
    /// The latest rate-limit status each vendor reported (Codex's `account/rateLimits/updated`,
    /// Claude Code's `rate_limit_event`) and how many reports came, since this server started.
    vendor_rate_limits: DashMap<&'static str, (serde_json::Value, u64)>,
    protocol_counts: DashMap<String, u64>,
    protocol_recent: Mutex<std::collections::VecDeque<ProtocolError>>,
    leftover_zombies: Mutex<Vec<Zombie>>,
    ephemeral: broadcast::Sender<Arc<Ephemeral>>,
    /// Each live session's running turn as streamed (`runtime/streaming.rs`).
    streams: DashMap<String, Streaming>,
    /// Session tokens and how agents start byre's MCP server.
    mcp: Arc<crate::mcp_launch::McpHost>,
    /// Brings back a task's worktree removed while byre runs, before a turn.
    worktrees: Arc<dyn TaskWorktrees>,
    /// Set when the runtime stops: no process starts after it.
    stopping: std::sync::atomic::AtomicBool,
    /// The memory floor's queue of waiting starts (`runtime/admission.rs`).
    admission: admission::Admission,
    /// How long a process may sit without a turn before it is stopped; zero: never.
    idle_stop: std::time::Duration,
    /// The sandbox every process runs in (`serve --sandbox`).
    sandbox: Arc<super::sandbox::Sandbox>,
    /// Most bytes of one event's payload and of one output line (`serve --max-event-bytes`,
    /// `--max-line-bytes`; `crate::bounds`).
    output_limits: crate::OutputLimits,
}

impl Runtime {
    /// Starts the runtime: clears processes a previous server left, resumes interrupted
    /// sessions, then follows the log until `shutdown`.
    pub fn start(
        writer: Writer,
        settings: &crate::Settings,
        leftovers: Vec<Zombie>,
        mcp: Arc<crate::mcp_launch::McpHost>,
        worktrees: Arc<dyn TaskWorktrees>,
        sandbox: Arc<super::sandbox::Sandbox>,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Arc<Runtime>, tokio::task::JoinHandle<()>) {
        let data_dir = &settings.data_dir;
        let (ephemeral, _) = broadcast::channel(4096);
        let rt = Arc::new_cyclic(|me| Runtime {
            me: me.clone(),
            writer: writer.clone(),
            run_dir: data_dir.join("run"),
            claude: Arc::new(
                ClaudeDriver::new(
                    data_dir,
                    settings.claude_bin.clone(),
                    settings.agent_env.clone(),
                )
                .sandboxed(sandbox.clone()),
            ),
            codex: Arc::new(
                CodexDriver::new(
                    data_dir,
                    settings.codex_bin.clone(),
                    settings.agent_env.clone(),
                )
                .sandboxed(sandbox.clone()),
            ),
            codebolt: Arc::new(
                CodeboltDriver::new(
                    data_dir,
                    settings.codebolt_agents.clone(),
                    settings.agent_env.clone(),
                )
                .sandboxed(sandbox.clone()),
            ),
            codebolt_hub: Arc::new(crate::codeboltjs::Hub::default()),
            live: DashMap::new(),
            vendor_rate_limits: DashMap::new(),
            protocol_counts: DashMap::new(),
            protocol_recent: Mutex::new(Default::default()),
            leftover_zombies: Mutex::new(leftovers),
            ephemeral,
            streams: DashMap::new(),
            mcp,
            worktrees,
            stopping: std::sync::atomic::AtomicBool::new(false),
            admission: admission::Admission::new(&settings.limits),
            idle_stop: settings.limits.idle_stop,
            sandbox,
            output_limits: settings.limits.output,
        });
        // Token files of sessions that are not live (a crash skipped their removal) go before
        // anything runs.
        let live_sessions: std::collections::BTreeSet<String> = writer.read(|s| {
            s.sessions
                .values()
                .filter(|x| !x.completed)
                .map(|x| x.id.clone())
                .map(|x| x.to_string())
                .collect()
        });
        rt.mcp.prune(|id| live_sessions.contains(id));
        rt.codebolt_hub.set_llm(&settings.agent_env);
        rt.codebolt_hub
            .set_home(super::codeboltjs::home_dir(&settings.data_dir));
        rt.codebolt_hub
            .set_sandbox(rt.sandbox.clone(), settings.data_dir.clone());
        let from = writer.head();
        let me = rt.clone();
        let handle = tokio::spawn(async move {
            let events = subscribe(me.writer.clone(), from);
            me.resume_interrupted().await;
            let mut events = Box::pin(events);
            loop {
                tokio::select! {
                    next = events.next() => match next {
                        Some(Ok(r)) => me.react(&r).await,
                        Some(Err(e)) => {
                            tracing::error!(error = %e, "agent runtime cannot read the log");
                            break;
                        }
                        None => break,
                    },
                    _ = shutdown.changed() => break,
                }
            }
            me.stop_all().await;
        });
        (rt, handle)
    }

    /// Live-only records (text deltas) for event streams.
    pub fn ephemeral(&self) -> broadcast::Receiver<Arc<Ephemeral>> {
        self.ephemeral.subscribe()
    }

    fn driver(&self, vendor: Vendor) -> Option<Arc<dyn Driver>> {
        match vendor {
            Vendor::Claude => Some(self.claude.clone()),
            Vendor::Codex => Some(self.codex.clone()),
            Vendor::Codebolt => Some(self.codebolt.clone()),
        }
    }

    /// The CLIs of Claude Code and Codex, and whether each can be found now.
    pub fn agent_clis(&self) -> Vec<AgentCli> {
        let clis: [(Arc<dyn Driver>, &'static str); 2] = [
            (self.claude.clone(), "Claude Code"),
            (self.codex.clone(), "Codex"),
        ];
        clis.into_iter()
            .map(|(driver, name)| {
                let (program, env_var) = driver.program();
                AgentCli {
                    vendor: driver.vendor().as_str(),
                    name,
                    found: program_found(&program),
                    program,
                    env_var,
                }
            })
            .collect()
    }

    /// The sandbox agents' processes run in (the one spawn path: `super::sandbox`).
    pub fn sandbox(&self) -> &Arc<super::sandbox::Sandbox> {
        &self.sandbox
    }

    /// The CodeBolt agents' links, by secret token.
    pub fn codebolt(&self) -> &Arc<crate::codeboltjs::Hub> {
        &self.codebolt_hub
    }

    /// Keeps `status` as the vendor's latest rate-limit status and counts the report.
    pub(crate) fn rate_limits(&self, vendor: Vendor, status: serde_json::Value) {
        let mut entry = self
            .vendor_rate_limits
            .entry(vendor.as_str())
            .or_insert((serde_json::Value::Null, 0));
        entry.0 = status;
        entry.1 += 1;
    }

    /// The data directory (the parent of `run/`).
    fn data_dir(&self) -> &Path {
        self.run_dir.parent().unwrap_or(Path::new("."))
    }

    /// The worktree restorer.
    pub(crate) fn worktrees(&self) -> &dyn TaskWorktrees {
        self.worktrees.as_ref()
    }

    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// How long a process may sit without a turn before it is stopped; zero: never.
    pub(crate) fn idle_stop(&self) -> std::time::Duration {
        self.idle_stop
    }

    /// Whether the session's process has nothing to do: no turn running, no subagent of its
    /// own still at work, not completed (a completed one is being stopped anyway).
    pub(crate) fn is_idle(&self, session_id: &str) -> bool {
        self.writer.read(|s| {
            s.sessions
                .get(session_id)
                .is_some_and(|x| !x.turn_running && x.subagents == 0 && !x.completed)
        })
    }

    /// The bounds on agent output (`crate::bounds`).
    pub(crate) fn output_limits(&self) -> crate::OutputLimits {
        self.output_limits
    }

    /// Keeps `text`, the whole of a vendor output field cut to the event limit, as a blob of
    /// the session's (`StoreOutputBlob`; owned when the session is a lead's). `None` when it
    /// could not be stored (the cut's marker then says so).
    pub(crate) async fn store_output_blob(
        &self,
        session_id: &str,
        text: String,
    ) -> Option<byre_projections::sessions::Cut> {
        use sha2::Digest;
        let size_bytes = text.len() as u64;
        let sha256: String = sha2::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let cmd = Command::StoreOutputBlob {
            session_id: session_id.to_owned().into(),
            size_bytes,
            sha256,
        };
        match self
            .writer
            .submit(cmd, Some(bytes::Bytes::from(text)))
            .await
        {
            Ok(ack) => ack.events.iter().find_map(|e| match &e.body {
                byre_projections::EventBody::BlobUploaded(b) => {
                    Some(byre_projections::sessions::Cut {
                        blob_id: b.id.clone(),
                        size_bytes,
                    })
                }
                _ => None,
            }),
            Err(e) => {
                tracing::error!(error = %e, "could not keep cut agent output as a blob");
                None
            }
        }
    }

    pub(crate) async fn record(&self, cmd: Command) {
        self.record_seq(cmd).await;
    }

    /// As [`Runtime::record`]; the seq of the last event it wrote, if any.
    pub(crate) async fn record_seq(&self, cmd: Command) -> Option<u64> {
        match self.writer.submit(cmd, None).await {
            Ok(ack) => ack.events.last().map(|e| e.seq),
            Err(e) => {
                tracing::error!(error = %e, "could not record agent output");
                None
            }
        }
    }

    /// Whether a turn end of `task_id` still waits for its snapshot (the snapshot reactor has
    /// not recorded `snapshot.taken` or `snapshot.failed` for it yet).
    pub(crate) fn snapshot_due(&self, task_id: &str) -> bool {
        self.writer.read(|s| {
            s.snapshots.get(task_id).is_some_and(|t| {
                t.pending
                    .values()
                    .any(|p| p.trigger == byre_projections::snapshots::SnapshotTrigger::TurnEnd)
            })
        })
    }

    pub(crate) fn live(&self, session_id: &str) -> Option<Arc<Live>> {
        self.live.get(session_id).map(|l| l.clone())
    }

    pub(crate) fn started(&self, session_id: &str, pid: u32) {
        if let Some(l) = self.live(session_id) {
            l.pid.store(pid, Ordering::Relaxed);
        }
        let _ = std::fs::create_dir_all(&self.run_dir);
        // The pid and its start time: a later start kills the group only if that same process
        // still runs (pids are reused, e.g. after a reboot).
        let started = byre_process::groups::start_time(pid as i32).unwrap_or(0);
        let _ = std::fs::write(
            self.run_dir.join(format!("{session_id}.pgid")),
            format!("{pid} {started}"),
        );
    }

    /// Unregisters the session's process loop `me` (not a newer one that replaced it).
    pub(crate) fn forget(&self, session_id: &str, me: &Arc<Live>) {
        self.live.remove_if(session_id, |_, l| Arc::ptr_eq(l, me));
    }

    /// Removes the session's pid file: called once nothing its process left runs, so that
    /// until then a start after a crash still finds the group.
    pub(crate) fn clear_pid_file(&self, session_id: &str) {
        let _ = std::fs::remove_file(self.run_dir.join(format!("{session_id}.pgid")));
    }

    pub(crate) fn protocol_error(&self, session_id: &str, u: &VendorUnrecognized) {
        *self
            .protocol_counts
            .entry(u.vendor.as_str().to_owned())
            .or_insert(0) += 1;
        let mut recent = self
            .protocol_recent
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let owner = self
            .writer
            .read(|s| s.sessions.get(session_id).map(|x| x.owner.clone()))
            .unwrap_or_default();
        recent.push_front(ProtocolError {
            owner: owner.into(),
            vendor: u.vendor.as_str().into(),
            session_id: session_id.into(),
            at: byre_log::rfc3339(chrono::Utc::now().timestamp_micros()),
            reason: u.reason.clone(),
            raw: u.raw.clone(),
            size: u.size,
        });
        recent.truncate(RECENT_PROTOCOL_ERRORS);
    }

    /// Streams a delta of the session's running turn, numbered, and keeps it in the text so
    /// far.
    pub(crate) fn delta(&self, session_id: &str, task_id: &str, text: &str) {
        let cap = STREAMED_TEXT_BYTES.min(self.output_limits.max_event_bytes / 2);
        let (delta_seq, after_seq) = {
            let mut s = self.streams.entry(session_id.to_owned()).or_default();
            (s.push(text, cap), s.after_seq)
        };
        let payload =
            serde_json::json!({"text": text, "delta_seq": delta_seq, "after_seq": after_seq});
        let _ = self
            .ephemeral
            .send(self.frame("agent.delta", session_id, task_id, payload));
    }

    /// A live-only frame of the session: a lead's says whose it is, as its logged events do.
    fn frame(
        &self,
        event: &'static str,
        session_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> Arc<Ephemeral> {
        let owner = self.writer.read(|s| {
            s.sessions
                .get(session_id)
                .map(|x| x.owner.clone())
                .filter(|o| !o.is_empty())
        });
        let json = match &owner {
            Some(o) => {
                serde_json::json!({"kind": event, "task_id": "", "agent_session_id": session_id, "owner": o, "payload": payload})
            }
            None => {
                serde_json::json!({"kind": event, "task_id": task_id, "agent_session_id": session_id, "payload": payload})
            }
        };
        Arc::new(Ephemeral {
            event,
            owner: owner.map(Into::into),
            task_id: task_id.into(),
            json: json.to_string().into(),
        })
    }

    /// The text each live session's running turn has streamed so far (`agent.streaming`
    /// frames), for a stream that opens now or fell behind the deltas. A stream subscribes to
    /// the deltas ([`Runtime::ephemeral`]) before it reads these, so a delta is in a frame, or
    /// comes after it, or both (then its `delta_seq` says it is in the frame).
    pub fn streaming(&self) -> Vec<Arc<Ephemeral>> {
        let so_far: Vec<(String, String, serde_json::Value)> = self
            .streams
            .iter()
            .filter(|s| !s.text.is_empty())
            .filter_map(|s| {
                let task_id = self.live(s.key())?.task_id.clone();
                Some((s.key().clone(), task_id, s.payload()))
            })
            .collect();
        so_far
            .into_iter()
            .map(|(sid, task_id, payload)| self.frame("agent.streaming", &sid, &task_id, payload))
            .collect()
    }

    /// The session's streamed text was logged (or its turn started or ended) at `seq`.
    pub(crate) fn streamed_logged(&self, session_id: &str, seq: u64, turn_boundary: bool) {
        self.streams
            .entry(session_id.to_owned())
            .or_default()
            .logged(seq, turn_boundary);
    }

    /// The session's running turn has used `usage` so far.
    pub(crate) fn streamed_usage(
        &self,
        session_id: &str,
        usage: byre_projections::sessions::Usage,
    ) {
        self.streams.entry(session_id.to_owned()).or_default().usage = usage;
    }

    /// byre stops the session's process (it shuts down, the session was stopped, the process
    /// ended) while a turn runs: what the turn streamed and not yet logged, its usage and time
    /// so far go to the log (`agent.streamed`), and the session's text so far is dropped.
    pub(crate) async fn record_streamed(&self, session_id: &str) {
        let Some((_, so_far)) = self.streams.remove(session_id) else {
            return;
        };
        let turn = self.writer.read(|s| {
            s.sessions
                .get(session_id)
                .filter(|x| x.turn_running && !x.completed)
                .map(|x| x.turns)
        });
        if let (Some(turn), Some(_)) = (turn, so_far.started) {
            self.record(Command::RecordStreamed {
                session_id: session_id.into(),
                streamed: so_far.recorded(turn),
            })
            .await;
        }
    }

    async fn react(&self, r: &byre_log::Record) {
        let Some(session_id) = r.agent_session_id.as_deref() else {
            return;
        };
        match r.kind.as_str() {
            "user.message" => {
                let event: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                // A message that starts a turn (its `turn.started` is in the same commit, so in
                // the state already): what streams from now on is that turn's.
                let starts = self.writer.read(|s| {
                    s.sessions.get(session_id).is_some_and(|x| {
                        x.turn_running
                            && x.turn_input.as_ref().map(|m| m.input_id)
                                == event["payload"]["input_id"].as_u64()
                    })
                });
                if starts {
                    self.streamed_logged(session_id, self.writer.head(), true);
                }
                self.deliver(session_id, &event["payload"]).await;
            }
            "inbox.responded" => {
                let event: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                self.answer_codebolt(session_id, &event["payload"]["response"])
                    .await;
            }
            "inbox.superseded" | "inbox.closed" => {
                // A newer question replaced one a CodeBolt agent waits on, or its task closed:
                // that wait ends.
                let event: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                if let (Some(link), Some(item)) = (
                    self.codebolt_hub.link_of_session(session_id),
                    event["payload"]["id"].as_str(),
                ) {
                    let waiting = link
                        .questions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(item);
                    drop(waiting); // its receiver answers "replaced"
                }
            }
            "session.completed" => {
                if let Some(l) = self.live(session_id) {
                    let _ = l.tx.send(Input::Stop).await;
                }
                // Its token is refused from now on; its file goes too.
                self.mcp.revoke(session_id);
            }
            "session.interrupt_requested" => match self.live(session_id) {
                Some(l) => {
                    if let Err(mpsc::error::SendError(input)) = l.tx.send(Input::Interrupt).await {
                        // That process just ended; the loop replacing it, if any, takes it.
                        if let Some(next) = self.live(session_id).filter(|n| !Arc::ptr_eq(n, &l)) {
                            let _ = next.tx.send(input).await;
                        }
                    }
                }
                None => {
                    let exit = byre_projections::sessions::ProcessExited {
                        pid: 0,
                        code: None,
                        signal: None,
                        reason: "no agent process was running".into(),
                        redelivered_input_ids: Vec::new(),
                        idle_ms: 0,
                    };
                    self.record(Command::RecordProcessExit {
                        session_id: session_id.into(),
                        exit,
                    })
                    .await;
                }
            },
            _ => {}
        }
    }

    /// Hands an answer to the CodeBolt agent waiting on its question, over its socket; it is
    /// recorded as delivered first, so the turn's end does not deliver it again as a message.
    async fn answer_codebolt(&self, session_id: &str, response: &serde_json::Value) {
        let Some(link) = self.codebolt_hub.link_of_session(session_id) else {
            return;
        };
        let item_id = response["item_id"].as_str().unwrap_or("");
        let waiting = link
            .questions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(item_id);
        // A wait whose request is gone (its socket closed) takes nothing: the answer is then
        // delivered as a message, as to any agent.
        let Some(tx) = waiting.filter(|tx| !tx.is_closed()) else {
            return;
        };
        self.record(Command::RecordAnswersDelivered {
            session_id: session_id.into(),
            response_ids: vec![response["id"].as_str().unwrap_or("").to_owned()],
        })
        .await;
        let _ = tx.send(response.clone());
    }

    /// The session's live process loop: the registered one, unless it is `stale` (a loop that
    /// ended and takes no input), else a new one started with `carry` (one atomic step on the
    /// map, so two callers replacing the same stale loop share one new loop). `None` when
    /// the session is unknown or the runtime stops; the vendor, when it has no driver
    /// (recorded as the process's exit). Not async, so that a loop may start its successor.
    fn live_or_start(
        &self,
        session_id: &str,
        stale: Option<&Arc<Live>>,
        model: Option<&str>,
        carry: session::Carry,
    ) -> Result<Option<Arc<Live>>, Vendor> {
        if let Some(l) = self
            .live(session_id)
            .filter(|l| !stale.is_some_and(|s| Arc::ptr_eq(s, l)))
        {
            return Ok(Some(l));
        }
        if self.stopping.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let Some(plan) = self.spawn_plan(session_id, model) else {
            return Ok(None);
        };
        let (driver, spec, task_id) = plan?;
        let Some(rt) = self.me.upgrade() else {
            return Ok(None);
        };
        let vendor = driver.vendor();
        let entry = self.live.entry(session_id.to_owned());
        let current = match entry {
            dashmap::Entry::Occupied(e) if !stale.is_some_and(|s| Arc::ptr_eq(s, e.get())) => {
                return Ok(Some(e.get().clone()))
            }
            other => other,
        };
        let (tx, rx) = mpsc::channel(64);
        let live = Arc::new(Live {
            tx,
            pid: AtomicU32::new(0),
            task_id: task_id.clone(),
            vendor,
            last_event_us: AtomicI64::new(chrono::Utc::now().timestamp_micros()),
            model: Mutex::new(spec.model.clone()),
            handle: Mutex::new(None),
        });
        match current {
            dashmap::Entry::Occupied(mut e) => {
                e.insert(live.clone());
            }
            dashmap::Entry::Vacant(e) => {
                e.insert(live.clone());
            }
        }
        let handle = tokio::spawn(session::run(
            rt,
            live.clone(),
            driver,
            spec,
            task_id,
            carry,
            rx,
        ));
        *live.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(Some(live))
    }

    /// [`Runtime::live_or_start`], recording a vendor without a driver as the process's exit.
    async fn live_or_start_recorded(
        &self,
        session_id: &str,
        stale: Option<&Arc<Live>>,
        model: Option<&str>,
        carry: session::Carry,
    ) -> Option<Arc<Live>> {
        match self.live_or_start(session_id, stale, model, carry) {
            Ok(live) => live,
            Err(vendor) => {
                let exit = byre_projections::sessions::ProcessExited {
                    pid: 0,
                    code: None,
                    signal: None,
                    reason: super::VendorError::Unsupported(vendor.as_str()).to_string(),
                    redelivered_input_ids: Vec::new(),
                    idle_ms: 0,
                };
                self.record(Command::RecordProcessExit {
                    session_id: session_id.into(),
                    exit,
                })
                .await;
                None
            }
        }
    }

    /// Hands `inputs` to a fresh process loop of the session in place of `stale`, whose
    /// process exited before answering them (or to the loop that already replaced it). The
    /// fresh process runs the session's model as the fold has it (the last message's switch
    /// included).
    pub(crate) async fn replace(
        &self,
        session_id: &str,
        stale: &Arc<Live>,
        carry: session::Carry,
        inputs: Vec<Input>,
    ) {
        let Ok(Some(live)) = self.live_or_start(session_id, Some(stale), None, carry) else {
            // No process starts now (byre stops): the ended loop goes, and the next start
            // resumes the turn, still running in the log.
            self.forget(session_id, stale);
            return;
        };
        for input in inputs {
            let _ = live.tx.send(input).await;
        }
    }

    /// Sends `input` to the session's process loop; when that loop has just ended (its
    /// process exited: it takes no more input), to the one that replaces it. `false` when
    /// no loop could take it.
    async fn send(&self, session_id: &str, input: Input, model: Option<&str>) -> bool {
        let mut input = input;
        let mut stale: Option<Arc<Live>> = None;
        for _ in 0..3 {
            let Some(live) = self
                .live_or_start_recorded(
                    session_id,
                    stale.as_ref(),
                    model,
                    session::Carry::default(),
                )
                .await
            else {
                return false;
            };
            // A model switch is relative to what the process runs.
            if let Input::Message { model: switch, .. } = &mut input {
                *switch = model.map(str::to_owned).filter(|m| {
                    let mut current = live.model.lock().unwrap_or_else(|e| e.into_inner());
                    let differs = *current != *m;
                    current.clone_from(m);
                    differs
                });
            }
            match live.tx.send(input).await {
                Ok(()) => return true,
                Err(mpsc::error::SendError(back)) => {
                    input = back;
                    stale = Some(live);
                }
            }
        }
        false
    }

    async fn deliver(&self, session_id: &str, payload: &serde_json::Value) {
        let text = payload["text"].as_str().unwrap_or("").to_owned();
        let input_id = payload["input_id"].as_u64().unwrap_or(0);
        let wanted_model = payload["model"].as_str().map(str::to_owned);
        let ids: Vec<String> = payload["images"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let images = self.images(ids).await;
        let message = Input::Message {
            text,
            images,
            input_id,
            model: None,
        };
        self.send(session_id, message, wanted_model.as_deref())
            .await;
    }

    /// The images of blobs `ids`, read from the log's blob table (unknown ids are skipped).
    pub(crate) async fn images(&self, ids: Vec<String>) -> Vec<Image> {
        let mut out = Vec::new();
        for id in &ids {
            let Some((sha, content_type)) = self.writer.read(|s| {
                s.blobs
                    .get(id)
                    .map(|b| (b.sha256.clone(), b.content_type.clone()))
            }) else {
                continue;
            };
            let store = self.writer.store().clone();
            if let Ok(Ok(Some(bytes))) = tokio::task::spawn_blocking(move || store.blob(&sha)).await
            {
                out.push(Image {
                    content_type,
                    bytes,
                });
            }
        }
        out
    }

    /// Sessions whose turn was running when the previous server stopped: ended as interrupted
    /// and resumed with a note, queued messages after it; and those whose subagents were
    /// running, which the stopped process took with it.
    async fn resume_interrupted(&self) {
        let running: Vec<(SessionId, String)> = self.writer.read(|s| {
            s.sessions
                .values()
                .filter(|x| (x.turn_running || x.subagents > 0) && !x.completed)
                .filter_map(|x| {
                    if x.role == SessionRole::Lead {
                        // A lead has no worktree: its messages carry no HEAD.
                        return Some((x.id.clone(), String::new()));
                    }
                    s.tasks
                        .get(&x.task_id)
                        .map(|t| (x.id.clone(), t.worktree_path.clone()))
                })
                .collect()
        });
        for (session_id, worktree) in running {
            let head = tokio::task::spawn_blocking(move || {
                if worktree.is_empty() {
                    return String::new();
                }
                byre_git::worktree_head(Path::new(&worktree)).unwrap_or_default()
            })
            .await
            .unwrap_or_default();
            tracing::info!(
                session_id = session_id.as_str(),
                "resuming a session whose turn byre's restart cut short"
            );
            self.record(Command::ResumeAfterRestart { session_id, head })
                .await;
        }
    }

    /// Stops every process and waits for each to be reaped.
    pub async fn stop_all(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let lives: Vec<Arc<Live>> = self.live.iter().map(|l| l.clone()).collect();
        for l in &lives {
            let _ = l.tx.send(Input::Shutdown).await;
        }
        for l in lives {
            let handle = l.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(h) = handle {
                if tokio::time::timeout(std::time::Duration::from_secs(5), h)
                    .await
                    .is_err()
                {
                    byre_process::groups::kill_tree(l.pid.load(Ordering::Relaxed) as i32);
                }
            }
        }
    }
}
