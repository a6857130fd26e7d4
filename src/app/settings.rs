//! What the application layer is started with: the byre crate's CLI configuration builds a
//! [`Settings`], so no operation or reactor sees a flag or the adapters' own settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// What the operations and reactors need of the server's configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The data directory: `byre.redb`, `worktrees/`, `toolboxes/`, `transfers/`, `reviews/`.
    pub data_dir: PathBuf,
    /// How callers are identified (`getStatus` reports it; token mode's sign-in reads it).
    pub auth: AuthMode,
    /// The model new users start with.
    pub default_model: String,
    /// How long a running turn may go without a stream event before it counts as stuck.
    pub stuck_after_seconds: u64,
    /// The `tailscale` binary that publishes previews (`None`: previews are recorded, not
    /// published).
    pub tailscale_bin: Option<PathBuf>,
    /// Snapshot reviews.
    pub reviews: ReviewConfig,
    /// Where projects' repositories may be (canonical), checked by `createProject`
    /// (docs/security.md); `None`: anywhere; `Some` and empty: no new project.
    pub repos_roots: Option<Vec<PathBuf>>,
    /// The directories `codebolt:<agent>` models may name agents in (`serve
    /// --codebolt-agents`); outside them only an agent in the task's own worktree.
    pub codebolt_agents: Vec<PathBuf>,
}

impl Settings {
    /// Where task worktrees go: `{data_dir}/worktrees/{project_id}/{task_id}`.
    pub fn worktrees_root(&self) -> PathBuf {
        self.data_dir.join("worktrees")
    }
}

/// How callers are identified (DESIGN.md "Identity").
#[derive(Debug, Clone)]
pub enum AuthMode {
    /// One local user; the listener must be loopback.
    Local {
        /// The one login every request runs as.
        login: String,
    },
    /// `tailscale serve` in front: the `Tailscale-User-Login` (and `-Name`) headers, trusted
    /// only on the Unix socket it forwards to (`http::serve_socket`), never on TCP.
    Tailscale,
    /// `Authorization: Bearer <token>`, each token mapped to a login.
    Token {
        /// Token → login.
        tokens: HashMap<String, String>,
    },
}

impl AuthMode {
    /// Whether this mode authenticates callers, so byre may listen beyond loopback.
    pub fn authenticates(&self) -> bool {
        !matches!(self, AuthMode::Local { .. })
    }
}

/// How snapshots are reviewed (README.md, "Reviews").
#[derive(Debug, Clone)]
pub struct ReviewConfig {
    /// Whether each snapshot gets a review.
    pub enabled: bool,
    /// The Claude Code reviewer's model (reviews Codex and CodeBolt tasks).
    pub claude_model: String,
    /// The Codex reviewer's model (reviews Claude Code tasks).
    pub codex_model: String,
    /// At most this many reviewers run at once across the server; the rest wait.
    pub max_running: usize,
    /// A reviewer running longer is stopped and its review failed.
    pub timeout: Duration,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            enabled: false,
            claude_model: DEFAULT_CLAUDE_REVIEWER.into(),
            codex_model: DEFAULT_CODEX_REVIEWER.into(),
            max_running: 2,
            timeout: Duration::from_secs(600),
        }
    }
}

/// The Claude Code reviewer's default model.
pub const DEFAULT_CLAUDE_REVIEWER: &str = "sonnet";
/// The Codex reviewer's default model.
pub const DEFAULT_CODEX_REVIEWER: &str = "gpt-5.5";

/// The login a token maps to, compared with every token in constant time so timing tells
/// nothing about them.
pub fn login_for_token(
    tokens: &std::collections::HashMap<String, String>,
    given: &str,
) -> Option<String> {
    let mut found = None;
    for (token, login) in tokens {
        if constant_time_eq(token.as_bytes(), given.as_bytes()) {
            found = Some(login.clone());
        }
    }
    found
}

/// Whether two byte strings are equal, in time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
