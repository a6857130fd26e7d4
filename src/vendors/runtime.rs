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

use byre_projections::sessions::{SessionState, Vendor, VendorUnrecognized};
use byre_projections::Command;
use dashmap::DashMap;
use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};

use super::claude::ClaudeDriver;
use super::codebolt::CodeboltDriver;
use super::codex::CodexDriver;
use super::session::{self, Input};
use super::{Driver, Image, SpawnSpec};
use crate::log::subscription::subscribe;
use crate::log::Writer;

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

/// A live-only record for event streams: streamed text deltas, never logged, sent with no
/// `id:`.
#[derive(Debug)]
pub struct Ephemeral {
    /// The task.
    pub task_id: String,
    /// JSON `{"kind":"agent.delta","task_id","agent_session_id","payload":{"text"}}`.
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
}

/// Spec `Zombie`.
#[derive(Debug, Clone, Serialize)]
pub struct Zombie {
    kind: &'static str,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
}

/// The runtime. Shared as `Arc<Runtime>`.
pub struct Runtime {
    me: std::sync::Weak<Runtime>,
    writer: Writer,
    run_dir: PathBuf,
    claude: Arc<ClaudeDriver>,
    codex: Arc<CodexDriver>,
    codebolt: Arc<CodeboltDriver>,
    codebolt_hub: Arc<crate::codebolt::Hub>,
    live: DashMap<String, Arc<Live>>,
    /// The latest rate-limit status each vendor reported (Codex's `account/rateLimits/updated`),
    /// since this server started.
    vendor_rate_limits: DashMap<&'static str, serde_json::Value>,
    protocol_counts: DashMap<String, u64>,
    protocol_recent: Mutex<std::collections::VecDeque<ProtocolError>>,
    leftover_zombies: Mutex<Vec<Zombie>>,
    ephemeral: broadcast::Sender<Arc<Ephemeral>>,
    /// Session tokens and how agents start byre's MCP server.
    mcp: Arc<crate::mcp::McpHost>,
}

impl Runtime {
    /// Starts the runtime: clears processes a previous server left, resumes interrupted
    /// sessions, then follows the log until `shutdown`.
    pub fn start(
        writer: Writer,
        config: &crate::config::Config,
        leftovers: Vec<Zombie>,
        mcp: Arc<crate::mcp::McpHost>,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Arc<Runtime>, tokio::task::JoinHandle<()>) {
        let data_dir = &config.data_dir;
        let (ephemeral, _) = broadcast::channel(4096);
        let rt = Arc::new_cyclic(|me| Runtime {
            me: me.clone(),
            writer: writer.clone(),
            run_dir: data_dir.join("run"),
            claude: Arc::new(ClaudeDriver::new(
                data_dir,
                config.claude_bin.clone(),
                config.agent_env.clone(),
            )),
            codex: Arc::new(CodexDriver::new(
                data_dir,
                config.codex_bin.clone(),
                config.agent_env.clone(),
            )),
            codebolt: Arc::new(CodeboltDriver::new(data_dir, config.agent_env.clone())),
            codebolt_hub: Arc::new(crate::codebolt::Hub::default()),
            live: DashMap::new(),
            vendor_rate_limits: DashMap::new(),
            protocol_counts: DashMap::new(),
            protocol_recent: Mutex::new(Default::default()),
            leftover_zombies: Mutex::new(leftovers),
            ephemeral,
            mcp,
        });
        // Token files of sessions that are not live (a crash skipped their removal) go before
        // anything runs.
        let live_sessions: std::collections::BTreeSet<String> = writer.read(|s| {
            s.sessions
                .values()
                .filter(|x| !x.completed)
                .map(|x| x.id.clone())
                .collect()
        });
        rt.mcp.prune(|id| live_sessions.contains(id));
        rt.codebolt_hub.set_llm(&config.agent_env);
        rt.codebolt_hub
            .set_home(super::codebolt::home_dir(&config.data_dir));
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

    /// The CodeBolt agents' links, by secret token.
    pub fn codebolt(&self) -> &Arc<crate::codebolt::Hub> {
        &self.codebolt_hub
    }

    pub(crate) fn rate_limits(&self, vendor: Vendor, status: serde_json::Value) {
        self.vendor_rate_limits.insert(vendor.as_str(), status);
    }

    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    pub(crate) async fn record(&self, cmd: Command) {
        if let Err(e) = self.writer.submit(cmd, None).await {
            tracing::error!(error = %e, "could not record agent output");
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
        let started = start_time(pid as i32).unwrap_or(0);
        let _ = std::fs::write(
            self.run_dir.join(format!("{session_id}.pgid")),
            format!("{pid} {started}"),
        );
    }

    pub(crate) fn forget(&self, session_id: &str) {
        self.live.remove(session_id);
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
        recent.push_front(ProtocolError {
            vendor: u.vendor.as_str().into(),
            session_id: session_id.into(),
            at: crate::api::rfc3339(chrono::Utc::now().timestamp_micros()),
            reason: u.reason.clone(),
            raw: u.raw.clone(),
            size: u.size,
        });
        recent.truncate(RECENT_PROTOCOL_ERRORS);
    }

    pub(crate) fn delta(&self, session_id: &str, task_id: &str, text: &str) {
        let json = serde_json::json!({"kind": "agent.delta", "task_id": task_id, "agent_session_id": session_id, "payload": {"text": text}});
        let _ = self.ephemeral.send(Arc::new(Ephemeral {
            task_id: task_id.into(),
            json: json.to_string().into(),
        }));
    }

    async fn react(&self, r: &crate::log::Record) {
        let Some(session_id) = r.agent_session_id.as_deref() else {
            return;
        };
        match r.kind.as_str() {
            "user.message" => {
                let event: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                self.deliver(session_id, &event["payload"]).await;
            }
            "inbox.responded" => {
                let event: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                self.answer_codebolt(session_id, &event["payload"]["response"])
                    .await;
            }
            "inbox.superseded" => {
                // A newer question replaced one a CodeBolt agent waits on: that wait ends.
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
                    let _ = l.tx.send(Input::Interrupt).await;
                }
                None => {
                    let exit = byre_projections::sessions::ProcessExited {
                        pid: 0,
                        code: None,
                        signal: None,
                        reason: "no agent process was running".into(),
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

    async fn deliver(&self, session_id: &str, payload: &serde_json::Value) {
        let found = self.writer.read(|s| {
            let sess = s.sessions.get(session_id)?;
            let task = s.tasks.get(&sess.task_id)?;
            Some((
                sess.vendor,
                sess.vendor_session_id.clone(),
                sess.model.clone(),
                task.id.clone(),
                task.worktree_path.clone(),
                task.port_base,
            ))
        });
        let Some((vendor, vendor_session_id, model, task_id, worktree, port_base)) = found else {
            return;
        };
        let Some(driver) = self.driver(vendor) else {
            let exit = byre_projections::sessions::ProcessExited {
                pid: 0,
                code: None,
                signal: None,
                reason: super::VendorError::Unsupported(vendor.as_str()).to_string(),
            };
            self.record(Command::RecordProcessExit {
                session_id: session_id.into(),
                exit,
            })
            .await;
            return;
        };
        let text = payload["text"].as_str().unwrap_or("").to_owned();
        let input_id = payload["input_id"].as_u64().unwrap_or(0);
        let wanted_model = payload["model"].as_str().map(str::to_owned);
        let images = self
            .images(payload["images"].as_array().cloned().unwrap_or_default())
            .await;
        let live = match self.live(session_id) {
            Some(l) => l,
            None => {
                let mut spec = SpawnSpec {
                    session_id: session_id.into(),
                    vendor_session_id,
                    model: wanted_model.clone().unwrap_or(model.clone()),
                    cwd: PathBuf::from(worktree),
                    port_base,
                    resume: false,
                    socket_token: String::new(),
                    socket_port: 0,
                    mcp: self.mcp.launch(session_id),
                };
                spec.resume = driver.has_conversation(&spec);
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
                self.live.insert(session_id.into(), live.clone());
                let Some(rt) = self.me.upgrade() else { return };
                let handle = tokio::spawn(session::run(rt, driver.clone(), spec, task_id, rx));
                *live.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
                live
            }
        };
        let model = wanted_model.filter(|m| {
            let mut current = live.model.lock().unwrap_or_else(|e| e.into_inner());
            let switch = *current != *m;
            current.clone_from(m);
            switch
        });
        let message = Input::Message {
            text,
            images,
            input_id,
            model,
        };
        let _ = live.tx.send(message).await;
    }

    async fn images(&self, ids: Vec<serde_json::Value>) -> Vec<Image> {
        let mut out = Vec::new();
        for id in ids.iter().filter_map(|v| v.as_str()) {
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
    /// and resumed with a note, queued messages after it.
    async fn resume_interrupted(&self) {
        let running: Vec<(String, String)> = self.writer.read(|s| {
            s.sessions
                .values()
                .filter(|x| x.turn_running && !x.completed)
                .filter_map(|x| {
                    s.tasks
                        .get(&x.task_id)
                        .map(|t| (x.id.clone(), t.worktree_path.clone()))
                })
                .collect()
        });
        for (session_id, worktree) in running {
            let head = tokio::task::spawn_blocking(move || {
                crate::git::worktree_head(Path::new(&worktree)).unwrap_or_default()
            })
            .await
            .unwrap_or_default();
            tracing::info!(
                session_id,
                "resuming a session whose turn byre's restart cut short"
            );
            self.record(Command::ResumeAfterRestart { session_id, head })
                .await;
        }
    }

    /// Stops every process and waits for each to be reaped.
    pub async fn stop_all(&self) {
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
                    session::kill_tree(l.pid.load(Ordering::Relaxed) as i32);
                }
            }
        }
    }

    /// `getStatus`'s agent figures: `live_agents`, `agent_processes`, `running_turns`,
    /// `zombies`, `protocol_errors`, `rate_limits`. `rate_limits[vendor]` is the `rate_limit`
    /// of the vendor's latest `rate_limited` inbox item (`{api_error_status, last_retry,
    /// vendor_status?}`), with `vendor_status` replaced by the latest status the vendor
    /// reported since this server started (Codex's `account/rateLimits/updated`), if any.
    pub fn status(&self, stuck_after_seconds: u64) -> serde_json::Value {
        let now = chrono::Utc::now().timestamp_micros();
        let (sessions, rate_limits): (
            Vec<(String, String, Vendor, SessionState, i64, bool)>,
            serde_json::Map<String, serde_json::Value>,
        ) = self.writer.read(|s| {
            let sessions = s
                .sessions
                .values()
                .map(|x| {
                    (
                        x.id.clone(),
                        x.task_id.clone(),
                        x.vendor,
                        x.state,
                        x.created_seq as i64,
                        x.turn_running,
                    )
                })
                .collect();
            let mut limits = serde_json::Map::new();
            for item in s
                .inbox
                .values()
                .filter(|i| i.kind == byre_projections::inbox::InboxKind::RateLimited)
            {
                if let Some(v) = item.payload["vendor"].as_str() {
                    limits.insert(v.to_owned(), item.payload["rate_limit"].clone());
                }
            }
            (sessions, limits)
        });
        let mut rate_limits = rate_limits;
        for entry in self.vendor_rate_limits.iter() {
            let slot = rate_limits
                .entry(entry.key().to_string())
                .or_insert_with(|| serde_json::json!({}));
            if let Some(o) = slot.as_object_mut() {
                o.insert("vendor_status".into(), entry.value().clone());
            }
        }
        let mut processes = Vec::new();
        let mut zombies: Vec<Zombie> = self
            .leftover_zombies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut running = Vec::new();
        let mut sorted = sessions;
        sorted.sort_by_key(|x| x.4);
        for (id, task_id, vendor, state, _, turn_running) in sorted {
            let live = self.live(&id);
            if turn_running {
                running.push(serde_json::json!({"session_id": id, "task_id": task_id, "vendor": vendor.as_str()}));
            }
            match live {
                Some(l) => {
                    let pid = l.pid.load(Ordering::Relaxed);
                    let last = l.last_event_us.load(Ordering::Relaxed);
                    let stuck = turn_running && now - last > stuck_after_seconds as i64 * 1_000_000;
                    let health = if pid != 0 && !group_alive(pid as i32) {
                        "exited"
                    } else if stuck {
                        "stuck"
                    } else {
                        "ok"
                    };
                    processes.push(serde_json::json!({"session_id": id, "task_id": task_id, "vendor": vendor.as_str(), "pid": pid, "state": state, "last_event_at": crate::api::rfc3339(last), "health": health}));
                }
                None if turn_running => zombies.push(Zombie {
                    kind: "running_without_process",
                    detail: "the session's turn is running but no agent process is".into(),
                    session_id: Some(id.clone()),
                    task_id: Some(task_id.clone()),
                    pid: None,
                }),
                None => {}
            }
        }
        let counts: serde_json::Map<String, serde_json::Value> = self
            .protocol_counts
            .iter()
            .map(|e| (e.key().clone(), serde_json::json!(*e.value())))
            .collect();
        let recent: Vec<ProtocolError> = self
            .protocol_recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        serde_json::json!({
            "live_agents": processes.len(),
            "agent_processes": processes,
            "running_turns": running,
            "zombies": zombies,
            "protocol_errors": {"counts": counts, "recent": recent},
            "rate_limits": rate_limits,
        })
    }
}

/// Whether a process (group leader) still exists.
/// Whether a process group still has a live (not zombie) leader: `/proc/<pgid>/stat` exists and
/// its state is not `Z` (a killed orphan may wait as a zombie until init reaps it).
pub(crate) fn group_alive(pgid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pgid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        // No /proc (not Linux): ask the kernel; a zombie then counts as alive.
        // SAFETY: signal 0 only checks for existence.
        Err(_) if !std::path::Path::new("/proc/self").exists() => unsafe {
            libc::kill(-pgid, 0) == 0
        },
        Err(_) => false,
    }
}

/// Kills the agent process groups a previous server left (pid files under `{data}/run/`);
/// returns those that survived SIGKILL, for `getStatus`. Runs before the server serves.
pub async fn clear_leftovers(data_dir: &Path) -> Vec<Zombie> {
    let mut zombies = Vec::new();
    let Ok(entries) = std::fs::read_dir(data_dir.join("run")) else {
        return zombies;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let session_id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut fields = text.split_whitespace();
        let pgid: i32 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let recorded_start: Option<u64> = fields.next().and_then(|s| s.parse().ok());
        let _ = std::fs::remove_file(&path);
        // Commands the agent ran in sessions of their own, orphaned if it died with byre.
        if !session_id.is_empty() {
            session::kill_strays(&session_id);
        }
        if recorded_start.is_none() || start_time(pgid) != recorded_start {
            // Not the process byre started (gone, or its pid reused): leave it alone.
            continue;
        }
        if pgid <= 1 || !group_alive(pgid) {
            continue;
        }
        session::kill_group(pgid);
        let mut gone = false;
        for _ in 0..100 {
            if !group_alive(pgid) {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tracing::warn!(
            pgid,
            session_id,
            gone,
            "killed an agent process group left by a previous server"
        );
        if !gone {
            zombies.push(Zombie {
                kind: "process_without_session",
                detail: format!("process group {pgid} of a previous server survived SIGKILL"),
                session_id: Some(session_id),
                task_id: None,
                pid: Some(pgid as u32),
            });
        }
    }
    zombies
}

/// A process's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), to tell it
/// from a later process that reuses its pid.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}
