//! `getTaskDir`, `getTaskFile`, `getTaskImage`, `getTaskChanges`, `getTaskDiff`: the worktree
//! views; the path-traversal suite every one of them must pass is in `views/traversal.rs`.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{make_repo, Api, Resp, TestServer};

mod traversal;

/// Mirrors the server's text limit (1 MiB).
const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// What files outside the worktree hold; no answer may ever contain it.
const SECRET: &str = "TOP-SECRET";

/// A running server with one task on a repository made from `fixtures/repos/basic`.
struct Task {
    /// Kept running for the test's length.
    _server: TestServer,
    api: Api,
    repo: TempDir,
    id: String,
    worktree: PathBuf,
    base_ref: String,
}

/// A task whose repository `prepare` may change (and commit on main) first.
async fn task_on(prepare: impl FnOnce(&Path)) -> Task {
    let server = TestServer::spawn().await;
    let api = server.api();
    let repo = make_repo("basic");
    prepare(repo.path());
    let project = api.create_project("basic", repo.path()).await;
    let task = api
        .create_task(project["id"].as_str().unwrap(), "look around")
        .await;
    Task {
        id: task["id"].as_str().unwrap().to_owned(),
        worktree: PathBuf::from(task["worktree_path"].as_str().unwrap()),
        base_ref: task["base_ref"].as_str().unwrap().to_owned(),
        _server: server,
        api,
        repo,
    }
}

impl Task {
    async fn get(&self, operation_id: &str, query: &[(&str, &str)]) -> Resp {
        self.api.call(operation_id, &[&self.id], query, None).await
    }

    fn write(&self, path: &str, content: impl AsRef<[u8]>) {
        let p = self.worktree.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn link(&self, target: impl AsRef<Path>, name: &str) {
        symlink(target, self.worktree.join(name)).unwrap();
    }

    /// The worktree's own index file, as bytes.
    fn index_bytes(&self) -> Vec<u8> {
        let repo = git2::Repository::open(&self.worktree).unwrap();
        std::fs::read(repo.path().join("index")).unwrap()
    }
}

/// Stages everything in the checkout at `dir` and commits it on HEAD; returns the sha.
fn commit_all(dir: &Path, message: &str) -> String {
    let repo = git2::Repository::open(dir).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])
        .unwrap()
        .to_string()
}

/// Commits everything in a fresh repository at `dir` (no parent).
fn commit_nested(dir: &Path) {
    let repo = git2::Repository::open(dir).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Test", "test@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "nested", &tree, &[])
        .unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// (name, type, symlink, ignored) of each entry of a listing.
fn entries(listing: &Value) -> Vec<(String, String, bool, bool)> {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["type"].as_str().unwrap().to_owned(),
                e["symlink"].as_bool().unwrap(),
                e["ignored"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn entry(name: &str, kind: &str, symlink: bool, ignored: bool) -> (String, String, bool, bool) {
    (name.to_owned(), kind.to_owned(), symlink, ignored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_dir_lists_directories_first_marks_ignored_entries_and_follows_symlinks_inside() {
    let task = task_on(|_| {}).await;
    let outside = TempDir::new().unwrap();
    task.write("docs/guide.md", "# guide\n");
    task.write("b.txt", "b\n");
    task.write("a.txt", "a\n");
    task.write("build.log", "log\n");
    task.write("target/out.bin", "out");
    task.link("src", "link_dir");
    task.link("README.md", "link_file");
    task.link(outside.path(), "link_out");
    task.link("nowhere", "dangling");
    task.link("loop_b", "loop_a");
    task.link("loop_a", "loop_b");
    mkfifo(&task.worktree.join("pipe"));

    let root = task.get("getTaskDir", &[]).await;
    assert_eq!(root.status, 200, "{:?}", root.body);
    assert_eq!(root.body["path"], "");
    assert_eq!(root.body["truncated"], false);
    assert_eq!(
        entries(&root.body),
        vec![
            entry("docs", "dir", false, false),
            entry("link_dir", "dir", true, false),
            entry("src", "dir", false, false),
            entry("target", "dir", false, true),
            entry(".gitignore", "file", false, false),
            entry("README.md", "file", false, false),
            entry("a.txt", "file", false, false),
            entry("b.txt", "file", false, false),
            entry("build.log", "file", false, true),
            entry("dangling", "other", true, false),
            entry("link_file", "file", true, false),
            entry("link_out", "other", true, false),
            entry("loop_a", "other", true, false),
            entry("loop_b", "other", true, false),
            entry("pipe", "other", false, false),
        ],
        "no .git entry; directories first, then by name"
    );
    let size = |name: &str| {
        root.body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["size"]
            .clone()
    };
    let readme = std::fs::metadata(task.worktree.join("README.md"))
        .unwrap()
        .len();
    assert_eq!(size("a.txt"), 2);
    assert_eq!(size("README.md"), readme);
    assert_eq!(
        size("link_file"),
        readme,
        "a symlink's size is its target's"
    );

    let same = task.get("getTaskDir", &[("path", "")]).await;
    assert_eq!(same.body, root.body, "an empty path is the root");
    let target = task.get("getTaskDir", &[("path", "target")]).await;
    assert_eq!(target.body["path"], "target");
    assert_eq!(
        entries(&target.body),
        vec![entry("out.bin", "file", false, true)],
        "ignored through the directory above"
    );
    for dir in ["src", "link_dir"] {
        let listing = task.get("getTaskDir", &[("path", dir)]).await;
        assert_eq!(listing.status, 200);
        assert_eq!(listing.body["path"], dir);
        assert_eq!(
            entries(&listing.body),
            vec![entry("main.rs", "file", false, false)]
        );
    }
    for (path, status) in [
        ("README.md", 400),
        ("pipe", 400),
        ("nope", 404),
        ("dangling", 404),
    ] {
        let r = task.get("getTaskDir", &[("path", path)]).await;
        assert_eq!(r.status, status, "{path}: {:?}", r.body);
        assert!(!r.message().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_dir_truncates_a_huge_directory() {
    let task = task_on(|_| {}).await;
    std::fs::create_dir(task.worktree.join("many")).unwrap();
    for i in 0..5_001 {
        std::fs::write(task.worktree.join(format!("many/f{i:05}")), "").unwrap();
    }
    let r = task.get("getTaskDir", &[("path", "many")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["truncated"], true);
    let names = entries(&r.body);
    assert_eq!(names.len(), 5_000);
    assert_eq!(names[0].0, "f00000");
    assert_eq!(names[4_999].0, "f04999");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_file_returns_text_marks_binary_and_truncates_at_a_character() {
    let task = task_on(|_| {}).await;
    let long = format!("a{}", "é".repeat(MAX_TEXT_BYTES / 2 + 10));
    task.write("long.txt", &long);
    task.write("nul.bin", b"text\0more");
    task.write("latin1.txt", b"caf\xe9\n");
    task.write("empty.txt", "");
    task.link("README.md", "link_file");
    mkfifo(&task.worktree.join("pipe"));

    let readme = task.get("getTaskFile", &[("path", "README.md")]).await;
    assert_eq!(readme.status, 200);
    let text = std::fs::read_to_string(task.worktree.join("README.md")).unwrap();
    assert_eq!(readme.body["path"], "README.md");
    assert_eq!(readme.body["text"], text.as_str());
    assert_eq!(readme.body["size"], text.len());
    assert_eq!(
        (&readme.body["binary"], &readme.body["truncated"]),
        (&Value::Bool(false), &Value::Bool(false))
    );
    let linked = task.get("getTaskFile", &[("path", "link_file")]).await;
    assert_eq!(
        linked.body["text"],
        text.as_str(),
        "a symlink inside is followed"
    );

    let r = task.get("getTaskFile", &[("path", "long.txt")]).await;
    assert_eq!(r.body["size"], long.len());
    assert_eq!(r.body["truncated"], true);
    let got = r.body["text"].as_str().unwrap();
    assert_eq!(got.len(), MAX_TEXT_BYTES - 1, "the split é is dropped");
    assert!(long.starts_with(got));

    for path in ["nul.bin", "latin1.txt"] {
        let r = task.get("getTaskFile", &[("path", path)]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["binary"], true, "{path}");
        assert_eq!(r.body["text"], "", "{path}");
        assert!(r.body["size"].as_u64().unwrap() > 0);
    }
    let empty = task.get("getTaskFile", &[("path", "empty.txt")]).await;
    assert_eq!(
        (&empty.body["text"], &empty.body["binary"]),
        (&Value::from(""), &Value::Bool(false))
    );

    for (path, status) in [
        ("missing.txt", 404),
        ("src/nope/x", 404),
        ("src", 400),
        ("", 400),
        ("pipe", 400),
    ] {
        let r = task.get("getTaskFile", &[("path", path)]).await;
        assert_eq!(r.status, status, "{path}: {:?}", r.body);
        assert!(!r.message().is_empty());
    }
    let r = task.get("getTaskFile", &[]).await;
    assert_eq!(r.status, 400, "path is required");
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_image_serves_bytes_with_the_type_of_their_extension() {
    let task = task_on(|_| {}).await;
    let files: [(&str, &[u8], &str); 6] = [
        ("img/dot.png", PNG, "image/png"),
        ("photo.JPG", b"\xff\xd8\xff\xe0jpeg", "image/jpeg"),
        ("photo.jpeg", b"\xff\xd8\xff\xe0jpeg2", "image/jpeg"),
        ("anim.gif", b"GIF89a...", "image/gif"),
        ("pic.webp", b"RIFF\0\0\0\0WEBP", "image/webp"),
        (
            "icon.svg",
            b"<svg xmlns='http://www.w3.org/2000/svg'/>",
            "image/svg+xml",
        ),
    ];
    for (path, bytes, _) in files {
        task.write(path, bytes);
    }
    task.write("notes.txt", "not an image");
    task.link("img/dot.png", "link.png");
    let absolute = task.worktree.join("img/dot.png");
    let canonical = std::fs::canonicalize(&absolute).unwrap();
    let mut cases: Vec<(String, &[u8], &str)> = files
        .iter()
        .map(|(p, b, t)| (p.to_string(), *b, *t))
        .collect();
    cases.push(("link.png".into(), PNG, "image/png"));
    cases.push((absolute.to_str().unwrap().into(), PNG, "image/png"));
    cases.push((canonical.to_str().unwrap().into(), PNG, "image/png"));
    for (path, bytes, content_type) in cases {
        let r = task.get("getTaskImage", &[("path", &path)]).await;
        assert_eq!(r.status, 200, "{path}: {:?}", r.body);
        assert_eq!(r.bytes, bytes, "{path}");
        let header = |name: &str| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        assert_eq!(header("content-type"), content_type, "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff");
    }
    for (path, status) in [("notes.txt", 400), ("img", 400), ("missing.png", 404)] {
        let r = task.get("getTaskImage", &[("path", path)]).await;
        assert_eq!(r.status, status, "{path}: {:?}", r.body);
        assert!(!r.message().is_empty());
    }
}

/// Files each status of getTaskChanges shows, keyed by path: (status, old_path, +, -, binary).
fn changed_files(changes: &Value) -> BTreeMap<String, (String, Option<String>, u64, u64, bool)> {
    changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                (
                    f["status"].as_str().unwrap().to_owned(),
                    f["old_path"].as_str().map(str::to_owned),
                    f["additions"].as_u64().unwrap(),
                    f["deletions"].as_u64().unwrap(),
                    f["binary"].as_bool().unwrap(),
                ),
            )
        })
        .collect()
}

fn change(
    status: &str,
    old: Option<&str>,
    add: u64,
    del: u64,
    bin: bool,
) -> (String, Option<String>, u64, u64, bool) {
    (status.to_owned(), old.map(str::to_owned), add, del, bin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_changes_shows_committed_staged_unstaged_and_untracked_work_without_touching_the_index(
) {
    let lines: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let task = task_on(|repo| {
        std::fs::write(repo.join("delete_me.txt"), "bye\n").unwrap();
        std::fs::write(repo.join("rename_me.txt"), &lines).unwrap();
        std::fs::write(repo.join("typechange.txt"), "file for now\n").unwrap();
        commit_all(repo, "more files");
    })
    .await;
    // Committed on the task branch.
    task.write("committed.txt", "committed\n");
    let committed = commit_all(&task.worktree, "agent commit");
    // Staged only.
    task.write("staged.txt", "staged\n");
    let wrepo = git2::Repository::open(&task.worktree).unwrap();
    let mut index = wrepo.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    // Unstaged, deleted, renamed, type-changed, untracked, binary, ignored.
    let readme = std::fs::read_to_string(task.worktree.join("README.md")).unwrap();
    task.write("README.md", format!("{readme}extra line\n"));
    std::fs::remove_file(task.worktree.join("delete_me.txt")).unwrap();
    std::fs::rename(
        task.worktree.join("rename_me.txt"),
        task.worktree.join("renamed.txt"),
    )
    .unwrap();
    std::fs::remove_file(task.worktree.join("typechange.txt")).unwrap();
    task.link("README.md", "typechange.txt");
    task.write("untracked.txt", "new\n");
    task.write(".hidden/dot.txt", "dot\n");
    task.write("blob.bin", b"\0\x01\x02binary");
    task.write("debug.log", "ignored\n");
    task.write("target/out.bin", "ignored");
    // A download's staging directories (one a crash cut short): byre's, never the agent's work.
    task.write(".byre-transfer-Ab12/partial.txt", "half a download\n");
    task.write(
        "docs/.byre-transfer-Cd34/more/part.txt",
        "half a download\n",
    );
    // A repository of its own inside the worktree (an agent cloned something): a gitlink.
    let nested = git2::Repository::init(task.worktree.join("nested")).unwrap();
    std::fs::write(task.worktree.join("nested/x.txt"), "x\n").unwrap();
    drop(nested);
    commit_nested(&task.worktree.join("nested"));
    // The default branch moves on after the task began: not part of the task's changes.
    std::fs::write(task.repo.path().join("on_main.txt"), "main\n").unwrap();
    commit_all(task.repo.path(), "main moves on");

    let index_before = task.index_bytes();
    let r = task.get("getTaskChanges", &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["base"], task.base_ref.as_str(), "the merge-base");
    let files = changed_files(&r.body);
    let want: BTreeMap<String, _> = [
        ("README.md", change("modified", None, 1, 0, false)),
        ("blob.bin", change("added", None, 0, 0, true)),
        ("committed.txt", change("added", None, 1, 0, false)),
        ("delete_me.txt", change("deleted", None, 0, 1, false)),
        (
            "renamed.txt",
            change("renamed", Some("rename_me.txt"), 0, 0, false),
        ),
        ("staged.txt", change("added", None, 1, 0, false)),
        // libgit2 gives a type change no hunks, so no line counts.
        ("typechange.txt", change("type_changed", None, 0, 0, false)),
        ("untracked.txt", change("added", None, 1, 0, false)),
        ("nested", change("added", None, 1, 0, false)),
        (".hidden/dot.txt", change("added", None, 1, 0, false)),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_owned(), c))
    .collect();
    assert_eq!(files, want);
    let tree = r.body["tree"].as_str().unwrap().to_owned();
    let git = git2::Repository::open(task.repo.path()).unwrap();
    let built = git.find_tree(git2::Oid::from_str(&tree).unwrap()).unwrap();
    assert!(built.get_path(Path::new("staged.txt")).is_ok());
    assert!(
        built.get_path(Path::new("debug.log")).is_err(),
        "ignored files stay out"
    );

    let again = task.get("getTaskChanges", &[]).await;
    assert_eq!(
        again.body, r.body,
        "the same worktree gives the same answer"
    );
    let since = task.get("getTaskChanges", &[("since", &committed)]).await;
    assert_eq!(since.status, 200);
    assert_eq!(since.body["base"], committed.as_str());
    assert_eq!(since.body["tree"], tree.as_str());
    let since_files = changed_files(&since.body);
    assert!(!since_files.contains_key("committed.txt"));
    assert!(since_files.contains_key("staged.txt"));
    let short = task
        .get("getTaskChanges", &[("since", &committed[..10])])
        .await;
    assert_eq!(short.body, since.body);

    // The patch of one file, of a rename, of an unchanged file.
    let base = task.base_ref.as_str();
    let diff = |path: &'static str, old: Option<&'static str>| {
        let mut q = vec![("base", base), ("tree", tree.as_str()), ("path", path)];
        q.extend(old.map(|o| ("old_path", o)));
        let task = &task;
        async move { task.get("getTaskDiff", &q).await }
    };
    let readme_diff = diff("README.md", None).await;
    assert_eq!(readme_diff.status, 200);
    assert_eq!(readme_diff.body["path"], "README.md");
    let patch = readme_diff.body["patch"].as_str().unwrap();
    assert!(
        patch.starts_with("diff --git a/README.md b/README.md\n"),
        "{patch}"
    );
    assert!(patch.contains("\n+extra line\n"), "{patch}");
    let renamed = diff("renamed.txt", Some("rename_me.txt")).await;
    let patch = renamed.body["patch"].as_str().unwrap();
    assert!(
        patch.contains("rename from rename_me.txt\nrename to renamed.txt"),
        "{patch}"
    );
    let added = diff("renamed.txt", None).await;
    assert!(added.body["patch"]
        .as_str()
        .unwrap()
        .contains("new file mode"));
    let unchanged = diff("src/main.rs", None).await;
    assert_eq!(unchanged.body["patch"], "");
    let with_commit_as_tree = task
        .get(
            "getTaskDiff",
            &[
                ("base", base),
                ("tree", &committed),
                ("path", "committed.txt"),
            ],
        )
        .await;
    assert!(with_commit_as_tree.body["patch"]
        .as_str()
        .unwrap()
        .contains("+committed"));

    let zeros = "0".repeat(40);
    let blob = git
        .revparse_single("HEAD:README.md")
        .unwrap()
        .id()
        .to_string();
    let bad = [
        ("since not hex", vec![("since", "HEAD~1")], 400),
        ("since unknown", vec![("since", &zeros)], 400),
        ("since too short", vec![("since", "abc")], 400),
        ("snapshot none taken", vec![("snapshot", "1")], 404),
        ("step without snapshot", vec![("step", "true")], 400),
        ("snapshot not a number", vec![("snapshot", "x")], 400),
        (
            "diff base short",
            vec![("base", "abc"), ("tree", &tree), ("path", "README.md")],
            400,
        ),
        (
            "diff unknown tree",
            vec![("base", base), ("tree", &zeros), ("path", "README.md")],
            404,
        ),
        (
            "diff blob as tree",
            vec![("base", base), ("tree", &blob), ("path", "README.md")],
            400,
        ),
    ];
    for (what, query, status) in bad {
        let op = if what.starts_with("diff") {
            "getTaskDiff"
        } else {
            "getTaskChanges"
        };
        let r = task.get(op, &query).await;
        assert_eq!(r.status, status, "{what}: {:?}", r.body);
        assert!(!r.message().is_empty(), "{what}");
    }
    let r = task
        .get("getTaskDiff", &[("base", base), ("path", "README.md")])
        .await;
    assert_eq!(r.status, 400, "tree is required");

    assert!(
        task.index_bytes() == index_before,
        "the worktree's index is byte-identical"
    );
    let status = git2::Repository::open(&task.worktree)
        .unwrap()
        .status_file(Path::new("untracked.txt"))
        .unwrap();
    assert_eq!(
        status,
        git2::Status::WT_NEW,
        "untracked work stays untracked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_file_is_read_only_in_part_and_changes_still_answer() {
    let task = task_on(|_| {}).await;
    let line = "0123456789 the quick brown fox jumps over the lazy dog 0123456789\n";
    let size = 50 * 1024 * 1024;
    let big: String = line.repeat(size / line.len() + 1)[..size].to_owned();
    task.write("big.txt", &big);
    drop(big);

    let r = task.get("getTaskFile", &[("path", "big.txt")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["size"], size);
    assert_eq!(r.body["truncated"], true);
    assert_eq!(r.body["binary"], false);
    assert_eq!(r.body["text"].as_str().unwrap().len(), MAX_TEXT_BYTES);

    let changes = task.get("getTaskChanges", &[]).await;
    assert_eq!(changes.status, 200, "{:?}", changes.body);
    let files = changed_files(&changes.body);
    assert_eq!(
        files.get("big.txt"),
        Some(&change("added", None, 0, 0, true)),
        "too large for line stats: counted as binary"
    );
    let tree = changes.body["tree"].as_str().unwrap();
    let diff = task
        .get(
            "getTaskDiff",
            &[
                ("base", &task.base_ref),
                ("tree", tree),
                ("path", "big.txt"),
            ],
        )
        .await;
    assert_eq!(diff.status, 200);
    let patch = diff.body["patch"].as_str().unwrap();
    assert!(
        patch.len() < 4096 && patch.contains("Binary files"),
        "{patch}"
    );
}
