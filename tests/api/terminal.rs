//! `getTaskTerminal`: a task's login shell on a pty over a WebSocket (a real shell, a real
//! socket client). Commands print markers computed by the shell (`$((40+2))`), so the echo of
//! the typed line never matches what the test waits for.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::{until_kind, Api, TestServer, WAIT};
use crate::process::ServeProcess;

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One viewer's socket and everything it received.
pub(crate) struct Term {
    pub(crate) ws: Socket,
    /// Every output byte so far.
    seen: Vec<u8>,
}

impl Term {
    /// Opens task `task_id`'s terminal at `cols`×`rows` on the server at `base`.
    pub(crate) async fn open(base: &str, task_id: &str, cols: u16, rows: u16) -> Term {
        Term::open_as(base, task_id, cols, rows, None).await
    }

    /// [`Term::open`] with `Authorization: Bearer <token>` (a team server's user).
    pub(crate) async fn open_as(
        base: &str,
        task_id: &str,
        cols: u16,
        rows: u16,
        token: Option<&str>,
    ) -> Term {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let url = format!(
            "{}/api/tasks/{task_id}/terminal?cols={cols}&rows={rows}",
            base.replacen("http://", "ws://", 1)
        );
        let mut request = url.into_client_request().expect("a WebSocket request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}").parse().expect("a header value"),
            );
        }
        let (ws, resp) = tokio_tungstenite::connect_async(request)
            .await
            .expect("the terminal's WebSocket opens");
        assert_eq!(resp.status().as_u16(), 101);
        Term {
            ws,
            seen: Vec::new(),
        }
    }

    /// Types `line` and Enter (a binary message).
    pub(crate) async fn type_line(&mut self, line: &str) {
        let bytes = format!("{line}\r").into_bytes();
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .expect("send input");
    }

    /// Sends a text message (a resize).
    pub(crate) async fn text(&mut self, text: &str) {
        self.ws
            .send(Message::Text(text.to_owned().into()))
            .await
            .expect("send a text message");
    }

    /// Everything received so far, as text.
    pub(crate) fn text_seen(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads output until the text received holds `re_prefix` followed by a line's rest;
    /// returns that rest (up to the end of its line), trimmed.
    pub(crate) async fn after(&mut self, prefix: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let text = self.text_seen();
            if let Some(i) = text.find(prefix) {
                let rest = &text[i + prefix.len()..];
                if let Some(end) = rest.find(['\r', '\n']) {
                    return rest[..end].trim().to_owned();
                }
            }
            let msg = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no `{prefix}` in time; the terminal showed {text:?}"));
            match msg {
                Some(Ok(Message::Binary(b))) => self.seen.extend_from_slice(&b),
                Some(Ok(Message::Text(t))) => panic!("the server sent text {t:?}"),
                Some(Ok(Message::Close(c))) => {
                    panic!("closed ({c:?}) before `{prefix}`; the terminal showed {text:?}")
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("socket error before `{prefix}`: {e}"),
                None => panic!("socket ended before `{prefix}`"),
            }
        }
    }

    /// Runs `echo "<tag>$((1+1)) <expr>"` and returns what `<expr>` printed.
    pub(crate) async fn eval(&mut self, tag: &str, expr: &str) -> String {
        self.type_line(&format!("echo \"{tag}$((1+1)) {expr}\""))
            .await;
        self.after(&format!("{tag}2 ")).await
    }

    /// Reads until the server closes; its close code and reason.
    pub(crate) async fn closed(&mut self) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .expect("the server closes the socket in time");
            match msg {
                Some(Ok(Message::Close(Some(frame)))) => {
                    return (u16::from(frame.code), frame.reason.to_string())
                }
                Some(Ok(Message::Close(None))) | None => return (1005, String::new()),
                Some(Ok(Message::Binary(b))) => self.seen.extend_from_slice(&b),
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("socket error instead of a close: {e}"),
            }
        }
    }
}

/// Whether process `pid` runs (exists and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The host's pid of a process of task `task_id`'s terminal, from its pid as the terminal
/// prints it (`$$`, `$!`: a pid of the sandbox's own pid namespace).
/// A process the shell has just forked may not show yet (or be between `fork` and `exec`, its
/// `/proc` files unreadable for a moment): look again for a few seconds before giving up.
fn on_host(task_id: &str, inner: &str) -> u32 {
    let n: u32 = inner.parse().expect("a pid");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = crate::helpers::host_pid(byre_terminal::TERMINAL_ENV, task_id, n, "") {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no process {inner} of task {task_id}'s terminal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The session `pid` is in (its stat's sixth field): for a task's shell, the process byre
/// started for it (`bwrap`, or the shell itself with the sandbox off), whose pid the
/// `terminal.*` events record as `shell_pid`.
fn session_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process runs");
    let (_, rest) = stat.rsplit_once(')').expect("a stat line");
    rest.split_whitespace()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .expect("a session id")
}

/// Waits until `pid` no longer runs; panics after [`WAIT`].
async fn gone(pid: u32, after: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "shell {pid} still runs {after}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A project and an active task on `api`; (repo dir to keep, task id).
async fn task(api: &Api) -> (tempfile::TempDir, String) {
    let (repo, project) = api.basic_project().await;
    let task = api.create_task(&project, "Terminal").await;
    (repo, task["id"].as_str().unwrap().to_owned())
}

/// The terminal events of a task, from `listTaskEvents`.
async fn terminal_events(api: &Api, task_id: &str) -> Vec<Value> {
    let r = api.call("listTaskEvents", &[task_id], &[], None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("terminal."))
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_gets_the_scrollback_exactly_once_and_the_same_shell() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut sse = api.events(&[("task_id", task_id.as_str())], None).await;

    let mut first = Term::open(&server.url, &task_id, 80, 24).await;
    let pid = first.eval("one", "$$").await;
    let host = on_host(&task_id, &pid);
    let session = session_of(host);
    assert_eq!(first.eval("port", "$PORT").await, {
        let t = api.call("getTask", &[&task_id], &[], None).await;
        t.body["port_base"].to_string()
    });
    let worktree = first.eval("cwd", "$(pwd -P)").await;
    assert!(
        worktree.ends_with(&task_id),
        "the shell starts in the task's worktree: {worktree}"
    );
    drop(first);
    until_kind(&mut sse, "terminal.closed", WAIT).await;

    let mut second = Term::open(&server.url, &task_id, 80, 24).await;
    let again = second.eval("two", "$$").await;
    assert_eq!(again, pid, "the reconnect finds the same shell");
    let shown = second.text_seen();
    assert_eq!(
        shown.matches(&format!("one2 {pid}")).count(),
        1,
        "the scrollback comes exactly once: {shown:?}"
    );
    assert!(alive(host));

    let events = terminal_events(&api, &task_id).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["terminal.opened", "terminal.closed", "terminal.opened"]
    );
    assert_eq!(events[0]["payload"]["started"], true);
    assert_eq!(events[0]["payload"]["shell_pid"], session);
    assert_eq!(events[0]["payload"]["login"], "ada");
    assert_eq!(events[1]["payload"]["reason"], "client");
    assert_eq!(events[2]["payload"]["started"], false);
    assert_eq!(events[2]["payload"]["shell_pid"], session);

    drop(second);
    let data = server.stop().await;
    gone(host, "after byre stopped").await;
    // The stop recorded the shell's end itself (a restart finds nothing left to record).
    let server = TestServer::spawn_on(data, crate::helpers::local_ada()).await;
    let events = terminal_events(&server.api(), &task_id).await;
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "terminal.exited");
    assert_eq!(last["payload"]["cause"], "server_stopping");
    assert_eq!(last["payload"]["shell_pid"], session);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_changes_stty_size_and_a_bad_one_is_ignored() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut term = Term::open(&server.url, &task_id, 80, 24).await;
    assert_eq!(term.eval("a", "$(stty size)").await, "24 80");
    term.text(r#"{"cols":100,"rows":30}"#).await;
    assert_eq!(term.eval("b", "$(stty size)").await, "30 100");
    for bad in ["nonsense", r#"{"cols":0,"rows":30}"#, r#"{"cols":100}"#] {
        term.text(bad).await;
    }
    assert_eq!(
        term.eval("c", "$(stty size)").await,
        "30 100",
        "invalid resizes are ignored and the socket stays open"
    );
    // A second viewer types into the same shell and sees what the first did.
    let mut other = Term::open(&server.url, &task_id, 80, 24).await;
    assert_eq!(other.eval("d", "$(stty size)").await, "30 100");
    assert_eq!(
        term.after("d2 ").await,
        "30 100",
        "both viewers see the output"
    );
    drop((term, other));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_3_closes_every_socket_with_4000_and_3_and_the_next_open_starts_a_new_shell() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut first = Term::open(&server.url, &task_id, 80, 24).await;
    let pid = on_host(&task_id, &first.eval("p", "$$").await);
    let session = session_of(pid);
    let mut watcher = Term::open(&server.url, &task_id, 80, 24).await;
    watcher.after("p2 ").await;
    first.type_line("exit 3").await;
    assert_eq!(first.closed().await, (4000, "3".into()));
    assert_eq!(watcher.closed().await, (4000, "3".into()));
    gone(pid, "after exit").await;

    let mut next = Term::open(&server.url, &task_id, 80, 24).await;
    let new_pid = on_host(&task_id, &next.eval("q", "$$").await);
    assert_ne!(new_pid, pid, "a new shell");
    assert!(
        !next.text_seen().contains("p2 "),
        "a new shell starts with an empty scrollback"
    );
    let events = terminal_events(&api, &task_id).await;
    let exited = events
        .iter()
        .find(|e| e["kind"] == "terminal.exited")
        .expect("the exit is an event");
    assert_eq!(exited["payload"]["status"], 3);
    assert_eq!(exited["payload"]["cause"], "exited");
    assert_eq!(exited["payload"]["shell_pid"], session);
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "terminal.opened");
    assert_eq!(last["payload"]["started"], true);
    drop(next);
    server.stop().await;
    gone(new_pid, "after byre stopped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_and_what_it_started_die_with_the_task() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut term = Term::open(&server.url, &task_id, 80, 24).await;
    let pid = on_host(&task_id, &term.eval("p", "$$").await);
    // A job in a process group of its own (job control) that ignores the hangup: only its
    // BYRE_TERMINAL mark (or, sandboxed, the end of its pid namespace) finds it.
    term.type_line("nohup sleep 600 >/dev/null 2>&1 &").await;
    let job = on_host(&task_id, &term.eval("j", "$!").await);
    assert!(alive(job));
    let r = api.call("discardTask", &[&task_id], &[], None).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let (code, reason) = term.closed().await;
    assert_eq!(code, 4000);
    assert_eq!(reason, "137", "killed by SIGKILL: 128 + 9");
    gone(pid, "after the task was discarded").await;
    gone(job, "after the task was discarded").await;
    let events = terminal_events(&api, &task_id).await;
    let exited = events
        .iter()
        .find(|e| e["kind"] == "terminal.exited")
        .unwrap();
    assert_eq!(exited["payload"]["cause"], "task_closed");
    let again = api
        .call(
            "getTaskTerminal",
            &[&task_id],
            &[("cols", "80"), ("rows", "24")],
            None,
        )
        .await;
    assert_eq!(again.status, 409, "a closed task has no terminal");
    server.stop().await;
}

/// (task id, query, expected status).
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], u16);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_task_terminal_refuses_bad_sizes_unknown_tasks_and_plain_requests() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let cases: [Case; 8] = [
        (task_id.as_str(), &[("cols", "0"), ("rows", "24")], 400),
        (task_id.as_str(), &[("cols", "80"), ("rows", "-1")], 400),
        (task_id.as_str(), &[("cols", "eighty"), ("rows", "24")], 400),
        (task_id.as_str(), &[("cols", "70000"), ("rows", "24")], 400),
        (task_id.as_str(), &[("rows", "24")], 400),
        (task_id.as_str(), &[("cols", "80"), ("rows", "24")], 400),
        (
            "00000000-0000-0000-0000-000000000000",
            &[("cols", "80"), ("rows", "24")],
            404,
        ),
        (
            "00000000-0000-0000-0000-000000000000",
            &[("cols", "0"), ("rows", "24")],
            400,
        ),
    ];
    for (i, (task, query, status)) in cases.iter().enumerate() {
        let r = api.call("getTaskTerminal", &[task], query, None).await;
        assert_eq!(r.status, *status, "case {i} {query:?}: {:?}", r.body);
        assert!(!r.message().is_empty(), "case {i} has a message");
    }
    // A page of another site may not open a shell (WebSockets are not bound by CORS); the
    // server's own origin may.
    let evil = Api::for_url(&server.url).with_header("Origin", "http://evil.example");
    let r = evil
        .call(
            "getTaskTerminal",
            &[&task_id],
            &[("cols", "80"), ("rows", "24")],
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    let own = Api::for_url(&server.url).with_header("Origin", &server.url);
    let r = own
        .call(
            "getTaskTerminal",
            &[&task_id],
            &[("cols", "80"), ("rows", "24")],
            None,
        )
        .await;
    assert_eq!(
        r.status, 400,
        "its own origin passes (then: no upgrade): {:?}",
        r.body
    );
    assert!(
        terminal_events(&api, &task_id).await.is_empty(),
        "a refused open starts nothing"
    );
    server.stop().await;
}

/// Without the sandbox (which ends its shells with byre: the next test), only the next start
/// can end what a killed byre left: this proves the reaper that does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shell_survives_a_kill_9_of_byre_past_the_next_start() {
    let data = tempfile::TempDir::new().unwrap();
    let unconfined = [("BYRE_SANDBOX", "off")];
    let byre = ServeProcess::start_with_env(data.path(), &unconfined);
    let api = Api::for_url(&byre.url);
    let (_repo, task_id) = task(&api).await;
    let mut term = Term::open(&byre.url, &task_id, 80, 24).await;
    let pid = on_host(&task_id, &term.eval("p", "$$").await);
    // The pty's hangup may end the shell when byre dies; a job that ignores it lives on.
    term.type_line("nohup sleep 600 >/dev/null 2>&1 &").await;
    let job = on_host(&task_id, &term.eval("j", "$!").await);
    byre.kill_9();
    drop(term);
    assert!(
        alive(job),
        "kill -9 of byre leaves a job that ignores SIGHUP running"
    );

    let byre = ServeProcess::start_with_env(data.path(), &unconfined);
    gone(pid, "after the next start").await;
    gone(job, "after the next start").await;
    let api = Api::for_url(&byre.url);
    let events = terminal_events(&api, &task_id).await;
    let exited = events.last().expect("terminal events");
    assert_eq!(exited["kind"], "terminal.exited");
    assert_eq!(exited["payload"]["cause"], "server_restarted");
    assert_eq!(exited["payload"]["shell_pid"], pid);
    // And the next open starts a new shell.
    let mut term = Term::open(&byre.url, &task_id, 80, 24).await;
    let new_pid = on_host(&task_id, &term.eval("n", "$$").await);
    assert_ne!(new_pid, pid);
    drop(term);
    byre.terminate();
    gone(new_pid, "after byre stopped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_of_byre_takes_its_sandboxed_shells_and_their_jobs_down_with_it() {
    let data = tempfile::TempDir::new().unwrap();
    let byre = ServeProcess::start(data.path());
    let api = Api::for_url(&byre.url);
    let (_repo, task_id) = task(&api).await;
    let mut term = Term::open(&byre.url, &task_id, 80, 24).await;
    let pid = on_host(&task_id, &term.eval("p", "$$").await);
    assert_ne!(session_of(pid), pid, "the shell runs under bwrap");
    term.type_line("nohup sleep 600 >/dev/null 2>&1 &").await;
    let job = on_host(&task_id, &term.eval("j", "$!").await);
    assert!(alive(job));
    // No restart: `--die-with-parent` ends bwrap with byre, and with it the shell's pid
    // namespace, every process in it.
    byre.kill_9();
    drop(term);
    gone(pid, "after byre was killed").await;
    gone(job, "after byre was killed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_answers_no_ping_is_closed_and_the_shell_runs_on() {
    let server = TestServer::spawn_configured(
        tempfile::TempDir::new().unwrap(),
        crate::helpers::local_ada(),
        |c| c.terminal_ping = Duration::from_millis(200),
    )
    .await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut sse = api.events(&[("task_id", task_id.as_str())], None).await;
    // A client that never reads never answers a ping: a half-open connection, as far as the
    // server can tell.
    let silent = Term::open(&server.url, &task_id, 80, 24).await;
    let closed = until_kind(&mut sse, "terminal.closed", WAIT).await;
    let closed = &closed.last().unwrap().data;
    assert_eq!(closed["payload"]["reason"], "unresponsive");
    drop(silent);
    // A client that reads answers the pings and stays; it finds the same shell.
    let mut term = Term::open(&server.url, &task_id, 80, 24).await;
    let first = terminal_events(&api, &task_id).await[0]["payload"]["shell_pid"].clone();
    let pid = on_host(&task_id, &term.eval("p", "$$").await);
    assert_eq!(session_of(pid).to_string(), first.to_string());
    server.stop().await;
}

/// The size of the pty the shell `pid` has on stdin, as `stty size` prints it ("rows cols").
fn pty_size(pid: u32) -> String {
    let pts = std::fs::read_link(format!("/proc/{pid}/fd/0")).expect("the shell's pts");
    let out = std::process::Command::new("stty")
        .arg("-F")
        .arg(&pts)
        .arg("size")
        .output()
        .expect("stty runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_reads_no_input_stalls_neither_the_sockets_nor_resizes() {
    let server = TestServer::spawn().await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut sse = api.events(&[("task_id", task_id.as_str())], None).await;
    let mut typist = Term::open(&server.url, &task_id, 80, 24).await;
    let pid = on_host(&task_id, &typist.eval("p", "$$").await);
    // Raw mode and a program that reads nothing: the pty takes a few KiB, then no more.
    typist
        .type_line("stty raw -echo; echo \"ra$((1+1))w\"; sleep 600")
        .await;
    typist.after("ra2w").await;
    let paste = vec![b'#'; 64 * 1024];
    tokio::time::timeout(WAIT, async {
        for _ in 0..96 {
            typist
                .ws
                .send(Message::Binary(paste.clone().into()))
                .await
                .expect("send input");
        }
    })
    .await
    .expect("the server keeps reading input the pty does not take");
    // Another viewer's resize reaches the pty while that input waits.
    let mut other = Term::open(&server.url, &task_id, 80, 24).await;
    other.text(r#"{"cols":91,"rows":33}"#).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while pty_size(pid) != "33 91" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pty is still {}",
            pty_size(pid)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The typist's close is answered while its input still waits, and recorded.
    typist.ws.close(None).await.expect("send a close");
    typist.closed().await;
    let closed = until_kind(&mut sse, "terminal.closed", WAIT).await;
    assert_eq!(closed.last().unwrap().data["payload"]["reason"], "client");
    assert!(alive(pid), "the shell runs on");
    drop(other);
    server.stop().await;
    gone(pid, "after byre stopped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_reads_no_output_is_closed_as_unresponsive() {
    let server = TestServer::spawn_configured(
        tempfile::TempDir::new().unwrap(),
        crate::helpers::local_ada(),
        |c| c.terminal_ping = Duration::from_millis(200),
    )
    .await;
    let api = server.api();
    let (_repo, task_id) = task(&api).await;
    let mut sse = api.events(&[("task_id", task_id.as_str())], None).await;
    let mut term = Term::open(&server.url, &task_id, 80, 24).await;
    term.eval("p", "$$").await;
    // More output than the socket's buffers hold, to a viewer that then reads nothing (and so
    // answers no ping): byre's sends to it stop completing.
    term.type_line("head -c 30000000 /dev/zero | tr '\\0' x")
        .await;
    // Closed as unresponsive (its sends time out, or its pings go unanswered) or as lagging
    // (its queue overflowed first); either way it leaves, though it can take no close frame.
    let closed = until_kind(&mut sse, "terminal.closed", WAIT).await;
    let reason = closed.last().unwrap().data["payload"]["reason"].clone();
    assert!(reason == "unresponsive" || reason == "lagging", "{reason}");
    drop(term);
    server.stop().await;
}
