//! byre-process: what byre's server and `byre client` share about the processes they start,
//! and nothing of either (no log, no git, no sandbox).
//!
//! - [`groups`]: process groups and sessions of their own, killing a group, a tree, or every
//!   group holding a process marked with an environment variable; a process's start time.
//! - [`runner`]: the one time-limited command runner, each command in a process group of its
//!   own that is killed when the command exits or times out; output bounded in bytes.
//! - [`private_files`]: the umask 077 and the data dir 0700; the user's own modes back.
//! - [`find_on_path`]: a program in a directory of `PATH`.

#![warn(missing_docs)]

use std::path::PathBuf;

pub mod groups;
pub mod private_files;
pub mod runner;

/// `name` in a directory of `PATH`, if there is such a file.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
