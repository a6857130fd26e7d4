//! The edge: the one Host/Origin allow-list every request passes before routing (DESIGN.md
//! invariant 9), and the cross-site request check that does not depend on Fetch Metadata.
//!
//! # Host
//!
//! A page on another name that resolves to byre's address (DNS rebinding) is, to the browser,
//! the attacker's own origin: it may read every answer and open every socket. What it cannot
//! change is the `Host` header, which names the attacker's host. So a request is served only
//! when its `Host` is one byre serves ([`Edge::allows_host`]):
//! - the listen address with the listen port, and `localhost`, `127.0.0.1`, `[::1]` with the
//!   listen port;
//! - a name given with `serve --public-host NAME` (no port, 80 or 443: the web's defaults) or
//!   `NAME:PORT` (that port): the tailscale name, a reverse proxy's name. Never any port of a
//!   name: tailscale serves each task's preview, a page its agent wrote, on another port of
//!   the tailnet name;
//! - when byre listens on every address (`0.0.0.0`, `[::]`), any IP literal with the listen
//!   port: a literal is not a name, so it cannot be rebound.
//!
//! Anything else is answered 421 (Misdirected Request) with `{"message"}`, before any handler,
//! on the REST API, the event stream, the WebSockets and the UI alike.
//!
//! On tailscale mode's Unix socket ([`crate::http::identity::ServeSocket`]) the list is the public names only
//! ([`Edge::for_serve_socket`]): `tailscale serve` forwards a request there with `Host:
//! localhost` and the browser's own `Host` in `X-Forwarded-Host` (which it sets, whatever the
//! client sent), so that is the host checked. Loopback names are the TCP port's.
//!
//! # Origin
//!
//! Browsers send `Origin` on every WebSocket handshake and on every cross-origin request. A
//! request whose `Origin` is present names one of the allowed hosts, or it is refused 403: so a
//! page of another site can open no terminal, `connectClient` or `/codebolt` socket, and can
//! change nothing. `Origin: null` (sandboxed frames, some privacy modes) proves nothing either
//! way and is treated as absent. Non-browser clients send no `Origin`.
//!
//! # Requests a form can send
//!
//! A cross-site page can send a state-changing request without a CORS preflight only as a
//! "simple" request: no body, or a form or text body (`application/x-www-form-urlencoded`,
//! `multipart/form-data`, `text/plain`). Modern browsers mark those `Sec-Fetch-Site` (refused
//! when cross-site in `identity`); one that does not (an old browser) is caught here: such a
//! request needs a same-origin proof — an allowed `Origin` or `Referer`, an `X-Byre-CSRF`
//! header (any value: no cross-site page can add it without a preflight byre never grants;
//! byre's page sends the sign-in key, or `1`), a bearer
//! token, or `Sec-Fetch-Site: same-origin`/`none`. A JSON body needs none of these: a page can
//! only send it cross-site after a preflight, which byre refuses.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};

use byre_app::signin::CSRF_HEADER;

/// The hosts byre serves, fixed at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The listen port.
    port: u16,
    /// Host names and IP literals (lower case, IPv6 without brackets) served with the listen port.
    local: Vec<String>,
    /// Whether any IP literal is served with the listen port (listening on every address).
    any_ip: bool,
    /// `--public-host` names (lower case) and their port; `None`: the web's default ports.
    public: Vec<(String, Option<u16>)>,
}

impl Edge {
    /// The allow-list for a server listening on `listen`, with the `--public-host` names
    /// `public` (`NAME` or `NAME:PORT`).
    /// # Errors
    /// A public host that is empty, has a scheme or path, or a port that is not a number.
    pub fn new(listen: std::net::SocketAddr, public: &[String]) -> Result<Edge, String> {
        let ip = listen.ip().to_canonical();
        let mut local = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        if !ip.is_unspecified() {
            local.push(ip.to_string());
        }
        let public = public
            .iter()
            .map(|p| parse_public_host(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Edge {
            port: listen.port(),
            local,
            any_ip: ip.is_unspecified(),
            public,
        })
    }

    /// Whether byre serves `host` (a `Host` header's value, or an origin's authority).
    pub fn allows_host(&self, host: &str) -> bool {
        let Some((name, port)) = split_authority(host) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        // A bare public name is served on the web's default ports only: other ports of the
        // same name are other sites (tailscale serves each task's preview, a page the agent
        // wrote, on `https://NAME:PREVIEW_PORT`).
        let default_port = |p: Option<u16>| matches!(p, None | Some(80 | 443));
        if self.public.iter().any(|(n, p)| {
            *n == name
                && match p {
                    None => default_port(port),
                    Some(p) => port == Some(*p) || (port.is_none() && default_port(Some(*p))),
                }
        }) {
            return true;
        }
        if port != Some(self.port) {
            return false;
        }
        self.local.contains(&name) || (self.any_ip && name.parse::<std::net::IpAddr>().is_ok())
    }

    /// Whether `origin` (an `Origin` header, or the origin of a `Referer` URL) is one of
    /// byre's own: `http` or `https`, with an allowed host. The default port of the scheme is
    /// implied when none is given. On every address, an IP literal not in the list is the
    /// page's own only when it is the `request_host` the request itself went to: any machine
    /// can serve a page on some address with byre's port.
    pub fn allows_origin(&self, origin: &str, request_host: &str) -> bool {
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.is_empty() || authority.contains('@') {
            return false;
        }
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let candidates = match split_authority(authority) {
            Some((_, Some(_))) => vec![authority.to_owned()],
            Some((name, None)) => {
                let bracketed = if name.contains(':') {
                    format!("[{name}]")
                } else {
                    name.to_owned()
                };
                vec![format!("{bracketed}:{default_port}")]
            }
            None => return false,
        };
        candidates.iter().any(|c| {
            self.allows_named(c)
                || (self.allows_host(c) && same_authority(c, request_host, default_port))
        })
    }

    /// The allow-list of tailscale mode's Unix socket: the `--public-host` names (the tailnet
    /// name among them) and nothing else.
    pub fn for_serve_socket(&self) -> Edge {
        Edge {
            port: 0,
            local: Vec::new(),
            any_ip: false,
            public: self.public.clone(),
        }
    }

    /// [`Edge::allows_host`] without the "any IP literal" of listening on every address.
    fn allows_named(&self, host: &str) -> bool {
        Edge {
            any_ip: false,
            ..self.clone()
        }
        .allows_host(host)
    }
}

/// Whether two authorities name the same host and port (`default_port` when one has none).
fn same_authority(a: &str, b: &str, default_port: u16) -> bool {
    match (split_authority(a), split_authority(b)) {
        (Some((na, pa)), Some((nb, pb))) => {
            na.eq_ignore_ascii_case(nb) && pa.unwrap_or(default_port) == pb.unwrap_or(default_port)
        }
        _ => false,
    }
}

/// `NAME` or `NAME:PORT` of `--public-host`, lower-cased.
fn parse_public_host(text: &str) -> Result<(String, Option<u16>), String> {
    let bad = || {
        format!("--public-host takes a host name, optionally with :PORT (e.g. byre.tailnet.ts.net), not `{text}`")
    };
    if text.is_empty() || text.contains("://") || text.contains(['/', '@', ' ']) {
        return Err(bad());
    }
    let (name, port) = split_authority(text).ok_or_else(bad)?;
    if name.is_empty() {
        return Err(bad());
    }
    Ok((name.to_ascii_lowercase(), port))
}

/// Splits `host[:port]` (IPv6 in brackets) into the host (without brackets) and the port;
/// `None` when the port is not a number or the brackets do not close.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        return match after {
            "" => Some((ip, None)),
            _ => Some((ip, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match authority.rsplit_once(':') {
        // A bare IPv6 address without brackets is no valid Host.
        Some((name, _)) if name.contains(':') => None,
        Some((name, port)) => Some((name, Some(port.parse().ok()?))),
        None => Some((authority, None)),
    }
}

/// Why the edge refuses a request, as the answer's status and message.
fn refusal(status: StatusCode, message: String) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({ "message": message }))
}

/// Whether a content type is one a cross-site form or script may send without a preflight.
fn is_simple_content_type(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else {
        return true;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "" | "application/x-www-form-urlencoded" | "multipart/form-data" | "text/plain"
    )
}

/// The allow-list of tailscale mode's Unix socket (app data beside [`Edge`]).
#[derive(Debug, Clone)]
pub struct SocketEdge(pub Edge);

/// Checks one request against the edge; `Err` is the refusal to send instead (a response,
/// made only for a refused request, so its size costs nothing on the way through).
#[allow(clippy::result_large_err)]
fn check(edge: &Edge, req: &ServiceRequest) -> Result<(), HttpResponse> {
    let on_socket = req
        .conn_data::<crate::http::identity::ServeSocket>()
        .is_some();
    let edge = match req.app_data::<web::Data<SocketEdge>>() {
        Some(socket) if on_socket => &socket.0,
        _ => edge,
    };
    let headers = req.headers();
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // Two `Host`s (RFC 9112 §3.2: answer 400) would let byre check one while a proxy in
    // front, or a handler, reads the other.
    if headers.get_all(header::HOST).nth(1).is_some() {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "the request has more than one Host header".into(),
        ));
    }
    // HTTP/2 carries the authority in the URI; HTTP/1.1 in `Host`. On tailscale serve's
    // socket, the browser's `Host` is in `X-Forwarded-Host`.
    let forwarded = text("X-Forwarded-Host").filter(|_| on_socket);
    let host = forwarded
        .or_else(|| text(header::HOST.as_str()))
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
    let host = match host {
        Some(host) if edge.allows_host(&host) => host,
        Some(host) if on_socket => {
            return Err(refusal(
                StatusCode::MISDIRECTED_REQUEST,
                format!("byre does not serve the host `{host}` through tailscale serve: open it at the machine's tailnet name (or a name the operator gave with --public-host)"),
            ))
        }
        Some(host) => {
            return Err(refusal(
                StatusCode::MISDIRECTED_REQUEST,
                format!("byre does not serve the host `{host}`: open it at its own address (localhost, 127.0.0.1 or a name the operator gave with --public-host)"),
            ))
        }
        None => {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "the request has no Host header".into(),
            ))
        }
    };
    let raw_origin = text(header::ORIGIN.as_str());
    let site = text("Sec-Fetch-Site");
    // A WebSocket handshake is a GET, so no state-change rule below stops it, and browsers
    // send it to any site: its Origin must be byre's own. `null` is the origin of a sandboxed
    // frame, a `file://` or `data:` page — a page of any site that chose to hide which.
    // As loose as actix's handshake, which takes any `Upgrade` naming websocket.
    let socket = text(header::UPGRADE.as_str())
        .is_some_and(|u| u.to_ascii_lowercase().contains("websocket"));
    if socket {
        let opaque = raw_origin.is_some_and(|o| o.eq_ignore_ascii_case("null"));
        let other_site = matches!(site, Some("cross-site" | "same-site"));
        if opaque || other_site {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                format!(
                    "a socket from a page that is not byre's own (Origin: {}, Sec-Fetch-Site: {}) may not open",
                    raw_origin.unwrap_or("none"),
                    site.unwrap_or("none")
                ),
            ));
        }
    }
    let origin = raw_origin.filter(|o| !o.eq_ignore_ascii_case("null"));
    if let Some(origin) = origin {
        if !edge.allows_origin(origin, &host) {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                format!("a request from the page `{origin}`, another site, may not reach byre"),
            ));
        }
    }
    if !crate::http::identity::changes_state(req.method()) || *req.method() == Method::OPTIONS {
        return Ok(());
    }
    if !is_simple_content_type(text(header::CONTENT_TYPE.as_str())) {
        return Ok(());
    }
    let proven = origin.is_some()
        || text(header::REFERER.as_str()).is_some_and(|r| edge.allows_origin(r, &host))
        || text(CSRF_HEADER).is_some_and(|v| !v.is_empty())
        || text(header::AUTHORIZATION.as_str())
            .is_some_and(|a| a.len() > 7 && a[..7].eq_ignore_ascii_case("bearer "))
        || matches!(site, Some("same-origin" | "none"));
    if proven {
        Ok(())
    } else {
        Err(refusal(
            StatusCode::FORBIDDEN,
            format!("a {} without a JSON body must show it comes from byre itself: send the header `{CSRF_HEADER}` (byre's page sends it; any value, e.g. `{CSRF_HEADER}: 1`) or a bearer token", req.method()),
        ))
    }
}

/// The middleware: refuses what [`check`] refuses, before routing; passes the rest on.
pub async fn edge_guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let refused = match req.app_data::<web::Data<Edge>>() {
        Some(edge) => check(edge, &req).err(),
        None => Some(refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server's host allow-list is missing".into(),
        )),
    };
    if let Some(response) = refused {
        tracing::warn!(
            method = %req.method(),
            path = req.path(),
            status = response.status().as_u16(),
            "refused at the edge"
        );
        return Ok(req.into_response(response).map_into_right_body());
    }
    Ok(next.call(req).await?.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(listen: &str, public: &[&str]) -> Edge {
        let public: Vec<String> = public.iter().map(|s| s.to_string()).collect();
        Edge::new(listen.parse().expect("addr"), &public).expect("edge")
    }

    #[test]
    fn the_listen_address_and_loopback_names_with_the_listen_port_are_served() {
        let e = edge("127.0.0.1:7777", &[]);
        for host in [
            "127.0.0.1:7777",
            "localhost:7777",
            "LOCALHOST:7777",
            "[::1]:7777",
        ] {
            assert!(e.allows_host(host), "{host}");
        }
        for host in [
            "rebind.attacker.example:7777",
            "localhost:7778",
            "localhost",
            "127.0.0.1",
            "127.0.0.2:7777",
            "localhost.attacker.example:7777",
            "::1:7777",
            "[::1:7777",
            "localhost:77x",
            "",
        ] {
            assert!(!e.allows_host(host), "{host}");
        }
    }

    #[test]
    fn public_hosts_are_served_on_the_default_ports_or_the_given_one() {
        let e = edge(
            "127.0.0.1:7777",
            &["Byre.Tail1234.ts.net", "proxy.example:8443"],
        );
        assert!(e.allows_host("byre.tail1234.ts.net"));
        assert!(e.allows_host("byre.tail1234.ts.net:443"));
        // A task's preview on another port of the tailnet name is not byre.
        assert!(!e.allows_host("byre.tail1234.ts.net:5173"));
        assert!(!e.allows_origin("https://byre.tail1234.ts.net:5173", "byre.tail1234.ts.net"));
        assert!(e.allows_origin("https://byre.tail1234.ts.net", "byre.tail1234.ts.net"));
        assert!(e.allows_host("proxy.example:8443"));
        assert!(!e.allows_host("proxy.example"));
        assert!(!e.allows_host("proxy.example:443"));
        assert!(!e.allows_host("tail1234.ts.net"));
    }

    #[test]
    fn listening_on_every_address_serves_ip_literals_but_no_other_name() {
        let e = edge("0.0.0.0:7777", &[]);
        assert!(e.allows_host("192.0.2.7:7777"));
        assert!(e.allows_host("[2001:db8::1]:7777"));
        assert!(e.allows_host("localhost:7777"));
        assert!(!e.allows_host("192.0.2.7:80"));
        assert!(!e.allows_host("box.lan:7777"));
        // Another machine's page on byre's port is not byre's, only the address asked.
        assert!(!e.allows_origin("http://203.0.113.9:7777", "192.0.2.7:7777"));
        assert!(e.allows_origin("http://192.0.2.7:7777", "192.0.2.7:7777"));
        assert!(e.allows_origin("http://[2001:db8::1]:7777", "[2001:DB8::1]:7777"));
        assert!(e.allows_origin("http://localhost:7777", "192.0.2.7:7777"));
    }

    #[test]
    fn origins_must_be_http_or_https_on_an_allowed_host() {
        let e = edge("127.0.0.1:7777", &["byre.tail1234.ts.net"]);
        for origin in [
            "http://127.0.0.1:7777",
            "http://localhost:7777",
            "http://[::1]:7777",
            "https://byre.tail1234.ts.net",
            "http://localhost:7777/tasks/1?x=1",
        ] {
            assert!(e.allows_origin(origin, "127.0.0.1:7777"), "{origin}");
        }
        for origin in [
            "http://rebind.attacker.example:7777",
            "http://localhost:7778",
            "ws://localhost:7777",
            "localhost:7777",
            "http://",
            "http://user@localhost:7777",
            "null",
            "http://localhost",
        ] {
            assert!(!e.allows_origin(origin, "127.0.0.1:7777"), "{origin}");
        }
    }

    #[test]
    fn a_public_host_must_be_a_bare_name() {
        for bad in [
            "",
            "https://x.example",
            "x.example/path",
            "x.example:port",
            "a b",
        ] {
            assert!(
                Edge::new("127.0.0.1:1".parse().unwrap(), &[bad.to_owned()]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn simple_content_types_are_those_a_form_can_send() {
        assert!(is_simple_content_type(None));
        assert!(is_simple_content_type(Some("text/plain;charset=UTF-8")));
        assert!(is_simple_content_type(Some(
            "Application/X-WWW-Form-Urlencoded"
        )));
        assert!(is_simple_content_type(Some(
            "multipart/form-data; boundary=x"
        )));
        assert!(!is_simple_content_type(Some("application/json")));
        assert!(!is_simple_content_type(Some("image/png")));
    }
}
