//! The fold of the session events into [`State::sessions`] and [`State::inputs`].

use super::*;

/// Folds the session events.
pub(crate) fn apply(state: &mut State, e: &crate::Event) {
    let sid = e.agent_session_id.as_deref().unwrap_or("");
    match &e.body {
        EventBody::SessionCreated(p) => {
            state.sessions.entry(p.id.clone()).or_insert_with(|| {
                let mut s = Session::created(p, &e.actor, e.created_at_us, e.seq);
                if p.role == SessionRole::Lead {
                    s.owner = e.owner.clone().unwrap_or_default();
                }
                s
            });
        }
        EventBody::SessionState(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.state = p.state;
            }
        }
        EventBody::UserMessage(p) => {
            state.last_input_id = state.last_input_id.max(p.input_id);
            let task_id = e.task_id.clone().unwrap_or_default();
            state.inputs.insert(
                p.input_id,
                Input {
                    session_id: sid.into(),
                    task_id,
                    state: InputState::Handed,
                },
            );
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.retain(|q| q.input_id != p.input_id);
                if let Some(m) = &p.model {
                    s.model.clone_from(m);
                }
                s.turn_input = Some(QueuedInput {
                    input_id: p.input_id,
                    text: p.text.clone(),
                    images: p.images.clone(),
                    model: p.model.clone(),
                    actor: e.actor.clone(),
                    head: p.head.clone(),
                });
            }
        }
        EventBody::UserQueued(p) => {
            state.last_input_id = state.last_input_id.max(p.input_id);
            let task_id = e.task_id.clone().unwrap_or_default();
            state.inputs.insert(
                p.input_id,
                Input {
                    session_id: sid.into(),
                    task_id,
                    state: InputState::Queued,
                },
            );
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.push(QueuedInput {
                    input_id: p.input_id,
                    text: p.text.clone(),
                    images: p.images.clone(),
                    model: p.model.clone(),
                    actor: e.actor.clone(),
                    head: p.head.clone(),
                });
            }
        }
        EventBody::UserUnqueued(p) => {
            if let Some(i) = state.inputs.get_mut(&p.input_id) {
                i.state = InputState::Withdrawn;
            }
            if let Some(s) = state.sessions.get_mut(sid) {
                s.queue.retain(|q| q.input_id != p.input_id);
            }
        }
        EventBody::TurnStarted(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turns = s.turns.max(p.turn);
                s.turn_running = true;
                if p.input_ids.is_empty() {
                    // A turn the agent's CLI started by itself: no message of byre's.
                    s.turn_input = None;
                }
                s.last_api_retry = None;
                s.interrupt_requested = false;
                s.turn_answered = false;
                s.streamed = None;
            }
        }
        EventBody::AgentStreamed(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                if !p.text.is_empty() {
                    s.turn_answered = true;
                }
                s.streamed = Some(StreamedSoFar {
                    turn: p.turn,
                    usage: p.usage,
                    duration_ms: p.duration_ms,
                });
            }
        }
        EventBody::AgentText(_) | EventBody::ToolCall(_) | EventBody::ToolResult(_) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turn_answered = true;
            }
        }
        // The agent asked a question (`ask_human`): it had the turn's message.
        EventBody::InboxItemCreated(p) if p.kind == InboxKind::Question => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turn_answered = true;
            }
        }
        EventBody::ApiRetry(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.last_api_retry = Some(serde_json::json!({
                    "attempt": p.attempt, "max_retries": p.max_retries, "retry_delay_ms": p.retry_delay_ms,
                    "error_status": p.error_status, "error": p.error,
                }));
            }
        }
        EventBody::VendorSessionStarted(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.vendor_session_id.clone_from(&p.vendor_session_id);
            }
        }
        EventBody::CompactRequested(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.compact_to = Some((p.model.clone(), p.head.clone()));
            }
        }
        EventBody::SessionCompleted(_) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.completed = true;
                s.compact_to = None;
            }
        }
        EventBody::InterruptRequested(_) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.interrupt_requested = true;
            }
        }
        EventBody::TurnEnded(p) => {
            if let Some(s) = state.sessions.get_mut(sid) {
                s.turn_running = false;
                s.interrupt_requested = false;
                s.compact_to = None;
                s.streamed = None;
                if let Some(at) = &p.last_vendor_id {
                    s.last_kept = Some(crate::fork::ForkPoint {
                        vendor_session_id: s.vendor_session_id.clone(),
                        at: at.clone(),
                    });
                }
            }
            if p.summary {
                if let Some(t) = e.task_id.as_deref().and_then(|t| state.tasks.get_mut(t)) {
                    t.summary_seq = e.seq;
                }
            }
        }
        _ => {}
    }
}
