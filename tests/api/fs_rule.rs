//! The rule of `docs/sandbox.md`, "What byre itself does in an agent's directories", kept by a
//! test: byre's own code opens, reads, writes, creates, lists, copies or removes what an agent
//! can write (worktrees, session dirs, lead dirs, terminal homes, transfer staging) only through
//! `byre_beneath` (a handle, the kernel resolving beneath it), and lets libgit2 read a worktree
//! only in the task's sandbox (`git::boxed`). Every other file system call in the server's
//! source is on a path of byre's own (its data dir's layout, `/proc`, the user's checkout,
//! configuration) and is listed below with why; a new one makes this test fail until it goes
//! through `byre_beneath` or is added here with its reason.
//!
//! Not scanned: `src/beneath` (the one way), `src/client` (the user's own machine), `src/log`
//! (the redb file), `src/cli`, `src/http` and `src/ui` (no file system work on agents' places),
//! and tests (a file's `#[cfg(test)]` part, `tests.rs`, `*_tests.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What counts as a file system call.
const CALLS: [&str; 10] = [
    "std::fs::",
    "tokio::fs::",
    "File::open",
    "File::create",
    "OpenOptions",
    "tempdir_in",
    "NamedTempFile::new_in",
    ".exists()",
    ".is_file()",
    ".is_dir()",
];

/// Calls of `fs::` imported as a module (`use std::fs;`).
const FS_MODULE_CALLS: [&str; 12] = [
    "fs::read",
    "fs::write",
    "fs::copy",
    "fs::remove",
    "fs::create",
    "fs::rename",
    "fs::metadata",
    "fs::symlink_metadata",
    "fs::canonicalize",
    "fs::set_permissions",
    "fs::File",
    "fs::DirBuilder",
];

/// Directories of `src/` not scanned (see the module's doc).
const NOT_SCANNED: [&str; 6] = ["beneath", "client", "log", "cli", "http", "ui"];

/// Each file's file system calls outside `byre_beneath`, and why each is on byre's own path.
const ALLOWED: &[(&str, usize, &str)] = &[
    ("config.rs", 5, "the token file and --repos-root directories the operator names"),
    ("startup.rs", 4, "the data dir, byre's user's home (to hide it), the lock file"),
    ("mcp/stdio.rs", 1, "byre mcp reads its token file, in the sandbox"),
    ("codebolt/agents.rs", 3, "the configured agents directories (the operator's)"),
    ("process/lib.rs", 1, "a program in a directory of PATH"),
    ("process/groups.rs", 8, "/proc: byre's alone"),
    ("process/private_files.rs", 5, "the data dir itself: its mode at start-up"),
    ("connect/archive.rs", 4, "byre client's side: the directory holding the user's own path on their machine"),
    ("agents/codeboltjs.rs", 8, "the configured agents directories and NODE_PATH; the worktree's own path, canonicalized to compare"),
    ("agents/mcp_launch.rs", 8, "DATA/mcp-tokens and mcp.secret: byre's alone, in no sandbox"),
    ("agents/reaper.rs", 3, "DATA/run: byre's alone"),
    ("agents/runtime.rs", 4, "the CLI programs' paths; DATA/run"),
    ("agents/sandbox.rs", 20, "the layout of the project's git dir and the system (bwrap binds and mounts by path; each is checked to be no link; a task's refs dirs are made by handle), the programs on PATH"),
    ("agents/runtime/session.rs", 2, "the worktree's own path (is it there), /proc identity of a pty"),
    ("agents/runtime/admission.rs", 1, "/proc/meminfo"),
    ("agents/runtime/spawn.rs", 1, "a lead's directory, DATA/lead/<login>, made in byre's layout"),
    ("terminal/shell.rs", 1, "the login shell from passwd"),
    ("machines/lib.rs", 12, "DATA/transfers: byre's alone"),
    ("app/machines.rs", 1, "a transfer's file under DATA/transfers (its type)"),
    ("app/projects.rs", 1, "a path a user gives for a new project, checked against --repos-root"),
    ("app/reactors/worktrees.rs", 5, "worktree paths in byre's layout (is one missing); a project's repository (is it there)"),
    ("toolboxes/lib.rs", 4, "DATA/toolboxes: byre's alone; the worktree's own path canonicalized"),
    ("browser/chrome.rs", 7, "Chromium's profile and pid file under DATA/run: byre's alone"),
    ("code/definitions.rs", 1, "the metadata byre_beneath answered"),
    ("git/worktree_files.rs", 1, "the metadata byre_beneath answered"),
    ("git/lib.rs", 10, "a new project's path, worktree paths in byre's layout, the common git dir"),
    ("git/merge.rs", 11, "the user's checkouts of the default branch (fast-forward); byre's tasks' worktrees dir, to refuse a checkout there; the worktree's own path when it is removed (std's remove_dir_all does not follow links)"),
    ("git/reviews.rs", 10, "DATA/reviews: the reviewer's copy, which byre writes and no sandbox can"),
    ("git/views.rs", 6, "the worktree's own path (canonicalized, then held as a handle)"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `code` before its `#[cfg(test)]` part that make a file system call.
fn calls(code: &str) -> Vec<String> {
    code.lines()
        .take_while(|l| !l.trim().starts_with("#[cfg(test)]"))
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            CALLS.iter().any(|c| l.contains(c))
                || FS_MODULE_CALLS
                    .iter()
                    .any(|c| l.contains(c) && !l.contains(&format!("byre_beneath::{c}")))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn byre_touches_what_agents_write_only_through_byre_beneath() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel.split('/').next().unwrap_or("");
        let name = file.file_name().unwrap().to_string_lossy();
        if NOT_SCANNED.contains(&top) || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let lines = calls(&std::fs::read_to_string(&file).unwrap());
        if !lines.is_empty() {
            found.insert(rel, lines);
        }
    }
    let mut wrong = Vec::new();
    for (file, lines) in &found {
        let allowed = ALLOWED
            .iter()
            .find(|(f, _, _)| f == file)
            .map(|(_, n, _)| *n);
        if allowed != Some(lines.len()) {
            wrong.push(format!(
                "{file}: {} file system calls, {} allowed:\n    {}",
                lines.len(),
                allowed.unwrap_or(0),
                lines.join("\n    ")
            ));
        }
    }
    for (file, _, _) in ALLOWED {
        if !found.contains_key(*file) {
            wrong.push(format!("{file}: allowed calls, but none is there any more"));
        }
    }
    assert!(
        wrong.is_empty(),
        "a file system call outside byre_beneath: open agents' places through byre_beneath::Dir \
         (and libgit2 on a worktree through git::boxed), or list a call on byre's own path in \
         ALLOWED with why:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_each_kind_of_call_and_skips_tests_and_comments() {
    let code = "use std::fs;\nfn a() { std::fs::read(p); }\nfn b() { fs::remove_dir_all(p); }\n\
                // fs::write(p) in a comment\nfn c() { dir.exists(); }\n\
                fn d() { byre_beneath::Dir::open(p); }\n#[cfg(test)]\nmod tests { fn e() { std::fs::write(p); } }\n";
    assert_eq!(
        calls(code),
        [
            "fn a() { std::fs::read(p); }",
            "fn b() { fs::remove_dir_all(p); }",
            "fn c() { dir.exists(); }"
        ]
    );
}
