//! Peaks of a latency histogram, found as a person reads a log-scale plot (SPEC §7).
//!
//! The histogram is read as heights `y[b] = log2(count[b] + 1)`, with zero height beyond both
//! ends. A *peak* is a local maximum (a plateau of equal heights counts as one, its mode being
//! the plateau's middle) whose *prominence* is at least the threshold (default 1, a factor of
//! two in calls). The prominence is the usual topographic one: walking away from the top on
//! each side until a strictly higher bucket or the end, the lowest height met is that side's
//! valley; the prominence is the top's height above the higher of the two valleys. A local
//! maximum below the threshold is a bump on the slope of a larger peak and belongs to it. The
//! highest top of a non-empty histogram is always a peak, even if it is lower than the
//! threshold (every operation with calls has at least one execution path).
//!
//! Each peak extends down to the valleys that separate it from its neighbouring peaks: the
//! lowest bucket between two adjacent peaks is the border (a run of equally low buckets is split
//! in its middle; a single valley bucket goes with the side whose adjacent bucket is higher), and
//! empty buckets at the ends of a peak's range are trimmed. So every call belongs to exactly one
//! peak and the shares of an operation's peaks add up to 100%.

use std::fmt::Write as _;

use serde::Serialize;

use profile_store::{Layer, OpProfile};

use crate::error::Error;
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::select::Selection;
use crate::show;
use crate::summary::{self, TableFormat};
use crate::table::Table;
use crate::units::{Buckets, Clock, fmt_cycles, fmt_pct};

/// `fsprof peaks`.
#[derive(Debug, Clone, PartialEq)]
pub struct PeaksConfig {
    /// The profile.
    pub input: String,
    /// Layer and operations.
    pub select: Selection,
    /// Minimum prominence in log2 units. Default 1.
    pub prominence: f64,
    /// Peaks below this share (0..=1) of the operation's calls are left out, the largest
    /// excepted. Default 0 (every peak, SPEC §7).
    pub min_share: f64,
    /// Output format (text or JSON; CSV lists one peak per line).
    pub format: TableFormat,
    /// Whether background operations may take a `--top` place. Default: no.
    pub shares: crate::background::Shares,
}

/// Default minimum prominence: one unit of `log2(count + 1)`, a factor of two.
pub const DEFAULT_PROMINENCE: f64 = 1.0;

/// Default share of an operation's calls below which `compare` and `diff` ignore a peak: 1%.
/// On a log scale a single stray call in an empty bucket is a peak (prominence 1, a factor of
/// two over nothing); an execution path worth naming holds more of the calls than that.
pub const DEFAULT_MIN_SHARE: f64 = 0.01;

/// One peak of a histogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peak {
    /// First bucket of the peak (inclusive).
    pub lo: usize,
    /// Last bucket of the peak (inclusive).
    pub hi: usize,
    /// The bucket at the top (the middle of a flat top).
    pub mode: usize,
    /// Calls in `lo..=hi`.
    pub calls: u128,
    /// `calls` over the operation's finished calls, 0..=1.
    pub share: f64,
    /// Estimated mean latency of the peak's calls in cycles (from bucket mid-points).
    pub mean_cycles: f64,
    /// Height of the top above the higher valley, in log2 units (factors of two).
    pub prominence: f64,
}

/// Finds the peaks of `h`, left to right; empty for an empty histogram.
pub fn find(h: &Histogram, min_prominence: f64) -> Vec<Peak> {
    let y: Vec<f64> = h.counts.iter().map(|&c| (c as f64 + 1.0).log2()).collect();
    let n = y.len();
    let at = |i: isize| -> f64 {
        if i < 0 || i as usize >= n {
            0.0
        } else {
            y[i as usize]
        }
    };
    // Local maxima as plateaus [i, j] with their prominence.
    let mut tops: Vec<(usize, usize, f64)> = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && y[j + 1] == y[i] {
            j += 1;
        }
        let h_top = y[i];
        if h_top > 0.0 && h_top > at(i as isize - 1) && h_top > at(j as isize + 1) {
            let valley = |range: &mut dyn Iterator<Item = usize>| -> f64 {
                let mut low = h_top;
                for k in range {
                    if y[k] > h_top {
                        return low;
                    }
                    low = low.min(y[k]);
                }
                0.0 // reached the end: the floor beyond the histogram
            };
            let left = valley(&mut (0..i).rev());
            let right = valley(&mut (j + 1..n));
            tops.push((i, j, h_top - left.max(right)));
        }
        i = j + 1;
    }
    let highest = tops
        .iter()
        .enumerate()
        .max_by(|a, b| y[a.1.0].total_cmp(&y[b.1.0]).then(b.0.cmp(&a.0)))
        .map(|(k, _)| k);
    let kept: Vec<(usize, usize, f64)> = tops
        .iter()
        .enumerate()
        .filter(|(k, t)| t.2 >= min_prominence || Some(*k) == highest)
        .map(|(_, t)| *t)
        .collect();
    // Borders: the last bucket of each peak but the last.
    let mut ends = Vec::with_capacity(kept.len());
    for w in kept.windows(2) {
        let (from, to) = (w[0].1 + 1, w[1].0); // valley buckets: from..to
        let low = (from..to).map(|k| y[k]).fold(f64::INFINITY, f64::min);
        let a = (from..to)
            .find(|&k| y[k] == low)
            .expect("a valley lies between two tops");
        let b = (from..to).rev().find(|&k| y[k] == low).expect("same");
        let end = if a == b {
            // One valley bucket: it goes with the higher neighbour's side.
            if y[a - 1] > y[a + 1] { a } else { a - 1 }
        } else {
            (a + b) / 2
        };
        ends.push(end);
    }
    let total = h.total();
    let mut out = Vec::with_capacity(kept.len());
    for (k, &(i, j, prominence)) in kept.iter().enumerate() {
        let mut lo = if k == 0 { 0 } else { ends[k - 1] + 1 };
        let mut hi = if k + 1 == kept.len() { n - 1 } else { ends[k] };
        while h.counts[lo] == 0 {
            lo += 1;
        }
        while h.counts[hi] == 0 {
            hi -= 1;
        }
        let calls = h.calls_in(lo, hi);
        out.push(Peak {
            lo,
            hi,
            mode: i + (j - i) / 2,
            calls,
            share: calls as f64 / total as f64,
            mean_cycles: h.latency_in(lo, hi) / calls as f64,
            prominence,
        });
    }
    out
}

/// The peaks holding at least `min_share` (0..=1) of the calls, in order. The peak with the most
/// calls is always kept, so an operation with calls keeps at least one execution path.
pub fn significant(peaks: Vec<Peak>, min_share: f64) -> Vec<Peak> {
    let largest = peaks
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.calls.cmp(&b.1.calls).then(b.0.cmp(&a.0)))
        .map(|(i, _)| i);
    peaks
        .into_iter()
        .enumerate()
        .filter(|(i, p)| p.share >= min_share || Some(*i) == largest)
        .map(|(_, p)| p)
        .collect()
}

/// [`find`], then [`significant`]: the peaks `compare` and `diff` look at.
pub fn find_significant(h: &Histogram, min_prominence: f64, min_share: f64) -> Vec<Peak> {
    significant(find(h, min_prominence), min_share)
}

#[derive(Serialize)]
struct OpPeaks<'a> {
    op: &'a str,
    calls: u128,
    peaks: Vec<Peak>,
}

fn render(layer: &Layer, ops: &[&OpProfile], clock: Clock, c: &PeaksConfig, out: &mut String) {
    let geo = Buckets::of(layer);
    let found: Vec<OpPeaks> = ops
        .iter()
        .map(|o| {
            let h = Histogram::of(o, geo);
            OpPeaks {
                op: &o.name,
                calls: h.total(),
                peaks: find_significant(&h, c.prominence, c.min_share),
            }
        })
        .collect();
    match c.format {
        TableFormat::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                layer: &'a str,
                cycles_per_sec: Option<u64>,
                prominence: f64,
                min_share: f64,
                ops: &'a [OpPeaks<'a>],
            }
            let doc = Doc {
                layer: &layer.name,
                cycles_per_sec: clock.0,
                prominence: c.prominence,
                min_share: c.min_share,
                ops: &found,
            };
            out.push_str(&serde_json::to_string_pretty(&doc).expect("peaks serialize"));
            out.push('\n');
        }
        TableFormat::Csv => {
            out.push_str("layer,operation,peak,lo,hi,top,calls,share,mean_cycles\n");
            for o in &found {
                for (i, p) in o.peaks.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{},{},{},{:.6},{:.1}",
                        summary::csv_field(&layer.name),
                        o.op,
                        i + 1,
                        p.lo,
                        p.hi,
                        p.mode,
                        p.calls,
                        p.share,
                        p.mean_cycles
                    );
                }
            }
        }
        TableFormat::Text => {
            let _ = writeln!(out, "{}", show::layer_header(layer, clock, 80));
            let _ = writeln!(
                out,
                "  mean: estimated from bucket mid-points (a peak's calls have no total of their\n  \
                 own; summary's mean is the recorded total over the calls)"
            );
            for o in &found {
                let n = o.peaks.len();
                let _ = writeln!(
                    out,
                    "\n{}: {} finished call{}, {} peak{}",
                    o.op,
                    o.calls,
                    if o.calls == 1 { "" } else { "s" },
                    n,
                    if n == 1 { "" } else { "s" }
                );
                if n == 0 {
                    continue;
                }
                let mut t =
                    Table::new(&["peak", "buckets", "top", "calls", "share", "mean", "cycles"]);
                for (i, p) in o.peaks.iter().enumerate() {
                    t.row(vec![
                        format!("{}", i + 1),
                        if p.lo == p.hi {
                            p.lo.to_string()
                        } else {
                            format!("{}-{}", p.lo, p.hi)
                        },
                        p.mode.to_string(),
                        p.calls.to_string(),
                        fmt_pct(p.share),
                        clock.latency(p.mean_cycles),
                        fmt_cycles(p.mean_cycles),
                    ]);
                }
                t.render(2, out);
            }
        }
    }
}

/// `fsprof peaks`: the peaks of the selected operations of one layer.
pub fn run(p: &Loaded, c: &PeaksConfig, out: &mut String) -> Result<(), Error> {
    let layer = p.layer(c.select.layer.as_deref())?;
    let ops = input::select_ops(layer, &c.select.ops, c.select.top, c.shares)?;
    render(layer, &ops, p.clock(), c, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Buckets;
    use profile_store::Resolution;

    fn hist(pairs: &[(usize, u64)]) -> Histogram {
        let mut c = vec![0; 64];
        for &(b, n) in pairs {
            c[b] = n;
        }
        Histogram::from_counts(
            c,
            Buckets {
                resolution: Resolution::ONE,
                len: 64,
            },
        )
    }

    fn ranges(p: &[Peak]) -> Vec<(usize, usize, usize)> {
        p.iter().map(|p| (p.lo, p.mode, p.hi)).collect()
    }

    #[test]
    fn empty_has_no_peak() {
        assert!(find(&hist(&[]), 1.0).is_empty());
    }

    #[test]
    fn bimodal_gives_two_peaks_at_the_right_buckets() {
        let h = hist(&[
            (8, 10),
            (9, 400),
            (10, 1000),
            (11, 300),
            (12, 5),
            (19, 3),
            (20, 40),
            (21, 90),
            (22, 20),
        ]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(8, 10, 12), (19, 21, 22)]);
        assert_eq!(p[0].calls, 1715);
        assert_eq!(p[1].calls, 153);
        assert!((p[0].share + p[1].share - 1.0).abs() < 1e-12);
        // Mean of the second peak from mid-points 1.5 · 2^b.
        let mean = (3.0 * 786_432.0 + 40.0 * 1_572_864.0 + 90.0 * 3_145_728.0 + 20.0 * 6_291_456.0)
            / 153.0;
        assert!((p[1].mean_cycles - mean).abs() < 1e-6);
    }

    #[test]
    fn valley_between_touching_peaks_is_the_border() {
        // 1000 at 10, valley of 10 at 13, 500 at 16: two peaks, the valley bucket goes with
        // the side whose neighbour is higher (bucket 12 has 40, bucket 14 has 60).
        let h = hist(&[
            (10, 1000),
            (11, 200),
            (12, 40),
            (13, 10),
            (14, 60),
            (15, 200),
            (16, 500),
        ]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(10, 10, 12), (13, 16, 16)]);
        assert_eq!(p.iter().map(|p| p.calls).sum::<u128>(), 2010);
    }

    #[test]
    fn small_bumps_belong_to_the_larger_peak() {
        // 100, 60, 70 (a bump less than a factor two above its valley), 10.
        let h = hist(&[(5, 100), (6, 60), (7, 70), (8, 10)]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(5, 5, 8)]);
        // With a lower threshold the bump is a peak of its own.
        let p = find(&h, 0.1);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].mode, 7);
    }

    #[test]
    fn plateau_is_one_peak_and_a_single_call_is_a_peak() {
        let h = hist(&[(3, 7), (4, 7), (5, 7), (30, 1)]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(3, 4, 5), (30, 30, 30)]);
        assert_eq!(p[1].prominence, 1.0);
    }

    #[test]
    fn the_highest_top_is_kept_even_below_the_threshold() {
        let h = hist(&[(12, 1), (13, 2), (14, 1)]);
        let p = find(&h, 5.0);
        assert_eq!(ranges(&p), [(12, 13, 14)]);
    }

    #[test]
    fn small_peaks_are_dropped_by_share_but_the_largest_stays() {
        // 13000 calls around bucket 10 and one stray call at 15: two peaks on a log scale,
        // one significant.
        let h = hist(&[(9, 3000), (10, 10_000), (15, 1)]);
        let all = find(&h, 1.0);
        assert_eq!(ranges(&all), [(9, 10, 10), (15, 15, 15)]);
        let kept = significant(all.clone(), DEFAULT_MIN_SHARE);
        assert_eq!(ranges(&kept), [(9, 10, 10)]);
        assert_eq!(find_significant(&h, 1.0, DEFAULT_MIN_SHARE), kept);
        // A share of 0 keeps everything; 1.0 keeps only the largest.
        assert_eq!(significant(all.clone(), 0.0), all);
        let h = hist(&[(5, 40), (20, 60)]);
        assert_eq!(ranges(&significant(find(&h, 1.0), 1.0)), [(20, 20, 20)]);
        assert!(significant(Vec::new(), 0.5).is_empty());
    }

    #[test]
    fn peaks_at_both_ends() {
        let h = hist(&[(0, 50), (63, 50)]);
        assert_eq!(ranges(&find(&h, 1.0)), [(0, 0, 0), (63, 63, 63)]);
    }
}
