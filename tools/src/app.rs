//! The commands of `fsprof` as checked configurations, and [`run`], which carries one out.
//!
//! The binary turns its flags into a [`Command`]; everything after that (reading inputs,
//! choosing layers and operations, rendering, writing files) happens here, so it is tested
//! without a process.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

use serde::Serialize;

use profile_store::{Layer, OpProfile};

use crate::check::{self, Severity};
use crate::compare::{self, GroupConfig, Method, Pair, Score};
use crate::diff::{self, DiffConfig, DiffReport};
use crate::error::Error;
use crate::export::{self, ExportFormat};
use crate::hist::Histogram;
use crate::input::{self, Loaded};
use crate::peaks::{self, Peak};
use crate::plot::{self, PlotKind};
use crate::show::{self, ShowStyle};
use crate::summary::{self, TableFormat};
use crate::table::Table;
use crate::units::{Buckets, Clock, fmt_cycles, fmt_pct};

/// Settings every command shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Common {
    /// `--cycles-per-sec`: the clock rate for profiles without one (replaces a recorded one).
    pub cycles_per_sec: Option<u64>,
}

/// Which operations of a layer to look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `--layer`: a layer name; `None` for the primary layer (or, for two profiles, every layer
    /// both have).
    pub layer: Option<String>,
    /// `--op`: operation names (normalized to `OP_...`); empty for all.
    pub ops: Vec<String>,
    /// `--top`: at most this many operations, largest total latency first.
    pub top: Option<usize>,
}

/// `fsprof show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowConfig {
    /// The profile.
    pub input: String,
    /// Layer and operations.
    pub select: Selection,
    /// Show the time-lapse matrix instead of the histogram.
    pub epochs: bool,
    /// Width, colour, characters.
    pub style: ShowStyle,
}

/// `fsprof summary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    /// The profile.
    pub input: String,
    /// `--layer`.
    pub layer: Option<String>,
    /// Output format.
    pub format: TableFormat,
}

/// `fsprof check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckConfig {
    /// The profiles.
    pub inputs: Vec<String>,
    /// Calls that may have been in flight when the snapshot was taken. Default 0.
    pub in_flight: u64,
}

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
}

/// `fsprof compare`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareConfig {
    /// Profile A (the reference).
    pub a: String,
    /// Profile B.
    pub b: String,
    /// Layer and operations.
    pub select: Selection,
    /// Methods to run.
    pub methods: Vec<Method>,
    /// Settings of the GROUP methods.
    pub group: GroupConfig,
    /// Output format.
    pub format: TableFormat,
}

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

/// `fsprof plot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotConfig {
    /// One profile, or two for an overlay.
    pub inputs: Vec<String>,
    /// The figure; `None` for a histogram of one profile or an overlay of two.
    pub kind: Option<PlotKind>,
    /// Layer and operations.
    pub select: Selection,
    /// Output file: `.svg`, or `.png` (converted with `rsvg-convert`), or `-` for SVG on
    /// standard output.
    pub output: PathBuf,
    /// Figure title; a default names the input and layer.
    pub title: Option<String>,
}

/// `fsprof export`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// The profile.
    pub input: String,
    /// Output format.
    pub format: ExportFormat,
    /// Output file; standard output when `None` or `-`.
    pub output: Option<PathBuf>,
}

/// One command, checked and ready to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Terminal histograms.
    Show(ShowConfig),
    /// The summary table.
    Summary(SummaryConfig),
    /// Consistency check.
    Check(CheckConfig),
    /// Peaks per operation.
    Peaks(PeaksConfig),
    /// Scores per operation between two profiles.
    Compare(CompareConfig),
    /// The operations worth a look between two profiles.
    Diff(DiffCommand),
    /// SVG figures.
    Plot(PlotConfig),
    /// Format conversion.
    Export(ExportConfig),
    /// Mount a directory with profiling, run a workload, show the profile.
    Profile(crate::live::ProfileConfig),
}

impl Command {
    /// The profiles the command reads, as given (`-` for standard input).
    pub fn inputs(&self) -> Vec<&str> {
        match self {
            Command::Show(c) => vec![c.input.as_str()],
            Command::Summary(c) => vec![c.input.as_str()],
            Command::Check(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Peaks(c) => vec![c.input.as_str()],
            Command::Compare(c) => vec![c.a.as_str(), c.b.as_str()],
            Command::Diff(c) => vec![c.a.as_str(), c.b.as_str()],
            Command::Plot(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Export(c) => vec![c.input.as_str()],
            Command::Profile(_) => Vec::new(),
        }
    }
}

/// Refuses standard input named more than once: it can be read only once, and the second
/// reading would see an empty input.
pub fn check_inputs(cmd: &Command) -> Result<(), Error> {
    let n = cmd.inputs().iter().filter(|&&s| s == "-").count();
    if n > 1 {
        return Err(Error::usage(
            "-",
            format!(
                "standard input given {n} times, but it can be read only once (save a profile to a file)"
            ),
        ));
    }
    Ok(())
}

/// Runs `cmd`, appending what goes to standard output to `out` (also when it fails: `check`
/// lists its problems, then fails).
pub fn run(cmd: &Command, common: &Common, out: &mut String) -> Result<(), Error> {
    check_inputs(cmd)?;
    let load = |spec: &str| input::load(spec, common.cycles_per_sec);
    match cmd {
        Command::Profile(c) => crate::live::profile(c, out),
        Command::Show(c) => {
            let p = load(&c.input)?;
            let layer = p.layer(c.select.layer.as_deref())?;
            let ops = input::select_ops(layer, &c.select.ops, c.select.top)?;
            out.push_str(&show::render(layer, &ops, p.clock(), c.epochs, &c.style));
            Ok(())
        }
        Command::Summary(c) => {
            let p = load(&c.input)?;
            let layer = p.layer(c.layer.as_deref())?;
            let s = summary::summarize(layer, p.clock());
            out.push_str(&summary::render(&s, c.format));
            Ok(())
        }
        Command::Check(c) => run_check(c, common, out),
        Command::Peaks(c) => {
            let p = load(&c.input)?;
            let layer = p.layer(c.select.layer.as_deref())?;
            let ops = input::select_ops(layer, &c.select.ops, c.select.top)?;
            render_peaks(layer, &ops, p.clock(), c, out);
            Ok(())
        }
        Command::Compare(c) => {
            let (a, b) = (load(&c.a)?, load(&c.b)?);
            run_compare(&a, &b, c, out)
        }
        Command::Diff(c) => {
            let (a, b) = (load(&c.a)?, load(&c.b)?);
            run_diff(&a, &b, c, out)
        }
        Command::Plot(c) => {
            let loaded = c
                .inputs
                .iter()
                .map(|s| load(s))
                .collect::<Result<Vec<_>, _>>()?;
            let svg = plot_svg(&loaded, c)?;
            write_figure(&c.output, &svg, out)
        }
        Command::Export(c) => {
            let p = load(&c.input)?;
            let text = export::export(&p.profile, c.format, &p.name)?;
            match &c.output {
                Some(path) if path != Path::new("-") => std::fs::write(path, text)
                    .map_err(|e| Error::output(path.display().to_string(), e)),
                _ => {
                    out.push_str(&text);
                    Ok(())
                }
            }
        }
    }
}

fn run_check(c: &CheckConfig, common: &Common, out: &mut String) -> Result<(), Error> {
    let mut problems = 0;
    let mut failed = Vec::new();
    for spec in &c.inputs {
        let p = input::load(spec, common.cycles_per_sec)?;
        let findings = check::check(&p.profile, c.in_flight);
        let mut mine = 0;
        for f in &findings {
            match f.severity {
                Severity::Problem => {
                    mine += 1;
                    let _ = writeln!(out, "{spec}: {}", f.message);
                }
                Severity::Warning => {
                    let _ = writeln!(out, "{spec}: warning: {}", f.message);
                }
            }
        }
        if mine == 0 {
            let layers = &p.profile.layers;
            let ops: usize = layers.iter().map(|l| l.ops.len()).sum();
            let calls: u128 = layers.iter().map(|l| l.total_count() as u128).sum();
            let _ = writeln!(
                out,
                "{spec}: ok ({} layer{}, {ops} operations, {calls} calls)",
                layers.len(),
                if layers.len() == 1 { "" } else { "s" }
            );
        } else {
            failed.push(spec.clone());
            problems += mine;
        }
    }
    if problems > 0 {
        return Err(Error::CheckFailed {
            paths: failed,
            problems,
        });
    }
    Ok(())
}

#[derive(Serialize)]
struct OpPeaks<'a> {
    op: &'a str,
    calls: u128,
    peaks: Vec<Peak>,
}

fn render_peaks(
    layer: &Layer,
    ops: &[&OpProfile],
    clock: Clock,
    c: &PeaksConfig,
    out: &mut String,
) {
    let geo = Buckets::of(layer);
    let found: Vec<OpPeaks> = ops
        .iter()
        .map(|o| {
            let h = Histogram::of(o, geo);
            OpPeaks {
                op: &o.name,
                calls: h.total(),
                peaks: peaks::find_significant(&h, c.prominence, c.min_share),
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
            for o in &found {
                let n = o.peaks.len();
                let _ = writeln!(
                    out,
                    "\n{}: {} finished calls, {} peak{}",
                    o.op,
                    o.calls,
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

/// The layers to compare between two profiles: the one named, or every layer both have, or
/// (when they share no name, e.g. a profile of the original tools and one of fsprof-fuse) the
/// primary layers. Layers of different resolution cannot be compared.
fn layer_pairs<'p>(
    a: &'p Loaded,
    b: &'p Loaded,
    name: Option<&str>,
) -> Result<Vec<(&'p Layer, &'p Layer)>, Error> {
    let pairs: Vec<(&Layer, &Layer)> = match name {
        Some(_) => vec![(a.layer(name)?, b.layer(name)?)],
        None => {
            let common: Vec<(&Layer, &Layer)> = a
                .profile
                .layers
                .iter()
                .filter_map(|la| b.profile.layer(&la.name).map(|lb| (la, lb)))
                .collect();
            if common.is_empty() {
                vec![(a.layer(None)?, b.layer(None)?)]
            } else {
                common
            }
        }
    };
    for (la, lb) in &pairs {
        if la.resolution != lb.resolution {
            return Err(Error::usage(
                format!("layer {}", la.name),
                format!(
                    "{} has resolution {} and {} resolution {}: their buckets do not line up",
                    a.name,
                    la.resolution.get(),
                    b.name,
                    lb.resolution.get()
                ),
            ));
        }
    }
    Ok(pairs)
}

/// The union of the operations of two layers, largest total latency (of either) first.
fn union_ops(la: &Layer, lb: &Layer, wanted: &[String]) -> Result<Vec<String>, Error> {
    for w in wanted {
        if la.op(w).is_none() && lb.op(w).is_none() {
            return Err(Error::usage(
                format!("--op {w}"),
                format!("no such operation in layer {} of either profile", la.name),
            ));
        }
    }
    let mut names: Vec<String> = la
        .ops
        .iter()
        .chain(&lb.ops)
        .map(|o| o.name.clone())
        .filter(|n| wanted.is_empty() || wanted.contains(n))
        .collect();
    names.sort_unstable();
    names.dedup();
    let key = |n: &str| {
        la.op(n)
            .map_or(0, |o| o.total)
            .max(lb.op(n).map_or(0, |o| o.total))
    };
    names.sort_by(|x, y| {
        key(y)
            .cmp(&key(x))
            .then_with(|| profile_store::ops::listing_order(x, y))
    });
    Ok(names)
}

/// The larger of an operation's shares of its layer's calls and latency.
fn weight(l: &Layer, name: &str) -> f64 {
    let Some(o) = l.op(name) else { return 0.0 };
    let part = |x: f64, all: f64| if all == 0.0 { 0.0 } else { x / all };
    part(o.count as f64, l.total_count() as f64).max(part(o.total as f64, l.total_latency() as f64))
}

fn pair_of(la: &Layer, lb: &Layer, name: &str) -> Pair {
    let geo = |l: &Layer| Buckets::of(l);
    let h = |l: &Layer| {
        l.op(name)
            .map_or_else(|| Histogram::empty(geo(l)), |o| Histogram::of(o, geo(l)))
    };
    let mut pair = Pair::new(h(la), h(lb));
    pair.weight_a = weight(la, name);
    pair.weight_b = weight(lb, name);
    pair
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

fn run_compare(a: &Loaded, b: &Loaded, c: &CompareConfig, out: &mut String) -> Result<(), Error> {
    let mut layers = Vec::new();
    for (la, lb) in layer_pairs(a, b, c.select.layer.as_deref())? {
        let mut names = union_ops(la, lb, &c.select.ops)?;
        if let Some(n) = c.select.top {
            names.truncate(n);
        }
        let ops = names
            .into_iter()
            .map(|name| {
                let pair = pair_of(la, lb, &name);
                OpScores {
                    calls_a: pair.a.total(),
                    calls_b: pair.b.total(),
                    scores: c
                        .methods
                        .iter()
                        .map(|&m| compare::score(m, &pair, &c.group))
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
            let doc = serde_json::json!({ "a": a.name, "b": b.name, "layers": layers });
            out.push_str(&serde_json::to_string_pretty(&doc).expect("scores serialize"));
            out.push('\n');
        }
        TableFormat::Csv => {
            out.push_str("layer,operation,calls_a,calls_b,method,d,decided_by\n");
            for l in &layers {
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
        TableFormat::Text => {
            let _ = writeln!(out, "A: {}\nB: {}", a.name, b.name);
            let _ = writeln!(
                out,
                "A, B: calls in each; D: 0 = same .. 100 = different (fsprof compare --help)"
            );
            for l in &layers {
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
                if !decided.is_empty() {
                    let _ = writeln!(out, "groupops/grouplat decided by:");
                    let w = decided.iter().map(|(op, _)| op.len()).max().unwrap_or(0);
                    for (op, why) in decided {
                        let _ = writeln!(out, "  {op:<w$}  {why}");
                    }
                }
            }
        }
    }
    Ok(())
}

fn run_diff(a: &Loaded, b: &Loaded, c: &DiffCommand, out: &mut String) -> Result<(), Error> {
    let mut reports: Vec<(String, DiffReport)> = Vec::new();
    for (la, lb) in layer_pairs(a, b, c.layer.as_deref())? {
        reports.push((la.name.clone(), diff::diff(la, lb, &c.diff)));
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
                        f.reasons.iter().map(|x| diff::describe(x, clock)).collect();
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
                diff::render(r, clock, c.top, out);
            }
        }
    }
    Ok(())
}

/// The operation a single-operation figure shows: the first `--op`, or the one with the
/// largest total latency.
fn single_op<'l>(layer: &'l Layer, select: &Selection) -> Result<Option<&'l OpProfile>, Error> {
    let ops = input::select_ops(layer, &select.ops, Some(1))?;
    Ok(match select.ops.first() {
        Some(name) => layer.op(name),
        None => ops.first().copied(),
    })
}

/// Draws the figure `c` asks for.
pub fn plot_svg(loaded: &[Loaded], c: &PlotConfig) -> Result<String, Error> {
    let kind = c.kind.unwrap_or(if loaded.len() == 2 {
        PlotKind::Overlay
    } else {
        PlotKind::Histogram
    });
    match (kind, loaded.len()) {
        (PlotKind::Overlay, 2) => {}
        (PlotKind::Overlay, _) => {
            return Err(Error::usage("plot --kind overlay", "needs two profiles"));
        }
        (_, 1) => {}
        (k, _) => {
            return Err(Error::usage(
                format!("plot --kind {}", kind_name(k)),
                "takes one profile (two make an overlay)",
            ));
        }
    }
    let a = &loaded[0];
    let layer = a.layer(c.select.layer.as_deref())?;
    let clock = a.clock();
    let default_title = format!("{} (layer {})", shorten(file_name(&a.name), 60), layer.name);
    Ok(match kind {
        PlotKind::Histogram | PlotKind::Latency => {
            let ops = input::select_ops(layer, &c.select.ops, c.select.top)?;
            let title = c.title.clone().unwrap_or(default_title);
            if kind == PlotKind::Histogram {
                plot::histogram(layer, &ops, clock, &title)
            } else {
                plot::latency(layer, &ops, clock, &title)
            }
        }
        PlotKind::Heatmap => {
            let op = single_op(layer, &c.select)?.ok_or_else(|| {
                Error::usage(
                    "plot --kind heatmap",
                    format!("{}: layer {} has no operation", a.name, layer.name),
                )
            })?;
            let title = c
                .title
                .clone()
                .unwrap_or(format!("{default_title}: time-lapse"));
            plot::heatmap(layer, op, clock, &title)
        }
        PlotKind::Overlay => {
            let b = &loaded[1];
            let (la, lb) = layer_pairs(a, b, c.select.layer.as_deref())?[0];
            let name = match c.select.ops.first() {
                Some(n) => {
                    if la.op(n).is_none() && lb.op(n).is_none() {
                        return Err(Error::usage(
                            format!("--op {n}"),
                            "no such operation in either profile",
                        ));
                    }
                    n.clone()
                }
                None => union_ops(la, lb, &[])?.into_iter().next().ok_or_else(|| {
                    Error::usage("plot --kind overlay", "neither profile has an operation")
                })?,
            };
            let clock = if clock.known() { clock } else { b.clock() };
            let (name_a, name_b) = plot_names(&a.name, &b.name);
            let title = c
                .title
                .clone()
                .unwrap_or(format!("{name}: {name_a} vs {name_b}"));
            plot::overlay(
                la,
                la.op(&name),
                &name_a,
                lb,
                lb.op(&name),
                &name_b,
                clock,
                &title,
            )
        }
    })
}

/// The last component of a profile's name (a path, a mount point or `-`).
fn file_name(name: &str) -> &str {
    std::path::Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(name)
}

/// At most `max` characters of `s`, the middle replaced by `…` when it is longer.
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let head: String = s.chars().take(keep / 2).collect();
    let tail: String = s.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}…{tail}")
}

/// How a figure names two profiles: by file name, unless both have the same one; at most 40
/// characters each, so the title and legend stay inside the figure.
fn plot_names(a: &str, b: &str) -> (String, String) {
    let (fa, fb) = (file_name(a), file_name(b));
    let (a, b) = if fa != fb { (fa, fb) } else { (a, b) };
    (shorten(a, 40), shorten(b, 40))
}

fn kind_name(k: PlotKind) -> &'static str {
    match k {
        PlotKind::Histogram => "histogram",
        PlotKind::Latency => "latency",
        PlotKind::Heatmap => "heatmap",
        PlotKind::Overlay => "overlay",
    }
}

/// Writes an SVG to `path`, converting it to PNG with `rsvg-convert` when the name ends in
/// `.png`; `-` appends the SVG to `out`.
fn write_figure(path: &Path, svg: &str, out: &mut String) -> Result<(), Error> {
    let shown = path.display().to_string();
    if path == Path::new("-") {
        out.push_str(svg);
        return Ok(());
    }
    let png = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return std::fs::write(path, svg).map_err(|e| Error::output(shown, e));
    }
    let mut child = Process::new("rsvg-convert")
        .args(["--format", "png", "--background-color", "white", "--output"])
        .arg(path)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::output(
                &shown,
                format!("PNG needs rsvg-convert (Debian: librsvg2-bin), which did not start: {e}; write .svg instead"),
            )
        })?;
    let write_result = child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(svg.as_bytes());
    let result = child
        .wait_with_output()
        .map_err(|e| Error::output(&shown, e))?;
    if !result.status.success() || write_result.is_err() {
        let msg = String::from_utf8_lossy(&result.stderr);
        return Err(Error::output(
            shown,
            format!("rsvg-convert failed: {}", msg.trim()),
        ));
    }
    log::info!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_name_profiles_by_file_and_keep_names_short() {
        assert_eq!(
            plot_names("/srv/a/before.fsprof", "/srv/b/after.fsprof"),
            ("before.fsprof".to_string(), "after.fsprof".to_string())
        );
        // Same file name: the paths tell them apart.
        assert_eq!(
            plot_names("/x/p.fsprof", "/y/p.fsprof"),
            ("/x/p.fsprof".to_string(), "/y/p.fsprof".to_string())
        );
        let long = format!("/{}/p.fsprof", "d".repeat(100));
        let (a, _) = plot_names(&long, "/y/p.fsprof");
        assert_eq!(a.chars().count(), 40);
        assert!(a.starts_with("/ddd") && a.ends_with("p.fsprof") && a.contains('…'));
        assert_eq!(shorten("short", 40), "short");
        assert_eq!(file_name("-"), "-");
    }
}
