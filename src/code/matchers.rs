//! Problem matchers: compiler and linter output turned into file:line problems. CodeBolt's
//! `getMatcherList`, `getMatchDetail` and `performMatch` answer from here.
//!
//! The built-in matchers are data, `src/code/problem_matchers.json` (README "Problem
//! matchers" lists them): each a `name`, an `owner`, a `description` and a `pattern`, a list
//! of line patterns in the shape of VS Code's problem matchers, which is also what
//! CodeBolt's `performMatch` sends. A line pattern has a `regexp` (the `regex` crate's
//! syntax: linear time, no backreferences) and the capture group (1-based) of each field it
//! gives: `file`, `line`, `column`, `severity`, `code`, `message`. The patterns of a matcher
//! match consecutive lines: a problem is the fields of all of them together. A pattern with
//! `"optional": true` is skipped when its line does not match; the last pattern with
//! `"loop": true` goes on matching the lines after it, one problem each (a linter's file
//! heading, then its problems). A problem needs a file (or a message) and a line to count.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a matcher could not be found, made or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No built-in matcher of that name.
    #[error("{0}")]
    NotFound(String),
    /// A matcher or its patterns are malformed.
    #[error("{0}")]
    Invalid(String),
}

/// Most bytes of output one `performMatch` reads.
pub const MAX_OUTPUT_BYTES: usize = 8 * 1024 * 1024;
/// Most problems one `performMatch` answers.
pub const MAX_PROBLEMS: usize = 5_000;
/// Most line patterns in one matcher.
pub const MAX_PATTERNS: usize = 16;
/// Largest compiled regex, in bytes (the `regex` crate's size limit).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// One line pattern, as the JSON gives it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LinePattern {
    /// The regular expression for one line.
    pub regexp: String,
    /// The capture group of the file's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<usize>,
    /// The capture group of the line number (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The capture group of the column (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The capture group of the severity (`error`, `warning`, …; lower-cased).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<usize>,
    /// The capture group of the diagnostic's code (`E0425`, `TS2322`, a lint rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<usize>,
    /// The capture group of the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<usize>,
    /// Skipped when its line does not match.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// (Last pattern only) goes on matching the following lines, one problem each.
    #[serde(default, rename = "loop", skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
}

/// A problem matcher, as the JSON gives it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatcherDef {
    /// Its name (`rustc`, `tsc`, …).
    #[serde(default)]
    pub name: String,
    /// The tool family its problems belong to (`rust`, `typescript`, …).
    #[serde(default)]
    pub owner: String,
    /// What output it reads.
    #[serde(default)]
    pub description: String,
    /// Its line patterns, matched on consecutive lines.
    #[serde(default)]
    pub pattern: Vec<LinePattern>,
}

/// One problem found.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// The matcher's owner.
    pub owner: String,
    /// The file as the output names it.
    pub file: String,
    /// Line, 1-based.
    pub line: u64,
    /// Column, 1-based, when the output gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    /// `error`, `warning`, `note`, `info` (lower case); `error` when the output says none.
    pub severity: String,
    /// The diagnostic's code, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The message.
    pub message: String,
}

/// A matcher with its patterns compiled.
pub struct Matcher {
    def: MatcherDef,
    regexes: Vec<Regex>,
}

static BUILT_IN: LazyLock<Vec<MatcherDef>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("problem_matchers.json"))
        .unwrap_or_else(|e| unreachable!("problem_matchers.json is checked by a test: {e}"))
});

/// The built-in matchers, in the file's order.
pub fn built_in() -> &'static [MatcherDef] {
    &BUILT_IN
}

/// The built-in matcher called `name`.
/// # Errors
/// Not found, naming the matchers there are.
pub fn detail(name: &str) -> Result<&'static MatcherDef, Error> {
    built_in().iter().find(|m| m.name == name).ok_or_else(|| {
        let names: Vec<&str> = built_in().iter().map(|m| m.name.as_str()).collect();
        Error::NotFound(format!(
            "no problem matcher `{name}`; byre has {}",
            names.join(", ")
        ))
    })
}

impl Matcher {
    /// Compiles a matcher.
    /// # Errors
    /// Invalid: no pattern, too many, a regex that does not compile or is too large, a
    /// capture group the regex does not have, `loop` on a pattern other than the last.
    pub fn new(def: MatcherDef) -> Result<Matcher, Error> {
        if def.pattern.is_empty() || def.pattern.len() > MAX_PATTERNS {
            return Err(Error::Invalid(format!(
                "a problem matcher needs 1 to {MAX_PATTERNS} line patterns, not {}",
                def.pattern.len()
            )));
        }
        let mut regexes = Vec::new();
        for (i, p) in def.pattern.iter().enumerate() {
            let re = regex::RegexBuilder::new(&p.regexp)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| Error::Invalid(format!("line pattern {}: {e}", i + 1)))?;
            let groups = [p.file, p.line, p.column, p.severity, p.code, p.message];
            if let Some(g) = groups
                .into_iter()
                .flatten()
                .find(|g| *g >= re.captures_len())
            {
                return Err(Error::Invalid(format!(
                    "line pattern {}: its regexp has no capture group {g}",
                    i + 1
                )));
            }
            if p.repeat && i + 1 != def.pattern.len() {
                return Err(Error::Invalid(format!(
                    "line pattern {}: only the last pattern may loop",
                    i + 1
                )));
            }
            regexes.push(re);
        }
        Ok(Matcher { def, regexes })
    }

    /// The problems in `output`, in order, at most [`MAX_PROBLEMS`].
    pub fn run(&self, output: &str) -> Vec<Problem> {
        let lines: Vec<&str> = output.lines().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() && out.len() < MAX_PROBLEMS {
            match self.match_at(&lines, i, &mut out) {
                Some(next) => i = next.max(i + 1),
                None => i += 1,
            }
        }
        out.truncate(MAX_PROBLEMS);
        out
    }

    /// Matches the patterns from line `start`: the line after the match, its problems pushed.
    fn match_at(&self, lines: &[&str], start: usize, out: &mut Vec<Problem>) -> Option<usize> {
        let mut p = Problem {
            owner: self.def.owner.clone(),
            ..Problem::default()
        };
        let mut at = start;
        let last = self.regexes.len() - 1;
        for (k, (re, pat)) in self.regexes.iter().zip(&self.def.pattern).enumerate() {
            let caps = lines.get(at).and_then(|l| re.captures(l));
            let Some(caps) = caps else {
                if pat.optional {
                    continue;
                }
                return None;
            };
            fill(&mut p, pat, &caps);
            at += 1;
            if k == last && pat.repeat {
                let heading = p.clone();
                push(out, p);
                while let Some(caps) = lines.get(at).and_then(|l| re.captures(l)) {
                    if out.len() >= MAX_PROBLEMS {
                        break;
                    }
                    let mut next = heading.clone();
                    fill(&mut next, pat, &caps);
                    push(out, next);
                    at += 1;
                }
                return Some(at);
            }
        }
        push(out, p);
        Some(at)
    }
}

fn fill(p: &mut Problem, pat: &LinePattern, caps: &regex::Captures<'_>) {
    let get = |g: Option<usize>| {
        g.and_then(|g| caps.get(g))
            .map(|m| m.as_str().trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    if let Some(f) = get(pat.file) {
        p.file = f;
    }
    if let Some(l) = get(pat.line).and_then(|l| l.parse().ok()) {
        p.line = l;
    }
    if let Some(c) = get(pat.column).and_then(|c| c.parse().ok()) {
        p.column = Some(c);
    }
    if let Some(s) = get(pat.severity) {
        p.severity = s.to_lowercase();
    }
    if let Some(c) = get(pat.code) {
        p.code = Some(c);
    }
    if let Some(m) = get(pat.message) {
        p.message = m;
    }
}

/// Keeps a problem that has a place (a line, and a file or message); `error` by default.
fn push(out: &mut Vec<Problem>, mut p: Problem) {
    if p.line == 0 || (p.file.is_empty() && p.message.is_empty()) {
        return;
    }
    if p.severity.is_empty() {
        p.severity = "error".into();
    }
    out.push(p);
}

/// `performMatch`: the problems `output` holds by the matcher `definition` says: a built-in
/// one by name (a string, or an object whose `name` or `owner` names one and that has no
/// `pattern`), else the object itself as a matcher; `patterns`, when not empty, replace its
/// line patterns (CodeBolt's `problemPatterns`).
/// # Errors
/// Invalid: a matcher that does not parse or compile ([`Matcher::new`]), output over
/// [`MAX_OUTPUT_BYTES`]; not found: an unknown built-in name.
pub fn perform_match(
    definition: &Value,
    patterns: &Value,
    output: &str,
) -> Result<Vec<Problem>, Error> {
    if output.len() > MAX_OUTPUT_BYTES {
        return Err(Error::Invalid(format!(
            "the output to match is over {} MiB",
            MAX_OUTPUT_BYTES >> 20
        )));
    }
    let own_patterns = definition.get("pattern").is_some_and(|p| !p.is_null());
    let mut def = match definition {
        Value::String(name) => detail(name)?.clone(),
        Value::Object(o) if !own_patterns => {
            let by = |k: &str| o.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            let bare = |owner: &str| MatcherDef {
                name: String::new(),
                owner: owner.to_owned(),
                description: String::new(),
                pattern: Vec::new(),
            };
            match (by("name"), by("owner")) {
                (Some(n), _) => detail(n)?.clone(),
                (None, Some(owner)) => match built_in()
                    .iter()
                    .find(|m| m.owner == owner || m.name == owner)
                {
                    Some(m) => m.clone(),
                    None if patterns_given(patterns) => bare(owner),
                    None => {
                        return Err(Error::NotFound(format!(
                            "no problem matcher for owner `{owner}`"
                        )))
                    }
                },
                (None, None) if patterns_given(patterns) => bare(""),
                (None, None) => {
                    return Err(Error::Invalid(
                        "name a problem matcher (`name` or `owner`) or give its `pattern`".into(),
                    ))
                }
            }
        }
        Value::Object(_) => {
            let mut v = definition.clone();
            // VS Code allows one pattern object instead of a list.
            if v["pattern"].is_object() {
                v["pattern"] = Value::Array(vec![v["pattern"].clone()]);
            }
            serde_json::from_value(v)
                .map_err(|e| Error::Invalid(format!("the problem matcher does not parse: {e}")))?
        }
        _ => {
            return Err(Error::Invalid(
                "`matcherDefinition` must be a matcher's name or a matcher object".into(),
            ))
        }
    };
    if patterns_given(patterns) {
        def.pattern = serde_json::from_value(patterns.clone())
            .map_err(|e| Error::Invalid(format!("the problem patterns do not parse: {e}")))?;
    }
    Ok(Matcher::new(def)?.run(output))
}

fn patterns_given(patterns: &Value) -> bool {
    patterns.as_array().is_some_and(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(name: &str, output: &str) -> Vec<Problem> {
        perform_match(&json!(name), &json!([]), output).unwrap()
    }

    #[test]
    fn every_built_in_matcher_compiles() {
        assert!(built_in().len() >= 8);
        for m in built_in() {
            Matcher::new(m.clone()).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        }
    }

    #[test]
    fn tsc_gcc_go_and_eslint_lines() {
        let p = run(
            "tsc",
            "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
        );
        assert_eq!(
            (
                p[0].file.as_str(),
                p[0].line,
                p[0].column,
                p[0].code.as_deref()
            ),
            ("src/a.ts", 3, Some(7), Some("TS2322"))
        );
        let p = run(
            "gcc",
            "main.c:4:5: error: 'x' undeclared (first use in this function)\nmain.c: In function 'main':\n",
        );
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].line, p[0].severity.as_str()), (4, "error"));
        let p = run("go", "./main.go:3:2: undefined: x\n");
        assert_eq!(
            (p[0].file.as_str(), p[0].message.as_str()),
            ("./main.go", "undefined: x")
        );
        let p = run(
            "eslint-stylish",
            "/w/a.js\n  1:10  error    'f' is defined but never used  no-unused-vars\n  2:1   warning  Unexpected console statement   no-console\n\n✖ 2 problems\n",
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[1].file, "/w/a.js");
        assert_eq!(p[1].code.as_deref(), Some("no-console"));
        assert_eq!(p[1].severity, "warning");
    }

    #[test]
    fn a_python_traceback_gives_its_innermost_frame() {
        let out = "Traceback (most recent call last):\n  File \"/w/main.py\", line 9, in <module>\n    run()\n  File \"/w/lib.py\", line 2, in run\n    return 1 / 0\n           ~~^~~\nZeroDivisionError: division by zero\n";
        let p = run("python", out);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            (
                p[0].file.as_str(),
                p[0].line,
                p[0].code.as_deref(),
                p[0].message.as_str()
            ),
            (
                "/w/lib.py",
                2,
                Some("ZeroDivisionError"),
                "division by zero"
            )
        );
    }

    #[test]
    fn bad_matchers_are_refused_with_the_reason() {
        let cases = [
            (json!("nope"), json!([]), "no problem matcher `nope`"),
            (
                json!({"pattern": [{"regexp": "("}]}),
                json!([]),
                "line pattern 1",
            ),
            (
                json!({"pattern": [{"regexp": "a", "file": 2}]}),
                json!([]),
                "no capture group 2",
            ),
            (json!({"pattern": []}), json!([]), "1 to 16"),
            (json!(7), json!([]), "must be a matcher's name"),
            (
                json!({"owner": "x"}),
                json!([]),
                "no problem matcher for owner `x`",
            ),
            (json!({}), json!([]), "name a problem matcher"),
        ];
        for (def, pats, want) in cases {
            let e = perform_match(&def, &pats, "x").unwrap_err().to_string();
            assert!(e.contains(want), "{def}: {e}");
        }
    }

    #[test]
    fn given_patterns_replace_the_matchers() {
        let p = perform_match(
            &json!({"owner": "mine"}),
            &json!([{"regexp": "^(\\S+) at (\\d+)$", "file": 1, "line": 2}]),
            "a.txt at 12\n",
        )
        .unwrap();
        assert_eq!((p[0].file.as_str(), p[0].line), ("a.txt", 12));
    }
}
