//! What a fake received: [`RecordedRequest`] for tests, and [`MessagesView`], the facts of
//! one model call that step conditions and placeholders look at. This file reads Messages
//! API bodies (`messages`); `openai/view.rs` reads Responses API bodies (`input`).
//!
//! Everything here is pure and total: any JSON (or none) gives an answer, never a panic.

use serde_json::Value;

/// One HTTP request as the fake received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `GET`, `HEAD`, `POST`, …
    pub method: String,
    /// Path and query as sent, e.g. `/v1/messages?beta=true`, `/v1/responses`.
    pub path: String,
    /// Headers in the order received; names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; None when empty or not JSON (see `body_len_bytes`).
    pub body: Option<Value>,
    /// Length of the raw body.
    pub body_len_bytes: usize,
    /// For a model call (`POST /v1/messages`, `POST /v1/responses`): its number and which
    /// step answered.
    pub messages: Option<MessagesCall>,
    /// A streamed reply whose connection the client dropped before its last event
    /// (`message_stop`, `response.completed`), e.g. the CLI after an interrupt. Only ever
    /// set for streamed replies.
    pub abandoned_by_client: bool,
}

/// How the fake handled one model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagesCall {
    /// 1-based count of model calls so far (the `{{n}}` placeholder).
    pub number: u64,
    /// Index of the step that answered; None for the script's `default`.
    pub step: Option<usize>,
    /// The working directory the CLI told the model (the `{{cwd}}` placeholder): Claude
    /// Code's system prompt, Codex's `<environment_context>`.
    pub cwd: Option<String>,
}

impl RecordedRequest {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The `X-Claude-Code-Session-Id` header (the CLI's session id, claude-code PROTOCOL.md §7).
    pub fn session_id(&self) -> Option<&str> {
        self.header("x-claude-code-session-id")
    }

    /// Codex's `thread-id` header: the app-server thread id (codex PROTOCOL.md §14).
    pub fn thread_id(&self) -> Option<&str> {
        self.header("thread-id")
    }

    /// Whether this is a model call (`POST /v1/messages` or `POST /v1/responses`, any query).
    pub fn is_model_call(&self) -> bool {
        self.messages.is_some()
    }

    /// As [`RecordedRequest::is_model_call`] (the name from before the OpenAI fake).
    pub fn is_messages(&self) -> bool {
        self.is_model_call()
    }

    /// The text of the last user message, if a model call: text blocks and tool results
    /// (Messages API); `input_text` parts of the last `role:"user"` message that is not one of
    /// Codex's context envelopes like `<environment_context>` (Responses API). Images read
    /// as `[image]`.
    pub fn last_user_text(&self) -> Option<String> {
        let body = self.body.as_ref()?;
        if body.get("input").is_some() {
            return Some(crate::openai::last_user_text(body));
        }
        last_user_message(body).map(message_text)
    }

    /// Every image the request's messages carry, as sent: `image` blocks (tool results
    /// included) of the Messages API, `input_image` parts (tool outputs included) of the
    /// Responses API.
    pub fn image_blocks(&self) -> Vec<&Value> {
        let mut found = Vec::new();
        if let Some(body) = self.body.as_ref() {
            for key in ["messages", "input"] {
                if let Some(items) = body.get(key) {
                    collect_images(items, &mut found);
                }
            }
        }
        found
    }

    /// The names of the tools the request offers: `tools[].name`, or `tools[].type` for a
    /// Responses built-in tool without a name (`tool_search`, `web_search`).
    pub fn tool_names(&self) -> Vec<&str> {
        let tools = self
            .body
            .as_ref()
            .and_then(|body| body.get("tools"))
            .and_then(Value::as_array);
        tools
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                tool.get("name")
                    .and_then(Value::as_str)
                    .or_else(|| tool.get("type").and_then(Value::as_str))
            })
            .collect()
    }
}

fn collect_images<'a>(value: &'a Value, found: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| collect_images(item, found)),
        Value::Object(map) => match map.get("type").and_then(Value::as_str) {
            Some("image" | "input_image") => found.push(value),
            _ => {
                for key in ["content", "output"] {
                    if let Some(inner) = map.get(key) {
                        collect_images(inner, found);
                    }
                }
            }
        },
        _ => {}
    }
}

/// The facts of one model call that conditions and placeholders use, whichever API it came
/// in (`MessagesView::new` here, `MessagesView::from_responses` in `openai/view.rs`).
#[derive(Debug, Clone, Default)]
pub(crate) struct MessagesView {
    /// Text of the last `role:"user"` message (Responses: skipping context envelopes).
    pub last_user_text: String,
    /// Whether that message has a `tool_result` block (Responses: tool outputs follow it).
    pub last_is_tool_result: bool,
    /// The text of each of those tool results / outputs.
    pub tool_result_texts: Vec<String>,
    /// All messages (Responses: all `input` items) as compact JSON (for `match_any`).
    pub all_messages_json: String,
    /// Whether the request offers any tool.
    pub has_tools: bool,
    /// The session header: `X-Claude-Code-Session-Id`, or Codex's `thread-id`.
    pub session_id: Option<String>,
    /// The working directory the CLI told the model.
    pub cwd: Option<String>,
    /// The requested model id.
    pub model: String,
    /// Whether the client asked for SSE (`stream: true`).
    pub stream: bool,
    /// 1-based number of this model call.
    pub number: u64,
}

impl MessagesView {
    /// Reads the facts from a Messages API body (any JSON; missing parts read as empty).
    pub fn new(body: &Value, session_id: Option<&str>, number: u64) -> MessagesView {
        let last_user = last_user_message(body);
        let tool_result_texts: Vec<String> = last_user
            .and_then(|message| message.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(block_text)
            .collect();
        MessagesView {
            last_user_text: last_user.map(message_text).unwrap_or_default(),
            last_is_tool_result: !tool_result_texts.is_empty(),
            tool_result_texts,
            all_messages_json: body
                .get("messages")
                .map(Value::to_string)
                .unwrap_or_default(),
            has_tools: body
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| !tools.is_empty()),
            session_id: session_id.map(str::to_owned),
            cwd: find_cwd(body),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("claude-fake")
                .to_owned(),
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            number,
        }
    }

    /// Replaces `{{cwd}}`, `{{last_user}}` and `{{n}}` in `text`. An unknown cwd leaves
    /// `{{cwd}}` as it is (a tool call then fails visibly instead of writing elsewhere).
    pub fn fill(&self, text: &str) -> String {
        let mut filled = text
            .replace("{{last_user}}", &self.last_user_text)
            .replace("{{n}}", &self.number.to_string());
        if let Some(cwd) = &self.cwd {
            filled = filled.replace("{{cwd}}", cwd);
        }
        filled
    }

    /// [`MessagesView::fill`] applied to every string inside a JSON value.
    pub fn fill_json(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.fill(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| self.fill_json(item)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, item)| (key.clone(), self.fill_json(item)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The last message with `role:"user"` (mid-conversation `role:"system"` entries skipped).
pub(crate) fn last_user_message(body: &Value) -> Option<&Value> {
    body.get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
}

/// A message's text: a string content as is, else its blocks' texts joined by newlines.
pub(crate) fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks.iter().map(block_text).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// One block's text: `text` blocks, tool results (string or nested blocks), `[image]`.
fn block_text(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Some("tool_result") => match block.get("content") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(inner)) => {
                inner.iter().map(block_text).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        },
        Some("image") => "[image]".to_owned(),
        _ => block.as_str().unwrap_or_default().to_owned(),
    }
}

/// The system prompt as text (a string, or the `text` of each block).
fn system_text(body: &Value) -> String {
    match body.get("system") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The rest of the line after `Primary working directory:` in the system prompt (or, when
/// the dynamic sections moved there, the first message), trimmed (PROTOCOL.md §9).
fn find_cwd(body: &Value) -> Option<String> {
    let first_message = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|messages| messages.first())
        .map(message_text)
        .unwrap_or_default();
    [system_text(body), first_message].iter().find_map(|text| {
        text.lines().find_map(|line| {
            let (_, rest) = line.split_once("Primary working directory:")?;
            let cwd = rest.trim();
            (!cwd.is_empty()).then(|| cwd.to_owned())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({
            "model": "claude-sonnet-4-5",
            "stream": true,
            "system": [{"type": "text", "text": "billing"}, {"type": "text", "text": "env\n - Primary working directory: /tmp/work dir\n - Is git: no"}],
            "tools": [{"name": "Write"}, {"name": "Bash"}],
            "messages": [
                {"role": "user", "content": "Please create hello.txt"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "File created successfully at: /tmp/work dir/hello.txt"},
                    {"type": "text", "text": "and now?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
                ]},
                {"role": "system", "content": "a mid-conversation system message"}
            ]
        })
    }

    #[test]
    fn the_view_reads_the_last_user_message_and_tool_results() {
        let view = MessagesView::new(&body(), Some("s-1"), 3);
        assert!(view.last_is_tool_result);
        assert_eq!(
            view.tool_result_texts,
            vec!["File created successfully at: /tmp/work dir/hello.txt"]
        );
        assert!(
            view.last_user_text.contains("and now?") && view.last_user_text.contains("[image]")
        );
        assert!(view.has_tools && view.stream);
        assert_eq!(view.cwd.as_deref(), Some("/tmp/work dir"));
    }

    #[test]
    fn placeholders_are_filled_in_every_string() {
        let view = MessagesView::new(&body(), None, 7);
        let filled = view.fill_json(&json!({"file_path": "{{cwd}}/a.txt", "list": ["#{{n}}"]}));
        assert_eq!(
            filled,
            json!({"file_path": "/tmp/work dir/a.txt", "list": ["#7"]})
        );
        let without_cwd = MessagesView::new(&json!({}), None, 1);
        assert_eq!(without_cwd.fill("{{cwd}}/x"), "{{cwd}}/x");
    }

    #[test]
    fn any_json_gives_an_empty_view() {
        for body in [
            json!(null),
            json!([1, 2]),
            json!({"messages": "no"}),
            json!({"messages": [{"content": 5}]}),
        ] {
            let view = MessagesView::new(&body, None, 1);
            assert!(
                !view.has_tools && !view.last_is_tool_result && view.last_user_text.is_empty(),
                "{body}"
            );
        }
    }

    #[test]
    fn recorded_requests_expose_images_and_tools() {
        let recorded = RecordedRequest {
            method: "POST".into(),
            path: "/v1/messages?beta=true".into(),
            headers: vec![("x-claude-code-session-id".into(), "s-1".into())],
            body: Some(body()),
            body_len_bytes: 0,
            messages: None,
            abandoned_by_client: false,
        };
        assert_eq!(recorded.session_id(), Some("s-1"));
        assert_eq!(recorded.image_blocks().len(), 1);
        assert_eq!(recorded.tool_names(), vec!["Write", "Bash"]);
    }
}
