//! `byre log`, `byre rebuild`, `byre replay`: read-only views of a log.

use std::io::Write;
use std::path::Path;

use crate::config::log_path;
use byre_log::store::{ReadOnlyStore, Record};

fn open(data: &Path) -> anyhow::Result<ReadOnlyStore> {
    let path = log_path(data);
    if !path.exists() {
        anyhow::bail!("no log at {} (is --data right?)", path.display());
    }
    ReadOnlyStore::open(&path).map_err(|e| {
        if e.to_string().to_lowercase().contains("repair") {
            anyhow::anyhow!("{} was not closed cleanly (byre was killed) and a read-only open cannot recover it: start `byre serve` on this data dir once (it recovers the file on open), then retry", path.display())
        } else {
            anyhow::Error::new(e).context(format!("cannot open {}", path.display()))
        }
    })
}

/// `byre log`: events from `from` to `to`, optionally one task's or one kind's.
/// # Errors
/// The log cannot be opened or read; `task` names no task of the log.
pub fn log(
    data: &Path,
    task: Option<String>,
    kind: Option<String>,
    from: u64,
    to: u64,
    json: bool,
) -> anyhow::Result<i32> {
    let store = open(data)?;
    if let Some(t) = &task {
        if !store.has_task(t)? {
            anyhow::bail!(
                "no task {t} in this log (`byre log --kind task.created` lists the tasks)"
            );
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut write_err = None;
    store.for_each(from.max(1), to, |e| {
        if task
            .as_deref()
            .is_some_and(|t| e.task_id.as_deref() != Some(t))
            || kind.as_deref().is_some_and(|k| e.kind != k)
        {
            return true;
        }
        let line = if json {
            Record::from_stored(&e).json.to_string()
        } else {
            format!(
                "{:>8}  {}  {:<32} {:<12} task={} {}",
                e.seq,
                byre_app::api::rfc3339(e.created_at_us),
                e.kind,
                e.actor,
                e.task_id.as_deref().unwrap_or("-"),
                e.payload
            )
        };
        if let Err(err) = writeln!(out, "{line}") {
            write_err = Some(err);
            return false;
        }
        true
    })?;
    match write_err {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Some(e) => Err(e.into()),
        None => {
            out.flush().ok();
            Ok(0)
        }
    }
}

/// `byre rebuild [--verify]`: folds from scratch and prints counts and the digest; with
/// `--verify`, also folds up to the last checkpoint and compares digests, and folds up to the
/// projection snapshot start-up would use and compares whole states; exits 1 when either
/// differs.
/// # Errors
/// The log cannot be opened, read or decoded (with the seq).
pub fn rebuild(data: &Path, verify: bool) -> anyhow::Result<i32> {
    let store = open(data)?;
    let started = std::time::Instant::now();
    let state = store.fold_until(u64::MAX)?;
    let elapsed = started.elapsed();
    let digest = byre_projections::digest::digest(&state);
    println!("events      {}", state.n_events);
    println!("last_seq    {}", state.last_seq);
    println!("users       {}", state.users.len());
    println!("projects    {}", state.projects.len());
    println!("tasks       {}", state.tasks.len());
    println!("blobs       {}", state.blobs.len());
    println!("workflows   {}", state.workflows.len());
    println!("fold_ms     {}", elapsed.as_millis());
    println!("digest      {digest}");
    if !verify {
        return Ok(0);
    }
    let checkpoint_ok = verify_checkpoint(&store, &state, &digest)?;
    let snapshot_ok = verify_snapshot(&store, &state)?;
    Ok(if checkpoint_ok && snapshot_ok { 0 } else { 1 })
}

/// `--verify` against the last checkpoint: whether the fold's digest at its seq is the one the
/// server recorded (true when there is nothing to compare).
fn verify_checkpoint(
    store: &ReadOnlyStore,
    state: &byre_projections::State,
    digest: &str,
) -> anyhow::Result<bool> {
    let Some((seq, stored)) = store.last_checkpoint()? else {
        println!("verify      no checkpoint yet; nothing to compare");
        return Ok(true);
    };
    let ours = format!("v{}", byre_projections::digest::DIGEST_VERSION);
    let Some(expected) = stored.strip_prefix(&format!("{ours} ")) else {
        println!("verify      the last checkpoint (seq {seq}) was digested by another build ({}); nothing to compare", stored.split(' ').next().unwrap_or("?"));
        return Ok(true);
    };
    let at = if seq == state.last_seq {
        digest.to_owned()
    } else {
        byre_projections::digest::digest(&store.fold_until(seq)?)
    };
    if at == expected {
        println!("verify      ok: the fold up to seq {seq} matches the server's checkpoint");
        if seq < state.last_seq {
            println!(
                "            (seq {seq} is the server's newest checkpoint; seqs {}..={} came after it: folded above, but not compared, since the server writes checkpoints at most once a second and at a graceful stop)",
                seq + 1,
                state.last_seq
            );
        }
        Ok(true)
    } else {
        println!("verify      MISMATCH at seq {seq}: server had {expected}, the fold gives {at}");
        Ok(false)
    }
}

/// `--verify` against the projection snapshot: whether the fold from seq 1 up to its seq
/// equals the state it holds (the whole state, the digest's bookkeeping included). True when
/// there is none, or start-up would not use it (said why).
fn verify_snapshot(store: &ReadOnlyStore, state: &byre_projections::State) -> anyhow::Result<bool> {
    let snapshot = match store.projection_snapshot() {
        Ok(s) => s,
        Err(byre_log::projection_snapshot::Unusable::Missing) => {
            println!("snapshot    none; start-up folds from seq 1");
            return Ok(true);
        }
        Err(why) => {
            println!("snapshot    not used by start-up ({why}); nothing to compare");
            return Ok(true);
        }
    };
    let seq = snapshot.seq;
    let folded;
    let at = if seq == state.last_seq {
        state
    } else {
        folded = store.fold_until(seq)?;
        &folded
    };
    if *at == snapshot.state {
        println!(
            "snapshot    ok: the fold up to seq {seq} equals the projection snapshot ({}); start-up folds only seqs after it",
            snapshot.digest
        );
        Ok(true)
    } else {
        println!(
            "snapshot    MISMATCH at seq {seq}: the projection snapshot ({}) differs from the fold ({})",
            snapshot.digest,
            byre_projections::digest::digest(at)
        );
        Ok(false)
    }
}

/// `byre replay --task ID --until SEQ`: the task (spec `Task` JSON) as it stood after folding
/// every event up to `until`, then its events up to there.
/// # Errors
/// The log cannot be read; the task did not exist yet at that seq.
pub fn replay(data: &Path, task: &str, until: u64) -> anyhow::Result<i32> {
    let store = open(data)?;
    let state = store.fold_until(until)?;
    let Some(t) = state.tasks.get(task) else {
        anyhow::bail!("task {task} does not exist at seq {until}");
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&byre_app::api::Task::from(t))?
    );
    println!("-- its events up to seq {until}:");
    store.for_each(1, until, |e| {
        if e.task_id.as_deref() == Some(task) {
            println!("{}", Record::from_stored(&e).json);
        }
        true
    })?;
    Ok(0)
}
