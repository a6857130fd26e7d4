//! One task's shell on a pty: how it is started (argv, environment, its own session and so
//! process group), its bounded scrollback, its viewers' queues, and the loop that reads its
//! output until it ends.

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use byre_agents::sandbox::{Access, Sandbox};
use byre_process::groups::{kill_group, kill_marked_by};

/// The environment variable every shell gets (and so every process it starts):
/// `<task id>/<shell id>`. It finds what a shell left behind, at its end and, after a
/// `kill -9` of byre, at the next start (`super::Terminals::start`).
pub const TERMINAL_ENV: &str = "BYRE_TERMINAL";

/// How much of what a terminal printed is kept for viewers that attach later, in bytes.
pub const SCROLLBACK_BYTES: usize = 256 * 1024;

/// Chunks of output a viewer may have waiting before it counts as lagging and is dropped.
pub const VIEWER_QUEUE: usize = 1024;

/// Input messages that may wait for the pty while the program on the terminal does not read
/// them (a stuck program, or one in raw mode that reads nothing); beyond, input is refused
/// ([`InputRefused::NotReading`]) rather than stall the viewers' sockets.
pub const INPUT_QUEUE: usize = 64;

/// How long the output of an ended shell is still read (what its last commands printed)
/// before its viewers are closed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// The shell program and home directory of the user byre runs as (passwd), with `/bin/sh`
/// when passwd names no executable shell.
pub fn login_shell() -> (PathBuf, Option<PathBuf>, String) {
    let (shell, home, name) = passwd().unwrap_or_default();
    let shell = Some(PathBuf::from(shell))
        .filter(|p| p.is_absolute() && p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"));
    let home = Some(PathBuf::from(home)).filter(|p| p.is_absolute());
    (shell, home, name)
}

/// (shell, home, login name) of the current uid's passwd entry.
fn passwd() -> Option<(String, String, String)> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r fills it and points its
    // strings into `buf`, which outlives every read below.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe { libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    let text = |p: *const libc::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: getpwuid_r gave a NUL-terminated string inside `buf`.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    Some((
        text(entry.pw_shell),
        text(entry.pw_dir),
        text(entry.pw_name),
    ))
}

/// How a shell ended, as its viewers' sockets are closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The WebSocket close code: 4000 when the shell ended, 1001 when byre stops.
    pub code: u16,
    /// The close reason: the exit status (`3`), or why.
    pub reason: String,
}

/// A running shell and everything attached to it.
pub struct Shell {
    /// Its task.
    pub task_id: String,
    /// Its pid: also its session and process group.
    pub pid: u32,
    /// The value of [`TERMINAL_ENV`] it and its children carry.
    pub marker: String,
    /// The program started.
    pub program: String,
    /// Input for the pty, written by the output loop ([`Started::run`]) as the pty takes it.
    input: mpsc::Sender<Bytes>,
    /// A second descriptor of the pty's master, for resizes: they never wait behind input
    /// the pty does not take.
    control: OwnedFd,
    inner: Mutex<Inner>,
    ended: watch::Sender<Option<Ended>>,
    /// Why byre killed it, if it did (`task_closed`, `server_stopping`).
    kill_cause: Mutex<Option<&'static str>>,
}

struct Inner {
    /// The last [`SCROLLBACK_BYTES`] it printed.
    scrollback: VecDeque<u8>,
    /// Viewers' queues by viewer id.
    viewers: HashMap<String, mpsc::Sender<Bytes>>,
    /// The pty's size (cols, rows).
    size: (u16, u16),
}

/// What a started shell hands its runner: the pty's halves, the input queue and the child.
pub struct Started {
    /// The shell.
    pub shell: Arc<Shell>,
    reader: pty_process::OwnedReadPty,
    writer: pty_process::OwnedWritePty,
    input: mpsc::Receiver<Bytes>,
    child: tokio::process::Child,
}

/// Why input was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InputRefused {
    /// [`INPUT_QUEUE`] messages already wait for a program that does not read them.
    #[error("the terminal's program is not reading its input; dropped")]
    NotReading,
    /// The shell has ended.
    #[error("the shell has ended")]
    Ended,
}

/// What a viewer gets on attaching: its queue (the scrollback first, then live output) and
/// the shell's end.
pub struct Attached {
    /// Output chunks; ends when the shell ended or the viewer lagged.
    pub output: mpsc::Receiver<Bytes>,
    /// The shell's end, once known.
    pub ended: watch::Receiver<Option<Ended>>,
}

/// Where a task's shell starts and what it may reach.
pub struct Place<'a> {
    /// The task's worktree: the shell's working directory.
    pub worktree: &'a Path,
    /// The shell's own `HOME` (with the sandbox on; off, the user's from passwd).
    pub home: &'a Path,
    /// The sandbox it runs in.
    pub sandbox: &'a Sandbox,
}

/// Starts `program` as a login shell on a new pty of `cols`×`rows` in the task's worktree, in
/// a session (so process group) of its own, with a cleared environment: `HOME`, `USER`,
/// `LOGNAME`, `SHELL`, `PATH` and `LANG` (from byre's), `TERM=xterm-256color`, `PORT` and
/// [`TERMINAL_ENV`].
///
/// With the sandbox on, the shell runs in it (`docs/sandbox.md`): the worktree and its
/// project's git directory read-write, `place.home` as its `HOME`, a private `/tmp`, the
/// system read-only, its own pid namespace; a login shell by `-l` (`bwrap` starts the
/// program, so `argv[0]` cannot say `-name`). `pty-process` makes `bwrap` the leader of a new
/// session whose controlling terminal is the pty, and the shell inherits both, so job control
/// works; `bwrap`'s `--new-session` is not used, as it would take the terminal away (and
/// what it guards against, `TIOCSTI` into a terminal shared with a process outside, cannot
/// happen: only byre holds the pty's other side, and it reads output, not input). Off, it runs
/// as byre's user sees the machine, `HOME` from passwd, `argv[0]` `-name`.
/// # Errors
/// The pty cannot be opened or the program cannot start.
pub fn start(
    task_id: &str,
    marker: String,
    place: Place<'_>,
    port: u32,
    (cols, rows): (u16, u16),
) -> std::io::Result<Started> {
    let cwd = place.worktree;
    let (program, passwd_home, user) = login_shell();
    let (pty, pts) = pty_process::open().map_err(std::io::Error::other)?;
    pty.resize(pty_process::Size::new(rows, cols))
        .map_err(std::io::Error::other)?;
    // Close-on-exec, like the pty itself: the shell gets only the pts.
    let control = pty.as_fd().try_clone_to_owned()?;
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sh".into());
    let home = if place.sandbox.is_on() {
        byre_beneath::Dir::make(place.home)?;
        place.home.to_owned()
    } else {
        passwd_home.unwrap_or_else(|| cwd.to_owned())
    };
    let user = if user.is_empty() {
        std::env::var("USER").unwrap_or_default()
    } else {
        user
    };
    let path = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin".into());
    let lang = std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into());
    let cmd = if place.sandbox.is_on() {
        let mut access = Access::new(cwd).worktree(cwd).write(&home);
        let path_var = std::env::var_os("PATH");
        let found = access.program(&program, path_var.as_deref());
        let (bwrap, args) = place.sandbox.argv(&access, &found, &["-l".into()]);
        pty_process::Command::new(bwrap).args(args)
    } else {
        pty_process::Command::new(&program).arg0(format!("-{name}"))
    };
    let cmd = cmd
        .env_clear()
        .env("HOME", &home)
        .env("USER", &user)
        .env("LOGNAME", &user)
        .env("SHELL", &program)
        .env("PATH", path)
        .env("LANG", lang)
        .env("TERM", "xterm-256color")
        .env("PORT", port.to_string())
        .env(TERMINAL_ENV, &marker)
        .current_dir(cwd);
    let child = cmd.spawn(pts).map_err(std::io::Error::other)?;
    let pid = child.id().unwrap_or(0);
    let (reader, writer) = pty.into_split();
    let (input_tx, input) = mpsc::channel(INPUT_QUEUE);
    let shell = Arc::new(Shell {
        task_id: task_id.to_owned(),
        pid,
        marker,
        program: program.to_string_lossy().into_owned(),
        input: input_tx,
        control,
        inner: Mutex::new(Inner {
            scrollback: VecDeque::new(),
            viewers: HashMap::new(),
            size: (cols, rows),
        }),
        ended: watch::channel(None).0,
        kill_cause: Mutex::new(None),
    });
    Ok(Started {
        shell,
        reader,
        writer,
        input,
        child,
    })
}

impl Shell {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether it has ended (its viewers were closed).
    pub fn has_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// The pty's size (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        self.inner().size
    }

    /// Attaches viewer `viewer_id`: its queue starts with the scrollback (one chunk), then
    /// gets every chunk printed after, never one twice (both under one lock with the output
    /// loop). `None` when the shell has ended.
    pub fn attach(&self, viewer_id: &str) -> Option<Attached> {
        let mut inner = self.inner();
        if self.has_ended() {
            return None;
        }
        let (tx, rx) = mpsc::channel(VIEWER_QUEUE);
        if !inner.scrollback.is_empty() {
            let chunk = Bytes::copy_from_slice(inner.scrollback.make_contiguous());
            let _ = tx.try_send(chunk);
        }
        inner.viewers.insert(viewer_id.to_owned(), tx);
        Some(Attached {
            output: rx,
            ended: self.ended.subscribe(),
        })
    }

    /// Detaches a viewer (its socket closed).
    pub fn detach(&self, viewer_id: &str) {
        self.inner().viewers.remove(viewer_id);
    }

    /// Queues a viewer's input for the pty, never waiting: the output loop writes it as the
    /// pty takes it, in the order it came.
    /// # Errors
    /// [`InputRefused::NotReading`] when [`INPUT_QUEUE`] messages already wait (the input is
    /// dropped); [`InputRefused::Ended`].
    pub fn input(&self, bytes: Bytes) -> Result<(), InputRefused> {
        self.input.try_send(bytes).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => InputRefused::NotReading,
            mpsc::error::TrySendError::Closed(_) => InputRefused::Ended,
        })
    }

    /// Resizes the pty (the kernel tells the foreground job with SIGWINCH), at once even while
    /// input waits for the pty.
    /// # Errors
    /// The pty is gone.
    pub fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        let size = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&self.control, size)?;
        self.inner().size = (cols, rows);
        Ok(())
    }

    /// Kills the shell's process group and whatever carries its marker, saying why
    /// (`cause`, recorded in `terminal.exited`). Its output loop then ends it.
    pub fn kill(&self, cause: &'static str) {
        self.kill_cause
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(cause);
        self.kill_leftovers();
    }

    fn kill_leftovers(&self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            kill_group(pid);
        }
        let marker = self.marker.clone();
        kill_marked_by(TERMINAL_ENV, |v| v == marker);
    }

    /// Appends output to the scrollback and hands it to every viewer; a viewer whose queue is
    /// full is dropped (its socket closes as lagging and it may reconnect).
    fn output(&self, bytes: &[u8]) {
        let mut inner = self.inner();
        inner.scrollback.extend(bytes);
        let excess = inner.scrollback.len().saturating_sub(SCROLLBACK_BYTES);
        inner.scrollback.drain(..excess);
        let chunk = Bytes::copy_from_slice(bytes);
        inner
            .viewers
            .retain(|id, tx| match tx.try_send(chunk.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(viewer_id = %id, "a terminal viewer fell behind; dropped");
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
    }
}

/// How a shell's run ended: (exit status, cause, what its viewers are to be closed with).
pub type Exit = (Option<i32>, &'static str, Ended);

impl Started {
    /// Reads the shell's output until it ends, then kills what it left (its group and
    /// marked processes). Returns the status (the code, or 128 + signal), the cause, and
    /// what its viewers are to be closed with ([`Shell::finish`]): 4000 with the status, or
    /// 1001 when byre stopped it.
    pub async fn run(self) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        let Started {
            shell,
            mut reader,
            mut writer,
            mut input,
            mut child,
        } = self;
        let mut buf = vec![0u8; 16 * 1024];
        // The input message being written and how much of it is written: one at a time, so
        // a pty that takes no input stalls only its queue, never this loop.
        let mut writing: Option<(Bytes, usize)> = None;
        let mut status: Option<std::process::ExitStatus> = None;
        // Once the shell exited: until when its output is still read.
        let mut drain_until: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                r = reader.read(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => shell.output(&buf[..n]),
                },
                next = input.recv(), if writing.is_none() => {
                    writing = next.map(|bytes| (bytes, 0));
                }
                w = async {
                    match &writing {
                        Some((bytes, done)) => writer.write(&bytes[*done..]).await,
                        None => Ok(0),
                    }
                }, if writing.is_some() => match w {
                    Ok(n) => {
                        if let Some((bytes, done)) = &mut writing {
                            *done += n;
                            if n == 0 || *done >= bytes.len() {
                                writing = None;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "input to an ending terminal");
                        writing = None;
                    }
                },
                s = child.wait(), if status.is_none() => {
                    status = s.ok();
                    // Background jobs may hold the pty open: they go with the shell.
                    shell.kill_leftovers();
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                () = tokio::time::sleep_until(drain_until.unwrap_or_else(tokio::time::Instant::now)),
                    if drain_until.is_some() => break,
            }
        }
        if status.is_none() {
            // The pty closed first: the shell is ending, or detached itself from it.
            status = match tokio::time::timeout(DRAIN_AFTER_EXIT, child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => {
                    shell.kill_leftovers();
                    child.wait().await.ok()
                }
            };
        }
        shell.kill_leftovers();
        let code = status.and_then(|s| s.code().or_else(|| s.signal().map(|n| 128 + n)));
        let cause = shell
            .kill_cause
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or("exited");
        let ended = if cause == "server_stopping" {
            Ended {
                code: 1001,
                reason: "byre is stopping".into(),
            }
        } else {
            Ended {
                code: 4000,
                reason: code.map_or_else(|| "unknown".into(), |c| c.to_string()),
            }
        };
        (code, cause, ended)
    }
}

impl Shell {
    /// Closes every viewer with `ended` (after its end was recorded); later attaches fail.
    pub fn finish(&self, ended: Ended) {
        // Under the lock: no viewer attaches between the end and the queues' closing.
        let mut inner = self.inner();
        self.ended.send_replace(Some(ended));
        inner.viewers.clear();
    }
}
