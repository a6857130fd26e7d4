//! Codex: `codex app-server`, JSON-RPC over stdio (`vendors/codex/PROTOCOL.md`).
//!
//! - `wire`: its lines, classified and mapped to normalised items (pure).
//! - `protocol`: [`CodexProtocol`], one process's JSON-RPC state (ids, thread, turn).
//! - [`CodexDriver`]: argv, environment, and the `CODEX_HOME` byre owns.
//!
//! # Files
//!
//! Each session's own, under its `super::session_dir` (`{data}/agents/sessions/{id}/`):
//! `home/` (the CLI's `HOME`) and `codex-home/` (its `CODEX_HOME`: `config.toml`, written by
//! byre before every start, and Codex's own `sessions/` rollouts and sqlite state, which
//! `thread/resume` needs), so no agent reads another session's threads. A fork's first start
//! copies the forked thread's rollout into the fork's `CODEX_HOME` (`thread/fork` reads it
//! there); a thread kept by older builds in the shared `{data}/agents/codex/codex-home` is
//! copied the same way before it is resumed.
//!
//! # Settings (byre's environment, or `Config::agent_env`, which wins)
//!
//! - `OPENAI_BASE_URL`: the Responses API base (default `https://api.openai.com/v1`);
//!   `OPENAI_API_KEY`: the key, handed to the CLI, which sends it as a bearer token.
//! - `BYRE_CODEX_REQUEST_MAX_RETRIES`, `BYRE_CODEX_STREAM_MAX_RETRIES`: the provider's
//!   `request_max_retries` (silent retries of a 5xx) and `stream_max_retries` (announced
//!   retries: a 429, a cut stream, a 5xx once the first budget is spent); Codex's defaults
//!   (4 and 5) when unset. Tests set them low.
//! - `BYRE_CODEX_BIN`: the program, when `Config::codex_bin` is not set; else `codex` on PATH.
//!
//! # Commands the agent leaves running
//!
//! Codex runs each shell command as a background terminal in a session (and process group) of
//! its own, so killing the app-server's group does not reach it, and an interrupted turn
//! leaves it running (PROTOCOL.md §7). So: after a turn that ended interrupted with a command
//! open, byre sends `thread/backgroundTerminals/clean` (an experimental method, hence
//! `experimentalApi: true` at `initialize`); at a session's stop byre closes stdin, on which
//! the app-server kills its commands and exits, and two seconds later kills the process groups
//! of whatever descendants remain with the app-server's own (`reaper::kill_tree`). When the
//! app-server itself ends (SIGKILL, a crash, any exit), its orphaned commands are no longer
//! byre's descendants, but they carry the session's `BYRE_AGENT_SESSION`: `reaper::sweep`
//! kills their groups after every exit, and a start after byre's own death does the same
//! for every session of the log (`reaper::clear_leftovers`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use byre_beneath::{Dir, Kind, Links};
use byre_projections::sessions::Vendor;

use super::sandbox::Sandbox;
use super::{Driver, Protocol, SpawnSpec};

mod protocol;
pub mod wire;

pub use protocol::CodexProtocol;

/// Variables of byre's own environment handed to the CLI.
const PASSED_THROUGH: [&str; 8] = [
    "PATH",
    "LANG",
    "TZ",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "OPENAI_API_KEY",
];

/// The Responses API when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Starts Codex's app-server.
#[derive(Debug, Clone)]
pub struct CodexDriver {
    /// The `codex` program: `Config::codex_bin`, else `BYRE_CODEX_BIN`, else `codex` on PATH.
    pub program: PathBuf,
    /// byre's data dir (each session's directories are in its [`super::session_dir`]).
    pub data_dir: PathBuf,
    /// Variables set on top of those passed through (and read before byre's own).
    pub extra_env: Vec<(String, String)>,
    /// The sandbox the CLI runs in.
    pub sandbox: Arc<Sandbox>,
}

impl CodexDriver {
    /// A driver keeping each session's CLI state under `{data_dir}/agents/sessions/`;
    /// unconfined until [`CodexDriver::sandboxed`].
    pub fn new(
        data_dir: &Path,
        program: Option<PathBuf>,
        extra_env: Vec<(String, String)>,
    ) -> CodexDriver {
        CodexDriver {
            program: super::program_or_env(program, "BYRE_CODEX_BIN", "codex"),
            data_dir: data_dir.to_owned(),
            extra_env,
            sandbox: Arc::new(Sandbox::off()),
        }
    }

    /// The same driver, its CLI run in `sandbox`.
    pub fn sandboxed(mut self, sandbox: Arc<Sandbox>) -> CodexDriver {
        self.sandbox = sandbox;
        self
    }

    /// The session's `HOME`.
    pub fn home(&self, session_id: &str) -> PathBuf {
        super::session_home(&self.data_dir, session_id)
    }

    /// The session's `CODEX_HOME`.
    pub fn codex_home(&self, session_id: &str) -> PathBuf {
        super::session_dir(&self.data_dir, session_id).join("codex-home")
    }

    /// Copies thread `thread_id`'s rollout files from `from` (a `CODEX_HOME`) into `to`, at
    /// the same place under `sessions/`, unless `to` has it already. Both are directories an
    /// agent writes: each is walked and copied by handle (`byre_beneath`), a symlink anywhere
    /// is neither followed nor copied. A failure is logged; the thread's resume or fork then
    /// fails, recorded as the turn's error.
    fn bring_thread(&self, from: &Path, to: &Path, thread_id: &str) {
        let copied = (|| -> std::io::Result<()> {
            let Ok(from) = Dir::open(from) else {
                return Ok(());
            };
            let to = Dir::create(to)?;
            if thread_id.is_empty() || !rollouts(&to, thread_id).is_empty() {
                return Ok(());
            }
            for rel in rollouts(&from, thread_id) {
                if let Some(parent) = rel.parent() {
                    to.create_dir_all(parent)?;
                }
                from.copy_file(&rel, &to, &rel, super::MAX_TRANSCRIPT_BYTES, 0o600)?;
            }
            Ok(())
        })();
        if let Err(e) = copied {
            tracing::warn!(error = %e, from = %from.display(), "cannot copy a Codex thread");
        }
    }

    /// A setting: the last of `extra_env`, else byre's environment; empty counts as unset.
    fn setting(&self, name: &str) -> Option<String> {
        self.extra_env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.is_empty())
    }

    fn retries(&self, name: &str) -> Option<u32> {
        let value = self.setting(name)?;
        let parsed = value.trim().parse().ok();
        if parsed.is_none() {
            tracing::warn!(name, value, "not a retry count; Codex's default is used");
        }
        parsed
    }

    /// `CODEX_HOME/config.toml`: the one model provider, `byre` (the Responses API at
    /// `OPENAI_BASE_URL` with the key in `OPENAI_API_KEY`), commands that run without asking
    /// (`approval_policy = "never"`, no sandbox: the agent acts as byre's user, as Claude Code
    /// does), and nothing that calls home (update check, analytics, feedback, plugins).
    pub fn config_toml(&self) -> String {
        let base_url = self
            .setting("OPENAI_BASE_URL")
            .unwrap_or_else(|| DEFAULT_BASE_URL.into());
        let mut text = format!(
            r#"# Written by byre before each start of `codex app-server`; edits are overwritten.
model_provider = "byre"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false

[model_providers.byre]
name = "OpenAI (through byre)"
base_url = {base_url}
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
"#,
            base_url = toml::Value::String(base_url),
        );
        for (key, var) in [
            ("request_max_retries", "BYRE_CODEX_REQUEST_MAX_RETRIES"),
            ("stream_max_retries", "BYRE_CODEX_STREAM_MAX_RETRIES"),
        ] {
            if let Some(n) = self.retries(var) {
                text.push_str(&format!("{key} = {n}\n"));
            }
        }
        text
    }

    /// Makes the session's directories and (re)writes its `config.toml` when it differs. The
    /// session's directory is the agent's to write: the config is read and replaced by handle
    /// (`byre_beneath`), so a symlink planted at `config.toml` is replaced, never written
    /// through.
    fn prepare(&self, session_id: &str) {
        let prepared = (|| -> std::io::Result<()> {
            let session = Dir::create(&super::session_dir(&self.data_dir, session_id))?;
            session.create_dir_all(Path::new("home"))?;
            let codex_home = session.create_dir_all(Path::new("codex-home"))?;
            let text = self.config_toml();
            let config = Path::new("config.toml");
            let current = codex_home
                .read(config, Links::Refuse, text.len() as u64)
                .ok();
            if current.as_deref() != Some(text.as_bytes()) {
                codex_home.write(config, text.as_bytes(), 0o600)?;
            }
            Ok(())
        })();
        if let Err(e) = prepared {
            tracing::error!(error = %e, session_id, "cannot write Codex's config");
        }
    }
}

impl Driver for CodexDriver {
    fn vendor(&self) -> Vendor {
        Vendor::Codex
    }

    fn program(&self) -> (String, &'static str) {
        (
            self.program.to_string_lossy().into_owned(),
            "BYRE_CODEX_BIN",
        )
    }

    fn command(&self, spec: &SpawnSpec) -> tokio::process::Command {
        self.prepare(&spec.session_id);
        let codex_home = self.codex_home(&spec.session_id);
        let shared = self.data_dir.join("agents/codex/codex-home");
        match &spec.fork {
            Some(fork) => {
                let own = self.codex_home(&fork.session_id);
                let has_own = Dir::open(&own)
                    .is_ok_and(|d| !rollouts(&d, &fork.vendor_session_id).is_empty());
                let from = if has_own { own } else { shared };
                self.bring_thread(&from, &codex_home, &fork.vendor_session_id);
            }
            None if spec.resume => {
                self.bring_thread(&shared, &codex_home, &spec.vendor_session_id);
            }
            None => {}
        }
        let mut args: Vec<OsString> = vec!["app-server".into()];
        if let Some(mcp) = &spec.mcp {
            args.extend(mcp_overrides(mcp).into_iter().map(OsString::from));
        }
        let mut access = spec
            .access
            .clone()
            .write(super::session_dir(&self.data_dir, &spec.session_id));
        let program = if self.sandbox.is_on() {
            access.program(&self.program, std::env::var_os("PATH").as_deref())
        } else {
            self.program.clone()
        };
        let mut cmd = self.sandbox.command(&access, &program, &args);
        cmd.current_dir(&spec.cwd).env_clear();
        for name in PASSED_THROUGH {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        cmd.env("HOME", self.home(&spec.session_id))
            .env("CODEX_HOME", &codex_home)
            .env("PORT", spec.port_base.to_string());
        // Another vendor's keys and byre's own settings stay out (super::for_vendor).
        for (k, v) in super::for_vendor(&self.extra_env, Vendor::Codex) {
            cmd.env(k, v);
        }
        cmd
    }

    /// A session has a thread once Codex started one (`session.vendor_session_started`).
    fn has_conversation(&self, spec: &SpawnSpec) -> bool {
        !spec.vendor_session_id.is_empty()
    }

    fn protocol(&self, spec: &SpawnSpec) -> Box<dyn Protocol> {
        let resume = spec.resume.then(|| spec.vendor_session_id.clone());
        let protocol = CodexProtocol::new(&spec.cwd.to_string_lossy(), &spec.model, resume);
        Box::new(match &spec.fork {
            Some(fork) => protocol.forking(&fork.vendor_session_id, &fork.at),
            None => protocol,
        })
    }
}

/// The rollout files of thread `thread_id` under `codex_home/sessions/` (its
/// `YYYY/MM/DD/rollout-<timestamp>-<id>.jsonl`, PROTOCOL.md §5), relative to `codex_home`;
/// walked by handle, no symlink followed.
fn rollouts(codex_home: &Dir, thread_id: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![(PathBuf::from("sessions"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = codex_home.entries(&dir, Links::Refuse) else {
            continue;
        };
        for entry in entries {
            let path = dir.join(&entry.name);
            match entry.kind {
                Kind::Dir if depth < 4 => dirs.push((path, depth + 1)),
                Kind::File if entry.name.to_string_lossy().contains(thread_id) => found.push(path),
                _ => {}
            }
        }
    }
    found
}

/// `-c` overrides giving Codex byre's MCP server (PROTOCOL.md §9): `mcp_servers.byre.*`,
/// with timeouts high enough for a human-paced tool.
pub fn mcp_overrides(mcp: &crate::mcp_launch::McpLaunch) -> Vec<String> {
    let name = crate::mcp_launch::SERVER_NAME;
    let command = toml::Value::String(mcp.program.to_string_lossy().into_owned());
    let args = toml::Value::Array(
        mcp.args
            .iter()
            .map(|a| toml::Value::String(a.clone()))
            .collect(),
    );
    [
        format!("mcp_servers.{name}.command={command}"),
        format!("mcp_servers.{name}.args={args}"),
        format!(
            "mcp_servers.{name}.startup_timeout_sec={}",
            crate::mcp_launch::CODEX_STARTUP_TIMEOUT_SEC
        ),
        format!(
            "mcp_servers.{name}.tool_timeout_sec={}",
            crate::mcp_launch::CODEX_TOOL_TIMEOUT_SEC
        ),
    ]
    .into_iter()
    .flat_map(|kv| ["-c".to_owned(), kv])
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_overrides_are_valid_toml_values() {
        let launch = crate::mcp_launch::McpLaunch {
            program: "/opt/by re/\"byre\"".into(),
            args: vec![
                "mcp".into(),
                "--token-file".into(),
                "/d/mcp-tokens/s.token".into(),
            ],
            token_file: "/d/mcp-tokens/s.token".into(),
        };
        let argv = mcp_overrides(&launch);
        assert_eq!(argv.len(), 8);
        for pair in argv.chunks(2) {
            assert_eq!(pair[0], "-c");
            let (key, value) = pair[1].split_once('=').expect("key=value");
            let doc: toml::Table =
                toml::from_str(&format!("v = {value}")).expect("the value parses as TOML");
            if key.ends_with(".command") {
                assert_eq!(doc["v"].as_str(), Some("/opt/by re/\"byre\""));
            }
        }
    }

    #[test]
    fn the_config_points_at_the_api_and_turns_off_what_calls_home() {
        let driver = CodexDriver::new(
            Path::new("/data"),
            Some("/bin/codex".into()),
            vec![
                ("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into()),
                ("BYRE_CODEX_STREAM_MAX_RETRIES".into(), "2".into()),
                ("BYRE_CODEX_REQUEST_MAX_RETRIES".into(), "lots".into()),
            ],
        );
        let config: toml::Table = toml::from_str(&driver.config_toml()).expect("valid TOML");
        let provider = &config["model_providers"]["byre"];
        assert_eq!(provider["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(provider["env_key"].as_str(), Some("OPENAI_API_KEY"));
        assert_eq!(provider["stream_max_retries"].as_integer(), Some(2));
        assert!(
            provider.get("request_max_retries").is_none(),
            "not a number: default"
        );
        assert_eq!(config["approval_policy"].as_str(), Some("never"));
        assert_eq!(config["analytics"]["enabled"].as_bool(), Some(false));
        assert_eq!(config["features"]["plugins"].as_bool(), Some(false));
        assert_eq!(
            driver.codex_home("s1"),
            Path::new("/data/agents/sessions/s1/codex-home")
        );
    }

    #[test]
    fn a_thread_is_copied_from_another_codex_home_once_at_the_same_place() {
        let data = tempfile::tempdir().expect("temp dir");
        let driver = CodexDriver::new(data.path(), Some("/bin/codex".into()), vec![]);
        let from = driver.codex_home("a");
        let day = from.join("sessions/2026/12/04");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(day.join("rollout-2026-12-04T00-00-00-th-1.jsonl"), "x").unwrap();
        std::fs::write(day.join("rollout-2026-12-04T00-00-00-th-2.jsonl"), "y").unwrap();
        let to = driver.codex_home("b");
        // A link among them, to a file outside: neither followed nor copied.
        let outside = tempfile::tempdir().expect("temp dir");
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            day.join("rollout-2026-12-04T00-00-01-th-1.jsonl"),
        )
        .unwrap();
        driver.bring_thread(&from, &to, "th-1");
        let copied: Vec<PathBuf> = rollouts(&Dir::open(&to).unwrap(), "th-1")
            .into_iter()
            .map(|rel| to.join(rel))
            .collect();
        assert_eq!(
            copied,
            [to.join("sessions/2026/12/04/rollout-2026-12-04T00-00-00-th-1.jsonl")]
        );
        assert!(
            rollouts(&Dir::open(&to).unwrap(), "th-2").is_empty(),
            "only the forked thread"
        );
        std::fs::write(&copied[0], "kept").unwrap();
        driver.bring_thread(&from, &to, "th-1");
        assert_eq!(
            std::fs::read_to_string(&copied[0]).unwrap(),
            "kept",
            "not copied twice"
        );
    }
}
