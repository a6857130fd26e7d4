//! `byre doctor`, the real binary on a made-up machine: a `PATH` of chosen programs (the real
//! pinned CLIs, or a script printing an old version), a `HOME` of its own and only the
//! variables each case sets. It names what is missing and how to fix it, and exits 1 only when
//! something needed is missing.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use byre_agents::versions::{Version, CLAUDE_CODE, CODEX};

use crate::process::byre_bin;

/// Runs `byre doctor --data <data>` with `PATH` = `bin` and the system directories, `HOME` =
/// `home` and `env`; returns the exit code and stdout.
fn doctor(bin: &Path, home: &Path, data: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let out = Command::new(byre_bin())
        .args(["doctor", "--data"])
        .arg(data)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .envs(env.iter().copied())
        .output()
        .expect("run byre doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "doctor wrote to stderr: {stderr}");
    (out.status.code().unwrap_or(-1), stdout)
}

/// The line of check `name` (its second column).
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .nth(1)
                .is_some_and(|n| n == name)
        })
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{out}"))
}

/// A directory of programs: `claude` and `codex` linked to the real pinned CLIs, as asked.
fn bin_dir(claude: bool, codex: bool) -> tempfile::TempDir {
    let dir = tempfile::TempDir::new().unwrap();
    if claude {
        std::os::unix::fs::symlink(byre_fake_models::claude_bin(), dir.path().join("claude"))
            .unwrap();
    }
    if codex {
        std::os::unix::fs::symlink(byre_fake_models::codex_bin(), dir.path().join("codex"))
            .unwrap();
    }
    dir
}

const KEYS: [(&str, &str); 2] = [("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")];

#[test]
fn all_good_on_the_pinned_clis_with_keys() {
    let bin = bin_dir(true, true);
    let home = tempfile::TempDir::new().unwrap();
    let data = home.path().join("not-yet/byre");
    let (code, out) = doctor(bin.path(), home.path(), &data, &KEYS);
    assert_eq!(code, 0, "{out}");
    for (name, supported, pinned) in [
        ("claude", CLAUDE_CODE, byre_fake_models::CLAUDE_CODE_VERSION),
        ("codex", CODEX, byre_fake_models::CODEX_VERSION),
    ] {
        let cli = line(&out, name);
        let version = format!("{pinned} (supported: {})", supported.range());
        assert!(cli.starts_with("ok ") && cli.contains(&version), "{cli}");
    }
    for check in [
        "claude credentials",
        "codex credentials",
        "git",
        "bubblewrap",
        "data dir",
        "free space",
    ] {
        assert!(line(&out, check).starts_with("ok "), "{out}");
    }
    assert!(line(&out, "bubblewrap").contains("a trial sandbox ran `true`"));
    assert!(
        line(&out, "data dir").contains("byre makes it (0700) at start"),
        "{out}"
    );
    assert!(!line(&out, "chromium").starts_with("missing"), "optional");
    assert!(!data.exists(), "doctor makes nothing");
}

#[test]
fn a_path_without_a_cli_is_named_with_its_install() {
    let home = tempfile::TempDir::new().unwrap();
    let data = home.path().join("data");
    // Codex alone can run: Claude Code's absence is a warning.
    let bin = bin_dir(false, true);
    let (code, out) = doctor(bin.path(), home.path(), &data, &KEYS);
    assert_eq!(code, 0, "{out}");
    let claude = line(&out, "claude");
    assert!(
        claude.starts_with("warn ")
            && claude.contains("`claude` is not on PATH and BYRE_CLAUDE_BIN is not set")
            && claude.contains("npm install -g @anthropic-ai/claude-code@2")
            && claude.contains("reviews of Codex and CodeBolt tasks fail"),
        "{claude}"
    );
    // No agent CLI at all: nothing can run.
    let empty = bin_dir(false, false);
    let (code, out) = doctor(empty.path(), home.path(), &data, &KEYS);
    assert_eq!(code, 1, "{out}");
    assert!(line(&out, "claude").starts_with("missing "), "{out}");
    assert!(
        line(&out, "codex").starts_with("missing ")
            && line(&out, "codex").contains("npm install -g @openai/codex@0"),
        "{out}"
    );
    // A program named by BYRE_CLAUDE_BIN that is not there.
    let mut env = KEYS.to_vec();
    env.push(("BYRE_CLAUDE_BIN", "/nowhere/claude"));
    let (_, out) = doctor(empty.path(), home.path(), &data, &env);
    assert!(
        line(&out, "claude").contains("/nowhere/claude (from BYRE_CLAUDE_BIN) is not there"),
        "{out}"
    );
}

#[test]
fn an_unsupported_version_is_named_with_the_range() {
    let bin = tempfile::TempDir::new().unwrap();
    let claude = bin.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\necho '2.0.5 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = tempfile::TempDir::new().unwrap();
    let (code, out) = doctor(bin.path(), home.path(), &home.path().join("d"), &KEYS);
    assert_eq!(code, 1, "no agent can run: {out}");
    let line = line(&out, "claude");
    assert!(
        line.starts_with("missing ")
            && line.contains(&format!(
                "2.0.5 is not supported (supported: {})",
                CLAUDE_CODE.range()
            ))
            && line.contains("npm install -g @anthropic-ai/claude-code@2"),
        "{line}"
    );
    assert!(!CLAUDE_CODE.admits(Version::find_in("2.0.5").unwrap()));
}

#[test]
fn missing_credentials_say_which_variable_and_that_a_login_is_not_used() {
    let bin = bin_dir(true, true);
    let home = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(home.path().join(".claude")).unwrap();
    std::fs::write(home.path().join(".claude/.credentials.json"), "{}").unwrap();
    let data = home.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();

    let (code, out) = doctor(bin.path(), home.path(), &data, &[]);
    assert_eq!(code, 1, "no agent has credentials: {out}");
    let claude = line(&out, "claude credentials");
    assert!(
        claude.starts_with("missing ")
            && claude.contains(
                "none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN is set"
            )
            && claude.contains("your own `claude` login is not used")
            && claude.contains("ANTHROPIC_API_KEY=…"),
        "{claude}"
    );
    let codex = line(&out, "codex credentials");
    assert!(
        codex.starts_with("missing ")
            && codex.contains("OPENAI_API_KEY is not set")
            && codex.contains("OPENAI_API_KEY=…"),
        "{codex}"
    );
    let data_line = line(&out, "data dir");
    assert!(
        data_line.starts_with("warn ")
            && data_line.contains("mode 755")
            && data_line.contains("chmod 700"),
        "{data_line}"
    );

    // Codex's key alone: it can run; Claude Code's missing key is a warning.
    let (code, out) = doctor(bin.path(), home.path(), &data, &[("OPENAI_API_KEY", "k")]);
    assert_eq!(code, 0, "{out}");
    assert!(
        line(&out, "claude credentials").starts_with("warn "),
        "{out}"
    );
    assert!(line(&out, "codex credentials").starts_with("ok "), "{out}");
}

#[test]
fn the_supported_ranges_start_at_the_pinned_clis_and_the_docs_state_them() {
    assert_eq!(
        Version::find_in(byre_fake_models::CLAUDE_CODE_VERSION),
        Some(CLAUDE_CODE.oldest)
    );
    assert_eq!(
        Version::find_in(byre_fake_models::CODEX_VERSION),
        Some(CODEX.oldest)
    );
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md"))
        .expect("docs/agents.md");
    let words = page.split_whitespace().collect::<Vec<_>>().join(" ");
    for supported in [CLAUDE_CODE, CODEX] {
        let stated = format!("{} {}", supported.name, supported.range());
        assert!(
            words.contains(&stated),
            "docs/agents.md does not say {stated:?}"
        );
    }
}
