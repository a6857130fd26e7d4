//! The door of tailscale mode's people: a Unix socket for `tailscale serve` (`tailscale serve
//! --bg unix:DATA/tailscale/byre.sock`, Tailscale 1.94 and later), the only listener on which
//! byre believes `Tailscale-User-Login` (`http::identity`). Agents share the host's network,
//! so a loopback TCP peer may be any agent; a socket in a private directory of the data dir,
//! which no sandbox binds (`byre_agents::sandbox` binds only named directories below the data dir
//! and refuses the data dir itself), can be reached by byre's own OS user and root (tailscaled)
//! only.
//!
//! The listener is the same HTTP server as the TCP one; a connection accepted on the socket is
//! marked with `http::identity::ServeSocket` (`identity::mark_serve_socket`, from
//! `HttpServer::on_connect`), which `identity` and `edge` read with `HttpRequest::conn_data`.

use std::path::{Path, PathBuf};

/// Longest socket path a `sockaddr_un` holds, without its final NUL.
const MAX_SOCKET_PATH_BYTES: usize = 107;

/// The socket's path: `DATA/tailscale/byre.sock`.
pub fn serve_socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("tailscale").join("byre.sock")
}

/// Makes the socket's directory (0700), removes a socket a previous server left (the caller
/// holds the data dir's lock, so no running server owns it) and listens on the socket.
/// # Errors
/// A message naming the path: too long for a Unix socket, or it cannot be made or bound.
pub fn bind(data_dir: &Path) -> Result<std::os::unix::net::UnixListener, String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let path = serve_socket_path(data_dir);
    let n_bytes = path.as_os_str().len();
    if n_bytes > MAX_SOCKET_PATH_BYTES {
        return Err(format!(
            "the socket for tailscale serve, {}, is {n_bytes} bytes long; a Unix socket's path holds at most {MAX_SOCKET_PATH_BYTES}: give a shorter --data",
            path.display()
        ));
    }
    let dir = path.parent().unwrap_or(data_dir);
    let made = std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(e),
        })
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)));
    made.map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot remove the old {}: {e}", path.display()))
        }
        _ => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_private_and_a_left_one_is_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let data = tempfile::TempDir::new().unwrap();
        let first = bind(data.path()).expect("bind");
        drop(first);
        assert!(serve_socket_path(data.path()).exists(), "left behind");
        bind(data.path()).expect("bound again over what was left");
        let mode = std::fs::metadata(data.path().join("tailscale"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_data_dir_too_deep_for_a_socket_path_is_named() {
        let deep = PathBuf::from("/").join("d".repeat(120));
        let e = bind(&deep).unwrap_err();
        assert!(e.contains("at most 107") && e.contains("--data"), "{e}");
    }
}
