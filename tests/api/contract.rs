//! The route table against the contract: every operationId is routed, and those built by
//! later issues answer 501 with a message.

use crate::helpers::TestServer;
use crate::schema::Contract;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_of_the_contract_has_a_route() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let client = reqwest::Client::new();
    let ops = Contract::get().operation_ids();
    assert_eq!(ops.len(), 64);
    for op in ops {
        if op == "streamEvents" {
            continue;
        }
        let (method, template) = Contract::get().route(&op).unwrap();
        let path = template
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let r = client
            .request(method.parse().unwrap(), format!("{}{}", api.base, path))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap_or(serde_json::Value::Null);
        assert!(
            !body["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("no route"),
            "{op}: {method} {path} is not routed"
        );
        if status == 501 {
            assert!(
                body["message"].as_str().unwrap_or("").contains(&op),
                "{op}: 501 names the operation"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_with_a_message() {
    let server = TestServer::spawn().await;
    let r = reqwest::get(format!("{}/api/nothing-here", server.url))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("/api/nothing-here"));
}

#[test]
fn every_event_kind_is_in_the_catalogue() {
    let catalogue =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/events.md")).unwrap();
    let missing: Vec<&str> = byre_projections::EventBody::KINDS
        .iter()
        .copied()
        .filter(|k| !catalogue.contains(&format!("### `{k}`")))
        .collect();
    assert!(missing.is_empty(), "schema/events.md lacks {missing:?}");
}
