//! byre-machines: the users' own machines, each running `byre client` (`connectClient`,
//! `getClientTransfer`, `putClientTransfer`): the registry of connected machines, the requests
//! agents send them and the transfers those requests move. The agents' tools that use them are
//! byre-app's; the WebSocket and HTTP framing is the HTTP adapter's.
//!
//! A machine is named by its `Byre-Host` header and belongs to the login that connected it;
//! one connection per (login, host): a newer one replaces the older, which is closed with
//! [`CLOSE_REPLACED`]. Each request gets a fresh id; its waiter is answered by the
//! `ClientReply` with that id, by its timeout, or at once with an error when its connection
//! goes (closed, dropped or replaced). A reply whose id waits for nothing is logged and
//! ignored. Nothing here is logged as an event: connections and requests are live only.
//!
//! A transfer lives exactly as long as its request waits: `getClientTransfer` serves an
//! upload's archive while its request waits, `putClientTransfer` accepts a download's
//! archive once while its request waits; otherwise both are not found. Both serve only the
//! login whose machine the request went to: to any other login the transfer does not exist.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use byre_connect::archive::{self, ArchiveError, MAX_TRANSFER_BYTES};
use byre_connect::CLOSE_REPLACED;

/// Why a machine could not be connected or a transfer served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A malformed request or a refused archive.
    #[error("{0}")]
    Invalid(String),
    /// No such transfer waiting (for this login).
    #[error("{0}")]
    NotFound(String),
    /// An archive beyond the transfer limit.
    #[error("{0}")]
    TooLarge(String),
    /// Anything else: an outside failure, the cause for the log.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    fn internal(cause: impl std::fmt::Display) -> Error {
        Error::Internal(cause.to_string())
    }
}

/// Runs blocking work (files, archives) off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(Error::internal)?
}

/// Most requests waiting to be written to one connection; beyond, a request fails at once.
const OUTBOX: usize = 256;

/// What the adapter writes to a machine's socket.
#[derive(Debug)]
pub enum Outgoing {
    /// A `ClientRequest`, as JSON text.
    Request(String),
    /// Close the socket with this code and reason.
    Close {
        /// The WebSocket close code.
        code: u16,
        /// Why, for the human at the machine.
        reason: String,
    },
}

/// A path in a task's worktree, as transfers read and write it: the worktree (its recorded
/// path, opened as a handle) and the path beneath it (checked: relative, no `..`, not into
/// `.git`; empty for the worktree itself), resolved by the kernel with no symlink followed
/// (`archive::pack_beneath`, `archive::unpack_beneath`).
#[derive(Debug, Clone)]
pub struct InWorktree {
    /// The task's worktree.
    pub worktree: PathBuf,
    /// The path beneath it.
    pub rel: PathBuf,
}

struct Conn {
    login: String,
    host: String,
    outbox: mpsc::Sender<Outgoing>,
}

struct Pending {
    conn_id: u64,
    reply: oneshot::Sender<Result<Value, String>>,
}

/// Where a download's archive stands.
#[derive(Debug, Clone, PartialEq)]
enum Received {
    Waiting,
    Receiving,
    Done(Result<(), String>),
}

enum TransferKind {
    /// The archive `getClientTransfer` serves (a temporary file, removed with the transfer).
    Upload(tempfile::TempPath),
    /// Where `putClientTransfer`'s archive is unpacked (absolute, checked by the tool).
    Download {
        dest: InWorktree,
        received: Received,
    },
}

struct Transfer {
    request_id: String,
    /// The login of the machine the request went to; to any other the transfer is not found.
    login: String,
    kind: TransferKind,
}

#[derive(Default)]
struct Inner {
    conns: DashMap<u64, Conn>,
    pending: DashMap<String, Pending>,
    transfers: DashMap<String, Transfer>,
    next_id: AtomicU64,
}

/// The connected machines, their waiting requests and transfers. Cheap to clone; one per
/// server.
#[derive(Clone, Default)]
pub struct Machines {
    inner: Arc<Inner>,
}

/// One open `connectClient` socket, from [`connect`]. The adapter writes what [`Self::outbox`]
/// yields and hands each text message to [`Self::on_text`]; dropping it (the socket ended)
/// unregisters the machine and fails its waiting requests at once.
pub struct Connection {
    id: u64,
    host: String,
    inner: Arc<Inner>,
    /// Requests and the close order for this socket.
    pub outbox: mpsc::Receiver<Outgoing>,
    /// Whatever keeps the machine listed in `getStatus` while it is connected.
    _listed: Box<dyn Send + Sync>,
}

impl Connection {
    /// The machine's name (`Byre-Host`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Handles one text message from the machine: a `ClientReply` answers the request with its
    /// id. A malformed message or an unknown id is logged and ignored.
    pub fn on_text(&self, text: &str) {
        let reply: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                tracing::warn!(
                    host = self.host,
                    "a client message that is not a ClientReply object; ignored"
                );
                return;
            }
        };
        let Some(id) = reply["id"].as_str() else {
            tracing::warn!(host = self.host, "a ClientReply without an id; ignored");
            return;
        };
        match self
            .inner
            .pending
            .remove_if(id, |_, p| p.conn_id == self.id)
        {
            Some((_, p)) => {
                let answer = match reply["error"].as_str() {
                    Some(e) => Err(e.to_owned()),
                    None => Ok(reply),
                };
                let _ = p.reply.send(answer);
            }
            None => tracing::warn!(
                host = self.host,
                id,
                "a ClientReply for no waiting request; ignored"
            ),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.inner.conns.remove(&self.id);
        fail_waiting(
            &self.inner,
            self.id,
            &format!("the machine `{}` disconnected before answering", self.host),
        );
        tracing::info!(host = self.host, "client disconnected");
    }
}

/// Answers every request waiting on connection `conn_id` with `why`.
fn fail_waiting(inner: &Inner, conn_id: u64, why: &str) {
    let ids: Vec<String> = inner
        .pending
        .iter()
        .filter(|p| p.conn_id == conn_id)
        .map(|p| p.key().clone())
        .collect();
    for id in ids {
        if let Some((_, p)) = inner.pending.remove(&id) {
            let _ = p.reply.send(Err(why.to_owned()));
        }
    }
}

/// A connected machine chosen for a request.
pub struct Machine {
    id: u64,
    /// Its name.
    pub host: String,
    /// The login that connected it: the only one its transfers are served to.
    login: String,
}

impl Machines {
    /// `connectClient`: registers `host`'s connection for `login`, replacing (and closing with
    /// [`CLOSE_REPLACED`]) an older one of the same login and host, whose waiting requests fail.
    /// `listed` (what lists the machine in `getStatus`'s `clients`) lives as long as the connection.
    /// # Errors
    /// [`Error::Invalid`] for an empty host (no `Byre-Host` header).
    pub fn connect(
        &self,
        login: &str,
        host: &str,
        listed: Box<dyn Send + Sync>,
    ) -> Result<Connection, Error> {
        let host = host.trim();
        if host.is_empty() {
            return Err(Error::Invalid(
                "connectClient needs a Byre-Host header naming the machine".into(),
            ));
        }
        let inner = &self.inner;
        let older: Vec<u64> = inner
            .conns
            .iter()
            .filter(|c| c.login == login && c.host == host)
            .map(|c| *c.key())
            .collect();
        for id in older {
            if let Some((_, old)) = inner.conns.remove(&id) {
                let reason = "replaced by a newer connection from the same host".to_owned();
                let _ = old.outbox.try_send(Outgoing::Close {
                    code: CLOSE_REPLACED,
                    reason: reason.clone(),
                });
                fail_waiting(inner, id, &format!("the machine `{host}` was {reason}"));
            }
        }
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(OUTBOX);
        inner.conns.insert(
            id,
            Conn {
                login: login.to_owned(),
                host: host.to_owned(),
                outbox: tx,
            },
        );
        tracing::info!(login, host, "client connected");
        Ok(Connection {
            id,
            host: host.to_owned(),
            inner: inner.clone(),
            outbox: rx,
            _listed: listed,
        })
    }

    /// The newest connection of `login`.
    pub fn of(&self, login: &str) -> Option<Machine> {
        self.inner
            .conns
            .iter()
            .filter(|c| c.login == login)
            .max_by_key(|c| *c.key())
            .map(|c| Machine {
                id: *c.key(),
                host: c.host.clone(),
                login: c.login.clone(),
            })
    }

    /// Sends `request` (a `ClientRequest` without its id) to `machine` and waits for its
    /// reply, at most `timeout`.
    /// # Errors
    /// A message for the agent: the reply's `error`, the machine gone (at once when its
    /// connection goes), or no answer within `timeout`.
    pub async fn request(
        &self,
        machine: &Machine,
        mut request: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = uuid::Uuid::new_v4().to_string();
        request["id"] = Value::String(id.clone());
        self.send(machine, &id, request, timeout).await
    }

    async fn send(
        &self,
        machine: &Machine,
        id: &str,
        request: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let gone = || format!("the machine `{}` is no longer connected", machine.host);
        let outbox = self
            .inner
            .conns
            .get(&machine.id)
            .map(|c| c.outbox.clone())
            .ok_or_else(gone)?;
        let (tx, rx) = oneshot::channel();
        self.inner.pending.insert(
            id.to_owned(),
            Pending {
                conn_id: machine.id,
                reply: tx,
            },
        );
        // A connection that went between the lookup and the insert failed its waiters
        // before this one was there: fail it now rather than at its timeout.
        if !self.inner.conns.contains_key(&machine.id) {
            self.inner.pending.remove(id);
            return Err(gone());
        }
        if outbox
            .try_send(Outgoing::Request(request.to_string()))
            .is_err()
        {
            self.inner.pending.remove(id);
            return Err(format!(
                "the machine `{}` is not taking requests (too many waiting, or it went)",
                machine.host
            ));
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.inner.pending.remove(id);
        match answer {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(gone()),
            Err(_) => Err(format!(
                "the machine `{}` did not answer within {} s",
                machine.host,
                timeout.as_secs()
            )),
        }
    }

    /// Sends an `upload` request for `path` (a worktree path, checked) to `machine`: packs it,
    /// serves it as a transfer while the request waits, and waits for the reply.
    /// # Errors
    /// A message for the agent: the path could not be packed, or as [`Self::request`].
    pub async fn upload(
        &self,
        machine: &Machine,
        data_dir: PathBuf,
        path: InWorktree,
        dest: &str,
        timeout: Duration,
    ) -> Result<Value, String> {
        let archive = blocking(move || {
            let dir = transfers_dir(&data_dir);
            std::fs::create_dir_all(&dir).map_err(Error::internal)?;
            let file = tempfile::NamedTempFile::new_in(&dir).map_err(Error::internal)?;
            let worktree = byre_beneath::Dir::open(&path.worktree).map_err(Error::internal)?;
            archive::pack_beneath(&worktree, &path.rel, file.as_file(), true)
                .map_err(|e| Error::Invalid(e.to_string()))?;
            Ok(file.into_temp_path())
        })
        .await
        .map_err(|e| format!("cannot pack the worktree path: {e}"))?;
        let id = uuid::Uuid::new_v4().to_string();
        let transfer = uuid::Uuid::new_v4().to_string();
        self.inner.transfers.insert(
            transfer.clone(),
            Transfer {
                request_id: id.clone(),
                login: machine.login.clone(),
                kind: TransferKind::Upload(archive),
            },
        );
        let request =
            serde_json::json!({"id": id, "op": "upload", "transfer": transfer, "dest": dest});
        let answer = self.send(machine, &id, request, timeout).await;
        self.inner.transfers.remove(&transfer);
        answer
    }

    /// Sends a `download` request for the machine's `path` to `machine`, its archive to be
    /// unpacked at `dest` (absolute, inside the task's worktree: the caller checked it), and
    /// waits for the reply and the archive.
    /// # Errors
    /// A message for the agent: the archive was refused or never came, or as
    /// [`Self::request`].
    pub async fn download(
        &self,
        machine: &Machine,
        path: &str,
        dest: InWorktree,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = uuid::Uuid::new_v4().to_string();
        let transfer = uuid::Uuid::new_v4().to_string();
        self.inner.transfers.insert(
            transfer.clone(),
            Transfer {
                request_id: id.clone(),
                login: machine.login.clone(),
                kind: TransferKind::Download {
                    dest,
                    received: Received::Waiting,
                },
            },
        );
        let request =
            serde_json::json!({"id": id, "op": "download", "transfer": transfer, "path": path});
        let answer = self.send(machine, &id, request, timeout).await;
        let received = self
            .inner
            .transfers
            .remove(&transfer)
            .and_then(|(_, t)| match t.kind {
                TransferKind::Download { received, .. } => Some(received),
                TransferKind::Upload(_) => None,
            });
        // byre's own verdict on the archive first: the machine's reply may only repeat it.
        if let Some(Received::Done(Err(e))) = received {
            return Err(e);
        }
        let reply = answer?;
        match received {
            Some(Received::Done(Ok(()))) => Ok(reply),
            _ => Err(format!(
                "the machine `{}` answered without sending the archive",
                machine.host
            )),
        }
    }

    /// Whether `transfer` belongs to a request that still waits.
    fn live(&self, transfer: &Transfer) -> bool {
        self.inner.pending.contains_key(&transfer.request_id)
    }
}

/// Where transfers keep their archives while their request waits: `{data}/transfers`.
pub fn transfers_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("transfers")
}

/// Removes what transfers of a previous server left in [`transfers_dir`] (their requests
/// died with it: a crash or a `kill -9` skips the clean-up of a waiting transfer); run at
/// start-up, before any request can wait. Returns how many entries went.
pub fn sweep_transfers(data_dir: &Path) -> usize {
    let dir = transfers_dir(data_dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut n = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let gone = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        match gone {
            Ok(()) => n += 1,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a left transfer file")
            }
        }
    }
    n
}

fn no_transfer(id: &str) -> Error {
    Error::NotFound(format!("no waiting transfer `{id}`"))
}

/// `getClientTransfer`: the upload archive of transfer `id`, opened for reading, for `login`.
/// # Errors
/// [`Error::NotFound`] unless `id` is an upload whose request waits, sent to a machine of
/// `login` (to another login it does not exist).
pub async fn get_transfer(
    machines: &Machines,
    login: &str,
    id: &str,
) -> Result<tokio::fs::File, Error> {
    let path = {
        let t = machines
            .inner
            .transfers
            .get(id)
            .filter(|t| t.login == login)
            .ok_or_else(|| no_transfer(id))?;
        match &t.kind {
            TransferKind::Upload(path) if machines.live(&t) => path.to_path_buf(),
            _ => return Err(no_transfer(id)),
        }
    };
    // Opened now, the file stays readable even if the request ends and the path goes.
    tokio::fs::File::open(&path).await.map_err(Error::internal)
}

/// A download's archive arriving (`putClientTransfer`), from [`put_transfer`]: write its bytes
/// with [`Receiving::write`], then [`Receiving::finish`]. Dropped before finishing, the
/// transfer fails (its request's tool call says the archive did not arrive in full).
pub struct Receiving {
    machines: Machines,
    id: String,
    /// The temporary file the archive is written to (none only if it could not be made).
    file: Option<(tokio::fs::File, tempfile::TempPath)>,
    n_bytes: u64,
    finished: bool,
}

/// `putClientTransfer`: starts receiving transfer `id`'s archive from `login`, once, into a
/// temporary file under [`transfers_dir`] of `data_dir`.
/// # Errors
/// [`Error::NotFound`] unless `id` is a download whose request waits, sent to a machine of
/// `login`, and whose archive has not come yet.
pub async fn put_transfer(
    machines: &Machines,
    data_dir: &Path,
    login: &str,
    id: &str,
) -> Result<Receiving, Error> {
    {
        let mut t = machines
            .inner
            .transfers
            .get_mut(id)
            .filter(|t| t.login == login)
            .ok_or_else(|| no_transfer(id))?;
        let live = machines.live(&t);
        match &mut t.kind {
            TransferKind::Download { received, .. } if live && *received == Received::Waiting => {
                *received = Received::Receiving;
            }
            _ => return Err(no_transfer(id)),
        }
    }
    let data_dir = data_dir.to_owned();
    let made = blocking(move || {
        let dir = transfers_dir(&data_dir);
        std::fs::create_dir_all(&dir).map_err(Error::internal)?;
        let file = tempfile::NamedTempFile::new_in(&dir).map_err(Error::internal)?;
        let (file, path) = file.into_parts();
        Ok((file, path))
    })
    .await;
    let mut receiving = Receiving {
        machines: machines.clone(),
        id: id.to_owned(),
        file: None,
        n_bytes: 0,
        finished: false,
    };
    let (file, path) = made?;
    receiving.file = Some((tokio::fs::File::from_std(file), path));
    Ok(receiving)
}

impl Receiving {
    /// Appends a chunk of the archive.
    /// # Errors
    /// [`Error::TooLarge`] beyond [`MAX_TRANSFER_BYTES`]; [`Error::Internal`] when it cannot be
    /// stored.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.n_bytes += chunk.len() as u64;
        self.within_limit(self.n_bytes)?;
        let (file, _) = self.file.as_mut().ok_or_else(|| no_transfer(&self.id))?;
        file.write_all(chunk).await.map_err(Error::internal)
    }

    /// Refuses an archive of `n_bytes` (announced by its `Content-Length`, or received so far)
    /// beyond [`MAX_TRANSFER_BYTES`]: the transfer fails with that reason, which its tool call
    /// reports.
    /// # Errors
    /// [`Error::TooLarge`].
    pub fn within_limit(&mut self, n_bytes: u64) -> Result<(), Error> {
        if n_bytes <= MAX_TRANSFER_BYTES {
            return Ok(());
        }
        let why = format!(
            "transfers are limited to {} MiB",
            MAX_TRANSFER_BYTES / (1024 * 1024)
        );
        self.finished = true;
        self.set(Err(format!("the machine's archive was refused: {why}")));
        Err(Error::TooLarge(why))
    }

    /// Unpacks the whole archive at the transfer's destination (see `byre_connect::archive`: a
    /// refused archive changes nothing there).
    /// # Errors
    /// [`Error::Invalid`] for a refused or malformed archive, [`Error::TooLarge`] for one
    /// unpacking beyond the limit, [`Error::NotFound`] when the request stopped waiting.
    pub async fn finish(mut self) -> Result<(), Error> {
        self.finished = true;
        let (mut file, path) = self.file.take().ok_or_else(|| no_transfer(&self.id))?;
        file.flush().await.map_err(Error::internal)?;
        drop(file);
        let dest = match self
            .machines
            .inner
            .transfers
            .get(&self.id)
            .map(|t| match &t.kind {
                TransferKind::Download { dest, .. } => Some(dest.clone()),
                TransferKind::Upload(_) => None,
            }) {
            Some(Some(dest)) => dest,
            _ => return Err(no_transfer(&self.id)),
        };
        let outcome = blocking(move || {
            let file = std::fs::File::open(&path).map_err(Error::internal)?;
            let worktree = byre_beneath::Dir::open(&dest.worktree).map_err(Error::internal)?;
            let archive = std::io::BufReader::new(file);
            archive::unpack_beneath(archive, &worktree, &dest.rel).map_err(|e| match e {
                ArchiveError::TooLarge(m) => Error::TooLarge(m),
                ArchiveError::Refused(m) | ArchiveError::Io(m) => {
                    Error::Invalid(format!("the archive was refused: {m}"))
                }
            })
        })
        .await;
        self.set(outcome.clone().map_err(|e| e.to_string()));
        outcome
    }

    fn set(&self, outcome: Result<(), String>) {
        if let Some(mut t) = self.machines.inner.transfers.get_mut(&self.id) {
            if let TransferKind::Download { received, .. } = &mut t.kind {
                *received = Received::Done(outcome);
            }
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if !self.finished {
            self.set(Err("the machine's archive did not arrive in full".into()));
        }
    }
}
