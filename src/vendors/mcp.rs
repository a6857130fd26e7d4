//! How agent CLIs start byre's MCP server (`byre mcp`, the adapter in `crate::mcp`) for a
//! session, and the session tokens they present: [`McpHost`], owned by the agent runtime
//! (which launches, revokes and prunes) and read by `crate::app::tools` (which checks a
//! call's token).
//!
//! # Launch
//!
//! Each agent CLI starts byre's MCP server as a stdio child, launched by argv with byre's own
//! binary ([`McpHost::launch`]; Claude Code: `--mcp-config`, Codex: `-c mcp_servers.byre.*`).
//!
//! # Tokens
//!
//! A session's token is `{session_id}.{hex(SHA-256(secret ‖ session_id ‖ secret))}`, where the
//! secret is 32 random bytes kept in `{data}/mcp.secret` (mode 0600, made at the first start).
//! So a token names its session, cannot be forged without the secret, and is the same after a
//! restart (a resumed CLI keeps working). It reaches the `byre mcp` child as a file,
//! `{data}/mcp-tokens/{session_id}.token` (0600, in a 0700 directory; not under `run/`, whose files are process
//! records), never in argv or the log. A completed session's token is refused
//! (`crate::app::tools::session_of_token`) and its file removed ([`McpHost::revoke`] when the session
//! completes, [`McpHost::prune`] at start-up, before the server serves, for what a crash
//! left).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The MCP server's name in the CLIs' configs; tools reach the model as `mcp__byre__<tool>`.
pub const SERVER_NAME: &str = "byre";

/// Seconds Codex waits for one tool call: beyond the longest machine `bash` an agent may ask
/// for (3,600 s) and the 30 s byre waits past it for the reply (`app::client_tools`), so byre,
/// not Codex, says when a machine took too long.
pub const CODEX_TOOL_TIMEOUT_SEC: u64 = 3_700;
/// Seconds Codex waits for the server to start.
pub const CODEX_STARTUP_TIMEOUT_SEC: u64 = 60;

/// How an agent CLI starts byre's MCP server for one session: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLaunch {
    /// byre's binary.
    pub program: PathBuf,
    /// `["mcp", "--url", URL, "--token-file", PATH, "--role", ROLE]`.
    pub args: Vec<String>,
}

/// The server side of the agent tools: the secret behind session tokens, where the server
/// listens, and the binary agents launch.
#[derive(Debug)]
pub struct McpHost {
    secret: Vec<u8>,
    /// `http://127.0.0.1:PORT`: the running server, as the `byre mcp` child reaches it.
    url: String,
    program: PathBuf,
    token_dir: PathBuf,
}

impl McpHost {
    /// Reads `{data_dir}/mcp.secret`, making it on the first start.
    /// # Errors
    /// The secret file cannot be read or written.
    pub fn open(data_dir: &Path, url: String, program: PathBuf) -> std::io::Result<McpHost> {
        let path = data_dir.join("mcp.secret");
        let secret = match std::fs::read(&path) {
            Ok(bytes) if bytes.len() >= 32 => bytes,
            _ => {
                let mut bytes = Vec::with_capacity(32);
                bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                write_private(&path, &bytes)?;
                bytes
            }
        };
        Ok(McpHost {
            secret,
            url,
            program,
            token_dir: data_dir.join("mcp-tokens"),
        })
    }

    fn mac(&self, session_id: &str) -> String {
        let mut h = Sha256::new();
        h.update(&self.secret);
        h.update(session_id.as_bytes());
        h.update(&self.secret);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The session's token.
    pub fn token(&self, session_id: &str) -> String {
        format!("{session_id}.{}", self.mac(session_id))
    }

    /// The session a token belongs to; `None` for a malformed or forged one.
    pub fn session_of(&self, token: &str) -> Option<String> {
        let (session_id, mac) = token.rsplit_once('.')?;
        let expected = self.mac(session_id);
        // Compare in constant time.
        let same = mac.len() == expected.len()
            && mac
                .bytes()
                .zip(expected.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        same.then(|| session_id.to_owned())
    }

    /// Removes the session's token file (its session completed); a missing file is fine.
    pub fn revoke(&self, session_id: &str) {
        let path = self.token_dir.join(format!("{session_id}.token"));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, session_id, "cannot remove the MCP token file"),
        }
    }

    /// Removes every token file whose session `keep` refuses (completed or unknown sessions),
    /// e.g. files left by a server that died before [`McpHost::revoke`].
    pub fn prune(&self, keep: impl Fn(&str) -> bool) {
        let Ok(dir) = std::fs::read_dir(&self.token_dir) else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(session_id) = name.to_str().and_then(|n| n.strip_suffix(".token")) else {
                continue;
            };
            if !keep(session_id) {
                self.revoke(session_id);
            }
        }
    }

    /// Writes the session's token file and returns how to start its MCP server; `None` (and
    /// the agent runs without byre's tools) when the file cannot be written.
    pub fn launch(
        &self,
        session_id: &str,
        role: byre_projections::sessions::SessionRole,
    ) -> Option<McpLaunch> {
        let path = self.token_dir.join(format!("{session_id}.token"));
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.token_dir)
            .and_then(|()| write_private(&path, self.token(session_id).as_bytes()))
        {
            tracing::error!(error = %e, session_id, "cannot write the MCP token; the agent runs without byre's tools");
            return None;
        }
        Some(McpLaunch {
            program: self.program.clone(),
            args: vec![
                "mcp".into(),
                "--url".into(),
                self.url.clone(),
                "--token-file".into(),
                path.to_string_lossy().into_owned(),
                "--role".into(),
                crate::app::tools::role_name(role).into(),
            ],
        })
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_session_survive_a_reopen_and_cannot_be_forged() {
        let dir = tempfile::tempdir().expect("temp dir");
        let host = McpHost::open(dir.path(), "http://127.0.0.1:1".into(), "/bin/byre".into())
            .expect("open");
        let token = host.token("s1");
        assert_eq!(host.session_of(&token).as_deref(), Some("s1"));
        let again = McpHost::open(dir.path(), "http://127.0.0.1:2".into(), "/bin/byre".into())
            .expect("reopen");
        assert_eq!(again.token("s1"), token, "same secret after a restart");
        let (_, mac) = token.rsplit_once('.').expect("dot");
        assert_eq!(host.session_of(&format!("s2.{mac}")), None);
        assert_eq!(host.session_of("s1"), None);
        assert_eq!(host.session_of("s1.00"), None);
        let other = tempfile::tempdir().expect("temp dir");
        let stranger =
            McpHost::open(other.path(), String::new(), "/bin/byre".into()).expect("open");
        assert_eq!(stranger.session_of(&token), None);
    }
}
