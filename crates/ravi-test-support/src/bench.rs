//! The figures benchmarks report to `cargo xtask bench`: one JSON object per line on stdout,
//! `{"bench", "value", "unit", "peer", "peer_value", "ratio"}`, written in one place so every
//! bench target speaks the format the xtask reads.
//!
//! ```
//! use ravi_test_support::bench::Figure;
//! // 412 ns against a peer's 95 ns: ratio = peer / Ravi = 0.23 (below 1: the peer is ahead).
//! let line = Figure::new("invoker/noop", 412.0, "ns/call").peer("direct execute", 95.0).to_json();
//! assert_eq!(line["ratio"], serde_json::json!(95.0 / 412.0));
//! ```

use serde_json::{Value, json};

/// One benchmark figure, with the peer measured in the same run when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    bench: String,
    value: f64,
    unit: String,
    peer: Option<(String, f64)>,
    ratio: Option<f64>,
}

impl Figure {
    /// A figure with no peer (`peer`, `peer_value` and `ratio` are null).
    pub fn new(bench: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Self {
            bench: bench.into(),
            value,
            unit: unit.into(),
            peer: None,
            ratio: None,
        }
    }

    /// The same figure next to `name`'s `value`, for a lower-is-better unit (time, bytes,
    /// tokens): ratio = peer / Ravi, above 1 when Ravi is ahead.
    #[must_use]
    pub fn peer(mut self, name: impl Into<String>, value: f64) -> Self {
        self.ratio = (self.value != 0.0).then(|| value / self.value);
        self.peer = Some((name.into(), value));
        self
    }

    /// [`peer`](Self::peer) when there is one.
    #[must_use]
    pub fn peer_opt(self, peer: Option<(&str, f64)>) -> Self {
        match peer {
            Some((name, value)) => self.peer(name, value),
            None => self,
        }
    }

    /// Sets the ratio as computed by the bench itself (`None`: null).
    #[must_use]
    pub fn with_ratio(mut self, ratio: Option<f64>) -> Self {
        self.ratio = ratio;
        self
    }

    /// For a higher-is-better unit (throughput, accuracy): ratio = Ravi / peer, still above 1
    /// when Ravi is ahead. Call after [`peer`](Self::peer).
    #[must_use]
    pub fn higher_is_better(mut self) -> Self {
        self.ratio = self
            .peer
            .as_ref()
            .and_then(|(_, p)| (*p != 0.0).then(|| self.value / p));
        self
    }

    /// The ratio rounded to `digits` decimals (the figure's own rounding is the caller's).
    #[must_use]
    pub fn ratio_digits(mut self, digits: i32) -> Self {
        let scale = 10f64.powi(digits);
        self.ratio = self.ratio.map(|r| (r * scale).round() / scale);
        self
    }

    /// The JSON object.
    pub fn to_json(&self) -> Value {
        let (peer, peer_value) = match &self.peer {
            Some((name, value)) => (json!(name), json!(value)),
            None => (Value::Null, Value::Null),
        };
        json!({"bench": self.bench, "value": self.value, "unit": self.unit, "peer": peer,
               "peer_value": peer_value, "ratio": self.ratio})
    }

    /// Prints the figure as one line on stdout.
    #[allow(
        clippy::print_stdout,
        reason = "the figure line is what `cargo xtask bench` reads"
    )]
    pub fn print(&self) {
        println!("{}", self.to_json());
    }
}

/// CPU time process `pid` has spent so far, summed over its threads (nanoseconds on a CPU from
/// `/proc/PID/task/*/schedstat`; zero where that is not readable).
pub fn process_cpu(pid: u32) -> std::time::Duration {
    let mut ns = 0u64;
    let tasks = format!("/proc/{pid}/task");
    for t in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    }
    std::time::Duration::from_nanos(ns)
}

/// This process's memory at one moment, in bytes, from `/proc/self/smaps_rollup` (zeros where
/// that is not readable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Pages no other mapping shares (`Private_Clean` + `Private_Dirty`).
    pub private: u64,
    /// The proportional set size: private pages, plus each shared page divided among the
    /// mappings that share it.
    pub pss: u64,
    /// The resident set, which counts a shared page once for every mapping of it.
    pub rss: u64,
}

impl Memory {
    /// Reads this process's memory now.
    pub fn now() -> Self {
        let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
        let field = |name: &str| -> u64 {
            text.lines()
                .filter(|l| l.starts_with(name))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
                * 1024
        };
        Self {
            private: field("Private_Clean:") + field("Private_Dirty:"),
            pss: field("Pss:"),
            rss: field("Rss:"),
        }
    }

    /// The growth from `before` to `self` per one of `n` instances, in MiB:
    /// `(private, pss, rss)`.
    pub fn per_instance_mib(&self, before: &Self, n: usize) -> (f64, f64, f64) {
        let per = |d: u64, b: u64| d.saturating_sub(b) as f64 / n.max(1) as f64 / (1 << 20) as f64;
        (
            per(self.private, before.private),
            per(self.pss, before.pss),
            per(self.rss, before.rss),
        )
    }
}
