//! The git requests of a CodeBolt agent ([`super`]'s git family), translated into the
//! application's operations on the agent's task (`app::agent_git`): status, add, commit, logs
//! and diff on its worktree and branch, pull and push; a branch switch, `init` and `clone` are
//! refused here, since the task's worktree and branch are the agent's only repository.

use serde_json::{json, Value};

use super::{err, text, Ctx, MAX_OUTPUT};
use byre_app::agent_git;

/// The reply fields of one `gitEvent` request.
pub(super) async fn git_action(ctx: &Ctx, action: &str, f: &Value) -> Value {
    let (app, task_id) = (&ctx.app, ctx.link.task_id.as_str());
    let r = match action {
        "Status" => agent_git::status(app, task_id).await.map(|st| {
            let files: Vec<Value> = st
                .files
                .iter()
                .map(|s| json!({"path": s.path, "status": s.status}))
                .collect();
            json!({"data": {"current": st.branch, "files": files}, "files": files})
        }),
        "Add" => agent_git::stage_all(app, task_id)
            .await
            .map(|()| json!({"message": "Added all changes"})),
        "Commit" => {
            let message = text(&f["message"]);
            let message = if message.trim().is_empty() {
                "CodeBolt agent commit".to_owned()
            } else {
                message
            };
            agent_git::commit(app, task_id, &message).await.map(|id| {
                json!({"message": "Committed", "data": {"commit": id}, "commit": id})
            })
        }
        "Logs" | "gitLogs" => agent_git::log(app, task_id).await.map(|entries| {
            let logs: Vec<Value> = entries
                .iter()
                .map(|c| json!({"hash": c.hash, "message": c.message, "author": c.author, "date": c.date_s}))
                .collect();
            json!({"data": logs, "logs": logs})
        }),
        "Diff" => {
            let hash = text(&f["commitHash"]);
            let base = (!hash.is_empty()).then_some(hash);
            agent_git::diff(app, task_id, base, MAX_OUTPUT)
                .await
                .map(|out| json!({"data": out, "diff": out}))
        }
        // Pull and push act on the project's repository and origin.
        "Pull" => agent_git::pull_default_branch(app, task_id)
            .await
            .map(|m| json!({"message": m, "data": m})),
        "Push" => agent_git::push_task_branch(app, task_id).await.map(|sha| {
            let m = format!("pushed the task's branch to origin at {sha}");
            json!({"message": m, "data": {"commit": sha}})
        }),
        "Checkout" | "Branch" | "gitBranch" => {
            return match agent_git::current_branch(app, task_id).await {
                Ok(current) if text(&f["branch"]) == current => {
                    json!({"message": format!("on {current}"), "branch": current})
                }
                Ok(current) => err(format!(
                    "the task's agent works on its branch `{current}` only"
                )),
                Err(e) => err(e.to_string()),
            };
        }
        "Init" => {
            return match agent_git::current_branch(app, task_id).await {
                Ok(branch) => err(format!(
                    "gitInit refused: the task's worktree {} is already a git repository, on the task's branch `{branch}`; use status, add and commit there",
                    ctx.link.worktree.display()
                )),
                Err(e) => err(e.to_string()),
            };
        }
        "Clone" => {
            return err(
                "git Clone is not available to agents: the task's worktree is their repository, and byre merges it",
            );
        }
        other => return err(format!("byre does not support gitEvent/{other}")),
    };
    r.unwrap_or_else(|e| err(e.to_string()))
}
