//! A CodeBolt agent's terminal commands (`executeCommand…`): the command line through `sh -c`
//! in the agent's sandbox (its task's worktree and project's git directory, its session's
//! `HOME`, a private `/tmp`, the system read-only; [`crate::sandbox`]), working in the worktree,
//! with a minimal environment, through the shared runner (`byre_process::runner`: a session and
//! process group of its own, killed at its exit or after [`COMMAND_TIMEOUT_S`]). While a
//! command runs its group is the link's, so an interrupt kills it ([`Link::kill_terminals`]).

use std::path::Path;

use byre_process::runner::{self, Exit, Keep, Limits, Line};

use super::hub::Link;
use crate::sandbox::Access;

/// Longest terminal command run, in seconds; it is killed after.
pub const COMMAND_TIMEOUT_S: u64 = 600;
/// How long a finished command's pipes are still read, for output its children left.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);
/// Most output kept of each stream of a command run to its end, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// How a command ended, as the agent is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Its exit code; `None` when a signal ended it, it timed out or could not be run.
    pub code: Option<i32>,
    /// Its stdout (at most [`MAX_OUTPUT_BYTES`]).
    pub stdout: String,
    /// Its stderr (at most [`MAX_OUTPUT_BYTES`]), with why it failed when it did.
    pub stderr: String,
}

impl Link {
    /// `sh -c command` as the module docs say.
    fn shell(&self, command: &str) -> std::process::Command {
        if let Err(e) = byre_beneath::Dir::make(&self.home) {
            tracing::warn!(error = %e, "cannot make the session's HOME");
        }
        let access = Access::new(&self.worktree)
            .worktree(&self.worktree)
            .write(&self.home);
        let args = ["-c".into(), command.into()];
        let (program, args) = self.sandbox.argv(&access, Path::new("/bin/sh"), &args);
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .current_dir(&self.worktree)
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            // Marks the command as the session's, so a byre restarted after a crash finds and
            // ends what the dead one left running (`clear_leftovers`, `kill_marked`).
            .env(byre_process::groups::SESSION_ENV, &self.session_id);
        cmd
    }

    fn track(&self, pgid: i32, add: bool) {
        let mut t = self.terminals.lock().unwrap_or_else(|e| e.into_inner());
        if add {
            t.push(pgid);
        } else {
            t.retain(|p| *p != pgid);
        }
    }

    /// Runs `command` to its end (module docs).
    pub async fn run_command(&self, command: &str) -> Ran {
        let limits = limits(MAX_OUTPUT_BYTES);
        let mut group = None;
        let finished = runner::run(self.shell(command), &limits, |pgid| {
            self.track(pgid, true);
            group = Some(pgid);
        })
        .await;
        if let Some(pgid) = group {
            self.track(pgid, false);
        }
        let finished = match finished {
            Ok(f) => f,
            Err(e) => {
                return Ran {
                    code: None,
                    stdout: String::new(),
                    stderr: format!("cannot run the command: {e}"),
                }
            }
        };
        let stdout = String::from_utf8_lossy(&finished.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&finished.stderr).into_owned();
        let (code, stderr) = match finished.exit {
            Exit::Status(s) => (s.code(), stderr),
            Exit::WaitFailed(e) => (None, format!("{stderr}{e}")),
            Exit::TimedOut => (None, format!("{stderr}killed after {COMMAND_TIMEOUT_S} s")),
        };
        Ran {
            code,
            stdout,
            stderr,
        }
    }

    /// Runs `command`, handing each line of its stdout and stderr to `line` as it comes;
    /// returns its exit code (−1 for a signal or the time limit). The caller bounds what it
    /// sends on.
    /// # Errors
    /// The command could not be started.
    pub async fn stream_command(
        &self,
        command: &str,
        line: impl FnMut(Line),
    ) -> std::io::Result<i32> {
        let mut group = None;
        let exit = runner::stream(
            self.shell(command),
            &limits(0),
            |pgid| {
                self.track(pgid, true);
                group = Some(pgid);
            },
            line,
        )
        .await;
        if let Some(pgid) = group {
            self.track(pgid, false);
        }
        Ok(match exit? {
            Exit::Status(s) => s.code().unwrap_or(-1),
            _ => -1,
        })
    }
}

/// The runner's limits for an agent's command keeping `max_output_bytes` of each stream.
fn limits(max_output_bytes: usize) -> Limits {
    Limits {
        timeout: std::time::Duration::from_secs(COMMAND_TIMEOUT_S),
        drain: DRAIN,
        max_output_bytes,
        keep: Keep::First,
        merge_stderr: false,
        new_session: true,
    }
}
