//! The sandbox (DESIGN.md invariant 8) around what byre starts besides the agent CLIs: task
//! terminals, CodeBolt agents and their `sh` commands, and MCP toolbox servers. Each test
//! plays a hostile user or a prompt-injected agent on a team server (token mode, `ada` and
//! `bob`): it tries to reach what no process of a task may reach (the token file, byre's MCP
//! secret and session tokens, the log, another task's worktree, another user's lead
//! directory, the user's own checkout, byre's process) and asserts every try fails, while work
//! in the task's own worktree (a file, a commit) still succeeds.
//!
//! A probe prints `LEAKED` only when the secret itself came out (a `grep` of its content, not
//! the mere existence of a path), so a probe cannot pass for a reason other than the sandbox;
//! writes outside the worktree are checked on the host, since the sandbox may give the writer
//! a scratch file system of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::{Api, Sse, TestServer, TOKENS, WAIT};
use crate::terminal::Term;

/// What the tests plant on the host for the sandboxed processes to go after.
struct Planted {
    /// byre's data dir.
    data: PathBuf,
    /// The user's own checkout of the project's repository.
    checkout: PathBuf,
    /// A file in the worktree of another user's task.
    other_worktree_file: PathBuf,
    /// Every file or directory a write from inside must not create.
    must_not_appear: Vec<PathBuf>,
}

impl Planted {
    /// Plants the secrets: the token file where byre's default once put it (the data dir),
    /// `mcp.secret` and a session token under `mcp-tokens/` (if byre made none yet), a note
    /// in `ada`'s lead directory, and a secret in `ada`'s task's worktree.
    fn plant(data: &Path, checkout: &Path, ada_worktree: &Path) -> Planted {
        let tokens: String = TOKENS
            .iter()
            .map(|(t, l)| format!("\"{t}\" = \"{l}\"\n"))
            .collect();
        std::fs::write(data.join("tokens.toml"), format!("[tokens]\n{tokens}")).unwrap();
        let secret = data.join("mcp.secret");
        if !secret.exists() {
            std::fs::write(&secret, "planted mcp secret").unwrap();
        }
        std::fs::create_dir_all(data.join("mcp-tokens")).unwrap();
        std::fs::write(data.join("mcp-tokens/planted.token"), "planted.session").unwrap();
        std::fs::create_dir_all(data.join("lead/ada")).unwrap();
        std::fs::write(data.join("lead/ada/NOTES.md"), "ada's lead notes").unwrap();
        let other_worktree_file = ada_worktree.join("ada-secret.txt");
        std::fs::write(&other_worktree_file, "ADA-SECRET of her task\n").unwrap();
        Planted {
            data: data.to_owned(),
            checkout: checkout.to_owned(),
            other_worktree_file,
            must_not_appear: vec![
                data.join("escaped.txt"),
                checkout.join("escaped.txt"),
                ada_worktree.join("escaped.txt"),
            ],
        }
    }

    /// (what, shell command that succeeds only when the secret came out). Every pattern is
    /// written so that the command's own text does not match it (`tok[e]n`).
    fn probes(&self) -> Vec<(&'static str, String)> {
        let data = self.data.display();
        let byre = std::process::id();
        vec![
            (
                "the token file, up from the worktree",
                "head -3 ../../../tokens.toml | grep -q 'tok[e]n'".into(),
            ),
            (
                "the token file",
                format!("grep -q 'bob-tok[e]n' {data}/tokens.toml"),
            ),
            ("byre's MCP secret", format!("test -s {data}/mcp.secret")),
            (
                "the MCP session tokens",
                format!("ls {data}/mcp-tokens | grep -q 'planted'"),
            ),
            ("the log", format!("test -s {data}/byre.redb")),
            (
                "another task's worktree",
                format!(
                    "grep -q 'ADA-SEC[R]ET' {}",
                    self.other_worktree_file.display()
                ),
            ),
            (
                "another user's lead directory",
                format!("ls {data}/lead/ada | grep -q NOTES"),
            ),
            (
                "the user's own checkout",
                format!(
                    "grep -q 'small repos[i]tory' {}/README.md",
                    self.checkout.display()
                ),
            ),
            (
                "byre's environment",
                format!("tr '\\0' '\\n' < /proc/{byre}/environ | grep -q ="),
            ),
            ("byre's process", format!("kill -0 {byre}")),
        ]
    }

    /// A command that tries to write each of [`Planted::must_not_appear`].
    fn escape_writes(&self) -> String {
        self.must_not_appear
            .iter()
            .map(|p| format!("echo escaped > {} 2>/dev/null", p.display()))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Asserts no write from inside reached the host.
    fn assert_nothing_written(&self, by: &str) {
        for p in &self.must_not_appear {
            assert!(
                !p.exists(),
                "{by} wrote {} outside its worktree",
                p.display()
            );
        }
    }
}

/// A team server, `ada`'s project, `ada`'s task and `bob`'s task (both worktrees made).
struct Team {
    server: TestServer,
    bob: Api,
    project_id: String,
    checkout: TempDir,
    ada_worktree: PathBuf,
}

/// Waits until `dir` exists.
async fn made(dir: &Path) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !dir.is_dir() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} was never made",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Team {
    async fn start(configure: impl FnOnce(&mut byre::config::Config)) -> Team {
        let tokens = TOKENS
            .iter()
            .map(|(t, l)| (t.to_string(), l.to_string()))
            .collect();
        let server = TestServer::spawn_configured(
            TempDir::new().expect("data dir"),
            byre::config::AuthMode::Token { tokens },
            configure,
        )
        .await;
        let ada = server.api_as("ada");
        let bob = server.api_as("bob");
        let (checkout, project_id) = ada.basic_project().await;
        let task = ada.create_task(&project_id, "ada's task").await;
        let ada_worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
        made(&ada_worktree).await;
        Team {
            server,
            bob,
            project_id,
            checkout,
            ada_worktree,
        }
    }

    fn plant(&self) -> Planted {
        Planted::plant(
            self.server.data.path(),
            self.checkout.path(),
            &self.ada_worktree,
        )
    }
}

fn token_of(login: &str) -> &'static str {
    TOKENS.iter().find(|(_, l)| *l == login).unwrap().0
}

/// The subject line of `worktree`'s HEAD commit.
fn head_subject(worktree: &Path) -> String {
    let repo = git2::Repository::open(worktree).expect("the worktree opens");
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let message = head.message().unwrap_or("");
    let subject = message.lines().next().unwrap_or("").to_owned();
    subject
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_opened_by_one_user_cannot_read_the_token_file_or_other_tasks_worktrees() {
    let team = Team::start(|_| {}).await;
    let task = team.bob.create_task(&team.project_id, "bob's task").await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    made(&worktree).await;
    let planted = team.plant();

    let mut term = Term::open_as(&team.server.url, &task_id, 120, 40, Some(token_of("bob"))).await;
    for (i, (what, probe)) in planted.probes().iter().enumerate() {
        term.type_line(&format!(
            "({probe}) >/dev/null 2>&1 && echo \"P{i}$((0+1))=LEAKED\" || echo \"P{i}$((0+1))=denied\""
        ))
        .await;
        assert_eq!(
            term.after(&format!("P{i}1=")).await,
            "denied",
            "bob's terminal reached {what}: `{probe}`"
        );
    }
    term.type_line(&planted.escape_writes()).await;
    // The shell's own worktree is its to write and commit in.
    term.type_line(
        "echo ok > from-terminal.txt && git add from-terminal.txt \
         && git -c user.name=bob -c user.email=bob@example.com commit -q -m 'from the terminal' \
         && echo \"C$((0+1))=committed\"",
    )
    .await;
    assert_eq!(term.after("C1=").await, "committed", "{}", term.text_seen());
    assert_eq!(head_subject(&worktree), "from the terminal");
    assert_eq!(
        std::fs::read_to_string(worktree.join("from-terminal.txt")).unwrap(),
        "ok\n"
    );
    planted.assert_nothing_written("bob's terminal");
    let seen = term.text_seen();
    for (token, _) in TOKENS {
        assert!(
            !seen.contains(token),
            "a token reached the terminal: {seen}"
        );
    }
    assert!(!seen.contains("ADA-SECRET"), "{seen}");

    // Job control still works in the sandbox: Ctrl-Z stops the foreground job, and the shell
    // says so (only a shell whose pty is its controlling terminal gets the SIGTSTP).
    term.type_line("sh -c 'echo \"RE\"\"ADY\"; exec sleep 600'")
        .await;
    term.after("READY").await;
    term.ws
        .send(Message::Binary(vec![0x1a].into()))
        .await
        .expect("send Ctrl-Z");
    term.after("Stopped").await;
    term.type_line("kill -9 %1; echo \"K$((0+1))=$?\"").await;
    assert_eq!(term.after("K1=").await, "0", "{}", term.text_seen());
    drop(term);
    team.server.stop().await;
}

/// A worktree's own git dir, as its `.git` file names it (`gitdir: …`).
fn admin_dir(worktree: &Path) -> PathBuf {
    let text = std::fs::read_to_string(worktree.join(".git")).expect("a linked worktree");
    let dir = PathBuf::from(text.trim().strip_prefix("gitdir:").unwrap().trim());
    std::fs::canonicalize(dir).unwrap()
}

/// The git files that, rewritten, would point byre's next sandbox or its own `git` (which runs
/// outside any sandbox, for pulls and pushes) somewhere else, or configure a program for it
/// to run: none of them may be written from a task's terminal, and a terminal opened after
/// the tries still reaches nothing, while commits keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_cannot_point_git_at_the_data_dir_or_configure_a_program_for_byre_s_git() {
    let team = Team::start(|_| {}).await;
    let task = team.bob.create_task(&team.project_id, "bob's task").await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    made(&worktree).await;
    let planted = team.plant();
    let data = std::fs::canonicalize(team.server.data.path()).unwrap();
    let common = std::fs::canonicalize(team.checkout.path().join(".git")).unwrap();
    let own = admin_dir(&worktree);
    let adas = admin_dir(&team.ada_worktree);
    let pwned = data.join("pwned-by-fsmonitor");
    let hostile_config = format!("[core] fsmonitor = \"touch {}\"", pwned.display());
    // (what, the file, what the attacker writes into it)
    let redirects: Vec<(&str, PathBuf, String)> = vec![
        (
            "the worktree's .git file",
            worktree.join(".git"),
            format!("gitdir: {}", data.display()),
        ),
        (
            "its git dir's commondir",
            own.join("commondir"),
            data.display().to_string(),
        ),
        (
            "its git dir's gitdir",
            own.join("gitdir"),
            data.join(".git").display().to_string(),
        ),
        (
            "its git dir's config.worktree",
            own.join("config.worktree"),
            hostile_config.clone(),
        ),
        (
            "a commondir of the common dir",
            common.join("commondir"),
            data.display().to_string(),
        ),
        (
            "the common config",
            common.join("config"),
            hostile_config.clone(),
        ),
        (
            "a config.worktree of the common dir",
            common.join("config.worktree"),
            hostile_config.clone(),
        ),
        (
            "a hook",
            common.join("hooks/post-merge"),
            format!("touch {}", pwned.display()),
        ),
        (
            "the attributes",
            common.join("info/attributes"),
            "* filter=evil".into(),
        ),
        (
            "the alternates",
            common.join("objects/info/alternates"),
            data.display().to_string(),
        ),
        (
            "another task's commondir",
            adas.join("commondir"),
            data.display().to_string(),
        ),
        (
            "the checkout's index",
            common.join("index"),
            "garbage".into(),
        ),
        (
            "the checkout's HEAD",
            common.join("HEAD"),
            "ref: refs/heads/evil".into(),
        ),
    ];
    let mut term = Term::open_as(&team.server.url, &task_id, 160, 40, Some(token_of("bob"))).await;
    term.type_line("echo \"R$((0+1))=ready\"").await;
    term.after("R1=").await;
    // As the sandbox left them (byre makes an empty `config.worktree` to bind it read-only).
    let before: Vec<Option<Vec<u8>>> = redirects
        .iter()
        .map(|(_, p, _)| std::fs::read(p).ok())
        .collect();
    for (i, (what, path, content)) in redirects.iter().enumerate() {
        let file = path.display();
        let quoted = content.replace('\'', "'\\''");
        term.type_line(&format!(
            "(printf '%s\\n' '{quoted}' > {file}) 2>/dev/null && echo \"W{i}$((0+1))=WRITTEN\" || echo \"W{i}$((0+1))=refused\""
        ))
        .await;
        assert_eq!(
            term.after(&format!("W{i}1=")).await,
            "refused",
            "bob's terminal wrote {what} ({file})"
        );
    }
    // Nor can the writable parts be swapped for a link to the data dir.
    term.type_line(&format!(
        "(mv {c}/objects/info {c}/objects/info.old && ln -s {d} {c}/objects/info) 2>/dev/null \
         && echo \"L$((0+1))=LINKED\" || echo \"L$((0+1))=refused\"",
        c = common.display(),
        d = data.display()
    ))
    .await;
    assert_eq!(term.after("L1=").await, "refused", "{}", term.text_seen());
    term.type_line("exit 0").await;
    assert_eq!(term.closed().await.0, 4000, "the shell ended");
    for ((what, path, _), was) in redirects.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(path).ok(),
            was,
            "{what} ({}) changed",
            path.display()
        );
    }

    // A new shell, in a sandbox made after the tries, is confined as the first was.
    let mut term = Term::open_as(&team.server.url, &task_id, 120, 40, Some(token_of("bob"))).await;
    for (i, (what, probe)) in planted.probes().iter().enumerate() {
        term.type_line(&format!(
            "({probe}) >/dev/null 2>&1 && echo \"P{i}$((0+1))=LEAKED\" || echo \"P{i}$((0+1))=denied\""
        ))
        .await;
        assert_eq!(
            term.after(&format!("P{i}1=")).await,
            "denied",
            "bob's second terminal reached {what}: `{probe}`"
        );
    }
    term.type_line(
        "echo two > second.txt && git add second.txt \
         && git -c user.name=bob -c user.email=bob@example.com commit -q -m 'second terminal' \
         && echo \"C$((0+1))=committed\"",
    )
    .await;
    assert_eq!(term.after("C1=").await, "committed", "{}", term.text_seen());
    assert_eq!(head_subject(&worktree), "second terminal");
    drop(term);
    assert!(
        !pwned.exists(),
        "a program configured from inside ran outside"
    );
    team.server.stop().await;
}

/// The CodeBolt probe agent (`fixtures/codebolt/sandbox-probe`).
fn probe_agent() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/codebolt/sandbox-probe");
    format!("codebolt:{}", dir.display())
}

/// A CodeBolt team server: `NODE_PATH` for the agent, and the Python of toolbox servers.
async fn codebolt_team() -> Team {
    let modules = tokio::task::spawn_blocking(byre_fake_models::codeboltjs_node_modules)
        .await
        .expect("install codeboltjs");
    Team::start(move |c| {
        c.agent_env = vec![("NODE_PATH".into(), modules.display().to_string())];
    })
    .await
}

/// Runs one turn of the probe agent as `bob` with `order` (the agent's instructions, JSON) and
/// returns what it reported and its task's worktree.
async fn probe_turn(team: &Team, order: Value) -> (Value, PathBuf) {
    let mut sse: Sse = team.bob.events(&[], None).await;
    let task = team
        .bob
        .create_task_with(
            &team.project_id,
            json!({"title": "probe", "prompt": order.to_string(), "model": probe_agent()}),
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(task["worktree_path"].as_str().unwrap());
    let events = sse
        .until("the probe agent's turn end", |e| {
            e.data["kind"] == "turn.ended" && e.data["task_id"] == task_id.as_str()
        })
        .await;
    let said = events
        .iter()
        .rev()
        .find(|e| e.data["kind"] == "agent.text" && e.data["task_id"] == task_id.as_str())
        .unwrap_or_else(|| panic!("the agent reported nothing: {events:?}"));
    let text = said.data["payload"]["text"].as_str().unwrap();
    let report = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (report, worktree)
}

/// The probes as the agent's instructions: each with its command wrapped to print `LEAKED`
/// or `denied`.
fn orders(planted: &Planted) -> Vec<Value> {
    planted
        .probes()
        .into_iter()
        .map(|(what, probe)| {
            json!({
                "what": what,
                "command": format!("({probe}) >/dev/null 2>&1 && echo LEAKED || echo denied"),
            })
        })
        .collect()
}

/// Asserts every probe of `report[key]` came back `denied`.
fn assert_denied(report: &Value, key: &str, who: &str) {
    let results = report[key].as_array().unwrap_or_else(|| panic!("{report}"));
    assert!(!results.is_empty(), "{report}");
    for r in results {
        assert_eq!(
            r["out"].as_str().map(str::trim),
            Some("denied"),
            "{who} reached {}: {r}",
            r["what"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codebolt_agent_and_its_commands_cannot_read_the_token_file_or_other_tasks_worktrees() {
    let team = codebolt_team().await;
    let planted = team.plant();
    let files = [
        planted.data.join("tokens.toml"),
        planted.data.join("mcp.secret"),
        planted.data.join("mcp-tokens/planted.token"),
        planted.other_worktree_file.clone(),
        planted.checkout.join("README.md"),
        PathBuf::from(format!("/proc/{}/environ", std::process::id())),
    ];
    let order = json!({
        "probes": orders(&planted),
        "reads": files,
        "escape": planted.escape_writes(),
        "commit": "echo ok > from-agent.txt && git add from-agent.txt \
                   && git -c user.name=bob -c user.email=bob@example.com commit -q -m 'from the agent' \
                   && echo committed",
    });
    let (report, worktree) = probe_turn(&team, order).await;
    // Its `sh` commands (`executeCommand`).
    assert_denied(&report, "probes", "a CodeBolt agent's command");
    // The agent process itself (node's own reads).
    let reads = report["reads"].as_array().unwrap();
    assert_eq!(reads.len(), files.len(), "{report}");
    for r in reads {
        assert_eq!(r["read"], false, "the CodeBolt agent read {}", r["path"]);
    }
    assert_eq!(
        report["commit"].as_str().map(str::trim),
        Some("committed"),
        "{report}"
    );
    assert_eq!(head_subject(&worktree), "from the agent");
    planted.assert_nothing_written("a CodeBolt agent");
    let text = report.to_string();
    for (token, _) in TOKENS {
        assert!(!text.contains(token), "a token reached the agent: {text}");
    }
    team.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolbox_server_cannot_read_the_token_file_or_other_tasks_worktrees() {
    let team = codebolt_team().await;
    let planted = team.plant();
    // The server is the project's own (its program must be one the sandbox shows).
    crate::helpers::commit_file(team.checkout.path(), "probe_mcp.py", &probe_server());
    let order = json!({
        "toolbox": {
            "command": crate::helpers::system_python(),
            "args": ["probe_mcp.py"],
        },
        "toolProbes": orders(&planted),
        "toolEscape": planted.escape_writes(),
        "toolCommit": "echo ok > from-toolbox.txt && git add from-toolbox.txt \
                   && git -c user.name=bob -c user.email=bob@example.com commit -q -m 'from the toolbox' \
                   && echo committed",
    });
    let (report, worktree) = probe_turn(&team, order).await;
    assert_eq!(report["configure"]["success"], true, "{report}");
    assert_denied(&report, "toolProbes", "a toolbox server");
    assert_eq!(
        report["toolCommit"].as_str().map(str::trim),
        Some("committed"),
        "{report}"
    );
    assert_eq!(head_subject(&worktree), "from the toolbox");
    planted.assert_nothing_written("a toolbox server");
    let text = report.to_string();
    for (token, _) in TOKENS {
        assert!(!text.contains(token), "a token reached the toolbox: {text}");
    }
    team.server.stop().await;
}

/// The probing MCP server (`fixtures/toolboxes/probe_mcp.py`).
fn probe_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/toolboxes/probe_mcp.py")
}
