//! The fs requests of a CodeBolt agent ([`super`]'s fs family): inside the worktree only, every
//! path checked as the worktree views check theirs (`git::views::WorkPath`).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{err, text, MAX_OUTPUT, MAX_READ_BYTES};
use crate::git::views::{TreePath, WorkPath, Worktree};

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

/// An existing path, proven inside the worktree.
fn existing(root: &Path, raw: &str) -> Result<(Worktree, WorkPath), String> {
    let wt = Worktree::open(root).map_err(|e| e.to_string())?;
    let rel = relative(&wt, root, raw)?;
    let p = WorkPath::parse(&rel, &wt).map_err(|e| e.to_string())?;
    Ok((wt, p))
}

/// A path to create or overwrite: its text checked, its existing ancestors proven inside the
/// worktree, missing directories made; a symlink at the end is never followed.
fn writable(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let wt = Worktree::open(root).map_err(|e| e.to_string())?;
    let rel = relative(&wt, root, raw)?;
    let tp = TreePath::parse(&rel).map_err(|e| e.to_string())?;
    if tp.is_root() {
        return Err("a file path is needed".into());
    }
    let parts: Vec<&str> = rel.split('/').collect();
    let (name, dirs) = parts.split_last().ok_or("a file path is needed")?;
    let mut n = dirs.len();
    let base = loop {
        match WorkPath::parse(&dirs[..n].join("/"), &wt) {
            Ok(p) => break p,
            Err(crate::git::views::ViewError::NotFound(_)) if n > 0 => n -= 1,
            Err(e) => return Err(e.to_string()),
        }
    };
    let mut dir = base.resolved().to_owned();
    for d in &dirs[n..] {
        dir.push(d);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {rel:?}'s directory: {e}"))?;
    Ok(dir.join(name))
}

/// A regular file's text (never through a symlink, which could lead out of the worktree; at
/// most 1 MiB), for searches and listings.
pub(super) fn read_plain(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_OUTPUT as u64 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

fn write_file(path: &Path, content: &str) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot write: {e}"))?;
    f.write_all(content.as_bytes())
        .map_err(|e| format!("cannot write: {e}"))
}

/// Applies `diff`, a unified diff of one file (`---`/`+++` headers optional, their names
/// ignored), to the existing file `target` (checked as `readFile` checks its path) with
/// `diffy`: each hunk must find its context and removed lines exactly (at the line it names
/// or nearby, no fuzz). The new content goes to a temporary file beside it, which then
/// replaces the file in one `rename`: the file is either as it was or wholly patched.
/// # Errors
/// The reason, with the file unchanged: not a unified diff, no hunk, more than one file, a
/// path outside the worktree or not a regular file, a hunk that does not apply.
fn edit_with_diff(root: &Path, target: &str, diff: &str) -> Result<Value, String> {
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
    let (_, p) = existing(root, target)?;
    let meta = std::fs::symlink_metadata(p.resolved()).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", p.as_str()));
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(format!("{} is larger than 16 MiB", p.as_str()));
    }
    let before = std::fs::read(p.resolved()).map_err(|e| e.to_string())?;
    let after = diffy::apply_bytes(&before, &patch).map_err(|e| {
        format!(
            "the diff does not apply to {}: {e} (its context or removed lines are not in the \
             file); the file is unchanged",
            p.as_str()
        )
    })?;
    replace_file(p.resolved(), &after, meta.permissions())?;
    let n = patch.hunks().len();
    Ok(json!({"result": "applied", "message": format!("applied {n} hunk(s) to {}", p.as_str())}))
}

/// Replaces `path` with `content`: written and synced to a new file in the same directory
/// (same permissions), then renamed over it; on any failure the temporary file is removed and
/// `path` is untouched.
fn replace_file(path: &Path, content: &[u8], perms: std::fs::Permissions) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().ok_or("a file path is needed")?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.byre-{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(content)?;
        f.set_permissions(perms)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "cannot write {}: {e}; the file is unchanged",
            path.display()
        )
    })
}

pub(super) fn list(dir: &Path, root: &Path, recursive: bool, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.file_name() == ".git" || out.len() >= 5000 {
            continue;
        }
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        out.push(if is_dir { format!("{rel}/") } else { rel });
        if recursive && is_dir {
            list(&p, root, true, out);
        }
    }
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
        "createFile" => writable(root, &join(&s("filePath"), &s("fileName")))
            .and_then(|p| write_file(&p, &s("source")))
            .map(|()| json!({"message": "File created", "fileName": s("fileName")})),
        "updateFile" => existing(root, &join(&s("filePath"), &s("filename")))
            .and_then(|(_, p)| write_file(p.resolved(), &s("newContent")))
            .map(|()| json!({"message": "File updated", "response": "File updated"})),
        "writeToFile" => writable(root, &s("relPath"))
            .and_then(|p| write_file(&p, &s("newContent")))
            .map(|()| json!({"message": "File written"})),
        "createFolder" => writable(root, &join(&join(&s("folderPath"), &s("folderName")), "x"))
            .map(|_| json!({"message": "Folder created"})),
        "readFile" => existing(root, &s("filePath")).and_then(|(_, p)| {
            let meta = std::fs::symlink_metadata(p.resolved()).map_err(|e| e.to_string())?;
            if !meta.is_file() {
                return Err(format!("{} is not a file", p.as_str()));
            }
            if meta.len() > MAX_READ_BYTES {
                return Err(format!("{} is larger than 16 MiB", p.as_str()));
            }
            let c = std::fs::read(p.resolved()).map_err(|e| e.to_string())?;
            let c = String::from_utf8_lossy(&c).into_owned();
            Ok(json!({"content": c, "message": c}))
        }),
        "deleteFile" => existing(root, &join(&s("filePath"), &s("filename"))).and_then(|(_, p)| {
            if p.as_str().is_empty() {
                return Err("refusing to delete the worktree".into());
            }
            std::fs::remove_file(p.resolved()).map_err(|e| e.to_string())?;
            Ok(json!({"message": "File deleted"}))
        }),
        "deleteFolder" => {
            existing(root, &join(&s("folderpath"), &s("foldername"))).and_then(|(_, p)| {
                if p.as_str().is_empty() {
                    return Err("refusing to delete the worktree".into());
                }
                std::fs::remove_dir_all(p.resolved()).map_err(|e| e.to_string())?;
                Ok(json!({"message": "Folder deleted"}))
            })
        }
        "fileList" => existing(root, &s("folderPath")).map(|(wt, p)| {
            let mut out = Vec::new();
            list(
                p.resolved(),
                wt.root(),
                m["isRecursive"].as_bool().unwrap_or(false),
                &mut out,
            );
            json!({"result": out.join("\n"), "files": out})
        }),
        "searchFiles" | "grep_search" => {
            let (dir, needle) = if action == "searchFiles" {
                (s("path"), s("regex"))
            } else {
                (s("path"), s("query"))
            };
            existing(root, &dir).map(|(wt, p)| {
                let mut files = Vec::new();
                list(p.resolved(), wt.root(), true, &mut files);
                let mut hits = Vec::new();
                for f in files.iter().filter(|f| !f.ends_with('/')) {
                    let Some(c) = read_plain(&wt.root().join(f)) else {
                        continue;
                    };
                    for (i, line) in c.lines().enumerate() {
                        if line.contains(&needle) && hits.len() < 500 {
                            hits.push(format!("{f}:{}:{line}", i + 1));
                        }
                    }
                }
                json!({"result": hits.join("\n"), "results": hits})
            })
        }
        "file_search" => existing(root, "").map(|(wt, p)| {
            let mut files = Vec::new();
            list(p.resolved(), wt.root(), true, &mut files);
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
