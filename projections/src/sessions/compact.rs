//! Compaction (`compactSession`): the session completes and a successor on another model
//! starts with the old one's handoff.

use super::*;

/// The successor of a compacted session: the old one completes, a new one on `model` starts
/// with the handoff as its first message.
pub(super) fn compact_into_successor(
    state: &State,
    ctx: &DecideCtx,
    s: &Session,
    model: &str,
    head: &str,
    handoff: &str,
) -> Vec<NewEvent> {
    let id = ctx.id(1);
    let vendor = Vendor::for_model(model);
    let vendor_session_id = match vendor {
        Vendor::Claude => ctx.id(2),
        Vendor::Codex | Vendor::Codebolt => String::new(),
    };
    let created = SessionCreated {
        id: id.clone().into(),
        task_id: s.task_id.clone(),
        vendor,
        model: model.to_owned(),
        vendor_session_id: vendor_session_id.clone(),
        role: s.role,
        forked_from: None,
        forked_at: None,
    };
    let successor = Session {
        id: id.clone().into(),
        forked_from: None,
        last_kept: None,
        vendor,
        model: model.to_owned(),
        vendor_session_id,
        turns: 0,
        turn_running: false,
        compact_to: None,
        queue: Vec::new(),
        subagents: 0,
        ..s.clone()
    };
    // The old process goes, and its running subagents with it: each ends on the stream.
    let mut events = crate::subagents::end_all(state, s, "compacted");
    events.extend([
        session_event(
            s,
            state,
            "byre",
            EventBody::SessionCompleted(SessionCompleted {
                reason: "compacted".into(),
                successor_id: id.clone(),
            }),
        ),
        session_event(
            &successor,
            state,
            &s.created_by,
            EventBody::SessionCreated(created),
        ),
    ]);
    let text = if s.role == SessionRole::Lead {
        crate::lead::successor_message(state, &s.owner, handoff)
    } else {
        format!("You take over this task from a previous session. Its handoff:\n\n{handoff}")
    };
    events.extend(hand_over(
        state,
        &successor,
        "byre",
        state.last_input_id + 1,
        &text,
        &[],
        head,
        None,
    ));
    // Messages held while the handoff was written (a lead's: `crate::lead`) wait for the
    // successor's next turns, in order, under their own input ids.
    let after_handoff = Session {
        turn_running: true,
        ..successor
    };
    for q in &s.queue {
        events.push(session_event(
            &after_handoff,
            state,
            &q.actor,
            EventBody::UserQueued(UserQueued {
                input_id: q.input_id,
                text: q.text.clone(),
                images: q.images.clone(),
                head: q.head.clone(),
                model: q.model.clone(),
            }),
        ));
    }
    events
}

/// Decides `CompactSession`: the idle session's next turn writes a handoff.
pub(crate) fn compact(
    state: &State,
    actor: &str,
    session_id: &str,
    model: Option<&str>,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    if s.completed {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is completed"
        )));
    }
    if s.turn_running {
        return Err(Rejection::Conflict(format!(
            "session `{session_id}` is running a turn; compact it once it is idle"
        )));
    }
    if let Some(task) = state.tasks.get(&s.task_id) {
        check_not_finishing(task)?;
    }
    let model = model
        .filter(|m| !m.is_empty())
        .unwrap_or(&s.model)
        .to_owned();
    crate::users::check_model(&model)?;
    let mut events = vec![session_event(
        s,
        state,
        actor,
        EventBody::CompactRequested(CompactRequested {
            model,
            head: head.to_owned(),
        }),
    )];
    events.extend(hand_over(
        state,
        s,
        actor,
        state.last_input_id + 1,
        HANDOFF_PROMPT,
        &[],
        head,
        None,
    ));
    Ok(events)
}

/// What a compaction's handoff turn asks the agent.
pub const HANDOFF_PROMPT: &str = "Your session is being compacted: a fresh session will take over this task from your handoff alone. Write that handoff now, as your whole reply: the goal, the decisions made and why, the current state of the work, dead ends to avoid, open questions, and the files involved.";
