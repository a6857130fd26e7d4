//! Snapshots: `listSnapshots`, `getTaskChanges` with `snapshot`/`step`, the snapshot reactor
//! (requested snapshots; causes left unanswered by a stop finished at start-up). The
//! end-of-turn commit after a real agent turn is tested in `claude.rs`.

use std::path::{Path, PathBuf};

use byre_projections::sessions::{TurnEnded, TurnOutcome, Usage, VendorItem};
use byre_projections::snapshots::SnapshotTrigger;
use byre_projections::Command;
use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{find, local_ada, until_kind, Api, TestServer, WAIT};

/// A server with a task on a repository made from `fixtures/repos/basic` (`.gitignore`:
/// `target/`, `*.log`).
struct Bench {
    server: TestServer,
    api: Api,
    repo: TempDir,
    task_id: String,
    worktree: PathBuf,
    branch: String,
}

impl Bench {
    async fn start() -> Bench {
        let server = TestServer::spawn().await;
        let api = server.api();
        let (repo, project_id) = api.basic_project().await;
        let task = api.create_task(&project_id, "snap it").await;
        Bench {
            task_id: task["id"].as_str().unwrap().to_owned(),
            worktree: PathBuf::from(task["worktree_path"].as_str().unwrap()),
            branch: task["branch"].as_str().unwrap().to_owned(),
            server,
            api,
            repo,
        }
    }

    fn write(&self, path: &str, content: &str) {
        let p = self.worktree.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn git(&self) -> git2::Repository {
        git2::Repository::open(&self.worktree).unwrap()
    }

    fn index_bytes(&self) -> Vec<u8> {
        std::fs::read(self.git().path().join("index")).unwrap()
    }

    fn branch_tip(&self) -> String {
        self.git()
            .find_branch(&self.branch, git2::BranchType::Local)
            .unwrap()
            .get()
            .target()
            .unwrap()
            .to_string()
    }

    async fn snapshots(&self) -> Vec<Value> {
        let r = self
            .api
            .call("listSnapshots", &[&self.task_id], &[], None)
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body.as_array().unwrap().clone()
    }

    async fn changes(&self, query: &[(&str, &str)]) -> Value {
        let r = self
            .api
            .call("getTaskChanges", &[&self.task_id], query, None)
            .await;
        assert_eq!(r.status, 200, "{query:?}: {:?}", r.body);
        r.body
    }
}

/// `path: status` of each file of a `TaskChanges`.
fn statuses(changes: &Value) -> Vec<String> {
    changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}: {}",
                f["path"].as_str().unwrap(),
                f["status"].as_str().unwrap()
            )
        })
        .collect()
}

/// Paths of the files in commit `sha`'s tree.
fn tree_paths(repo: &git2::Repository, sha: &str) -> Vec<String> {
    let commit = repo.find_commit(git2::Oid::from_str(sha).unwrap()).unwrap();
    let mut out = Vec::new();
    commit
        .tree()
        .unwrap()
        .walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(git2::ObjectType::Blob) {
                out.push(format!("{dir}{}", e.name().unwrap()));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
    out
}

fn request(task_id: &str) -> Command {
    Command::RequestSnapshot {
        task_id: task_id.to_owned().into(),
        trigger: SnapshotTrigger::Requested,
    }
}

#[tokio::test]
async fn a_requested_snapshot_holds_tracked_and_untracked_files_but_not_ignored_ones_and_leaves_the_index_alone(
) {
    let b = Bench::start().await;
    assert_eq!(b.snapshots().await, Vec::<Value>::new());
    let mut sse = b.api.events(&[], None).await;
    b.write("README.md", "edited\n");
    std::fs::remove_file(b.worktree.join("src/main.rs")).unwrap();
    b.write("notes/new.txt", "untracked\n");
    b.write("debug.log", "ignored\n");
    b.write("target/out.bin", "ignored too\n");
    let index_before = b.index_bytes();
    let tip_before = b.branch_tip();

    let ack = b.server.submit(request(&b.task_id)).await;
    let requested_seq = ack.events[0].seq;
    let events = until_kind(&mut sse, "snapshot.taken", WAIT).await;
    let taken = find(&events, "snapshot.taken");
    assert_eq!(taken["task_id"], b.task_id.as_str());
    assert_eq!(taken["payload"]["trigger"], "requested");
    assert_eq!(taken["payload"]["cause_seq"], requested_seq);
    assert_eq!(taken["payload"]["branch_advanced"], false);

    let list = b.snapshots().await;
    assert_eq!(list.len(), 1);
    let snap = &list[0];
    assert_eq!(
        (snap["n"].as_u64(), snap["trigger"].as_str()),
        (Some(1), Some("requested"))
    );
    assert!(snap["event_seq"].as_u64().unwrap() >= requested_seq);
    let commit = snap["commit_sha"].as_str().unwrap();
    let repo = b.git();
    assert_eq!(
        tree_paths(&repo, commit),
        [".gitignore", "README.md", "notes/new.txt"],
        "tracked and untracked files, the deletion, no ignored file"
    );
    let at_ref = repo
        .find_reference(&format!("refs/byre/tasks/{}/snap/1", b.task_id))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert_eq!(at_ref.id().to_string(), commit);
    assert_eq!(
        at_ref.tree_id().to_string(),
        snap["tree_sha"].as_str().unwrap()
    );
    assert_eq!(at_ref.parent_id(0).unwrap().to_string(), tip_before);
    assert_eq!(
        b.index_bytes(),
        index_before,
        "the worktree's index is byte-identical"
    );
    assert_eq!(
        b.branch_tip(),
        tip_before,
        "a requested snapshot never moves the branch"
    );
    assert_eq!(
        std::fs::read_to_string(b.worktree.join("debug.log")).unwrap(),
        "ignored\n"
    );

    // Its changes: against the merge-base, and (step, the first) against its parent.
    let mut expected = vec![
        "README.md: modified",
        "notes/new.txt: added",
        "src/main.rs: deleted",
    ];
    expected.sort();
    for step in ["false", "true"] {
        let changes = b.changes(&[("snapshot", "1"), ("step", step)]).await;
        assert_eq!(statuses(&changes), expected, "step={step}");
        assert_eq!(changes["tree"], snap["tree_sha"]);
        assert_eq!(changes["base"].as_str().unwrap(), tip_before, "step={step}");
    }

    // A second one after one more edit: its step holds only that edit, compared with the
    // first snapshot's tree.
    b.write("notes/new.txt", "untracked, edited\n");
    b.server.submit(request(&b.task_id)).await;
    let events = until_kind(&mut sse, "snapshot.taken", WAIT).await;
    assert_eq!(find(&events, "snapshot.taken")["payload"]["n"], 2);
    let step = b.changes(&[("snapshot", "2"), ("step", "true")]).await;
    assert_eq!(statuses(&step), ["notes/new.txt: modified"]);
    assert_eq!(step["base"], snap["tree_sha"]);
    let whole = b.changes(&[("snapshot", "2")]).await;
    assert_eq!(statuses(&whole), expected);
    let diff = b
        .api
        .call(
            "getTaskDiff",
            &[&b.task_id],
            &[
                ("base", step["base"].as_str().unwrap()),
                ("tree", step["tree"].as_str().unwrap()),
                ("path", "notes/new.txt"),
            ],
            None,
        )
        .await;
    assert!(diff.body["patch"]
        .as_str()
        .unwrap()
        .contains("+untracked, edited"));

    let bad = [
        (
            "since with snapshot",
            vec![("snapshot", "1"), ("since", tip_before.as_str())],
            400,
        ),
        ("step without snapshot", vec![("step", "true")], 400),
        ("no such snapshot", vec![("snapshot", "3")], 404),
        ("snapshot 0", vec![("snapshot", "0")], 404),
    ];
    for (what, query, status) in bad {
        let r = b
            .api
            .call("getTaskChanges", &[&b.task_id], &query, None)
            .await;
        assert_eq!(r.status, status, "{what}: {:?}", r.body);
    }
    // `step=false` is the default spelled out: the live worktree's changes, as without it.
    assert_eq!(
        b.changes(&[("step", "false")]).await["files"],
        b.changes(&[]).await["files"]
    );
    let r = b
        .api
        .call("listSnapshots", &["no-such-task"], &[], None)
        .await;
    assert_eq!(r.status, 404);
    b.server.stop().await;
}

/// Appends `cmds` to the log of the stopped server in `data` with the writer alone (no
/// reactor runs), as if byre had been killed right after committing them.
/// Returns each command's events.
async fn append_offline(data: &Path, cmds: Vec<Command>) -> Vec<Vec<byre_projections::Event>> {
    let path = data.join("byre.redb");
    let (store, state) = tokio::task::spawn_blocking(move || {
        let store = byre_log::Store::open(&path).unwrap();
        let state = store.fold().unwrap();
        (store, state)
    })
    .await
    .unwrap();
    let (writer, thread) = byre_log::Writer::start(store, state);
    let mut out = Vec::new();
    for cmd in cmds {
        out.push(writer.submit(cmd, None).await.expect("accepted").events);
    }
    writer.stop().await;
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap();
    out
}

fn turn_ended() -> TurnEnded {
    TurnEnded {
        cut: None,
        turn: 0,
        outcome: TurnOutcome::Completed,
        summary: false,
        result: "done".into(),
        error: String::new(),
        usage: Usage::default(),
        cost_micro_usd: 0,
        duration_ms: 1,
        num_turns: 1,
        api_error_status: None,
        rate_limits: None,
        review: false,
        last_vendor_id: None,
        raw: "{}".into(),
    }
}

#[tokio::test]
async fn causes_a_stop_left_unanswered_are_finished_at_start_up_and_a_written_ref_is_reused() {
    let b = Bench::start().await;
    let Bench {
        server,
        repo: _repo,
        task_id,
        worktree,
        branch,
        ..
    } = b;
    let data = server.stop().await;
    // Offline: the agent's turn ends having written a file, then byre is "killed" after the
    // snapshot reactor wrote the ref and moved the branch, before recording it; a requested
    // snapshot after it was never started.
    std::fs::write(worktree.join("turn.txt"), "from the turn\n").unwrap();
    let created = append_offline(
        data.path(),
        vec![Command::CreateSession {
            actor: "ada".into(),
            task_id: task_id.clone().into(),
            model: None,
            prompt: "go".into(),
            images: vec![],
            head: String::new(),
        }],
    )
    .await;
    let session_id = created[0][0].agent_session_id.clone().unwrap();
    let acks = append_offline(
        data.path(),
        vec![
            Command::RecordVendorOutput {
                session_id,
                items: vec![VendorItem::TurnEnded(turn_ended())],
            },
            request(&task_id),
        ],
    )
    .await;
    let seqs: Vec<u64> = acks.iter().map(|events| events[0].seq).collect();
    let (turn_seq, requested_seq) = (seqs[0], seqs[1]);
    let made = {
        let (wt, br, id) = (worktree.clone(), branch.clone(), task_id.clone());
        tokio::task::spawn_blocking(move || {
            byre_git::snapshots::take_snapshot(&byre_git::snapshots::SnapshotJob {
                worktree: &wt,
                branch: &br,
                task_id: &id,
                title: "snap it",
                n: 1,
                turn: Some(1),
                event_seq: turn_seq,
            })
            .unwrap()
        })
        .await
        .unwrap()
    };
    assert!(made.branch_advanced);

    let server = TestServer::spawn_on(data, local_ada()).await;
    let api = server.api();
    let mut sse = api.events(&[], Some(turn_seq)).await;
    let events = until_kind(&mut sse, "snapshot.taken", WAIT).await;
    let first = find(&events, "snapshot.taken");
    assert_eq!(first["payload"]["cause_seq"], turn_seq);
    let events = until_kind(&mut sse, "snapshot.taken", WAIT).await;
    let second = find(&events, "snapshot.taken");
    assert_eq!(second["payload"]["cause_seq"], requested_seq);

    let list = api.call("listSnapshots", &[&task_id], &[], None).await.body;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["trigger"], "turn_end");
    assert_eq!(
        list[0]["commit_sha"].as_str().unwrap(),
        made.commit,
        "the ref is reused"
    );
    assert_eq!(list[0]["event_seq"], turn_seq);
    assert_eq!(list[0]["agent_session_id"], first["agent_session_id"]);
    assert_eq!(first["payload"]["branch_advanced"], true);
    assert_eq!(list[1]["trigger"], "requested");
    let repo = git2::Repository::open(&worktree).unwrap();
    let second_commit = repo
        .find_commit(git2::Oid::from_str(list[1]["commit_sha"].as_str().unwrap()).unwrap())
        .unwrap();
    assert_eq!(second_commit.parent_id(0).unwrap().to_string(), made.commit);
    assert!(repo
        .find_reference(&format!("refs/byre/tasks/{task_id}/snap/3"))
        .is_err());
    let tip = repo
        .find_branch(&branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .target()
        .unwrap();
    assert_eq!(
        tip.to_string(),
        made.commit,
        "the branch holds the turn's work"
    );
    server.stop().await;
}
