//! Code utilities from a real parser: the definitions (functions, types, classes, …) of a
//! worktree's source files, found with tree-sitter grammars for Rust, Python, JavaScript,
//! TypeScript (and TSX) and Go, and the worktree as one Markdown document. CodeBolt's
//! `listCodeDefinitionNames` and `getAllFilesMarkdown` answer from here.
//!
//! Paths are checked as the worktree views check theirs (`git::views::WorkPath`: relative or
//! absolute under the worktree, no `..`, no `.git`, symlinks resolved and proven inside); a
//! directory is walked without following symlinks, skipping `.git`, `node_modules` and
//! `target`. What counts as a definition is data: for each language, a table of tree-sitter
//! node kinds and the word shown for them ([`kinds`]).

use std::path::Path;

use serde::Serialize;

use byre_beneath::{Kind, Links};
use byre_git::views::{ViewError as Error, WorkPath, Worktree};

/// Most files one request parses.
pub const MAX_FILES: usize = 500;
/// Largest file parsed, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Longest Markdown `getAllFilesMarkdown` answers, in bytes (whole files only).
pub const MAX_MARKDOWN_BYTES: usize = 4 * 1024 * 1024;
/// Directories a walk never enters.
const SKIPPED_DIRS: &[&str] = &[".git", "node_modules", "target"];

/// A language byre parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// `.rs`
    Rust,
    /// `.py`, `.pyi`
    Python,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.go`
    Go,
}

impl Lang {
    /// The language of a file, by its extension; `None` for a file byre does not parse.
    pub fn of(path: &Path) -> Option<Lang> {
        Some(match path.extension()?.to_str()? {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    /// The Markdown fence's info string for the language.
    pub fn fence(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Go => "go",
        }
    }

    fn grammar(self) -> tree_sitter::Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }
}

/// The definitions of a language: (tree-sitter node kind, the word shown for it). A node's
/// name is its `name` field (an `impl`'s: its `type` field).
pub fn kinds(lang: Lang) -> &'static [(&'static str, &'static str)] {
    const JS: &[(&str, &str)] = &[
        ("function_declaration", "function"),
        ("generator_function_declaration", "function"),
        ("class_declaration", "class"),
        ("method_definition", "method"),
        // `const f = () => …` and `const f = function …`: see `variable_function`.
        ("variable_declarator", "function"),
    ];
    const TS: &[(&str, &str)] = &[
        ("function_declaration", "function"),
        ("generator_function_declaration", "function"),
        ("function_signature", "function"),
        ("class_declaration", "class"),
        ("abstract_class_declaration", "class"),
        ("method_definition", "method"),
        ("method_signature", "method"),
        ("abstract_method_signature", "method"),
        ("interface_declaration", "interface"),
        ("type_alias_declaration", "type"),
        ("enum_declaration", "enum"),
        ("variable_declarator", "function"),
    ];
    match lang {
        Lang::Rust => &[
            ("function_item", "fn"),
            ("function_signature_item", "fn"),
            ("struct_item", "struct"),
            ("enum_item", "enum"),
            ("union_item", "union"),
            ("trait_item", "trait"),
            ("impl_item", "impl"),
            ("mod_item", "mod"),
            ("type_item", "type"),
            ("const_item", "const"),
            ("static_item", "static"),
            ("macro_definition", "macro_rules!"),
        ],
        Lang::Python => &[
            ("function_definition", "def"),
            ("class_definition", "class"),
        ],
        Lang::JavaScript => JS,
        Lang::TypeScript | Lang::Tsx => TS,
        Lang::Go => &[
            ("function_declaration", "func"),
            ("method_declaration", "func"),
            ("type_spec", "type"),
        ],
    }
}

/// One definition in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// The file, relative to the worktree.
    pub file: String,
    /// Its first line, 1-based.
    pub line: usize,
    /// The word for its kind (`fn`, `class`, `interface`, …: [`kinds`]).
    pub kind: &'static str,
    /// Its name as written (an `impl`: its type, with the trait: `Display for Point`).
    pub name: String,
    /// How many definitions enclose it (a method in an `impl` or class: 1).
    pub depth: usize,
}

/// Definitions of the files under a path.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Definitions {
    /// Every definition found, by file (in path order), then by position.
    pub definitions: Vec<Definition>,
    /// How many files were parsed.
    pub n_files: usize,
}

impl Definitions {
    /// The text form (a sentence saying so when there is none): each file with definitions,
    /// then one line per definition
    /// (`  <line>: <kind> <name>`, indented two more spaces per enclosing definition).
    ///
    /// ```text
    /// src/lib.rs:
    ///   1: fn add
    ///   5: struct Point
    ///   9: impl Point
    ///     10: fn norm
    /// ```
    pub fn text(&self) -> String {
        if self.definitions.is_empty() {
            return format!(
                "No source code definitions found ({} file(s) parsed).\n",
                self.n_files
            );
        }
        let mut out = String::new();
        let mut file = None;
        for d in &self.definitions {
            if file != Some(&d.file) {
                if file.is_some() {
                    out.push('\n');
                }
                out.push_str(&format!("{}:\n", d.file));
                file = Some(&d.file);
            }
            let indent = "  ".repeat(d.depth + 1);
            out.push_str(&format!("{indent}{}: {} {}\n", d.line, d.kind, d.name));
        }
        out
    }
}

/// The definitions in `source`, a file of `lang` shown as `file`.
pub fn parse_definitions(lang: Lang, file: &str, source: &str) -> Vec<Definition> {
    let mut parser = tree_sitter::Parser::new();
    if parser.set_language(&lang.grammar()).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(source, None) else {
        return Vec::new();
    };
    let table = kinds(lang);
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    // Depth-first over the tree with a cursor (no recursion: a deep tree cannot overflow the
    // stack); `open` holds the end bytes of the definitions enclosing the cursor.
    let mut cursor = tree.walk();
    let mut open: Vec<usize> = Vec::new();
    loop {
        let node = cursor.node();
        while open.last().is_some_and(|end| node.start_byte() >= *end) {
            open.pop();
        }
        if let Some((_, word)) = table.iter().find(|(k, _)| *k == node.kind()) {
            if let Some(name) = name_of(node, bytes) {
                out.push(Definition {
                    file: file.to_owned(),
                    line: node.start_position().row + 1,
                    kind: word,
                    name,
                    depth: open.len(),
                });
                open.push(node.end_byte());
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return out;
            }
        }
    }
}

/// A definition node's name; `None` when the node is not one after all (a variable whose
/// value is no function).
fn name_of(node: tree_sitter::Node<'_>, bytes: &[u8]) -> Option<String> {
    let text = |n: tree_sitter::Node<'_>| n.utf8_text(bytes).ok().map(str::to_owned);
    match node.kind() {
        "impl_item" => {
            let ty = text(node.child_by_field_name("type")?)?;
            Some(match node.child_by_field_name("trait").and_then(text) {
                Some(t) => format!("{t} for {ty}"),
                None => ty,
            })
        }
        "variable_declarator" => {
            let value = node.child_by_field_name("value")?;
            matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "function" | "generator_function"
            )
            .then_some(())?;
            text(node.child_by_field_name("name")?)
        }
        _ => text(node.child_by_field_name("name")?),
    }
}

/// The parsable files at `path` (a file, or every file under a directory), relative to the
/// worktree, in path order, at most [`MAX_FILES`]. Walked beneath the worktree's handle with
/// no symlink followed (`byre_beneath`): the agent writes the worktree meanwhile.
fn files_under(worktree: &Worktree, path: &WorkPath) -> Vec<(String, Lang)> {
    let mut out = Vec::new();
    let dir = worktree.dir();
    let start = path.found();
    let Ok(meta) = dir.symlink_metadata(start, Links::Refuse) else {
        return out;
    };
    if meta.is_file() {
        if let Some(lang) = Lang::of(start) {
            out.push((start.to_string_lossy().into_owned(), lang));
        }
        return out;
    }
    let mut stack = vec![start.to_owned()];
    while let Some(at) = stack.pop() {
        let Ok(mut entries) = dir.entries(&at, Links::Refuse) else {
            continue;
        };
        entries.sort_by(|a, b| b.name.cmp(&a.name));
        for e in entries {
            let p = at.join(&e.name);
            match e.kind {
                Kind::Dir if !SKIPPED_DIRS.iter().any(|s| e.name == *s) => stack.push(p),
                Kind::File => {
                    if let Some(lang) = Lang::of(&p) {
                        out.push((p.to_string_lossy().into_owned(), lang));
                    }
                }
                _ => {}
            }
        }
    }
    out.sort();
    out.truncate(MAX_FILES);
    out
}

/// A regular file's text, at most [`MAX_FILE_BYTES`], reached through no symlink.
fn read_source(worktree: &Worktree, rel: &str) -> Option<String> {
    let bytes = worktree
        .dir()
        .read(Path::new(rel), Links::Refuse, MAX_FILE_BYTES)
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn open(worktree_path: &Path, raw: &str) -> Result<(Worktree, WorkPath), Error> {
    let worktree = Worktree::open(worktree_path)?;
    let raw = raw.trim();
    let raw = raw.strip_prefix("./").unwrap_or(raw).trim_end_matches('/');
    let raw = if raw == "." { "" } else { raw };
    let path = WorkPath::parse_absolute_or_relative(raw, &worktree)?;
    Ok((worktree, path))
}

/// `listCodeDefinitionNames`: the definitions of the file, or of every parsable file under
/// the directory, at `raw` (relative to the worktree, or absolute under it; `""` is the root).
/// # Errors
/// Invalid: a path outside the worktree, into `.git` or malformed; not found: nothing there;
/// conflict: the worktree is missing.
pub fn list_code_definition_names(worktree_path: &Path, raw: &str) -> Result<Definitions, Error> {
    let (worktree, path) = open(worktree_path, raw)?;
    let mut defs = Definitions::default();
    for (rel, lang) in files_under(&worktree, &path) {
        if let Some(source) = read_source(&worktree, &rel) {
            defs.n_files += 1;
            defs.definitions
                .extend(parse_definitions(lang, &rel, &source));
        }
    }
    Ok(defs)
}

/// `getAllFilesMarkdown`: every parsable source file of the worktree as Markdown, in path
/// order: a `## <path>` heading, the file's definitions (`- <line>: <kind> <name>`), then
/// its text fenced with its language; whole files only, up to [`MAX_MARKDOWN_BYTES`].
/// # Errors
/// Conflict: the worktree is missing.
pub fn all_files_markdown(worktree_path: &Path) -> Result<String, Error> {
    let (worktree, root) = open(worktree_path, "")?;
    let mut md = String::new();
    for (rel, lang) in files_under(&worktree, &root) {
        let Some(source) = read_source(&worktree, &rel) else {
            continue;
        };
        let mut part = format!("## {rel}\n\n");
        for d in parse_definitions(lang, &rel, &source) {
            let indent = "  ".repeat(d.depth);
            part.push_str(&format!("{indent}- {}: {} {}\n", d.line, d.kind, d.name));
        }
        let fence = if source.contains("```") {
            "````"
        } else {
            "```"
        };
        part.push_str(&format!(
            "\n{fence}{}\n{source}{}{fence}\n\n",
            lang.fence(),
            if source.ends_with('\n') { "" } else { "\n" }
        ));
        if md.len() + part.len() > MAX_MARKDOWN_BYTES {
            break;
        }
        md.push_str(&part);
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(lang: Lang, src: &str) -> Vec<(usize, &'static str, String, usize)> {
        parse_definitions(lang, "f", src)
            .into_iter()
            .map(|d| (d.line, d.kind, d.name, d.depth))
            .collect()
    }

    #[test]
    fn rust_functions_types_and_impl_methods() {
        let src = "pub fn add(a: i32) -> i32 { a }\nstruct P;\nimpl std::fmt::Debug for P {\n    fn fmt(&self) {}\n}\nfn after() {}\n";
        assert_eq!(
            names(Lang::Rust, src),
            [
                (1, "fn", "add".into(), 0),
                (2, "struct", "P".into(), 0),
                (3, "impl", "std::fmt::Debug for P".into(), 0),
                (4, "fn", "fmt".into(), 1),
                (6, "fn", "after".into(), 0),
            ]
        );
    }

    #[test]
    fn typescript_python_go_and_javascript() {
        let ts = "export function greet(n: string): string { return n }\ninterface Shape { area(): number }\nclass Sq { area() { return 1 } }\nconst twice = (x: number) => 2 * x;\nconst n = 3;\n";
        assert_eq!(
            names(Lang::TypeScript, ts),
            [
                (1, "function", "greet".into(), 0),
                (2, "interface", "Shape".into(), 0),
                (2, "method", "area".into(), 1),
                (3, "class", "Sq".into(), 0),
                (3, "method", "area".into(), 1),
                (4, "function", "twice".into(), 0),
            ]
        );
        let py = "class A:\n    def m(self):\n        pass\n\ndef f():\n    pass\n";
        assert_eq!(
            names(Lang::Python, py),
            [
                (1, "class", "A".into(), 0),
                (2, "def", "m".into(), 1),
                (5, "def", "f".into(), 0)
            ]
        );
        let go = "package m\n\ntype T struct{}\n\nfunc (t T) M() {}\n\nfunc F() {}\n";
        assert_eq!(
            names(Lang::Go, go),
            [
                (3, "type", "T".into(), 0),
                (5, "func", "M".into(), 0),
                (7, "func", "F".into(), 0)
            ]
        );
        let js = "function a() {}\nconst b = function () {};\n";
        assert_eq!(
            names(Lang::JavaScript, js),
            [
                (1, "function", "a".into(), 0),
                (2, "function", "b".into(), 0)
            ]
        );
    }

    #[test]
    fn paths_are_checked_like_the_worktree_views() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "fn not_code() {}\n").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("out")).unwrap();
        for root in ["", ".", "./", "src", "src/a.rs"] {
            let d = list_code_definition_names(dir.path(), root).unwrap();
            assert_eq!(d.text(), "src/a.rs:\n  1: fn a\n", "{root:?}");
        }
        let abs = dir.path().join("src").display().to_string();
        assert_eq!(
            list_code_definition_names(dir.path(), &abs)
                .unwrap()
                .n_files,
            1
        );
        for bad in ["../", "out", "/etc", "src/../../x", ".git"] {
            assert!(
                list_code_definition_names(dir.path(), bad).is_err(),
                "{bad:?}"
            );
        }
        let none = list_code_definition_names(dir.path(), "notes.txt").unwrap();
        assert!(none.text().starts_with("No source code definitions found"));
    }

    #[test]
    fn symlinked_binary_and_huge_files_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.rs"), "fn secret() {}\n").unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
        // A symlink to a file outside, one to a directory outside, and one inside.
        std::os::unix::fs::symlink(
            outside.path().join("secret.rs"),
            dir.path().join("src/leak.rs"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("src/out")).unwrap();
        std::os::unix::fs::symlink("a.rs", dir.path().join("src/alias.rs")).unwrap();
        // Not UTF-8, and over the size limit.
        std::fs::write(dir.path().join("src/bin.rs"), b"fn b() {}\n\xff\xfe\0").unwrap();
        let huge = "fn h() {}\n".repeat(MAX_FILE_BYTES as usize / 10 + 1);
        std::fs::write(dir.path().join("src/huge.rs"), huge).unwrap();
        let d = list_code_definition_names(dir.path(), "src").unwrap();
        assert_eq!(d.text(), "src/a.rs:\n  1: fn a\n");
        let md = all_files_markdown(dir.path()).unwrap();
        assert!(md.starts_with("## src/a.rs\n"), "{md}");
        assert!(!md.contains("secret") && !md.contains("fn h()"), "{md}");
        assert!(list_code_definition_names(dir.path(), "src/leak.rs").is_err());
        assert!(list_code_definition_names(dir.path(), "src/out").is_err());
        let huge = list_code_definition_names(dir.path(), "src/huge.rs").unwrap();
        assert_eq!(huge.n_files, 0);
    }

    #[test]
    fn broken_source_still_gives_what_parses() {
        let got = names(Lang::Rust, "fn ok() {}\nfn broken( {\n");
        assert_eq!(got[0], (1, "fn", "ok".into(), 0));
    }
}
