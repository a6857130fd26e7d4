//! The humans' inbox: `listInbox`, `getInboxItem`, `respondInbox`; and [`ask_human`], an
//! agent's question to them.

use byre_projections::inbox::{InboxState, Question, ResponseInput};
use byre_projections::{Command, EventBody};

use super::{Ctx, Error};
use crate::api;

/// Which items `listInbox` lists.
pub struct InboxFilter {
    /// Only this project's items.
    pub project_id: Option<String>,
    /// Only this task's items.
    pub task_id: Option<String>,
    /// Items in this state (default open).
    pub state: Option<InboxState>,
}

/// `listInbox`: the items matching `filter`, oldest first.
pub fn list_inbox(app: &Ctx, filter: &InboxFilter) -> Vec<api::InboxItem> {
    let state = filter.state.unwrap_or(InboxState::Open);
    let mut items: Vec<(u64, api::InboxItem)> = app.writer.read(|s| {
        s.inbox
            .values()
            .filter(|i| i.state == state)
            .filter(|i| {
                filter
                    .project_id
                    .as_deref()
                    .is_none_or(|p| i.project_id == p)
            })
            .filter(|i| filter.task_id.as_deref().is_none_or(|t| i.task_id == t))
            .map(|i| (i.created_seq, api::InboxItem::from(i)))
            .collect()
    });
    items.sort_by_key(|(seq, _)| *seq);
    items.into_iter().map(|(_, i)| i).collect()
}

/// `getInboxItem`.
/// # Errors
/// [`Error::NotFound`] for an unknown item.
pub fn get_inbox_item(app: &Ctx, id: &str) -> Result<api::InboxItem, Error> {
    app.writer
        .read(|s| s.inbox.get(id).map(api::InboxItem::from))
        .ok_or_else(|| Error::NotFound(format!("no inbox item `{id}`")))
}

/// `respondInbox`: answers items, all or none; returns the answered items in the
/// submission's order.
/// # Errors
/// Invalid: a malformed response (options not among the item's, not exactly one for
/// pick-one, none for pick-any, unknown images, an item twice, an attachment that is not an
/// object); not found: an unknown item; conflict: an item that is not open.
pub async fn respond_inbox(
    app: &Ctx,
    actor: &str,
    responses: Vec<ResponseInput>,
) -> Result<Vec<api::InboxItem>, Error> {
    if responses
        .iter()
        .any(|r| !r.attachments.iter().all(|a| a.is_object()))
    {
        return Err(Error::Invalid("each attachment must be an object".into()));
    }
    let ids: Vec<String> = responses.iter().map(|r| r.item_id.clone()).collect();
    app.submit(Command::RespondInbox {
        actor: actor.to_owned(),
        responses,
    })
    .await?;
    Ok(app.writer.read(|s| {
        ids.iter()
            .filter_map(|id| s.inbox.get(id).map(api::InboxItem::from))
            .collect()
    }))
}

/// Asks the humans `question` for session `session_id` (a CodeBolt agent's `waitforReply` or
/// `confirmationRequest`; the `ask_human` tool goes through [`super::tools::call`]): posts an
/// inbox item. Answers the item's id.
/// # Errors
/// The rejection (unknown or ended session, …); [`Error::Unavailable`] when the writer
/// stopped.
pub async fn ask_human(app: &Ctx, session_id: &str, question: Question) -> Result<String, Error> {
    let cmd = Command::AskHuman {
        session_id: session_id.to_owned().into(),
        question,
    };
    let ack = app.submit(cmd).await?;
    ack.events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::InboxItemCreated(p) => Some(p.id.clone()),
            _ => None,
        })
        .ok_or_else(|| Error::internal("the question could not be posted"))
}

/// What became of a question a CodeBolt agent waits on ([`ask_and_wait`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    /// The first human answer, an `InboxResponse` as JSON.
    Answered(serde_json::Value),
    /// No answer will come to this wait: why, for the agent.
    NoAnswer(&'static str),
}

/// A CodeBolt agent's question (`waitforReply`, `confirmationRequest`): asks it as
/// [`ask_human`] does for `link`'s session, then waits for the first human answer, which the
/// agent runtime hands to the link's waiter when it sees the item's `inbox.responded` (after
/// recording `RecordAnswersDelivered`). An answer that came before the wait was registered is
/// taken from the fold and its delivery recorded here. `gone` resolving (the agent's socket
/// closed) ends the wait: the runtime then delivers the answer as a message.
/// # Errors
/// As [`ask_human`]: the question could not be asked.
pub async fn ask_and_wait(
    app: &Ctx,
    link: &byre_agents::codeboltjs::Link,
    question: Question,
    gone: impl std::future::Future<Output = ()>,
) -> Result<Waited, Error> {
    let item_id = ask_human(app, &link.session_id, question).await?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    link.questions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(item_id.clone(), tx);
    // An answer (or a newer question) that came before the wait was registered.
    let settled = app.writer.read(|s| {
        s.inbox
            .get(&item_id)
            .and_then(|i| match i.responses.first() {
                Some(r) => Some(Ok(serde_json::to_value(&r.response).unwrap_or_default())),
                None if i.state != InboxState::Open => Some(Err(())),
                None => None,
            })
    });
    if let Some(settled) = settled {
        let mine = link
            .questions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&item_id);
        if mine.is_some() {
            return Ok(match settled {
                Ok(response) => {
                    let response_id = response["id"].as_str().unwrap_or_default().to_owned();
                    let _ = app
                        .submit(Command::RecordAnswersDelivered {
                            session_id: link.session_id.clone().into(),
                            response_ids: vec![response_id],
                        })
                        .await;
                    Waited::Answered(response)
                }
                Err(()) => Waited::NoAnswer("no answer: a newer question replaced this one"),
            });
        }
    }
    tokio::select! {
        answered = rx => Ok(match answered {
            Ok(response) => Waited::Answered(response),
            Err(_) => Waited::NoAnswer(
                "no answer: a newer question replaced this one, or the session ended",
            ),
        }),
        // The socket closed: nobody to hand the answer to (dropping the receiver tells the
        // runtime, which then leaves the answer to be delivered as a message).
        () = gone => Ok(Waited::NoAnswer("the agent disconnected")),
    }
}
