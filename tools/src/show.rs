//! `fsprof show`: terminal histograms, one per operation, largest total latency first.
//!
//! Each row is one bucket: its number, its lower bound in cycles and in time, a bar whose length
//! is proportional to `ln(count + 1)` (a log scale, as the thesis's plots, so small peaks stay
//! visible next to large ones), the count, and the bucket's share of the operation's estimated
//! latency (count × mid-point). Runs of three or more empty buckets inside the range are folded
//! into one line. With `--epochs`, the time-lapse matrix (epoch × bucket, one character per cell
//! on a log scale) replaces the histogram.

use std::fmt::Write as _;

use profile_store::{Layer, OpProfile};

use crate::background::Shares;
use crate::error::Error;
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::maxima::Maxima;
use crate::select::Selection;
use crate::units::{Buckets, Clock, fmt_cycles, fmt_pct, fmt_secs, percentile_list};

/// `fsprof show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowConfig {
    /// The profile.
    pub input: String,
    /// Layer and operations.
    pub select: Selection,
    /// Show the time-lapse matrix instead of the histogram.
    pub epochs: bool,
    /// `--from`, `--to`, `--trim`.
    pub window: crate::window::Window,
    /// Width, colour, characters.
    pub style: ShowStyle,
    /// Show the per-key layers of the layer (`fuse@uid:1000`...) instead of the layer.
    pub by: bool,
}

/// How to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowStyle {
    /// Total width in columns (the bars take what the labels leave). Default 80.
    pub width: usize,
    /// ANSI colours (only when writing to a terminal, or when asked).
    pub color: bool,
    /// Plain `#` bars instead of Unicode block characters.
    pub ascii: bool,
    /// What the shares of the layer's latency are taken of.
    pub shares: Shares,
}

impl Default for ShowStyle {
    fn default() -> Self {
        ShowStyle {
            width: 80,
            color: false,
            ascii: false,
            shares: Shares::default(),
        }
    }
}

/// When to colour terminal output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorMode {
    /// Only when standard output is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Whether to colour: as asked for `Always` and `Never`; for `Auto`, only when standard output
/// is a terminal and `no_color` (the `NO_COLOR` variable, <https://no-color.org>) is unset or
/// empty.
pub fn use_color(
    mode: ColorMode,
    stdout_is_terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
) -> bool {
    match mode {
        ColorMode::Always => true,
        ColorMode::Never => false,
        ColorMode::Auto => stdout_is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// What the histogram's columns mean, under the layer's header: every view labels a bucket by
/// its lower bound (plots too), and estimates latency from its mid-point.
pub const LEGEND: &str =
    "  buckets labelled by their lower bound; lat%: calls x the bucket's mid-point";

/// `"1 call"`, `"2 calls"`.
pub fn calls(n: u128) -> String {
    if n == 1 {
        "1 call".into()
    } else {
        format!("{n} calls")
    }
}

/// Characters of the time-lapse matrix, from 1 call to the most calls in a cell.
const RAMP: &[u8] = b".:-=+*#%@";

/// ANSI escape sequences, or nothing.
struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn bar(&self, s: &str) -> String {
        self.wrap("36", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// The description of a layer printed above its operations: one line, or two when the clock
/// part would take the line past `width` columns (it then goes on its own, indented, line).
pub fn layer_header(layer: &Layer, clock: Clock, width: usize) -> String {
    let clock_text = match clock.0 {
        Some(hz) => format!("clock {:.3} GHz", hz as f64 / 1e9),
        None => "clock rate unknown: latencies in cycles (--cycles-per-sec)".into(),
    };
    let epochs = if layer.epochs > 1 {
        format!(", {} epochs", layer.epochs)
    } else {
        String::new()
    };
    let n = layer.ops.len();
    let head = format!(
        "layer {}: {n} operation{}, {}{epochs}",
        layer.name,
        if n == 1 { "" } else { "s" },
        calls(layer.total_count() as u128)
    );
    if head.chars().count() + 2 + clock_text.chars().count() <= width {
        format!("{head}, {clock_text}")
    } else {
        format!("{head}\n  {clock_text}")
    }
}

/// The warning for a time-lapse layer whose epochs filled up, `None` for others: its last epoch
/// holds every call after it, so the end of the run looks like one long epoch.
pub fn epochs_filled(layer: &Layer) -> Option<String> {
    layer.max_epochs_reached.then(|| {
        format!(
            "warning: layer {}: its {} epochs filled up: calls after the last epoch's start were \
             counted in it (mount with more --max-epochs or a longer --epoch)",
            layer.name, layer.epochs
        )
    })
}

/// Renders the operations `ops` of `layer` (their maxima as `maxima` records them).
pub fn render(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    epochs: bool,
    style: &ShowStyle,
    maxima: &Maxima,
) -> String {
    let mut out = String::new();
    let paint = Paint(style.color);
    let _ = writeln!(out, "{}", layer_header(layer, clock, style.width));
    if let Some(w) = epochs_filled(layer) {
        let _ = writeln!(out, "{}", paint.bold(&w));
    }
    if !epochs {
        let _ = writeln!(out, "{}", paint.dim(LEGEND));
    }
    if ops.is_empty() {
        let _ = writeln!(out, "no operations recorded");
        return out;
    }
    for op in ops {
        out.push('\n');
        let share = match style.shares.of(layer, op) {
            Some(s) => format!("{} of the layer's latency", fmt_pct(s)),
            None => "background: no caller waits (not in the shares)".into(),
        };
        let _ = writeln!(
            out,
            "{}: {}, {share}",
            paint.bold(&op.name),
            calls(op.count as u128),
        );
        let total = op.total as f64;
        let mean = op.mean();
        let _ = match clock.secs(total) {
            Some(s) => writeln!(
                out,
                "  total {} ({} cycles), mean {} ({} cycles)",
                fmt_secs(s),
                fmt_cycles(total),
                clock.latency(mean),
                fmt_cycles(mean)
            ),
            None => writeln!(
                out,
                "  total {} cycles, mean {} cycles",
                fmt_cycles(total),
                fmt_cycles(mean)
            ),
        };
        if let Some(p) = maxima.percentiles(layer, op) {
            let exact = maxima.is_exact(layer, op);
            let calls = op.bucket_sum();
            let _ = writeln!(out, "  {}", percentile_list(clock, &p, exact, calls));
        }
        if epochs {
            matrix(&mut out, layer, op, clock, style.width, &paint);
        } else {
            histogram(&mut out, layer, op, clock, style, &paint);
        }
    }
    out
}

fn histogram(
    out: &mut String,
    layer: &Layer,
    op: &OpProfile,
    clock: Clock,
    style: &ShowStyle,
    paint: &Paint,
) {
    let geo = Buckets::of(layer);
    let h = Histogram::of(op, geo);
    let Some((lo, hi)) = h.nonzero_range() else {
        let _ = writeln!(out, "  no finished calls");
        return;
    };
    let max = h.counts[lo..=hi].iter().copied().max().unwrap_or(0);
    let count_w = max.to_string().len().max(5);
    let time_w = if clock.known() { 7 } else { 0 };
    // "  bkt cycles  time │bar│ count  lat%"
    let fixed = 5 + 1 + 6 + 1 + time_w + usize::from(clock.known()) + 2 + 1 + count_w + 1 + 6;
    let bar_w = style.width.saturating_sub(fixed).max(10);
    let est = h.estimated_latency();
    let head_time = if clock.known() {
        format!(" {:>7}", "time")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{:>5} {:>6}{head_time} {:<w$}  {:>count_w$} {:>6}",
        "bkt",
        "cycles",
        "calls (log scale)",
        "count",
        "lat%",
        w = bar_w
    );
    let mut b = lo;
    while b <= hi {
        // Fold runs of three or more empty buckets.
        let run = h.counts[b..=hi].iter().take_while(|&&c| c == 0).count();
        if run >= 3 {
            let label = format!("{}-{}", b, b + run - 1);
            let _ = writeln!(out, "{}", paint.dim(&format!("{label:>5}  (empty)")));
            b += run;
            continue;
        }
        let c = h.counts[b];
        let lo_cycles = geo.lo(b);
        let time = match clock.secs(lo_cycles) {
            Some(s) => format!(" {:>7}", fmt_secs(s)),
            None => String::new(),
        };
        let bar = bar(c, max, bar_w, style.ascii);
        let pad = bar_w - bar.chars().count();
        // Past bucket 1023 (resolution 1; only in hand-made profiles) mid-points overflow f64
        // and a share cannot be computed: '?' rather than NaN%.
        let part = c as f64 * geo.mid(b);
        let pct = if c == 0 || est <= 0.0 {
            String::new()
        } else if est.is_finite() && part.is_finite() {
            fmt_pct(part / est)
        } else {
            "?".to_string()
        };
        let count = if c > 0 { c.to_string() } else { String::new() };
        let row = format!(
            "{b:>5} {:>6}{time} |{}{}| {count:>count_w$} {pct:>6}",
            fmt_cycles(lo_cycles),
            paint.bar(&bar),
            " ".repeat(pad),
        );
        let _ = writeln!(out, "{}", row.trim_end());
        b += 1;
    }
}

/// A bar of `ln(c + 1) / ln(max + 1)` of `width`, in eighths of a column (or whole `#`).
fn bar(c: u64, max: u64, width: usize, ascii: bool) -> String {
    if c == 0 {
        return String::new();
    }
    let frac = (c as f64 + 1.0).ln() / (max as f64 + 1.0).ln();
    if ascii {
        let n = ((frac * width as f64).round() as usize).clamp(1, width);
        return "#".repeat(n);
    }
    const PARTIAL: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = ((frac * width as f64 * 8.0).round() as usize).clamp(1, width * 8);
    let mut s = "█".repeat(eighths / 8);
    if eighths % 8 != 0 {
        s.push(PARTIAL[eighths % 8]);
    }
    s
}

/// Columns of the matrix's row labels, `"EEEEE TTTTTT |"`, and its closing `|`.
const MATRIX_LABEL: usize = 14;

/// The time-lapse matrix: one row per epoch, one character per column. A column is one bucket,
/// or, when the operation's buckets do not fit in `width`, a run of 2, 4, 8... buckets (a power
/// of two, so at resolution r >= 2 columns line up with octaves) holding their sum.
fn matrix(
    out: &mut String,
    layer: &Layer,
    op: &OpProfile,
    clock: Clock,
    width: usize,
    paint: &Paint,
) {
    let Some((lo, hi)) = op.bucket_span() else {
        let _ = writeln!(out, "  no finished calls");
        return;
    };
    // Room for the cells: the width less the labels and the closing '|'.
    let room = width.saturating_sub(MATRIX_LABEL + 1).max(8);
    let mut per = 1;
    while hi / per - lo / per + 1 > room {
        per *= 2;
    }
    let (first, last) = (lo / per, hi / per);
    // Column c holds buckets c·per .. (c+1)·per − 1, within the operation's span.
    let columns = |row: &[u64]| -> Vec<u64> {
        (first..=last)
            .map(|c| {
                let (b0, b1) = ((c * per).max(lo), ((c + 1) * per - 1).min(hi));
                row.iter()
                    .take(b1 + 1)
                    .skip(b0)
                    .fold(0u64, |a, &x| a.saturating_add(x))
            })
            .collect()
    };
    let rows: Vec<Vec<u64>> = op.epochs.iter().map(|e| columns(e)).collect();
    let max = rows.iter().flatten().copied().max().unwrap_or(1);
    let timed = layer.epoch_cycles > 0;
    let epoch0 = crate::window::first_epoch(layer);
    let label = |e: usize| -> String {
        let e = e + epoch0;
        let start = e as f64 * layer.epoch_cycles as f64;
        match (timed, clock.secs(start)) {
            (true, Some(s)) => format!("{e:>5} {:>6}", fmt_secs(s)),
            (true, None) => format!("{e:>5} {:>6}", fmt_cycles(start)),
            _ => format!("{e:>5} {:>6}", ""),
        }
    };
    // The first bucket of every fifth column (and of the first) above it.
    let mut ruler = format!("{:>5} {:>6}  ", "epoch", if timed { "start" } else { "" });
    let mut col = first;
    while col <= last {
        if col % 5 == 0 || col == first {
            let n = (col * per).max(lo).to_string();
            ruler.push_str(&n);
            col += n.len();
        } else {
            ruler.push(' ');
            col += 1;
        }
    }
    // "bucket" after the numbers when it fits (the legend says what they are anyway).
    let ruler = ruler.trim_end();
    if ruler.len() + 8 <= width {
        let _ = writeln!(out, "{ruler}  bucket");
    } else {
        let _ = writeln!(out, "{ruler}");
    }
    for (e, row) in rows.iter().enumerate() {
        let cells: String = row.iter().map(|&c| cell(c, max)).collect();
        let _ = writeln!(out, "{} |{}|", label(e), paint.bar(&cells));
    }
    // Legend: the smallest count drawn with each character, wrapped to the width.
    let mut words = Vec::new();
    let mut last_floor = 0;
    for (k, ch) in RAMP.iter().enumerate() {
        let from = level_floor(k, max);
        if from > last_floor && from <= max && level(from, max) == k {
            words.push(format!("[{}]{from}", *ch as char));
            last_floor = from;
        }
    }
    let intro = if per > 1 {
        format!(
            "a column is {per} buckets (labelled by its first); calls per cell, log scale, at least:"
        )
    } else {
        "calls per cell, log scale, at least:".to_string()
    };
    wrap(out, &intro, &words, width);
}

/// Writes `intro` and `words` as lines of at most `width` columns: indented by two, continued
/// lines by four, words never split.
fn wrap(out: &mut String, intro: &str, words: &[String], width: usize) {
    let mut line = String::from(" ");
    for w in intro
        .split(' ')
        .map(str::to_string)
        .chain(words.iter().cloned())
    {
        if line.chars().count() + 1 + w.chars().count() > width && !line.trim().is_empty() {
            let _ = writeln!(out, "{line}");
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(&w);
    }
    let _ = writeln!(out, "{line}");
}

/// The ramp level (0..RAMP.len()) of `c >= 1` calls when the fullest cell has `max`.
fn level(c: u64, max: u64) -> usize {
    let top = RAMP.len() - 1;
    if max <= 1 {
        return top;
    }
    let k = ((c as f64).ln() / (max as f64).ln() * top as f64).floor();
    (k.max(0.0) as usize).min(top)
}

/// The character for `c` calls when the fullest cell has `max`.
fn cell(c: u64, max: u64) -> char {
    if c == 0 {
        ' '
    } else {
        RAMP[level(c, max)] as char
    }
}

/// The smallest count drawn at ramp level `k` or above (may exceed `max`).
fn level_floor(k: usize, max: u64) -> u64 {
    if max <= 1 {
        return 1;
    }
    let top = (RAMP.len() - 1) as f64;
    let mut v = ((max as f64).powf(k as f64 / top).ceil() as u64).max(1);
    // Step to the exact threshold despite float rounding.
    while v > 1 && level(v - 1, max) >= k {
        v -= 1;
    }
    while level(v, max) < k {
        v += 1;
    }
    v
}

/// `fsprof show`: histograms (or time-lapse matrices) of the selected operations.
pub fn run(p: &Loaded, c: &ShowConfig, out: &mut String) -> Result<(), Error> {
    if c.by {
        let base = p.layer(c.select.layer.as_deref())?.name.clone();
        let keyed: Vec<&Layer> = p
            .profile
            .layers
            .iter()
            .filter(|l| match profile_store::keyed::parse(&l.name) {
                Some(profile_store::keyed::Keyed::Key { base: b, .. })
                | Some(profile_store::keyed::Keyed::Other { base: b }) => b == base,
                None => false,
            })
            .collect();
        if keyed.is_empty() {
            return Err(Error::input(
                &p.name,
                format!("no per-caller layers of {base} (mount with --by pid|uid|comm)"),
            ));
        }
        for (i, l) in keyed.into_iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let layer = &crate::window::apply(l, p.clock(), &c.window)?;
            let ops = input::select_ops(layer, &c.select.ops, c.select.top, c.style.shares)?;
            out.push_str(&render(
                layer,
                &ops,
                p.clock(),
                c.epochs,
                &c.style,
                &Maxima::default(),
            ));
        }
        return Ok(());
    }
    let layer = &crate::window::apply(p.layer(c.select.layer.as_deref())?, p.clock(), &c.window)?;
    let ops = input::select_ops(layer, &c.select.ops, c.select.top, c.style.shares)?;
    // A window's maximum is not the run's.
    let maxima = if c.window.is_whole() {
        Maxima::of(&p.profile)
    } else {
        Maxima::default()
    };
    out.push_str(&render(layer, &ops, p.clock(), c.epochs, &c.style, &maxima));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_log_scaled() {
        assert_eq!(bar(0, 100, 40, false), "");
        assert_eq!(bar(100, 100, 40, true).len(), 40);
        assert_eq!(bar(100, 100, 40, false).chars().count(), 40);
        // ln(11)/ln(101) ≈ 0.52 of the width.
        assert_eq!(bar(10, 100, 40, true).len(), 21);
        assert!(!bar(1, 1_000_000, 40, false).is_empty());
    }

    #[test]
    fn colour_only_when_asked_or_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        for tty in [false, true] {
            for nc in [None, set, empty] {
                assert!(use_color(ColorMode::Always, tty, nc));
                assert!(!use_color(ColorMode::Never, tty, nc));
            }
        }
        assert!(use_color(ColorMode::Auto, true, None));
        assert!(use_color(ColorMode::Auto, true, empty));
        assert!(!use_color(ColorMode::Auto, true, set));
        assert!(!use_color(ColorMode::Auto, false, None));
        assert!(!use_color(ColorMode::Auto, false, empty));
        assert!(!use_color(ColorMode::Auto, false, set));
    }

    #[test]
    fn shares_past_f64_bounds_are_unknown_not_nan() {
        // A hand-made layer of 1100 buckets: mid-points from bucket 1023 on are infinite.
        let l = crate::testutil::wide_read_layer(0, &[(1020, 1), (1022, 1), (1050, 1)]);
        let ops: Vec<&OpProfile> = l.ops.iter().collect();
        for clock in [Clock(None), Clock(Some(1_000_000_000))] {
            let out = render(
                &l,
                &ops,
                clock,
                false,
                &ShowStyle::default(),
                &Maxima::default(),
            );
            assert!(!out.contains("NaN") && !out.contains("inf"), "{out}");
            let row = |b: &str| {
                out.lines()
                    .find(|r| r.trim_start().starts_with(b))
                    .unwrap_or_else(|| panic!("{out}"))
                    .to_string()
            };
            assert!(row("1050 ").ends_with(" ?"), "{out}");
            assert!(row("1022 ").ends_with(" ?"), "{out}");
        }
    }

    #[test]
    fn matrix_cells() {
        assert_eq!(cell(0, 100), ' ');
        assert_eq!(cell(1, 100), '.');
        assert_eq!(cell(100, 100), '@');
        assert_eq!(cell(1, 1), '@');
        for max in [1u64, 2, 7, 100, 12345] {
            for k in 0..RAMP.len() {
                let f = level_floor(k, max);
                for c in 1..=max {
                    assert_eq!(level(c, max) >= k, c >= f, "k={k} max={max} c={c} f={f}");
                }
            }
        }
    }
}
