//! The pinned real agent CLIs, installed from npm by the tests themselves (DESIGN.md
//! "Agents": tests run the real CLIs against our fakes), once per machine: Claude Code
//! ([`claude_bin`]) and Codex ([`codex_bin`]).
//!
//! Layout: `<cache>` is `$BYRE_TEST_CACHE` or `<workspace>/target/agent-clis`. Claude Code's
//! npm prefix is `<cache>` itself (`package.json`, `node_modules/`); Codex has its own prefix
//! `<cache>/codex/`, so installing one never prunes the other (npm removes what the prefix's
//! `package.json` does not list). Every installer takes the exclusive file lock
//! `<cache>/.install.lock` (`File::lock`, released by the OS even if the holder dies) before
//! it looks or writes, so parallel test binaries do not race, and writes
//! `<cache>/.<name>-<version>.installed` after a checked install, so an interrupted one is redone.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The npm package of the CLI.
pub const CLAUDE_CODE_PACKAGE: &str = "@anthropic-ai/claude-code";
/// The pinned version: the one `vendors/claude-code/PROTOCOL.md` was observed on.
pub const CLAUDE_CODE_VERSION: &str = "2.1.197";
/// The npm package of the Codex CLI.
pub const CODEX_PACKAGE: &str = "@openai/codex";
/// The pinned version: the one `vendors/codex/PROTOCOL.md` was observed on.
pub const CODEX_VERSION: &str = "0.171.0";

/// What installing and finding one pinned CLI takes.
struct PinnedCli {
    /// Short name, for the marker file and messages: `claude-code`, `codex`.
    name: &'static str,
    package: &'static str,
    version: &'static str,
    /// The npm prefix relative to the cache (`""` = the cache itself).
    prefix: &'static str,
    /// Where the package put the native executable, given the prefix.
    find_binary: fn(&Path) -> Option<PathBuf>,
    /// What `<bin> --version` prints first: `2.1.197 (Claude Code)`, `codex-cli 0.171.0`.
    version_line: &'static str,
}

const CLAUDE_CODE: PinnedCli = PinnedCli {
    name: "claude-code",
    package: CLAUDE_CODE_PACKAGE,
    version: CLAUDE_CODE_VERSION,
    prefix: "",
    find_binary: find_claude_binary,
    version_line: "2.1.197 (Claude Code)",
};

const CODEX: PinnedCli = PinnedCli {
    name: "codex",
    package: CODEX_PACKAGE,
    version: CODEX_VERSION,
    prefix: "codex",
    find_binary: find_codex_binary,
    version_line: "codex-cli 0.171.0",
};

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
        install(&CLAUDE_CODE, &agent_cli_cache()).unwrap_or_else(|message| panic!("{message}"))
    })
    .clone()
}

/// The native `codex` executable of the pinned version (for `codex app-server`, codex
/// PROTOCOL.md §2), installing it on first use
/// (`npm install --no-audit --no-fund --save-exact --prefix <cache>/codex @openai/codex@0.171.0`,
/// argv only; about 8 s and 420 MB: the platform binary comes as an optional dependency,
/// `@openai/codex-linux-x64` …). The path is the binary itself,
/// `<cache>/codex/node_modules/@openai/codex-<platform>/vendor/<target>/bin/codex`, not the
/// node shim, so running it needs no node. Later calls, in this process or another, only look.
/// # Panics
/// As [`claude_bin`].
pub fn codex_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        install(&CODEX, &agent_cli_cache()).unwrap_or_else(|message| panic!("{message}"))
    })
    .clone()
}

/// Makes the cache directory `cache` and takes its install lock (`.install.lock`, an exclusive
/// file lock, so concurrent test processes install one at a time); the canonical cache path and
/// the lock's file, which holds the lock until dropped. Errors: the directory or the lock file
/// cannot be made, or the lock cannot be taken.
fn lock_cache(cache: &Path) -> Result<(PathBuf, File), String> {
    fs::create_dir_all(cache)
        .map_err(|error| format!("cannot create {}: {error}", cache.display()))?;
    let cache = cache.canonicalize().unwrap_or_else(|_| cache.to_owned());
    let lock_path = cache.join(".install.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| format!("cannot open {}: {error}", lock_path.display()))?;
    lock.lock()
        .map_err(|error| format!("cannot lock {}: {error}", lock_path.display()))?;
    Ok((cache, lock))
}

/// Installs `cli` (if needed) under the cache and returns its executable.
fn install(cli: &PinnedCli, cache: &Path) -> Result<PathBuf, String> {
    // Held until `_lock` is dropped at return.
    let (cache, _lock) = lock_cache(cache)?;
    let cache = &cache;

    let prefix = &cache.join(cli.prefix);
    let marker = cache.join(format!(".{}-{}.installed", cli.name, cli.version));
    if marker.exists() && installed_version(cli, prefix).as_deref() == Some(cli.version) {
        if let Some(bin) = (cli.find_binary)(prefix) {
            return Ok(bin);
        }
    }
    let _ = fs::remove_file(&marker);
    fs::create_dir_all(prefix)
        .map_err(|error| format!("cannot create {}: {error}", prefix.display()))?;
    run_npm_install(cli, prefix)?;
    let bin = (cli.find_binary)(prefix).ok_or_else(|| {
        format!(
            "npm installed {} into {} but no native `{}` executable is there",
            cli.package,
            prefix.display(),
            cli.name
        )
    })?;
    check_version(cli, &bin)?;
    fs::write(&marker, bin.to_string_lossy().as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", marker.display()))?;
    Ok(bin)
}

fn run_npm_install(cli: &PinnedCli, prefix: &Path) -> Result<(), String> {
    let spec = format!("{}@{}", cli.package, cli.version);
    let output = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--save-exact", "--prefix"])
        .arg(prefix)
        .arg(&spec)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => format!(
                "npm is not installed, so the tests cannot install the pinned CLI {spec}. \
                 Install Node.js and npm (e.g. `apt-get install -y nodejs npm`), or put a cache with it \
                 already installed in BYRE_TEST_CACHE."
            ),
            _ => format!("cannot run npm: {error}"),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`npm install {spec}` into {} failed ({}):\n{}\n{}",
        prefix.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The version in the installed package's `package.json`.
fn installed_version(cli: &PinnedCli, prefix: &Path) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(cli.package)
        .join("package.json");
    let manifest: serde_json::Value = serde_json::from_slice(&fs::read(manifest).ok()?).ok()?;
    manifest.get("version")?.as_str().map(str::to_owned)
}

/// Where Claude Code's package put its native executable. Its postinstall script copies (hard-links)
/// the platform package's binary over the stub `bin/claude.exe` (the `claude` bin shim
/// points there); where install scripts did not run, the stub stays, and the binary is
/// taken from the platform package (`@anthropic-ai/claude-code-linux-x64/claude`, …).
fn find_claude_binary(prefix: &Path) -> Option<PathBuf> {
    let scope = prefix.join("node_modules/@anthropic-ai");
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

/// Where Codex's package put its native executable: the platform package (an optional
/// dependency aliased `@openai/codex-<platform>`, e.g. `codex-linux-x64`) holds it at
/// `vendor/<target triple>/bin/codex`, next to `vendor/<target>/codex-path/rg`. The package's
/// own `bin/codex.js` is a node shim that `execve`s it.
fn find_codex_binary(prefix: &Path) -> Option<PathBuf> {
    let scope = prefix.join("node_modules/@openai");
    let platform_packages = fs::read_dir(scope)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("codex-"));
    platform_packages
        .filter_map(|package| fs::read_dir(package.path().join("vendor")).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|target| target.path().join("bin/codex"))
        .find(|path| is_native_executable(path))
}

/// An executable file bigger than a stub (the native binaries are 240–320 MB).
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

/// Runs `<bin> --version` and expects the pinned version's line.
fn check_version(cli: &PinnedCli, bin: &Path) -> Result<(), String> {
    let output = Command::new(bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.starts_with(cli.version_line) {
        return Ok(());
    }
    Err(format!(
        "{} --version printed {stdout:?} (stderr {:?}), not {:?}",
        bin.display(),
        String::from_utf8_lossy(&output.stderr),
        cli.version_line
    ))
}

/// The npm package of the CodeBolt agent client.
pub const CODEBOLTJS_PACKAGE: &str = "@codebolt/codeboltjs";
/// The pinned version: the one `vendors/codebolt/PROTOCOL.md` was observed on (1.1.x, "v1").
pub const CODEBOLTJS_VERSION: &str = "1.1.99";

/// The `node_modules` directory holding the pinned `@codebolt/codeboltjs` (and its `ws`), for
/// an agent script's `NODE_PATH`; installed on first use into the prefix `<cache>/codebolt`
/// (`npm install --no-audit --no-fund --save-exact --ignore-scripts --prefix <cache>/codebolt
/// @codebolt/codeboltjs@1.1.99`, argv only, about 20 s; `--ignore-scripts` skips building
/// tree-sitter, which only `codeutils.getJsTree` uses), under the same lock and marker scheme
/// as the CLIs.
/// # Panics
/// When npm is missing or the install fails; the message shows npm's output.
pub fn codeboltjs_node_modules() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| install_codeboltjs(&agent_cli_cache()).unwrap_or_else(|m| panic!("{m}")))
        .clone()
}

fn install_codeboltjs(cache: &Path) -> Result<PathBuf, String> {
    let (cache, _lock) = lock_cache(cache)?;
    let cache = &cache;
    let prefix = cache.join("codebolt");
    let modules = prefix.join("node_modules");
    let manifest = modules.join(CODEBOLTJS_PACKAGE).join("package.json");
    let version = || -> Option<String> {
        let m: serde_json::Value = serde_json::from_slice(&fs::read(&manifest).ok()?).ok()?;
        m.get("version")?.as_str().map(str::to_owned)
    };
    let marker = cache.join(format!(".codeboltjs-{CODEBOLTJS_VERSION}.installed"));
    if marker.exists() && version().as_deref() == Some(CODEBOLTJS_VERSION) {
        return Ok(modules);
    }
    let _ = fs::remove_file(&marker);
    fs::create_dir_all(&prefix)
        .map_err(|error| format!("cannot create {}: {error}", prefix.display()))?;
    let spec = format!("{CODEBOLTJS_PACKAGE}@{CODEBOLTJS_VERSION}");
    let output = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            "--ignore-scripts",
            "--prefix",
        ])
        .arg(&prefix)
        .arg(&spec)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run npm to install {spec}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "`npm install {spec}` into {} failed ({}):\n{}\n{}",
            prefix.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if version().as_deref() != Some(CODEBOLTJS_VERSION) {
        return Err(format!(
            "npm installed {spec} but {} does not say {CODEBOLTJS_VERSION}",
            manifest.display()
        ));
    }
    fs::write(&marker, modules.to_string_lossy().as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", marker.display()))?;
    Ok(modules)
}
