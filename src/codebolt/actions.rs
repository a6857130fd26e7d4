//! What CodeBolt requests do, acting on the agent's task (PROTOCOL.md §4's families):
//!
//! - fs: inside the worktree only, every path checked as the worktree views check theirs
//!   (`git::views::WorkPath`: no `..`, no `.git`, symlinks resolved and proven inside);
//! - git: on the task's worktree and branch (status, add, commit, logs, diff); pull merges the
//!   default branch in and push sends the task's branch to origin, never forced; all through
//!   `app::agent_git` ([`git`]); init (the worktree is a repository already), clone, and branch
//!   or checkout of another branch are refused;
//! - terminal: the command line through `sh -c` in the worktree, in the agent's sandbox, in
//!   its own process group with a minimal environment (the agent's own shell command, as
//!   CodeBolt runs it: `byre_agents::codeboltjs::commands`);
//!   `executeCommandWithStream` streams `commandOutput`/`commandError` and ends with
//!   `commandFinish`; `sendInterruptToTerminal` kills the running commands;
//! - llm: `inference` is sent to the OpenAI-compatible `$OPENAI_BASE_URL/chat/completions`
//!   with `$OPENAI_API_KEY`; the reply's `completion` is that chat completion;
//! - memory, state, todos (`taskEvent`) and vector db: durable, per task, folded from the log
//!   (`byre_projections::agent_memory`); a write is answered once its `tool.call` is logged
//!   ([`store_write`]); tokenizer and history: kept per session while it lives (`byre_agents::codeboltjs::Store`);
//! - chat: `getChatHistory` from the session's messages;
//! - chat: `waitforReply`/`confirmationRequest` become inbox questions; the answer is the reply;
//! - mcp: byre's agent tools as the toolbox `byre`, beside the project's configured MCP
//!   toolboxes (`app::toolboxes`; [`mcp`]);
//! - code utilities: definitions and all files as Markdown from tree-sitter parsers, problem
//!   matchers over compiler and linter output (byre-code; [`code`]);
//! - agent: the CodeBolt agents byre can run, and `startAgent` as a new task
//!   ([`super::agents`]);
//! - browser and crawler: on byre's headless Chromium, one context per session, URLs limited
//!   to the allow-list ([`byre_app::browser`], replies shaped in [`browser`]);
//! - the rest answer at once with `success: false` and an `error` saying so: never a hang.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use byre_agents::codeboltjs::frames::{text, Request};
use byre_agents::codeboltjs::{Link, Llm, Store};
use byre_app::inbox::Waited;
use byre_process::runner::Line;
use fs::fs_action;
use git::git_action;
use mcp::mcp_action;
pub use stores::store_write;
use stores::{link_store_action, store_read};

mod browser;
mod code;
mod fs;
mod git;
mod mcp;
mod stores;

/// What serving a request needs.
pub struct Ctx {
    /// The session's link.
    pub link: Arc<Link>,
    /// The application layer's context (`startAgent` creates tasks and sessions, `executeTool`
    /// calls byre's tools, through `byre_app`).
    pub app: actix_web::web::Data<byre_app::Ctx>,
    /// Headless Chromium, for the browser and crawler families.
    pub browsers: Arc<byre_browser::Browsers>,
    /// The sessions' toolbox servers, for the mcp family.
    pub toolboxes: Arc<byre_toolboxes::Toolboxes>,
    /// Frames to the agent.
    pub out: mpsc::UnboundedSender<String>,
    /// Where `inference` goes.
    pub llm: Llm,
    /// Turns true when the socket closed.
    pub closed: tokio::sync::watch::Sender<bool>,
}

/// Most bytes of frames one streamed command sends (its lines as `commandOutput` and
/// `commandError`).
const STREAM_MAX: usize = 16 * 1024 * 1024;
/// Most bytes of a diff the agent is sent.
const MAX_OUTPUT: usize = 1024 * 1024;

pub(super) fn err(msg: impl Into<String>) -> Value {
    let m = msg.into();
    json!({"success": false, "error": m, "message": m})
}

/// The reply fields of one request (`type` and `requestId` are added by the endpoint). A
/// field `__type` overrides the reply type (a failed `executeCommand` answers `commandError`);
/// `__streamed` says the frames were sent already.
pub async fn serve(ctx: &Arc<Ctx>, req: &Request) -> Value {
    let f = &req.frame;
    let msg = &f["message"];
    let ty = req.ty.as_str();
    let action = req.action.as_str();
    match ty {
        "fsEvent" if action == "listCodeDefinitionNames" => {
            code::list_code_definition_names(ctx.link.worktree.clone(), msg).await
        }
        "fsEvent" => {
            let root = ctx.link.worktree.clone();
            let (action, msg) = (action.to_owned(), msg.clone());
            tokio::task::spawn_blocking(move || fs_action(&root, &action, &msg))
                .await
                .unwrap_or_else(|e| err(format!("fs action failed: {e}")))
        }
        "gitEvent" => git_action(ctx, action, f).await,
        "executeCommand" | "executeCommandRunUntilError" => {
            let ran = ctx.link.run_command(&text(msg)).await;
            let (code, stdout, stderr) = (ran.code, ran.stdout, ran.stderr);
            let ok = code == Some(0);
            let mut v = json!({"response": if ok { stdout.clone() } else { format!("{stdout}{stderr}") }, "output": stdout, "stdout": stdout, "stderr": stderr, "exitCode": code, "success": ok});
            if ty == "executeCommand" && !ok {
                v["__type"] = "commandError".into();
            }
            v
        }
        "executeCommandWithStream" => {
            stream_command(ctx.clone(), req.clone(), text(msg));
            json!({"__streamed": true})
        }
        "sendInterruptToTerminal" => {
            let n = ctx.link.kill_terminals();
            json!({"message": format!("interrupted {n} command(s)")})
        }
        "inference" => inference(&ctx.llm, msg).await,
        "getChatHistory" => {
            let h = ctx
                .link
                .store
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .history
                .clone();
            json!({"chats": h, "messages": h})
        }
        "waitforReply" | "confirmationRequest" => ask_human(ctx, ty, f).await,
        t if byre_projections::agent_memory::is_store_request(t) => store_read(ctx, req),
        "tokenizerEvent" | "chatSummaryEvent" => {
            let mut store = ctx.link.store.lock().unwrap_or_else(|e| e.into_inner());
            link_store_action(&mut store, ty, action, f)
        }
        "debugEvent" if action == "addLog" => json!({"message": "logged"}),
        "settingEvent" | "projectEvent" => project_action(&ctx.link.worktree, action),
        "codebolttools" => mcp_action(ctx, action, f).await,
        "codeEvent" if action == "getAllFilesMarkdown" => {
            code::all_files_markdown(ctx.link.worktree.clone()).await
        }
        "codeEvent" => code::matcher_action(action, f),
        "agentEvent" => super::agents::serve(ctx, action, f).await,
        "browserEvent" | "crawlerEvent" => browser::serve(ctx, req).await,
        _ => err(format!(
            "byre does not support `{ty}`{}{action}",
            if action.is_empty() { "" } else { "/" }
        )),
    }
}

// ---------------------------------------------------------------- questions

/// `waitforReply` and `confirmationRequest`: an inbox question (`buttons` its options), then
/// the first human's answer, sent back as the reply (`byre_app::inbox::ask_and_wait`).
async fn ask_human(ctx: &Ctx, ty: &str, f: &Value) -> Value {
    let question_text = text(&f["message"]);
    let options: Vec<String> = f["buttons"]
        .as_array()
        .map(|b| b.iter().map(text).filter(|t| !t.is_empty()).collect())
        .unwrap_or_default();
    let question = byre_projections::inbox::Question {
        context: String::new(),
        question: if question_text.trim().is_empty() {
            "The CodeBolt agent waits for your reply.".into()
        } else {
            question_text
        },
        why_blocked: "The CodeBolt agent waits for the answer before it goes on.".into(),
        options,
        multiple: false,
        recommended: Vec::new(),
        attachments: Vec::new(),
    };
    match byre_app::inbox::ask_and_wait(&ctx.app, &ctx.link, question, closed(ctx)).await {
        Ok(Waited::Answered(response)) => answer_reply(ty, &response),
        Ok(Waited::NoAnswer(why)) => question_failed(ty, why),
        Err(e) => question_failed(ty, &format!("the question could not be asked: {e}")),
    }
}

/// Resolves once the socket of `ctx` closed.
pub(super) async fn closed(ctx: &Ctx) {
    let mut rx = ctx.closed.subscribe();
    let _ = rx.wait_for(|c| *c).await;
}

fn question_failed(ty: &str, why: &str) -> Value {
    let mut v = err(why);
    if ty == "waitforReply" {
        v["message"] = json!({"userMessage": "", "error": why});
    }
    v
}

/// The reply carrying a human's answer (`InboxResponse` JSON): for `waitforReply` a
/// `message` shaped like `messageResponse.message`; for `confirmationRequest` the chosen
/// button (or text) in `answer`, `message` and `value`, free text in `feedback`.
fn answer_reply(ty: &str, r: &Value) -> Value {
    let options: Vec<String> = r["options"]
        .as_array()
        .map(|o| o.iter().map(text).collect())
        .unwrap_or_default();
    let free = text(&r["text"]);
    let answer = match r["type"].as_str() {
        Some("option") if free.trim().is_empty() => options.join(", "),
        Some("option") => format!("{}\n{free}", options.join(", ")),
        Some("dismiss") => {
            "(dismissed without an answer: decide for yourself, or ask differently)".to_owned()
        }
        _ => free.clone(),
    };
    let user = text(&r["user"]);
    if ty == "waitforReply" {
        json!({
            "message": {
                "userMessage": answer, "currentFile": "", "selectedAgent": {"id": "", "name": ""},
                "mentionedFiles": [], "mentionedFullPaths": [], "mentionedFolders": [],
                "mentionedMCPs": [], "uploadedImages": [], "mentionedAgents": [],
                "messageId": r["id"].clone(), "threadId": "", "selection": null, "remixPrompt": null
            },
            "userMessage": answer,
            "user": user,
        })
    } else {
        let choice = options.first().cloned().unwrap_or_else(|| answer.clone());
        json!({
            "answer": choice, "message": choice, "value": choice, "feedback": free,
            "userMessage": answer, "user": user,
            "data": {"answer": choice, "feedback": free},
        })
    }
}

// ---------------------------------------------------------------- terminal

/// Runs a command and streams its lines as `commandOutput` (stdout) and `commandError`
/// (stderr) frames, then `commandFinish` with the exit code; all echo the request's id.
fn stream_command(ctx: Arc<Ctx>, req: Request, command: String) {
    tokio::spawn(async move {
        let frame = |ty: &str, fields: Value| {
            let mut r = req.clone();
            r.reply_type = match ty {
                "commandOutput" => "commandOutput",
                "commandError" => "commandError",
                _ => "commandFinish",
            };
            r.by_event = false;
            super::endpoint::reply(&r, fields).to_string()
        };
        // Past the budget, lines are read and dropped (one notice says so): a command
        // printing without end cannot fill byre's memory with frames.
        let mut budget = STREAM_MAX;
        let exit = ctx
            .link
            .stream_command(&command, |line| {
                let (ty, fields) = match line {
                    Line::Stdout(l) => (
                        "commandOutput",
                        json!({"response": l, "output": l, "stdout": l}),
                    ),
                    Line::Stderr(l) => (
                        "commandError",
                        json!({"response": l, "error": l, "stderr": l}),
                    ),
                };
                let f = frame(ty, fields);
                if f.len() <= budget {
                    budget -= f.len();
                    let _ = ctx.out.send(f);
                } else if budget > 0 {
                    budget = 0;
                    let note = format!(
                        "byre streams at most {} MiB of a command's output; the rest is dropped",
                        STREAM_MAX >> 20
                    );
                    let _ = ctx.out.send(frame(
                        "commandError",
                        json!({"response": note, "error": note, "stderr": note}),
                    ));
                }
            })
            .await;
        let code = match exit {
            Ok(code) => code,
            Err(e) => {
                let _ = ctx.out.send(frame(
                    "commandError",
                    json!({"response": e.to_string(), "error": e.to_string(), "success": false}),
                ));
                let _ = ctx.out.send(frame(
                    "commandFinish",
                    json!({"response": -1, "exitCode": -1, "success": false}),
                ));
                return;
            }
        };
        let _ = ctx.out.send(frame(
            "commandFinish",
            json!({"response": code, "exitCode": code, "success": code == 0}),
        ));
        let _ = ctx
            .link
            .to_session
            .send(json!({"__byre": "stream_finished", "command": command, "exitCode": code, "requestId": req.request_id}).to_string())
            .await;
    });
}

// ---------------------------------------------------------------- llm

async fn inference(llm: &Llm, msg: &Value) -> Value {
    let Some(base) = llm.base_url.clone() else {
        return err("no LLM endpoint: start byre with OPENAI_BASE_URL (and OPENAI_API_KEY)");
    };
    let prompt = &msg["prompt"];
    let mut body = match prompt {
        Value::Object(o) => Value::Object(o.clone()),
        other => json!({"messages": [{"role": "user", "content": text(other)}]}),
    };
    if let Some(o) = body.as_object_mut() {
        o.remove("full");
        o.insert("stream".into(), false.into());
        if o.get("tools")
            .is_some_and(|t| t.as_array().is_some_and(|a| a.is_empty()))
        {
            o.remove("tools");
            o.remove("tool_choice");
        }
        if !o.get("model").is_some_and(Value::is_string) {
            let model = std::env::var("BYRE_CODEBOLT_MODEL").unwrap_or_else(|_| "gpt-5".into());
            o.insert("model".into(), model.into());
        }
    }
    let url = format!("{}/chat/completions", base.trim_end_matches('/'));
    let client = reqwest::Client::new();
    let mut rq = client
        .post(&url)
        .json(&body)
        .timeout(std::time::Duration::from_secs(300));
    if let Some(key) = &llm.api_key {
        rq = rq.bearer_auth(key);
    }
    match rq.send().await {
        Ok(r) if r.status().is_success() => match r.json::<Value>().await {
            Ok(c) => {
                let content = c["choices"][0]["message"]["content"].clone();
                json!({"completion": c, "message": content})
            }
            Err(e) => err(format!("the LLM endpoint answered no JSON: {e}")),
        },
        Ok(r) => {
            let status = r.status();
            let t = r.text().await.unwrap_or_default();
            err(format!(
                "the LLM endpoint answered {status}: {}",
                &t[..t.len().min(500)]
            ))
        }
        Err(e) => err(format!("the LLM endpoint failed: {e}")),
    }
}

fn project_action(worktree: &Path, action: &str) -> Value {
    let name = worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match action {
        "getProjectPath" => json!({"projectPath": worktree, "projectName": name}),
        "getRepoMap" => {
            let out = byre_git::worktree_files::list_all(worktree);
            json!({"repoMap": out.join("\n"), "data": out})
        }
        "getEditorFileStatus" => json!({"editorStatus": "", "data": []}),
        "getProjectSettings" => {
            json!({"projectSettings": {"projectPath": worktree, "projectName": name}, "data": {}})
        }
        other => err(format!("byre does not support projectEvent/{other}")),
    }
}
