//! Subtasks: a task's agent starts another task and follows it (`start_subtask`,
//! `list_subtasks`; CodeBolt's `startAgent` starts one the same way). Merging a subtask into
//! its parent is `mergeTask` with target `parent` (`app::finish::merge_task`).
//!
//! [`start_subtask`] is one operation for every caller: `StartSubtask` (the task and its link
//! to the caller in one batch, `task.created` + `task.subtask_started`), then the wait for its
//! worktree, then its session on the prompt (`app::sessions::start_session`), as the calling
//! task's creator. The model: the one asked for, of any vendor; else the calling session's
//! own model, so the subtask runs on the same vendor and model as its parent's agent.

use std::path::PathBuf;

use byre_projections::tasks::TaskStatus;
use byre_projections::Command;
use serde_json::Value;

use super::{blocking, Ctx, Error};

/// Where a subtask's branch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The parent's worktree HEAD (`start_subtask`).
    ParentHead,
    /// The tip of the project's default branch (CodeBolt's `startAgent`, as it always did).
    DefaultBranch,
}

/// What a subtask is started with.
pub struct NewSubtask {
    /// Its title (one line of 1 to 200 characters).
    pub title: String,
    /// Its agent's first message.
    pub prompt: String,
    /// Its agent's model; the calling session's model when absent or empty.
    pub model: Option<String>,
    /// The CodeBolt agent (for `startAgent`); empty otherwise.
    pub agent: String,
    /// Where its branch starts.
    pub base: Base,
}

/// A started subtask.
pub struct Started {
    /// The new task.
    pub task_id: String,
    /// Its agent's session, running its first turn.
    pub session_id: String,
    /// The seq of `task.subtask_started`: follow the log after it to see the session's turns.
    pub linked_seq: u64,
}

/// Starts a subtask of session `session_id`'s task: see the module's doc.
/// # Errors
/// Invalid (empty prompt, bad title or model), not found (unknown session), forbidden (not a
/// task's implementer), conflict (the calling task closed or finishing, its HEAD unreadable),
/// internal (the worktree could not be made).
pub async fn start_subtask(app: &Ctx, session_id: &str, new: NewSubtask) -> Result<Started, Error> {
    if new.prompt.trim().is_empty() {
        return Err(Error::Invalid(
            "the subtask's prompt must not be empty".into(),
        ));
    }
    let facts = app.writer.read(|s| {
        let session = s.sessions.get(session_id)?;
        let t = s.tasks.get(&session.task_id)?;
        let p = s.projects.get(&t.project_id)?;
        Some((
            session.model.clone(),
            t.created_by.clone(),
            PathBuf::from(&t.worktree_path),
            PathBuf::from(&p.repo_path),
            p.default_branch.clone(),
        ))
    });
    let (own_model, actor, worktree, repo, default_branch) =
        facts.ok_or_else(|| Error::NotFound(format!("no task session `{session_id}`")))?;
    let model = new
        .model
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(own_model);
    byre_projections::users::check_model(&model)?;
    super::sessions::check_agent_model(app, &model, None)?;
    let base = new.base;
    let base_ref = blocking(move || {
        match base {
            Base::ParentHead => byre_git::worktree_head(&worktree),
            Base::DefaultBranch => byre_git::branch_tip(&repo, &default_branch),
        }
        .map_err(|e| Error::Conflict(format!("cannot read the subtask's base commit: {e}")))
    })
    .await?;
    let ack = app
        .submit(Command::StartSubtask {
            session_id: session_id.to_owned().into(),
            title: new.title.trim().to_owned(),
            base_ref,
            agent: new.agent,
        })
        .await?;
    let (first, last) = match (ack.events.first(), ack.events.last()) {
        (Some(f), Some(l)) => (f, l),
        _ => return Err(Error::internal("task.created missing")),
    };
    let task_id = first
        .task_id
        .clone()
        .ok_or_else(|| Error::internal("task.created without task_id"))?;
    let linked_seq = last.seq;
    super::task_creation::wait_for_worktree(app, &task_id, first.seq).await?;
    let session_id =
        super::sessions::start_session(app, &actor, &task_id, Some(model), new.prompt, Vec::new())
            .await?;
    Ok(Started {
        task_id: task_id.into(),
        session_id,
        linked_seq,
    })
}

/// What `list_subtasks` reports of one subtask.
#[derive(Debug, serde::Serialize)]
pub struct SubtaskReport {
    /// The subtask.
    pub task_id: String,
    /// Its title.
    pub title: String,
    /// Its branch (what `git merge` takes).
    pub branch: String,
    /// active, merged or discarded.
    pub status: TaskStatus,
    /// What it is doing (the spec's `Task.state`).
    pub state: byre_projections::tasks::TaskState,
    /// Whether a merge into the parent was asked for and is not done.
    pub merging_into_parent: bool,
    /// Its agent's latest summary (the result of its latest completed turn); empty for none.
    pub last_summary: String,
    /// While active: what its worktree holds that the parent's branch doesn't (`getUnmerged`'s
    /// figures against the parent's branch); absent when closed or unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmerged: Option<byre_git::merge::Unmerged>,
}

/// The subtasks of session `session_id`'s task, oldest first.
/// # Errors
/// Not found (unknown session); internal (a log read).
pub async fn list_subtasks(app: &Ctx, session_id: &str) -> Result<Vec<SubtaskReport>, Error> {
    let rows = app.writer.read(|s| {
        let parent = s.tasks.get(&s.sessions.get(session_id)?.task_id)?;
        let repo = s.projects.get(&parent.project_id)?.repo_path.clone();
        let mut subs: Vec<_> = s
            .tasks
            .values()
            .filter(|t| t.parent_task_id.as_deref() == Some(parent.id.as_str()))
            .collect();
        subs.sort_by_key(|t| t.created_seq);
        Some(
            subs.into_iter()
                .map(|t| {
                    let report = SubtaskReport {
                        task_id: t.id.clone().into(),
                        title: t.title.clone(),
                        branch: t.branch.clone(),
                        status: t.status,
                        state: t.state,
                        merging_into_parent: t.merging_into_parent,
                        last_summary: String::new(),
                        unmerged: None,
                    };
                    let git = (t.status == TaskStatus::Active).then(|| {
                        (
                            PathBuf::from(&repo),
                            PathBuf::from(&t.worktree_path),
                            parent.branch.clone(),
                        )
                    });
                    (report, t.summary_seq, git)
                })
                .collect::<Vec<_>>(),
        )
    });
    let rows = rows.ok_or_else(|| Error::NotFound(format!("no task session `{session_id}`")))?;
    // Each active subtask's worktree, read in its sandbox (`git::boxed`).
    let mut rows_with_facts = Vec::with_capacity(rows.len());
    for (report, summary_seq, git) in rows {
        let git = match git {
            Some((repo, worktree, parent_branch)) => app
                .git_box
                .facts(&worktree)
                .await
                .ok()
                .map(|facts| (repo, facts, parent_branch)),
            None => None,
        };
        rows_with_facts.push((report, summary_seq, git));
    }
    let rows = rows_with_facts;
    let store = app.writer.store().clone();
    blocking(move || {
        let mut out = Vec::with_capacity(rows.len());
        for (mut report, summary_seq, git) in rows {
            if summary_seq > 0 {
                let records = store
                    .task_records(&report.task_id, summary_seq - 1, 1)
                    .map_err(Error::internal)?;
                if let Some(r) = records.first().filter(|r| r.seq == summary_seq) {
                    let event: Value = serde_json::from_str(&r.json).unwrap_or_default();
                    event["payload"]["result"]
                        .as_str()
                        .unwrap_or_default()
                        .clone_into(&mut report.last_summary);
                }
            }
            if let Some((repo, facts, parent_branch)) = git {
                report.unmerged =
                    byre_git::merge::unmerged(&repo, &facts, &report.branch, &parent_branch).ok();
            }
            out.push(report);
        }
        Ok(out)
    })
    .await
}

/// Follows the log after seq `after` until session `session_id`'s turn ends; that
/// `turn.ended`'s payload and the last `agent.text` before it. `None` when the log ends first
/// (the server stops). CodeBolt's `startAgent` waits on it for the subtask it started.
pub async fn turn_end(
    app: &Ctx,
    session_id: &str,
    after: u64,
) -> Option<(serde_json::Value, String)> {
    use futures_util::StreamExt;
    let mut events = Box::pin(byre_log::subscription::subscribe(app.writer.clone(), after));
    let mut last_text = String::new();
    while let Some(r) = events.next().await {
        let Ok(r) = r else { continue };
        if r.agent_session_id.as_deref() != Some(session_id) {
            continue;
        }
        let payload = serde_json::from_str::<serde_json::Value>(&r.json)
            .map(|v| v["payload"].clone())
            .unwrap_or_default();
        match r.kind.as_str() {
            "agent.text" => {
                last_text = payload["text"].as_str().unwrap_or_default().to_owned();
            }
            "turn.ended" => return Some((payload, last_text)),
            _ => {}
        }
    }
    None
}
