//! The gzipped tars of client transfers (`getClientTransfer`, `putClientTransfer`), on both
//! sides: byre packs a worktree path for an `upload` request and unpacks what a `download`
//! request brings back; `byre client` does the reverse. An archive holds one file or
//! directory under its own name (its one top-level entry).
//!
//! Unpacking is where a hostile archive could reach outside its destination, so it goes into
//! a fresh staging directory and refuses, before writing the entry: a path that is absolute
//! or has a `..` component, entries under more than one top-level name, hard links, devices
//! and FIFOs, and symlinks whose target is absolute or has a `..` component (a target that
//! only descends stays inside whatever other links the archive holds). A refused archive
//! leaves nothing behind: the staging directory is removed, the destination untouched. Only
//! once the whole archive unpacked does [`unpack_to`] put its entry in place. Every function
//! blocks.

use std::fs;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::EntryType;

/// Largest transfer, packed or unpacked, in bytes (1 GiB).
pub const MAX_TRANSFER_BYTES: u64 = 1024 * 1024 * 1024;

/// Why an archive could not be packed or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The archive holds an entry that would leave its destination, or one byre does not
    /// unpack (a hard link, a device, a FIFO), or not exactly one top-level entry.
    #[error("{0}")]
    Refused(String),
    /// More than [`MAX_TRANSFER_BYTES`].
    #[error("{0}")]
    TooLarge(String),
    /// Not a gzipped tar, or a file system error.
    #[error("{0}")]
    Io(String),
}

fn io(what: &str) -> impl Fn(std::io::Error) -> ArchiveError + '_ {
    move |e| ArchiveError::Io(format!("{what}: {e}"))
}

/// Writes `path` (a file, a directory with everything under it, or a symlink as a link) as a
/// gzipped tar holding it under its own name. With `skip_git`, entries named `.git` are left
/// out (a worktree's own git data).
/// # Errors
/// [`ArchiveError::Io`] when `path` has no name or cannot be read;
/// [`ArchiveError::TooLarge`] beyond [`MAX_TRANSFER_BYTES`] of file data.
pub fn pack(path: &Path, out: impl Write, skip_git: bool) -> Result<(), ArchiveError> {
    let name = path
        .file_name()
        .ok_or_else(|| ArchiveError::Io(format!("{} has no name", path.display())))?;
    let mut builder = tar::Builder::new(GzEncoder::new(out, Compression::fast()));
    builder.follow_symlinks(false);
    let mut n_bytes = 0u64;
    add(&mut builder, path, Path::new(name), skip_git, &mut n_bytes)?;
    builder
        .into_inner()
        .and_then(|gz| gz.finish())
        .map_err(io("cannot write the archive"))?;
    Ok(())
}

fn add<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &Path,
    name: &Path,
    skip_git: bool,
    n_bytes: &mut u64,
) -> Result<(), ArchiveError> {
    let meta = fs::symlink_metadata(path).map_err(io(&path.display().to_string()))?;
    if meta.is_file() {
        *n_bytes += meta.len();
        if *n_bytes > MAX_TRANSFER_BYTES {
            return Err(too_large());
        }
    }
    builder
        .append_path_with_name(path, name)
        .map_err(io(&path.display().to_string()))?;
    if meta.is_dir() {
        let mut children: Vec<_> = fs::read_dir(path)
            .map_err(io(&path.display().to_string()))?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| !(skip_git && n == ".git"))
            .collect();
        children.sort();
        for child in children {
            add(
                builder,
                &path.join(&child),
                &name.join(&child),
                skip_git,
                n_bytes,
            )?;
        }
    }
    Ok(())
}

fn too_large() -> ArchiveError {
    ArchiveError::TooLarge(format!(
        "transfers are limited to {} MiB",
        MAX_TRANSFER_BYTES / (1024 * 1024)
    ))
}

/// Whether a relative path only descends: no root, prefix or `..` component, not empty.
fn descends_only(path: &Path) -> bool {
    let mut any = false;
    for c in path.components() {
        match c {
            Component::Normal(_) => any = true,
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    any
}

/// Unpacks the gzipped tar read from `archive` into the empty directory `staging`; returns
/// the name of its one top-level entry.
/// # Errors
/// [`ArchiveError::Refused`] for an entry that leaves `staging` or is not unpacked (see the
/// module's doc); [`ArchiveError::TooLarge`] beyond [`MAX_TRANSFER_BYTES`];
/// [`ArchiveError::Io`] for a malformed archive or a file system error. What was unpacked
/// before the error stays in `staging`: callers remove it.
pub fn unpack(archive: impl Read, staging: &Path) -> Result<PathBuf, ArchiveError> {
    let mut tar = tar::Archive::new(GzDecoder::new(archive));
    tar.set_overwrite(true);
    tar.set_preserve_mtime(true);
    tar.set_unpack_xattrs(false);
    let mut top: Option<PathBuf> = None;
    let mut n_bytes = 0u64;
    let entries = tar.entries().map_err(io("not a tar archive"))?;
    for entry in entries {
        let mut entry = entry.map_err(io("a malformed archive entry"))?;
        let path = entry.path().map_err(io("an entry's path"))?.into_owned();
        let shown = path.display().to_string();
        if path.components().all(|c| c == Component::CurDir) {
            return Err(ArchiveError::Refused(format!(
                "the archive's entry `{shown}` is the archive's root itself: a transfer holds the file or directory under its own name (`tar -C parent -czf - name`), not `.`"
            )));
        }
        if !descends_only(&path) {
            return Err(ArchiveError::Refused(format!(
                "the archive's entry `{shown}` leaves its destination (absolute or `..`)"
            )));
        }
        let first = path
            .components()
            .find(|c| matches!(c, Component::Normal(_)))
            .map(|c| PathBuf::from(c.as_os_str()))
            .unwrap_or_default();
        match &top {
            None => top = Some(first),
            Some(t) if *t == first => {}
            Some(t) => {
                return Err(ArchiveError::Refused(format!(
                    "the archive holds more than one top-level entry (`{}` and `{}`)",
                    t.display(),
                    first.display()
                )))
            }
        }
        match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous | EntryType::Directory => {}
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(io("a link's target"))?
                    .unwrap_or_default()
                    .into_owned();
                if !descends_only(&target) {
                    return Err(ArchiveError::Refused(format!(
                        "the archive's link `{shown}` points to `{}`, outside its destination (links may only point down, without `..`)",
                        target.display()
                    )));
                }
            }
            EntryType::XGlobalHeader => continue,
            other => {
                return Err(ArchiveError::Refused(format!(
                    "the archive's entry `{shown}` is a {other:?}; only files, directories and links inside are unpacked"
                )))
            }
        }
        n_bytes += entry.size();
        if n_bytes > MAX_TRANSFER_BYTES {
            return Err(too_large());
        }
        let inside = entry
            .unpack_in(staging)
            .map_err(io(&format!("cannot unpack `{shown}`")))?;
        if !inside {
            return Err(ArchiveError::Refused(format!(
                "the archive's entry `{shown}` leaves its destination"
            )));
        }
    }
    top.ok_or_else(|| ArchiveError::Refused("the archive is empty".into()))
}

/// The name prefix of the staging directory [`unpack_to`] makes beside its destination (in a
/// task's worktree, for a download). Snapshots and the worktree views leave out any path
/// through one, so a transfer in progress, or one a crash cut short, is never committed.
pub const STAGING_PREFIX: &str = ".byre-transfer-";

/// Unpacks the gzipped tar read from `archive` and puts its one entry at `dest` (absolute),
/// replacing whatever is there (a symlink at `dest` is replaced, not followed). The entry is
/// unpacked in full into a staging directory beside `dest` first, so a refused archive leaves
/// `dest` as it was. `dest`'s parent directories are made.
/// # Errors
/// As [`unpack`]; [`ArchiveError::Io`] when `dest` has no parent or cannot be replaced.
pub fn unpack_to(archive: impl Read, dest: &Path) -> Result<(), ArchiveError> {
    let parent = dest
        .parent()
        .filter(|_| dest.file_name().is_some())
        .ok_or_else(|| ArchiveError::Io(format!("{} cannot be replaced", dest.display())))?;
    fs::create_dir_all(parent).map_err(io(&parent.display().to_string()))?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(parent)
        .map_err(io("cannot make a staging directory"))?;
    let top = unpack(archive, staging.path())?;
    match fs::symlink_metadata(dest) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(dest),
        Ok(_) => fs::remove_file(dest),
        Err(_) => Ok(()),
    }
    .map_err(io(&format!("cannot replace {}", dest.display())))?;
    fs::rename(staging.path().join(top), dest)
        .map_err(io(&format!("cannot put the entry at {}", dest.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests;
