//! Projection snapshots (`src/log/snapshot.rs`, issue 19 item 1): a restarted server folds only
//! the events after the latest snapshot and ends where a fold from seq 1 ends; a snapshot that
//! is damaged, of an older format or made by another build is ignored, never an error.

use std::path::Path;

use serde_json::Value;

use crate::helpers::{local_ada, make_repo, TestServer};
use crate::metrics::samples;
use crate::process::run_cli;

/// The snapshot file beside the log.
fn snapshot_file(data: &Path) -> std::path::PathBuf {
    data.join("byre.snapshot")
}

/// A snapshot file's two header lines (the format line, the JSON header) and its body.
fn parts(bytes: &[u8]) -> (String, Value, Vec<u8>) {
    let first = bytes.iter().position(|b| *b == b'\n').unwrap();
    let second = first + 1 + bytes[first + 1..].iter().position(|b| *b == b'\n').unwrap();
    (
        String::from_utf8(bytes[..first].to_vec()).unwrap(),
        serde_json::from_slice(&bytes[first + 1..second]).unwrap(),
        bytes[second + 1..].to_vec(),
    )
}

fn assemble(first: &str, header: &Value, body: &[u8]) -> Vec<u8> {
    let mut out = format!("{first}\n{header}\n").into_bytes();
    out.extend_from_slice(body);
    out
}

/// The seq a snapshot file covers.
fn snapshot_seq(data: &Path) -> u64 {
    let bytes = std::fs::read(snapshot_file(data)).expect("a snapshot after a graceful stop");
    parts(&bytes).1["seq"].as_u64().unwrap()
}

/// (`byre_startup_snapshot_seq`, `byre_startup_events_folded`, `getStatus.last_event_seq`).
async fn startup_figures(server: &TestServer) -> (u64, u64, u64) {
    let api = server.api();
    let (status, _, text) = api.get_path("/metrics").await;
    assert_eq!(status, 200, "{text}");
    let m = samples(&text);
    let head = api.call("getStatus", &[], &[], None).await.body["last_event_seq"]
        .as_u64()
        .unwrap();
    (
        m["byre_startup_snapshot_seq"] as u64,
        m["byre_startup_events_folded"] as u64,
        head,
    )
}

async fn project_names(server: &TestServer) -> Vec<String> {
    let projects = server.api().call("listProjects", &[], &[], None).await;
    assert_eq!(projects.status, 200);
    projects
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_folds_only_the_events_after_the_snapshot_and_ends_where_a_full_fold_ends() {
    let first = TestServer::spawn().await;
    let (before, folded, _) = startup_figures(&first).await;
    assert_eq!((before, folded), (0, 0), "a new log has no snapshot");
    let repo_a = make_repo("basic");
    first.api().create_project("early", repo_a.path()).await;
    let data = first.stop().await;
    let s1 = snapshot_seq(data.path());
    assert!(s1 > 0);
    let old_snapshot = std::fs::read(snapshot_file(data.path())).unwrap();

    // A second life on the same log: it starts from the snapshot, then adds events.
    let second = TestServer::spawn_on(data, local_ada()).await;
    let (from, folded, head) = startup_figures(&second).await;
    assert_eq!(
        (from, folded, head),
        (s1, 0, s1),
        "nothing after the snapshot"
    );
    let repo_b = make_repo("basic");
    second.api().create_project("late", repo_b.path()).await;
    let data = second.stop().await;
    let s2 = snapshot_seq(data.path());
    assert!(s2 > s1, "the second life appended events: {s1} → {s2}");

    // Back to the first snapshot, as if the second life had died before writing one.
    std::fs::write(snapshot_file(data.path()), &old_snapshot).unwrap();
    let third = TestServer::spawn_on(data, local_ada()).await;
    let (from, folded, head) = startup_figures(&third).await;
    assert_eq!(from, s1, "start-up began from the first snapshot");
    assert_eq!(folded, s2 - s1, "and folded only the events after it");
    assert!(head >= s2);
    let names = project_names(&third).await;
    assert!(
        names.contains(&"early".to_owned()) && names.contains(&"late".to_owned()),
        "the snapshot's project and the tail's: {names:?}"
    );
    let data = third.stop().await;

    // The third server's checkpoint is the digest of its state (snapshot + tail, and what it
    // did since); its snapshot its whole state: both must equal a fold from seq 1.
    let d = data.path().to_str().unwrap();
    let (code, out, err) = run_cli(&["rebuild", "--data", d, "--verify"]);
    assert_eq!(code, 0, "{out}{err}");
    let last = snapshot_seq(data.path());
    assert!(
        out.contains(&format!(
            "verify      ok: the fold up to seq {last} matches the server's checkpoint"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "snapshot    ok: the fold up to seq {last} equals the projection snapshot"
        )),
        "{out}"
    );
}

/// A change to a valid snapshot file that makes start-up ignore it.
type Damage = fn(&[u8]) -> Vec<u8>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_old_or_foreign_snapshot_is_ignored_and_the_log_folds_from_seq_1() {
    let server = TestServer::spawn().await;
    let repo = make_repo("basic");
    server.api().create_project("kept", repo.path()).await;
    let mut data = server.stop().await;

    let cases: [(&str, Damage, &str); 6] = [
        (
            "cut in half",
            |b| b[..b.len() / 2].to_vec(),
            "not used by start-up (it is damaged",
        ),
        (
            "one byte of the state changed",
            |b| {
                let (first, header, mut body) = parts(b);
                let at = body.len() / 2;
                body[at] ^= 0x20;
                assemble(&first, &header, &body)
            },
            "the state's digest does not match",
        ),
        (
            "an older format",
            |b| {
                let (_, header, body) = parts(b);
                assemble("BYRESNAP 0", &header, &body)
            },
            "not a snapshot of format 1",
        ),
        (
            "made by a build whose fold differs",
            |b| {
                let (first, mut header, body) = parts(b);
                header["fingerprint"] = "0123456789abcdef".into();
                assemble(&first, &header, &body)
            },
            "made by another build (fold fingerprint 0123456789abcdef",
        ),
        (
            "claiming a seq the log does not hold",
            |b| {
                let (first, mut header, body) = parts(b);
                header["seq"] = 1_000_000.into();
                assemble(&first, &header, &body)
            },
            "damaged: the header says seq 1000000",
        ),
        (
            "not a snapshot at all",
            |_| b"{}".to_vec(),
            "not a snapshot",
        ),
    ];
    for (what, damage, reason) in cases {
        let valid = std::fs::read(snapshot_file(data.path())).unwrap();
        data = expect_ignored(data, Some(&damage(&valid)), what, reason).await;
    }

    // Not a regular file: reading a FIFO waits for a writer for ever (start-up hung), and a
    // device such as /dev/zero never ends.
    let path = snapshot_file(data.path());
    std::fs::remove_file(&path).unwrap();
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    data = expect_ignored(
        data,
        None,
        "a FIFO",
        "it is damaged: it is not a regular file",
    )
    .await;

    // A valid snapshot of another log: the checkpoints do not vouch for it.
    let other = TestServer::spawn().await;
    let other_repos = [make_repo("basic"), make_repo("basic")];
    for (name, repo) in ["other", "another"].iter().zip(&other_repos) {
        other.api().create_project(name, repo.path()).await;
    }
    let other_data = other.stop().await;
    let foreign = std::fs::read(snapshot_file(other_data.path())).unwrap();
    expect_ignored(
        data,
        Some(&foreign),
        "another log's snapshot",
        "does not belong to this log",
    )
    .await;
}

/// Writes `bytes` as the snapshot of the log in `data` (`None`: the test has put something
/// there itself), then checks that `byre rebuild --verify`
/// says start-up will not use it (giving `reason`) and that a server started there folds every
/// event from seq 1 and serves the log's one project; gives the data dir back after the
/// server's graceful stop, which leaves a valid snapshot.
async fn expect_ignored(
    data: tempfile::TempDir,
    bytes: Option<&[u8]>,
    what: &str,
    reason: &str,
) -> tempfile::TempDir {
    if let Some(bytes) = bytes {
        std::fs::write(snapshot_file(data.path()), bytes).unwrap();
    }
    let d = data.path().to_str().unwrap().to_owned();
    let (code, out, err) = run_cli(&["rebuild", "--data", &d, "--verify"]);
    assert_eq!(code, 0, "{what}: {out}{err}");
    assert!(
        out.contains("snapshot    not used by start-up") && out.contains(reason),
        "{what}: {out}"
    );

    let server = TestServer::spawn_on(data, local_ada()).await;
    let (from, folded, head) = startup_figures(&server).await;
    assert_eq!(from, 0, "{what}: the snapshot was ignored");
    assert_eq!(folded, head, "{what}: every event was folded");
    assert_eq!(project_names(&server).await, ["kept"], "{what}");
    let data = server.stop().await;
    let (code, out, _) = run_cli(&["rebuild", "--data", &d, "--verify"]);
    assert_eq!(code, 0, "{what}: {out}");
    assert!(
        out.contains("snapshot    ok"),
        "{what}: after the stop: {out}"
    );
    data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_snapshot_a_killed_server_left_is_removed_at_start_up() {
    // A server killed while writing a snapshot leaves `byre.snapshot.tmp`; a start that uses
    // the finished snapshot (and a stop with nothing new to write) never wrote over it.
    let server = TestServer::spawn().await;
    let repo = make_repo("basic");
    server.api().create_project("kept", repo.path()).await;
    let data = server.stop().await;
    let s1 = snapshot_seq(data.path());
    let tmp = data.path().join("byre.snapshot.tmp");
    let whole = std::fs::read(snapshot_file(data.path())).unwrap();
    std::fs::write(&tmp, &whole[..whole.len() / 2]).unwrap();

    let again = TestServer::spawn_on(data, local_ada()).await;
    assert!(
        !tmp.exists(),
        "the leftover is gone once the server holds the data dir"
    );
    let (from, folded, head) = startup_figures(&again).await;
    assert_eq!(
        (from, folded, head),
        (s1, 0, s1),
        "the finished snapshot was used"
    );
    assert_eq!(project_names(&again).await, vec!["kept".to_owned()]);
    let data = again.stop().await;
    assert!(!data.path().join("byre.snapshot.tmp").exists());
}
