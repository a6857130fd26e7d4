//! Read-only views of a task's worktree, for the worktree operations of the contract: one
//! directory ([`task_dir`], `getTaskDir`), one file ([`task_file`], `getTaskFile`), an image
//! ([`task_image`], `getTaskImage`), the worktree's changes against a base ([`task_changes`],
//! `getTaskChanges`) and the patch of one file ([`task_diff`], `getTaskDiff`); the last two
//! live in `views/changes.rs`.
//!
//! Every path from a request becomes a [`TreePath`] (relative and normalised, checked without
//! touching the filesystem) and, for the filesystem views, a [`WorkPath`]: found by the kernel
//! beneath the worktree's handle (`byre_beneath`, links that stay inside followed, one that
//! leaves refused), where it leads read back from the descriptor and proven outside `.git`.
//! What a view then reads it opens beneath the same handle with no link followed, so a
//! directory the agent swaps for a link meanwhile leads nowhere. Nothing here writes the
//! worktree, its index or any ref; [`task_changes`] only adds blobs and trees to the object
//! database, as `git add` would. Every function blocks: call them off the async threads.

use std::fs::{self, File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use byre_beneath::{Dir, Kind, Links};

use git2::{Repository, RepositoryOpenFlags};

pub(crate) mod changes;

pub use changes::{
    snapshot_changes, staged_index, task_changes, task_diff, ChangeStatus, Changes, FileChange,
    SnapshotBase, MAX_DIFF_FILE_BYTES,
};

/// Most entries [`task_dir`] returns; the listing says `truncated` when there are more.
pub const MAX_DIR_ENTRIES: usize = 5_000;
/// Most bytes of text [`task_file`] returns (1 MiB); it never reads more than one byte beyond.
pub const MAX_TEXT_BYTES: u64 = 1024 * 1024;
/// Largest image [`task_image`] serves (32 MiB).
pub const MAX_IMAGE_BYTES: u64 = 32 * 1024 * 1024;
/// Longest path accepted, in bytes.
const MAX_PATH_BYTES: usize = 4096;

/// Why a view could not be answered. The HTTP layer gives each its status.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The request is malformed: a bad path (NUL, backslash, empty or `.` component), a
    /// directory where a file is wanted, a bad sha, a file type that is not an image.
    #[error("{0}")]
    Invalid(String),
    /// The path leaves the worktree: `..`, absolute, through `.git`, or a symlink whose
    /// target is outside.
    #[error("{0}")]
    Outside(String),
    /// Nothing is there: no such file, object or commit.
    #[error("{0}")]
    NotFound(String),
    /// The worktree or its branches are not in a state to answer (worktree missing, default
    /// branch gone, no merge-base).
    #[error("{0}")]
    Conflict(String),
    /// Anything else from libgit2 or the filesystem.
    #[error("{0}")]
    Other(String),
}

impl From<git2::Error> for ViewError {
    fn from(e: git2::Error) -> Self {
        ViewError::Other(format!("git: {}", e.message()))
    }
}

/// A task's worktree, opened for reading: its canonical root directory and a handle on it.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// The path as recorded for the task (agents see this one).
    given: PathBuf,
    /// The same directory with every symlink resolved.
    root: PathBuf,
    /// The root, as a handle every path of the views resolves beneath.
    dir: Arc<Dir>,
}

impl Worktree {
    /// Opens the worktree at `path` (absolute, as recorded for its task).
    ///
    /// # Errors
    /// [`ViewError::Conflict`] when the directory is missing or not a directory.
    pub fn open(path: &Path) -> Result<Worktree, ViewError> {
        let missing = |why: String| {
            ViewError::Conflict(format!("the worktree {} is missing: {why}", path.display()))
        };
        let root = fs::canonicalize(path).map_err(|e| missing(e.to_string()))?;
        let dir = Dir::open(&root).map_err(|e| missing(e.to_string()))?;
        Ok(Worktree {
            given: path.to_owned(),
            root,
            dir: Arc::new(dir),
        })
    }

    /// The worktree's canonical root (every symlink resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The handle on the root.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The repository of the worktree (no search upwards, no environment).
    pub fn repo(&self) -> Result<Repository, ViewError> {
        let flags = RepositoryOpenFlags::NO_SEARCH;
        Repository::open_ext(&self.root, flags, std::iter::empty::<&std::ffi::OsStr>()).map_err(
            |e| {
                ViewError::Conflict(format!(
                    "the worktree is not a git worktree: {}",
                    e.message()
                ))
            },
        )
    }
}

/// Whether the relative path `rel` goes into a `.git` entry.
fn into_git(rel: &Path) -> bool {
    rel.components().any(|c| is_git_dir(c.as_os_str()))
}

fn is_git_dir(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().eq_ignore_ascii_case(b".git")
}

/// A path inside a tree or worktree as requests give it: relative, slash-separated and
/// normalised — no empty, `.`, `..` or `.git` component, no NUL byte, no backslash, at most
/// 4096 bytes. The root is the empty path. Checked without touching the filesystem, so it says
/// nothing about what exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreePath(String);

impl TreePath {
    /// Parses a request's path; `""` is the root.
    ///
    /// # Errors
    /// [`ViewError::Outside`] for an absolute path or a `..` or `.git` component;
    /// [`ViewError::Invalid`] for NUL, backslash, empty or `.` components, or over 4096 bytes.
    pub fn parse(raw: &str) -> Result<TreePath, ViewError> {
        let invalid = |why: &str| Err(ViewError::Invalid(format!("path {raw:?} {why}")));
        if raw.contains('\0') {
            return invalid("contains a NUL byte");
        }
        if raw.contains('\\') {
            return invalid("contains a backslash; separate with /");
        }
        if raw.len() > MAX_PATH_BYTES {
            return invalid("is longer than 4096 bytes");
        }
        if raw.starts_with('/') {
            return Err(ViewError::Outside(format!(
                "path {raw:?} must be relative to the worktree"
            )));
        }
        if raw.is_empty() {
            return Ok(TreePath(String::new()));
        }
        for part in raw.split('/') {
            match part {
                "" => return invalid("has an empty component"),
                "." => return invalid("has a `.` component"),
                ".." => {
                    return Err(ViewError::Outside(format!(
                        "path {raw:?} must not contain `..`"
                    )))
                }
                _ if is_git_dir(std::ffi::OsStr::new(part)) => {
                    return Err(ViewError::Outside(format!(
                        "path {raw:?} goes into .git, which is not shown"
                    )))
                }
                _ => {}
            }
        }
        Ok(TreePath(raw.to_owned()))
    }

    /// Whether this is the root (the empty path).
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl AsRef<str> for TreePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TreePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A path proven inside a worktree: a [`TreePath`] that exists, found by the kernel beneath the
/// worktree's handle (links that stay inside followed), leading outside `.git`. A symlink loop
/// is an error, never a hang (the kernel bounds the resolution).
#[derive(Debug)]
pub struct WorkPath {
    /// As requested (relative, normalised).
    path: TreePath,
    /// Where it leads, relative to the worktree's root (no link in it).
    found: PathBuf,
    /// The worktree's handle.
    dir: Arc<Dir>,
}

impl WorkPath {
    /// Parses a request's path, relative to the worktree; `""` is the root.
    ///
    /// # Errors
    /// As [`TreePath::parse`]; then [`ViewError::NotFound`] when nothing is there (a dangling
    /// symlink included), [`ViewError::Invalid`] for a symlink loop, [`ViewError::Outside`] when
    /// it leads outside the worktree or inside `.git`.
    pub fn parse(raw: &str, worktree: &Worktree) -> Result<WorkPath, ViewError> {
        Self::resolve(TreePath::parse(raw)?, worktree)
    }

    /// Like [`WorkPath::parse`], but also accepts an absolute path under the worktree (as
    /// recorded for the task, or canonical): `getTaskImage`'s rule.
    ///
    /// # Errors
    /// As [`WorkPath::parse`]; an absolute path elsewhere is [`ViewError::Outside`].
    pub fn parse_absolute_or_relative(
        raw: &str,
        worktree: &Worktree,
    ) -> Result<WorkPath, ViewError> {
        if !raw.starts_with('/') || raw.contains('\0') {
            return Self::parse(raw, worktree);
        }
        let under = |root: &Path| {
            let rest = raw.strip_prefix(root.to_str()?)?;
            rest.strip_prefix('/').or(rest.is_empty().then_some(""))
        };
        let rest = under(&worktree.given)
            .or_else(|| under(&worktree.root))
            .ok_or_else(|| ViewError::Outside(format!("{raw:?} is outside the worktree")))?;
        Self::parse(rest, worktree)
    }

    fn resolve(path: TreePath, worktree: &Worktree) -> Result<WorkPath, ViewError> {
        let found = worktree
            .dir
            .locate(Path::new(&path.0), Links::Beneath)
            .map_err(|e| io_refusal(&path, &e))?;
        if into_git(&found) {
            return Err(ViewError::Outside(format!(
                "path {path} leads into .git, which is not shown"
            )));
        }
        Ok(WorkPath {
            path,
            found,
            dir: worktree.dir.clone(),
        })
    }

    /// Where the path leads, relative to the worktree's root (no link in it).
    pub fn found(&self) -> &Path {
        &self.found
    }

    /// The path as requested, relative to the worktree root.
    pub fn as_str(&self) -> &str {
        &self.path.0
    }

    /// Opens the file for reading: it must be a regular file (a FIFO or device is refused
    /// without blocking), reached where it was found with no link followed, so a link
    /// swapped in meanwhile cannot lead out.
    fn open_regular(&self) -> Result<(File, Metadata), ViewError> {
        match self.dir.open_file(&self.found, Links::Refuse) {
            Ok(opened) => Ok(opened),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                let what = match self.dir.metadata(&self.found, Links::Refuse) {
                    Ok(m) if m.is_dir() => "is a directory",
                    _ => "is not a regular file",
                };
                Err(ViewError::Invalid(format!("{} {what}", self.path)))
            }
            Err(e) if byre_beneath::is_refused(&e) => Err(ViewError::Invalid(format!(
                "{} changed while it was read; try again",
                self.path
            ))),
            Err(e) => Err(io_refusal(&self.path, &e)),
        }
    }
}

/// The refusal for an I/O error met while resolving or opening `path`.
fn io_refusal(path: &TreePath, e: &std::io::Error) -> ViewError {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => {
            ViewError::NotFound(format!("nothing at path {path} in the worktree"))
        }
        Some(libc::ELOOP) => {
            ViewError::Invalid(format!("path {path}: too many levels of symbolic links"))
        }
        Some(libc::EXDEV) => ViewError::Outside(format!("path {path} leads outside the worktree")),
        Some(libc::ENAMETOOLONG) => ViewError::Invalid(format!("path {path} is too long")),
        Some(libc::EACCES) => ViewError::Invalid(format!("path {path} cannot be read: {e}")),
        _ => ViewError::Other(format!("path {path}: {e}")),
    }
}

/// What a directory entry is, following a symlink that stays in the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink leaving the worktree or pointing nowhere; a device, socket or pipe.
    Other,
}

/// One entry of a [`DirListing`] (spec `DirEntry`).
#[derive(Debug)]
pub struct DirEntry {
    /// File name (lossy when not UTF-8).
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Whether the entry itself is a symlink.
    pub symlink: bool,
    /// Files: size in bytes (of the target for a symlink); 0 otherwise.
    pub size: u64,
    /// Whether git ignores it (the ignore files match it or a directory above it).
    pub ignored: bool,
}

/// One directory of a worktree (spec `DirListing`).
#[derive(Debug)]
pub struct DirListing {
    /// The directory as requested; empty for the root.
    pub path: String,
    /// Where it was found, relative to the worktree's root (no link in it).
    pub found: PathBuf,
    /// Directories first, then by name (byte order); `.git` left out.
    pub entries: Vec<DirEntry>,
    /// More than [`MAX_DIR_ENTRIES`] entries were there.
    pub truncated: bool,
}

/// `getTaskDir`: the entries of directory `dir`, directories first then by name, at most
/// [`MAX_DIR_ENTRIES`]; `.git` left out. Whether git ignores each is the caller's to fill in
/// (`ignored` is false here): the ignore files are the agent's, read in the task's sandbox
/// (`git::boxed::Job::Ignored` of [`DirListing::entry_paths`]).
///
/// # Errors
/// [`ViewError::Invalid`] when `dir` is not a directory; [`ViewError::Other`] for I/O and
/// libgit2 failures.
pub fn task_dir(worktree: &Worktree, dir: &WorkPath) -> Result<DirListing, ViewError> {
    let io = |e: std::io::Error| io_refusal(&dir.path, &e);
    let meta = worktree
        .dir
        .metadata(&dir.found, Links::Refuse)
        .map_err(io)?;
    if !meta.is_dir() {
        return Err(ViewError::Invalid(format!(
            "{} is not a directory",
            dir.path
        )));
    }
    let handle = worktree
        .dir
        .open_dir(&dir.found, Links::Refuse)
        .map_err(io)?;
    let mut found = Vec::new();
    for entry in handle.list().map_err(io)? {
        if entry.name == ".git" {
            continue;
        }
        let (kind, size) = classify(worktree, &handle, &dir.found, &entry);
        found.push((entry.name, kind, entry.kind == Kind::Symlink, size));
    }
    found.sort_by(|a, b| (a.1 != EntryKind::Dir, &a.0).cmp(&(b.1 != EntryKind::Dir, &b.0)));
    let truncated = found.len() > MAX_DIR_ENTRIES;
    found.truncate(MAX_DIR_ENTRIES);
    let entries = found
        .into_iter()
        .map(|(name, kind, symlink, size)| DirEntry {
            name: name.to_string_lossy().into_owned(),
            kind,
            symlink,
            size,
            ignored: false,
        })
        .collect();
    Ok(DirListing {
        path: dir.path.0.clone(),
        found: dir.found.clone(),
        entries,
        truncated,
    })
}

impl DirListing {
    /// Each entry's path relative to the worktree's root, in order (for whether git ignores
    /// it).
    pub fn entry_paths(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| self.found.join(&e.name).to_string_lossy().into_owned())
            .collect()
    }
}

/// What `entry` of the directory `handle` (at `dir`, relative to the worktree's root) is, and
/// its size for a file: a symlink counts as what it leads to when that is inside the worktree
/// and outside `.git` (found beneath the worktree's handle), else as [`EntryKind::Other`].
fn classify(
    worktree: &Worktree,
    handle: &Dir,
    dir: &Path,
    entry: &byre_beneath::Entry,
) -> (EntryKind, u64) {
    let of = |m: &Metadata| match () {
        () if m.is_dir() => EntryKind::Dir,
        () if m.is_file() => EntryKind::File,
        () => EntryKind::Other,
    };
    let name = Path::new(&entry.name);
    let meta = match entry.kind {
        Kind::Symlink => worktree
            .dir
            .locate(&dir.join(name), Links::Beneath)
            .ok()
            .filter(|target| !into_git(target))
            .and_then(|target| worktree.dir.metadata(&target, Links::Refuse).ok()),
        _ => handle.symlink_metadata(name, Links::Refuse).ok(),
    };
    match meta {
        Some(m) => {
            let kind = of(&m);
            (kind, if kind == EntryKind::File { m.len() } else { 0 })
        }
        None => (EntryKind::Other, 0),
    }
}

/// One file of a worktree (spec `FileContent`).
#[derive(Debug)]
pub struct FileContent {
    /// The file as requested.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Not UTF-8 text (invalid UTF-8 or a NUL byte in its first [`MAX_TEXT_BYTES`]).
    pub binary: bool,
    /// `text` holds only the file's first [`MAX_TEXT_BYTES`] (cut at a character boundary).
    pub truncated: bool,
    /// The text; empty when binary.
    pub text: String,
}

/// `getTaskFile`: a regular file's text, up to [`MAX_TEXT_BYTES`]. Reads at most one byte more
/// than that, whatever the file's size.
///
/// # Errors
/// [`ViewError::Invalid`] for a directory or anything but a regular file; [`ViewError::Other`]
/// for I/O failures.
pub fn task_file(file: &WorkPath) -> Result<FileContent, ViewError> {
    let (handle, meta) = file.open_regular()?;
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_TEXT_BYTES + 1) as usize);
    handle
        .take(MAX_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_refusal(&file.path, &e))?;
    let cut = bytes.len() as u64 > MAX_TEXT_BYTES;
    bytes.truncate(MAX_TEXT_BYTES as usize);
    let text = decode_text(bytes, cut);
    Ok(FileContent {
        path: file.path.0.clone(),
        size: meta.len(),
        binary: text.is_none(),
        truncated: cut && text.is_some(),
        text: text.unwrap_or_default(),
    })
}

/// `bytes` as text, or None when binary. When `cut`, a character split at the end is dropped.
fn decode_text(mut bytes: Vec<u8>, cut: bool) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(&bytes) {
        Ok(_) => {}
        Err(e) if cut && e.error_len().is_none() => bytes.truncate(e.valid_up_to()),
        Err(_) => return None,
    }
    String::from_utf8(bytes).ok()
}

/// An image's bytes and content type.
#[derive(Debug)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif`, `image/webp` or `image/svg+xml`.
    pub content_type: &'static str,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// `getTaskImage`: an image file, its type chosen by the extension of the requested name
/// (`.png`, `.jpg`/`.jpeg`, `.gif`, `.webp`, `.svg`, any case), at most [`MAX_IMAGE_BYTES`].
///
/// # Errors
/// [`ViewError::Invalid`] for another extension, a file too large, or anything but a regular
/// file; [`ViewError::Other`] for I/O failures.
pub fn task_image(file: &WorkPath) -> Result<Image, ViewError> {
    let ext = Path::new(&file.path.0)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let content_type = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => {
            return Err(ViewError::Invalid(format!(
                "{} is not a PNG, JPEG, GIF, WebP or SVG image (by its extension)",
                file.path
            )))
        }
    };
    let (handle, meta) = file.open_regular()?;
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_IMAGE_BYTES + 1) as usize);
    handle
        .take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_refusal(&file.path, &e))?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ViewError::Invalid(format!(
            "{} is larger than {} MiB",
            file.path,
            MAX_IMAGE_BYTES >> 20
        )));
    }
    Ok(Image {
        content_type,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    fn kind<T: std::fmt::Debug>(r: Result<T, ViewError>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(ViewError::Invalid(_)) => "Invalid",
            Err(ViewError::Outside(_)) => "Outside",
            Err(ViewError::NotFound(_)) => "NotFound",
            Err(ViewError::Conflict(_)) => "Conflict",
            Err(ViewError::Other(_)) => "Other",
        }
    }

    #[test]
    fn tree_paths_are_relative_and_normalised() {
        let cases = [
            ("", "ok"),
            ("a", "ok"),
            ("src/main.rs", "ok"),
            ("a..b/c.d", "ok"),
            ("...", "ok"),
            (".gitignore", "ok"),
            ("dir/.hidden", "ok"),
            ("..", "Outside"),
            ("../x", "Outside"),
            ("a/../../x", "Outside"),
            ("a/..", "Outside"),
            ("/etc/passwd", "Outside"),
            ("/", "Outside"),
            (".git", "Outside"),
            ("a/.GIT/config", "Outside"),
            ("a//b", "Invalid"),
            ("a/", "Invalid"),
            ("./a", "Invalid"),
            ("a/./b", "Invalid"),
            ("a\0b", "Invalid"),
            ("..\\..\\etc", "Invalid"),
            ("a\\b", "Invalid"),
        ];
        for (raw, want) in cases {
            assert_eq!(kind(TreePath::parse(raw)), want, "{raw:?}");
        }
        let long = "a/".repeat(2048) + "b";
        assert_eq!(kind(TreePath::parse(&long)), "Invalid");
        assert!(TreePath::parse("").unwrap().is_root());
        assert_eq!(TreePath::parse("a/b").unwrap().as_ref(), "a/b");
    }

    /// A worktree-like directory and, beside it, a directory outside.
    fn fixture() -> (TempDir, Worktree, PathBuf) {
        let top = TempDir::new().unwrap();
        let wt = top.path().join("wt");
        let outside = top.path().join("outside");
        fs::create_dir_all(wt.join("src")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(wt.join("src/main.rs"), "fn main() {}\n").unwrap();
        fs::write(wt.join(".git"), "gitdir: /nowhere\n").unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        symlink("src", wt.join("link_in")).unwrap();
        symlink(outside.join("secret.txt"), wt.join("link_out")).unwrap();
        symlink(&outside, wt.join("link_out_dir")).unwrap();
        symlink("../outside/secret.txt", wt.join("link_up")).unwrap();
        symlink("nowhere", wt.join("dangling")).unwrap();
        symlink("loop_b", wt.join("loop_a")).unwrap();
        symlink("loop_a", wt.join("loop_b")).unwrap();
        symlink(".git", wt.join("link_git")).unwrap();
        let worktree = Worktree::open(&wt).unwrap();
        (top, worktree, outside)
    }

    #[test]
    fn work_paths_are_proven_inside_the_worktree() {
        let (_top, wt, _outside) = fixture();
        let cases = [
            ("", "ok"),
            ("src", "ok"),
            ("src/main.rs", "ok"),
            ("link_in/main.rs", "ok"),
            ("link_out", "Outside"),
            ("link_out_dir", "Outside"),
            ("link_out_dir/secret.txt", "Outside"),
            ("link_up", "Outside"),
            ("link_git", "Outside"),
            ("dangling", "NotFound"),
            ("missing.txt", "NotFound"),
            ("src/main.rs/x", "NotFound"),
            ("loop_a", "Invalid"),
            ("loop_a/x", "Invalid"),
            ("../outside/secret.txt", "Outside"),
            ("/etc/passwd", "Outside"),
        ];
        for (raw, want) in cases {
            assert_eq!(kind(WorkPath::parse(raw, &wt)), want, "{raw:?}");
        }
        let p = WorkPath::parse("link_in/main.rs", &wt).unwrap();
        assert_eq!(p.as_str(), "link_in/main.rs");
        assert_eq!(p.found(), Path::new("src/main.rs"));
    }

    #[test]
    fn absolute_paths_must_be_under_the_worktree() {
        let (_top, wt, outside) = fixture();
        let root = wt.root.to_str().unwrap().to_owned();
        let given = wt.given.to_str().unwrap().to_owned();
        let secret = outside.join("secret.txt");
        let cases = [
            (format!("{root}/src/main.rs"), "ok"),
            (format!("{given}/src/main.rs"), "ok"),
            ("src/main.rs".to_owned(), "ok"),
            (format!("{root}/../outside/secret.txt"), "Outside"),
            (format!("{root}x/src/main.rs"), "Outside"),
            (format!("{root}/link_out"), "Outside"),
            (secret.to_str().unwrap().to_owned(), "Outside"),
            ("/etc/passwd".to_owned(), "Outside"),
            (format!("{root}/a\0b"), "Invalid"),
        ];
        for (raw, want) in cases {
            assert_eq!(
                kind(WorkPath::parse_absolute_or_relative(&raw, &wt)),
                want,
                "{raw:?}"
            );
        }
    }

    #[test]
    fn text_is_cut_at_a_character_boundary_and_binary_is_refused() {
        assert_eq!(decode_text(b"abc".to_vec(), false).as_deref(), Some("abc"));
        assert_eq!(
            decode_text("aé".as_bytes()[..2].to_vec(), true).as_deref(),
            Some("a")
        );
        assert_eq!(decode_text("aé".as_bytes()[..2].to_vec(), false), None);
        assert_eq!(decode_text(b"a\0b".to_vec(), false), None);
        assert_eq!(decode_text(vec![0xff, b'a'], true), None);
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let (_top, wt, _outside) = fixture();
        let fifo = wt.root.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let p = WorkPath::parse("pipe", &wt).unwrap();
        assert_eq!(kind(task_file(&p)), "Invalid");
    }
}
