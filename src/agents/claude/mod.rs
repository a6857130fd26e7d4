//! Claude Code: `claude -p --input-format stream-json --output-format stream-json --verbose`
//! (`vendors/claude-code/PROTOCOL.md`).
//!
//! - `wire`: its output lines, parsed (pure).
//! - [`ClaudeDriver`]: argv and environment; [`ClaudeProtocol`]: input lines, and each output
//!   line's [`Reaction`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use byre_beneath::{Dir, Links};
use byre_projections::sessions::{Usage, Vendor, VendorItem};
use serde_json::json;

use super::sandbox::Sandbox;
use super::{Driver, Image, Protocol, Reaction, SpawnSpec};

pub mod wire;

/// Variables of byre's own environment handed to the CLI (besides every `ANTHROPIC_*`).
const PASSED_THROUGH: [&str; 10] = [
    "CLAUDE_CODE_OAUTH_TOKEN",
    "PATH",
    "LANG",
    "TZ",
    "CLAUDE_CODE_MAX_RETRIES",
    "API_TIMEOUT_MS",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
];

/// How long the CLI waits for byre's MCP server to connect before its first request
/// (`MCP_CONNECT_TIMEOUT_MS`, in ms; the CLI's own default is 5 s).
const MCP_CONNECT_TIMEOUT_MS: &str = "60000";

/// Starts and speaks to Claude Code.
#[derive(Debug, Clone)]
pub struct ClaudeDriver {
    /// The `claude` program: `BYRE_CLAUDE_BIN`, else `claude` on PATH.
    pub program: PathBuf,
    /// byre's data dir: each session's `HOME` and `CLAUDE_CONFIG_DIR` live in its own
    /// [`super::session_dir`] (`home/`, `claude/`), so `--resume` finds its sessions and no
    /// agent reads another's.
    pub data_dir: PathBuf,
    /// Variables set on top of those passed through.
    pub extra_env: Vec<(String, String)>,
    /// The sandbox the CLI runs in.
    pub sandbox: Arc<Sandbox>,
}

impl ClaudeDriver {
    /// A driver keeping each session's CLI state under `{data_dir}/agents/sessions/`; the
    /// program is `program`, else `BYRE_CLAUDE_BIN`, else `claude` on PATH. Unconfined until
    /// [`ClaudeDriver::sandboxed`].
    pub fn new(
        data_dir: &Path,
        program: Option<PathBuf>,
        extra_env: Vec<(String, String)>,
    ) -> ClaudeDriver {
        ClaudeDriver {
            program: super::program_or_env(program, "BYRE_CLAUDE_BIN", "claude"),
            data_dir: data_dir.to_owned(),
            extra_env,
            sandbox: Arc::new(Sandbox::off()),
        }
    }

    /// The same driver, its CLI run in `sandbox`.
    pub fn sandboxed(mut self, sandbox: Arc<Sandbox>) -> ClaudeDriver {
        self.sandbox = sandbox;
        self
    }

    /// The session's `HOME`.
    pub fn home(&self, session_id: &str) -> PathBuf {
        super::session_home(&self.data_dir, session_id)
    }

    /// The session's `CLAUDE_CONFIG_DIR`.
    pub fn config_dir(&self, session_id: &str) -> PathBuf {
        super::session_dir(&self.data_dir, session_id).join("claude")
    }

    /// Where the CLI keeps a session's transcript: `projects/<cwd, every non-alphanumeric
    /// character replaced by ->/<id>.jsonl` (PROTOCOL.md §7) under the session's config dir.
    pub fn transcript_path(
        &self,
        session_id: &str,
        cwd: &Path,
        vendor_session_id: &str,
    ) -> PathBuf {
        transcript_in(&self.config_dir(session_id), cwd, vendor_session_id)
    }

    /// Where builds before per-session directories kept every session's transcripts:
    /// `{data}/agents/claude/config`.
    fn shared_config_dir(&self) -> PathBuf {
        self.data_dir.join("agents/claude/config")
    }

    /// Copies the forked session's transcript to where the CLI looks for it in this session's
    /// config dir from the fork's directory `cwd`: sessions are kept per directory
    /// (PROTOCOL.md §7; `--resume` from another directory finds nothing) and per byre
    /// session, and a fork runs in its own worktree. Both config dirs are the agents' to write,
    /// so the copy goes by handle (`byre_beneath`): the forked transcript is read only as a
    /// regular file reached through no symlink, and the copy replaces whatever is at its name
    /// (a planted symlink included) without following it. A failure is logged and the CLI's
    /// start then fails, recorded as the turn's error.
    fn bring_transcript(&self, fork: &super::ForkSpec, session_id: &str, cwd: &Path) {
        let from_rel = transcript_rel(&fork.cwd, &fork.vendor_session_id);
        // Where the forked session's transcript is: its own config dir, else the shared one.
        let find = || {
            let own = self.config_root(&fork.session_id).ok();
            match own {
                Some(own) if own.exists(&from_rel) => Some(own),
                _ => Dir::open(&self.shared_config_dir())
                    .ok()
                    .filter(|d| d.exists(&from_rel)),
            }
        };
        let holds_cut = |from: &Dir| {
            from.read(&from_rel, Links::Refuse, super::MAX_TRANSCRIPT_BYTES)
                .is_ok_and(|t| String::from_utf8_lossy(&t).contains(&fork.at))
        };
        // The forked session's CLI may not have written its transcript yet, or still be
        // writing the message the fork is cut at (it writes lazily): wait for both, at most
        // 10 s, so the copy holds it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let from = loop {
            let found = find();
            if found.as_ref().is_some_and(holds_cut) || std::time::Instant::now() >= deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let Some(from) = from else {
            tracing::warn!("the forked session's transcript is not there");
            return;
        };
        let to_rel = transcript_rel(cwd, &fork.vendor_session_id);
        if let Err(e) = self
            .config_root(session_id)
            .and_then(|to| copy_transcript(&from, &from_rel, &to, &to_rel))
        {
            tracing::warn!(error = %e, "cannot copy the forked session's transcript");
        }
    }

    /// The session's config dir, made if missing, as a handle.
    fn config_root(&self, session_id: &str) -> std::io::Result<Dir> {
        Dir::create(&super::session_dir(&self.data_dir, session_id))?
            .create_dir_all(Path::new("claude"))
    }
}

/// A transcript's path under a config dir: `projects/<cwd, every non-alphanumeric character
/// replaced by ->/<id>.jsonl` (PROTOCOL.md §7).
fn transcript_rel(cwd: &Path, vendor_session_id: &str) -> PathBuf {
    let encoded: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    Path::new("projects")
        .join(encoded)
        .join(format!("{vendor_session_id}.jsonl"))
}

fn transcript_in(config_dir: &Path, cwd: &Path, vendor_session_id: &str) -> PathBuf {
    config_dir.join(transcript_rel(cwd, vendor_session_id))
}

/// Copies the transcript `from_rel` beneath `from` to `to_rel` beneath `to`, making its
/// directory; nothing followed on either side.
fn copy_transcript(from: &Dir, from_rel: &Path, to: &Dir, to_rel: &Path) -> std::io::Result<()> {
    if let Some(dir) = to_rel.parent() {
        to.create_dir_all(dir)?;
    }
    from.copy_file(from_rel, to, to_rel, super::MAX_TRANSCRIPT_BYTES, 0o600)
        .map(|_| ())
}

fn control(request_id: &str, request: serde_json::Value) -> String {
    json!({ "type": "control_request", "request_id": request_id, "request": request }).to_string()
}

impl Driver for ClaudeDriver {
    fn vendor(&self) -> Vendor {
        Vendor::Claude
    }

    fn program(&self) -> (String, &'static str) {
        (
            self.program.to_string_lossy().into_owned(),
            "BYRE_CLAUDE_BIN",
        )
    }

    fn command(&self, spec: &SpawnSpec) -> tokio::process::Command {
        let home = self.home(&spec.session_id);
        let config_dir = self.config_dir(&spec.session_id);
        for dir in [&home, &config_dir] {
            if let Err(e) = Dir::make(dir) {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot make the session's directory");
            }
        }
        let mut args: Vec<OsString> = [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-mode",
            "bypassPermissions",
        ]
        .map(OsString::from)
        .to_vec();
        let mut push = |a: &[&str]| args.extend(a.iter().map(OsString::from));
        if !spec.model.is_empty() {
            push(&["--model", &spec.model]);
        }
        match (&spec.fork, spec.resume) {
            (_, true) => {
                push(&["--resume", &spec.vendor_session_id]);
            }
            (Some(fork), false) => {
                // PROTOCOL.md §7 and the e2/e3 transcripts: the forked session resumed, cut
                // after the assistant message `at`, under byre's own id for the fork.
                self.bring_transcript(fork, &spec.session_id, &spec.cwd);
                push(&["--resume", &fork.vendor_session_id, "--fork-session"]);
                push(&["--resume-session-at", &fork.at]);
                push(&["--session-id", &spec.vendor_session_id]);
            }
            (None, false) => {
                push(&["--session-id", &spec.vendor_session_id]);
            }
        }
        if let Some(mcp) = &spec.mcp {
            // PROTOCOL.md §8: a stdio server, started before the first `system/init`.
            let config = json!({"mcpServers": {crate::mcp_launch::SERVER_NAME: {
                "type": "stdio",
                "command": mcp.program,
                "args": mcp.args,
            }}});
            push(&["--mcp-config", &config.to_string(), "--strict-mcp-config"]);
            push(&[
                "--allowedTools",
                &format!("mcp__{}", crate::mcp_launch::SERVER_NAME),
            ]);
        }
        // The session's own directories, read-write; the CLI's install, read-only.
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
        for (k, v) in std::env::vars_os() {
            let name = k.to_string_lossy();
            if name.starts_with("ANTHROPIC_") || PASSED_THROUGH.contains(&name.as_ref()) {
                cmd.env(&k, &v);
            }
        }
        cmd.env("HOME", &home)
            .env("CLAUDE_CONFIG_DIR", &config_dir)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            // The CLI waits for its MCP servers only 5 s by default, then sends the first
            // request without their tools ("No such tool available: mcp__byre__…"); on a
            // loaded machine `byre mcp` can take longer to start, so wait up to 60 s.
            .env("MCP_CONNECT_TIMEOUT_MS", MCP_CONNECT_TIMEOUT_MS)
            .env("PORT", spec.port_base.to_string());
        // Another vendor's keys and byre's own settings stay out (super::for_vendor).
        for (k, v) in super::for_vendor(&self.extra_env, Vendor::Claude) {
            cmd.env(k, v);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            // Bypass mode refuses root without it (PROTOCOL.md §1).
            cmd.env("IS_SANDBOX", "1");
        }
        cmd
    }

    /// Whether the session's config dir holds its transcript; one kept in the shared config
    /// dir of older builds is first copied into the session's own (by handle, as
    /// [`ClaudeDriver::bring_transcript`] copies).
    fn has_conversation(&self, spec: &SpawnSpec) -> bool {
        let rel = transcript_rel(&spec.cwd, &spec.vendor_session_id);
        let Ok(own) = self.config_root(&spec.session_id) else {
            return false;
        };
        if own.exists(&rel) {
            return true;
        }
        Dir::open(&self.shared_config_dir())
            .and_then(|shared| copy_transcript(&shared, &rel, &own, &rel))
            .is_ok()
    }

    fn protocol(&self, _spec: &SpawnSpec) -> Box<dyn Protocol> {
        Box::new(ClaudeProtocol::default())
    }
}

/// One Claude Code process's stdio: stream-json lines in, [`wire::parse`] on each line out.
/// Its only state is the CLI's cumulative cost, turned into each turn's own.
#[derive(Debug, Default)]
pub struct ClaudeProtocol {
    /// `total_cost_usd` of the last result line, in millionths of a dollar.
    last_total_cost: u64,
    /// The uuid of the running turn's last main-conversation `assistant` line: the turn's
    /// `last_vendor_id`, where a fork of its snapshot is cut (`--resume-session-at`).
    last_assistant_uuid: Option<String>,
    /// The running turn's tokens: of its finished model calls, and of the one streaming.
    turn_usage: Usage,
    call_usage: Usage,
}

impl Protocol for ClaudeProtocol {
    fn start(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn message(&mut self, text: &str, images: &[Image], _input_id: u64) -> Vec<String> {
        let content = if images.is_empty() {
            json!(text)
        } else {
            let mut blocks: Vec<serde_json::Value> = images
                .iter()
                .map(|i| json!({"type": "image", "source": {"type": "base64", "media_type": i.content_type, "data": base64::engine::general_purpose::STANDARD.encode(&i.bytes)}}))
                .collect();
            if !text.is_empty() {
                blocks.push(json!({"type": "text", "text": text}));
            }
            json!(blocks)
        };
        vec![json!({"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": null}).to_string()]
    }

    fn interrupt(&mut self) -> Vec<String> {
        vec![control(
            &uuid::Uuid::new_v4().to_string(),
            json!({"subtype": "interrupt"}),
        )]
    }

    fn set_model(&mut self, model: &str) -> Vec<String> {
        vec![control(
            &uuid::Uuid::new_v4().to_string(),
            json!({"subtype": "set_model", "model": model}),
        )]
    }

    fn on_line(&mut self, line: &str) -> Reaction {
        if let Some(uuid) = wire::assistant_uuid(line) {
            self.last_assistant_uuid = Some(uuid);
        }
        match wire::parse(line) {
            wire::Parsed::Items(mut items) => {
                for item in &mut items {
                    if let VendorItem::TurnEnded(t) = item {
                        let total = t.cost_micro_usd;
                        t.cost_micro_usd = total.saturating_sub(self.last_total_cost);
                        self.last_total_cost = total;
                        t.last_vendor_id = self.last_assistant_uuid.take();
                        self.turn_usage = Usage::default();
                        self.call_usage = Usage::default();
                    }
                }
                Reaction {
                    items,
                    ..Reaction::default()
                }
            }
            wire::Parsed::Delta(text) => Reaction {
                delta: Some(text),
                ..Reaction::default()
            },
            wire::Parsed::CallUsage { started, usage } => {
                if started {
                    self.turn_usage = self.turn_usage + self.call_usage;
                    self.call_usage = usage;
                } else {
                    // `message_delta` counts the call's output so far; its input, when given,
                    // is the call's whole input.
                    self.call_usage.output_tokens = usage.output_tokens;
                    if usage.input_tokens > 0 {
                        self.call_usage.input_tokens = usage.input_tokens;
                    }
                }
                Reaction {
                    usage: Some(self.turn_usage + self.call_usage),
                    ..Reaction::default()
                }
            }
            wire::Parsed::ControlRequest {
                request_id,
                subtype,
            } => Reaction {
                replies: vec![refusal(
                    &request_id,
                    &format!("byre does not answer `{subtype}` requests"),
                )],
                ..Reaction::default()
            },
            wire::Parsed::RateLimit(info) => Reaction {
                rate_limits: Some(info),
                ..Reaction::default()
            },
            wire::Parsed::Known => Reaction::default(),
        }
    }
}

/// A `control_response` refusing the CLI's request `request_id`.
fn refusal(request_id: &str, why: &str) -> String {
    json!({"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": why}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn_end(r: &Reaction) -> &byre_projections::sessions::TurnEnded {
        match r.items.as_slice() {
            [VendorItem::TurnEnded(t)] => t,
            other => panic!("a turn end expected: {other:?}"),
        }
    }

    #[test]
    fn a_turn_end_names_the_turns_last_assistant_message_and_none_without_one() {
        let mut p = ClaudeProtocol::default();
        let result =
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{}}"#;
        for uuid in ["a-1", "a-2"] {
            let line = format!(
                r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"text","text":"x"}}]}},"parent_tool_use_id":null,"uuid":"{uuid}"}}"#
            );
            p.on_line(&line);
        }
        assert_eq!(
            turn_end(&p.on_line(result)).last_vendor_id.as_deref(),
            Some("a-2")
        );
        assert_eq!(
            turn_end(&p.on_line(result)).last_vendor_id,
            None,
            "a turn without an assistant message names none"
        );
    }

    #[test]
    fn a_forks_first_start_resumes_the_forked_session_cut_under_its_own_id() {
        let data = tempfile::TempDir::new().unwrap();
        let driver = ClaudeDriver::new(data.path(), Some("/bin/claude".into()), vec![]);
        let source_cwd = data.path().join("wt-a");
        let source = driver.transcript_path("s0", &source_cwd, "src-id");
        std::fs::create_dir_all(source.parent().unwrap()).unwrap();
        std::fs::write(&source, "{}\n").unwrap();
        let spec = SpawnSpec {
            session_id: "s".into(),
            vendor_session_id: "fork-id".into(),
            model: String::new(),
            cwd: data.path().join("wt-b"),
            port_base: 20_000,
            resume: false,
            socket_token: String::new(),
            socket_port: 0,
            mcp: None,
            access: super::super::sandbox::Access::new(data.path().join("wt-b")),
            fork: Some(super::super::ForkSpec {
                session_id: "s0".into(),
                vendor_session_id: "src-id".into(),
                at: "a-1".into(),
                cwd: source_cwd,
            }),
        };
        let cmd = driver.command(&spec);
        let argv: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = argv.join(" ");
        assert!(
            joined.contains(
                "--resume src-id --fork-session --resume-session-at a-1 --session-id fork-id"
            ),
            "{joined}"
        );
        assert!(
            driver.transcript_path("s", &spec.cwd, "src-id").exists(),
            "the forked transcript is where the CLI looks from the fork's directory"
        );
    }

    #[test]
    fn a_transcript_in_the_shared_dir_of_older_builds_is_adopted_and_others_sessions_are_not_seen()
    {
        let data = tempfile::TempDir::new().unwrap();
        let driver = ClaudeDriver::new(data.path(), Some("/bin/claude".into()), vec![]);
        let cwd = data.path().join("wt");
        let shared = transcript_in(&driver.shared_config_dir(), &cwd, "v1");
        std::fs::create_dir_all(shared.parent().unwrap()).unwrap();
        std::fs::write(&shared, "{}\n").unwrap();
        let spec = |session: &str| SpawnSpec {
            session_id: session.into(),
            vendor_session_id: "v1".into(),
            model: String::new(),
            cwd: cwd.clone(),
            port_base: 20_000,
            resume: false,
            socket_token: String::new(),
            socket_port: 0,
            mcp: None,
            fork: None,
            access: super::super::sandbox::Access::new(&cwd),
        };
        assert!(
            driver.has_conversation(&spec("s1")),
            "adopted from the shared dir"
        );
        assert!(driver.transcript_path("s1", &cwd, "v1").exists());
        std::fs::remove_file(&shared).unwrap();
        assert!(
            !driver.has_conversation(&spec("s2")),
            "another session's own transcript is not this one's"
        );
        assert_ne!(driver.config_dir("s1"), driver.config_dir("s2"));
    }
}
