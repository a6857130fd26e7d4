//! Reading a Responses API request body as Codex 0.171 sends it (codex PROTOCOL.md §14) into
//! the API-neutral [`MessagesView`] that step conditions and placeholders use.
//!
//! Codex re-sends the whole history in `input` every time (`store:false`): developer
//! messages, then `role:"user"` messages that are really context wrapped in a tag
//! (`<environment_context>…</environment_context>`, `<turn_aborted>…`, `# AGENTS.md …`), the
//! user's prompts, and the model's items with their tool outputs (`function_call_output`,
//! `custom_tool_call_output`, …). Pure and total: any JSON gives an answer, never a panic.

use serde_json::Value;

use crate::request::MessagesView;

impl MessagesView {
    /// Reads the facts from a Responses API body; `thread_id` is Codex's `thread-id` header.
    ///
    /// "The last user message" is the last `role:"user"` message that is not a context
    /// envelope; its tool results are the `*_output` items after it (so a tool loop's
    /// follow-up requests keep matching the prompt that started it, with
    /// `last_is_tool_result: true`).
    pub(crate) fn from_responses(
        body: &Value,
        thread_id: Option<&str>,
        number: u64,
    ) -> MessagesView {
        let items = input_items(body);
        let prompt_idx = last_prompt_idx(items);
        let after_prompt = prompt_idx.map_or(items, |idx| &items[idx + 1..]);
        let tool_result_texts: Vec<String> = after_prompt
            .iter()
            .filter(|item| is_tool_output(item))
            .map(|item| content_text(item.get("output")))
            .collect();
        MessagesView {
            last_user_text: last_user_text(body),
            last_is_tool_result: !tool_result_texts.is_empty(),
            tool_result_texts,
            all_messages_json: body.get("input").map(Value::to_string).unwrap_or_default(),
            has_tools: body
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| !tools.is_empty()),
            session_id: thread_id.map(str::to_owned),
            cwd: find_cwd(items),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("gpt-fake")
                .to_owned(),
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            number,
        }
    }
}

/// The text of the last user prompt in a Responses body: `input` itself when it is a
/// string, else the last non-envelope `role:"user"` message (empty if none).
pub(crate) fn last_user_text(body: &Value) -> String {
    if let Some(text) = body.get("input").and_then(Value::as_str) {
        return text.to_owned();
    }
    let items = input_items(body);
    last_prompt_idx(items)
        .map(|idx| content_text(items[idx].get("content")))
        .unwrap_or_default()
}

/// `input` as a list of items (empty when it is a string or absent).
fn input_items(body: &Value) -> &[Value] {
    body.get("input")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Index of the last `role:"user"` message whose text is not a context envelope.
fn last_prompt_idx(items: &[Value]) -> Option<usize> {
    items.iter().rposition(|item| {
        is_message_of(item, "user") && !is_context_envelope(&content_text(item.get("content")))
    })
}

/// A `message` item (the `type` may be left out) with this role.
fn is_message_of(item: &Value, role: &str) -> bool {
    item.get("role").and_then(Value::as_str) == Some(role)
        && item
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind == "message")
}

/// `function_call_output`, `custom_tool_call_output`, `tool_search_output`, …
fn is_tool_output(item: &Value) -> bool {
    item.get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.ends_with("_output"))
}

/// A content or output value as text: a string as is; parts joined by newlines, each its
/// `text` (`input_text`, `output_text`) or `[image]` (`input_image`).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("type").and_then(Value::as_str) {
                Some("input_image") => "[image]".to_owned(),
                _ => part
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Context Codex sends as a user message: the whole text is one `<tag …>…</tag>` element,
/// or it starts with `# AGENTS.md`.
fn is_context_envelope(text: &str) -> bool {
    let text = text.trim();
    if text.starts_with("# AGENTS.md") {
        return true;
    }
    let Some(rest) = text.strip_prefix('<') else {
        return false;
    };
    let tag_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(rest.len());
    let tag = &rest[..tag_len];
    let opens = rest[tag_len..].starts_with(|c: char| c == '>' || c.is_whitespace());
    !tag.is_empty() && opens && text.ends_with(&format!("</{tag}>"))
}

/// The `<cwd>…</cwd>` of the latest `<environment_context>` (a user message).
fn find_cwd(items: &[Value]) -> Option<String> {
    items
        .iter()
        .rev()
        .filter(|item| is_message_of(item, "user"))
        .find_map(|item| {
            let text = content_text(item.get("content"));
            let (_, rest) = text.split_once("<cwd>")?;
            let (cwd, _) = rest.split_once("</cwd>")?;
            let cwd = cwd.trim();
            (!cwd.is_empty()).then(|| cwd.to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    /// The second request of a tool loop, shaped like `b_shell.requests.jsonl`.
    fn body() -> Value {
        json!({
            "model": "gpt-5.5",
            "stream": true,
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "tool_search"}],
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
                user("<environment_context>\n  <cwd>/tmp/work dir</cwd>\n  <shell>bash</shell>\n</environment_context>"),
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "Please create the file"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
                {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "call_1"},
                {"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0\nOutput:\n"},
                user("<turn_aborted>\nThe user interrupted.\n</turn_aborted>"),
            ]
        })
    }

    #[test]
    fn the_view_skips_context_envelopes_and_sees_tool_outputs_after_the_prompt() {
        let view = MessagesView::from_responses(&body(), Some("thread-1"), 2);
        assert_eq!(view.last_user_text, "Please create the file\n[image]");
        assert!(view.last_is_tool_result);
        assert_eq!(
            view.tool_result_texts,
            vec!["Process exited with code 0\nOutput:\n"]
        );
        assert_eq!(view.cwd.as_deref(), Some("/tmp/work dir"));
        assert_eq!(view.session_id.as_deref(), Some("thread-1"));
        assert!(view.has_tools && view.stream);
    }

    #[test]
    fn a_new_prompt_hides_the_tool_outputs_of_earlier_turns() {
        let mut body = body();
        body["input"]
            .as_array_mut()
            .unwrap()
            .push(user("second question"));
        let view = MessagesView::from_responses(&body, None, 3);
        assert_eq!(view.last_user_text, "second question");
        assert!(!view.last_is_tool_result && view.tool_result_texts.is_empty());
    }

    #[test]
    fn envelopes_are_whole_tagged_elements() {
        let cases = [
            (
                "<environment_context>\n<cwd>/</cwd>\n</environment_context>",
                true,
            ),
            ("  <turn_aborted>x</turn_aborted>\n", true),
            (
                "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>…</INSTRUCTIONS>",
                true,
            ),
            ("<image name=[Image #1]>\n[image]\n</image>", true),
            ("What is in <b>this</b>?", false),
            ("<b>bold</b> and more", false),
            ("<>", false),
            ("plain", false),
        ];
        for (text, expected) in cases {
            assert_eq!(is_context_envelope(text), expected, "{text:?}");
        }
    }

    #[test]
    fn any_json_gives_an_empty_view() {
        for body in [
            json!(null),
            json!({"input": 5}),
            json!({"input": [1, {"role": "user", "content": 3}]}),
        ] {
            let view = MessagesView::from_responses(&body, None, 1);
            assert!(view.last_user_text.is_empty() && !view.has_tools, "{body}");
        }
        let string_input = MessagesView::from_responses(&json!({"input": "hi"}), None, 1);
        assert_eq!(string_input.last_user_text, "hi");
    }
}
