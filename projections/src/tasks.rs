//! Tasks: a branch with its own worktree (and, in later issues, agent sessions).
//! Operations: `listTasks`, `createTask`, `getTask`; the worktree reactor's outcome events.
//!
//! Ports: each active task holds a block of 10 ports from [`PORT_BASE_FIRST`], the lowest free
//! block. Colours: an index into a palette of [`PALETTE_SIZE`]; a new task gets a colour no
//! active task holds, the one given out longest ago (never given counts as oldest, lowest index
//! first); when every colour is held, the one given out longest ago.

use crate::ids::{Login, ProjectId, SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, NewEvent, TaskCreated, TaskStateChanged};
use crate::{DecideCtx, Rejection, State};

/// The first port of the first task's block.
pub const PORT_BASE_FIRST: u32 = 20_000;
/// Ports per task (`port_base` to `port_base + 9`).
pub const PORTS_PER_TASK: u32 = 10;
/// How many colours the UI's task palette has.
pub const PALETTE_SIZE: u32 = 12;
/// The highest block start: blocks stay below 65,536.
const PORT_BASE_LAST: u32 = 65_530;

/// Whether the task is open or closed (spec `Task.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Open.
    Active,
    /// Squash-merged.
    Merged,
    /// Closed without merging.
    Discarded,
}

/// What the task is doing (spec `Task.state`), kept by the writer in the same transaction as
/// every change to it; a `task.state` event carries each change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Its agent is mid-turn.
    Running,
    /// Its agent waits for a message.
    Idle,
    /// A turn ended and its review has not started.
    ReviewPending,
    /// A review runs.
    Reviewing,
    /// A merge runs.
    Merging,
    /// A discard runs.
    Discarding,
    /// Closed by a merge.
    Merged,
    /// Closed by a discard.
    Discarded,
    /// No agent session.
    NoAgent,
}

/// A task (spec `Task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Id.
    pub id: TaskId,
    /// Project.
    pub project_id: ProjectId,
    /// Title.
    pub title: String,
    /// Squash commit title.
    pub merge_title: String,
    /// Branch name.
    pub branch: String,
    /// Worktree path.
    pub worktree_path: String,
    /// The commit it branched from.
    pub base_ref: String,
    /// First port of its block.
    pub port_base: u32,
    /// Palette index.
    pub color: u32,
    /// Open or closed.
    pub status: TaskStatus,
    /// Creator's login.
    pub created_by: Login,
    /// Microseconds since the epoch.
    pub created_at_us: i64,
    /// When merged or discarded, microseconds since the epoch.
    pub closed_at_us: Option<i64>,
    /// The squash commit when merged.
    pub merge_commit: Option<String>,
    /// What it is doing.
    pub state: TaskState,
    /// A merge runs.
    pub merging: bool,
    /// A discard runs.
    pub discarding: bool,
    /// A merge into the parent is pending.
    pub merging_into_parent: bool,
    /// A merge waits for a review.
    pub merge_after_review: bool,
    /// Seq of the latest `turn.ended` with a summary; 0 for none.
    pub summary_seq: u64,
    /// Whether the worktree reactor recorded the worktree as made.
    pub worktree_ready: bool,
    /// Seq of `task.created`.
    pub created_seq: u64,
    /// When a merge was held behind another in the project, microseconds since the epoch.
    /// (The fields below are left out of the digest while empty, so older logs' digests hold.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_queued_at_us: Option<i64>,
    /// Who asked for the merge (its author); empty when none was asked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub merge_by: String,
    /// The squash commit once landed (`task.merge_landed`; empty: nothing to merge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_landed: Option<String>,
    /// The merge-in turn of a started merge: (session, turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_turn: Option<(SessionId, u32)>,
    /// When the running merge started its merge-in turn (`task.merge_requested` not held, or
    /// `task.merge_started`), microseconds since the epoch: the squash commit's time, so a
    /// redo after a crash makes the very same commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_started_at_us: Option<i64>,
    /// The discard's summary turn once started: (session, turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discard_turn: Option<(String, u32)>,
    /// Why a discard's clean-up failed (retried by `discardTask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_failed: Option<String>,
    /// The humans with a `user.message` in the task's transcript, in order of their first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub participants: Vec<String>,
    /// The TODO.md item it was started from; empty for other tasks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub todo_item: String,
    /// The task whose agent started this one as its subtask (`task.subtask_started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<TaskId>,
    /// A fork: the task it was forked from and the `n` of that task's snapshot it starts at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(String, u32)>,
    /// A stage task: its workflow, run and stage (`workflow.stage_started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<crate::runs::TaskStage>,
}

/// The state a task's facts imply (spec `Task.state`): merged or discarded once closed, else
/// discarding, merging, the state of its latest live session when that isn't idle, reviewing
/// while a review runs, review_pending while one waits, idle, or no_agent. `task.state` is emitted whenever it differs from [`Task::state`].
pub fn computed_state(state: &State, t: &Task) -> TaskState {
    match t.status {
        TaskStatus::Merged => TaskState::Merged,
        TaskStatus::Discarded => TaskState::Discarded,
        TaskStatus::Active if t.discarding => TaskState::Discarding,
        TaskStatus::Active if t.merging || t.merging_into_parent => TaskState::Merging,
        TaskStatus::Active => {
            let latest_live = state
                .sessions
                .values()
                .filter(|s| {
                    s.task_id == t.id
                        && s.role == crate::sessions::SessionRole::Implementer
                        && !s.completed
                })
                .max_by_key(|s| s.created_seq);
            let reviewing = crate::reviews::task_review_state(state, &t.id);
            match (latest_live, reviewing) {
                (Some(s), _) if s.turn_running => TaskState::Running,
                (_, Some(r)) => r,
                (Some(_), None) => TaskState::Idle,
                (None, None) => TaskState::NoAgent,
            }
        }
    }
}

/// The directory of branches that is a task's own, `byre/<first 8 characters of its id>`: its
/// branch is `<namespace>/<slug>`, and an agent's sandbox can write no ref outside it
/// (`docs/sandbox.md`). Tasks created before namespaces keep the `byre/<slug>-<id8>` their
/// `task.created` recorded.
pub fn branch_namespace(task_id: &str) -> String {
    format!("byre/{}", task_id.get(..8).unwrap_or(task_id))
}

/// Turns a title into a branch-name slug: lowercase ASCII letters, digits and single dashes,
/// at most 40 characters; `task` when nothing is left.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        "task".to_owned()
    } else {
        out
    }
}

/// Checks a task title: one line of 1 to 200 characters.
pub(crate) fn check_title(title: &str) -> Result<(), Rejection> {
    if title.trim().is_empty() || title.chars().count() > 200 || title.chars().any(char::is_control)
    {
        return Err(Rejection::Invalid(
            "title must be one line of 1 to 200 characters".into(),
        ));
    }
    Ok(())
}

fn next_port_base(state: &State) -> Result<u32, Rejection> {
    let held: std::collections::BTreeSet<u32> = state
        .tasks
        .values()
        .filter(|t| t.status == TaskStatus::Active)
        .map(|t| t.port_base)
        .collect();
    (PORT_BASE_FIRST..=PORT_BASE_LAST)
        .step_by(PORTS_PER_TASK as usize)
        .find(|p| !held.contains(p))
        .ok_or_else(|| Rejection::Conflict("every port block is held by an active task".into()))
}

fn next_color(state: &State) -> u32 {
    let held: std::collections::BTreeSet<u32> = state
        .tasks
        .values()
        .filter(|t| t.status == TaskStatus::Active)
        .map(|t| t.color)
        .collect();
    let last_given = |c: u32| state.color_given_seq.get(&c).copied().unwrap_or(0);
    let free = (0..PALETTE_SIZE)
        .filter(|c| !held.contains(c))
        .min_by_key(|&c| (last_given(c), c));
    free.unwrap_or_else(|| {
        (0..PALETTE_SIZE)
            .min_by_key(|&c| (last_given(c), c))
            .unwrap_or(0)
    })
}

/// Decides `StartTodoItem`: `CreateTask` with the task's `todo_item`; 409 while another
/// active task of the project has the same item, 400 for an empty item.
pub(crate) fn create_for_todo(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    project_id: &str,
    title: &str,
    base_ref: &str,
    todo_item: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    if todo_item.trim().is_empty() {
        return Err(Rejection::Invalid(
            "a TODO item's title is not empty".into(),
        ));
    }
    if let Some(other) = state.tasks.values().find(|t| {
        t.project_id == project_id && t.status == TaskStatus::Active && t.todo_item == todo_item
    }) {
        return Err(Rejection::Conflict(format!(
            "task `{}` is already working on the TODO item `{todo_item}`",
            other.id
        )));
    }
    let mut events = create(state, ctx, actor, project_id, title, base_ref)?;
    for e in &mut events {
        if let EventBody::TaskCreated(p) = &mut e.body {
            p.todo_item = todo_item.to_owned();
        }
    }
    Ok(events)
}

/// Decides `CreateTask` (no prompt, no workflow).
pub(crate) fn create(
    state: &State,
    ctx: &DecideCtx,
    actor: &str,
    project_id: &str,
    title: &str,
    base_ref: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let project = state
        .projects
        .get(project_id)
        .ok_or_else(|| Rejection::NotFound(format!("no project `{project_id}`")))?;
    check_title(title)?;
    let id = ctx.id(0);
    let branch = format!("{}/{}", branch_namespace(&id), slug(title));
    if state
        .tasks
        .values()
        .any(|t| t.project_id == project_id && t.branch == branch)
    {
        return Err(Rejection::Conflict(format!(
            "branch `{branch}` already exists"
        )));
    }
    Ok(vec![NewEvent::new(
        actor,
        EventBody::TaskCreated(TaskCreated {
            worktree_path: format!("{}/{id}", project.worktrees_root),
            id: id.clone().into(),
            project_id: project_id.to_owned().into(),
            title: title.to_owned(),
            branch,
            base_ref: base_ref.to_owned(),
            port_base: next_port_base(state)?,
            color: next_color(state),
            todo_item: String::new(),
            forked_from: None,
            forked_at: None,
        }),
    )
    .project(project_id)
    .task(id)])
}

/// Decides `RecordWorktree`: the reactor's outcome. Nothing when already recorded (the reactor
/// is idempotent and may run twice after a restart).
pub(crate) fn record_worktree(
    state: &State,
    task_id: &str,
    outcome: &Result<String, String>,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if task.worktree_ready || task.status != TaskStatus::Active {
        return Ok(Vec::new());
    }
    let body = match outcome {
        Ok(head) => {
            EventBody::TaskWorktreeCreated(crate::event::TaskWorktreeCreated { head: head.clone() })
        }
        Err(reason) => EventBody::TaskWorktreeFailed(crate::event::TaskWorktreeFailed {
            reason: reason.clone(),
        }),
    };
    let failed = matches!(body, EventBody::TaskWorktreeFailed(_));
    let mut events = vec![NewEvent::new("byre", body)
        .project(&task.project_id)
        .task(task_id)];
    if failed {
        // The task closes: so do its open inbox items.
        events.extend(crate::inbox::close_task_items(state, task_id));
    }
    Ok(events)
}

/// Derived events: a `task.state` for each task in `task_ids` whose computed state differs
/// from its recorded one.
pub(crate) fn derived_states<'a>(
    state: &State,
    task_ids: impl Iterator<Item = &'a str>,
) -> Vec<NewEvent> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for id in task_ids {
        if !seen.insert(id) {
            continue;
        }
        if let Some(t) = state.tasks.get(id) {
            let computed = computed_state(state, t);
            if computed != t.state {
                out.push(
                    NewEvent::new(
                        "byre",
                        EventBody::TaskState(TaskStateChanged { state: computed }),
                    )
                    .project(&t.project_id)
                    .task(id),
                );
            }
        }
    }
    out
}

/// Folds the task events.
pub(crate) fn apply(
    state: &mut State,
    seq: u64,
    created_at_us: i64,
    actor: &str,
    body: &EventBody,
    task_id: Option<&str>,
) {
    match body {
        EventBody::TaskCreated(p) => {
            state.color_given_seq.insert(p.color, seq);
            state.tasks.entry(p.id.clone()).or_insert_with(|| Task {
                id: p.id.clone(),
                project_id: p.project_id.clone(),
                title: p.title.clone(),
                merge_title: p.title.clone(),
                branch: p.branch.clone(),
                worktree_path: p.worktree_path.clone(),
                base_ref: p.base_ref.clone(),
                port_base: p.port_base,
                color: p.color,
                status: TaskStatus::Active,
                created_by: actor.to_owned().into(),
                created_at_us,
                closed_at_us: None,
                merge_commit: None,
                state: TaskState::NoAgent,
                merging: false,
                discarding: false,
                merging_into_parent: false,
                merge_after_review: false,
                summary_seq: 0,
                worktree_ready: false,
                created_seq: seq,
                merge_queued_at_us: None,
                merge_by: String::new(),
                merge_landed: None,
                merge_turn: None,
                merge_started_at_us: None,
                discard_turn: None,
                cleanup_failed: None,
                participants: Vec::new(),
                todo_item: p.todo_item.clone(),
                parent_task_id: None,
                forked_from: p.forked_from.clone().zip(p.forked_at),
                stage: None,
            });
        }
        EventBody::TaskWorktreeCreated(_) => {
            if let Some(t) = task_id.and_then(|id| state.tasks.get_mut(id)) {
                t.worktree_ready = true;
            }
        }
        EventBody::TaskWorktreeFailed(_) => {
            if let Some(t) = task_id.and_then(|id| state.tasks.get_mut(id)) {
                t.status = TaskStatus::Discarded;
                t.closed_at_us = Some(created_at_us);
            }
        }
        EventBody::TaskState(p) => {
            if let Some(t) = task_id.and_then(|id| state.tasks.get_mut(id)) {
                t.state = p.state;
            }
        }
        _ => {}
    }
}

impl State {
    /// The first human other than `owner` whose words can reach the agents of task `task_id`:
    /// a participant (a `user.message` sender: their messages and inbox answers) of the task or
    /// of any task of its family. The family: every task with the same root (following
    /// `parent_task_id` up), and for a workflow stage, or a subtask of one, every task of its
    /// run with theirs; text travels within it as subtask reports, stage outputs and merges.
    /// A user's own machine serves a task only while this is `None` (docs/security.md, "A
    /// user's machine serves only its owner").
    pub fn other_participant(&self, task_id: &str, owner: &str) -> Option<&str> {
        let parent = |t: &Task| t.parent_task_id.as_ref().and_then(|p| self.tasks.get(p));
        // The task's chain up to its root (bounded: a parent is always an older task, but a
        // corrupt log must not loop).
        let chain = |t: &'_ Task| -> Vec<&Task> {
            let mut out = Vec::new();
            let mut at = self.tasks.get(t.id.as_str());
            while let Some(t) = at {
                if out.len() > 64 || out.iter().any(|seen: &&Task| seen.id == t.id) {
                    break;
                }
                out.push(t);
                at = parent(t);
            }
            out
        };
        let task = self.tasks.get(task_id)?;
        let up = chain(task);
        let runs: Vec<&str> = up
            .iter()
            .filter_map(|t| t.stage.as_ref().map(|s| s.run.as_str()))
            .collect();
        let mut roots: Vec<&str> = up.last().map(|t| t.id.as_str()).into_iter().collect();
        if !runs.is_empty() {
            for t in self.tasks.values() {
                if t.stage
                    .as_ref()
                    .is_some_and(|s| runs.contains(&s.run.as_str()))
                {
                    if let Some(root) = chain(t).last() {
                        roots.push(root.id.as_str());
                    }
                }
            }
        }
        self.tasks
            .values()
            .filter(|t| {
                chain(t)
                    .last()
                    .is_some_and(|root| roots.contains(&root.id.as_str()))
            })
            .flat_map(|t| t.participants.iter())
            .map(String::as_str)
            .find(|p| *p != owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_branch_safe() {
        assert_eq!(slug("Fix the login page!"), "fix-the-login-page");
        assert_eq!(slug("  ..//  "), "task");
        assert_eq!(slug("Ünïcode café"), "n-code-caf");
        assert!(slug(&"a".repeat(100)).len() <= 40);
    }

    #[test]
    fn a_todo_item_has_one_active_task_at_a_time() {
        use crate::testkit::World;
        let mut w = World::with_task();
        let plain = w.task_id();
        // Test ids share their first 8 characters, so each task gets a title of its own.
        let mut n = 0;
        let mut start = |w: &World, item: &str| crate::Command::StartTodoItem {
            actor: "ada".into(),
            project_id: w.project.clone(),
            title: {
                n += 1;
                format!("{item} {n}")
            },
            base_ref: "abc".into(),
            todo_item: item.into(),
        };
        let events = w.ok(start(&w, "Write the docs"));
        let id = events[0].task_id.clone().unwrap();
        assert_eq!(w.state.tasks[&id].todo_item, "Write the docs");
        let again = start(&w, "Write the docs");
        assert!(matches!(w.when(again), Err(Rejection::Conflict(_))));
        w.ok(start(&w, "Another item"));
        // The plain task of `with_task` has none.
        assert_eq!(w.state.tasks[&plain].todo_item, "");
        // Once that task is closed (its worktree failed), the item is free again.
        w.ok(crate::Command::RecordWorktree {
            task_id: id,
            outcome: Err("disk full".into()),
        });
        w.ok(start(&w, "Write the docs"));
        let empty = start(&w, " ");
        assert!(matches!(w.when(empty), Err(Rejection::Invalid(_))));
    }
}
