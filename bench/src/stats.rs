//! Latency samples and their summary (percentiles by nearest rank).

use std::time::Duration;

/// A summary of latency samples, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
    /// Smallest sample.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Summary {
    /// Summarizes samples given in milliseconds (may be negative); sorts them in place.
    pub fn of_ms(samples: &mut [f64]) -> Summary {
        if samples.is_empty() {
            return Summary {
                n: 0,
                p50_ms: f64::NAN,
                p90_ms: f64::NAN,
                p99_ms: f64::NAN,
                p999_ms: f64::NAN,
                max_ms: f64::NAN,
                min_ms: f64::NAN,
                mean_ms: f64::NAN,
            };
        }
        samples.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[i - 1]
        };
        Summary {
            n: samples.len(),
            p50_ms: rank(0.50),
            p90_ms: rank(0.90),
            p99_ms: rank(0.99),
            p999_ms: rank(0.999),
            max_ms: samples[samples.len() - 1],
            min_ms: samples[0],
            mean_ms: samples.iter().sum::<f64>() / samples.len() as f64,
        }
    }

    /// Summarizes durations.
    pub fn of(samples: &[Duration]) -> Summary {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        Summary::of_ms(&mut ms)
    }

    /// `p50 1.23 ms, p99 4.56 ms, max 7.89 ms`.
    pub fn line(&self) -> String {
        format!(
            "p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms (min {:.3}, mean {:.3}, n {})",
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.p999_ms,
            self.max_ms,
            self.min_ms,
            self.mean_ms,
            self.n
        )
    }
}

/// Prints a machine-readable result line: `RESULT {json}`.
pub fn emit(value: serde_json::Value) {
    println!("RESULT {value}");
}

/// Whether another compiler is running (the machine is shared): the number of `rustc`
/// processes, from /proc.
pub fn busy_rustc() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "rustc")
        })
        .count()
}

/// Warns when the machine is not idle.
pub fn note_load(what: &str) {
    let n = busy_rustc();
    if n > 0 {
        println!("NOTE: {n} rustc process(es) running during {what}: the machine was not idle");
    }
}

/// This process's CPU time (user + system) so far.
pub fn cpu_time() -> std::time::Duration {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of this process and of its waited-for children (`rebuild` times folds in
/// children).
fn cpu_time_with_children() -> Duration {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    cpu_time() + tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// How busy the machine was during a bench: CPU used by other processes (from /proc/stat,
/// minus this process's own CPU time) and sectors written to disk by everyone.
pub struct Machine {
    at: std::time::Instant,
    busy_ticks: u64,
    own: Duration,
    sectors_written: u64,
}

fn busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or("");
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum()
}

fn sectors_written() -> u64 {
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    stats
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Whole disks only (vda, sda, nvme0n1), not partitions.
            let name = *f.get(2)?;
            let whole = (name.starts_with("vd") || name.starts_with("sd"))
                && !name.ends_with(|c: char| c.is_ascii_digit())
                || name.starts_with("nvme") && !name.contains('p');
            if whole {
                f.get(9)?.parse::<u64>().ok()
            } else {
                None
            }
        })
        .sum()
}

impl Machine {
    /// Starts measuring.
    pub fn start() -> Machine {
        Machine {
            at: std::time::Instant::now(),
            busy_ticks: busy_ticks(),
            own: cpu_time_with_children(),
            sectors_written: sectors_written(),
        }
    }

    /// Prints how busy the machine was since [`Machine::start`]; returns the share of one core
    /// that other processes used, in percent.
    pub fn report(&self, what: &str) -> f64 {
        let wall = self.at.elapsed().as_secs_f64();
        // SAFETY: sysconf is always safe to call.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let all = (busy_ticks() - self.busy_ticks) as f64 / hz;
        let own = (cpu_time_with_children() - self.own).as_secs_f64();
        let others = ((all - own) / wall * 100.0).max(0.0);
        let mib = (sectors_written() - self.sectors_written) as f64 * 512.0 / 1048576.0;
        println!(
            "  machine during {what}: this process {:.0}% of a core, other processes {others:.0}% (2 cores = 200%); disk writes by all {mib:.1} MiB",
            own / wall * 100.0
        );
        others
    }
}

/// CPU seconds used so far by this process's threads, summed by thread name (the kernel's
/// 15-character `comm`, with digits dropped so that numbered workers add up).
pub fn thread_cpu() -> std::collections::BTreeMap<String, f64> {
    // SAFETY: sysconf is always safe to call.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in dir.filter_map(Result::ok) {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ... utime stime: fields 14 and 15, counted after the `)`.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name: String = stat[open + 1..close]
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks: u64 = rest.get(11).and_then(|x| x.parse().ok()).unwrap_or(0)
            + rest.get(12).and_then(|x| x.parse().ok()).unwrap_or(0);
        *out.entry(name).or_insert(0.0) += ticks as f64 / hz;
    }
    out
}
