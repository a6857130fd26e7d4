//! Logs written by older builds open in this one (DESIGN.md invariant 3).

use crate::helpers::{local_ada, TestServer};
use crate::process::run_cli;

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/logs");
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "redb"))
        .collect();
    logs.sort();
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_old_log_folds_to_its_recorded_digest_and_serves() {
    let logs = fixtures();
    assert!(!logs.is_empty(), "fixtures/logs holds at least one log");
    for log in logs {
        let data = tempfile::TempDir::new().unwrap();
        std::fs::copy(&log, data.path().join("byre.redb")).unwrap();
        let digests = std::fs::read_to_string(log.with_extension("digest")).unwrap();
        let version = byre_projections::digest::DIGEST_VERSION.to_string();
        let expected = digests
            .lines()
            .find_map(|l| {
                l.split_once(' ')
                    .filter(|(v, _)| *v == version)
                    .map(|(_, d)| d.to_owned())
            })
            .unwrap_or_else(|| panic!("{}: no digest for digest version {version}", log.display()));
        let (code, out, err) = run_cli(&["rebuild", "--data", data.path().to_str().unwrap()]);
        assert_eq!(code, 0, "{}: {err}", log.display());
        assert!(
            out.contains(&format!("digest      {expected}")),
            "{}: {out}",
            log.display()
        );

        let server = TestServer::spawn_on(data, local_ada()).await;
        let api = server.api();
        let projects = api.call("listProjects", &[], &[], None).await;
        assert_eq!(projects.status, 200);
        assert!(
            !projects.body.as_array().unwrap().is_empty(),
            "{}",
            log.display()
        );
        for p in projects.body.as_array().unwrap() {
            let tasks = api
                .call("listTasks", &[p["id"].as_str().unwrap()], &[], None)
                .await;
            assert_eq!(tasks.status, 200);
        }
        server.stop().await;
    }
}
