//! The contract's JSON types (schema/byre.openapi.yaml `components/schemas`), converted from
//! projection models. Projection models are never returned as they are; `Unmerged` is git's
//! own count (`byre_git::merge::Unmerged`), which has exactly the contract's fields.

use byre_projections as p;
use serde::Serialize;

pub use byre_log::rfc3339;

/// Spec `User`.
#[derive(Debug, Serialize)]
pub struct User {
    /// Login.
    pub login: String,
    /// Display name.
    pub display_name: String,
    /// Git name.
    pub git_name: String,
    /// Git email.
    pub git_email: String,
    /// Notification preferences.
    pub notification_prefs: p::users::NotificationPrefs,
    /// Default model.
    pub default_model: String,
}

impl From<&p::users::User> for User {
    fn from(u: &p::users::User) -> Self {
        User {
            login: u.login.clone().into(),
            display_name: u.display_name.clone(),
            git_name: u.git_name.clone(),
            git_email: u.git_email.clone(),
            notification_prefs: u.notification_prefs,
            default_model: u.default_model.clone(),
        }
    }
}

/// Spec `Project`.
#[derive(Debug, Serialize)]
pub struct Project {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Repository path.
    pub repo_path: String,
    /// Default branch.
    pub default_branch: String,
    /// Remote URL or empty.
    pub remote: String,
    /// Creator.
    pub created_by: String,
    /// RFC 3339.
    pub created_at: String,
}

impl From<&p::projects::Project> for Project {
    fn from(x: &p::projects::Project) -> Self {
        Project {
            id: x.id.clone().into(),
            name: x.name.clone(),
            repo_path: x.repo_path.clone(),
            default_branch: x.default_branch.clone(),
            remote: x.remote.clone(),
            created_by: x.created_by.clone().into(),
            created_at: rfc3339(x.created_at_us),
        }
    }
}

/// Spec `Task`.
#[derive(Debug, Serialize)]
pub struct Task {
    /// Id.
    pub id: String,
    /// Project.
    pub project_id: String,
    /// Title.
    pub title: String,
    /// Squash commit title.
    pub merge_title: String,
    /// Branch.
    pub branch: String,
    /// Worktree path.
    pub worktree_path: String,
    /// Base commit.
    pub base_ref: String,
    /// First port of its block.
    pub port_base: u32,
    /// Palette index.
    pub color: u32,
    /// active, merged or discarded.
    pub status: p::tasks::TaskStatus,
    /// Creator.
    pub created_by: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, once closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<String>,
    /// Squash commit, once merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// State.
    pub state: p::tasks::TaskState,
    /// A merge runs.
    pub merging: bool,
    /// A discard runs.
    pub discarding: bool,
    /// The task whose agent started this one as its subtask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    /// A merge into the parent is pending.
    pub merging_into_parent: bool,
    /// A merge waits for a review.
    pub merge_after_review: bool,
    /// Latest summary seq.
    pub summary_seq: u64,
    /// RFC 3339: when a held merge was requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_queued_at: Option<String>,
    /// The TODO.md item the task was started from; absent for other tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub todo_item: Option<String>,
    /// A fork: the task it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// With `forked_from`: the `n` of the snapshot it was forked at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<u32>,
    /// A stage task: the workflow its run froze.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// A stage task: its run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_run: Option<String>,
    /// A stage task: its stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_stage: Option<String>,
}

impl From<&p::tasks::Task> for Task {
    fn from(t: &p::tasks::Task) -> Self {
        Task {
            id: t.id.clone().into(),
            project_id: t.project_id.clone().into(),
            title: t.title.clone(),
            merge_title: t.merge_title.clone(),
            branch: t.branch.clone(),
            worktree_path: t.worktree_path.clone(),
            base_ref: t.base_ref.clone(),
            port_base: t.port_base,
            color: t.color,
            status: t.status,
            created_by: t.created_by.clone().into(),
            created_at: rfc3339(t.created_at_us),
            closed_at: t.closed_at_us.map(rfc3339),
            merge_commit: t.merge_commit.clone(),
            state: t.state,
            merging: t.merging,
            discarding: t.discarding,
            parent_task_id: t.parent_task_id.clone().map(Into::into),
            merging_into_parent: t.merging_into_parent,
            merge_after_review: t.merge_after_review,
            summary_seq: t.summary_seq,
            merge_queued_at: t.merge_queued_at_us.map(rfc3339),
            todo_item: (!t.todo_item.is_empty()).then(|| t.todo_item.clone()),
            forked_from: t.forked_from.as_ref().map(|(id, _)| id.clone()),
            forked_at: t.forked_from.as_ref().map(|(_, n)| *n),
            workflow: t.stage.as_ref().map(|s| s.workflow.clone()),
            workflow_run: t.stage.as_ref().map(|s| s.run.clone()),
            workflow_stage: t.stage.as_ref().map(|s| s.stage.clone()),
        }
    }
}

/// Spec `Participant`: a human with a message in a task's transcript.
#[derive(Debug, Serialize)]
pub struct Participant {
    /// Login.
    pub login: String,
    /// Display name.
    pub display_name: String,
    /// Git name; empty when unset (no Co-authored-by trailer then).
    pub git_name: String,
    /// Git email.
    pub git_email: String,
}

impl From<&p::users::User> for Participant {
    fn from(u: &p::users::User) -> Self {
        Participant {
            login: u.login.clone().into(),
            display_name: u.display_name.clone(),
            git_name: u.git_name.clone(),
            git_email: u.git_email.clone(),
        }
    }
}

/// Spec `Unmerged`: git's count of what a task's worktree holds that the default branch
/// doesn't has exactly the contract's fields, so it is served as it is.
pub use byre_git::merge::Unmerged;

/// Spec `Blob`.
#[derive(Debug, Serialize)]
pub struct Blob {
    /// Id.
    pub id: String,
    /// Content type.
    pub content_type: String,
    /// Uploader.
    pub created_by: String,
    /// RFC 3339.
    pub created_at: String,
}

impl From<&p::blobs::Blob> for Blob {
    fn from(b: &p::blobs::Blob) -> Self {
        Blob {
            id: b.id.clone(),
            content_type: b.content_type.clone(),
            created_by: b.created_by.clone().into(),
            created_at: rfc3339(b.created_at_us),
        }
    }
}

/// Spec `WorkflowSummary`.
#[derive(Debug, Serialize)]
pub struct WorkflowSummary {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
}

impl From<&p::workflows::Workflow> for WorkflowSummary {
    fn from(w: &p::workflows::Workflow) -> Self {
        WorkflowSummary {
            name: w.name.clone(),
            description: w.definition.description.clone(),
        }
    }
}

/// Spec `TaskWorkflow`: the workflow a task froze.
#[derive(Debug, Serialize)]
pub struct TaskWorkflow {
    /// The workflow's name.
    pub name: String,
    /// Its `WorkflowDefinition` as YAML.
    pub definition: String,
}

/// Spec `WorkflowRun`: a run's progress.
#[derive(Debug, Serialize)]
pub struct WorkflowRun {
    /// The workflow's name.
    pub name: String,
    /// The run's id.
    pub run: String,
    /// Its title.
    pub title: String,
    /// Its brief.
    pub brief: String,
    /// The frozen definition.
    pub definition: p::workflows::WorkflowDefinition,
    /// Whether the final stage finished.
    pub finished: bool,
    /// In the definition's order.
    pub stages: Vec<WorkflowRunStage>,
}

/// Spec `WorkflowRunStage`.
#[derive(Debug, Serialize)]
pub struct WorkflowRunStage {
    /// The stage's name.
    pub name: String,
    /// Its after stages, defaults applied.
    pub after: Vec<String>,
    /// `waiting`, or the state of its latest finished attempt (else of its latest attempt).
    pub state: String,
    /// The after stages with no finished attempt yet.
    pub waiting_on: Vec<String>,
    /// Its attempts, oldest first.
    pub attempts: Vec<StageAttempt>,
}

/// Spec `StageAttempt`.
#[derive(Debug, Serialize)]
pub struct StageAttempt {
    /// The task.
    pub task_id: String,
    /// Its title.
    pub title: String,
    /// `running`, `idle`, `finished`, `merged`, `discarded` or `cleaned_up`.
    pub state: String,
    /// A discard was started and the task isn't closed yet.
    pub discarding: bool,
    /// A fork: the attempt it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// Once finished: the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Once finished: the commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Discarded or cleaned up: who discarded it (`byre` for the clean-up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded_by: Option<String>,
    /// The attempts whose outputs it started from.
    pub inputs: Vec<p::runs::StageInput>,
}

/// Spec `AgentSession`.
#[derive(Debug, Serialize)]
pub struct AgentSession {
    /// Id.
    pub id: String,
    /// Task (empty for a lead session).
    pub task_id: String,
    /// Lead owner (empty for a task's session).
    pub owner: String,
    /// `claude` or `codex`.
    pub vendor: p::sessions::Vendor,
    /// Model.
    pub model: String,
    /// The vendor's session id.
    pub vendor_session_id: String,
    /// idle, running or completed.
    pub state: p::sessions::SessionState,
    /// implementer, lead or reviewer.
    pub role: p::sessions::SessionRole,
    /// Creator.
    pub created_by: String,
    /// RFC 3339.
    pub created_at: String,
    /// Running subagents.
    pub subagents: u32,
    /// A fork: the vendor session its first start resumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// With `forked_from`: the vendor's id of the last thing the fork keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<String>,
}

impl From<&p::sessions::Session> for AgentSession {
    fn from(s: &p::sessions::Session) -> Self {
        AgentSession {
            id: s.id.clone().into(),
            task_id: s.task_id.clone().into(),
            owner: s.owner.clone().into(),
            vendor: s.vendor,
            model: s.model.clone(),
            vendor_session_id: s.vendor_session_id.clone(),
            state: s.state,
            role: s.role,
            created_by: s.created_by.clone().into(),
            created_at: rfc3339(s.created_at_us),
            subagents: s.subagents,
            forked_from: s.forked_from.as_ref().map(|f| f.vendor_session_id.clone()),
            forked_at: s.forked_from.as_ref().map(|f| f.at.clone()),
        }
    }
}

/// Spec `LeadNote`.
#[derive(Debug, Serialize)]
pub struct LeadNote {
    /// Id.
    pub id: String,
    /// The note.
    pub text: String,
    /// The project it applies to; absent for every project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl From<&p::lead::LeadNote> for LeadNote {
    fn from(n: &p::lead::LeadNote) -> Self {
        LeadNote {
            id: n.id.clone(),
            text: n.text.clone(),
            project_id: n.project_id.clone().map(Into::into),
            created_at: rfc3339(n.created_at_us),
            updated_at: rfc3339(n.updated_at_us),
        }
    }
}

/// Spec `InboxItem`.
#[derive(Debug, Serialize)]
pub struct InboxItem {
    /// Id.
    pub id: String,
    /// Project.
    pub project_id: String,
    /// Task.
    pub task_id: String,
    /// Session.
    pub agent_session_id: String,
    /// Thread.
    pub thread_id: String,
    /// Kind.
    pub kind: p::inbox::InboxKind,
    /// Payload.
    pub payload: serde_json::Value,
    /// State.
    pub state: p::inbox::InboxState,
    /// RFC 3339.
    pub created_at: String,
    /// Who answered, dismissed or superseded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
    /// When (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<String>,
    /// Responses, oldest first.
    pub responses: Vec<InboxResponse>,
}

/// Spec `InboxResponse`.
#[derive(Debug, Serialize)]
pub struct InboxResponse {
    /// Id.
    pub id: String,
    /// The item.
    pub item_id: String,
    /// The answering human.
    pub user: String,
    /// `option`, `other` or `dismiss`.
    #[serde(rename = "type")]
    pub kind: p::inbox::ResponseType,
    /// `option`: the chosen options.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// Text, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Blob ids.
    pub images: Vec<String>,
    /// Attachments.
    pub attachments: Vec<serde_json::Value>,
    /// RFC 3339.
    pub created_at: String,
    /// When it reached the agent (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
}

impl From<&p::inbox::ResponseRecord> for InboxResponse {
    fn from(r: &p::inbox::ResponseRecord) -> Self {
        let x = &r.response;
        InboxResponse {
            id: x.id.clone(),
            item_id: x.item_id.clone(),
            user: x.user.clone().into(),
            kind: x.kind,
            options: (x.kind == p::inbox::ResponseType::Option).then(|| x.options.clone()),
            text: (!x.text.is_empty()).then(|| x.text.clone()),
            images: x.images.clone(),
            attachments: x.attachments.clone(),
            created_at: rfc3339(r.created_at_us),
            delivered_at: r.delivered_at_us.map(rfc3339),
        }
    }
}

impl From<&p::inbox::InboxItem> for InboxItem {
    fn from(i: &p::inbox::InboxItem) -> Self {
        InboxItem {
            id: i.id.clone(),
            project_id: i.project_id.clone().into(),
            task_id: i.task_id.clone().into(),
            agent_session_id: i.agent_session_id.clone().into(),
            thread_id: i.thread_id.clone(),
            kind: i.kind,
            payload: i.payload.clone(),
            state: i.state,
            created_at: rfc3339(i.created_at_us),
            resolved_by: i.resolved_by.clone(),
            resolved_at: i.resolved_at_us.map(rfc3339),
            responses: i.responses.iter().map(InboxResponse::from).collect(),
        }
    }
}

/// Spec `Preview`.
#[derive(Debug, Serialize)]
pub struct Preview {
    /// The task.
    pub task_id: String,
    /// Name.
    pub name: String,
    /// Port.
    pub port: u32,
    /// RFC 3339.
    pub created_at: String,
}

impl From<&p::tools::Preview> for Preview {
    fn from(x: &p::tools::Preview) -> Self {
        Preview {
            task_id: x.task_id.clone().into(),
            name: x.name.clone(),
            port: x.port,
            created_at: rfc3339(x.created_at_us),
        }
    }
}

/// Spec `Snapshot`.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Id.
    pub id: String,
    /// Task.
    pub task_id: String,
    /// The agent session of its cause (empty for none).
    pub agent_session_id: String,
    /// Position, from 1; the ref is `refs/byre/tasks/{task_id}/snap/{n}`.
    pub n: u32,
    /// Commit (40 hex); its parent is the worktree's HEAD when it was taken.
    pub commit_sha: String,
    /// Tree (40 hex).
    pub tree_sha: String,
    /// The task's latest event seq when it was started.
    pub event_seq: u64,
    /// `turn_end` or `requested` (older values only from earlier builds).
    pub trigger: p::snapshots::SnapshotTrigger,
    /// RFC 3339.
    pub created_at: String,
}

impl From<&p::snapshots::Snapshot> for Snapshot {
    fn from(s: &p::snapshots::Snapshot) -> Self {
        Snapshot {
            id: s.id.clone(),
            task_id: s.task_id.clone().into(),
            agent_session_id: s.agent_session_id.clone().into(),
            n: s.n,
            commit_sha: s.commit.clone(),
            tree_sha: s.tree.clone(),
            event_seq: s.event_seq,
            trigger: s.trigger,
            created_at: rfc3339(s.created_at_us),
        }
    }
}

/// Spec `Review`.
#[derive(Debug, Clone, Serialize)]
pub struct Review {
    /// Id.
    pub id: String,
    /// Task.
    pub task_id: String,
    /// The snapshot reviewed.
    pub snapshot_n: u32,
    /// The reviewer's session; empty when skipped.
    pub agent_session_id: String,
    /// The reviewer's vendor; empty when skipped.
    pub vendor: String,
    /// The reviewer's model; empty when skipped.
    pub model: String,
    /// `running`, `done`, `failed` or `skipped`.
    pub state: p::reviews::ReviewState,
    /// `done`: the `submit_review` arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<p::reviews::ReviewResult>,
    /// `failed` (or `skipped`): why.
    pub error: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, once ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// By finding index (as a string key).
    pub finding_states: std::collections::BTreeMap<String, p::reviews::FindingState>,
}

impl From<&p::reviews::Review> for Review {
    fn from(r: &p::reviews::Review) -> Self {
        Review {
            id: r.id.clone().into(),
            task_id: r.task_id.clone().into(),
            snapshot_n: r.snapshot_n,
            agent_session_id: r.agent_session_id.clone().into(),
            vendor: r.vendor.clone(),
            model: r.model.clone(),
            state: r.state,
            result: r.result.clone(),
            error: r.error.clone(),
            created_at: rfc3339(r.created_at_us),
            finished_at: r.finished_at_us.map(rfc3339),
            finding_states: r
                .finding_states
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    }
}
