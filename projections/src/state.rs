//! The whole projected state, the fold (`State::apply`) and the decision (`decide`).

use crate::ids::{Login, ProjectId, ReviewId, SessionId, TaskId};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::blobs::Blob;
use crate::focus::UserUi;
use crate::projects::Project;
use crate::tasks::Task;
use crate::users::User;
use crate::workflows::Workflow;
use crate::{Command, DecideCtx, Event, NewEvent, Rejection};

/// Every projection, folded from the log. Maps are ordered so that serializing the state (and
/// so [`crate::digest::digest`]) is deterministic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Seq of the last event folded; 0 for none.
    pub last_seq: u64,
    /// How many events were folded.
    pub n_events: u64,
    /// Users by login.
    pub users: BTreeMap<Login, User>,
    /// Projects by id.
    pub projects: BTreeMap<ProjectId, Project>,
    /// Tasks by id.
    pub tasks: BTreeMap<TaskId, Task>,
    /// Blob metadata by id.
    pub blobs: BTreeMap<String, Blob>,
    /// Workflows by name.
    pub workflows: BTreeMap<String, Workflow>,
    /// Per-user UI state by login.
    pub ui: BTreeMap<Login, UserUi>,
    /// Per palette colour, the seq of the `task.created` that last took it.
    pub color_given_seq: BTreeMap<u32, u64>,
    /// Agent sessions by id. (Empty collections added after format 1 are left out of the
    /// serialized state, so the digest of a log without them is unchanged.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<SessionId, crate::sessions::Session>,
    /// Message inputs by id (queued, handed over, withdrawn).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<u64, crate::sessions::Input>,
    /// The highest input id given out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_input_id: u64,
    /// Inbox items by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inbox: BTreeMap<String, crate::inbox::InboxItem>,
    /// Previews by task id (`expose_port`), oldest first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previews: BTreeMap<TaskId, Vec<crate::tools::Preview>>,
    /// Snapshots and unanswered snapshot causes by task id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshots: BTreeMap<TaskId, crate::snapshots::TaskSnapshots>,
    /// Reviews by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reviews: BTreeMap<ReviewId, crate::reviews::Review>,
    /// Merges waiting for a review, by task id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub after_review: BTreeMap<TaskId, crate::reviews::after::PendingMerge>,
    /// The running subagents of each session that has some (`subagents.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subagents: crate::subagents::Running,
    /// Workflow runs by id (`runs.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runs: BTreeMap<String, crate::runs::Run>,
    /// The users' lead notes by id (`lead.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lead_notes: BTreeMap<String, crate::lead::LeadNote>,
    /// Running task terminals by task id (`terminals.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub terminals: BTreeMap<TaskId, crate::terminals::Terminal>,
    /// CodeBolt agents' memory, state, todos and vectors by task id (`agent_memory.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_stores: BTreeMap<TaskId, crate::agent_memory::AgentStore>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl State {
    /// Folds one event. Total and infallible: an event naming an entity that does not exist
    /// changes nothing. Holds no business rule and reads no clock.
    pub fn apply(&mut self, e: &Event) {
        self.last_seq = e.seq;
        self.n_events += 1;
        let task_id = e.task_id.as_deref();
        crate::users::apply(self, e.seq, &e.body);
        crate::projects::apply(self, e.seq, e.created_at_us, &e.actor, &e.body);
        crate::tasks::apply(self, e.seq, e.created_at_us, &e.actor, &e.body, task_id);
        crate::blobs::apply(self, e);
        crate::workflows::apply(self, e.seq, &e.body);
        crate::focus::apply(self, e.owner.as_deref(), task_id, &e.body);
        crate::sessions::apply(self, e);
        crate::subagents::apply(self, e);
        crate::agent_memory::apply(self, e);
        crate::inbox::apply(self, e);
        crate::finish::apply(self, e.created_at_us, &e.actor, &e.body, task_id);
        crate::subtasks::apply(self, e);
        crate::tools::apply(self, e);
        crate::snapshots::apply(self, e);
        crate::reviews::apply(self, e);
        crate::reviews::after::apply(self, e);
        crate::runs::apply(self, e);
        crate::lead::apply(self, e);
        crate::terminals::apply(self, e);
    }

    /// A task's sessions (not reviewers), oldest first (`listSessions`).
    pub fn task_sessions(&self, task_id: &str) -> Vec<&crate::sessions::Session> {
        let mut sessions: Vec<_> = self
            .sessions
            .values()
            .filter(|s| s.task_id == task_id && s.role != crate::sessions::SessionRole::Reviewer)
            .collect();
        sessions.sort_by_key(|s| s.created_seq);
        sessions
    }

    /// Tasks of a project, newest first (`listTasks`).
    pub fn project_tasks(&self, project_id: &str) -> Vec<&Task> {
        let mut tasks: Vec<&Task> = self
            .tasks
            .values()
            .filter(|t| t.project_id == project_id)
            .collect();
        tasks.sort_by_key(|t| std::cmp::Reverse(t.created_seq));
        tasks
    }

    /// Projects in creation order (`listProjects`).
    pub fn projects_in_order(&self) -> Vec<&Project> {
        let mut projects: Vec<&Project> = self.projects.values().collect();
        projects.sort_by_key(|p| p.created_seq);
        projects
    }
}

/// Decides a command against the state: the events it causes, or why it is refused. Pure:
/// time and ids come from `ctx`.
/// # Errors
/// A [`Rejection`] naming what is missing, conflicting or invalid.
pub fn decide(state: &State, cmd: &Command, ctx: &DecideCtx) -> Result<Vec<NewEvent>, Rejection> {
    use crate::{blobs, focus, projects, sessions, tasks, users, workflows};
    match cmd {
        Command::EnsureUser {
            login,
            display_name,
            default_model,
        } => Ok(users::ensure(state, login, display_name, default_model)),
        Command::UpdateMe {
            login,
            git_name,
            git_email,
        } => users::update_me(state, login, git_name, git_email),
        Command::UpdateNotificationPrefs { login, prefs } => {
            users::update_prefs(state, login, *prefs)
        }
        Command::UpdateDefaultModel { login, model } => {
            users::update_default_model(state, login, model)
        }
        Command::CreateProject {
            actor,
            name,
            repo_path,
            default_branch,
            remote,
            worktrees_root,
        } => projects::create(
            state,
            ctx,
            actor,
            name,
            repo_path,
            default_branch,
            remote,
            worktrees_root,
        ),
        Command::CreateTask {
            actor,
            project_id,
            title,
            base_ref,
        } => tasks::create(state, ctx, actor, project_id, title, base_ref),
        Command::StartTodoItem {
            actor,
            project_id,
            title,
            base_ref,
            todo_item,
        } => tasks::create_for_todo(state, ctx, actor, project_id, title, base_ref, todo_item),
        Command::StartWorkflowRun {
            actor,
            project_id,
            workflow,
            title,
            base_ref,
        } => crate::runs::start_run(state, ctx, actor, project_id, workflow, title, base_ref),
        Command::StartStage {
            run,
            stage,
            base_ref,
        } => crate::runs::start_stage(state, ctx, run, stage, base_ref),
        Command::FinishStage {
            session_id,
            output,
            status,
            reason,
        } => crate::runs::finish_stage(state, ctx, session_id, output, *status, reason),
        Command::RecordWorktree { task_id, outcome } => {
            tasks::record_worktree(state, task_id, outcome)
        }
        Command::UploadBlob {
            actor,
            content_type,
            size_bytes,
            sha256,
        } => Ok(blobs::upload(ctx, actor, content_type, *size_bytes, sha256)),
        Command::StoreOutputBlob {
            session_id,
            size_bytes,
            sha256,
        } => blobs::store_output(state, ctx, session_id, *size_bytes, sha256),
        Command::PutWorkflow {
            actor,
            name,
            definition,
        } => workflows::put(actor, name, definition),
        Command::DeleteWorkflow { actor, name } => workflows::delete(state, actor, name),
        Command::SetFocus { login, focus } => focus::set_focus(state, login, focus),
        Command::MarkSummaryRead {
            login,
            task_id,
            seq,
        } => focus::mark_summary_read(state, login, task_id, *seq),
        Command::SetPaneFocus {
            login,
            focused,
            drafting,
        } => Ok(focus::set_pane_focus(state, login, *focused, *drafting)),
        Command::MessageLead {
            login,
            text,
            images,
            model,
        } => crate::lead::message(state, ctx, login, text, images, model.as_deref()),
        Command::SaveLeadNote {
            session_id,
            note_id,
            text,
            project_id,
        } => crate::lead::save_note(
            state,
            ctx,
            session_id,
            note_id.as_deref(),
            text,
            project_id.as_deref(),
        ),
        Command::DeleteLeadNote {
            login,
            session_id,
            note_id,
        } => crate::lead::delete_note(state, login, session_id.as_deref(), note_id),
        Command::ShowFocus {
            session_id,
            focus,
            human_asked,
        } => crate::lead::show(state, session_id, focus, *human_asked),
        Command::CreateSession {
            actor,
            task_id,
            model,
            prompt,
            images,
            head,
        } => sessions::create(
            state,
            ctx,
            actor,
            task_id,
            model.as_deref(),
            prompt,
            images,
            head,
        ),
        Command::SendMessage {
            actor,
            session_id,
            text,
            images,
            model,
            head,
        } => sessions::send(
            state,
            actor,
            session_id,
            text,
            images,
            model.as_deref(),
            head,
        ),
        Command::WithdrawMessage {
            actor,
            task_id,
            input_id,
        } => sessions::withdraw(state, actor, task_id, *input_id),
        Command::InterruptSession { actor, session_id } => {
            sessions::interrupt(state, actor, session_id)
        }
        Command::RecordVendorOutput { session_id, items } => {
            sessions::record_output(state, ctx, session_id, items)
        }
        Command::RecordProcessExit { session_id, exit } => {
            sessions::record_exit(state, ctx, session_id, exit)
        }
        Command::RecordProcessDeferred {
            session_id,
            deferred,
        } => sessions::record_deferred(state, session_id, deferred),
        Command::RecordStreamed {
            session_id,
            streamed,
        } => sessions::record_streamed(state, session_id, streamed),
        Command::RecordVendorSession {
            session_id,
            vendor_session_id,
        } => sessions::record_vendor_session(state, session_id, vendor_session_id),
        Command::CompactSession {
            actor,
            session_id,
            model,
            head,
        } => sessions::compact(state, actor, session_id, model.as_deref(), head),
        Command::ResumeAfterRestart { session_id, head } => {
            sessions::resume_after_restart(state, session_id, head)
        }
        Command::MergeTask {
            actor,
            task_id,
            merge_title,
            target_parent,
            after_review,
            head,
        } => crate::finish::merge(
            state,
            ctx,
            actor,
            task_id,
            merge_title.as_deref(),
            *target_parent,
            *after_review,
            head,
        ),
        Command::StartHeldMerge { task_id, head } => {
            crate::finish::start_held(state, ctx, task_id, head)
        }
        Command::RecordMergeLanded {
            task_id,
            merge_commit,
        } => crate::finish::record_landed(state, task_id, merge_commit),
        Command::RecordMerge { task_id, outcome } => {
            crate::finish::record_merge(state, task_id, outcome)
        }
        Command::MergeIn {
            actor,
            task_id,
            head,
        } => crate::finish::merge_in(state, ctx, actor, task_id, head),
        Command::DiscardTask {
            actor,
            task_id,
            summary,
            head,
        } => crate::finish::discard(state, ctx, actor, task_id, *summary, head),
        Command::RecordDiscard { task_id, outcome } => {
            crate::finish::record_discard(state, task_id, outcome)
        }
        Command::AskHuman {
            session_id,
            question,
        } => crate::inbox::ask_human(state, ctx, session_id, question),
        Command::RespondInbox { actor, responses } => {
            crate::inbox::respond(state, ctx, actor, responses)
        }
        Command::RecordAnswersDelivered {
            session_id,
            response_ids,
        } => crate::inbox::record_delivered(state, session_id, response_ids),
        Command::SetMergeTitle {
            session_id,
            merge_title,
        } => crate::tools::set_merge_title(state, session_id, merge_title),
        Command::ExposePort {
            session_id,
            name,
            port,
        } => crate::tools::expose_port(state, session_id, name, *port),
        Command::StartSubtask {
            session_id,
            title,
            base_ref,
            agent,
        } => crate::subtasks::start(state, ctx, session_id, title, base_ref, agent),
        Command::RecordMergeIntoParent { task_id, done } => {
            crate::subtasks::record_into_parent(state, task_id, done)
        }
        Command::RequestSnapshot { task_id, trigger } => {
            crate::snapshots::request(state, task_id, *trigger)
        }
        Command::RecordSnapshot {
            task_id,
            cause_seq,
            outcome,
            review,
        } => crate::snapshots::record(state, ctx, task_id, *cause_seq, outcome, *review),
        Command::ForkSnapshot { actor, task_id, n } => {
            crate::fork::fork_snapshot(state, ctx, actor, task_id, *n)
        }
        Command::SkipReview { review_id, reason } => crate::reviews::skip(state, review_id, reason),
        Command::StartReview {
            review_id,
            model,
            instructions,
            head,
        } => crate::reviews::start(state, ctx, review_id, model, instructions, head),
        Command::EndReviewer { review_id } => crate::reviews::end_reviewer(state, review_id),
        Command::CancelMergeAfterReview {
            actor,
            task_id,
            reason,
        } => crate::reviews::after::cancel(state, actor, task_id, reason.as_deref()),
        Command::SubmitReview { session_id, result } => {
            crate::reviews::submit(state, session_id, result)
        }
        Command::FailReview { review_id, error } => crate::reviews::fail(state, review_id, error),
        Command::StopReview { actor, review_id } => crate::reviews::stop(state, actor, review_id),
        Command::SetFindingState {
            actor,
            review_id,
            index,
            state: finding_state,
            head,
        } => {
            crate::reviews::set_finding_state(state, actor, review_id, *index, *finding_state, head)
        }
        Command::RecordTerminal {
            actor,
            task_id,
            change,
        } => crate::terminals::record(state, actor, task_id, change),
    }
}

/// Derived events for a batch just folded into `state`: a `task.state` for every task the
/// batch touched whose state changed. The writer folds and appends these in the same
/// transaction as the batch.
pub fn derived_events(state: &State, batch: &[Event]) -> Vec<NewEvent> {
    let mut out = crate::sessions::derived_states(
        state,
        batch.iter().filter_map(|e| e.agent_session_id.as_deref()),
    );
    out.extend(crate::tasks::derived_states(
        state,
        batch.iter().filter_map(|e| e.task_id.as_deref()),
    ));
    out
}

#[cfg(test)]
mod tests {
    //! Given / when / then over the whole decide + apply cycle.
    use super::*;
    use crate::event::EventBody;
    use crate::tasks::TaskState;

    /// Folds `given` commands (each must pass), then decides `when`.
    fn given_when(given: &[Command], when: &Command) -> (State, Result<Vec<NewEvent>, Rejection>) {
        let mut state = State::default();
        for (i, cmd) in given.iter().enumerate() {
            let ctx = DecideCtx {
                now_us: 1_000 + i as i64,
                seed: 0x1000_0000_0000_0000_0000_0000_0000_0000 * (i as u128 + 1),
                reviews_on: false,
            };
            let events = decide(&state, cmd, &ctx).expect("given command passes");
            crate::testkit::fold(&mut state, events, ctx.now_us);
        }
        let ctx = DecideCtx {
            now_us: 99_000,
            seed: 0xab_cdef_0000_0000_0000_0000_0000_0000,
            reviews_on: false,
        };
        let result = decide(&state, when, &ctx);
        (state, result)
    }

    fn user(login: &str) -> Command {
        Command::EnsureUser {
            login: login.into(),
            display_name: login.into(),
            default_model: "sonnet".into(),
        }
    }

    fn project() -> Command {
        Command::CreateProject {
            actor: "ada".into(),
            name: "demo".into(),
            repo_path: "/repos/demo".into(),
            default_branch: "main".into(),
            remote: String::new(),
            worktrees_root: "/data/worktrees".into(),
        }
    }

    fn task(state_project: &str, title: &str) -> Command {
        Command::CreateTask {
            actor: "ada".into(),
            project_id: state_project.into(),
            title: title.into(),
            base_ref: "abc".into(),
        }
    }

    #[test]
    fn ensure_user_is_idempotent() {
        let (_, r) = given_when(&[user("ada")], &user("ada"));
        assert_eq!(r.unwrap(), vec![]);
    }

    #[test]
    fn a_task_needs_its_project() {
        let (_, r) = given_when(&[user("ada")], &task("nope", "x"));
        assert!(matches!(r, Err(Rejection::NotFound(_))));
    }

    #[test]
    fn tasks_get_distinct_ports_and_colours_and_paths_from_their_ids() {
        let (state, _) = given_when(&[user("ada"), project()], &user("ada"));
        let pid = state.projects.keys().next().unwrap().clone();
        let (state, r) = given_when(
            &[user("ada"), project(), task(&pid, "one"), task(&pid, "two")],
            &task(&pid, "three"),
        );
        let events = r.unwrap();
        let EventBody::TaskCreated(t3) = &events[0].body else {
            panic!("task.created expected")
        };
        let ports: Vec<u32> = state.tasks.values().map(|t| t.port_base).collect();
        assert!(!ports.contains(&t3.port_base));
        assert!(state.tasks.values().all(|t| t.color != t3.color));
        assert_eq!(t3.worktree_path, format!("/data/worktrees/{pid}/{}", t3.id));
        assert!(state.tasks.values().all(|t| t.state == TaskState::NoAgent));
    }

    #[test]
    fn a_failed_worktree_closes_the_task_with_a_derived_state() {
        let (state, _) = given_when(&[user("ada"), project()], &user("ada"));
        let pid = state.projects.keys().next().unwrap().clone();
        let (mut state, _) = given_when(&[user("ada"), project(), task(&pid, "one")], &user("ada"));
        let tid = state.tasks.keys().next().unwrap().clone();
        let cmd = Command::RecordWorktree {
            task_id: tid.clone(),
            outcome: Err("disk full".into()),
        };
        let events = decide(
            &state,
            &cmd,
            &DecideCtx {
                now_us: 5,
                seed: 1,
                reviews_on: false,
            },
        )
        .unwrap();
        crate::testkit::fold(&mut state, events, 5);
        assert_eq!(state.tasks[&tid].state, TaskState::Discarded);
        let again = decide(
            &state,
            &cmd,
            &DecideCtx {
                now_us: 6,
                seed: 2,
                reviews_on: false,
            },
        )
        .unwrap();
        assert!(again.is_empty(), "recording twice changes nothing");
    }

    #[test]
    fn summary_reads_only_move_forward() {
        let (state, _) = given_when(&[user("ada"), project()], &user("ada"));
        let pid = state.projects.keys().next().unwrap().clone();
        let (state, _) = given_when(&[user("ada"), project(), task(&pid, "one")], &user("ada"));
        let tid = state.tasks.keys().next().unwrap().clone();
        let read = |seq| Command::MarkSummaryRead {
            login: "ada".into(),
            task_id: tid.clone(),
            seq,
        };
        let (_, r) = given_when(
            &[user("ada"), project(), task(&pid, "one"), read(2)],
            &read(1),
        );
        assert_eq!(r.unwrap(), vec![]);
        let (_, r) = given_when(
            &[user("ada"), project(), task(&pid, "one"), read(2)],
            &read(3),
        );
        let events = r.unwrap();
        assert_eq!(events[0].owner.as_deref(), Some("ada"));
        let (_, r) = given_when(&[user("ada"), project(), task(&pid, "one")], &read(1_000));
        assert!(matches!(r, Err(Rejection::Invalid(_))));
    }
}
