//! The real `byre` binary as a child process: for kill -9, the CLI, and start-up failures.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The binary under test.
pub fn byre_bin() -> &'static str {
    env!("CARGO_BIN_EXE_byre")
}

/// `byre serve --listen 127.0.0.1:0 --login ada --data DIR`, logging warnings and errors,
/// reviews off (a test asks for them with `BYRE_REVIEWS=true`).
pub fn serve_command(data: &Path) -> Command {
    let mut cmd = Command::new(byre_bin());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--login",
        "ada",
        "--data",
    ])
    .arg(data)
    .env("BYRE_LOG", "warn")
    // Reviews only where a test asks for them (`BYRE_REVIEWS=true` in `env`).
    .env("BYRE_REVIEWS", "false")
    // The fixture CodeBolt agents are an agents directory (`--codebolt-agents`).
    .env(
        "BYRE_CODEBOLT_AGENTS",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt"),
    );
    cmd
}

/// A `byre serve` child on a loopback port 0.
pub struct ServeProcess {
    /// The child.
    pub child: Child,
    /// Base URL.
    pub url: String,
}

impl ServeProcess {
    /// Starts `byre serve --listen 127.0.0.1:0 --data DIR --login ada` and waits for its URL.
    pub fn start(data: &Path) -> ServeProcess {
        Self::start_with_env(data, &[])
    }

    /// As [`ServeProcess::start`], with more environment variables.
    pub fn start_with_env(data: &Path, env: &[(&str, &str)]) -> ServeProcess {
        let mut child = serve_command(data)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn byre serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the URL line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        ServeProcess { child, url }
    }

    /// SIGKILL, then reap.
    pub fn kill_9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("reap");
    }

    /// SIGTERM (graceful), then reap; returns the exit code.
    pub fn terminate(mut self) -> Option<i32> {
        // SAFETY: sending a signal to our own child by pid has no memory-safety effect.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.child.wait().expect("reap").code()
    }
}

/// Runs `byre ARGS`; returns (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(byre_bin())
        .args(args)
        .output()
        .expect("run byre");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Drop for ServeProcess {
    /// A test that fails midway must not leave its server running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
