//! The commands of `fsprof` as checked configurations, and [`run`], which carries one out.
//!
//! The binary turns its flags into a [`Command`]; everything after that (reading inputs,
//! choosing layers and operations, rendering, writing files) happens here, so it is tested
//! without a process.

use std::io::Write;

use crate::check::CheckConfig;
use crate::compare::CompareConfig;
use crate::diff::DiffCommand;
use crate::error::Error;
use crate::export::ExportConfig;
use crate::input;
use crate::peaks::PeaksConfig;
use crate::plot::PlotConfig;
use crate::select::Common;
use crate::show::ShowConfig;
use crate::summary::SummaryConfig;
use crate::{check, compare, diff, export, peaks, plot, show, summary};

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
    /// One HTML page of a profile.
    Report(crate::report::ReportConfig),
    /// Sum profiles (of many machines).
    Merge(crate::merge::MergeConfig),
    /// A live view of a mount or an endpoint.
    Top(crate::top::TopConfig),
    /// One operation down the levels of the stack.
    Stack(crate::stack::StackConfig),
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
            Command::Report(c) => vec![c.input.as_str()],
            Command::Merge(c) => c.inputs.iter().map(String::as_str).collect(),
            Command::Top(c) => vec![c.input.as_str()],
            Command::Stack(c) => vec![c.input.as_str()],
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
        Command::Profile(c) if c.no_mount => return crate::no_mount::run(c, out),
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
        Command::Stack(c) => crate::stack::run(&load(&c.input)?, c, out)?,
        Command::Report(c) => crate::report::run(&load(&c.input)?, c, out)?,
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
