//! byre-toolboxes: third-party MCP servers a project's agents may use beside byre's own
//! tools (CodeBolt's mcp family: `listToolsFromToolBoxes`, `executeTool`, `configureToolBox`).
//!
//! # The configuration file
//!
//! `DATA/toolboxes/<project id>.json`, one per project, in the shape MCP clients share:
//!
//! ```text
//! {"mcpServers": {"notes": {"command": "python3", "args": ["/srv/notes_mcp.py"],
//!                           "env": {"NOTES_DIR": "/srv/notes"}}}}
//! ```
//!
//! A toolbox's name is 1 to 64 letters, digits, `_` or `-`, without `--` (tools are named
//! `<toolbox>--<tool>`), and not `byre`. Only stdio servers: `command` (a program name looked
//! up on `PATH`, or a path) and its `args` are run by argv, never through a shell. A missing
//! file is no toolbox. `configureToolBox` writes the file (whole, through a renamed temporary
//! file, one writer at a time); an administrator may edit it too: it is read again at every
//! request.
//!
//! # The servers
//!
//! Each agent session starts its own server of a toolbox when it first uses it ([`Servers`]):
//! in the task's worktree, in the agent's sandbox (`byre_agents::sandbox`: the worktree and
//! its project's git directory, the session's `HOME`, a private `/tmp`, the system read-only;
//! the program must be one the sandbox shows: [`Servers`]' `program`), with only `PATH`,
//! `HOME` (the session's home), `LANG` and the configured `env`, in a session and process
//! group of its own, marked with the session
//! (`BYRE_AGENT_SESSION`, so the reaper ends what is left after the agent's exit or at the
//! next start); talked to with rmcp's client over its stdin and stdout. A server whose
//! configuration changed is replaced; one that failed is started again at the next request.
//! All stop with the session's link ([`Toolboxes::end_session`]) and with byre.

#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use byre_agents::codeboltjs::Link;
use byre_agents::sandbox::{self, Access, Sandbox};

/// Why a toolbox could not be configured, started or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A bad name or configuration.
    #[error("{0}")]
    Invalid(String),
    /// No such toolbox.
    #[error("{0}")]
    NotFound(String),
    /// The toolbox cannot be used now (its servers stopped with the session).
    #[error("{0}")]
    Conflict(String),
    /// The server did not start or answer, or its program is not one the sandbox shows.
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: a bug or an outside failure, the cause for the log.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    fn internal(cause: impl std::fmt::Display) -> Error {
        Error::Internal(cause.to_string())
    }
}

/// How long a server may take to start and answer `initialize`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call or listing may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// The name of byre's own toolbox, never configurable.
pub const BYRE: &str = "byre";

/// One configured stdio MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program (on `PATH`, or a path).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// What the toolbox is for (shown in listings).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A project's configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// The toolboxes, by name.
    #[serde(rename = "mcpServers", default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// Serialises writes of configuration files (a read-modify-write each).
static WRITES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The configuration file of a project.
pub fn config_path(data_dir: &Path, project_id: &str) -> PathBuf {
    data_dir
        .join("toolboxes")
        .join(format!("{project_id}.json"))
}

/// Checks a toolbox's name (see the module's doc).
/// # Errors
/// Invalid, saying why.
pub fn check_name(name: &str) -> Result<(), Error> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if name.is_empty() || name.len() > 64 || !ok_chars || name.contains("--") {
        return Err(Error::Invalid(format!(
            "a toolbox's name is 1 to 64 letters, digits, `_` or `-`, without `--`; not {name:?}"
        )));
    }
    if name == BYRE {
        return Err(Error::Invalid(
            "`byre` is byre's own toolbox and cannot be configured".into(),
        ));
    }
    Ok(())
}

/// Reads a project's configuration (none when the file is missing).
/// # Errors
/// Invalid: the file is not such JSON; internal: it cannot be read.
pub fn read_config(data_dir: &Path, project_id: &str) -> Result<Config, Error> {
    let path = config_path(data_dir, project_id);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => return Err(Error::internal(format!("{}: {e}", path.display()))),
    };
    let cfg: Config = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{} is not a toolbox file: {e}", path.display())))?;
    // A hand-edited file is held to the same names as `configureToolBox`: `byre` would shadow
    // byre's own toolbox and `a--b` would make `<toolbox>--<tool>` ambiguous.
    for name in cfg.servers.keys() {
        check_name(name).map_err(|e| {
            Error::Invalid(format!("{} is not a toolbox file: {e}", path.display()))
        })?;
    }
    Ok(cfg)
}

/// Parses a toolbox's configuration as `configureToolBox` gives it: a [`ServerConfig`] as
/// JSON, or `null` to remove the toolbox.
/// # Errors
/// Invalid: not such JSON, or no `command`.
pub fn parse_server_config(config: &Value) -> Result<Option<ServerConfig>, Error> {
    match config {
        Value::Null => Ok(None),
        v => {
            let s: ServerConfig = serde_json::from_value(v.clone()).map_err(|e| {
                Error::Invalid(format!(
                    "a toolbox is {{\"command\", \"args\", \"env\", \"description\"}}: {e}"
                ))
            })?;
            if s.command.trim().is_empty() {
                return Err(Error::Invalid("a toolbox needs a `command`".into()));
            }
            Ok(Some(s))
        }
    }
}

/// Sets toolbox `name` of project `project_id` to `server`, or removes it when `None`;
/// returns the project's configuration as written (whole, through a renamed temporary file,
/// one writer at a time).
/// # Errors
/// Invalid: a bad name, or an existing file that does not parse; not found: removing a
/// toolbox that is not there; internal: the file could not be written.
pub async fn write_config(
    data_dir: &Path,
    project_id: &str,
    name: &str,
    server: Option<ServerConfig>,
) -> Result<Config, Error> {
    check_name(name)?;
    let _one_writer = WRITES.lock().await;
    let mut cfg = read_config(data_dir, project_id)?;
    match server {
        Some(s) => {
            cfg.servers.insert(name.to_owned(), s);
        }
        None if cfg.servers.remove(name).is_none() => {
            return Err(Error::NotFound(format!("no toolbox `{name}` to remove")));
        }
        None => {}
    }
    let path = config_path(data_dir, project_id);
    let text = serde_json::to_string_pretty(&cfg).map_err(Error::internal)?;
    tokio::task::spawn_blocking(move || -> Result<(), Error> {
        let dir = path
            .parent()
            .ok_or_else(|| Error::internal("no toolbox directory"))?;
        std::fs::create_dir_all(dir).map_err(Error::internal)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(Error::internal)?;
        std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(Error::internal)?;
        tmp.as_file().sync_all().map_err(Error::internal)?;
        tmp.persist(&path).map_err(Error::internal)?;
        Ok(())
    })
    .await
    .map_err(Error::internal)??;
    Ok(cfg)
}

/// A started server: its MCP session and process (its group killed on drop).
struct Running {
    config: ServerConfig,
    service: RunningService<RoleClient, ()>,
    pgid: i32,
    _child: tokio::process::Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        byre_process::groups::kill_group(self.pgid);
    }
}

/// One agent session's running toolbox servers (see the module's doc).
pub struct Servers {
    session_id: String,
    /// Where the session's project's configuration is: (data dir, project id).
    project: (PathBuf, String),
    worktree: PathBuf,
    home: PathBuf,
    sandbox: Arc<Sandbox>,
    running: tokio::sync::Mutex<HashMap<String, Running>>,
    /// Process groups of the servers, for [`Servers::stop`] without the async lock.
    groups: std::sync::Mutex<HashSet<i32>>,
    stopped: AtomicBool,
}

/// A tool's result: its text (the text blocks, one per line) and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The tool said it failed.
    pub is_error: bool,
    /// Its text content.
    pub text: String,
}

impl Servers {
    /// No server yet, for session `session_id` of project `project` (data dir, project id:
    /// its configuration's place) working in `worktree`, `HOME` `home`, its servers run in
    /// `sandbox`.
    pub fn new(
        session_id: &str,
        project: (PathBuf, String),
        worktree: PathBuf,
        home: PathBuf,
        sandbox: Arc<Sandbox>,
    ) -> Servers {
        Servers {
            session_id: session_id.to_owned(),
            project,
            worktree,
            home,
            sandbox,
            running: tokio::sync::Mutex::new(HashMap::new()),
            groups: std::sync::Mutex::new(HashSet::new()),
            stopped: AtomicBool::new(false),
        }
    }

    /// Kills every server's process group; later requests are refused.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let groups: Vec<i32> = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for g in groups {
            byre_process::groups::kill_group(g);
        }
    }

    /// The program of toolbox `name` as its sandbox shows it, with what it needs added to
    /// `access`: a program in the system directories or the task's worktree as it is, one of
    /// node's install (`npx`) with that install read-only. Any other place is refused, since
    /// the configuration is the agent's to write: binding a program's directory would let it
    /// name one in another task's worktree or the user's checkout and read it.
    /// # Errors
    /// [`Error::Unavailable`]: no such program, or one the sandbox does not show.
    fn program(&self, name: &str, command: &str, access: &mut Access) -> Result<PathBuf, Error> {
        let path_var = std::env::var_os("PATH");
        let given = Path::new(command);
        let given = if !given.is_absolute() && given.components().count() > 1 {
            self.worktree.join(given)
        } else {
            given.to_owned()
        };
        let not_found = || {
            Error::Unavailable(format!(
                "the toolbox `{name}` could not start `{command}`: no such program"
            ))
        };
        let found = sandbox::resolve(&given, path_var.as_deref()).ok_or_else(not_found)?;
        let worktree = std::fs::canonicalize(&self.worktree).unwrap_or(self.worktree.clone());
        if sandbox::under_system(&found) || found.starts_with(&worktree) {
            return Ok(found);
        }
        let node_prefix = sandbox::resolve(Path::new("node"), path_var.as_deref())
            .and_then(|n| n.parent()?.parent().map(Path::to_owned));
        if node_prefix.is_some_and(|p| found.starts_with(p)) {
            return Ok(access.program(&found, path_var.as_deref()));
        }
        Err(Error::Unavailable(format!(
            "the toolbox `{name}` could not start {}: its sandbox shows programs of the \
             system directories (/usr, /opt, …), of node's install and of the task's worktree \
             only",
            found.display()
        )))
    }

    async fn start(&self, name: &str, config: &ServerConfig) -> Result<Running, Error> {
        if let Err(e) = byre_beneath::Dir::make(&self.home) {
            tracing::warn!(error = %e, "cannot make the session's HOME");
        }
        let path_var = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        let mut access = Access::new(&self.worktree)
            .worktree(&self.worktree)
            .write(&self.home);
        let program = if self.sandbox.is_on() {
            self.program(name, &config.command, &mut access)?
        } else {
            PathBuf::from(&config.command)
        };
        let args: Vec<std::ffi::OsString> = config.args.iter().map(Into::into).collect();
        let mut cmd = self.sandbox.command(&access, &program, &args);
        cmd.env_clear()
            .env("PATH", path_var)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .envs(&config.env)
            .env(byre_process::groups::SESSION_ENV, &self.session_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        byre_process::groups::own_session(cmd.as_std_mut());
        let mut child = cmd.spawn().map_err(|e| {
            Error::Unavailable(format!(
                "the toolbox `{name}` could not start `{}`: {e}",
                config.command
            ))
        })?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pgid);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            byre_process::groups::kill_group(pgid);
            return Err(Error::internal("the toolbox's pipes are missing"));
        };
        let service = match tokio::time::timeout(START_TIMEOUT, ().serve((stdout, stdin))).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                byre_process::groups::kill_group(pgid);
                return Err(Error::Unavailable(format!(
                    "the toolbox `{name}` did not start MCP: {e}"
                )));
            }
            Err(_) => {
                byre_process::groups::kill_group(pgid);
                return Err(Error::Unavailable(format!(
                    "the toolbox `{name}` did not answer MCP's initialize within {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
        };
        tracing::info!(session_id = %self.session_id, toolbox = name, pid = pgid, "toolbox server started");
        Ok(Running {
            config: config.clone(),
            service,
            pgid,
            _child: child,
        })
    }

    /// Runs `f` on toolbox `name`'s server, starting (or restarting, after a change of its
    /// configuration) it first; a server whose request failed at the MCP level is dropped.
    /// The lock is held only to find or start the server, not during the request, so a slow
    /// tool holds up no other.
    async fn with_server<T, F>(&self, name: &str, config: &ServerConfig, f: F) -> Result<T, Error>
    where
        F: AsyncFnOnce(&rmcp::Peer<RoleClient>) -> Result<T, rmcp::ServiceError>,
    {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(Error::Conflict("the agent's session has ended".into()));
        }
        let (peer, pgid) = {
            let mut running = self.running.lock().await;
            if running.get(name).is_some_and(|r| r.config != *config) {
                self.forget(running.remove(name));
            }
            if !running.contains_key(name) {
                let r = self.start(name, config).await?;
                running.insert(name.to_owned(), r);
            }
            let r = running
                .get(name)
                .ok_or_else(|| Error::internal("the toolbox vanished"))?;
            (r.service.peer().clone(), r.pgid)
        };
        let why = match tokio::time::timeout(CALL_TIMEOUT, f(&peer)).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => format!("the toolbox `{name}` failed: {e}"),
            Err(_) => format!(
                "the toolbox `{name}` did not answer within {} s",
                CALL_TIMEOUT.as_secs()
            ),
        };
        // Started afresh next time (unless another request replaced it meanwhile).
        let mut running = self.running.lock().await;
        if running.get(name).is_some_and(|r| r.pgid == pgid) {
            self.forget(running.remove(name));
        }
        Err(Error::Unavailable(why))
    }

    fn forget(&self, r: Option<Running>) {
        if let Some(r) = r {
            self.groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&r.pgid);
        }
    }

    /// The tools of configured toolbox `name` (its server started if need be).
    /// # Errors
    /// Not found: no such toolbox for the session's project; unavailable: the server did not
    /// start or answer; as [`configured`].
    pub async fn list_tools(&self, name: &str) -> Result<Vec<Tool>, Error> {
        let config = self.config_of(name)?;
        self.with_server(name, &config, async |s| s.list_all_tools().await)
            .await
    }

    /// Calls tool `tool` of configured toolbox `name` with `arguments` (a JSON object).
    /// # Errors
    /// As [`Servers::list_tools`]; a tool's own failure is an output with `is_error`.
    pub async fn call(
        &self,
        name: &str,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<ToolOutput, Error> {
        let config = self.config_of(name)?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = self
            .with_server(name, &config, async |s| s.call_tool(params).await)
            .await?;
        let v = serde_json::to_value(&result).map_err(Error::internal)?;
        let text: Vec<String> = v["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|b| match b["text"].as_str() {
                        Some(t) => t.to_owned(),
                        None => b.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(ToolOutput {
            is_error: v["isError"].as_bool().unwrap_or(false),
            text: text.join("\n"),
        })
    }

    fn config_of(&self, name: &str) -> Result<ServerConfig, Error> {
        read_config(&self.project.0, &self.project.1)?
            .servers
            .remove(name)
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "no toolbox `{name}` is configured for this project"
                ))
            })
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The toolbox servers of every CodeBolt agent session that used one, by session id. A
/// session's go when its link ends ([`Toolboxes::end_session`], which the CodeBolt hub calls
/// through `Hub::on_unregister`) and with byre.
#[derive(Default)]
pub struct Toolboxes {
    by_session: dashmap::DashMap<String, Arc<Servers>>,
}

impl Toolboxes {
    /// The servers of `link`'s session (of project `project`: data dir, project id), made at
    /// its first use. A link that ended meanwhile gets servers already stopped, which refuse
    /// every request.
    pub fn of(&self, link: &Link, project: (PathBuf, String)) -> Arc<Servers> {
        let servers = self
            .by_session
            .entry(link.session_id.clone())
            .or_insert_with(|| {
                Arc::new(Servers::new(
                    &link.session_id,
                    project,
                    link.worktree.clone(),
                    link.home.clone(),
                    link.sandbox.clone(),
                ))
            })
            .clone();
        // Checked after the insert: an unregister either ran before (seen here) or runs after
        // (and removes these).
        if link.ended() {
            self.end_session(&link.session_id);
        }
        servers
    }

    /// Stops the servers of session `session_id`.
    pub fn end_session(&self, session_id: &str) {
        if let Some((_, servers)) = self.by_session.remove(session_id) {
            servers.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolbox_names_are_checked() {
        for ok in ["notes", "a_b-1", &"x".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "byre", "a--b", "a b", "a/b", "ü", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_file_is_the_shared_mcp_servers_shape() {
        let c: Config = serde_json::from_str(
            r#"{"mcpServers": {"n": {"command": "python3", "args": ["s.py"], "env": {"K": "v"}}}}"#,
        )
        .unwrap();
        assert_eq!(c.servers["n"].args, ["s.py"]);
        assert!(serde_json::from_str::<Config>(r#"{"mcpServers": {"n": {"url": "x"}}}"#).is_err());
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_config(dir.path(), "p").unwrap(), Config::default());
        // A hand-edited file with a name configureToolBox refuses is refused whole.
        std::fs::create_dir_all(dir.path().join("toolboxes")).unwrap();
        for bad in ["byre", "a--b", "../x"] {
            let file = format!(r#"{{"mcpServers": {{"{bad}": {{"command": "true"}}}}}}"#);
            std::fs::write(config_path(dir.path(), "p"), file).unwrap();
            let err = read_config(dir.path(), "p").unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{bad}: {err:?}");
        }
    }
}
