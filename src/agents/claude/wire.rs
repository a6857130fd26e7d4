//! Claude Code's stream-json output, one line at a time, turned into normalised items. Pure
//! and total: any line, even not JSON, gives a [`Parsed`] and never a panic.
//! Source: `vendors/claude-code/PROTOCOL.md` §4 (output lines), §4.1 (the result line), §10.

use byre_projections::sessions::{
    AgentText, ApiRetry, ToolCall, ToolResult, TurnEnded, TurnOutcome, Usage, Vendor, VendorItem,
    VendorUnrecognized,
};
use byre_projections::subagents::{SubagentEnded, SubagentStarted};
use serde_json::Value;

/// What one stdout line means.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Items to record in the log (an unrecognised line is one too).
    Items(Vec<VendorItem>),
    /// Streamed text for live subscribers only (`--include-partial-messages`).
    Delta(String),
    /// A model call's tokens as they stream: `message_start` (a new call, `started`) or
    /// `message_delta` (the call's output so far).
    CallUsage {
        /// Whether a new call started.
        started: bool,
        /// Its tokens so far.
        usage: Usage,
    },
    /// The CLI asks the host something and waits for a `control_response`.
    ControlRequest {
        /// Its id.
        request_id: String,
        /// What it asks (`can_use_tool`, …).
        subtype: String,
    },
    /// The CLI's rate-limit status changed (`rate_limit_event`, claude.ai logins): its
    /// `rate_limit_info` (`{status, resetsAt?, rateLimitType?, utilization?, …}`).
    RateLimit(Value),
    /// Understood, and nothing to record (status, control responses, echoes, …).
    Known,
}

/// The longest part of an unrecognised line kept in the log, in bytes.
pub const RAW_CUT_BYTES: usize = 4096;

/// A [`VendorItem::Unrecognized`] for `line`.
pub fn unrecognized(line: &str, reason: impl Into<String>) -> VendorItem {
    let mut cut = RAW_CUT_BYTES.min(line.len());
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    VendorItem::Unrecognized(VendorUnrecognized {
        vendor: Vendor::Claude,
        reason: reason.into(),
        raw: line[..cut].to_owned(),
        size: line.len() as u64,
    })
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The `*_tokens` of a `usage` object (0 where absent).
fn usage_of(usage: &Value) -> Usage {
    Usage {
        input_tokens: u64_of(usage, "input_tokens"),
        output_tokens: u64_of(usage, "output_tokens"),
        cache_read_input_tokens: u64_of(usage, "cache_read_input_tokens"),
        cache_creation_input_tokens: u64_of(usage, "cache_creation_input_tokens"),
    }
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v.get(key)
        .and_then(|x| {
            x.as_u64()
                .or_else(|| x.as_f64().map(|f| f.max(0.0).round() as u64))
        })
        .unwrap_or(0)
}

/// The `uuid` of an `assistant` line of the main conversation (not a subagent's, whose
/// `parent_tool_use_id` is set): what `--resume-session-at` cuts after (claude-code README,
/// e3; a user message's uuid is refused, e6). `None` for any other line.
pub fn assistant_uuid(line: &str) -> Option<String> {
    if !line.contains("\"assistant\"") {
        return None;
    }
    let v: Value = serde_json::from_str(line).ok()?;
    let main = v.get("parent_tool_use_id").is_none_or(Value::is_null);
    (str_of(&v, "type") == "assistant" && main)
        .then(|| str_of(&v, "uuid").to_owned())
        .filter(|u| !u.is_empty())
}

/// Parses one stdout line of `claude -p --output-format stream-json --verbose`.
pub fn parse(line: &str) -> Parsed {
    let v: Value = match serde_json::from_str(line) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Parsed::Items(vec![unrecognized(line, "not a JSON object")]),
        Err(e) => return Parsed::Items(vec![unrecognized(line, format!("not JSON: {e}"))]),
    };
    let raw = || line.to_owned();
    match str_of(&v, "type") {
        "assistant" => assistant(&v, raw()),
        "user" => user(&v, raw()),
        "result" => Parsed::Items(vec![VendorItem::TurnEnded(result(&v, raw()))]),
        "system" => match str_of(&v, "subtype") {
            "api_retry" => Parsed::Items(vec![VendorItem::ApiRetry(ApiRetry {
                attempt: u64_of(&v, "attempt") as u32,
                max_retries: u64_of(&v, "max_retries") as u32,
                retry_delay_ms: u64_of(&v, "retry_delay_ms"),
                error_status: v
                    .get("error_status")
                    .and_then(Value::as_u64)
                    .map(|s| s as u16),
                error: str_of(&v, "error").to_owned(),
                raw: raw(),
            })]),
            "init" => Parsed::Items(vec![VendorItem::TurnBegan]),
            "task_started" => task_started(&v),
            "task_notification" => task_notification(&v),
            "status"
            | "thinking_tokens"
            | "task_progress"
            | "task_updated"
            | "compact_boundary"
            | "model_fallback"
            | "session_state_changed" => Parsed::Known,
            s if s.starts_with("hook_") => Parsed::Known,
            other => Parsed::Items(vec![unrecognized(
                line,
                format!("unknown system subtype `{other}`"),
            )]),
        },
        "stream_event" => {
            let event = v.get("event").unwrap_or(&Value::Null);
            let delta = event.get("delta").unwrap_or(&Value::Null);
            match str_of(event, "type") {
                "content_block_delta" if str_of(delta, "type") == "text_delta" => {
                    Parsed::Delta(str_of(delta, "text").to_owned())
                }
                "message_start" => Parsed::CallUsage {
                    started: true,
                    usage: usage_of(
                        event
                            .get("message")
                            .and_then(|m| m.get("usage"))
                            .unwrap_or(&Value::Null),
                    ),
                },
                "message_delta" => Parsed::CallUsage {
                    started: false,
                    usage: usage_of(event.get("usage").unwrap_or(&Value::Null)),
                },
                _ => Parsed::Known,
            }
        }
        "control_request" => Parsed::ControlRequest {
            request_id: str_of(&v, "request_id").to_owned(),
            subtype: str_of(v.get("request").unwrap_or(&Value::Null), "subtype").to_owned(),
        },
        "rate_limit_event" => match v.get("rate_limit_info") {
            Some(info @ Value::Object(_)) => Parsed::RateLimit(info.clone()),
            _ => Parsed::Items(vec![unrecognized(
                line,
                "a rate_limit_event without a rate_limit_info object",
            )]),
        },
        "control_response" | "tool_progress" | "prompt_suggestion" | "auth_status"
        | "keep_alive" => Parsed::Known,
        "" => Parsed::Items(vec![unrecognized(line, "no type")]),
        other => Parsed::Items(vec![unrecognized(line, format!("unknown type `{other}`"))]),
    }
}

/// Claude Code's `task_type` of the Task/Agent tool's subagents (`local_agent`; `remote_agent`
/// by its name): the ones `AgentSession.subagents` counts. Other tasks (`local_bash`, a long
/// Bash command) are not subagents.
fn is_subagent(task_type: &str) -> bool {
    task_type.ends_with("_agent")
}

/// `system/task_started`: a subagent started (the tool call `tool_use_id` started it).
fn task_started(v: &Value) -> Parsed {
    if !is_subagent(str_of(v, "task_type")) {
        return Parsed::Known;
    }
    Parsed::Items(vec![VendorItem::SubagentStarted(SubagentStarted {
        id: str_of(v, "task_id").to_owned(),
        tool_use_id: str_of(v, "tool_use_id").to_owned(),
        description: str_of(v, "description").to_owned(),
        kind: str_of(v, "subagent_type").to_owned(),
        subagents: 0,
    })])
}

/// `system/task_notification`: a task ended (a subagent's end, or a Bash command's, which the
/// fold ignores as no subagent of that id runs).
fn task_notification(v: &Value) -> Parsed {
    let id = str_of(v, "task_id");
    if id.is_empty() {
        return Parsed::Known;
    }
    Parsed::Items(vec![VendorItem::SubagentEnded(SubagentEnded {
        id: id.to_owned(),
        tool_use_id: str_of(v, "tool_use_id").to_owned(),
        status: str_of(v, "status").to_owned(),
        summary: str_of(v, "summary").to_owned(),
        subagents: 0,
    })])
}

fn assistant(v: &Value, raw: String) -> Parsed {
    let message = v.get("message").unwrap_or(&Value::Null);
    if v.get("error").is_some_and(|e| !e.is_null()) {
        // A synthetic message holding an API error's text; the result line reports the error.
        return Parsed::Known;
    }
    let message_id = str_of(message, "id").to_owned();
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut items = Vec::new();
    for b in blocks {
        match str_of(&b, "type") {
            "text" => items.push(VendorItem::Text(AgentText {
                cut: None,
                text: str_of(&b, "text").to_owned(),
                message_id: message_id.clone(),
                raw: raw.clone(),
            })),
            "tool_use" => items.push(VendorItem::ToolCall(ToolCall {
                cut: None,
                tool_use_id: str_of(&b, "id").to_owned(),
                name: str_of(&b, "name").to_owned(),
                input: b.get("input").cloned().unwrap_or(Value::Null),
                raw: raw.clone(),
            })),
            "thinking" | "redacted_thinking" => {}
            other => items.push(unrecognized(
                &raw,
                format!("unknown assistant block `{other}`"),
            )),
        }
    }
    if items.is_empty() {
        Parsed::Known
    } else {
        Parsed::Items(items)
    }
}

/// A tool result's content as text: a string as is; text blocks joined by newlines; other
/// blocks (images) named.
fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match str_of(b, "type") {
                "text" => str_of(b, "text").to_owned(),
                other => format!("[{other}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn user(v: &Value, raw: String) -> Parsed {
    if v.get("isReplay").and_then(Value::as_bool) == Some(true) {
        return Parsed::Known;
    }
    let content = v
        .get("message")
        .and_then(|m| m.get("content"))
        .cloned()
        .unwrap_or(Value::Null);
    let Value::Array(blocks) = content else {
        return Parsed::Known;
    };
    let items: Vec<VendorItem> = blocks
        .iter()
        .filter(|b| str_of(b, "type") == "tool_result")
        .map(|b| {
            VendorItem::ToolResult(ToolResult {
                cut: None,
                tool_use_id: str_of(b, "tool_use_id").to_owned(),
                output: content_text(b.get("content").unwrap_or(&Value::Null)),
                is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                raw: raw.clone(),
            })
        })
        .collect();
    if items.is_empty() {
        Parsed::Known
    } else {
        Parsed::Items(items)
    }
}

/// The result line (PROTOCOL.md §4.1). `cost_micro_usd` is the CLI's **cumulative** cost for
/// the process (`total_cost_usd`); the session turns it into the turn's own.
fn result(v: &Value, raw: String) -> TurnEnded {
    let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
    let subtype = str_of(v, "subtype");
    let terminal = str_of(v, "terminal_reason");
    let outcome = if !is_error {
        TurnOutcome::Completed
    } else if subtype == "error_during_execution" && terminal.starts_with("aborted") {
        TurnOutcome::Interrupted
    } else {
        TurnOutcome::Failed
    };
    let text = str_of(v, "result").to_owned();
    let error = if !is_error {
        String::new()
    } else if text.contains("Not logged in") {
        // byre runs the CLI with a config dir of its own, so a login made elsewhere is not seen.
        format!("{text} — byre runs Claude Code with its own config directory: start byre with ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in its environment")
    } else if !text.is_empty() {
        text.clone()
    } else {
        let errors: Vec<String> = v
            .get("errors")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if errors.is_empty() {
            format!("{subtype} ({terminal})")
        } else {
            errors.join("; ")
        }
    };
    let usage = usage_of(v.get("usage").unwrap_or(&Value::Null));
    TurnEnded {
        cut: None,
        turn: 0,
        outcome,
        summary: false,
        result: if is_error { String::new() } else { text },
        error,
        usage,
        cost_micro_usd: v
            .get("total_cost_usd")
            .and_then(Value::as_f64)
            .map(|c| (c * 1e6).round().max(0.0) as u64)
            .unwrap_or(0),
        duration_ms: u64_of(v, "duration_ms"),
        num_turns: u64_of(v, "num_turns") as u32,
        api_error_status: v
            .get("api_error_status")
            .and_then(Value::as_u64)
            .map(|s| s as u16),
        rate_limits: None,
        review: false,
        last_vendor_id: None,
        raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_main_conversation_assistant_lines_name_a_fork_point() {
        let main = r#"{"type":"assistant","message":{"id":"m","content":[]},"parent_tool_use_id":null,"uuid":"u-1"}"#;
        assert_eq!(assistant_uuid(main).as_deref(), Some("u-1"));
        let sub = r#"{"type":"assistant","message":{"content":[]},"parent_tool_use_id":"toolu_1","uuid":"u-2"}"#;
        assert_eq!(assistant_uuid(sub), None, "a subagent's message");
        let user = r#"{"type":"user","message":{"content":"assistant"},"uuid":"u-3"}"#;
        assert_eq!(assistant_uuid(user), None);
        assert_eq!(assistant_uuid("not json \"assistant\""), None);
    }

    /// Every recorded transcript, parsed line by line and compared with its snapshot
    /// (`fixtures/claude/<scenario>.events.json`; `UPDATE_EXPECT=1` rewrites it).
    #[test]
    fn transcripts_match_their_snapshots() {
        let dir = crate::fixtures().join("claude");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures/claude") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                check_transcript(&path);
                n += 1;
            }
        }
        assert!(n >= 5, "transcripts found: {n}");
    }

    fn check_transcript(path: &std::path::Path) {
        let text = std::fs::read_to_string(path).expect("transcript");
        let parsed: Vec<Value> = text
            .lines()
            .map(|l| match parse(l) {
                Parsed::Items(items) => serde_json::json!({ "items": items.iter().map(|i| {
                    let mut v = serde_json::to_value(i).expect("item");
                    if let Some(o) = v.as_object_mut() { o.remove("raw"); }
                    v
                }).collect::<Vec<_>>() }),
                Parsed::Delta(d) => serde_json::json!({ "delta": d }),
                Parsed::CallUsage { started, usage } => {
                    serde_json::json!({ "call_usage": { "started": started, "usage": usage } })
                }
                Parsed::ControlRequest {
                    request_id,
                    subtype,
                } => serde_json::json!({ "control_request": [request_id, subtype] }),
                Parsed::RateLimit(info) => serde_json::json!({ "rate_limit": info }),
                Parsed::Known => serde_json::json!("known"),
            })
            .collect();
        let actual = serde_json::to_string_pretty(&parsed).expect("json") + "\n";
        let snapshot = path.with_extension("events.json");
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&snapshot, &actual).expect("write snapshot");
            return;
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        assert!(
            expected == actual,
            "{} differs from its snapshot; run with UPDATE_EXPECT=1 and read the diff",
            path.display()
        );
    }

    /// The recorded subagents transcript (`fixtures/claude/w_subagents.jsonl`): each turn
    /// begins with `system/init`; the foreground subagent starts and ends inside its turn; the
    /// background one ends after its turn's result, and the CLI then begins a turn by itself.
    #[test]
    fn subagents_start_and_end_and_the_cli_begins_a_turn_by_itself() {
        let path = crate::fixtures().join("claude/w_subagents.jsonl");
        let text = std::fs::read_to_string(path).expect("transcript");
        let mut seen = Vec::new();
        for line in text.lines() {
            if let Parsed::Items(items) = parse(line) {
                for item in items {
                    match item {
                        VendorItem::TurnBegan => seen.push("begin".to_owned()),
                        VendorItem::TurnEnded(_) => seen.push("result".to_owned()),
                        VendorItem::SubagentStarted(s) => {
                            assert_eq!(s.kind, "general-purpose");
                            seen.push(format!("start {}", s.tool_use_id));
                        }
                        VendorItem::SubagentEnded(s) => {
                            assert_eq!(s.status, "completed");
                            seen.push(format!("end {}", s.tool_use_id));
                        }
                        VendorItem::Unrecognized(u) => panic!("not understood: {}", u.reason),
                        _ => {}
                    }
                }
            }
        }
        assert_eq!(
            seen,
            [
                "begin",
                "start toolu_v_fg",
                "end toolu_v_fg",
                "result",
                "begin",
                "start toolu_v_bg",
                "result",
                "end toolu_v_bg",
                "begin",
                "result"
            ]
        );
    }

    #[test]
    fn a_long_bash_commands_task_is_no_subagent() {
        let line = r#"{"type":"system","subtype":"task_started","task_id":"b1","tool_use_id":"toolu_1","task_type":"local_bash","description":"sleep 5"}"#;
        assert_eq!(parse(line), Parsed::Known);
    }

    #[test]
    fn any_line_parses_without_panicking() {
        for line in [
            "",
            "null",
            "[1,2]",
            "{",
            "{\"type\":5}",
            "{\"type\":\"assistant\"}",
            "{\"type\":\"user\",\"message\":{\"content\":7}}",
            "{\"type\":\"result\",\"is_error\":\"x\",\"usage\":[]}",
            "\u{0}\u{ffff}",
            &"é".repeat(5000),
        ] {
            let _ = parse(line);
        }
        if let Parsed::Items(items) = parse(&"é".repeat(5000)) {
            let VendorItem::Unrecognized(u) = &items[0] else {
                panic!("unrecognized expected")
            };
            assert!(u.raw.len() <= RAW_CUT_BYTES && u.size == 10_000);
        }
    }

    /// Fuzz-style: every recorded line, cut at every char boundary and with bytes flipped by a
    /// deterministic generator, parses without panicking.
    #[test]
    fn mangled_transcript_lines_never_panic() {
        let dir = crate::fixtures().join("claude");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for entry in std::fs::read_dir(dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(&path).expect("read").lines() {
                for cut in (0..line.len())
                    .step_by(7)
                    .filter(|c| line.is_char_boundary(*c))
                {
                    let _ = parse(&line[..cut]);
                }
                for _ in 0..20 {
                    let mut bytes = line.as_bytes().to_vec();
                    for _ in 0..3 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let i = (x as usize) % bytes.len().max(1);
                        if let Some(b) = bytes.get_mut(i) {
                            *b = (x >> 32) as u8;
                        }
                    }
                    let _ = parse(&String::from_utf8_lossy(&bytes));
                }
            }
        }
    }
}
