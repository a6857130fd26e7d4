//! Builds the running server from a bound listener and a [`Config`] (mini-redis `run`, z2p
//! `Application::build`), so tests can bind port 0.
//!
//! Start-up: make the data dir 0700 and the umask 077 (`private_files`), lock the data dir (one
//! server per data dir), open the log, fold it (an event that cannot be decoded stops start-up
//! with its seq), start the writer, the reactors and the HTTP server. Shutdown: stop taking
//! requests, end event streams and reactors, let the writer drain its queue and write a
//! checkpoint.

use std::fs::{File, TryLockError};
use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{dev::ServerHandle, middleware, web, App as ActixApp, HttpServer};
use anyhow::Context;
use tokio::sync::watch;

use crate::config::Config;
use crate::http;
use byre_app::{status::Streams, Ctx};
use byre_log::{writer::WriterThread, Store, Writer};

/// A running byre server.
pub struct Running {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    handle: ServerHandle,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The loopback listener for CodeBolt agents, when the main one is not on loopback.
    agent_server: Option<(ServerHandle, tokio::task::JoinHandle<std::io::Result<()>>)>,
    writer: Writer,
    writer_thread: WriterThread,
    reactors: Vec<tokio::task::JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
    browsers: Arc<byre_browser::Browsers>,
    _lock: File,
}

impl Running {
    /// The base URL, e.g. `http://127.0.0.1:7777`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The log's writer, for an embedder (and tests) to submit commands that no HTTP operation
    /// carries, such as `Command::RequestSnapshot` (agents send it through their MCP tools).
    pub fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Graceful shutdown: stop the HTTP server, end streams and reactors, drain the writer.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        self.handle.stop(true).await;
        let _ = self.server.await;
        if let Some((handle, server)) = self.agent_server {
            handle.stop(true).await;
            let _ = server.await;
        }
        for r in self.reactors {
            let _ = r.await;
        }
        self.browsers.stop().await;
        self.writer.stop().await;
        let thread = self.writer_thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        // Wait until every handle on the log (HTTP workers finishing, blocking reads) is gone,
        // so the file is closed when this returns and a new server may open it.
        let store = self.writer.store().clone();
        let last_seq = self.writer.head();
        drop(self.writer);
        for _ in 0..1000 {
            if store.n_handles() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tracing::info!(
            last_seq,
            "byre stopped; the writer drained its queue and wrote its checkpoint"
        );
        if store.n_handles() > 1 {
            tracing::warn!(
                n_handles = store.n_handles(),
                "the log is still open after shutdown"
            );
        }
    }
}

/// Starts byre on `listener`.
/// # Errors
/// The data dir cannot be created or is locked by another server; the log cannot be opened or
/// folded (with the seq of the first undecodable event); the listener is not loopback and the
/// auth mode does not authenticate; token or tailscale mode where the agent sandbox cannot
/// run and `--sandbox off` was not given (`byre_agents::sandbox::Sandbox::start`).
pub async fn run(listener: TcpListener, mut config: Config) -> anyhow::Result<Running> {
    let addr = listener.local_addr()?;
    if !addr.ip().to_canonical().is_loopback() && !config.auth.authenticates() {
        anyhow::bail!("refusing to listen on {addr} without authentication: use --auth tailscale or --auth token, or a loopback address");
    }
    // A bad --public-host stops start-up before anything is opened.
    http::edge::Edge::new(addr, &config.public_hosts).map_err(anyhow::Error::msg)?;
    // Before anything is made: a team server does not start without its sandbox (DESIGN.md
    // invariant 8) unless asked.
    // (Its trial run of bwrap is a process: off the async threads.)
    let (wanted, team_server) = (config.sandbox, config.auth.authenticates());
    let (sandbox, sandbox_warning) = tokio::task::spawn_blocking(move || {
        byre_agents::sandbox::Sandbox::start(
            wanted,
            team_server,
            std::env::var_os("PATH").as_deref(),
        )
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    if let Some(warning) = sandbox_warning {
        tracing::warn!("{warning}");
    }
    let mut sandbox = sandbox;
    byre_process::private_files::secure_data_dir(&config.data_dir)
        .with_context(|| format!("cannot create the data dir {}", config.data_dir.display()))?;
    // From here on every file byre (and every child it starts) makes is its user's alone.
    byre_process::private_files::tighten_umask();
    // Worktree paths are stored in events: make them absolute, whatever the server's cwd.
    config.data_dir = std::fs::canonicalize(&config.data_dir)
        .with_context(|| format!("cannot resolve {}", config.data_dir.display()))?;
    // No bind of a sandbox may hold the data dir or byre's user's home (only what is below).
    sandbox.hide(config.data_dir.clone());
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        sandbox.hide(std::fs::canonicalize(&home).unwrap_or_else(|_| home.into()));
    }
    let sandbox = Arc::new(sandbox);
    let lock_path = config.data_dir.join("byre.lock");
    let lock = File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    lock_data_dir(&lock, &config.data_dir).await?;

    let log_path = config.log_path();
    byre_log::projection_snapshot::remove_leftover(&log_path);
    let (store, folded) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let store = Store::open(&log_path)?;
        let started = std::time::Instant::now();
        let folded = store.fold_from_projection_snapshot()?;
        tracing::info!(
            last_seq = folded.state.last_seq,
            n_events = folded.state.n_events,
            projection_snapshot_seq = folded.projection_snapshot_seq,
            n_events_folded = folded.n_events_folded,
            fold_ms = started.elapsed().as_secs_f64() * 1e3,
            "log folded"
        );
        Ok((store, folded))
    })
    .await??;
    // A decide-time setting: turn ends record whether their snapshot will be reviewed.
    let (writer, writer_thread) = Writer::start_with(
        store,
        folded,
        config.stream_buffer_bytes,
        config.reviews.enabled,
    );
    let (shutdown, shutdown_rx) = watch::channel(false);
    let sessions: std::collections::HashSet<String> =
        writer.read(|s| s.sessions.keys().map(|x| x.to_string()).collect());
    let leftovers = byre_agents::runtime::clear_leftovers(&config.data_dir, sessions).await;
    let worktrees = byre_app::reactors::worktrees::Worktrees::new(writer.clone());
    // Agents' MCP servers run on this host: they reach the server at its own address
    // (loopback when it listens on every address).
    let mcp_addr = if addr.ip().is_unspecified() {
        std::net::SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    };
    let mcp_url = format!("http://{mcp_addr}");
    let byre_bin = match config.byre_bin.clone() {
        Some(p) => p,
        None => std::env::current_exe().context("cannot find byre's own executable")?,
    };
    // Git work that reads a worktree runs in the task's sandbox (`git::boxed`).
    let git_box = byre_agents::git_box::GitBox::new(sandbox.clone(), byre_bin.clone());
    let mcp = Arc::new(
        byre_agents::mcp_launch::McpHost::open(&config.data_dir, mcp_url, byre_bin)
            .context("cannot remove the old MCP secret")?,
    );
    let (agents, agents_task) = byre_agents::runtime::Runtime::start(
        writer.clone(),
        &config.agent_settings(),
        leftovers,
        mcp.clone(),
        Arc::new(worktrees.clone()),
        sandbox,
        shutdown_rx.clone(),
    );
    for cli in agents.agent_clis() {
        if !cli.found {
            tracing::warn!(
                vendor = cli.vendor,
                program = %cli.program,
                "{} was not found: its agents cannot start. Install it, or set {} to its path",
                cli.name,
                cli.env_var
            );
        }
    }
    agents.codebolt().set_port(addr.port());
    if config.tailscale_bin.is_none() {
        config.tailscale_bin = byre_process::find_on_path("tailscale");
    }
    // Behind `tailscale serve` requests name the machine's tailnet name: serve it as given.
    if matches!(config.auth, crate::config::AuthMode::Tailscale) {
        if let Some(bin) = &config.tailscale_bin {
            if let Some(name) = byre_app::reactors::previews::tailnet_name(bin).await {
                tracing::info!(host = %name, "serving the tailnet name");
                config.public_hosts.push(name);
            }
        }
    }
    let edge = http::edge::Edge::new(addr, &config.public_hosts).map_err(anyhow::Error::msg)?;
    // Tailscale mode's people come in on a Unix socket no agent can reach; its TCP port
    // believes no identity header (`http::serve_socket`).
    let serve_socket = match config.auth {
        crate::config::AuthMode::Tailscale => {
            let socket = http::serve_socket::bind(&config.data_dir).map_err(anyhow::Error::msg)?;
            if config.public_hosts.is_empty() {
                tracing::warn!(
                    "tailscale mode knows no name to serve on tailscale serve's socket (no tailnet name from `tailscale status`, no --public-host): every request there is refused (421) until byre is started with --public-host <machine>.<tailnet>.ts.net"
                );
            }
            tracing::info!(
                socket = %http::serve_socket_path(&config.data_dir).display(),
                "tailscale mode: put byre on the tailnet with `tailscale serve --bg unix:{}`",
                http::serve_socket_path(&config.data_dir).display()
            );
            Some(socket)
        }
        _ => None,
    };
    let socket_edge = web::Data::new(http::edge::SocketEdge(edge.for_serve_socket()));
    let edge = web::Data::new(edge);
    let (terminals, terminals_task) = byre_terminal::Terminals::start(
        writer.clone(),
        shutdown_rx.clone(),
        agents.sandbox().clone(),
        config.data_dir.clone(),
    )
    .await;
    let data_dir = config.data_dir.clone();
    let swept = tokio::task::spawn_blocking(move || byre_machines::sweep_transfers(&data_dir))
        .await
        .unwrap_or(0);
    if swept > 0 {
        tracing::info!(
            n_files = swept,
            "removed transfer files a previous server left"
        );
    }
    let browsers = Arc::new(byre_browser::Browsers::new(
        config
            .chromium_bin
            .clone()
            .unwrap_or_else(|| "/usr/bin/chromium".into()),
        config.browser_allow.clone(),
        config.data_dir.clone(),
    ));
    let toolboxes = Arc::new(byre_toolboxes::Toolboxes::default());
    // A CodeBolt session's toolbox servers and browser context end with its link.
    let (ending_toolboxes, ending_browsers) = (toolboxes.clone(), browsers.clone());
    agents
        .codebolt()
        .on_unregister(Arc::new(move |session_id: String| {
            ending_toolboxes.end_session(&session_id);
            let browsers = ending_browsers.clone();
            Box::pin(async move { browsers.end_session(&session_id).await })
        }));
    let config = web::Data::new(config);
    let app = web::Data::new(Ctx {
        writer: writer.clone(),
        settings: Arc::new(config.app_settings()),
        started_at_us: chrono::Utc::now().timestamp_micros(),
        streams: Streams::default(),
        machines: byre_machines::Machines::default(),
        agents,
        mcp,
        worktrees: worktrees.clone(),
        terminals,
        signins: byre_app::signin::SignIns::default(),
        shutdown: shutdown_rx.clone(),
        git_box: git_box.clone(),
    });
    let codebolt = web::Data::new(crate::codebolt::endpoint::Subsystems {
        browsers: browsers.clone(),
        toolboxes,
    });
    let reactors = vec![
        byre_app::reactors::worktrees::start(
            writer.clone(),
            worktrees.clone(),
            shutdown_rx.clone(),
        ),
        byre_app::reactors::finish::start(writer.clone(), git_box.clone(), shutdown_rx.clone()),
        byre_app::reactors::previews::start(
            writer.clone(),
            app.settings.tailscale_bin.clone(),
            shutdown_rx.clone(),
        ),
        byre_app::reactors::snapshots::start(
            writer.clone(),
            worktrees.clone(),
            git_box,
            app.settings.reviews.enabled,
            shutdown_rx.clone(),
        ),
        byre_app::reactors::reviews::start(
            app.clone().into_inner(),
            app.settings.reviews.clone(),
            app.settings.data_dir.clone(),
            shutdown_rx.clone(),
        ),
        byre_app::reactors::runs::start(app.clone().into_inner(), shutdown_rx.clone()),
        agents_task,
        terminals_task,
    ];

    // CodeBolt agents connect to `localhost` (v1 clients cannot be told another host): when
    // the API does not listen there, they get a loopback listener of their own that serves
    // only their socket, never the API.
    let agent_server = if addr.ip().to_canonical().is_loopback() || addr.ip().is_unspecified() {
        None
    } else {
        let loopback = TcpListener::bind(("127.0.0.1", 0))
            .context("cannot open the loopback listener for CodeBolt agents")?;
        app.agents
            .codebolt()
            .set_port(loopback.local_addr()?.port());
        let (agent_app, agent_codebolt) = (app.clone(), codebolt.clone());
        // The agents' listener serves loopback only, on its own port.
        let agent_edge = web::Data::new(
            http::edge::Edge::new(loopback.local_addr()?, &[]).map_err(anyhow::Error::msg)?,
        );
        let server = HttpServer::new(move || {
            ActixApp::new()
                .app_data(agent_app.clone())
                .app_data(agent_codebolt.clone())
                .app_data(agent_edge.clone())
                .wrap(middleware::from_fn(http::json_errors))
                .wrap(middleware::from_fn(http::edge::edge_guard))
                .configure(crate::codebolt::endpoint::routes)
                .default_service(web::to(http::no_route))
        })
        .workers(1)
        .shutdown_timeout(5)
        .disable_signals()
        .listen(loopback)?
        .run();
        let handle = server.handle();
        Some((handle, tokio::spawn(server)))
    };
    let limits = web::Data::new(http::limits::Limits::new(&config));
    // HTTP requests served, counted by the request middleware for `GET /metrics`.
    let requests = web::Data::new(byre_app::metrics::Requests::default());
    let connections = limits.connections.clone();
    let server = HttpServer::new(move || {
        ActixApp::new()
            .app_data(app.clone())
            .app_data(requests.clone())
            .app_data(config.clone())
            .app_data(codebolt.clone())
            .app_data(edge.clone())
            .app_data(socket_edge.clone())
            .app_data(limits.clone())
            .wrap(middleware::from_fn(http::limits::body_deadline))
            .wrap(middleware::from_fn(http::json_errors))
            .wrap(middleware::from_fn(http::auth::page_guard))
            .wrap(middleware::from_fn(http::edge::edge_guard))
            .wrap(middleware::from_fn(http::trace_request))
            .wrap(middleware::from_fn(http::security::security_headers))
            .configure(crate::codebolt::endpoint::routes)
            .configure(http::routes)
            .default_service(web::to(http::no_route))
    })
    // Event frames are small and must leave at once: no Nagle delay waiting for the client's
    // (possibly delayed) acknowledgement of the previous frame.
    .on_connect(move |conn, data| {
        if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
            let _ = tcp.set_nodelay(true);
            // Counted per peer; one past its peer's cap is shut down here.
            connections.on_connect(tcp, data);
        }
        http::identity::mark_serve_socket(conn, data);
    })
    .workers(
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .min(4),
    )
    .shutdown_timeout(5)
    .disable_signals()
    .listen(listener)?;
    let server = match serve_socket {
        Some(socket) => server.listen_uds(socket)?,
        None => server,
    }
    .run();
    let handle = server.handle();
    let server = tokio::spawn(server);
    Ok(Running {
        addr,
        handle,
        server,
        agent_server,
        writer,
        writer_thread,
        reactors,
        shutdown,
        browsers,
        _lock: lock,
    })
}

/// How long start-up waits for the data dir's lock before it gives up. A server that has just
/// stopped may still look alive for a moment: every process forked in that moment (by any
/// thread of byre, or of a test binary running many servers) holds a copy of its lock's file
/// until it execs; and a restart under a service manager may overlap the old process's exit.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the data dir's exclusive lock (`byre.lock`), retrying for up to [`LOCK_WAIT`] while
/// another holder has it; then fails with the one-server-per-data-dir message.
async fn lock_data_dir(lock: &File, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let mut waited = false;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                if !waited {
                    tracing::info!(data_dir = %data_dir.display(), "waiting for the data dir's lock");
                    waited = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(TryLockError::WouldBlock) => {
                anyhow::bail!(
                    "another byre server is using the data dir {}",
                    data_dir.display()
                )
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| {
                    format!("cannot lock {}", data_dir.join("byre.lock").display())
                })
            }
        }
    }
}
