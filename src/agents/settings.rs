//! What the agent runtime is started with: the byre crate's CLI configuration builds these,
//! so this crate knows nothing of flags or of the rest of the server's settings.

use std::path::PathBuf;
use std::time::Duration;

/// What [`crate::runtime::Runtime::start`] needs besides its collaborators.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The data directory: `run/`, `agents/`, `mcp-tokens/`, `lead/`, `reviews/` are under it.
    pub data_dir: PathBuf,
    /// The `claude` program; `None`: `BYRE_CLAUDE_BIN`, else `claude` on PATH.
    pub claude_bin: Option<PathBuf>,
    /// The `codex` program; `None`: `BYRE_CODEX_BIN`, else `codex` on PATH.
    pub codex_bin: Option<PathBuf>,
    /// Variables set in every agent's environment on top of those passed through from byre's
    /// own (each vendor gets only its own: [`crate::for_vendor`]).
    pub agent_env: Vec<(String, String)>,
    /// The directories `codebolt:<agent>` models may name agents in (`serve
    /// --codebolt-agents`); outside them only an agent in the task's own worktree.
    pub codebolt_agents: Vec<PathBuf>,
    /// When agent processes may start and when idle ones stop; the bounds on their output.
    pub limits: AgentLimits,
}

/// How many agent processes one machine holds (README.md, "Many agents on one machine").
#[derive(Debug, Clone)]
pub struct AgentLimits {
    /// A new agent process starts only while the machine's available memory is at least this
    /// many bytes; other starts wait, first come first started. 0: no floor.
    pub memory_floor_bytes: u64,
    /// Where the available memory is read: a Linux `/proc/meminfo` (its `MemAvailable` line).
    /// A file that cannot be read (macOS has none) admits every start.
    pub meminfo: PathBuf,
    /// How often a waiting start looks at the memory again.
    pub admission_poll: Duration,
    /// An agent process with no turn running (and no subagent) for this long is stopped; its
    /// session's next message resumes the conversation in a fresh process. Zero: never.
    pub idle_stop: Duration,
    /// The bounds on what an agent process sends (`serve --max-event-bytes`,
    /// `--max-line-bytes`).
    pub output: OutputLimits,
}

/// The bounds on agent output (docs/limits.md; [`crate::bounds`]).
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// Most bytes of one event's payload: agent text, tool inputs and outputs beyond it are
    /// cut with a marker and kept whole as a blob; the raw vendor line is dropped.
    pub max_event_bytes: usize,
    /// Most bytes of one output line of an agent process: a longer line ends the process and
    /// its turn with an error, never held whole.
    pub max_line_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_event_bytes: crate::bounds::DEFAULT_MAX_EVENT_BYTES,
            max_line_bytes: crate::bounds::DEFAULT_MAX_LINE_BYTES,
        }
    }
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            memory_floor_bytes: 0,
            meminfo: PathBuf::from("/proc/meminfo"),
            admission_poll: Duration::from_secs(1),
            idle_stop: Duration::ZERO,
            output: OutputLimits::default(),
        }
    }
}
