//! Reaping what agents leave behind (DESIGN.md invariant 7): the process groups of an ended
//! agent and of every process marked with its session ([`SESSION_ENV`]), after each exit
//! ([`sweep`]) and, for what a previous server left, at start-up ([`clear_leftovers`]). Linux
//! `/proc` finds them; SIGKILL ends them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use byre_process::groups::{group_alive, kill_group, kill_marked, start_time};

use serde::Serialize;

/// SIGKILLs what an ended agent process may have left: its own process group, and every
/// group holding a process marked with its session ([`SESSION_ENV`]), such as a tool command
/// that Claude Code runs in a group of its own and leaves running when it is sent SIGTERM.
/// Waits (up to 2 s) until no marked process is left; returns whether none is.
pub(crate) async fn sweep(pgid: i32, session_id: &str) -> bool {
    kill_group(pgid);
    for _ in 0..100 {
        let id = session_id.to_owned();
        let n_left = tokio::task::spawn_blocking(move || kill_marked(|s| s == id))
            .await
            .unwrap_or(1);
        if n_left == 0 {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tracing::warn!(
        pgid,
        "processes of the agent's session survive SIGKILL; the next start tries again"
    );
    false
}

/// Kills what agents of a previous server left running: every process group holding a
/// process marked with one of `sessions` (every session in the log) or with a session named
/// by a pid file under `{data}/run/` (the agents themselves, and whatever they started, in
/// any group or session: DESIGN.md invariant 7), then the groups those pid files name;
/// returns the groups that survived SIGKILL, for `getStatus`. Runs before the server serves.
pub async fn clear_leftovers(
    data_dir: &Path,
    sessions: std::collections::HashSet<String>,
) -> Vec<Zombie> {
    let mut zombies = Vec::new();
    let files: Vec<PathBuf> = std::fs::read_dir(data_dir.join("run"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let mut sessions = sessions;
    sessions.extend(
        files
            .iter()
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned())),
    );
    let sessions = Arc::new(sessions);
    for _ in 0..100 {
        let of = sessions.clone();
        let n_left = tokio::task::spawn_blocking(move || kill_marked(|s| of.contains(s)))
            .await
            .unwrap_or(0);
        if n_left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for path in files {
        let session_id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut fields = text.split_whitespace();
        let pgid: i32 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let recorded_start: Option<u64> = fields.next().and_then(|s| s.parse().ok());
        let _ = std::fs::remove_file(&path);
        if recorded_start.is_none() || start_time(pgid) != recorded_start {
            // Not the process byre started (gone, or its pid reused): leave it alone.
            continue;
        }
        if pgid <= 1 || !group_alive(pgid) {
            continue;
        }
        kill_group(pgid);
        let mut gone = false;
        for _ in 0..100 {
            if !group_alive(pgid) {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tracing::warn!(
            pgid,
            session_id,
            gone,
            "killed an agent process group left by a previous server"
        );
        if !gone {
            zombies.push(Zombie {
                kind: "process_without_session",
                detail: format!("process group {pgid} of a previous server survived SIGKILL"),
                session_id: Some(session_id),
                task_id: None,
                pid: Some(pgid as u32),
            });
        }
    }
    zombies
}

/// Spec `Zombie`.
#[derive(Debug, Clone, Serialize)]
pub struct Zombie {
    /// `running_without_process` or `process_without_session`.
    pub(crate) kind: &'static str,
    /// What is wrong, for a human.
    pub(crate) detail: String,
    /// The session concerned, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    /// Its task, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    /// The process (group), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
}
