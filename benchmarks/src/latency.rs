//! Client-side latencies: every system call the generator makes and every whole Postmark
//! transaction, recorded both into an hdrhistogram (nanoseconds, for percentiles) and into a
//! profile-store [`Recorder`] (cycles in log2 buckets, layer `client`, for `fsprof diff` against
//! the file system's own profile).

use hdrhistogram::Histogram;
use profile_store::{ClockInfo, Recorder, RecorderConfig, Token, clock};
use serde::Serialize;

/// What is timed. System calls carry the FUSE name of the request they mostly turn into, so a
/// client profile lines up with the file system's; `Pm*` are whole Postmark transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `fstat` (the buffered mode's stdio does one per open, to size its buffer).
    Getattr,
    /// `mkdir` of a subdirectory or client directory.
    Mkdir,
    /// `unlink` of a file.
    Unlink,
    /// `rmdir` of a subdirectory or client directory.
    Rmdir,
    /// `open` of an existing file (read, append).
    Open,
    /// One `read` system call.
    Read,
    /// One `write` system call.
    Write,
    /// `close`.
    Release,
    /// `open` with `O_CREAT` of a new file.
    Create,
    /// `lseek` (the buffered mode's append opens seek to the end, as stdio does).
    Lseek,
    /// A whole create: open, writes, close.
    PmCreate,
    /// A whole read: open, reads, close.
    PmRead,
    /// A whole append: open, writes, close.
    PmAppend,
    /// A whole delete: unlink.
    PmDelete,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 14] = [
        Op::Getattr,
        Op::Mkdir,
        Op::Unlink,
        Op::Rmdir,
        Op::Open,
        Op::Read,
        Op::Write,
        Op::Release,
        Op::Create,
        Op::Lseek,
        Op::PmCreate,
        Op::PmRead,
        Op::PmAppend,
        Op::PmDelete,
    ];

    /// The profile name (`OP_...`).
    pub fn name(self) -> &'static str {
        match self {
            Op::Getattr => "OP_GETATTR",
            Op::Mkdir => "OP_MKDIR",
            Op::Unlink => "OP_UNLINK",
            Op::Rmdir => "OP_RMDIR",
            Op::Open => "OP_OPEN",
            Op::Read => "OP_READ",
            Op::Write => "OP_WRITE",
            Op::Release => "OP_RELEASE",
            Op::Create => "OP_CREATE",
            Op::Lseek => "OP_LSEEK",
            Op::PmCreate => "OP_PM_CREATE",
            Op::PmRead => "OP_PM_READ",
            Op::PmAppend => "OP_PM_APPEND",
            Op::PmDelete => "OP_PM_DELETE",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Name of the profile layer the generator records into.
pub const LAYER: &str = "client";

/// A new recorder for the `client` layer with every [`Op`].
pub fn client_recorder() -> Recorder {
    let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
    Recorder::new(LAYER, &names, &RecorderConfig::default())
}

/// Highest latency the histograms track exactly: one hour (larger values are clamped).
const MAX_NS: u64 = 3_600_000_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds")
}

/// Per-operation latency histograms in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latencies {
    hist: Vec<Histogram<u64>>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            hist: Op::ALL.iter().map(|_| new_histogram()).collect(),
        }
    }
}

impl Latencies {
    /// Adds another set of histograms (another client) into this one.
    pub fn merge(&mut self, other: &Latencies) {
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            a.add(b).expect("same bounds");
        }
    }

    /// The histogram of `op`.
    pub fn histogram(&self, op: Op) -> &Histogram<u64> {
        &self.hist[op.index()]
    }

    /// Percentile summaries of every operation that was called at least once.
    pub fn summaries(&self) -> Vec<LatencySummary> {
        Op::ALL
            .iter()
            .filter_map(|&op| {
                let h = &self.hist[op.index()];
                (!h.is_empty()).then(|| LatencySummary {
                    op: op.name(),
                    count: h.len(),
                    mean_ns: h.mean(),
                    p50_ns: h.value_at_quantile(0.5),
                    p90_ns: h.value_at_quantile(0.9),
                    p99_ns: h.value_at_quantile(0.99),
                    p999_ns: h.value_at_quantile(0.999),
                    max_ns: h.max(),
                })
            })
            .collect()
    }
}

/// One operation's latency distribution (nanoseconds; hdrhistogram, 3 significant digits).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// `OP_...` name.
    pub op: &'static str,
    /// Calls recorded.
    pub count: u64,
    /// Mean latency.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest latency.
    pub max_ns: u64,
}

/// One client's timer: records into its own histograms and the shared `client` recorder.
#[derive(Debug)]
pub struct Probe {
    recorder: Recorder,
    latencies: Latencies,
    cycles_per_sec: u64,
}

/// A started measurement; finish it with [`Probe::finish`].
#[must_use = "a started measurement must be finished"]
#[derive(Debug, Clone, Copy)]
pub struct Span {
    op: Op,
    token: Token,
    start: u64,
}

impl Probe {
    /// A probe recording into `recorder` (from [`client_recorder`]).
    pub fn new(recorder: Recorder) -> Probe {
        Probe {
            recorder,
            latencies: Latencies::default(),
            cycles_per_sec: ClockInfo::get().cycles_per_sec.max(1),
        }
    }

    /// Starts timing `op` (counted in the profile now, before the call: `docs/format.md#buckets`).
    #[inline]
    pub fn start(&self, op: Op) -> Span {
        let token = self.recorder.start(op.index());
        Span {
            op,
            token,
            start: clock::now(),
        }
    }

    /// Stops timing and records the latency.
    #[inline]
    pub fn finish(&mut self, span: Span) {
        let end = clock::now();
        self.recorder.record(span.token, end);
        let cycles = end.saturating_sub(span.start) as u128;
        let ns = (cycles * 1_000_000_000 / self.cycles_per_sec as u128) as u64;
        self.latencies.hist[span.op.index()].saturating_record(ns.max(1));
    }

    /// Runs `f` timed as `op`.
    #[inline]
    pub fn time<R>(&mut self, op: Op, f: impl FnOnce() -> R) -> R {
        let span = self.start(op);
        let r = f();
        self.finish(span);
        r
    }

    /// The histograms recorded so far.
    pub fn latencies(&self) -> &Latencies {
        &self.latencies
    }

    /// Gives up the histograms.
    pub fn into_latencies(self) -> Latencies {
        self.latencies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::ops::is_valid_name;

    #[test]
    fn names_are_valid_and_distinct() {
        let mut names: Vec<_> = Op::ALL.iter().map(|o| o.name()).collect();
        assert!(names.iter().all(|n| is_valid_name(n)));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Op::ALL.len());
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
    }

    #[test]
    fn probe_records_both_ways() {
        let rec = client_recorder();
        let mut p = Probe::new(rec.clone());
        p.time(Op::Read, || std::hint::black_box(1));
        p.time(Op::Read, || std::hint::black_box(2));
        assert_eq!(p.latencies().histogram(Op::Read).len(), 2);
        assert_eq!(rec.snapshot().count("OP_READ"), 2);
        let s = p.latencies().summaries();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].op, "OP_READ");
        let mut merged = Latencies::default();
        merged.merge(p.latencies());
        merged.merge(p.latencies());
        assert_eq!(merged.histogram(Op::Read).len(), 4);
    }
}
