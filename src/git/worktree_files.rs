//! The files of a task's worktree as its agent reads and writes them (CodeBolt's `fsEvent`
//! family). Nothing here touches git's own data. Every function blocks.
//!
//! The worktree is the agent's to write, so every request goes by handle (`byre_beneath`): the
//! path is checked as the worktree views check theirs ([`TreePath`]: relative, or absolute
//! under the worktree; no `..`, not into `.git`), then resolved by the kernel beneath the
//! worktree with no symlink followed, in one step: a directory swapped for a link meanwhile
//! leads nowhere. A symlink in a path is refused (the agent can follow its own links in its own
//! sandbox); a write replaces the file's name (a temporary file renamed over it, keeping its
//! mode), so a link at the name is replaced, never written through; a diff is applied whole or
//! not at all.

use std::io;
use std::path::{Path, PathBuf};

use byre_beneath::{Dir, Kind, Links};

use super::views::{TreePath, ViewError, Worktree};

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

/// Writes `content` to the file at `raw` (made, with its missing directories, or replaced).
/// # Errors
/// A path outside the worktree, into `.git` or through a symlink; the file cannot be written.
pub fn write(root: &Path, raw: &str, content: &str) -> Result<(), FileError> {
    let (dir, rel) = target(root, raw)?;
    Ok(write_file(&dir, &rel, content.as_bytes())?)
}

/// Replaces the content of the existing file at `raw`.
/// # Errors
/// As [`write`]; nothing there.
pub fn update(root: &Path, raw: &str, content: &str) -> Result<(), FileError> {
    let (dir, rel) = target(root, raw)?;
    dir.symlink_metadata(&rel, Links::Refuse)
        .map_err(|e| refusal(&rel, &e))?;
    Ok(write_file(&dir, &rel, content.as_bytes())?)
}

/// Makes the directory at `raw` and its missing parents.
/// # Errors
/// A path outside the worktree, into `.git` or through a symlink; the directory cannot be made.
pub fn create_folder(root: &Path, raw: &str) -> Result<(), FileError> {
    let (dir, rel) = target(root, raw)?;
    dir.create_dir_all(&rel).map_err(|e| refusal(&rel, &e))?;
    Ok(())
}

/// The text of the regular file at `raw` (invalid UTF-8 replaced).
/// # Errors
/// A path outside the worktree or through a symlink; not a file; larger than
/// [`MAX_READ_BYTES`].
pub fn read(root: &Path, raw: &str) -> Result<String, FileError> {
    let (dir, rel) = target(root, raw)?;
    let c = read_file(&dir, &rel)?;
    Ok(String::from_utf8_lossy(&c).into_owned())
}

/// Deletes the file at `raw`.
/// # Errors
/// A path outside the worktree or through a symlink, or the worktree itself; the file cannot
/// be deleted.
pub fn delete_file(root: &Path, raw: &str) -> Result<(), FileError> {
    let (dir, rel) = target(root, raw)?;
    if rel.as_os_str().is_empty() {
        return Err("refusing to delete the worktree".into());
    }
    Ok(dir.remove_file(&rel).map_err(|e| refusal(&rel, &e))?)
}

/// Deletes the directory at `raw` and all it holds (walked by handle, no symlink followed).
/// # Errors
/// As [`delete_file`].
pub fn delete_folder(root: &Path, raw: &str) -> Result<(), FileError> {
    let (dir, rel) = target(root, raw)?;
    if rel.as_os_str().is_empty() {
        return Err("refusing to delete the worktree".into());
    }
    Ok(dir.remove_dir_all(&rel).map_err(|e| refusal(&rel, &e))?)
}

/// The paths under the directory at `raw` (worktree-relative, directories ending in `/`,
/// `.git` left out, at most 5,000, no symlink followed), recursing when asked.
/// # Errors
/// A path outside the worktree or through a symlink; not a directory.
pub fn list_dir(root: &Path, raw: &str, recursive: bool) -> Result<Vec<String>, FileError> {
    let (dir, rel) = target(root, raw)?;
    dir.entries(&rel, Links::Refuse)
        .map_err(|e| refusal(&rel, &e))?;
    let mut out = Vec::new();
    list(&dir, &rel, recursive, &mut out);
    Ok(out)
}

/// Every path of the worktree, as [`list_dir`] gives them (nothing for a missing worktree).
pub fn list_all(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dir) = Dir::open(root) {
        list(&dir, Path::new(""), true, &mut out);
    }
    out
}

/// `path:line:text` of each line containing `needle` in the regular files under the
/// directory at `raw` (never read through a symlink; at most 500 lines).
/// # Errors
/// A path outside the worktree or through a symlink.
pub fn search(root: &Path, raw: &str, needle: &str) -> Result<Vec<String>, FileError> {
    let (dir, rel) = target(root, raw)?;
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
    let (dir, rel) = target(root, "")?;
    let mut files = Vec::new();
    list(&dir, &rel, true, &mut files);
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

/// The regular file at `rel` (never through a symlink; at most [`MAX_READ_BYTES`]).
fn read_file(dir: &Dir, rel: &Path) -> Result<Vec<u8>, String> {
    dir.read(rel, Links::Refuse, MAX_READ_BYTES)
        .map_err(|e| refusal(rel, &e))
}

/// A regular file's text (never through a symlink; at most [`MAX_TEXT_BYTES`]), for searches.
fn read_plain(dir: &Dir, rel: &Path) -> Option<String> {
    let bytes = dir.read(rel, Links::Refuse, MAX_TEXT_BYTES as u64).ok()?;
    String::from_utf8(bytes).ok()
}

/// Applies `diff`, a unified diff of one file (`---`/`+++` headers optional, their names
/// ignored), to the existing file `target` (checked as [`read`] checks its path) with
/// `diffy`: each hunk must find its context and removed lines exactly (at the line it names
/// or nearby, no fuzz). The new content goes to a temporary file beside it, which then
/// replaces the file in one `rename`: the file is either as it was or wholly patched.
/// # Errors
/// The reason, with the file unchanged: not a unified diff, no hunk, more than one file, a
/// path outside the worktree or not a regular file, a hunk that does not apply.
pub fn edit_with_diff(root: &Path, target_file: &str, diff: &str) -> Result<String, FileError> {
    patch(root, target_file, diff).map_err(FileError)
}

fn patch(root: &Path, target_file: &str, diff: &str) -> Result<String, String> {
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
    Ok(format!("applied {n} hunk(s) to {shown}"))
}

/// The paths under `rel` (directories with a trailing `/`), depth first in name order, at most
/// [`MAX_LISTED`]; `.git` left out, no symlink followed.
fn list(dir: &Dir, rel: &Path, recursive: bool, out: &mut Vec<String>) {
    let Ok(mut entries) = dir.entries(rel, Links::Refuse) else {
        return;
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        if e.name == ".git" || out.len() >= MAX_LISTED {
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
