//! Task terminals (`getTaskTerminal`): which task has a running shell and who watches it. The
//! bytes a terminal prints are live only; what the log holds is a viewer's socket opening
//! (`terminal.opened`, with the shell's start when the open started one), a viewer leaving
//! while the shell lives (`terminal.closed`) and the shell's end (`terminal.exited`, which
//! also ends every viewer still attached). The terminal runtime (`src/terminal/`) gathers the
//! facts (pids, exit statuses) and records them with [`crate::Command::RecordTerminal`].

use crate::ids::Login;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::EventBody;
use crate::tasks::TaskStatus;
use crate::{NewEvent, Rejection, State};

/// `terminal.opened` payload: a viewer's socket attached to the task's terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerminalOpened {
    /// The socket's id, chosen by the terminal runtime; its `terminal.closed` names it.
    pub viewer_id: String,
    /// The user whose socket it is.
    pub login: Login,
    /// The shell's pid (also its process group and session).
    pub shell_pid: u32,
    /// Whether this open started the shell (none was running).
    pub started: bool,
    /// The shell's program (its login shell from passwd, `/bin/sh` when none); set when
    /// `started`, else empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shell: String,
    /// Columns the terminal has after this open (the size it started at, or the viewer's).
    pub cols: u16,
    /// Rows, likewise.
    pub rows: u16,
}

/// `terminal.closed` payload: a viewer's socket closed while the shell runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerminalClosed {
    /// The socket's id (its `terminal.opened`).
    pub viewer_id: String,
    /// The user whose socket it was.
    pub login: Login,
    /// Why: `client` (the client closed it or the connection broke), `unresponsive` (no
    /// answer to pings), `lagging` (it could not keep up with the output).
    pub reason: String,
}

/// `terminal.exited` payload: the task's shell ended; every viewer still attached is closed
/// with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerminalExited {
    /// The shell's pid.
    pub shell_pid: u32,
    /// The exit status the sockets were closed with: the shell's exit code, or 128 + the
    /// signal that ended it; absent when unknown (a shell a previous server left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// Why it ended: `exited` (by itself), `task_closed` (killed as its task was merged or
    /// discarded), `server_stopping` (killed as byre stopped), `server_restarted` (found at
    /// start-up from a server that did not stop cleanly, and killed).
    pub cause: String,
}

/// What the terminal runtime records ([`crate::Command::RecordTerminal`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum TerminalChange {
    /// A viewer attached (`terminal.opened`).
    Opened(TerminalOpened),
    /// A viewer left (`terminal.closed`).
    Closed(TerminalClosed),
    /// The shell ended (`terminal.exited`).
    Exited(TerminalExited),
}

/// A task's running terminal, as the log tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminal {
    /// The shell's pid.
    pub shell_pid: u32,
    /// When it started, µs since the epoch.
    pub started_at_us: i64,
    /// Attached viewers: socket id → login.
    pub viewers: BTreeMap<String, String>,
}

/// Decides `RecordTerminal`. An open needs an active task (a shell is never started for a
/// closed one); a close or exit that names no current viewer or shell records nothing, so
/// every record is idempotent.
/// # Errors
/// 404 unknown task; 409 an open of a closed task.
pub(crate) fn record(
    state: &State,
    actor: &str,
    task_id: &str,
    change: &TerminalChange,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    let current = state.terminals.get(task_id);
    let body = match change {
        TerminalChange::Opened(o) => {
            if task.status != TaskStatus::Active {
                return Err(Rejection::Conflict(format!(
                    "task `{task_id}` is closed: it has no terminal"
                )));
            }
            let same_shell = current.is_some_and(|t| t.shell_pid == o.shell_pid);
            if o.started == same_shell {
                // A start while the log holds the same shell, or an attach to a shell the
                // log does not hold: not what the runtime does; nothing to record.
                return Ok(Vec::new());
            }
            EventBody::TerminalOpened(o.clone())
        }
        TerminalChange::Closed(c) => {
            if current.is_none_or(|t| !t.viewers.contains_key(&c.viewer_id)) {
                return Ok(Vec::new());
            }
            EventBody::TerminalClosed(c.clone())
        }
        TerminalChange::Exited(x) => {
            if current.is_none_or(|t| t.shell_pid != x.shell_pid) {
                return Ok(Vec::new());
            }
            EventBody::TerminalExited(x.clone())
        }
    };
    Ok(vec![NewEvent::new(actor, body)
        .project(&task.project_id)
        .task(task_id)])
}

/// Folds `terminal.opened`, `terminal.closed` and `terminal.exited`.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let Some(task_id) = e.task_id.as_deref() else {
        return;
    };
    match &e.body {
        EventBody::TerminalOpened(o) => {
            let t = state
                .terminals
                .entry(task_id.to_owned().into())
                .or_insert_with(|| Terminal {
                    shell_pid: o.shell_pid,
                    started_at_us: e.created_at_us,
                    viewers: BTreeMap::new(),
                });
            if o.started {
                t.shell_pid = o.shell_pid;
                t.started_at_us = e.created_at_us;
                t.viewers.clear();
            }
            t.viewers
                .insert(o.viewer_id.clone(), o.login.clone().into());
        }
        EventBody::TerminalClosed(c) => {
            if let Some(t) = state.terminals.get_mut(task_id) {
                t.viewers.remove(&c.viewer_id);
            }
        }
        EventBody::TerminalExited(x)
            if state
                .terminals
                .get(task_id)
                .is_some_and(|t| t.shell_pid == x.shell_pid) =>
        {
            state.terminals.remove(task_id);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{kinds, World};
    use crate::Command;

    impl World {
        /// Records `change` on task `task_id` as `ada`; the kinds written.
        fn terminal(&mut self, task_id: &str, change: TerminalChange) -> Vec<&'static str> {
            kinds(&self.ok(record_cmd(task_id, change)))
        }
    }

    fn opened(viewer: &str, pid: u32, started: bool) -> TerminalChange {
        TerminalChange::Opened(TerminalOpened {
            viewer_id: viewer.into(),
            login: "ada".into(),
            shell_pid: pid,
            started,
            shell: if started {
                "/bin/sh".into()
            } else {
                String::new()
            },
            cols: 80,
            rows: 24,
        })
    }

    fn record_cmd(task_id: &str, change: TerminalChange) -> Command {
        Command::RecordTerminal {
            actor: "ada".into(),
            task_id: task_id.into(),
            change,
        }
    }

    #[test]
    fn a_terminal_opens_gains_a_viewer_loses_it_and_ends_with_its_shell() {
        let mut w = World::with_task();
        let task = w.task_id();
        assert_eq!(
            w.terminal(&task, opened("v1", 42, true)),
            ["terminal.opened"]
        );
        assert_eq!(
            w.terminal(&task, opened("v2", 42, false)),
            ["terminal.opened"]
        );
        assert_eq!(w.state.terminals[&task].viewers.len(), 2);
        let closed = TerminalChange::Closed(TerminalClosed {
            viewer_id: "v1".into(),
            login: "ada".into(),
            reason: "client".into(),
        });
        assert_eq!(w.terminal(&task, closed.clone()), ["terminal.closed"]);
        assert!(
            w.terminal(&task, closed).is_empty(),
            "a second close records nothing"
        );
        let exited = TerminalChange::Exited(TerminalExited {
            shell_pid: 42,
            status: Some(3),
            cause: "exited".into(),
        });
        assert_eq!(w.terminal(&task, exited.clone()), ["terminal.exited"]);
        assert!(!w.state.terminals.contains_key(&task));
        assert!(w.terminal(&task, exited).is_empty());
    }

    #[test]
    fn an_exit_of_another_shell_records_nothing() {
        let mut w = World::with_task();
        let task = w.task_id();
        w.terminal(&task, opened("v1", 42, true));
        let other = TerminalChange::Exited(TerminalExited {
            shell_pid: 7,
            status: None,
            cause: "exited".into(),
        });
        assert!(w.terminal(&task, other).is_empty());
        assert_eq!(w.state.terminals[&task].shell_pid, 42);
    }

    #[test]
    fn a_terminal_of_an_unknown_task_is_404_and_of_a_closed_one_409() {
        let mut w = World::with_task();
        let r = w.when(record_cmd("nope", opened("v1", 1, true)));
        assert!(matches!(r, Err(Rejection::NotFound(_))), "{r:?}");
        let task = w.task_id();
        w.ok(Command::RecordWorktree {
            task_id: task.clone().into(),
            outcome: Err("boom".into()),
        });
        let r = w.when(record_cmd(&task, opened("v1", 1, true)));
        assert!(matches!(r, Err(Rejection::Conflict(_))), "{r:?}");
    }
}
