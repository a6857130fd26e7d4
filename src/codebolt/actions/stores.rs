//! The stores of a CodeBolt agent. Memory, state, todos and the vector db are durable and per
//! task: `byre_projections::agent_memory` folds them from the log, reads are answered from
//! that fold, and a write is answered only once its `tool.call` is logged (see
//! [`store_write`]). The tokenizer and the chat history live with the session's link
//! (`byre_agents::codeboltjs::Store`).

use std::sync::Arc;

use byre_projections::agent_memory::{self, AgentStore};
use serde_json::{json, Value};

use super::{err, text, Ctx, Request, Store};

/// Longest wait for the session loop to log a store write, in seconds (its loop may hold a
/// message up to 30 s while an end-of-turn snapshot is taken).
const RECORD_WAIT_S: u64 = 60;

/// The task's store as the log has it now (empty when it has none).
fn folded(ctx: &Ctx) -> AgentStore {
    byre_app::agent_memory::folded(&ctx.app, &ctx.link.task_id)
}

/// A read of memory, state, todos or vectors: answered from the fold.
pub(super) fn store_read(ctx: &Ctx, req: &Request) -> Value {
    let mut store = folded(ctx);
    agent_memory::serve(&mut store, &req.ty, &req.action, &req.frame)
}

/// A write of memory, state, todos or vectors (`agent_memory::writes`): decided on the fold's
/// store, then its served record (request, `reply`) is handed to the session loop, which logs
/// it as `tool.call`/`tool.result`, and only once that is durable is the reply returned for
/// sending; the fold then holds what the reply says. Writes of one link are serialised, so
/// each is decided on a store that holds the ones before it.
/// # Errors
/// A failed reply (`success: false`) when the session loop is gone or did not log it in
/// time: the agent is not told it is stored.
pub async fn store_write(ctx: &Arc<Ctx>, req: &Request, reply: impl Fn(Value) -> Value) -> Value {
    let mut last = ctx.link.store_writes.lock().await;
    let mut store = folded(ctx);
    let fields = agent_memory::serve(&mut store, &req.ty, &req.action, &req.frame);
    let answer = reply(fields);
    *last += 1;
    let ack = *last;
    let mut recorded = ctx.link.recorded.subscribe();
    let served = json!({"__byre": "served", "id": req.request_id, "request": req.frame, "reply": answer, "ack": ack});
    if ctx.link.to_session.send(served.to_string()).await.is_err() {
        return reply(err("the agent's session has ended: nothing was stored"));
    }
    let logged = tokio::select! {
        r = recorded.wait_for(|n| *n >= ack) => r.is_ok(),
        _ = tokio::time::sleep(std::time::Duration::from_secs(RECORD_WAIT_S)) => false,
    };
    if logged {
        answer
    } else {
        reply(err(
            "byre could not log the change in time; it may or may not be stored",
        ))
    }
}

/// The link's own stores: the tokenizer (`tokenizerEvent`) and the chat history
/// (`chatSummaryEvent`), kept while the session's process lives.
pub(super) fn link_store_action(st: &mut Store, ty: &str, action: &str, f: &Value) -> Value {
    let msg = &f["message"];
    match (ty, action) {
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
        ("chatSummaryEvent", _) => {
            json!({"payload": st.history, "data": st.history})
        }
        _ => err(format!("byre does not support {ty}/{action}")),
    }
}
