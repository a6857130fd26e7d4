//! byre-client: `byre client --server URL`: the user's own machine (macOS or Linux) serving the requests of
//! the agents of the server's tasks (`connectClient`; spec `ClientRequest`/`ClientReply`).
//!
//! It opens the WebSocket `/api/clients/connect` named by `--host` (the `Byre-Host` header,
//! default the machine's host name), with a bearer token in token mode (`--token`,
//! `BYRE_TOKEN`, or `--token-file`) or nothing more behind `tailscale serve`. Each request runs
//! on a task of its own and is answered with its id, in any order ([`ops`]; `hands` through
//! [`hands`]). When the socket ends it reconnects after 1 s, doubling to at most 30 s; a
//! connection that is replaced by a newer one of the same host (close code 4001) stops the
//! client instead, so two clients of one host never take turns. What it does goes to stdout,
//! one line each; this crate and the byre crate's `cli` are the only code that prints.
//!
//! It imports nothing of the server: what both ends share is byre-connect (the close code, the
//! transfers' archives) and byre-process (the command runner).

#![warn(missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use byre_connect::CLOSE_REPLACED;

pub mod env;
pub mod hands;
pub mod ops;

/// First wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait before reconnecting.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest silence of the server (which pings every 20 s) before the socket counts as lost.
const SILENCE_LIMIT: Duration = Duration::from_secs(70);

/// What `byre client` was started with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server, `http://host:port` or `https://…` (`ws://` and `wss://` work too).
    pub server: String,
    /// This machine's name for the server (`Byre-Host`).
    pub host: String,
    /// A bearer token (token mode), if any.
    pub token: Option<String>,
    /// The byre-hands MCP server's command line (words split on whitespace), if any.
    pub hands_mcp: Option<String>,
    /// The commit this binary was built from (`Byre-Commit`; the byre crate's `BUILD_COMMIT`).
    pub commit: &'static str,
}

/// What one connection's end means for the client.
enum Ended {
    /// Replaced by a newer connection of the same host: stop.
    Replaced(String),
    /// Anything else: reconnect.
    Lost(String),
}

/// Shared by every request of every connection.
pub(crate) struct Shared {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: Option<String>,
    pub(crate) hands: hands::Hands,
}

/// Serves requests until the connection is replaced; reconnects with backoff otherwise.
/// Returns the process's exit code (2 when replaced).
/// # Errors
/// A `--server` URL that is not `http://`, `https://`, `ws://` or `wss://`.
pub async fn run(options: Options) -> anyhow::Result<i32> {
    // The machine's commands run as the client's user, so nothing stops one from reading
    // what that user can (the token file included: docs/security.md). Still, leave no easy
    // copy: no core dumps or same-user ptrace of this process (`/proc/<pid>/environ`, `mem`).
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes only this process's dumpable flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let (ws_url, http_base) = endpoints(&options.server).map_err(anyhow::Error::msg)?;
    let shared = Arc::new(Shared {
        http: reqwest::Client::builder().no_proxy().build()?,
        base: http_base,
        token: options.token.clone(),
        hands: hands::Hands::new(options.hands_mcp.clone()),
    });
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        match connect_once(&ws_url, &options, &shared).await {
            Ended::Replaced(reason) => {
                println!(
                    "disconnected: {reason}; stopping (another `byre client` for {} took over)",
                    options.host
                );
                return Ok(2);
            }
            Ended::Lost(why) => {
                if started.elapsed() > MAX_BACKOFF {
                    backoff = FIRST_BACKOFF;
                }
                println!(
                    "disconnected: {why}; reconnecting in {} s",
                    backoff.as_secs()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// The `connectClient` WebSocket URL and the HTTP base (for transfers) of `--server`:
/// `http://` and `ws://` map to `ws://` and `http://`, `https://` and `wss://` to `wss://`
/// and `https://` (TLS by rustls, the system's root certificates: `tailscale serve`'s
/// certificate is trusted as a browser trusts it). A trailing `/` is dropped.
/// # Errors
/// Any other scheme, or no host after it, in words.
pub fn endpoints(server: &str) -> Result<(String, String), String> {
    let server = server.trim().trim_end_matches('/');
    let (scheme, rest) = server.split_once("://").unwrap_or(("", server));
    let (ws, http) = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => ("ws", "http"),
        "https" | "wss" => ("wss", "https"),
        _ => {
            return Err(format!(
                "--server must be an http://, https://, ws:// or wss:// URL, not `{server}`"
            ))
        }
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("--server names no host: `{server}`"));
    }
    Ok((
        format!("{ws}://{rest}/api/clients/connect"),
        format!("{http}://{rest}"),
    ))
}

/// One connection: connect, serve requests until it ends.
async fn connect_once(url: &str, options: &Options, shared: &Arc<Shared>) -> Ended {
    let mut request = match url.into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Lost(format!("bad URL {url}: {e}")),
    };
    let headers = request.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(v) = value.parse() {
            headers.insert(name, v);
        }
    };
    set("byre-host", &options.host);
    set("byre-commit", options.commit);
    if let Some(token) = &options.token {
        set("authorization", &format!("Bearer {token}"));
    }
    let (socket, _) = match tokio_tungstenite::connect_async(request).await {
        Ok(s) => s,
        Err(e) => return Ended::Lost(format!("cannot connect to {url}: {e}")),
    };
    println!("connected to {} as {}", shared.base, options.host);
    let (mut sink, mut stream) = socket.split();
    let (reply_tx, mut reply_rx) = mpsc::channel::<Message>(64);
    // Requests of this connection; dropped with it, which stops them (a command's process
    // group is killed).
    let mut running = tokio::task::JoinSet::new();
    // The server pings every 20 s: a socket silent for longer than this is half-open.
    let mut watchdog = tokio::time::interval(SILENCE_LIMIT / 2);
    let mut last_heard = Instant::now();
    loop {
        tokio::select! {
            _ = watchdog.tick() => {
                if last_heard.elapsed() > SILENCE_LIMIT {
                    return Ended::Lost(format!("nothing from the server for {} s", SILENCE_LIMIT.as_secs()));
                }
            }
            out = reply_rx.recv() => {
                let Some(msg) = out else { continue };
                if let Err(e) = sink.send(msg).await {
                    return Ended::Lost(format!("cannot send: {e}"));
                }
            }
            msg = stream.next() => match msg.inspect(|_| last_heard = Instant::now()) {
                Some(Ok(Message::Text(text))) => {
                    let shared = shared.clone();
                    let tx = reply_tx.clone();
                    running.spawn(async move {
                        let reply = handle(&shared, &text).await;
                        let _ = tx.send(Message::text(reply.to_string())).await;
                    });
                }
                Some(Ok(Message::Ping(p))) => {
                    let _ = sink.send(Message::Pong(p)).await;
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|f| (u16::from(f.code), f.reason.to_string()))
                        .unwrap_or((1005, String::new()));
                    if code == CLOSE_REPLACED {
                        return Ended::Replaced(reason);
                    }
                    return Ended::Lost(format!("the server closed the connection ({code} {reason})"));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Ended::Lost(e.to_string()),
                None => return Ended::Lost("the connection ended".into()),
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
}

/// Answers one `ClientRequest` (a malformed one with an error, under its id if it has one).
async fn handle(shared: &Shared, text: &str) -> Value {
    let request: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let id = request["id"].as_str().unwrap_or_default().to_owned();
    let op = request["op"].as_str().unwrap_or_default().to_owned();
    let what = match op.as_str() {
        "bash" => format!(
            "bash `{}`",
            cut(request["command"].as_str().unwrap_or_default())
        ),
        "hands" => format!("hands {}", request["tool"].as_str().unwrap_or_default()),
        other => format!(
            "{other} {}",
            request["path"]
                .as_str()
                .or(request["dest"].as_str())
                .unwrap_or_default()
        ),
    };
    println!("request {id}: {what}");
    let answer = match op.as_str() {
        "bash" => ops::bash(&request).await,
        "read_file" => ops::read_file(&request).await,
        "write_file" => ops::write_file(&request).await,
        "upload" => ops::upload(shared, &request).await,
        "download" => ops::download(shared, &request).await,
        "hands" => shared.hands.call(&request).await,
        other => Err(format!("this client does not know the op `{other}`")),
    };
    let mut reply = match answer {
        Ok(Value::Object(fields)) => Value::Object(fields),
        Ok(_) => json!({}),
        Err(error) => {
            println!("request {id}: failed: {error}");
            json!({"error": error})
        }
    };
    reply["id"] = Value::String(id.clone());
    println!("request {id}: answered");
    reply
}

/// The first line of `text`, at most 80 characters.
fn cut(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(80).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// This machine's host name (`--host`'s default), or `machine` when it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = if ok {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    if name.is_empty() {
        "machine".into()
    } else {
        name
    }
}

/// The home directory: `$HOME`, else the user's passwd entry, else `/`.
pub fn home_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    passwd_field(|pw| pw.pw_dir)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// A string field of the running user's passwd entry.
pub(crate) fn passwd_field(field: impl Fn(&libc::passwd) -> *mut libc::c_char) -> Option<String> {
    // SAFETY: getpwuid returns a pointer to a static entry or NULL; the field is read at once,
    // before any other passwd call, and copied out.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() {
            return None;
        }
        let p = field(&*pw);
        if p.is_null() {
            return None;
        }
        let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        (!s.is_empty()).then_some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::endpoints;

    #[test]
    fn server_urls_map_to_the_socket_and_http_base_of_their_scheme() {
        let ok = |a: &str, b: &str| Ok((a.to_owned(), b.to_owned()));
        let cases = [
            (
                "http://127.0.0.1:7777",
                ok(
                    "ws://127.0.0.1:7777/api/clients/connect",
                    "http://127.0.0.1:7777",
                ),
            ),
            (
                "https://byre.tail1234.ts.net/",
                ok(
                    "wss://byre.tail1234.ts.net/api/clients/connect",
                    "https://byre.tail1234.ts.net",
                ),
            ),
            (
                "ws://host:7777",
                ok("ws://host:7777/api/clients/connect", "http://host:7777"),
            ),
            (
                "WSS://host",
                ok("wss://host/api/clients/connect", "https://host"),
            ),
            (
                "https://host/byre",
                ok("wss://host/byre/api/clients/connect", "https://host/byre"),
            ),
        ];
        for (server, want) in cases {
            assert_eq!(endpoints(server), want, "{server}");
        }
        for bad in ["ftp://host", "127.0.0.1:7777", "https://", "http:///x", ""] {
            assert!(endpoints(bad).is_err(), "{bad:?} is refused");
        }
    }
}
