//! Writes a realistic log of many events quickly: commands are decided and folded exactly as
//! the writer does (`decide`, `commit`, `apply`, `derived_events`), and the resulting envelopes
//! are written straight into the redb file in large transactions, bypassing the writer's
//! one-fsync-per-group path. The file is byte-for-byte what byre writes: same tables, same
//! bincode envelope (`StoredEvent`, bincode 2 standard config).

use std::path::Path;

use byre_log::store::StoredEvent;
use byre_projections::focus::{Focus, TaskTab};
use byre_projections::workflows::{Stage, WorkflowDefinition};
use byre_projections::{decide, derived_events, Command, DecideCtx, Event, State};
use redb::TableDefinition;

/// byre's `events` table (src/log/store.rs).
pub const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// byre's `task_events` index (src/log/store.rs).
pub const TASK_EVENTS: TableDefinition<(&str, u64), ()> = TableDefinition::new("task_events");

const USERS: usize = 20;
const PROJECTS: usize = 1_000;
const TASKS: usize = 10_000;
const WORKFLOWS: usize = 50;
const FLUSH_EVERY: usize = 100_000;
const TABS: [TaskTab; 8] = [
    TaskTab::Transcript,
    TaskTab::Changes,
    TaskTab::Files,
    TaskTab::Terminal,
    TaskTab::Inbox,
    TaskTab::Reviews,
    TaskTab::Workflow,
    TaskTab::Project,
];
const MODELS: [&str; 4] = ["sonnet", "opus", "haiku", "gpt-5-codex"];

/// Encodes an envelope as byre stores it.
pub fn encode(e: &StoredEvent) -> Vec<u8> {
    bincode::serde::encode_to_vec(e, bincode::config::standard()).expect("envelope encodes")
}

/// Decodes an envelope as byre reads it.
pub fn decode(bytes: &[u8]) -> anyhow::Result<StoredEvent> {
    Ok(bincode::serde::decode_from_slice(bytes, bincode::config::standard())?.0)
}

/// Counts of what was generated, by kind.
pub type KindCounts = std::collections::BTreeMap<&'static str, u64>;

struct Gen {
    state: State,
    rng: u64,
    now_us: i64,
    pending: Vec<Event>,
    kinds: KindCounts,
    users: Vec<String>,
    projects: Vec<String>,
    tasks: Vec<String>,
}

impl Gen {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, good enough to pick things.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn user(&mut self) -> String {
        let i = (self.next() % self.users.len() as u64) as usize;
        self.users[i].clone()
    }

    fn project(&mut self) -> String {
        let i = (self.next() % self.projects.len() as u64) as usize;
        self.projects[i].clone()
    }

    fn task(&mut self) -> String {
        let i = (self.next() % self.tasks.len() as u64) as usize;
        self.tasks[i].clone()
    }

    /// Decides and folds one command exactly as `write_group` does; the events are queued.
    fn submit(&mut self, cmd: Command) -> anyhow::Result<Vec<Event>> {
        self.now_us += 997;
        let ctx = DecideCtx {
            now_us: self.now_us,
            seed: (u128::from(self.next()) << 64) | u128::from(self.next()),
            reviews_on: false,
        };
        let new_events = decide(&self.state, &cmd, &ctx)
            .map_err(|r| anyhow::anyhow!("generated command refused: {r} ({cmd:?})"))?;
        let mut committed = Vec::with_capacity(new_events.len() + 1);
        for ne in new_events {
            let e = ne.commit(self.state.last_seq + 1, self.now_us);
            self.state.apply(&e);
            committed.push(e);
        }
        for ne in derived_events(&self.state, &committed) {
            let e = ne.commit(self.state.last_seq + 1, self.now_us);
            self.state.apply(&e);
            committed.push(e);
        }
        for e in &committed {
            *self.kinds.entry(e.body.kind()).or_default() += 1;
        }
        self.pending.extend(committed.iter().cloned());
        Ok(committed)
    }

    fn hex40(&mut self) -> String {
        format!(
            "{:016x}{:016x}{:08x}",
            self.next(),
            self.next(),
            self.next() as u32
        )
    }

    fn create_task(&mut self, i: usize) -> anyhow::Result<()> {
        let actor = self.user();
        let project_id = self.project();
        let base_ref = self.hex40();
        let events = self.submit(Command::CreateTask {
            actor,
            project_id: project_id.into(),
            title: format!("Fix flaky test {i} in the parser module"),
            base_ref,
        })?;
        let task_id = events[0]
            .task_id
            .clone()
            .expect("task.created has a task id");
        // 60% of worktrees fail (the task is closed, freeing its port block: at most 4,553
        // tasks may be active), 40% are made.
        let outcome = if i % 5 < 3 {
            Err("fatal: could not create work tree dir: No space left on device".to_owned())
        } else {
            Ok(self.hex40())
        };
        self.submit(Command::RecordWorktree {
            task_id: task_id.clone(),
            outcome,
        })?;
        self.tasks.push(task_id.into());
        Ok(())
    }

    fn one_of_the_mix(&mut self) -> anyhow::Result<()> {
        let login = self.user();
        let r = self.next() % 100;
        let cmd = match r {
            // 45%: focus.updated on a task (task-scoped, owned).
            0..45 => {
                let task_id = self.task();
                let a = (self.next() % 8) as usize;
                let b = (a + 1 + (self.next() % 7) as usize) % 8;
                Command::SetFocus {
                    login: login.into(),
                    focus: Focus {
                        project_id: None,
                        task_id: Some(task_id.into()),
                        tabs: vec![TABS[a], TABS[b]],
                        tab: TABS[(self.next() % 8) as usize],
                    },
                }
            }
            // 15%: summary.read (task-scoped, owned).
            45..60 => Command::MarkSummaryRead {
                login: login.into(),
                task_id: self.task().into(),
                seq: self.state.last_seq,
            },
            // 15%: workflow.saved.
            60..75 => {
                let k = self.next() % WORKFLOWS as u64;
                Command::PutWorkflow {
                    actor: login,
                    name: format!("release-{k}"),
                    definition: WorkflowDefinition {
                        description: "Plan, build and review a change".into(),
                        stages: vec![
                            Stage {
                                name: "plan".into(),
                                after: None,
                                base: None,
                                model: "opus".into(),
                                prompt: format!(
                                    "Write a plan for change {k}; list the files to touch."
                                ),
                            },
                            Stage {
                                name: "build".into(),
                                after: None,
                                base: None,
                                model: "sonnet".into(),
                                prompt: "Implement the plan, with tests.".into(),
                            },
                        ],
                    },
                }
            }
            // 15%: user.default_model_updated (owned).
            75..90 => Command::UpdateDefaultModel {
                login: login.into(),
                model: MODELS[(self.next() % 4) as usize].into(),
            },
            // 5%: pane_focus.updated (owned); flips so that it always changes.
            90..95 => {
                let focused = !self.state.ui.get(&login).is_some_and(|u| u.pane_focused);
                Command::SetPaneFocus {
                    login: login.into(),
                    focused,
                    drafting: self.next().is_multiple_of(2),
                }
            }
            // 5%: user.updated.
            _ => Command::UpdateMe {
                git_name: format!("User {login}"),
                git_email: format!("{login}@example.com"),
                login: login.into(),
            },
        };
        self.submit(cmd).map(|_| ())
    }
}

/// What [`write_log`] made.
pub struct Generated {
    /// The fold of every event written, as the writer would hold it.
    pub state: State,
    /// Events by kind.
    pub kinds: KindCounts,
}

/// Writes a fresh log of at least `n_events` events at `path` (byre's tables, byre's
/// envelope); the file is then opened by `Store::open` like any log.
pub fn write_log(path: &Path, n_events: u64) -> anyhow::Result<Generated> {
    let db = redb::Database::create(path)?;
    let mut g = Gen {
        state: State::default(),
        rng: 0x9e37_79b9_7f4a_7c15,
        now_us: 1_760_000_000_000_000,
        pending: Vec::with_capacity(FLUSH_EVERY + 8),
        kinds: KindCounts::new(),
        users: (0..USERS).map(|i| format!("user{i:02}")).collect(),
        projects: Vec::new(),
        tasks: Vec::new(),
    };
    for login in g.users.clone() {
        g.submit(Command::EnsureUser {
            display_name: login.to_uppercase(),
            default_model: "sonnet".into(),
            login: login.into(),
        })?;
    }
    for i in 0..PROJECTS {
        let actor = g.user();
        let events = g.submit(Command::CreateProject {
            actor,
            name: format!("project-{i}"),
            repo_path: format!("/home/dev/src/project-{i}"),
            default_branch: "main".into(),
            remote: format!("git@example.com:team/project-{i}.git"),
            worktrees_root: "/var/lib/byre/worktrees".into(),
        })?;
        g.projects
            .push(events[0].project_id.clone().expect("project id").into());
    }
    // Tasks are created evenly through the log, the rest is the mix.
    let spacing = (n_events / TASKS as u64).max(1);
    let mut n_tasks = 0;
    g.create_task(n_tasks)?;
    n_tasks += 1;
    while g.state.last_seq < n_events {
        if n_tasks < TASKS && g.state.last_seq >= n_tasks as u64 * spacing {
            g.create_task(n_tasks)?;
            n_tasks += 1;
        } else {
            g.one_of_the_mix()?;
        }
        if g.pending.len() >= FLUSH_EVERY {
            flush(&db, &mut g.pending)?;
        }
    }
    flush(&db, &mut g.pending)?;
    Ok(Generated {
        state: g.state,
        kinds: g.kinds,
    })
}

fn flush(db: &redb::Database, pending: &mut Vec<Event>) -> anyhow::Result<()> {
    let txn = db.begin_write()?;
    {
        let mut events = txn.open_table(EVENTS)?;
        let mut index = txn.open_table(TASK_EVENTS)?;
        for e in pending.iter() {
            events.insert(e.seq, encode(&StoredEvent::from_event(e)).as_slice())?;
            if let Some(task_id) = &e.task_id {
                index.insert((task_id.as_str(), e.seq), ())?;
            }
        }
    }
    txn.commit()?;
    pending.clear();
    Ok(())
}
