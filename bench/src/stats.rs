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
