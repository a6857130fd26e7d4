//! The per-session stores of a CodeBolt agent ([`super::Store`]): memory, state, todos,
//! tokenizer, vector db and history requests.

use serde_json::{json, Value};

use super::{err, text, Generation, Store};
pub(super) fn store_action(
    st: &mut Store,
    ty: &str,
    action: &str,
    f: &Value,
    g: Generation,
) -> Value {
    let msg = &f["message"];
    let payload = &f["payload"];
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
            let id = format!("t{}", st.todos.len() + 1);
            let mut t = if msg.is_object() {
                msg.clone()
            } else {
                json!({"task": msg})
            };
            t["id"] = id.clone().into();
            t["taskId"] = id.clone().into();
            t["completed"] = t.get("completed").cloned().unwrap_or(false.into());
            if let Some(a) = f.get("agentId") {
                t["agentId"] = a.clone();
            }
            st.todos.push(t.clone());
            json!({"task": t, "data": t})
        }
        ("taskEvent", "getTasks" | "getTasksByAgent" | "getTasksByCategory") => {
            json!({"tasks": st.todos, "data": st.todos})
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
                None if g == Generation::V1 => {
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
        ("tokenizerEvent", "addToken") => {
            let item = text(&msg["item"]);
            st.tokens.push(item.clone());
            let n = item.split_whitespace().count();
            json!({"token": n, "count": n})
        }
        ("tokenizerEvent", "getToken") => {
            let item = text(&msg["item"]);
            let n = item.split_whitespace().count();
            json!({"token": n, "tokens": item.split_whitespace().collect::<Vec<_>>()})
        }
        (_, "addVectorItem") => {
            st.vectors.push(msg["item"].clone());
            json!({"message": "added", "id": st.vectors.len()})
        }
        (_, "getVector") => {
            let key = text(&msg["item"]);
            let v = st
                .vectors
                .iter()
                .find(|v| text(v).contains(&key))
                .cloned()
                .unwrap_or(Value::Null);
            json!({"vector": v, "item": v})
        }
        (_, "queryVectorItem" | "queryVectorItems") => {
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
        ("chatSummaryEvent", _) => {
            json!({"payload": st.history, "data": st.history})
        }
        _ => err(format!("byre does not support {ty}/{action}")),
    }
}
