//! The edge's deadlines and per-peer limits (docs/limits-http.md), attacked the way a slow or
//! hostile client would: bodies that never finish, sign-in guesses in a loop, one peer
//! opening connection after connection.

use std::collections::HashMap;
use std::time::Duration;

use byre::config::AuthMode;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{TestServer, TOKENS, WAIT};

fn team() -> AuthMode {
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    AuthMode::Token { tokens }
}

fn addr_of(server: &TestServer) -> String {
    server.url.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection (EOF, or a reset after its answer);
/// panics when it is still open after `within`.
async fn read_to_close(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the connection is still open after {within:?}"
    );
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_slow_signin_bodies_are_all_answered_408_and_closed_by_the_body_deadline() {
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), team(), |c| {
        c.body_timeout = Duration::from_secs(2);
        // Every body reaches the deadline, none the attempt limit.
        c.signin_attempts = 0;
    })
    .await;
    let addr = addr_of(&server);
    let mut clients = Vec::new();
    for i in 0..500 {
        let addr = addr.clone();
        clients.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.expect("connect");
            // Half of them declare a length, half send chunks: neither finishes.
            let head = if i % 2 == 0 {
                format!(
                    "POST /auth/signin HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                     X-Byre-CSRF: 1\r\nContent-Length: 64\r\n\r\n{{\"token\": \"aaaaaaaaaaaa"
                )
            } else {
                format!(
                    "POST /auth/signin HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                     X-Byre-CSRF: 1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{{\"token\": \"aaaaa\r\n"
                )
            };
            stream.write_all(head.as_bytes()).await.expect("send");
            let got = read_to_close(&mut stream, WAIT * 2).await;
            String::from_utf8_lossy(&got).into_owned()
        }));
    }
    let mut n_408 = 0;
    for (i, c) in clients.into_iter().enumerate() {
        let answer = c.await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "a slow body ({}) gets 408 before its connection closes: {answer:?}",
            if i % 2 == 0 { "sized" } else { "chunked" }
        );
        assert!(answer.contains("\"message\""), "{answer}");
        n_408 += 1;
    }
    assert_eq!(n_408, 500);
    // The server still answers.
    let me = server.api_as("ada").get_me().await;
    assert_eq!(me.status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_301st_signin_guess_in_the_window_gets_429_with_retry_after() {
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), team(), |c| {
        c.signin_attempts = 300;
        // Long enough that no attempt comes back while the test runs.
        c.signin_window = Duration::from_secs(24 * 3600);
    })
    .await;
    let client = reqwest::Client::new();
    let guess = |n: u32| {
        client
            .post(format!("{}/auth/signin", server.url))
            .header("X-Byre-CSRF", "1")
            .json(&serde_json::json!({ "token": format!("guess-{n:016}") }))
            .send()
    };
    for n in 0..300 {
        let r = guess(n).await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "guess {n} is judged");
    }
    let r = guess(300).await.unwrap();
    assert_eq!(r.status().as_u16(), 429);
    let retry: u64 = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!(retry >= 1, "{retry}");
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("too many sign-in attempts"),
        "{body}"
    );
    // Even the right token waits: the limit is on attempts, not on failures.
    let right = client
        .post(format!("{}/auth/signin", server.url))
        .header("X-Byre-CSRF", "1")
        .json(&serde_json::json!({ "token": TOKENS[0].0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(right.status().as_u16(), 429);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signin_body_over_4_kib_is_refused_413() {
    let server = TestServer::spawn_team().await;
    let r = reqwest::Client::new()
        .post(format!("{}/auth/signin", server.url))
        .header("X-Byre-CSRF", "1")
        .json(&serde_json::json!({ "token": "x".repeat(5000) }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_past_its_connection_cap_is_closed_as_it_connects() {
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), team(), |c| {
        // The tests' peer is loopback; its cap is the one to set.
        c.max_loopback_connections = 3;
    })
    .await;
    let addr = addr_of(&server);
    let request = format!("GET /api/openapi.yaml HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        // Answered on this connection, so it is counted before the next one is made.
        let mut buf = [0u8; 9];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 ");
        open.push(stream);
    }
    let mut fourth = TcpStream::connect(&addr).await.unwrap();
    let _ = fourth.write_all(request.as_bytes()).await;
    let got = read_to_close(&mut fourth, WAIT).await;
    assert!(
        got.is_empty(),
        "the fourth connection is closed unanswered: {:?}",
        String::from_utf8_lossy(&got)
    );
    drop(open);
    server.stop().await;
}
