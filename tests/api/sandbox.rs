//! The agent sandbox attacked from inside (DESIGN.md invariant 8, `docs/sandbox.md`): on a
//! token-mode server with two users, the real Claude Code and Codex CLIs run a script, through
//! their own shell tools (fake models: `fixtures/fake-model/y_escape.json`,
//! `codex_y_escape.json`), that tries to read the token file, `mcp.secret`, another session's
//! MCP token, another task's worktree, another user's lead dir, the user's own checkout and
//! byre's `/proc/<pid>/environ`, and to write outside its worktree. Each attempt prints a
//! `LEAK-…` marker only if it succeeded; the tool result the CLI sends back to the model must
//! hold none, while writing and committing in its own worktree works. The same script with
//! `--sandbox off` leaks, so the markers do show an escape. A lead runs it from its own lead dir
//! with the same result. A reviewer's write into its copy fails in the kernel (as root too). Without bubblewrap, a token-mode server refuses to start.

use std::path::{Path, PathBuf};

use byre_fake_models::{FakeAnthropic, FakeOpenAi};
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::claude::TURN_WAIT;
use crate::helpers::{until_kind, Api, Sse, TestServer, TOKENS};

/// A token-mode server (`ada`, `bob`) whose agents talk to the two fakes, a project of ada's
/// and ada's event stream.
struct Team {
    server: TestServer,
    claude: FakeAnthropic,
    codex: FakeOpenAi,
    ada: Api,
    project_id: String,
    repo: TempDir,
    sse: Sse,
}

async fn team(codex_script: &str, sandbox: bool, reviews: bool) -> Team {
    let claude = FakeAnthropic::fixture("y_escape").await.expect("fake API");
    let codex = FakeOpenAi::fixture(codex_script).await.expect("fake API");
    let server = crate::helpers::token_server_on_real_clis(&claude, &codex, Vec::new(), |c| {
        c.sandbox = sandbox;
        c.reviews.enabled = reviews;
        c.reviews.codex_model = "gpt-5.5".into();
    })
    .await;
    let ada = server.api_as("ada");
    let (repo, project_id) = ada.basic_project().await;
    let sse = ada.events(&[], None).await;
    Team {
        server,
        claude,
        codex,
        ada,
        project_id,
        repo,
        sse,
    }
}

impl Team {
    /// Creates ada's task saying "Say hello" and waits for its turn to end; (task, session).
    async fn idle_task(&mut self, title: &str, model: &str) -> (Value, String) {
        let task = self
            .ada
            .create_task_with(
                &self.project_id,
                json!({"title": title, "prompt": "Say hello", "model": model}),
            )
            .await;
        let sid = self
            .ada
            .first_session_id(task["id"].as_str().unwrap())
            .await;
        until_kind(&mut self.sse, "turn.ended", TURN_WAIT).await;
        (task, sid)
    }

    fn data(&self) -> &Path {
        self.server.data.path()
    }
}

fn worktree(task: &Value) -> PathBuf {
    PathBuf::from(task["worktree_path"].as_str().unwrap())
}

/// Plants what an escaping agent would want, and returns the escape script: each attempt
/// echoes `LEAK-<what>` only when it works; then a write and commit in the agent's own
/// worktree (`COMMIT-OK`), and `SCRIPT-DONE`.
fn plant(t: &Team, victim: &Value, victim_session: &str) -> String {
    let data = t.data();
    std::fs::write(
        data.join("tokens.toml"),
        format!("[tokens]\n\"{}\" = \"bob\"\n", TOKENS[1].0),
    )
    .unwrap();
    // byre removed the old derivation secret at start-up; plant one to be stolen.
    std::fs::write(data.join("mcp.secret"), "planted secret").unwrap();
    std::fs::write(worktree(victim).join("victim.txt"), "victim's work").unwrap();
    let bob_lead = byre_agents::runtime::lead_dir(data, "bob");
    std::fs::create_dir_all(&bob_lead).unwrap();
    std::fs::write(bob_lead.join("notes.md"), "bob's notes").unwrap();
    std::fs::write(t.repo.path().join("checkout.txt"), "ada's own checkout").unwrap();
    let token_file = data
        .join("mcp-tokens")
        .join(format!("{victim_session}.token"));
    assert!(token_file.is_file(), "the victim session has a token");
    let read = |what: &str, path: &Path| {
        format!(
            "cat '{}' >/dev/null 2>&1 && echo LEAK-{what}\n",
            path.display()
        )
    };
    let write = |what: &str, path: &Path| {
        format!(
            "echo x > '{}' 2>/dev/null && test -s '{}' && echo WROTE-{what}\n",
            path.display(),
            path.display()
        )
    };
    let mut script = String::new();
    script += &read("tokens-file", &data.join("tokens.toml"));
    script += &read("mcp-secret", &data.join("mcp.secret"));
    script += &read("other-mcp-token", &token_file);
    script += &format!(
        "ls '{}' >/dev/null 2>&1 && echo LEAK-token-dir\n",
        data.join("mcp-tokens").display()
    );
    script += &read("log", &data.join("byre.redb"));
    script += &read("other-worktree", &worktree(victim).join("victim.txt"));
    script += &read("other-lead", &bob_lead.join("notes.md"));
    script += &read("user-checkout", &t.repo.path().join("checkout.txt"));
    script += &read(
        "byre-environ",
        Path::new(&format!("/proc/{}/environ", std::process::id())),
    );
    // Writes outside the worktree: on the host these files must not appear.
    script += &write("data-dir", &data.join("escaped.txt"));
    script += &write("checkout", &t.repo.path().join("escaped.txt"));
    script += &write("other-worktree", &worktree(victim).join("escaped.txt"));
    script += "cat /run/byre/mcp-token >/dev/null 2>&1 && echo OWN-TOKEN-READABLE\n";
    script += "echo mine > mine.txt && git add mine.txt && \
               git -c user.name=Agent -c user.email=agent@example.com commit -q -m 'MINE-COMMIT' && \
               echo COMMIT-OK\n";
    script += "echo SCRIPT-DONE\n";
    script
}

/// The text of every request the fake got that holds the script's end, as JSON.
fn results_with_done(requests: Vec<byre_fake_models::RecordedRequest>) -> String {
    let found: Vec<String> = requests
        .iter()
        .filter_map(|r| r.body.as_ref().map(Value::to_string))
        .filter(|b| b.contains("SCRIPT-DONE"))
        .collect();
    assert!(
        !found.is_empty(),
        "the script ran and its result reached the model"
    );
    found.join("\n")
}

/// ada's agent (on `model`) runs the escape script in a task; the tool result as the model saw
/// it (every request holding `SCRIPT-DONE`).
async fn escape(t: &mut Team, model: &str) -> (String, Value, Value) {
    let (victim, victim_session) = t.idle_task("victim", model).await;
    let (attacker, attacker_session) = t.idle_task("attacker", model).await;
    let script = plant(t, &victim, &victim_session);
    std::fs::write(worktree(&attacker).join("escape.sh"), script).unwrap();
    let r = t
        .ada
        .call(
            "sendMessage",
            &[&attacker_session],
            &[],
            Some(json!({"text": "Run the escape script"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    until_kind(&mut t.sse, "turn.ended", TURN_WAIT).await;
    let seen = if model.starts_with("gpt") {
        results_with_done(t.codex.responses_requests())
    } else {
        results_with_done(t.claude.messages_requests())
    };
    (seen, attacker, victim)
}

/// What the sandbox must hold, on the host and in what the model saw.
fn assert_confined(t: &Team, seen: &str, attacker: &Value, victim: &Value) {
    let leaks: Vec<&str> = seen
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("LEAK-"))
        .collect();
    assert_eq!(leaks, Vec::<&str>::new(), "nothing escaped: {seen}");
    assert!(!seen.contains(TOKENS[1].0) && !seen.contains(TOKENS[0].0));
    assert!(seen.contains("COMMIT-OK"), "its own worktree works: {seen}");
    assert!(
        seen.contains("OWN-TOKEN-READABLE"),
        "its own MCP token is there for its byre mcp: {seen}"
    );
    // A write outside its worktree fails, or lands in its private /tmp: never on the host.
    for outside in [
        t.data().join("escaped.txt"),
        t.repo.path().join("escaped.txt"),
        worktree(victim).join("escaped.txt"),
    ] {
        assert!(!outside.exists(), "{} written", outside.display());
    }
    let log = crate::helpers::git(&worktree(attacker), &["log", "--format=%s"]);
    assert!(
        log.contains("MINE-COMMIT"),
        "the agent's commit is on its branch: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_agent_cannot_reach_secrets_other_tasks_or_users_but_commits_in_its_worktree()
{
    let mut t = team("codex_y_escape", true, false).await;
    let status = t.ada.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["sandbox"], true, "{:?}", status.body);
    let (seen, attacker, victim) = escape(&mut t, "sonnet").await;
    assert_confined(&t, &seen, &attacker, &victim);
    t.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_agent_cannot_reach_secrets_other_tasks_or_users_but_commits_in_its_worktree() {
    let mut t = team("codex_y_escape", true, false).await;
    let (seen, attacker, victim) = escape(&mut t, "gpt-5.5").await;
    assert_confined(&t, &seen, &attacker, &victim);
    t.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_agent_works_in_its_own_lead_dir_and_reaches_no_other_users_or_tasks() {
    let mut t = team("codex_y_escape", true, false).await;
    let (victim, victim_session) = t.idle_task("victim", "sonnet").await;
    let script = plant(&t, &victim, &victim_session);
    let own = byre_agents::runtime::lead_dir(t.data(), "ada");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("escape.sh"), script).unwrap();
    let r = t
        .ada
        .call(
            "messageLead",
            &[],
            &[],
            Some(json!({"text": "Run the escape script"})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    until_kind(&mut t.sse, "turn.ended", TURN_WAIT).await;
    let seen = results_with_done(t.claude.messages_requests());
    assert!(!seen.contains("LEAK-"), "nothing escaped: {seen}");
    assert!(seen.contains("OWN-TOKEN-READABLE"), "{seen}");
    assert!(
        own.join("mine.txt").is_file(),
        "it writes its own directory (not a repository: no commit there)"
    );
    assert!(!worktree(&victim).join("escaped.txt").exists());
    t.server.stop().await;
}

/// The control: the same script, the sandbox off, reaches everything, so the markers above
/// would show an escape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sandbox_off_the_same_agent_reads_every_secret() {
    let mut t = team("codex_y_escape", false, false).await;
    let status = t.ada.call("getStatus", &[], &[], None).await;
    assert_eq!(status.body["sandbox"], false);
    let (seen, _, victim) = escape(&mut t, "sonnet").await;
    for leak in [
        "LEAK-tokens-file",
        "LEAK-mcp-secret",
        "LEAK-other-mcp-token",
        "LEAK-other-worktree",
        "LEAK-other-lead",
        "LEAK-user-checkout",
        "LEAK-byre-environ",
        "WROTE-checkout",
    ] {
        assert!(seen.contains(leak), "{leak} unconfined: {seen}");
    }
    assert!(worktree(&victim).join("escaped.txt").exists());
    t.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_cannot_write_its_copy_but_writes_its_home_and_tmp() {
    let mut t = team("codex_y_escape", true, true).await;
    let task = t
        .ada
        .create_task_with(
            &t.project_id,
            json!({"title": "reviewed", "prompt": "Please create hello.txt"}),
        )
        .await;
    until_kind(&mut t.sse, "review.done", TURN_WAIT).await;
    let seen: Vec<String> = t
        .codex
        .responses_requests()
        .iter()
        .filter_map(|r| r.body.as_ref().map(Value::to_string))
        .filter(|b| b.contains("REVIEW-SCRIPT-2DONE"))
        .collect();
    assert!(!seen.is_empty(), "the reviewer's command ran");
    let seen = seen.join("\n");
    assert!(
        !seen.contains("REVIEW-2WROTE"),
        "its copy is read-only: {seen}"
    );
    assert!(seen.contains("Read-only file system"), "{seen}");
    assert!(
        seen.contains("HOME-2OK") && seen.contains("TMP-2OK"),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree(&task).join("hello.txt")).unwrap(),
        "hello from the fake model\n"
    );
    t.server.stop().await;
}

/// `byre serve` with `PATH` holding git but no `bwrap`, and `extra` flags; (exit status or
/// still running, stderr).
fn serve_without_bwrap(auth: &[&str], extra: &[&str]) -> (Option<i32>, String) {
    use std::io::{BufRead, Read};
    let data = TempDir::new().unwrap();
    let tokens = data.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!("[tokens]\n\"{}\" = \"ada\"\n", TOKENS[0].0),
    )
    .unwrap();
    let bin = TempDir::new().unwrap();
    std::os::unix::fs::symlink(which("git"), bin.path().join("git")).unwrap();
    let mut child = std::process::Command::new(crate::process::byre_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
        .arg(&tokens)
        .args(auth)
        .args(extra)
        .arg("--data")
        .arg(data.path())
        .env("PATH", bin.path())
        .env("BYRE_LOG", "warn")
        .env_remove("BYRE_SANDBOX")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("byre runs");
    let mut line = String::new();
    let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    let code = if line.contains("listening") {
        let _ = child.kill();
        let _ = child.wait();
        None
    } else {
        child.wait().unwrap().code()
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (code, stderr)
}

#[test]
fn without_bubblewrap_token_mode_refuses_naming_sandbox_off_and_local_mode_warns() {
    let (code, stderr) = serve_without_bwrap(&["--auth", "token"], &[]);
    assert_eq!(code, Some(2), "token mode refuses: {stderr}");
    assert!(
        stderr.contains("bwrap") && stderr.contains("--sandbox off"),
        "{stderr}"
    );
    let (code, stderr) = serve_without_bwrap(&["--auth", "tailscale"], &[]);
    assert_eq!(code, Some(2), "tailscale mode refuses: {stderr}");
    let (code, stderr) = serve_without_bwrap(&["--auth", "token"], &["--sandbox", "off"]);
    assert_eq!(code, None, "--sandbox off starts: {stderr}");
    assert!(
        stderr.contains("every agent can act as every user"),
        "{stderr}"
    );
    let (code, stderr) = serve_without_bwrap(&["--auth", "local", "--login", "ada"], &[]);
    assert_eq!(code, None, "local mode starts: {stderr}");
    assert!(stderr.contains("without a sandbox"), "{stderr}");
}

fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} on PATH"))
}
