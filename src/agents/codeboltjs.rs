//! CodeBolt agents: a Node program using `@codebolt/codeboltjs` that connects back to byre's
//! `/codebolt` WebSocket (the byre crate's endpoint, joined to the session by [`hub`]), behind
//! the same [`Driver`]/[`Protocol`] as the CLIs. The protocol's "lines" are the socket's frames (and the endpoint's records of the
//! requests it served), not the process's stdout.
//!
//! The model names the agent: `codebolt:<agent>`, where `<agent>` is a directory holding
//! `index.js` (the upstream agent server's convention) or a `.js` file, and only one inside
//! a configured agents directory (`serve --codebolt-agents DIR`, repeatable) or inside the
//! task's own worktree ([`entry_of`]): a bare name is looked up in the agents directories, an
//! absolute path must lie inside one of them or the worktree once resolved; anything else is
//! refused, since node runs the file named and prints its failing source line. byre runs
//! `node <entry>` in the task's worktree, in its own process group, with only `PATH`, `HOME`,
//! `SOCKET_PORT` (byre's port), `agentId` and `threadToken` (the session's secret, see
//! [`hub`]), `parentId=byre`, and the configured agent environment.
//!
//! Mapping: the user's message → `messageResponse`; `sendMessage` and `chatnotify`
//! `agentTextResponse` → `agent.text`; each served request → `tool.call` (`<type>/<action>`,
//! input the frame) and `tool.result` (the reply); `*notify` `…Request`/`…Result` →
//! `tool.call`/`tool.result` by `toolUseId`; `processStoped` → `turn.ended`;
//! interrupt → `stopProcessClicked`.
//!
//! - [`hub`]: the transport, the [`Hub`] of [`Link`]s joining a socket to its session.
//! - [`frames`]: pure: a frame's generation, its kind and the reply type its client awaits.
//! - [`commands`]: the agent's terminal commands, in its sandbox, through the shared runner.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use byre_projections::sessions::{
    AgentText, ToolCall, ToolResult, TurnEnded, TurnOutcome, Usage, Vendor, VendorItem,
    VendorUnrecognized,
};
use serde_json::{json, Value};

use super::sandbox::Sandbox;
use super::{Driver, Image, Protocol, Reaction, SpawnSpec};
use frames::text;

pub mod commands;
pub mod frames;
pub mod hub;

pub use hub::{Hub, Link, Llm, Store};

/// The `HOME` of CodeBolt agents and their terminal commands: `<data>/agents/codebolt/home`
/// (not the worktree, where tools would leave their dotfiles for the end-of-turn commit).
pub fn home_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("agents/codebolt/home")
}

/// The entry script `model` (`codebolt:<agent>`) names, and the directory to bind read-only for
/// its code (`None`: inside the worktree, bound already): a bare name (one component) is
/// `<dir>/<name>` in the first of `agents_dirs` holding it; an absolute path must lie, once
/// resolved (symlinks, `..`), inside one of `agents_dirs` or inside `worktree`. A directory
/// means its `index.js`.
/// # Errors
/// A message naming the allowed places: the model names nothing there.
pub fn entry_of(
    agents_dirs: &[PathBuf],
    model: &str,
    worktree: Option<&Path>,
) -> Result<(PathBuf, Option<PathBuf>), String> {
    let name = model.strip_prefix("codebolt:").unwrap_or(model);
    let roots: Vec<PathBuf> = agents_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let refused = || {
        let places: Vec<String> = agents_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let places = if places.is_empty() {
            "none is configured: serve --codebolt-agents DIR".to_owned()
        } else {
            places.join(", ")
        };
        format!(
            "`{model}` names no CodeBolt agent in the agents directories ({places}) or in the \
             task's worktree; byre runs CodeBolt agents only from there"
        )
    };
    let p = Path::new(name);
    let found = if p.is_absolute() {
        std::fs::canonicalize(p).ok()
    } else {
        let plain = p.components().count() == 1
            && matches!(p.components().next(), Some(std::path::Component::Normal(_)));
        if !plain {
            return Err(refused());
        }
        roots
            .iter()
            .map(|r| r.join(p))
            .find(|c| c.exists())
            .and_then(|c| std::fs::canonicalize(c).ok())
    };
    let found = found.ok_or_else(refused)?;
    let entry = if found.is_dir() {
        found.join("index.js")
    } else {
        found
    };
    if !entry.is_file() {
        return Err(refused());
    }
    if let Some(root) = roots.iter().find(|r| entry.starts_with(r)) {
        return Ok((entry, Some(root.clone())));
    }
    let in_worktree = worktree
        .and_then(|w| std::fs::canonicalize(w).ok())
        .is_some_and(|w| entry.starts_with(w));
    if in_worktree {
        return Ok((entry, None));
    }
    Err(refused())
}

/// Starts CodeBolt agents.
pub struct CodeboltDriver {
    /// Where `codebolt:<agent>` models may name agents (`serve --codebolt-agents`).
    agents_dirs: Vec<PathBuf>,
    /// byre's data dir: each agent's `HOME` is `home/` in its session's
    /// [`super::session_dir`].
    data_dir: PathBuf,
    sandbox: Arc<Sandbox>,
    node: PathBuf,
    /// byre's own `NODE_PATH`, passed on (where a shared `@codebolt/codeboltjs` lives).
    node_path: Option<std::ffi::OsString>,
    extra_env: Vec<(String, String)>,
}

impl CodeboltDriver {
    /// A driver whose agents live in `agents_dirs`; `node` is `$BYRE_NODE`, else `node` on
    /// `PATH`.
    pub fn new(
        data_dir: &Path,
        agents_dirs: Vec<PathBuf>,
        extra_env: Vec<(String, String)>,
    ) -> Self {
        let node = std::env::var_os("BYRE_NODE")
            .map(PathBuf::from)
            .unwrap_or_else(|| "node".into());
        CodeboltDriver {
            agents_dirs,
            data_dir: data_dir.to_owned(),
            sandbox: Arc::new(Sandbox::off()),
            node,
            node_path: std::env::var_os("NODE_PATH").filter(|p| !p.is_empty()),
            extra_env,
        }
    }

    /// The same driver, its agents run in `sandbox`.
    pub fn sandboxed(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }
}

impl Driver for CodeboltDriver {
    fn vendor(&self) -> Vendor {
        Vendor::Codebolt
    }

    fn command(&self, spec: &SpawnSpec) -> tokio::process::Command {
        let dir = super::session_dir(&self.data_dir, &spec.session_id);
        let home = dir.join("home");
        if let Err(e) = byre_beneath::Dir::make(&home) {
            tracing::warn!(error = %e, "cannot make the session's HOME");
        }
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        // The session's own HOME; the agent's code (every agent's directory, or none when it is
        // in the worktree) and NODE_PATH's modules read-only, as code (`Access::code`: never
        // inside byre's data dir or its user's home).
        let mut access = spec.access.clone().write(&dir);
        let (entry, code) = match entry_of(&self.agents_dirs, &spec.model, Some(&spec.cwd)) {
            Ok(found) => found,
            Err(why) => {
                // Nothing of the named place is bound or run: node only says why and exits.
                let node = if self.sandbox.is_on() {
                    access.program(&self.node, Some(&path))
                } else {
                    self.node.clone()
                };
                let script = format!("process.stderr.write({:?}); process.exit(2)", why);
                let mut cmd = self
                    .sandbox
                    .command(&access, &node, &["-e".into(), script.into()]);
                cmd.current_dir(&spec.cwd).env_clear().env("PATH", &path);
                return cmd;
            }
        };
        if let Some(code) = code {
            access = access.code(code);
        }
        let configured = self
            .extra_env
            .iter()
            .filter(|(k, _)| k == "NODE_PATH")
            .map(|(_, v)| std::ffi::OsString::from(v));
        for p in self.node_path.iter().cloned().chain(configured) {
            for d in std::env::split_paths(&p).filter(|d| d.is_absolute() && d.exists()) {
                access = access.code(d);
            }
        }
        let node = if self.sandbox.is_on() {
            access.program(&self.node, Some(&path))
        } else {
            self.node.clone()
        };
        let mut cmd = self
            .sandbox
            .command(&access, &node, &[entry.into_os_string()]);
        cmd.current_dir(&spec.cwd)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("SOCKET_PORT", spec.socket_port.to_string())
            .env("agentId", &spec.socket_token)
            .env("threadToken", &spec.socket_token)
            .env("parentId", "byre")
            .env("PORT", spec.port_base.to_string());
        if let Some(p) = &self.node_path {
            cmd.env("NODE_PATH", p);
        }
        for (k, v) in super::for_vendor(&self.extra_env, Vendor::Codebolt) {
            cmd.env(k, v);
        }
        cmd
    }

    fn program(&self) -> (String, &'static str) {
        (self.node.display().to_string(), "BYRE_NODE")
    }

    fn has_conversation(&self, _spec: &SpawnSpec) -> bool {
        false
    }

    fn protocol(&self, _spec: &SpawnSpec) -> Box<dyn Protocol> {
        Box::new(CodeboltProtocol::default())
    }
}

/// One CodeBolt agent's conversation.
#[derive(Debug, Default)]
pub struct CodeboltProtocol {
    n: u64,
    interrupted: bool,
    started_us: i64,
}

impl CodeboltProtocol {
    /// The tool-use id of a frame: its `requestId` when that is a short string or a number,
    /// else a fresh `cb-<n>` (an agent may send any JSON, of any size, as its id).
    fn id(&mut self, given: &Value) -> String {
        match given {
            Value::String(s) if !s.is_empty() && s.len() <= 256 => s.to_owned(),
            Value::Number(n) => n.to_string(),
            _ => {
                self.n += 1;
                format!("cb-{}", self.n)
            }
        }
    }
}

fn cut(s: String) -> String {
    if s.len() <= 64 * 1024 {
        return s;
    }
    let mut end = 64 * 1024;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The text of a reply for `tool.result`: its content, result or error, else the frame.
fn reply_text(reply: &Value) -> String {
    for k in [
        "error",
        "content",
        "result",
        "response",
        "completion",
        "data",
        "message",
    ] {
        match reply.get(k) {
            None | Some(Value::Null) => {}
            Some(v) => return cut(text(v)),
        }
    }
    cut(reply.to_string())
}

impl Protocol for CodeboltProtocol {
    fn start(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn message(&mut self, text: &str, _images: &[Image], input_id: u64) -> Vec<String> {
        self.interrupted = false;
        self.started_us = chrono::Utc::now().timestamp_micros();
        let message_id = format!("byre-{input_id}");
        vec![json!({
            "type": "messageResponse",
            "message": {
                "userMessage": text, "currentFile": "", "selectedAgent": {"id": "", "name": ""},
                "mentionedFiles": [], "mentionedFullPaths": [], "mentionedFolders": [],
                "mentionedMCPs": [], "uploadedImages": [], "mentionedAgents": [],
                "messageId": message_id, "threadId": "", "selection": null, "remixPrompt": null
            },
            "sender": {"senderType": "user", "senderInfo": {"name": "user"}},
            "templateType": "userChat",
            "data": {"text": text},
            "messageId": message_id,
            "timestamp": chrono::Utc::now().timestamp_millis().to_string(),
        })
        .to_string()]
    }

    fn interrupt(&mut self) -> Vec<String> {
        self.interrupted = true;
        vec![json!({"type": "stopProcessClicked"}).to_string()]
    }

    fn set_model(&mut self, _model: &str) -> Vec<String> {
        Vec::new()
    }

    fn on_line(&mut self, line: &str) -> Reaction {
        let mut r = Reaction::default();
        let unrecognized = |reason: &str| {
            VendorItem::Unrecognized(VendorUnrecognized {
                vendor: Vendor::Codebolt,
                reason: reason.into(),
                raw: cut_raw(line),
                size: line.len() as u64,
            })
        };
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            r.items.push(unrecognized("not JSON"));
            return r;
        };
        let raw = String::new();
        if let Some(kind) = v["__byre"].as_str() {
            match kind {
                "served" => {
                    r.ack = v["ack"].as_u64();
                    let req = &v["request"];
                    let reply = &v["reply"];
                    // The endpoint's id (the v2 requestId, or byre's own for v1).
                    let id = self.id(if v["id"].is_null() {
                        &req["requestId"]
                    } else {
                        &v["id"]
                    });
                    let name = match req["action"].as_str() {
                        Some(a) => format!("{}/{a}", text(&req["type"])),
                        None => text(&req["type"]),
                    };
                    r.items.push(VendorItem::ToolCall(ToolCall {
                        cut: None,
                        tool_use_id: id.clone(),
                        name,
                        input: req.clone(),
                        raw: cut_raw(line),
                    }));
                    if reply["streamed"] != true {
                        r.items.push(VendorItem::ToolResult(ToolResult {
                            cut: None,
                            tool_use_id: id,
                            output: reply_text(reply),
                            is_error: reply["success"] == false,
                            raw,
                        }));
                    }
                }
                "stream_finished" => {
                    let id = self.id(&v["requestId"]);
                    r.items.push(VendorItem::ToolResult(ToolResult {
                        cut: None,
                        tool_use_id: id,
                        output: format!("exit code {}", v["exitCode"]),
                        is_error: v["exitCode"] != 0,
                        raw: cut_raw(line),
                    }));
                }
                "unknown" => r
                    .items
                    .push(unrecognized("unknown CodeBolt request (v1: not answered)")),
                _ => r.items.push(unrecognized("malformed CodeBolt frame")),
            }
            return r;
        }
        let ty = v["type"].as_str().unwrap_or("");
        let action = v["action"].as_str().unwrap_or("");
        match ty {
            "sendMessage" => {
                let id = self.id(&v["requestId"]);
                r.items.push(VendorItem::Text(AgentText {
                    cut: None,
                    text: text(&v["message"]),
                    message_id: id,
                    raw: cut_raw(line),
                }));
            }
            "processStoped" => {
                let error = text(&v["error"]);
                let outcome = if self.interrupted {
                    TurnOutcome::Interrupted
                } else if error.is_empty() {
                    TurnOutcome::Completed
                } else {
                    TurnOutcome::Failed
                };
                let duration_ms = if self.started_us > 0 {
                    ((chrono::Utc::now().timestamp_micros() - self.started_us) / 1000).max(0) as u64
                } else {
                    0
                };
                self.interrupted = false;
                r.items.push(VendorItem::TurnEnded(TurnEnded {
                    cut: None,
                    turn: 0,
                    outcome,
                    summary: false,
                    result: text(&v["message"]),
                    error,
                    usage: Usage::default(),
                    cost_micro_usd: 0,
                    duration_ms,
                    num_turns: 0,
                    api_error_status: None,
                    rate_limits: None,
                    review: false,
                    last_vendor_id: None,
                    raw: cut_raw(line),
                }));
            }
            "chatnotify" if action == "agentTextResponse" => {
                let id = self.id(&v["toolUseId"]);
                r.items.push(VendorItem::Text(AgentText {
                    cut: None,
                    text: text(&v["content"]),
                    message_id: id,
                    raw: cut_raw(line),
                }));
            }
            "chatnotify"
                if action == "processStartedRequest" || action == "processStoppedRequest" => {}
            "processStarted" | "processFinished" => {}
            t if t.ends_with("notify") => {
                let id = self.id(&v["toolUseId"]);
                if action.ends_with("Result") || v.get("content").is_some() {
                    r.items.push(VendorItem::ToolResult(ToolResult {
                        cut: None,
                        tool_use_id: id,
                        output: cut(text(&v["content"])),
                        is_error: v["isError"] == true,
                        raw: cut_raw(line),
                    }));
                } else {
                    r.items.push(VendorItem::ToolCall(ToolCall {
                        cut: None,
                        tool_use_id: id,
                        name: format!("{t}/{action}"),
                        input: v["data"].clone(),
                        raw: cut_raw(line),
                    }));
                }
            }
            "notificationEvent" | "runProject" | "browserEvent" | "crawlerEvent"
            | "projectEvent" => {
                let id = self.id(&v["requestId"]);
                let name = if action.is_empty() {
                    ty.to_owned()
                } else {
                    format!("{ty}/{action}")
                };
                r.items.push(VendorItem::ToolCall(ToolCall {
                    cut: None,
                    tool_use_id: id.clone(),
                    name,
                    input: v.clone(),
                    raw: cut_raw(line),
                }));
                r.items.push(VendorItem::ToolResult(ToolResult {
                    cut: None,
                    tool_use_id: id,
                    output: String::new(),
                    is_error: false,
                    raw,
                }));
            }
            _ => r.items.push(unrecognized("unknown CodeBolt frame")),
        }
        r
    }
}

fn cut_raw(line: &str) -> String {
    let mut end = line.len().min(4096);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_names_an_agent_in_the_agents_directories_or_the_worktree_only() {
        let top = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(top.path()).unwrap();
        let (agents, wt, outside) = (top.join("agents"), top.join("wt"), top.join("outside"));
        for d in [agents.join("boss"), wt.join("mine"), outside.clone()] {
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("index.js"), "").unwrap();
        }
        std::fs::write(outside.join("tokens.toml"), "secret").unwrap();
        std::os::unix::fs::symlink(&outside, agents.join("escape")).unwrap();
        let dirs = [agents.clone()];
        let ok = |m: &str| entry_of(&dirs, m, Some(&wt));
        assert_eq!(
            ok("codebolt:boss").unwrap(),
            (agents.join("boss/index.js"), Some(agents.clone()))
        );
        assert_eq!(
            ok(&format!("codebolt:{}", agents.join("boss").display())).unwrap(),
            (agents.join("boss/index.js"), Some(agents.clone()))
        );
        assert_eq!(
            ok(&format!("codebolt:{}", wt.join("mine").display())).unwrap(),
            (wt.join("mine/index.js"), None)
        );
        for bad in [
            format!("codebolt:{}", outside.join("tokens.toml").display()),
            format!("codebolt:{}", outside.display()),
            format!("codebolt:{}/../outside", agents.display()),
            "codebolt:escape".to_owned(),
            "codebolt:../outside".to_owned(),
            "codebolt:nobody".to_owned(),
            "codebolt:/etc/passwd".to_owned(),
        ] {
            let why = ok(&bad).unwrap_err();
            assert!(why.contains("agents directories"), "{bad}: {why}");
        }
        assert!(entry_of(&[], "codebolt:boss", None)
            .unwrap_err()
            .contains("--codebolt-agents"));
    }

    #[test]
    fn the_agent_gets_byres_node_path_and_no_openai_variables() {
        let top = tempfile::tempdir().unwrap();
        let agents = std::fs::canonicalize(top.path()).unwrap();
        std::fs::write(agents.join("a.js"), "").unwrap();
        let mut d = CodeboltDriver::new(
            Path::new("/data"),
            vec![agents.clone()],
            vec![("OPENAI_API_KEY".into(), "k".into())],
        );
        d.node_path = Some("/shared/node_modules".into());
        let spec = SpawnSpec {
            session_id: "s".into(),
            vendor_session_id: String::new(),
            model: format!("codebolt:{}", agents.join("a.js").display()),
            cwd: "/wt".into(),
            port_base: 4000,
            resume: false,
            socket_token: "cb-t".into(),
            socket_port: 7777,
            mcp: None,
            fork: None,
            access: crate::sandbox::Access::new("/w"),
        };
        let cmd = d.command(&spec);
        let env: std::collections::HashMap<_, _> = cmd
            .as_std()
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
            .collect();
        assert_eq!(
            env[std::ffi::OsStr::new("NODE_PATH")].as_deref(),
            Some(std::ffi::OsStr::new("/shared/node_modules"))
        );
        assert!(!env.contains_key(std::ffi::OsStr::new("OPENAI_API_KEY")));
        assert_eq!(
            env[std::ffi::OsStr::new("threadToken")].as_deref(),
            Some(std::ffi::OsStr::new("cb-t"))
        );
    }

    #[test]
    fn lifecycle_and_served_requests_become_items() {
        let mut p = CodeboltProtocol::default();
        let m = p.message("hi", &[], 1);
        assert!(m[0].contains("\"messageResponse\""));
        let r = p.on_line(r#"{"type":"sendMessage","message":"hello"}"#);
        assert!(matches!(&r.items[0], VendorItem::Text(t) if t.text == "hello"));
        let r = p.on_line(&json!({"__byre":"served","request":{"type":"fsEvent","action":"readFile","requestId":"r1"},"reply":{"type":"readFileResponse","success":true,"content":"x"}}).to_string());
        assert!(
            matches!(&r.items[0], VendorItem::ToolCall(c) if c.name == "fsEvent/readFile" && c.tool_use_id == "r1")
        );
        assert!(matches!(&r.items[1], VendorItem::ToolResult(t) if t.output == "x" && !t.is_error));
        let r = p.on_line(r#"{"type":"processStoped","message":"done"}"#);
        assert!(
            matches!(&r.items[0], VendorItem::TurnEnded(t) if t.outcome == TurnOutcome::Completed && t.result == "done")
        );
        p.interrupt();
        let r = p.on_line(r#"{"type":"processStoped"}"#);
        assert!(
            matches!(&r.items[0], VendorItem::TurnEnded(t) if t.outcome == TurnOutcome::Interrupted)
        );
        let r = p.on_line("nonsense");
        assert!(matches!(&r.items[0], VendorItem::Unrecognized(_)));
    }
}
