//! byre-terminal: task terminals (`getTaskTerminal`): at most one shell per task, on a pty, shared by every
//! viewer of the task. [`Terminals`] starts a shell when a viewer opens the terminal and none
//! runs, attaches viewers ([`Viewer`]: the scrollback once, then live output), records
//! opens, closes and exits in the log (`terminal.*`, `projections/src/terminals.rs`), kills a
//! task's shell when the task closes and every shell when byre stops, and at start-up kills
//! what a previous server left (after a `kill -9`) and records those shells' end.
//!
//! The bytes are live only. Every viewer may type and resize: the terminal belongs to the
//! task, and whoever may see the task may use it (byre has no per-task permissions).
//!
//! **Invariants:** argv only (the login shell from passwd, `/bin/sh` when none); each shell
//! in a session and process group of its own, marked with [`shell::TERMINAL_ENV`], killed and
//! reaped with its task, at byre's stop, or at the next start; no lock held across `.await`.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use byre_projections::ids::TaskId;
use byre_projections::tasks::TaskStatus;
use byre_projections::terminals::{TerminalChange, TerminalClosed, TerminalExited, TerminalOpened};
use byre_projections::Command;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::watch;

use byre_agents::sandbox::Sandbox;
use byre_log::subscription::subscribe;
use byre_log::{SubmitError, Writer};

pub mod shell;

pub use shell::{Ended, InputRefused, TERMINAL_ENV};

/// A terminal's size in character cells (spec `TerminalSize`); both at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl TerminalSize {
    /// A size from two numbers, each 1 to 65535 (a pty's limit).
    /// # Errors
    /// Which number is out of range, in words.
    pub fn new(cols: u64, rows: u64) -> Result<TerminalSize, String> {
        let check = |what: &str, n: u64| {
            u16::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{what} must be an integer from 1 to 65535, not {n}"))
        };
        Ok(TerminalSize {
            cols: check("cols", cols)?,
            rows: check("rows", rows)?,
        })
    }

    /// A resize message: a JSON `TerminalSize`.
    /// # Errors
    /// Not such an object, or a number out of range.
    pub fn from_json(text: &str) -> Result<TerminalSize, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            cols: u64,
            rows: u64,
        }
        let not_one = |e: &dyn std::fmt::Display| {
            format!("not a TerminalSize ({{\"cols\":…,\"rows\":…}}): {e}")
        };
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| not_one(&e))?;
        if !value.is_object() {
            return Err(not_one(&"not a JSON object"));
        }
        let raw: Raw = serde_json::from_value(value).map_err(|e| not_one(&e))?;
        TerminalSize::new(raw.cols, raw.rows)
    }
}

/// Why opening a terminal failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The log refused the open (unknown or closed task) or is not writing.
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// byre is stopping.
    #[error("byre is stopping")]
    Stopping,
    /// The shell could not start.
    #[error("the shell could not start: {0}")]
    Start(std::io::Error),
}

/// Every task's terminal; one per server.
pub struct Terminals {
    writer: Writer,
    shells: Mutex<HashMap<String, Arc<shell::Shell>>>,
    /// Opens one at a time, so two never both start a shell for a task.
    opening: tokio::sync::Mutex<()>,
    /// Output loops, awaited at shutdown; each sends `true` on its watch when finished.
    runs: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    finished: Mutex<HashMap<String, watch::Receiver<bool>>>,
    stopping: AtomicBool,
    /// The server's main runtime: shells are started and their output loops run there, not on
    /// the HTTP worker that opened the terminal (a worker's runtime ends with the HTTP server,
    /// before shells are killed; and a sandboxed shell ends with the thread that started it,
    /// `--die-with-parent`).
    runtime: tokio::runtime::Handle,
    /// The sandbox shells run in.
    sandbox: Arc<Sandbox>,
    /// byre's data dir: shells' own homes are under it ([`home_dir`]).
    data_dir: PathBuf,
}

/// A task's shell's own `HOME` (with the sandbox on): `{data}/terminals/{task_id}/home`, kept
/// while the task is active (history and dotfiles survive a new shell), removed when it closes.
pub fn home_dir(data_dir: &std::path::Path, task_id: &str) -> PathBuf {
    data_dir.join("terminals").join(task_id).join("home")
}

/// One viewer's attachment to a task's terminal.
pub struct Viewer {
    /// The viewer's socket id (`terminal.opened`).
    pub id: String,
    /// The viewer's login.
    pub login: String,
    /// The shell's pid.
    pub shell_pid: u32,
    /// Output chunks: the scrollback first (one chunk, when there is any), then live output.
    /// Ends when the shell ended ([`Viewer::ended`]) or the viewer lagged.
    pub output: tokio::sync::mpsc::Receiver<Bytes>,
    ended: watch::Receiver<Option<Ended>>,
    shell: Arc<shell::Shell>,
    terminals: Arc<Terminals>,
}

impl Viewer {
    /// How the shell ended, once it has; `None` while it runs (a viewer whose output ended
    /// while the shell runs was dropped for lagging).
    pub fn ended(&self) -> Option<Ended> {
        self.ended.borrow().clone()
    }

    /// Queues input for the shell's pty, never waiting for it (see [`shell::INPUT_QUEUE`]).
    /// # Errors
    /// The program on the terminal reads nothing and the queue is full (the input is
    /// dropped), or the shell is ending.
    pub fn input(&self, bytes: Bytes) -> Result<(), InputRefused> {
        self.shell.input(bytes)
    }

    /// Resizes the terminal to a `TerminalSize` message; an invalid one is ignored and
    /// logged (the socket stays open).
    pub fn resize(&self, text: &str) {
        match TerminalSize::from_json(text) {
            Ok(size) => {
                if let Err(e) = self.shell.resize(size.cols, size.rows) {
                    tracing::debug!(error = %e, "resize of an ending terminal");
                }
            }
            Err(why) => tracing::warn!(
                task_id = %self.shell.task_id,
                viewer_id = %self.id,
                size = text.len(),
                %why,
                "ignored a terminal resize message"
            ),
        }
    }

    /// The viewer left (`reason`: `client`, `unresponsive`, `lagging`): detaches it and,
    /// while the shell runs, records `terminal.closed`.
    pub async fn leave(self, reason: &str) {
        self.shell.detach(&self.id);
        if self.shell.has_ended() {
            return;
        }
        let change = TerminalChange::Closed(TerminalClosed {
            viewer_id: self.id.clone(),
            login: self.login.clone().into(),
            reason: reason.into(),
        });
        if let Err(e) = self
            .terminals
            .record(&self.login, &self.shell.task_id, change)
            .await
        {
            tracing::warn!(error = %e, "could not record a terminal viewer's close");
        }
    }
}

impl Terminals {
    /// Kills what terminals of a previous server left (every process marked with a task of
    /// the log), records the end of the shells the log says still run (`server_restarted`),
    /// and starts following task closes; the returned task ends (after killing every shell
    /// and recording their ends) when `shutdown` turns true.
    pub async fn start(
        writer: Writer,
        mut shutdown: watch::Receiver<bool>,
        sandbox: Arc<Sandbox>,
        data_dir: PathBuf,
    ) -> (Arc<Terminals>, tokio::task::JoinHandle<()>) {
        let (tasks, running) = writer.read(|s| {
            let tasks: std::collections::HashSet<TaskId> = s.tasks.keys().cloned().collect();
            let running: Vec<(TaskId, u32)> = s
                .terminals
                .iter()
                .map(|(t, term)| (t.clone(), term.shell_pid))
                .collect();
            (tasks, running)
        });
        let tasks = Arc::new(tasks);
        for _ in 0..100 {
            let of = tasks.clone();
            let n_left = tokio::task::spawn_blocking(move || {
                byre_process::groups::kill_marked_by(TERMINAL_ENV, |v| {
                    v.split('/').next().is_some_and(|t| of.contains(t))
                })
            })
            .await
            .unwrap_or(0);
            if n_left == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let terminals = Arc::new(Terminals {
            writer: writer.clone(),
            shells: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
            runs: Mutex::new(Vec::new()),
            finished: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            runtime: tokio::runtime::Handle::current(),
            sandbox,
            data_dir,
        });
        for (task_id, shell_pid) in running {
            let change = TerminalChange::Exited(TerminalExited {
                shell_pid,
                status: None,
                cause: "server_restarted".into(),
            });
            if let Err(e) = terminals.record("byre", &task_id, change).await {
                tracing::warn!(%task_id, error = %e, "could not record a left terminal's end");
            }
        }
        let me = terminals.clone();
        let task = tokio::spawn(async move {
            let from = writer.head();
            let mut events = Box::pin(subscribe(writer.clone(), from));
            loop {
                let next = tokio::select! {
                    next = events.next() => next,
                    _ = shutdown.wait_for(|s| *s) => None,
                };
                match next {
                    Some(Ok(r)) if r.kind == "task.state" => {
                        let Some(task_id) = r.task_id.as_deref() else {
                            continue;
                        };
                        let active = writer.read(|s| {
                            s.tasks
                                .get(task_id)
                                .is_some_and(|t| t.status == TaskStatus::Active)
                        });
                        if !active {
                            me.kill(task_id, "task_closed").await;
                            // The shell's home is its to write: removed by handle.
                            let terminals = me.data_dir.join("terminals");
                            let task = std::path::PathBuf::from(task_id);
                            let _ = tokio::task::spawn_blocking(move || {
                                byre_beneath::Dir::open(&terminals)?.remove_dir_all(&task)
                            })
                            .await;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "terminals cannot follow the log");
                        break;
                    }
                    None => break,
                }
            }
            me.stop().await;
        });
        (terminals, task)
    }

    async fn record(
        &self,
        actor: &str,
        task_id: &str,
        change: TerminalChange,
    ) -> Result<(), SubmitError> {
        self.writer
            .submit(
                Command::RecordTerminal {
                    actor: actor.into(),
                    task_id: task_id.into(),
                    change,
                },
                None,
            )
            .await
            .map(|_| ())
    }

    /// The running shell of a task, if any.
    pub fn shell_pid(&self, task_id: &str) -> Option<u32> {
        let shells = self.shells.lock().unwrap_or_else(|e| e.into_inner());
        shells
            .get(task_id)
            .filter(|s| !s.has_ended())
            .map(|s| s.pid)
    }

    /// Attaches `login` to task `task_id`'s terminal, starting its shell in `worktree` at
    /// `size` with `PORT` = `port` when none runs (waiting for an ending one to finish first),
    /// and records `terminal.opened`.
    /// # Errors
    /// [`OpenError::Submit`] when the log refuses the open (unknown or closed task: the
    /// shell just started is killed); [`OpenError::Start`]; [`OpenError::Stopping`].
    pub async fn open(
        self: &Arc<Self>,
        login: &str,
        task_id: &str,
        worktree: PathBuf,
        port: u32,
        size: TerminalSize,
    ) -> Result<Viewer, OpenError> {
        let _opening = self.opening.lock().await;
        let viewer_id = uuid::Uuid::new_v4().to_string();
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return Err(OpenError::Stopping);
            }
            let existing = self
                .shells
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(task_id)
                .cloned();
            let Some(shell) = existing else { break };
            if let Some(attached) = shell.attach(&viewer_id) {
                let (cols, rows) = shell.size();
                let change = TerminalChange::Opened(TerminalOpened {
                    viewer_id: viewer_id.clone(),
                    login: login.into(),
                    shell_pid: shell.pid,
                    started: false,
                    shell: String::new(),
                    cols,
                    rows,
                });
                if let Err(e) = self.record(login, task_id, change).await {
                    shell.detach(&viewer_id);
                    return Err(e.into());
                }
                return Ok(self.viewer(viewer_id, login, shell, attached));
            }
            // Ending: wait until its end is recorded, then start a new one.
            let finished = self
                .finished
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(task_id)
                .cloned();
            match finished {
                Some(mut f) => {
                    let _ = f.wait_for(|done| *done).await;
                }
                None => tokio::task::yield_now().await,
            }
        }
        let marker = format!("{task_id}/{viewer_id}");
        let (sandbox, home, task) = (
            self.sandbox.clone(),
            home_dir(&self.data_dir, task_id),
            task_id.to_owned(),
        );
        let place = async move {
            let place = shell::Place {
                worktree: &worktree,
                home: &home,
                sandbox: &sandbox,
            };
            shell::start(&task, marker, place, port, (size.cols, size.rows))
        };
        let started = self
            .runtime
            .spawn(place)
            .await
            .map_err(|e| OpenError::Start(std::io::Error::other(e)))?
            .map_err(OpenError::Start)?;
        let shell = started.shell.clone();
        let change = TerminalChange::Opened(TerminalOpened {
            viewer_id: viewer_id.clone(),
            login: login.into(),
            shell_pid: shell.pid,
            started: true,
            shell: shell.program.clone(),
            cols: size.cols,
            rows: size.rows,
        });
        let attached = shell.attach(&viewer_id);
        if let Err(e) = self.record(login, task_id, change).await {
            shell.kill("task_closed");
            // Reap it; nothing is recorded for a shell the log never held.
            let (_, _, ended) = self
                .runtime
                .spawn(started.run())
                .await
                .map_err(|e| OpenError::Start(std::io::Error::other(e)))?;
            shell.finish(ended);
            return Err(e.into());
        }
        let Some(attached) = attached else {
            return Err(OpenError::Stopping);
        };
        tracing::info!(%task_id, pid = shell.pid, program = %shell.program, "terminal shell started");
        let (done_tx, done_rx) = watch::channel(false);
        self.shells
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(task_id.to_owned(), shell.clone());
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(task_id.to_owned(), done_rx);
        let me = self.clone();
        let task = task_id.to_owned();
        let handle = self.runtime.spawn(async move {
            let pid = started.shell.pid;
            let this = started.shell.clone();
            let (status, cause, ended) = started.run().await;
            tracing::info!(task_id = %task, pid, ?status, cause, "terminal shell ended");
            let change = TerminalChange::Exited(TerminalExited {
                shell_pid: pid,
                status,
                cause: cause.into(),
            });
            if let Err(e) = me.record("byre", &task, change).await {
                tracing::warn!(error = %e, "could not record a terminal's end");
            }
            // Recorded first: a viewer told of the end finds it in the log.
            this.finish(ended);
            {
                let mut shells = me.shells.lock().unwrap_or_else(|e| e.into_inner());
                if shells.get(&task).is_some_and(|s| Arc::ptr_eq(s, &this)) {
                    shells.remove(&task);
                }
            }
            let _ = done_tx.send(true);
        });
        {
            let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
            runs.retain(|h| !h.is_finished());
            runs.push(handle);
        }
        Ok(self.viewer(viewer_id, login, shell, attached))
    }

    fn viewer(
        self: &Arc<Self>,
        id: String,
        login: &str,
        shell: Arc<shell::Shell>,
        attached: shell::Attached,
    ) -> Viewer {
        Viewer {
            id,
            login: login.into(),
            shell_pid: shell.pid,
            output: attached.output,
            ended: attached.ended,
            shell,
            terminals: self.clone(),
        }
    }

    /// Kills task `task_id`'s shell, if one runs (`cause` as `terminal.exited` records it),
    /// and waits until its end is recorded.
    pub async fn kill(&self, task_id: &str, cause: &'static str) {
        let shell = self
            .shells
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(task_id)
            .cloned();
        let Some(shell) = shell else { return };
        shell.kill(cause);
        let finished = self
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(task_id)
            .cloned();
        if let Some(mut f) = finished {
            let _ = f.wait_for(|done| *done).await;
        }
    }

    /// Refuses new opens, kills every shell (`server_stopping`) and waits until each end is
    /// recorded.
    async fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let shells: Vec<Arc<shell::Shell>> = self
            .shells
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for s in &shells {
            s.kill("server_stopping");
        }
        let runs: Vec<_> =
            std::mem::take(&mut *self.runs.lock().unwrap_or_else(|e| e.into_inner()));
        for r in runs {
            let _ = r.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TerminalSize;

    #[test]
    fn a_resize_message_is_a_terminal_size_in_range() {
        assert_eq!(
            TerminalSize::from_json(r#"{"cols":100,"rows":30}"#),
            Ok(TerminalSize {
                cols: 100,
                rows: 30
            })
        );
        for bad in [
            "",
            "hello",
            "[1,2]",
            r#"{"cols":0,"rows":30}"#,
            r#"{"cols":100}"#,
            r#"{"cols":-1,"rows":30}"#,
            r#"{"cols":70000,"rows":30}"#,
            r#"{"cols":1.5,"rows":30}"#,
            r#"{"cols":"80","rows":30}"#,
            r#"{"cols":80,"rows":30,"x":1}"#,
        ] {
            assert!(TerminalSize::from_json(bad).is_err(), "{bad:?} is refused");
        }
    }
}
