//! A session's process ending (`RecordProcessExit`) and byre's own restart under a running
//! turn (`ResumeAfterRestart`).

use super::*;

/// Decides `RecordProcessExit`: recorded; a running turn fails with a session error, unless
/// the exit names the turn's message among those handed again to a fresh process
/// (`redelivered_input_ids`): that turn goes on in the new process; or unless byre stopped
/// the process for being idle (`idle_ms`): it was stopped while no turn ran, so a turn running
/// now started after, and its message goes to a fresh process.
pub(crate) fn record_exit(
    state: &State,
    ctx: &DecideCtx,
    session_id: &str,
    exit: &ProcessExited,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    let mut events = vec![session_event(
        s,
        state,
        "byre",
        EventBody::ProcessExited(exit.clone()),
    )];
    events.extend(crate::subagents::end_all(state, s, "process_exited"));
    let redelivered = s
        .turn_input
        .as_ref()
        .is_some_and(|m| exit.redelivered_input_ids.contains(&m.input_id));
    if s.turn_running && !redelivered && exit.idle_ms == 0 {
        let ended = TurnEnded::by_byre(s.turns, TurnOutcome::Failed, exit.reason.clone())
            .with_streamed(s.streamed.as_ref());
        events.extend(end_turn(state, ctx, s, ended, false));
    }
    Ok(events)
}

/// Decides `ResumeAfterRestart`: subagents still counted end (`byre_restarted`); a turn
/// byre's restart cut short ends as interrupted (a reviewer's review fails with
/// [`crate::reviews::STOPPED_UNDER_REVIEWER`], and it gets nothing more) and the
/// session gets the turn's message again (prefixed with [`RESENT_NOTE`], from its sender) when
/// the agent had not answered it with any text or tool use, else [`RESTART_NOTE`] (asking it
/// to carry on), as the next turn; queued messages follow it.
pub(crate) fn resume_after_restart(
    state: &State,
    session_id: &str,
    head: &str,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    // The stopped process took its subagents with it.
    let mut events = crate::subagents::end_all(state, s, "byre_restarted");
    if !s.turn_running || s.completed {
        return Ok(events);
    }
    let ended = TurnEnded::by_byre(
        s.turns,
        TurnOutcome::Interrupted,
        "byre restarted while the turn ran".into(),
    )
    .with_streamed(s.streamed.as_ref());
    events.push(session_event(s, state, "byre", EventBody::TurnEnded(ended)));
    if s.role == SessionRole::Reviewer {
        // A reviewer is never resumed: its review fails now (the review reactor then
        // completes the session), rather than a new process being started only to be killed.
        if let Some(r) = state
            .review_of_session(session_id)
            .filter(|r| r.state == crate::reviews::ReviewState::Running)
        {
            events.extend(crate::reviews::fail(
                state,
                &r.id,
                crate::reviews::STOPPED_UNDER_REVIEWER,
            )?);
        }
        return Ok(events);
    }
    let mut hook = crate::finish::turn_end_hook(state, s, TurnOutcome::Interrupted, head);
    events.append(&mut hook.events);
    if hook.hold_queue {
        return Ok(events);
    }
    let after = Session {
        turn_running: false,
        ..s.clone()
    };
    // Nothing came back from the agent in the cut turn: its CLI may never have had the
    // message (an answer to its question, say), so hand that over again, from its sender.
    // (A message byre already sent for a restart goes again as it is.)
    let unanswered = s.turn_input.as_ref().filter(|_| !s.turn_answered);
    let (actor, text, images) = match unanswered {
        Some(m) if m.text.starts_with(RESTART_NOTE_START) => {
            (m.actor.as_str(), m.text.clone(), m.images.as_slice())
        }
        Some(m) => (
            m.actor.as_str(),
            format!("{RESENT_NOTE}\n\n{}", m.text),
            m.images.as_slice(),
        ),
        None => ("byre", RESTART_NOTE.to_owned(), &[][..]),
    };
    events.extend(hand_over(
        state,
        &after,
        actor,
        state.last_input_id + 1,
        &text,
        images,
        head,
        None,
    ));
    Ok(events)
}

/// Decides `RecordProcessDeferred`: recorded, for the session's task to show why its agent
/// has not started; it changes no state.
pub(crate) fn record_deferred(
    state: &State,
    session_id: &str,
    deferred: &ProcessDeferred,
) -> Result<Vec<NewEvent>, Rejection> {
    let s = session(state, session_id)?;
    Ok(vec![session_event(
        s,
        state,
        "byre",
        EventBody::ProcessDeferred(deferred.clone()),
    )])
}
