//! CodeBolt agents' durable memory: the memory (`memoryEvent`), agent and project state
//! (`agentStateEvent`, `projectStateEvent`), todos (`taskEvent`) and vector db
//! (`vectordbEvent`/`vectorDbEvent`) of each task, folded from the `tool.call` events that
//! record the agents' requests (`<type>/<action>`, input the request frame). No event of its
//! own: a CodeBolt request is logged as a tool call before its reply is sent
//! (`src/codebolt/endpoint.rs`), and this module replays it on the task's [`AgentStore`].
//!
//! Per task: every CodeBolt session of a task (a restarted agent, a later session) sees the
//! same store; todos carry the `agentId` the client gives, and `getTasksByAgent` answers per
//! agent. The store goes when its task closes (`task.merged`, `task.discarded`).
//!
//! [`serve`] is both the fold's step and the reply the endpoint sends, so what an agent is
//! told is what a rebuild from the log holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::event::EventBody;
use crate::sessions::Vendor;
use crate::{Event, State};

/// One task's CodeBolt stores (part of [`State`], so of its digest).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStore {
    /// `memoryEvent/set` values by key.
    pub memory: BTreeMap<String, Value>,
    /// `agentStateEvent/addToAgentState` values by key.
    pub agent_state: BTreeMap<String, Value>,
    /// `projectStateEvent/updateProjectState` values by key.
    pub project_state: BTreeMap<String, Value>,
    /// `taskEvent` todos, oldest first, each with its `id`/`taskId` (`t<n>`).
    pub todos: Vec<Value>,
    /// The `n` of the last todo id given (ids are never reused after a delete).
    pub last_todo: u64,
    /// `addVectorItem` items, oldest first.
    pub vectors: Vec<Value>,
}

/// The store families, by request `type`.
const TYPES: &[&str] = &[
    "memoryEvent",
    "agentStateEvent",
    "projectStateEvent",
    "taskEvent",
    "vectordbEvent",
    "vectorDbEvent",
];

/// Whether a request of `ty` is one of this module's (read or write).
pub fn is_store_request(ty: &str) -> bool {
    TYPES.contains(&ty)
}

/// Whether request `ty`/`action` changes a store (so it is logged before it is answered).
pub fn writes(ty: &str, action: &str) -> bool {
    matches!(
        (ty, action),
        ("memoryEvent", "set")
            | ("agentStateEvent", "addToAgentState")
            | ("projectStateEvent", "updateProjectState")
            | (
                "taskEvent",
                "addTask"
                    | "createTasksFromMarkdown"
                    | "updateTask"
                    | "updateSubTask"
                    | "addSubTask"
                    | "deleteTask"
                    | "deleteSubTask"
            )
            | ("vectordbEvent" | "vectorDbEvent", "addVectorItem")
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn err(msg: String) -> Value {
    json!({"success": false, "error": msg, "message": msg})
}

/// Serves one store request on `store` (changing it for a write) and returns the reply's
/// fields. `frame` is the request as the client sent it (after the endpoint's spelling
/// normalisation); a v1 frame has no `requestId`. Pure and total: any JSON is answered.
pub fn serve(store: &mut AgentStore, ty: &str, action: &str, frame: &Value) -> Value {
    let f = frame;
    let v1 = f.get("requestId").is_none();
    let msg = &f["message"];
    let payload = &f["payload"];
    let st = store;
    match (ty, action) {
        ("memoryEvent", "set") => {
            st.memory.insert(text(&f["key"]), f["value"].clone());
            json!({"message": "stored"})
        }
        ("memoryEvent", "get") => {
            let v = st
                .memory
                .get(&text(&f["key"]))
                .cloned()
                .unwrap_or(Value::Null);
            json!({"value": v, "data": v})
        }
        ("agentStateEvent", "addToAgentState") => {
            st.agent_state
                .insert(text(&payload["key"]), payload["value"].clone());
            json!({"message": "stored"})
        }
        ("agentStateEvent", "getAgentState") => {
            json!({"payload": st.agent_state, "data": st.agent_state})
        }
        ("projectStateEvent", "updateProjectState") => {
            st.project_state
                .insert(text(&payload["key"]), payload["value"].clone());
            json!({"message": "stored"})
        }
        ("projectStateEvent", "getProjectState" | "getAppState") => {
            json!({"projectState": st.project_state, "state": st.project_state, "data": st.project_state})
        }
        ("taskEvent", "addTask" | "createTasksFromMarkdown") => {
            st.last_todo += 1;
            let id = format!("t{}", st.last_todo);
            let mut t = if msg.is_object() {
                msg.clone()
            } else {
                json!({"task": msg})
            };
            t["id"] = id.clone().into();
            t["taskId"] = id.into();
            t["completed"] = t.get("completed").cloned().unwrap_or(false.into());
            if let Some(a) = f.get("agentId") {
                t["agentId"] = a.clone();
            }
            st.todos.push(t.clone());
            json!({"task": t, "data": t})
        }
        ("taskEvent", "getTasks" | "getTasksByCategory") => {
            json!({"tasks": st.todos, "data": st.todos})
        }
        ("taskEvent", "getTasksByAgent") => {
            let agent = msg.get("agentId").or(f.get("agentId")).map(text);
            let mine: Vec<&Value> = st
                .todos
                .iter()
                .filter(|t| agent.as_ref().is_none_or(|a| text(&t["agentId"]) == *a))
                .collect();
            json!({"tasks": mine, "data": mine})
        }
        ("taskEvent", "getAllAgents") => {
            let agents: std::collections::BTreeSet<String> = st
                .todos
                .iter()
                .filter_map(|t| t["agentId"].as_str().map(str::to_owned))
                .collect();
            json!({"agents": agents, "data": agents})
        }
        ("taskEvent", "updateTask" | "updateSubTask" | "addSubTask") => {
            let id = text(&msg["taskId"]);
            match st
                .todos
                .iter_mut()
                .find(|t| !id.is_empty() && text(&t["id"]) == id)
            {
                Some(t) => {
                    if let (Some(o), Some(m)) = (t.as_object_mut(), msg.as_object()) {
                        if action == "addSubTask" {
                            let subs = o.entry("subtasks").or_insert_with(|| json!([]));
                            if let Some(a) = subs.as_array_mut() {
                                a.push(msg.clone());
                            }
                        } else {
                            for (k, v) in m {
                                o.insert(k.clone(), v.clone());
                            }
                        }
                    }
                    json!({"task": t.clone(), "data": t.clone()})
                }
                // v1's updateTask carries a whole task, no id: it is kept as given.
                None if v1 => {
                    st.todos.push(json!({"task": msg}));
                    json!({"message": "updated"})
                }
                None => err(format!("no task `{id}`")),
            }
        }
        ("taskEvent", "deleteTask" | "deleteSubTask") => {
            let id = text(&msg["taskId"]);
            let before = st.todos.len();
            if action == "deleteTask" {
                st.todos.retain(|t| text(&t["id"]) != id);
            }
            json!({"message": "deleted", "deleted": before - st.todos.len()})
        }
        ("taskEvent", "exportTasksToMarkdown") => {
            let md: Vec<String> = st
                .todos
                .iter()
                .map(|t| {
                    let done = t["completed"].as_bool().unwrap_or(false);
                    let title = t
                        .get("title")
                        .or(t.get("task"))
                        .map(text)
                        .unwrap_or_default();
                    format!("- [{}] {title}", if done { "x" } else { " " })
                })
                .collect();
            json!({"markdown": md.join("\n"), "data": md.join("\n")})
        }
        ("vectordbEvent" | "vectorDbEvent", "addVectorItem") => {
            st.vectors.push(msg["item"].clone());
            json!({"message": "added", "id": st.vectors.len()})
        }
        ("vectordbEvent" | "vectorDbEvent", "getVector") => {
            let key = text(&msg["item"]);
            let v = st
                .vectors
                .iter()
                .find(|v| text(v).contains(&key))
                .cloned()
                .unwrap_or(Value::Null);
            json!({"vector": v, "item": v})
        }
        ("vectordbEvent" | "vectorDbEvent", "queryVectorItem" | "queryVectorItems") => {
            let keys: Vec<String> = match msg.get("items").and_then(Value::as_array) {
                Some(a) => a.iter().map(text).collect(),
                None => vec![text(&msg["item"])],
            };
            let hits: Vec<Value> = st
                .vectors
                .iter()
                .filter(|v| keys.iter().any(|k| text(v).contains(k.as_str())))
                .cloned()
                .collect();
            json!({"item": hits, "items": hits, "data": hits})
        }
        _ => err(format!("byre does not support {ty}/{action}")),
    }
}

/// Folds one event: a CodeBolt session's `tool.call` of a store write is replayed on its
/// task's store; a task that closes loses its store.
pub(crate) fn apply(state: &mut State, e: &Event) {
    match &e.body {
        EventBody::ToolCall(call) => {
            let Some((ty, action)) = call.name.split_once('/') else {
                return;
            };
            if !writes(ty, action) {
                return;
            }
            let Some(session) = e
                .agent_session_id
                .as_deref()
                .and_then(|id| state.sessions.get(id))
            else {
                return;
            };
            if session.vendor != Vendor::Codebolt || session.task_id.is_empty() {
                return;
            }
            let store = state
                .agent_stores
                .entry(session.task_id.clone())
                .or_default();
            serve(store, ty, action, &call.input);
        }
        EventBody::TaskMerged(_) | EventBody::TaskDiscarded(_) => {
            if let Some(task_id) = &e.task_id {
                state.agent_stores.remove(task_id);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::{ToolCall, VendorItem};
    use crate::testkit::World;
    use crate::Command;

    impl World {
        /// Session `sid` records a tool call `name` with `input`, as its driver would.
        fn call_tool(&mut self, sid: &str, name: &str, input: Value) {
            self.ok(Command::RecordVendorOutput {
                session_id: sid.into(),
                items: vec![VendorItem::ToolCall(ToolCall {
                    cut: None,
                    tool_use_id: format!("u{}", self.state.last_seq),
                    name: name.into(),
                    input,
                    raw: String::new(),
                })],
            });
        }

        /// `ada` starts a session of `model` on the first task; its id.
        fn start_model(&mut self, model: &str) -> String {
            self.ok(Command::CreateSession {
                actor: "ada".into(),
                task_id: self.task_id().into(),
                model: Some(model.into()),
                prompt: "go".into(),
                images: vec![],
                head: "h".into(),
            });
            self.session().id.clone().into()
        }
    }

    #[test]
    fn a_codebolt_sessions_store_writes_fold_into_its_tasks_store_and_no_other_vendors() {
        let mut w = World::with_task();
        let cb = w.start_model("codebolt:memory");
        assert_eq!(w.state.sessions[&cb].vendor, Vendor::Codebolt);
        let set = json!({"type": "memoryEvent", "action": "set", "key": "colour", "value": "teal"});
        w.call_tool(&cb, "memoryEvent/set", set);
        // A read is not folded; nor is a Claude Code tool that happens to share the name.
        w.call_tool(&cb, "memoryEvent/get", json!({"key": "colour"}));
        let task = w.task_id();
        assert_eq!(w.state.agent_stores[&task].memory["colour"], "teal");
        let mut other = World::with_task();
        let claude = other.start("hi");
        other.call_tool(&claude, "memoryEvent/set", json!({"key": "k", "value": 1}));
        assert!(other.state.agent_stores.is_empty());
        // What the fold holds is what a read answers.
        let mut store = w.state.agent_stores[&task].clone();
        let got = serve(&mut store, "memoryEvent", "get", &json!({"key": "colour"}));
        assert_eq!(got["value"], "teal");
    }

    #[test]
    fn a_write_replayed_on_a_copy_gives_the_same_store_and_reply() {
        let mut live = AgentStore::default();
        let frames = [
            (
                "memoryEvent",
                "set",
                json!({"key": "colour", "value": {"hex": "#0aa"}}),
            ),
            (
                "taskEvent",
                "addTask",
                json!({"message": {"title": "a"}, "agentId": "x", "requestId": "1"}),
            ),
            (
                "taskEvent",
                "addTask",
                json!({"message": {"title": "b"}, "agentId": "y", "requestId": "2"}),
            ),
            (
                "taskEvent",
                "deleteTask",
                json!({"message": {"taskId": "t1"}, "requestId": "3"}),
            ),
            (
                "taskEvent",
                "addTask",
                json!({"message": {"title": "c"}, "requestId": "4"}),
            ),
            (
                "vectorDbEvent",
                "addVectorItem",
                json!({"message": {"item": "teal paint"}, "requestId": "5"}),
            ),
        ];
        let mut replayed = AgentStore::default();
        for (ty, action, f) in &frames {
            assert!(writes(ty, action));
            let a = serve(&mut live, ty, action, f);
            let b = serve(&mut replayed, ty, action, f);
            assert_eq!(a, b);
        }
        assert_eq!(live, replayed);
        // Ids are never reused after a delete.
        let ids: Vec<String> = live.todos.iter().map(|t| text(&t["id"])).collect();
        assert_eq!(ids, ["t2", "t3"]);
        let got = serve(&mut live, "memoryEvent", "get", &json!({"key": "colour"}));
        assert_eq!(got["value"]["hex"], "#0aa");
        let mine = serve(
            &mut live,
            "taskEvent",
            "getTasksByAgent",
            &json!({"message": {"agentId": "y"}, "requestId": "6"}),
        );
        assert_eq!(mine["tasks"].as_array().unwrap().len(), 1, "{mine}");
        let hits = serve(
            &mut live,
            "vectorDbEvent",
            "queryVectorItem",
            &json!({"message": {"item": "teal"}, "requestId": "7"}),
        );
        assert_eq!(hits["items"][0], "teal paint");
        assert!(!writes("memoryEvent", "get"));
    }
}
