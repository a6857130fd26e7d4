//! Durability: kill -9 with concurrent writers; undecodable events stop start-up; one server
//! per data dir.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::helpers::{local_ada, TestServer};
use crate::process::{run_cli, ServeProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_kill_9_and_the_rebuild_verifies() {
    let data = tempfile::TempDir::new().unwrap();
    let server = ServeProcess::start(data.path());
    let client = reqwest::Client::new();
    let acked: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..8 {
        let (client, url, acked) = (client.clone(), server.url.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                let yaml = format!("stages:\n  - name: s\n    model: m\n    prompt: {name}\n");
                match client
                    .put(format!("{url}/api/workflows/{name}"))
                    .header("Content-Type", "application/yaml")
                    .body(yaml)
                    .send()
                    .await
                {
                    Ok(r) if r.status().as_u16() == 200 => {
                        acked.lock().unwrap().insert(name);
                    }
                    Ok(r) => panic!("unexpected status {}", r.status()),
                    Err(_) => return, // the server is gone
                }
            }
        }));
    }
    // Kill while the writers are mid-flight, once a good number of writes were acknowledged.
    while acked.lock().unwrap().len() < 300 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    server.kill_9();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    let server = ServeProcess::start(data.path());
    let list: Vec<serde_json::Value> = client
        .get(format!("{}/api/workflows", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stored: BTreeSet<String> = list
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect();
    let lost: Vec<&String> = acked.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");

    // The log is gapless, readable while the server runs, and its fold matches the server.
    let data_arg = data.path().to_str().unwrap();
    let (code, out, err) = run_cli(&["log", "--data", data_arg, "--json"]);
    assert_eq!(code, 0, "{err}");
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "gapless");
    // More writes on the restarted server, folded live; its graceful stop checkpoints them.
    for i in 0..5 {
        let yaml = "stages:\n  - name: s\n    model: m\n    prompt: after\n";
        let r = client
            .put(format!("{}/api/workflows/after-{i}", server.url))
            .header("Content-Type", "application/yaml")
            .body(yaml)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    assert_eq!(server.terminate(), Some(0), "graceful stop");
    let (code, out, err) = run_cli(&["rebuild", "--data", data_arg, "--verify"]);
    assert_eq!(code, 0, "rebuild --verify: {out}{err}");
    assert!(out.contains("verify      ok"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_event_stops_start_up_with_its_seq() {
    let data = tempfile::TempDir::new().unwrap();
    let server = ServeProcess::start(data.path());
    let client = reqwest::Client::new();
    client
        .get(format!("{}/api/me", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(server.terminate(), Some(0));

    // Append an event of a kind no build knows, as a newer (or broken) build might have.
    let path = data.path().join("byre.redb");
    {
        let db = redb::Database::builder()
            .set_concurrency_mode(redb::ConcurrencyMode::SingleWriter)
            .open(&path)
            .unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn
                .open_table(redb::TableDefinition::<u64, &[u8]>::new("events"))
                .unwrap();
            let stored = byre_log::store::StoredEvent {
                format: 1,
                seq: 2,
                created_at_us: 0,
                kind: "task.exploded".into(),
                project_id: None,
                task_id: None,
                agent_session_id: None,
                owner: None,
                actor: "someone".into(),
                payload: "{}".into(),
            };
            let bytes =
                bincode::serde::encode_to_vec(&stored, bincode::config::standard()).unwrap();
            table.insert(2, bytes.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let data_arg = data.path().to_str().unwrap();
    let out = std::process::Command::new(crate::process::byre_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data", data_arg])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("event 2 cannot be decoded") && stderr.contains("task.exploded"),
        "{stderr}"
    );
    let (code, _, err) = run_cli(&["rebuild", "--data", data_arg]);
    assert_ne!(code, 0);
    assert!(err.contains("event 2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_per_data_dir_and_a_restart_takes_the_lock_its_predecessor_left() {
    let first = TestServer::spawn().await;
    let second = byre::startup::run(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        byre::config::Config::new(first.data.path().to_owned(), local_ada()),
    )
    .await;
    let err = second
        .err()
        .expect("a second server on the same data dir is refused");
    assert!(
        err.to_string()
            .contains("another byre server is using the data dir"),
        "{err:#}"
    );
    // The first server still serves, its log untouched by the refused one.
    assert_eq!(first.api().get_me().await.status, 200);
    let data = first.stop().await;
    // A stopped server's lock may outlive it for a moment (a process forked just before it
    // closed the file holds a copy until it execs): the next start waits for it.
    // This test plays such a straggler, once the server's own copy (and any other test's
    // fork of this process, which holds one in the same way) has let go.
    let straggler = std::fs::File::open(data.path().join("byre.lock")).unwrap();
    let mut tries = 0;
    while let Err(e) = straggler.try_lock() {
        tries += 1;
        assert!(tries < 200, "the stopped server released its lock: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(straggler);
    });
    let again = TestServer::spawn_on(data, local_ada()).await;
    release.join().unwrap();
    assert_eq!(again.api().get_me().await.status, 200);
}
