//! `GET /metrics` and `GET /api/openapi.yaml` (outside the contract; README "Operating byre"):
//! the figures follow what the server did, and both need the caller's identity.

use std::collections::HashMap;

use crate::helpers::TestServer;

/// The samples of a Prometheus text page: `name{labels}` → value (`# …` lines left out).
pub fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {l}"));
            (
                k.to_owned(),
                v.parse().unwrap_or_else(|_| panic!("bad value {l}")),
            )
        })
        .collect()
}

#[tokio::test]
async fn metrics_follow_appends_requests_and_projects() {
    let server = TestServer::spawn_team().await;
    let api = server.api_as("ada");
    let (status, ct, before) = api.get_path("/metrics").await;
    assert_eq!(status, 200);
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(before.trim_end().ends_with("# EOF"), "{before}");
    let b = samples(&before);
    assert_eq!(b["byre_projects"], 0.0);

    let (_repo, _project) = api.basic_project().await;
    let refused = api
        .call(
            "createProject",
            &[],
            &[],
            Some(serde_json::json!({"name": ""})),
        )
        .await;
    assert_eq!(refused.status, 400);

    let (_, _, after) = api.get_path("/metrics").await;
    let a = samples(&after);
    assert_eq!(a["byre_projects"], 1.0);
    let head = api.call("getStatus", &[], &[], None).await.body["last_event_seq"]
        .as_f64()
        .unwrap();
    assert_eq!(a["byre_last_event_seq"], head);
    assert!(
        a["byre_events_appended_total"] > b["byre_events_appended_total"],
        "{after}"
    );
    assert!(a["byre_group_commits_total"] >= 1.0, "{after}");
    assert!(a["byre_group_commit_seconds_count"] >= 1.0, "{after}");
    let created =
        "byre_http_requests_total{method=\"POST\",route=\"/api/projects\",status=\"201\"}";
    let bad = "byre_http_requests_total{method=\"POST\",route=\"/api/projects\",status=\"400\"}";
    assert_eq!(a.get(created), Some(&1.0), "{after}");
    assert_eq!(a.get(bad), Some(&1.0), "{after}");
    assert_eq!(
        a.get("byre_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"}"),
        Some(&1.0),
        "the first scrape is counted once it is answered: {after}"
    );
}

#[tokio::test]
async fn metrics_and_the_contract_need_identity_and_serve_the_contract_file() {
    let server = TestServer::spawn_team().await;
    let anonymous = server.api();
    let got = anonymous.get_path("/metrics").await;
    assert_eq!(got.0, 401, "{got:?}");
    assert_eq!(anonymous.get_path("/api/openapi.yaml").await.0, 401);
    let (status, ct, text) = server.api_as("bob").get_path("/api/openapi.yaml").await;
    assert_eq!(status, 200);
    assert_eq!(ct, "application/yaml");
    let file = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/byre.openapi.yaml"),
    )
    .unwrap();
    assert_eq!(text, file);
}

#[tokio::test]
async fn the_stream_buffer_gauges_are_its_bytes_held_and_the_serve_limit() {
    // A 32 KiB buffer: the limit gauge is that, whatever the ring holds; the held gauge is
    // the bytes of the events in the ring (each far more than one byte), not their count.
    let server = TestServer::spawn_with_stream_buffer(32 * 1024).await;
    let api = server.api();
    api.get_me().await;
    let (_repo, _project) = api.basic_project().await;
    let (_, _, text) = api.get_path("/metrics").await;
    let m = samples(&text);
    assert_eq!(m["byre_stream_buffer_limit_bytes"], 32.0 * 1024.0, "{text}");
    let held = m["byre_stream_buffer_bytes"];
    let head = m["byre_last_event_seq"];
    assert!(head >= 2.0, "{text}");
    assert!(
        held > 50.0 * head && held <= 32.0 * 1024.0,
        "the ring holds the {head} events' frames, in bytes, within its limit: {text}"
    );
}
