//! The subcommands that compare or convert profiles: `compare`, `diff`, `plot`, `export`,
//! `merge`.

use std::path::PathBuf;

use clap::Args;

use super::args::{Context, SelectArgs, WindowArgs, non_negative, percent};
use tools::compare::{CompareConfig, GroupConfig, METHODS_HELP, Method, Methods};
use tools::diff::{DiffCommand, DiffConfig};
use tools::export::{ExportConfig, ExportFormat};
use tools::plot::{PlotConfig, PlotKind};
use tools::summary::TableFormat;
use tools::{Command, Error};

/// Score each operation's difference between two profiles, D from 0 (same) to 100
/// (different).
#[derive(Args, Debug)]
#[command(after_help = METHODS_HELP)]
pub struct CompareArgs {
    /// Profile A, the reference (scores are normalized by A).
    #[arg(value_name = "A")]
    a: String,
    /// Profile B (with --layers: optional, the layers are then both taken from A).
    #[arg(value_name = "B", required_unless_present = "layers")]
    b: Option<String>,
    /// Compare two layers of one profile, the first as reference: fuse,lower (the
    /// profiler's own cost), branch0,branch1 (how evenly RAIF spreads the load), or
    /// user,fuse of `fsprof profile --user` (what the kernel does between the program and
    /// the daemon: the user layer's calls are then summed per FUSE operation they lead to,
    /// read, pread and fread under OP_READ, stat and statx under OP_GETATTR...), or
    /// user,syscall (the C library against the kernel, call for call: each C-library
    /// function under the system call it makes, glibc's stat, lstat and fstat under
    /// SYS_FSTATAT, open under SYS_OPENAT), or syscall,fuse (what the kernel's caches
    /// served: the system calls summed per FUSE operation).
    #[arg(long, value_name = "LAYER_A,LAYER_B", conflicts_with = "layer")]
    layers: Option<String>,
    #[command(flatten)]
    select: SelectArgs,
    /// Methods: totops, totlat, chisquare, emd, groupops, grouplat, a comma-separated list,
    /// or all.
    #[arg(long, default_value = "all", value_name = "METHOD")]
    method: Methods,
    #[command(flatten)]
    group: GroupArgs,
    /// Output format: text, csv, json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl CompareArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let CompareArgs {
            a,
            b,
            layers,
            select,
            method,
            group,
            format,
        } = self;
        Ok(Command::Compare(CompareConfig {
            b: b.unwrap_or_else(|| a.clone()),
            a,
            layers: match layers {
                None => None,
                Some(l) => match l.split_once(',') {
                    Some((x, y)) if !x.is_empty() && !y.is_empty() && !y.contains(',') => {
                        Some((x.to_string(), y.to_string()))
                    }
                    _ => {
                        return Err(Error::usage(
                            format!("--layers {l}"),
                            "two layer names separated by a comma, e.g. fuse,lower",
                        ));
                    }
                },
            },
            select: select.into_selection(),
            methods: method.0,
            group: group.into_config()?,
            format,
            shares: cx.shares,
        }))
    }
}

/// The few operations worth a look between two profiles, each with what changed (calls,
/// latency, new, vanished or moved peaks), the most latency at stake first.
///
/// Operations below --threshold of their layer's calls and latency in both profiles are
/// dropped, as are those with no named change and a score below --min-score. The others are
/// weighed by the time at stake: the latency of the calls that differ (bucket by bucket, the
/// difference of the calls times the bucket's mid-point). Those below --min-stake (1% of the
/// layer's time) are minor and left out, so that a peak of one or two calls, which scores
/// D=100 as readily as a real change, does not crowd the list; the rest are listed by it. D
/// alone saturates at 100 for large differences and would rank a 3.5 ms operation above an
/// 88 ms one.
#[derive(Args, Debug)]
#[command(after_help = METHODS_HELP)]
pub struct DiffArgs {
    /// Profile A (before).
    #[arg(value_name = "A")]
    a: String,
    /// Profile B (after).
    #[arg(value_name = "B")]
    b: String,
    /// Layer to compare (default: every layer both profiles have).
    #[arg(long)]
    layer: Option<String>,
    /// The method whose score D names the operations whose shape changed.
    #[arg(long, default_value = "grouplat", value_name = "METHOD")]
    method: Method,
    /// Insignificance threshold, percent of the layer's calls and of its latency.
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    threshold: f64,
    /// Changes of calls, latency or a peak's share are named from this many percent.
    #[arg(long, default_value_t = 10.0, value_name = "PERCENT")]
    change: f64,
    /// Operations with no named change are listed from this score.
    #[arg(long, default_value_t = 10.0, value_name = "D")]
    min_score: f64,
    /// Operations are listed from this time at stake (the latency of the calls that differ),
    /// percent of the layer's time: a peak of one or two calls is minor.
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    min_stake: f64,
    /// List at most this many operations.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// Minimum peak prominence, log2 units.
    #[arg(long, default_value_t = 1.0, value_name = "LOG2")]
    prominence: f64,
    /// Peaks with less than this percent of an operation's calls are left out (a stray
    /// call in an empty bucket is not a new peak).
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    min_peak_share: f64,
    /// Output format: text, csv (one line per operation listed), json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl DiffArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let DiffArgs {
            a,
            b,
            layer,
            method,
            threshold,
            change,
            min_score,
            min_stake,
            top,
            prominence,
            min_peak_share,
            format,
        } = self;
        Ok(Command::Diff(DiffCommand {
            a,
            b,
            layer,
            diff: DiffConfig {
                method,
                threshold: percent("--threshold", threshold)?,
                change: non_negative("--change", change)?,
                min_score: non_negative("--min-score", min_score)?,
                min_stake: percent("--min-stake", min_stake)?,
                group: GroupConfig {
                    prominence: non_negative("--prominence", prominence)?,
                    min_peak_share: percent("--min-peak-share", min_peak_share)?,
                    ..GroupConfig::default()
                },
                shares: cx.shares,
            },
            top,
            format,
        }))
    }
}

/// Draw figures, written as SVG, PNG or PDF by the output's extension.
///
/// Kinds: histogram (calls per bucket, log y, bucket numbers on top and each bucket's lower
/// bound below, one panel per operation); latency (estimated latency per bucket, calls x
/// mid-point); heatmap (time-lapse, epoch x bucket, one operation); overlay (one operation
/// of two profiles). A heat map or an overlay takes at most one --op.
#[derive(Args, Debug)]
pub struct PlotArgs {
    /// One profile, or two for an overlay.
    #[arg(value_name = "PROFILE", required = true, num_args = 1..=2)]
    inputs: Vec<String>,
    /// Figure: histogram, latency, heatmap, overlay, or stack (one operation at every level
    /// of the stack, as `fsprof stack` lists them; --op names it) (default: histogram, or
    /// overlay for two profiles).
    #[arg(long, value_name = "KIND")]
    kind: Option<PlotKind>,
    #[command(flatten)]
    select: SelectArgs,
    /// Output file: .svg, .png or .pdf; '-' for SVG on standard output. Any other name is
    /// refused. PNG and PDF are made by rsvg-convert (Debian package librsvg2-bin), or by
    /// fsprof itself when built with `--features native-plot`.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Figure title.
    #[arg(long)]
    title: Option<String>,
    #[command(flatten)]
    window: WindowArgs,
}

impl PlotArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let PlotArgs {
            inputs,
            kind,
            select,
            output,
            title,
            window,
        } = self;
        Ok(Command::Plot(PlotConfig {
            inputs,
            kind,
            select: select.into_selection(),
            output,
            title,
            window: window.into_window(),
            shares: cx.shares,
        }))
    }
}

/// Convert a profile: json, text (the formats of docs/format.md), csv (one row per non-empty
/// bucket), prometheus (text exposition, one histogram per operation; needs the clock rate).
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The profile.
    #[arg(value_name = "PROFILE")]
    input: String,
    /// Output format: json, csv, text, prometheus.
    #[arg(long, value_name = "FORMAT")]
    format: ExportFormat,
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl ExportArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let ExportArgs {
            input,
            format,
            output,
        } = self;
        Ok(Command::Export(ExportConfig {
            input,
            format,
            output,
        }))
    }
}

/// Sum profiles, e.g. of many machines: same layer and operation are added bucket by
/// bucket (layers of one name must have the same resolution). Profiles of another clock
/// rate are converted to the first one's, each call's bucket then known within one (said in
/// the report). Sections (hot files, slow records) are per machine and left out.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The profiles: files, mount points, URLs of `--metrics` endpoints (http://HOST:PORT/metrics)
    /// or '-'. At least two.
    #[arg(value_name = "PROFILE", num_args = 2.., required = true)]
    inputs: Vec<String>,
    /// Output file (JSON if it ends in .json, else text; default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl MergeArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let MergeArgs { inputs, output } = self;
        Ok(Command::Merge(tools::merge::MergeConfig { inputs, output }))
    }
}

#[derive(Args, Debug)]
pub struct GroupArgs {
    /// GROUP methods: an operation under this percent of its layer's calls and latency in both
    /// profiles is insignificant (D = 0).
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    threshold: f64,
    /// Minimum peak prominence, log2 units.
    #[arg(long, default_value_t = 1.0, value_name = "LOG2")]
    prominence: f64,
    /// GROUP methods: peaks with less than this percent of an operation's calls are left out
    /// (a stray call in an empty bucket is not a new peak).
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    min_peak_share: f64,
}

impl GroupArgs {
    pub fn into_config(self) -> Result<GroupConfig, Error> {
        Ok(GroupConfig {
            insignificant_below: percent("--threshold", self.threshold)?,
            prominence: non_negative("--prominence", self.prominence)?,
            min_peak_share: percent("--min-peak-share", self.min_peak_share)?,
            ..GroupConfig::default()
        })
    }
}
