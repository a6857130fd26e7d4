//! The preview reactor: publishes each port a task's agent exposed (`preview.exposed`) with
//! `tailscale serve --bg --https=PORT http://127.0.0.1:PORT` (argv, no shell), so it is served
//! over HTTPS on the same port of byre's host, and withdraws it (`tailscale serve
//! --https=PORT off`) when the task closes (`task.state` merged or discarded). At start-up it
//! publishes the previews of active tasks again and withdraws those of closed ones; both
//! commands are idempotent. Without a `tailscale` binary (`Config::tailscale_bin`, else
//! `tailscale` on PATH) previews are only recorded and `getStatus` says they are not
//! published. Outcomes are logged, not recorded as events.

use std::path::{Path, PathBuf};
use std::time::Duration;

use byre_projections::tasks::TaskStatus;
use futures_util::StreamExt;
use tokio::sync::watch;

use byre_log::subscription::subscribe;
use byre_log::Writer;

/// How long one `tailscale` command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

async fn tailscale(bin: &Path, args: &[String]) {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(COMMAND_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) if out.status.success() => tracing::info!(?args, "tailscale serve"),
        Ok(Ok(out)) => tracing::error!(
            ?args,
            status = %out.status,
            stderr = %String::from_utf8_lossy(&out.stderr),
            "tailscale serve failed"
        ),
        Ok(Err(e)) => tracing::error!(?args, error = %e, "cannot run tailscale"),
        Err(_) => tracing::error!(?args, "tailscale serve timed out"),
    }
}

/// This machine's name on its tailnet (`tailscale status --json`: `Self.DNSName`, without its
/// final dot), which `tailscale serve` sends as the `Host` of every request it forwards; `None`
/// when tailscale is not running or says nothing.
pub async fn tailnet_name(bin: &Path) -> Option<String> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["status", "--json"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(5), cmd.output())
        .await
        .ok()?
        .ok()
        .filter(|o| o.status.success())?;
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let name = status["Self"]["DNSName"].as_str()?.trim_end_matches('.');
    (!name.is_empty()).then(|| name.to_owned())
}

fn publish_args(port: u32) -> Vec<String> {
    vec![
        "serve".into(),
        "--bg".into(),
        format!("--https={port}"),
        format!("http://127.0.0.1:{port}"),
    ]
}

fn withdraw_args(port: u32) -> Vec<String> {
    vec!["serve".into(), format!("--https={port}"), "off".into()]
}

/// The ports of a task's previews and whether the task is active.
fn task_ports(writer: &Writer, task_id: &str) -> (Vec<u32>, bool) {
    writer.read(|s| {
        let ports = s
            .previews
            .get(task_id)
            .map(|v| v.iter().map(|p| p.port).collect())
            .unwrap_or_default();
        let active = s
            .tasks
            .get(task_id)
            .is_some_and(|t| t.status == TaskStatus::Active);
        (ports, active)
    })
}

/// Starts the reactor (a no-op follower without `tailscale`); it ends when `shutdown` turns
/// true.
pub fn start(
    writer: Writer,
    tailscale_bin: Option<PathBuf>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(bin) = tailscale_bin else { return };
        let from = writer.head();
        let tasks: Vec<String> =
            writer.read(|s| s.previews.keys().map(|k| k.to_string()).collect());
        for task_id in tasks {
            let (ports, active) = task_ports(&writer, &task_id);
            for port in ports {
                let args = if active {
                    publish_args(port)
                } else {
                    withdraw_args(port)
                };
                tailscale(&bin, &args).await;
            }
        }
        let mut events = Box::pin(subscribe(writer.clone(), from));
        loop {
            tokio::select! {
                next = events.next() => match next {
                    Some(Ok(r)) if r.kind == "preview.exposed" => {
                        let e: serde_json::Value = serde_json::from_str(&r.json).unwrap_or_default();
                        if let Some(port) = e["payload"]["port"].as_u64().and_then(|p| u32::try_from(p).ok()) {
                            tailscale(&bin, &publish_args(port)).await;
                        }
                    }
                    Some(Ok(r)) if r.kind == "task.state" => {
                        let Some(task_id) = r.task_id.as_deref() else { continue };
                        let (ports, active) = task_ports(&writer, task_id);
                        if !active {
                            for port in ports {
                                tailscale(&bin, &withdraw_args(port)).await;
                            }
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "preview reactor cannot read the log");
                        return;
                    }
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
    })
}
