//! The choices of an `ask_human` question, read from its Markdown context (spec `InboxItem`
//! payload): list items `- ( ) text` / `- (*) text` are pick-one choices, task-list items
//! `- [ ] text` / `- [x] text` pick-any ones; `(*)` and `[x]` mark the recommended choices.
//!
//! Parsed with pulldown-cmark (task lists are its own extension; `( )` is read from the item's
//! text). The first kind of choice in the document decides the question's kind; items of the
//! other kind are then ordinary list items. An item's text is its first paragraph, inline
//! Markdown reduced to its text; nested lists are items of their own.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// What the context offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choices {
    /// Each choice's text, in document order.
    pub options: Vec<String>,
    /// `true` for pick-any (`- [ ]`), `false` for pick-one (`- ( )`) or no choices.
    pub multiple: bool,
    /// The marked choices' text.
    pub recommended: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    One,
    Any,
}

struct OpenItem {
    slot: usize,
    text: String,
    task: Option<bool>,
    text_done: bool,
}

/// Reads the choices of `context`. Total: any input gives a (possibly empty) answer.
pub fn parse(context: &str) -> Choices {
    let mut found: Vec<Option<(Kind, String, bool)>> = Vec::new();
    let mut open: Vec<OpenItem> = Vec::new();
    for event in Parser::new_ext(context, Options::ENABLE_TASKLISTS) {
        match event {
            Event::Start(Tag::Item) => {
                found.push(None);
                open.push(OpenItem {
                    slot: found.len() - 1,
                    text: String::new(),
                    task: None,
                    text_done: false,
                });
            }
            Event::Start(Tag::List(_)) => {
                if let Some(top) = open.last_mut() {
                    top.text_done = true;
                }
            }
            Event::End(TagEnd::Paragraph) => {
                if let Some(top) = open.last_mut() {
                    top.text_done = true;
                }
            }
            Event::TaskListMarker(checked) => {
                if let Some(top) = open.last_mut() {
                    top.task = Some(checked);
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) => {
                if let Some(top) = open.last_mut().filter(|o| !o.text_done) {
                    top.text.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(top) = open.last_mut().filter(|o| !o.text_done) {
                    top.text.push(' ');
                }
            }
            Event::End(TagEnd::Item) => {
                if let Some(item) = open.pop() {
                    let slot = item.slot;
                    found[slot] = classify(item);
                }
            }
            _ => {}
        }
    }
    let mut kind = None;
    let mut out = Choices::default();
    for (k, text, marked) in found.into_iter().flatten() {
        if *kind.get_or_insert(k) != k {
            continue;
        }
        if marked {
            out.recommended.push(text.clone());
        }
        out.options.push(text);
    }
    out.multiple = kind == Some(Kind::Any);
    out
}

fn classify(item: OpenItem) -> Option<(Kind, String, bool)> {
    let text = item.text.trim();
    let (kind, marked, rest) = match item.task {
        Some(checked) => (Kind::Any, checked, text),
        None => {
            // `(*)` may lose its `*` to the emphasis parser when another `*` follows: `()`.
            if let Some(rest) = text.strip_prefix("( )") {
                (Kind::One, false, rest)
            } else if let Some(rest) = text.strip_prefix("(*)") {
                (Kind::One, true, rest)
            } else {
                return None;
            }
        }
    };
    let rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    (!rest.is_empty()).then_some((kind, rest, marked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(md: &str, options: &[&str], multiple: bool, recommended: &[&str]) {
        let c = parse(md);
        assert_eq!(c.options, options, "options of {md:?}");
        assert_eq!(c.multiple, multiple, "multiple of {md:?}");
        assert_eq!(c.recommended, recommended, "recommended of {md:?}");
    }

    #[test]
    fn pick_one_items_with_a_recommendation() {
        check(
            "Which colour?\n\n- ( ) red\n- (*) blue\n- ( ) green\n",
            &["red", "blue", "green"],
            false,
            &["blue"],
        );
    }

    #[test]
    fn pick_any_task_list_items() {
        check(
            "Pick:\n- [ ] tests\n- [x] docs\n- [X] bench\n",
            &["tests", "docs", "bench"],
            true,
            &["docs", "bench"],
        );
    }

    #[test]
    fn inline_markdown_is_reduced_to_text_and_nested_lists_are_items() {
        check(
            "- ( ) use **`redb`** as is\n  - ( ) nested choice\n- (*) write [our own](http://x) store\n",
            &["use redb as is", "nested choice", "write our own store"],
            false,
            &["write our own store"],
        );
    }

    #[test]
    fn the_first_kind_wins_and_plain_items_are_ignored() {
        check(
            "- plain\n- [ ] any one\n- ( ) one\n- [x] any two\n",
            &["any one", "any two"],
            true,
            &["any two"],
        );
    }

    #[test]
    fn no_choices_and_empty_ones() {
        check("Just text, no list.", &[], false, &[]);
        check("- ( )\n- [ ]   \n", &[], false, &[]);
        check("", &[], false, &[]);
        check("```\n- ( ) in code\n```\n", &[], false, &[]);
    }

    #[test]
    fn ordered_lists_and_other_bullets_count_too() {
        check("1. ( ) a\n2. (*) b\n", &["a", "b"], false, &["b"]);
        check("* [ ] a\n+ [x] b\n", &["a", "b"], true, &["b"]);
    }

    /// Fuzz-style: random mixes of Markdown fragments never panic, and every recommended
    /// choice is one of the options.
    #[test]
    fn random_markdown_never_panics_and_recommendations_are_options() {
        const PARTS: &[&str] = &[
            "- ", "* ", "1. ", "  ", "\n", "( )", "(*)", "[ ]", "[x]", "(", ")", "*", "`", "**",
            "[", "]", "text", "é", "> ", "```", "#", "\t", "<b>", "\\", "|", "-", "x",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5_000 {
            let mut md = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                md.push_str(PARTS[(seed % PARTS.len() as u64) as usize]);
            }
            let c = parse(&md);
            for r in &c.recommended {
                assert!(c.options.contains(r), "{md:?}: {c:?}");
            }
            assert!(c.options.iter().all(|o| !o.trim().is_empty()), "{md:?}");
        }
    }
}
