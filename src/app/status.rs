//! `getStatus`: the server's figures, and the registry of open event streams it reports.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use serde::Serialize;
use serde_json::json;

use super::{Ctx, Error};
use crate::api::rfc3339;

#[derive(Clone)]
struct Stream {
    login: String,
    host: String,
    commit: String,
    connected_at_us: i64,
    /// A machine's `connectClient` socket, not an event stream.
    machine: bool,
}

/// Open event streams (and connected machines' sockets, which `getStatus` lists with them as
/// its `ConnectedClient`s), and when each client last acted. Cheap to clone.
#[derive(Clone, Default)]
pub struct Streams {
    open: Arc<DashMap<u64, Stream>>,
    last_action_us: Arc<DashMap<(String, String, String), i64>>,
    next_id: Arc<AtomicU64>,
}

/// Keeps a stream registered until dropped.
pub struct Registration {
    streams: Streams,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.streams.open.remove(&self.id);
    }
}

impl Streams {
    /// Registers an open stream of `login` from the client named by its `Byre-Host` and
    /// `Byre-Commit` headers (empty when absent).
    pub fn open(&self, login: &str, host: &str, commit: &str) -> Registration {
        self.register(login, host, commit, false)
    }

    /// Registers a machine's `connectClient` socket, listed like a stream to its owner but
    /// never counted in `sse_clients`: a count that moved when one user's machine connected
    /// would tell every user when an agent could reach it.
    pub fn open_machine(&self, login: &str, host: &str, commit: &str) -> Registration {
        self.register(login, host, commit, true)
    }

    fn register(&self, login: &str, host: &str, commit: &str, machine: bool) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stream = Stream {
            login: login.into(),
            host: host.into(),
            commit: commit.into(),
            connected_at_us: chrono::Utc::now().timestamp_micros(),
            machine,
        };
        self.open.insert(id, stream);
        Registration {
            streams: self.clone(),
            id,
        }
    }

    /// Records that a human request came from this client.
    pub fn acted(&self, login: &str, host: &str, commit: &str) {
        self.last_action_us.insert(
            (login.into(), host.into(), commit.into()),
            chrono::Utc::now().timestamp_micros(),
        );
    }

    /// How many event streams are open (machines' sockets not counted).
    pub fn n_streams(&self) -> usize {
        self.open.iter().filter(|s| !s.machine).count()
    }
}

/// Spec `ConnectedClient`.
#[derive(Serialize)]
struct ConnectedClient {
    login: String,
    host: String,
    commit: String,
    connected_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_action_at: Option<String>,
}

/// `getStatus`: the spec's `Status`, real figures of this server and its agent processes, as
/// `viewer` may see them (`clients` lists the viewer's own; another user's lead's unrecognised
/// lines are left out of `protocol_errors.recent`).
/// # Errors
/// [`Error::Internal`] when the log file's size cannot be read.
pub async fn status(app: &Ctx, viewer: &str) -> Result<serde_json::Value, Error> {
    let (projects, active_tasks) = app.writer.read(|s| {
        (
            s.projects.len(),
            s.tasks
                .values()
                .filter(|t| t.status == byre_projections::tasks::TaskStatus::Active)
                .count(),
        )
    });
    // The viewer's own clients only: another user's machines and pages are theirs to know of
    // (when a user's machine is connected is when an agent could reach it).
    let mut grouped: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for s in app.streams.open.iter().filter(|s| s.login == viewer) {
        let key = (s.login.clone(), s.host.clone(), s.commit.clone());
        let e = grouped.entry(key).or_insert(s.connected_at_us);
        *e = (*e).min(s.connected_at_us);
    }
    let mut clients: Vec<(i64, ConnectedClient)> = grouped
        .into_iter()
        .map(|((login, host, commit), at)| {
            let last = app
                .streams
                .last_action_us
                .get(&(login.clone(), host.clone(), commit.clone()))
                .map(|v| rfc3339(*v));
            (
                at,
                ConnectedClient {
                    login,
                    host,
                    commit,
                    connected_at: rfc3339(at),
                    last_action_at: last,
                },
            )
        })
        .collect();
    clients.sort_by_key(|(at, _)| *at);
    let store = app.writer.store().clone();
    let db_bytes = tokio::task::spawn_blocking(move || store.file_bytes())
        .await
        .map_err(Error::internal)?;
    let agents = app.agents.status(viewer, app.settings.stuck_after_seconds);
    Ok(json!({
        "started_at": rfc3339(app.started_at_us),
        "db_bytes": db_bytes,
        "last_event_seq": app.writer.head(),
        "projects": projects,
        "active_tasks": active_tasks,
        "sse_clients": app.streams.n_streams(),
        "clients": clients.into_iter().map(|(_, c)| c).collect::<Vec<_>>(),
        "live_agents": agents["live_agents"],
        "running_turns": agents["running_turns"],
        "rate_limits": agents["rate_limits"],
        "agent_processes": agents["agent_processes"],
        "zombies": agents["zombies"],
        "stuck_after_seconds": app.settings.stuck_after_seconds,
        "protocol_errors": agents["protocol_errors"],
        "previews_published": app.settings.tailscale_bin.is_some(),
        "agent_clis": app.agents.agent_clis(),
        "auth_mode": match app.settings.auth {
            crate::settings::AuthMode::Local { .. } => "local",
            crate::settings::AuthMode::Tailscale => "tailscale",
            crate::settings::AuthMode::Token { .. } => "token",
        },
        "sandbox": app.agents.sandbox().is_on(),
    }))
}
