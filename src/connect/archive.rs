//! The gzipped tars of client transfers (`getClientTransfer`, `putClientTransfer`), on both
//! sides: byre packs a worktree path for an `upload` request and unpacks what a `download`
//! request brings back; `byre client` does the reverse. An archive holds one file or
//! directory under its own name (its one top-level entry).
//!
//! On byre's side both ends are a task's worktree, which the agent writes while byre reads or
//! writes it: [`pack_beneath`] and [`unpack_beneath`] go by handle (`byre_beneath`), every path
//! resolved beneath the worktree with no symlink followed, so a directory swapped for a link
//! meanwhile leads nowhere. A symlink inside is packed as a link and unpacked as one, never
//! followed. `byre client` uses the same code from the directory holding the user's path
//! ([`pack`], [`unpack_to`]).
//!
//! Unpacking is where a hostile archive could reach outside its destination, so it goes into
//! a fresh staging directory and refuses, before writing the entry: a path that is absolute
//! or has a `..` component, entries under more than one top-level name, hard links, devices
//! and FIFOs, and symlinks whose target is absolute or has a `..` component (a target that
//! only descends stays inside whatever other links the archive holds); an entry under a link
//! the archive made is refused by the kernel. A refused archive leaves nothing behind: the
//! staging directory is removed, the destination untouched. Only once the whole archive
//! unpacked is its entry put in place. Every function blocks.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use byre_beneath::{Dir, Kind, Links};
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
/// gzipped tar holding it under its own name ([`pack_beneath`] from its directory). With
/// `skip_git`, entries named `.git` are left out (a worktree's own git data).
/// # Errors
/// As [`pack_beneath`]; [`ArchiveError::Io`] when `path` has no name.
pub fn pack(path: &Path, out: impl Write, skip_git: bool) -> Result<(), ArchiveError> {
    let (dir, name) = holding(path)?;
    pack_beneath(&dir, Path::new(&name), out, skip_git)
}

/// The directory holding `path` (its own path resolved, as the user named it) and `path`'s
/// name.
fn holding(path: &Path) -> Result<(Dir, std::ffi::OsString), ArchiveError> {
    let shown = path.display().to_string();
    let name = path
        .file_name()
        .ok_or_else(|| ArchiveError::Io(format!("{shown} has no name")))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent = std::fs::canonicalize(parent).map_err(io(&shown))?;
    Ok((Dir::open(&parent).map_err(io(&shown))?, name.to_owned()))
}

/// Writes `rel` beneath `dir` (a file, a directory with everything under it, or a symlink as
/// a link; the empty path is `dir` itself, named after it) as a gzipped tar holding it under
/// its own name, reading by handle with no symlink followed. With `skip_git`, entries named
/// `.git` are left out. FIFOs, sockets and devices are left out.
/// # Errors
/// [`ArchiveError::Io`] when `rel` cannot be read or goes through a symlink;
/// [`ArchiveError::TooLarge`] beyond [`MAX_TRANSFER_BYTES`] of file data.
pub fn pack_beneath(
    dir: &Dir,
    rel: &Path,
    out: impl Write,
    skip_git: bool,
) -> Result<(), ArchiveError> {
    let name = rel
        .file_name()
        .or_else(|| dir.path().file_name())
        .ok_or_else(|| ArchiveError::Io(format!("{} has no name", rel.display())))?;
    let mut builder = tar::Builder::new(GzEncoder::new(out, Compression::fast()));
    let mut n_bytes = 0u64;
    add(
        &mut builder,
        dir,
        rel,
        Path::new(name),
        skip_git,
        &mut n_bytes,
    )?;
    builder
        .into_inner()
        .and_then(|gz| gz.finish())
        .map_err(io("cannot write the archive"))?;
    Ok(())
}

fn add<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Dir,
    rel: &Path,
    name: &Path,
    skip_git: bool,
    n_bytes: &mut u64,
) -> Result<(), ArchiveError> {
    let shown = rel.display().to_string();
    let meta = dir
        .symlink_metadata(rel, Links::Refuse)
        .map_err(io(&shown))?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = dir.read_link(rel).map_err(io(&shown))?;
        header.set_size(0);
        builder
            .append_link(&mut header, name, target)
            .map_err(io(&shown))?;
    } else if kind.is_file() {
        let (file, meta) = dir.open_file(rel, Links::Refuse).map_err(io(&shown))?;
        *n_bytes += meta.len();
        if *n_bytes > MAX_TRANSFER_BYTES {
            return Err(too_large());
        }
        header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
        builder
            .append_data(&mut header, name, file.take(meta.len()))
            .map_err(io(&shown))?;
    } else if kind.is_dir() {
        header.set_size(0);
        builder
            .append_data(&mut header, name, std::io::empty())
            .map_err(io(&shown))?;
        let mut children: Vec<_> = dir
            .entries(rel, Links::Refuse)
            .map_err(io(&shown))?
            .into_iter()
            .filter(|e| !(skip_git && e.name == ".git") && e.kind != Kind::Other)
            .map(|e| e.name)
            .collect();
        children.sort();
        for child in children {
            add(
                builder,
                dir,
                &rel.join(&child),
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
/// the name of its one top-level entry. (As [`unpack_into`], on a directory opened by path.)
/// # Errors
/// As [`unpack_into`].
pub fn unpack(archive: impl Read, staging: &Path) -> Result<PathBuf, ArchiveError> {
    let dir = Dir::open(staging).map_err(io(&staging.display().to_string()))?;
    unpack_into(archive, &dir)
}

/// Unpacks the gzipped tar read from `archive` beneath the empty directory `staging`, by
/// handle; returns the name of its one top-level entry.
/// # Errors
/// [`ArchiveError::Refused`] for an entry that leaves `staging` or is not unpacked (see the
/// module's doc); [`ArchiveError::TooLarge`] beyond [`MAX_TRANSFER_BYTES`];
/// [`ArchiveError::Io`] for a malformed archive or a file system error. What was unpacked
/// before the error stays in `staging`: callers remove it.
pub fn unpack_into(archive: impl Read, staging: &Dir) -> Result<PathBuf, ArchiveError> {
    let mut tar = tar::Archive::new(GzDecoder::new(archive));
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
        let path: PathBuf = path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        let first = path
            .components()
            .next()
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
        let kind = entry.header().entry_type();
        let link = match kind {
            EntryType::Regular | EntryType::Continuous | EntryType::Directory => None,
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
                Some(target)
            }
            EntryType::XGlobalHeader => continue,
            other => {
                return Err(ArchiveError::Refused(format!(
                    "the archive's entry `{shown}` is a {other:?}; only files, directories and links inside are unpacked"
                )))
            }
        };
        n_bytes += entry.size();
        if n_bytes > MAX_TRANSFER_BYTES {
            return Err(too_large());
        }
        let cannot = |e: std::io::Error| {
            if byre_beneath::is_refused(&e) {
                ArchiveError::Refused(format!(
                    "the archive's entry `{shown}` goes through a link it made"
                ))
            } else {
                ArchiveError::Io(format!("cannot unpack `{shown}`: {e}"))
            }
        };
        if kind == EntryType::Directory {
            staging.create_dir_all(&path).map_err(cannot)?;
            continue;
        }
        if let Some(parent) = path.parent() {
            staging.create_dir_all(parent).map_err(cannot)?;
        }
        match link {
            Some(target) => {
                let _ = staging.remove_file(&path);
                staging.symlink(&target, &path).map_err(cannot)?;
            }
            None => {
                let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
                staging
                    .write_from(&path, &mut entry, mode)
                    .map_err(cannot)?;
            }
        }
    }
    top.ok_or_else(|| ArchiveError::Refused("the archive is empty".into()))
}

/// The name prefix of the staging directory [`unpack_beneath`] makes beside its destination
/// (in a task's worktree, for a download). Snapshots and the worktree views leave out any path
/// through one, so a transfer in progress, or one a crash cut short, is never committed.
pub const STAGING_PREFIX: &str = ".byre-transfer-";

/// Unpacks the gzipped tar read from `archive` and puts its one entry at `dest` (absolute),
/// replacing whatever is there (a symlink at `dest` is replaced, not followed);
/// [`unpack_beneath`] in `dest`'s directory, which is made (with its parents) first.
/// # Errors
/// As [`unpack_beneath`]; [`ArchiveError::Io`] when `dest` has no parent.
pub fn unpack_to(archive: impl Read, dest: &Path) -> Result<(), ArchiveError> {
    let parent = dest
        .parent()
        .filter(|_| dest.file_name().is_some())
        .ok_or_else(|| ArchiveError::Io(format!("{} cannot be replaced", dest.display())))?;
    std::fs::create_dir_all(parent).map_err(io(&parent.display().to_string()))?;
    let (dir, name) = holding(dest)?;
    unpack_beneath(archive, &dir, Path::new(&name))
}

/// Unpacks the gzipped tar read from `archive` and puts its one entry at `dest` beneath
/// `root`, replacing whatever is there (a symlink at `dest` is replaced, not followed), all by
/// handle. The entry is unpacked in full into a staging directory beside `dest` first, so a
/// refused archive leaves `dest` as it was. `dest`'s parent directories are made.
/// # Errors
/// As [`unpack_into`]; [`ArchiveError::Io`] when `dest` is empty or cannot be replaced, or
/// goes through a symlink.
pub fn unpack_beneath(archive: impl Read, root: &Dir, dest: &Path) -> Result<(), ArchiveError> {
    let shown = dest.display().to_string();
    let name = dest
        .file_name()
        .ok_or_else(|| ArchiveError::Io(format!("{shown} cannot be replaced")))?;
    let parent = root
        .create_dir_all(dest.parent().unwrap_or(Path::new("")))
        .map_err(io(&shown))?;
    let staging_name = PathBuf::from(format!("{STAGING_PREFIX}{}", uuid::Uuid::new_v4().simple()));
    let staging = parent
        .create_dir(&staging_name)
        .map_err(io("cannot make a staging directory"))?;
    let placed = unpack_into(archive, &staging).and_then(|top| {
        match parent.remove_dir_all(Path::new(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(&format!("cannot replace {shown}"))(e))
            }
            _ => {}
        }
        parent
            .rename(&staging_name.join(top), Path::new(name))
            .map_err(io(&format!("cannot put the entry at {shown}")))
    });
    let _ = parent.remove_dir_all(&staging_name);
    placed
}

#[cfg(test)]
mod tests;
