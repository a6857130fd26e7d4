//! byre's one way into a directory an agent can write (`docs/sandbox.md`, "What byre itself does
//! in an agent's directories"; STYLE.md §16).
//!
//! An agent writes its task's worktree, its session's directory (its `HOME`,
//! `CLAUDE_CONFIG_DIR`, `CODEX_HOME`), a lead dir, a terminal's home, and parts of the project's
//! git dir. Any name there may be a symlink, may become one between two system calls (a
//! directory swapped for a link with `renameat2(RENAME_EXCHANGE)`), or may be a FIFO. byre runs
//! outside the sandbox with its whole reach, so it must never resolve such a path by name twice,
//! nor follow a link out.
//!
//! A [`Dir`] is a directory handle held from the start. Every path given to it is relative and
//! resolved by the kernel beneath that handle in one step, `openat2(2)` with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, and with [`Links::Refuse`] (what byre's own reads
//! and writes use) also `RESOLVE_NO_SYMLINKS`: no symlink anywhere in the path is followed, and
//! nothing swapped in meanwhile can lead out. [`Links::Beneath`] follows links that stay beneath
//! the handle (the worktree views show a worktree's in-tree links); a link that leaves fails
//! with `EXDEV`, whatever is swapped meanwhile.
//!
//! - Reads open regular files only (`O_NONBLOCK`, then `fstat`: a FIFO or device is refused
//!   without blocking) and never read more than the bound asked for plus one byte.
//! - Creates are exclusive (`O_CREAT | O_EXCL`); [`Dir::write`] writes a temporary file in the
//!   same directory handle, syncs it, then `renameat`s it over the name (which replaces a symlink
//!   there, never its target).
//! - Removal walks by handle: `unlinkat` on the parent's descriptor, descending with
//!   `O_DIRECTORY` and no symlinks.
//!
//! Linux ≥ 5.6 (`openat2`). The handle's own path ([`Dir::open`]) is byre's: a directory of its
//! data dir's layout, made by byre, whose last component is still not followed.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// Deepest directory tree [`Dir::remove_dir_all`] descends (each level holds one descriptor).
pub const MAX_DEPTH: usize = 512;

/// Whether symlinks in a path are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// No symlink anywhere in the path is followed (`RESOLVE_NO_SYMLINKS`): a link fails with
    /// `ELOOP`. What byre's own reads and writes use.
    Refuse,
    /// Links that stay beneath the handle are followed; one that leaves fails with `EXDEV`
    /// (`RESOLVE_BENEATH` alone). For the views that show a worktree's own links.
    Beneath,
}

impl Links {
    fn resolve(self) -> ResolveFlags {
        let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match self {
            Links::Refuse => beneath | ResolveFlags::NO_SYMLINKS,
            Links::Beneath => beneath,
        }
    }
}

/// What a directory entry is, the entry itself (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One entry of [`Dir::entries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name (one component).
    pub name: OsString,
    /// What it is itself.
    pub kind: Kind,
}

/// A directory handle; every path given to it resolves beneath it (module docs).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// Where it was opened, for messages and for callers that must name it to another program.
    path: PathBuf,
}

/// Whether `e` is the kernel refusing a path that leaves the handle (`EXDEV`) or goes through a
/// symlink where none may be followed (`ELOOP`).
pub fn is_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == libc_exdev() || code == libc_eloop()
    )
}

fn libc_exdev() -> i32 {
    rustix::io::Errno::XDEV.raw_os_error()
}

fn libc_eloop() -> i32 {
    rustix::io::Errno::LOOP.raw_os_error()
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// `rel` as `openat2` takes it: relative, only normal components (`.` allowed); the empty path
/// is the handle itself.
fn checked(rel: &Path) -> io::Result<&Path> {
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(invalid(format!(
                    "{} is not a plain relative path",
                    rel.display()
                )))
            }
        }
    }
    Ok(if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    })
}

/// `rel`'s parent (possibly empty) and last name; an error for a path without a name.
fn split(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    checked(rel)?;
    let name = rel
        .file_name()
        .ok_or_else(|| invalid(format!("{} names no file", rel.display())))?;
    Ok((rel.parent().unwrap_or(Path::new("")), name))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temporary name beside `name`.
fn temp_name(name: &OsStr) -> OsString {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!(".byre-{}-{n}.tmp", std::process::id()));
    t
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

impl Dir {
    /// Opens the directory `path`, one of byre's own (made by byre in its data dir's layout, or
    /// a worktree byre recorded); its last component is not followed.
    /// # Errors
    /// The open's error (`ELOOP` for a symlink, `ENOTDIR`, `ENOENT`).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Dir {
            fd,
            path: path.to_owned(),
        })
    }

    /// Makes `path` and its missing parents (byre's own directories: use it only for paths of
    /// byre's layout, never for a name an agent could have made), then opens it as
    /// [`Dir::open`] does.
    /// # Errors
    /// As `create_dir_all` and [`Dir::open`].
    pub fn create(path: &Path) -> io::Result<Dir> {
        std::fs::create_dir_all(path)?;
        Dir::open(path)
    }

    /// Makes the directory `path` (if missing) and opens it: its parent is one of byre's own
    /// (made with its parents as [`Dir::create`] makes them), its last name one an agent may
    /// have made (a session's `HOME` or config dir, a terminal's home), never gone through
    /// when it is a link.
    /// # Errors
    /// [`is_refused`] when `path` is a link; the file system's.
    pub fn make(path: &Path) -> io::Result<Dir> {
        let name = path
            .file_name()
            .ok_or_else(|| invalid(format!("{} names no directory", path.display())))?;
        let parent = path.parent().unwrap_or(Path::new("/"));
        Dir::create(parent)?.create_dir_all(Path::new(name))
    }

    /// Where the handle was opened (plus the relative path it was reached by).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The handle's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn at(&self, rel: &Path, oflags: OFlags, mode: Mode, links: Links) -> io::Result<OwnedFd> {
        let rel = checked(rel)?;
        Ok(rustix::fs::openat2(
            &self.fd,
            rel,
            oflags | OFlags::CLOEXEC,
            mode,
            links.resolve(),
        )?)
    }

    fn child(&self, rel: &Path, fd: OwnedFd) -> Dir {
        Dir {
            fd,
            path: self.path.join(rel),
        }
    }

    /// The directory `rel` beneath this one, as a handle of its own.
    /// # Errors
    /// `ENOTDIR`, `ENOENT`, or [`is_refused`] for a link that may not be followed.
    pub fn open_dir(&self, rel: &Path, links: Links) -> io::Result<Dir> {
        let fd = self.at(
            rel,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            links,
        )?;
        Ok(self.child(rel, fd))
    }

    /// Makes the directory `rel` and its missing parents beneath this one (mode 0777 less the umask), never
    /// through a symlink; returns its handle.
    /// # Errors
    /// A name on the way that is a symlink ([`is_refused`]) or not a directory; the file
    /// system's error.
    pub fn create_dir_all(&self, rel: &Path) -> io::Result<Dir> {
        checked(rel)?;
        let mut dir = self.open_dir(Path::new(""), Links::Refuse)?;
        let mut walked = PathBuf::new();
        for part in rel.components() {
            let Component::Normal(name) = part else {
                continue;
            };
            match rustix::fs::mkdirat(&dir.fd, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            walked.push(name);
            let fd = rustix::fs::openat2(
                &dir.fd,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                Links::Refuse.resolve(),
            )?;
            dir = self.child(&walked, fd);
        }
        Ok(dir)
    }

    /// Makes the directory `rel` (mode 0700), which must not exist (not even as a symlink),
    /// and returns its handle. Its parent must exist.
    /// # Errors
    /// `EEXIST`; [`is_refused`] for a link on the way; the file system's.
    pub fn create_dir(&self, rel: &Path) -> io::Result<Dir> {
        let (parent, name) = self.parent_of(rel)?;
        rustix::fs::mkdirat(&parent.fd, name, Mode::from_raw_mode(0o777))?;
        let fd = rustix::fs::openat2(
            &parent.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            Links::Refuse.resolve(),
        )?;
        Ok(self.child(rel, fd))
    }

    /// Opens the regular file `rel` for reading; with its metadata. A FIFO, device or socket is
    /// refused without blocking.
    /// # Errors
    /// `ENOENT`; [`is_refused`]; `InvalidInput` for what is not a regular file.
    pub fn open_file(&self, rel: &Path, links: Links) -> io::Result<(File, Metadata)> {
        let fd = self.at(
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
            links,
        )?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(invalid(format!("{} is {what}", rel.display())));
        }
        Ok((file, meta))
    }

    /// The content of the regular file `rel`, at most `max_bytes`.
    /// # Errors
    /// As [`Dir::open_file`]; `FileTooLarge` when it holds more than `max_bytes`.
    pub fn read(&self, rel: &Path, links: Links, max_bytes: u64) -> io::Result<Vec<u8>> {
        let (file, meta) = self.open_file(rel, links)?;
        if meta.len() > max_bytes {
            return Err(too_large(rel, max_bytes));
        }
        let mut out = Vec::with_capacity(meta.len() as usize);
        file.take(max_bytes + 1).read_to_end(&mut out)?;
        if out.len() as u64 > max_bytes {
            return Err(too_large(rel, max_bytes));
        }
        Ok(out)
    }

    /// The metadata of what `rel` names, following a last symlink as `links` allows (with
    /// [`Links::Refuse`] a symlink is an error).
    /// # Errors
    /// `ENOENT`; [`is_refused`].
    pub fn metadata(&self, rel: &Path, links: Links) -> io::Result<Metadata> {
        let fd = self.at(rel, OFlags::PATH, Mode::empty(), links)?;
        File::from(fd).metadata()
    }

    /// The metadata of `rel` itself: a symlink at the end is not followed (the path up to it
    /// is resolved as `links` allows).
    /// # Errors
    /// `ENOENT`; [`is_refused`] for a link on the way.
    pub fn symlink_metadata(&self, rel: &Path, links: Links) -> io::Result<Metadata> {
        let fd = self.at(rel, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty(), links)?;
        File::from(fd).metadata()
    }

    /// The entries of the directory `rel` (not `.` or `..`), unsorted, each as it is itself.
    /// # Errors
    /// As [`Dir::open_dir`].
    pub fn entries(&self, rel: &Path, links: Links) -> io::Result<Vec<Entry>> {
        self.open_dir(rel, links)?.list()
    }

    /// The entries of this directory (as [`Dir::entries`]).
    /// # Errors
    /// The file system's.
    pub fn list(&self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut dir = rustix::fs::Dir::read_from(&self.fd)?;
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_owned();
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    let st = rustix::fs::statat(&self.fd, &*name, AtFlags::SYMLINK_NOFOLLOW)?;
                    kind_of(FileType::from_raw_mode(st.st_mode))
                }
                t => kind_of(t),
            };
            out.push(Entry { name, kind });
        }
        Ok(out)
    }

    /// The directory holding `rel` (never through a symlink), and `rel`'s last name.
    fn parent_of<'r>(&self, rel: &'r Path) -> io::Result<(Dir, &'r OsStr)> {
        let (parent, name) = split(rel)?;
        Ok((self.open_dir(parent, Links::Refuse)?, name))
    }

    /// Creates the file `rel` (it must not exist, not even as a symlink), `mode`, for writing.
    /// Its directory must exist.
    /// # Errors
    /// `EEXIST`; [`is_refused`] for a link on the way; the file system's.
    pub fn create_new(&self, rel: &Path, mode: u32) -> io::Result<File> {
        let (parent, name) = self.parent_of(rel)?;
        parent.create_new_here(name, mode)
    }

    fn create_new_here(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let fd = rustix::fs::openat2(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            Links::Refuse.resolve(),
        )?;
        Ok(File::from(fd))
    }

    /// Replaces the file `rel` with `content` (mode `mode`): a temporary file in the same
    /// directory, written and synced, then renamed over the name, so `rel` is either as it was
    /// or wholly new, and a symlink at `rel` is replaced, never followed. Its directory must
    /// exist.
    /// # Errors
    /// [`is_refused`] for a link on the way; `rel` a directory; the file system's. The
    /// temporary file is removed on any failure.
    pub fn write(&self, rel: &Path, content: &[u8], mode: u32) -> io::Result<()> {
        self.write_from(rel, &mut &content[..], mode).map(|_| ())
    }

    /// As [`Dir::write`], with the content read from `from`; how many bytes it wrote.
    /// # Errors
    /// As [`Dir::write`], and `from`'s.
    pub fn write_from(&self, rel: &Path, from: &mut dyn Read, mode: u32) -> io::Result<u64> {
        let (parent, name) = self.parent_of(rel)?;
        let temp = temp_name(name);
        let mut file = parent.create_new_here(&temp, mode)?;
        let written = (|| {
            let n = io::copy(from, &mut file)?;
            file.flush()?;
            file.sync_all()?;
            rustix::fs::renameat(&parent.fd, &*temp, &parent.fd, name)?;
            Ok(n)
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&parent.fd, &*temp, AtFlags::empty());
        }
        written
    }

    /// Copies the regular file `rel` (no symlink followed, at most `max_bytes`) to `to_rel`
    /// beneath `to`, as [`Dir::write`] writes (mode `mode`); the bytes copied.
    /// # Errors
    /// As [`Dir::open_file`] and [`Dir::write`]; `FileTooLarge` beyond `max_bytes`.
    pub fn copy_file(
        &self,
        rel: &Path,
        to: &Dir,
        to_rel: &Path,
        max_bytes: u64,
        mode: u32,
    ) -> io::Result<u64> {
        let (file, meta) = self.open_file(rel, Links::Refuse)?;
        if meta.len() > max_bytes {
            return Err(too_large(rel, max_bytes));
        }
        let mut limited = file.take(max_bytes);
        to.write_from(to_rel, &mut limited, mode)
    }

    /// Removes the file (or symlink, FIFO …) `rel`, not a directory.
    /// # Errors
    /// `ENOENT`, `EISDIR`; [`is_refused`] for a link on the way.
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        Ok(rustix::fs::unlinkat(&parent.fd, name, AtFlags::empty())?)
    }

    /// Removes `rel` and, when it is a directory, everything under it, by handle: a symlink
    /// anywhere is removed itself, never followed.
    /// # Errors
    /// `ENOENT` for nothing at `rel`; [`is_refused`] for a link on the way to it; a tree deeper
    /// than [`MAX_DEPTH`]; the file system's (what was removed before stays removed).
    pub fn remove_dir_all(&self, rel: &Path) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        parent.remove_tree(name, 0)
    }

    fn remove_tree(&self, name: &OsStr, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(invalid(format!(
                "{} is deeper than {MAX_DEPTH} directories",
                self.path.display()
            )));
        }
        let st = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?);
        }
        let fd = match rustix::fs::openat2(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            Links::Refuse.resolve(),
        ) {
            Ok(fd) => fd,
            // Swapped for something else since the stat: remove that, unfollowed.
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
            }
            Err(e) => return Err(e.into()),
        };
        let sub = self.child(Path::new(name), fd);
        for entry in sub.list()? {
            match entry.kind {
                Kind::Dir => sub.remove_tree(&entry.name, depth + 1)?,
                _ => match rustix::fs::unlinkat(&sub.fd, &*entry.name, AtFlags::empty()) {
                    // A directory now (swapped): remove it as one.
                    Err(rustix::io::Errno::ISDIR) => sub.remove_tree(&entry.name, depth + 1)?,
                    Err(rustix::io::Errno::NOENT) => {}
                    r => r?,
                },
            }
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames `from` to `to`, both beneath this handle (neither through a symlink; a symlink
    /// at `from` is moved itself, one at `to` replaced).
    /// # Errors
    /// The file system's; [`is_refused`] for a link on the way.
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_dir, from_name) = self.parent_of(from)?;
        let (to_dir, to_name) = self.parent_of(to)?;
        Ok(rustix::fs::renameat(
            &from_dir.fd,
            from_name,
            &to_dir.fd,
            to_name,
        )?)
    }

    /// Makes the symlink `rel` pointing to `target` (which is not checked or followed here).
    /// # Errors
    /// `EEXIST`; [`is_refused`] for a link on the way.
    pub fn symlink(&self, target: &Path, rel: &Path) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        Ok(rustix::fs::symlinkat(target, &parent.fd, name)?)
    }

    /// Where the symlink `rel` points.
    /// # Errors
    /// `EINVAL` for what is not a symlink; [`is_refused`] for a link on the way.
    pub fn read_link(&self, rel: &Path) -> io::Result<PathBuf> {
        let (parent, name) = self.parent_of(rel)?;
        let target = rustix::fs::readlinkat(&parent.fd, name, Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Where `rel` leads, beneath this handle, with the links on the way followed as `links`
    /// allows: its path relative to the handle, read back from the descriptor the kernel opened
    /// (`/proc/self/fd`), not from `rel`.
    /// # Errors
    /// `ENOENT`; [`is_refused`]; `ELOOP` for too many links.
    pub fn locate(&self, rel: &Path, links: Links) -> io::Result<PathBuf> {
        let fd = self.at(rel, OFlags::PATH, Mode::empty(), links)?;
        let at = real_path(fd.as_fd())?;
        let root = real_path(self.fd.as_fd())?;
        at.strip_prefix(&root)
            .map(Path::to_owned)
            .map_err(|_| io::Error::from_raw_os_error(libc_exdev()))
    }

    /// Whether something (a symlink included, not followed) is at `rel`.
    pub fn exists(&self, rel: &Path) -> bool {
        self.symlink_metadata(rel, Links::Refuse).is_ok()
    }
}

/// The path the kernel holds for `fd`.
fn real_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn too_large(rel: &Path, max_bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("{} is larger than {max_bytes} bytes", rel.display()),
    )
}

#[cfg(test)]
mod tests;
