//! The docs hold together, and what a program knows is checked against it rather than copied
//! by hand: README.md and ARCHITECTURE.md stay short (at most 300 lines each); every relative
//! link of the docs (README.md, ARCHITECTURE.md, SECURITY.md, `docs/`, `schema/`, `bench/`,
//! `src/ui/README.md`) reaches a file that exists, and its `#anchor` a heading of that file
//! (GitHub's slugs); README's test command is the one `.ci/run` runs; the file list of
//! `src/ui/README.md` is exactly the files under `src/ui/`; and `docs/reference.md` names
//! every operationId of the contract.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::schema::Contract;

/// The repository's top: the nearest directory at or above this package's that holds
/// ARCHITECTURE.md (so the checks keep working when the package moves under `src/`).
fn root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        if dir.join("ARCHITECTURE.md").is_file() {
            return dir;
        }
        assert!(
            dir.pop(),
            "no ARCHITECTURE.md above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every Markdown page the link check reads.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "SECURITY.md",
        "src/ui/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    for dir in ["docs", "schema", "bench"] {
        pages.extend(
            files_under(&root.join(dir))
                .into_iter()
                .filter(|p| p.extension().is_some_and(|x| x == "md")),
        );
    }
    pages.retain(|p| p.is_file());
    pages.sort();
    pages
}

/// The text of `text` outside fenced code blocks, fenced lines left empty (so paragraphs
/// stay apart).
fn prose(text: &str) -> String {
    let mut fence: Option<String> = None;
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
        let is_fence =
            marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap());
        match &fence {
            Some(open) => {
                if is_fence
                    && marker.starts_with(open.as_str())
                    && t[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                out.push('\n');
            }
            None if is_fence => {
                fence = Some(marker);
                out.push('\n');
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// `paragraph` without its code spans (a run of n backticks up to the next run of exactly n;
/// an unmatched run is literal text).
fn without_code_spans(paragraph: &str) -> String {
    let chars: Vec<char> = paragraph.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|c| **c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// GitHub's anchor of a heading's text: lower case, spaces to `-`, every character but
/// letters, digits, `-` and `_` dropped (backticks and other punctuation included).
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page: its ATX headings' slugs (a repeated one numbered `-1`, `-2`, …)
/// and explicit `<a id="…">`s.
fn anchors(text: &str) -> BTreeSet<String> {
    let prose = prose(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose.lines() {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || line.len() - t.len() > 3 {
            continue;
        }
        let rest = &t[hashes..];
        if !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        // A closing run of `#`s is not part of the heading.
        let heading = rest.trim().trim_end_matches('#').trim_end();
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    for line in prose.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("<a id=\"") {
            rest = &rest[i + 7..];
            if let Some(j) = rest.find('"') {
                out.insert(rest[..j].to_owned());
            }
        }
    }
    out
}

/// The targets of a page's links outside code: inline `[text](target)` and `![alt](target)`,
/// reference definitions `[label]: target`, and HTML `href="…"`/`src="…"`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let prose = prose(text);
    for paragraph in prose.split("\n\n") {
        let clean = without_code_spans(paragraph);
        let mut rest = clean.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let target = rest.trim_start();
            let end = if let Some(inner) = target.strip_prefix('<') {
                // `[text](<a path with spaces>)`
                match inner.find('>') {
                    Some(j) => {
                        out.push(inner[..j].to_owned());
                        continue;
                    }
                    None => break,
                }
            } else {
                target
                    .find(|c: char| c == ')' || c.is_whitespace())
                    .unwrap_or(target.len())
            };
            out.push(target[..end].to_owned());
        }
        for line in clean.lines() {
            let t = line.trim_start();
            if t.starts_with('[') && !t.starts_with("[^") {
                if let Some(j) = t.find("]: ") {
                    if !t[1..j].contains(']') {
                        if let Some(target) = t[j + 3..].split_whitespace().next() {
                            out.push(target.trim_matches(|c| c == '<' || c == '>').to_owned());
                        }
                    }
                }
            }
        }
        for attr in ["href=\"", "src=\""] {
            let mut rest = clean.as_str();
            while let Some(i) = rest.find(attr) {
                rest = &rest[i + attr.len()..];
                if let Some(j) = rest.find('"') {
                    out.push(rest[..j].to_owned());
                }
            }
        }
    }
    out
}

/// `path` relative to the repository's top, for messages.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn readme_and_architecture_stay_short() {
    for (page, cap) in [("README.md", 300), ("ARCHITECTURE.md", 300)] {
        let lines = read(&root().join(page)).lines().count();
        assert!(
            lines <= cap,
            "{page} has {lines} lines, more than {cap}: move detail into docs/"
        );
    }
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = root();
    let mut broken = Vec::new();
    let pages = pages();
    assert!(
        pages.iter().any(|p| p.ends_with("docs/README.md")),
        "the docs index is among the pages: {pages:?}"
    );
    let mut n_links = 0;
    for page in &pages {
        let text = read(page);
        let dir = page.parent().unwrap();
        for target in links(&text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with("//")
            {
                continue;
            }
            n_links += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let file = file.split('?').next().unwrap_or("");
            let resolved = if file.is_empty() {
                page.clone()
            } else if let Some(abs) = file.strip_prefix('/') {
                root.join(abs)
            } else {
                dir.join(file)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", shown(page)));
                continue;
            }
            if resolved
                .canonicalize()
                .is_ok_and(|p| !p.starts_with(root.canonicalize().unwrap()))
            {
                broken.push(format!(
                    "{}: {target} (outside the repository)",
                    shown(page)
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                if resolved.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&resolved)).contains(anchor)
                {
                    broken.push(format!("{}: {target} (no such heading)", shown(page)));
                }
            }
        }
    }
    assert!(n_links > 50, "the links are found: {n_links}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_reader_follows_github() {
    assert_eq!(slug(" The `byre` command"), "the-byre-command");
    assert_eq!(slug(" TODO.md items"), "todomd-items");
    assert_eq!(
        slug("Signing in from a browser (token mode)"),
        "signing-in-from-a-browser-token-mode"
    );
    assert_eq!(slug(" --sandbox off"), "--sandbox-off");
    assert_eq!(slug("Reviews — and findings"), "reviews--and-findings");
    let heads = anchors("# A\n## A\n```\n# not a heading\n```\n## B: c ##\n#hashtag\n    # code\n");
    assert_eq!(heads.into_iter().collect::<Vec<_>>(), ["a", "a-1", "b-c"]);
    let found = links(
        "See [a](a.md#x) and `[code](no.md)`, ``[b](` `no2.md)`` and ![pic](p.png \"t\").\n\
         A [split\nlink](b.md) and [sp](<c d.md>).\n\n```\n[fenced](no3.md)\n```\n\n\
         [ref]: r.md\n<img src=\"i.png\">\n",
    );
    assert_eq!(
        found,
        ["a.md#x", "p.png", "b.md", "c d.md", "r.md", "i.png"]
    );
}

/// README's test command, in its "Run the tests" section, is the command `.ci/run` ends
/// with: CI runs exactly what README tells a contributor to run.
#[test]
fn readme_test_command_is_what_ci_runs() {
    let readme = read(&root().join("README.md"));
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Run the tests"))
        .expect("README.md has a section \"Run the tests\"");
    let command = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the section shows its command in a ```sh block")
        .trim()
        .to_owned();
    let ci = read(&root().join(".ci/run"));
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap();
    assert_eq!(
        command, last,
        "README's test command and .ci/run's last command differ"
    );
}

/// The "Files" list of `src/ui/README.md` names every file under `src/ui/` exactly once
/// (an entry ending in `/` stands for every file under that directory), and nothing else.
#[test]
fn the_ui_file_list_is_the_files_under_src_ui() {
    let ui = root().join("src/ui");
    let readme = read(&ui.join("README.md"));
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Files"))
        .expect("src/ui/README.md has a section \"Files\"");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the Files section lists them in a ```text block");
    let entries: Vec<&str> = block
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let files: BTreeSet<String> = files_under(&ui)
        .iter()
        .map(|p| {
            p.strip_prefix(&ui)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    let mut covered: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut empty = Vec::new();
    for entry in &entries {
        let matched: Vec<&String> = files
            .iter()
            .filter(|f| match entry.strip_suffix('/') {
                Some(dir) => f.starts_with(&format!("{dir}/")),
                None => f == entry,
            })
            .collect();
        if matched.is_empty() {
            empty.push(*entry);
        }
        for f in matched {
            covered.entry(f.clone()).or_default().push(entry);
        }
    }
    let unlisted: Vec<&String> = files.iter().filter(|f| !covered.contains_key(*f)).collect();
    let twice: Vec<(&String, &Vec<&str>)> = covered.iter().filter(|(_, e)| e.len() > 1).collect();
    assert!(
        empty.is_empty() && unlisted.is_empty() && twice.is_empty(),
        "src/ui/README.md \"Files\" drifted from src/ui/: listed but absent {empty:?}; \
         present but unlisted {unlisted:?}; listed twice {twice:?}"
    );
}

/// `docs/reference.md` names every operationId of the contract (in backticks), so its map of
/// operations to pages cannot silently miss one.
#[test]
fn the_reference_names_every_operation_of_the_contract() {
    let page = read(&root().join("docs/reference.md"));
    let missing: Vec<String> = Contract::get()
        .operation_ids()
        .into_iter()
        .filter(|op| !page.contains(&format!("`{op}`")))
        .collect();
    assert!(missing.is_empty(), "docs/reference.md lacks {missing:?}");
}
