//! The fs and git requests of a CodeBolt agent ([`super`]'s fs and git families): inside the
//! worktree only, and git on the task's worktree and branch.
//!
//! The worktree is the agent's to write, so every fs request goes by handle
//! (`byre_beneath`): the path is checked as the worktree views check theirs
//! (`git::views::TreePath`: relative, no `..`, not into `.git`), then resolved by the kernel
//! beneath the worktree with no symlink followed, in one step: a directory swapped for a link
//! meanwhile leads nowhere. A symlink in a path is refused (the agent can follow its own links
//! in its own sandbox); a write replaces the file's name (a temporary file renamed over it,
//! keeping its mode), so a link at the name is replaced, never written through.

use std::io;
use std::path::{Path, PathBuf};

use byre_beneath::{Dir, Kind, Links};
use serde_json::{json, Value};

use super::{err, text, MAX_OUTPUT, MAX_READ_BYTES};
use crate::git::views::{TreePath, Worktree};

/// The worktree-relative form of a path the agent gives (absolute under the worktree, or
/// relative to it).
fn relative(worktree: &Worktree, given_root: &Path, raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if !raw.starts_with('/') {
        return Ok(raw
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_owned());
    }
    for root in [given_root, worktree.root()] {
        if let Some(rest) = root.to_str().and_then(|r| raw.strip_prefix(r)) {
            if rest.is_empty() || rest.starts_with('/') {
                return Ok(rest.trim_matches('/').to_owned());
            }
        }
    }
    Err(format!("{raw:?} is outside the task's worktree"))
}

fn join(dir: &str, name: &str) -> String {
    match (dir.trim_end_matches('/'), name) {
        ("", n) => n.to_owned(),
        (d, "") => d.to_owned(),
        (d, n) => format!("{d}/{n}"),
    }
}

/// The worktree's handle and `raw` as a checked path relative to it (empty: the root).
fn target(root: &Path, raw: &str) -> Result<(Dir, PathBuf), String> {
    let wt = Worktree::open(root).map_err(|e| e.to_string())?;
    let rel = relative(&wt, root, raw)?;
    let tp = TreePath::parse(&rel).map_err(|e| e.to_string())?;
    let dir = Dir::open(wt.root()).map_err(|e| format!("the worktree cannot be opened: {e}"))?;
    Ok((dir, PathBuf::from(tp.as_ref())))
}

/// A refusal for the I/O error `e` met on `rel`.
fn refusal(rel: &Path, e: &io::Error) -> String {
    let shown = rel.display();
    if byre_beneath::is_refused(e) {
        return format!("{shown:?} goes through a symbolic link, which byre does not follow");
    }
    match e.kind() {
        io::ErrorKind::NotFound => format!("nothing at {shown:?} in the worktree"),
        io::ErrorKind::FileTooLarge => format!("{shown:?} is larger than 16 MiB"),
        io::ErrorKind::InvalidInput => format!("{shown:?} is not a file"),
        _ => format!("{shown:?}: {e}"),
    }
}

/// Writes `content` at `rel` (its directories made), keeping the mode of a file that is there.
fn write_file(dir: &Dir, rel: &Path, content: &[u8]) -> Result<(), String> {
    if rel.as_os_str().is_empty() {
        return Err("a file path is needed".into());
    }
    if let Some(parent) = rel.parent() {
        dir.create_dir_all(parent)
            .map_err(|e| format!("cannot create {rel:?}'s directory: {}", refusal(parent, &e)))?;
    }
    let mode = existing_mode(dir, rel).unwrap_or(0o666);
    dir.write(rel, content, mode)
        .map_err(|e| format!("cannot write: {}", refusal(rel, &e)))
}

/// The permission bits of the regular file at `rel`, if one is there.
fn existing_mode(dir: &Dir, rel: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let meta = dir.symlink_metadata(rel, Links::Refuse).ok()?;
    meta.is_file().then(|| meta.permissions().mode() & 0o7777)
}

/// The regular file at `rel` (never through a symlink; at most 16 MiB).
fn read_file(dir: &Dir, rel: &Path) -> Result<Vec<u8>, String> {
    dir.read(rel, Links::Refuse, MAX_READ_BYTES)
        .map_err(|e| refusal(rel, &e))
}

/// A regular file's text (never through a symlink; at most 1 MiB), for searches and listings.
fn read_plain(dir: &Dir, rel: &Path) -> Option<String> {
    let bytes = dir.read(rel, Links::Refuse, MAX_OUTPUT as u64).ok()?;
    String::from_utf8(bytes).ok()
}

/// Applies `diff`, a unified diff of one file (`---`/`+++` headers optional, their names
/// ignored), to the existing file `target` (checked as `readFile` checks its path) with
/// `diffy`: each hunk must find its context and removed lines exactly (at the line it names
/// or nearby, no fuzz). The new content goes to a temporary file beside it, which then
/// replaces the file in one `rename`: the file is either as it was or wholly patched.
/// # Errors
/// The reason, with the file unchanged: not a unified diff, no hunk, more than one file, a
/// path outside the worktree or not a regular file, a hunk that does not apply.
fn edit_with_diff(root: &Path, target_file: &str, diff: &str) -> Result<Value, String> {
    let n_files = diff.lines().filter(|l| l.starts_with("+++ ")).count();
    if n_files > 1 {
        return Err(format!(
            "the diff changes {n_files} files; send one diff per file"
        ));
    }
    let patch = diffy::Patch::from_bytes(diff.as_bytes())
        .map_err(|e| format!("not a unified diff: {e}; nothing was changed"))?;
    if patch.hunks().is_empty() {
        return Err("the diff has no hunk (`@@ -l,n +l,n @@`): nothing to apply".into());
    }
    let (dir, rel) = target(root, target_file)?;
    let shown = rel.display().to_string();
    let before = read_file(&dir, &rel)?;
    let after = diffy::apply_bytes(&before, &patch).map_err(|e| {
        format!(
            "the diff does not apply to {shown}: {e} (its context or removed lines are not in the \
             file); the file is unchanged"
        )
    })?;
    let mode = existing_mode(&dir, &rel).unwrap_or(0o666);
    dir.write(&rel, &after, mode).map_err(|e| {
        format!(
            "cannot write {shown}: {}; the file is unchanged",
            refusal(&rel, &e)
        )
    })?;
    let n = patch.hunks().len();
    Ok(json!({"result": "applied", "message": format!("applied {n} hunk(s) to {shown}")}))
}

/// The paths under `rel` (directories with a trailing `/`), depth first in name order, at most
/// 5000; `.git` left out, no symlink followed.
pub(super) fn list(dir: &Dir, rel: &Path, recursive: bool, out: &mut Vec<String>) {
    let Ok(mut entries) = dir.entries(rel, Links::Refuse) else {
        return;
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        if e.name == ".git" || out.len() >= 5000 {
            continue;
        }
        let p = rel.join(&e.name);
        let shown = p.to_string_lossy().into_owned();
        let is_dir = e.kind == Kind::Dir;
        out.push(if is_dir { format!("{shown}/") } else { shown });
        if recursive && is_dir {
            list(dir, &p, true, out);
        }
    }
}

/// Every path of the worktree at `root` (as [`list`]), for the project family's repo map.
pub(super) fn list_worktree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dir) = Dir::open(root) {
        list(&dir, Path::new(""), true, &mut out);
    }
    out
}

/// The fields of fs requests that name paths: a value other than a string is refused (it
/// would otherwise become a file named after its JSON).
const PATH_FIELDS: &[&str] = &[
    "target_file",
    "filePath",
    "fileName",
    "filename",
    "relPath",
    "folderPath",
    "folderName",
    "folderpath",
    "foldername",
    "path",
];

pub(super) fn fs_action(root: &Path, action: &str, m: &Value) -> Value {
    if let Some(k) = PATH_FIELDS
        .iter()
        .find(|k| !matches!(m.get(**k), None | Some(Value::Null | Value::String(_))))
    {
        return err(format!("fsEvent/{action}: `{k}` must be a string path"));
    }
    let s = |k: &str| text(&m[k]);
    let r = match action {
        "createFile" => target(root, &join(&s("filePath"), &s("fileName")))
            .and_then(|(dir, rel)| write_file(&dir, &rel, s("source").as_bytes()))
            .map(|()| json!({"message": "File created", "fileName": s("fileName")})),
        "updateFile" => {
            target(root, &join(&s("filePath"), &s("filename"))).and_then(|(dir, rel)| {
                dir.symlink_metadata(&rel, Links::Refuse)
                    .map_err(|e| refusal(&rel, &e))?;
                write_file(&dir, &rel, s("newContent").as_bytes())
                    .map(|()| json!({"message": "File updated", "response": "File updated"}))
            })
        }
        "writeToFile" => target(root, &s("relPath"))
            .and_then(|(dir, rel)| write_file(&dir, &rel, s("newContent").as_bytes()))
            .map(|()| json!({"message": "File written"})),
        "createFolder" => {
            target(root, &join(&s("folderPath"), &s("folderName"))).and_then(|(dir, rel)| {
                dir.create_dir_all(&rel)
                    .map(|_| json!({"message": "Folder created"}))
                    .map_err(|e| refusal(&rel, &e))
            })
        }
        "readFile" => target(root, &s("filePath")).and_then(|(dir, rel)| {
            let c = read_file(&dir, &rel)?;
            let c = String::from_utf8_lossy(&c).into_owned();
            Ok(json!({"content": c, "message": c}))
        }),
        "deleteFile" => {
            target(root, &join(&s("filePath"), &s("filename"))).and_then(|(dir, rel)| {
                if rel.as_os_str().is_empty() {
                    return Err("refusing to delete the worktree".into());
                }
                dir.remove_file(&rel).map_err(|e| refusal(&rel, &e))?;
                Ok(json!({"message": "File deleted"}))
            })
        }
        "deleteFolder" => {
            target(root, &join(&s("folderpath"), &s("foldername"))).and_then(|(dir, rel)| {
                if rel.as_os_str().is_empty() {
                    return Err("refusing to delete the worktree".into());
                }
                dir.remove_dir_all(&rel).map_err(|e| refusal(&rel, &e))?;
                Ok(json!({"message": "Folder deleted"}))
            })
        }
        "fileList" => target(root, &s("folderPath")).and_then(|(dir, rel)| {
            dir.entries(&rel, Links::Refuse)
                .map_err(|e| refusal(&rel, &e))?;
            let mut out = Vec::new();
            list(
                &dir,
                &rel,
                m["isRecursive"].as_bool().unwrap_or(false),
                &mut out,
            );
            Ok(json!({"result": out.join("\n"), "files": out}))
        }),
        "searchFiles" | "grep_search" => {
            let (path, needle) = if action == "searchFiles" {
                (s("path"), s("regex"))
            } else {
                (s("path"), s("query"))
            };
            target(root, &path).and_then(|(dir, rel)| {
                dir.symlink_metadata(&rel, Links::Refuse)
                    .map_err(|e| refusal(&rel, &e))?;
                let mut files = Vec::new();
                list(&dir, &rel, true, &mut files);
                let mut hits = Vec::new();
                for f in files.iter().filter(|f| !f.ends_with('/')) {
                    let Some(c) = read_plain(&dir, Path::new(f)) else {
                        continue;
                    };
                    for (i, line) in c.lines().enumerate() {
                        if line.contains(&needle) && hits.len() < 500 {
                            hits.push(format!("{f}:{}:{line}", i + 1));
                        }
                    }
                }
                Ok(json!({"result": hits.join("\n"), "results": hits}))
            })
        }
        "file_search" => target(root, "").map(|(dir, rel)| {
            let mut files = Vec::new();
            list(&dir, &rel, true, &mut files);
            let q = s("query");
            let hits: Vec<_> = files.into_iter().filter(|f| f.contains(&q)).collect();
            json!({"result": hits.join("\n"), "results": hits})
        }),
        // v2's editFileWithDiff and utils.editFileAndApplyDiff: a unified diff of one file.
        "edit_file_with_diff" => edit_with_diff(root, &s("target_file"), &s("code_edit")),
        "edit_file_and_apply_diff" => edit_with_diff(root, &s("filePath"), &s("diff")),
        other => Err(format!("byre does not support fsEvent/{other}")),
    };
    r.unwrap_or_else(err)
}

// ---------------------------------------------------------------- git

pub(super) fn git_action(root: &Path, action: &str, f: &Value) -> Value {
    let r = (|| -> Result<Value, String> {
        let repo = git2::Repository::open(root).map_err(|e| e.message().to_owned())?;
        let e = |e: git2::Error| e.message().to_owned();
        match action {
            "Status" => {
                let mut opts = git2::StatusOptions::new();
                opts.include_untracked(true).recurse_untracked_dirs(true);
                let st = repo.statuses(Some(&mut opts)).map_err(e)?;
                let files: Vec<Value> = st
                    .iter()
                    .map(|s| json!({"path": s.path().unwrap_or(""), "status": format!("{:?}", s.status())}))
                    .collect();
                let branch = repo.head().ok().and_then(|h| h.shorthand().ok().map(str::to_owned));
                Ok(json!({"data": {"current": branch, "files": files}, "files": files}))
            }
            "Add" => {
                let mut idx = repo.index().map_err(e)?;
                idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None).map_err(e)?;
                idx.update_all(["*"], None).map_err(e)?;
                idx.write().map_err(e)?;
                Ok(json!({"message": "Added all changes"}))
            }
            "Commit" => {
                // Mid-rebase (or merge, cherry-pick, …) HEAD is not the task branch, and a
                // commit would leave the operation half done: the agent finishes or aborts it
                // first (a terminal command).
                if repo.state() != git2::RepositoryState::Clean {
                    return Err(format!(
                        "the worktree is in the middle of a {}: finish or abort it before committing",
                        format!("{:?}", repo.state()).to_lowercase()
                    ));
                }
                if repo.head().is_ok_and(|h| !h.is_branch()) {
                    return Err("HEAD is detached: check out the task's branch before committing".into());
                }
                let message = text(&f["message"]);
                let message = if message.trim().is_empty() { "CodeBolt agent commit".to_owned() } else { message };
                let mut idx = repo.index().map_err(e)?;
                let tree = repo.find_tree(idx.write_tree().map_err(e)?).map_err(e)?;
                let sig = repo
                    .signature()
                    .or_else(|_| git2::Signature::now("CodeBolt agent", "codebolt@byre.invalid"))
                    .map_err(e)?;
                let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
                let parents: Vec<&git2::Commit> = parent.iter().collect();
                let id = repo.commit(Some("HEAD"), &sig, &sig, &message, &tree, &parents).map_err(e)?;
                Ok(json!({"message": "Committed", "data": {"commit": id.to_string()}, "commit": id.to_string()}))
            }
            "Logs" | "gitLogs" => {
                let mut walk = repo.revwalk().map_err(e)?;
                walk.push_head().map_err(e)?;
                let logs: Vec<Value> = walk
                    .take(50)
                    .filter_map(|id| repo.find_commit(id.ok()?).ok())
                    .map(|c| json!({"hash": c.id().to_string(), "message": c.message().unwrap_or(""), "author": c.author().name().unwrap_or(""), "date": c.time().seconds()}))
                    .collect();
                Ok(json!({"data": logs, "logs": logs}))
            }
            "Diff" => {
                let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
                let hash = text(&f["commitHash"]);
                let base = if hash.is_empty() {
                    head
                } else {
                    Some(repo.revparse_single(&hash).and_then(|o| o.peel_to_tree()).map_err(e)?)
                };
                let diff = repo
                    .diff_tree_to_workdir_with_index(base.as_ref(), None)
                    .map_err(e)?;
                let mut out = String::new();
                diff.print(git2::DiffFormat::Patch, |_, _, l| {
                    if matches!(l.origin(), '+' | '-' | ' ') {
                        out.push(l.origin());
                    }
                    out.push_str(&String::from_utf8_lossy(l.content()));
                    out.len() < MAX_OUTPUT
                })
                .ok();
                Ok(json!({"data": out, "diff": out}))
            }
            "Checkout" | "Branch" | "gitBranch" => {
                let current = repo.head().ok().and_then(|h| h.shorthand().ok().map(str::to_owned)).unwrap_or_default();
                if text(&f["branch"]) == current {
                    Ok(json!({"message": format!("on {current}"), "branch": current}))
                } else {
                    Err(format!("the task's agent works on its branch `{current}` only"))
                }
            }
            "Init" => {
                let branch = repo.head().ok().and_then(|h| h.shorthand().ok().map(str::to_owned)).unwrap_or_default();
                Err(format!(
                    "gitInit refused: the task's worktree {} is already a git repository, on the task's branch `{branch}`; use status, add and commit there",
                    root.display()
                ))
            }
            "Clone" => Err(
                "git Clone is not available to agents: the task's worktree is their repository, and byre merges it".into()
            ),
            other => Err(format!("byre does not support gitEvent/{other}")),
        }
    })();
    r.unwrap_or_else(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worktree() -> (tempfile_dir::Dir, PathBuf) {
        let d = tempfile_dir::Dir::new();
        let root = d.0.join("wt");
        std::fs::create_dir_all(root.join("src")).unwrap();
        git2::Repository::init(&root).unwrap();
        (d, root)
    }

    /// A tiny temporary directory (the crate has no tempfile dependency outside tests/).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                let p = std::env::temp_dir().join(format!("byre-cb-{}", uuid::Uuid::new_v4()));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn edit_file_with_diff_applies_a_good_patch_and_refuses_a_bad_one_byte_for_byte() {
        let (_d, root) = worktree();
        let original = "one\ntwo\nthree\r\nfour\n";
        std::fs::write(root.join("src/a.txt"), original).unwrap();
        let good =
            "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\r\n";
        let r = fs_action(
            &root,
            "edit_file_with_diff",
            &json!({"target_file": "src/a.txt", "code_edit": good, "diffIdentifier": "d1"}),
        );
        assert_eq!(r["result"], "applied", "{r}");
        let patched = "one\nTWO\nthree\r\nfour\n";
        assert_eq!(
            std::fs::read(root.join("src/a.txt")).unwrap(),
            patched.as_bytes()
        );
        for (action, m, why) in [
            // Its context is no longer in the file (the good patch was applied already).
            (
                "edit_file_with_diff",
                json!({"target_file": "src/a.txt", "code_edit": good}),
                "does not apply",
            ),
            (
                "edit_file_and_apply_diff",
                json!({"filePath": "src/a.txt", "diff": "@@ -2,1 +2,1 @@\n-nope\n+yes\n"}),
                "does not apply",
            ),
            (
                "edit_file_with_diff",
                json!({"target_file": "src/a.txt", "code_edit": "new code"}),
                "no hunk",
            ),
            (
                "edit_file_with_diff",
                json!({"target_file": "src/a.txt", "code_edit": "@@ -1 +1 @@\n"}),
                "not a unified diff",
            ),
            (
                "edit_file_with_diff",
                json!({"target_file": "src/a.txt", "code_edit": format!("{good}--- a/b\n+++ b/b\n@@ -1 +1 @@\n-x\n+y\n")}),
                "one diff per file",
            ),
            (
                "edit_file_with_diff",
                json!({"target_file": "../a.txt", "code_edit": good}),
                "",
            ),
            (
                "edit_file_with_diff",
                json!({"target_file": "src", "code_edit": good}),
                "not a file",
            ),
        ] {
            let r = fs_action(&root, action, &m);
            assert_eq!(r["success"], false, "{m}: {r}");
            assert!(r["error"].as_str().unwrap().contains(why), "{m}: {r}");
            assert_eq!(
                std::fs::read(root.join("src/a.txt")).unwrap(),
                patched.as_bytes(),
                "{m}"
            );
        }
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(root.join("src"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("a.txt")]);
    }

    #[test]
    fn fs_writes_and_reads_stay_inside_the_worktree() {
        let (d, root) = worktree();
        let outside = d.0.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let abs = root.join("src").display().to_string();
        let ok = fs_action(
            &root,
            "createFile",
            &json!({"fileName": "a.txt", "source": "A", "filePath": abs}),
        );
        assert_eq!(ok["success"], Value::Null, "{ok}");
        assert_eq!(
            std::fs::read_to_string(root.join("src/a.txt")).unwrap(),
            "A"
        );
        let nested = fs_action(
            &root,
            "writeToFile",
            &json!({"relPath": "new/dir/b.txt", "newContent": "B"}),
        );
        assert!(nested.get("error").is_none(), "{nested}");
        for (action, m) in [
            (
                "createFile",
                json!({"fileName": "x", "source": "", "filePath": "../"}),
            ),
            (
                "createFile",
                json!({"fileName": "x", "source": "", "filePath": "link"}),
            ),
            (
                "writeToFile",
                json!({"relPath": ".git/config", "newContent": ""}),
            ),
            (
                "writeToFile",
                json!({"relPath": "/etc/passwd", "newContent": ""}),
            ),
            ("readFile", json!({"filePath": "link/secret"})),
            ("readFile", json!({"filePath": "../outside/secret"})),
            ("deleteFolder", json!({"foldername": "", "folderpath": ""})),
            (
                "deleteFile",
                json!({"filename": "secret", "filePath": "link"}),
            ),
        ] {
            let r = fs_action(&root, action, &m);
            assert_eq!(r["success"], false, "{action} {m}: {r}");
        }
        std::fs::write(outside.join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("leak")).unwrap();
        let found = fs_action(
            &root,
            "searchFiles",
            &json!({"path": "", "regex": "s3cret"}),
        );
        assert_eq!(
            found["result"], "",
            "search never reads through a symlink: {found}"
        );
        assert!(outside.join("secret").exists());
        assert!(!outside.join("x").exists());
    }
}
