//! The git work that reads a task's worktree, done inside that task's sandbox
//! (`docs/sandbox.md`, "What byre itself does in an agent's directories").
//!
//! libgit2 follows what it finds: a directory of the worktree swapped for a symlink between its
//! `lstat` and its `open` leads its walk out, and the index, `HEAD`, the refs and their reflogs
//! live in directories the agent writes. So byre never lets libgit2 read an agent's worktree
//! outside the sandbox: a [`Job`] is handed to a hidden `byre sandboxed-git` process started
//! through the same spawn path and with the same reach as the task's agent (its worktree, of the
//! project's git dir what commits need), which runs [`serve`] and prints one [`Answer`] as a JSON
//! line. Whatever that process follows leads only where the agent can read and write anyway;
//! the objects it writes land in the project's object store, as the agent's own commits do.
//!
//! What stays byre's: deciding the job (which snapshot, which turn, the event seq), checking the
//! answer ([`Answer::parse`]: one bounded line, ids of 40 hex digits) and recording the outcome.
//! The snapshot's ref and the compare-and-swap of the task branch are made inside too: the task
//! branch and the worktree's `HEAD` are files its agent writes, and libgit2 appends to a reflog
//! by path. Of the project's `refs/` the sandbox makes writable only the task's own directory
//! of branches, and for a job what [`Job::refs_written`] names.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::actions;
pub use super::merge::WorktreeFacts;
use super::merge::{Identity, MergeError};
use super::remote;
use super::snapshots::{take_snapshot, Snapshot, SnapshotJob};
use super::views::{staged_index, Worktree};
use super::GitError;

/// Most bytes of an answer line that byre reads (a 1 MiB diff, escaped, fits).
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// Most paths one [`Job::Ignored`] asks about.
pub const MAX_IGNORED_PATHS: usize = 10_000;

/// What the boxed process does, on the worktree it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Job {
    /// A snapshot and, for a turn end, the end-of-turn commit ([`take_snapshot`]).
    Snapshot {
        /// The task's worktree.
        worktree: PathBuf,
        /// The task's branch (short name).
        branch: String,
        /// The task's id.
        task_id: String,
        /// The task's title.
        title: String,
        /// The snapshot's position, from 1.
        n: u32,
        /// The turn, for an end-of-turn snapshot.
        turn: Option<u32>,
        /// The task's latest event seq.
        event_seq: u64,
    },
    /// The worktree as a tree, as if everything were staged ([`staged_index`]), written to
    /// the object store: what the changes views compare.
    StagedTree {
        /// The task's worktree.
        worktree: PathBuf,
    },
    /// What a merge, `getUnmerged` and a worktree's removal need of it: [`WorktreeFacts`].
    Facts {
        /// The task's worktree.
        worktree: PathBuf,
    },
    /// Whether git ignores each of `paths` (relative to the worktree's root).
    Ignored {
        /// The task's worktree.
        worktree: PathBuf,
        /// The paths asked about.
        paths: Vec<String>,
    },
    /// A CodeBolt agent's `gitStatus` ([`actions::status`]).
    Status {
        /// The task's worktree.
        worktree: PathBuf,
    },
    /// The branch the worktree's HEAD is on ([`actions::current_branch`]).
    Branch {
        /// The task's worktree.
        worktree: PathBuf,
    },
    /// A CodeBolt agent's `gitAdd`: every change staged ([`actions::stage_all`]).
    StageAll {
        /// The task's worktree.
        worktree: PathBuf,
    },
    /// A CodeBolt agent's `gitCommit` on the task branch ([`actions::commit`]).
    Commit {
        /// The task's worktree.
        worktree: PathBuf,
        /// The task's branch (short name).
        branch: String,
        /// The commit message.
        message: String,
        /// The author's name when the repository configures none.
        author_name: String,
        /// The author's email when the repository configures none.
        author_email: String,
    },
    /// A CodeBolt agent's `gitLogs` ([`actions::log`]).
    Log {
        /// The task's worktree.
        worktree: PathBuf,
        /// Most commits listed.
        n: usize,
    },
    /// A CodeBolt agent's `gitDiff` ([`actions::diff`]).
    Diff {
        /// The task's worktree.
        worktree: PathBuf,
        /// The revision compared from (`None`: HEAD).
        base: Option<String>,
        /// The patch is cut once it holds this many bytes.
        max_bytes: usize,
    },
    /// A CodeBolt agent's `gitPull`, its worktree's half: the local default branch merged in
    /// ([`remote::merge_default`]; byre fetched it first, outside).
    MergeDefault {
        /// The task's worktree.
        worktree: PathBuf,
        /// The project's default branch (short name).
        default_branch: String,
        /// The author's name when the repository configures none.
        author_name: String,
        /// The author's email when the repository configures none.
        author_email: String,
    },
}

impl Job {
    /// The directories of the project's `refs/` the job writes beyond the task's own
    /// directory of branches, which its sandbox then makes writable to it alone: a snapshot's
    /// refs (`byre/tasks/<task id>`) and the directory of the branch a snapshot or a commit
    /// moves (the task's own for a task with a branch namespace; `heads/byre` for one created
    /// before).
    pub fn refs_written(&self) -> Vec<String> {
        let branch_dir = |branch: &str| {
            Path::new("heads")
                .join(branch)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
        };
        match self {
            Job::Snapshot {
                branch, task_id, ..
            } => std::iter::once(format!("byre/tasks/{task_id}"))
                .chain(branch_dir(branch))
                .collect(),
            Job::Commit { branch, .. } => branch_dir(branch).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The worktree the job works on (the sandbox is made for it).
    pub fn worktree(&self) -> &Path {
        match self {
            Job::Snapshot { worktree, .. }
            | Job::StagedTree { worktree }
            | Job::Facts { worktree }
            | Job::Ignored { worktree, .. }
            | Job::Status { worktree }
            | Job::Branch { worktree }
            | Job::StageAll { worktree }
            | Job::Commit { worktree, .. }
            | Job::Log { worktree, .. }
            | Job::Diff { worktree, .. }
            | Job::MergeDefault { worktree, .. } => worktree,
        }
    }
}

/// What the boxed process answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// [`Job::Snapshot`] done.
    Snapshot {
        /// S, 40 hex.
        commit: String,
        /// T, 40 hex.
        tree: String,
        /// The event seq recorded in the commit.
        event_seq: u64,
        /// Whether the task branch now points at S.
        branch_advanced: bool,
    },
    /// [`Job::StagedTree`] done: the tree, 40 hex.
    Tree {
        /// 40 hex.
        tree: String,
    },
    /// [`Job::Facts`] done.
    Facts(WorktreeFacts),
    /// [`Job::Ignored`] done: one flag per path asked about, in order.
    Ignored {
        /// Whether each is ignored.
        ignored: Vec<bool>,
    },
    /// [`Job::Status`] done.
    Status(actions::Status),
    /// [`Job::Branch`] done.
    Branch {
        /// The short name of the branch HEAD is on (`None`: none).
        branch: Option<String>,
    },
    /// [`Job::StageAll`] done.
    Staged,
    /// [`Job::Commit`] done.
    Committed {
        /// The new commit, 40 hex.
        commit: String,
    },
    /// [`Job::Log`] done.
    Log {
        /// The commits, newest first.
        entries: Vec<actions::LogEntry>,
    },
    /// [`Job::Diff`] done.
    Diff {
        /// The patch.
        patch: String,
    },
    /// [`Job::MergeDefault`] done.
    Merged(remote::Pulled),
    /// The job was refused: `conflict` for a worktree not in a state to do it (a message for
    /// the user, [`GitError::Conflict`]), else a failure.
    Refused {
        /// A conflict (the user can fix it), not a failure.
        conflict: bool,
        /// Why.
        message: String,
    },
}

fn is_hex40(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Answer {
    /// The answer a boxed process printed: one JSON line of at most [`MAX_ANSWER_BYTES`],
    /// whose ids are 40 hex digits and whose flags match `job`. The process runs where an agent
    /// writes, so its output is checked as any outside input is.
    /// # Errors
    /// [`GitError::Conflict`] for a [`Answer::Refused`] conflict; [`GitError::Other`] for a
    /// refusal, and for output that is not such an answer.
    pub fn parse(job: &Job, stdout: &[u8]) -> Result<Answer, GitError> {
        let bad = |why: &str| GitError::Other(format!("the sandboxed git process {why}"));
        if stdout.len() > MAX_ANSWER_BYTES {
            return Err(bad("answered more than 1 MiB"));
        }
        let line = stdout
            .split(|b| *b == b'\n')
            .find(|l| !l.is_empty())
            .ok_or_else(|| bad("answered nothing"))?;
        let answer: Answer =
            serde_json::from_slice(line).map_err(|e| bad(&format!("answered no answer: {e}")))?;
        let fits = match (&answer, job) {
            (Answer::Snapshot { commit, tree, .. }, Job::Snapshot { .. }) => {
                is_hex40(commit) && is_hex40(tree)
            }
            (Answer::Tree { tree }, Job::StagedTree { .. }) => is_hex40(tree),
            (Answer::Facts(f), Job::Facts { .. }) => {
                is_hex40(&f.tree) && f.head.as_deref().is_none_or(is_hex40)
            }
            (Answer::Ignored { ignored }, Job::Ignored { paths, .. }) => {
                ignored.len() == paths.len()
            }
            (Answer::Status(_), Job::Status { .. })
            | (Answer::Branch { .. }, Job::Branch { .. })
            | (Answer::Staged, Job::StageAll { .. })
            | (Answer::Diff { .. }, Job::Diff { .. }) => true,
            (Answer::Committed { commit }, Job::Commit { .. }) => is_hex40(commit),
            (Answer::Merged(p), Job::MergeDefault { .. }) => {
                is_hex40(&p.head_before) && is_hex40(&p.head_after)
            }
            (Answer::Log { entries }, Job::Log { n, .. }) => {
                entries.len() <= *n && entries.iter().all(|e| is_hex40(&e.hash))
            }
            (
                Answer::Refused {
                    conflict: true,
                    message,
                },
                _,
            ) => return Err(GitError::Conflict(message.clone())),
            (Answer::Refused { message, .. }, _) => return Err(GitError::Other(message.clone())),
            _ => false,
        };
        if fits {
            Ok(answer)
        } else {
            Err(bad("answered another job"))
        }
    }

    /// The facts of an [`Answer::Facts`].
    pub fn into_facts(self) -> Option<WorktreeFacts> {
        match self {
            Answer::Facts(f) => Some(f),
            _ => None,
        }
    }

    /// The snapshot of an [`Answer::Snapshot`].
    pub fn into_snapshot(self) -> Option<Snapshot> {
        match self {
            Answer::Snapshot {
                commit,
                tree,
                event_seq,
                branch_advanced,
            } => Some(Snapshot {
                commit,
                tree,
                event_seq,
                branch_advanced,
            }),
            _ => None,
        }
    }
}

fn refused(e: GitError) -> Answer {
    match e {
        GitError::Conflict(message) => Answer::Refused {
            conflict: true,
            message,
        },
        GitError::Other(message) => Answer::Refused {
            conflict: false,
            message,
        },
        other => Answer::Refused {
            conflict: false,
            message: other.to_string(),
        },
    }
}

/// Does `job`, where it runs (inside the task's sandbox, from `byre sandboxed-git`; in byre's
/// own process when the sandbox is off, where nothing confines agents anyway).
pub fn serve(job: &Job) -> Answer {
    match job {
        Job::Snapshot {
            worktree,
            branch,
            task_id,
            title,
            n,
            turn,
            event_seq,
        } => match take_snapshot(&SnapshotJob {
            worktree,
            branch,
            task_id,
            title,
            n: *n,
            turn: *turn,
            event_seq: *event_seq,
        }) {
            Ok(s) => Answer::Snapshot {
                commit: s.commit,
                tree: s.tree,
                event_seq: s.event_seq,
                branch_advanced: s.branch_advanced,
            },
            Err(e) => refused(e),
        },
        Job::StagedTree { worktree } => staged_tree(worktree)
            .map(|tree| Answer::Tree { tree })
            .unwrap_or_else(refused),
        Job::Facts { worktree } => super::merge::worktree_facts(worktree)
            .map(Answer::Facts)
            .unwrap_or_else(refused),
        Job::Ignored { worktree, paths } => ignored(worktree, paths)
            .map(|ignored| Answer::Ignored { ignored })
            .unwrap_or_else(refused),
        Job::Status { worktree } => actions::status(worktree)
            .map(Answer::Status)
            .unwrap_or_else(refused),
        Job::Branch { worktree } => actions::current_branch(worktree)
            .map(|branch| Answer::Branch { branch })
            .unwrap_or_else(refused),
        Job::StageAll { worktree } => actions::stage_all(worktree)
            .map(|()| Answer::Staged)
            .unwrap_or_else(refused),
        Job::Commit {
            worktree,
            branch,
            message,
            author_name,
            author_email,
        } => actions::commit(
            worktree,
            branch,
            message,
            (author_name.as_str(), author_email.as_str()),
        )
        .map(|commit| Answer::Committed { commit })
        .unwrap_or_else(refused),
        Job::Log { worktree, n } => actions::log(worktree, *n)
            .map(|entries| Answer::Log { entries })
            .unwrap_or_else(refused),
        Job::Diff {
            worktree,
            base,
            max_bytes,
        } => actions::diff(worktree, base.as_deref(), *max_bytes)
            .map(|patch| Answer::Diff { patch })
            .unwrap_or_else(refused),
        Job::MergeDefault {
            worktree,
            default_branch,
            author_name,
            author_email,
        } => {
            let fallback = Identity {
                name: author_name.clone(),
                email: author_email.clone(),
            };
            match remote::merge_default(worktree, default_branch, &fallback) {
                Ok(pulled) => Answer::Merged(pulled),
                Err(MergeError::Refused(message)) => Answer::Refused {
                    conflict: true,
                    message,
                },
                Err(MergeError::Git(e)) => refused(e),
            }
        }
    }
}

fn staged_tree(worktree: &Path) -> Result<String, GitError> {
    let wt = Worktree::open(worktree)?;
    let repo = wt.repo()?;
    let mut index = staged_index(&wt, &repo)?;
    Ok(index.write_tree_to(&repo)?.to_string())
}

fn ignored(worktree: &Path, paths: &[String]) -> Result<Vec<bool>, GitError> {
    if paths.len() > MAX_IGNORED_PATHS {
        return Err(GitError::Other(format!(
            "at most {MAX_IGNORED_PATHS} paths at once"
        )));
    }
    let wt = Worktree::open(worktree)?;
    let repo = wt.repo()?;
    paths.iter().map(|p| Ok(repo.is_path_ignored(p)?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_job() -> Job {
        Job::Snapshot {
            worktree: "/w".into(),
            branch: "b".into(),
            task_id: "t".into(),
            title: "x".into(),
            n: 1,
            turn: None,
            event_seq: 3,
        }
    }

    #[test]
    fn only_a_bounded_well_formed_answer_to_the_job_asked_is_taken() {
        let job = snapshot_job();
        let hex = "a".repeat(40);
        let good = format!(
            "{{\"answer\":\"snapshot\",\"commit\":\"{hex}\",\"tree\":\"{hex}\",\"event_seq\":3,\"branch_advanced\":false}}\n"
        );
        assert!(Answer::parse(&job, good.as_bytes()).is_ok());
        for (bad, why) in [
            (String::new(), "nothing"),
            ("not json".to_owned(), "no answer"),
            (good.replace(&hex, "zz"), "another job"),
            (
                format!("{{\"answer\":\"tree\",\"tree\":\"{hex}\"}}"),
                "another job",
            ),
            ("x".repeat(MAX_ANSWER_BYTES + 1), "1 MiB"),
        ] {
            let e = Answer::parse(&job, bad.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
        let conflict = r#"{"answer":"refused","conflict":true,"message":"a merge is in progress"}"#;
        assert!(matches!(
            Answer::parse(&job, conflict.as_bytes()),
            Err(GitError::Conflict(m)) if m.contains("merge")
        ));
        let job = Job::Ignored {
            worktree: "/w".into(),
            paths: vec!["a".into(), "b".into()],
        };
        assert!(Answer::parse(&job, br#"{"answer":"ignored","ignored":[true]}"#).is_err());
        assert!(Answer::parse(&job, br#"{"answer":"ignored","ignored":[true,false]}"#).is_ok());
    }

    #[test]
    fn a_job_is_one_json_value_and_unknown_fields_are_refused() {
        let job = snapshot_job();
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(serde_json::from_str::<Job>(&text).unwrap(), job);
        assert!(
            serde_json::from_str::<Job>(r#"{"op":"staged_tree","worktree":"/w","x":1}"#).is_err()
        );
    }
}
