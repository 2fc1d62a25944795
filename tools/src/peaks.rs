//! Peaks of a latency histogram, found as a person reads a log-scale plot.
//!
//! The histogram is read as heights `y[b] = log2(count[b])` for a bucket with calls, and `-1`
//! for an empty one (half a call: one step below a single call), with empty space beyond both
//! ends. A *peak* is a local maximum (a plateau of equal heights counts as one, its mode being
//! the plateau's middle) whose *prominence* is at least the threshold (default 1, a factor of
//! two in calls). The prominence is the usual topographic one: walking away from the top on
//! each side until a strictly higher bucket or the end, the lowest height met is that side's
//! valley; the prominence is the top's height above the higher of the two valleys. So two tops
//! separate when the valley between them holds at most half the calls of the lower top: deep
//! in relative terms, whatever the counts (the earlier `log2(count + 1)` took 2 calls over a
//! valley of 1 for a factor of 1.5, and a sparse slow tail never separated). A local maximum
//! below the threshold is a bump on the slope of a larger peak and belongs to it. The highest
//! top of a non-empty histogram is always a peak, even if it is lower than the threshold
//! (every operation with calls has at least one execution path).
//!
//! Each peak extends down to the valleys that separate it from its neighbouring peaks: the
//! lowest bucket between two adjacent peaks is the border (a run of equally low buckets is split
//! in its middle; a single valley bucket goes with the side whose adjacent bucket is higher), and
//! empty buckets at the ends of a peak's range are trimmed. So every call belongs to exactly one
//! peak and the shares of an operation's peaks add up to 100%.
//!
//! A peak is then split where its *time* has a deep valley: the same reading on the heights
//! `log2(count[b] · 2^(b/r))` (the calls' time in the bucket, up to a constant; r the
//! resolution), within the peak's range. A fast peak of many calls whose counts fall steeply
//! and then flatten out into a sparse slow tail (a contended cold `tar`: thousands of cached
//! reads of a few microseconds, a few dozen disk reads of 1 to 50 ms, no bucket empty between)
//! is one hill of calls but two of time, and the slow one holds most of the time.

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
    /// excepted. Default 0 (every peak).
    pub min_share: f64,
    /// Output format (text or JSON; CSV lists one peak per line).
    pub format: TableFormat,
    /// Whether background operations may take a `--top` place. Default: no.
    pub shares: crate::background::Shares,
}

/// Default minimum prominence: one unit of `log2(count)`, a factor of two.
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

/// The height of a bucket of `c` calls on the log scale peaks are read on.
fn height(c: u64) -> f64 {
    if c == 0 { -1.0 } else { (c as f64).log2() }
}

/// A top of heights `y`: the plateau `lo..=hi` and its prominence.
type Top = (usize, usize, f64);

/// The tops of heights `y` (of buckets of `counts` calls) with a prominence of at least
/// `min_prominence`, left to right (the highest one always); an empty bucket is never a top.
/// Beyond both ends lies `floor`.
fn tops(y: &[f64], counts: &[u64], min_prominence: f64, floor: f64) -> Vec<Top> {
    let n = y.len();
    let at = |i: isize| -> f64 {
        if i < 0 || i as usize >= n {
            floor
        } else {
            y[i as usize]
        }
    };
    // Local maxima as plateaus [i, j] with their prominence.
    let mut found: Vec<Top> = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && y[j + 1] == y[i] {
            j += 1;
        }
        let h_top = y[i];
        if counts[i] > 0 && h_top > at(i as isize - 1) && h_top > at(j as isize + 1) {
            let valley = |range: &mut dyn Iterator<Item = usize>| -> f64 {
                let mut low = h_top;
                for k in range {
                    if y[k] > h_top {
                        return low;
                    }
                    low = low.min(y[k]);
                }
                floor // reached the end: what lies beyond
            };
            let left = valley(&mut (0..i).rev());
            let right = valley(&mut (j + 1..n));
            found.push((i, j, h_top - left.max(right)));
        }
        i = j + 1;
    }
    let highest = found
        .iter()
        .enumerate()
        .max_by(|a, b| y[a.1.0].total_cmp(&y[b.1.0]).then(b.0.cmp(&a.0)))
        .map(|(k, _)| k);
    found
        .iter()
        .enumerate()
        .filter(|(k, t)| t.2 >= min_prominence || Some(*k) == highest)
        .map(|(_, t)| *t)
        .collect()
}

/// The ranges `(lo, hi)` of the peaks whose tops are `kept` on heights `y`: each ends at the
/// border with the next, the lowest bucket between them.
fn ranges(y: &[f64], kept: &[Top]) -> Vec<(usize, usize)> {
    let n = y.len();
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
    (0..kept.len())
        .map(|k| {
            let lo = if k == 0 { 0 } else { ends[k - 1] + 1 };
            let hi = if k + 1 == kept.len() { n - 1 } else { ends[k] };
            (lo, hi)
        })
        .collect()
}

/// Finds the peaks of `h`, left to right; empty for an empty histogram.
pub fn find(h: &Histogram, min_prominence: f64) -> Vec<Peak> {
    let y: Vec<f64> = h.counts.iter().map(|&c| height(c)).collect();
    // Beyond the ends: empty buckets.
    let kept = tops(&y, &h.counts, min_prominence, -1.0);
    let total = h.total();
    let mut out = Vec::with_capacity(kept.len());
    for (top, (mut lo, mut hi)) in kept.iter().zip(ranges(&y, &kept)) {
        while h.counts[lo] == 0 {
            lo += 1;
        }
        while h.counts[hi] == 0 {
            hi -= 1;
        }
        let parts = time_parts(h, lo, hi, min_prominence);
        if parts.len() == 1 {
            out.push(peak(h, total, lo, hi, top.0 + (top.1 - top.0) / 2, top.2));
            continue;
        }
        for (a, b, prominence) in parts {
            // The mode: the middle of the part's highest plateau of calls.
            let max = (a..=b).map(|k| h.counts[k]).max().unwrap_or(0);
            let first = (a..=b).find(|&k| h.counts[k] == max).unwrap_or(a);
            let last = (a..=b).rev().find(|&k| h.counts[k] == max).unwrap_or(b);
            out.push(peak(h, total, a, b, first + (last - first) / 2, prominence));
        }
    }
    out
}

/// The parts of the peak `lo..=hi` of `h` separated by deep valleys of its time (the heights
/// `log2(calls · 2^(b/r))`), each with its prominence in the time; one part when there is
/// none. Parts are trimmed of empty buckets at their ends.
fn time_parts(
    h: &Histogram,
    lo: usize,
    hi: usize,
    min_prominence: f64,
) -> Vec<(usize, usize, f64)> {
    let per_octave = h.buckets.resolution.get() as f64;
    let t: Vec<f64> = (lo..=hi)
        .map(|b| height(h.counts[b]) + b as f64 / per_octave)
        .collect();
    let counts = &h.counts[lo..=hi];
    // Beyond the ends lie the neighbouring peaks, already apart: nothing.
    let time_tops = tops(&t, counts, min_prominence.max(1.0), f64::NEG_INFINITY);
    ranges(&t, &time_tops)
        .into_iter()
        .zip(&time_tops)
        .map(|((a, b), tt)| {
            let (mut a, mut b) = (lo + a, lo + b);
            while h.counts[a] == 0 {
                a += 1;
            }
            while h.counts[b] == 0 {
                b -= 1;
            }
            (a, b, tt.2)
        })
        .collect()
}

/// The peak `lo..=hi` of `h` (of `total` calls), its top at `mode`.
fn peak(h: &Histogram, total: u128, lo: usize, hi: usize, mode: usize, prominence: f64) -> Peak {
    let calls = h.calls_in(lo, hi);
    Peak {
        lo,
        hi,
        mode,
        calls,
        share: calls as f64 / total as f64,
        mean_cycles: h.latency_in(lo, hi) / calls as f64,
        prominence,
    }
}

/// The peaks of `h` as every view shows them and numbers them (`fsprof peaks` by default,
/// `fsprof why`, `fsprof stack`, the findings and the report): [`find`] at the default
/// prominence, every peak kept whatever its share of the calls (a rare slow path may hold
/// most of the time). One finder, so that the views state the same peaks with the same calls.
pub fn of(h: &Histogram) -> Vec<Peak> {
    find(h, DEFAULT_PROMINENCE)
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
    fn a_sparse_slow_tail_separates_where_its_valley_halves_it() {
        // 2 calls over a valley of 1 is a factor of two: its own peak (log2(count + 1) saw
        // a factor of 1.5 and lumped it into the fast one).
        let h = hist(&[
            (10, 1000),
            (11, 300),
            (12, 40),
            (13, 6),
            (14, 2),
            (15, 1),
            (16, 2),
            (17, 1),
        ]);
        assert_eq!(ranges(&find(&h, 1.0)), [(10, 10, 14), (15, 16, 17)]);
        // A bump of 100 calls over 90 is not, in calls or in time: a tail that never falls
        // by half from one bucket to the next has no valley in time.
        let h = hist(&[
            (10, 1000),
            (11, 600),
            (12, 400),
            (13, 250),
            (14, 150),
            (15, 90),
            (16, 100),
            (17, 40),
        ]);
        assert_eq!(ranges(&find(&h, 1.0)), [(10, 10, 17)]);
        // 3 calls over 2 is no peak of calls, but after a fall to 2 from 300 it is one of
        // time: the 3 calls of bucket 13 take three times the time of the 2 of bucket 12.
        let h = hist(&[(10, 1000), (11, 300), (12, 2), (13, 3), (14, 1)]);
        assert_eq!(ranges(&find(&h, 1.0)), [(10, 10, 12), (13, 13, 14)]);
    }

    #[test]
    fn trimodal_gives_three_peaks_with_valleys_of_a_few_calls() {
        // Cache hits, disk-cache hits and seeks, no bucket empty between them.
        let h = hist(&[
            (10, 500),
            (11, 2000),
            (12, 300),
            (13, 20),
            (14, 30),
            (15, 200),
            (16, 400),
            (17, 60),
            (18, 8),
            (19, 5),
            (20, 9),
            (21, 30),
            (22, 50),
            (23, 12),
        ]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(10, 11, 13), (14, 16, 18), (19, 22, 23)]);
        assert_eq!(p.iter().map(|p| p.calls).sum::<u128>(), h.total());
    }

    #[test]
    fn a_contended_cold_tar_keeps_its_slow_reads_apart() {
        // OP_READDIRPLUS of two tars over a cold tree (fsprof profile, 2.6 GHz): directory
        // blocks from the cache at 25-200 us, from the disk at 1.6-52 ms. The calls fall
        // steeply to 6 at bucket 21 and flatten into a tail of a few calls a bucket, which
        // holds most of the time: one hill of calls, two of time.
        let h = hist(&[
            (10, 163),
            (11, 95),
            (12, 4),
            (13, 55),
            (14, 218),
            (15, 120),
            (16, 186),
            (17, 648),
            (18, 499),
            (19, 91),
            (20, 25),
            (21, 6),
            (22, 10),
            (23, 4),
            (24, 4),
            (25, 3),
            (26, 4),
        ]);
        let p = find(&h, 1.0);
        assert_eq!(ranges(&p), [(10, 10, 12), (13, 17, 20), (21, 22, 26)]);
        assert_eq!(p[2].calls, 31);
        // The slow part holds more time than the one with 58 times its calls.
        assert!(p[2].mean_cycles * 31.0 > p[1].mean_cycles * p[1].calls as f64);
        assert_eq!(p.iter().map(|p| p.calls).sum::<u128>(), h.total());
    }

    #[test]
    fn peaks_at_both_ends() {
        let h = hist(&[(0, 50), (63, 50)]);
        assert_eq!(ranges(&find(&h, 1.0)), [(0, 0, 0), (63, 63, 63)]);
    }
}
