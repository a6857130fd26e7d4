//! Plain redb baselines, same crate version (4.6.0), default builder, `Durability::Immediate`:
//! - append with one insert per commit (1 producer), or N producer threads queueing inserts for
//!   one committer thread that commits whatever is queued per transaction (group commit);
//! - a full scan of a u64 → &[u8] table with bincode decode and a trivial fold.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use byre_log::store::StoredEvent;
use byre_projections::event::{DefaultModelUpdated, EventBody};
use byre_projections::NewEvent;
use redb::{ReadableDatabase, TableDefinition};
use serde_json::json;

use crate::gen;
use crate::stats::{emit, note_load, Machine, Summary};

const VALUES: TableDefinition<u64, &[u8]> = TableDefinition::new("values");

/// The value appended: a `user.default_model_updated` envelope exactly as byre encodes it.
fn sample_value() -> Vec<u8> {
    let e = NewEvent::new(
        "bench",
        EventBody::DefaultModelUpdated(DefaultModelUpdated {
            login: "bench".into(),
            model: "sonnet".into(),
        }),
    )
    .owned_by("bench")
    .commit(1_000_000, 1_760_000_000_000_000);
    gen::encode(&StoredEvent::from_event(&e))
}

struct Request {
    reply: mpsc::SyncSender<()>,
}

/// Plain redb append: prints events/s and ack latency. `single_writer`: the file is opened in
/// `ConcurrencyMode::SingleWriter` (as byre opens its log), else in redb's default.
pub fn append(
    producers: usize,
    seconds: f64,
    single_writer: bool,
    dir: &Path,
) -> anyhow::Result<()> {
    note_load("plain-redb");
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("plain.redb");
    let mut builder = redb::Builder::new();
    if single_writer {
        builder.set_concurrency_mode(redb::ConcurrencyMode::SingleWriter);
    }
    let db = std::sync::Arc::new(builder.create(&path)?);
    {
        let txn = db.begin_write()?;
        txn.open_table(VALUES)?;
        txn.commit()?;
    }
    let value = sample_value();
    let warmup = Duration::from_millis(500);
    let start = Instant::now() + warmup;
    let end = start + Duration::from_secs_f64(seconds);
    let machine = Machine::start();
    let mut lat: Vec<Duration> = Vec::new();
    let mut events = 0u64;
    let mut n_commits = 0u64;
    if producers == 1 {
        let mut seq = 0u64;
        loop {
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            seq += 1;
            let txn = db.begin_write()?;
            txn.open_table(VALUES)?.insert(seq, value.as_slice())?;
            txn.commit()?;
            if t0 >= start {
                lat.push(t0.elapsed());
                events += 1;
                n_commits += 1;
            }
        }
    } else {
        let (tx, rx) = mpsc::channel::<Request>();
        let committer = {
            let db = db.clone();
            let value = value.clone();
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let mut seq = 0u64;
                let mut commits = 0u64;
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    while group.len() < 512 {
                        match rx.try_recv() {
                            Ok(r) => group.push(r),
                            Err(_) => break,
                        }
                    }
                    let txn = db.begin_write()?;
                    {
                        let mut t = txn.open_table(VALUES)?;
                        for _ in &group {
                            seq += 1;
                            t.insert(seq, value.as_slice())?;
                        }
                    }
                    txn.commit()?;
                    commits += 1;
                    for r in group {
                        let _ = r.reply.send(());
                    }
                }
                Ok(commits)
            })
        };
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(producers));
        let threads: Vec<_> = (0..producers)
            .map(|_| {
                let tx = tx.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut lat = Vec::with_capacity(1 << 16);
                    let (reply, done) = mpsc::sync_channel(1);
                    loop {
                        let t0 = Instant::now();
                        if t0 >= end {
                            break;
                        }
                        if tx
                            .send(Request {
                                reply: reply.clone(),
                            })
                            .is_err()
                            || done.recv().is_err()
                        {
                            break;
                        }
                        if t0 >= start {
                            lat.push(t0.elapsed());
                        }
                    }
                    lat
                })
            })
            .collect();
        drop(tx);
        for t in threads {
            let l = t
                .join()
                .map_err(|_| anyhow::anyhow!("a producer panicked"))?;
            events += l.len() as u64;
            lat.extend(l);
        }
        n_commits = committer
            .join()
            .map_err(|_| anyhow::anyhow!("the committer panicked"))??;
    }
    let elapsed = Instant::now().saturating_duration_since(start);
    let others = machine.report("the run");
    let ack = Summary::of(&lat);
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "plain redb append, {producers} producer(s), {seconds} s, {} mode:",
        if single_writer {
            "SingleWriter"
        } else {
            "ExclusiveWriter (default)"
        }
    );
    println!(
        "  {events} events in {:.3} s = {rate:.0} events/s",
        elapsed.as_secs_f64()
    );
    println!("  ack latency: {}", ack.line());
    println!(
        "  {n_commits} commits{}",
        if producers > 1 {
            " (incl. warm-up)"
        } else {
            ""
        }
    );
    emit(json!({
        "bench": "append", "impl": "plain-redb", "single_writer": single_writer, "producers": producers,
        "seconds": elapsed.as_secs_f64(), "events": events, "events_per_s": rate, "ack": ack,
        "commits": n_commits, "others_cpu_percent": others,
    }));
    Ok(())
}

/// Copies the values of byre's `events` table into a plain file of one u64 → &[u8] table.
pub fn copy_values(byre_log: &Path, plain: &Path) -> anyhow::Result<u64> {
    let src = redb::Database::open(byre_log)?;
    let dst = redb::Database::create(plain)?;
    let rtxn = src.begin_read()?;
    let table = rtxn.open_table(gen::EVENTS)?;
    let mut n = 0u64;
    let mut wtxn = dst.begin_write()?;
    let mut in_txn = 0;
    for entry in table.range(0..=u64::MAX)? {
        let (k, v) = entry?;
        wtxn.open_table(VALUES)?.insert(k.value(), v.value())?;
        n += 1;
        in_txn += 1;
        if in_txn == 100_000 {
            wtxn.commit()?;
            wtxn = dst.begin_write()?;
            in_txn = 0;
        }
    }
    wtxn.commit()?;
    Ok(n)
}

/// One scan of the plain file: open, read every value, bincode-decode the envelope, fold into
/// per-kind counts and each task's last seq. Returns (events, elapsed).
pub fn scan(plain: &Path) -> anyhow::Result<(u64, Duration)> {
    let t0 = Instant::now();
    let db = redb::Database::open(plain)?;
    let txn = db.begin_read()?;
    let table = txn.open_table(VALUES)?;
    let mut kinds: HashMap<String, u64> = HashMap::new();
    let mut tasks: HashMap<String, u64> = HashMap::new();
    let mut n = 0u64;
    for entry in table.range(0..=u64::MAX)? {
        let (_, v) = entry?;
        let e: StoredEvent = gen::decode(v.value())?;
        *kinds.entry(e.kind).or_default() += 1;
        if let Some(t) = e.task_id {
            tasks.insert(t, e.seq);
        }
        n += 1;
    }
    let elapsed = t0.elapsed();
    anyhow::ensure!(kinds.values().sum::<u64>() == n);
    Ok((n, elapsed))
}
