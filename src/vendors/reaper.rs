//! Reaping what agents leave behind (DESIGN.md invariant 7): the process groups of an ended
//! agent and of every process marked with its session ([`SESSION_ENV`]), after each exit
//! ([`sweep`]) and, for what a previous server left, at start-up ([`clear_leftovers`]). Linux
//! `/proc` finds them; SIGKILL ends them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::runtime::Zombie;

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

/// SIGKILLs the process groups of `pgid`'s descendants that left it (Codex runs each command
/// in a session of its own), then the group itself. Descendants are found through `/proc`
/// while the group's leader lives; orphans of a leader that already died are not.
pub(crate) fn kill_tree(pgid: i32) {
    for group in descendant_groups(pgid) {
        kill_group(group);
    }
    kill_group(pgid);
}

/// Process groups other than `pid`'s own that hold descendants of `pid` (Linux `/proc`).
fn descendant_groups(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, ppid, pgid) of every process.
    let procs: Vec<(i32, i32, i32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let ppid = fields.next()?.parse().ok()?;
            let pgid = fields.next()?.parse().ok()?;
            Some((p, ppid, pgid))
        })
        .collect();
    let mut tree = vec![pid];
    let mut groups = Vec::new();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(p, ppid, pgid) in &procs {
            if ppid == parent && !tree.contains(&p) {
                tree.push(p);
                if pgid != pid && pgid > 1 && !groups.contains(&pgid) {
                    groups.push(pgid);
                }
            }
        }
        i += 1;
    }
    groups
}

/// The environment variable every agent process gets (and so every process it starts): its
/// byre session id. It finds what an agent left running once the agent is gone.
pub(crate) const SESSION_ENV: &str = "BYRE_AGENT_SESSION";

/// SIGKILLs the process group of every process whose environment has [`SESSION_ENV`] set to
/// a session id that `of_session` accepts (Linux `/proc`): what agents left behind, wherever
/// it runs (Codex runs each command in a session of its own, Claude Code its tools in groups
/// of their own, which the agent's death orphans, so [`kill_tree`] cannot find them). Never
/// byre's own group; zombies (no environment left) are not counted. Returns how many groups
/// held such a process.
pub(crate) fn kill_marked(of_session: impl Fn(&str) -> bool) -> usize {
    kill_marked_by(SESSION_ENV, of_session)
}

/// [`kill_marked`] for any marker: SIGKILLs the process group of every process whose
/// environment sets `env` to a value `accept` accepts (task terminals mark their shells with
/// `BYRE_TERMINAL`, `src/terminal/`). Never byre's own group; returns how many groups held one.
pub(crate) fn kill_marked_by(env: &str, accept: impl Fn(&str) -> bool) -> usize {
    let prefix = format!("{env}=");
    // SAFETY: getpgrp has no preconditions.
    let own = unsafe { libc::getpgrp() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut groups: Vec<i32> = Vec::new();
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let marked = environ.split(|b| *b == 0).any(|v| {
            v.strip_prefix(prefix.as_bytes())
                .and_then(|id| std::str::from_utf8(id).ok())
                .is_some_and(&accept)
        });
        if !marked {
            continue;
        }
        let pgid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(')')?;
                rest.split_whitespace().nth(2)?.parse::<i32>().ok()
            });
        if let Some(g) = pgid.filter(|g| *g > 1 && *g != own && !groups.contains(g)) {
            groups.push(g);
        }
    }
    for g in &groups {
        tracing::warn!(
            pgid = g,
            marker = env,
            "killed a marked process group left running"
        );
        kill_group(*g);
    }
    groups.len()
}

/// SIGKILLs a process group; harmless when it is gone.
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory-safety preconditions; a stale group gives ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Whether a process (group leader) still exists.
/// Whether a process group still has a live (not zombie) leader: `/proc/<pgid>/stat` exists and
/// its state is not `Z` (a killed orphan may wait as a zombie until init reaps it).
pub(crate) fn group_alive(pgid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pgid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        // No /proc (not Linux): ask the kernel; a zombie then counts as alive.
        // SAFETY: signal 0 only checks for existence.
        Err(_) if !std::path::Path::new("/proc/self").exists() => unsafe {
            libc::kill(-pgid, 0) == 0
        },
        Err(_) => false,
    }
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

/// A process's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), to tell it
/// from a later process that reuses its pid.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}
