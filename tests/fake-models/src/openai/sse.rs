//! Turning a scripted reply into what the Responses API sends: the response object of a
//! non-streaming call, or the SSE events of a streaming one, in the real API's order
//! (every event's `data` carries `type` = the event name and a `sequence_number` from 0):
//!
//! ```text
//! event: response.created              {"type":"response.created","sequence_number":0,"response":{…,"status":"in_progress","output":[]}}
//! event: response.in_progress          {… same response …}
//! event: response.output_item.added    {"output_index":0,"item":{"type":"message","id":"msg_…","status":"in_progress","role":"assistant","content":[]}}
//! event: response.content_part.added   {"item_id","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}
//! event: response.output_text.delta    {"item_id","output_index":0,"content_index":0,"delta":"Hel","logprobs":[]}
//! event: response.output_text.done     {… "text":"Hello" …}
//! event: response.content_part.done    {… "part":{"type":"output_text","text":"Hello","annotations":[]}}
//! event: response.output_item.done     {"output_index":0,"item":{… complete item …}}
//! event: response.completed            {"response":{…,"status":"completed","output":[…],"usage":{…}}}
//! ```
//!
//! A `reasoning` item streams `response.reasoning_summary_part.added`,
//! `response.reasoning_summary_text.delta`/`.done`, `response.reasoning_summary_part.done`; a
//! `function_call` streams `response.function_call_arguments.delta`/`.done`; a
//! `custom_tool_call` streams `response.custom_tool_call_input.delta`/`.done`. Codex acts on
//! `response.output_item.done` (the complete item) and needs `response.completed` (codex
//! PROTOCOL.md §14). A stream error ends with `response.failed` instead. Pure: ids and the
//! time are passed in; nothing here sleeps or does I/O.

use serde_json::{json, Map, Value};

use crate::http::{pieces, SseEvent};
use crate::request::MessagesView;
use crate::script::{ApiError, Block, MessageReply};

/// A response made concrete for one request: placeholders filled, ids chosen, usage counted.
#[derive(Debug, Clone)]
pub(crate) struct RenderedResponse {
    /// `resp_…`.
    pub id: String,
    /// The model id, echoed from the request.
    pub model: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The complete output items, in order.
    pub output: Vec<Value>,
    /// `input_tokens`, `input_tokens_details`, `output_tokens`, `output_tokens_details`,
    /// `total_tokens`, with the script's overrides.
    pub usage: Map<String, Value>,
}

/// Fills the reply's placeholders for `request`, chooses ids with `fresh_id(prefix)` and
/// counts usage; `input_tokens_estimate` is the request's size in tokens (4 bytes each).
pub(crate) fn render_response(
    reply: &MessageReply,
    request: &MessagesView,
    input_tokens_estimate: u64,
    (id, created_at): (String, u64),
    mut fresh_id: impl FnMut(&str) -> String,
) -> RenderedResponse {
    let mut reasoning_chars = 0;
    let output: Vec<Value> = reply
        .content
        .iter()
        .map(|block| match block {
            Block::Text { text } => json!({
                "type": "message", "id": fresh_id("msg_"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": request.fill(text), "annotations": [], "logprobs": []}],
            }),
            Block::Thinking {
                thinking,
                signature,
            } => {
                let text = request.fill(thinking);
                reasoning_chars += text.chars().count();
                json!({
                    "type": "reasoning", "id": fresh_id("rs_"),
                    "summary": [{"type": "summary_text", "text": text}],
                    "encrypted_content": signature,
                })
            }
            Block::ToolUse {
                id,
                name,
                input,
                namespace,
            } => {
                let mut item = json!({
                    "type": "function_call", "id": fresh_id("fc_"), "status": "completed",
                    "call_id": id.clone().unwrap_or_else(|| fresh_id("call_")),
                    "name": name, "arguments": request.fill_json(input).to_string(),
                });
                if let Some(namespace) = namespace {
                    item["namespace"] = json!(namespace);
                }
                item
            }
            Block::CustomToolCall { id, name, input } => json!({
                "type": "custom_tool_call", "id": fresh_id("ctc_"), "status": "completed",
                "call_id": id.clone().unwrap_or_else(|| fresh_id("call_")),
                "name": name, "input": request.fill(input),
            }),
        })
        .collect();
    let output_tokens_estimate = (Value::Array(output.clone()).to_string().len() / 4).max(1);
    let mut usage = Map::new();
    usage.insert("input_tokens".into(), input_tokens_estimate.into());
    usage.insert("input_tokens_details".into(), json!({"cached_tokens": 0}));
    usage.insert("output_tokens".into(), output_tokens_estimate.into());
    usage.insert(
        "output_tokens_details".into(),
        json!({"reasoning_tokens": reasoning_chars / 4}),
    );
    usage.extend(reply.usage.clone());
    if !reply.usage.contains_key("total_tokens") {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let total = count("input_tokens") + count("output_tokens");
        usage.insert("total_tokens".into(), total.into());
    }
    RenderedResponse {
        id,
        model: request.model.clone(),
        created_at,
        output,
        usage,
    }
}

/// The response object with this `status`: `in_progress` (no output, usage `null`),
/// `completed` (output and usage), `failed` (`error`, no output).
pub(crate) fn response_json(
    response: &RenderedResponse,
    status: &str,
    error: Option<Value>,
) -> Value {
    let done = status == "completed";
    json!({
        "id": response.id, "object": "response", "created_at": response.created_at,
        "status": status, "model": response.model,
        "output": if done { Value::Array(response.output.clone()) } else { json!([]) },
        "usage": if done { Value::Object(response.usage.clone()) } else { Value::Null },
        "error": error, "incomplete_details": null, "instructions": null, "metadata": {},
        "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
    })
}

/// Events numbered as they are pushed.
struct Events(Vec<SseEvent>);

impl Events {
    fn push(&mut self, name: &'static str, mut data: Value) {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.0.len());
        self.0.push(SseEvent { name, data });
    }
}

/// The events of a streamed reply, split where a stall goes: `(head, tail)`, head being
/// `response.created` and `response.in_progress`; the tail ends in `response.completed`,
/// or in `response.failed` with `failure` (`error: {code, message}`).
pub(crate) fn stream_events(
    response: &RenderedResponse,
    failure: Option<Value>,
) -> (Vec<SseEvent>, Vec<SseEvent>) {
    let mut events = Events(Vec::new());
    let in_progress = json!({"response": response_json(response, "in_progress", None)});
    events.push("response.created", in_progress.clone());
    events.push("response.in_progress", in_progress);
    if let Some(error) = failure {
        let failed = response_json(response, "failed", Some(error));
        events.push("response.failed", json!({"response": failed}));
    } else {
        for (output_index, item) in response.output.iter().enumerate() {
            item_events(&mut events, output_index, item);
        }
        let completed = response_json(response, "completed", None);
        events.push("response.completed", json!({"response": completed}));
    }
    let tail = events.0.split_off(2);
    (events.0, tail)
}

/// `output_item.added`, the item's own deltas, `output_item.done`.
fn item_events(events: &mut Events, output_index: usize, item: &Value) {
    let item_id = &item["id"];
    let at = |mut data: Value| {
        data["item_id"] = item_id.clone();
        data["output_index"] = json!(output_index);
        data
    };
    let mut started = item.clone();
    match item["type"].as_str() {
        Some("message") => {
            let text = item["content"][0]["text"].as_str().unwrap_or_default();
            started["status"] = json!("in_progress");
            started["content"] = json!([]);
            events.push(
                "response.output_item.added",
                json!({"output_index": output_index, "item": started}),
            );
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            events.push(
                "response.content_part.added",
                at(json!({"content_index": 0, "part": part})),
            );
            for delta in pieces(text, true) {
                let data = json!({"content_index": 0, "delta": delta, "logprobs": []});
                events.push("response.output_text.delta", at(data));
            }
            let data = json!({"content_index": 0, "text": text, "logprobs": []});
            events.push("response.output_text.done", at(data));
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            events.push(
                "response.content_part.done",
                at(json!({"content_index": 0, "part": part})),
            );
        }
        Some("reasoning") => {
            let text = item["summary"][0]["text"].as_str().unwrap_or_default();
            started["summary"] = json!([]);
            events.push(
                "response.output_item.added",
                json!({"output_index": output_index, "item": started}),
            );
            let part = json!({"type": "summary_text", "text": ""});
            events.push(
                "response.reasoning_summary_part.added",
                at(json!({"summary_index": 0, "part": part})),
            );
            for delta in pieces(text, true) {
                let data = json!({"summary_index": 0, "delta": delta});
                events.push("response.reasoning_summary_text.delta", at(data));
            }
            events.push(
                "response.reasoning_summary_text.done",
                at(json!({"summary_index": 0, "text": text})),
            );
            let part = json!({"type": "summary_text", "text": text});
            events.push(
                "response.reasoning_summary_part.done",
                at(json!({"summary_index": 0, "part": part})),
            );
        }
        Some(kind @ ("function_call" | "custom_tool_call")) => {
            let (field, delta_name, done_name) = if kind == "function_call" {
                (
                    "arguments",
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                )
            } else {
                (
                    "input",
                    "response.custom_tool_call_input.delta",
                    "response.custom_tool_call_input.done",
                )
            };
            let full = item[field].as_str().unwrap_or_default();
            started["status"] = json!("in_progress");
            started[field] = json!("");
            events.push(
                "response.output_item.added",
                json!({"output_index": output_index, "item": started}),
            );
            for delta in pieces(full, false) {
                events.push(delta_name, at(json!({"delta": delta})));
            }
            let mut done = at(json!({}));
            done[field] = json!(full);
            events.push(done_name, done);
        }
        _ => events.push(
            "response.output_item.added",
            json!({"output_index": output_index, "item": started}),
        ),
    }
    events.push(
        "response.output_item.done",
        json!({"output_index": output_index, "item": item}),
    );
}

/// The API's error body: `{"error":{"message","type","param":null,"code"}}`.
pub(crate) fn error_json(error: &ApiError, message: &str) -> Value {
    json!({"error": {"message": message, "type": error.openai_type(), "param": null, "code": error.openai_code()}})
}

/// The `error` of a `response.failed`: `{"code": <stream_error>, "message"}`.
pub(crate) fn failure_json(error: &ApiError, message: &str) -> Value {
    json!({"code": error.code.as_deref().or(error.error_type.as_deref()), "message": message})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rendered(content: Vec<Block>) -> RenderedResponse {
        let reply = MessageReply {
            content,
            stop_reason: None,
            usage: Map::new(),
            stall_after_start: Duration::ZERO,
            delta_gap: Duration::ZERO,
        };
        let view = MessagesView {
            model: "gpt-5.5".into(),
            cwd: Some("/w".into()),
            ..MessagesView::default()
        };
        let mut n = 0;
        render_response(&reply, &view, 100, ("resp_1".into(), 7), |prefix| {
            n += 1;
            format!("{prefix}{n}")
        })
    }

    #[test]
    fn a_function_call_streams_arguments_that_join_to_the_filled_input() {
        let input = json!({"cmd": "printf 'hi' > {{cwd}}/a.txt && echo a longer command line", "yield_time_ms": 2000});
        let response = rendered(vec![
            Block::Thinking {
                thinking: "Let me run it.".into(),
                signature: None,
            },
            Block::ToolUse {
                id: Some("call_x".into()),
                name: "exec_command".into(),
                input,
                namespace: None,
            },
        ]);
        let (head, tail) = stream_events(&response, None);
        let names: Vec<&str> = head.iter().chain(&tail).map(|event| event.name).collect();
        assert_eq!(
            names[..3],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added"
            ]
        );
        assert_eq!(names.last(), Some(&"response.completed"));
        let numbers: Vec<u64> = head
            .iter()
            .chain(&tail)
            .map(|e| e.data["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..names.len() as u64).collect::<Vec<_>>());
        let joined: String = tail
            .iter()
            .filter(|event| event.name == "response.function_call_arguments.delta")
            .map(|event| event.data["delta"].as_str().unwrap().to_owned())
            .collect();
        let arguments: Value = serde_json::from_str(&joined).unwrap();
        assert_eq!(
            arguments["cmd"],
            "printf 'hi' > /w/a.txt && echo a longer command line"
        );
        let done = tail
            .iter()
            .rfind(|e| e.name == "response.output_item.done")
            .unwrap();
        assert_eq!(done.data["item"]["call_id"], "call_x");
        assert_eq!(done.data["item"]["status"], "completed");
        let completed = &tail.last().unwrap().data["response"];
        assert_eq!(completed["output"].as_array().unwrap().len(), 2);
        assert_eq!(
            completed["usage"]["output_tokens_details"]["reasoning_tokens"],
            3
        );
    }

    #[test]
    fn a_message_streams_text_deltas_and_usage_overrides_keep_the_total_consistent() {
        let mut response = rendered(vec![Block::Text {
            text: "Hello from the fake Responses API.".into(),
        }]);
        let (_, tail) = stream_events(&response, None);
        let text: String = tail
            .iter()
            .filter(|event| event.name == "response.output_text.delta")
            .map(|event| event.data["delta"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "Hello from the fake Responses API.");
        assert_eq!(tail[0].data["item"]["content"], json!([]));
        let reply = MessageReply {
            content: Vec::new(),
            stop_reason: None,
            usage: json!({"input_tokens": 1200, "output_tokens": 35})
                .as_object()
                .unwrap()
                .clone(),
            stall_after_start: Duration::ZERO,
            delta_gap: Duration::ZERO,
        };
        response = render_response(&reply, &MessagesView::default(), 9, ("r".into(), 0), |p| {
            p.into()
        });
        assert_eq!(response.usage["total_tokens"], 1235);
    }

    #[test]
    fn a_failure_ends_the_stream_with_response_failed_and_no_output() {
        let response = rendered(vec![Block::Text {
            text: "lost".into(),
        }]);
        let (head, tail) = stream_events(
            &response,
            Some(json!({"code": "server_error", "message": "boom"})),
        );
        assert_eq!(head.len(), 2);
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0].name, "response.failed");
        assert_eq!(tail[0].data["response"]["error"]["message"], "boom");
        assert_eq!(tail[0].data["response"]["output"], json!([]));
    }
}
