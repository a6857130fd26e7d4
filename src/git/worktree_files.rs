//! The files of a task's worktree as its agent reads and writes them (CodeBolt's `fsEvent`
//! family): every path checked as the worktree views check theirs ([`super::views::WorkPath`]:
//! relative, or absolute under the worktree; no `..`, no `.git`; symlinks resolved and proven
//! inside), files written without following a symlink at their end, a diff applied whole or
//! not at all. Nothing here touches git's own data. Every function blocks.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::views::{TreePath, ViewError, WorkPath, Worktree};

/// Largest file [`read`] returns, and [`edit_with_diff`] patches, in bytes.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
/// Largest file whose text a search reads, in bytes.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Most paths a listing gives.
const MAX_LISTED: usize = 5000;
/// Most lines a search gives.
const MAX_HITS: usize = 500;

/// Why a file request was refused or failed, in words for the agent; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileError(pub String);

impl From<String> for FileError {
    fn from(m: String) -> Self {
        FileError(m)
    }
}

impl From<&str> for FileError {
    fn from(m: &str) -> Self {
        FileError(m.to_owned())
    }
}

impl From<ViewError> for FileError {
    fn from(e: ViewError) -> Self {
        FileError(e.to_string())
    }
}

impl From<std::io::Error> for FileError {
    fn from(e: std::io::Error) -> Self {
        FileError(e.to_string())
    }
}

/// Writes `content` to the file at `raw` (made, with its missing directories, or replaced).
/// # Errors
/// A path outside the worktree, into `.git` or through a symlink; the file cannot be written.
pub fn write(root: &Path, raw: &str, content: &str) -> Result<(), FileError> {
    Ok(write_file(&writable(root, raw)?, content)?)
}

/// Replaces the content of the existing file at `raw`.
/// # Errors
/// As [`write`]; nothing there.
pub fn update(root: &Path, raw: &str, content: &str) -> Result<(), FileError> {
    let (_, p) = existing(root, raw)?;
    Ok(write_file(p.resolved(), content)?)
}

/// Makes the directory at `raw` and its missing parents.
/// # Errors
/// A path outside the worktree or into `.git`; the directory cannot be made.
pub fn create_folder(root: &Path, raw: &str) -> Result<(), FileError> {
    let inside = if raw.trim_end_matches('/').is_empty() {
        "x".to_owned()
    } else {
        format!("{}/x", raw.trim_end_matches('/'))
    };
    writable(root, &inside)?;
    Ok(())
}

/// The text of the regular file at `raw` (invalid UTF-8 replaced).
/// # Errors
/// A path outside the worktree; not a file; larger than [`MAX_READ_BYTES`].
pub fn read(root: &Path, raw: &str) -> Result<String, FileError> {
    let (_, p) = existing(root, raw)?;
    let meta = std::fs::symlink_metadata(p.resolved())?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", p.as_str()).into());
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(format!("{} is larger than 16 MiB", p.as_str()).into());
    }
    let c = std::fs::read(p.resolved())?;
    Ok(String::from_utf8_lossy(&c).into_owned())
}

/// Deletes the file at `raw`.
/// # Errors
/// A path outside the worktree, or the worktree itself; the file cannot be deleted.
pub fn delete_file(root: &Path, raw: &str) -> Result<(), FileError> {
    let (_, p) = existing(root, raw)?;
    if p.as_str().is_empty() {
        return Err("refusing to delete the worktree".into());
    }
    Ok(std::fs::remove_file(p.resolved())?)
}

/// Deletes the directory at `raw` and all it holds.
/// # Errors
/// As [`delete_file`].
pub fn delete_folder(root: &Path, raw: &str) -> Result<(), FileError> {
    let (_, p) = existing(root, raw)?;
    if p.as_str().is_empty() {
        return Err("refusing to delete the worktree".into());
    }
    Ok(std::fs::remove_dir_all(p.resolved())?)
}

/// The paths under the directory at `raw` (worktree-relative, directories ending in `/`,
/// `.git` left out, at most 5,000), recursing when asked.
/// # Errors
/// A path outside the worktree.
pub fn list_dir(root: &Path, raw: &str, recursive: bool) -> Result<Vec<String>, FileError> {
    let (wt, p) = existing(root, raw)?;
    let mut out = Vec::new();
    list(p.resolved(), wt.root(), recursive, &mut out);
    Ok(out)
}

/// Every path of the worktree, as [`list_dir`] gives them (nothing for a missing worktree).
pub fn list_all(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    list(root, root, true, &mut out);
    out
}

/// `path:line:text` of each line containing `needle` in the regular files under the
/// directory at `raw` (never read through a symlink; at most 500 lines).
/// # Errors
/// A path outside the worktree.
pub fn search(root: &Path, raw: &str, needle: &str) -> Result<Vec<String>, FileError> {
    let (wt, p) = existing(root, raw)?;
    let mut files = Vec::new();
    list(p.resolved(), wt.root(), true, &mut files);
    let mut hits = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with('/')) {
        let Some(c) = read_plain(&wt.root().join(f)) else {
            continue;
        };
        for (i, line) in c.lines().enumerate() {
            if line.contains(needle) && hits.len() < MAX_HITS {
                hits.push(format!("{f}:{}:{line}", i + 1));
            }
        }
    }
    Ok(hits)
}

/// The worktree's paths containing `query`.
/// # Errors
/// The worktree is missing.
pub fn find(root: &Path, query: &str) -> Result<Vec<String>, FileError> {
    let (wt, p) = existing(root, "")?;
    let mut files = Vec::new();
    list(p.resolved(), wt.root(), true, &mut files);
    Ok(files.into_iter().filter(|f| f.contains(query)).collect())
}

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
            Err(ViewError::NotFound(_)) if n > 0 => n -= 1,
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
fn read_plain(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TEXT_BYTES as u64 {
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
pub fn edit_with_diff(root: &Path, target: &str, diff: &str) -> Result<String, FileError> {
    patch(root, target, diff).map_err(FileError)
}

fn patch(root: &Path, target: &str, diff: &str) -> Result<String, String> {
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
    Ok(format!("applied {n} hunk(s) to {}", p.as_str()))
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

fn list(dir: &Path, root: &Path, recursive: bool, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.file_name() == ".git" || out.len() >= MAX_LISTED {
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
