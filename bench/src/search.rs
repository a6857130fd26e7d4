//! `search`: the full-text index behind `searchAll` on 10,000 tasks with transcripts.
//!
//! Writes a log through byre's writer: P projects, T tasks, each with a session whose prompt
//! and M agent texts are sentences drawn from a fixed vocabulary (a few frequent words, many
//! rare ones). Then, in this process: the search reactor (`byre_app::reactors::search`)
//! indexes the whole log from an empty index (timed), and each query runs R times through
//! `byre_search::Index::search` (what `searchAll` does after its wait, minus the fold's
//! names and the HTTP framing). Baseline, same run: the same queries as a plain scan of every
//! text held in memory (lowercase substring match of every word), what a search without an
//! index costs.

use std::sync::Arc;
use std::time::Instant;

use byre_log::{Store, Writer};
use byre_projections::sessions::{AgentText, VendorItem};
use byre_projections::Command;
use serde_json::json;

use crate::stats::{emit, note_load, Machine, Summary};

/// Common words: every text holds some of them.
const COMMON: [&str; 24] = [
    "the", "build", "test", "cache", "error", "file", "page", "login", "fix", "update", "user",
    "request", "server", "config", "change", "branch", "review", "agent", "task", "code",
    "function", "module", "query", "index",
];

/// A deterministic generator of sentences.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A word: 80% common, else one of `rare` made-up words (`q0`…).
    fn word(&mut self, rare: u64) -> String {
        let r = self.next();
        if r % 10 < 8 {
            COMMON[(r / 10 % COMMON.len() as u64) as usize].to_owned()
        } else {
            format!("zq{}", r / 10 % rare)
        }
    }

    fn sentence(&mut self, n_words: usize, rare: u64) -> String {
        (0..n_words)
            .map(|_| self.word(rare))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Runs the bench.
pub async fn run(
    n_projects: usize,
    n_tasks: usize,
    texts_per_task: usize,
    repeats: usize,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    note_load("search");
    let tmp = tempfile::tempdir_in(dir)?;
    let store = Store::open(&tmp.path().join("byre.redb"))?;
    let state = store.fold()?;
    let (writer, thread) = Writer::start(store, state);
    let t = Instant::now();
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    let rare = 50_000;
    let mut corpus: Vec<String> = Vec::new();
    let mut projects = Vec::new();
    for i in 0..n_projects {
        let ack = writer
            .submit(
                Command::CreateProject {
                    actor: "ada".into(),
                    name: format!("project-{i}"),
                    repo_path: format!("/home/dev/src/project-{i}"),
                    default_branch: "main".into(),
                    remote: String::new(),
                    worktrees_root: "/var/lib/byre/worktrees".into(),
                },
                None,
            )
            .await?;
        projects.push(ack.events[0].project_id.clone().expect("project id"));
    }
    for i in 0..n_tasks {
        let title = format!("Task {i}: {}", words.sentence(5, rare));
        corpus.push(title.clone());
        let ack = writer
            .submit(
                Command::CreateTask {
                    actor: "ada".into(),
                    project_id: projects[i % n_projects].clone(),
                    title,
                    base_ref: "0".repeat(40),
                },
                None,
            )
            .await?;
        let task_id = ack.events[0].task_id.clone().expect("task id");
        let prompt = words.sentence(30, rare);
        corpus.push(prompt.clone());
        let ack = writer
            .submit(
                Command::CreateSession {
                    actor: "ada".into(),
                    task_id,
                    model: None,
                    prompt,
                    images: vec![],
                    head: String::new(),
                },
                None,
            )
            .await?;
        let session_id = ack.events[0].agent_session_id.clone().expect("session id");
        let items = (0..texts_per_task)
            .map(|m| {
                let text = words.sentence(60, rare);
                corpus.push(text.clone());
                VendorItem::Text(AgentText {
                    cut: None,
                    text,
                    message_id: format!("msg_{i}_{m}"),
                    raw: String::new(),
                })
            })
            .collect();
        writer
            .submit(Command::RecordVendorOutput { session_id, items }, None)
            .await?;
    }
    let head = writer.head();
    println!(
        "generated {n_tasks} tasks in {n_projects} projects, {} texts, {head} events, in {:.1} s",
        corpus.len(),
        t.elapsed().as_secs_f64()
    );

    // The index, made anew and filled by the reactor from seq 1.
    let machine = Machine::start();
    let t = Instant::now();
    let search = byre_app::search::SearchIndex::open(&tmp.path().join("search"), head);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let reactor = byre_app::reactors::search::start(writer.clone(), search.clone(), stopped);
    let mut indexed = search.watch_indexed_seq();
    indexed.wait_for(|s| *s >= head).await?;
    let index_s = t.elapsed().as_secs_f64();
    let index_mib = dir_bytes(&tmp.path().join("search")) as f64 / 1048576.0;
    println!(
        "  indexed the whole log in {index_s:.1} s; the index takes {index_mib:.1} MiB on disk"
    );
    machine.report("indexing");

    let index = search.index().expect("the index opened");
    let queries = [
        ("a rare word", "zq4242".to_owned()),
        ("a common word", "cache".to_owned()),
        ("two common words", "login cache".to_owned()),
        ("a common and a rare word", "build zq777".to_owned()),
        ("a phrase", "\"fix the build\"".to_owned()),
        ("a word no text has", "walrus".to_owned()),
    ];
    let machine = Machine::start();
    let mut results = serde_json::Map::new();
    for (what, q) in &queries {
        let (idx, q2) = (Arc::clone(&index), q.clone());
        let (byre, hits) =
            tokio::task::spawn_blocking(move || time_index(&idx, &q2, repeats)).await??;
        let words: Vec<String> = q
            .trim_matches('"')
            .split(' ')
            .map(str::to_lowercase)
            .collect();
        let corpus_ref = &corpus;
        let plain = time_scan(corpus_ref, &words, repeats.min(20));
        println!(
            "  {what} ({q}): byre p50 {:.2} ms, p99 {:.2} ms ({hits} hits in 3 groups of ≤10) | plain scan p50 {:.1} ms, p99 {:.1} ms",
            byre.p50_ms, byre.p99_ms, plain.p50_ms, plain.p99_ms
        );
        results.insert(
            (*what).to_owned(),
            json!({"q": q, "byre": byre, "plain_scan": plain, "hits": hits}),
        );
    }
    let others = machine.report("queries");
    emit(json!({
        "bench": "search",
        "tasks": n_tasks,
        "projects": n_projects,
        "texts": corpus.len(),
        "events": head,
        "index_seconds": index_s,
        "index_mib": index_mib,
        "queries": results,
        "other_processes_pct": others,
    }));
    stop.send_replace(true);
    reactor.await?;
    drop(search);
    writer.stop().await;
    tokio::task::spawn_blocking(move || thread.join()).await?;
    Ok(())
}

fn time_index(
    index: &byre_search::Index,
    q: &str,
    repeats: usize,
) -> anyhow::Result<(Summary, usize)> {
    let mut samples = Vec::with_capacity(repeats);
    let mut hits = 0;
    for _ in 0..repeats {
        let t = Instant::now();
        let found = index.search(&byre_search::Search {
            text: q,
            login: "ada",
            project_id: None,
            limit: 10,
        })?;
        samples.push(t.elapsed());
        hits = found.projects.len() + found.tasks.len() + found.items.len();
    }
    Ok((Summary::of(&samples), hits))
}

fn time_scan(corpus: &[String], words: &[String], repeats: usize) -> Summary {
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        let mut n = 0usize;
        for text in corpus {
            let lower = text.to_lowercase();
            if words.iter().all(|w| lower.contains(w.as_str())) {
                n += 1;
            }
        }
        std::hint::black_box(n);
        samples.push(t.elapsed());
    }
    Summary::of(&samples)
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
