//! The `git` binary, the one process byre-git starts: by argv ([`run_git`]), never through a
//! shell, with no terminal to prompt on: stdin null, `GIT_TERMINAL_PROMPT=0`, a session of its
//! own (so ssh cannot ask for a passphrase or a host key), its process group killed after a
//! time limit, always reaped. The merge's push and the agent's pull and push use it.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::GitError;

/// How long a fetch or a merge may take before byre stops it.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a `git` run ended with.
pub struct GitRun {
    /// Its exit status; None when it was stopped at the time limit.
    pub status: Option<ExitStatus>,
    /// Its stdout then stderr, trimmed, at most 2,000 characters.
    pub text: String,
}

/// Runs `git -C <dir> <args…>` by argv with `env` added to byre's environment (so git's own
/// credential helpers and ssh configuration apply): stdin null, `GIT_TERMINAL_PROMPT=0`, in
/// a session of its own without a controlling terminal; its process group is killed after
/// `timeout`; always reaped.
/// # Errors
/// [`GitError::Other`] when `git` cannot be started.
pub fn run_git(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<GitRun, GitError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own session (so also its own process group, which the timeout kills): no
    // controlling terminal, so ssh cannot ask for a passphrase or a host key on byre's
    // terminal and fails instead of waiting for an answer that never comes.
    byre_process::groups::own_session(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| GitError::Other(format!("cannot run git {}: {e}", args[0])))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                // SAFETY: kill(2) on the process group this child leads; no memory involved.
                unsafe {
                    libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                }
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.join().unwrap_or_default()),
        String::from_utf8_lossy(&err.join().unwrap_or_default())
    );
    Ok(GitRun {
        status,
        text: text.trim().chars().take(2000).collect(),
    })
}
