//! The architecture as tests: the crate graph has the allowed edges only (ARCHITECTURE.md,
//! "Crate graph"), no import cycle spans two top-level modules of one crate, and the CodeBolt
//! adapter only translates. Cargo already refuses an import of a crate that is not a
//! dependency; these tests refuse the dependency itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Each workspace crate and the workspace crates it may depend on (normal and build
/// dependencies). A crate missing here, or an edge missing here, fails
/// [`every_crate_depends_only_on_crates_its_layer_allows`].
const ALLOWED: &[(&str, &[&str])] = &[
    ("byre-projections", &[]),
    ("byre-process", &[]),
    ("byre-beneath", &[]),
    ("byre-connect", &["byre-beneath"]),
    ("byre-log", &["byre-projections"]),
    (
        "byre-git",
        &["byre-process", "byre-connect", "byre-beneath"],
    ),
    (
        "byre-agents",
        &[
            "byre-projections",
            "byre-log",
            "byre-git",
            "byre-process",
            "byre-beneath",
        ],
    ),
    (
        "byre-terminal",
        &[
            "byre-projections",
            "byre-log",
            "byre-agents",
            "byre-process",
            "byre-beneath",
        ],
    ),
    ("byre-code", &["byre-git", "byre-beneath"]),
    ("byre-browser", &["byre-process"]),
    (
        "byre-toolboxes",
        &["byre-agents", "byre-process", "byre-beneath"],
    ),
    ("byre-machines", &["byre-connect", "byre-beneath"]),
    (
        "byre-app",
        &[
            "byre-projections",
            "byre-log",
            "byre-git",
            "byre-process",
            "byre-connect",
            "byre-agents",
            "byre-terminal",
            "byre-machines",
            "byre-browser",
            "byre-toolboxes",
        ],
    ),
    ("byre-client", &["byre-process", "byre-connect"]),
    (
        "byre",
        &[
            "byre-projections",
            "byre-log",
            "byre-git",
            "byre-process",
            "byre-connect",
            "byre-agents",
            "byre-terminal",
            "byre-code",
            "byre-browser",
            "byre-toolboxes",
            "byre-machines",
            "byre-app",
            "byre-client",
        ],
    ),
    ("byre-fake-models", &[]),
    (
        "byre-bench",
        &[
            "byre",
            "byre-projections",
            "byre-log",
            "byre-app",
            "byre-agents",
            "byre-git",
            "byre-fake-models",
        ],
    ),
];

/// The crate of the adapters (HTTP, MCP, CodeBolt), startup and the CLI: no other crate but
/// the benchmarks' may depend on it.
const ADAPTERS: &str = "byre";
/// What both the server and `byre client` may use: nothing of the server.
const SHARED: &[&str] = &["byre-process", "byre-beneath", "byre-connect"];
/// Outside crates a crate must not depend on (normal or build): the projections do no I/O;
/// the adapters never touch git2 (the CodeBolt adapter's git is byre-git's) nor redb.
const FORBIDDEN_OUTSIDE: &[(&str, &[&str])] = &[
    (
        "byre-projections",
        &["tokio", "redb", "git2", "chrono", "uuid", "reqwest"],
    ),
    ("byre", &["git2", "redb", "bincode"]),
    ("byre-client", &["redb", "git2", "actix-web"]),
];

/// The workspace's packages from `cargo metadata`: name → (manifest dir, [(dependency, kind)]).
fn workspace() -> BTreeMap<String, (PathBuf, Vec<(String, String)>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let dir = Path::new(p["manifest_path"].as_str().unwrap())
                .parent()
                .unwrap()
                .to_owned();
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
                    (d["name"].as_str().unwrap().to_owned(), kind)
                })
                .collect();
            (p["name"].as_str().unwrap().to_owned(), (dir, deps))
        })
        .collect()
}

fn allowed(name: &str) -> Option<&'static [&'static str]> {
    ALLOWED.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

#[test]
fn every_crate_depends_only_on_crates_its_layer_allows() {
    let packages = workspace();
    let ours: BTreeSet<&str> = packages.keys().map(String::as_str).collect();
    let mut wrong = Vec::new();
    for (name, (_, deps)) in &packages {
        let Some(may) = allowed(name) else {
            wrong.push(format!(
                "{name} is not in ALLOWED: place it in the layers first"
            ));
            continue;
        };
        for (dep, kind) in deps {
            if kind != "dev" && ours.contains(dep.as_str()) && !may.contains(&dep.as_str()) {
                wrong.push(format!(
                    "{name} depends on {dep}, which its layer does not allow"
                ));
            }
        }
    }
    for (name, _) in ALLOWED {
        if !ours.contains(name) {
            wrong.push(format!("ALLOWED names {name}, which is no workspace crate"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_allowed_graph_keeps_adapters_outside_and_the_client_off_the_server() {
    for (name, deps) in ALLOWED {
        if *name != "byre-bench" {
            assert!(
                !deps.contains(&ADAPTERS),
                "{name} may not depend on the adapters' crate"
            );
        }
        assert!(!deps.contains(name), "{name} depends on itself");
    }
    let client = allowed("byre-client").unwrap();
    assert!(
        client.iter().all(|d| SHARED.contains(d)),
        "byre-client may use only what the server shares: {client:?}"
    );
    for shared in SHARED {
        let deps = allowed(shared).unwrap();
        assert!(
            deps.iter().all(|d| SHARED.contains(d)),
            "{shared} is shared with byre client, so it depends on no server crate: {deps:?}"
        );
    }
    // The allowed graph itself has no cycle: every crate's allowed dependencies come before it.
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    for (name, deps) in ALLOWED {
        for d in *deps {
            assert!(
                placed.contains(d),
                "{name} may depend on {d}, which ALLOWED lists later: keep it in layer order"
            );
        }
        placed.insert(name);
    }
}

#[test]
fn no_crate_depends_on_an_outside_crate_its_layer_forbids() {
    let packages = workspace();
    let mut wrong = Vec::new();
    for (name, forbidden) in FORBIDDEN_OUTSIDE {
        let (_, deps) = &packages[*name];
        for (dep, kind) in deps {
            if kind != "dev" && forbidden.contains(&dep.as_str()) {
                wrong.push(format!("{name} depends on {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A crate's source files by its top-level module (the crate root's own file under `""`).
fn modules_of(root_file: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let dir = root_file.parent().unwrap();
    let root_text = std::fs::read_to_string(root_file).unwrap();
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    modules.insert(String::new(), vec![root_file.to_owned()]);
    for line in root_text.lines() {
        let line = line.trim();
        let Some(rest) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("mod "))
        else {
            continue;
        };
        let Some(name) = rest.strip_suffix(';') else {
            continue; // an inline module is part of the root's file
        };
        let mut files = Vec::new();
        for file in [
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ] {
            if file.is_file() {
                files.push(file);
            }
        }
        collect_rs(&dir.join(name), &mut files);
        files.sort();
        files.dedup();
        modules.insert(name.to_owned(), files);
    }
    modules
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.join("Cargo.toml").exists() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The identifier `text` starts with (after spaces), if any.
fn first_name(text: &str) -> Option<String> {
    let name: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The top-level modules `text` names through `crate::X` (also `use crate::{X, Y::…}`),
/// comments left out. (`super::…::X` reaching the root: [`super_paths`].)
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `byre_crate::`, not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Only the group's first level names modules: `a::b` names `a`.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.extend(first_name(&item));
                        item.clear();
                    }
                    _ if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            found.extend(first_name(&item));
        } else {
            found.extend(first_name(rest));
        }
    }
    found
}

/// How many `super::` lead from the file at `path` (a module file under `dir`, the crate
/// root's directory) to the crate root: 1 for `dir/a.rs` and `dir/a/mod.rs`, 2 for
/// `dir/a/b.rs`, ….
fn depth(dir: &Path, path: &Path) -> usize {
    let rel = path.strip_prefix(dir).unwrap();
    let n = rel.components().count();
    if rel.file_name().is_some_and(|f| f == "mod.rs") {
        n - 1
    } else {
        n
    }
}

/// The top-level modules a file at `depth` names through `super::…::X` leading to the crate
/// root, in its code outside its test module (inside one, `super` counts one more).
fn super_paths(text: &str, depth: usize) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    };
    let up = "super::".repeat(depth);
    crate_paths(
        &code
            .replace(&up, "crate::")
            .replace("crate::super::", "super::"),
    )
}

/// The edges between a crate's top-level modules: module → the others it names.
fn module_graph(root_file: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let dir = root_file.parent().unwrap();
    let modules = modules_of(root_file);
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, files)| {
            let mut to = BTreeSet::new();
            for f in files {
                let text = std::fs::read_to_string(f).unwrap();
                let mut named = crate_paths(&text);
                named.extend(super_paths(&text, depth(dir, f)));
                to.extend(named.into_iter().filter(|n| n != m && names.contains(n)));
            }
            (m.clone(), to)
        })
        .collect()
}

/// The import cycles of `graph`: each set of two or more modules that all reach one another
/// (its strongly connected components, Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut part = BTreeSet::new();
                while let Some(m) = self.stack.pop() {
                    part.insert(m.to_owned());
                    if m == node {
                        break;
                    }
                }
                if part.len() > 1 {
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

/// The import cycles between top-level modules that are still there (issue 29 item 1 left
/// them): the projections' families, whose models, decisions and events name one another's,
/// and the parts of the test-support fake model server. A new cycle, or one of these
/// changing, fails [`no_import_cycle_spans_two_top_level_modules_of_a_crate`]: one that
/// shrinks is written here smaller, one that goes is taken out.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[
    (
        "byre-projections",
        &[
            "event",
            "finish",
            "focus",
            "fork",
            "inbox",
            "lead",
            "projects",
            "reviews",
            "runs",
            "sessions",
            "snapshots",
            "subagents",
            "subtasks",
            "tasks",
            "terminals",
            "testkit",
            "tools",
            "users",
            "workflows",
        ],
    ),
    (
        "byre-fake-models",
        &["anthropic", "http", "openai", "request", "script", "server"],
    ),
];

#[test]
fn no_import_cycle_spans_two_top_level_modules_of_a_crate() {
    let packages = workspace();
    let mut wrong = Vec::new();
    for (name, (dir, _)) in &packages {
        let root = ["lib.rs", "src/lib.rs"]
            .iter()
            .map(|f| dir.join(f))
            .find(|f| f.is_file());
        let Some(root) = root else { continue };
        let known: Vec<BTreeSet<String>> = KNOWN_CYCLES
            .iter()
            .filter(|(crate_name, _)| crate_name == name)
            .map(|(_, modules)| modules.iter().map(|m| m.to_string()).collect())
            .collect();
        let found = cycles(&module_graph(&root));
        for c in &found {
            if !known.contains(c) {
                wrong.push(format!("{name}: {c:?}"));
            }
        }
        for k in &known {
            if !found.contains(k) {
                wrong.push(format!(
                    "{name}: {k:?} is no longer a cycle: update KNOWN_CYCLES"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "import cycles:\n{}", wrong.join("\n"));
}

#[test]
fn the_cycle_check_sees_grouped_imports_and_ignores_comments_and_other_crates() {
    let text =
        "use crate::{a::b, c, d::{e, f}};\nuse byre_crate::z;\n// crate::y\nlet x = crate::g::h();";
    let found: Vec<String> = crate_paths(text).into_iter().collect();
    assert_eq!(found, ["a", "c", "d", "g"]);
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    let abc: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    assert_eq!(cycles(&graph), [abc]);
    let acyclic = BTreeMap::from([("a".to_owned(), BTreeSet::from(["b".to_owned()]))]);
    assert!(cycles(&acyclic).is_empty());
    // From `dir/a/b.rs`, `super::super::c` is the crate's `c`, and `super::x` is `a`'s own.
    let nested =
        "use super::super::c::D;\nuse super::x;\n#[cfg(test)]\nmod tests { use super::super::e; }";
    assert_eq!(Vec::from_iter(super_paths(nested, 2)), ["c"]);
    assert_eq!(depth(Path::new("/s"), Path::new("/s/a/b.rs")), 2);
    assert_eq!(depth(Path::new("/s"), Path::new("/s/a/mod.rs")), 1);
    assert_eq!(depth(Path::new("/s"), Path::new("/s/a.rs")), 1);
}

/// The code of a file without its `#[cfg(test)]` module and comments.
fn code_without_tests(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => &text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_codebolt_adapter_calls_no_git_spawns_no_process_and_submits_nothing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/codebolt");
    let mut files = Vec::new();
    collect_rs(&dir, &mut files);
    assert!(files.len() >= 5, "{files:?}");
    let forbidden = [
        "git2",
        "process::Command",
        "Command::new",
        "pre_exec",
        "tokio::process",
        ".submit(",
        "Writer",
        ".writer",
        "subscription::subscribe",
    ];
    let mut wrong = Vec::new();
    for f in &files {
        let code = code_without_tests(f);
        for word in forbidden {
            if code.contains(word) {
                wrong.push(format!("{}: {word}", f.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
