//! The event envelope and every event kind. `schema/events.md` is the human catalogue of the
//! kinds below; the two must agree (a test checks that every kind is documented there).
//!
//! Kinds are past tense (`task.created`) and never renamed once in a log: an old payload shape
//! is upcast on load ([`crate::upcast`]).

use crate::ids::{Login, ProjectId, SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::focus::TaskTab;
use crate::users::NotificationPrefs;
use crate::workflows::WorkflowDefinition;

/// One committed event as the folds see it: the envelope plus its typed payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Global, gapless position in the log, from 1 (DESIGN.md invariant 1).
    pub seq: u64,
    /// When the writer decided it, in microseconds since the Unix epoch (UTC).
    pub created_at_us: i64,
    /// The project it concerns, if any.
    pub project_id: Option<ProjectId>,
    /// The task it concerns, if any.
    pub task_id: Option<TaskId>,
    /// The agent session it concerns, if any.
    pub agent_session_id: Option<SessionId>,
    /// The login the event belongs to; such events reach only that user (invariant 4).
    pub owner: Option<Login>,
    /// Who caused it: a login, or `byre` for the server itself.
    pub actor: String,
    /// The kind and its payload.
    pub body: EventBody,
}

/// An event `decide` produced, before the writer gave it a seq and a time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// See [`Event::project_id`].
    pub project_id: Option<ProjectId>,
    /// See [`Event::task_id`].
    pub task_id: Option<TaskId>,
    /// See [`Event::agent_session_id`].
    pub agent_session_id: Option<SessionId>,
    /// See [`Event::owner`].
    pub owner: Option<Login>,
    /// See [`Event::actor`].
    pub actor: String,
    /// The kind and payload.
    pub body: EventBody,
}

impl NewEvent {
    /// An event with only an actor and a body; set the ids with the builder methods.
    pub fn new(actor: impl Into<String>, body: EventBody) -> Self {
        NewEvent {
            project_id: None,
            task_id: None,
            agent_session_id: None,
            owner: None,
            actor: actor.into(),
            body,
        }
    }
    /// Sets `project_id`.
    pub fn project(mut self, id: impl Into<String>) -> Self {
        self.project_id = Some(id.into().into());
        self
    }
    /// Sets `task_id`.
    pub fn task(mut self, id: impl Into<TaskId>) -> Self {
        self.task_id = Some(id.into());
        self
    }
    /// Sets `owner`: the event then reaches only that user.
    pub fn owned_by(mut self, login: impl Into<String>) -> Self {
        self.owner = Some(login.into().into());
        self
    }
    /// Gives the event its seq and time.
    pub fn commit(self, seq: u64, created_at_us: i64) -> Event {
        Event {
            seq,
            created_at_us,
            project_id: self.project_id,
            task_id: self.task_id,
            agent_session_id: self.agent_session_id,
            owner: self.owner,
            actor: self.actor,
            body: self.body,
        }
    }
}

/// Why a stored payload could not be turned into an [`EventBody`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// No such kind in this build.
    #[error("unknown event kind `{0}`")]
    UnknownKind(String),
    /// The payload does not match its kind's shape.
    #[error("payload of `{kind}` does not decode: {source}")]
    Payload {
        /// The kind.
        kind: String,
        /// The JSON error.
        source: serde_json::Error,
    },
}

macro_rules! event_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $kind:literal ($payload:ty), )*) => {
        /// Every event kind with its payload. The string after each variant is its `kind`.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventBody {
            $( $(#[$doc])* $variant($payload), )*
        }

        impl EventBody {
            /// Every kind this build knows, in catalogue order.
            pub const KINDS: &'static [&'static str] = &[$($kind,)*];

            /// The event's kind, e.g. `task.created`.
            pub fn kind(&self) -> &'static str {
                match self { $(Self::$variant(_) => $kind,)* }
            }

            /// The payload as a JSON object (compact).
            pub fn payload_json(&self) -> String {
                // Payloads are plain structs of strings, numbers and bools: serializing cannot fail.
                match self { $(Self::$variant(p) => serde_json::to_string(p).expect("payload serializes"),)* }
            }

            /// Decodes a current-format payload of `kind`.
            /// # Errors
            /// [`DecodeError`] for an unknown kind or a payload of the wrong shape.
            pub fn from_parts(kind: &str, payload: &str) -> Result<Self, DecodeError> {
                match kind {
                    $($kind => serde_json::from_str(payload).map(Self::$variant).map_err(|source| {
                        DecodeError::Payload { kind: kind.to_owned(), source }
                    }),)*
                    other => Err(DecodeError::UnknownKind(other.to_owned())),
                }
            }
        }
    };
}

event_kinds! {
    /// A login was seen for the first time.
    UserCreated = "user.created" (UserCreated),
    /// A user set their git identity (`updateMe`).
    UserUpdated = "user.updated" (UserUpdated),
    /// A user changed their notification preferences (owned by them).
    NotificationPrefsUpdated = "user.notification_prefs_updated" (NotificationPrefsUpdated),
    /// A user changed their default model (owned by them).
    DefaultModelUpdated = "user.default_model_updated" (DefaultModelUpdated),
    /// A project was created from a repository.
    ProjectCreated = "project.created" (ProjectCreated),
    /// A task was created: its branch and worktree are to be made (intent).
    TaskCreated = "task.created" (TaskCreated),
    /// The task's branch and worktree exist on disk (outcome).
    TaskWorktreeCreated = "task.worktree_created" (TaskWorktreeCreated),
    /// The task's worktree could not be made; the task is closed as discarded (outcome).
    TaskWorktreeFailed = "task.worktree_failed" (TaskWorktreeFailed),
    /// Derived: the task's state changed; written in the same transaction as its cause.
    TaskState = "task.state" (TaskStateChanged),
    /// An image was stored.
    BlobUploaded = "blob.uploaded" (BlobUploaded),
    /// A workflow was created or replaced.
    WorkflowSaved = "workflow.saved" (WorkflowSaved),
    /// A workflow was deleted.
    WorkflowDeleted = "workflow.deleted" (WorkflowDeleted),
    /// `createTask` with `workflow` started a run of it (its definition frozen).
    RunStarted = "workflow.run_started" (crate::runs::RunStarted),
    /// A task is an attempt of a run's stage (its first, or a fork).
    StageStarted = "workflow.stage_started" (crate::runs::StageStarted),
    /// A stage's agent called `finish_stage` with `done`; the attempt finishes at its turn's
    /// snapshot.
    StageReported = "workflow.stage_reported" (crate::runs::StageReported),
    /// A stage's agent called `finish_stage` with `blocked`: a question is in the inbox.
    StageBlocked = "workflow.stage_blocked" (crate::runs::StageBlocked),
    /// A stage attempt finished: its output and the commit it finished at.
    StageFinished = "workflow.stage_finished" (crate::runs::StageFinished),
    /// The run's final stage finished, which ends the run.
    RunFinished = "workflow.run_finished" (crate::runs::RunFinished),
    /// A user's right pane moved (owned by them).
    FocusUpdated = "focus.updated" (FocusUpdated),
    /// A user read a task's turn summaries up to a seq (owned by them).
    SummaryRead = "summary.read" (SummaryRead),
    /// A user started or stopped working in the right pane (owned by them).
    PaneFocusUpdated = "pane_focus.updated" (PaneFocusUpdated),
    /// An agent session was created for a task.
    SessionCreated = "session.created" (crate::sessions::SessionCreated),
    /// Derived: a session's state changed (idle, running, completed).
    SessionState = "session.state" (crate::sessions::SessionStateChanged),
    /// A human's message was handed to the agent (it starts or joins a turn).
    UserMessage = "user.message" (crate::sessions::UserMessage),
    /// A human's message was queued while the agent's turn runs.
    UserQueued = "user.queued" (crate::sessions::UserQueued),
    /// A queued message was withdrawn before the agent got it.
    UserUnqueued = "user.unqueued" (crate::sessions::UserUnqueued),
    /// The agent started a turn.
    TurnStarted = "turn.started" (crate::sessions::TurnStarted),
    /// The agent wrote text.
    AgentText = "agent.text" (crate::sessions::AgentText),
    /// byre stopped a running turn: the text it had streamed and not yet logged, and the
    /// turn's usage and time so far.
    AgentStreamed = "agent.streamed" (crate::sessions::AgentStreamed),
    /// The agent called a tool.
    ToolCall = "tool.call" (crate::sessions::ToolCall),
    /// A tool call's result.
    ToolResult = "tool.result" (crate::sessions::ToolResult),
    /// The vendor retries a failed model API call.
    ApiRetry = "agent.api_retry" (crate::sessions::ApiRetry),
    /// The agent's turn ended (completed, interrupted or failed).
    TurnEnded = "turn.ended" (crate::sessions::TurnEnded),
    /// One of the agent's own subagents started (Claude Code's Task/Agent tool).
    SubagentStarted = "subagent.started" (crate::subagents::SubagentStarted),
    /// One of the agent's own subagents ended, or its process ended under it.
    SubagentEnded = "subagent.ended" (crate::subagents::SubagentEnded),
    /// A human asked to interrupt the running turn.
    InterruptRequested = "session.interrupt_requested" (crate::sessions::InterruptRequested),
    /// A human asked for a handoff: the session's next turn writes it, then a new session
    /// starts from it.
    CompactRequested = "session.compact_requested" (crate::sessions::CompactRequested),
    /// A session ended for good (compacted into its successor).
    SessionCompleted = "session.completed" (crate::sessions::SessionCompleted),
    /// The agent's process ended.
    ProcessExited = "session.process_exited" (crate::sessions::ProcessExited),
    /// The start of a session's agent process waits for memory (below byre's floor).
    ProcessDeferred = "session.process_deferred" (crate::sessions::ProcessDeferred),
    /// The vendor started its own conversation for a session (a Codex thread): its id.
    VendorSessionStarted = "session.vendor_session_started" (crate::sessions::VendorSessionStarted),
    /// A vendor line byre does not understand, kept for re-normalisation.
    VendorUnrecognized = "vendor.unrecognized" (crate::sessions::VendorUnrecognized),
    /// An inbox item was created (a question, a session error, a rate limit).
    InboxItemCreated = "inbox.item_created" (crate::inbox::InboxItemCreated),
    /// `mergeTask` was accepted: the merge-in turn starts, or the merge is held (intent).
    MergeRequested = "task.merge_requested" (crate::finish::MergeRequested),
    /// A held merge started its merge-in turn.
    MergeStarted = "task.merge_started" (crate::finish::MergeStarted),
    /// A merge stopped without merging; the task stays active (outcome).
    MergeFailed = "task.merge_failed" (crate::finish::MergeFailed),
    /// The squash commit is on the default branch and origin; removal follows (outcome).
    MergeLanded = "task.merge_landed" (crate::finish::MergeLanded),
    /// The task was squash-merged, pushed and removed; it is closed as merged (outcome).
    TaskMerged = "task.merged" (crate::finish::TaskMerged),
    /// `discardTask` was accepted (or a failed clean-up is retried) (intent).
    DiscardRequested = "task.discard_requested" (crate::finish::DiscardRequested),
    /// A discard's summary turn started after the turn it waited for.
    DiscardTurnStarted = "task.discard_turn_started" (crate::finish::DiscardTurnStarted),
    /// The task's worktree and branch were removed; it is closed as discarded (outcome).
    TaskDiscarded = "task.discarded" (crate::finish::TaskDiscarded),
    /// Removing a discarded task's worktree or branch failed (outcome).
    CleanupFailed = "task.cleanup_failed" (crate::finish::CleanupFailed),
    /// A human answered or dismissed an inbox item.
    InboxResponded = "inbox.responded" (crate::inbox::InboxResponded),
    /// Answers were handed to the agent as one message.
    InboxDelivered = "inbox.delivered" (crate::inbox::InboxDelivered),
    /// A newer question of the same session replaced an open one.
    InboxSuperseded = "inbox.superseded" (crate::inbox::InboxSuperseded),
    /// An open inbox item was closed because its task closed (merged or discarded).
    InboxClosed = "inbox.closed" (crate::inbox::InboxClosed),
    /// The task's agent set the task's merge title (`set_merge_title`).
    MergeTitleSet = "task.merge_title_set" (crate::tools::MergeTitleSet),
    /// The task's agent exposed a port of its block as a preview (`expose_port`).
    PreviewExposed = "preview.exposed" (crate::tools::PreviewExposed),
    /// A task's agent started a subtask (`start_subtask`, CodeBolt's `startAgent`): the link.
    SubtaskStarted = "task.subtask_started" (crate::tools::SubtaskStarted),
    /// `mergeTask` target `parent`: the parent's agent is asked to merge the subtask (intent).
    MergeIntoParentRequested = "task.merge_into_parent_requested" (crate::subtasks::MergeIntoParentRequested),
    /// A snapshot of a task's worktree was asked for (intent).
    SnapshotRequested = "snapshot.requested" (crate::snapshots::SnapshotRequested),
    /// A snapshot's commit and ref exist; a `turn_end` one may have moved the task branch
    /// (outcome).
    SnapshotTaken = "snapshot.taken" (crate::snapshots::SnapshotTaken),
    /// A snapshot could not be made; no ref was written (outcome).
    SnapshotFailed = "snapshot.failed" (crate::snapshots::SnapshotFailed),
    /// A snapshot's review was asked for (intent); it waits for a reviewer.
    ReviewRequested = "review.requested" (crate::reviews::ReviewRequested),
    /// A review runs no reviewer: its step changed no files, or a newer one covers it.
    ReviewSkipped = "review.skipped" (crate::reviews::ReviewSkipped),
    /// A review's reviewer session was started.
    ReviewStarted = "review.started" (crate::reviews::ReviewStarted),
    /// A reviewer reported with `submit_review`.
    ReviewDone = "review.done" (crate::reviews::ReviewDone),
    /// A review ended without a report: the reviewer failed, was stopped, or byre stopped.
    ReviewFailed = "review.failed" (crate::reviews::ReviewFailed),
    /// A human marked a finding of a done review fixed or ignored.
    FindingStateSet = "review.finding_state_set" (crate::reviews::FindingStateSet),
    /// `mergeTask` with `after_review`: a merge waits for the running review.
    MergeAfterReviewSet = "task.merge_after_review_set" (crate::reviews::after::MergeAfterReviewSet),
    /// A merge that waited for a review will not be made (withdrawn, findings, …).
    MergeAfterReviewDropped = "task.merge_after_review_dropped" (crate::reviews::after::MergeAfterReviewDropped),
    /// A user's lead agent made or replaced a note (`remember`) (owned by the user).
    LeadNoteSaved = "lead_note.saved" (crate::lead::LeadNoteSaved),
    /// A user's note was deleted, by the lead (`forget`) or by them (owned by the user).
    LeadNoteDeleted = "lead_note.deleted" (crate::lead::LeadNoteDeleted),
    /// A viewer's socket attached to the task's terminal (and started its shell if none ran).
    TerminalOpened = "terminal.opened" (crate::terminals::TerminalOpened),
    /// A viewer's socket closed while the terminal's shell runs on.
    TerminalClosed = "terminal.closed" (crate::terminals::TerminalClosed),
    /// The terminal's shell ended (by itself, or killed by byre); its viewers are closed.
    TerminalExited = "terminal.exited" (crate::terminals::TerminalExited),
}

/// `user.created` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserCreated {
    /// The login.
    pub login: Login,
    /// Display name (the login, or the `Tailscale-User-Name` header).
    pub display_name: String,
    /// The model the user's new tasks start on.
    pub default_model: String,
}

/// `user.updated` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserUpdated {
    /// The login.
    pub login: Login,
    /// Git `user.name`; empty for none.
    pub git_name: String,
    /// Git `user.email`; empty for none.
    pub git_email: String,
}

/// `user.notification_prefs_updated` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationPrefsUpdated {
    /// The login.
    pub login: Login,
    /// The new preferences.
    pub notification_prefs: NotificationPrefs,
}

/// `user.default_model_updated` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefaultModelUpdated {
    /// The login.
    pub login: Login,
    /// The model.
    pub model: String,
}

/// `project.created` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectCreated {
    /// The project's id.
    pub id: ProjectId,
    /// Its name.
    pub name: String,
    /// The repository's canonical absolute path.
    pub repo_path: String,
    /// The default branch (short name, e.g. `main`).
    pub default_branch: String,
    /// origin's URL, or empty.
    pub remote: String,
    /// Where this project's task worktrees go: `{worktrees_root}/{task_id}`.
    pub worktrees_root: String,
}

/// `task.created` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCreated {
    /// The task's id.
    pub id: TaskId,
    /// Its project.
    pub project_id: ProjectId,
    /// Its title (also the first merge title).
    pub title: String,
    /// The branch, `byre/{id prefix}/{slug}` (`byre/{slug}-{id prefix}` for a task created
    /// before branch namespaces: [`crate::tasks::branch_namespace`]).
    pub branch: String,
    /// The worktree, `{project.worktrees_root}/{id}`: a function of the ids (invariant 5).
    pub worktree_path: String,
    /// The commit the branch starts at.
    pub base_ref: String,
    /// First of the task's 10 ports.
    pub port_base: u32,
    /// Palette index.
    pub color: u32,
    /// The title of the TODO.md item the task was started from (`startTodoItem`); absent for
    /// other tasks (and in logs written before TODO items).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub todo_item: String,
    /// A fork (`forkSnapshot`): the task it was forked from; absent for other tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// With `forked_from`: the `n` of the snapshot it was forked at (its `base_ref` is that
    /// snapshot's commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<u32>,
}

/// `task.worktree_created` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskWorktreeCreated {
    /// The worktree's HEAD commit.
    pub head: String,
}

/// `task.worktree_failed` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskWorktreeFailed {
    /// Why, for the user.
    pub reason: String,
}

/// `task.state` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStateChanged {
    /// The new state.
    pub state: crate::tasks::TaskState,
}

/// `blob.uploaded` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlobUploaded {
    /// The blob's id.
    pub id: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp` for an upload;
    /// `text/plain; charset=utf-8` for vendor output byre cut to its event limit.
    pub content_type: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lowercase hex SHA-256 of the bytes: the key of the bytes in the log's blob table.
    pub sha256: String,
}

/// `workflow.saved` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowSaved {
    /// The workflow's name.
    pub name: String,
    /// Its definition.
    pub definition: WorkflowDefinition,
}

/// `workflow.deleted` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowDeleted {
    /// The workflow's name.
    pub name: String,
}

/// `focus.updated` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FocusUpdated {
    /// The project shown, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
    /// The task shown, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The tabs put first.
    pub tabs: Vec<TaskTab>,
    /// The tab shown.
    pub tab: TaskTab,
}

/// `summary.read` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRead {
    /// The reader.
    pub login: Login,
    /// The highest seq read.
    pub seq: u64,
}

/// `pane_focus.updated` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaneFocusUpdated {
    /// Whether the human works in the right pane.
    pub focused: bool,
    /// Whether a text box there holds unsent text.
    pub drafting: bool,
}
