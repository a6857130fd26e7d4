//! TODO.md items as tasks: `getTodo` and `startTodoItem`.
//!
//! `getTodo` reads `TODO.md` at the root of the project's default branch tip (not the user's
//! checkout: what is committed is what the team agreed on) and parses it as CommonMark with
//! pulldown-cmark. Every top-level list item (`-`, `*`, `+`, `1.`, `1)`), one not nested in
//! another list or a block quote, is an item: its `title` is its first line without the marker
//! (and without a task-list checkbox `[ ]` / `[x]`), its `body` the further lines with the
//! item's indentation removed, its `section` the text of the nearest heading above it. A list
//! inside a code block is code, not items. The title is the item's identity: `startTodoItem`
//! names the item by it.
//!
//! `startTodoItem` creates a task titled like the item (cut to a task title's 200 characters,
//! a tab as a space, other control characters as U+FFFD),
//! with `todo_item` set to the item's title, and starts its agent with the item (title, section
//! and body) as the first message. With `discuss`, the agent is asked to talk the item over
//! with the human before changing anything. Refused (409) while another active task has the
//! same item, 400 when no item has that title.

use std::path::PathBuf;

use byre_projections::Command;
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::{blocking, Ctx, Error};
use crate::api;

/// `TODO.md` files larger than this are refused (400): a TODO list is not a data file.
pub const MAX_TODO_BYTES: usize = 1024 * 1024;

/// One item of TODO.md (the contract's `TodoItem`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TodoItem {
    /// The item's first line without its list marker or checkbox.
    pub title: String,
    /// Its further lines, as Markdown with the item's indentation removed; empty when none.
    pub body: String,
    /// The text of the nearest heading above the item; empty when none.
    pub section: String,
}

/// The contract's `Todo`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Todo {
    /// Whether the default branch has a TODO.md at its root.
    pub exists: bool,
    /// The items, in file order.
    pub items: Vec<TodoItem>,
}

/// The items of a TODO.md text, in file order (see the module docs for the rules). CRLF line
/// ends read as LF; an item whose first line is empty is left out.
pub fn parse(text: &str) -> Vec<TodoItem> {
    let text = text.replace("\r\n", "\n");
    let mut items = Vec::new();
    let mut section = String::new();
    let mut heading: Option<String> = None;
    // Lists and block quotes we are inside; an item is top-level at depth 0.
    let mut depth = 0usize;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) if depth == 0 => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) if depth == 0 => {
                if let Some(h) = heading.take() {
                    section = h.trim().to_owned();
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = heading.as_mut() {
                    h.push(' ');
                }
            }
            Event::Start(Tag::Item) if depth == 1 => {
                if let Some(item) = item_at(&text[range], &section) {
                    items.push(item);
                }
            }
            Event::Start(Tag::List(_) | Tag::BlockQuote(_)) => depth += 1,
            Event::End(TagEnd::List(_) | TagEnd::BlockQuote(_)) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    items
}

/// One top-level item from its source text (marker first).
fn item_at(source: &str, section: &str) -> Option<TodoItem> {
    let mut lines = source.lines();
    let first = lines.next()?;
    let marker_end = marker_len(first)?;
    let after_marker = &first[marker_end..];
    let spaces = after_marker.len() - after_marker.trim_start_matches([' ', '\t']).len();
    // CommonMark: content starts 1–4 spaces after the marker; more is an indented code block.
    let indent = marker_end + spaces.clamp(1, 4);
    let mut title = after_marker.trim();
    for checkbox in ["[ ]", "[x]", "[X]"] {
        if let Some(rest) = title.strip_prefix(checkbox) {
            if rest.is_empty() || rest.starts_with([' ', '\t']) {
                title = rest.trim_start();
            }
        }
    }
    let title = title.trim_end().to_owned();
    if title.is_empty() {
        return None;
    }
    let body: Vec<&str> = lines.map(|l| dedent(l, indent)).collect();
    let body = body.join("\n");
    Some(TodoItem {
        title,
        body: body.trim_matches('\n').trim_end().to_owned(),
        section: section.to_owned(),
    })
}

/// The length of a list marker at the start of `line` (`-`, `*`, `+`, or 1–9 digits and `.` or
/// `)`), after up to 3 spaces of indentation; `None` when there is none.
fn marker_len(line: &str) -> Option<usize> {
    let lead = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[lead..];
    let n = match rest.as_bytes().first()? {
        b'-' | b'*' | b'+' => 1,
        b'0'..=b'9' => {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            match rest.as_bytes().get(digits) {
                Some(b'.' | b')') => digits + 1,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(lead + n)
}

/// `line` without up to `indent` leading spaces (a tab counts as reaching the next multiple of
/// 4 columns).
fn dedent(line: &str, indent: usize) -> &str {
    let mut col = 0;
    for (i, c) in line.char_indices() {
        if col >= indent {
            return &line[i..];
        }
        match c {
            ' ' => col += 1,
            '\t' => col = (col / 4 + 1) * 4,
            _ => return &line[i..],
        }
    }
    ""
}

/// `getTodo`: the items of TODO.md at the root of the project's default branch tip.
/// # Errors
/// Not found (unknown project); conflict (the default branch cannot be read); invalid (a
/// TODO.md over [`MAX_TODO_BYTES`] or that is not a file).
pub async fn get_todo(app: &Ctx, project_id: &str) -> Result<Todo, Error> {
    let (repo_path, branch) = project_repo(app, project_id)?;
    let text = blocking(move || {
        byre_git::files::file_at_branch(&repo_path, &branch, "TODO.md", MAX_TODO_BYTES).map_err(
            |e| match e {
                byre_git::files::FileAtBranch::TooLarge => Error::Invalid(format!(
                    "TODO.md is larger than {} KiB",
                    MAX_TODO_BYTES / 1024
                )),
                byre_git::files::FileAtBranch::NotAFile => {
                    Error::Invalid("TODO.md at the repository root is not a file".into())
                }
                byre_git::files::FileAtBranch::Git(e) => {
                    Error::Conflict(format!("cannot read the default branch: {e}"))
                }
            },
        )
    })
    .await?;
    Ok(match text {
        None => Todo {
            exists: false,
            items: Vec::new(),
        },
        Some(bytes) => Todo {
            exists: true,
            items: parse(&String::from_utf8_lossy(&bytes)),
        },
    })
}

fn project_repo(app: &Ctx, project_id: &str) -> Result<(PathBuf, String), Error> {
    app.writer
        .read(|s| {
            s.projects
                .get(project_id)
                .map(|p| (PathBuf::from(&p.repo_path), p.default_branch.clone()))
        })
        .ok_or_else(|| Error::NotFound(format!("no project `{project_id}`")))
}

/// Input of `startTodoItem` (the contract's `TodoStart`).
pub struct TodoStart {
    /// The item's title.
    pub title: String,
    /// The agent's model; the caller's default when absent or empty.
    pub model: Option<String>,
    /// Ask the agent to discuss the item before building anything.
    pub discuss: bool,
}

/// The first message of an item's task.
pub fn first_message(item: &TodoItem, discuss: bool) -> String {
    let mut m = format!(
        "Work on this item of the project's TODO.md:\n\n## {}\n",
        item.title
    );
    if !item.section.is_empty() {
        m.push_str(&format!("\n(Section: {})\n", item.section));
    }
    if !item.body.is_empty() {
        m.push('\n');
        m.push_str(&item.body);
        m.push('\n');
    }
    if discuss {
        m.push_str(
            "\nThe human wants to discuss this item with you first. Do not change any files yet: \
             read what you need, then say how you understand the item, what you would do and \
             what you would ask, and wait for their answer.\n",
        );
    }
    m
}

/// The title of an item's task: the item's title cut to 200 characters, a tab as a space and
/// any other control character (which a task title may not hold) as U+FFFD.
pub fn task_title(item_title: &str) -> String {
    item_title
        .chars()
        .take(200)
        .map(|c| match c {
            '\t' => ' ',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// `startTodoItem`: a task for TODO.md item `start.title`, with its agent started on the item.
/// # Errors
/// Not found (unknown project); invalid (no such item, bad model); conflict (another active
/// task has this item, or the default branch cannot be read).
pub async fn start_todo_item(
    app: &Ctx,
    actor: &str,
    project_id: &str,
    start: TodoStart,
) -> Result<api::Task, Error> {
    let todo = get_todo(app, project_id).await?;
    let item = todo
        .items
        .into_iter()
        .find(|i| i.title == start.title)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "TODO.md on the default branch has no item titled `{}`",
                start.title
            ))
        })?;
    if let Some(model) = start.model.as_deref().filter(|m| !m.is_empty()) {
        byre_projections::users::check_model(model)?;
    }
    let title = task_title(&item.title);
    let base_ref = super::task_creation::default_branch_tip(app, project_id).await?;
    let task_id = super::task_creation::create_with(
        app,
        Command::StartTodoItem {
            actor: actor.to_owned(),
            project_id: project_id.to_owned().into(),
            title,
            base_ref,
            todo_item: item.title.clone(),
        },
    )
    .await?;
    let prompt = first_message(&item, start.discuss);
    super::sessions::start_session(app, actor, &task_id, start.model, prompt, Vec::new()).await?;
    super::tasks::get_task(app, &task_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(title: &str, body: &str, section: &str) -> TodoItem {
        TodoItem {
            title: title.into(),
            body: body.into(),
            section: section.into(),
        }
    }

    #[test]
    fn odd_markdown_table() {
        let cases: &[(&str, &str, Vec<TodoItem>)] = &[
            ("an empty file", "", vec![]),
            ("no list", "# Plans\n\nJust prose.\n", vec![]),
            (
                "markers and sections",
                "# Now\n- one\n* two\n\n## Later\n+ three\n1. four\n2) five\n",
                vec![
                    item("one", "", "Now"),
                    item("two", "", "Now"),
                    item("three", "", "Later"),
                    item("four", "", "Later"),
                    item("five", "", "Later"),
                ],
            ),
            (
                "checkboxes stripped",
                "- [ ] open thing\n- [x] done thing\n- [X] Done too\n- [link](x) stays\n",
                vec![
                    item("open thing", "", ""),
                    item("done thing", "", ""),
                    item("Done too", "", ""),
                    item("[link](x) stays", "", ""),
                ],
            ),
            (
                "body dedented, nested list part of the body",
                "- Fix the login\n  It fails on Safari.\n\n  - check cookies\n    - deeper\n- Next\n",
                vec![
                    item(
                        "Fix the login",
                        "It fails on Safari.\n\n- check cookies\n  - deeper",
                        "",
                    ),
                    item("Next", "", ""),
                ],
            ),
            (
                "ordered marker width",
                "10. Ten\n    body of ten\n",
                vec![item("Ten", "body of ten", "")],
            ),
            (
                "a list in a code block is code",
                "# S\n```\n- not an item\n```\n    - indented code\n- real\n",
                vec![item("real", "", "S")],
            ),
            (
                "CRLF and no trailing newline",
                "# A\r\n- one\r\n  more\r\n- two",
                vec![item("one", "more", "A"), item("two", "", "A")],
            ),
            (
                "a list in a block quote is not top level",
                "> - quoted\n\n- top\n",
                vec![item("top", "", "")],
            ),
            (
                "heading with code and emphasis",
                "## The `api` *crate*\n- x\n",
                vec![item("x", "", "The api crate")],
            ),
            (
                "setext heading, empty item skipped",
                "Backlog\n=======\n-\n- kept\n",
                vec![item("kept", "", "Backlog")],
            ),
            (
                "lazy continuation stays in the body",
                "- title line\n  second line\nlazy line\n",
                vec![item("title line", "second line\nlazy line", "")],
            ),
        ];
        for (name, text, want) in cases {
            assert_eq!(&parse(text), want, "{name}");
        }
    }

    /// Fuzz-style: random mixes of Markdown fragments never panic; every item has a one-line,
    /// non-empty title and a one-line section.
    #[test]
    fn random_markdown_never_panics_and_titles_are_lines() {
        const PARTS: &[&str] = &[
            "- ", "* ", "+ ", "1. ", "2) ", "  ", "    ", "\n", "\r\n", "[ ] ", "[x]", "#", "## ",
            "===", "> ", "```", "~~~", "\t", "text", "é", "日本", "`", "**", "<b>", "\\", "|", "-",
            "1", ".", ")", "[", "]",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let len = (next() % 60) as usize;
            let md: String = (0..len)
                .map(|_| PARTS[(next() % PARTS.len() as u64) as usize])
                .collect();
            for item in parse(&md) {
                assert!(!item.title.is_empty(), "{md:?}");
                assert!(!item.title.contains(['\n', '\r']), "{md:?}: {item:?}");
                assert!(!item.section.contains('\n'), "{md:?}: {item:?}");
            }
        }
    }

    #[test]
    fn an_item_title_with_a_tab_or_control_characters_makes_a_valid_task_title() {
        let items = parse("- fix\tthis\n- a\u{7}b \u{1b}[31m red\n");
        assert_eq!(items[0].title, "fix\tthis");
        assert_eq!(task_title(&items[0].title), "fix this");
        assert_eq!(task_title(&items[1].title), "a\u{fffd}b \u{fffd}[31m red");
        assert_eq!(task_title(&"x".repeat(300)).chars().count(), 200);
        for i in items {
            assert!(!task_title(&i.title).chars().any(char::is_control));
        }
    }

    #[test]
    fn the_first_message_holds_the_item_and_the_discuss_request() {
        let i = item("Fix it", "Details.", "Bugs");
        let m = first_message(&i, false);
        assert!(m.contains("## Fix it") && m.contains("Details.") && m.contains("Bugs"));
        assert!(!m.contains("discuss"));
        assert!(first_message(&i, true).contains("discuss this item with you first"));
    }
}
