//! Per-user UI state: the right pane's focus (`getFocus`, `setFocus`), pane focus
//! (`setPaneFocus`) and summary reads (`markSummaryRead`, `getSummaryReads`). Every event here
//! is owned by its user.

use crate::ids::{ProjectId, TaskId};
use serde::{Deserialize, Serialize};

use crate::event::{EventBody, FocusUpdated, NewEvent, PaneFocusUpdated, SummaryRead};
use crate::tasks::TaskStatus;
use crate::{Rejection, State};

/// A tab of the right pane (spec `TaskTab`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskTab {
    /// The transcript.
    Transcript,
    /// Changes.
    Changes,
    /// Files.
    Files,
    /// Terminal.
    Terminal,
    /// Inbox.
    Inbox,
    /// Reviews.
    Reviews,
    /// Workflow.
    Workflow,
    /// Project.
    Project,
}

/// What the user's right pane shows (spec `Focus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Focus {
    /// The project shown; the task's project when a task is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
    /// The task shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The tabs put first, in order.
    pub tabs: Vec<TaskTab>,
    /// The tab shown.
    pub tab: TaskTab,
}

impl Default for Focus {
    fn default() -> Self {
        Focus {
            project_id: None,
            task_id: None,
            tabs: Vec::new(),
            tab: TaskTab::Transcript,
        }
    }
}

/// One user's UI state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserUi {
    /// The right pane's focus.
    pub focus: Focus,
    /// Whether the human works in the right pane.
    pub pane_focused: bool,
    /// Whether the right pane holds unsent text.
    pub pane_drafting: bool,
    /// Per task, the highest summary seq read. Hashed, since the fold looks one up for every
    /// `summary.read` (an ordered map of 10,000 tasks cost 0.1 s of a 1M-event fold in string
    /// comparisons); serialized in key order, so digests and snapshots are an ordered map's.
    #[serde(serialize_with = "serialize_in_key_order")]
    pub summary_reads: std::collections::HashMap<String, u64>,
}

/// Serializes `map` as a map with its keys in order.
fn serialize_in_key_order<S: serde::Serializer>(
    map: &std::collections::HashMap<String, u64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut entries: Vec<(&String, &u64)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    serializer.collect_map(entries)
}

/// Decides `SetFocus`: the task's project is filled in; a project that does not match the
/// task's is refused.
pub(crate) fn set_focus(
    state: &State,
    login: &str,
    focus: &Focus,
) -> Result<Vec<NewEvent>, Rejection> {
    let mut focus = focus.clone();
    if let Some(task_id) = &focus.task_id {
        let task = state
            .tasks
            .get(task_id)
            .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
        match &focus.project_id {
            Some(p) if *p != task.project_id => {
                return Err(Rejection::Invalid(format!(
                    "task `{task_id}` is not in project `{p}`"
                )))
            }
            _ => focus.project_id = Some(task.project_id.clone()),
        }
    }
    if let Some(p) = &focus.project_id {
        if !state.projects.contains_key(p) {
            return Err(Rejection::NotFound(format!("no project `{p}`")));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = focus.tabs.iter().find(|t| !seen.insert(**t)) {
        return Err(Rejection::Invalid(
            format!("tab {dup:?} is listed twice").to_lowercase(),
        ));
    }
    let mut event = NewEvent::new(
        login,
        EventBody::FocusUpdated(FocusUpdated {
            project_id: focus.project_id.clone(),
            task_id: focus.task_id.clone(),
            tabs: focus.tabs,
            tab: focus.tab,
        }),
    )
    .owned_by(login);
    event.project_id = focus.project_id;
    event.task_id = focus.task_id;
    Ok(vec![event])
}

/// Decides `MarkSummaryRead`: nothing when `seq` is at or below the recorded one.
pub(crate) fn mark_summary_read(
    state: &State,
    login: &str,
    task_id: &str,
    seq: u64,
) -> Result<Vec<NewEvent>, Rejection> {
    let task = state
        .tasks
        .get(task_id)
        .ok_or_else(|| Rejection::NotFound(format!("no task `{task_id}`")))?;
    if seq > state.last_seq {
        return Err(Rejection::Invalid(format!(
            "seq {seq} is beyond the log's last seq {}",
            state.last_seq
        )));
    }
    let recorded = state
        .ui
        .get(login)
        .and_then(|u| u.summary_reads.get(task_id))
        .copied()
        .unwrap_or(0);
    if seq <= recorded {
        return Ok(Vec::new());
    }
    Ok(vec![NewEvent::new(
        login,
        EventBody::SummaryRead(SummaryRead {
            login: login.to_owned().into(),
            seq,
        }),
    )
    .project(&task.project_id)
    .task(task_id)
    .owned_by(login)])
}

/// Decides `SetPaneFocus`: nothing when unchanged.
pub(crate) fn set_pane_focus(
    state: &State,
    login: &str,
    focused: bool,
    drafting: bool,
) -> Vec<NewEvent> {
    let unchanged = state
        .ui
        .get(login)
        .is_some_and(|u| u.pane_focused == focused && u.pane_drafting == drafting);
    if unchanged {
        return Vec::new();
    }
    vec![NewEvent::new(
        login,
        EventBody::PaneFocusUpdated(PaneFocusUpdated { focused, drafting }),
    )
    .owned_by(login)]
}

/// The summary reads of active tasks (`getSummaryReads`).
pub fn active_summary_reads(state: &State, login: &str) -> std::collections::BTreeMap<String, u64> {
    state
        .ui
        .get(login)
        .map(|u| {
            u.summary_reads
                .iter()
                .filter(|(t, _)| {
                    state
                        .tasks
                        .get(*t)
                        .is_some_and(|t| t.status == TaskStatus::Active)
                })
                .map(|(t, s)| (t.clone(), *s))
                .collect()
        })
        .unwrap_or_default()
}

/// The user's UI state, made on first use; the key is allocated only then (the fold runs this
/// for most events of a busy log).
fn ui_of<'a>(state: &'a mut State, login: &str) -> &'a mut UserUi {
    if !state.ui.contains_key(login) {
        state.ui.insert(login.to_owned().into(), UserUi::default());
    }
    state.ui.get_mut(login).expect("inserted above")
}

/// Folds the per-user UI events.
pub(crate) fn apply(
    state: &mut State,
    owner: Option<&str>,
    task_id: Option<&str>,
    body: &EventBody,
) {
    let Some(login) = owner else { return };
    match body {
        EventBody::FocusUpdated(p) => {
            // `clone_from` reuses the previous focus's buffers: most events of a busy log.
            let focus = &mut ui_of(state, login).focus;
            focus.project_id.clone_from(&p.project_id);
            focus.task_id.clone_from(&p.task_id);
            focus.tabs.clone_from(&p.tabs);
            focus.tab = p.tab;
        }
        EventBody::PaneFocusUpdated(p) => {
            let ui = ui_of(state, login);
            ui.pane_focused = p.focused;
            ui.pane_drafting = p.drafting;
        }
        EventBody::SummaryRead(p) => {
            if let Some(task_id) = task_id {
                let reads = &mut ui_of(state, login).summary_reads;
                match reads.get_mut(task_id) {
                    Some(e) => *e = (*e).max(p.seq),
                    None => {
                        reads.insert(task_id.to_owned(), p.seq);
                    }
                }
            }
        }
        _ => {}
    }
}
