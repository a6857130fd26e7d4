//! The one spawn path of every process byre starts for an agent (DESIGN.md invariant 8,
//! STYLE.md §16): a bubblewrap (`bwrap`) sandbox around it, argv only, never a shell.
//!
//! [`Sandbox`] is built once at start-up ([`Sandbox::start`], from `serve --sandbox on|off`
//! and the auth mode) and says whether processes are confined at all. [`Access`] is what one
//! process may reach; [`Sandbox::argv`] turns a program and its arguments into the program
//! and arguments to start (`bwrap …options… -- program args…`, or the program itself when the
//! sandbox is off), for a `tokio::process::Command`, a `std::process::Command` or a
//! `pty_process::Command` alike.
//!
//! # What a confined process sees
//!
//! - read-only: the system (`/usr`, `/etc`, `/bin`, `/lib`, `/lib64`, `/sbin`, `/opt`; a
//!   top-level symlink such as `/bin -> usr/bin` stays a symlink), and each path of
//!   [`Access::read_only`] at its own path (the CLI's install, node, byre's binary for
//!   `byre mcp`, a reviewer's copy);
//! - single files, read-only, at a fixed path of their own ([`Access::file`]: the session's
//!   MCP token at [`MCP_TOKEN_PATH`]);
//! - read-write: each path of [`Access::read_write`] at its own path (a task's worktree and
//!   its project's git directory, [`Access::worktree`]; the session's own HOME and vendor
//!   config directory) and a private, empty `/tmp`;
//! - its own pid namespace with its own `/proc` (byre and other agents are not there), a
//!   minimal `/dev`, its own IPC namespace, no capabilities (even as root, a read-only
//!   mount cannot be written), and `--die-with-parent`;
//! - nothing else: no other part of byre's data dir (the log, `tokens.toml`, `mcp.secret`,
//!   `mcp-tokens/`, `run/`, other worktrees, other users' lead dirs), no user checkout beyond
//!   its git directory, no home directory of byre's user.
//!
//! Not confined: the network (model APIs, byre's own MCP endpoint on loopback), CPU and
//! memory. See `docs/sandbox.md`.
//!
//! # For callers
//!
//! - Paths are bound at the path the process uses, so they must be absolute (worktrees are:
//!   they are stored in events).
//! - `--die-with-parent` ends the sandbox when the *thread* that spawned `bwrap` ends
//!   (`PR_SET_PDEATHSIG`): spawn from a long-lived thread (a tokio worker), not from
//!   `spawn_blocking`, whose threads end when idle.
//! - `bwrap` passes its own environment on: set the process's environment on the command as
//!   usual (cleared, then what it needs).
//! - A confined program killed by a signal is seen as `bwrap` exiting with code
//!   `128 + signal` (the shell's convention, which `exits.rs` reads as that signal); a signal
//!   sent to `bwrap` itself ends the sandbox (it is not passed on), while one sent to the
//!   process group reaches every process in it (no `--new-session`: the caller chooses the
//!   session, e.g. `setsid` before exec).

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use byre_projections::tasks::branch_namespace;

/// Where a session's MCP token file appears inside its sandbox (read-only).
pub const MCP_TOKEN_PATH: &str = "/run/byre/mcp-token";

/// The system directories bound read-only (each when present).
const SYSTEM: [&str; 7] = ["/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin", "/opt"];

/// Whether and how agent processes are confined. Built once at start-up, shared.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// `bwrap`'s path; `None`: the sandbox is off, processes run as they are.
    bwrap: Option<PathBuf>,
    /// The options every sandbox gets: the system, `/proc`, `/dev`, `/tmp`, namespaces.
    base: Vec<OsString>,
    /// Paths no bind may contain ([`Sandbox::hide`]): byre's data dir and its user's home. A
    /// bind of one of them or of a directory above them (an install found in `~`, a node prefix
    /// of `~/.local` holding `~/.local/share/byre`) is left out, so the process cannot see them.
    hidden: Vec<PathBuf>,
}

/// What one confined process may reach, beyond the system. Paths are absolute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Bound read-write at their own path.
    pub read_write: Vec<PathBuf>,
    /// Bound read-only at their own path (after `read_write`, so a read-only path inside a
    /// writable one stays read-only).
    pub read_only: Vec<PathBuf>,
    /// Code a process runs that its configuration names (a CodeBolt agent's directory,
    /// `NODE_PATH`), bound read-only at its own path, never when it lies inside or above a
    /// hidden path ([`Sandbox::hide`]: byre's data dir, its user's home).
    pub code: Vec<PathBuf>,
    /// A worktree's git data, bound in this order after `read_only` (writable or not, the
    /// path): [`Access::worktree`].
    pub git: Vec<(bool, PathBuf)>,
    /// Directories shown empty and writable, each a tmpfs of the process's own, mounted after
    /// `git`: an agent's own view of a shared directory byre itself writes by path outside
    /// the sandbox (the project's `logs/`, whose reflogs git appends to by path).
    pub private: Vec<PathBuf>,
    /// Single files bound read-only: (the file on the host, where the process sees it).
    pub files: Vec<(PathBuf, PathBuf)>,
    /// The working directory.
    pub cwd: PathBuf,
}

impl Access {
    /// Nothing but the system, working in `cwd` (which must also be bound to exist).
    pub fn new(cwd: impl Into<PathBuf>) -> Access {
        Access {
            cwd: cwd.into(),
            ..Access::default()
        }
    }

    /// Adds `path`, read-write.
    pub fn write(mut self, path: impl Into<PathBuf>) -> Access {
        self.read_write.push(path.into());
        self
    }

    /// Adds `path`, read-only.
    pub fn read(mut self, path: impl Into<PathBuf>) -> Access {
        self.read_only.push(path.into());
        self
    }

    /// Adds `path`, code read-only ([`Access::code`]).
    pub fn code(mut self, path: impl Into<PathBuf>) -> Access {
        self.code.push(path.into());
        self
    }

    /// Adds the file `host`, read-only, seen at `inside`.
    pub fn file(mut self, host: impl Into<PathBuf>, inside: impl Into<PathBuf>) -> Access {
        self.files.push((host.into(), inside.into()));
        self
    }

    /// Adds a task's worktree and, of its project's git directory, what committing in it
    /// needs. A linked worktree's `.git` file names its own git dir (`gitdir:
    /// <common>/worktrees/<name>`) inside the project's common one. What an agent writes
    /// there, byre's own git (libgit2 for snapshots and views, the `git` binary for pulls and
    /// pushes, outside the sandbox) and the user's own `git` read, so only the parts that hold
    /// data are writable ([`Access::git`], in this order): the common dir read-only, then
    /// `objects`, the task's own directory of branches `refs/heads/byre/<id8>/`
    /// ([`branch_namespace`]; the rest of `refs/` stays read-only: no agent moves the default
    /// branch, another task's branch or a remote-tracking ref, nor plants a link there) and the
    /// worktree's own git dir read-write, `logs` (the project's and the worktree's own) a private tmpfs
    /// (byre's own ref moves outside append to its reflogs by path, so no agent may plant a
    /// link there; an agent's reflogs last as long as its sandbox), then, read-only
    /// again, what would redirect or configure a git run — the worktree's `.git` file, its git
    /// dir's `commondir`, `gitdir` and `config.worktree`, and `objects/info` (alternates);
    /// and `objects/pack`, the project's packed history, which no agent may delete or rewrite
    /// (its new objects are loose). So an agent commits and makes branches in its own
    /// directory, but cannot point a git run at another
    /// directory (the data dir, another project), configure one (`config`, `hooks`,
    /// `info/attributes`) or touch another worktree's git dir. A worktree that is a
    /// repository of its own (`.git` a directory) gets the same treatment with its `.git` as
    /// the common dir.
    pub fn worktree(mut self, worktree: &Path) -> Access {
        self.read_write.push(worktree.to_owned());
        let Some(layout) = GitLayout::of(worktree) else {
            return self;
        };
        let common = &layout.common;
        // Made before binding, so that the read-only file is there to bind: an empty
        // `config.worktree` is read only when the repository's config enables it.
        // The worktree's own git dir is its agent's to write: made there by handle, exclusive.
        if let Some(admin) = &layout.admin {
            if let Ok(dir) = byre_beneath::Dir::open(admin) {
                let _ = dir.create_new(Path::new("config.worktree"), 0o644);
                let _ = dir.create_dir_all(Path::new("logs"));
            }
        }
        for dir in ["objects/info", "objects/pack", "logs"] {
            let _ = std::fs::create_dir_all(common.join(dir));
        }
        // bwrap follows a symlink it binds: each path must be itself, or it is left out
        // (and a writable one is then not writable; a read-only one inside a writable one
        // cannot be a symlink an agent made, since every sandbox binds it read-only).
        let mut bind = |writable: bool, p: PathBuf| {
            if std::fs::canonicalize(&p).is_ok_and(|c| c == p) {
                self.git.push((writable, p));
            } else if p.exists() {
                tracing::error!(path = %p.display(), "a git path that is a symlink was left out of a sandbox");
            }
        };
        let Some(admin) = &layout.admin else {
            // A repository of its own, inside the writable worktree: what configures a git
            // run is read-only (it keeps its index and HEAD, which live in `.git` itself).
            for guarded in ["config", "hooks", "info", "objects/info"] {
                bind(false, common.join(guarded));
            }
            return self;
        };
        bind(false, common.clone());
        bind(true, common.join("objects"));
        // Of `refs/` only the task's own directory of branches: a linked worktree's git dir is
        // named by its task's id (`ensure_worktree`), and the `.git` file naming it is
        // read-only below. Made by handle (no link followed), then bound: a mount point, which
        // the agent can neither rename nor remove nor swap for a link.
        if let Some(own) = admin
            .file_name()
            .and_then(OsStr::to_str)
            .map(|task_id| Path::new("refs/heads").join(branch_namespace(task_id)))
        {
            if let Ok(dir) = byre_beneath::Dir::open(common) {
                let _ = dir.create_dir_all(&own);
            }
            bind(true, common.join(own));
        }
        // The project's reflogs and the worktree's own (`logs/HEAD`, the worktree's HEAD
        // reflog), private: byre's ref moves and end-of-turn commit outside append to them by
        // path, and a link an agent left there would take that line (and a ref it names)
        // anywhere.
        for logs in [common.join("logs"), admin.join("logs")] {
            if std::fs::canonicalize(&logs).is_ok_and(|c| c == logs) {
                self.private.push(logs);
            }
        }
        bind(true, admin.clone());
        bind(false, common.join("objects/info"));
        // The project's packed history: an agent adds loose objects, never removes a pack.
        bind(false, common.join("objects/pack"));
        for file in ["commondir", "gitdir", "config.worktree"] {
            bind(false, admin.join(file));
        }
        if let Ok(wt) = std::fs::canonicalize(worktree) {
            bind(false, wt.join(".git"));
        }
        self
    }

    /// Adds, read-write, directories of the project's `refs/` beyond the task's own branches
    /// that byre's own git job for `worktree` writes (`git_box`): `refs/<dir>` for each of
    /// `dirs` (made when missing), e.g. a snapshot's `byre/tasks/<task id>` or the directory of
    /// a branch made before branch namespaces. Never for an agent's process: no agent code
    /// runs in a git job, and these directories are read-only to every agent, so nothing there
    /// was planted. A dir that is not plain relative components is left out.
    pub fn refs(mut self, worktree: &Path, dirs: &[String]) -> Access {
        let Some(GitLayout {
            common,
            admin: Some(_),
        }) = GitLayout::of(worktree)
        else {
            return self;
        };
        let Ok(top) = byre_beneath::Dir::open(&common) else {
            return self;
        };
        for dir in dirs {
            let rel = Path::new("refs").join(dir);
            if !Path::new(dir)
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
                || top.create_dir_all(&rel).is_err()
            {
                continue;
            }
            let path = common.join(rel);
            let already = self.git.iter().any(|(w, p)| *w && *p == path);
            if !already && std::fs::canonicalize(&path).is_ok_and(|c| c == path) {
                self.git.push((true, path));
            }
        }
        self
    }

    /// Adds what running `program` needs, read-only, and returns the path to start it by:
    /// the program resolved (`PATH`, symlinks), whose install it binds (the nearest ancestor
    /// named `node_modules`, so an npm package's siblings and native parts come too, else
    /// its directory); and `node`, found on `path_var`, with its prefix when it is outside
    /// the system directories (a script CLI starts `#!/usr/bin/env node`). A program that
    /// cannot be found is returned as given (the start then fails as it would unconfined).
    pub fn program(&mut self, program: &Path, path_var: Option<&OsStr>) -> PathBuf {
        let Some(found) = resolve(program, path_var) else {
            return program.to_owned();
        };
        self.add_install(&found);
        if let Some(node) = resolve(Path::new("node"), path_var) {
            // The binary alone, not its prefix: a prefix such as `~/.local` also holds
            // `~/.local/share/byre`. (The CLI's own modules come with its install above.)
            if !under_system(&node) && !self.read_only.contains(&node) {
                self.read_only.push(node);
            }
        }
        found
    }

    fn add_install(&mut self, found: &Path) {
        let root = found
            .ancestors()
            .skip(1)
            .filter(|a| a.file_name() == Some(OsStr::new("node_modules")))
            .last()
            .or_else(|| found.parent())
            .map(Path::to_owned);
        if let Some(root) = root {
            if !under_system(&root) && !self.read_only.contains(&root) {
                self.read_only.push(root);
            }
        }
    }
}

/// Whether `path` lies in a system directory every sandbox binds anyway.
pub fn under_system(path: &Path) -> bool {
    SYSTEM.iter().any(|s| path.starts_with(s))
}

/// `program` resolved: a path with a `/` as it is, a bare name in a directory of `path_var`;
/// then symlinks. `None` when no file is there.
pub fn resolve(program: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let candidate = if program.components().count() > 1 || program.is_absolute() {
        Some(program.to_owned())
    } else {
        std::env::split_paths(path_var?)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    }?;
    let real = std::fs::canonicalize(&candidate).ok()?;
    real.is_file().then_some(real)
}

/// Where a worktree's git data lives: the project's common git dir and, for a linked
/// worktree, its own git dir inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLayout {
    /// The common git dir (objects, refs, config, hooks).
    pub common: PathBuf,
    /// A linked worktree's own git dir, `<common>/worktrees/<name>`.
    pub admin: Option<PathBuf>,
}

impl GitLayout {
    /// The layout of `worktree`: `.git` a directory is the common dir itself; `.git` a file
    /// `gitdir: <common>/worktrees/<name>` names the worktree's own git dir, whose common dir
    /// is found by the layout git makes (two levels up), never from a `commondir` file, which
    /// lives where agents write. `None` when `.git` is neither, or names a git dir outside
    /// that layout.
    pub fn of(worktree: &Path) -> Option<GitLayout> {
        let dot_git = worktree.join(".git");
        let meta = std::fs::symlink_metadata(&dot_git).ok()?;
        if meta.is_dir() {
            return Some(GitLayout {
                common: std::fs::canonicalize(&dot_git).ok()?,
                admin: None,
            });
        }
        if !meta.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let gitdir = Path::new(text.strip_prefix("gitdir:")?.trim());
        let gitdir = if gitdir.is_absolute() {
            gitdir.to_owned()
        } else {
            worktree.join(gitdir)
        };
        let admin = std::fs::canonicalize(gitdir).ok()?;
        let worktrees = admin.parent()?;
        if worktrees.file_name() != Some(OsStr::new("worktrees")) {
            return None;
        }
        let common = worktrees.parent()?.to_owned();
        (common.join("objects").is_dir() && common.join("HEAD").is_file()).then_some(GitLayout {
            common,
            admin: Some(admin),
        })
    }
}

/// Why the sandbox cannot run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// No `bwrap` on `PATH`.
    #[error("bubblewrap (`bwrap`) is not on PATH")]
    NotInstalled,
    /// `bwrap` is there, but a trial sandbox failed (user namespaces refused, …).
    #[error("a trial run of {bwrap} failed: {why}")]
    ProbeFailed {
        /// The program.
        bwrap: String,
        /// Its error output or exit.
        why: String,
    },
}

impl Sandbox {
    /// The sandbox off: every process runs as it is, with byre's own reach.
    pub fn off() -> Sandbox {
        Sandbox {
            bwrap: None,
            base: Vec::new(),
            hidden: Vec::new(),
        }
    }

    /// The sandbox on, with `bwrap` found on `path_var`, after one trial run of a confined
    /// `true`.
    /// # Errors
    /// [`Unavailable`]: no `bwrap`, or the trial failed.
    pub fn probe(path_var: Option<&OsStr>) -> Result<Sandbox, Unavailable> {
        let bwrap = resolve(Path::new("bwrap"), path_var).ok_or(Unavailable::NotInstalled)?;
        let sandbox = Sandbox {
            base: base_options(),
            bwrap: Some(bwrap.clone()),
            hidden: Vec::new(),
        };
        let (program, args) = sandbox.argv(&Access::new("/"), Path::new("/usr/bin/true"), &[]);
        let failed = |why: String| Unavailable::ProbeFailed {
            bwrap: bwrap.display().to_string(),
            why,
        };
        let out = std::process::Command::new(program)
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let line = stderr.lines().next().unwrap_or("").trim();
            return Err(failed(if line.is_empty() {
                out.status.to_string()
            } else {
                line.to_owned()
            }));
        }
        Ok(sandbox)
    }

    /// The sandbox `serve --sandbox` asks for: off when asked (with a warning to log); on when
    /// `bwrap` runs here; where it cannot, a local server (`team_server` false) runs unconfined
    /// with a warning, a team server (token and tailscale modes) does not start.
    /// # Errors
    /// One line for the operator: why the sandbox cannot run, naming `--sandbox off`.
    pub fn start(
        on: bool,
        team_server: bool,
        path_var: Option<&OsStr>,
    ) -> Result<(Sandbox, Option<String>), String> {
        if !on {
            return Ok((
                Sandbox::off(),
                Some(
                    "the agent sandbox is off (--sandbox off): every agent can act as every user"
                        .into(),
                ),
            ));
        }
        match Sandbox::probe(path_var) {
            Ok(s) => Ok((s, None)),
            Err(why) if team_server => Err(format!(
                "refusing to start a team server without the agent sandbox: {why}; install bubblewrap, or pass --sandbox off (every agent can then act as every user)"
            )),
            Err(why) => Ok((
                Sandbox::off(),
                Some(format!("agents run without a sandbox: {why}; install bubblewrap (or pass --sandbox off to silence this)")),
            )),
        }
    }

    /// Keeps `path` out of every sandbox: no bind of it or of a directory that holds it is
    /// made (binds below it, such as a worktree in the data dir, still are).
    pub fn hide(&mut self, path: PathBuf) {
        if !self.hidden.contains(&path) {
            self.hidden.push(path);
        }
    }

    /// Whether a bind of code at `path` lies inside a hidden path or holds one.
    fn code_in_hidden(&self, path: &Path) -> bool {
        let inside = self
            .hidden
            .iter()
            .any(|h| h.starts_with(path) || path.starts_with(h));
        if inside {
            tracing::error!(path = %path.display(), "code inside byre's data dir or its user's home was not bound into a sandbox");
        }
        inside
    }

    /// Whether a bind of `path` would show a hidden path.
    fn shows_hidden(&self, path: &Path) -> bool {
        let shows = self.hidden.iter().any(|h| h.starts_with(path));
        if shows {
            tracing::error!(path = %path.display(), "a sandbox bind holding byre's data dir or its user's home was left out");
        }
        shows
    }

    /// Whether processes are confined.
    pub fn is_on(&self) -> bool {
        self.bwrap.is_some()
    }

    /// The program and arguments that start `program args…` with `access`: `bwrap`'s, or, the
    /// sandbox off, `program` and `args` themselves. The caller sets the environment, stdio
    /// and process group; the working directory is `access.cwd` either way (bwrap's
    /// `--chdir`; set it on the command too for the sandbox off).
    pub fn argv(
        &self,
        access: &Access,
        program: &Path,
        args: &[OsString],
    ) -> (OsString, Vec<OsString>) {
        let Some(bwrap) = &self.bwrap else {
            return (program.as_os_str().to_owned(), args.to_vec());
        };
        let mut argv = self.base.clone();
        for p in access.read_write.iter().filter(|p| !self.shows_hidden(p)) {
            push(&mut argv, "--bind", p, p);
        }
        for p in access.read_only.iter().filter(|p| !self.shows_hidden(p)) {
            push(&mut argv, "--ro-bind", p, p);
        }
        for p in access.code.iter().filter(|p| !self.code_in_hidden(p)) {
            push(&mut argv, "--ro-bind", p, p);
        }
        for (writable, p) in access.git.iter().filter(|(_, p)| !self.shows_hidden(p)) {
            let option = if *writable { "--bind" } else { "--ro-bind" };
            push(&mut argv, option, p, p);
        }
        // Empty: a tmpfs shows nothing of what lies below it.
        for p in &access.private {
            argv.push("--tmpfs".into());
            argv.push(p.as_os_str().to_owned());
        }
        for (host, inside) in &access.files {
            push(&mut argv, "--ro-bind", host, inside);
        }
        // The root itself (a tmpfs holding the mount points) takes no writes: outside what
        // is bound writable and the private /tmp, a write fails.
        argv.push("--remount-ro".into());
        argv.push("/".into());
        argv.push("--chdir".into());
        argv.push(access.cwd.clone().into_os_string());
        argv.push("--".into());
        argv.push(program.as_os_str().to_owned());
        argv.extend(args.iter().cloned());
        (bwrap.clone().into_os_string(), argv)
    }

    /// A `tokio::process::Command` for `program args…` with `access`, working in
    /// `access.cwd`; environment, stdio and process group are the caller's.
    pub fn command(
        &self,
        access: &Access,
        program: &Path,
        args: &[OsString],
    ) -> tokio::process::Command {
        let (program, args) = self.argv(access, program, args);
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args).current_dir(&access.cwd);
        cmd
    }
}

fn push(argv: &mut Vec<OsString>, option: &str, from: &Path, to: &Path) {
    argv.push(option.into());
    argv.push(from.as_os_str().to_owned());
    argv.push(to.as_os_str().to_owned());
}

/// What every sandbox gets: the system read-only (symlinks kept as symlinks), a private
/// `/tmp`, `/proc` of its own pid namespace, a minimal `/dev`, no capabilities, and the end of
/// the sandbox with its parent.
fn base_options() -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    for dir in SYSTEM {
        let p = Path::new(dir);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    argv.push("--symlink".into());
                    argv.push(target.into_os_string());
                    argv.push(dir.into());
                }
            }
            Ok(m) if m.is_dir() => push(&mut argv, "--ro-bind", p, p),
            _ => {}
        }
    }
    // `/etc/resolv.conf` may point outside `/etc` (systemd-resolved's stub under `/run`).
    if let Ok(real) = std::fs::canonicalize("/etc/resolv.conf") {
        if !under_system(&real) {
            push(&mut argv, "--ro-bind", &real, &real);
        }
    }
    for opt in [
        "--tmpfs",
        "/tmp",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
    ] {
        argv.push(opt.into());
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The options following each occurrence of `option` (its two paths).
    fn binds(args: &[String], option: &str) -> Vec<(String, String)> {
        args.windows(3)
            .filter(|w| w[0] == option)
            .map(|w| (w[1].clone(), w[2].clone()))
            .collect()
    }

    fn on() -> Sandbox {
        Sandbox {
            bwrap: Some("/usr/bin/bwrap".into()),
            base: base_options(),
            hidden: Vec::new(),
        }
    }

    #[test]
    fn no_bind_shows_the_data_dir_or_the_home_above_it_but_binds_below_stay() {
        let mut sandbox = on();
        sandbox.hide("/home/ada/.local/share/byre".into());
        sandbox.hide("/home/ada".into());
        let mut access = Access::new("/home/ada/.local/share/byre/worktrees/p/t");
        access.read_write = vec!["/home/ada/.local/share/byre/worktrees/p/t".into()];
        // A node prefix of ~/.local, a CLI found in ~ itself, and the root.
        access.read_only = vec![
            "/home/ada/.local".into(),
            "/home/ada".into(),
            "/".into(),
            "/home/ada/.nvm/versions/node/v20/bin/node".into(),
        ];
        let (_, argv) = sandbox.argv(&access, Path::new("/usr/bin/true"), &[]);
        let args = strings(&argv);
        let bound: Vec<String> = binds(&args, "--ro-bind")
            .into_iter()
            .chain(binds(&args, "--bind"))
            .map(|(from, _)| from)
            .filter(|from| from.starts_with("/home"))
            .collect();
        assert_eq!(
            bound,
            [
                "/home/ada/.nvm/versions/node/v20/bin/node",
                "/home/ada/.local/share/byre/worktrees/p/t"
            ]
        );
        assert!(!binds(&args, "--ro-bind")
            .iter()
            .any(|(from, _)| from == "/"));
    }

    #[test]
    fn off_runs_the_program_as_it_is() {
        let (program, args) = Sandbox::off().argv(
            &Access::new("/w").write("/w"),
            Path::new("/bin/claude"),
            &["-p".into()],
        );
        assert_eq!(program, "/bin/claude");
        assert_eq!(strings(&args), ["-p"]);
        assert!(!Sandbox::off().is_on());
    }

    #[test]
    fn the_argv_binds_what_access_names_and_ends_with_the_program_after_a_double_dash() {
        let access = Access::new("/data/worktrees/p/t")
            .write("/data/worktrees/p/t")
            .write("/data/agents/sessions/s/home")
            .read("/data/reviews/r")
            .file("/data/mcp-tokens/s.token", MCP_TOKEN_PATH);
        let (program, args) = on().argv(&access, Path::new("/opt/cli/claude"), &["-p".into()]);
        assert_eq!(program, "/usr/bin/bwrap");
        let args = strings(&args);
        let rw = binds(&args, "--bind");
        assert!(rw.contains(&("/data/worktrees/p/t".into(), "/data/worktrees/p/t".into())));
        assert!(rw.contains(&(
            "/data/agents/sessions/s/home".into(),
            "/data/agents/sessions/s/home".into()
        )));
        let ro = binds(&args, "--ro-bind");
        assert!(ro.contains(&("/data/reviews/r".into(), "/data/reviews/r".into())));
        assert!(ro.contains(&("/data/mcp-tokens/s.token".into(), MCP_TOKEN_PATH.into())));
        assert!(ro.contains(&("/usr".into(), "/usr".into())));
        assert!(
            !rw.iter().any(|(from, _)| from == "/data"),
            "nothing of the data dir beyond what was named"
        );
        for option in ["--unshare-pid", "--die-with-parent", "--proc", "--dev"] {
            assert!(args.iter().any(|a| a == option), "{option} in {args:?}");
        }
        let dash = args.iter().position(|a| a == "--").expect("--");
        assert_eq!(&args[dash + 1..], ["/opt/cli/claude", "-p"]);
        let chdir = args.iter().position(|a| a == "--chdir").expect("--chdir");
        assert_eq!(args[chdir + 1], "/data/worktrees/p/t");
        assert!(
            args.iter().position(|a| a == "--tmpfs") < args.iter().position(|a| a == "--bind"),
            "binds under /tmp go on top of the private /tmp"
        );
    }

    #[test]
    fn a_worktree_brings_what_commits_need_of_its_git_dir_and_nothing_that_redirects_git() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let common = root.join("repo/.git");
        let admin = common.join("worktrees/t1");
        std::fs::create_dir_all(&admin).expect("admin dir");
        for d in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(common.join(d)).expect("git dir");
        }
        std::fs::write(common.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(common.join("config"), "").expect("config");
        // A `commondir` naming somewhere else is not followed: the layout is git's own.
        std::fs::write(admin.join("commondir"), "/elsewhere\n").expect("commondir");
        std::fs::write(admin.join("gitdir"), "x\n").expect("gitdir");
        let wt = root.join("worktrees/t1");
        std::fs::create_dir_all(&wt).expect("worktree");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).expect(".git");
        let access = Access::new(&wt).worktree(&wt);
        assert_eq!(access.read_write, std::slice::from_ref(&wt));
        assert_eq!(
            access.git,
            [
                (false, common.clone()),
                (true, common.join("objects")),
                (true, common.join("refs/heads/byre/t1")),
                (true, admin.clone()),
                (false, common.join("objects/info")),
                (false, common.join("objects/pack")),
                (false, admin.join("commondir")),
                (false, admin.join("gitdir")),
                (false, admin.join("config.worktree")),
                (false, wt.join(".git")),
            ]
        );
        assert_eq!(access.private, [common.join("logs"), admin.join("logs")]);
        // byre's git job for it also writes a snapshot's refs and an older task's branch
        // directory; nothing outside `refs/` and nothing twice.
        let job = Access::new(&wt).worktree(&wt).refs(
            &wt,
            &[
                "byre/tasks/t1".into(),
                "heads/byre".into(),
                "heads/byre/t1".into(),
                "../config".into(),
                "/etc".into(),
            ],
        );
        assert_eq!(
            job.git[access.git.len()..],
            [
                (true, common.join("refs/byre/tasks/t1")),
                (true, common.join("refs/heads/byre")),
            ]
        );
        // A symlink is never bound (bwrap would bind what it points at), nor followed to make
        // the task's directory.
        std::fs::remove_dir_all(common.join("refs")).expect("refs");
        std::os::unix::fs::symlink(&root, common.join("refs")).expect("symlink");
        let access = Access::new(&wt).worktree(&wt);
        assert!(!access
            .git
            .iter()
            .any(|(_, p)| p.starts_with(common.join("refs"))));
        assert!(!root.join("heads").exists());
        // A `.git` file naming a git dir outside git's layout brings nothing.
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", root.display())).expect(".git");
        assert!(Access::new(&wt).worktree(&wt).git.is_empty());
        let plain = root.join("plain");
        std::fs::create_dir_all(plain.join(".git")).expect("plain repo");
        std::fs::create_dir_all(plain.join(".git/objects")).expect("objects");
        std::fs::write(plain.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(plain.join(".git/config"), "").expect("config");
        let access = Access::new(&plain).worktree(&plain);
        assert_eq!(access.read_write, std::slice::from_ref(&plain));
        assert_eq!(
            access.git,
            [
                (false, plain.join(".git/config")),
                (false, plain.join(".git/objects/info")),
            ]
        );
    }

    #[test]
    fn a_program_in_an_npm_install_brings_the_whole_node_modules() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let pkg = root.join("cli/node_modules/@v/cli");
        std::fs::create_dir_all(&pkg).expect("package");
        std::fs::write(pkg.join("cli.js"), "").expect("cli.js");
        let bin = root.join("cli/node_modules/.bin");
        std::fs::create_dir_all(&bin).expect(".bin");
        std::os::unix::fs::symlink("../@v/cli/cli.js", bin.join("cli")).expect("symlink");
        let mut access = Access::new("/");
        let path_var = OsString::from(bin.as_os_str());
        let found = access.program(Path::new("cli"), Some(&path_var));
        assert_eq!(found, pkg.join("cli.js"), "started by its real path");
        assert_eq!(access.read_only, [root.join("cli/node_modules")]);
        let mut missing = Access::new("/");
        assert_eq!(
            missing.program(Path::new("nope"), Some(&path_var)),
            Path::new("nope")
        );
        assert!(missing.read_only.is_empty());
    }

    #[test]
    fn no_bwrap_on_path_is_not_installed_and_a_team_server_refuses_naming_sandbox_off() {
        let empty = tempfile::tempdir().expect("temp dir");
        let path_var = OsString::from(empty.path().as_os_str());
        assert_eq!(
            Sandbox::probe(Some(&path_var)).err(),
            Some(Unavailable::NotInstalled)
        );
        let team = true;
        let err = Sandbox::start(true, team, Some(&path_var)).expect_err("refused");
        assert!(
            err.contains("--sandbox off") && err.contains("bwrap"),
            "{err}"
        );
        assert!(!err.contains('\n'), "one line: {err}");
        let local = false;
        let (sandbox, warning) = Sandbox::start(true, local, Some(&path_var)).expect("local runs");
        assert!(!sandbox.is_on());
        assert!(warning.is_some_and(|w| w.contains("without a sandbox")));
        let (off, warning) = Sandbox::start(false, team, Some(&path_var)).expect("off runs");
        assert!(!off.is_on());
        assert!(warning.is_some_and(|w| w.contains("every agent can act as every user")));
    }

    /// Runs a confined shell command (where bwrap works, as on CI and the dev machines);
    /// returns its exit code and output.
    fn confined(sandbox: &Sandbox, access: &Access, script: &str) -> (i32, String) {
        let (program, args) =
            sandbox.argv(access, Path::new("/bin/sh"), &["-c".into(), script.into()]);
        let out = std::process::Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("bwrap runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    #[test]
    fn a_confined_process_writes_only_where_it_may_and_sees_nothing_else() {
        let path_var = std::env::var_os("PATH");
        let sandbox = Sandbox::probe(path_var.as_deref()).expect("bwrap works here");
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let (rw, ro, secret) = (root.join("rw"), root.join("ro"), root.join("secret"));
        for d in [&rw, &ro, &secret] {
            std::fs::create_dir_all(d).expect("dir");
        }
        std::fs::write(ro.join("f"), "read me").expect("ro file");
        std::fs::write(secret.join("tokens.toml"), "t").expect("secret");
        std::fs::write(root.join("token"), "TOKEN-1").expect("token");
        let access = Access::new(&rw)
            .write(&rw)
            .read(&ro)
            .file(root.join("token"), MCP_TOKEN_PATH);
        let script = format!(
            "echo ok > {rw}/new && cat {ro}/f && cat {tok} && \
             (echo x > {ro}/g 2>/dev/null && echo RO-WRITTEN; true) && \
             (cat {secret}/tokens.toml 2>/dev/null && echo SECRET-READ; true) && \
             (echo x > {root}/outside 2>/dev/null; true) && \
             echo PIDS=$(ls /proc | grep -c '^[0-9]')",
            rw = rw.display(),
            ro = ro.display(),
            tok = MCP_TOKEN_PATH,
            secret = secret.display(),
            root = root.display(),
        );
        let (code, out) = confined(&sandbox, &access, &script);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("read me") && out.contains("TOKEN-1"), "{out}");
        for escaped in ["RO-WRITTEN", "SECRET-READ"] {
            assert!(!out.contains(escaped), "{escaped}: {out}");
        }
        assert_eq!(
            std::fs::read_to_string(rw.join("new")).expect("written"),
            "ok\n"
        );
        // A write outside what it may write lands in its private /tmp, if anywhere, never on
        // the host.
        assert!(!ro.join("g").exists() && !root.join("outside").exists());
        let n_pids: u32 = out
            .split("PIDS=")
            .nth(1)
            .and_then(|n| n.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("a count in {out}"));
        let n_host_pids = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .count();
        assert!(n_host_pids > 8, "the host runs more than the sandbox could");
        assert!(
            n_pids <= 8,
            "its own pid namespace: {n_pids} processes seen\n{out}"
        );
    }
}
