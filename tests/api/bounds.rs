//! DESIGN.md invariant 10 attacked from the agent's side: a model answering 24 MiB of text,
//! a thousand browsers replaying that log at once, an agent flooding its stderr, an output
//! line over the hard limit. byre runs as a child process where its memory is measured
//! (`/proc/<pid>/status`); the bounds asserted are correctness bounds, not timings
//! (docs/limits.md has the figures measured).

use std::time::Duration;

use byre_fake_models::{Conditions, FakeAnthropic, Reply, Script, Step, Times};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::{claude_bin, TURN_WAIT};
use crate::helpers::{local_ada, until_kind, Api, TestServer};
use crate::process::ServeProcess;

const MIB: u64 = 1024 * 1024;

/// A `VmRSS`/`VmHWM` figure of process `pid`, in bytes.
fn memory(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// Resets the peak (`VmHWM`) of process `pid` to its current RSS (Linux `clear_refs` 5), so
/// that the next peak read is the peak of what happens from now on.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
}

/// An executable shell script standing in for an agent CLI.
fn fake_agent(dir: &TempDir, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.path().join("fake-claude");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// 24 MiB of text, every line different (so a cut or a lost piece shows).
fn big_text() -> String {
    let mut text = String::with_capacity(24 * MIB as usize + 100);
    let mut i = 0u64;
    while (text.len() as u64) < 24 * MIB {
        text.push_str(&format!(
            "{i:08} the fake model's very long answer goes on\n"
        ));
        i += 1;
    }
    text.push_str("END");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_24_mib_model_text_is_cut_under_the_event_limit_and_a_thousand_replays_stay_bounded() {
    let big = big_text();
    let script = Script {
        steps: vec![Step {
            when: Conditions::default(),
            times: Times::Count(1),
            reply: Reply::text(&big),
        }],
        default_reply: Reply::text("ok"),
    };
    let fake = FakeAnthropic::start(script).await.unwrap();
    let bin = claude_bin().await;
    let data = TempDir::new().unwrap();
    let server = ServeProcess::start_with_env(
        data.path(),
        &[
            ("BYRE_CLAUDE_BIN", bin.to_str().unwrap()),
            ("ANTHROPIC_BASE_URL", fake.url.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-fake-key"),
            ("CLAUDE_CODE_MAX_RETRIES", "2"),
            // A small ring: the replays below read the log, not the live fan-out.
            ("BYRE_STREAM_BUFFER", "256KiB"),
        ],
    );
    let pid = server.child.id();
    let api = Api::for_url(&server.url);
    let (_repo, project_id) = api.basic_project().await;
    let before_turn = memory(pid, "VmRSS");
    reset_peak(pid);
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "big", "prompt": "answer at length"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let mut sse = api.events(&[("task_id", &task_id)], None).await;
    until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let turn_peak = memory(pid, "VmHWM");

    let events = api
        .call("listTaskEvents", &[&task_id], &[("limit", "1000")], None)
        .await;
    assert_eq!(events.status, 200);
    let events = events.body.as_array().unwrap().clone();
    for e in &events {
        let bytes = serde_json::to_string(&e["payload"]).unwrap().len() as u64;
        assert!(
            bytes <= MIB,
            "{} at seq {} has a payload of {bytes} bytes",
            e["kind"],
            e["seq"]
        );
    }
    let of_kind = |kind: &str| -> &Value {
        events
            .iter()
            .find(|e| e["kind"] == kind && e["payload"]["cut"].is_object())
            .unwrap_or_else(|| {
                panic!(
                    "no cut {kind}: {:?}",
                    crate::helpers::event_kinds(&Value::Array(events.clone()))
                )
            })
    };
    let client = reqwest::Client::new();
    for kind in ["agent.text", "turn.ended"] {
        let e = of_kind(kind);
        let p = &e["payload"];
        let field = if kind == "agent.text" {
            "text"
        } else {
            "result"
        };
        let shown = p[field].as_str().unwrap();
        let (start, marker) = shown.split_once("\n\n[… cut by byre").expect("a marker");
        assert!(big.starts_with(start), "{kind}: the start of the text");
        assert!(
            start.len() as u64 > MIB / 2,
            "{kind}: most of the limit is text"
        );
        assert!(marker.contains("the whole is blob"), "{marker}");
        assert!(
            p["raw"]
                .as_str()
                .unwrap()
                .starts_with("[byre did not keep this vendor line"),
            "{kind}: the raw line is dropped with its size"
        );
        assert_eq!(p["cut"]["size_bytes"], big.len() as u64);
        let blob = client
            .get(format!(
                "{}/api/blobs/{}",
                server.url,
                p["cut"]["blob_id"].as_str().unwrap()
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(blob.status().as_u16(), 200);
        assert_eq!(
            blob.headers()["content-type"],
            "text/plain; charset=utf-8",
            "served as text, never as a page"
        );
        assert_eq!(blob.headers()["x-content-type-options"], "nosniff");
        let bytes = blob.bytes().await.unwrap();
        assert!(
            bytes == big.as_bytes(),
            "{kind}: the blob is the whole text, byte for byte ({} bytes)",
            bytes.len()
        );
    }

    // A thousand browsers replay the log from the start at once, each to the turn's end.
    let last_seq = events.last().unwrap()["seq"].as_u64().unwrap();
    let n_readers = 1000;
    let rss_before_readers = memory(pid, "VmRSS");
    reset_peak(pid);
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let mut readers = Vec::new();
    for _ in 0..n_readers {
        readers.push(tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            // A receive window far smaller than a cut event, as a slow browser's: what the
            // stream has not delivered yet waits in byre, not in the kernel's buffers.
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(64 * 1024).unwrap();
            let mut stream = socket.connect(addr).await.unwrap();
            let request = format!(
                "GET /api/events?after=0 HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            let want = format!("id: {last_seq}\n");
            let (mut tail, mut n_bytes) = (Vec::<u8>::new(), 0usize);
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the stream ended before seq {last_seq}");
                n_bytes += n;
                tail.extend_from_slice(&buf[..n]);
                if tail.windows(want.len()).any(|w| w == want.as_bytes()) {
                    return n_bytes;
                }
                let keep = tail.len().saturating_sub(64);
                tail.drain(..keep);
            }
        }));
    }
    let mut n_bytes = 0;
    for r in readers {
        n_bytes += r.await.unwrap();
    }
    let readers_peak = memory(pid, "VmHWM");
    let log_bytes = n_bytes / n_readers;
    eprintln!(
        "24 MiB turn: RSS {} MiB before, peak {} MiB; {n_readers} replays of {} KiB each: RSS {} MiB before, peak {} MiB",
        before_turn / MIB,
        turn_peak / MIB,
        log_bytes / 1024,
        rss_before_readers / MIB,
        readers_peak / MIB
    );
    assert!(
        log_bytes as u64 > MIB,
        "each read the cut events ({log_bytes} bytes)"
    );
    assert!(
        readers_peak < 300 * MIB,
        "{n_readers} replays took byre to {} MiB",
        readers_peak / MIB
    );
    // The turn itself: a few copies of the 24 MiB line at most, never growing with it.
    assert!(
        turn_peak < before_turn + 400 * MIB,
        "the 24 MiB turn took byre from {} to {} MiB",
        before_turn / MIB,
        turn_peak / MIB
    );
    assert_eq!(server.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_writing_400_mb_to_stderr_moves_byres_memory_by_no_more_than_its_ring() {
    let dir = TempDir::new().unwrap();
    let agent = fake_agent(
        &dir,
        "head -c 400000000 /dev/zero | tr '\\0' 'e' >&2\necho >&2\necho 'fake agent: the last words' >&2\nexit 3",
    );
    let data = TempDir::new().unwrap();
    let server =
        ServeProcess::start_with_env(data.path(), &[("BYRE_CLAUDE_BIN", agent.to_str().unwrap())]);
    let pid = server.child.id();
    let api = Api::for_url(&server.url);
    let (_repo, project_id) = api.basic_project().await;
    let before = memory(pid, "VmRSS");
    reset_peak(pid);
    let task = api
        .create_task_with(&project_id, json!({"title": "noisy", "prompt": "hello"}))
        .await;
    let task_id = task["id"].as_str().unwrap();
    let mut sse = api.events(&[("task_id", task_id)], None).await;
    let seen = until_kind(&mut sse, "turn.ended", TURN_WAIT).await;
    let peak = memory(pid, "VmHWM");
    let exited = seen
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "session.process_exited")
        .expect("the agent's exit");
    let reason = exited.data["payload"]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("fake agent: the last words"),
        "the reason ends with the last of stderr: {reason}"
    );
    assert!(
        reason.len() < 4096,
        "only the tail is kept ({} bytes)",
        reason.len()
    );
    eprintln!(
        "400 MB on stderr: RSS {} MiB before, peak {} MiB",
        before / MIB,
        peak / MIB
    );
    // The ring is 2 KiB; the slack covers the task's own start (worktree, session, events).
    assert!(
        peak < before + 32 * MIB,
        "400 MB of stderr took byre from {} to {} MiB",
        before / MIB,
        peak / MIB
    );
    assert_eq!(server.terminate(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_line_over_the_hard_limit_ends_the_turn_with_an_error() {
    let dir = TempDir::new().unwrap();
    // Reads its message, then prints one 3 MB line and waits.
    let agent = fake_agent(
        &dir,
        "read line\nhead -c 3000000 /dev/zero | tr '\\0' 'x'\necho\nsleep 60",
    );
    let server = TestServer::spawn_configured(TempDir::new().unwrap(), local_ada(), move |c| {
        c.claude_bin = Some(agent);
        c.agents.output = byre_agents::OutputLimits {
            max_event_bytes: 1024 * 1024,
            max_line_bytes: 2 * 1024 * 1024,
        };
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "long line", "prompt": "hello"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap();
    let mut sse = api.events(&[("task_id", task_id)], None).await;
    let seen = until_kind(&mut sse, "turn.ended", Duration::from_secs(60)).await;
    let ended = &seen.last().unwrap().data["payload"];
    assert_eq!(ended["outcome"], "failed", "{ended}");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("output line of more than 2097152 bytes")
            && error.contains("--max-line-bytes"),
        "the turn's error says why: {error}"
    );
    assert!(
        seen.iter().all(|e| e.data["kind"] != "vendor.unrecognized"),
        "nothing of the line is recorded"
    );
    server.stop().await;
}
