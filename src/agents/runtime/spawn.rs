//! How a session's process is planned from the fold: its driver, its spawn spec (working
//! directory, model, resume or fork, byre's MCP server for its role) and its task.

use std::path::{Path, PathBuf};

use byre_projections::sessions::{SessionRole, Vendor};

use super::{lead_dir, Runtime, SpawnPlan};
use crate::sandbox::{Access, MCP_TOKEN_PATH};
use crate::SpawnSpec;

impl Runtime {
    /// What starting a process for the session needs from the fold: its driver and spawn spec
    /// (on `model`, else the session's own), and its task. `None` for an unknown session; an
    /// `Err` with the exit to record for a vendor without a driver.
    pub(super) fn spawn_plan(
        &self,
        session_id: &str,
        model: Option<&str>,
    ) -> Option<Result<SpawnPlan, Vendor>> {
        let found = self.writer.read(|s| {
            let sess = s.sessions.get(session_id)?;
            if sess.role == SessionRole::Lead {
                // A lead works in a directory of its own, never a repository.
                let cwd = lead_dir(self.data_dir(), &sess.owner);
                return Some((
                    sess.vendor,
                    sess.vendor_session_id.clone(),
                    sess.model.clone(),
                    String::new(),
                    cwd.to_string_lossy().into_owned(),
                    0,
                    None,
                ));
            }
            let task = s.tasks.get(&sess.task_id)?;
            // A reviewer works in its review's read-only checkout, never the task's worktree.
            let cwd = match s.review_of_session(session_id) {
                Some(r) => crate::review_checkout_dir(self.data_dir(), &r.id)
                    .to_string_lossy()
                    .into_owned(),
                None => task.worktree_path.clone(),
            };
            // A fork's origin: the conversation forked and the directory it ran in (the task
            // it was forked from; Claude Code keeps sessions per directory).
            let fork = sess.forked_from.as_ref().and_then(|f| {
                let (from_task, _) = task.forked_from.as_ref()?;
                // Its byre session, whose own directory holds the conversation.
                let from_session = s
                    .sessions
                    .values()
                    .find(|x| &x.task_id == from_task && x.vendor_session_id == f.vendor_session_id)
                    .map(|x| x.id.clone())
                    .unwrap_or_default();
                Some(crate::ForkSpec {
                    session_id: from_session.into(),
                    vendor_session_id: f.vendor_session_id.clone(),
                    at: f.at.clone(),
                    cwd: PathBuf::from(&s.tasks.get(from_task)?.worktree_path),
                })
            });
            Some((
                sess.vendor,
                sess.vendor_session_id.clone(),
                sess.model.clone(),
                task.id.clone().into(),
                cwd,
                task.port_base,
                fork,
            ))
        });
        let (vendor, vendor_session_id, own_model, task_id, worktree, port_base, fork) = found?;
        let role = self
            .writer
            .read(|s| s.sessions.get(session_id).map(|x| x.role))
            .unwrap_or(SessionRole::Implementer);
        if task_id.is_empty() {
            // The lead's directory is made on its first start (and again if removed).
            if let Err(e) = std::fs::create_dir_all(&worktree) {
                tracing::error!(error = %e, "cannot make the lead's directory");
            }
        }
        let Some(driver) = self.driver(vendor) else {
            return Some(Err(vendor));
        };
        // What the process may reach (DESIGN.md invariant 8): a lead its own directory; a
        // reviewer its copy, read-only; a task's agent its worktree and the project's git
        // directory. The driver adds the session's own HOME and config and the CLI.
        let cwd = PathBuf::from(&worktree);
        let mut access = match role {
            SessionRole::Lead => Access::new(&cwd).write(&cwd),
            SessionRole::Reviewer => Access::new(&cwd).read(&cwd),
            SessionRole::Implementer => Access::new(&cwd).worktree(&cwd),
        };
        let sandboxed = self.sandbox.is_on();
        let token_seen = sandboxed.then(|| Path::new(MCP_TOKEN_PATH));
        let mcp = self.mcp.launch(session_id, role, token_seen);
        if let (Some(launch), true) = (&mcp, sandboxed) {
            access = access
                .file(&launch.token_file, MCP_TOKEN_PATH)
                .read(&launch.program);
        }
        let mut spec = SpawnSpec {
            session_id: session_id.into(),
            vendor_session_id,
            model: model.map(str::to_owned).unwrap_or(own_model),
            cwd,
            port_base,
            resume: false,
            socket_token: String::new(),
            socket_port: 0,
            mcp,
            fork: None,
            access,
        };
        spec.resume = driver.has_conversation(&spec);
        if !spec.resume {
            spec.fork = fork;
        }
        Some(Ok((driver, spec, task_id)))
    }
}
