//! `git-box`: what running the git work that reads a worktree inside the task's sandbox costs
//! (`byre_git::boxed`, `byre_agents::git_box`). A repository of `files` files in
//! directories of 50, a task's linked worktree with a few files changed and added; then
//! `rounds` requested snapshots and `rounds` staged trees (what the changes views compare),
//! each in byre's own process (as before the sandbox ran them) and through the sandbox
//! (`bwrap` + `byre sandboxed-git`). Prints the latency of each.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use byre_agents::git_box::GitBox;
use byre_agents::sandbox::Sandbox;
use byre_git::boxed::{serve, Job};

use crate::stats::Summary;

/// What to measure.
pub struct Params {
    /// Files in the repository.
    pub files: usize,
    /// Snapshots (and staged trees) per way.
    pub rounds: usize,
    /// The `byre` binary (default: `byre` beside this one).
    pub byre: Option<PathBuf>,
}

fn commit_all(repo: &git2::Repository) -> anyhow::Result<git2::Oid> {
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("Bench", "bench@example.com")?;
    Ok(repo.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])?)
}

/// A repository at `dir/repo` with `files` files and a linked worktree at `dir/wt` on branch
/// `byre/bench`, where three files are edited and ten added.
fn fixture(dir: &Path, files: usize) -> anyhow::Result<PathBuf> {
    let repo_dir = dir.join("repo");
    let repo = git2::Repository::init_opts(
        &repo_dir,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )?;
    for i in 0..files {
        let sub = repo_dir.join(format!("d{:03}", i / 50));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(
            sub.join(format!("f{i:05}.txt")),
            format!("file {i}\n").repeat(40),
        )?;
    }
    let base = commit_all(&repo)?;
    let wt = dir.join("wt");
    byre_git::ensure_worktree(&repo_dir, "byre/bench", &base.to_string(), &wt, "bench")?;
    for i in 0..3 {
        std::fs::write(
            wt.join(format!("d000/f{i:05}.txt")),
            "edited by the agent\n",
        )?;
    }
    std::fs::create_dir_all(wt.join("new"))?;
    for i in 0..10 {
        std::fs::write(wt.join(format!("new/n{i}.txt")), format!("new {i}\n"))?;
    }
    Ok(std::fs::canonicalize(wt)?)
}

fn snapshot(wt: &Path, n: u32) -> Job {
    Job::Snapshot {
        worktree: wt.to_owned(),
        branch: "byre/bench".into(),
        task_id: "bench".into(),
        title: "bench".into(),
        n,
        turn: None,
        event_seq: 1,
    }
}

fn line(what: &str, samples: &mut [f64]) {
    let s = Summary::of_ms(samples);
    println!(
        "{what:<34} n {:>3}  p50 {:>7.2} ms  p90 {:>7.2} ms  max {:>7.2} ms",
        s.n, s.p50_ms, s.p90_ms, s.max_ms
    );
}

/// Runs the bench in a fresh directory under `dir`.
/// # Errors
/// No bwrap here, the fixture cannot be made, or a job fails.
pub async fn run(p: Params, dir: &Path) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir_in(dir)?;
    let wt = fixture(tmp.path(), p.files)?;
    let byre = crate::memory::byre_binary(p.byre)?;
    let sandbox = Sandbox::probe(std::env::var_os("PATH").as_deref())
        .map_err(|e| anyhow::anyhow!("the sandbox cannot run here: {e}"))?;
    let boxed = GitBox::new(Arc::new(sandbox), byre);
    println!(
        "git-box: {} files, 13 changed or new; {} rounds each",
        p.files, p.rounds
    );
    let mut n = 0;
    for (what, staged) in [("snapshot", false), ("staged tree (changes view)", true)] {
        let mut inside = Vec::new();
        let mut in_process = Vec::new();
        for _ in 0..p.rounds {
            n += 1;
            let job = if staged {
                Job::StagedTree {
                    worktree: wt.clone(),
                }
            } else {
                snapshot(&wt, n)
            };
            let t = Instant::now();
            let mine = job.clone();
            tokio::task::spawn_blocking(move || serve(&mine)).await?;
            in_process.push(t.elapsed().as_secs_f64() * 1000.0);
            n += 1;
            let job = if staged { job } else { snapshot(&wt, n) };
            let t = Instant::now();
            boxed.run(&job).await?;
            inside.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        line(&format!("{what}, in byre's process"), &mut in_process);
        line(&format!("{what}, in the sandbox"), &mut inside);
    }
    Ok(())
}
