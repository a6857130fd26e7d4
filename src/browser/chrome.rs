//! Starting and ending byre's Chromium: by argv in a process group of its own, a fresh
//! profile under the data dir, the reaper's marker and a pid file under `run/` (so
//! `clear_leftovers` ends what a killed byre left), driven over the DevTools protocol.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chromiumoxide::Browser;
use futures_util::StreamExt;
use tokio::io::AsyncBufReadExt;

use super::Error;

/// The viewport pages get, in CSS pixels.
const VIEWPORT: (u32, u32) = (1280, 800);

/// How long Chromium may take to print its DevTools address.
const LAUNCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A running Chromium.
pub(super) struct Chrome {
    /// The DevTools connection.
    pub(super) browser: Browser,
    /// Its process group (and main pid).
    pub(super) pgid: i32,
    marker: String,
    pid_file: PathBuf,
    profile: PathBuf,
    /// Drives the connection; finished when Chromium is gone.
    pub(super) handler: tokio::task::JoinHandle<()>,
    child: Mutex<Option<tokio::process::Child>>,
}

impl Drop for Chrome {
    fn drop(&mut self) {
        byre_process::groups::kill_group(self.pgid);
        let marker = self.marker.clone();
        byre_process::groups::kill_marked(|s| s == marker);
        self.handler.abort();
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Starts `bin` headless with a fresh profile under `data_dir`, and connects to it.
/// # Errors
/// Unavailable when it cannot be started or reached.
pub(super) async fn launch(bin: &Path, data_dir: &Path) -> Result<Chrome, Error> {
    let marker = format!("chromium-{}", uuid::Uuid::new_v4().simple());
    let run_dir = data_dir.join("run");
    let profile = data_dir.join("chromium").join(&marker);
    let _ = std::fs::create_dir_all(&run_dir);
    std::fs::create_dir_all(&profile).map_err(Error::internal)?;
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args([
        "--headless=new",
        "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--disable-default-apps",
        "--metrics-recording-only",
        "--mute-audio",
        "--hide-scrollbars",
        "--password-store=basic",
        "--use-mock-keychain",
    ])
    .arg(format!("--window-size={},{}", VIEWPORT.0, VIEWPORT.1))
    .arg(format!("--user-data-dir={}", profile.display()));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--no-sandbox");
    }
    cmd.arg("about:blank")
        .env(byre_process::groups::SESSION_ENV, &marker)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        Error::Unavailable(format!(
            "cannot start Chromium `{}` (install Debian's `chromium`, or set --chromium): {e}",
            bin.display()
        ))
    })?;
    let pgid = child.id().unwrap_or(0) as i32;
    let pid_file = run_dir.join(format!("{marker}.pgid"));
    let started = byre_process::groups::start_time(pgid).unwrap_or(0);
    let _ = std::fs::write(&pid_file, format!("{pgid} {started}\n"));
    let guard = Guard {
        pgid,
        pid_file: pid_file.clone(),
        profile: profile.clone(),
        armed: true,
    };
    let Some(stderr) = child.stderr.take() else {
        return Err(Error::internal("Chromium's stderr is not piped"));
    };
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let found = tokio::time::timeout(LAUNCH_TIMEOUT, async {
        let mut said = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(at) = line.find("ws://") {
                return Ok(line[at..].trim().to_owned());
            }
            said.push(line);
        }
        Err(said.join("\n"))
    })
    .await;
    let ws = match found {
        Ok(Ok(ws)) => ws,
        Ok(Err(said)) => {
            return Err(Error::Unavailable(format!(
                "Chromium exited before it listened: {}",
                said.chars().take(2000).collect::<String>()
            )))
        }
        Err(_) => {
            return Err(Error::Unavailable(format!(
                "Chromium did not listen within {} s",
                LAUNCH_TIMEOUT.as_secs()
            )))
        }
    };
    // The rest of its stderr is read (a full pipe would stall it) and dropped.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let config = chromiumoxide::handler::HandlerConfig {
        ignore_https_errors: false,
        viewport: Some(chromiumoxide::handler::viewport::Viewport {
            width: VIEWPORT.0,
            height: VIEWPORT.1,
            ..Default::default()
        }),
        ..Default::default()
    };
    let (browser, mut handler) = Browser::connect_with_config(ws, config)
        .await
        .map_err(|e| Error::Unavailable(format!("cannot reach Chromium's DevTools: {e}")))?;
    let handler = tokio::spawn(async move {
        while let Some(event) = handler.next().await {
            if let Err(e) = event {
                tracing::debug!(error = %e, "Chromium DevTools message");
            }
        }
    });
    let mut guard = guard;
    guard.armed = false;
    tracing::info!(pgid, "Chromium started for agents' browser actions");
    Ok(Chrome {
        browser,
        pgid,
        marker,
        pid_file,
        profile,
        handler,
        child: Mutex::new(Some(child)),
    })
}

/// Kills a browser's process group and reaps its main process (waiting up to 5 s); the rest
/// happens when the last handle on it drops.
pub(super) async fn shut(chrome: std::sync::Arc<Chrome>) {
    byre_process::groups::kill_group(chrome.pgid);
    let child = chrome
        .child
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(mut child) = child {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
    }
    let marker = chrome.marker.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for _ in 0..100 {
            if byre_process::groups::kill_marked(|s| s == marker) == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
    .await;
    tracing::info!(pgid = chrome.pgid, "Chromium stopped");
}

/// Kills and cleans up after a launch that failed half-way.
struct Guard {
    pgid: i32,
    pid_file: PathBuf,
    profile: PathBuf,
    armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            byre_process::groups::kill_group(self.pgid);
            let _ = std::fs::remove_file(&self.pid_file);
            let _ = std::fs::remove_dir_all(&self.profile);
        }
    }
}
