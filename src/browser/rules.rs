//! The browser's pure rules: which URLs a page may open, how an agent names an element, and
//! scroll directions.

/// A scroll direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Towards the top.
    Up,
    /// Towards the bottom.
    Down,
    /// Towards the left.
    Left,
    /// Towards the right.
    Right,
}

impl Direction {
    /// `up`, `down`, `left`, `right` (any case); anything else is `None`.
    pub fn parse(s: &str) -> Option<Direction> {
        match s.trim().to_ascii_lowercase().as_str() {
            "up" => Some(Direction::Up),
            "down" | "" => Some(Direction::Down),
            "left" => Some(Direction::Left),
            "right" => Some(Direction::Right),
            _ => None,
        }
    }
}

/// Whether `url` may be opened: `about:blank`, or an http(s) URL whose host is on `allow`
/// (an entry `host` allows every port, `host:port` (`[::1]:port`) that port), or a loopback
/// URL on one of `preview_ports`.
/// # Errors
/// The reason, for the agent.
pub fn allowed(
    url: &str,
    allow: &[String],
    preview_ports: std::ops::Range<u32>,
) -> Result<(), String> {
    if url == "about:blank" {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "byre's browser opens http and https URLs only, not `{}:`",
            parsed.scheme()
        ));
    }
    let host = parsed
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = parsed.port_or_known_default().unwrap_or(0);
    let on_list = allow.iter().any(|entry| {
        let (h, p) = split_entry(entry);
        h.eq_ignore_ascii_case(&host) && p.is_none_or(|p| p == port)
    });
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if on_list || (loopback && preview_ports.contains(&u32::from(port))) {
        return Ok(());
    }
    Err(format!(
        "`{url}` is not on byre's browser allow-list (hosts {}, and the task's preview ports {}-{} on loopback): byre's browser is for checking the task's own servers",
        allow.join(", "),
        preview_ports.start,
        preview_ports.end.saturating_sub(1)
    ))
}

/// An allow-list entry's host and port (`host`, `host:port`, `[v6]:port`, `v6`).
fn split_entry(entry: &str) -> (&str, Option<u16>) {
    let e = entry.trim();
    if let Some(rest) = e.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').unwrap_or((rest, ""));
        return (h, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match e.split_once(':') {
        Some((h, p)) if !p.contains(':') => (h, p.parse().ok()),
        _ => (e, None),
    }
}

/// The DOM element an agent names: a CSS selector when it looks like one (`#`, `.`, `[`,
/// a space or `>`), else an element `id`, else the `data-byre-id` [`Browsers::snapshot`]
/// gave it.
pub(super) fn selector_of(element: &str) -> String {
    let e = element.trim();
    if e.starts_with(['#', '.', '[']) || e.contains([' ', '>', ':']) {
        return e.to_owned();
    }
    let quoted = e.replace('\\', "\\\\").replace('"', "\\\"");
    format!("[id=\"{quoted}\"], [data-byre-id=\"{quoted}\"]")
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_ALLOW;
    use super::*;

    fn list() -> Vec<String> {
        DEFAULT_ALLOW.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn loopback_and_the_tasks_preview_ports_are_allowed_and_nothing_else() {
        let l = list();
        for ok in [
            "http://127.0.0.1:5000/x",
            "http://localhost/",
            "https://LOCALHOST:8443/a?b",
            "http://[::1]:9/",
            "about:blank",
            // Other spellings of loopback, as the URL standard (and Chromium) reads them.
            "http://0x7f000001/",
            "http://127.1/",
            "http://[0:0:0:0:0:0:0:1]/",
            "http://127.0.0.1\\@evil.com/",
            "HTTP://LocalHost/",
        ] {
            assert_eq!(allowed(ok, &l, 0..0), Ok(()), "{ok}");
        }
        for bad in [
            "http://example.com/",
            "https://10.0.0.1/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/html,hi",
            "http://127.0.0.2.nip.io/",
            "not a url",
            // Off the list in disguise.
            "http://127.0.0.1.evil.com/",
            "http://localhost@evil.com/",
            "http://localhost:80@evil.com/",
            "http://127.0.0.1%2eevil.com/",
            "http://[::ffff:7f00:1]/",
            "http://0.0.0.0/",
            "http://foo.localhost/",
            "http://localhost./",
            "ftp://localhost/",
            "view-source:http://localhost/",
            "about:blank#x",
            "about:srcdoc",
            "blob:http://localhost/1",
            "filesystem:http://localhost/temporary/x",
            "ws://localhost/",
        ] {
            assert!(allowed(bad, &l, 0..0).is_err(), "{bad}");
        }
        // A narrowed list: one port, plus the task's preview ports on loopback.
        let narrow = vec!["127.0.0.1:3000".to_owned(), "[::1]:4000".to_owned()];
        assert_eq!(allowed("http://127.0.0.1:3000/", &narrow, 0..0), Ok(()));
        assert!(allowed("http://127.0.0.1:3001/", &narrow, 0..0).is_err());
        assert_eq!(allowed("http://[::1]:4000/", &narrow, 0..0), Ok(()));
        assert_eq!(
            allowed("http://127.0.0.2:41005/", &narrow, 41000..41010),
            Ok(())
        );
        assert!(allowed("http://example.com:41005/", &narrow, 41000..41010).is_err());
    }

    #[test]
    fn an_element_is_an_id_or_a_selector() {
        assert_eq!(selector_of("#go"), "#go");
        assert_eq!(selector_of("form > button"), "form > button");
        assert_eq!(selector_of("go"), "[id=\"go\"], [data-byre-id=\"go\"]");
        assert_eq!(Direction::parse("UP"), Some(Direction::Up));
        assert_eq!(Direction::parse("sideways"), None);
    }
}
