//! `getTaskTerminal`: attaching a user to a task's terminal. The operation checks the size and
//! the task (its worktree made again first if it was removed while byre runs), then has the
//! terminal runtime (byre-terminal) start the task's shell in the worktree when none runs
//! and attach the viewer. The WebSocket itself is the HTTP adapter's.

use std::path::PathBuf;

use super::{Ctx, Error};
use byre_log::SubmitError;
use byre_terminal::{OpenError, TerminalSize, Viewer};

pub use byre_terminal::Ended;

/// Parses `getTaskTerminal`'s `cols` and `rows` query values.
/// # Errors
/// [`Error::Invalid`] when one is missing, not an integer, or outside 1..=65535.
pub fn terminal_size(cols: Option<&str>, rows: Option<&str>) -> Result<TerminalSize, Error> {
    let number = |what: &str, v: Option<&str>| -> Result<u64, Error> {
        let v = v.ok_or_else(|| Error::Invalid(format!("the query needs `{what}`")))?;
        v.parse::<u64>().map_err(|_| {
            Error::Invalid(format!(
                "{what} must be an integer from 1 to 65535, not `{v}`"
            ))
        })
    };
    TerminalSize::new(number("cols", cols)?, number("rows", rows)?).map_err(Error::Invalid)
}

/// The worktree and port base of an active task whose worktree is made (the worktree views'
/// [`super::views::task_place`], its worktree made again first if it was removed).
/// # Errors
/// [`Error::NotFound`] unknown task; [`Error::Conflict`] closed, or its worktree not made yet.
pub async fn terminal_place(app: &Ctx, task_id: &str) -> Result<(PathBuf, u32), Error> {
    let place = super::views::task_place(app, task_id).await?;
    Ok((place.worktree, place.port_base))
}

/// `getTaskTerminal`: attaches `login` to task `task_id`'s terminal (starting its login shell
/// at `size` when none runs); the viewer gets the scrollback once, then live output.
/// # Errors
/// [`Error::NotFound`] unknown task; [`Error::Conflict`] closed task or worktree not made;
/// [`Error::Unavailable`] byre is stopping; [`Error::Internal`] the shell could not start.
pub async fn open_terminal(
    app: &Ctx,
    login: &str,
    task_id: &str,
    size: TerminalSize,
) -> Result<Viewer, Error> {
    let (worktree, port) = terminal_place(app, task_id).await?;
    app.terminals
        .open(login, task_id, worktree, port, size)
        .await
        .map_err(|e| match e {
            OpenError::Submit(SubmitError::Rejected(r)) => r.into(),
            OpenError::Submit(SubmitError::Unavailable(m)) => Error::Unavailable(m),
            OpenError::Stopping => Error::Unavailable("byre is stopping".into()),
            OpenError::Start(e) => Error::internal(format!("the shell could not start: {e}")),
        })
}
