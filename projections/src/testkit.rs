//! The given / when / then harness shared by the projections' unit tests.
//!
//! [`World`] holds a [`State`] and folds every command through [`decide`] and
//! [`derived_events`] exactly as the writer does, with a deterministic clock and seed. Test
//! modules add their own helpers in inherent `impl World` blocks (one crate, so their names
//! must differ across modules).
use crate::ids::ProjectId;
use crate::sessions::{Session, TurnEnded, TurnOutcome, Usage, VendorItem};
use crate::{decide, derived_events, Command, DecideCtx, Event, NewEvent, Rejection, State};

/// A state under test and the counter that makes each command's time and seed.
pub(crate) struct World {
    /// Everything folded so far.
    pub state: State,
    /// Bumped per command: `now_us = n`, `seed = n << 64`.
    pub n: u128,
    /// The project made by [`World::with_task`] (empty until a test makes one).
    pub project: ProjectId,
    /// The server setting every command is decided with (`DecideCtx::reviews_on`).
    pub reviews_on: bool,
}

impl World {
    /// Nothing yet.
    pub fn empty() -> World {
        World {
            state: State::default(),
            n: 1,
            project: ProjectId::default(),
            reviews_on: false,
        }
    }

    /// User `ada` (display name "Ada"), project `p` and one task `t` on base `abc`.
    pub fn with_task() -> World {
        let mut w = World::empty();
        w.ensure_user("ada", "Ada");
        w.create_project();
        w.ok(Command::CreateTask {
            actor: "ada".into(),
            project_id: w.project.clone(),
            title: "t".into(),
            base_ref: "abc".into(),
        });
        w
    }

    /// Makes user `login` (default model `sonnet`).
    pub fn ensure_user(&mut self, login: &str, display_name: &str) {
        self.ok(Command::EnsureUser {
            login: login.into(),
            display_name: display_name.into(),
            default_model: "sonnet".into(),
        });
    }

    /// `ada` makes project `p` (checkout `/r`, default branch `main`, no remote, worktrees
    /// under `/w`); sets [`World::project`] to the first project's id.
    pub fn create_project(&mut self) {
        self.ok(Command::CreateProject {
            actor: "ada".into(),
            name: "p".into(),
            repo_path: "/r".into(),
            default_branch: "main".into(),
            remote: String::new(),
            worktrees_root: "/w".into(),
        });
        self.project = self.state.projects.keys().next().unwrap().clone();
    }

    /// The id of the first task (by id order).
    pub fn task_id(&self) -> String {
        self.state.tasks.keys().next().unwrap().clone().into()
    }

    /// The newest session.
    pub fn session(&self) -> &Session {
        self.state
            .sessions
            .values()
            .max_by_key(|s| s.created_seq)
            .unwrap()
    }

    /// `ada` starts a session on the first task with first message `prompt`; its id.
    pub fn start(&mut self, prompt: &str) -> String {
        let task_id = self.task_id();
        self.ok(Command::CreateSession {
            actor: "ada".into(),
            task_id: task_id.into(),
            model: None,
            prompt: prompt.into(),
            images: vec![],
            head: "h".into(),
        });
        self.session().id.clone().into()
    }

    /// Decides `cmd`, folds its events and the derived ones; every event committed.
    pub fn when(&mut self, cmd: Command) -> Result<Vec<Event>, Rejection> {
        self.n += 1;
        let ctx = DecideCtx {
            now_us: self.n as i64,
            seed: self.n << 64,
            reviews_on: self.reviews_on,
        };
        let events = decide(&self.state, &cmd, &ctx)?;
        Ok(fold(&mut self.state, events, ctx.now_us))
    }

    /// [`World::when`] for a command that must pass.
    pub fn ok(&mut self, cmd: Command) -> Vec<Event> {
        self.when(cmd).expect("command passes")
    }

    /// byre restarted: `ResumeAfterRestart` for `session_id` (worktree head `h`); its events.
    pub fn restart(&mut self, session_id: &str) -> Vec<Event> {
        self.ok(Command::ResumeAfterRestart {
            session_id: session_id.into(),
            head: "h".into(),
        })
    }

    /// Session `sid`'s agent writes `text` in its running turn; the events committed.
    pub fn agent_says(&mut self, sid: &str, text: &str) -> Vec<Event> {
        self.ok(Command::RecordVendorOutput {
            session_id: sid.into(),
            items: vec![VendorItem::Text(crate::sessions::AgentText {
                cut: None,
                text: text.into(),
                message_id: "m".into(),
                raw: "{}".into(),
            })],
        })
    }

    /// Records the end of session `sid`'s turn as its driver would: `result`, the vendor's
    /// HTTP `status` if any, error "boom" when `outcome` is `Failed`; the events committed.
    pub fn record_turn_end(
        &mut self,
        sid: &str,
        outcome: TurnOutcome,
        result: &str,
        status: Option<u16>,
    ) -> Vec<Event> {
        let ended = TurnEnded {
            cut: None,
            turn: 0,
            outcome,
            summary: false,
            result: result.into(),
            error: if outcome == TurnOutcome::Failed {
                "boom".into()
            } else {
                String::new()
            },
            usage: Usage::default(),
            cost_micro_usd: 0,
            duration_ms: 1,
            num_turns: 1,
            api_error_status: status,
            rate_limits: None,
            review: false,
            last_vendor_id: None,
            raw: "{}".into(),
        };
        self.ok(Command::RecordVendorOutput {
            session_id: sid.into(),
            items: vec![VendorItem::TurnEnded(ended)],
        })
    }
}

/// Commits `events` at `now_us` (seqs following `state.last_seq`) and folds them, then the
/// events they derive, as the writer does; every event committed, in order.
pub(crate) fn fold(state: &mut State, events: Vec<NewEvent>, now_us: i64) -> Vec<Event> {
    let mut committed = Vec::new();
    for ne in events {
        let e = ne.commit(state.last_seq + 1, now_us);
        state.apply(&e);
        committed.push(e);
    }
    for ne in derived_events(state, &committed) {
        let e = ne.commit(state.last_seq + 1, now_us);
        state.apply(&e);
        committed.push(e);
    }
    committed
}

/// The kinds of `events`, in order.
pub(crate) fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.body.kind()).collect()
}

/// Session `sid` asks a human "Which?" (options red and blue, blue recommended) with
/// `context`; the inbox item's id.
pub(crate) fn ask(w: &mut World, sid: &str, context: &str) -> String {
    let events = w.ok(Command::AskHuman {
        session_id: sid.into(),
        question: crate::inbox::Question {
            context: context.into(),
            question: "Which?".into(),
            why_blocked: "yours".into(),
            options: vec!["red".into(), "blue".into()],
            multiple: false,
            recommended: vec!["blue".into()],
            attachments: vec![],
        },
    });
    events
        .iter()
        .find_map(|e| match &e.body {
            crate::EventBody::InboxItemCreated(p) => Some(p.id.clone()),
            _ => None,
        })
        .expect("an item")
}

/// A response to inbox item `item_id`: `kind` with `options` and `text`, nothing attached.
pub(crate) fn answer(
    item_id: &str,
    kind: crate::inbox::ResponseType,
    options: &[&str],
    text: &str,
) -> crate::inbox::ResponseInput {
    crate::inbox::ResponseInput {
        item_id: item_id.into(),
        kind,
        options: options.iter().map(|o| o.to_string()).collect(),
        text: text.into(),
        images: vec![],
        attachments: vec![],
    }
}
