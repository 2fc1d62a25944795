//! Comparing two complete profiles (thesis §3.2.2; `docs/design.md#analysis`): the short list of
//! operations worth a person's look.
//!
//! 1. The operations of both layers are sorted by total latency (the larger of the two).
//! 2. Insignificant ones are dropped: those whose share of their layer's calls and of its
//!    latency is below the threshold in both profiles.
//! 3. The rest are scored with one method ([`crate::compare`]) and their differences are named:
//!    calls or total latency changed by at least the change threshold; a peak that is new, has
//!    vanished, has moved (its top more than one octave away), or whose share of the calls
//!    changed by at least the change threshold (in percentage points). Peaks holding less than
//!    the minimum peak share (default 1%) of the operation's calls are left out on both
//!    sides: one stray call in an empty bucket is a peak on a log scale, not a new path.
//! 4. Operations with no named difference and a score below the minimum are nearly identical and
//!    dropped. The others are weighed by the time at stake ([`Finding::stake`]): the latency of
//!    the calls that differ, bucket by bucket (|calls in A − calls in B| × the bucket's
//!    mid-point, summed). An operation whose time at stake is below the minimum stake (default
//!    1% of the layer's time) is minor and dropped, so that a peak of one or two calls, which
//!    scores 100 as readily as a real change, does not crowd the list; the rest are listed by
//!    it: scores saturate at 100 for large differences and cannot rank them on their own.

use std::fmt::Write as _;

use serde::Serialize;

use profile_store::Layer;

use crate::background::{Shares, is_background};
use crate::compare::{self, GroupConfig, Method};
use crate::error::Error;
use crate::hist::Histogram;
use crate::input::Loaded;
use crate::pairs::Pair;
use crate::pairs::layer_pairs;
use crate::peaks::{self, Peak};
use crate::summary::{self, TableFormat};
use crate::units::{Buckets, Clock, fmt_cycles, fmt_pct};

/// `fsprof diff`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffCommand {
    /// Profile A (before).
    pub a: String,
    /// Profile B (after).
    pub b: String,
    /// `--layer`.
    pub layer: Option<String>,
    /// Selection settings.
    pub diff: DiffConfig,
    /// Operations listed at most. Default 10.
    pub top: usize,
    /// Output format (text, CSV of the listed operations, or JSON).
    pub format: TableFormat,
}

/// Settings of [`diff`].
#[derive(Debug, Clone, PartialEq)]
pub struct DiffConfig {
    /// The method whose score ranks operations. Default GROUPLAT.
    pub method: Method,
    /// Insignificance threshold: a fraction of the layer's calls and latency. Default 0.01.
    pub threshold: f64,
    /// A change of calls, latency or a peak's share counts from this many percent. Default 10.
    pub change: f64,
    /// Operations with no named difference need at least this score to be listed. Default 10.
    pub min_score: f64,
    /// Operations need at least this time at stake, as a fraction of the layer's time (the
    /// larger of A's and B's, of the operations counted in the shares), to be listed.
    /// Default 0.01.
    pub min_stake: f64,
    /// Settings of the GROUP methods (their insignificance threshold is `threshold`).
    pub group: GroupConfig,
    /// Whether background operations count in the shares of latency. Default: no.
    pub shares: Shares,
}

impl Default for DiffConfig {
    fn default() -> Self {
        DiffConfig {
            method: Method::Grouplat,
            threshold: 0.01,
            change: 10.0,
            min_score: 10.0,
            min_stake: 0.01,
            group: GroupConfig::default(),
            shares: Shares::default(),
        }
    }
}

/// A named difference of one operation between A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// The operation has calls only in B.
    New,
    /// The operation has calls only in A.
    Vanished,
    /// Calls changed.
    Calls {
        /// Calls in A.
        a: u64,
        /// Calls in B.
        b: u64,
    },
    /// Recorded total latency changed.
    Latency {
        /// Total cycles in A.
        a: u64,
        /// Total cycles in B.
        b: u64,
        /// Mean cycles in A.
        mean_a: f64,
        /// Mean cycles in B.
        mean_b: f64,
    },
    /// A peak in B with no counterpart in A.
    NewPeak {
        /// The peak in B.
        peak: Peak,
    },
    /// A peak in A with no counterpart in B.
    VanishedPeak {
        /// The peak in A.
        peak: Peak,
    },
    /// A peak whose top moved by more than one octave.
    MovedPeak {
        /// The peak in A.
        from: Peak,
        /// The peak in B.
        to: Peak,
    },
    /// A peak whose share of the calls changed.
    PeakShare {
        /// The peak in A.
        from: Peak,
        /// The peak in B.
        to: Peak,
    },
}

/// One operation worth a look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Layer name (A's).
    pub layer: String,
    /// Operation name.
    pub op: String,
    /// The ranking method's score, 0..=100.
    pub score: f64,
    /// What differs, most telling first.
    pub reasons: Vec<Reason>,
    /// Total latency in A, cycles (for ordering ties).
    pub total_a: u64,
    /// Total latency in B, cycles.
    pub total_b: u64,
    /// The time at stake, cycles ([`Finding::stake`]).
    pub stake_cycles: f64,
}

impl Finding {
    /// The time at stake, which weighs and ranks findings: the latency of the calls that
    /// differ between A and B, Σ over the buckets of |calls in A − calls in B| × the bucket's
    /// mid-point, in cycles. A peak of two calls puts two calls' time at stake, whatever its
    /// score; an operation of 88 ms that changed stays ahead of one of 3.5 ms.
    pub fn stake(&self) -> f64 {
        self.stake_cycles
    }
}

/// Σ |a(b) − b(b)| × mid(b) of two aligned histograms, in cycles.
fn stake_of(pair: &Pair) -> f64 {
    (0..pair.a.len().min(pair.b.len()))
        .filter(|&i| pair.a.counts[i] != pair.b.counts[i])
        .map(|i| pair.a.counts[i].abs_diff(pair.b.counts[i]) as f64 * pair.a.buckets.mid(i))
        .fold(0.0, |x, y| x + y)
}

/// The outcome of [`diff`] for one pair of layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffReport {
    /// Operations worth a look, most different first.
    pub findings: Vec<Finding>,
    /// Operations dropped as insignificant.
    pub insignificant: Vec<String>,
    /// Operations dropped as nearly identical.
    pub identical: Vec<String>,
    /// Operations dropped as minor: their time at stake is below the minimum stake.
    pub minor: Vec<String>,
}

/// Runs the selection on one pair of layers (which must have the same resolution).
pub fn diff(a: &Layer, b: &Layer, cfg: &DiffConfig) -> DiffReport {
    let (ba, bb) = (Buckets::of(a), Buckets::of(b));
    let mut names: Vec<&str> = a
        .ops
        .iter()
        .chain(&b.ops)
        .map(|o| o.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let total_of = |l: &Layer, n: &str| l.op(n).map_or(0, |o| o.total);
    names.sort_by(|x, y| {
        let kx = total_of(a, x).max(total_of(b, x));
        let ky = total_of(a, y).max(total_of(b, y));
        ky.cmp(&kx)
            .then_with(|| profile_store::ops::listing_order(x, y))
    });
    let weight = |l: &Layer, n: &str| crate::pairs::weight(l, n, cfg.shares);
    let mut group = cfg.group.clone();
    group.insignificant_below = cfg.threshold;
    let mut report = DiffReport {
        findings: Vec::new(),
        insignificant: Vec::new(),
        identical: Vec::new(),
        minor: Vec::new(),
    };
    // The layer's time, for the minimum stake: the larger of the two, of the operations
    // counted in the shares.
    let layer_time = cfg.shares.basis(a).max(cfg.shares.basis(b)) as f64;
    for name in names {
        let (wa, wb) = (weight(a, name), weight(b, name));
        if wa < cfg.threshold && wb < cfg.threshold {
            report.insignificant.push(name.to_string());
            continue;
        }
        let ha = a
            .op(name)
            .map_or_else(|| Histogram::empty(ba), |o| Histogram::of(o, ba));
        let hb = b
            .op(name)
            .map_or_else(|| Histogram::empty(bb), |o| Histogram::of(o, bb));
        let mut pair = Pair::new(ha, hb);
        pair.weight_a = wa;
        pair.weight_b = wb;
        let score = compare::score(cfg.method, &pair, &group).d;
        let reasons = reasons(a, b, name, &pair, cfg);
        if reasons.is_empty() && score < cfg.min_score {
            report.identical.push(name.to_string());
            continue;
        }
        let stake_cycles = stake_of(&pair);
        if stake_cycles < cfg.min_stake * layer_time {
            report.minor.push(name.to_string());
            continue;
        }
        report.findings.push(Finding {
            layer: a.name.clone(),
            op: name.to_string(),
            score,
            reasons,
            total_a: total_of(a, name),
            total_b: total_of(b, name),
            stake_cycles,
        });
    }
    // Scores saturate at 100 (7 of 9 operations of two builds did), so they cannot rank:
    // READDIR 3.5 -> 1.7 ms came before OPEN 88 -> 54 ms. The latency at stake keeps its order
    // at any difference.
    report.findings.sort_by(|x, y| {
        y.stake()
            .total_cmp(&x.stake())
            .then_with(|| y.score.total_cmp(&x.score))
            .then_with(|| x.op.cmp(&y.op))
    });
    report
}

/// The named differences of one operation.
fn reasons(a: &Layer, b: &Layer, name: &str, pair: &Pair, cfg: &DiffConfig) -> Vec<Reason> {
    let (oa, ob) = (a.op(name), b.op(name));
    let (ca, cb) = (oa.map_or(0, |o| o.count), ob.map_or(0, |o| o.count));
    if ca == 0 && cb > 0 {
        return vec![Reason::New];
    }
    if cb == 0 && ca > 0 {
        return vec![Reason::Vanished];
    }
    let mut out = Vec::new();
    let changed = |x: f64, y: f64| compare::normalized_difference(x, y) >= cfg.change;
    if changed(ca as f64, cb as f64) {
        out.push(Reason::Calls { a: ca, b: cb });
    }
    let (ta, tb) = (oa.map_or(0, |o| o.total), ob.map_or(0, |o| o.total));
    if changed(ta as f64, tb as f64) {
        out.push(Reason::Latency {
            a: ta,
            b: tb,
            mean_a: oa.map_or(0.0, |o| o.mean()),
            mean_b: ob.map_or(0.0, |o| o.mean()),
        });
    }
    let pa = peaks::find_significant(&pair.a, cfg.group.prominence, cfg.group.min_peak_share);
    let pb = peaks::find_significant(&pair.b, cfg.group.prominence, cfg.group.min_peak_share);
    let tolerance = pair.a.buckets.resolution.get() as usize;
    // Match peaks whose ranges overlap (nearest top first); then pair the peaks left over on
    // both sides in bucket order when there are as many on each side (a peak that moved away
    // from its old range); what is left after that is new or vanished.
    let mut match_a: Vec<Option<usize>> = vec![None; pa.len()];
    let mut taken_b = vec![false; pb.len()];
    for (i, x) in pa.iter().enumerate() {
        let best = pb
            .iter()
            .enumerate()
            .filter(|(j, y)| !taken_b[*j] && y.lo <= x.hi && x.lo <= y.hi)
            .min_by_key(|(_, y)| y.mode.abs_diff(x.mode));
        if let Some((j, _)) = best {
            match_a[i] = Some(j);
            taken_b[j] = true;
        }
    }
    let left_a: Vec<usize> = (0..pa.len()).filter(|&i| match_a[i].is_none()).collect();
    let left_b: Vec<usize> = (0..pb.len()).filter(|&j| !taken_b[j]).collect();
    if left_a.len() == left_b.len() {
        for (&i, &j) in left_a.iter().zip(&left_b) {
            match_a[i] = Some(j);
            taken_b[j] = true;
        }
    }
    let mut peak_reasons = Vec::new();
    for (x, m) in pa.iter().zip(&match_a) {
        match m {
            None => peak_reasons.push(Reason::VanishedPeak { peak: x.clone() }),
            Some(j) => {
                let y = &pb[*j];
                if x.mode.abs_diff(y.mode) > tolerance {
                    peak_reasons.push(Reason::MovedPeak {
                        from: x.clone(),
                        to: y.clone(),
                    });
                } else if (y.share - x.share).abs() * 100.0 >= cfg.change {
                    peak_reasons.push(Reason::PeakShare {
                        from: x.clone(),
                        to: y.clone(),
                    });
                }
            }
        }
    }
    for (j, y) in pb.iter().enumerate() {
        if !taken_b[j] {
            peak_reasons.push(Reason::NewPeak { peak: y.clone() });
        }
    }
    // Peaks in bucket order.
    peak_reasons.sort_by_key(|r| match r {
        Reason::NewPeak { peak } | Reason::VanishedPeak { peak } => peak.lo,
        Reason::MovedPeak { from, .. } | Reason::PeakShare { from, .. } => from.lo,
        _ => 0,
    });
    out.extend(peak_reasons);
    out
}

/// Renders a report as text lines (no trailing newline handling: each line ends with `\n`).
pub fn render(report: &DiffReport, clock: Clock, top: usize, out: &mut String) {
    use std::fmt::Write as _;
    let shown = report.findings.len().min(top);
    let _ = writeln!(
        out,
        "{} worth a look ({} insignificant, {} nearly identical{}{})",
        plural(report.findings.len(), "operation"),
        report.insignificant.len(),
        report.identical.len(),
        match report.minor.len() {
            0 => String::new(),
            n => format!(", {n} minor"),
        },
        if shown < report.findings.len() {
            format!(", {} more not shown: --top", report.findings.len() - shown)
        } else {
            String::new()
        }
    );
    for (i, f) in report.findings.iter().take(top).enumerate() {
        let _ = writeln!(
            out,
            "{}. {}  D={:.1}, at stake {}{}",
            i + 1,
            f.op,
            f.score,
            clock.latency(f.stake()),
            if is_background(&f.op) {
                "  (background: no caller waits)"
            } else {
                ""
            }
        );
        if f.reasons.is_empty() {
            let _ = writeln!(out, "   shape differs (no single named change)");
        }
        for r in &f.reasons {
            let _ = writeln!(out, "   {}", describe(r, clock));
        }
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn change(a: f64, b: f64) -> String {
    if a == 0.0 {
        "new".into()
    } else {
        format!("{:+.1}%", (b - a) / a * 100.0)
    }
}

fn peak_text(p: &Peak, clock: Clock) -> String {
    let range = if p.lo == p.hi {
        format!("bucket {}", p.lo)
    } else {
        format!("buckets {}-{}", p.lo, p.hi)
    };
    format!(
        "{range} ({}, {}, mean {})",
        crate::show::calls(p.calls),
        fmt_pct(p.share),
        clock.latency(p.mean_cycles)
    )
}

/// One line describing a reason.
pub fn describe(r: &Reason, clock: Clock) -> String {
    let lat = |c: f64| match clock.secs(c) {
        Some(_) => clock.latency(c),
        None => format!("{} cycles", fmt_cycles(c)),
    };
    match r {
        Reason::New => "new: no calls in A".into(),
        Reason::Vanished => "vanished: no calls in B".into(),
        Reason::Calls { a, b } => format!("calls {a} -> {b} ({})", change(*a as f64, *b as f64)),
        Reason::Latency {
            a,
            b,
            mean_a,
            mean_b,
        } => format!(
            "total latency {} -> {} ({}), mean {} -> {}",
            lat(*a as f64),
            lat(*b as f64),
            change(*a as f64, *b as f64),
            lat(*mean_a),
            lat(*mean_b)
        ),
        Reason::NewPeak { peak } => format!("new peak at {}", peak_text(peak, clock)),
        Reason::VanishedPeak { peak } => format!("vanished peak at {}", peak_text(peak, clock)),
        Reason::MovedPeak { from, to } => format!(
            "peak moved from bucket {} to {}: {} -> {}",
            from.mode,
            to.mode,
            peak_text(from, clock),
            peak_text(to, clock)
        ),
        Reason::PeakShare { from, to } => format!(
            "peak at bucket {} holds {} of the calls, was {}",
            to.mode,
            fmt_pct(to.share),
            fmt_pct(from.share)
        ),
    }
}

/// `fsprof diff`: the operations worth a look in every paired layer.
pub fn run(a: &Loaded, b: &Loaded, c: &DiffCommand, out: &mut String) -> Result<(), Error> {
    let mut reports: Vec<(String, DiffReport)> = Vec::new();
    for (la, lb) in layer_pairs(a, b, c.layer.as_deref())? {
        reports.push((la.name.clone(), diff(la, lb, &c.diff)));
    }
    match c.format {
        TableFormat::Csv => {
            let clock = if a.clock().known() {
                a.clock()
            } else {
                b.clock()
            };
            out.push_str("layer,operation,score,reasons\n");
            for (name, r) in &reports {
                for f in r.findings.iter().take(c.top) {
                    let reasons: Vec<String> =
                        f.reasons.iter().map(|x| describe(x, clock)).collect();
                    let _ = writeln!(
                        out,
                        "{},{},{:.3},{}",
                        summary::csv_field(name),
                        f.op,
                        f.score,
                        summary::csv_field(&reasons.join("; "))
                    );
                }
            }
        }
        TableFormat::Json => {
            let layers: Vec<serde_json::Value> = reports
                .iter()
                .map(|(name, r)| {
                    let mut r = r.clone();
                    r.findings.truncate(c.top);
                    serde_json::json!({ "layer": name, "report": r })
                })
                .collect();
            let doc = serde_json::json!({
                "a": a.name, "b": b.name, "method": c.diff.method, "layers": layers
            });
            out.push_str(&serde_json::to_string_pretty(&doc).expect("report serializes"));
            out.push('\n');
        }
        TableFormat::Text => {
            let _ = writeln!(
                out,
                "A: {}\nB: {}\nmethod {}, insignificant below {}, changes from {}%, peaks from {}",
                a.name,
                b.name,
                c.diff.method,
                fmt_pct(c.diff.threshold),
                c.diff.change,
                fmt_pct(c.diff.group.min_peak_share)
            );
            let clock = if a.clock().known() {
                a.clock()
            } else {
                b.clock()
            };
            for (name, r) in &reports {
                let _ = write!(out, "\nlayer {name}: ");
                render(r, clock, c.top, out);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{OpProfile, Resolution};

    fn op(name: &str, buckets: &[(usize, u64)]) -> OpProfile {
        let mut o = OpProfile::new(name, 64, 1);
        for &(b, n) in buckets {
            o.epochs[0][b] = n;
            o.count += n;
            o.total += n * (3 << b) / 2;
        }
        o
    }

    fn layer(ops: Vec<OpProfile>) -> Layer {
        let mut l = Layer::new("fuse", Resolution::ONE);
        l.ops = ops;
        l
    }

    fn base() -> Vec<OpProfile> {
        vec![
            op("OP_READ", &[(10, 5000), (11, 2000), (20, 50), (21, 80)]),
            op("OP_WRITE", &[(12, 3000), (13, 1000)]),
            op("OP_LOOKUP", &[(8, 9000), (9, 100), (18, 300)]),
            op("OP_GETATTR", &[(7, 20000)]),
            op("OP_STATFS", &[(9, 3)]),
        ]
    }

    #[test]
    fn identical_profiles_list_nothing() {
        let a = layer(base());
        let r = diff(&a, &a, &DiffConfig::default());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.insignificant, ["OP_STATFS"]);
        assert_eq!(r.identical.len(), 4);
    }

    #[test]
    fn one_changed_operation_is_the_only_finding() {
        let a = layer(base());
        let mut ops = base();
        // OP_WRITE gains a slow peak.
        ops[1] = op("OP_WRITE", &[(12, 3000), (13, 1000), (22, 300)]);
        let b = layer(ops);
        let r = diff(&a, &b, &DiffConfig::default());
        let names: Vec<&str> = r.findings.iter().map(|f| f.op.as_str()).collect();
        assert_eq!(names, ["OP_WRITE"]);
        let f = &r.findings[0];
        assert_eq!(f.score, 100.0);
        assert!(
            f.reasons
                .iter()
                .any(|r| matches!(r, Reason::NewPeak { peak } if peak.mode == 22)),
            "{:?}",
            f.reasons
        );
        assert!(
            f.reasons
                .iter()
                .any(|r| matches!(r, Reason::Latency { .. }))
        );
        let mut text = String::new();
        render(&r, Clock(None), 10, &mut text);
        assert!(text.starts_with("1 operation worth a look"), "{text}");
        assert!(text.contains("new peak at bucket 22 (300 calls"), "{text}");
    }

    #[test]
    fn most_latency_at_stake_first_and_new_or_vanished_operations() {
        let a = layer(base());
        let mut ops = base();
        ops[0] = op("OP_READ", &[(10, 5000), (11, 2000), (20, 60), (21, 90)]); // small change
        ops.remove(3); // OP_GETATTR vanished
        ops.push(op("OP_MKDIR", &[(15, 5000)])); // new
        let b = layer(ops);
        // The vanished GETATTR held 0.7% of the time: minor by default, listed without the
        // minimum stake.
        let r = diff(&a, &b, &DiffConfig::default());
        assert_eq!(r.minor, ["OP_GETATTR"]);
        let all = DiffConfig {
            min_stake: 0.0,
            ..DiffConfig::default()
        };
        let r = diff(&a, &b, &all);
        let names: Vec<&str> = r.findings.iter().map(|f| f.op.as_str()).collect();
        assert!(
            names.contains(&"OP_MKDIR") && names.contains(&"OP_GETATTR"),
            "{names:?}"
        );
        // Ranked by the latency at stake, score times the larger total.
        for w in r.findings.windows(2) {
            assert!(w[0].stake() >= w[1].stake(), "{names:?}");
        }
        // The new MKDIR (5000 calls of ~49K cycles) outweighs the vanished GETATTR (20000 of
        // ~192 cycles), though both score 100.
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(at("OP_MKDIR") < at("OP_GETATTR"), "{names:?}");
        let mkdir = r.findings.iter().find(|f| f.op == "OP_MKDIR").unwrap();
        assert_eq!(mkdir.reasons, [Reason::New]);
        let getattr = r.findings.iter().find(|f| f.op == "OP_GETATTR").unwrap();
        assert_eq!(getattr.reasons, [Reason::Vanished]);
    }

    /// Forty inserts, a delay in every fourth fdatasync: FSYNC is worth a look; the stray
    /// one- and two-call peaks of the other operations score D=100 too, but put little time
    /// at stake, and are minor.
    #[test]
    fn one_or_two_call_peaks_do_not_crowd_the_list() {
        let ops = |fsync: &[(usize, u64)], stray: usize| {
            let mut v = vec![op("OP_FSYNC", fsync)];
            for (i, name) in ["OP_GETATTR", "OP_LOOKUP", "OP_WRITE", "OP_READ", "OP_OPEN"]
                .iter()
                .enumerate()
            {
                let mut b = vec![(11, 100)];
                if (i + stray) % 2 == 0 {
                    b.push((19 + i % 3, 1 + (i % 2) as u64));
                }
                v.push(op(name, &b));
            }
            layer(v)
        };
        let a = ops(&[(17, 120)], 0);
        let b = ops(&[(17, 90), (24, 30)], 1);
        let r = diff(&a, &b, &DiffConfig::default());
        let names: Vec<&str> = r.findings.iter().map(|f| f.op.as_str()).collect();
        assert_eq!(names, ["OP_FSYNC"], "minor: {:?}", r.minor);
        assert_eq!(r.minor.len(), 5, "{:?}", r.minor);
        let mut text = String::new();
        render(&r, Clock(None), 10, &mut text);
        assert!(
            text.starts_with(
                "1 operation worth a look (0 insignificant, 0 nearly identical, 5 minor)"
            ),
            "{text}"
        );
    }

    #[test]
    fn moved_peak_is_named() {
        let a = layer(base());
        let mut ops = base();
        ops[2] = op("OP_LOOKUP", &[(8, 9000), (9, 100), (23, 300)]);
        let b = layer(ops);
        let r = diff(&a, &b, &DiffConfig::default());
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].op, "OP_LOOKUP");
        // Ranges [18] and [23] do not overlap, but one peak is left on each side: it moved.
        let moved: Vec<(usize, usize)> = r.findings[0]
            .reasons
            .iter()
            .filter_map(|r| match r {
                Reason::MovedPeak { from, to } => Some((from.mode, to.mode)),
                _ => None,
            })
            .collect();
        assert_eq!(moved, [(18, 23)], "{:?}", r.findings[0].reasons);
        // A second slow peak in B as well: two left over in B, one in A, so no pairing.
        let mut ops = base();
        ops[2] = op("OP_LOOKUP", &[(8, 9000), (9, 100), (23, 300), (27, 300)]);
        let r = diff(&a, &layer(ops), &DiffConfig::default());
        let kinds: Vec<&str> = r.findings[0]
            .reasons
            .iter()
            .filter_map(|r| match r {
                Reason::NewPeak { .. } => Some("new"),
                Reason::VanishedPeak { .. } => Some("vanished"),
                Reason::MovedPeak { .. } => Some("moved"),
                _ => None,
            })
            .collect();
        assert_eq!(kinds, ["vanished", "new", "new"]);
    }
}
