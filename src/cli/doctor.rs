//! `byre doctor`: checks what `serve` needs on this machine and says what to fix, one line per
//! check (docs/operating.md, "byre doctor"). It finds the agent CLIs and their credentials the
//! way the drivers do (`BYRE_CLAUDE_BIN`, `BYRE_CODEX_BIN`, `PATH`; the variables byre hands
//! them), reads each CLI's `--version` against `byre_agents::versions`, runs the sandbox's own
//! trial (`Sandbox::probe`), and looks at git, Chromium and the data dir.
//!
//! Needed: git, the data dir, bubblewrap (unless `--sandbox off`), and at least one agent
//! vendor whose CLI is found, supported and has credentials. A needed check that fails is
//! `missing`, and the exit code is then 1; anything else that is not right is `warn`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use byre_agents::sandbox::{self, Sandbox, Unavailable};
use byre_agents::versions::{self, Supported, Version};
use byre_agents::Driver;
use byre_process::runner::{self, Keep, Limits};

/// Less free space than this in the data dir's file system is a warning.
const LOW_SPACE_BYTES: u64 = 1 << 30;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Missing,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Missing => "missing",
        }
    }
}

/// One line of the report.
struct Check {
    status: Status,
    name: &'static str,
    what: String,
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, what: String) -> Check {
        Check {
            status: Status::Ok,
            name,
            what,
            fix: None,
        }
    }

    fn not_ok(status: Status, name: &'static str, what: String, fix: String) -> Check {
        Check {
            status,
            name,
            what,
            fix: Some(fix),
        }
    }

    fn line(&self) -> String {
        let mut line = format!("{:<9}{:<20}{}", self.status.word(), self.name, self.what);
        if let Some(fix) = &self.fix {
            line.push_str(&format!(" — fix: {fix}"));
        }
        line
    }
}

/// What `doctor` is asked to check.
pub struct Options {
    /// The data dir `serve` would use.
    pub data_dir: PathBuf,
    /// Whether `serve` would run agents in the sandbox (`--sandbox`).
    pub sandbox: bool,
    /// The Chromium `serve` would drive (`--chromium`).
    pub chromium: PathBuf,
}

/// Runs every check, prints one line each to stdout; returns the exit code: 1 when something
/// needed is missing, else 0.
pub async fn run(options: Options) -> i32 {
    let path_var = std::env::var_os("PATH");
    let claude = byre_agents::claude::ClaudeDriver::new(&options.data_dir, None, Vec::new());
    let codex = byre_agents::codex::CodexDriver::new(&options.data_dir, None, Vec::new());
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let vendors = [
        Vendor {
            supported: versions::CLAUDE_CODE,
            cli_check: "claude",
            credentials_check: "claude credentials",
            program: claude.program(),
            keys: &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            login_files: home
                .iter()
                .flat_map(|h| [h.join(".claude/.credentials.json"), h.join(".claude.json")])
                .collect(),
            key_fix: "start byre with ANTHROPIC_API_KEY=… (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`)",
            login_note: "your own `claude` login is not used: byre gives each session a config dir of its own",
            reviews: "Codex and CodeBolt tasks",
        },
        Vendor {
            supported: versions::CODEX,
            cli_check: "codex",
            credentials_check: "codex credentials",
            program: codex.program(),
            keys: &["OPENAI_API_KEY"],
            login_files: std::env::var_os("CODEX_HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".codex")))
                .map(|dir| dir.join("auth.json"))
                .into_iter()
                .collect(),
            key_fix: "start byre with OPENAI_API_KEY=…",
            login_note: "your own `codex login` is not used: byre gives each session a CODEX_HOME of its own",
            reviews: "Claude Code tasks",
        },
    ];
    let mut agent_checks = Vec::new();
    let mut usable = false;
    for vendor in &vendors {
        let (cli, cli_ok) = vendor.cli(path_var.as_deref()).await;
        let (credentials, credentials_ok) = vendor.credentials();
        usable |= cli_ok && credentials_ok;
        agent_checks.push((vendor, cli, cli_ok));
        agent_checks.push((vendor, credentials, credentials_ok));
    }
    let mut checks = Vec::new();
    for (vendor, mut check, ok) in agent_checks {
        if !ok {
            // Needed only when no vendor at all can run.
            if usable {
                check.status = Status::Warn;
                if let Some(fix) = &mut check.fix {
                    fix.push_str(&format!(
                        " (without it, reviews of {} fail: or start byre with --reviews false)",
                        vendor.reviews
                    ));
                }
            } else {
                check.status = Status::Missing;
            }
        }
        checks.push(check);
    }
    checks.push(git(path_var.as_deref()).await);
    checks.push(bubblewrap(options.sandbox, path_var).await);
    checks.push(chromium(&options.chromium));
    checks.extend(data_dir(&options.data_dir));
    for check in &checks {
        println!("{}", check.line());
    }
    let missing = checks.iter().any(|c| c.status == Status::Missing);
    if missing {
        println!("byre cannot run here until what is `missing` is fixed.");
    }
    i32::from(missing)
}

/// One agent vendor's CLI and credentials, as its driver finds them.
struct Vendor {
    supported: Supported,
    cli_check: &'static str,
    credentials_check: &'static str,
    /// The program and the variable naming it ([`Driver::program`]).
    program: (String, &'static str),
    /// The variables, any one of which is a credential the CLI is handed.
    keys: &'static [&'static str],
    /// The CLI's own login files, which byre does not use.
    login_files: Vec<PathBuf>,
    key_fix: &'static str,
    login_note: &'static str,
    /// Whose reviews this vendor's agents do.
    reviews: &'static str,
}

impl Vendor {
    /// The CLI found, its version, and whether it is supported. A failed check is `Missing`
    /// here; [`run`] makes it a warning when another vendor can run.
    async fn cli(&self, path_var: Option<&OsStr>) -> (Check, bool) {
        let (program, env_var) = &self.program;
        let install = self.supported.install();
        let name = self.cli_check;
        let Some(path) = sandbox::resolve(Path::new(program), path_var) else {
            let where_ = if program.contains('/') {
                format!("{program} (from {env_var}) is not there")
            } else {
                format!("`{program}` is not on PATH and {env_var} is not set")
            };
            return (
                Check::not_ok(
                    Status::Missing,
                    name,
                    format!("{} not found: {where_}", self.supported.name),
                    format!("`{install}`, or set {env_var} to its path"),
                ),
                false,
            );
        };
        let printed = match version_of(&path).await {
            Ok(printed) => printed,
            Err(why) => {
                return (
                    Check::not_ok(
                        Status::Missing,
                        name,
                        format!("{} `--version` failed: {why}", path.display()),
                        format!("reinstall it: `{install}`"),
                    ),
                    false,
                )
            }
        };
        let range = self.supported.range();
        match Version::find_in(&printed) {
            Some(v) if self.supported.admits(v) => (
                Check::ok(name, format!("{} {v} (supported: {range})", path.display())),
                true,
            ),
            Some(v) => (
                Check::not_ok(
                    Status::Missing,
                    name,
                    format!(
                        "{} {v} is not supported (supported: {range})",
                        path.display()
                    ),
                    format!("`{install}`"),
                ),
                false,
            ),
            None => (
                Check::not_ok(
                    Status::Missing,
                    name,
                    format!("{} printed no version: {printed:?}", path.display()),
                    format!("reinstall it: `{install}`"),
                ),
                false,
            ),
        }
    }

    /// Whether byre's environment holds a credential byre hands this CLI.
    fn credentials(&self) -> (Check, bool) {
        let set = self
            .keys
            .iter()
            .find(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
        if let Some(key) = set {
            return (
                Check::ok(self.credentials_check, format!("{key} is set")),
                true,
            );
        }
        let mut what = match self.keys {
            [one] => format!("{one} is not set"),
            keys => format!("none of {} is set", keys.join(", ")),
        };
        if let Some(login) = self.login_files.iter().find(|f| f.is_file()) {
            what.push_str(&format!(
                " ({} exists, but {})",
                login.display(),
                self.login_note
            ));
        }
        (
            Check::not_ok(
                Status::Missing,
                self.credentials_check,
                what,
                self.key_fix.to_owned(),
            ),
            false,
        )
    }
}

/// The first line `program --version` prints on stdout (a CLI may warn on stderr first),
/// within 30 s.
async fn version_of(program: &Path) -> Result<String, String> {
    let mut cmd = std::process::Command::new(program);
    cmd.arg("--version");
    let limits = Limits {
        timeout: Duration::from_secs(30),
        drain: Duration::from_millis(200),
        max_output_bytes: 4096,
        keep: Keep::First,
        merge_stderr: false,
        new_session: true,
    };
    let finished = runner::run(cmd, &limits, |_| {})
        .await
        .map_err(|e| e.to_string())?;
    let first = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    match finished.exit {
        runner::Exit::Status(s) if s.success() => Ok(first(&finished.stdout)),
        runner::Exit::TimedOut => Err("it did not answer within 30 s".into()),
        exit => Err(format!(
            "exit {:?}: {}",
            exit.code_or_signal(),
            first(&finished.stderr)
        )),
    }
}

/// git, which every project and task needs.
async fn git(path_var: Option<&OsStr>) -> Check {
    let fix = "install git (e.g. `apt install git`)".to_owned();
    let Some(path) = sandbox::resolve(Path::new("git"), path_var) else {
        return Check::not_ok(Status::Missing, "git", "not on PATH".into(), fix);
    };
    match version_of(&path).await {
        Ok(printed) => Check::ok("git", format!("{} ({printed})", path.display())),
        Err(why) => Check::not_ok(
            Status::Missing,
            "git",
            format!("{} --version failed: {why}", path.display()),
            fix,
        ),
    }
}

/// The agent sandbox: bubblewrap found and its trial run passed (`Sandbox::probe`, the one
/// start-up runs).
async fn bubblewrap(on: bool, path_var: Option<std::ffi::OsString>) -> Check {
    let name = "bubblewrap";
    if !on {
        return Check::not_ok(
            Status::Warn,
            name,
            "not checked: --sandbox off".into(),
            "every agent can act as every user; drop --sandbox off".into(),
        );
    }
    let probe = tokio::task::spawn_blocking(move || {
        let found = sandbox::resolve(Path::new("bwrap"), path_var.as_deref());
        (found, Sandbox::probe(path_var.as_deref()).map(|_| ()))
    })
    .await;
    match probe {
        Ok((Some(path), Ok(()))) => Check::ok(
            name,
            format!("{}: a trial sandbox ran `true`", path.display()),
        ),
        Ok((_, Err(Unavailable::NotInstalled))) | Ok((None, Ok(()))) => Check::not_ok(
            Status::Missing,
            name,
            "`bwrap` is not on PATH: agents would run unconfined".into(),
            "install bubblewrap (e.g. `apt install bubblewrap`), or start byre with --sandbox off (every agent can then act as every user)".into(),
        ),
        Ok((_, Err(why))) => Check::not_ok(
            Status::Missing,
            name,
            why.to_string(),
            "allow unprivileged user namespaces for bwrap (docs/sandbox.md), or start byre with --sandbox off".into(),
        ),
        Err(e) => Check::not_ok(
            Status::Missing,
            name,
            format!("the trial run did not finish: {e}"),
            "run `byre doctor` again".into(),
        ),
    }
}

/// Chromium, for CodeBolt agents' browser actions; optional.
fn chromium(path: &Path) -> Check {
    use std::os::unix::fs::PermissionsExt;
    let runnable =
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if runnable {
        Check::ok("chromium", path.display().to_string())
    } else {
        Check::not_ok(
            Status::Warn,
            "chromium",
            format!(
                "{} is not there: CodeBolt agents' browser actions fail (optional)",
                path.display()
            ),
            "install chromium, or set BYRE_CHROMIUM (--chromium) to it".into(),
        )
    }
}

/// The data dir: there (0700) or creatable, and the free space of its file system.
fn data_dir(dir: &Path) -> Vec<Check> {
    use std::os::unix::fs::PermissionsExt;
    let name = "data dir";
    let shown = dir.display();
    let other_dir = "pass --data DIR with a directory you can write".to_owned();
    // The directory itself, or the nearest one above that exists (where it would be made).
    let Some(existing) = dir.ancestors().find(|a| a.exists()) else {
        return vec![Check::not_ok(
            Status::Missing,
            name,
            format!("{shown}: no directory above it exists"),
            other_dir,
        )];
    };
    let first = if existing == dir {
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => Check::not_ok(
                Status::Missing,
                name,
                format!("{shown} is not a directory"),
                other_dir,
            ),
            Ok(_) if !writable(dir) => Check::not_ok(
                Status::Missing,
                name,
                format!("{shown} is not writable by this user"),
                other_dir,
            ),
            Ok(m) if m.permissions().mode() & 0o077 != 0 => Check::not_ok(
                Status::Warn,
                name,
                format!(
                    "{shown} is open to group or others (mode {:03o}); byre makes it 0700 at start",
                    m.permissions().mode() & 0o777
                ),
                format!("`chmod 700 {shown}`"),
            ),
            Ok(_) => Check::ok(name, format!("{shown} (0700)")),
            Err(e) => Check::not_ok(Status::Missing, name, format!("{shown}: {e}"), other_dir),
        }
    } else if existing.is_dir() && writable(existing) {
        Check::ok(
            name,
            format!("{shown} does not exist yet; byre makes it (0700) at start"),
        )
    } else {
        Check::not_ok(
            Status::Missing,
            name,
            format!(
                "{shown} cannot be made: {} is not a writable directory",
                existing.display()
            ),
            other_dir,
        )
    };
    let space = match free_bytes(existing) {
        Some(free) if free < LOW_SPACE_BYTES => Check::not_ok(
            Status::Warn,
            "free space",
            format!("{} free in {}", gib(free), existing.display()),
            "free some space: each task's worktree is a checkout of its repository, and the log grows with every turn".into(),
        ),
        Some(free) => Check::ok("free space", format!("{} free in {}", gib(free), existing.display())),
        None => Check::not_ok(
            Status::Warn,
            "free space",
            format!("cannot read the free space of {}", existing.display()),
            "check it with `df`".into(),
        ),
    };
    vec![first, space]
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Whether this user may write into `dir` (access(2)).
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) reads the NUL-terminated path and nothing else.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// The bytes an unprivileged user may still write in `dir`'s file system (statvfs(3)).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs(3) fills `stat` from the NUL-terminated path; it is read only on success.
    let stat = unsafe {
        if libc::statvfs(c.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    #[allow(clippy::useless_conversion)] // the field types differ between platforms
    let free = u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize));
    Some(free)
}
