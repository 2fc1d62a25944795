//! Derived views of a profile (`docs/design.md#analysis`): the summary table, bucket latency
//! ranges, estimated latency per bucket, the time-lapse matrix and the consistency check.

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

/// The quantiles shown by the tools: p50, p90, p99, p99.9 and the maximum (q = 1).
pub const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// The estimated `q`-quantile (0 < q <= 1) of a histogram `counts` at `resolution`, in cycles;
/// `None` when it is empty.
///
/// The estimator: the quantile's rank is `q · n` (calls, counted from the fastest); the
/// bucket `b` where the running count reaches it holds the quantile, and within `b = [lo, hi)`
/// it is placed by geometric interpolation, `lo · (hi / lo)^f` with `f` the fraction of the
/// bucket's calls at or below the rank — the calls are taken as spread evenly over the
/// bucket's log scale, as the buckets themselves are. (In bucket 0, whose range starts at 0,
/// the interpolation is linear.) The maximum (q = 1) is thus the upper bound of the slowest
/// non-empty bucket. This is an estimate: the true value lies somewhere in the same bucket,
/// within a factor of `2^(1/r)`.
pub fn quantile(counts: &[u64], resolution: Resolution, q: f64) -> Option<f64> {
    let n: u128 = counts.iter().map(|&c| c as u128).sum();
    if n == 0 || !(q > 0.0 && q <= 1.0) {
        return None;
    }
    let rank = q * n as f64;
    let mut cum = 0f64;
    let last = counts.iter().rposition(|&c| c > 0)?;
    for (b, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let c = c as f64;
        if cum + c >= rank || b == last {
            let f = ((rank - cum) / c).clamp(0.0, 1.0);
            let (lo, hi) = resolution.range(b);
            return Some(if lo <= 0.0 {
                hi * f
            } else {
                lo * (hi / lo).powf(f)
            });
        }
        cum += c;
    }
    None
}

/// The most the slowest call of `op` can have taken, in cycles: the upper bound of its slowest
/// bucket, or less where the recorded total says so (the total less the least every other call
/// took: their buckets' lower bounds). For a single call it is that call's latency, exactly.
/// `None` when no call finished.
pub fn max_bound(op: &OpProfile, resolution: Resolution) -> Option<f64> {
    let merged = op.merged();
    let last = merged.iter().rposition(|&c| c > 0)?;
    let (lo_last, hi_last) = resolution.range(last);
    let others: f64 = merged
        .iter()
        .enumerate()
        .map(|(b, &n)| n as f64 * resolution.range(b).0)
        .sum::<f64>()
        - lo_last;
    // The total may hold a few calls more than the buckets in a live snapshot: the bound only
    // grows then, and stays a bound.
    Some((op.total as f64 - others).clamp(lo_last, hi_last))
}

/// [`QUANTILES`] of an operation (all epochs), estimated with [`quantile`], none above the
/// most its slowest call can have taken ([`max_bound`]), which is the maximum given. One
/// call's percentiles are all its own latency.
pub fn percentiles(op: &OpProfile, resolution: Resolution) -> Option<[f64; 5]> {
    percentiles_with_max(op, resolution, None)
}

/// [`percentiles`], with the operation's maximum `recorded` where one is known exactly (the
/// slowest request a profile records): it is the maximum, and no percentile exceeds it. A
/// recorded maximum outside the slowest bucket (from another run) is not used.
pub fn percentiles_with_max(
    op: &OpProfile,
    resolution: Resolution,
    recorded: Option<f64>,
) -> Option<[f64; 5]> {
    let merged = op.merged();
    let bound = max_bound(op, resolution)?;
    let last = merged.iter().rposition(|&c| c > 0)?;
    let (lo, hi) = resolution.range(last);
    let max = match recorded {
        Some(m) if m >= lo.floor() && m < hi => m,
        _ => bound,
    };
    if merged.iter().sum::<u64>() == 1 {
        // One call: every percentile is its latency.
        return Some([max; 5]);
    }
    let mut out = [0.0; 5];
    for (slot, (_, q)) in out.iter_mut().zip(QUANTILES) {
        *slot = quantile(&merged, resolution, q)?.min(max);
    }
    out[4] = max;
    Some(out)
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
            // Each finished call contributed at least its bucket's lowest integer latency to
            // the total. Exact integers: the floating-point bound 2^(b/r) is off by a few
            // cycles above 2^53. Buckets past 64·r are a shape problem reported above.
            if !original {
                let floor = o
                    .merged()
                    .iter()
                    .enumerate()
                    .filter_map(|(b, &n)| Some(n as u128 * l.resolution.lowest(b)? as u128))
                    .fold(0u128, u128::saturating_add);
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

    #[test]
    fn quantiles_interpolate_geometrically_within_the_bucket() {
        let mut c = vec![0u64; 64];
        c[10] = 100;
        let r = Resolution::ONE;
        // Half of bucket 10 ([1024, 2048)) lies at 1024 · 2^0.5.
        let p50 = quantile(&c, r, 0.5).unwrap();
        assert!((p50 - 1024.0 * 2f64.sqrt()).abs() < 1e-6, "{p50}");
        assert_eq!(quantile(&c, r, 1.0), Some(2048.0));
        c[20] = 1;
        // p99 of 101 calls is still in bucket 10; the maximum is bucket 20's upper bound.
        assert!(quantile(&c, r, 0.99).unwrap() < 2048.0);
        assert_eq!(quantile(&c, r, 1.0), Some(2_097_152.0));
        assert_eq!(quantile(&[0; 64], r, 0.5), None);
        assert_eq!(quantile(&c, r, 0.0), None);
        c[0] = 1000;
        assert!(quantile(&c, r, 0.1).unwrap() < 1.0);
    }

    fn op(total: u64, buckets: &[(usize, u64)]) -> OpProfile {
        let mut o = OpProfile::new("OP_GETATTR", 64, 1);
        for &(b, n) in buckets {
            o.epochs[0][b] = n;
            o.count += n;
        }
        o.total = total;
        o
    }

    #[test]
    fn one_calls_percentiles_are_its_latency_and_none_exceeds_the_maximum() {
        let r = Resolution::ONE;
        // A single GETATTR of 1,138,000 cycles (bucket 20): every percentile is it.
        let one = op(1_138_000, &[(20, 1)]);
        assert_eq!(percentiles(&one, r), Some([1_138_000.0; 5]));
        assert_eq!(max_bound(&one, r), Some(1_138_000.0));
        // 100 calls in bucket 10 and one slow call: the total bounds the slow one to less
        // than its bucket's top, and no percentile exceeds that.
        let tail = op(100 * 1100 + 1_500_000, &[(10, 100), (20, 1)]);
        let bound = max_bound(&tail, r).unwrap();
        assert!((1_500_000.0..2_097_152.0).contains(&bound), "{bound}");
        let p = percentiles(&tail, r).unwrap();
        assert_eq!(p[4], bound);
        assert!(p.iter().all(|&v| v <= bound), "{p:?}");
        // A recorded maximum is the maximum, and bounds the others; one from another bucket
        // is not used.
        let p = percentiles_with_max(&tail, r, Some(1_200_000.0)).unwrap();
        assert_eq!(p[4], 1_200_000.0);
        assert!(p.iter().all(|&v| v <= 1_200_000.0), "{p:?}");
        let p = percentiles_with_max(&tail, r, Some(5_000.0)).unwrap();
        assert_eq!(p[4], bound);
        assert_eq!(percentiles(&op(0, &[]), r), None);
    }

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

    /// A one-operation profile at resolution `r` with `n` calls in each given bucket.
    fn at_resolution(r: u32, total: u64, buckets: &[(usize, u64)]) -> Profile {
        let res = Resolution::new(r).unwrap();
        let mut l = Layer::new("fuse", res);
        let mut o = OpProfile::new("OP_READ", res.buckets(), 1);
        for &(b, n) in buckets {
            o.epochs[0][b] = n;
            o.count = o.count.saturating_add(n);
        }
        o.total = total;
        l.ops.push(o);
        Profile {
            layers: vec![l],
            ..Profile::default()
        }
    }

    #[test]
    fn check_floor_is_exact_above_2_pow_53() {
        // Bucket 111 at r = 2 starts at ceil(2^55.5) = 50952413380206181 (the smallest c with
        // c² >= 2^111); as an f64, 2^55.5 rounds to ...184. One call exactly at the bound is
        // consistent; one cycle less is not.
        let lowest = 50_952_413_380_206_181u64;
        assert!(check(&at_resolution(2, lowest, &[(111, 1)]), 0).is_empty());
        let below = check(&at_resolution(2, lowest - 1, &[(111, 1)]), 0);
        assert_eq!(below.len(), 1, "{below:?}");
        assert!(
            below[0]
                .message
                .contains("below the sum of its buckets' lower bounds")
        );
    }

    #[test]
    fn check_floor_saturates_instead_of_wrapping() {
        // At r = 8 the floor can pass 2^128: u64::MAX calls in bucket 511 (lowest
        // 16915738899553466671) and 17321346250839341480 in bucket 484 make 2^128 +
        // 1287104721200402169, which wrapped would be below a total of u64::MAX and pass.
        let p = at_resolution(
            8,
            u64::MAX,
            &[(484, 17_321_346_250_839_341_480), (511, u64::MAX)],
        );
        let found = check(&p, 0);
        assert!(
            found.iter().any(|i| i
                .message
                .contains("below the sum of its buckets' lower bounds")),
            "{found:?}"
        );
        // Every bucket of r = 8 full: no overflow either.
        let full: Vec<(usize, u64)> = (0..512).map(|b| (b, u64::MAX)).collect();
        let mut p = at_resolution(8, u64::MAX, &[]);
        for (b, n) in full {
            p.layers[0].ops[0].epochs[0][b] = n;
        }
        p.layers[0].ops[0].count = u64::MAX;
        assert!(
            check(&p, 0)
                .iter()
                .any(|i| i.message.contains("below the sum"))
        );
    }

    #[test]
    fn buckets_past_the_resolution_are_a_shape_problem_not_a_panic() {
        // A versioned layer of resolution 1 with 100 buckets: reported, and the floor skips
        // buckets 64 and up instead of indexing past the bound table.
        let mut p = at_resolution(1, 10, &[(3, 1)]);
        p.layers[0].buckets = 100;
        p.layers[0].ops[0].epochs[0].resize(100, 0);
        p.layers[0].ops[0].epochs[0][99] = 1;
        p.layers[0].ops[0].count = 2;
        let found = check(&p, 0);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .contains("100 buckets, but resolution 1 has 64")
        );
    }
}
