//! A minimal HTTP/1.1 client over tokio's TcpStream: one request/response on a keep-alive
//! connection, and a chunked-transfer decoder for event streams. Enough for the bench; no
//! client library per connection.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Decodes `Transfer-Encoding: chunked` incrementally.
#[derive(Default)]
pub struct Dechunker {
    state: ChunkState,
    pending: Vec<u8>,
    /// Set when the terminating zero-size chunk was seen.
    pub done: bool,
}

#[derive(Default)]
enum ChunkState {
    #[default]
    Size,
    Data(usize),
    DataEnd,
}

impl Dechunker {
    /// Feeds raw bytes; calls `out` with each piece of decoded payload.
    pub fn feed(&mut self, mut input: &[u8], mut out: impl FnMut(&[u8])) -> anyhow::Result<()> {
        while !input.is_empty() && !self.done {
            match self.state {
                ChunkState::Size => {
                    if let Some(i) = input.iter().position(|&b| b == b'\n') {
                        self.pending.extend_from_slice(&input[..i]);
                        input = &input[i + 1..];
                        let line = std::str::from_utf8(&self.pending)?;
                        let hex = line.trim().split(';').next().unwrap_or("");
                        let size = usize::from_str_radix(hex, 16)
                            .map_err(|_| anyhow::anyhow!("bad chunk size line {line:?}"))?;
                        self.pending.clear();
                        if size == 0 {
                            self.done = true;
                        } else {
                            self.state = ChunkState::Data(size);
                        }
                    } else {
                        self.pending.extend_from_slice(input);
                        input = &[];
                    }
                }
                ChunkState::Data(need) => {
                    let n = need.min(input.len());
                    out(&input[..n]);
                    input = &input[n..];
                    self.state = if n == need {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(need - n)
                    };
                }
                ChunkState::DataEnd => {
                    // The CRLF after the chunk's data.
                    if let Some(i) = input.iter().position(|&b| b == b'\n') {
                        input = &input[i + 1..];
                        self.state = ChunkState::Size;
                    } else {
                        input = &[];
                    }
                }
            }
        }
        Ok(())
    }
}

/// A response's head.
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Whether the body is chunked.
    pub chunked: bool,
    /// Content-Length, if given.
    pub content_length: Option<usize>,
}

/// Reads a response head; returns it and whatever body bytes came with it.
pub async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> anyhow::Result<(Head, Vec<u8>)> {
    buf.clear();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "connection closed before the response head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..end])?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("bad status line {status_line:?}"))?;
    let mut chunked = false;
    let mut content_length = None;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k == "content-length" {
            content_length = v.parse().ok();
        }
    }
    let rest = buf[end + 4..].to_vec();
    Ok((
        Head {
            status,
            chunked,
            content_length,
        },
        rest,
    ))
}

/// Sends one request on a keep-alive connection and reads the whole response.
pub async fn request(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    json_body: Option<&str>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if let Some(b) = json_body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    stream.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    let (head, mut rest) = read_head(stream, &mut buf).await?;
    let mut chunk = [0u8; 8192];
    let body = if head.chunked {
        let mut d = Dechunker::default();
        let mut body = Vec::new();
        d.feed(&rest, |b| body.extend_from_slice(b))?;
        while !d.done {
            let n = stream.read(&mut chunk).await?;
            anyhow::ensure!(n > 0, "connection closed mid-body");
            d.feed(&chunk[..n], |b| body.extend_from_slice(b))?;
        }
        body
    } else {
        let len = head.content_length.unwrap_or(0);
        while rest.len() < len {
            let n = stream.read(&mut chunk).await?;
            anyhow::ensure!(n > 0, "connection closed mid-body");
            rest.extend_from_slice(&chunk[..n]);
        }
        rest
    };
    Ok((head.status, body))
}
