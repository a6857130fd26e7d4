//! Server configuration: where the data lives, who may call, and defaults.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use byre_app::settings::{
    AuthMode, ReviewConfig, DEFAULT_CLAUDE_REVIEWER, DEFAULT_CODEX_REVIEWER,
};

/// Everything `startup::run` needs besides the listener.
#[derive(Debug, Clone)]
pub struct Config {
    /// The data directory: `byre.redb`, `byre.lock`, `worktrees/`.
    pub data_dir: PathBuf,
    /// How callers are identified.
    pub auth: AuthMode,
    /// The model new users start with.
    pub default_model: String,
    /// How often an idle event stream gets a heartbeat comment.
    pub heartbeat: Duration,
    /// How often a task terminal's socket is pinged; one silent for three of these (no pong,
    /// no message) is closed as half-open (`getTaskTerminal`).
    pub terminal_ping: Duration,
    /// How long a running turn may go without a stream event before it counts as stuck.
    pub stuck_after_seconds: u64,
    /// The `claude` program; `None`: `BYRE_CLAUDE_BIN`, else `claude` on PATH.
    pub claude_bin: Option<PathBuf>,
    /// The `codex` program; `None`: `BYRE_CODEX_BIN`, else `codex` on PATH.
    pub codex_bin: Option<PathBuf>,
    /// Variables set in every agent's environment on top of those passed through from byre's
    /// own (`ANTHROPIC_*`, `OPENAI_API_KEY`, …); e.g. a model API endpoint per server. Codex's
    /// settings (`OPENAI_BASE_URL`, `BYRE_CODEX_*_MAX_RETRIES`) are read here first.
    pub agent_env: Vec<(String, String)>,
    /// The byre binary agents start as their MCP server (`byre mcp`); `None`: this process's
    /// own executable.
    pub byre_bin: Option<PathBuf>,
    /// The `tailscale` binary that publishes previews; `None`: `tailscale` on PATH, if any
    /// (resolved at start-up; still `None` then: previews are recorded, not published).
    pub tailscale_bin: Option<PathBuf>,
    /// Bytes of committed events held for event streams (`serve --stream-buffer`): a reader
    /// further behind reads from the log (`log::bus`).
    pub stream_buffer_bytes: usize,
    /// Snapshot reviews (`serve --reviews`, on by default there; off in `Config::new`, so a
    /// server built without asking runs no reviewers).
    pub reviews: ReviewConfig,
    /// The Chromium agents' browser actions drive (`serve --chromium`); `None`:
    /// `/usr/bin/chromium`.
    pub chromium_bin: Option<PathBuf>,
    /// The directories `codebolt:<agent>` models may name agents in (`serve
    /// --codebolt-agents`, repeatable; `BYRE_CODEBOLT_AGENTS`, `:`-separated). None by default:
    /// a CodeBolt agent then runs only from its task's worktree.
    pub codebolt_agents: Vec<PathBuf>,
    /// Hosts (`host`: any port) and `host:port`s agents' browser pages may open (`serve
    /// --browser-allow`); each task's own preview ports on loopback are allowed besides.
    pub browser_allow: Vec<String>,
    /// When agent processes may start and when idle ones stop (`serve --agent-memory-floor`,
    /// `--agent-idle-stop`; both off in `Config::new`).
    pub agents: byre_agents::AgentLimits,
    /// Host names served besides the listen address and loopback (`serve --public-host`,
    /// `NAME` or `NAME:PORT`): the tailscale name, a reverse proxy's name (`http::edge`).
    pub public_hosts: Vec<String>,
    /// Whether every agent process runs in its bubblewrap sandbox (`serve --sandbox on|off`;
    /// on by default, in `Config::new` too). Off, every agent can act as every user
    /// (`docs/sandbox.md`); `byre_agents::sandbox::Sandbox::start` decides at start-up.
    pub sandbox: bool,
    /// Where projects' repositories may be (`serve --repos-root`, canonical), checked by
    /// `createProject` (docs/security.md); `None`: anywhere (local mode without roots, and
    /// `Config::new` for embedders and tests); `Some` and empty: no new project (token and
    /// tailscale modes without roots, [`repos_roots`]).
    pub repos_roots: Option<Vec<PathBuf>>,
    /// How long a request body may take to arrive after its head (`serve --body-timeout`);
    /// past it the request gets 408 and its connection is closed. Zero: no deadline.
    pub body_timeout: Duration,
    /// Open connections one non-loopback peer (an IPv4 address, an IPv6 /64) may hold
    /// (`serve --max-peer-connections`); one more is closed as it is accepted. 0: no cap.
    pub max_peer_connections: usize,
    /// Open connections from loopback, all of it one peer (`serve
    /// --max-loopback-connections`). 0: no cap, the default: every agent of byre's own, and
    /// every user of a local proxy, arrives from loopback.
    pub max_loopback_connections: usize,
    /// Sign-in attempts (`POST /auth/signin`) one peer may make per [`Config::signin_window`]
    /// (`serve --signin-attempts`); past it 429 with `Retry-After`. 0: no limit.
    pub signin_attempts: u32,
    /// The window of [`Config::signin_attempts`] (`serve --signin-window`): the attempts
    /// come back one by one over it.
    pub signin_window: Duration,
}

/// `serve --body-timeout`'s default.
pub const DEFAULT_BODY_TIMEOUT: &str = "30s";
/// `serve --max-peer-connections`' default.
pub const DEFAULT_MAX_PEER_CONNECTIONS: usize = 128;
/// `serve --signin-attempts`' default.
pub const DEFAULT_SIGNIN_ATTEMPTS: u32 = 300;
/// `serve --signin-window`'s default.
pub const DEFAULT_SIGNIN_WINDOW: &str = "1h";

/// `serve --agent-memory-floor`'s default: room for one more Claude Code process (100–350 MB)
/// with some to spare.
pub const DEFAULT_AGENT_MEMORY_FLOOR: &str = "512MiB";
/// `serve --agent-idle-stop`'s default.
pub const DEFAULT_AGENT_IDLE_STOP: &str = "15m";

/// Parses a memory size for `--agent-memory-floor`: `0` in any unit (`0`, `0B`, `0MiB`: no
/// floor), or a number with a unit of B, KiB, MiB or GiB (`512MiB`).
/// # Errors
/// What is wrong with the text, for the user.
pub fn parse_memory_floor(text: &str) -> Result<u64, String> {
    byre_log::bus::parse_size_or_zero(text).map(|n| n as u64)
}

/// Parses a duration for `--agent-idle-stop`: `0` (never), or a whole number with a unit of
/// `ms`, `s`, `m` or `h` (`15m`, `90s`).
/// # Errors
/// What is wrong with the text, for the user.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 15m, 90s, 0 for never)"))?;
    let ms_per_unit: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("`{text}`: the unit is one of ms, s, m, h")),
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("`{text}` is too long"))
}

impl Config {
    /// A config with defaults for `data_dir` and `auth`.
    pub fn new(data_dir: PathBuf, auth: AuthMode) -> Config {
        Config {
            data_dir,
            auth,
            default_model: "sonnet".into(),
            heartbeat: Duration::from_secs(15),
            terminal_ping: Duration::from_secs(10),
            stuck_after_seconds: 300,
            claude_bin: None,
            codex_bin: None,
            agent_env: Vec::new(),
            byre_bin: None,
            tailscale_bin: None,
            stream_buffer_bytes: byre_log::bus::DEFAULT_LIMIT_BYTES,
            reviews: ReviewConfig::default(),
            chromium_bin: None,
            codebolt_agents: std::env::var_os("BYRE_CODEBOLT_AGENTS")
                .map(|v| std::env::split_paths(&v).collect())
                .unwrap_or_default(),
            browser_allow: byre_browser::DEFAULT_ALLOW
                .iter()
                .map(|h| h.to_string())
                .collect(),
            agents: byre_agents::AgentLimits::default(),
            public_hosts: Vec::new(),
            sandbox: true,
            repos_roots: None,
            body_timeout: Duration::from_secs(30),
            max_peer_connections: DEFAULT_MAX_PEER_CONNECTIONS,
            max_loopback_connections: 0,
            signin_attempts: DEFAULT_SIGNIN_ATTEMPTS,
            signin_window: Duration::from_secs(3600),
        }
    }

    /// What the application layer starts with.
    pub fn app_settings(&self) -> byre_app::settings::Settings {
        byre_app::settings::Settings {
            data_dir: self.data_dir.clone(),
            auth: self.auth.clone(),
            default_model: self.default_model.clone(),
            stuck_after_seconds: self.stuck_after_seconds,
            tailscale_bin: self.tailscale_bin.clone(),
            reviews: self.reviews.clone(),
            repos_roots: self.repos_roots.clone(),
            codebolt_agents: self.codebolt_agents.clone(),
        }
    }

    /// What the agent runtime starts with.
    pub fn agent_settings(&self) -> byre_agents::Settings {
        byre_agents::Settings {
            data_dir: self.data_dir.clone(),
            claude_bin: self.claude_bin.clone(),
            codex_bin: self.codex_bin.clone(),
            agent_env: self.agent_env.clone(),
            codebolt_agents: self.codebolt_agents.clone(),
            limits: self.agents.clone(),
        }
    }

    /// The log file.
    pub fn log_path(&self) -> PathBuf {
        log_path(&self.data_dir)
    }
}

/// The log file of a data directory.
pub fn log_path(data_dir: &Path) -> PathBuf {
    data_dir.join("byre.redb")
}

/// The default data directory: `$XDG_DATA_HOME/byre`, else `~/.local/share/byre`, else
/// `./byre-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("byre");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(h).join(".local/share/byre");
    }
    PathBuf::from("byre-data")
}

/// The default token file: `$XDG_CONFIG_HOME/byre/tokens.toml`, else
/// `~/.config/byre/tokens.toml`, else `./byre-tokens.toml`. Outside the data dir, which agents'
/// worktrees live under (docs/security.md).
pub fn default_tokens_path() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("byre/tokens.toml");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(h).join(".config/byre/tokens.toml");
    }
    PathBuf::from("byre-tokens.toml")
}

/// The token file `serve --auth token` reads: `given`, else [`default_tokens_path`].
/// # Errors
/// None given and a `tokens.toml` in the data dir (where earlier builds kept it): byre refuses to
/// start rather than read it from where every agent's worktree lives, and says where to move it.
pub fn tokens_path(given: Option<PathBuf>, data_dir: &Path) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path);
    }
    let default = default_tokens_path();
    let old = data_dir.join("tokens.toml");
    if old.exists() {
        return Err(format!(
            "{} is inside the data dir, out of place for secrets: move it to {} (chmod 600), or name it with --tokens",
            old.display(),
            default.display()
        ));
    }
    Ok(default)
}

/// The roots `createProject` accepts repositories under ([`Config::repos_roots`]): those
/// given (`serve --repos-root`, canonicalised); none given, anywhere in local mode and nowhere
/// in token and tailscale modes (docs/security.md, "Projects").
/// # Errors
/// A root that is not an existing directory.
pub fn repos_roots(given: &[PathBuf], auth: &AuthMode) -> Result<Option<Vec<PathBuf>>, String> {
    if given.is_empty() && !auth.authenticates() {
        return Ok(None);
    }
    given
        .iter()
        .map(|root| match std::fs::canonicalize(root) {
            Ok(p) if p.is_dir() => Ok(p),
            _ => Err(format!(
                "--repos-root {}: no such directory",
                root.display()
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Checks a login: 1 to 256 bytes, no spaces or control characters, and not `byre` (the actor
/// name of byre's own events).
/// # Errors
/// Why it is refused, for the user.
pub fn check_login(login: &str) -> Result<(), String> {
    if login.is_empty()
        || login.len() > 256
        || login.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "login {login:?} must be 1 to 256 characters without spaces or control characters"
        ));
    }
    if login == "byre" {
        return Err("the login `byre` is reserved for byre's own events".into());
    }
    Ok(())
}

/// Reads a token file: TOML with a `[tokens]` table of `"<token>" = "<login>"`, readable and
/// writable by its owner only.
/// # Errors
/// A message naming the file when it cannot be read or parsed, holds no token, or is readable
/// or writable by group or others (the fix, `chmod 600`, named).
pub fn read_tokens(path: &Path) -> Result<HashMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct File {
        tokens: HashMap<String, String>,
    }
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "the token file {} is readable or writable by group or others (mode {mode:03o}): run `chmod 600 {}`",
                path.display(),
                path.display()
            ));
        }
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| {
            format!(
                "cannot read {}: {e} (the token file is TOML with a [tokens] table of \"<token>\" = \"<login>\"; \
                 --tokens FILE names another)",
                path.display()
            )
        })?;
    let file: File = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if file.tokens.is_empty() {
        return Err(format!("{} maps no tokens", path.display()));
    }
    if let Some((_, login)) = file.tokens.iter().find(|(t, l)| {
        t.trim().len() < 16 || t.chars().any(char::is_whitespace) || check_login(l).is_err()
    }) {
        return Err(format!(
            "{}: every token must be at least 16 characters without spaces and map to a valid login (see {login:?})",
            path.display()
        ));
    }
    Ok(file.tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_limits_parse_zero_as_off_and_sizes_and_durations_with_units() {
        assert_eq!(parse_memory_floor("0"), Ok(0));
        assert_eq!(parse_memory_floor("0B"), Ok(0));
        assert_eq!(parse_memory_floor("00MiB"), Ok(0));
        assert_eq!(parse_memory_floor("512MiB"), Ok(512 << 20));
        assert_eq!(parse_memory_floor("1GiB"), Ok(1 << 30));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "15", "m", "-1m", "15 parsecs", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        for bad in ["", "lots", "12XB", "0XB"] {
            assert!(parse_memory_floor(bad).is_err(), "{bad:?}");
        }
    }
}
