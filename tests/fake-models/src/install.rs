//! The pinned real Claude Code CLI, installed from npm by the tests themselves (DESIGN.md
//! "Agents": tests run the real CLIs against our fake), once per machine.
//!
//! Layout: `<cache>` is `$BYRE_TEST_CACHE` or `<workspace>/target/agent-clis`; it is an npm
//! prefix (`package.json`, `node_modules/`) that other pinned agent CLIs may share. Every
//! installer takes the exclusive file lock `<cache>/.install.lock` (`File::lock`, released
//! by the OS even if the holder dies) before it looks or writes, so parallel test binaries
//! do not race, and writes `<cache>/.claude-code-<version>.installed` after a checked
//! install, so an interrupted one is redone.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The npm package of the CLI.
pub const CLAUDE_CODE_PACKAGE: &str = "@anthropic-ai/claude-code";
/// The pinned version: the one `vendors/claude-code/PROTOCOL.md` was observed on.
pub const CLAUDE_CODE_VERSION: &str = "2.1.197";

/// The npm prefix the agent CLIs are installed in: `$BYRE_TEST_CACHE`, else
/// `<workspace>/target/agent-clis`.
pub fn agent_cli_cache() -> PathBuf {
    match std::env::var_os("BYRE_TEST_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/agent-clis"),
    }
}

/// The native `claude` executable of the pinned version, installing it on first use
/// (`npm install --no-audit --no-fund --save-exact --prefix <cache> @anthropic-ai/claude-code@2.1.197`,
/// argv only; about 6 s and 240 MB). Later calls, in this process or another, only look.
/// # Panics
/// When npm is missing, the install fails, or the installed binary does not report the
/// pinned version; the message says which and shows npm's output.
pub fn claude_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        install_claude(&agent_cli_cache()).unwrap_or_else(|message| panic!("{message}"))
    })
    .clone()
}

/// Installs (if needed) into the npm prefix `cache` and returns the executable.
fn install_claude(cache: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(cache)
        .map_err(|error| format!("cannot create {}: {error}", cache.display()))?;
    let cache = &cache.canonicalize().unwrap_or_else(|_| cache.to_owned());
    let lock_path = cache.join(".install.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| format!("cannot open {}: {error}", lock_path.display()))?;
    // Held until `lock` is dropped at return.
    lock.lock()
        .map_err(|error| format!("cannot lock {}: {error}", lock_path.display()))?;

    let marker = cache.join(format!(".claude-code-{CLAUDE_CODE_VERSION}.installed"));
    if marker.exists() && installed_version(cache).as_deref() == Some(CLAUDE_CODE_VERSION) {
        if let Some(bin) = find_binary(cache) {
            return Ok(bin);
        }
    }
    let _ = fs::remove_file(&marker);
    run_npm_install(cache)?;
    let bin = find_binary(cache).ok_or_else(|| {
        format!("npm installed {CLAUDE_CODE_PACKAGE} into {} but no native `claude` executable is there", cache.display())
    })?;
    check_version(&bin)?;
    fs::write(&marker, bin.to_string_lossy().as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", marker.display()))?;
    Ok(bin)
}

fn run_npm_install(cache: &Path) -> Result<(), String> {
    let spec = format!("{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}");
    let output = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--save-exact", "--prefix"])
        .arg(cache)
        .arg(&spec)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => format!(
                "npm is not installed, so the tests cannot install the pinned Claude Code CLI ({spec}). \
                 Install Node.js and npm (e.g. `apt-get install -y nodejs npm`), or put a prefix with it \
                 already installed in BYRE_TEST_CACHE."
            ),
            _ => format!("cannot run npm: {error}"),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`npm install {spec}` into {} failed ({}):\n{}\n{}",
        cache.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The version in the installed package's `package.json`.
fn installed_version(cache: &Path) -> Option<String> {
    let manifest = cache
        .join("node_modules")
        .join(CLAUDE_CODE_PACKAGE)
        .join("package.json");
    let manifest: serde_json::Value = serde_json::from_slice(&fs::read(manifest).ok()?).ok()?;
    manifest.get("version")?.as_str().map(str::to_owned)
}

/// Where the package put its native executable. Its postinstall script copies (hard-links)
/// the platform package's binary over the stub `bin/claude.exe` (the `claude` bin shim
/// points there); where install scripts did not run, the stub stays, and the binary is
/// taken from the platform package (`@anthropic-ai/claude-code-linux-x64/claude`, …).
fn find_binary(cache: &Path) -> Option<PathBuf> {
    let scope = cache.join("node_modules/@anthropic-ai");
    let placed = scope.join("claude-code/bin/claude.exe");
    if is_native_executable(&placed) {
        return Some(placed);
    }
    fs::read_dir(&scope)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("claude-code-")
        })
        .map(|entry| entry.path().join("claude"))
        .find(|path| is_native_executable(path))
}

/// An executable file bigger than a stub (the native binary is about 240 MB).
fn is_native_executable(path: &Path) -> bool {
    const STUB_MAX_BYTES: u64 = 1024 * 1024;
    let Ok(metadata) = fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o111 == 0 {
            return false;
        }
    }
    metadata.is_file() && metadata.len() > STUB_MAX_BYTES
}

/// Runs `claude --version` and expects `2.1.197 (Claude Code)`.
fn check_version(bin: &Path) -> Result<(), String> {
    let output = Command::new(bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.starts_with(CLAUDE_CODE_VERSION) {
        return Ok(());
    }
    Err(format!(
        "{} --version printed {stdout:?} (stderr {:?}), not {CLAUDE_CODE_VERSION}",
        bin.display(),
        String::from_utf8_lossy(&output.stderr)
    ))
}
