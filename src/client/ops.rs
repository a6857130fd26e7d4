//! What `byre client` does for each `ClientRequest` op but `hands`: `bash`, `read_file`,
//! `write_file`, `upload` (get the transfer's archive, unpack it at `dest`) and `download`
//! (pack `path`, put it to the transfer). Each returns the reply's fields or an error text.
//! Machine paths are absolute or start with `~/` (the home directory).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{home_dir, passwd_field, Shared};
use byre_process::runner::{self, Exit, Keep, Limits};

use byre_connect::archive;

/// Most output `bash` answers: its last 64 KiB.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Largest file `read_file` answers (it travels base64 in one WebSocket message).
pub const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;
/// `bash`'s timeout when the request gives none.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// A request's machine path: `~/…` under the home directory, else absolute.
/// # Errors
/// Missing, relative or holding NUL.
pub fn machine_path(request: &Value, field: &str) -> Result<PathBuf, String> {
    let raw = request[field]
        .as_str()
        .ok_or_else(|| format!("`{field}` is required"))?;
    if raw.contains('\0') {
        return Err(format!("`{field}` holds a NUL byte"));
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return Ok(home_dir().join(rest));
    }
    if raw.starts_with('/') {
        return Ok(PathBuf::from(raw));
    }
    Err(format!("`{field}` must be absolute or start with ~/"))
}

/// The shell `bash` runs: `zsh` where it exists, else the login shell (`$SHELL`, the passwd
/// entry), else `/bin/sh`.
pub fn shell() -> PathBuf {
    for zsh in [
        "/bin/zsh",
        "/usr/bin/zsh",
        "/usr/local/bin/zsh",
        "/opt/homebrew/bin/zsh",
    ] {
        if Path::new(zsh).exists() {
            return PathBuf::from(zsh);
        }
    }
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| passwd_field(|pw| pw.pw_shell))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// `bash`: `SHELL -l -c command` in the home directory, with only the variables
/// [`super::env`] passes on, in its own process group, stdout and stderr into one pipe, its last [`MAX_OUTPUT_BYTES`] kept; killed (with its group) at
/// `timeout_ms` (exit code −1). Whatever the command left running in its group is killed when
/// it exits (`byre_process::runner`).
pub async fn bash(request: &Value) -> Result<Value, String> {
    let command = request["command"]
        .as_str()
        .ok_or("`command` is required")?
        .to_owned();
    let timeout =
        Duration::from_millis(request["timeout_ms"].as_u64().unwrap_or(DEFAULT_TIMEOUT_MS));
    let mut cmd = std::process::Command::new(shell());
    cmd.arg("-l")
        .arg("-c")
        .arg(&command)
        .env_clear()
        .envs(super::env::for_commands())
        .env("HOME", home_dir())
        .current_dir(home_dir());
    let limits = Limits {
        timeout,
        // A process that left the group may still hold the pipe: given up on after a while.
        drain: Duration::from_secs(2),
        max_output_bytes: MAX_OUTPUT_BYTES,
        keep: Keep::Last,
        merge_stderr: true,
        new_session: false,
    };
    let finished = runner::run(cmd, &limits, |_| {})
        .await
        .map_err(|e| format!("cannot start the shell: {e}"))?;
    let exit_code = match finished.exit {
        Exit::WaitFailed(e) => return Err(format!("cannot wait for the shell: {e}")),
        exit => exit.code_or_signal().unwrap_or(-1),
    };
    let text = String::from_utf8_lossy(&finished.stdout).into_owned();
    Ok(json!({"exit_code": exit_code, "output": text}))
}

/// `read_file`: the file's bytes, base64 (at most [`MAX_READ_BYTES`]).
pub async fn read_file(request: &Value) -> Result<Value, String> {
    let path = machine_path(request, "path")?;
    let meta = tokio::fs::metadata(&path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(format!(
            "{} is larger than {} MiB; use download",
            path.display(),
            MAX_READ_BYTES / (1024 * 1024)
        ));
    }
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(json!({"data": base64::engine::general_purpose::STANDARD.encode(bytes)}))
}

/// `write_file`: replaces the file with the request's base64 `data`, parents made.
pub async fn write_file(request: &Value) -> Result<Value, String> {
    let path = machine_path(request, "path")?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(request["data"].as_str().unwrap_or_default())
        .map_err(|e| format!("`data` is not base64: {e}"))?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    tokio::fs::write(&path, data)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(json!({}))
}

fn transfer_url(shared: &Shared, request: &Value) -> Result<String, String> {
    let id = request["transfer"]
        .as_str()
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .ok_or("`transfer` is required")?;
    Ok(format!("{}/api/clients/transfers/{id}", shared.base))
}

fn authorized(shared: &Shared, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match &shared.token {
        Some(t) => builder.bearer_auth(t),
        None => builder,
    }
}

/// `upload`: gets the transfer's archive and puts its one entry at `dest` (replacing what is
/// there; see `byre_connect::archive::unpack_to` for what is refused).
pub(crate) async fn upload(shared: &Shared, request: &Value) -> Result<Value, String> {
    let url = transfer_url(shared, request)?;
    let dest = machine_path(request, "dest")?;
    let mut answer = authorized(shared, shared.http.get(&url))
        .send()
        .await
        .map_err(|e| format!("cannot get the archive: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!("cannot get the archive: HTTP {}", answer.status()));
    }
    let file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let (std_file, path) = file.into_parts();
    let mut out = tokio::fs::File::from_std(std_file);
    let mut n_bytes = 0u64;
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| format!("the archive did not arrive in full: {e}"))?
    {
        n_bytes += chunk.len() as u64;
        if n_bytes > archive::MAX_TRANSFER_BYTES {
            return Err("the archive is larger than the transfer limit".into());
        }
        out.write_all(&chunk).await.map_err(|e| e.to_string())?;
    }
    out.flush().await.map_err(|e| e.to_string())?;
    drop(out);
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        archive::unpack_to(std::io::BufReader::new(file), &dest).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(json!({}))
}

/// `download`: packs `path` (a file or directory) and puts the archive to the transfer.
pub(crate) async fn download(shared: &Shared, request: &Value) -> Result<Value, String> {
    let url = transfer_url(shared, request)?;
    let path = machine_path(request, "path")?;
    let packed = tokio::task::spawn_blocking(move || {
        let file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        archive::pack(&path, file.as_file(), false).map_err(|e| e.to_string())?;
        Ok::<_, String>(file.into_temp_path())
    })
    .await
    .map_err(|e| e.to_string())??;
    let file = tokio::fs::File::open(&packed)
        .await
        .map_err(|e| e.to_string())?;
    let body = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(buf), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    let answer = authorized(shared, shared.http.put(&url))
        .header("content-type", "application/gzip")
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .map_err(|e| format!("cannot send the archive: {e}"))?;
    if !answer.status().is_success() {
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or_default();
        return Err(format!(
            "byre refused the archive (HTTP {status}): {}",
            body["message"].as_str().unwrap_or_default()
        ));
    }
    Ok(json!({}))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{bash, machine_path, MAX_OUTPUT_BYTES};

    #[test]
    fn machine_paths_are_absolute_or_under_home() {
        let home = super::home_dir();
        let cases = [
            ("~/notes.txt", Ok(home.join("notes.txt"))),
            ("/etc/hosts", Ok("/etc/hosts".into())),
            ("notes.txt", Err(())),
            ("~notes", Err(())),
            ("/a\0b", Err(())),
        ];
        for (raw, want) in cases {
            let got = machine_path(&json!({ "path": raw }), "path").map_err(|_| ());
            assert_eq!(got, want, "{raw:?}");
        }
        assert!(machine_path(&json!({}), "path").is_err(), "missing");
    }

    #[tokio::test]
    async fn the_output_tail_keeps_the_last_64_kib() {
        let command = format!("head -c {MAX_OUTPUT_BYTES} /dev/zero | tr '\\0' a; printf end");
        let reply = bash(&json!({ "command": command })).await.unwrap();
        let output = reply["output"].as_str().unwrap();
        assert_eq!(output.len(), MAX_OUTPUT_BYTES, "{}", &output[..80]);
        assert!(output.ends_with("aend"), "{}", &output[output.len() - 80..]);
    }

    #[tokio::test]
    async fn bash_answers_the_exit_code_and_output_together() {
        let reply = bash(&json!({"command": "echo out; echo err >&2; exit 3"}))
            .await
            .unwrap();
        assert_eq!(reply["exit_code"], 3, "{reply}");
        let output = reply["output"].as_str().unwrap();
        assert!(output.contains("out") && output.contains("err"), "{reply}");
    }

    #[tokio::test]
    async fn bash_kills_the_command_at_its_timeout_and_what_it_left_behind() {
        let reply = bash(&json!({"command": "sleep 300 & echo $!; sleep 300", "timeout_ms": 8000}))
            .await
            .unwrap();
        assert_eq!(reply["exit_code"], -1, "{reply}");
        let pid: u32 = reply["output"]
            .as_str()
            .unwrap()
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{e}: {reply}"));
        // Gone, or a zombie waiting for its new parent to reap it: not running. SIGKILL is
        // delivered when the process is next scheduled, which on a loaded machine takes a
        // moment: wait up to 10 s for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .map(str::to_owned);
            if matches!(state.as_deref(), None | Some("Z")) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still running: {stat}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
