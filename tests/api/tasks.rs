//! `createTask`, `getTask`, `listTasks`, `listTaskEvents`, `listSessions`; the worktree reactor.

use serde_json::json;

use crate::helpers::{event_kinds, local_ada, make_repo, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_task_makes_its_branch_and_worktree_and_leaves_the_checkout_alone() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let repo = make_repo("basic");
    std::fs::write(repo.path().join("README.md"), "uncommitted edit\n").unwrap();
    let project = api.create_project("basic", repo.path()).await;
    let pid = project["id"].as_str().unwrap();
    let task = api.create_task(pid, "Fix the login page").await;

    let tid = task["id"].as_str().unwrap();
    assert_eq!(task["state"], "no_agent");
    assert_eq!(task["status"], "active");
    assert_eq!(task["merge_title"], "Fix the login page");
    assert_eq!(task["summary_seq"], 0);
    let worktree = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    assert_eq!(
        worktree,
        server.data.path().join("worktrees").join(pid).join(tid),
        "the path is a function of the ids"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("README.md")).unwrap(),
        "# basic\n\nA small repository the tests turn into a git repo.\n"
    );

    let git = git2::Repository::open(repo.path()).unwrap();
    let branch = task["branch"].as_str().unwrap();
    let id = task["id"].as_str().unwrap();
    assert_eq!(branch, format!("byre/{}/fix-the-login-page", &id[..8]));
    let tip = git
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .target()
        .unwrap();
    assert_eq!(tip.to_string(), task["base_ref"].as_str().unwrap());
    assert_eq!(
        git.head().unwrap().shorthand().unwrap(),
        "main",
        "the user's checkout stays on main"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("README.md")).unwrap(),
        "uncommitted edit\n",
        "uncommitted work is untouched"
    );

    let got = api.call("getTask", &[tid], &[], None).await;
    assert_eq!(got.body, task);
    let sessions = api.call("listSessions", &[tid], &[], None).await;
    assert_eq!(sessions.body, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_get_their_own_ports_and_colours_and_list_newest_first() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(api.create_task(&pid, &format!("task {i}")).await);
    }
    let ports: Vec<u64> = tasks
        .iter()
        .map(|t| t["port_base"].as_u64().unwrap())
        .collect();
    assert_eq!(ports, vec![20000, 20010, 20020]);
    let colours: std::collections::BTreeSet<u64> =
        tasks.iter().map(|t| t["color"].as_u64().unwrap()).collect();
    assert_eq!(colours.len(), 3, "no two active tasks share a colour");
    let list = api.call("listTasks", &[&pid], &[], None).await;
    let titles: Vec<&str> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, vec!["task 2", "task 1", "task 0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_task_refuses_bad_input() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let cases = [
        ("missing title", json!({}), 400),
        ("empty title", json!({"title": "  "}), 400),
        ("two-line title", json!({"title": "a\nb"}), 400),
        ("title not a string", json!({"title": ["x"]}), 400),
        (
            "prompt and workflow",
            json!({"title": "x", "prompt": "p", "workflow": "w"}),
            400,
        ),
        ("an empty prompt", json!({"title": "x", "prompt": " "}), 400),
        (
            "a malformed model",
            json!({"title": "x", "prompt": "do it", "model": "two words"}),
            400,
        ),
        (
            "an unknown image",
            json!({"title": "x", "prompt": "look", "images": ["no-such-blob"]}),
            400,
        ),
        (
            "an unknown workflow",
            json!({"title": "x", "workflow": "w"}),
            400,
        ),
    ];
    for (what, body, status) in cases {
        let r = api.call("createTask", &[&pid], &[], Some(body)).await;
        assert_eq!(r.status, status, "{what}: {:?}", r.body);
        assert!(!r.message().is_empty(), "{what}");
    }
    let r = api
        .call(
            "createTask",
            &["no-such-project"],
            &[],
            Some(json!({"title": "x"})),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        api.call("getTask", &["no-such-task"], &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        api.call("listTasks", &["no-such-project"], &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        api.call("listSessions", &["no-such-task"], &[], None)
            .await
            .status,
        404
    );
    let list = api.call("listTasks", &[&pid], &[], None).await;
    assert_eq!(
        list.body,
        json!([]),
        "no refused request left a task behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_removed_while_byre_was_down_is_made_again_at_start() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let task = api.create_task(&pid, "keep me").await;
    let worktree = std::path::PathBuf::from(task["worktree_path"].as_str().unwrap());
    let data = server.stop().await;
    std::fs::remove_dir_all(&worktree).unwrap();
    let server = TestServer::spawn_on(data, local_ada()).await;
    let mut waited = 0;
    while !worktree.join("README.md").exists() {
        assert!(waited < 300, "the worktree was not restored");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        waited += 1;
    }
    let got = server
        .api()
        .call("getTask", &[task["id"].as_str().unwrap()], &[], None)
        .await;
    assert_eq!(got.body, task, "the task is unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_task_events_pages_back_with_before_and_leaves_out_others_events() {
    let server = TestServer::spawn_team().await;
    let ada = server.api_as("ada");
    let bob = server.api_as("bob");
    let (_repo, pid) = ada.basic_project().await;
    let task = ada.create_task(&pid, "paged back").await;
    let tid = task["id"].as_str().unwrap();
    for _ in 0..3 {
        let r = ada
            .call(
                "setFocus",
                &[],
                &[],
                Some(json!({"task_id": tid, "tabs": [], "tab": "files"})),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let seqs = |body: &serde_json::Value| -> Vec<u64> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let all = seqs(&ada.call("listTaskEvents", &[tid], &[], None).await.body);
    assert_eq!(all.len(), 5, "created, worktree, three focus events");
    let end = i64::MAX.to_string(); // the largest int64 seq: from the end
    let last_two = ada
        .call(
            "listTaskEvents",
            &[tid],
            &[("before", &end), ("limit", "2")],
            None,
        )
        .await;
    assert_eq!(last_two.status, 200);
    assert_eq!(
        seqs(&last_two.body),
        all[3..].to_vec(),
        "the newest two, oldest first"
    );
    let before = all[3].to_string();
    let earlier = ada
        .call(
            "listTaskEvents",
            &[tid],
            &[("before", &before), ("limit", "2")],
            None,
        )
        .await;
    assert_eq!(seqs(&earlier.body), all[1..3].to_vec());
    let first = all[0].to_string();
    let none = ada
        .call("listTaskEvents", &[tid], &[("before", &first)], None)
        .await;
    assert_eq!(seqs(&none.body), Vec::<u64>::new());
    // bob's newest page skips ada's focus events and still fills up from earlier ones.
    let bobs = bob
        .call(
            "listTaskEvents",
            &[tid],
            &[("before", &end), ("limit", "2")],
            None,
        )
        .await;
    assert_eq!(seqs(&bobs.body), all[..2].to_vec());
    let both = ada
        .call(
            "listTaskEvents",
            &[tid],
            &[("before", "9"), ("after", "1")],
            None,
        )
        .await;
    assert_eq!(both.status, 400, "after and before together");
    let bad = ada
        .call("listTaskEvents", &[tid], &[("before", "x")], None)
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_task_events_pages_with_after_and_limit() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, pid) = api.basic_project().await;
    let task = api.create_task(&pid, "paged").await;
    let tid = task["id"].as_str().unwrap();
    for seq in 1..=3 {
        let _ = seq;
        let r = api
            .call(
                "setFocus",
                &[],
                &[],
                Some(json!({"task_id": tid, "tabs": [], "tab": "changes"})),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let all = api.call("listTaskEvents", &[tid], &[], None).await;
    let kinds = event_kinds(&all.body);
    assert_eq!(
        kinds,
        vec![
            "task.created",
            "task.worktree_created",
            "focus.updated",
            "focus.updated",
            "focus.updated"
        ]
    );
    let seqs: Vec<u64> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let page = api
        .call(
            "listTaskEvents",
            &[tid],
            &[("after", &seqs[0].to_string()), ("limit", "2")],
            None,
        )
        .await;
    let page_seqs: Vec<u64> = page
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(page_seqs, seqs[1..3].to_vec());
    let most = api
        .call("listTaskEvents", &[tid], &[("limit", "1000")], None)
        .await;
    assert_eq!(most.body, all.body, "limit 1000 is the contract's maximum");
    // Outside the contract's 1 to 1000, or beyond an int64 seq, is refused, not clamped.
    for bad in ["0", "1001", "-1", "x"] {
        let r = api
            .call("listTaskEvents", &[tid], &[("limit", bad)], None)
            .await;
        assert_eq!(r.status, 400, "limit={bad}");
    }
    for (name, bad) in [
        ("after", "-5"),
        ("after", "9223372036854775808"),
        ("before", "9223372036854775808"),
    ] {
        assert_eq!(
            api.call("listTaskEvents", &[tid], &[(name, bad)], None)
                .await
                .status,
            400,
            "{name}={bad}"
        );
    }
    assert_eq!(
        api.call("listTaskEvents", &["nope"], &[], None)
            .await
            .status,
        404
    );
}
