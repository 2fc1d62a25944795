//! Derived views of a profile (SPEC §7 "Views"): the summary table, bucket latency ranges,
//! estimated latency per bucket, the time-lapse matrix and the consistency check.

use std::cmp::Ordering;

use crate::bucket::Resolution;
use crate::ops;
use crate::profile::{Layer, OpProfile, Profile};

/// One row of the summary table (thesis table 3.1).
#[derive(Debug, Clone, PartialEq)]
pub struct OpSummary {
    /// Operation name.
    pub name: String,
    /// Calls counted.
    pub count: u64,
    /// Total latency in cycles.
    pub total_cycles: u64,
    /// Total latency in seconds, when the clock rate is known.
    pub total_secs: Option<f64>,
    /// Mean latency in cycles of the calls that finished.
    pub mean_cycles: f64,
    /// Share of the layer's total latency, 0..=1.
    pub latency_share: f64,
}

/// The summary of a layer: one row per operation, largest total latency first (ties in listing
/// order).
pub fn summary(layer: &Layer, cycles_per_sec: Option<u64>) -> Vec<OpSummary> {
    let all = layer.total_latency().max(1) as f64;
    let mut rows: Vec<OpSummary> = layer
        .ops
        .iter()
        .map(|o| OpSummary {
            name: o.name.clone(),
            count: o.count,
            total_cycles: o.total,
            total_secs: cycles_per_sec.map(|hz| o.total as f64 / hz as f64),
            mean_cycles: o.mean(),
            latency_share: o.total as f64 / all,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_cycles
            .cmp(&a.total_cycles)
            .then_with(|| ops::listing_order(&a.name, &b.name))
    });
    rows
}

/// The latency range of one bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketRange {
    /// Bucket index.
    pub bucket: usize,
    /// Lower bound in cycles (inclusive).
    pub lo_cycles: f64,
    /// Upper bound in cycles (exclusive).
    pub hi_cycles: f64,
    /// Mid-point in cycles (mean of the bounds).
    pub mid_cycles: f64,
}

impl BucketRange {
    /// The range in seconds at this clock rate: `(lo, hi, mid)`.
    pub fn secs(&self, cycles_per_sec: u64) -> (f64, f64, f64) {
        let hz = cycles_per_sec as f64;
        (
            self.lo_cycles / hz,
            self.hi_cycles / hz,
            self.mid_cycles / hz,
        )
    }
}

/// Latency ranges of every bucket of a layer.
pub fn bucket_ranges(resolution: Resolution, buckets: usize) -> Vec<BucketRange> {
    (0..buckets)
        .map(|b| {
            let (lo, hi) = resolution.range(b);
            BucketRange {
                bucket: b,
                lo_cycles: lo,
                hi_cycles: hi,
                mid_cycles: (lo + hi) / 2.0,
            }
        })
        .collect()
}

/// Estimated total latency per bucket in cycles: count × bucket mid-point (summed over epochs).
pub fn estimated_latency(op: &OpProfile, resolution: Resolution) -> Vec<f64> {
    op.merged()
        .iter()
        .enumerate()
        .map(|(b, &n)| n as f64 * resolution.midpoint(b))
        .collect()
}

/// Estimated total latency of an operation in cycles: Σ count × mid-point.
pub fn estimated_total(op: &OpProfile, resolution: Resolution) -> f64 {
    estimated_latency(op, resolution).iter().sum()
}

/// The time-lapse matrix of an operation: `matrix[epoch][bucket]`.
pub fn timelapse_matrix(op: &OpProfile) -> &[Vec<u64>] {
    &op.epochs
}

/// One inconsistency found by [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inconsistency {
    /// Layer name.
    pub layer: String,
    /// Operation name, when the problem is an operation's.
    pub op: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.op {
            Some(op) => write!(f, "layer {}: {}: {}", self.layer, op, self.message),
            None => write!(f, "layer {}: {}", self.layer, self.message),
        }
    }
}

/// Checks a profile's consistency: every operation's bucket sum is at most its count and lower
/// by at most `in_flight` (calls that may have been running when the snapshot was taken); shapes
/// match the layer's declared buckets and epochs; a resolution-`r` layer of this tool has `64·r`
/// buckets; the total latency is possible for the buckets filled.
pub fn check(p: &Profile, in_flight: u64) -> Vec<Inconsistency> {
    let mut out = Vec::new();
    let original = p.extra("source") == Some("original");
    for l in &p.layers {
        let mut bad = |op: Option<&str>, message: String| {
            out.push(Inconsistency {
                layer: l.name.clone(),
                op: op.map(str::to_string),
                message,
            })
        };
        if !original && l.buckets != l.resolution.buckets() {
            bad(
                None,
                format!(
                    "{} buckets, but resolution {} has {}",
                    l.buckets,
                    l.resolution.get(),
                    l.resolution.buckets()
                ),
            );
        }
        if l.max_epochs_reached && l.epoch_cycles == 0 {
            bad(None, "max_epochs_reached without time-lapse epochs".into());
        }
        for o in &l.ops {
            if o.epochs.len() != l.epochs || o.epochs.iter().any(|e| e.len() != l.buckets) {
                bad(
                    Some(&o.name),
                    "epoch or bucket count differs from the layer's".into(),
                );
                continue;
            }
            let sum = o.bucket_sum();
            let count = o.count as u128;
            match sum.cmp(&count) {
                Ordering::Greater => bad(
                    Some(&o.name),
                    format!("bucket sum {sum} exceeds count {count}"),
                ),
                Ordering::Less if count - sum > in_flight as u128 => bad(
                    Some(&o.name),
                    format!(
                        "bucket sum {sum} is {} below count {count} (at most {in_flight} may be in flight)",
                        count - sum
                    ),
                ),
                _ => {}
            }
            // Each finished call contributed at least its bucket's lower bound to the total.
            if !original {
                let floor: u128 = o
                    .merged()
                    .iter()
                    .enumerate()
                    .map(|(b, &n)| n as u128 * l.resolution.range(b).0 as u128)
                    .sum();
                if (o.total as u128) < floor {
                    bad(
                        Some(&o.name),
                        format!(
                            "total {} is below the sum of its buckets' lower bounds {floor}",
                            o.total
                        ),
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, count, total, [(bucket, n)])
    type OpSpec<'a> = (&'a str, u64, u64, &'a [(usize, u64)]);

    fn layer_with(ops: &[OpSpec]) -> Layer {
        let mut l = Layer::new("fuse", Resolution::ONE);
        for &(name, count, total, buckets) in ops {
            let mut o = OpProfile::new(name, 64, 1);
            o.count = count;
            o.total = total;
            for &(b, n) in buckets {
                o.epochs[0][b] = n;
            }
            l.ops.push(o);
        }
        l
    }

    #[test]
    fn summary_sorts_by_total_latency() {
        let l = layer_with(&[
            ("OP_LOOKUP", 10, 1000, &[(6, 10)]),
            ("OP_READ", 2, 5000, &[(11, 2)]),
            ("OP_WRITE", 1, 1000, &[(9, 1)]),
        ]);
        let s = summary(&l, Some(1_000_000_000));
        let names: Vec<&str> = s.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["OP_READ", "OP_LOOKUP", "OP_WRITE"]);
        assert_eq!(s[0].mean_cycles, 2500.0);
        assert_eq!(s[0].total_secs, Some(5e-6));
        assert!((s[0].latency_share - 5000.0 / 7000.0).abs() < 1e-12);
    }

    #[test]
    fn estimates_use_midpoints() {
        let l = layer_with(&[("OP_READ", 3, 100, &[(4, 2), (5, 1)])]);
        let est = estimated_latency(&l.ops[0], Resolution::ONE);
        assert_eq!(est[4], 2.0 * 24.0);
        assert_eq!(est[5], 48.0);
        assert_eq!(estimated_total(&l.ops[0], Resolution::ONE), 96.0);
        let r = bucket_ranges(Resolution::ONE, 64);
        assert_eq!(
            (r[4].lo_cycles, r[4].hi_cycles, r[4].mid_cycles),
            (16.0, 32.0, 24.0)
        );
        assert_eq!(r[4].secs(16).0, 1.0);
    }

    #[test]
    fn check_finds_inconsistencies() {
        let good = Profile {
            layers: vec![layer_with(&[("OP_READ", 3, 100, &[(4, 2), (5, 1)])])],
            ..Profile::default()
        };
        assert!(check(&good, 0).is_empty());
        let over = Profile {
            layers: vec![layer_with(&[("OP_READ", 2, 100, &[(4, 2), (5, 1)])])],
            ..Profile::default()
        };
        assert_eq!(check(&over, 0).len(), 1);
        let under = Profile {
            layers: vec![layer_with(&[("OP_READ", 5, 100, &[(4, 2), (5, 1)])])],
            ..Profile::default()
        };
        assert_eq!(check(&under, 1).len(), 1);
        assert!(check(&under, 2).is_empty());
        let low_total = Profile {
            layers: vec![layer_with(&[("OP_READ", 1, 10, &[(10, 1)])])],
            ..Profile::default()
        };
        assert_eq!(check(&low_total, 0).len(), 1);
    }
}
