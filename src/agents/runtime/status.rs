//! `getStatus`'s agent figures, from the fold and the runtime's live processes.

use std::sync::atomic::Ordering;

use byre_projections::sessions::{SessionState, Vendor};

use super::{ProtocolError, Runtime, Zombie};
use byre_process::groups::group_alive;

/// One session of `getStatus`: its id, task, vendor, state, the seq it was created at, and
/// whether a turn runs.
type SessionRow = (
    byre_projections::ids::SessionId,
    byre_projections::ids::TaskId,
    Vendor,
    SessionState,
    i64,
    bool,
);

impl Runtime {
    /// `getStatus`'s agent figures: `live_agents`, `agent_processes`, `running_turns`,
    /// `zombies`, `protocol_errors`, `rate_limits`. `rate_limits[vendor]` is the `rate_limit`
    /// of the vendor's latest `rate_limited` inbox item (`{api_error_status, last_retry,
    /// vendor_status?}`), with `vendor_status` replaced by the latest status the vendor
    /// reported since this server started (Codex's `account/rateLimits/updated`, Claude
    /// Code's `rate_limit_event` `rate_limit_info`), if any, and `vendor_reports` the number
    /// of such reports. Another user's lead is left out: its process, its running turn, its
    /// unrecognised lines (`viewer` sees only their own lead and the tasks').
    pub fn status(&self, viewer: &str, stuck_after_seconds: u64) -> serde_json::Value {
        let now = chrono::Utc::now().timestamp_micros();
        let (sessions, rate_limits): (Vec<SessionRow>, serde_json::Map<String, serde_json::Value>) =
            self.writer.read(|s| {
                let sessions = s
                    .sessions
                    .values()
                    // Another user's lead is theirs alone: not its session, not its process.
                    .filter(|x| x.owner.is_empty() || x.owner == viewer)
                    .map(|x| {
                        (
                            x.id.clone(),
                            x.task_id.clone(),
                            x.vendor,
                            x.state,
                            x.created_seq as i64,
                            x.turn_running,
                        )
                    })
                    .collect();
                let mut limits = serde_json::Map::new();
                for item in s
                    .inbox
                    .values()
                    .filter(|i| i.kind == byre_projections::inbox::InboxKind::RateLimited)
                {
                    if let Some(v) = item.payload["vendor"].as_str() {
                        limits.insert(v.to_owned(), item.payload["rate_limit"].clone());
                    }
                }
                (sessions, limits)
            });
        let mut rate_limits = rate_limits;
        for entry in self.vendor_rate_limits.iter() {
            let slot = rate_limits
                .entry(entry.key().to_string())
                .or_insert_with(|| serde_json::json!({}));
            if let Some(o) = slot.as_object_mut() {
                let (status, n_reports) = entry.value();
                o.insert("vendor_status".into(), status.clone());
                o.insert("vendor_reports".into(), serde_json::json!(n_reports));
            }
        }
        let mut processes = Vec::new();
        let mut zombies: Vec<Zombie> = self
            .leftover_zombies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut running = Vec::new();
        let mut sorted = sessions;
        sorted.sort_by_key(|x| x.4);
        for (id, task_id, vendor, state, _, turn_running) in sorted {
            let live = self.live(&id);
            if turn_running {
                running.push(serde_json::json!({"session_id": id, "task_id": task_id, "vendor": vendor.as_str()}));
            }
            match live {
                Some(l) => {
                    let pid = l.pid.load(Ordering::Relaxed);
                    if pid == 0 {
                        // Not started yet (waiting for memory, or being spawned): no process to
                        // list; `byre_agent_starts_waiting` counts the waiting ones.
                        continue;
                    }
                    let last = l.last_event_us.load(Ordering::Relaxed);
                    let stuck = turn_running && now - last > stuck_after_seconds as i64 * 1_000_000;
                    let health = if pid != 0 && !group_alive(pid as i32) {
                        "exited"
                    } else if stuck {
                        "stuck"
                    } else {
                        "ok"
                    };
                    processes.push(serde_json::json!({"session_id": id, "task_id": task_id, "vendor": vendor.as_str(), "pid": pid, "state": state, "last_event_at": byre_log::rfc3339(last), "health": health}));
                }
                None if turn_running => zombies.push(Zombie {
                    kind: "running_without_process",
                    detail: "the session's turn is running but no agent process is".into(),
                    session_id: Some(id.clone().into()),
                    task_id: Some(task_id.clone().into()),
                    pid: None,
                }),
                None => {}
            }
        }
        let counts: serde_json::Map<String, serde_json::Value> = self
            .protocol_counts
            .iter()
            .map(|e| (e.key().clone(), serde_json::json!(*e.value())))
            .collect();
        let recent: Vec<ProtocolError> = self
            .protocol_recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            // A lead's raw lines are its user's alone (counted for everyone).
            .filter(|e| e.owner.is_empty() || e.owner == viewer)
            .cloned()
            .collect();
        serde_json::json!({
            "live_agents": processes.len(),
            "agent_processes": processes,
            "running_turns": running,
            "zombies": zombies,
            "protocol_errors": {"counts": counts, "recent": recent},
            "rate_limits": rate_limits,
        })
    }
}
