//! Deadlines and per-peer limits at the edge (docs/limits-http.md): a request body must
//! arrive within `serve --body-timeout`, or the request is answered 408 and its connection
//! closed; each peer holds a bounded number of open connections; sign-in attempts are
//! rate-limited per peer.
//!
//! actix-web's `client_request_timeout` bounds only the request head: nothing bounds the body
//! (a client may send its headers and half a body, then nothing, for ever). [`body_deadline`]
//! wraps every request's payload in [`Deadline`], in this one place. Long-lived bodies keep
//! working: a WebSocket's frames are its request body, so an upgrade gets no deadline; a
//! client transfer upload (`PUT /api/clients/transfers/{id}`, an archive of any size) gets an
//! idle deadline instead (no byte for the same time).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use actix_web::{web, HttpResponse};
use bytes::Bytes;
use futures_util::Stream;
use std::future::Future;

use crate::config::Config;

/// Most bytes of a `POST /auth/signin` body (`{"token": …}`).
pub const MAX_SIGNIN_BYTES: usize = 4 * 1024;

/// Peers tracked at once by the sign-in limiter; past it, new peers share one bucket, so an
/// attacker with many addresses cannot grow the map or reset their own.
const MAX_TRACKED_PEERS: usize = 4096;

/// The edge's limits, shared by every HTTP worker (`web::Data<Limits>`).
pub struct Limits {
    /// `serve --body-timeout`: how long a request body may take to arrive.
    pub body_timeout: Duration,
    /// Open connections per peer.
    pub connections: Arc<PeerConnections>,
    /// Sign-in attempts per peer.
    pub signin: SigninLimiter,
}

impl Limits {
    /// The limits `config` names.
    pub fn new(config: &Config) -> Limits {
        Limits {
            body_timeout: config.body_timeout,
            connections: Arc::new(PeerConnections::new(
                config.max_peer_connections,
                config.max_loopback_connections,
            )),
            signin: SigninLimiter::new(config.signin_attempts, config.signin_window),
        }
    }
}

/// The peer a limit counts: an IPv4 address, an IPv6 /64 (one host usually holds a whole
/// /64), or `None` for loopback, which counts as one peer of its own.
fn peer_key(ip: IpAddr) -> Option<IpAddr> {
    let ip = ip.to_canonical();
    if ip.is_loopback() {
        return None;
    }
    Some(match ip {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    })
}

// ---------------------------------------------------------------------------------------
// The body deadline

/// How a payload's deadline runs.
#[derive(Clone, Copy)]
enum Mode {
    /// The whole body within the time, counted from the request's head.
    Whole,
    /// No more than the time between two chunks (a transfer upload of any size).
    Idle,
}

/// Where a timed-out payload is kept until its 408 is written: the h1 dispatcher drains a
/// dropped chunked payload before it closes (a client trickling chunks would keep it open),
/// but closes a connection whose payload is neither finished nor dropped.
type Held = Rc<RefCell<Option<Payload>>>;

/// A request payload that fails with a timeout once its deadline passes (`Mode`).
struct Deadline {
    inner: Option<Payload>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    mode: Mode,
    held: Held,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(item) = Pin::new(inner).poll_next(cx) {
            if let (Mode::Idle, Some(Ok(_))) = (this.mode, &item) {
                this.sleep
                    .as_mut()
                    .reset(tokio::time::Instant::now() + this.timeout);
            }
            return Poll::Ready(item);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            *this.held.borrow_mut() = this.inner.take();
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        Poll::Pending
    }
}

/// A 408's body that keeps the timed-out payload alive until it is written, so the
/// connection is closed rather than drained.
struct Closing {
    bytes: Option<Bytes>,
    len: u64,
    _payload: Held,
}

impl MessageBody for Closing {
    type Error = std::convert::Infallible;

    fn size(&self) -> BodySize {
        BodySize::Sized(self.len)
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Poll::Ready(self.bytes.take().map(Ok))
    }
}

/// Whether a request's body is a WebSocket's frames (an upgrade).
fn is_upgrade(req: &ServiceRequest) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Middleware: the request body must arrive within `serve --body-timeout` (a transfer upload:
/// no pause that long; a WebSocket: no deadline). Past it the request is answered 408
/// `{"message"}` and its connection closed, whatever the handler made of the failed read.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let timeout = req
        .app_data::<web::Data<Limits>>()
        .map(|l| l.body_timeout)
        .filter(|t| !t.is_zero());
    let Some(timeout) = timeout.filter(|_| !is_upgrade(&req)) else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let mode = if req.method() == actix_web::http::Method::PUT
        && req.path().starts_with("/api/clients/transfers/")
    {
        Mode::Idle
    } else {
        Mode::Whole
    };
    let held: Held = Rc::new(RefCell::new(None));
    let payload = Deadline {
        inner: Some(req.take_payload()),
        sleep: Box::pin(tokio::time::sleep(timeout)),
        timeout,
        mode,
        held: held.clone(),
    };
    req.set_payload(Payload::Stream {
        payload: Box::pin(payload),
    });
    let result = next.call(req).await;
    if held.borrow().is_none() {
        return Ok(result?.map_into_left_body());
    }
    let res = result?;
    let secs = timeout.as_secs_f64();
    tracing::warn!(
        timeout_s = secs,
        "request body did not arrive in time; closing the connection"
    );
    let json = serde_json::json!({
        "message": format!("the request body did not arrive within {secs} s: the connection is closed")
    })
    .to_string();
    let bytes = Bytes::from(json);
    let body = Closing {
        len: bytes.len() as u64,
        bytes: Some(bytes),
        _payload: held,
    };
    let resp = HttpResponse::RequestTimeout()
        .force_close()
        .content_type("application/json")
        .message_body(body)?;
    let (req, _) = res.into_parts();
    Ok(ServiceResponse::new(req, resp).map_into_right_body())
}

// ---------------------------------------------------------------------------------------
// Open connections per peer

/// Open connections per peer, counted as they are accepted (`HttpServer::on_connect`) and
/// released when the connection's data is dropped with it. One past the cap is shut down at
/// once, before any request is read. Loopback peers are one peer with a cap of their own
/// (`serve --max-loopback-connections`, none by default): byre's own agents (their MCP tool
/// calls, CodeBolt sockets) arrive from loopback, as do the users of a local proxy, so a
/// per-address cap cannot tell them apart there. Connections on tailscale mode's Unix socket
/// (`tailscale serve`'s) have no peer address and are not counted.
pub struct PeerConnections {
    max_per_peer: usize,
    max_loopback: usize,
    open: Mutex<HashMap<Option<IpAddr>, usize>>,
}

/// A counted connection: held in its connection data, released when dropped.
pub struct Counted {
    connections: Arc<PeerConnections>,
    key: Option<IpAddr>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

impl PeerConnections {
    /// A counter allowing `max_per_peer` connections per address (0: any number) and
    /// `max_loopback` from loopback (0: any number).
    pub fn new(max_per_peer: usize, max_loopback: usize) -> PeerConnections {
        PeerConnections {
            max_per_peer,
            max_loopback,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a new connection from `ip`; `None` when the peer is at its cap (the caller
    /// closes the connection).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Counted> {
        let key = peer_key(ip);
        let max = if key.is_none() {
            self.max_loopback
        } else {
            self.max_per_peer
        };
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key).or_insert(0);
        if max != 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(Counted {
            connections: self.clone(),
            key,
        })
    }

    /// The `on_connect` hook: counts the accepted TCP connection, or shuts it down when its
    /// peer is at its cap.
    pub fn on_connect(
        self: &Arc<Self>,
        tcp: &tokio::net::TcpStream,
        data: &mut actix_web::dev::Extensions,
    ) {
        let Ok(peer) = tcp.peer_addr() else {
            return;
        };
        match self.admit(peer.ip()) {
            Some(counted) => {
                data.insert(counted);
            }
            None => {
                tracing::warn!(peer = %peer.ip(), "too many open connections from this peer; closing the new one");
                use std::os::fd::AsRawFd;
                // SAFETY: `shutdown` on the descriptor of a socket this call borrows; the
                // dispatcher then reads its end and drops the connection.
                unsafe {
                    libc::shutdown(tcp.as_raw_fd(), libc::SHUT_RDWR);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sign-in attempts per peer

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Sign-in attempts per peer: a token bucket of `attempts` tokens, refilled at `attempts` per
/// `window` (so at most `attempts` in a burst, and that many per window after it). Loopback is
/// one peer and is limited like any other: an agent on this host must not guess tokens.
pub struct SigninLimiter {
    attempts: f64,
    per_token: Duration,
    buckets: Mutex<HashMap<Option<IpAddr>, Bucket>>,
}

impl SigninLimiter {
    /// `attempts` per `window` per peer (0 attempts: no limit).
    pub fn new(attempts: u32, window: Duration) -> SigninLimiter {
        SigninLimiter {
            attempts: f64::from(attempts),
            per_token: window
                .checked_div(attempts.max(1))
                .unwrap_or(Duration::from_secs(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one attempt of `ip`'s bucket; `Err(seconds)` until one is back when it is empty.
    /// # Errors
    /// The whole seconds (at least 1) after which the next attempt is allowed.
    pub fn attempt(&self, ip: IpAddr) -> Result<(), u64> {
        self.attempt_at(ip, Instant::now())
    }

    fn attempt_at(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        if self.attempts == 0.0 {
            return Ok(());
        }
        let refill = |b: &Bucket| {
            let back = now.saturating_duration_since(b.at).as_secs_f64()
                / self.per_token.as_secs_f64().max(1e-9);
            (b.tokens + back).min(self.attempts)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = peer_key(ip);
        if !buckets.contains_key(&key) && buckets.len() >= MAX_TRACKED_PEERS {
            // Full buckets are as good as none.
            buckets.retain(|_, b| refill(b) < self.attempts);
            if buckets.len() >= MAX_TRACKED_PEERS {
                key = Some(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED));
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: self.attempts,
            at: now,
        });
        let tokens = refill(bucket);
        bucket.at = now;
        if tokens >= 1.0 {
            bucket.tokens = tokens - 1.0;
            return Ok(());
        }
        bucket.tokens = tokens;
        let wait = (1.0 - tokens) * self.per_token.as_secs_f64();
        Err((wait.ceil() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_its_attempts_then_waits_for_one_to_come_back() {
        let limiter = SigninLimiter::new(3, Duration::from_secs(30));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.attempt_at(ip, t0), Ok(()));
        }
        assert_eq!(limiter.attempt_at(ip, t0), Err(10), "one back every 10 s");
        assert_eq!(limiter.attempt_at(other, t0), Ok(()), "per peer");
        assert_eq!(limiter.attempt_at(ip, t0 + Duration::from_secs(10)), Ok(()));
    }

    #[test]
    fn ipv6_peers_are_counted_by_their_64_and_loopback_as_one() {
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::ffff:2".parse().unwrap();
        assert_eq!(peer_key(a), peer_key(b));
        assert_eq!(peer_key("127.0.0.1".parse().unwrap()), None);
        assert_eq!(peer_key("::1".parse().unwrap()), None);
        assert_eq!(peer_key("::ffff:127.0.0.2".parse().unwrap()), None);
    }

    #[test]
    fn connections_past_a_peers_cap_are_refused_until_one_closes() {
        let c = Arc::new(PeerConnections::new(2, 0));
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        let first = c.admit(ip).unwrap();
        let _second = c.admit(ip).unwrap();
        assert!(c.admit(ip).is_none());
        assert!(c.admit("198.51.100.2".parse().unwrap()).is_some());
        drop(first);
        assert!(c.admit(ip).is_some());
        for _ in 0..100 {
            std::mem::forget(c.admit("127.0.0.1".parse().unwrap()).unwrap());
        }
    }
}
