//! `GET /metrics` (outside the contract, README "Operating byre"): the server's figures in the
//! Prometheus text exposition format (OpenMetrics 1.0 text, through the `prometheus-client`
//! crate). Gauges are read at scrape time from the same figures `getStatus` serves
//! ([`super::status::status`]) and from the fold; counters and histograms are kept as they
//! happen: the writer's group commits ([`byre_log::stats::CommitStats`]) and HTTP requests
//! ([`Requests`], recorded by the HTTP adapter's middleware).

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Ctx, Error};

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of one HTTP request: its method, the route pattern it matched (`/api/tasks/{taskId}`;
/// `unmatched` for none, so the label's values stay few) and its status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `GET`, `POST`, …
    pub method: String,
    /// The route's pattern.
    pub route: String,
    /// The response's status code.
    pub status: u16,
}

/// HTTP requests served, by [`RequestLabels`]. Cloning shares the counters.
#[derive(Clone, Debug, Default)]
pub struct Requests(pub Family<RequestLabels, Counter>);

/// Whether `route` acts on the caller's own things (`/api/me/…`, a task's summary read, the
/// caller's machines and their transfers): its count would tell every user how often one of
/// them did it (how many messages ada sent her lead, when her machine connected), so such
/// routes are not counted.
fn per_user(route: &str) -> bool {
    route == "/api/me"
        || route.starts_with("/api/me/")
        || route.ends_with("/summary-read")
        || route.starts_with("/api/clients/")
}

impl Requests {
    /// Counts one request, unless its route is [`per_user`].
    pub fn record(&self, method: &str, route: Option<&str>, status: u16) {
        if route.is_some_and(per_user) {
            return;
        }
        self.0
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.unwrap_or("unmatched").to_owned(),
                status,
            })
            .inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProcessLabels {
    vendor: String,
    health: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

/// The server's figures as Prometheus text, as `viewer` may see them: nothing of another
/// user's lead (its process, its turns), and no count of per-user routes (`/api/me/…`).
/// # Errors
/// [`Error::Internal`] when `getStatus`'s figures cannot be read.
pub async fn render(app: &Ctx, requests: &Requests, viewer: &str) -> Result<String, Error> {
    let status = super::status::status(app, viewer).await?;
    let n = |k: &str| status[k].as_i64().unwrap_or(0);
    let mut registry = Registry::with_prefix("byre");

    let stats = app.writer.stats();
    registry.register(
        "events_appended",
        "Events appended to the log by this server since it started",
        stats.events.clone(),
    );
    registry.register(
        "group_commits",
        "Group commits of the writer since this server started",
        stats.commits.clone(),
    );
    registry.register(
        "group_commit_commands",
        "Commands per group commit",
        stats.group_commands.clone(),
    );
    registry.register(
        "group_commit_seconds",
        "Time from a group's transaction start to its durable commit",
        stats.commit_seconds.clone(),
    );
    gauge(
        &mut registry,
        "last_event_seq",
        "The log's last seq",
        n("last_event_seq"),
    );
    gauge(
        &mut registry,
        "db_bytes",
        "Size of the redb file",
        n("db_bytes"),
    );
    let startup = app.writer.startup();
    gauge(
        &mut registry,
        "startup_snapshot_seq",
        "Seq of the projection snapshot this server's start-up folded from (0: from seq 1)",
        startup.projection_snapshot_seq as i64,
    );
    gauge(
        &mut registry,
        "startup_events_folded",
        "Events this server folded at start-up: those after its projection snapshot",
        startup.n_events_folded as i64,
    );
    let (_, used) = app.writer.bus().usage();
    let limit = app.writer.bus().limit();
    gauge(
        &mut registry,
        "stream_buffer_bytes",
        "Bytes of events held for live streams",
        used as i64,
    );
    gauge(
        &mut registry,
        "stream_buffer_limit_bytes",
        "The live streams' buffer limit (serve --stream-buffer)",
        limit as i64,
    );
    gauge(
        &mut registry,
        "sse_clients",
        "Open /api/events streams",
        n("sse_clients"),
    );
    gauge(&mut registry, "projects", "Projects", n("projects"));

    let processes: Family<ProcessLabels, Gauge> = Family::default();
    for p in status["agent_processes"].as_array().into_iter().flatten() {
        processes
            .get_or_create(&ProcessLabels {
                vendor: p["vendor"].as_str().unwrap_or("").to_owned(),
                health: p["health"].as_str().unwrap_or("").to_owned(),
            })
            .inc();
    }
    registry.register(
        "agent_processes",
        "Live agent processes by vendor and health (ok, stuck, exited)",
        processes,
    );
    gauge(
        &mut registry,
        "agent_starts_waiting",
        "Agent process starts waiting for memory (serve --agent-memory-floor)",
        app.agents.n_waiting_for_memory() as i64,
    );
    gauge(
        &mut registry,
        "running_turns",
        "Agent turns running now",
        status["running_turns"]
            .as_array()
            .map_or(0, |a| a.len() as i64),
    );
    gauge(
        &mut registry,
        "zombies",
        "Inconsistencies between the log and the live processes (getStatus.zombies)",
        status["zombies"].as_array().map_or(0, |a| a.len() as i64),
    );

    let (tasks, reviews, inbox_open, turns) = app.writer.read(|s| {
        let tasks: Family<StateLabels, Gauge> = Family::default();
        for t in s.tasks.values() {
            let state = serde_json::to_value(t.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            tasks.get_or_create(&StateLabels { state }).inc();
        }
        let reviews: Family<StateLabels, Gauge> = Family::default();
        for r in s.reviews.values() {
            let state = serde_json::to_value(r.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            reviews.get_or_create(&StateLabels { state }).inc();
        }
        let open = s
            .inbox
            .values()
            .filter(|i| i.state == byre_projections::inbox::InboxState::Open)
            .count();
        // Another user's lead's turns are theirs alone.
        let turns: u64 = s
            .sessions
            .values()
            .filter(|x| x.owner.is_empty() || x.owner == viewer)
            .map(|x| u64::from(x.turns))
            .sum();
        (tasks, reviews, open, turns)
    });
    registry.register("tasks", "Tasks by state", tasks);
    registry.register("reviews", "Reviews by state", reviews);
    gauge(
        &mut registry,
        "inbox_open",
        "Open inbox items",
        inbox_open as i64,
    );
    let turns_total: Counter = Counter::default();
    turns_total.inc_by(turns);
    registry.register(
        "turns_started",
        "Agent turns started, over the whole log",
        turns_total,
    );

    registry.register(
        "http_requests",
        "HTTP requests served since start, by method, route and status",
        requests.0.clone(),
    );
    let mut text = String::new();
    encode(&mut text, &registry).map_err(Error::internal)?;
    Ok(text)
}
