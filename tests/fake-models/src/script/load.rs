//! Reading a script: the file's JSON shape, validated once into the types of `script.rs`.
//! A typo (`stall_after_start_s`), a reply that is both an error and a message, or a block
//! without a `type` is an error here, not a surprise in the middle of a test. Past
//! [`Script::parse`] no raw JSON shape is left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ApiError, Block, Conditions, MessageReply, Reply, ReplyKind, Script, Step, Times};

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The script's path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not JSON of the script's shape (unknown field, wrong type, …).
    #[error("not a fake-model script: {0}")]
    Shape(#[from] serde_json::Error),
    /// A step's reply mixes kinds or is empty (`step` is None for `default`).
    #[error("{}: {message}", step.map_or("default".to_owned(), |i| format!("step {i}")))]
    Invalid {
        /// Index of the step in `steps`, or None for `default`.
        step: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// One of the errors above, in this file.
    #[error("{path}: {source}")]
    InFile {
        /// The script's path.
        path: PathBuf,
        /// What went wrong.
        source: Box<ScriptError>,
    },
}

impl From<ScriptError> for std::io::Error {
    fn from(error: ScriptError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    #[serde(default)]
    default: Option<ReplyFile>,
    #[serde(default)]
    steps: Vec<StepFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFile {
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    #[serde(default)]
    when: Conditions,
    #[serde(default)]
    times: Option<TimesFile>,
    reply: ReplyFile,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TimesFile {
    Count(u32),
    Word(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyFile {
    content: Option<Vec<Block>>,
    stop_reason: Option<String>,
    usage: Option<Map<String, Value>>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    stall_after_start_ms: u64,
    #[serde(default)]
    delta_gap_ms: u64,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    status: Option<u16>,
    error_type: Option<String>,
    error_code: Option<String>,
    error_message: Option<String>,
    stream_error: Option<String>,
}

impl Script {
    /// Parses and validates a script from its JSON text.
    /// # Errors
    /// `Shape` for JSON that does not fit the format, `Invalid` for a reply that mixes kinds.
    pub fn parse(json: &str) -> Result<Script, ScriptError> {
        let file: ScriptFile = serde_json::from_str(json)?;
        let default_reply = match file.default {
            Some(reply) => reply.validate(None)?,
            None => Reply::text("ok"),
        };
        let steps = file
            .steps
            .into_iter()
            .enumerate()
            .map(|(idx, step)| {
                let times = match step.times {
                    None => Times::Count(1),
                    Some(TimesFile::Count(n)) => Times::Count(n),
                    Some(TimesFile::Word(word)) if word == "always" => Times::Always,
                    Some(TimesFile::Word(word)) => {
                        return Err(invalid(
                            Some(idx),
                            format!("`times` is a number or \"always\", not {word:?}"),
                        ))
                    }
                };
                Ok(Step {
                    when: step.when,
                    times,
                    reply: step.reply.validate(Some(idx))?,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Script {
            steps,
            default_reply,
        })
    }

    /// Reads and parses a script file.
    /// # Errors
    /// `InFile` wrapping `Read`, `Shape` or `Invalid`.
    pub fn load(path: impl AsRef<Path>) -> Result<Script, ScriptError> {
        let path = path.as_ref();
        let in_file = |source| ScriptError::InFile {
            path: path.to_owned(),
            source: Box::new(source),
        };
        let text = std::fs::read_to_string(path).map_err(|source| {
            in_file(ScriptError::Read {
                path: path.to_owned(),
                source,
            })
        })?;
        Script::parse(&text).map_err(in_file)
    }

    /// Loads `fixtures/fake-model/<name>.json` of this workspace (`name` with or without `.json`).
    /// # Errors
    /// As [`Script::load`].
    pub fn fixture(name: &str) -> Result<Script, ScriptError> {
        let file = if name.ends_with(".json") {
            name.to_owned()
        } else {
            format!("{name}.json")
        };
        Script::load(fixtures_dir().join(file))
    }
}

/// The folder of the scripts: `<workspace>/fixtures/fake-model`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fake-model")
}

/// A token name (RFC 9110 §5.1, letters, digits and `-` here) and a visible-ASCII value.
fn valid_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        && value
            .bytes()
            .all(|byte| byte == b' ' || byte == b'\t' || byte.is_ascii_graphic())
}

fn invalid(step: Option<usize>, message: impl Into<String>) -> ScriptError {
    ScriptError::Invalid {
        step,
        message: message.into(),
    }
}

impl ReplyFile {
    fn validate(self, step: Option<usize>) -> Result<Reply, ScriptError> {
        let delay = Duration::from_millis(self.delay_ms);
        let headers: Vec<(String, String)> = self.headers.into_iter().collect();
        if let Some((name, _)) = headers
            .iter()
            .find(|(name, value)| !valid_header(name, value))
        {
            return Err(invalid(
                step,
                format!("header {name:?} is not a valid HTTP header name and value"),
            ));
        }
        let stall_after_start = Duration::from_millis(self.stall_after_start_ms);
        let message_only =
            self.content.is_some() || self.stop_reason.is_some() || self.usage.is_some();
        let kind = match (self.status, self.stream_error) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    step,
                    "`status` and `stream_error` exclude each other",
                ))
            }
            (None, Some(error_type)) => {
                if message_only || self.error_type.is_some() {
                    return Err(invalid(step, "a `stream_error` reply takes only `error_message`, `error_code`, `headers`, `delay_ms`, `stall_after_start_ms`"));
                }
                let status = if error_type == "overloaded_error" {
                    529
                } else {
                    500
                };
                ReplyKind::StreamError {
                    error: ApiError {
                        status,
                        error_type: Some(error_type),
                        code: self.error_code,
                        message: self.error_message,
                    },
                    stall_after_start,
                }
            }
            (Some(status), None) => {
                if !(400..=599).contains(&status) {
                    return Err(invalid(
                        step,
                        format!("`status` {status} is not an error status (400–599)"),
                    ));
                }
                if message_only || self.stall_after_start_ms != 0 {
                    return Err(invalid(step, "an error reply (`status`) takes no `content`, `stop_reason`, `usage` or stall"));
                }
                ReplyKind::HttpError(ApiError {
                    status,
                    error_type: self.error_type,
                    code: self.error_code,
                    message: self.error_message,
                })
            }
            (None, None) => {
                if self.error_type.is_some()
                    || self.error_code.is_some()
                    || self.error_message.is_some()
                {
                    return Err(invalid(
                        step,
                        "`error_type`/`error_code`/`error_message` need `status` or `stream_error`",
                    ));
                }
                let Some(content) = self.content else {
                    return Err(invalid(
                        step,
                        "a reply needs `content`, `status` or `stream_error`",
                    ));
                };
                ReplyKind::Message(MessageReply {
                    content,
                    stop_reason: self.stop_reason,
                    usage: self.usage.unwrap_or_default(),
                    stall_after_start,
                    delta_gap: Duration::from_millis(self.delta_gap_ms),
                })
            }
        };
        Ok(Reply {
            delay,
            headers,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `codex_*.json` are for the OpenAI fake, the others for the Anthropic one.
    #[test]
    fn every_fixture_script_parses_and_suits_its_api() {
        use crate::server::ModelApi;
        let mut n_scripts = 0;
        for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures/fake-model exists") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|ext| ext == "json") {
                let script = Script::load(&path).unwrap_or_else(|error| panic!("{error}"));
                let for_codex = path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("codex_"));
                let suits = if for_codex {
                    crate::OpenAiResponses::check(&script)
                } else {
                    crate::AnthropicMessages::check(&script)
                };
                suits.unwrap_or_else(|error| panic!("{}: {error}", path.display()));
                n_scripts += 1;
            }
        }
        assert!(n_scripts >= 15, "only {n_scripts} scripts found");
    }

    #[test]
    fn a_step_defaults_to_once_and_requires_tools() {
        let script =
            Script::parse(r#"{"steps":[{"reply":{"content":[{"type":"text","text":"hi"}]}}]}"#)
                .unwrap();
        assert_eq!(script.steps[0].times, Times::Count(1));
        assert!(script.steps[0].when.requires_tools);
    }

    #[test]
    fn an_error_status_gets_the_apis_error_type() {
        let script = Script::parse(r#"{"steps":[{"times":"always","reply":{"status":429,"headers":{"retry-after":"1"}}}]}"#).unwrap();
        assert_eq!(script.steps[0].times, Times::Always);
        let ReplyKind::HttpError(error) = &script.steps[0].reply.kind else {
            panic!("not an error")
        };
        assert_eq!(error.anthropic_type(), "rate_limit_error");
        assert_eq!(
            (error.openai_type(), error.openai_code()),
            ("requests", Some("rate_limit_exceeded"))
        );
        assert_eq!(
            script.steps[0].reply.headers,
            vec![("retry-after".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn each_api_rejects_the_parts_only_the_other_one_has() {
        use crate::server::ModelApi;
        let responses_only = Script::parse(r#"{"steps":[{"reply":{"content":[{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch"}]}}]}"#).unwrap();
        let error = crate::AnthropicMessages::check(&responses_only).unwrap_err();
        assert!(error.contains("step 0: a `custom_tool_call`"), "{error}");
        assert!(crate::OpenAiResponses::check(&responses_only).is_ok());
        let messages_only = Script::parse(
            r#"{"default":{"content":[{"type":"text","text":"x"}],"stop_reason":"end_turn"}}"#,
        )
        .unwrap();
        let error = crate::OpenAiResponses::check(&messages_only).unwrap_err();
        assert!(error.contains("default: `stop_reason`"), "{error}");
        assert!(crate::AnthropicMessages::check(&messages_only).is_ok());
    }

    #[test]
    fn bad_scripts_are_rejected_with_the_reason() {
        let cases = [
            (
                r#"{"steps":[{"reply":{"content":[],"stall_after_start_s":3}}]}"#,
                "unknown field",
            ),
            (
                r#"{"steps":[{"reply":{"status":500,"content":[]}}]}"#,
                "step 0: an error reply",
            ),
            (
                r#"{"steps":[{"reply":{"status":200}}]}"#,
                "not an error status",
            ),
            (r#"{"steps":[{"reply":{}}]}"#, "needs `content`"),
            (
                r#"{"steps":[{"times":"often","reply":{"content":[]}}]}"#,
                "\"often\"",
            ),
            (
                r#"{"steps":[{"reply":{"content":[{"type":"tool_use"}]}}]}"#,
                "missing field `name`",
            ),
            (
                r#"{"steps":[{"when":{"matches":"x"},"reply":{"content":[]}}]}"#,
                "unknown field",
            ),
            (
                r#"{"default":{"status":500,"stream_error":"api_error"}}"#,
                "default: `status` and `stream_error`",
            ),
            (
                r#"{"steps":[{"reply":{"status":429,"headers":{"retry after":"1"}}}]}"#,
                "not a valid HTTP header",
            ),
            (
                r#"{"steps":[{"reply":{"content":[],"error_code":"x"}}]}"#,
                "`error_code`/`error_message` need",
            ),
            (
                r#"{"steps":[{"reply":{"content":[{"type":"custom_tool_call","name":"apply_patch"}]}}]}"#,
                "missing field `input`",
            ),
        ];
        for (json, expected) in cases {
            let error = Script::parse(json)
                .err()
                .unwrap_or_else(|| panic!("accepted: {json}"));
            assert!(
                error.to_string().contains(expected),
                "{json}: got {error}, wanted {expected}"
            );
        }
    }
}
