//! The commands of `fsprof` as checked configurations, and [`run`], which carries one out.
//!
//! The binary turns its flags into a [`Command`]; everything after that (reading inputs,
//! choosing layers and operations, rendering, writing files) happens here, so it is tested
//! without a process.

use std::io::Write;
use std::path::PathBuf;

use crate::background::Shares;
use crate::compare::{GroupConfig, Method};
use crate::diff::DiffConfig;
use crate::error::Error;
use crate::export::ExportFormat;
use crate::input;
use crate::plot::PlotKind;
use crate::show::ShowStyle;
use crate::summary::TableFormat;
use crate::{check, compare, diff, export, peaks, plot, show, summary};

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
    /// `--from`, `--to`, `--trim`.
    pub window: crate::window::Window,
    /// Width, colour, characters.
    pub style: ShowStyle,
    /// Show the per-key layers of the layer (`fuse@uid:1000`...) instead of the layer.
    pub by: bool,
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
    /// What the shares of latency are taken of.
    pub shares: Shares,
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
    /// Output file: `.svg`, `.png` or `.pdf` (by its extension), or `-` for SVG on standard
    /// output.
    pub output: PathBuf,
    /// Figure title; a default names the input and layer.
    pub title: Option<String>,
    /// `--from`, `--to`, `--trim` (for one profile).
    pub window: crate::window::Window,
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
    Profile(crate::profile::ProfileConfig),
    /// The root cause of an operation's peaks (inner-call breakdown).
    Why(crate::why::WhyConfig),
    /// A mount's slow-operation log.
    Slow(crate::slow::SlowConfig),
    /// The hottest files.
    Files(crate::files::FilesConfig),
    /// Run a program under the preload library and show its user-level profile.
    Run(crate::user_run::RunConfig),
    /// List a trace like strace.
    TraceShow(crate::trace::TraceShowConfig),
    /// Horikawa's measures of a trace.
    TraceStats(crate::trace::TraceStatsConfig),
    /// Re-execute a trace against another directory.
    Replay(crate::replay::ReplayConfig),
    /// Sum profiles (of many machines).
    Merge(crate::merge::MergeConfig),
    /// A live view of a mount or an endpoint.
    Top(crate::top::TopConfig),
}

impl Command {
    /// The profiles the command reads, as given (`-` for standard input).
    pub fn inputs(&self) -> Vec<&str> {
        match self {
            Command::Show(c) => vec![c.input.as_str()],
            Command::Summary(c) => vec![c.input.as_str()],
            Command::Check(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Peaks(c) => vec![c.input.as_str()],
            Command::Compare(c) if c.a == c.b && c.layers.is_some() => vec![c.a.as_str()],
            Command::Compare(c) => vec![c.a.as_str(), c.b.as_str()],
            Command::Diff(c) => vec![c.a.as_str(), c.b.as_str()],
            Command::Plot(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Export(c) => vec![c.input.as_str()],
            Command::Why(c) => vec![c.input.as_str()],
            Command::Files(c) => vec![c.input.as_str()],
            Command::Merge(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Top(c) => vec![c.input.as_str()],
            Command::Profile(_)
            | Command::Slow(_)
            | Command::Run(_)
            | Command::TraceShow(_)
            | Command::TraceStats(_)
            | Command::Replay(_) => Vec::new(),
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
/// lists its problems, then fails); returns the exit code of a command that worked: 0, for
/// `fsprof profile` and `fsprof run` the workload's, for `fsprof replay` 1 when some call's
/// result differed. Each command's work is in its own module. `fsprof trace show`, whose
/// listing may be larger than memory, writes it to standard output as it goes.
pub fn run(cmd: &Command, common: &Common, out: &mut String) -> Result<u8, Error> {
    run_with(
        cmd,
        common,
        out,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    )
}

/// [`run`], with the streams that `fsprof trace show` and `fsprof slow` write their listing
/// (and the former its warnings) to as they go.
pub fn run_with(
    cmd: &Command,
    common: &Common,
    out: &mut String,
    listing: &mut dyn Write,
    warnings: &mut dyn Write,
) -> Result<u8, Error> {
    check_inputs(cmd)?;
    let load = |spec: &str| input::load(spec, common.cycles_per_sec);
    match cmd {
        Command::Profile(c) => return crate::profile::run(c, out),
        Command::Run(c) => return crate::user_run::run(c, out),
        Command::Replay(c) => return crate::replay::run(c, out),
        Command::TraceShow(c) => crate::trace::show(c, listing, warnings)?,
        Command::TraceStats(c) => crate::trace::stats(c, out)?,
        Command::Show(c) => show::run(&load(&c.input)?, c, out)?,
        Command::Summary(c) => summary::run(&load(&c.input)?, c, out)?,
        Command::Check(c) => check::run(c, common, out)?,
        Command::Peaks(c) => peaks::run(&load(&c.input)?, c, out)?,
        Command::Compare(c) if c.a == c.b && c.layers.is_some() => {
            let p = load(&c.a)?;
            compare::run(&p, &p, c, out)?
        }
        Command::Compare(c) => compare::run(&load(&c.a)?, &load(&c.b)?, c, out)?,
        Command::Diff(c) => diff::run(&load(&c.a)?, &load(&c.b)?, c, out)?,
        Command::Plot(c) => {
            let loaded = c
                .inputs
                .iter()
                .map(|s| load(s))
                .collect::<Result<Vec<_>, _>>()?;
            plot::run(&loaded, c, out)?
        }
        Command::Export(c) => export::run(&load(&c.input)?, c, out)?,
        Command::Why(c) => crate::why::run(&load(&c.input)?, c, out)?,
        Command::Files(c) => crate::files::run(&load(&c.input)?, c, out)?,
        Command::Slow(c) if c.follow => crate::slow::follow(c, listing)?,
        Command::Slow(c) => crate::slow::run(c, listing)?,
        Command::Merge(c) => {
            let loaded = c
                .inputs
                .iter()
                .map(|s| load(s))
                .collect::<Result<Vec<_>, _>>()?;
            crate::merge::run(&loaded, c, out)?
        }
        Command::Top(c) if c.batch => crate::top::batch(c, &mut std::io::stdout().lock())?,
        Command::Top(c) => crate::top::interactive(c)?,
    }
    Ok(0)
}
