//! CodeBolt's code utilities (PROTOCOL.md "Code utils"): `listCodeDefinitionNames` and
//! `getAllFilesMarkdown` from tree-sitter parsers (`byre_code::definitions`), and the problem matchers
//! `getMatcherList`, `getMatchDetail`, `performMatch` (`byre_code::matchers`).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{err, text};
use byre_code::definitions as code;
use byre_code::matchers;

/// `fsEvent/listCodeDefinitionNames {message: {path}}`: `result` is the text listing
/// ([`code::Definitions::text`]), `definitions` the same as objects.
pub(super) async fn list_code_definition_names(worktree: PathBuf, msg: &Value) -> Value {
    let raw = text(&msg["path"]);
    let r = tokio::task::spawn_blocking(move || code::list_code_definition_names(&worktree, &raw))
        .await;
    match r {
        Ok(Ok(d)) => json!({
            "result": d.text(),
            "definitions": d.definitions,
            "files": d.n_files,
        }),
        Ok(Err(e)) => err(e.to_string()),
        Err(e) => err(format!("parsing failed: {e}")),
    }
}

/// `codeEvent/getAllFilesMarkdown`: `markdown` ([`code::all_files_markdown`]).
pub(super) async fn all_files_markdown(worktree: PathBuf) -> Value {
    match tokio::task::spawn_blocking(move || code::all_files_markdown(&worktree)).await {
        Ok(Ok(md)) => json!({"markdown": md, "data": md}),
        Ok(Err(e)) => err(e.to_string()),
        Err(e) => err(format!("parsing failed: {e}")),
    }
}

/// The text `performMatch` matches: `payload.problems` (a string, or lines), else
/// `payload.output` or `payload.text`.
fn output_of(payload: &Value) -> String {
    let field = ["problems", "output", "text"]
        .iter()
        .map(|k| &payload[*k])
        .find(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        .unwrap_or(&Value::Null);
    match field {
        Value::Array(lines) => lines.iter().map(text).collect::<Vec<_>>().join("\n"),
        other => text(other),
    }
}

/// The `codeEvent` matcher actions: `getMatcherList` (`matchers`: the built-in matchers),
/// `getMatchDetail {payload: {match | matcher}}` (`matcher`), `performMatch {payload:
/// {matcherDefinition, problemPatterns, problems}}` (`matches`: the problems found).
pub(super) fn matcher_action(action: &str, f: &Value) -> Value {
    let payload = &f["payload"];
    match action {
        "getMatcherList" => json!({"matchers": matchers::built_in()}),
        "getMatchDetail" => {
            let name = match &payload["matcher"] {
                Value::Null => text(&payload["match"]),
                v => text(v),
            };
            match matchers::detail(&name) {
                Ok(m) => json!({"matcher": m}),
                Err(e) => err(e.to_string()),
            }
        }
        "performMatch" => {
            let output = output_of(payload);
            match matchers::perform_match(
                &payload["matcherDefinition"],
                &payload["problemPatterns"],
                &output,
            ) {
                Ok(problems) => json!({"matches": problems, "problems": problems}),
                Err(e) => err(e.to_string()),
            }
        }
        other => err(format!("byre does not support codeEvent/{other}")),
    }
}
