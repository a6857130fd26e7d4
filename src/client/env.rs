//! The environment `byre client` gives what it starts for agents (`bash`'s shell and the
//! `--hands-mcp` server): what a shell and a desktop tool need, and nothing else of the
//! client's own: not its `BYRE_TOKEN` (a command that read it could act on byre as the
//! machine's owner), none of byre's variables, nothing the shell that started the client held.
//! The shell is a login shell, so the user's profile sets up the rest as it would for them.

use std::ffi::OsString;

/// The variables passed on by name.
const PASSED: [&str; 14] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// Whether the variable `name` is passed on: one of [`PASSED`] or a locale's `LC_*`.
pub fn passed(name: &str) -> bool {
    PASSED.contains(&name) || name.starts_with("LC_")
}

/// The client's own variables that are [`passed`] on, for `Command::env_clear().envs(…)`.
pub fn for_commands() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(passed))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::passed;

    #[test]
    fn a_shell_gets_what_it_needs_and_none_of_the_clients_secrets() {
        for name in [
            "PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "DISPLAY",
        ] {
            assert!(passed(name), "{name}");
        }
        for name in [
            "BYRE_TOKEN",
            "BYRE_LOG",
            "ANTHROPIC_API_KEY",
            "SSH_AUTH_SOCK",
            "AWS_SECRET_ACCESS_KEY",
            "LD_PRELOAD",
            "path",
        ] {
            assert!(!passed(name), "{name}");
        }
    }
}
