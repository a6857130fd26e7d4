//! The one runner of a time-limited command: CodeBolt agents' terminal commands (`sh -c` in
//! their sandbox, byre-agents) and `byre client`'s `bash` (byre-client) both go through it.
//!
//! A command runs in a process group of its own ([`Limits::new_session`]: also a session of
//! its own, with no controlling terminal). Its exit, or its time limit, ends it: the whole
//! group is killed then, so a background child that still holds the output pipes neither
//! delays the answer nor outlives the command. The pipes are still read for a short while
//! ([`Limits::drain`]) for output the group left in them; a child that left the group (a
//! session of its own) and holds a pipe is given up on then, with what came so far kept.
//! Output is bounded in bytes ([`Limits::max_output_bytes`], [`Keep`]); past the bound it is
//! read and dropped, so a command printing without end cannot fill memory.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt};

use crate::groups::{kill_group, own_session};

/// How a command runs and what of its output is kept.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The command (with its group) is killed this long after it started.
    pub timeout: Duration,
    /// How long the pipes are still read after the command ended, for output its children left.
    pub drain: Duration,
    /// Most bytes kept of each stream (of the one stream, when merged); the rest is read and
    /// dropped. For [`stream`], unused: the caller bounds what it sends.
    pub max_output_bytes: usize,
    /// Which bytes are kept past [`Limits::max_output_bytes`].
    pub keep: Keep,
    /// stderr into stdout's pipe, in the order written ([`Finished::stderr`] stays empty).
    pub merge_stderr: bool,
    /// A session of its own (no controlling terminal), not only a process group of its own.
    pub new_session: bool,
}

/// Which bytes of a long output are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The first bytes.
    First,
    /// The last bytes.
    Last,
}

/// How a command ended.
#[derive(Debug)]
pub enum Exit {
    /// It exited (a code or a signal).
    Status(ExitStatus),
    /// Its time limit came first; it was killed.
    TimedOut,
    /// Waiting for it failed.
    WaitFailed(io::Error),
}

impl Exit {
    /// The exit code, or `128 + signal` for a command ended by a signal; `None` when it timed
    /// out or could not be waited for.
    pub fn code_or_signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Exit::Status(s) => s.code().or(s.signal().map(|n| 128 + n)),
            _ => None,
        }
    }
}

/// A command's end and what it printed.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// Its stdout (with stderr, when merged), as [`Limits`] kept it.
    pub stdout: Vec<u8>,
    /// Its stderr, as [`Limits`] kept it; empty when merged.
    pub stderr: Vec<u8>,
}

/// One line a streamed command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line of stdout, without its newline.
    Stdout(String),
    /// A line of stderr, without its newline.
    Stderr(String),
}

/// Kills a process group when dropped: a command whose run was dropped midway (its request
/// went with its connection) leaves nothing behind.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            kill_group(pgid);
        }
    }
}

/// Puts `cmd` in a group (or session) of its own, with stdin from `/dev/null`.
fn detach(cmd: &mut std::process::Command, limits: &Limits) {
    use std::os::unix::process::CommandExt;
    if limits.new_session {
        own_session(cmd);
    } else {
        cmd.process_group(0);
    }
    cmd.stdin(Stdio::null());
}

/// Runs `cmd` to its end (module docs); `started` gets its pid (= its process group) once it
/// runs, for a caller that may kill it early (an interrupt). Environment, working directory
/// and argv are the caller's; stdin, stdout, stderr and the group are set here.
/// # Errors
/// The command could not be started (or its pipes made).
pub async fn run(
    mut cmd: std::process::Command,
    limits: &Limits,
    started: impl FnOnce(i32),
) -> io::Result<Finished> {
    detach(&mut cmd, limits);
    let (out_read, out_write) = io::pipe()?;
    let err_read = if limits.merge_stderr {
        cmd.stdout(out_write.try_clone()?).stderr(out_write);
        None
    } else {
        let (err_read, err_write) = io::pipe()?;
        cmd.stdout(out_write).stderr(err_write);
        Some(err_read)
    };
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let spawned = cmd.spawn();
    // The parent's copies of the pipes' write ends go with the command, so EOF comes when the
    // group is done with them.
    drop(cmd);
    let mut child = spawned?;
    let group = Group(child.id().map(|pid| pid as i32));
    if let Some(pgid) = group.0 {
        started(pgid);
    }
    let stdout = Kept::new(limits);
    let stderr = Kept::new(limits);
    let mut readers = vec![tokio::spawn(read_into(receiver(out_read)?, stdout.clone()))];
    if let Some(err_read) = err_read {
        readers.push(tokio::spawn(read_into(receiver(err_read)?, stderr.clone())));
    }
    let exit = match tokio::time::timeout(limits.timeout, child.wait()).await {
        Ok(Ok(status)) => Exit::Status(status),
        Ok(Err(e)) => Exit::WaitFailed(e),
        Err(_) => Exit::TimedOut,
    };
    drop(group);
    if matches!(exit, Exit::TimedOut) {
        let _ = child.kill().await;
    }
    for reader in readers {
        let abort = reader.abort_handle();
        let _ = tokio::time::timeout(limits.drain, reader).await;
        abort.abort();
    }
    Ok(Finished {
        exit,
        stdout: stdout.take(),
        stderr: stderr.take(),
    })
}

/// Runs `cmd`, handing each line of its stdout and stderr to `line` as it comes, and returns
/// how it ended. The shell's exit ends the command: its group is killed and what is left in
/// the pipes is still read for [`Limits::drain`]; pipes that close before the exit leave it
/// the rest of the time limit. `started` as for [`run`].
/// # Errors
/// The command could not be started.
pub async fn stream(
    mut cmd: std::process::Command,
    limits: &Limits,
    started: impl FnOnce(i32),
    mut line: impl FnMut(Line),
) -> io::Result<Exit> {
    detach(&mut cmd, limits);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let group = Group(child.id().map(|pid| pid as i32));
    if let Some(pgid) = group.0 {
        started(pgid);
    }
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("the command's pipes were not made"));
    };
    let mut out = tokio::io::BufReader::new(stdout).lines();
    let mut errs = tokio::io::BufReader::new(stderr).lines();
    let (mut out_open, mut err_open) = (true, true);
    let deadline = tokio::time::sleep(limits.timeout);
    tokio::pin!(deadline);
    let mut exit = None;
    let mut timed_out = false;
    while out_open || err_open {
        tokio::select! {
            status = child.wait(), if exit.is_none() => {
                exit = Some(match status {
                    Ok(s) => Exit::Status(s),
                    Err(e) => Exit::WaitFailed(e),
                });
                if let Some(pgid) = group.0 {
                    kill_group(pgid);
                }
                deadline.as_mut().reset(tokio::time::Instant::now() + limits.drain);
            }
            l = out.next_line(), if out_open => match l {
                Ok(Some(l)) => line(Line::Stdout(l)),
                _ => out_open = false,
            },
            l = errs.next_line(), if err_open => match l {
                Ok(Some(l)) => line(Line::Stderr(l)),
                _ => err_open = false,
            },
            _ = &mut deadline => {
                timed_out = exit.is_none();
                break;
            }
        }
    }
    let exit = match exit {
        Some(exit) => exit,
        // The pipes closed first: the command is ending; its exit comes within the time left.
        None if !timed_out => {
            match tokio::time::timeout_at(deadline.deadline(), child.wait()).await {
                Ok(Ok(s)) => Exit::Status(s),
                Ok(Err(e)) => Exit::WaitFailed(e),
                Err(_) => Exit::TimedOut,
            }
        }
        None => Exit::TimedOut,
    };
    drop(group);
    if matches!(exit, Exit::TimedOut) {
        let _ = child.kill().await;
    }
    Ok(exit)
}

/// A pipe's read end as tokio reads it.
fn receiver(pipe: io::PipeReader) -> io::Result<tokio::net::unix::pipe::Receiver> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(pipe.into())
}

/// Reads `pipe` to its end into `kept`.
async fn read_into(mut pipe: impl AsyncRead + Unpin, kept: Kept) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => kept.push(&buf[..n]),
        }
    }
}

/// The bytes of one stream kept so far, shared with its reader (so what came before a reader
/// was given up on is kept).
#[derive(Clone)]
struct Kept {
    bytes: Arc<Mutex<std::collections::VecDeque<u8>>>,
    max: usize,
    keep: Keep,
}

impl Kept {
    fn new(limits: &Limits) -> Kept {
        Kept {
            bytes: Arc::default(),
            max: limits.max_output_bytes,
            keep: limits.keep,
        }
    }

    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        match self.keep {
            Keep::First => {
                let room = self.max.saturating_sub(bytes.len());
                bytes.extend(&chunk[..chunk.len().min(room)]);
            }
            Keep::Last => {
                bytes.extend(chunk);
                let extra = bytes.len().saturating_sub(self.max);
                bytes.drain(..extra);
            }
        }
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(|e| e.into_inner())).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(keep: Keep, merge_stderr: bool) -> Limits {
        Limits {
            timeout: Duration::from_secs(10),
            drain: Duration::from_secs(2),
            max_output_bytes: 8,
            keep,
            merge_stderr,
            new_session: true,
        }
    }

    fn sh(script: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[tokio::test]
    async fn run_keeps_the_first_or_last_bytes_of_each_stream_and_the_exit_code() {
        let script = "printf 0123456789; printf abcdefghij >&2; exit 3";
        let first = run(sh(script), &limits(Keep::First, false), |_| {})
            .await
            .unwrap();
        assert_eq!(first.exit.code_or_signal(), Some(3));
        assert_eq!(first.stdout, b"01234567");
        assert_eq!(first.stderr, b"abcdefgh");
        let last = run(sh(script), &limits(Keep::Last, true), |_| {})
            .await
            .unwrap();
        assert_eq!(last.stdout, b"cdefghij");
        assert!(last.stderr.is_empty());
    }

    #[tokio::test]
    async fn run_kills_the_group_at_the_time_limit_and_after_the_exit() {
        let mut l = limits(Keep::First, false);
        l.timeout = Duration::from_millis(300);
        let timed_out = run(sh("sleep 30"), &l, |_| {}).await.unwrap();
        assert!(matches!(timed_out.exit, Exit::TimedOut));
        // A background child holding the pipe is killed with the group when the shell exits.
        let started = std::time::Instant::now();
        let done = run(
            sh("sleep 30 & echo done"),
            &limits(Keep::First, false),
            |_| {},
        )
        .await
        .unwrap();
        assert_eq!(done.stdout, b"done\n");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_stream_whose_pipes_close_before_its_exit_still_gets_its_exit_code() {
        let mut n_lines = 0;
        let exit = stream(
            sh("exec >&- 2>&-; sleep 0.2; exit 0"),
            &limits(Keep::First, false),
            |_| {},
            |_| n_lines += 1,
        )
        .await
        .unwrap();
        assert_eq!(exit.code_or_signal(), Some(0), "{exit:?}");
        assert_eq!(n_lines, 0);
        let mut l = limits(Keep::First, false);
        l.timeout = Duration::from_millis(300);
        let exit = stream(sh("exec >&- 2>&-; sleep 30"), &l, |_| {}, |_| {})
            .await
            .unwrap();
        assert!(matches!(exit, Exit::TimedOut), "{exit:?}");
    }

    #[tokio::test]
    async fn stream_hands_over_lines_of_both_streams_then_the_exit() {
        let mut lines = Vec::new();
        let exit = stream(
            sh("echo out; echo err >&2; exit 2"),
            &limits(Keep::First, false),
            |_| {},
            |l| lines.push(l),
        )
        .await
        .unwrap();
        assert_eq!(exit.code_or_signal(), Some(2));
        lines.sort_by_key(|l| matches!(l, Line::Stderr(_)));
        assert_eq!(
            lines,
            [Line::Stdout("out".into()), Line::Stderr("err".into())]
        );
    }
}
