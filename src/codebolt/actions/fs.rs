//! The fs requests of a CodeBolt agent ([`super`]'s fs family), translated into the worktree's
//! file operations (`byre_git::worktree_files`: inside the worktree only, every path checked as
//! the worktree views check theirs).

use std::path::Path;

use byre_git::worktree_files as files;
use serde_json::{json, Value};

use super::{err, text};

fn join(dir: &str, name: &str) -> String {
    match (dir.trim_end_matches('/'), name) {
        ("", n) => n.to_owned(),
        (d, "") => d.to_owned(),
        (d, n) => format!("{d}/{n}"),
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
        "createFile" => files::write(root, &join(&s("filePath"), &s("fileName")), &s("source"))
            .map(|()| json!({"message": "File created", "fileName": s("fileName")})),
        "updateFile" => files::update(
            root,
            &join(&s("filePath"), &s("filename")),
            &s("newContent"),
        )
        .map(|()| json!({"message": "File updated", "response": "File updated"})),
        "writeToFile" => files::write(root, &s("relPath"), &s("newContent"))
            .map(|()| json!({"message": "File written"})),
        "createFolder" => files::create_folder(root, &join(&s("folderPath"), &s("folderName")))
            .map(|()| json!({"message": "Folder created"})),
        "readFile" => {
            files::read(root, &s("filePath")).map(|c| json!({"content": c, "message": c}))
        }
        "deleteFile" => files::delete_file(root, &join(&s("filePath"), &s("filename")))
            .map(|()| json!({"message": "File deleted"})),
        "deleteFolder" => files::delete_folder(root, &join(&s("folderpath"), &s("foldername")))
            .map(|()| json!({"message": "Folder deleted"})),
        "fileList" => files::list_dir(
            root,
            &s("folderPath"),
            m["isRecursive"].as_bool().unwrap_or(false),
        )
        .map(|out| json!({"result": out.join("\n"), "files": out})),
        "searchFiles" => files::search(root, &s("path"), &s("regex"))
            .map(|hits| json!({"result": hits.join("\n"), "results": hits})),
        "grep_search" => files::search(root, &s("path"), &s("query"))
            .map(|hits| json!({"result": hits.join("\n"), "results": hits})),
        "file_search" => files::find(root, &s("query"))
            .map(|hits| json!({"result": hits.join("\n"), "results": hits})),
        // v2's editFileWithDiff and utils.editFileAndApplyDiff: a unified diff of one file.
        "edit_file_with_diff" => files::edit_with_diff(root, &s("target_file"), &s("code_edit"))
            .map(|m| json!({"result": "applied", "message": m})),
        "edit_file_and_apply_diff" => files::edit_with_diff(root, &s("filePath"), &s("diff"))
            .map(|m| json!({"result": "applied", "message": m})),
        other => Err(files::FileError(format!(
            "byre does not support fsEvent/{other}"
        ))),
    };
    r.unwrap_or_else(|e| err(e.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worktree() -> (tempfile_dir::Dir, std::path::PathBuf) {
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
