//! Process groups: every child byre or `byre client` starts runs in a group of its own (the
//! group's id is its pid), so killing the group ends it and whatever it started there
//! (DESIGN.md invariant 7). What leaves its group (a session of its own) is found by a marker
//! in its environment ([`kill_marked_by`]). Linux `/proc` finds them; SIGKILL ends them.

/// Makes `cmd`'s process the leader of a session of its own before it execs: its own process
/// group (pgid = pid, for [`kill_group`]) and no controlling terminal, so nothing in it can
/// read from or push input into a terminal byre runs in (`TIOCSTI`), and ssh cannot ask for a
/// passphrase there. Not for a task terminal's shell, whose pty makes its terminal; a tokio
/// command passes `as_std_mut()`.
pub fn own_session(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// SIGKILLs the process groups of `pgid`'s descendants that left it (Codex runs each command
/// in a session of its own), then the group itself. Descendants are found through `/proc`
/// while the group's leader lives; orphans of a leader that already died are not.
pub fn kill_tree(pgid: i32) {
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

/// The environment variable every process started for an agent gets (and so every process it
/// starts): the agent's byre session id. It finds what an agent left running once the agent is
/// gone (its toolbox servers, terminal commands and browser too).
pub const SESSION_ENV: &str = "BYRE_AGENT_SESSION";

/// SIGKILLs the process group of every process whose environment has [`SESSION_ENV`] set to
/// a session id that `of_session` accepts (Linux `/proc`): what agents left behind, wherever
/// it runs (Codex runs each command in a session of its own, Claude Code its tools in groups
/// of their own, which the agent's death orphans, so [`kill_tree`] cannot find them). Never
/// byre's own group; zombies (no environment left) are not counted. Returns how many groups
/// held such a process.
pub fn kill_marked(of_session: impl Fn(&str) -> bool) -> usize {
    kill_marked_by(SESSION_ENV, of_session)
}

/// [`kill_marked`] for any marker: SIGKILLs the process group of every process whose
/// environment sets `env` to a value `accept` accepts (task terminals mark their shells with
/// `BYRE_TERMINAL`, byre-terminal). Never byre's own group; returns how many groups held one.
pub fn kill_marked_by(env: &str, accept: impl Fn(&str) -> bool) -> usize {
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
pub fn kill_group(pgid: i32) {
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
pub fn group_alive(pgid: i32) -> bool {
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

/// A process's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), to tell it
/// from a later process that reuses its pid.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}
