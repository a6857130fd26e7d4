//! CodeBolt's transport: its agents talk to byre over a WebSocket (the `/codebolt` endpoint of
//! the byre crate), not over stdio, and the [`Hub`] of [`Link`]s is what joins a socket to its
//! session's loop, as a child's pipes do for Claude Code and Codex.
//!
//! A session of the `codebolt` vendor registers a [`Link`] in the [`Hub`] under a fresh secret
//! token before its agent process starts; the agent receives the token as `threadToken` (v2
//! puts it in its URL; v1 does not, so byre also gives it as `agentId`, which both
//! generations put in the URL). The socket that presents the token is bound to the session:
//! lines for the agent (the user's message, a stop) wait in the link until it connects.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::mpsc;

use super::frames;
use crate::sandbox::Sandbox;

/// What ends with a link ([`Hub::on_unregister`]): given the link's session id, it stops what
/// the layers above started for that session (its toolbox servers, its browser context).
pub type LinkEnded = Arc<
    dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

/// The live links, by secret token, and the port agents connect to.
#[derive(Default)]
pub struct Hub {
    links: DashMap<String, Arc<Link>>,
    port: std::sync::atomic::AtomicU16,
    llm: Mutex<Llm>,
    home: Mutex<PathBuf>,
    ended: Mutex<Vec<LinkEnded>>,
    /// The sandbox of terminal commands and toolbox servers, and byre's data dir (each
    /// session's own `HOME` is under it); unset: no sandbox, the shared [`Hub::set_home`].
    places: Mutex<Option<(Arc<Sandbox>, PathBuf)>>,
}

/// The OpenAI-compatible endpoint `inference` requests go to.
#[derive(Debug, Clone, Default)]
pub struct Llm {
    /// `OPENAI_BASE_URL` (e.g. `https://api.openai.com/v1`).
    pub base_url: Option<String>,
    /// `OPENAI_API_KEY`.
    pub api_key: Option<String>,
}

/// Where frames for the agent go.
enum Outbox {
    /// No socket yet: frames wait here.
    Pending(Vec<String>),
    /// The connected socket's sender.
    Connected(mpsc::UnboundedSender<String>),
    /// The session ended: frames are dropped.
    Closed,
}

/// One session's binding between its agent socket and its session loop.
pub struct Link {
    /// byre's session id.
    pub session_id: String,
    /// The task.
    pub task_id: String,
    /// The task's worktree (the agent's cwd, the root of every path it names).
    pub worktree: PathBuf,
    /// `HOME` for its terminal commands and toolbox servers: the session's own
    /// (`crate::session_dir`), as its agent's.
    pub home: PathBuf,
    /// The sandbox its terminal commands and toolbox servers run in.
    pub sandbox: Arc<Sandbox>,
    /// Frames from the socket for the session's protocol (chat, lifecycle, served requests).
    pub to_session: mpsc::Sender<String>,
    out: Mutex<Outbox>,
    /// The agent's tokens and chat history, kept while its process lives (memory, state,
    /// todos and vectors are durable: the endpoint's `store_write`).
    pub store: Mutex<Store>,
    /// Serialises the store writes of this link; holds the last served-record number given
    /// out (`ack` in the record).
    pub store_writes: tokio::sync::Mutex<u64>,
    /// The highest served-record number whose items the session loop has logged.
    pub recorded: tokio::sync::watch::Sender<u64>,
    /// Terminal commands running for this agent (their process groups), for interrupts.
    pub terminals: Mutex<Vec<i32>>,
    /// Questions the agent waits on (`waitforReply`, `confirmationRequest`), by inbox item id:
    /// where the answer (an `InboxResponse` as JSON) goes.
    pub questions:
        Mutex<std::collections::HashMap<String, tokio::sync::oneshot::Sender<serde_json::Value>>>,
}

/// The per-session data the agent keeps with byre while its process lives (its memory,
/// state, todos and vectors are durable, folded from the log).
#[derive(Debug, Default)]
pub struct Store {
    /// Tokens the agent stored (`tokenizerEvent`).
    pub tokens: Vec<String>,
    /// The conversation as the agent saw it: `{role, content}`.
    pub history: Vec<serde_json::Value>,
}

impl Link {
    /// Sends a frame to the agent now, or when it connects.
    pub fn send(&self, frame: String) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&frame) {
            if v["type"] == "messageResponse" {
                let m = frames::text(&v["message"]["userMessage"]);
                self.store
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .history
                    .push(serde_json::json!({"role": "user", "content": m}));
            }
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *out {
            Outbox::Pending(q) => q.push(frame),
            Outbox::Connected(tx) => {
                let _ = tx.send(frame);
            }
            Outbox::Closed => {}
        }
    }

    /// Kills the agent's running terminal commands (their process groups); how many there
    /// were. Their requests are then answered as ended.
    pub fn kill_terminals(&self) -> usize {
        let groups: Vec<i32> = self
            .terminals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for g in &groups {
            byre_process::groups::kill_group(*g);
        }
        groups.len()
    }

    /// Binds the socket's sender; false when a socket is already bound or the session ended.
    pub fn connect(&self, tx: mpsc::UnboundedSender<String>) -> bool {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *out, Outbox::Closed) {
            Outbox::Pending(q) => {
                for f in q {
                    let _ = tx.send(f);
                }
                *out = Outbox::Connected(tx);
                true
            }
            Outbox::Connected(old) if old.is_closed() => {
                *out = Outbox::Connected(tx);
                true
            }
            other => {
                *out = other;
                false
            }
        }
    }

    /// Whether the link ended ([`Hub::unregister`]): its session's process is gone.
    pub fn ended(&self) -> bool {
        matches!(
            *self.out.lock().unwrap_or_else(|e| e.into_inner()),
            Outbox::Closed
        )
    }

    /// Unbinds a socket that closed: later frames wait for a new one.
    pub fn disconnect(&self) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*out, Outbox::Connected(_)) {
            *out = Outbox::Pending(Vec::new());
        }
    }
}

impl Hub {
    /// The port agents connect to (byre's own HTTP port), set once the listener is bound.
    pub fn set_port(&self, port: u16) {
        self.port.store(port, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets the LLM endpoint from the agent environment of byre's configuration, else from
    /// byre's own environment (`OPENAI_BASE_URL`, `OPENAI_API_KEY`).
    pub fn set_llm(&self, agent_env: &[(String, String)]) {
        let get = |name: &str| {
            agent_env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok())
                .filter(|v| !v.is_empty())
        };
        *self.llm.lock().unwrap_or_else(|e| e.into_inner()) = Llm {
            base_url: get("OPENAI_BASE_URL"),
            api_key: get("OPENAI_API_KEY"),
        };
    }

    /// Sets the `HOME` of terminal commands.
    pub fn set_home(&self, home: PathBuf) {
        *self.home.lock().unwrap_or_else(|e| e.into_inner()) = home;
    }

    /// Sets the sandbox terminal commands and toolbox servers run in and byre's data dir,
    /// under which each session's `HOME` is (`crate::session_dir`).
    pub fn set_sandbox(&self, sandbox: Arc<Sandbox>, data_dir: PathBuf) {
        *self.places.lock().unwrap_or_else(|e| e.into_inner()) = Some((sandbox, data_dir));
    }

    /// Adds what ends with every link, after its socket closed and its terminal commands
    /// were killed: the layers above stop their own per-session things there (toolbox servers,
    /// a browser context), which this crate knows nothing of.
    pub fn on_unregister(&self, ended: LinkEnded) {
        self.ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ended);
    }

    /// See [`Hub::set_llm`].
    pub fn llm(&self) -> Llm {
        self.llm.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// See [`Hub::set_port`].
    pub fn port(&self) -> u16 {
        self.port.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Registers a session's link; returns its secret token and the receiver of its frames.
    pub fn register(
        &self,
        session_id: &str,
        task_id: &str,
        worktree: PathBuf,
    ) -> (String, mpsc::Receiver<String>) {
        let token = format!(
            "cb-{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let (tx, rx) = mpsc::channel(1024);
        let places = self
            .places
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (sandbox, home) = match places {
            Some((sandbox, data_dir)) => (sandbox, crate::session_home(&data_dir, session_id)),
            None => (
                Arc::new(Sandbox::off()),
                self.home.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            ),
        };
        let link = Arc::new(Link {
            sandbox,
            session_id: session_id.into(),
            task_id: task_id.into(),
            worktree,
            home,
            to_session: tx,
            out: Mutex::new(Outbox::Pending(Vec::new())),
            store: Mutex::new(Store::default()),
            store_writes: tokio::sync::Mutex::new(0),
            recorded: tokio::sync::watch::channel(0).0,
            terminals: Mutex::new(Vec::new()),
            questions: Mutex::new(Default::default()),
        });
        self.links.insert(token.clone(), link);
        (token, rx)
    }

    /// The link of `token`.
    pub fn link(&self, token: &str) -> Option<Arc<Link>> {
        self.links.get(token).map(|l| l.clone())
    }

    /// The link of a session, if its agent runs.
    pub fn link_of_session(&self, session_id: &str) -> Option<Arc<Link>> {
        self.links
            .iter()
            .find(|l| l.session_id == session_id)
            .map(|l| l.value().clone())
    }

    /// Ends a session's link: its socket is closed, its terminal commands killed, then what
    /// [`Hub::on_unregister`] added runs (its toolbox servers and browser context end).
    pub async fn unregister(&self, token: &str) {
        if let Some((_, link)) = self.links.remove(token) {
            *link.out.lock().unwrap_or_else(|e| e.into_inner()) = Outbox::Closed;
            link.kill_terminals();
            let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for end in ended {
                end(link.session_id.clone()).await;
            }
        }
    }
}
