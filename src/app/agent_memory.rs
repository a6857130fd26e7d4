//! A CodeBolt agent's durable stores (memory, state, todos, vectors), as the fold holds them
//! (`byre_projections::agent_memory`); its writes are logged by its session's loop as the
//! served requests' `tool.call`s, never submitted here.

use byre_projections::agent_memory::AgentStore;

use super::Ctx;

/// Task `task_id`'s stores as the log has them now (empty when it has none).
pub fn folded(app: &Ctx, task_id: &str) -> AgentStore {
    app.writer
        .read(|s| s.agent_stores.get(task_id).cloned())
        .unwrap_or_default()
}
