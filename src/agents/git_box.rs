//! The one way byre runs git work that reads a task's worktree (`git::boxed`): a hidden
//! `byre sandboxed-git` process in the task's sandbox, started through the sandbox's one spawn
//! path with the reach of the task's agent (its worktree, of the project's git dir what commits
//! need) and byre's own binary read-only. The job goes in on stdin as JSON, one answer line comes
//! back on stdout, checked as outside input (`git::boxed::Answer::parse`); the process is in a
//! session and process group of its own, killed with its group at its time limit.
//!
//! With the sandbox off nothing confines agents anyway, and the job runs in byre's own process
//! (off the async threads).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::sandbox::{Access, Sandbox};
use byre_git::boxed::{serve, Answer, Job, WorktreeFacts, MAX_ANSWER_BYTES};
use byre_git::GitError;
use byre_process::groups::{kill_group, own_session};

/// The hidden subcommand the boxed process runs.
pub const SUBCOMMAND: &str = "sandboxed-git";

/// How long one job may run before it is killed (a snapshot hashes every changed file).
const TIME_LIMIT: Duration = Duration::from_secs(600);

/// Most bytes of the boxed process's error output kept for the message.
const MAX_STDERR_BYTES: u64 = 16 * 1024;

/// Runs [`Job`]s where they may read what agents write.
#[derive(Debug, Clone)]
pub struct GitBox {
    sandbox: Arc<Sandbox>,
    /// byre's own executable, run as `byre sandboxed-git`.
    byre_bin: PathBuf,
}

impl GitBox {
    /// Jobs run by `byre_bin` in `sandbox` (in this process when the sandbox is off).
    pub fn new(sandbox: Arc<Sandbox>, byre_bin: PathBuf) -> GitBox {
        GitBox { sandbox, byre_bin }
    }

    /// Runs `job` and returns its checked answer.
    /// # Errors
    /// [`GitError::Conflict`] when the job refused for the worktree's state (a message for the
    /// user); [`GitError::Other`] for any other failure: the process could not start, timed
    /// out, or answered nothing valid.
    pub async fn run(&self, job: &Job) -> Result<Answer, GitError> {
        // A worktree that is gone (or something else in its place) is the user's to know, not
        // a sandbox that cannot start.
        if let Err(e) = byre_git::views::Worktree::open(job.worktree()) {
            return Err(GitError::Conflict(e.to_string()));
        }
        if !self.sandbox.is_on() {
            let mine = job.clone();
            let answer = tokio::task::spawn_blocking(move || serve(&mine))
                .await
                .map_err(|e| GitError::Other(e.to_string()))?;
            let line = serde_json::to_vec(&answer).map_err(|e| GitError::Other(e.to_string()))?;
            return Answer::parse(job, &line);
        }
        let worktree = job.worktree().to_owned();
        let access = Access::new(&worktree)
            .worktree(&worktree)
            .refs(&worktree, &job.refs_written())
            .read(&self.byre_bin);
        let mut cmd = self
            .sandbox
            .command(&access, &self.byre_bin, &[SUBCOMMAND.into()]);
        cmd.env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        own_session(cmd.as_std_mut());
        let failed = |why: String| GitError::Other(format!("the sandboxed git process {why}"));
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("cannot start: {e}")))?;
        let pid = child.id();
        let input = serde_json::to_vec(job).map_err(|e| GitError::Other(e.to_string()))?;
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let run = async {
            if let Some(stdin) = stdin.as_mut() {
                // A process that ends without reading its job answers nothing: seen below.
                let _ = stdin.write_all(&input).await;
            }
            drop(stdin);
            let mut out = Vec::new();
            let mut err = Vec::new();
            let read_out = async {
                if let Some(s) = stdout {
                    let _ = s
                        .take(MAX_ANSWER_BYTES as u64 + 1)
                        .read_to_end(&mut out)
                        .await;
                }
            };
            let read_err = async {
                if let Some(s) = stderr {
                    let _ = s.take(MAX_STDERR_BYTES).read_to_end(&mut err).await;
                }
            };
            tokio::join!(read_out, read_err);
            let status = child.wait().await;
            (status, out, err)
        };
        let outcome = tokio::time::timeout(TIME_LIMIT, run).await;
        if let Some(pid) = pid {
            kill_group(pid as i32);
        }
        let (status, stdout, stderr) =
            outcome.map_err(|_| failed(format!("ran longer than {} s", TIME_LIMIT.as_secs())))?;
        let status = status.map_err(|e| failed(format!("could not be waited for: {e}")))?;
        if stdout.is_empty() {
            let why = String::from_utf8_lossy(&stderr);
            let why = why.lines().next().unwrap_or("").trim();
            return Err(failed(format!("answered nothing ({status}): {why}")));
        }
        Answer::parse(job, &stdout)
    }
}

impl GitBox {
    /// The facts of `worktree` a merge, `getUnmerged` and a removal need ([`Job::Facts`]).
    /// # Errors
    /// As [`GitBox::run`].
    pub async fn facts(&self, worktree: &std::path::Path) -> Result<WorktreeFacts, GitError> {
        let job = Job::Facts {
            worktree: worktree.to_owned(),
        };
        self.run(&job)
            .await?
            .into_facts()
            .ok_or_else(|| GitError::Other("the worktree's facts were not answered".into()))
    }
}

/// `byre sandboxed-git`: reads one job (JSON, at most 8 MiB) on stdin, does it, prints its
/// answer as one JSON line. Runs inside the task's sandbox.
/// # Errors
/// stdin unreadable or not a job; stdout unwritable.
pub fn main() -> std::io::Result<i32> {
    use std::io::{Read, Write};
    let mut input = Vec::new();
    std::io::stdin()
        .take(8 * 1024 * 1024)
        .read_to_end(&mut input)?;
    let job: Job = serde_json::from_slice(&input)?;
    let answer = serve(&job);
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(0)
}
