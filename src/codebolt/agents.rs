//! CodeBolt's `agentEvent` family (PROTOCOL.md "Code utils, agents, browser, crawler"): the
//! CodeBolt agents byre can run, and `startAgent` as a new task.
//!
//! - The agents are the directories holding an `index.js` in the agents directories
//!   (`serve --codebolt-agents DIR`, repeatable; the first holding a name wins), the names
//!   `codebolt:<agent>` models resolve (`byre_agents::codeboltjs::entry_of`). An agent's id is
//!   its directory name; its title, `unique_id` and descriptions come from its
//!   `codeboltagent.yaml` when present and readable (else the id, and empty descriptions).
//! - `agentnotify/startSubagentTaskRequest` (v2's notification) starts the same subtask as
//!   `startAgent` and answers `startSubagentTaskResult` ([`start_subagent_task`]).
//! - `listAgents` lists them all, by id (`agentType` is ignored: byre has only local agents);
//!   `agentsDetail {agentList}` the named ones (id or `unique_id`), in the order asked, unknown
//!   names left out; `findAgent {task, maxResult, agents}` ranks them by [`rank`].
//! - Every listed agent is one JSON object ([`entry`]) that has both the fields of an agent
//!   manifest (`id`, `unique_id`, `name`, `title`, `description`, `longDescription`) and the
//!   OpenAI tool shape the client's agent library feeds its LLM (`type: "function"`,
//!   `function {name: <id>, description, parameters {task}}`); replies carry the list as
//!   `agents` (and `data`).
//! - `startAgent {agentId, task}` starts a subtask of the calling task through
//!   `app::subtasks::start_subtask`, the operation behind the `start_subtask` tool: a new task
//!   in the calling task's project from the default branch's tip (title: the task text's first
//!   line, at most 80 characters; actor: the calling task's creator), linked to the caller in
//!   the same batch (`task.subtask_started`), its session started with model `codebolt:<id>`
//!   and the task text as its first message, then waits (beside the agent's other requests)
//!   for that session's first `turn.ended`:
//!   `{success: true, agentId, result, task_id, session_id}` when it completed (`result`: the
//!   turn's result, else its last `agent.text`); `success: false` with an `error` when the
//!   agent is unknown, the task could not be made, the turn failed or was interrupted, or the
//!   calling agent's socket closed first. The new task stays open for review and merge like
//!   any other subtask (into its parent, or onto the default branch); the calling task cannot
//!   be merged or discarded while it is active.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::actions::{closed, err, Ctx};
use byre_agents::codeboltjs::frames::text;

/// Longest title `startAgent` gives its task, in characters.
pub const MAX_TITLE_CHARS: usize = 80;

/// One CodeBolt agent byre can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// The directory's name (`codebolt:<id>`).
    pub id: String,
    /// The manifest's `unique_id`, else the id.
    pub unique_id: String,
    /// The manifest's `title`, else the id.
    pub title: String,
    /// The manifest's `description`, else empty.
    pub description: String,
    /// The manifest's `longDescription` (or `long_description`), else the description.
    pub long_description: String,
}

/// The agents under `dir`, by id: every directory with an `index.js` (hidden names and
/// unreadable directories skipped; a missing `dir` lists none).
pub fn list(dir: &Path) -> Vec<AgentInfo> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<AgentInfo> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let id = e.file_name().to_str()?.to_owned();
            let path = e.path();
            (!id.starts_with('.') && path.join("index.js").is_file()).then(|| info(&id, &path))
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

fn info(id: &str, dir: &Path) -> AgentInfo {
    let manifest: serde_norway::Value = std::fs::read_to_string(dir.join("codeboltagent.yaml"))
        .ok()
        .and_then(|s| serde_norway::from_str(&s).ok())
        .unwrap_or(serde_norway::Value::Null);
    let field = |k: &str| {
        manifest
            .get(k)
            .and_then(|v| v.as_str())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let description = field("description").unwrap_or_default();
    AgentInfo {
        id: id.to_owned(),
        unique_id: field("unique_id").unwrap_or_else(|| id.to_owned()),
        title: field("title").unwrap_or_else(|| id.to_owned()),
        long_description: field("longDescription")
            .or_else(|| field("long_description"))
            .unwrap_or_else(|| description.clone()),
        description,
    }
}

/// The agent called `name`: by id, else by `unique_id`.
pub fn find<'a>(agents: &'a [AgentInfo], name: &str) -> Option<&'a AgentInfo> {
    agents
        .iter()
        .find(|a| a.id == name)
        .or_else(|| agents.iter().find(|a| a.unique_id == name))
}

/// Lower-case words of at least 2 letters or digits.
fn words(s: &str) -> std::collections::BTreeSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

/// `findAgent`'s ranking: an agent's score is the number of distinct words of `task` (lower
/// case, 2 or more letters or digits) found among the words of its id, `unique_id`, title
/// and descriptions. Agents scoring 0 are left out; the rest come best first, ties by id, at
/// most `max` (at least 1). When `only` is not empty, only the agents it names (id or
/// `unique_id`) are ranked.
pub fn rank<'a>(
    agents: &'a [AgentInfo],
    task: &str,
    max: usize,
    only: &[String],
) -> Vec<&'a AgentInfo> {
    let wanted = words(task);
    let mut scored: Vec<(usize, &AgentInfo)> = agents
        .iter()
        .filter(|a| only.is_empty() || only.iter().any(|o| *o == a.id || *o == a.unique_id))
        .map(|a| {
            let have = words(&format!(
                "{} {} {} {} {}",
                a.id, a.unique_id, a.title, a.description, a.long_description
            ));
            (wanted.intersection(&have).count(), a)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| a.id.cmp(&b.id)));
    scored
        .into_iter()
        .take(max.max(1))
        .map(|(_, a)| a)
        .collect()
}

/// An agent as replies list it (manifest fields plus the OpenAI tool shape).
pub fn entry(a: &AgentInfo) -> Value {
    json!({
        "id": a.id,
        "unique_id": a.unique_id,
        "name": a.title,
        "title": a.title,
        "description": a.description,
        "longDescription": a.long_description,
        "type": "function",
        "function": {
            "name": a.id,
            "description": if a.long_description.is_empty() { &a.description } else { &a.long_description },
            "parameters": {
                "type": "object",
                "properties": {"task": {"type": "string", "description": "The task for the agent."}},
                "required": ["task"]
            }
        }
    })
}

fn listed<'a>(agents: impl IntoIterator<Item = &'a AgentInfo>) -> Value {
    let list: Vec<Value> = agents.into_iter().map(entry).collect();
    json!({"agents": list, "data": list})
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(text).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

/// The agents of the configured agents directories (the first directory holding an id wins),
/// and those directories, for messages.
async fn configured(ctx: &Arc<Ctx>) -> (Vec<AgentInfo>, String) {
    let dirs = ctx.app.settings.codebolt_agents.clone();
    let shown = if dirs.is_empty() {
        "(none configured: serve --codebolt-agents DIR)".to_owned()
    } else {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let agents = tokio::task::spawn_blocking(move || {
        let mut all: Vec<AgentInfo> = Vec::new();
        for d in &dirs {
            for a in list(d) {
                if !all.iter().any(|b| b.id == a.id) {
                    all.push(a);
                }
            }
        }
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    })
    .await
    .unwrap_or_default();
    (agents, shown)
}

/// The reply fields of an `agentEvent` request `f` with action `action`.
pub async fn serve(ctx: &Arc<Ctx>, action: &str, f: &Value) -> Value {
    let (agents, dir) = configured(ctx).await;
    match action {
        "listAgents" => listed(&agents),
        "agentsDetail" => listed(
            strings(&f["agentList"])
                .iter()
                .filter_map(|n| find(&agents, n)),
        ),
        "findAgent" => {
            let max = f["maxResult"]
                .as_u64()
                .and_then(|m| usize::try_from(m).ok())
                .unwrap_or(1);
            listed(rank(
                &agents,
                &text(&f["task"]),
                max,
                &strings(&f["agents"]),
            ))
        }
        "startAgent" => {
            let agent_id = text(&f["agentId"]);
            let mut v = match find(&agents, &agent_id) {
                None => err(format!(
                    "no CodeBolt agent `{agent_id}`: byre runs the agent directories under {dir}"
                )),
                Some(a) => start(ctx, a, &text(&f["task"])).await,
            };
            v["agentId"] = f["agentId"].clone();
            v
        }
        _ => err(format!("unsupported agent action `{action}`")),
    }
}

/// `agentnotify/startSubagentTaskRequest {toolUseId, data: {parentAgentId, subagentId,
/// task}}` (a v2 notification, PROTOCOL.md §4): `startAgent`'s subtask ([`start`], through
/// `app::subtasks::start_subtask`) for the agent `subagentId`; when its first turn ends (or
/// it could not start) the agent is sent `agentnotify/startSubagentTaskResult` with the same
/// `toolUseId`: `content` the subtask's result or the error, `isError`, and `data {subagentId,
/// task_id, session_id}`.
pub async fn start_subagent_task(ctx: &Arc<Ctx>, f: &Value) {
    let data = &f["data"];
    let agent_id = text(&data["subagentId"]);
    let (agents, dir) = configured(ctx).await;
    let v = match find(&agents, &agent_id) {
        None => err(format!(
            "no CodeBolt agent `{agent_id}`: byre runs the agent directories under {dir}"
        )),
        Some(a) => start(ctx, a, &text(&data["task"])).await,
    };
    let ok = v["success"] != false;
    let content = if ok {
        text(&v["result"])
    } else {
        text(&v["error"])
    };
    let result = json!({
        "type": "agentnotify",
        "action": "startSubagentTaskResult",
        "toolUseId": f["toolUseId"].clone(),
        "requestId": f["requestId"].clone(),
        "content": content,
        "isError": !ok,
        "data": {"subagentId": agent_id, "task_id": v["task_id"].clone(), "session_id": v["session_id"].clone()},
    });
    let _ = ctx.out.send(result.to_string());
}

/// The title of a task started for `task`: its first non-blank line, at most
/// [`MAX_TITLE_CHARS`] characters, control characters dropped.
pub fn title_of(task: &str) -> String {
    let line = task
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim();
    if clean.chars().count() <= MAX_TITLE_CHARS {
        clean.to_owned()
    } else {
        let cut: String = clean.chars().take(MAX_TITLE_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// `startAgent`: see the module's doc.
async fn start(ctx: &Arc<Ctx>, agent: &AgentInfo, task: &str) -> Value {
    if task.trim().is_empty() {
        return err("startAgent needs a non-empty task");
    }
    let app = &ctx.app;
    let started = byre_app::subtasks::start_subtask(
        app,
        &ctx.link.session_id,
        byre_app::subtasks::NewSubtask {
            title: title_of(task),
            prompt: task.to_owned(),
            model: Some(format!("codebolt:{}", agent.id)),
            agent: agent.id.clone(),
            base: byre_app::subtasks::Base::DefaultBranch,
        },
    )
    .await;
    let (task_id, session_id, after) = match started {
        Ok(s) => (s.task_id, s.session_id, s.linked_seq),
        Err(e) => return err(format!("the agent's task could not be started: {e}")),
    };
    let fail = |why: String| {
        let mut v = err(why);
        v["task_id"] = task_id.clone().into();
        v["session_id"] = session_id.clone().into();
        v
    };
    // Everything after the link (the log keeps what came meanwhile), so the new session's
    // turn end cannot be missed.
    let ended = byre_app::subtasks::turn_end(app, &session_id, after);
    let (payload, last_text) = tokio::select! {
        e = ended => match e {
            Some(e) => e,
            None => return fail("the server stopped before the agent's turn ended".into()),
        },
        () = closed(ctx) => {
            return fail(format!(
                "the calling agent disconnected; task {task_id} goes on without it"
            ))
        }
    };
    let outcome = text(&payload["outcome"]);
    if outcome != "completed" {
        let why = text(&payload["error"]);
        return fail(format!(
            "the agent `{}`'s turn ended {outcome}{}",
            agent.id,
            if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            }
        ));
    }
    let result = match text(&payload["result"]) {
        r if r.trim().is_empty() => last_text,
        r => r,
    };
    json!({
        "success": true,
        "result": result,
        "message": result,
        "task_id": task_id,
        "session_id": session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(dir: &Path, id: &str, yaml: Option<&str>) {
        let d = dir.join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("index.js"), "").unwrap();
        if let Some(y) = yaml {
            std::fs::write(d.join("codeboltagent.yaml"), y).unwrap();
        }
    }

    #[test]
    fn lists_agent_directories_with_their_manifests() {
        let dir = tempfile::tempdir().unwrap();
        agent(
            dir.path(),
            "writer",
            Some("title: Doc Writer\nunique_id: doc-writer\ndescription: Writes docs\nlongDescription: Writes documentation files\n"),
        );
        agent(dir.path(), "bare", None);
        agent(dir.path(), "broken", Some(": : not yaml ["));
        std::fs::create_dir_all(dir.path().join("no-entry")).unwrap();
        std::fs::create_dir_all(dir.path().join(".hidden")).unwrap();
        std::fs::write(dir.path().join(".hidden/index.js"), "").unwrap();
        std::fs::write(dir.path().join("loose.js"), "").unwrap();
        let got = list(dir.path());
        let ids: Vec<&str> = got.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["bare", "broken", "writer"]);
        assert_eq!(
            got[2],
            AgentInfo {
                id: "writer".into(),
                unique_id: "doc-writer".into(),
                title: "Doc Writer".into(),
                description: "Writes docs".into(),
                long_description: "Writes documentation files".into(),
            }
        );
        assert_eq!(got[0].title, "bare");
        assert_eq!(got[0].unique_id, "bare");
        assert_eq!(got[1].description, "");
        assert!(list(&dir.path().join("missing")).is_empty());
        assert_eq!(
            find(&got, "doc-writer").map(|a| a.id.as_str()),
            Some("writer")
        );
        assert_eq!(find(&got, "writer").map(|a| a.id.as_str()), Some("writer"));
        assert!(find(&got, "nobody").is_none());
        let e = entry(&got[2]);
        assert_eq!(e["function"]["name"], "writer");
        assert_eq!(e["function"]["description"], "Writes documentation files");
        assert_eq!(e["unique_id"], "doc-writer");
    }

    fn info(id: &str, description: &str) -> AgentInfo {
        AgentInfo {
            id: id.into(),
            unique_id: id.into(),
            title: id.into(),
            description: description.into(),
            long_description: description.into(),
        }
    }

    #[test]
    fn ranking_counts_task_words_and_honours_max_and_the_filter() {
        let agents = vec![
            info("docs", "writes documentation and docs for the code"),
            info("tester", "writes unit tests for the code"),
            info("painter", "draws pictures"),
        ];
        let ids = |v: Vec<&AgentInfo>| v.iter().map(|a| a.id.clone()).collect::<Vec<_>>();
        // docs 4 ("writes", "docs", "for", "code"), tester 3, painter 0.
        assert_eq!(
            ids(rank(&agents, "Writes DOCS for this code", 5, &[])),
            ["docs", "tester"]
        );
        assert_eq!(
            ids(rank(&agents, "Writes DOCS for this code", 1, &[])),
            ["docs"]
        );
        // 0 means the client's default of 1.
        assert_eq!(ids(rank(&agents, "writes docs", 0, &[])), ["docs"]);
        // Ties by id.
        assert_eq!(ids(rank(&agents, "writes", 5, &[])), ["docs", "tester"]);
        assert!(rank(&agents, "sing a song", 5, &[]).is_empty());
        assert_eq!(
            ids(rank(&agents, "writes docs code", 5, &["tester".into()])),
            ["tester"]
        );
    }

    #[test]
    fn titles_are_the_first_line_cut_short() {
        assert_eq!(title_of("\n  write a file\nthen more"), "write a file");
        let long = "x".repeat(200);
        let t = title_of(&long);
        assert_eq!(t.chars().count(), MAX_TITLE_CHARS);
        assert!(t.ends_with('…'));
        assert_eq!(title_of("a\tb"), "ab");
    }
}
