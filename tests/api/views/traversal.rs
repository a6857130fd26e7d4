//! The path-traversal suite of the worktree views (no request reads a file outside the
//! worktree, whatever its path), and their 404 and 409 answers.

use serde_json::Value;
use tempfile::TempDir;

use super::{task_on, Task, SECRET};
use crate::schema::Contract;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktree_views_answer_404_for_an_unknown_task_and_409_without_a_worktree() {
    let task = task_on(|_| {}).await;
    let r = task.get("getTaskChanges", &[]).await;
    let (base, tree) = (
        r.body["base"].as_str().unwrap(),
        r.body["tree"].as_str().unwrap(),
    );
    let calls: [(&str, Vec<(&str, &str)>); 5] = [
        ("getTaskDir", vec![]),
        ("getTaskFile", vec![("path", "README.md")]),
        ("getTaskImage", vec![("path", "a.png")]),
        ("getTaskChanges", vec![]),
        (
            "getTaskDiff",
            vec![("base", base), ("tree", tree), ("path", "README.md")],
        ),
    ];
    for (op, query) in &calls {
        let r = task.api.call(op, &["no-such-task"], query, None).await;
        assert_eq!(r.status, 404, "{op}: {:?}", r.body);
    }
    // A removed worktree comes back at the next view (tests/api/recovery.rs)…
    std::fs::remove_dir_all(&task.worktree).unwrap();
    assert_eq!(task.get("getTaskDir", &[]).await.status, 200);
    assert!(task.worktree.is_dir());
    // …but not when something else took its place: 409.
    std::fs::remove_dir_all(&task.worktree).unwrap();
    std::fs::write(&task.worktree, "not a worktree").unwrap();
    for (op, query) in &calls {
        let r = task.get(op, query).await;
        assert_eq!(r.status, 409, "{op}: {:?}", r.body);
        assert!(r.message().contains("missing"), "{op}: {}", r.message());
    }
}

/// Percent-encodes every byte but the unreserved ones.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `operation_id` with `query` put in the URL verbatim (so encoded slashes and NULs arrive
/// as the test wrote them); the body is checked against the contract like every other call.
async fn get_raw(task: &Task, operation_id: &str, query: &str) -> (u16, Value, Vec<u8>) {
    let (_, url) = task.api.url(operation_id, &[&task.id]);
    let resp = reqwest::get(format!("{url}?{query}")).await.unwrap();
    let status = resp.status().as_u16();
    let json = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let bytes = resp.bytes().await.unwrap().to_vec();
    if !json {
        assert!(
            status < 400,
            "{operation_id} {query}: {status} without a JSON body"
        );
        return (status, Value::Null, bytes);
    }
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    Contract::get()
        .check_response(operation_id, status, &body)
        .unwrap_or_else(|e| panic!("{operation_id} {status}: {e}\n{body}"));
    (status, body, bytes)
}

/// How a case's path is sent.
enum Q {
    /// Percent-encoded, as a client library would.
    Value(String),
    /// Put in the URL as written.
    Raw(&'static str),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_path_leads_out_of_the_worktree() {
    let task = task_on(|_| {}).await;
    let outside = TempDir::new().unwrap();
    std::fs::write(outside.path().join("secret.png"), SECRET).unwrap();
    std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
    task.link(outside.path().join("secret.png"), "link_out.png");
    task.link(outside.path(), "link_out_dir");
    task.link("loop_b.png", "loop_a.png");
    task.link("loop_a.png", "loop_b.png");
    task.link(".git", "link_git.png");
    let r = task.get("getTaskChanges", &[]).await;
    assert_eq!(r.status, 200);
    let diff_query = format!(
        "base={}&tree={}&",
        r.body["base"].as_str().unwrap(),
        r.body["tree"].as_str().unwrap()
    );

    let wt = task.worktree.to_str().unwrap().to_owned();
    let secret = outside
        .path()
        .join("secret.png")
        .to_str()
        .unwrap()
        .to_owned();
    use Q::{Raw, Value as V};
    let v = |s: &str| V(s.to_owned());
    // Expected status of getTaskDir, getTaskFile, getTaskImage, getTaskDiff. The diff reads
    // the git tree, not the filesystem: a symlink there is a blob holding its target's name.
    let cases: Vec<(&str, Q, [u16; 4])> = vec![
        ("dot-dot", v(".."), [400, 400, 403, 400]),
        (
            "up to /etc/passwd",
            v("../../etc/passwd"),
            [400, 400, 403, 400],
        ),
        ("down then up", v("src/../../x.png"), [400, 400, 403, 400]),
        ("absolute outside", v("/etc/passwd"), [400, 400, 403, 400]),
        ("absolute secret", V(secret.clone()), [400, 400, 403, 400]),
        (
            "absolute under the worktree, then up",
            V(format!("{wt}/../../../../../../etc/passwd")),
            [400, 400, 403, 400],
        ),
        (
            "absolute sibling of the worktree",
            V(format!("{wt}x/a.png")),
            [400, 400, 403, 400],
        ),
        (
            "symlink to a file outside",
            v("link_out.png"),
            [400, 400, 403, 200],
        ),
        (
            "symlink to a dir outside",
            v("link_out_dir"),
            [400, 400, 403, 200],
        ),
        (
            "through a symlinked dir",
            v("link_out_dir/secret.png"),
            [400, 400, 403, 200],
        ),
        ("symlink loop", v("loop_a.png"), [400, 400, 400, 200]),
        ("into .git", v(".git"), [400, 400, 403, 400]),
        ("symlink into .git", v("link_git.png"), [400, 400, 403, 200]),
        ("NUL byte", v("README.md\0.png"), [400, 400, 400, 400]),
        ("encoded NUL", Raw("README.md%00.png"), [400, 400, 400, 400]),
        (
            "encoded slashes",
            Raw("..%2F..%2Fetc%2Fpasswd"),
            [400, 400, 403, 400],
        ),
        (
            "encoded dots and slashes",
            Raw("%2e%2e%2f%2e%2e%2fetc%2fpasswd"),
            [400, 400, 403, 400],
        ),
        (
            "encoded slash then dots",
            Raw("src%2F..%2F..%2Fx.png"),
            [400, 400, 403, 400],
        ),
        (
            "backslashes",
            v("..\\..\\etc\\passwd"),
            [400, 400, 400, 400],
        ),
        (
            "encoded backslashes",
            Raw("..%5C..%5Cetc%5Cpasswd"),
            [400, 400, 400, 400],
        ),
        ("empty component", v("src//main.rs"), [400, 400, 400, 400]),
    ];
    let ops = ["getTaskDir", "getTaskFile", "getTaskImage", "getTaskDiff"];
    for (what, path, statuses) in &cases {
        let param = match path {
            V(s) => encode(s),
            Raw(s) => s.to_string(),
        };
        for (op, want) in ops.iter().zip(statuses) {
            let extra = if *op == "getTaskDiff" {
                diff_query.as_str()
            } else {
                ""
            };
            let (status, body, bytes) = get_raw(&task, op, &format!("{extra}path={param}")).await;
            assert_eq!(status, *want, "{what} via {op}: {body}");
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "{what} via {op} leaked a file from outside"
            );
            if status >= 400 {
                assert!(
                    !body["message"].as_str().unwrap_or("").is_empty(),
                    "{what} via {op}"
                );
            }
        }
    }
    // old_path goes through the same rules.
    let query = format!("{diff_query}path=a&old_path=..%2Fx");
    let (status, _, _) = get_raw(&task, "getTaskDiff", &query).await;
    assert_eq!(status, 400);
}
