//! Commands (imperative: what a caller asks for) and the writer's decision context.
//!
//! A command is decided on the single writer against the latest state ([`crate::decide`]), so
//! two racing commands cannot both pass a rule. Facts from outside the log (is this a git
//! repository, what is its default branch) are gathered by the caller first and carried here.

use crate::ids::{Login, ProjectId, ReviewId, SessionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::users::NotificationPrefs;
use crate::workflows::WorkflowDefinition;

/// Why the writer refused a command. `src/http/error.rs` maps each variant to a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The entity named by the command does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The command conflicts with the entity's current state (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The command's input is invalid (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
}

/// What the writer hands `decide` besides the state: the time and fresh ids, so that `decide`
/// itself stays deterministic and replayable.
#[derive(Debug, Clone, Copy)]
pub struct DecideCtx {
    /// Now, in microseconds since the Unix epoch (UTC); becomes the events' `created_at`.
    pub now_us: i64,
    /// A fresh random 128-bit value chosen by the writer for this command; ids derive from it.
    pub seed: u128,
    /// Whether this server reviews snapshots (`serve --reviews`): a server setting, never
    /// folded. Deciding an implementer's turn end records it in `turn.ended.review`; folds
    /// read only that recorded fact.
    pub reviews_on: bool,
}

impl DecideCtx {
    /// The `n`th fresh id of this command, formatted as a lowercase hyphenated UUID.
    pub fn id(&self, n: u32) -> String {
        let v = self.seed.wrapping_add(u128::from(n));
        let h = format!("{v:032x}");
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

/// Every command the writer decides. One command becomes one batch of events in one
/// transaction (together with other commands of the same group commit).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Record a login seen for the first time (no events when the user exists).
    EnsureUser {
        /// The login.
        login: Login,
        /// The display name to start with (the login when none is known).
        display_name: String,
        /// The server's default model, which the new user starts with.
        default_model: String,
    },
    /// `updateMe`: set the caller's git identity.
    UpdateMe {
        /// The caller.
        login: Login,
        /// `user.name` for commits; may be empty.
        git_name: String,
        /// `user.email` for commits; may be empty.
        git_email: String,
    },
    /// `updateNotificationPrefs`.
    UpdateNotificationPrefs {
        /// The caller.
        login: Login,
        /// The new preferences.
        prefs: NotificationPrefs,
    },
    /// `updateDefaultModel`.
    UpdateDefaultModel {
        /// The caller.
        login: Login,
        /// The model name.
        model: String,
    },
    /// `createProject`, with the repository facts gathered by the caller.
    CreateProject {
        /// The caller.
        actor: String,
        /// The project's name.
        name: String,
        /// The repository's canonical absolute path.
        repo_path: String,
        /// The detected default branch.
        default_branch: String,
        /// The detected remote URL (origin's), or empty.
        remote: String,
        /// The data directory's worktree root; task worktrees go under it.
        worktrees_root: String,
    },
    /// `createTask` without prompt or workflow, with the default branch's commit as base.
    CreateTask {
        /// The caller.
        actor: String,
        /// The project.
        project_id: ProjectId,
        /// The task's title.
        title: String,
        /// The commit the task branches from (the default branch's head when asked).
        base_ref: String,
    },
    /// `startTodoItem`: [`Command::CreateTask`] for a TODO.md item, recorded as the task's
    /// `todo_item`; refused while another active task has the same item.
    StartTodoItem {
        /// The caller.
        actor: String,
        /// The project.
        project_id: ProjectId,
        /// The task's title (the item's, cut to 200 characters).
        title: String,
        /// The commit the task branches from (the default branch's head).
        base_ref: String,
        /// The item's title.
        todo_item: String,
    },
    /// `createTask` with `workflow`: a run of the workflow starting from `base_ref`
    /// (`crate::runs::start_run`); its stages start with [`Command::StartStage`].
    StartWorkflowRun {
        /// The caller.
        actor: String,
        /// The project.
        project_id: ProjectId,
        /// The workflow's name.
        workflow: String,
        /// The run's title.
        title: String,
        /// The default branch's commit now.
        base_ref: String,
    },
    /// Start a stage of a run as its own task (`crate::runs::start_stage`); nothing when it
    /// has an attempt already or the run is finished.
    StartStage {
        /// The run.
        run: String,
        /// The stage.
        stage: String,
        /// The commit its task branches from (`crate::runs::base_of`, resolved).
        base_ref: String,
    },
    /// A stage agent's `finish_stage` tool (`crate::runs::finish_stage`).
    FinishStage {
        /// The calling session.
        session_id: SessionId,
        /// The output (Markdown).
        output: String,
        /// Done or blocked.
        status: crate::runs::FinishStatus,
        /// With blocked: why.
        reason: String,
    },
    /// The worktree reactor's outcome for a task: its worktree exists at `head`, or failed.
    RecordWorktree {
        /// The task.
        task_id: TaskId,
        /// `Ok(head commit)` or `Err(reason)`.
        outcome: Result<String, String>,
    },
    /// `uploadBlob`: the bytes travel beside the command and are stored by the log under
    /// their SHA-256 in the same transaction.
    UploadBlob {
        /// The caller.
        actor: String,
        /// The sniffed content type.
        content_type: String,
        /// Size in bytes.
        size_bytes: u64,
        /// Lowercase hex SHA-256 of the bytes.
        sha256: String,
    },
    /// The whole of a vendor output field cut to the event limit (`serve --max-event-bytes`):
    /// stored like an upload (bytes beside the command, under their SHA-256), as UTF-8 text,
    /// owned by the session's owner when it has one (a lead's), so its `blob.uploaded`
    /// reaches only the user its cut event reaches.
    StoreOutputBlob {
        /// The session whose output it is.
        session_id: SessionId,
        /// Size in bytes.
        size_bytes: u64,
        /// Lowercase hex SHA-256 of the bytes.
        sha256: String,
    },
    /// `putWorkflow`.
    PutWorkflow {
        /// The caller.
        actor: String,
        /// The workflow's name.
        name: String,
        /// The parsed definition.
        definition: WorkflowDefinition,
    },
    /// `deleteWorkflow`.
    DeleteWorkflow {
        /// The caller.
        actor: String,
        /// The workflow's name.
        name: String,
    },
    /// `setFocus`.
    SetFocus {
        /// The caller.
        login: Login,
        /// The new focus.
        focus: crate::focus::Focus,
    },
    /// `markSummaryRead`.
    MarkSummaryRead {
        /// The caller.
        login: Login,
        /// The task.
        task_id: TaskId,
        /// The seq read up to.
        seq: u64,
    },
    /// `setPaneFocus`.
    SetPaneFocus {
        /// The caller.
        login: Login,
        /// Whether the human works in the right pane.
        focused: bool,
        /// Whether the pane holds unsent text.
        drafting: bool,
    },
    /// `messageLead`: to the user's live lead session, else a new one (`crate::lead`).
    MessageLead {
        /// The caller, whose lead it is.
        login: Login,
        /// Text.
        text: String,
        /// Blob ids.
        images: Vec<String>,
        /// Model: a new lead session's, or a switch of the live one's.
        model: Option<String>,
    },
    /// The lead's `remember`: a new note, or note `note_id` of its user replaced. 403 not a
    /// live lead; 400 empty or too long; 404 unknown project or note.
    SaveLeadNote {
        /// The lead session (from its MCP token).
        session_id: SessionId,
        /// The note to replace; a new note when absent.
        note_id: Option<String>,
        /// The note's text.
        text: String,
        /// The project it applies to; every project when absent.
        project_id: Option<ProjectId>,
    },
    /// `deleteLeadNote` (`session_id` absent), or the lead's `forget`. 404 when the note is
    /// not the user's.
    DeleteLeadNote {
        /// The caller (ignored when `session_id` is given: the session's owner is the user).
        login: Login,
        /// The lead session, for `forget`.
        session_id: Option<SessionId>,
        /// The note.
        note_id: String,
    },
    /// The lead's `show`: moves its user's right pane (`crate::lead::show`'s rule while the
    /// human works in it). 403 not a live lead; 409 the human is busy there; as `SetFocus`.
    ShowFocus {
        /// The lead session (from its MCP token).
        session_id: SessionId,
        /// Where the pane goes.
        focus: crate::focus::Focus,
        /// The lead says the human's message it answers asked for this.
        human_asked: bool,
    },
    /// `createSession` (and `createTask` with a prompt): a session whose first turn is the
    /// prompt.
    CreateSession {
        /// The caller.
        actor: String,
        /// The task.
        task_id: TaskId,
        /// The model; the caller's default model when absent.
        model: Option<String>,
        /// The first message.
        prompt: String,
        /// Blob ids sent as images.
        images: Vec<String>,
        /// The worktree's HEAD now.
        head: String,
    },
    /// `sendMessage`.
    SendMessage {
        /// The caller.
        actor: String,
        /// The session.
        session_id: SessionId,
        /// Text.
        text: String,
        /// Blob ids.
        images: Vec<String>,
        /// Model to switch to.
        model: Option<String>,
        /// The worktree's HEAD now.
        head: String,
    },
    /// `withdrawMessage`.
    WithdrawMessage {
        /// The caller.
        actor: String,
        /// The task.
        task_id: TaskId,
        /// The queued input.
        input_id: u64,
    },
    /// `interruptSession`.
    InterruptSession {
        /// The caller.
        actor: String,
        /// The session.
        session_id: SessionId,
    },
    /// The vendor runtime's normalised output of one or more lines.
    RecordVendorOutput {
        /// The session.
        session_id: SessionId,
        /// The items, in order.
        items: Vec<crate::sessions::VendorItem>,
    },
    /// The vendor runtime saw the agent's process end (or fail to start).
    RecordProcessExit {
        /// The session.
        session_id: SessionId,
        /// What happened.
        exit: crate::sessions::ProcessExited,
    },
    /// The vendor runtime deferred the start of a session's agent process: the machine's
    /// available memory is below its floor.
    RecordProcessDeferred {
        /// The session.
        session_id: SessionId,
        /// The memory figures.
        deferred: crate::sessions::ProcessDeferred,
    },
    /// The vendor runtime stopped a session's process gracefully (a shutdown, a stop) while
    /// its turn ran: what the turn had streamed, its usage and time so far.
    RecordStreamed {
        /// The session.
        session_id: SessionId,
        /// What it streamed.
        streamed: crate::sessions::AgentStreamed,
    },
    /// The vendor runtime learned the vendor's id of a session's conversation (a Codex thread).
    RecordVendorSession {
        /// The session.
        session_id: SessionId,
        /// The vendor's id.
        vendor_session_id: String,
    },
    /// At start-up: a session whose turn was running when byre stopped.
    ResumeAfterRestart {
        /// The session.
        session_id: SessionId,
        /// The worktree's HEAD now.
        head: String,
    },
    /// `compactSession`.
    CompactSession {
        /// The caller.
        actor: String,
        /// The session.
        session_id: SessionId,
        /// The successor's model; the old session's when absent.
        model: Option<String>,
        /// The worktree's HEAD now.
        head: String,
    },
    /// `mergeTask`.
    MergeTask {
        /// The caller (the squash commit's author).
        actor: String,
        /// The task.
        task_id: TaskId,
        /// The confirmed title (required for target main).
        merge_title: Option<String>,
        /// Target `parent`: merge a subtask into its parent task.
        target_parent: bool,
        /// `after_review` (refused until reviews exist).
        after_review: bool,
        /// The worktree's HEAD now.
        head: String,
    },
    /// The finish reactor: start a held merge if it may start now.
    StartHeldMerge {
        /// The task.
        task_id: TaskId,
        /// The worktree's HEAD now.
        head: String,
    },
    /// The finish reactor: the squash commit landed (before the worktree's removal).
    RecordMergeLanded {
        /// The task.
        task_id: TaskId,
        /// The commit; empty when there was nothing to merge.
        merge_commit: String,
    },
    /// The finish reactor's outcome of a merge's git work.
    RecordMerge {
        /// The task.
        task_id: TaskId,
        /// What landed, or why nothing did.
        outcome: Result<crate::finish::MergeDone, String>,
    },
    /// `mergeIn`.
    MergeIn {
        /// The caller.
        actor: String,
        /// The task.
        task_id: TaskId,
        /// The worktree's HEAD now.
        head: String,
    },
    /// `discardTask`.
    DiscardTask {
        /// The caller.
        actor: String,
        /// The task.
        task_id: TaskId,
        /// Whether the agent writes the task's summary first (a turn); `false` runs none.
        summary: bool,
        /// The worktree's HEAD now.
        head: String,
    },
    /// The finish reactor's outcome of a discard's clean-up: the snapshot ref kept (empty for
    /// none), or why it failed.
    RecordDiscard {
        /// The task.
        task_id: TaskId,
        /// The outcome.
        outcome: Result<String, String>,
    },
    /// A task agent's `ask_human` tool: a question for the humans.
    AskHuman {
        /// The asking session (from its MCP token).
        session_id: SessionId,
        /// The question, its choices parsed.
        question: crate::inbox::Question,
    },
    /// `respondInbox`.
    RespondInbox {
        /// The caller.
        actor: String,
        /// The responses, all or none.
        responses: Vec<crate::inbox::ResponseInput>,
    },
    /// Answers handed to a CodeBolt agent over its socket (the reply to its `waitforReply` or
    /// `confirmationRequest`) rather than as a message: `inbox.delivered` with `input_id` 0.
    RecordAnswersDelivered {
        /// The session whose agent got them.
        session_id: SessionId,
        /// The responses.
        response_ids: Vec<String>,
    },
    /// A task agent's `set_merge_title` tool.
    SetMergeTitle {
        /// The session.
        session_id: SessionId,
        /// The title.
        merge_title: String,
    },
    /// A task agent's `start_subtask` tool or CodeBolt's `startAgent`: a new task in the
    /// calling session's project from `base_ref`, linked to the caller
    /// (`crate::subtasks::start`).
    StartSubtask {
        /// The calling agent's session.
        session_id: SessionId,
        /// The new task's title.
        title: String,
        /// The commit it branches from.
        base_ref: String,
        /// The CodeBolt agent started on it (its directory name); empty for `start_subtask`.
        agent: String,
    },
    /// The finish reactor: subtask `task_id`'s branch is in its parent's HEAD and its
    /// worktree was removed (`crate::subtasks::record_into_parent`).
    RecordMergeIntoParent {
        /// The subtask.
        task_id: TaskId,
        /// The parent's HEAD holding the branch, the kept snapshot ref, a clean-up error.
        done: crate::finish::MergeDone,
    },
    /// A task agent's `expose_port` tool.
    ExposePort {
        /// The session.
        session_id: SessionId,
        /// The preview's name.
        name: String,
        /// The port.
        port: u32,
    },
    /// `take_snapshot` (agent tool): snapshot the task's worktree now, without moving its
    /// branch. `trigger` must be `requested`. 404 unknown task; 409 closed or no worktree.
    RequestSnapshot {
        /// The task.
        task_id: TaskId,
        /// `requested`.
        trigger: crate::snapshots::SnapshotTrigger,
    },
    /// The snapshot reactor's outcome for one cause (a `turn.ended` or `snapshot.requested`):
    /// `Ok` when the commit is at `refs/byre/tasks/{task_id}/snap/{n}`, `Err(reason)` when it
    /// could not be made. Ignored when the cause is already answered.
    RecordSnapshot {
        /// The task.
        task_id: TaskId,
        /// Seq of the cause.
        cause_seq: u64,
        /// What was made, or why nothing was.
        outcome: Result<crate::snapshots::TakenSnapshot, String>,
        /// Whether a snapshot made is to be reviewed (`review.requested` in the same batch).
        review: bool,
    },
    /// `forkSnapshot`: a new task at snapshot `n` of `task_id` with an idle session that
    /// continues the snapshot's conversation (`crate::fork`). 404 unknown task or snapshot;
    /// 409 task closed, or no recorded agent message at or before the snapshot.
    ForkSnapshot {
        /// The caller (the new task's creator).
        actor: String,
        /// The task forked.
        task_id: TaskId,
        /// The snapshot's position.
        n: u32,
    },
    /// The review reactor found a pending review's step changed no files.
    SkipReview {
        /// The review.
        review_id: ReviewId,
        /// Why.
        reason: String,
    },
    /// The review reactor starts a pending review's reviewer session. 409 unless
    /// pending or while another review of the task runs.
    StartReview {
        /// The review.
        review_id: ReviewId,
        /// The reviewer's model (its vendor follows from it).
        model: String,
        /// The reviewer's first (and only) message.
        instructions: String,
        /// The snapshot commit it reviews.
        head: String,
    },
    /// `cancelMergeAfterReview` (`reason` `None`), or the review reactor dropping a merge it
    /// could not make (`reason` says why). 404 unknown task or no merge waiting.
    CancelMergeAfterReview {
        /// The caller (`byre` for the reactor).
        actor: String,
        /// The task.
        task_id: TaskId,
        /// Why, when not a caller's withdrawal.
        reason: Option<String>,
    },
    /// The review reactor ends the reviewer session of a review that ended.
    EndReviewer {
        /// The review.
        review_id: ReviewId,
    },
    /// A reviewer's `submit_review`. 400 bad arguments; 404 not a reviewer; 409 not running.
    SubmitReview {
        /// The reviewer session.
        session_id: SessionId,
        /// Its arguments.
        result: crate::reviews::ReviewResult,
    },
    /// A pending or running review failed (its reviewer's error, a restart).
    FailReview {
        /// The review.
        review_id: ReviewId,
        /// Why, in words.
        error: String,
    },
    /// `stopReview`: 404 unknown; 409 unless running.
    StopReview {
        /// The caller.
        actor: String,
        /// The review.
        review_id: ReviewId,
    },
    /// `setFindingState`: 404 unknown review; 400 not done or index out of range.
    SetFindingState {
        /// The caller.
        actor: String,
        /// The review.
        review_id: ReviewId,
        /// The finding's index.
        index: u32,
        /// Fixed or ignored.
        state: crate::reviews::FindingState,
        /// The task worktree's HEAD (for the message a `fixed` sends).
        head: String,
    },
    /// The terminal runtime records a viewer's open or close, or its shell's exit. 404
    /// unknown task; 409 an open of a closed task.
    RecordTerminal {
        /// The viewer's login for an open or close; `byre` for an exit.
        actor: String,
        /// The task.
        task_id: TaskId,
        /// What happened.
        change: crate::terminals::TerminalChange,
    },
}
