//! `fsprof summary`: the table of thesis table 3.1 (operation, count, total cycles, total ms,
//! mean), largest total latency first, as text, CSV or JSON.

use std::fmt::Write as _;
use std::str::FromStr;

use serde::Serialize;

use profile_store::Layer;
use profile_store::views;

use crate::background::{Shares, is_background};
use crate::error::Error;
use crate::input::Loaded;
use crate::maxima::Maxima;
use crate::units::{Clock, fmt_pct};

/// `fsprof summary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    /// The profile.
    pub input: String,
    /// `--layer`.
    pub layer: Option<String>,
    /// Output format.
    pub format: TableFormat,
    /// What the shares of latency are taken of.
    pub shares: Shares,
}

/// Output format of tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableFormat {
    /// Aligned columns for people.
    #[default]
    Text,
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object.
    Json,
}

impl FromStr for TableFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(TableFormat::Text),
            "csv" => Ok(TableFormat::Csv),
            "json" => Ok(TableFormat::Json),
            _ => Err(format!("unknown format '{s}' (text, csv, json)")),
        }
    }
}

/// One row of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Operation name.
    pub op: String,
    /// Calls counted (started).
    pub count: u64,
    /// Total latency of the finished calls, cycles.
    pub total_cycles: u64,
    /// Total latency in milliseconds, when the clock rate is known.
    pub total_ms: Option<f64>,
    /// Mean latency of the finished calls, cycles.
    pub mean_cycles: f64,
    /// Mean latency in microseconds, when the clock rate is known.
    pub mean_us: Option<f64>,
    /// Share of the layer's latency, 0..=1; `None` for a background operation (no caller
    /// waits for it), left out of the shares unless they count background operations.
    pub latency_share: Option<f64>,
    /// Whether no caller waits for this operation (FORGET, RELEASE...).
    pub background: bool,
    /// Estimated p50, p90, p99, p99.9 and maximum latency in cycles, from the buckets
    /// ([`profile_store::views::quantile`]: geometric interpolation within a bucket), none
    /// above the maximum: the slowest request recorded where the profile has it
    /// (`max_recorded`), else at most the slowest bucket's top or what the total allows;
    /// `None` without finished calls.
    pub percentiles_estimated_cycles: Option<[f64; 5]>,
    /// Whether the maximum is the slowest request recorded (exact).
    pub max_recorded: bool,
}

/// The summary of one layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Layer name.
    pub layer: String,
    /// Clock rate used for times, if known.
    pub cycles_per_sec: Option<u64>,
    /// Rows, largest total latency first.
    pub ops: Vec<Row>,
}

/// Builds the summary of `layer`, its shares of latency taken as `shares` says, its maxima as
/// `maxima` records them.
pub fn summarize(layer: &Layer, clock: Clock, shares: Shares, maxima: &Maxima) -> Summary {
    let basis = shares.basis(layer);
    let ops = views::summary(layer, clock.0)
        .into_iter()
        .map(|r| Row {
            percentiles_estimated_cycles: layer
                .op(&r.name)
                .and_then(|o| maxima.percentiles(layer, o)),
            max_recorded: layer.op(&r.name).is_some_and(|o| maxima.is_exact(layer, o)),
            latency_share: shares.counts(&r.name).then(|| {
                if basis == 0 {
                    0.0
                } else {
                    r.total_cycles as f64 / basis as f64
                }
            }),
            background: is_background(&r.name),
            total_ms: r.total_secs.map(|s| s * 1e3),
            mean_us: clock.secs(r.mean_cycles).map(|s| s * 1e6),
            op: r.name,
            count: r.count,
            total_cycles: r.total_cycles,
            mean_cycles: r.mean_cycles,
        })
        .collect();
    Summary {
        layer: layer.name.clone(),
        cycles_per_sec: clock.0,
        ops,
    }
}

/// Renders `s` in `format`.
pub fn render(s: &Summary, format: TableFormat) -> String {
    match format {
        TableFormat::Text => text(s),
        TableFormat::Csv => csv(s),
        TableFormat::Json => {
            let mut j = serde_json::to_string_pretty(s).expect("summary serializes");
            j.push('\n');
            j
        }
    }
}

fn text(s: &Summary) -> String {
    let timed = s.cycles_per_sec.is_some();
    let mut header = vec!["operation", "count", "total cycles"];
    if timed {
        header.push("total ms");
    }
    header.push("mean cycles");
    if timed {
        header.push("mean us");
    }
    header.extend(["p50~", "p99~", "max~"]);
    header.push("share");
    let lat = |c: f64| match s.cycles_per_sec {
        Some(hz) => crate::units::fmt_secs(c / hz as f64),
        None => crate::units::fmt_cycles(c),
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &s.ops {
        let mut row = vec![
            r.op.clone(),
            r.count.to_string(),
            r.total_cycles.to_string(),
        ];
        if timed {
            row.push(format!("{:.2}", r.total_ms.unwrap_or(0.0)));
        }
        row.push(format!("{:.0}", r.mean_cycles));
        if timed {
            row.push(format!("{:.3}", r.mean_us.unwrap_or(0.0)));
        }
        // As show writes shares: '<0.1%' for what would round to zero.
        for i in [0, 2, 4] {
            let exact = if i == 4 && r.max_recorded { "*" } else { "" };
            row.push(
                r.percentiles_estimated_cycles
                    .map_or_else(|| "-".into(), |p| format!("{}{exact}", lat(p[i]))),
            );
        }
        row.push(r.latency_share.map_or("bg".into(), fmt_pct));
        rows.push(row);
    }
    // The total row.
    let count: u128 = s.ops.iter().map(|r| r.count as u128).sum();
    let cycles: u128 = s.ops.iter().map(|r| r.total_cycles as u128).sum();
    let mut total = vec!["total".to_string(), count.to_string(), cycles.to_string()];
    if timed {
        // Folded from +0.0: an empty sum of floats is -0.0, which printed as '-0.00'.
        let ms = s
            .ops
            .iter()
            .filter_map(|r| r.total_ms)
            .fold(0.0, |a, b| a + b);
        total.push(format!("{ms:.2}"));
    }
    total.push(String::new());
    if timed {
        total.push(String::new());
    }
    total.extend([String::new(), String::new(), String::new()]);
    total.push(if s.ops.is_empty() { "0%" } else { "100.0%" }.into());
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows.iter().chain(std::iter::once(&total)) {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "layer {}{}",
        s.layer,
        match s.cycles_per_sec {
            Some(hz) => format!(", {hz} cycles per second"),
            None => ", clock rate unknown: cycles only (--cycles-per-sec)".into(),
        }
    );
    let line = |cells: &[String], out: &mut String| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(l, "{c:<w$}");
            } else {
                let _ = write!(l, "  {c:>w$}");
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    line(&header, &mut out);
    for row in &rows {
        line(row, &mut out);
    }
    line(&total, &mut out);
    let _ = writeln!(
        out,
        "~: estimated from the buckets (geometric interpolation within a bucket; a maximum is at \
         most its slowest bucket's top)"
    );
    if s.ops.iter().any(|r| r.max_recorded) {
        let _ = writeln!(out, "*: the slowest request recorded (--slowest), exact");
    }
    if s.ops.iter().any(|r| r.latency_share.is_none()) {
        let _ = writeln!(
            out,
            "bg: background, no caller waits; not in the shares (--with-background counts it)"
        );
    }
    out
}

fn csv(s: &Summary) -> String {
    let mut out = String::from(
        "layer,operation,count,total_cycles,total_ms,mean_cycles,mean_us,latency_share,\
         p50_est_cycles,p90_est_cycles,p99_est_cycles,p999_est_cycles,max_est_cycles\n",
    );
    let opt = |v: Option<f64>, prec: usize| v.map_or(String::new(), |v| format!("{v:.prec$}"));
    for r in &s.ops {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.3},{},{},{}",
            csv_field(&s.layer),
            r.op,
            r.count,
            r.total_cycles,
            opt(r.total_ms, 6),
            r.mean_cycles,
            opt(r.mean_us, 6),
            r.latency_share.map_or(String::new(), |v| format!("{v:.6}")),
            match r.percentiles_estimated_cycles {
                Some(p) => p.map(|v| format!("{v:.0}")).join(","),
                None => ",,,,".into(),
            }
        );
    }
    out
}

/// Quotes a CSV field when it needs it.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `fsprof summary`: the table of one layer.
///
/// Without `--layer`, the text table is shown for every layer that is not a per-caller one
/// (`user`, `fuse`, `lower`, the branches), and the per-caller layers (`fuse@comm:tar`, from
/// `--by`) are listed by name after them. CSV and JSON hold one table: the first layer's, with
/// a warning naming the others and `--layer`.
pub fn run(p: &Loaded, c: &SummaryConfig, out: &mut String) -> Result<(), Error> {
    let layer = p.layer(c.layer.as_deref())?;
    let maxima = Maxima::of(&p.profile);
    let others: Vec<&str> = p
        .profile
        .layers
        .iter()
        .map(|l| l.name.as_str())
        .filter(|n| *n != layer.name)
        .collect();
    if c.layer.is_some() || others.is_empty() {
        out.push_str(&render(
            &summarize(layer, p.clock(), c.shares, &maxima),
            c.format,
        ));
        return Ok(());
    }
    if c.format != TableFormat::Text {
        log::warn!(
            "{}: the table is of layer {}; the profile also has {} (--layer NAME picks one)",
            p.name,
            layer.name,
            others.join(", ")
        );
        out.push_str(&render(
            &summarize(layer, p.clock(), c.shares, &maxima),
            c.format,
        ));
        return Ok(());
    }
    let (keyed, mut plain): (Vec<&Layer>, Vec<&Layer>) = p
        .profile
        .layers
        .iter()
        .partition(|l| profile_store::keyed::is_per_caller(&l.name));
    if plain.is_empty() {
        plain.push(layer);
    }
    for (i, l) in plain.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render(
            &summarize(l, p.clock(), c.shares, &maxima),
            c.format,
        ));
    }
    if !keyed.is_empty() {
        let names: Vec<&str> = keyed.iter().map(|l| l.name.as_str()).collect();
        let _ = writeln!(
            out,
            "\n{} per-caller layer{} (--layer NAME shows one): {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            crate::error::printable(names.join(" "))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use profile_store::{OpProfile, Resolution};

    fn layer() -> Layer {
        let mut l = Layer::new("fuse", Resolution::ONE);
        for (name, count, total, b) in [("OP_LOOKUP", 10, 1000, 6), ("OP_READ", 2, 5000, 11)] {
            let mut o = OpProfile::new(name, 64, 1);
            o.count = count;
            o.total = total;
            o.epochs[0][b] = count;
            l.ops.push(o);
        }
        l
    }

    #[test]
    fn sorted_by_latency_with_times() {
        let s = summarize(
            &layer(),
            Clock(Some(1_000_000)),
            Shares::default(),
            &Maxima::default(),
        );
        assert_eq!(s.ops[0].op, "OP_READ");
        assert_eq!(s.ops[0].total_ms, Some(5.0));
        assert_eq!(s.ops[0].mean_us, Some(2500.0));
        let t = render(&s, TableFormat::Text);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[5].contains("estimated"));
        assert!(lines[1].starts_with("operation"));
        assert!(lines[2].starts_with("OP_READ"));
        assert!(lines[4].starts_with("total") && lines[4].contains("6000"));
        let c = render(&s, TableFormat::Csv);
        // Then the estimated p50..max: 2048 · 2^f within bucket 11, up to the most the slower
        // call can have taken: the total less the other's least, 5000 - 2048.
        assert_eq!(
            c.lines().nth(1).unwrap(),
            "fuse,OP_READ,2,5000,5.000000,2500.000,2500.000000,0.833333,2896,2952,2952,2952,2952"
        );
        let j: serde_json::Value = serde_json::from_str(&render(&s, TableFormat::Json)).unwrap();
        assert_eq!(j["ops"][1]["op"], "OP_LOOKUP");
    }

    #[test]
    fn without_clock_no_time_columns() {
        let s = summarize(&layer(), Clock(None), Shares::default(), &Maxima::default());
        let t = render(&s, TableFormat::Text);
        assert!(!t.contains("total ms"));
        assert!(t.contains("cycles only"));
        assert!(
            render(&s, TableFormat::Csv)
                .lines()
                .nth(1)
                .unwrap()
                .contains("5000,,2500.000,,")
        );
    }
}
