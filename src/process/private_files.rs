//! Everything byre writes in its data dir is its user's alone (docs/security.md, "Files"):
//! the data dir is 0700 and `serve` sets the process umask to 077, so the log, lock, snapshot,
//! `run/` records, secrets, transfers, blobs, worktrees and whatever agents and terminals
//! write there (they inherit the umask) are 0600/0700.
//!
//! The one place byre writes files that are the user's rather than its own is the user's
//! checkout (the fast-forward after a merge, `git::merge`): those get the modes the user's own
//! umask (the one [`tighten_umask`] replaced, [`user_umask`]) would have given them.

use std::path::Path;
use std::sync::OnceLock;

/// The umask of the process before [`tighten_umask`] first ran.
static USER_UMASK: OnceLock<u32> = OnceLock::new();

/// Sets the process umask to 077 (idempotent), remembering the first one it replaced.
pub fn tighten_umask() {
    #[cfg(unix)]
    USER_UMASK.get_or_init(|| {
        // SAFETY: umask(2) only swaps the process's file mode mask; it cannot fail.
        let old = unsafe { libc::umask(0o077) };
        #[allow(clippy::useless_conversion)] // mode_t is u16 on macOS
        u32::from(old)
    });
}

/// The umask the user ran byre with, once [`tighten_umask`] replaced it; `None` before (then
/// files byre writes already get the user's modes).
pub fn user_umask() -> Option<u32> {
    USER_UMASK.get().copied()
}

/// Creates the data dir `dir` 0700 (missing parents with the usual modes), or tightens an existing one whose
/// mode lets group or others in to 0700 (logged as a warning): what is inside is then out of
/// other users' reach even where older builds left it 0644.
/// # Errors
/// The directory cannot be made, read or changed.
pub fn secure_data_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
            tracing::warn!(
                data_dir = %dir.display(),
                "the data dir was open to group or others (mode {mode:03o}); it is now {:03o}",
                mode & 0o700
            );
        }
        Ok(())
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// The mode a file or directory written in the user's checkout gets: 0666 (0777 for an
/// executable file or a directory) less the user's umask; `None` when byre never changed the
/// umask (nothing to repair).
pub fn user_mode(executable_or_dir: bool) -> Option<u32> {
    let base = if executable_or_dir { 0o777 } else { 0o666 };
    user_umask().map(|mask| base & !mask)
}
