//! Which releases of the agent CLIs byre supports: the version the tests pin
//! (`tests/fake-models/src/install.rs`, where the wire was observed) and the newer releases of
//! the same major version. `byre doctor` reads a CLI's `--version` against these, and
//! `docs/agents.md` states them (a test holds the page to [`Supported::range`]).

use std::fmt;

/// A release number, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// The major number.
    pub major: u64,
    /// The minor number.
    pub minor: u64,
    /// The patch number.
    pub patch: u64,
}

impl Version {
    /// The first `N.N.N` word of what `<cli> --version` printed (`2.1.197 (Claude Code)`,
    /// `codex-cli 0.171.0`); a suffix such as `-beta.1` is ignored.
    pub fn find_in(text: &str) -> Option<Version> {
        text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
            .map(|w| w.trim_start_matches('v'))
            .find_map(|word| {
                let core = word.split(['-', '+']).next()?;
                let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
                let v = Version {
                    major: parts.next()??,
                    minor: parts.next()??,
                    patch: parts.next()??,
                };
                parts.next().is_none().then_some(v)
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The releases of one CLI byre supports: [`Supported::oldest`] and every newer release of its
/// major version.
#[derive(Debug, Clone, Copy)]
pub struct Supported {
    /// What people call it: `Claude Code`, `Codex`.
    pub name: &'static str,
    /// Its npm package.
    pub package: &'static str,
    /// The oldest supported release: the one byre's tests run.
    pub oldest: Version,
}

impl Supported {
    /// Whether byre supports `version`.
    pub fn admits(&self, version: Version) -> bool {
        version >= self.oldest && version.major == self.oldest.major
    }

    /// The range in words, as docs/agents.md states it: `2.1.197 or a newer 2.x release`.
    pub fn range(&self) -> String {
        format!("{} or a newer {}.x release", self.oldest, self.oldest.major)
    }

    /// The command that installs the newest supported release: npm's latest of the major.
    pub fn install(&self) -> String {
        format!("npm install -g {}@{}", self.package, self.oldest.major)
    }
}

/// Claude Code (`claude`).
pub const CLAUDE_CODE: Supported = Supported {
    name: "Claude Code",
    package: "@anthropic-ai/claude-code",
    oldest: Version {
        major: 2,
        minor: 1,
        patch: 197,
    },
};

/// Codex (`codex`).
pub const CODEX: Supported = Supported {
    name: "Codex",
    package: "@openai/codex",
    oldest: Version {
        major: 0,
        minor: 171,
        patch: 0,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_the_clis_print() {
        let v = |major, minor, patch| Version {
            major,
            minor,
            patch,
        };
        assert_eq!(
            Version::find_in("2.1.197 (Claude Code)"),
            Some(v(2, 1, 197))
        );
        assert_eq!(Version::find_in("codex-cli 0.171.0\n"), Some(v(0, 171, 0)));
        assert_eq!(Version::find_in("v1.2.3-beta.4"), Some(v(1, 2, 3)));
        assert_eq!(Version::find_in("git version 2.43"), None);
        assert_eq!(Version::find_in(""), None);
    }

    #[test]
    fn a_range_is_the_oldest_and_newer_releases_of_its_major() {
        let v = |text| Version::find_in(text).unwrap();
        assert!(CLAUDE_CODE.admits(v("2.1.197")));
        assert!(CLAUDE_CODE.admits(v("2.1.337")));
        assert!(CLAUDE_CODE.admits(v("2.4.0")));
        assert!(!CLAUDE_CODE.admits(v("2.1.196")));
        assert!(!CLAUDE_CODE.admits(v("1.0.99")));
        assert!(!CLAUDE_CODE.admits(v("3.0.0")));
        assert!(CODEX.admits(v("0.172.1")));
        assert!(!CODEX.admits(v("0.170.9")));
        assert_eq!(CLAUDE_CODE.range(), "2.1.197 or a newer 2.x release");
    }
}
