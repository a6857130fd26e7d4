//! The `byre` command line: `serve`, `client`, `doctor`, `log`, `rebuild`, `replay`. `log`, `rebuild` and
//! `replay` open the log read-only, so they work while a server runs on the same data dir.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, AuthMode, Config};

mod doctor;
mod inspect;
pub mod reference;

/// byre: runs AI coding agents on a team's git repositories.
#[derive(Debug, Parser)]
#[command(name = "byre", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// How `serve` identifies callers.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Auth {
    /// One local user; loopback only.
    Local,
    /// `Tailscale-User-Login` headers from `tailscale serve`, believed only on byre's Unix
    /// socket for it (DATA/tailscale/byre.sock).
    Tailscale,
    /// Bearer tokens from a token file.
    Token,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// The subcommands.
// `serve`'s options make it the large variant; the command line is parsed once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Start the server.
    #[command(after_help = SERVE_ENV)]
    Serve {
        /// Address to listen on; only loopback without --auth tailscale or token.
        #[arg(long, default_value = "127.0.0.1:7777")]
        listen: SocketAddr,
        /// Data directory (the log `byre.redb`, task worktrees). Default: ~/.local/share/byre.
        #[arg(long)]
        data: Option<PathBuf>,
        /// How callers are identified.
        #[arg(long, value_enum, default_value = "local")]
        auth: Auth,
        /// With --auth token: a TOML file with a `[tokens]` table of "<token>" = "<login>".
        /// Default: $XDG_CONFIG_HOME/byre/tokens.toml, else ~/.config/byre/tokens.toml; it must
        /// be readable by its owner only (chmod 600).
        #[arg(long)]
        tokens: Option<PathBuf>,
        /// Where projects' repositories may be (repeatable); with --auth token or tailscale and
        /// no root, no new project is accepted (docs/security.md).
        #[arg(long = "repos-root", value_name = "DIR")]
        repos_roots: Vec<PathBuf>,
        /// With --auth local: the login of the one user. Default: $USER, else `local`.
        #[arg(long)]
        login: Option<String>,
        /// The model new users start with.
        #[arg(long, default_value = "sonnet")]
        default_model: String,
        /// Bytes of recent events held in memory for all event streams together (e.g. 64MiB,
        /// 512KiB). A reader further behind reads from the log instead, so this bounds the
        /// memory of slow readers, not what they receive.
        #[arg(long, env = "BYRE_STREAM_BUFFER", default_value = "64MiB", value_parser = byre_log::bus::parse_size)]
        stream_buffer: usize,
        /// Review every snapshot with an agent of the other vendor (`--reviews false`: none).
        #[arg(long, env = "BYRE_REVIEWS", default_value_t = true, action = clap::ArgAction::Set)]
        reviews: bool,
        /// The Claude Code reviewer's model (it reviews Codex and CodeBolt tasks).
        #[arg(long, env = "BYRE_REVIEW_MODEL_CLAUDE", default_value = config::DEFAULT_CLAUDE_REVIEWER)]
        review_model_claude: String,
        /// The Codex reviewer's model (it reviews Claude Code tasks).
        #[arg(long, env = "BYRE_REVIEW_MODEL_CODEX", default_value = config::DEFAULT_CODEX_REVIEWER)]
        review_model_codex: String,
        /// At most this many reviewers run at once; the rest wait.
        #[arg(long, env = "BYRE_MAX_REVIEWERS", default_value_t = 2)]
        max_reviewers: usize,
        /// Seconds a reviewer may run before its review fails.
        #[arg(long, env = "BYRE_REVIEW_TIMEOUT", default_value_t = 600)]
        review_timeout: u64,
        /// The Chromium that CodeBolt agents' browser actions drive.
        #[arg(long, env = "BYRE_CHROMIUM", default_value = "/usr/bin/chromium")]
        chromium: PathBuf,
        /// Hosts (any port) or `host:port`s agents' browser pages may open, comma-separated;
        /// each task's own preview ports on loopback are allowed besides.
        #[arg(
            long,
            env = "BYRE_BROWSER_ALLOW",
            value_delimiter = ',',
            default_value = "127.0.0.1,::1,localhost"
        )]
        browser_allow: Vec<String>,
        /// A directory of CodeBolt agents (each a directory holding `index.js`) that
        /// `codebolt:<agent>` models may name; repeatable. Outside it a model may name only an
        /// agent in its task's own worktree. Keep it outside the data dir and your home: the
        /// sandbox binds no code from there.
        #[arg(
            long = "codebolt-agents",
            value_name = "DIR",
            env = "BYRE_CODEBOLT_AGENTS",
            value_delimiter = ':'
        )]
        codebolt_agents: Vec<PathBuf>,
        /// Start a new agent process only while the machine's available memory (Linux
        /// MemAvailable) is at least this much (e.g. 1GiB; 0: no floor); other starts wait,
        /// first come first started, their task showing why. macOS: no floor.
        #[arg(long, env = "BYRE_AGENT_MEMORY_FLOOR", default_value = config::DEFAULT_AGENT_MEMORY_FLOOR, value_parser = config::parse_memory_floor)]
        agent_memory_floor: u64,
        /// Stop an agent process idle (no turn running) this long (e.g. 15m, 90s; 0: never);
        /// its session's next message resumes the conversation in a fresh process.
        #[arg(long, env = "BYRE_AGENT_IDLE_STOP", default_value = config::DEFAULT_AGENT_IDLE_STOP, value_parser = config::parse_duration)]
        agent_idle_stop: std::time::Duration,
        /// A host name byre is reached by besides its listen address and localhost (`NAME`,
        /// any port, or `NAME:PORT`), e.g. the tailscale name; repeatable. Requests naming any
        /// other host are refused (421), which stops DNS rebinding.
        #[arg(long = "public-host", env = "BYRE_PUBLIC_HOST", value_delimiter = ',')]
        public_hosts: Vec<String>,
        /// Run every agent process in a bubblewrap sandbox (docs/sandbox.md). `off`: every
        /// agent can act as every user. Where bwrap cannot run, token and tailscale modes do
        /// not start unless `off` is given; local mode starts with a warning.
        #[arg(long, env = "BYRE_SANDBOX", value_enum, default_value = "on")]
        sandbox: OnOff,
        /// Most bytes of one event's payload (e.g. 1MiB): agent text, tool inputs and outputs
        /// beyond it are cut with a marker and kept whole as a blob the transcript opens
        /// ("show all"); the raw vendor line is then not kept (docs/limits.md).
        #[arg(long, env = "BYRE_MAX_EVENT_BYTES", default_value = "1MiB", value_parser = parse_event_limit)]
        max_event_bytes: usize,
        /// Most bytes of one output line of an agent process (e.g. 64MiB): a longer line ends
        /// the process and its turn with an error (never held whole).
        #[arg(long, env = "BYRE_MAX_LINE_BYTES", default_value = "64MiB", value_parser = byre_log::bus::parse_size)]
        max_line_bytes: usize,
        /// A request body must arrive within this time after its head (e.g. 30s; 0: no
        /// deadline), else 408 and the connection is closed. WebSockets have none; a client
        /// transfer upload may pause no longer than this between chunks.
        #[arg(long, env = "BYRE_BODY_TIMEOUT", default_value = config::DEFAULT_BODY_TIMEOUT, value_parser = config::parse_duration)]
        body_timeout: std::time::Duration,
        /// Open connections one peer address (an IPv6 /64) may hold; one more is closed as it
        /// is accepted (0: no cap). Loopback is capped by --max-loopback-connections instead.
        #[arg(long, env = "BYRE_MAX_PEER_CONNECTIONS", default_value_t = config::DEFAULT_MAX_PEER_CONNECTIONS)]
        max_peer_connections: usize,
        /// Open connections from loopback, all of it counted as one peer (0: no cap, the
        /// default: byre's own agents, and a local proxy's users, all come from loopback).
        #[arg(long, env = "BYRE_MAX_LOOPBACK_CONNECTIONS", default_value_t = 0)]
        max_loopback_connections: usize,
        /// Sign-in attempts one peer may make per --signin-window (token mode; 0: no limit);
        /// past it 429 with Retry-After.
        #[arg(long, env = "BYRE_SIGNIN_ATTEMPTS", default_value_t = config::DEFAULT_SIGNIN_ATTEMPTS)]
        signin_attempts: u32,
        /// The window of --signin-attempts (e.g. 1h); attempts come back one by one over it.
        #[arg(long, env = "BYRE_SIGNIN_WINDOW", default_value = config::DEFAULT_SIGNIN_WINDOW, value_parser = config::parse_duration)]
        signin_window: std::time::Duration,
    },
    /// Serve the agents' requests on this machine (its shell, files, transfers, hands),
    /// connected to a byre server; reconnects with backoff.
    Client {
        /// The server, e.g. `http://127.0.0.1:7777`, or `https://byre.tailnet.ts.net` behind
        /// `tailscale serve` (TLS).
        #[arg(long)]
        server: String,
        /// This machine's name on the server (its `Byre-Host`). Default: the host name.
        #[arg(long)]
        host: Option<String>,
        /// The bearer token, when the server runs `--auth token`.
        #[arg(long, env = "BYRE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// A file holding the bearer token (instead of --token).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// The byre-hands MCP server to start for `hands` requests: a command line, its words
        /// split on whitespace (no shell).
        #[arg(long)]
        hands_mcp: Option<String>,
    },
    /// Check what `serve` needs on this machine (the agent CLIs, their versions and
    /// credentials, git, bubblewrap, Chromium, the data dir) and say what to fix; one line per
    /// check (ok, warn, missing). Exit 1 when something needed is missing.
    Doctor {
        /// Data directory. Default: ~/.local/share/byre.
        #[arg(long)]
        data: Option<PathBuf>,
        /// As `serve --sandbox`: `off` skips the bubblewrap check.
        #[arg(long, env = "BYRE_SANDBOX", value_enum, default_value = "on")]
        sandbox: OnOff,
        /// As `serve --chromium`.
        #[arg(long, env = "BYRE_CHROMIUM", default_value = "/usr/bin/chromium")]
        chromium: PathBuf,
    },
    /// Print events of the log.
    Log {
        /// Data directory.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Only this task's events.
        #[arg(long)]
        task: Option<String>,
        /// Only events of this kind (e.g. `task.created`).
        #[arg(long)]
        kind: Option<String>,
        /// First seq.
        #[arg(long, default_value_t = 1)]
        from: u64,
        /// Last seq [default: the last seq of the log].
        #[arg(long)]
        to: Option<u64>,
        /// One spec `Event` JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Fold the whole log from scratch; print counts and the digest.
    Rebuild {
        /// Data directory.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Exit 1 when the fold differs from the server's last checkpoint or its projection
        /// snapshot.
        #[arg(long)]
        verify: bool,
    },
    /// (Internal) byre's MCP server for one agent session on stdio, started by the agent CLI;
    /// forwards tool calls to the running server.
    #[command(hide = true)]
    Mcp {
        /// The running server, e.g. `http://127.0.0.1:7777`.
        #[arg(long)]
        url: String,
        /// The file holding the session's token.
        #[arg(long)]
        token_file: PathBuf,
        /// The session's role (`implementer`, `lead`, `reviewer`): which tools it is offered.
        #[arg(long, default_value = "implementer", value_parser = parse_role)]
        role: byre_projections::sessions::SessionRole,
    },
    /// (Internal) git work on a task's worktree, inside the task's sandbox: reads one job
    /// (JSON) on stdin, prints its answer (JSON) on stdout. Started by the server.
    #[command(hide = true, name = "sandboxed-git")]
    SandboxedGit,
    /// Print a task as it stood at a seq.
    Replay {
        /// Data directory.
        #[arg(long)]
        data: Option<PathBuf>,
        /// The task.
        #[arg(long)]
        task: String,
        /// The last seq to fold.
        #[arg(long)]
        until: u64,
    },
}

/// The environment `serve` reads, for `serve --help`.
const SERVE_ENV: &str = "\
Environment:
  BYRE_CLAUDE_BIN      the `claude` (Claude Code) executable; default: `claude` on PATH
  BYRE_CODEX_BIN       the `codex` executable for gpt-* models; default: `codex` on PATH
  ANTHROPIC_*          passed to Claude Code, e.g. ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
                       (also CLAUDE_CODE_MAX_RETRIES, API_TIMEOUT_MS)
  OPENAI_API_KEY       the key Codex (and CodeBolt inference) uses
  OPENAI_BASE_URL      the Responses API Codex calls; default: https://api.openai.com/v1
  BYRE_CODEX_REQUEST_MAX_RETRIES, BYRE_CODEX_STREAM_MAX_RETRIES
                       Codex's retry budgets
  BYRE_NODE            the `node` that runs CodeBolt agents; default: `node` on PATH
  BYRE_CODEBOLT_MODEL  the model of CodeBolt inference calls that name none; default: gpt-5
  BYRE_STREAM_BUFFER   as --stream-buffer
  BYRE_AGENT_MEMORY_FLOOR, BYRE_AGENT_IDLE_STOP
                       as --agent-memory-floor, --agent-idle-stop
  BYRE_MAX_EVENT_BYTES, BYRE_MAX_LINE_BYTES
                       as --max-event-bytes, --max-line-bytes
  BYRE_BODY_TIMEOUT, BYRE_MAX_PEER_CONNECTIONS, BYRE_MAX_LOOPBACK_CONNECTIONS,
  BYRE_SIGNIN_ATTEMPTS, BYRE_SIGNIN_WINDOW
                       as --body-timeout, --max-peer-connections, …
  BYRE_MEMINFO         the file the available memory is read from; default: /proc/meminfo
  BYRE_LOG             the log filter (tracing syntax), default `info`; e.g. BYRE_LOG=byre=debug
Agents get a cleared environment: PATH, LANG, TZ, proxy variables, SSL_CERT_FILE and the
variables above that concern them (README.md, \"Agents\").";

/// Parses `--max-event-bytes`: a size (`parse_size`) of at least 16 KiB, room for an event's
/// fields besides the one byre cuts.
fn parse_event_limit(text: &str) -> Result<usize, String> {
    match byre_log::bus::parse_size(text)? {
        n if n < 16 * 1024 => Err(format!("`{text}`: the event limit is at least 16KiB")),
        n => Ok(n),
    }
}

/// Runs the command line; returns the process exit code.
/// # Errors
/// Anything that stops the command, with context for the user.
pub async fn main(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Cmd::Serve {
            listen,
            data,
            auth,
            tokens,
            repos_roots,
            login,
            default_model,
            stream_buffer,
            reviews,
            review_model_claude,
            review_model_codex,
            max_reviewers,
            review_timeout,
            chromium,
            browser_allow,
            codebolt_agents,
            agent_memory_floor,
            agent_idle_stop,
            public_hosts,
            sandbox,
            max_event_bytes,
            max_line_bytes,
            body_timeout,
            max_peer_connections,
            max_loopback_connections,
            signin_attempts,
            signin_window,
        } => {
            let data_dir = data.unwrap_or_else(config::default_data_dir);
            let auth = match auth {
                Auth::Local => {
                    let login = login
                        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
                        .unwrap_or_else(|| "local".into());
                    config::check_login(&login).map_err(anyhow::Error::msg)?;
                    AuthMode::Local { login }
                }
                Auth::Tailscale => AuthMode::Tailscale,
                Auth::Token => {
                    let path =
                        config::tokens_path(tokens, &data_dir).map_err(anyhow::Error::msg)?;
                    AuthMode::Token {
                        tokens: config::read_tokens(&path).map_err(anyhow::Error::msg)?,
                    }
                }
            };
            if !listen.ip().to_canonical().is_loopback() && !auth.authenticates() {
                anyhow::bail!("refusing to listen on {listen} without authentication: use --auth tailscale or --auth token, or a loopback address");
            }
            let listener =
                TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
            let roots = config::repos_roots(&repos_roots, &auth).map_err(anyhow::Error::msg)?;
            let mut config = Config::new(data_dir.clone(), auth);
            config.repos_roots = roots;
            config.default_model = default_model;
            config.stream_buffer_bytes = stream_buffer;
            config.chromium_bin = Some(chromium);
            config.browser_allow = browser_allow;
            config.codebolt_agents = codebolt_agents;
            config.reviews = config::ReviewConfig {
                enabled: reviews,
                claude_model: review_model_claude,
                codex_model: review_model_codex,
                max_running: max_reviewers.max(1),
                timeout: std::time::Duration::from_secs(review_timeout.max(1)),
            };
            config.agents.memory_floor_bytes = agent_memory_floor;
            config.agents.idle_stop = agent_idle_stop;
            config.public_hosts = public_hosts;
            config.sandbox = sandbox == OnOff::On;
            config.agents.output = byre_agents::OutputLimits {
                max_event_bytes,
                max_line_bytes: max_line_bytes.max(max_event_bytes),
            };
            config.body_timeout = body_timeout;
            config.max_peer_connections = max_peer_connections;
            config.max_loopback_connections = max_loopback_connections;
            config.signin_attempts = signin_attempts;
            config.signin_window = signin_window;
            if let Some(meminfo) = std::env::var_os("BYRE_MEMINFO").filter(|m| !m.is_empty()) {
                config.agents.meminfo = PathBuf::from(meminfo);
            }
            let running = crate::startup::run(listener, config).await?;
            // Listening for the signals before saying so: a SIGTERM sent as soon as the line is
            // read (a supervisor, a test) stops byre gracefully, not by the default action.
            let stop = stop_signal();
            println!(
                "byre listening on {} (data: {})",
                running.url(),
                data_dir.display()
            );
            stop.await;
            running.stop().await;
            Ok(0)
        }
        Cmd::Client {
            server,
            host,
            token,
            token_file,
            hands_mcp,
        } => {
            let token = match token_file {
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?
                        .trim()
                        .to_owned(),
                ),
                None => token,
            };
            let options = byre_client::Options {
                server,
                host: host.unwrap_or_else(byre_client::host_name),
                token,
                hands_mcp,
                commit: crate::BUILD_COMMIT,
            };
            byre_client::run(options).await
        }
        Cmd::Doctor {
            data,
            sandbox,
            chromium,
        } => Ok(doctor::run(doctor::Options {
            data_dir: data.unwrap_or_else(config::default_data_dir),
            sandbox: sandbox == OnOff::On,
            chromium,
        })
        .await),
        Cmd::Log {
            data,
            task,
            kind,
            from,
            to,
            json,
        } => inspect::log(
            &data.unwrap_or_else(config::default_data_dir),
            task,
            kind,
            from,
            to.unwrap_or(u64::MAX),
            json,
        ),
        Cmd::Rebuild { data, verify } => {
            inspect::rebuild(&data.unwrap_or_else(config::default_data_dir), verify)
        }
        Cmd::Mcp {
            url,
            token_file,
            role,
        } => {
            crate::mcp::stdio::serve(url, &token_file, role).await?;
            Ok(0)
        }
        Cmd::SandboxedGit => Ok(byre_agents::git_box::main()?),
        Cmd::Replay { data, task, until } => {
            inspect::replay(&data.unwrap_or_else(config::default_data_dir), &task, until)
        }
    }
}

/// Listens for SIGTERM and SIGINT from the moment it is called; the future it returns ends at
/// the first of them.
fn stop_signal() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            return Box::pin(async move {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
            });
        }
    }
    Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

fn parse_role(text: &str) -> Result<byre_projections::sessions::SessionRole, String> {
    byre_agents::mcp_launch::parse_role(text)
        .ok_or_else(|| format!("unknown role `{text}`: implementer, lead or reviewer"))
}
