//! Scores `D` (0 = same, 100 = different) between two histograms of one operation: the six
//! methods of thesis §5.7, as defined here (summed up in `docs/design.md#analysis`).
//!
//! Notation: `n_b` and `m_b` are the calls in bucket `b` of profiles A and B, `N = Σ n_b`,
//! `M = Σ m_b`, `mid_b` the bucket's mid-point in cycles. Every score is clamped to 0..=100;
//! a normalized difference `|x − y| / x` is 0 when both are 0 and 100 when only `x` is.
//!
//! * **TOTOPS** `= |N − M| / N × 100`.
//! * **TOTLAT** `= |L_A − L_B| / L_A × 100` with `L = Σ count_b × mid_b` (estimated latency).
//! * **CHISQUARE**: the two-sample chi-square of Numerical Recipes (`chstwo`) for unequal totals,
//!   `χ² = Σ (√(M/N)·n_b − √(N/M)·m_b)² / (n_b + m_b)` over the buckets where either is
//!   non-zero, with `k − 1` degrees of freedom for `k` such buckets; `D = (1 − P) × 100` where
//!   `P = Q(dof/2, χ²/2)` is the chance of a χ² at least this large if both profiles came from one
//!   distribution. One shared non-empty bucket (dof 0) means equal shapes: `D = 0`. One empty
//!   profile and one not: `D = 100`.
//! * **EARTHMOVER** (`emd`): the exact one-dimensional earth mover's distance between the
//!   normalized histograms, `EMD = Σ_b |CDF_A(b) − CDF_B(b)| / r` in *octaves* (factors of two of
//!   latency; one bucket at resolution 1): the mean distance the calls of A must move to
//!   take B's shape. `D = min(100, 20 × EMD)`: every call twice as slow (a one-bucket shift)
//!   scores 20, a four-bucket shift 80, five octaves (32×) or more 100; a tenth of the calls
//!   moving four buckets scores 8.
//! * **GROUPOPS** / **GROUPLAT** (thesis §5.7.2), decided in three steps:
//!   1. from totals: both empty → 0; one empty → 100; the operation below the insignificance
//!      threshold in both profiles (share of its layer's calls and of its latency) → 0; calls or
//!      estimated latency differing by a factor of 2 or more → 100; TOTOPS and TOTLAT both below
//!      1 → 0;
//!   2. from peaks ([`crate::peaks`], leaving out peaks with less than `min_peak_share`, 1%, of
//!      the calls): a different number of peaks, or a peak whose top moved by more than one
//!      octave (r buckets) → 100;
//!   3. else the normalized per-peak difference: `Σ_k |n_k − m_k| / Σ_k n_k × 100` over matching
//!      peaks `k` (GROUPOPS, calls per peak), or the same with each peak's estimated latency
//!      (GROUPLAT). Calls that move from one peak to another count, though totals may not change.

use std::fmt;
use std::fmt::Write as _;
use std::str::FromStr;

use profile_store::Layer;
use serde::Serialize;

use crate::background::Shares;
use crate::background::is_background;
use crate::error::Error;
use crate::hist::Histogram;
use crate::input::Loaded;
use crate::levels;
use crate::pairs::{Pair, layer_pairs, pair_of, union_ops};
use crate::peaks::{self, Peak};
use crate::select::Selection;
use crate::stats;
use crate::summary::{self, TableFormat};
use crate::table::Table;

/// `fsprof compare`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareConfig {
    /// Profile A (the reference).
    pub a: String,
    /// Profile B (the same as A to compare two of its layers).
    pub b: String,
    /// `--layers A,B`: compare layer A of profile A with layer B of profile B.
    pub layers: Option<(String, String)>,
    /// Layer and operations.
    pub select: Selection,
    /// Methods to run.
    pub methods: Vec<Method>,
    /// Settings of the GROUP methods.
    pub group: GroupConfig,
    /// Output format.
    pub format: TableFormat,
    /// What the latency weights are taken of.
    pub shares: Shares,
}

/// EMD score points per octave of mean shift.
pub const EMD_POINTS_PER_OCTAVE: f64 = 20.0;

/// The help text that documents every method's formula and scale (shown by `--help`).
pub const METHODS_HELP: &str = "\
Methods (n_b, m_b: calls of A and B in bucket b; N, M their sums; every D is clamped to 0..100,
0/0 = 0, x/0 = 100):
  totops     D = |N - M| / N * 100
  totlat     D = |L_A - L_B| / L_A * 100, L = sum of count_b * bucket mid-point
  chisquare  Numerical Recipes two-sample chi-square for unequal totals over non-empty buckets,
             dof = non-empty buckets - 1; D = (1 - P) * 100 with P the chi-square tail
             probability (one shared non-empty bucket: D = 0). D near 100 only says the shapes
             differ beyond chance; with many calls even small differences do.
  emd        earth mover's distance between the normalized histograms, in octaves (buckets / r):
             the mean distance the calls must move. D = min(100, 20 * EMD): a whole shift by
             one bucket scores 20, by four 80, by five or more 100.
  groupops   from totals: insignificant -> 0, calls or latency x2 apart -> 100, TOTOPS and
             TOTLAT < 1 -> 0; else from peaks: different count or a top moved by more than
             one octave -> 100; else D = sum over peaks |n_k - m_k| / sum n_k * 100. Peaks
             with less than --min-peak-share of the calls (default 1%) are left out
  grouplat   as groupops, with each peak's estimated latency instead of its calls
  all        every method";

/// A comparison method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Normalized difference of the total calls.
    Totops,
    /// Normalized difference of the estimated total latency.
    Totlat,
    /// Two-sample chi-square test, `D = (1 − P) × 100`.
    Chisquare,
    /// Earth mover's distance, 20 points per octave.
    Emd,
    /// Totals, then peaks, then per-peak difference of calls.
    Groupops,
    /// Totals, then peaks, then per-peak difference of estimated latency.
    Grouplat,
}

impl Method {
    /// Every method, in the thesis's order.
    pub const ALL: [Method; 6] = [
        Method::Totops,
        Method::Totlat,
        Method::Chisquare,
        Method::Emd,
        Method::Groupops,
        Method::Grouplat,
    ];

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Method::Totops => "totops",
            Method::Totlat => "totlat",
            Method::Chisquare => "chisquare",
            Method::Emd => "emd",
            Method::Groupops => "groupops",
            Method::Grouplat => "grouplat",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Method, String> {
        match s.to_ascii_lowercase().as_str() {
            "totops" => Ok(Method::Totops),
            "totlat" => Ok(Method::Totlat),
            "chisquare" | "chi2" | "chisq" => Ok(Method::Chisquare),
            "emd" | "earthmover" => Ok(Method::Emd),
            "groupops" => Ok(Method::Groupops),
            "grouplat" => Ok(Method::Grouplat),
            _ => Err(format!(
                "unknown method '{s}' (totops, totlat, chisquare, emd, groupops, grouplat, all)"
            )),
        }
    }
}

/// The methods named by a `--method` value: one name, a comma-separated list, or `all`.
pub fn parse_methods(s: &str) -> Result<Vec<Method>, String> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(Method::ALL.to_vec());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let m: Method = part.trim().parse()?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// A `--method` value: the methods to run, in the thesis's order of [`Method::ALL`] when `all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Methods(pub Vec<Method>);

impl FromStr for Methods {
    type Err = String;
    fn from_str(s: &str) -> Result<Methods, String> {
        parse_methods(s).map(Methods)
    }
}

/// Settings of the GROUP methods.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    /// An operation whose share of its layer's calls and of its layer's latency are both below
    /// this fraction, in both profiles, is insignificant (score 0). Default 0.01 (1%).
    pub insignificant_below: f64,
    /// TOTOPS and TOTLAT both below this mean "same" (score 0). Default 1.
    pub same_below: f64,
    /// Calls or estimated latency this many times apart mean "different" (score 100). Default 2.
    pub different_ratio: f64,
    /// Minimum peak prominence in log2 units. Default 1.
    pub prominence: f64,
    /// Peaks holding less than this fraction of the operation's calls are ignored (the largest
    /// is always kept). Default 0.01 (1%): a stray call in an empty bucket is not a new
    /// execution path.
    pub min_peak_share: f64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            insignificant_below: 0.01,
            same_below: 1.0,
            different_ratio: 2.0,
            prominence: peaks::DEFAULT_PROMINENCE,
            min_peak_share: peaks::DEFAULT_MIN_SHARE,
        }
    }
}

/// How a GROUP score was decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Decision {
    /// Neither profile has a finished call.
    BothEmpty,
    /// Only one profile has calls.
    OneEmpty,
    /// Too small a share in both profiles to matter.
    Insignificant,
    /// Calls or latency a factor `ratio` apart.
    Totals {
        /// The larger of the calls ratio and the latency ratio.
        ratio: f64,
    },
    /// TOTOPS and TOTLAT both below the "same" threshold.
    SameTotals,
    /// Different numbers of peaks.
    PeakCount {
        /// Peaks in A.
        a: usize,
        /// Peaks in B.
        b: usize,
    },
    /// A peak's top moved by more than one octave.
    PeakMoved {
        /// Top bucket in A.
        from: usize,
        /// Top bucket in B.
        to: usize,
    },
    /// Scored on matching peaks.
    Peaks,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::BothEmpty => f.write_str("both empty"),
            Decision::OneEmpty => f.write_str("one empty"),
            Decision::Insignificant => f.write_str("insignificant"),
            Decision::Totals { ratio } => write!(f, "totals x{ratio:.1}"),
            Decision::SameTotals => f.write_str("same totals"),
            Decision::PeakCount { a, b } => write!(f, "peaks {a}->{b}"),
            Decision::PeakMoved { from, to } => write!(f, "peak moved {from}->{to}"),
            Decision::Peaks => f.write_str("per peak"),
        }
    }
}

/// A score and, for the GROUP methods, how it was decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The method.
    pub method: Method,
    /// 0 (same) ..= 100 (different).
    pub d: f64,
    /// How a GROUP score was decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

/// Scores `pair` with `method`.
pub fn score(method: Method, pair: &Pair, cfg: &GroupConfig) -> Score {
    let (d, decision) = match method {
        Method::Totops => (totops(&pair.a, &pair.b), None),
        Method::Totlat => (totlat(&pair.a, &pair.b), None),
        Method::Chisquare => (chisquare(&pair.a, &pair.b), None),
        Method::Emd => (emd(&pair.a, &pair.b), None),
        Method::Groupops | Method::Grouplat => {
            let (d, why) = group(pair, cfg, method == Method::Grouplat);
            (d, Some(why))
        }
    };
    Score {
        method,
        d: d.clamp(0.0, 100.0),
        decision,
    }
}

/// `|x − y| / x × 100`, clamped to 0..=100; 0 when both are 0, 100 when only `x` is.
pub fn normalized_difference(x: f64, y: f64) -> f64 {
    if x == y {
        // Also for infinite estimates (profiles of thousands of buckets overflow f64).
        0.0
    } else if x == 0.0 {
        100.0
    } else {
        ((x - y).abs() / x * 100.0).min(100.0)
    }
}

/// TOTOPS: normalized difference of the finished calls.
pub fn totops(a: &Histogram, b: &Histogram) -> f64 {
    normalized_difference(a.total() as f64, b.total() as f64)
}

/// TOTLAT: normalized difference of the estimated total latency.
pub fn totlat(a: &Histogram, b: &Histogram) -> f64 {
    normalized_difference(a.estimated_latency(), b.estimated_latency())
}

/// The Numerical Recipes two-sample chi-square statistic and its degrees of freedom (non-empty
/// buckets − 1). `None` when either histogram is empty.
pub fn chi_square_statistic(a: &Histogram, b: &Histogram) -> Option<(f64, u32)> {
    let (n, m) = (a.total() as f64, b.total() as f64);
    if n == 0.0 || m == 0.0 {
        return None;
    }
    let (ra, rb) = ((m / n).sqrt(), (n / m).sqrt());
    let mut chi2 = 0.0;
    let mut bins = 0u32;
    for (&x, &y) in a.counts.iter().zip(&b.counts) {
        if x == 0 && y == 0 {
            continue;
        }
        bins += 1;
        let t = ra * x as f64 - rb * y as f64;
        chi2 += t * t / (x as f64 + y as f64);
    }
    Some((chi2, bins - 1))
}

/// CHISQUARE: `(1 − P) × 100`.
pub fn chisquare(a: &Histogram, b: &Histogram) -> f64 {
    match chi_square_statistic(a, b) {
        None => normalized_difference(a.total() as f64, b.total() as f64).max(
            // both empty → 0, one empty → 100 (whichever it is)
            normalized_difference(b.total() as f64, a.total() as f64),
        ),
        Some((_, 0)) => 0.0,
        Some((chi2, dof)) => (1.0 - stats::chi_square_sf(chi2, dof)) * 100.0,
    }
}

/// The earth mover's distance between the normalized histograms, in octaves. `None` when
/// either is empty.
pub fn emd_octaves(a: &Histogram, b: &Histogram) -> Option<f64> {
    let (n, m) = (a.total() as f64, b.total() as f64);
    if n == 0.0 || m == 0.0 {
        return None;
    }
    let (mut ca, mut cb, mut work) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.counts.iter().zip(&b.counts) {
        ca += x as f64 / n;
        cb += y as f64 / m;
        work += (ca - cb).abs();
    }
    Some(work / a.buckets.resolution.get() as f64)
}

/// EARTHMOVER: `min(100, 20 × EMD in octaves)`.
pub fn emd(a: &Histogram, b: &Histogram) -> f64 {
    match emd_octaves(a, b) {
        Some(w) => (w * EMD_POINTS_PER_OCTAVE).min(100.0),
        None => {
            if a.is_empty() && b.is_empty() {
                0.0
            } else {
                100.0
            }
        }
    }
}

/// GROUPOPS (`latency == false`) or GROUPLAT.
pub fn group(pair: &Pair, cfg: &GroupConfig, latency: bool) -> (f64, Decision) {
    let (a, b) = (&pair.a, &pair.b);
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return (0.0, Decision::BothEmpty),
        (true, false) | (false, true) => return (100.0, Decision::OneEmpty),
        _ => {}
    }
    if pair.weight_a < cfg.insignificant_below && pair.weight_b < cfg.insignificant_below {
        return (0.0, Decision::Insignificant);
    }
    let ratio = |x: f64, y: f64| x.max(y) / x.min(y);
    let r = ratio(a.total() as f64, b.total() as f64)
        .max(ratio(a.estimated_latency(), b.estimated_latency()));
    if r >= cfg.different_ratio {
        return (100.0, Decision::Totals { ratio: r });
    }
    if totops(a, b) < cfg.same_below && totlat(a, b) < cfg.same_below {
        return (0.0, Decision::SameTotals);
    }
    let pa = peaks::find_significant(a, cfg.prominence, cfg.min_peak_share);
    let pb = peaks::find_significant(b, cfg.prominence, cfg.min_peak_share);
    if pa.len() != pb.len() {
        return (
            100.0,
            Decision::PeakCount {
                a: pa.len(),
                b: pb.len(),
            },
        );
    }
    let tolerance = a.buckets.resolution.get() as usize;
    if let Some((x, y)) = pa
        .iter()
        .zip(&pb)
        .find(|(x, y)| x.mode.abs_diff(y.mode) > tolerance)
    {
        return (
            100.0,
            Decision::PeakMoved {
                from: x.mode,
                to: y.mode,
            },
        );
    }
    let amount = |h: &Histogram, p: &Peak| {
        if latency {
            h.latency_in(p.lo, p.hi)
        } else {
            p.calls as f64
        }
    };
    let (mut diff, mut base) = (0.0, 0.0);
    for (x, y) in pa.iter().zip(&pb) {
        let (u, v) = (amount(a, x), amount(b, y));
        if u != v {
            diff += (u - v).abs();
        }
        base += u;
    }
    let d = if base == 0.0 {
        0.0
    } else {
        (diff / base * 100.0).min(100.0)
    };
    (d, Decision::Peaks)
}

#[derive(Serialize)]
struct OpScores {
    op: String,
    calls_a: u128,
    calls_b: u128,
    scores: Vec<Score>,
}

#[derive(Serialize)]
struct LayerScores {
    layer_a: String,
    layer_b: String,
    ops: Vec<OpScores>,
}

/// `fsprof compare`: scores every selected operation of every paired layer.
pub fn run(a: &Loaded, b: &Loaded, c: &CompareConfig, out: &mut String) -> Result<(), Error> {
    let mut layers = Vec::new();
    // A user layer set against a FUSE-level one: its calls summed per FUSE operation.
    let mut grouped: Option<(Layer, levels::Groups)> = None;
    let pairs = match &c.layers {
        Some((x, y)) => {
            let (mut la, mut lb) = (a.layer(Some(x))?, b.layer(Some(y))?);
            if la.resolution != lb.resolution {
                return Err(Error::usage(
                    format!("--layers {x},{y}"),
                    "the layers have different resolutions: their buckets do not line up",
                ));
            }
            let sys = (levels::is_syscall_level(la), levels::is_syscall_level(lb));
            match (levels::is_user_level(la), levels::is_user_level(lb)) {
                (true, false) => la = &grouped.insert(levels::grouped_by_fuse_op(la)).0,
                (false, true) => lb = &grouped.insert(levels::grouped_by_fuse_op(lb)).0,
                // The user layer against the syscall level: each function under the system
                // call it makes.
                (true, true) if sys == (false, true) => {
                    la = &grouped.insert(levels::grouped_by_syscall(la)).0
                }
                (true, true) if sys == (true, false) => {
                    lb = &grouped.insert(levels::grouped_by_syscall(lb)).0
                }
                _ => {}
            }
            vec![(la, lb)]
        }
        None => layer_pairs(a, b, c.select.layer.as_deref())?,
    };
    for (la, lb) in pairs {
        let mut names = union_ops(la, lb, &c.select.ops)?;
        if let Some(n) = c.select.top {
            names.truncate(n);
        }
        let ops = names
            .into_iter()
            .map(|name| {
                let pair = pair_of(la, lb, &name, c.shares);
                OpScores {
                    calls_a: pair.a.total(),
                    calls_b: pair.b.total(),
                    scores: c
                        .methods
                        .iter()
                        .map(|&m| score(m, &pair, &c.group))
                        .collect(),
                    op: name,
                }
            })
            .collect();
        layers.push(LayerScores {
            layer_a: la.name.clone(),
            layer_b: lb.name.clone(),
            ops,
        });
    }
    match c.format {
        TableFormat::Json => {
            let mut doc = serde_json::json!({ "a": a.name, "b": b.name, "layers": layers });
            if let Some((_, groups)) = &grouped {
                let key = if groups.iter().all(|(t, _)| t.starts_with("OP_")) {
                    "user_calls_per_fuse_op"
                } else {
                    "user_calls_per_syscall"
                };
                doc[key] = groups
                    .iter()
                    .map(|(op, calls)| (op.clone(), serde_json::json!(calls)))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            out.push_str(&serde_json::to_string_pretty(&doc).expect("scores serialize"));
            out.push('\n');
        }
        TableFormat::Csv => csv(&layers, out),
        TableFormat::Text => text(a, b, c, &layers, grouped.as_ref().map(|g| &g.1), out),
    }
    Ok(())
}

fn csv(layers: &[LayerScores], out: &mut String) {
    out.push_str("layer,operation,calls_a,calls_b,method,d,decided_by\n");
    for l in layers {
        for o in &l.ops {
            for s in &o.scores {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{:.3},{}",
                    summary::csv_field(&l.layer_a),
                    o.op,
                    o.calls_a,
                    o.calls_b,
                    s.method,
                    s.d,
                    s.decision.as_ref().map_or(String::new(), |d| d.to_string())
                );
            }
        }
    }
}

fn text(
    a: &Loaded,
    b: &Loaded,
    c: &CompareConfig,
    layers: &[LayerScores],
    grouped: Option<&levels::Groups>,
    out: &mut String,
) {
    let _ = writeln!(out, "A: {}\nB: {}", a.name, b.name);
    let _ = writeln!(
        out,
        "A, B: calls in each; D: 0 = same .. 100 = different (fsprof compare --help)"
    );
    for l in layers {
        let title = if l.layer_a == l.layer_b {
            format!("layer {}", l.layer_a)
        } else {
            format!("layer {} vs {}", l.layer_a, l.layer_b)
        };
        let _ = writeln!(out, "\n{title}");
        let mut header = vec!["operation", "A", "B"];
        header.extend(c.methods.iter().map(|m| m.name()));
        let mut t = Table::new(&header);
        // What decided the group methods, under the table (as a column it made the
        // table wider than a terminal).
        let mut decided = Vec::new();
        for o in &l.ops {
            let mut row = vec![o.op.clone(), o.calls_a.to_string(), o.calls_b.to_string()];
            row.extend(o.scores.iter().map(|s| format!("{:.1}", s.d)));
            t.row(row);
            if let Some(d) = o.scores.iter().find_map(|s| s.decision.as_ref()) {
                decided.push((o.op.as_str(), d.to_string()));
            }
        }
        t.render(0, out);
        let background: Vec<&str> = l
            .ops
            .iter()
            .map(|o| o.op.as_str())
            .filter(|o| is_background(o))
            .collect();
        if !background.is_empty() {
            let _ = writeln!(
                out,
                "background, no caller waits: {}{}",
                background.join(" "),
                if c.shares.with_background {
                    ""
                } else {
                    " (not in the latency weights)"
                }
            );
        }
        if let Some(groups) = grouped {
            let what = if groups.iter().all(|(t, _)| t.starts_with("OP_")) {
                "FUSE operation they lead to"
            } else {
                "system call they make"
            };
            let _ = writeln!(out, "user calls summed per {what} (fsprof compare --help):");
            let w = groups.iter().map(|(op, _)| op.len()).max().unwrap_or(0);
            for (op, calls) in groups {
                let _ = writeln!(out, "  {op:<w$}  {}", calls.join(" + "));
            }
        }
        if !decided.is_empty() {
            let _ = writeln!(out, "groupops/grouplat decided by:");
            let w = decided.iter().map(|(op, _)| op.len()).max().unwrap_or(0);
            for (op, why) in decided {
                let _ = writeln!(out, "  {op:<w$}  {why}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Buckets;
    use profile_store::Resolution;

    const B64: Buckets = Buckets {
        resolution: Resolution::ONE,
        len: 64,
    };

    fn hist(pairs: &[(usize, u64)]) -> Histogram {
        let mut c = vec![0; 64];
        for &(b, n) in pairs {
            c[b] = n;
        }
        Histogram::from_counts(c, B64)
    }

    fn shifted(h: &Histogram, by: usize) -> Histogram {
        let mut c = vec![0; h.len()];
        for (b, &n) in h.counts.iter().enumerate() {
            if n > 0 {
                c[b + by] = n;
            }
        }
        Histogram::from_counts(c, h.buckets)
    }

    fn all(a: &Histogram, b: &Histogram) -> Vec<f64> {
        let pair = Pair::new(a.clone(), b.clone());
        Method::ALL
            .iter()
            .map(|&m| score(m, &pair, &GroupConfig::default()).d)
            .collect()
    }

    fn bimodal() -> Histogram {
        hist(&[
            (9, 300),
            (10, 1000),
            (11, 200),
            (18, 20),
            (19, 60),
            (20, 15),
        ])
    }

    #[test]
    fn identical_profiles_score_zero_on_every_method() {
        for h in [
            bimodal(),
            hist(&[(12, 1)]),
            hist(&[(3, 5), (40, 7)]),
            hist(&[]),
        ] {
            assert_eq!(all(&h, &h), [0.0; 6], "{:?}", h.nonzero_range());
        }
    }

    #[test]
    fn identical_profiles_score_zero_even_when_estimates_overflow() {
        // A profile of the original tools may hold thousands of buckets; mid-points past
        // bucket 1023 are infinite in f64.
        let geo = Buckets {
            resolution: Resolution::ONE,
            len: 3000,
        };
        let mut c = vec![0; 3000];
        c[10] = 1;
        c[2999] = 2;
        let h = Histogram::from_counts(c, geo);
        assert_eq!(all(&h, &h), [0.0; 6]);
    }

    #[test]
    fn totops_and_totlat_by_hand() {
        // A: 10 calls in bucket 4 (mid 24), 10 in bucket 6 (mid 96): N = 20, L = 1200.
        // B: 5 calls in bucket 4, 11 in bucket 6: M = 16, L = 120 + 1056 = 1176.
        let a = hist(&[(4, 10), (6, 10)]);
        let b = hist(&[(4, 5), (6, 11)]);
        assert_eq!(totops(&a, &b), 20.0); // |20 − 16| / 20
        assert!((totlat(&a, &b) - 2.0).abs() < 1e-12); // |1200 − 1176| / 1200
        // Normalized by A: the other way round gives |16 − 20| / 16.
        assert_eq!(totops(&b, &a), 25.0);
        assert!((totlat(&b, &a) - 24.0 / 1176.0 * 100.0).abs() < 1e-12);
        // Clamped, 0/0 and x/0.
        assert_eq!(totops(&a, &hist(&[(4, 100)])), 100.0);
        assert_eq!(totops(&hist(&[]), &hist(&[])), 0.0);
        assert_eq!(totops(&hist(&[]), &a), 100.0);
        assert_eq!(totlat(&hist(&[]), &a), 100.0);
        assert_eq!(totops(&a, &hist(&[])), 100.0);
    }

    #[test]
    fn emd_orders_shifts_and_chisquare_does_not() {
        let a = bimodal();
        let one = shifted(&a, 1);
        let four = shifted(&a, 4);
        assert!((emd_octaves(&a, &one).unwrap() - 1.0).abs() < 1e-12);
        assert!((emd_octaves(&a, &four).unwrap() - 4.0).abs() < 1e-12);
        let (e1, e4) = (emd(&a, &one), emd(&a, &four));
        assert!(
            (e1 - 20.0).abs() < 1e-9 && (e4 - 80.0).abs() < 1e-9,
            "{e1} {e4}"
        );
        let (c1, c4) = (chisquare(&a, &one), chisquare(&a, &four));
        assert!(c1 > 99.0 && c4 > 99.0, "{c1} {c4}");
        // Part of the mass moving: a tenth of the calls moving four buckets.
        let part = hist(&[(10, 90), (14, 10)]);
        assert!((emd(&hist(&[(10, 100)]), &part) - 8.0).abs() < 1e-9);
    }

    #[test]
    fn emd_is_in_octaves_at_higher_resolution() {
        let b2 = Buckets {
            resolution: Resolution::new(2).unwrap(),
            len: 128,
        };
        let mut x = vec![0; 128];
        let mut y = vec![0; 128];
        x[40] = 7;
        y[42] = 3; // two buckets = one octave at r = 2
        let (a, b) = (Histogram::from_counts(x, b2), Histogram::from_counts(y, b2));
        assert!((emd_octaves(&a, &b).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn chisquare_by_hand() {
        // Equal totals: chi2 = Σ (n − m)² / (n + m) = (10²/30) + (10²/30) = 6.667, dof 1.
        let a = hist(&[(5, 20), (6, 10)]);
        let b = hist(&[(5, 10), (6, 20)]);
        let (chi2, dof) = chi_square_statistic(&a, &b).unwrap();
        assert!((chi2 - 200.0 / 30.0).abs() < 1e-12);
        assert_eq!(dof, 1);
        let want = (1.0 - stats::chi_square_sf(200.0 / 30.0, 1)) * 100.0;
        assert!((chisquare(&a, &b) - want).abs() < 1e-12);
        assert!(want > 99.0 && want < 99.1); // P ≈ 0.0098
        // Unequal totals, same shape: chi2 = 0.
        let c = hist(&[(5, 40), (6, 20)]);
        let (chi2, _) = chi_square_statistic(&a, &c).unwrap();
        assert!(chi2.abs() < 1e-12);
        assert_eq!(chisquare(&a, &c), 0.0);
        // One shared non-empty bucket: dof 0, D = 0, whatever the totals.
        assert_eq!(chisquare(&hist(&[(9, 3)]), &hist(&[(9, 3000)])), 0.0);
        // One side empty.
        assert_eq!(chisquare(&hist(&[]), &a), 100.0);
        assert_eq!(chisquare(&a, &hist(&[])), 100.0);
        assert_eq!(chisquare(&hist(&[]), &hist(&[])), 0.0);
    }

    #[test]
    fn group_methods_decide_by_totals_then_peaks() {
        let cfg = GroupConfig::default();
        let a = bimodal();
        let g = |b: &Histogram, lat| group(&Pair::new(a.clone(), b.clone()), &cfg, lat);
        // Twice the calls everywhere: different by totals.
        let double = Histogram::from_counts(a.counts.iter().map(|c| c * 2).collect(), B64);
        assert!(matches!(
            g(&double, false),
            (100.0, Decision::Totals { .. })
        ));
        // The slow peak gone: most of the latency is gone, totals decide.
        let one_peak = hist(&[(9, 300), (10, 1000), (11, 200)]);
        assert!(matches!(
            g(&one_peak, false),
            (100.0, Decision::Totals { .. })
        ));
        // A third, small peak in the middle: totals change by 2%, the peaks decide.
        let three = hist(&[
            (9, 300),
            (10, 1000),
            (11, 200),
            (15, 30),
            (18, 20),
            (19, 60),
            (20, 15),
        ]);
        assert_eq!(
            g(&three, false),
            (100.0, Decision::PeakCount { a: 2, b: 3 })
        );
        // The fast peak two buckets slower: the latency it adds is small next to the slow
        // peak's, so totals do not decide, the peaks do.
        let moved = hist(&[
            (11, 300),
            (12, 1000),
            (13, 200),
            (18, 20),
            (19, 60),
            (20, 15),
        ]);
        assert_eq!(
            g(&moved, true),
            (100.0, Decision::PeakMoved { from: 10, to: 12 })
        );
        // A one-bucket move is within the tolerance and is scored per peak.
        let near = hist(&[
            (10, 300),
            (11, 1000),
            (12, 200),
            (18, 20),
            (19, 60),
            (20, 15),
        ]);
        assert_eq!(g(&near, false), (0.0, Decision::Peaks));
        // 30 calls moving from the fast to the slow peak: totals of calls equal, per-peak
        // difference 60 / 1595.
        let shifted_calls = hist(&[(9, 300), (10, 970), (11, 200), (18, 20), (19, 90), (20, 15)]);
        let (d, why) = g(&shifted_calls, false);
        assert_eq!(why, Decision::Peaks);
        assert!((d - 60.0 / 1595.0 * 100.0).abs() < 1e-9, "{d}");
        // GROUPLAT weighs the slow peak's calls by their latency.
        let (dl, _) = g(&shifted_calls, true);
        let la = a.estimated_latency();
        let lat_diff = 30.0 * 1.5 * 1024.0 + 30.0 * 1.5 * 524_288.0;
        assert!((dl - lat_diff / la * 100.0).abs() < 1e-9, "{dl}");
        // Tiny changes: same totals.
        let tiny = hist(&[
            (9, 300),
            (10, 1001),
            (11, 200),
            (18, 20),
            (19, 60),
            (20, 15),
        ]);
        assert_eq!(g(&tiny, false), (0.0, Decision::SameTotals));
    }

    #[test]
    fn group_insignificance_needs_both_sides_small() {
        let cfg = GroupConfig::default();
        let mut pair = Pair::new(hist(&[(5, 10)]), hist(&[(9, 10)]));
        pair.weight_a = 0.001;
        pair.weight_b = 0.002;
        assert_eq!(group(&pair, &cfg, false), (0.0, Decision::Insignificant));
        pair.weight_b = 0.5;
        assert_eq!(group(&pair, &cfg, false).0, 100.0);
    }

    #[test]
    fn methods_parse() {
        assert_eq!(parse_methods("all").unwrap(), Method::ALL.to_vec());
        assert_eq!(
            parse_methods("emd,totops").unwrap(),
            [Method::Emd, Method::Totops]
        );
        assert_eq!(parse_methods("EARTHMOVER").unwrap(), [Method::Emd]);
        assert!(parse_methods("nope").is_err());
    }
}
