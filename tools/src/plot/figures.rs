//! `fsprof plot`: SVG figures in the manner of the thesis's.
//!
//! * [`histogram`]: one panel per operation (largest total latency first, as in thesis figure
//!   3.2), calls per bucket on a log y axis, the bucket number on the top x axis and the bucket's
//!   lower bound (seconds, or cycles without a clock rate) on the bottom x axis, as `fsprof show`
//!   labels its rows (estimates of latency use the mid-point, `docs/format.md#buckets`). All panels
//!   share one x range so they read down the page.
//! * [`latency`]: the same panels with each bucket's estimated latency (calls × mid-point) on a
//!   linear y axis, labelled with its share of the operation's latency (thesis figure 3.6): where
//!   the time goes.
//! * [`heatmap`]: the time-lapse matrix of one operation (epoch × bucket, thesis figure 3.5 seen
//!   from above), each cell coloured by its calls on a log scale.
//! * [`overlay`]: one operation of two profiles side by side in each bucket.
//!
//! Bars are `<rect class="bar">` (`"bar a"` / `"bar b"` in overlays) and heat-map cells
//! `<rect class="cell">`, one per non-empty bucket or cell, each with a `<title>` tooltip. The
//! SVG is written directly (no plotting crate): the figures need two x scales, log-scale bars
//! and a heat map, which take less code here than adapting a general plotting library, and the
//! output stays small and testable.

use std::str::FromStr;

use profile_store::{Layer, OpProfile};

use crate::background::Shares;
use crate::hist::Histogram;
use crate::svg::{Anchor, Svg};
use crate::units::{Buckets, Clock, fmt_cycles, fmt_pct, fmt_secs};

/// Which figure to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Calls per bucket, log y, one panel per operation.
    Histogram,
    /// Estimated latency per bucket, one panel per operation.
    Latency,
    /// Time-lapse heat map of one operation.
    Heatmap,
    /// One operation of two profiles.
    Overlay,
    /// One operation at every level of the stack (`fsprof stack`), overlaid.
    Stack,
}

impl FromStr for PlotKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "histogram" | "hist" => Ok(PlotKind::Histogram),
            "latency" => Ok(PlotKind::Latency),
            "heatmap" | "timelapse" => Ok(PlotKind::Heatmap),
            "overlay" => Ok(PlotKind::Overlay),
            "stack" => Ok(PlotKind::Stack),
            _ => Err(format!(
                "unknown plot kind '{s}' (histogram, latency, heatmap, overlay, stack)"
            )),
        }
    }
}

const WIDTH: f64 = 760.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 28.0;
const PLOT_H: f64 = 170.0;
/// From a panel's top to its plot area: title row and bucket-number row.
const PANEL_HEAD: f64 = 46.0;
/// Below the plot area: the latency row and spacing.
const PANEL_FOOT: f64 = 40.0;
/// The figure's title row.
const FIGURE_HEAD: f64 = 30.0;
/// Fewest buckets shown across, so single-bucket operations still read as a histogram.
const MIN_SLOTS: usize = 12;
/// Least room between two axis labels, and between the first label and the row's name.
const LABEL_GAP: f64 = 8.0;
/// Least room between two unlabelled ticks.
const TICK_GAP: f64 = 6.0;
/// Font size of axis labels (the `.label` class).
const LABEL_PX: f64 = 10.5;
/// Font size of the latency figure's share labels (the `.share` class).
const SHARE_PX: f64 = 9.5;

/// The width in pixels of `s` set as an axis label, from DejaVu Sans's advance widths (the
/// first font the figures ask for; the others are narrower): digits 0.636 em, and so on.
fn text_width(s: &str) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            '0'..='9' => 0.636,
            '.' | ' ' => 0.3179,
            '%' => 0.95,
            'e' => 0.615,
            'm' => 0.974,
            'M' => 0.863,
            'G' => 0.775,
            'K' | 'k' => 0.656,
            'n' | 'u' | 'h' => 0.634,
            's' => 0.521,
            '?' => 0.531,
            _ => 0.7,
        })
        .sum();
    em * LABEL_PX
}

const CSS: &str = "\
text{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:11px;fill:#222}\
.figtitle{font-size:14px;font-weight:bold}\
.title{font-size:12.5px;font-weight:bold}\
.label{font-size:10.5px;fill:#444}\
.rowlabel{font-size:10.5px;fill:#666;font-style:italic}\
.share{font-size:9.5px;fill:#333}\
.axis{stroke:#333;stroke-width:1}\
.tick{stroke:#333;stroke-width:1}\
.grid{stroke:#e2e2e2;stroke-width:1}\
.bar{fill:#4c72b0}\
.bar.b{fill:#dd8452}\
.legend.a{fill:#4c72b0}\
.legend.b{fill:#dd8452}\
.bar.c,.legend.c{fill:#55a868}\
.bar.d,.legend.d{fill:#c44e52}\
.bar.e,.legend.e{fill:#8172b3}\
.bar.f,.legend.f{fill:#937860}\
.peak{fill:#c44e52;fill-opacity:0.1;stroke:#c44e52;stroke-opacity:0.5}\
.peaklabel{font-size:9.5px;fill:#c44e52}";

/// Colours of the heat map from few to many calls (viridis).
const PALETTE: [(f64, [u8; 3]); 5] = [
    (0.0, [0x44, 0x01, 0x54]),
    (0.25, [0x3b, 0x52, 0x8b]),
    (0.5, [0x21, 0x91, 0x8c]),
    (0.75, [0x5e, 0xc9, 0x62]),
    (1.0, [0xfd, 0xe7, 0x25]),
];

/// The x axis shared by a figure's panels: a bucket range laid out in equal slots.
struct XAxis {
    lo: usize,
    hi: usize,
    geo: Buckets,
    clock: Clock,
}

impl XAxis {
    /// The union of `ranges`, one empty bucket of margin each side, widened to `MIN_SLOTS`.
    fn new(ranges: impl Iterator<Item = (usize, usize)>, geo: Buckets, clock: Clock) -> XAxis {
        let last = geo.len.saturating_sub(1);
        let (mut lo, mut hi) = ranges.fold((usize::MAX, 0), |(a, b), (l, h)| (a.min(l), b.max(h)));
        if lo == usize::MAX {
            (lo, hi) = (0, last.min(MIN_SLOTS - 1));
        }
        lo = lo.saturating_sub(1);
        hi = (hi + 1).min(last);
        while hi - lo + 1 < MIN_SLOTS && (lo > 0 || hi < last) {
            lo = lo.saturating_sub(1);
            if hi - lo + 1 < MIN_SLOTS && hi < last {
                hi += 1;
            }
        }
        XAxis { lo, hi, geo, clock }
    }

    fn slots(&self) -> usize {
        self.hi - self.lo + 1
    }

    fn slot_w(&self) -> f64 {
        (WIDTH - LEFT - RIGHT) / self.slots() as f64
    }

    /// Left edge of bucket `b`'s slot.
    fn x(&self, b: usize) -> f64 {
        LEFT + (b - self.lo) as f64 * self.slot_w()
    }

    fn center(&self, b: usize) -> f64 {
        self.x(b) + self.slot_w() / 2.0
    }

    /// The strides labels may use: bucket numbers that read well (1, 2, 4, 5, 10, 16, 20...)
    /// at resolution 1; powers of two at higher ones, so labels land on octave boundaries.
    fn candidate_strides(&self) -> Vec<usize> {
        let pow2 = (0..=12).map(|k| 1usize << k);
        if self.geo.resolution.get() == 1 {
            [1, 2, 4, 5, 10, 16, 20, 32, 50, 64, 100]
                .into_iter()
                .chain(pow2.skip(7))
                .collect()
        } else {
            pow2.collect()
        }
    }

    /// The stride of labelled buckets: the smallest candidate that leaves at least
    /// `LABEL_GAP` pixels between the widest of the labels `text` gives.
    fn label_stride(&self, text: &dyn Fn(usize) -> String) -> usize {
        let widest = (self.lo..=self.hi)
            .map(|b| text_width(&text(b)))
            .fold(0.0, f64::max);
        let candidates = self.candidate_strides();
        candidates
            .iter()
            .copied()
            .find(|&s| s as f64 * self.slot_w() >= widest + LABEL_GAP)
            .unwrap_or(*candidates.last().expect("candidates"))
    }

    /// The stride of unlabelled ticks: the smallest divisor of `stride` whose ticks stand at
    /// least `TICK_GAP` pixels apart (so narrow slots do not draw a solid band of ticks).
    fn tick_stride(&self, stride: usize) -> usize {
        (1..=stride)
            .find(|&d| stride % d == 0 && d as f64 * self.slot_w() >= TICK_GAP)
            .unwrap_or(stride)
    }

    /// One row of the x axis along the line at `y_line`: ticks (`dir` = −1 up, +1 down),
    /// labels `text(b)` with their baseline at `y_text`, and the row's name at its left, moved
    /// further left when the first label would reach into it.
    fn draw_row(
        &self,
        svg: &mut Svg,
        y_line: f64,
        dir: f64,
        y_text: f64,
        name: &str,
        text: &dyn Fn(usize) -> String,
    ) {
        let stride = self.label_stride(text);
        let ticks = self.tick_stride(stride);
        let mut name_end = LEFT - 8.0;
        for b in self.lo..=self.hi {
            let x = self.center(b);
            let labelled = b % stride == 0;
            if labelled || b % ticks == 0 {
                let len = if labelled { 5.0 } else { 3.0 };
                svg.line(x, y_line, x, y_line + dir * len, "tick");
            }
            if labelled {
                let label = text(b);
                name_end = name_end.min(x - text_width(&label) / 2.0 - LABEL_GAP);
                svg.text(x, y_text, Anchor::Middle, "label", &label);
            }
        }
        svg.text(name_end, y_text, Anchor::End, "rowlabel", name);
    }

    /// The latency label of bucket `b`: its lower bound in time, or in cycles (the convention
    /// of every view: `fsprof show` labels its rows alike).
    fn latency_label(&self, b: usize) -> String {
        let lo = self.geo.lo(b);
        match self.clock.secs(lo) {
            Some(s) => fmt_secs(s),
            None => fmt_cycles(lo),
        }
    }

    /// Bucket numbers above the plot area whose top is `py0`.
    fn draw_top(&self, svg: &mut Svg, py0: f64) {
        self.draw_row(svg, py0, -1.0, py0 - 8.0, "bucket", &|b| b.to_string());
    }

    /// Lower-bound latencies below the plot area whose bottom is `py1`.
    fn draw_bottom(&self, svg: &mut Svg, py1: f64) {
        let row = if self.clock.known() {
            "latency"
        } else {
            "cycles"
        };
        self.draw_row(svg, py1, 1.0, py1 + 17.0, row, &|b| self.latency_label(b));
    }

    fn tooltip(&self, b: usize, what: &str) -> String {
        let (lo, hi) = (self.geo.lo(b), self.geo.hi(b));
        let range = match (self.clock.secs(lo), self.clock.secs(hi)) {
            (Some(l), Some(h)) => format!(
                "{}-{} cycles, {}-{}",
                fmt_cycles(lo),
                fmt_cycles(hi),
                fmt_secs(l),
                fmt_secs(h)
            ),
            _ => format!("{}-{} cycles", fmt_cycles(lo), fmt_cycles(hi)),
        };
        format!("bucket {b}: {what} ({range})")
    }
}

/// A log10 y axis from 0.5 (so one call still shows) to the decade above `max`.
struct LogY {
    py0: f64,
    lo: f64,
    hi: f64,
}

impl LogY {
    fn new(py0: f64, max: u64) -> LogY {
        let top = (max.max(1) as f64).log10().ceil().max(1.0);
        LogY {
            py0,
            lo: 0.5f64.log10(),
            hi: top,
        }
    }

    fn y(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo) / (self.hi - self.lo);
        self.py0 + PLOT_H * (1.0 - t)
    }

    fn draw(&self, svg: &mut Svg, title: &str) {
        for d in 0..=self.hi as i32 {
            let y = self.y(10f64.powi(d));
            svg.line(LEFT, y, WIDTH - RIGHT, y, "grid");
            svg.line(LEFT - 4.0, y, LEFT, y, "tick");
            svg.text(LEFT - 7.0, y + 4.0, Anchor::End, "label", &decade(d));
        }
        svg.vertical_text(16.0, self.py0 + PLOT_H / 2.0, "rowlabel", title);
    }
}

/// `10^d` as `1`, `10`, `100`, `1k`, `10k`, `100k`, `1M`, ...
fn decade(d: i32) -> String {
    const SUFFIX: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let (group, rest) = ((d / 3) as usize, d % 3);
    format!("{}{}", 10u64.pow(rest as u32), SUFFIX[group.min(6)])
}

/// A round step for a linear axis reaching `max`: 1, 2 or 5 × 10^k, about four steps.
fn nice_step(max: f64) -> f64 {
    let raw = max / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn axes_box(svg: &mut Svg, py0: f64) {
    let py1 = py0 + PLOT_H;
    svg.line(LEFT, py0, LEFT, py1, "axis");
    svg.line(LEFT, py1, WIDTH - RIGHT, py1, "axis");
    svg.line(LEFT, py0, WIDTH - RIGHT, py0, "axis");
}

/// An operation's panel title: calls, share of the layer's latency (taken as `shares` says;
/// a background operation left out of the shares is marked instead), mean.
fn op_title(op: &OpProfile, layer: &Layer, clock: Clock, shares: Shares) -> String {
    let share = match shares.of(layer, op) {
        Some(s) => format!("{} of latency", fmt_pct(s)),
        None => "background, not in the shares".into(),
    };
    format!(
        "{}: {}, {share}, mean {}",
        op.name,
        crate::show::calls(op.count as u128),
        clock.latency(op.mean())
    )
}

fn figure_title(svg: &mut Svg, title: &str) {
    svg.text(LEFT, 20.0, Anchor::Start, "figtitle", title);
}

/// Height of the note under a figure.
const FOOTER: f64 = 22.0;

/// The note under a figure that says what the two x scales mean; grows the figure to fit.
fn footer(svg: &mut Svg, geo: Buckets, clock: Clock) {
    let r = geo.resolution.get();
    let range = if r == 1 {
        "bucket b holds latencies of 2^b to 2^(b+1) cycles".to_string()
    } else {
        format!("bucket b holds latencies of 2^(b/{r}) to 2^((b+1)/{r}) cycles")
    };
    let scale = match clock.0 {
        Some(hz) => format!(
            "latency: the bucket's lower bound at {:.3} GHz",
            hz as f64 / 1e9
        ),
        None => "cycles: the bucket's lower bound (clock rate unknown)".to_string(),
    };
    let y = svg.height() + FOOTER - 8.0;
    svg.set_height(svg.height() + FOOTER);
    svg.text(
        LEFT,
        y,
        Anchor::Start,
        "rowlabel",
        &format!("{range}; {scale}"),
    );
}

fn bar_geometry(axis: &XAxis, b: usize) -> (f64, f64) {
    let w = axis.slot_w();
    let gap = (w * 0.12).min(3.0);
    (axis.x(b) + gap, w - 2.0 * gap)
}

/// Calls per bucket on a log scale, one panel per operation of `ops`.
pub fn histogram(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    title: &str,
    shares: Shares,
) -> String {
    panels(layer, ops, clock, title, Panel::Calls, shares)
}

/// [`histogram`] with each operation's peaks ([`crate::peaks`]) marked as bands.
pub fn histogram_with_peaks(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    title: &str,
    shares: Shares,
) -> String {
    panels(layer, ops, clock, title, Panel::CallsAndPeaks, shares)
}

/// What a panel of [`panels`] shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Panel {
    Calls,
    CallsAndPeaks,
    Latency,
}

/// Marks the peaks of `h` as bands over the panel at `py0`, numbered as `fsprof peaks` does.
fn mark_peaks(svg: &mut Svg, axis: &XAxis, h: &Histogram, py0: f64) {
    let found = crate::peaks::of(h);
    for (i, p) in found.iter().enumerate() {
        let (x0, x1) = (axis.x(p.lo), axis.x(p.hi) + axis.slot_w());
        let tip = format!(
            "peak {}: {}, {:.1}% of the calls",
            i + 1,
            p.calls,
            p.share * 100.0
        );
        svg.rect(x0, py0, x1 - x0, PLOT_H, "peak", None, Some(&tip));
        svg.text(
            x0 + 2.0,
            py0 + 10.0,
            Anchor::Start,
            "peaklabel",
            &format!("peak {}", i + 1),
        );
    }
}

/// Estimated latency per bucket, one panel per operation of `ops`.
pub fn latency(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    title: &str,
    shares: Shares,
) -> String {
    panels(layer, ops, clock, title, Panel::Latency, shares)
}

fn panels(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    title: &str,
    kind: Panel,
    shares: Shares,
) -> String {
    let geo = Buckets::of(layer);
    let hists: Vec<Histogram> = ops.iter().map(|o| Histogram::of(o, geo)).collect();
    let axis = XAxis::new(
        hists.iter().filter_map(Histogram::nonzero_range),
        geo,
        clock,
    );
    let panel_h = PANEL_HEAD + PLOT_H + PANEL_FOOT;
    let mut svg = Svg::new(WIDTH, FIGURE_HEAD + panel_h * ops.len().max(1) as f64 + 8.0);
    figure_title(&mut svg, title);
    if ops.is_empty() {
        svg.text(
            LEFT,
            FIGURE_HEAD + 30.0,
            Anchor::Start,
            "label",
            "no operations",
        );
    }
    for (i, (op, h)) in ops.iter().zip(&hists).enumerate() {
        let top = FIGURE_HEAD + panel_h * i as f64;
        let py0 = top + PANEL_HEAD;
        let py1 = py0 + PLOT_H;
        svg.text(
            LEFT,
            top + 14.0,
            Anchor::Start,
            "title",
            &op_title(op, layer, clock, shares),
        );
        if kind == Panel::Latency {
            latency_panel(&mut svg, &axis, h, py0);
        } else {
            if kind == Panel::CallsAndPeaks {
                mark_peaks(&mut svg, &axis, h, py0);
            }
            let max = h.counts.iter().copied().max().unwrap_or(0);
            let y = LogY::new(py0, max);
            y.draw(&mut svg, "calls (log scale)");
            for b in axis.lo..=axis.hi {
                let c = h.counts[b];
                if c == 0 {
                    continue;
                }
                let (x, w) = bar_geometry(&axis, b);
                let yt = y.y(c as f64);
                let tip = axis.tooltip(b, &crate::show::calls(c as u128));
                svg.rect(x, yt, w, py1 - yt, "bar", None, Some(&tip));
            }
        }
        axes_box(&mut svg, py0);
        axis.draw_top(&mut svg, py0);
        axis.draw_bottom(&mut svg, py1);
    }
    footer(&mut svg, geo, clock);
    svg.finish(title, CSS)
}

fn latency_panel(svg: &mut Svg, axis: &XAxis, h: &Histogram, py0: f64) {
    let py1 = py0 + PLOT_H;
    let clock = axis.clock;
    // Values in seconds when the clock rate is known, else cycles.
    let value = |b: usize| {
        let cycles = h.counts[b] as f64 * axis.geo.mid(b);
        clock.secs(cycles).unwrap_or(cycles)
    };
    let fmt = |v: f64| {
        if clock.known() {
            fmt_secs(v)
        } else {
            fmt_cycles(v)
        }
    };
    // Past bucket 1023 (resolution 1, only in hand-made profiles: the parsers stop at 512
    // buckets) a mid-point overflows f64; such buckets get no bar rather than a NaN height.
    let total: f64 = (0..h.len()).map(value).filter(|v| v.is_finite()).sum();
    let max = (axis.lo..=axis.hi)
        .map(value)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let step = if max > 0.0 { nice_step(max) } else { 1.0 };
    let top = (max / step).ceil().max(1.0) * step;
    let y = |v: f64| py1 - v / top * PLOT_H;
    // About four steps; bounded, since a profile with thousands of buckets can overflow f64.
    let steps = if (top / step).is_finite() {
        (top / step).round() as usize
    } else {
        0
    };
    for i in 0..=steps.min(10) {
        let t = i as f64 * step;
        let yy = y(t);
        svg.line(LEFT, yy, WIDTH - RIGHT, yy, "grid");
        svg.line(LEFT - 4.0, yy, LEFT, yy, "tick");
        svg.text(LEFT - 7.0, yy + 4.0, Anchor::End, "label", &fmt(t));
    }
    svg.vertical_text(16.0, py0 + PLOT_H / 2.0, "rowlabel", "estimated latency");
    // Share labels of 3% and more, largest first, each only where it does not overlap one
    // already placed (narrow slots at high resolution would stack them).
    let mut shares: Vec<(f64, f64, f64)> = Vec::new();
    for b in axis.lo..=axis.hi {
        if h.counts[b] == 0 || !value(b).is_finite() {
            continue;
        }
        let v = value(b);
        let (x, w) = bar_geometry(axis, b);
        let share = if total > 0.0 { v / total } else { 0.0 };
        let tip = axis.tooltip(
            b,
            &format!(
                "{}, {} = {}",
                crate::show::calls(h.counts[b] as u128),
                fmt(v),
                fmt_pct(share)
            ),
        );
        // At least one pixel, so a bucket with calls is never invisible.
        let yt = y(v).min(py1 - 1.0);
        svg.rect(x, yt, w, py1 - yt, "bar", None, Some(&tip));
        if share >= 0.03 {
            shares.push((share, axis.center(b), yt));
        }
    }
    shares.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut placed: Vec<(f64, f64, f64)> = Vec::new();
    for (share, x, yt) in shares {
        let label = format!("{:.0}%", share * 100.0);
        let half = text_width(&label) * SHARE_PX / LABEL_PX / 2.0 + 1.0;
        let clash = placed
            .iter()
            .any(|&(l, r, y)| x - half < r && l < x + half && (y - yt).abs() < SHARE_PX + 2.0);
        if clash {
            continue;
        }
        placed.push((x - half, x + half, yt));
        svg.text(x, yt - 3.0, Anchor::Middle, "share", &label);
    }
}

/// Interpolates the palette at `t` in 0..=1.
fn color(t: f64) -> String {
    let t = t.clamp(0.0, 1.0);
    let k = PALETTE
        .iter()
        .rposition(|(o, _)| *o <= t)
        .unwrap_or(0)
        .min(PALETTE.len() - 2);
    let (o0, c0) = PALETTE[k];
    let (o1, c1) = PALETTE[k + 1];
    let f = (t - o0) / (o1 - o0);
    let mix = |i: usize| (c0[i] as f64 + (c1[i] as f64 - c0[i] as f64) * f).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2))
}

/// Where a count falls on the heat map's log colour scale, 0..=1.
fn heat(c: u64, max: u64) -> f64 {
    if max <= 1 {
        1.0
    } else {
        (c as f64).ln() / (max as f64).ln()
    }
}

/// The time-lapse heat map of `op`: epochs down, buckets across.
pub fn heatmap(layer: &Layer, op: &OpProfile, clock: Clock, title: &str, shares: Shares) -> String {
    let geo = Buckets::of(layer);
    let range = op.bucket_span();
    let axis = XAxis::new(range.into_iter(), geo, clock);
    let epochs = op.epochs.len().max(1);
    let plot_h = (epochs as f64 * 20.0).clamp(150.0, 480.0);
    let row_h = plot_h / epochs as f64;
    let py0 = FIGURE_HEAD + PANEL_HEAD;
    let py1 = py0 + plot_h;
    let legend_y = py1 + PANEL_FOOT + 8.0;
    let mut svg = Svg::new(WIDTH, legend_y + 40.0);
    figure_title(&mut svg, title);
    svg.text(
        LEFT,
        FIGURE_HEAD + 14.0,
        Anchor::Start,
        "title",
        &op_title(op, layer, clock, shares),
    );
    let max = op.epochs.iter().flatten().copied().max().unwrap_or(0);
    for (e, row) in op.epochs.iter().enumerate() {
        let y = py0 + e as f64 * row_h;
        for b in axis.lo..=axis.hi {
            let c = row.get(b).copied().unwrap_or(0);
            if c == 0 {
                continue;
            }
            let tip = axis.tooltip(
                b,
                &format!(
                    "epoch {}, {}",
                    e + crate::window::first_epoch(layer),
                    crate::show::calls(c as u128)
                ),
            );
            let fill = color(heat(c, max));
            svg.rect(
                axis.x(b),
                y,
                axis.slot_w(),
                row_h,
                "cell",
                Some(&fill),
                Some(&tip),
            );
        }
    }
    // Epoch labels: elapsed time at the epoch's start when known.
    let stride = ((14.0 / row_h).ceil() as usize).max(1);
    let timed = layer.epoch_cycles > 0;
    for e in (0..epochs).step_by(stride) {
        let y = py0 + (e as f64 + 0.5) * row_h;
        let start = (e + crate::window::first_epoch(layer)) as f64 * layer.epoch_cycles as f64;
        let label = match (timed, clock.secs(start)) {
            (true, Some(s)) => fmt_secs(s),
            (true, None) => fmt_cycles(start),
            (false, _) => e.to_string(),
        };
        svg.line(LEFT - 4.0, y, LEFT, y, "tick");
        svg.text(LEFT - 7.0, y + 4.0, Anchor::End, "label", &label);
    }
    let ytitle = if timed {
        "elapsed time (epoch start)"
    } else {
        "epoch"
    };
    svg.vertical_text(16.0, py0 + plot_h / 2.0, "rowlabel", ytitle);
    svg.line(LEFT, py0, LEFT, py1, "axis");
    svg.line(LEFT, py1, WIDTH - RIGHT, py1, "axis");
    svg.line(LEFT, py0, WIDTH - RIGHT, py0, "axis");
    svg.line(WIDTH - RIGHT, py0, WIDTH - RIGHT, py1, "axis");
    axis.draw_top(&mut svg, py0);
    axis.draw_bottom(&mut svg, py1);
    // Colour legend: a gradient from 1 call to the fullest cell.
    if max > 0 {
        let (lx, lw) = (LEFT, 200.0);
        let stops: Vec<(f64, String)> = PALETTE.iter().map(|(o, _)| (*o, color(*o))).collect();
        let stops_ref: Vec<(f64, &str)> = stops.iter().map(|(o, c)| (*o, c.as_str())).collect();
        svg.gradient("heat", &stops_ref);
        svg.text(
            lx,
            legend_y,
            Anchor::Start,
            "rowlabel",
            "calls per cell (log scale)",
        );
        svg.rect(
            lx,
            legend_y + 5.0,
            lw,
            10.0,
            "legendbar",
            Some("url(#heat)"),
            None,
        );
        svg.text(lx, legend_y + 28.0, Anchor::Start, "label", "1");
        if max > 3 {
            let mid = (max as f64).sqrt().round() as u64;
            svg.text(
                lx + lw * heat(mid, max),
                legend_y + 28.0,
                Anchor::Middle,
                "label",
                &mid.to_string(),
            );
        }
        svg.text(
            lx + lw,
            legend_y + 28.0,
            Anchor::End,
            "label",
            &max.to_string(),
        );
    }
    footer(&mut svg, geo, clock);
    svg.finish(title, CSS)
}

/// One operation of two profiles: A's bars in the left half of each bucket, B's in the right.
/// The layers must have the same resolution; `clock` labels the latency axis.
#[allow(clippy::too_many_arguments)]
pub fn overlay(
    layer_a: &Layer,
    op_a: Option<&OpProfile>,
    name_a: &str,
    layer_b: &Layer,
    op_b: Option<&OpProfile>,
    name_b: &str,
    clock: Clock,
    title: &str,
) -> String {
    let geo = Buckets {
        resolution: layer_a.resolution,
        len: layer_a.buckets.max(layer_b.buckets),
    };
    let hist =
        |o: Option<&OpProfile>| o.map_or_else(|| Histogram::empty(geo), |o| Histogram::of(o, geo));
    series(
        &[(name_a, hist(op_a)), (name_b, hist(op_b))],
        geo,
        clock,
        title,
    )
}

/// Classes of the series of [`series`], in order (at most six series are drawn).
const SERIES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// Histograms of one geometry side by side in each bucket, each series a colour and a legend
/// entry with its calls (an overlay of two profiles, or the levels of a stack).
pub fn series(hists: &[(&str, Histogram)], geo: Buckets, clock: Clock, title: &str) -> String {
    let hists = &hists[..hists.len().min(SERIES.len())];
    let n = hists.len().max(1) as f64;
    let axis = XAxis::new(
        hists.iter().filter_map(|(_, h)| h.nonzero_range()),
        geo,
        clock,
    );
    // Legend entries, wrapped into rows on the panel's title row.
    let entries: Vec<(String, f64)> = hists
        .iter()
        .map(|(name, h)| {
            let text = format!("{name}: {}", crate::show::calls(h.total()));
            let w = 17.0 + 7.0 * text.chars().count() as f64 + 24.0;
            (text, w)
        })
        .collect();
    let mut placed = Vec::new();
    let (mut lx, mut row) = (LEFT, 0.0);
    for (text, w) in &entries {
        if lx > LEFT && lx + w > WIDTH - RIGHT {
            lx = LEFT;
            row += 1.0;
        }
        placed.push((lx, row, text));
        lx += w;
    }
    let py0 = FIGURE_HEAD + PANEL_HEAD + 16.0 * row;
    let py1 = py0 + PLOT_H;
    let mut svg = Svg::new(WIDTH, py1 + PANEL_FOOT + 8.0);
    figure_title(&mut svg, title);
    for ((lx, row, text), class) in placed.into_iter().zip(SERIES) {
        let ly = FIGURE_HEAD + 4.0 + 16.0 * row;
        svg.rect(lx, ly, 12.0, 12.0, &format!("legend {class}"), None, None);
        svg.text(lx + 17.0, ly + 10.0, Anchor::Start, "label", text);
    }
    let max = hists
        .iter()
        .flat_map(|(_, h)| h.counts.iter().copied())
        .max()
        .unwrap_or(0);
    let y = LogY::new(py0, max);
    y.draw(&mut svg, "calls (log scale)");
    for b in axis.lo..=axis.hi {
        let (x, w) = bar_geometry(&axis, b);
        for (k, ((name, h), class)) in hists.iter().zip(SERIES).enumerate() {
            let c = h.counts.get(b).copied().unwrap_or(0);
            if c == 0 {
                continue;
            }
            let yt = y.y(c as f64);
            let tip = axis.tooltip(b, &format!("{name}: {}", crate::show::calls(c as u128)));
            svg.rect(
                x + k as f64 * w / n,
                yt,
                w / n,
                py1 - yt,
                &format!("bar {class}"),
                None,
                Some(&tip),
            );
        }
    }
    axes_box(&mut svg, py0);
    axis.draw_top(&mut svg, py0);
    axis.draw_bottom(&mut svg, py1);
    footer(&mut svg, geo, clock);
    svg.finish(title, CSS)
}

#[cfg(test)]
mod tests;
