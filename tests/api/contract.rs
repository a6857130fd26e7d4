//! The route table against the contract: every operationId is routed, and those built by
//! later issues answer 501 with a message.

use serde_json::json;

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

/// The catalogue's examples are real payloads: under each `` ### `kind` `` heading, every JSON
/// example decodes as that kind's current-format payload (and every kind has one), so the
/// page cannot drift from the event types. An example may stand for a shape only with `…`
/// in strings, never with fields that are not there.
#[test]
fn every_example_of_the_event_catalogue_decodes_as_its_kind() {
    let catalogue =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/events.md")).unwrap();
    let mut kind: Option<String> = None;
    let mut examples: std::collections::BTreeMap<String, usize> = Default::default();
    let mut failures = Vec::new();
    let mut block: Option<String> = None;
    for line in catalogue.lines() {
        if let Some(text) = block.as_mut() {
            if line.trim_start().starts_with("```") {
                let text = block.take().unwrap();
                if let Some(k) = &kind {
                    *examples.entry(k.clone()).or_default() += 1;
                    if let Err(e) = byre_projections::EventBody::from_parts(k, &text) {
                        failures.push(format!("{k}: {e}: {text}"));
                    }
                }
            } else {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        }
        if line.trim_start().starts_with("```json") {
            block = Some(String::new());
        } else if let Some(rest) = line.strip_prefix("### `") {
            kind = rest
                .strip_suffix('`')
                .filter(|k| byre_projections::EventBody::KINDS.contains(k))
                .map(str::to_owned);
        } else if line.starts_with("## ") || line.starts_with("### ") {
            kind = None;
        }
    }
    let without: Vec<&str> = byre_projections::EventBody::KINDS
        .iter()
        .copied()
        .filter(|k| !examples.contains_key(*k))
        .collect();
    assert!(
        failures.is_empty(),
        "examples that do not decode:\n{}",
        failures.join("\n")
    );
    assert!(
        without.is_empty(),
        "kinds without a JSON example in schema/events.md: {without:?}"
    );
}

/// A path of `template` with every parameter `x`.
fn fill(template: &str) -> String {
    template
        .split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// An error body: the contract's `Error`, its message returned.
async fn error_message(r: reqwest::Response) -> String {
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        ct.starts_with("application/json"),
        "an error is JSON, not {ct}"
    );
    let body: serde_json::Value = r.json().await.unwrap();
    Contract::get().check_schema("Error", &body).unwrap();
    body["message"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_the_contract_does_not_define_is_a_400_naming_it() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    // (operation, path parameters, a body that is right but for one misspelt field)
    let cases: Vec<(&str, Vec<&str>, serde_json::Value, &str)> = vec![
        (
            "createTask",
            vec![&project],
            json!({"title": "t", "promt": "hi"}),
            "promt",
        ),
        (
            "createProject",
            vec![],
            json!({"name": "n", "repo_path": "/x", "remote": "r"}),
            "remote",
        ),
        (
            "updateMe",
            vec![],
            json!({"git_name": "A", "git_email": "a@x", "mail": 1}),
            "mail",
        ),
        (
            "updateNotificationPrefs",
            vec![],
            json!({"questions": true, "reports": true, "errors": true, "rate_limits": true, "sound": true}),
            "sound",
        ),
        (
            "updateDefaultModel",
            vec![],
            json!({"model": "opus", "vendor": "x"}),
            "vendor",
        ),
        (
            "setFocus",
            vec![],
            json!({"tabs": [], "tab": "changes", "pane": 1}),
            "pane",
        ),
        (
            "setPaneFocus",
            vec![],
            json!({"focused": true, "drafting": false, "typing": true}),
            "typing",
        ),
        (
            "markSummaryRead",
            vec!["x"],
            json!({"seq": 1, "sq": 2}),
            "sq",
        ),
        (
            "createSession",
            vec!["x"],
            json!({"prompt": "p", "modle": "opus"}),
            "modle",
        ),
        (
            "sendMessage",
            vec!["x"],
            json!({"text": "t", "img": []}),
            "img",
        ),
        (
            "compactSession",
            vec!["x"],
            json!({"model": "opus", "why": "x"}),
            "why",
        ),
        (
            "respondInbox",
            vec![],
            json!({"responses": [{"item_id": "x", "type": "dismiss", "txt": "x"}]}),
            "txt",
        ),
        (
            "respondInbox",
            vec![],
            json!({"responses": [], "all": true}),
            "all",
        ),
        (
            "respondInbox",
            vec![],
            json!({"responses": [{"item_id": "x", "type": "other", "text": "see",
                "attachments": [{"kind": "file", "pth": "src/main.rs"}]}]}),
            "pth",
        ),
        (
            "mergeTask",
            vec!["x"],
            json!({"merge_title": "t", "squash": false}),
            "squash",
        ),
    ];
    for (op, params, body, field) in cases {
        let r = api.call(op, &params, &[], Some(body)).await;
        assert_eq!(r.status, 400, "{op}: {:?}", r.body);
        assert!(
            r.message().contains(&format!("unknown field `{field}`")),
            "{op}: the message names `{field}`: {}",
            r.message()
        );
    }
    let tasks = api.call("listTasks", &[&project], &[], None).await;
    assert_eq!(
        tasks.body,
        json!([]),
        "the misspelt createTask made no task"
    );
    // An attachment without the `kind` the contract requires is refused too.
    let r = api
        .call(
            "respondInbox",
            &[],
            &[],
            Some(json!({"responses": [{"item_id": "x", "type": "other", "attachments": [{"path": "a"}]}]})),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.message().contains("missing field `kind`"),
        "{}",
        r.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_for_an_optional_field_is_a_400_as_the_contract_types_it() {
    // The contract types these fields `string` (absent for none), not `nullable`: an explicit
    // null is a wrong type, refused before anything happens, as schemathesis checks.
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    let cases: Vec<(&str, Vec<&str>, serde_json::Value)> = vec![
        (
            "createTask",
            vec![&project],
            json!({"title": "t", "prompt": null}),
        ),
        (
            "createTask",
            vec![&project],
            json!({"title": "t", "model": null}),
        ),
        (
            "createTask",
            vec![&project],
            json!({"title": "t", "workflow": null}),
        ),
        (
            "startTodoItem",
            vec![&project],
            json!({"title": "t", "model": null}),
        ),
        (
            "setFocus",
            vec![],
            json!({"task_id": null, "tabs": [], "tab": "files"}),
        ),
        (
            "setFocus",
            vec![],
            json!({"project_id": null, "tabs": [], "tab": "files"}),
        ),
        (
            "createSession",
            vec!["x"],
            json!({"prompt": "p", "model": null}),
        ),
        (
            "sendMessage",
            vec!["x"],
            json!({"text": "t", "model": null}),
        ),
        ("messageLead", vec![], json!({"text": "t", "model": null})),
        ("compactSession", vec!["x"], json!({"model": null})),
        ("mergeTask", vec!["x"], json!({"merge_title": null})),
        (
            "mergeTask",
            vec!["x"],
            json!({"merge_title": "t", "target": null}),
        ),
        (
            "respondInbox",
            vec![],
            json!({"responses": [{"item_id": "x", "type": "other",
                "attachments": [{"kind": "file", "path": null}]}]}),
        ),
    ];
    for (op, params, body) in cases {
        let r = api.call(op, &params, &[], Some(body.clone())).await;
        assert_eq!(r.status, 400, "{op} {body}: {:?}", r.body);
        assert!(
            r.message().contains("invalid type: null"),
            "{op} {body}: {}",
            r.message()
        );
    }
    assert_eq!(
        api.call("listTasks", &[&project], &[], None).await.body,
        json!([]),
        "no null made a task"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_content_type_says_which_one_is_expected() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, project) = api.basic_project().await;
    let client = reqwest::Client::new();
    let body = json!({"title": "t"}).to_string();
    let yaml = "stages:\n  - name: s\n    model: m\n    prompt: p\n";
    for (op, params, ct, bytes, expected) in [
        (
            "createTask",
            vec![project.as_str()],
            Some("text/plain"),
            body.clone(),
            "application/json",
        ),
        (
            "createTask",
            vec![project.as_str()],
            None,
            body.clone(),
            "application/json",
        ),
        (
            "updateMe",
            vec![],
            Some("application/x-www-form-urlencoded"),
            "git_name=a".into(),
            "application/json",
        ),
        (
            "compactSession",
            vec!["x"],
            Some("text/plain"),
            "{}".into(),
            "application/json",
        ),
        (
            "putWorkflow",
            vec!["w"],
            Some("text/plain"),
            yaml.into(),
            "application/yaml",
        ),
        (
            "putWorkflow",
            vec!["w"],
            None,
            yaml.into(),
            "application/yaml",
        ),
    ] {
        let (method, url) = api.url(op, &params);
        let mut req = client
            .request(method, &url)
            .header("X-Byre-CSRF", "1")
            .body(bytes);
        if let Some(ct) = ct {
            req = req.header("Content-Type", ct);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{op} with {ct:?}");
        let message = error_message(r).await;
        assert!(message.contains(expected), "{op} with {ct:?}: {message}");
    }
    let tasks = api.call("listTasks", &[&project], &[], None).await;
    assert_eq!(tasks.body, json!([]));
    assert_eq!(
        api.call("listWorkflows", &[], &[], None).await.body,
        json!([])
    );
    // RFC 9110 allows spaces around the parameter's `;`: such a JSON body is read.
    let (method, url) = api.url("createTask", &[project.as_str()]);
    let r = client
        .request(method, &url)
        .header("Content-Type", "application/json ; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{:?}", r.text().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_its_limit_is_a_json_413_on_every_operation_that_takes_one() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let client = reqwest::Client::new();
    let mut checked = 0;
    for op in Contract::get().operation_ids() {
        let types = Contract::get().request_types(&op);
        let Some(ct) = types.first() else {
            continue;
        };
        let (method, template) = Contract::get().route(&op).unwrap();
        let url = format!("{}{}", api.base, fill(&template));
        let probe = client
            .request(method.parse().unwrap(), &url)
            .send()
            .await
            .unwrap();
        if probe.status().as_u16() == 501 {
            continue; // not built yet: it reads no body
        }
        if op == "putClientTransfer" {
            continue; // 1 GiB, counted while streamed, and only for a waiting transfer (404 here)
        }
        // Just over the operation's limit (images 5 MiB, workflow files 256 KiB, JSON 1 MiB).
        let limit = match ct.as_str() {
            t if t.starts_with("image/") => 5 * 1024 * 1024,
            "application/yaml" => 256 * 1024,
            _ => 1024 * 1024,
        };
        let mut bytes = b"{\"x\": \"".to_vec();
        bytes.resize(limit + 1, b'a');
        let r = client
            .request(method.parse().unwrap(), &url)
            .header("Content-Type", ct.as_str())
            .body(bytes)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let message = error_message(r).await;
        assert_eq!(status, 413, "{op} ({ct}): {message}");
        assert!(message.contains("limited to"), "{op}: {message}");
        checked += 1;
    }
    assert!(checked >= 15, "the built operations with a body: {checked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_the_path_does_not_have_is_a_405_with_allow() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let client = reqwest::Client::new();
    let mut by_path: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for op in Contract::get().operation_ids() {
        let (method, template) = Contract::get().route(&op).unwrap();
        by_path.entry(template).or_default().push(method);
    }
    for (template, methods) in by_path {
        let url = format!("{}{}", api.base, fill(&template));
        let other = ["PATCH", "DELETE", "PUT", "POST"]
            .into_iter()
            .find(|m| !methods.iter().any(|x| x == m))
            .unwrap();
        let r = client
            .request(other.parse().unwrap(), &url)
            // A non-browser client's proof for a body-less change (`http::edge`).
            .header("X-Byre-CSRF", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 405, "{other} {template}");
        let allow = r
            .headers()
            .get("allow")
            .unwrap_or_else(|| panic!("{other} {template}: no Allow"))
            .to_str()
            .unwrap()
            .to_owned();
        let mut got: Vec<&str> = allow.split(", ").collect();
        got.sort();
        let mut want: Vec<&str> = methods.iter().map(String::as_str).collect();
        want.sort();
        assert_eq!(got, want, "Allow of {template}");
        let message = error_message(r).await;
        assert!(message.contains(other), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_beyond_the_log_is_a_400_not_a_silent_skip() {
    let server = TestServer::spawn().await;
    let api = server.api();
    api.get_me().await;
    let head = api.call("getStatus", &[], &[], None).await.body["last_event_seq"]
        .as_u64()
        .unwrap();
    let client = reqwest::Client::new();
    let (_, url) = api.url("streamEvents", &[]);
    let ahead = (head + 5).to_string();
    for req in [
        client.get(&url).header("Last-Event-ID", ahead.as_str()),
        client.get(&url).query(&[("after", ahead.as_str())]),
    ] {
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 400);
        let message = error_message(r).await;
        assert!(
            message.contains(&format!("beyond the log's last seq {head}")),
            "{message}"
        );
    }
    // At the head itself: the stream opens and waits for the next event.
    let mut sse = api.events(&[], Some(head)).await;
    api.call(
        "updateDefaultModel",
        &[],
        &[],
        Some(json!({"model": "opus"})),
    )
    .await;
    let e = sse
        .next(crate::helpers::WAIT)
        .await
        .expect("the next event");
    assert_eq!(e.id, Some(head + 1));
}
