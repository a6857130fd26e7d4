//! `createProject`, `getProject`, `listProjects`.

use serde_json::json;

use crate::helpers::{canonical, make_repo, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_project_detects_the_default_branch_and_remote() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let repo = make_repo("basic");
    {
        let r = git2::Repository::open(repo.path()).unwrap();
        r.remote("origin", "https://example.com/team/basic.git")
            .unwrap();
    }
    let project = api.create_project("basic", repo.path()).await;
    assert_eq!(project["default_branch"], "main");
    assert_eq!(project["remote"], "https://example.com/team/basic.git");
    assert_eq!(project["repo_path"], canonical(repo.path()));
    assert_eq!(project["created_by"], "ada");

    let id = project["id"].as_str().unwrap();
    let got = api.call("getProject", &[id], &[], None).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, project);
    let list = api.call("listProjects", &[], &[], None).await;
    assert_eq!(list.body, json!([project]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_project_returns_400_for_bad_input() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let repo = make_repo("basic");
    let not_a_repo = tempfile::TempDir::new().unwrap();
    let empty_repo = tempfile::TempDir::new().unwrap();
    git2::Repository::init(empty_repo.path()).unwrap();
    std::fs::create_dir_all(repo.path().join("src")).unwrap();
    let sub = repo.path().join("src");
    let cases = [
        ("missing name", json!({"repo_path": repo.path()})),
        ("missing repo_path", json!({"name": "x"})),
        (
            "name is not a string",
            json!({"name": 5, "repo_path": repo.path()}),
        ),
        ("empty name", json!({"name": "", "repo_path": repo.path()})),
        (
            "two-line name",
            json!({"name": "a\nb", "repo_path": repo.path()}),
        ),
        (
            "relative path",
            json!({"name": "x", "repo_path": "some/where"}),
        ),
        (
            "path does not exist",
            json!({"name": "x", "repo_path": "/no/such/dir/anywhere"}),
        ),
        (
            "not a repository",
            json!({"name": "x", "repo_path": not_a_repo.path()}),
        ),
        (
            "a subdirectory of a repository",
            json!({"name": "x", "repo_path": sub}),
        ),
        (
            "a repository without commits",
            json!({"name": "x", "repo_path": empty_repo.path()}),
        ),
        (
            "a NUL byte",
            json!({"name": "x", "repo_path": "/tmp/\u{0}x"}),
        ),
    ];
    for (what, body) in cases {
        let r = api.call("createProject", &[], &[], Some(body)).await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
        assert!(!r.message().is_empty(), "{what}: a message");
        if what == "a subdirectory of a repository" {
            assert!(
                r.message().contains("give that top directory"),
                "the message names the enclosing repository: {}",
                r.message()
            );
        }
    }
    let raw = api
        .call_raw(
            "createProject",
            &[],
            "application/json",
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(raw.status, 400, "malformed JSON");

    api.create_project("basic", repo.path()).await;
    let again = api
        .call(
            "createProject",
            &[],
            &[],
            Some(json!({"name": "again", "repo_path": repo.path()})),
        )
        .await;
    assert_eq!(again.status, 400, "the same repository twice");
    assert!(again.message().contains("already"), "{}", again.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_project_returns_404_for_an_unknown_project() {
    let server = TestServer::spawn().await;
    let r = server.api().call("getProject", &["nope"], &[], None).await;
    assert_eq!(r.status, 404);
    assert!(r.message().contains("nope"));
}
