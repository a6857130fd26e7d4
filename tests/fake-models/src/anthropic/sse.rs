//! Turning a scripted reply into what the Messages API sends: the JSON message of a
//! non-streaming call, or the SSE events of a streaming one, in the real API's order:
//!
//! ```text
//! event: message_start        {"type":"message_start","message":{…,"content":[],"usage":{…}}}
//! event: ping                 {"type":"ping"}
//! event: content_block_start  {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
//! event: content_block_delta  {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}
//! event: content_block_stop   {"type":"content_block_stop","index":0}
//! event: message_delta        {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}
//! event: message_stop         {"type":"message_stop"}
//! ```
//!
//! Thinking blocks stream `thinking_delta`s then one `signature_delta`; tool-use blocks start
//! with `"input":{}` and stream the input as `input_json_delta` fragments (the first one
//! empty). Pure: ids are passed in, nothing here sleeps or does I/O.

use serde_json::{json, Map, Value};

use crate::http::{pieces, SseEvent};
use crate::request::MessagesView;
use crate::script::{ApiError, Block, MessageReply};

/// An assistant message made concrete for one request: placeholders filled, ids chosen,
/// usage counted.
#[derive(Debug, Clone)]
pub(crate) struct RenderedMessage {
    /// `msg_…` id.
    pub id: String,
    /// The model id, echoed from the request.
    pub model: String,
    /// Content blocks as the API shows them in a complete message.
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use`, … .
    pub stop_reason: String,
    /// `input_tokens`, `output_tokens`, `cache_*_input_tokens` and the script's overrides.
    pub usage: Map<String, Value>,
}

/// Fills the reply's placeholders for `request` and counts usage. `input_tokens_estimate`
/// is the request's size in tokens (about 4 bytes each), so the CLI's costs look plausible.
pub(crate) fn render_message(
    reply: &MessageReply,
    request: &MessagesView,
    input_tokens_estimate: u64,
    message_id: String,
    mut tool_use_id: impl FnMut() -> String,
) -> RenderedMessage {
    let content: Vec<Value> = reply
        .content
        .iter()
        .map(|block| match block {
            Block::Text { text } => json!({"type": "text", "text": request.fill(text)}),
            Block::Thinking {
                thinking,
                signature,
            } => json!({
                "type": "thinking",
                "thinking": request.fill(thinking),
                "signature": signature.clone().unwrap_or_else(|| "fake-signature".to_owned()),
            }),
            Block::ToolUse {
                id, name, input, ..
            } => json!({
                "type": "tool_use",
                "id": id.clone().unwrap_or_else(&mut tool_use_id),
                "name": name,
                "input": request.fill_json(input),
            }),
            // Rejected when the fake starts (`AnthropicMessages::check`); the nearest shape.
            Block::CustomToolCall { id, name, input } => json!({
                "type": "tool_use",
                "id": id.clone().unwrap_or_else(&mut tool_use_id),
                "name": name,
                "input": {"input": request.fill(input)},
            }),
        })
        .collect();
    let stop_reason = reply.stop_reason.clone().unwrap_or_else(|| {
        let any_tool_use = content.iter().any(|block| block["type"] == "tool_use");
        if any_tool_use { "tool_use" } else { "end_turn" }.to_owned()
    });
    let output_tokens_estimate =
        (Value::Array(content.clone()).to_string().len() / 4).max(1) as u64;
    let mut usage = Map::new();
    usage.insert("input_tokens".into(), input_tokens_estimate.into());
    usage.insert("cache_creation_input_tokens".into(), 0.into());
    usage.insert("cache_read_input_tokens".into(), 0.into());
    usage.insert("output_tokens".into(), output_tokens_estimate.into());
    usage.extend(reply.usage.clone());
    RenderedMessage {
        id: message_id,
        model: request.model.clone(),
        content,
        stop_reason,
        usage,
    }
}

/// The body of a non-streaming reply.
pub(crate) fn message_json(message: &RenderedMessage) -> Value {
    json!({
        "id": message.id,
        "type": "message",
        "role": "assistant",
        "model": message.model,
        "content": message.content,
        "stop_reason": message.stop_reason,
        "stop_sequence": null,
        "usage": message.usage,
    })
}

/// `message_start`: the message with no content, `output_tokens` 1 (as the real API).
pub(crate) fn message_start(message: &RenderedMessage) -> SseEvent {
    let mut usage = message.usage.clone();
    usage.insert("output_tokens".into(), 1.into());
    let data = json!({"type": "message_start", "message": {
        "id": message.id, "type": "message", "role": "assistant", "model": message.model,
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
    }});
    SseEvent {
        name: "message_start",
        data,
    }
}

/// The `message_start` of a reply that fails mid-stream (a `stream_error`).
pub(crate) fn bare_message_start(id: &str, model: &str) -> SseEvent {
    let data = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }});
    SseEvent {
        name: "message_start",
        data,
    }
}

/// `ping`.
pub(crate) fn ping() -> SseEvent {
    SseEvent {
        name: "ping",
        data: json!({"type": "ping"}),
    }
}

/// Everything after `message_start` and the first `ping`: each block's start, deltas and
/// stop, then `message_delta` and `message_stop`.
pub(crate) fn content_events(message: &RenderedMessage) -> Vec<SseEvent> {
    let mut events = Vec::new();
    for (index, block) in message.content.iter().enumerate() {
        let (start_block, deltas) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                pieces(block["text"].as_str().unwrap_or_default(), true)
                    .map(|text| json!({"type": "text_delta", "text": text}))
                    .collect::<Vec<_>>(),
            ),
            Some("thinking") => {
                let thinking = block["thinking"].as_str().unwrap_or_default();
                let mut deltas: Vec<Value> = pieces(thinking, true)
                    .map(|text| json!({"type": "thinking_delta", "thinking": text}))
                    .collect();
                deltas.push(json!({"type": "signature_delta", "signature": block["signature"]}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                )
            }
            Some("tool_use") => {
                let input = block["input"].to_string();
                let deltas = std::iter::once(String::new())
                    .chain(pieces(&input, false))
                    .map(|part| json!({"type": "input_json_delta", "partial_json": part}))
                    .collect();
                (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    deltas,
                )
            }
            _ => (block.clone(), Vec::new()),
        };
        events.push(SseEvent {
            name: "content_block_start",
            data: json!({"type": "content_block_start", "index": index, "content_block": start_block}),
        });
        for delta in deltas {
            events.push(SseEvent {
                name: "content_block_delta",
                data: json!({"type": "content_block_delta", "index": index, "delta": delta}),
            });
        }
        events.push(SseEvent {
            name: "content_block_stop",
            data: json!({"type": "content_block_stop", "index": index}),
        });
    }
    events.push(SseEvent {
        name: "message_delta",
        data: json!({"type": "message_delta",
            "delta": {"stop_reason": message.stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": message.usage.get("output_tokens").cloned().unwrap_or(1.into())}}),
    });
    events.push(SseEvent {
        name: "message_stop",
        data: json!({"type": "message_stop"}),
    });
    events
}

/// The API's error body: `{"type":"error","error":{"type":…,"message":…},"request_id":…}`.
pub(crate) fn error_json(error: &ApiError, message: &str, request_id: &str) -> Value {
    json!({"type": "error", "error": {"type": error.anthropic_type(), "message": message}, "request_id": request_id})
}

/// The SSE `error` event of a `stream_error` reply.
pub(crate) fn error_event(error: &ApiError, message: &str, request_id: &str) -> SseEvent {
    SseEvent {
        name: "error",
        data: error_json(error, message, request_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;

    fn rendered(content: Vec<Block>) -> RenderedMessage {
        let reply = MessageReply {
            content,
            stop_reason: None,
            usage: Map::new(),
            stall_after_start: Duration::ZERO,
            delta_gap: Duration::ZERO,
        };
        let view = MessagesView {
            model: "claude-sonnet-4-5".into(),
            cwd: Some("/w".into()),
            ..MessagesView::default()
        };
        render_message(&reply, &view, 100, "msg_1".into(), || "toolu_1".into())
    }

    #[test]
    fn a_tool_use_streams_its_input_as_json_fragments_that_join_to_the_input() {
        let input = json!({"file_path": "{{cwd}}/hello.txt", "content": "héllo wörld, a longer line of text\n"});
        let message = rendered(vec![
            Block::Text {
                text: "I'll write it.".into(),
            },
            Block::ToolUse {
                id: None,
                name: "Write".into(),
                input,
                namespace: None,
            },
        ]);
        assert_eq!(message.stop_reason, "tool_use");
        let events = content_events(&message);
        let names: Vec<&str> = events.iter().map(|event| event.name).collect();
        assert_eq!(
            names[..3],
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop"
            ]
        );
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        let joined: String = events
            .iter()
            .filter(|event| {
                event.data["index"] == 1 && event.data["delta"]["type"] == "input_json_delta"
            })
            .map(|event| {
                event.data["delta"]["partial_json"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let parsed: Value = serde_json::from_str(&joined).unwrap();
        assert_eq!(parsed["file_path"], "/w/hello.txt");
        assert_eq!(
            events[3].data["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}})
        );
        assert_eq!(
            events.last().unwrap().to_bytes(),
            Bytes::from("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
        );
    }

    #[test]
    fn thinking_ends_with_its_signature_and_usage_can_be_overridden() {
        let mut message = rendered(vec![Block::Thinking {
            thinking: "hmm".into(),
            signature: None,
        }]);
        let events = content_events(&message);
        assert_eq!(
            events[2].data["delta"],
            json!({"type": "signature_delta", "signature": "fake-signature"})
        );
        assert_eq!(message.stop_reason, "end_turn");
        message.usage.insert("output_tokens".into(), 42.into());
        assert_eq!(
            message_start(&message).data["message"]["usage"]["output_tokens"],
            1
        );
        assert_eq!(
            content_events(&message).last().unwrap().name,
            "message_stop"
        );
        assert_eq!(message_json(&message)["usage"]["input_tokens"], 100);
    }
}
