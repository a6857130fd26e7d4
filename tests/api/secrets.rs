//! Secrets out of reach (issue 27, items 3 and 5; docs/security.md): the token file lives
//! outside the data dir and only its owner may read it; the data dir and everything byre and
//! its agents write there are private to byre's user; team servers take projects only from
//! `--repos-root` directories, whatever `..` or symlinks the path holds.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use byre::config::AuthMode;
use serde_json::json;
use tempfile::TempDir;

use crate::helpers::{make_repo, until_kind, Api, TestServer, TOKENS};
use crate::process::byre_bin;

/// A token file for ada and bob at `path`, with `mode`.
fn write_tokens(path: &Path, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = String::from("[tokens]\n");
    for (token, login) in TOKENS {
        text.push_str(&format!("\"{token}\" = \"{login}\"\n"));
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `byre serve --auth token --listen 127.0.0.1:0 --data DATA ARGS` with `HOME` and
/// `XDG_CONFIG_HOME` at `home` and `home/config`: the running child and its URL, or its
/// stderr when it exits instead.
fn serve_token(data: &Path, home: &Path, args: &[&str]) -> Result<(Child, String), String> {
    let mut child = Command::new(byre_bin())
        .args([
            "serve",
            "--auth",
            "token",
            "--listen",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(data)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("BYRE_LOG", "warn")
        .env("BYRE_REVIEWS", "false")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn byre serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read stdout");
    match line.split_whitespace().find(|w| w.starts_with("http://")) {
        Some(url) => Ok((child, url.to_owned())),
        None => {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            let code = child.wait().unwrap().code();
            assert_eq!(code, Some(2), "a refused start exits 2: {err}");
            Err(err)
        }
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_token_file_that_group_or_others_may_read_or_write() {
    let (data, home) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let tokens = home.path().join("config/byre/tokens.toml");
    for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
        write_tokens(&tokens, mode);
        let err = serve_token(data.path(), home.path(), &[]).expect_err("refused");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("readable or writable by group or others")
                && err.contains(&format!("chmod 600 {}", tokens.display())),
            "mode {mode:o}: {err}"
        );
    }
    write_tokens(&tokens, 0o600);
    let (child, url) = serve_token(data.path(), home.path(), &[]).expect("starts");
    let me = Api::for_url(&url)
        .with_header("Authorization", &format!("Bearer {}", TOKENS[1].0))
        .call("getMe", &[], &[], None)
        .await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(
        me.body["login"], "bob",
        "the default file is the config dir's"
    );
    stop(child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_token_file_left_in_the_data_dir_unless_one_is_named() {
    let (data, home) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    write_tokens(&data.path().join("tokens.toml"), 0o600);
    let err = serve_token(data.path(), home.path(), &[]).expect_err("refused");
    let default = home.path().join("config/byre/tokens.toml");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("inside the data dir")
            && err.contains(&format!("move it to {}", default.display())),
        "{err}"
    );
    let elsewhere = home.path().join("team-tokens.toml");
    write_tokens(&elsewhere, 0o600);
    let (child, _) = serve_token(
        data.path(),
        home.path(),
        &["--tokens", elsewhere.to_str().unwrap()],
    )
    .expect("--tokens names the file");
    stop(child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_server_started_without_repos_root_takes_no_new_project() {
    let (data, home) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    write_tokens(&home.path().join("config/byre/tokens.toml"), 0o600);
    let (child, url) = serve_token(data.path(), home.path(), &[]).expect("starts");
    let ada = Api::for_url(&url).with_header("Authorization", &format!("Bearer {}", TOKENS[0].0));
    let repo = make_repo("basic");
    let r = ada
        .call(
            "createProject",
            &[],
            &[],
            Some(json!({"name": "basic", "repo_path": repo.path()})),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.message().contains("--repos-root"), "{}", r.message());
    stop(child);

    let err = serve_token(data.path(), home.path(), &["--repos-root", "/no/such/root"])
        .expect_err("a missing root is refused");
    assert!(err.contains("--repos-root /no/such/root"), "{err}");
}

/// A team server (ada and bob) whose projects may come only from `roots`.
async fn team_with_roots(roots: Vec<std::path::PathBuf>) -> TestServer {
    let tokens: HashMap<String, String> = TOKENS
        .iter()
        .map(|(t, l)| (t.to_string(), l.to_string()))
        .collect();
    TestServer::spawn_configured(TempDir::new().unwrap(), AuthMode::Token { tokens }, |c| {
        c.repos_roots = Some(roots)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_project_takes_repositories_only_from_inside_the_repos_roots() {
    // base/root is the one root; base/outside a repository beside it.
    let base = TempDir::new().unwrap();
    let root = base.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let outside = base.path().join("outside");
    std::fs::rename(make_repo("basic").keep(), &outside).unwrap();
    let inside = root.join("inside");
    std::fs::rename(make_repo("basic").keep(), &inside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link-out")).unwrap();
    // A directory inside whose `.git` file points at the git dir outside.
    let pointing = root.join("pointing");
    std::fs::create_dir(&pointing).unwrap();
    std::fs::write(
        pointing.join(".git"),
        format!("gitdir: {}\n", outside.join(".git").display()),
    )
    .unwrap();
    let real_root = std::fs::canonicalize(&root).unwrap();
    let server = team_with_roots(vec![real_root.clone()]).await;
    let ada = server.api_as("ada");
    let shown = |p: &Path| p.display().to_string();
    let cases: Vec<(&str, String, u16)> = vec![
        ("outside", shown(&outside), 400),
        (
            "`..` out of the root",
            format!("{}/inside/../../outside", shown(&root)),
            400,
        ),
        (
            "a symlink out of the root",
            shown(&root.join("link-out")),
            400,
        ),
        ("a git dir outside the root", shown(&pointing), 400),
        (
            "a missing path out of the root by `..`",
            format!("{}/../nope", shown(&root)),
            400,
        ),
    ];
    for (what, path, status) in cases {
        let r = ada
            .call(
                "createProject",
                &[],
                &[],
                Some(json!({"name": "p", "repo_path": path})),
            )
            .await;
        assert_eq!(r.status, status, "{what}: {:?}", r.body);
        assert!(
            r.message().contains("outside the directories")
                && r.message().contains(real_root.to_str().unwrap()),
            "{what}: the message names the roots: {}",
            r.message()
        );
    }
    let listed = ada.call("listProjects", &[], &[], None).await;
    assert_eq!(listed.body, json!([]), "nothing outside was registered");

    let r = ada
        .call(
            "createProject",
            &[],
            &[],
            Some(json!({"name": "inside", "repo_path": inside})),
        )
        .await;
    assert_eq!(r.status, 201, "inside a root: {:?}", r.body);
    let through_dots = format!("{}/inside/../inside", shown(&root));
    let r = ada
        .call(
            "createProject",
            &[],
            &[],
            Some(json!({"name": "again", "repo_path": through_dots})),
        )
        .await;
    assert_eq!(r.status, 400, "the same repository, resolved: {:?}", r.body);
    assert!(!r.message().contains("outside"), "{}", r.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_takes_a_repository_from_anywhere() {
    let server = TestServer::spawn().await;
    let (_repo, _id) = server.api().basic_project().await;
}

/// Every file and directory under `dir` (symlinks not followed) whose mode lets group or
/// others in, with its mode.
fn open_to_others(dir: &Path) -> Vec<(String, u32)> {
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.file_type().is_symlink() {
                continue;
            }
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                open.push((entry.path().display().to_string(), mode));
            }
            if meta.is_dir() {
                todo.push(entry.path());
            }
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_task_ran_nothing_in_the_data_dir_is_open_to_group_or_others() {
    let fake = byre_fake_models::FakeAnthropic::fixture("b_write_file")
        .await
        .expect("fake API");
    let bin = crate::claude::claude_bin().await;
    let data = TempDir::new().unwrap();
    // A data dir an older build made 0755 is tightened.
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(data, crate::helpers::local_ada(), move |c| {
        c.claude_bin = Some(bin);
        c.agent_env = vec![
            ("ANTHROPIC_BASE_URL".into(), url),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
            ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
        ];
    })
    .await;
    let api = server.api();
    let (_repo, project_id) = api.basic_project().await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            &project_id,
            json!({"title": "write", "prompt": "Please create hello.txt"}),
        )
        .await;
    until_kind(&mut sse, "snapshot.taken", crate::claude::TURN_WAIT).await;
    let worktree = Path::new(task["worktree_path"].as_str().unwrap());
    assert!(
        worktree.join("hello.txt").exists(),
        "the agent wrote its file"
    );
    let blob = api
        .call_raw("uploadBlob", &[], "image/png", crate::blobs::PNG.to_vec())
        .await;
    assert_eq!(blob.status, 201, "{:?}", blob.body);
    let data = server.stop().await;
    let top = std::fs::metadata(data.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(top, 0o700, "the data dir itself");
    assert_eq!(
        open_to_others(data.path()),
        Vec::<(String, u32)>::new(),
        "log, lock, snapshot, records, worktrees, the agent's files, blobs: private"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_is_401_without_an_identity_on_a_team_server_as_the_contract_says() {
    let contract = crate::schema::Contract::get();
    let spec: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/byre.openapi.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let schemes = &spec["components"]["securitySchemes"];
    assert_eq!(schemes["bearerToken"]["scheme"], "bearer");
    assert_eq!(schemes["sessionCookie"]["name"], "byre_session");
    assert_eq!(schemes["tailscaleUser"]["name"], "Tailscale-User-Login");
    let server = team_with_roots(Vec::new()).await;
    let client = reqwest::Client::new();
    for op in contract.operation_ids() {
        let (method, template) = contract.route(&op).unwrap();
        let path: Vec<&str> = template
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect();
        let r = client
            .request(
                method.parse().unwrap(),
                format!("{}{}", server.url, path.join("/")),
            )
            // Past the edge's same-origin proof, so what answers is the identity check.
            .header("X-Byre-CSRF", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{op} without an identity");
        let body: serde_json::Value = r.json().await.unwrap();
        contract
            .check_response(&op, 401, &body)
            .unwrap_or_else(|e| panic!("{op}: the contract lists its 401: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_fast_forwards_the_users_checkout_with_the_users_modes_not_byres() {
    let fake = byre_fake_models::FakeAnthropic::fixture("n_finish")
        .await
        .expect("fake API");
    let bin = crate::claude::claude_bin().await;
    let url = fake.url.clone();
    let server = TestServer::spawn_configured(
        TempDir::new().unwrap(),
        crate::helpers::local_ada(),
        move |c| {
            c.claude_bin = Some(bin);
            c.agent_env = vec![
                ("ANTHROPIC_BASE_URL".into(), url),
                ("ANTHROPIC_API_KEY".into(), "sk-ant-fake-key".into()),
                ("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()),
            ];
        },
    )
    .await;
    let api = server.api();
    let me = api
        .call(
            "updateMe",
            &[],
            &[],
            Some(json!({"git_name": "Ada", "git_email": "ada@example.com"})),
        )
        .await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    // The user's checkout holds feature.txt already, in a mode of their choosing (git records
    // only the executable bit, so the checkout stays clean).
    let repo = make_repo("basic");
    let feature = repo.path().join("feature.txt");
    std::fs::write(&feature, "the old feature\n").unwrap();
    crate::helpers::git(repo.path(), &["add", "feature.txt"]);
    crate::helpers::git(repo.path(), &["commit", "-q", "-m", "old feature"]);
    std::fs::set_permissions(&feature, std::fs::Permissions::from_mode(0o640)).unwrap();
    let project = api.create_project("basic", repo.path()).await;
    let mut sse = api.events(&[], None).await;
    let task = api
        .create_task_with(
            project["id"].as_str().unwrap(),
            json!({"title": "second", "prompt": "Please create second.txt"}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap();
    until_kind(&mut sse, "snapshot.taken", crate::claude::TURN_WAIT).await;
    // The agent made second.txt; feature.txt changes in the worktree too (the merge's
    // end-of-turn commit takes it).
    let worktree = Path::new(task["worktree_path"].as_str().unwrap());
    std::fs::write(worktree.join("feature.txt"), "the new feature\n").unwrap();
    let r = api
        .call(
            "mergeTask",
            &[task_id],
            &[],
            Some(json!({"merge_title": "New feature"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    until_kind(&mut sse, "task.merged", crate::claude::TURN_WAIT).await;
    assert_eq!(
        std::fs::read_to_string(&feature).unwrap(),
        "the new feature\n",
        "the checkout was fast-forwarded"
    );
    let mode_of = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode_of(&feature),
        0o640,
        "the rewritten file keeps the user's mode"
    );
    let user_umask =
        byre_process::private_files::user_umask().expect("a server tightened the umask");
    assert_eq!(
        mode_of(&repo.path().join("second.txt")),
        0o666 & !user_umask,
        "a new file gets the user's umask, not byre's 077"
    );
}
