//! `getMe`, `updateMe`, `updateNotificationPrefs`, `updateDefaultModel`, focus, summary reads.

use serde_json::json;

use crate::helpers::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_of_a_login_creates_its_user() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let me = api.get_me().await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["login"], "ada");
    assert_eq!(me.body["git_name"], "");
    assert_eq!(
        me.body["notification_prefs"],
        json!({"questions": true, "reports": true, "errors": true, "rate_limits": true})
    );
    let mut sse = api.events(&[], None).await;
    let first = sse.next(crate::helpers::WAIT).await.unwrap();
    assert_eq!(first.data["kind"], "user.created");
    api.get_me().await;
    let status = api.call("getStatus", &[], &[], None).await;
    assert_eq!(
        status.body["last_event_seq"], 1,
        "a known login records nothing more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_me_sets_the_git_identity_and_refuses_bad_ones() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let r = api
        .call(
            "updateMe",
            &[],
            &[],
            Some(json!({"git_name": "Ada Lovelace", "git_email": "ada@example.com"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["git_name"], "Ada Lovelace");
    assert_eq!(api.get_me().await.body["git_email"], "ada@example.com");
    let cases = [
        ("missing email", json!({"git_name": "A"})),
        (
            "not an email",
            json!({"git_name": "A", "git_email": "nope"}),
        ),
        (
            "newline in name",
            json!({"git_name": "A\nB", "git_email": "a@b.c"}),
        ),
        (
            "angle brackets",
            json!({"git_name": "A <x>", "git_email": "a@b.c"}),
        ),
        ("wrong type", json!({"git_name": 1, "git_email": "a@b.c"})),
    ];
    for (what, body) in cases {
        let r = api.call("updateMe", &[], &[], Some(body)).await;
        assert_eq!(r.status, 400, "{what}");
    }
    assert_eq!(
        api.get_me().await.body["git_name"],
        "Ada Lovelace",
        "refusals changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notification_prefs_and_default_model_are_stored() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let prefs = json!({"questions": false, "reports": true, "errors": false, "rate_limits": true});
    let r = api
        .call("updateNotificationPrefs", &[], &[], Some(prefs.clone()))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["notification_prefs"], prefs);
    assert_eq!(
        api.call(
            "updateNotificationPrefs",
            &[],
            &[],
            Some(json!({"questions": true}))
        )
        .await
        .status,
        400
    );
    let r = api
        .call(
            "updateDefaultModel",
            &[],
            &[],
            Some(json!({"model": "gpt-5.5"})),
        )
        .await;
    assert_eq!(r.body["default_model"], "gpt-5.5");
    for bad in [
        json!({"model": ""}),
        json!({"model": "two words"}),
        json!({}),
    ] {
        assert_eq!(
            api.call("updateDefaultModel", &[], &[], Some(bad))
                .await
                .status,
            400
        );
    }
    assert_eq!(api.get_me().await.body["default_model"], "gpt-5.5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn focus_and_summary_reads_are_checked_and_stored() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let task = api.create_task(&pid, "t").await;
    let tid = task["id"].as_str().unwrap();
    let r = api
        .call(
            "setFocus",
            &[],
            &[],
            Some(json!({"task_id": tid, "tabs": ["terminal", "changes"], "tab": "terminal"})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        json!({"project_id": pid, "task_id": tid, "tabs": ["terminal", "changes"], "tab": "terminal"})
    );
    assert_eq!(api.call("getFocus", &[], &[], None).await.body, r.body);
    let cases = [
        (json!({"task_id": "nope", "tabs": [], "tab": "files"}), 404),
        (
            json!({"project_id": "nope", "tabs": [], "tab": "files"}),
            404,
        ),
        (json!({"tabs": [], "tab": "nonsense"}), 400),
        (json!({"tabs": ["files", "files"], "tab": "files"}), 400),
        (json!({"tab": "files"}), 400),
    ];
    for (body, status) in cases {
        assert_eq!(
            api.call("setFocus", &[], &[], Some(body.clone()))
                .await
                .status,
            status,
            "{body}"
        );
    }
    assert_eq!(
        api.call(
            "setPaneFocus",
            &[],
            &[],
            Some(json!({"focused": true, "drafting": false}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        api.call("setPaneFocus", &[], &[], Some(json!({"focused": true})))
            .await
            .status,
        400
    );

    let r = api
        .call("markSummaryRead", &[tid], &[], Some(json!({"seq": 3})))
        .await;
    assert_eq!(r.status, 204);
    let reads = api.call("getSummaryReads", &[], &[], None).await;
    assert_eq!(reads.body, json!({ tid: 3 }));
    assert_eq!(
        api.call("markSummaryRead", &[tid], &[], Some(json!({"seq": 2})))
            .await
            .status,
        204
    );
    assert_eq!(
        api.call("getSummaryReads", &[], &[], None).await.body,
        json!({ tid: 3 }),
        "a lower seq changes nothing"
    );
    assert_eq!(
        api.call("markSummaryRead", &[tid], &[], Some(json!({"seq": 999999})))
            .await
            .status,
        400
    );
    assert_eq!(
        api.call("markSummaryRead", &["nope"], &[], Some(json!({"seq": 1})))
            .await
            .status,
        404
    );
}
