//! `listWorkflows`, `getWorkflow`, `putWorkflow`, `deleteWorkflow`; runs of workflows in [`runs`].

mod crash;
mod refusals;
mod runs;

use serde_json::json;

use crate::helpers::TestServer;

const RELEASE: &str = "description: Plan, build, review
stages:
  - name: plan
    model: opus
    prompt: Write a plan.
  - name: build
    model: gpt-5.5
    prompt: Build it.
    base: main
  - name: review
    after: [plan, build]
    model: sonnet
    prompt: Review both.
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_round_trips_as_yaml_and_json() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let r = api
        .call_raw(
            "putWorkflow",
            &["release"],
            "application/yaml",
            RELEASE.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"name": "release", "description": "Plan, build, review"})
    );
    let got = api.call("getWorkflow", &["release"], &[], None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["content-type"], "application/yaml");
    assert!(got.headers["content-disposition"]
        .to_str()
        .unwrap()
        .contains("attachment; filename=\"release.yaml\""));
    let yaml = got.body.as_str().unwrap();
    let again: serde_json::Value = serde_norway::from_str(yaml).unwrap();
    let original: serde_json::Value = serde_norway::from_str(RELEASE).unwrap();
    assert_eq!(again, original, "the YAML holds the same definition");

    let as_json = json!({"stages": [{"name": "only", "model": "sonnet", "prompt": "go"}]});
    let r = api
        .call_raw(
            "putWorkflow",
            &["quick fix"],
            "application/json",
            as_json.to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["description"], "");
    let list = api.call("listWorkflows", &[], &[], None).await;
    assert_eq!(
        list.body,
        json!([{"name": "quick fix", "description": ""}, {"name": "release", "description": "Plan, build, review"}])
    );

    assert_eq!(
        api.call("deleteWorkflow", &["release"], &[], None)
            .await
            .status,
        204
    );
    assert_eq!(
        api.call("getWorkflow", &["release"], &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        api.call("deleteWorkflow", &["release"], &[], None)
            .await
            .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_workflow_refuses_bad_definitions_with_the_reason() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let stage =
        |name: &str, extra: &str| format!("  - name: {name}\n    model: m\n    prompt: p\n{extra}");
    let long_name = "x".repeat(101);
    let cases: Vec<(&str, String, String, &str)> = vec![
        ("not YAML", "w".into(), "stages: [".into(), "invalid"),
        (
            "no stages",
            "w".into(),
            "stages: []\n".into(),
            "at least one stage",
        ),
        (
            "missing model",
            "w".into(),
            "stages:\n  - name: a\n    prompt: p\n".into(),
            "model",
        ),
        (
            "unknown field",
            "w".into(),
            format!("stages:\n{}", stage("a", "    aftr: [b]\n")),
            "aftr",
        ),
        (
            "unknown after",
            "w".into(),
            format!("stages:\n{}", stage("a", "    after: [zz]\n")),
            "not a stage",
        ),
        (
            "duplicate stage",
            "w".into(),
            format!("stages:\n{}{}", stage("a", ""), stage("a", "")),
            "two stages",
        ),
        (
            "a cycle",
            "w".into(),
            format!(
                "stages:\n{}{}",
                stage("a", "    after: [b]\n"),
                stage("b", "")
            ),
            "cycle",
        ),
        (
            "base with two after",
            "w".into(),
            format!(
                "stages:\n{}{}{}",
                stage("a", "    after: []\n"),
                stage("b", "    after: []\n"),
                stage("c", "    after: [a, b]\n    base: parent\n")
            ),
            "base",
        ),
        (
            "bad base",
            "w".into(),
            format!("stages:\n{}", stage("a", "    base: elsewhere\n")),
            "base",
        ),
        (
            "two final stages",
            "w".into(),
            format!(
                "stages:\n{}{}{}",
                stage("a", ""),
                stage("b", "    after: [a]\n"),
                stage("c", "    after: [a]\n")
            ),
            "one final stage",
        ),
        (
            // A model no session accepts would make every run of it half-start: its first
            // stage's task made, then createTask refused when the agent's session is.
            "a model no session accepts",
            "w".into(),
            "stages:\n  - name: a\n    model: claude opus\n    prompt: p\n".into(),
            "model",
        ),
        (
            // Each stage with no after stages starts at once, with a worktree and an agent.
            "too many stages",
            "w".into(),
            format!(
                "stages:\n{}  - name: last\n    model: m\n    prompt: p\n    after: [{}]\n",
                (0..60)
                    .map(|i| stage(&format!("s{i}"), "    after: []\n"))
                    .collect::<String>(),
                (0..60)
                    .map(|i| format!("s{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "at most 50 stages",
        ),
        (
            "name too long",
            long_name,
            format!("stages:\n{}", stage("a", "")),
            "name",
        ),
    ];
    for (what, name, body, needle) in cases {
        let r = api
            .call_raw(
                "putWorkflow",
                &[&name],
                "application/yaml",
                body.into_bytes(),
            )
            .await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
        assert!(r.message().contains(needle), "{what}: {}", r.message());
    }
    assert_eq!(
        api.call("listWorkflows", &[], &[], None).await.body,
        json!([])
    );
}
