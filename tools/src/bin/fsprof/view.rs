//! The subcommands that look at one profile: `show`, `summary`, `check`, `peaks`, `why`,
//! `files`, `slow`, `top`.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::args::{Context, SelectArgs, WindowArgs, non_negative, percent, time_arg};
use tools::check::CheckConfig;
use tools::input::op_name;
use tools::peaks::PeaksConfig;
use tools::show::{ShowConfig, ShowStyle};
use tools::summary::{SummaryConfig, TableFormat};
use tools::{Command, Error};

/// Terminal histograms per operation, largest total latency first: bucket, its lower bound
/// in cycles and time, calls on a log scale, share of the operation's latency.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The profile.
    #[arg(value_name = "PROFILE")]
    input: String,
    #[command(flatten)]
    select: SelectArgs,
    /// Show the time-lapse matrix (epoch x bucket, one character per cell, log scale)
    /// instead of the histogram.
    #[arg(long)]
    epochs: bool,
    #[command(flatten)]
    window: WindowArgs,
    /// Output width in columns.
    #[arg(long, default_value_t = 80, value_name = "COLUMNS")]
    width: usize,
    /// Draw bars with '#' instead of Unicode blocks.
    #[arg(long)]
    ascii: bool,
    /// Show the per-caller layers of the layer (fuse@uid:1000..., recorded with --by) one
    /// after the other, instead of the layer itself.
    #[arg(long)]
    by: bool,
}

impl ShowArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let ShowArgs {
            input,
            select,
            epochs,
            window,
            width,
            ascii,
            by,
        } = self;
        Ok(Command::Show(ShowConfig {
            input,
            by,
            select: select.into_selection(),
            epochs,
            window: window.into_window(),
            style: ShowStyle {
                width: width.max(40),
                color: cx.color,
                ascii,
                shares: cx.shares,
            },
        }))
    }
}

/// The summary table: operation, count, total cycles, total ms, mean, share of latency;
/// largest total latency first.
#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// The profile.
    #[arg(value_name = "PROFILE")]
    input: String,
    /// Layer to summarize (default: the first).
    #[arg(long)]
    layer: Option<String>,
    /// Output format: text, csv, json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl SummaryArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let SummaryArgs {
            input,
            layer,
            format,
        } = self;
        Ok(Command::Summary(SummaryConfig {
            input,
            layer,
            format,
            shares: cx.shares,
        }))
    }
}

/// Check consistency (bucket sums against counts, total latency against the buckets) and
/// metadata; exits with 1 and lists every problem if any is found.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The profiles.
    #[arg(value_name = "PROFILE", required = true)]
    inputs: Vec<String>,
    /// Calls that may have been in flight when the profile was taken: a bucket sum may be
    /// this much below its count.
    #[arg(long, default_value_t = 0, value_name = "N")]
    in_flight: u64,
}

impl CheckArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let CheckArgs { inputs, in_flight } = self;
        Ok(Command::Check(CheckConfig { inputs, in_flight }))
    }
}

/// Peaks of each operation, found on log2(calls) as one reads a log-scale plot (an empty
/// bucket is half a call), then split where their time (calls x latency) has a deep valley,
/// as a sparse slow tail that holds most of the time: bucket range, top, calls, share, mean
/// latency.
#[derive(Args, Debug)]
pub struct PeaksArgs {
    /// The profile.
    #[arg(value_name = "PROFILE")]
    input: String,
    #[command(flatten)]
    select: SelectArgs,
    /// Minimum prominence of a peak over the valleys on both sides, in log2 units (1 = a
    /// factor of two in calls, or in time); the time split takes at least 1.
    #[arg(long, default_value_t = 1.0, value_name = "LOG2")]
    prominence: f64,
    /// Leave out peaks with less than this percent of the operation's calls (the largest
    /// stays). Default 0: every peak, as read on the plot; compare and diff use 1.
    #[arg(long, default_value_t = 0.0, value_name = "PERCENT")]
    min_peak_share: f64,
    /// Output format: text, csv, json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl PeaksArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let PeaksArgs {
            input,
            select,
            prominence,
            min_peak_share,
            format,
        } = self;
        Ok(Command::Peaks(PeaksConfig {
            input,
            select: select.into_selection(),
            prominence: non_negative("--prominence", prominence)?,
            min_share: percent("--min-peak-share", min_peak_share)?,
            format,
            shares: cx.shares,
        }))
    }
}

/// One operation down the levels of the stack, from the top: user (with `fsprof profile
/// --user`) → kernel (FUSE's round trip, with --kernel) → fuse (the daemon) → lower or the
/// branches (its system calls) → block@dev:NAME (the device's requests, with --kernel): calls,
/// total, mean, percentiles and peaks of each, and its total as a share of the level above's.
#[derive(Args, Debug)]
pub struct StackArgs {
    /// A mount point or a profile.
    #[arg(value_name = "MNT|PROFILE")]
    input: String,
    /// The operation ('read' means OP_READ); default: the one with the most time in `fuse`.
    #[arg(value_name = "OP")]
    op: Option<String>,
    /// Output format: text or json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl StackArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let StackArgs { input, op, format } = self;
        if format == TableFormat::Csv {
            return Err(Error::usage(
                "--format csv",
                "fsprof stack writes text or json",
            ));
        }
        Ok(Command::Stack(tools::stack::StackConfig {
            input,
            op,
            format,
        }))
    }
}

/// The root cause of an operation's peaks: for each peak, the share of its time each
/// lower (or branch) call accounts for, and the time none explains. Needs a profile of a
/// mount made with --breakdown.
#[derive(Args, Debug)]
pub struct WhyArgs {
    /// A mount point or a profile.
    #[arg(value_name = "MNT|PROFILE")]
    input: String,
    /// The operation ('read' means OP_READ).
    #[arg(value_name = "OP")]
    op: String,
    /// Only this peak (numbered from 1, fastest first, as `fsprof peaks` numbers them).
    #[arg(long, value_name = "N")]
    peak: Option<usize>,
    /// Minimum prominence of a peak, in log2 units (as for `fsprof peaks`).
    #[arg(long, default_value_t = 1.0, value_name = "LOG2")]
    prominence: f64,
    /// Output format: text or json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: TableFormat,
}

impl WhyArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        Ok(match self {
            WhyArgs {
                format: TableFormat::Csv,
                ..
            } => {
                return Err(Error::usage(
                    "--format",
                    "csv: fsprof why writes text or json (a peak's breakdown is not one table)",
                ));
            }
            WhyArgs {
                input,
                op,
                peak,
                prominence,
                format,
            } => Command::Why(tools::why::WhyConfig {
                input,
                op: op_name(&op),
                peak,
                prominence: non_negative("--prominence", prominence)?,
                format,
            }),
        })
    }
}

/// The hottest files of a mount recorded with --hot-files: by total latency and by
/// requests, with paths.
#[derive(Args, Debug)]
pub struct FilesArgs {
    /// A mount point or a profile.
    #[arg(value_name = "MNT|PROFILE")]
    input: String,
    /// Files listed per ranking at most.
    #[arg(long, default_value_t = 20, value_name = "N")]
    top: usize,
    /// The layer whose hottest files to list: `syscall` for the syscall level's (--syscalls);
    /// default: the daemon's (`fuse`), or `syscall` for a profile made with --no-mount.
    #[arg(long, value_name = "LAYER")]
    layer: Option<String>,
}

impl FilesArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let FilesArgs { input, top, layer } = self;
        Ok(Command::Files(tools::files::FilesConfig {
            input,
            top,
            layer,
        }))
    }
}

/// A mount's slow-operation log (recorded with --slow), one line per request: time,
/// command, pid, uid, operation, latency, errno, offset, size, path and the lower calls it
/// made.
#[derive(Args, Debug)]
pub struct SlowArgs {
    /// The mount point, or a file of slow records (--slow-log's, or a copy of the ring),
    /// read line by line whatever its size.
    #[arg(value_name = "MNT|FILE")]
    input: PathBuf,
    /// Keep printing new records as they come (until interrupted): the mount's ring is
    /// read again each interval, a file from where the last read stopped (like tail -f;
    /// from its start again if it was cut).
    #[arg(short, long)]
    follow: bool,
    /// How often to look for new records with -f, with its unit.
    #[arg(long, default_value = "1s", value_name = "TIME", value_parser = time_arg)]
    interval: std::time::Duration,
    /// Print the records as recorded (JSON lines).
    #[arg(long)]
    json: bool,
}

impl SlowArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let SlowArgs {
            input,
            follow,
            interval,
            json,
        } = self;
        Ok({
            if interval.is_zero() {
                return Err(Error::usage(
                    "--interval",
                    "give a time above 0 (1s, 200ms)",
                ));
            }
            Command::Slow(tools::slow::SlowConfig {
                input,
                follow,
                interval,
                json,
            })
        })
    }
}

/// A live view of a mount or a `--metrics` endpoint, refreshed every interval, like top:
/// per operation the calls, calls/s and its change, mean, p99 and the time at stake in the
/// interval, sorted by time at stake; then the processes or users (mounts with --by) and
/// the hottest files (--hot-files). Keys: q quits; t, c, m, p, n sort by time at stake,
/// calls, mean, p99, name.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// A mount point, a URL of a `--metrics` endpoint, or a profile file.
    #[arg(value_name = "MNT|URL")]
    input: String,
    /// Time between frames, with its unit.
    #[arg(short = 'd', long, default_value = "1s", value_name = "TIME", value_parser = time_arg)]
    interval: std::time::Duration,
    /// Batch mode: print frames one after another (for logs), not a redrawn screen. The
    /// default when standard output is not a terminal.
    #[arg(short, long)]
    batch: bool,
    /// Stop after N frames.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// Sort by: time, calls, mean, p99, name.
    #[arg(long, default_value = "time", value_name = "KEY")]
    sort: tools::top::SortKey,
    /// The layer shown (default: the primary one).
    #[arg(long, value_name = "NAME")]
    layer: Option<String>,
    /// Operations listed at most.
    #[arg(long, default_value_t = 20, value_name = "N")]
    rows: usize,
}

impl TopArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let TopArgs {
            input,
            interval,
            batch,
            iterations,
            sort,
            layer,
            rows,
        } = self;
        Ok({
            if interval.is_zero() {
                return Err(Error::usage(
                    "--interval",
                    "give a time above 0 (1s, 200ms)",
                ));
            }
            Command::Top(tools::top::TopConfig {
                input,
                interval,
                batch: batch || !std::io::stdout().is_terminal(),
                iterations,
                sort,
                layer,
                rows: rows.max(1),
                cycles_per_sec: cx.cycles_per_sec,
            })
        })
    }
}

/// Write one self-contained HTML page of a profile, readable in any browser with no network:
/// the findings (the operations with most of the time, their peaks and what explains them,
/// the slowest requests, the hottest files, the heaviest callers), the layers side by side,
/// every layer's histograms with their peaks marked, the time-lapse heat maps (when the
/// profile has epochs), and the slowest requests, hottest files and callers as tables that
/// sort by a click on a column's header. Figures are inline SVG.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A profile, a mount point of fsprof-fuse or raif, or a URL of a --metrics endpoint.
    #[arg(value_name = "PROFILE|MNT|URL")]
    input: String,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

impl ReportArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let ReportArgs { input, output } = self;
        Ok(Command::Report(tools::report::ReportConfig {
            input,
            output,
        }))
    }
}
