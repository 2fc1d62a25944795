//! `fsprof`: analyse FSprof latency profiles. Parses flags into a [`tools::Command`], sets up
//! logging, runs it, and maps errors to one line on standard error and an exit code (2 for
//! usage, input and output errors, 1 when `check` finds problems).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use profile_store::duration::Span;
use tools::background::Shares;
use tools::check::CheckConfig;
use tools::compare::CompareConfig;
use tools::compare::{GroupConfig, METHODS_HELP, Method, Methods};
use tools::diff::DiffCommand;
use tools::diff::DiffConfig;
use tools::export::ExportConfig;
use tools::export::ExportFormat;
use tools::input::op_name;
use tools::peaks::PeaksConfig;
use tools::plot::PlotConfig;
use tools::plot::PlotKind;
use tools::select::Selection;
use tools::show::ShowConfig;
use tools::show::{ColorMode, ShowStyle, use_color};
use tools::summary::SummaryConfig;
use tools::summary::TableFormat;
use tools::window::Window;
use tools::{Command, Common, Error};

/// Analyse FSprof latency profiles: per-operation latency histograms in log2 buckets of CPU
/// cycles, where separate peaks are separate execution paths.
///
/// PROFILE is a text profile (with or without the '# fsprof-profile v1' header), a JSON profile,
/// a mount point of fsprof-fuse or raif (its .fsprof.json is read), or '-' for standard input.
#[derive(Parser, Debug)]
#[command(name = "fsprof", version, max_term_width = 100)]
struct Cli {
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    log_level: String,

    /// Clock rate for showing cycles as time, for profiles recorded without one (it replaces a
    /// recorded rate, with a warning). At least 1.
    #[arg(
        long,
        global = true,
        value_name = "HZ",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    cycles_per_sec: Option<u64>,

    /// Count operations no caller waits for (FORGET, BATCH_FORGET, RELEASE, RELEASEDIR: the
    /// kernel sends them in the background) in the shares of a layer's latency, and in the
    /// weights compare and diff use. By default they are marked and left out.
    #[arg(long, global = true)]
    with_background: bool,

    /// Colour in terminal output: auto (only when standard output is a terminal and NO_COLOR
    /// is unset), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    color: ColorWhen,

    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Profile a directory in one step: mount it with the profiling passthrough at a temporary
    /// mount point, run COMMAND there (default: read every file and stat every entry), unmount,
    /// and show the profile. Needs /dev/fuse (and root, or fusermount3).
    ///
    /// The mount point is a new private directory (mkdtemp). Ctrl-C reaches COMMAND as it
    /// would without fsprof (a SIGTERM sent to fsprof is passed on to it); fsprof then
    /// unmounts and shows the profile so far. Exit status: COMMAND's (128+N if a signal N
    /// ended it); without COMMAND, 0 for a complete walk and 128+N for a walk stopped by
    /// signal N; 2 when the directory cannot be mounted or profiled.
    Profile {
        /// The directory to profile.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The workload, run with the mount as working directory (after `--`).
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<std::ffi::OsString>,
        /// Also record the lower system calls (layer `lower`): the gap to the `fuse` layer is
        /// the profiler's own overhead.
        #[arg(long)]
        lower: bool,
        /// Also run COMMAND under the preload library (as `fsprof run` does) and time its
        /// C-library calls: the profile then holds three layers, `user` (what the program
        /// called), `fuse` (what reached the daemon) and `lower` (what the daemon called;
        /// --user implies --lower). A read served by the page cache has a user call and no
        /// fuse request; the gap between the user and fuse peaks is the kernel's FUSE round
        /// trip. Needs COMMAND, dynamically linked.
        #[arg(long, requires = "command")]
        user: bool,
        /// Also write the profile to this file (JSON if it ends in .json).
        #[arg(long, value_name = "FILE")]
        save: Option<PathBuf>,
        /// Show at most this many operations.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Output width in columns.
        #[arg(long, default_value_t = 80, value_name = "COLUMNS")]
        width: usize,
        /// Draw bars with '#' instead of Unicode blocks.
        #[arg(long)]
        ascii: bool,
        /// Record only the histograms and what the options below ask for. By default fsprof
        /// profile also records what its report needs: the inner-call breakdown (--breakdown),
        /// the requests of 1 ms or more (--slow 1ms), the hottest files (--hot-files) and one
        /// profile per command name (--by comm).
        #[arg(long)]
        no_record: bool,
        #[command(flatten)]
        rec: fsprof_fuse::cli::RecordingArgs,
    },
    /// Run a program and profile its file-system calls at the C library (layer `user`,
    /// operations SYS_OPENAT, SYS_PREAD, SYS_FREAD...), on any directory, with no root and no
    /// mount.
    ///
    /// COMMAND (after `--`) runs with the preload library libfsprof_preload.so, found next to
    /// the fsprof binary (cargo build puts it there) or named by FSPROF_PRELOAD. Threads,
    /// forks and exec'd programs are followed; calls are timed from the caller's side, so a
    /// page-cache hit shows as a fast call. The profile is shown when the program ends (on
    /// standard output, after the program's own output), or written with --output. fsprof
    /// exits with the program's status (128 + N for a signal N). A statically linked program
    /// cannot be interposed and is refused; `fsprof profile DIR -- COMMAND` profiles it at the
    /// file-system level instead. A set-user-ID program of another user (or one with file
    /// capabilities) runs, but the dynamic loader ignores the library for it and for what it
    /// starts: the report warns that its calls were not recorded.
    #[command(
        after_help = "Examples:\n  fsprof run -- tar xf src.tar\n  fsprof run --output \
        tar.fsprof --trace tar.trace -- tar xf src.tar\n  fsprof trace stats tar.trace\n  \
        fsprof replay tar.trace --in /mnt/other --timing fast"
    )]
    Run {
        /// The program and its arguments (after `--`).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<std::ffi::OsString>,
        /// Write the profile to this file (JSON if it ends in .json, else text) instead of
        /// showing it; standard output then holds only a summary after the program's output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Also record every call (time, process, thread, arguments, result, latency) into
        /// this binary trace file, for `fsprof trace show|stats` and `fsprof replay`. It is
        /// written in large chunks; a program killed mid-way leaves a trace readable up to
        /// its last chunk.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Threads (over every process) that record on their own; later ones share one slot,
        /// exactly but more slowly. Each costs 128 KiB of address space, touched only when
        /// used.
        #[arg(long, default_value_t = 1024, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
        slots: u32,
        /// Show at most this many operations.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Output width in columns.
        #[arg(long, default_value_t = 80, value_name = "COLUMNS")]
        width: usize,
        /// Draw bars with '#' instead of Unicode blocks.
        #[arg(long)]
        ascii: bool,
    },
    /// Read a trace written by `fsprof run --trace`: list it or measure it.
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Re-execute a trace against another directory (after ULTra), to run one real workload
    /// again on other file systems and configurations.
    ///
    /// Traced paths under the root (--root; by default the directory the traced command
    /// started in) are mapped into DIR. First the tree the trace needed at its start is
    /// created in DIR (directories, and files of their traced sizes, filled with a pattern:
    /// traces hold no data); then each traced thread is replayed on a thread of its own, with
    /// its own descriptors, keeping the traced order between threads that touched the same
    /// file or directory. Calls on paths outside the root or on descriptors the trace did not
    /// open (standard streams, pipes) are counted and not replayed. A call whose result
    /// differs from the trace's (another errno, a short read, another size) is a mismatch:
    /// listed and counted. The last line is `replayed N calls, M mismatches`; the exit code is
    /// 1 when there were mismatches. Progress shows on a terminal.
    Replay {
        /// The trace (from `fsprof run --trace`).
        #[arg(value_name = "FILE")]
        trace: PathBuf,
        /// The directory to replay in (created if missing; best empty).
        #[arg(long = "in", value_name = "DIR")]
        dir: PathBuf,
        /// Map traced paths under this directory to DIR (default: the directory the traced
        /// command started in).
        #[arg(long, value_name = "PREFIX")]
        root: Option<PathBuf>,
        /// recorded: keep the traced time between a thread's calls (the program's own work);
        /// fast: issue each call as soon as the calls it depends on are done.
        #[arg(long, default_value = "recorded", value_name = "recorded|fast")]
        timing: user_trace::Timing,
        /// Write the replay's user-level profile to this file (JSON if it ends in .json), for
        /// `fsprof compare` between replays on different file systems.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// List at most this many mismatches (all are counted).
        #[arg(long, default_value_t = 1000, value_name = "N")]
        list: usize,
        /// Memory in MiB the replay may take for what it reads and plans ahead: the trace is
        /// streamed, with a decoded chunk (up to 1 MiB) and a queue of planned calls (about 550
        /// bytes each) per traced thread; a trace with too many threads for that is refused. Default:
        /// half of the memory available.
        #[arg(long, value_name = "MIB")]
        max_memory: Option<u64>,
        /// Give the files the trace needed their sizes but no data (sparse), instead of
        /// filling them with a pattern: for traces of huge or sparse files. Without it, files
        /// larger in all than the space free in DIR are refused before anything is written.
        #[arg(long)]
        sparse: bool,
    },
    /// Terminal histograms per operation, largest total latency first: bucket, its lower bound
    /// in cycles and time, calls on a log scale, share of the operation's latency.
    Show {
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
    },
    /// The summary table: operation, count, total cycles, total ms, mean, share of latency;
    /// largest total latency first.
    Summary {
        /// The profile.
        #[arg(value_name = "PROFILE")]
        input: String,
        /// Layer to summarize (default: the first).
        #[arg(long)]
        layer: Option<String>,
        /// Output format: text, csv, json.
        #[arg(long, default_value = "text", value_name = "FORMAT")]
        format: TableFormat,
    },
    /// Check consistency (bucket sums against counts, total latency against the buckets) and
    /// metadata; exits with 1 and lists every problem if any is found.
    Check {
        /// The profiles.
        #[arg(value_name = "PROFILE", required = true)]
        inputs: Vec<String>,
        /// Calls that may have been in flight when the profile was taken: a bucket sum may be
        /// this much below its count.
        #[arg(long, default_value_t = 0, value_name = "N")]
        in_flight: u64,
    },
    /// Peaks of each operation, found on log2(calls + 1) as one reads a log-scale plot: bucket
    /// range, top, calls, share, mean latency.
    Peaks {
        /// The profile.
        #[arg(value_name = "PROFILE")]
        input: String,
        #[command(flatten)]
        select: SelectArgs,
        /// Minimum prominence of a peak over the valleys on both sides, in log2 units (1 = a
        /// factor of two in calls).
        #[arg(long, default_value_t = 1.0, value_name = "LOG2")]
        prominence: f64,
        /// Leave out peaks with less than this percent of the operation's calls (the largest
        /// stays). Default 0: every peak, as read on the plot; compare and diff use 1.
        #[arg(long, default_value_t = 0.0, value_name = "PERCENT")]
        min_peak_share: f64,
        /// Output format: text, csv, json.
        #[arg(long, default_value = "text", value_name = "FORMAT")]
        format: TableFormat,
    },
    /// Score each operation's difference between two profiles, D from 0 (same) to 100
    /// (different).
    #[command(after_help = METHODS_HELP)]
    Compare {
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
        /// read, pread and fread under OP_READ, stat and statx under OP_GETATTR...).
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
    },
    /// The few operations worth a look between two profiles, each with what changed (calls,
    /// latency, new, vanished or moved peaks), the most latency at stake first.
    ///
    /// Operations below --threshold of their layer's calls and latency in both profiles are
    /// dropped, as are those with no named change and a score below --min-score. The rest are
    /// listed by the latency at stake: the score D (0..100) times the larger of the two total
    /// latencies. D alone saturates at 100 for large differences and would rank a 3.5 ms
    /// operation above an 88 ms one.
    #[command(after_help = METHODS_HELP)]
    Diff {
        /// Profile A (before).
        #[arg(value_name = "A")]
        a: String,
        /// Profile B (after).
        #[arg(value_name = "B")]
        b: String,
        /// Layer to compare (default: every layer both profiles have).
        #[arg(long)]
        layer: Option<String>,
        /// The method whose score D, times the latency, ranks operations.
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
    },
    /// Draw figures, written as SVG, PNG or PDF by the output's extension.
    ///
    /// Kinds: histogram (calls per bucket, log y, bucket numbers on top and each bucket's lower
    /// bound below, one panel per operation); latency (estimated latency per bucket, calls x
    /// mid-point); heatmap (time-lapse, epoch x bucket, one operation); overlay (one operation
    /// of two profiles). A heat map or an overlay takes at most one --op.
    Plot {
        /// One profile, or two for an overlay.
        #[arg(value_name = "PROFILE", required = true, num_args = 1..=2)]
        inputs: Vec<String>,
        /// Figure: histogram, latency, heatmap, overlay (default: histogram, or overlay for two
        /// profiles).
        #[arg(long, value_name = "KIND")]
        kind: Option<PlotKind>,
        #[command(flatten)]
        select: SelectArgs,
        /// Output file: .svg, .png (rendered with resvg) or .pdf (converted with svg2pdf); '-'
        /// for SVG on standard output. Any other name is refused.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Figure title.
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        window: WindowArgs,
    },
    /// Convert a profile: json, text (SPEC formats), csv (one row per non-empty bucket),
    /// prometheus (text exposition, one histogram per operation; needs the clock rate).
    Export {
        /// The profile.
        #[arg(value_name = "PROFILE")]
        input: String,
        /// Output format: json, csv, text, prometheus.
        #[arg(long, value_name = "FORMAT")]
        format: ExportFormat,
        /// Output file (default: standard output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The root cause of an operation's peaks: for each peak, the share of its time each
    /// lower (or branch) call accounts for, and the time none explains. Needs a profile of a
    /// mount made with --breakdown.
    Why {
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
    },
    /// The hottest files of a mount recorded with --hot-files: by total latency and by
    /// requests, with paths.
    Files {
        /// A mount point or a profile.
        #[arg(value_name = "MNT|PROFILE")]
        input: String,
        /// Files listed per ranking at most.
        #[arg(long, default_value_t = 20, value_name = "N")]
        top: usize,
    },
    /// A mount's slow-operation log (recorded with --slow), one line per request: time,
    /// command, pid, uid, operation, latency, errno, offset, size, path and the lower calls it
    /// made.
    Slow {
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
    },
    /// Sum profiles, e.g. of many machines: same layer and operation are added bucket by
    /// bucket (layers of one name must have the same resolution). Profiles of another clock
    /// rate are converted to the first one's, each call's bucket then known within one (said in
    /// the report). Sections (hot files, slow records) are per machine and left out.
    Merge {
        /// The profiles: files, mount points, URLs of `--metrics` endpoints (http://HOST:PORT/metrics)
        /// or '-'. At least two.
        #[arg(value_name = "PROFILE", num_args = 2.., required = true)]
        inputs: Vec<String>,
        /// Output file (JSON if it ends in .json, else text; default: standard output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// A live view of a mount or a `--metrics` endpoint, refreshed every interval, like top:
    /// per operation the calls, calls/s and its change, mean, p99 and the time at stake in the
    /// interval, sorted by time at stake; then the processes or users (mounts with --by) and
    /// the hottest files (--hot-files). Keys: q quits; t, c, m, p, n sort by time at stake,
    /// calls, mean, p99, name.
    Top {
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
    },
}

fn time_arg(s: &str) -> Result<std::time::Duration, String> {
    profile_store::duration::parse_time(s).map_err(|e| e.to_string())
}

#[derive(Subcommand, Debug)]
enum TraceCmd {
    /// List the calls like strace, in the order they started: seconds since the program
    /// started, pid/tid, the call with its arguments, its result (-1 ENOENT for an error) and
    /// its latency in seconds. A trace cut short is listed up to the cut, and the torn tail is
    /// reported on standard error.
    Show {
        /// The trace.
        #[arg(value_name = "FILE")]
        trace: PathBuf,
        /// Only these processes (repeat or separate with commas).
        #[arg(long = "pid", value_name = "PID", value_delimiter = ',')]
        pids: Vec<u32>,
        /// Only these calls, by C name or profile name: openat, pread, fopen, SYS_STATX
        /// (repeat or separate with commas).
        #[arg(long = "call", value_name = "NAME", value_delimiter = ',')]
        calls: Vec<String>,
    },
    /// Horikawa's measures, per process and overall: calls, errors, throughput (calls and MB
    /// per second), mean response time, mean concurrency (calls in flight) and think time
    /// (between a thread's calls). The response time per call is a log2 profile (layer
    /// `user`, and `user@pid:N` per process), which --output writes for every other command.
    Stats {
        /// The trace.
        #[arg(value_name = "FILE")]
        trace: PathBuf,
        /// Write the response-time profile to this file (JSON if it ends in .json, else text).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct SelectArgs {
    /// Layer (default: the first; for two profiles, every layer both have).
    #[arg(long)]
    layer: Option<String>,
    /// Operations to show (repeat or separate with commas; 'read' means OP_READ, 'sys_pread'
    /// the user-level SYS_PREAD).
    #[arg(long = "op", value_name = "OP", value_delimiter = ',')]
    ops: Vec<String>,
    /// Only the N operations with the largest total latency.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
}

impl SelectArgs {
    fn into_selection(self) -> Selection {
        Selection {
            layer: self.layer,
            ops: self.ops.iter().map(|s| op_name(s)).collect(),
            top: self.top,
        }
    }
}

/// A window of a time-lapse profile.
#[derive(Args, Debug)]
struct WindowArgs {
    /// Only the epochs starting at or after this time since the profile's start (a duration
    /// with its unit: 2s, 500ms, or cycles as 2^32c). Totals of cut operations are then
    /// estimated from bucket mid-points.
    #[arg(long, value_name = "DURATION", value_parser = span)]
    from: Option<Span>,
    /// Only the epochs starting before this time since the profile's start (as --from).
    #[arg(long, value_name = "DURATION", value_parser = span)]
    to: Option<Span>,
    /// Leave out the epochs at both ends in which no call finished (idle time before and
    /// after the work).
    #[arg(long)]
    trim: bool,
}

impl WindowArgs {
    fn into_window(self) -> Window {
        Window {
            from: self.from,
            to: self.to,
            trim: self.trim,
        }
    }
}

/// A duration with its unit (SPEC §10): a bare number is refused with its hint.
fn span(s: &str) -> Result<Span, String> {
    profile_store::duration::parse(s).map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
struct GroupArgs {
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
    fn into_config(self) -> Result<GroupConfig, Error> {
        Ok(GroupConfig {
            insignificant_below: percent("--threshold", self.threshold)?,
            prominence: non_negative("--prominence", self.prominence)?,
            min_peak_share: percent("--min-peak-share", self.min_peak_share)?,
            ..GroupConfig::default()
        })
    }
}

fn percent(flag: &str, v: f64) -> Result<f64, Error> {
    if (0.0..=100.0).contains(&v) {
        Ok(v / 100.0)
    } else {
        Err(Error::usage(
            flag,
            format!("{v} is not a percentage (0..100)"),
        ))
    }
}

fn non_negative(flag: &str, v: f64) -> Result<f64, Error> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Error::usage(flag, format!("{v} must be a number >= 0")))
    }
}

/// Turns flags into a checked command.
fn configure(cli: Cli, color: bool) -> Result<Command, Error> {
    let shares = Shares {
        with_background: cli.with_background,
    };
    Ok(match cli.command {
        Cmd::Profile {
            dir,
            command,
            lower,
            user,
            save,
            top,
            width,
            ascii,
            no_record,
            rec,
        } => Command::Profile(tools::profile::ProfileConfig {
            dir,
            command,
            lower_layer: lower || user,
            user,
            save,
            top,
            recording: tools::profile::recording(rec, no_record, lower || user)?,
            style: ShowStyle {
                width: width.max(40),
                color,
                ascii,
                shares,
            },
        }),
        Cmd::Run {
            command,
            output,
            trace,
            slots,
            top,
            width,
            ascii,
        } => Command::Run(tools::user_run::RunConfig {
            command,
            output,
            trace,
            slots: slots as usize,
            top,
            style: ShowStyle {
                width: width.max(40),
                color,
                ascii,
                shares,
            },
        }),
        Cmd::Trace(TraceCmd::Show { trace, pids, calls }) => {
            Command::TraceShow(tools::trace::TraceShowConfig { trace, pids, calls })
        }
        Cmd::Trace(TraceCmd::Stats { trace, output }) => {
            Command::TraceStats(tools::trace::TraceStatsConfig { trace, output })
        }
        Cmd::Replay {
            trace,
            dir,
            root,
            timing,
            output,
            list,
            max_memory,
            sparse,
        } => Command::Replay(tools::replay::ReplayConfig {
            trace,
            dir,
            root,
            timing,
            output,
            list,
            max_memory: max_memory.map(|m| m.saturating_mul(1 << 20)),
            sparse,
        }),
        Cmd::Show {
            input,
            select,
            epochs,
            window,
            width,
            ascii,
            by,
        } => Command::Show(ShowConfig {
            input,
            by,
            select: select.into_selection(),
            epochs,
            window: window.into_window(),
            style: ShowStyle {
                width: width.max(40),
                color,
                ascii,
                shares,
            },
        }),
        Cmd::Summary {
            input,
            layer,
            format,
        } => Command::Summary(SummaryConfig {
            input,
            layer,
            format,
            shares,
        }),
        Cmd::Check { inputs, in_flight } => Command::Check(CheckConfig { inputs, in_flight }),
        Cmd::Peaks {
            input,
            select,
            prominence,
            min_peak_share,
            format,
        } => Command::Peaks(PeaksConfig {
            input,
            select: select.into_selection(),
            prominence: non_negative("--prominence", prominence)?,
            min_share: percent("--min-peak-share", min_peak_share)?,
            format,
        }),
        Cmd::Compare {
            a,
            b,
            layers,
            select,
            method,
            group,
            format,
        } => Command::Compare(CompareConfig {
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
            shares,
        }),
        Cmd::Diff {
            a,
            b,
            layer,
            method,
            threshold,
            change,
            min_score,
            top,
            prominence,
            min_peak_share,
            format,
        } => Command::Diff(DiffCommand {
            a,
            b,
            layer,
            diff: DiffConfig {
                method,
                threshold: percent("--threshold", threshold)?,
                change: non_negative("--change", change)?,
                min_score: non_negative("--min-score", min_score)?,
                group: GroupConfig {
                    prominence: non_negative("--prominence", prominence)?,
                    min_peak_share: percent("--min-peak-share", min_peak_share)?,
                    ..GroupConfig::default()
                },
                shares,
            },
            top,
            format,
        }),
        Cmd::Plot {
            inputs,
            kind,
            select,
            output,
            title,
            window,
        } => Command::Plot(PlotConfig {
            inputs,
            kind,
            select: select.into_selection(),
            output,
            title,
            window: window.into_window(),
        }),
        Cmd::Export {
            input,
            format,
            output,
        } => Command::Export(ExportConfig {
            input,
            format,
            output,
        }),
        Cmd::Why {
            format: TableFormat::Csv,
            ..
        } => {
            return Err(Error::usage(
                "--format",
                "csv: fsprof why writes text or json (a peak's breakdown is not one table)",
            ));
        }
        Cmd::Why {
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
        Cmd::Files { input, top } => Command::Files(tools::files::FilesConfig { input, top }),
        Cmd::Slow {
            input,
            follow,
            interval,
            json,
        } => {
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
        }
        Cmd::Merge { inputs, output } => {
            Command::Merge(tools::merge::MergeConfig { inputs, output })
        }
        Cmd::Top {
            input,
            interval,
            batch,
            iterations,
            sort,
            layer,
            rows,
        } => {
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
                cycles_per_sec: cli.cycles_per_sec,
            })
        }
    })
}

/// The help to point a usage error to: the subcommand's when the arguments name one (its flags
/// are described there), else the top level's.
fn help_for(args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory as _;
    let cmd = Cli::command();
    let sub = args.iter().skip(1).find_map(|a| {
        let a = a.to_str()?;
        cmd.get_subcommands()
            .find(|s| s.get_name() == a)
            .map(|s| s.get_name().to_string())
    });
    match sub {
        Some(s) => format!("fsprof {s} --help"),
        None => "fsprof --help".into(),
    }
}

/// A clap error as one line: its message without the usage block, and where help is.
fn clap_one_line(e: &clap::Error, help: &str) -> String {
    let text = e.render().to_string();
    let head = text.split("\n\n").next().unwrap_or("");
    let head = head.strip_prefix("error: ").unwrap_or(head);
    let words: Vec<&str> = head
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!("{} (see {help})", words.join(" "))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(2)
                }
                _ => {
                    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
                    eprintln!("fsprof: usage: {}", clap_one_line(&e, &help_for(&args)));
                    ExitCode::from(2)
                }
            };
        }
    };
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(&cli.log_level));
    if std::env::var_os("RUST_LOG").is_none() {
        // fuser warns when its own unmount-on-drop finds the mount already gone, which is how
        // every clean unmount ends here; its own comment calls this not necessarily an error.
        logger.filter_module("fuser::mnt", log::LevelFilter::Error);
        logger.filter_module("fuser::session", log::LevelFilter::Error);
    }
    logger.format_timestamp(None).init();
    let color = use_color(
        match cli.color {
            ColorWhen::Auto => ColorMode::Auto,
            ColorWhen::Always => ColorMode::Always,
            ColorWhen::Never => ColorMode::Never,
        },
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let common = Common {
        cycles_per_sec: cli.cycles_per_sec,
    };
    let command = match configure(cli, color) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fsprof: {e}");
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let mut out = String::new();
    let result = tools::app::run_with(
        &command,
        &common,
        &mut out,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A closed pipe (`fsprof show ... | head`) is not an error worth a message.
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("fsprof: standard output: {e}");
            return ExitCode::from(2);
        }
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("fsprof: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
