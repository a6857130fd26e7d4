//! `codex app-server`'s JSON-RPC lines, read one at a time (codex PROTOCOL.md §3–§12). Pure
//! and total: any line, even not JSON, gives an answer and never a panic. The state that
//! ties lines together (ids, the thread, the running turn) lives in `protocol.rs`.
//!
//! # Format
//!
//! One JSON object per line, no `"jsonrpc"` member. Classified by shape, because the server
//! numbers its own requests from 0 too, so ids collide with ours:
//!
//! ```text
//! {"id": 0, "method": "item/commandExecution/requestApproval", "params": {…}}  a request to us
//! {"method": "item/completed", "params": {…}, "emittedAtMs": 1795994043555}   a notification
//! {"id": 2, "result": {"turn": {…}}}    or    {"id": 3, "error": {"code", "message"}}  an answer
//! ```

use byre_projections::sessions::{
    AgentText, ApiRetry, ToolCall, ToolResult, Usage, Vendor, VendorItem, VendorUnrecognized,
};
use serde_json::{json, Value};

/// The longest part of an unrecognised line kept in the log, in bytes.
pub const RAW_CUT_BYTES: usize = 4096;

/// One line of the app-server's stdout, by shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The server asks us something and waits for an answer with the same `id`.
    Request {
        /// Its id, as sent (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// The answer to one of our requests: its `result`, or its `error`'s message.
    Response {
        /// Our request's id, when it is a number (ours always are).
        id: Option<u64>,
        /// `result`, or `error.message`.
        outcome: Result<Value, String>,
    },
    /// Not a protocol message.
    Invalid(VendorItem),
}

/// Every notification method of `codex app-server` 0.171.0 (`schema/json/ServerNotification.json`,
/// the same with `experimentalApi`): a method not here is unrecognised.
#[rustfmt::skip]
pub const NOTIFICATIONS: [&str; 87] = [
    "error", "thread/started", "thread/status/changed", "thread/readState/changed",
    "thread/archived", "thread/deleted", "thread/unarchived", "thread/closed", "thread/reverted",
    "skills/changed", "thread/name/updated", "thread/section/changed",
    "thread/attachment/updated", "thread/goal/updated", "thread/prediction/updated",
    "thread/goal/cleared", "thread/queue/changed", "project/changed", "thread/project/updated",
    "thread/environment/connected", "thread/environment/disconnected", "thread/settings/updated",
    "thread/tokenUsage/updated", "turn/started", "hook/started", "turn/completed",
    "hook/completed", "turn/diff/updated", "turn/plan/updated", "item/started",
    "item/autoApprovalReview/started", "item/autoApprovalReview/completed",
    "autoApprovalReview/strictReviewRequired", "item/completed", "item/agentMessage/delta",
    "item/plan/delta", "command/exec/outputDelta", "process/outputDelta", "thread/search/partial",
    "process/exited", "item/commandExecution/outputDelta",
    "item/commandExecution/terminalInteraction", "item/fileChange/outputDelta",
    "item/fileChange/patchUpdated", "serverRequest/resolved", "item/mcpToolCall/progress",
    "mcpServer/oauthLogin/completed", "mcpServer/startupStatus/updated",
    "mcpServer/event/stream/notification", "account/updated", "account/gatewayOAuth/changed",
    "account/rateLimits/updated", "app/list/updated", "remoteControl/status/changed",
    "externalAgentConfig/import/progress", "externalAgentConfig/import/completed", "fs/changed",
    "item/reasoning/summaryTextDelta", "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "thread/compacted", "model/rerouted", "model/verification",
    "modelProvider/authRecoveryStarted", "modelProvider/authRecoveryCompleted",
    "turn/moderationMetadata", "model/safetyBuffering/updated", "warning", "guardianWarning",
    "deprecationNotice", "configWarning", "fuzzyFileSearch/sessionUpdated",
    "fuzzyFileSearch/sessionCompleted", "thread/realtime/started", "thread/realtime/itemAdded",
    "thread/realtime/item/started", "thread/realtime/item/transcript/delta",
    "thread/realtime/item/completed", "thread/realtime/transcript/delta",
    "thread/realtime/transcript/done", "thread/realtime/outputAudio/delta",
    "thread/realtime/sdp", "thread/realtime/error", "thread/realtime/closed",
    "windows/worldWritableWarning", "windowsSandbox/setupCompleted", "account/login/completed",
];

/// Item types that are not tool calls or agent text, so byre records nothing for them
/// (the user's own message, reasoning, plans, compaction markers, …).
#[rustfmt::skip]
const QUIET_ITEMS: [&str; 13] = [
    "userMessage", "hookPrompt", "reasoning", "plan", "functionCallOutput", "contextCompaction",
    "enteredReviewMode", "exitedReviewMode", "subAgentActivity", "collabAgentToolCall",
    "webSearch", "imageView", "sleep",
];

/// A [`VendorItem::Unrecognized`] for `line`.
pub fn unrecognized(line: &str, reason: impl Into<String>) -> VendorItem {
    VendorItem::Unrecognized(VendorUnrecognized {
        vendor: Vendor::Codex,
        reason: reason.into(),
        raw: byre_projections::sessions::cut_bytes(line, RAW_CUT_BYTES).to_owned(),
        size: line.len() as u64,
    })
}

/// Sorts one stdout line by shape (module docs).
pub fn classify(line: &str) -> Incoming {
    let v: Value = match serde_json::from_str(line) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Incoming::Invalid(unrecognized(line, "not a JSON object")),
        Err(e) => return Incoming::Invalid(unrecognized(line, format!("not JSON: {e}"))),
    };
    let params = v.get("params").cloned().unwrap_or(Value::Null);
    match (v.get("id"), v.get("method").and_then(Value::as_str)) {
        (Some(id), Some(method)) => Incoming::Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        },
        (None, Some(method)) => Incoming::Notification {
            method: method.to_owned(),
            params,
        },
        (Some(id), None) if v.get("result").is_some() || v.get("error").is_some() => {
            let outcome = match v.get("error") {
                Some(e) if !e.is_null() => Err(e
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| e.to_string(), str::to_owned)),
                _ => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
            };
            Incoming::Response {
                id: id.as_u64(),
                outcome,
            }
        }
        _ => Incoming::Invalid(unrecognized(
            line,
            "neither a request, a notification nor a response",
        )),
    }
}

/// A request line: `{"id", "method", "params"}`.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({"id": id, "method": method, "params": params}).to_string()
}

/// The answer refusing a server request, so the server never waits on byre (codex
/// PROTOCOL.md §8): approvals are declined, questions get no answers, anything else gets a
/// JSON-RPC error. byre runs Codex with `approval_policy = "never"`, so none are expected.
pub fn refusal(id: &Value, method: &str) -> String {
    let result = match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            json!({"decision": "decline"})
        }
        "execCommandApproval" | "applyPatchApproval" => {
            json!({"decision": {"denied": {"rejection": "byre runs Codex without approvals"}}})
        }
        "mcpServer/elicitation/request" => {
            json!({"action": "decline", "content": null, "_meta": null})
        }
        "item/tool/requestUserInput" => json!({"answers": {}}),
        "item/tool/call" => {
            json!({"contentItems": [{"type": "inputText", "text": "byre offers no dynamic tools"}], "success": false})
        }
        _ => {
            let message = format!("byre does not answer `{method}` requests");
            return json!({"id": id, "error": {"code": -32601, "message": message}}).to_string();
        }
    };
    json!({"id": id, "result": result}).to_string()
}

pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Whether an item type is one byre shows as a tool call.
pub fn is_tool(kind: &str) -> bool {
    matches!(
        kind,
        "commandExecution" | "fileChange" | "mcpToolCall" | "dynamicToolCall"
    )
}

/// The `tool.call` of a tool item (`item/started`, or `item/completed` for one never seen
/// starting): `shell` `{command, cwd}` for a command, `apply_patch` `{changes}` for a file
/// change, `mcp__<server>__<tool>` (Claude Code's naming) with its arguments for an MCP
/// call, the tool's name for a dynamic tool call. `None` for other items.
pub fn tool_call(item: &Value, raw: &str) -> Option<VendorItem> {
    let (name, input) = match str_of(item, "type") {
        "commandExecution" => (
            "shell".to_owned(),
            json!({"command": item.get("command"), "cwd": item.get("cwd")}),
        ),
        "fileChange" => (
            "apply_patch".to_owned(),
            json!({"changes": item.get("changes")}),
        ),
        "mcpToolCall" => (
            format!("mcp__{}__{}", str_of(item, "server"), str_of(item, "tool")),
            item.get("arguments").cloned().unwrap_or(Value::Null),
        ),
        "dynamicToolCall" => (
            str_of(item, "tool").to_owned(),
            item.get("arguments").cloned().unwrap_or(Value::Null),
        ),
        _ => return None,
    };
    Some(VendorItem::ToolCall(ToolCall {
        cut: None,
        tool_use_id: str_of(item, "id").to_owned(),
        name,
        input,
        raw: raw.to_owned(),
    }))
}

/// What a completed item means: `agent.text` for an agent message, `tool.result` for a
/// tool item, nothing for the quiet ones (`QUIET_ITEMS`), unrecognised for a type byre does
/// not know.
pub fn item_completed(item: &Value, raw: &str) -> Option<VendorItem> {
    let id = str_of(item, "id").to_owned();
    let status = str_of(item, "status");
    let (output, is_error) = match str_of(item, "type") {
        "agentMessage" => {
            return Some(VendorItem::Text(AgentText {
                cut: None,
                text: str_of(item, "text").to_owned(),
                message_id: id,
                raw: raw.to_owned(),
            }))
        }
        "commandExecution" => {
            let exit = item.get("exitCode").and_then(Value::as_i64);
            let failed = exit.map_or(status != "completed", |c| c != 0);
            (str_of(item, "aggregatedOutput").to_owned(), failed)
        }
        "fileChange" => {
            let changes = item.get("changes").and_then(Value::as_array);
            let lines: Vec<String> = changes
                .into_iter()
                .flatten()
                .map(|c| {
                    let kind = c.get("kind").map_or("", |k| str_of(k, "type"));
                    format!("{kind} {}", str_of(c, "path"))
                })
                .collect();
            (
                format!("{status}\n{}", lines.join("\n")),
                status != "completed",
            )
        }
        "mcpToolCall" => {
            let error = item.get("error").filter(|e| !e.is_null());
            let result = item.get("result").unwrap_or(&Value::Null);
            let text = match error {
                Some(e) => str_of(e, "message").to_owned(),
                None => content_text(result.get("content").unwrap_or(&Value::Null)),
            };
            let is_error = error.is_some()
                || status == "failed"
                || result.get("isError").and_then(Value::as_bool) == Some(true);
            (text, is_error)
        }
        "dynamicToolCall" => (
            content_text(item.get("contentItems").unwrap_or(&Value::Null)),
            item.get("success").and_then(Value::as_bool) != Some(true),
        ),
        kind if QUIET_ITEMS.contains(&kind) => return None,
        other => return Some(unrecognized(raw, format!("unknown item type `{other}`"))),
    };
    Some(VendorItem::ToolResult(ToolResult {
        cut: None,
        tool_use_id: id,
        output,
        is_error,
        raw: raw.to_owned(),
    }))
}

/// Content blocks as text: text blocks (`text`, `inputText`) joined by newlines, others named.
fn content_text(c: &Value) -> String {
    match c {
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match str_of(b, "type") {
                "text" | "inputText" => str_of(b, "text").to_owned(),
                other => format!("[{other}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The HTTP status behind a Codex error (`TurnError`): the `httpStatusCode` of its
/// `codexErrorInfo` variant, or 429 for `usageLimitExceeded` / `rateLimitExceeded`.
pub fn error_status(error: &Value) -> Option<u16> {
    let info = error.get("codexErrorInfo").unwrap_or(&Value::Null);
    match info {
        Value::String(s) if s == "usageLimitExceeded" || s == "rateLimitExceeded" => Some(429),
        Value::Object(map) => map
            .values()
            .find_map(|v| v.get("httpStatusCode").and_then(Value::as_u64))
            .and_then(|s| u16::try_from(s).ok()),
        _ => None,
    }
}

/// The class of a Codex error: its `codexErrorInfo` variant's name (`internalServerError`,
/// `responseStreamDisconnected`, …), `other` when none.
pub fn error_class(error: &Value) -> String {
    match error.get("codexErrorInfo").unwrap_or(&Value::Null) {
        Value::String(s) => s.clone(),
        Value::Object(map) => map.keys().next().cloned().unwrap_or_else(|| "other".into()),
        _ => "other".into(),
    }
}

/// An error's text for the user: its message, and its details when they add something.
pub fn error_text(error: &Value) -> String {
    let message = str_of(error, "message");
    match error.get("additionalDetails").and_then(Value::as_str) {
        Some(d) if !d.is_empty() && !message.contains(d) => format!("{message} ({d})"),
        _ => message.to_owned(),
    }
}

/// An `error` notification with `willRetry: true` as an `agent.api_retry`: the attempt and
/// limit from its message `Reconnecting... n/N`, the status from its `codexErrorInfo`
/// (`null` for a 5xx: Codex drops it), no delay (Codex does not say).
pub fn api_retry(params: &Value, raw: &str) -> ApiRetry {
    let error = params.get("error").unwrap_or(&Value::Null);
    let (attempt, max_retries) = str_of(error, "message")
        .rsplit(' ')
        .next()
        .and_then(|n| n.split_once('/'))
        .map_or((0, 0), |(a, m)| {
            (a.parse().unwrap_or(0), m.parse().unwrap_or(0))
        });
    ApiRetry {
        attempt,
        max_retries,
        retry_delay_ms: 0,
        error_status: error_status(error),
        error: error_class(error),
        raw: raw.to_owned(),
    }
}

/// Token counts of one model request (`thread/tokenUsage/updated`'s `last`) in byre's terms,
/// Claude Code's: `input_tokens` without the cached part.
pub fn usage_of(breakdown: &Value) -> Usage {
    let cached = u64_of(breakdown, "cachedInputTokens");
    Usage {
        input_tokens: u64_of(breakdown, "inputTokens").saturating_sub(cached),
        output_tokens: u64_of(breakdown, "outputTokens"),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: u64_of(breakdown, "cacheWriteInputTokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_sorted_by_shape() {
        let cases: [(&str, &str); 8] = [
            (
                r#"{"id":0,"method":"item/commandExecution/requestApproval","params":{}}"#,
                "request",
            ),
            (
                r#"{"method":"turn/started","params":{"turn":{}}}"#,
                "notification",
            ),
            (r#"{"id":0,"result":{}}"#, "ok"),
            (
                r#"{"id":3,"error":{"code":-32600,"message":"no rollout"}}"#,
                "error",
            ),
            (r#"{"id":3}"#, "invalid"),
            ("[1]", "invalid"),
            ("not json", "invalid"),
            ("", "invalid"),
        ];
        for (line, want) in cases {
            let got = match classify(line) {
                Incoming::Request { .. } => "request",
                Incoming::Notification { .. } => "notification",
                Incoming::Response { outcome: Ok(_), .. } => "ok",
                Incoming::Response {
                    outcome: Err(_), ..
                } => "error",
                Incoming::Invalid(_) => "invalid",
            };
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn every_server_request_gets_an_answer_with_its_id() {
        for method in [
            "item/commandExecution/requestApproval",
            "item/fileChange/requestApproval",
            "execCommandApproval",
            "applyPatchApproval",
            "mcpServer/elicitation/request",
            "item/tool/requestUserInput",
            "item/tool/call",
            "item/permissions/requestApproval",
            "something/new",
        ] {
            let answer: Value = serde_json::from_str(&refusal(&json!(7), method)).unwrap();
            assert_eq!(answer["id"], 7, "{method}");
            assert!(
                answer.get("result").is_some() != answer.get("error").is_some(),
                "{answer}"
            );
        }
        let answer: Value =
            serde_json::from_str(&refusal(&json!(0), "item/commandExecution/requestApproval"))
                .unwrap();
        assert_eq!(answer["result"]["decision"], "decline");
    }

    #[test]
    fn errors_give_their_status_and_class() {
        let table = [
            (
                json!({"codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}}),
                Some(429),
                "responseTooManyFailedAttempts",
            ),
            (
                json!({"codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": null}}}),
                None,
                "responseStreamDisconnected",
            ),
            (
                json!({"codexErrorInfo": "usageLimitExceeded"}),
                Some(429),
                "usageLimitExceeded",
            ),
            (
                json!({"codexErrorInfo": "internalServerError"}),
                None,
                "internalServerError",
            ),
            (
                json!({"codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 70000}}}),
                None,
                "httpConnectionFailed",
            ),
            (json!({}), None, "other"),
        ];
        for (error, status, class) in table {
            assert_eq!(
                (error_status(&error), error_class(&error).as_str()),
                (status, class),
                "{error}"
            );
        }
        let retry = api_retry(
            &json!({"error": {"message": "Reconnecting... 2/5", "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 429}}}, "willRetry": true}),
            "{}",
        );
        assert_eq!(
            (retry.attempt, retry.max_retries, retry.error_status),
            (2, 5, Some(429))
        );
    }

    #[test]
    fn any_line_parses_without_panicking() {
        let lines = [
            "",
            "null",
            "{",
            "{\"id\":null,\"method\":5}",
            "{\"method\":\"item/completed\",\"params\":7}",
            "{\"id\":\"x\",\"result\":null}",
            "\u{0}\u{ffff}",
        ];
        for line in lines {
            let _ = classify(line);
        }
        let long = "é".repeat(5000);
        let Incoming::Invalid(VendorItem::Unrecognized(u)) = classify(&long) else {
            panic!("unrecognized expected")
        };
        assert!(u.raw.len() <= RAW_CUT_BYTES && u.size == 10_000);
        for item in [
            json!(null),
            json!({"type": 3}),
            json!({"type": "commandExecution", "exitCode": "x"}),
            json!({"type": "fileChange", "changes": 5}),
            json!({"type": "mcpToolCall", "error": 1}),
            json!({"type": "brandNew"}),
        ] {
            let _ = (tool_call(&item, ""), item_completed(&item, ""));
        }
    }
}
