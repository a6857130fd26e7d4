//! How agent CLIs start byre's MCP server (`byre mcp`, the byre crate's `mcp` adapter) for a
//! session, and the session tokens they present: [`McpHost`], owned by the agent runtime
//! (which launches, revokes and prunes) and read by byre-app's `tools` (which checks a
//! call's token).
//!
//! # Launch
//!
//! Each agent CLI starts byre's MCP server as a stdio child, launched by argv with byre's own
//! binary ([`McpHost::launch`]; Claude Code: `--mcp-config`, Codex: `-c mcp_servers.byre.*`).
//!
//! # Tokens
//!
//! A session's token is `{session_id}.{64 hex digits}`: 32 random bytes drawn when the
//! session's first process starts, kept in `{data}/mcp-tokens/{session_id}.token` (0600, in a
//! 0700 directory; not under `run/`, whose files are process records), so a token is derived
//! from nothing an agent can read, and a restarted server's resumed CLI presents the same one.
//! The file is the server's record; a token is valid while its file holds it
//! ([`McpHost::session_of`], constant-time compare). It reaches only the session's `byre mcp`
//! child: inside the agent's sandbox the session's own file, alone, is bound read-only at
//! [`crate::sandbox::MCP_TOKEN_PATH`] (`--token-file`, never argv or the log); the
//! directory and every other session's file are not there. A completed session's token is
//! refused (byre-app's `tools::session_of_token`) and its file removed ([`McpHost::revoke`]
//! when the session completes, [`McpHost::prune`] at start-up, before the server serves, for
//! what a crash left). Each tool call is then checked against the session's own role and task
//! from the fold (byre-app's `tools::refusal`), whatever role the child claims.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use byre_projections::sessions::SessionRole;
use sha2::{Digest, Sha256};

/// The MCP server's name in the CLIs' configs; tools reach the model as `mcp__byre__<tool>`.
pub const SERVER_NAME: &str = "byre";

/// Seconds Codex waits for one tool call: beyond the longest machine `bash` an agent may ask
/// for (3,600 s) and the 30 s byre waits past it for the reply (byre-app's `tools::machine`), so byre,
/// not Codex, says when a machine took too long.
pub const CODEX_TOOL_TIMEOUT_SEC: u64 = 3_700;
/// Seconds Codex waits for the server to start.
pub const CODEX_STARTUP_TIMEOUT_SEC: u64 = 60;

/// How an agent CLI starts byre's MCP server for one session: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLaunch {
    /// byre's binary.
    pub program: PathBuf,
    /// `["mcp", "--url", URL, "--token-file", PATH, "--role", ROLE]`, `PATH` as the child sees
    /// it.
    pub args: Vec<String>,
    /// The session's token file on the host (what a sandbox binds at the `--token-file` path).
    pub token_file: PathBuf,
}

/// The server side of the agent tools: where session tokens are kept, where the server
/// listens, and the binary agents launch.
#[derive(Debug)]
pub struct McpHost {
    /// `http://127.0.0.1:PORT`: the running server, as the `byre mcp` child reaches it.
    url: String,
    program: PathBuf,
    token_dir: PathBuf,
}

impl McpHost {
    /// The host of the server whose data dir is `data_dir`. An `mcp.secret` of older builds
    /// (tokens derived from it) is removed: no token is derived from a file any more.
    /// # Errors
    /// The old secret file exists but cannot be removed.
    pub fn open(data_dir: &Path, url: String, program: PathBuf) -> std::io::Result<McpHost> {
        match std::fs::remove_file(data_dir.join("mcp.secret")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(McpHost {
            url,
            program,
            token_dir: data_dir.join("mcp-tokens"),
        })
    }

    /// The session's token file; `None` for an id that could not be a file name of its own.
    fn token_path(&self, session_id: &str) -> Option<PathBuf> {
        let plain = !session_id.is_empty()
            && session_id.len() <= 128
            && session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        plain.then(|| self.token_dir.join(format!("{session_id}.token")))
    }

    fn stored(&self, session_id: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.token_path(session_id)?).ok()?;
        let token = text.trim();
        (token.len() > session_id.len() + 1).then(|| token.to_owned())
    }

    /// The session's token: the one kept in its file, else a new one (32 random bytes), kept.
    /// # Panics
    /// Never for a byre session id; an id no file may be named after has no token, and one
    /// that cannot be kept is still returned (no call will match it).
    pub fn token(&self, session_id: &str) -> String {
        if let Some(t) = self.stored(session_id) {
            return t;
        }
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        let hex: String = Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let token = format!("{session_id}.{hex}");
        let kept = self.token_path(session_id).map(|path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.token_dir)
                .and_then(|()| write_private(&path, token.as_bytes()))
        });
        if let Some(Err(e)) = kept {
            tracing::error!(error = %e, session_id, "cannot keep the MCP token");
        }
        token
    }

    /// The session a token belongs to; `None` for a malformed, forged or revoked one.
    pub fn session_of(&self, token: &str) -> Option<String> {
        let (session_id, _) = token.split_once('.')?;
        let expected = self.stored(session_id)?;
        // Compare in constant time.
        let same = token.len() == expected.len()
            && token
                .bytes()
                .zip(expected.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        same.then(|| session_id.to_owned())
    }

    /// Removes the session's token file (its session completed); a missing file is fine.
    pub fn revoke(&self, session_id: &str) {
        let Some(path) = self.token_path(session_id) else {
            return;
        };
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

    /// Keeps the session's token and returns how to start its MCP server, the child reading
    /// the token at `token_file_seen` (the sandbox's fixed path) or, `None`, at the file
    /// itself; `None` (and the agent runs without byre's tools) when the token cannot be kept.
    pub fn launch(
        &self,
        session_id: &str,
        role: SessionRole,
        token_file_seen: Option<&Path>,
    ) -> Option<McpLaunch> {
        let token = self.token(session_id);
        let path = self.token_path(session_id)?;
        if self.stored(session_id).as_deref() != Some(token.as_str()) {
            tracing::error!(
                session_id,
                "the MCP token was not kept; the agent runs without byre's tools"
            );
            return None;
        }
        let seen = token_file_seen.unwrap_or(&path);
        Some(McpLaunch {
            program: self.program.clone(),
            args: vec![
                "mcp".into(),
                "--url".into(),
                self.url.clone(),
                "--token-file".into(),
                seen.to_string_lossy().into_owned(),
                "--role".into(),
                role_name(role).into(),
            ],
            token_file: path,
        })
    }
}

/// A session role as `byre mcp --role` takes it (`implementer`, `lead`, `reviewer`); `None`
/// for anything else.
pub fn parse_role(text: &str) -> Option<SessionRole> {
    match text {
        "implementer" => Some(SessionRole::Implementer),
        "lead" => Some(SessionRole::Lead),
        "reviewer" => Some(SessionRole::Reviewer),
        _ => None,
    }
}

/// The name [`parse_role`] reads.
pub fn role_name(role: SessionRole) -> &'static str {
    match role {
        SessionRole::Implementer => "implementer",
        SessionRole::Lead => "lead",
        SessionRole::Reviewer => "reviewer",
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
    fn tokens_are_random_per_session_survive_a_reopen_and_cannot_be_forged() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("mcp.secret"), "old").expect("old secret");
        let host = McpHost::open(dir.path(), "http://127.0.0.1:1".into(), "/bin/byre".into())
            .expect("open");
        assert!(
            !dir.path().join("mcp.secret").exists(),
            "the old secret is gone"
        );
        let token = host.token("s1");
        assert_eq!(host.session_of(&token).as_deref(), Some("s1"));
        assert_ne!(host.token("s2"), token);
        let again = McpHost::open(dir.path(), "http://127.0.0.1:2".into(), "/bin/byre".into())
            .expect("reopen");
        assert_eq!(again.token("s1"), token, "the same token after a restart");
        let (_, mac) = token.split_once('.').expect("dot");
        assert_eq!(host.session_of(&format!("s2.{mac}")), None);
        for forged in ["s1", "s1.00", "", ".", "../x.y", "s3.abc"] {
            assert_eq!(host.session_of(forged), None, "{forged}");
        }
        let other = tempfile::tempdir().expect("temp dir");
        let stranger =
            McpHost::open(other.path(), String::new(), "/bin/byre".into()).expect("open");
        assert_eq!(stranger.session_of(&token), None);
        host.revoke("s1");
        assert_eq!(host.session_of(&token), None, "revoked");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("mcp-tokens/s2.token"))
            .expect("kept")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "only byre's user reads it");
    }

    #[test]
    fn a_launch_names_the_token_file_where_the_child_sees_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let host = McpHost::open(dir.path(), "http://x".into(), "/bin/byre".into()).expect("open");
        let role = byre_projections::sessions::SessionRole::Implementer;
        let inside = Path::new(crate::sandbox::MCP_TOKEN_PATH);
        let launch = host.launch("s1", role, Some(inside)).expect("launch");
        let at = launch
            .args
            .iter()
            .position(|a| a == "--token-file")
            .expect("flag");
        assert_eq!(launch.args[at + 1], crate::sandbox::MCP_TOKEN_PATH);
        assert_eq!(launch.token_file, dir.path().join("mcp-tokens/s1.token"));
        let plain = host.launch("s1", role, None).expect("launch");
        assert_eq!(plain.args[at + 1], launch.token_file.to_string_lossy());
    }

    #[test]
    fn roles_read_back_from_their_names() {
        for role in [
            SessionRole::Implementer,
            SessionRole::Lead,
            SessionRole::Reviewer,
        ] {
            assert_eq!(parse_role(role_name(role)), Some(role));
        }
        assert_eq!(parse_role("admin"), None);
    }
}
