//! The subcommands that record: `profile`, `run`, `trace`, `replay`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::args::Context;
use tools::show::ShowStyle;
use tools::{Command, Error};

/// Profile a directory in one step: mount it with the profiling passthrough at a temporary
/// mount point, run COMMAND there (default: read every file and stat every entry), unmount,
/// and show the profile: first the findings (the operations with most of the time, their
/// peaks and the inner call that explains each, the slowest requests with path, process and
/// inner calls, the hottest files, the heaviest callers; at most a screen, estimates marked
/// ~), then each layer's histograms. Needs /dev/fuse (and root, or fusermount3).
///
/// The mount point is a new private directory (mkdtemp). Ctrl-C reaches COMMAND as it
/// would without fsprof (a SIGTERM sent to fsprof is passed on to it); fsprof then
/// unmounts and shows the profile so far. Exit status: COMMAND's (128+N if a signal N
/// ended it); without COMMAND, 0 for a complete walk and 128+N for a walk stopped by
/// signal N; 2 when the directory cannot be mounted or profiled.
#[derive(Args, Debug)]
pub struct ProfileArgs {
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
    /// No FUSE mount at all: run COMMAND in DIR and count every file-system system call of it
    /// and of its descendants (followed in the kernel at fork), whatever file system they
    /// reach, in layer `syscall`, timed in the kernel by a BPF program on the syscall
    /// tracepoints, at close to native speed. --kernel adds the block layers of DIR's
    /// devices, --user the program's C-library calls; --by, --hot-files, --slowest and --slow
    /// (with --slow-log FILE) apply to the syscall level. Needs root, or CAP_BPF and
    /// CAP_PERFMON, and COMMAND.
    #[arg(long, requires = "command", conflicts_with_all = [
        "lower", "uring", "threads", "max_threads", "inject", "inject_file", "cache",
        "entry_timeout", "attr_timeout", "negative_timeout", "readdirplus",
    ])]
    no_mount: bool,
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
    /// Show the findings only, not the histograms that follow them.
    #[arg(long)]
    findings_only: bool,
    /// Also write the run's report to FILE: one self-contained HTML page (as `fsprof
    /// report` writes). Without --epoch, the profile is then cut into epochs of 1 s for the
    /// report's time-lapse heat maps.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Record only the histograms and what the options below ask for. By default fsprof
    /// profile also records what its findings and report need: the inner-call breakdown
    /// (--breakdown), the 50 slowest requests of the run with their paths, processes and
    /// inner calls (--slowest=50), the 100 hottest files (--hot-files=100) and one profile
    /// per command name (--by comm). --slow TIME (every request over TIME) only when given.
    #[arg(long)]
    no_record: bool,
    #[command(flatten)]
    rec: fsprof_fuse::daemon::cli::RecordingArgs,
}

impl ProfileArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let ProfileArgs {
            dir,
            command,
            lower,
            user,
            no_mount,
            save,
            top,
            width,
            ascii,
            findings_only,
            report,
            no_record,
            mut rec,
        } = self;
        if report.is_some() && rec.profile.epoch.is_none() {
            rec.profile.epoch = Some(profile_store::duration::parse("1s").expect("a duration"));
        }
        Ok(Command::Profile(tools::profile::ProfileConfig {
            dir,
            command,
            lower_layer: (lower || user) && !no_mount,
            user,
            no_mount,
            save,
            top,
            findings_only,
            report,
            recording: tools::profile::recording(rec, no_record, (lower || user) && !no_mount)?,
            style: ShowStyle {
                width: width.max(40),
                color: cx.color,
                ascii,
                shares: cx.shares,
            },
        }))
    }
}

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
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  fsprof run -- tar xf src.tar\n  fsprof run --output \
    tar.fsprof --trace tar.trace -- tar xf src.tar\n  fsprof trace stats tar.trace\n  \
    fsprof replay tar.trace --in /mnt/other --timing fast"
)]
pub struct RunArgs {
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
    /// exactly but more slowly. Each costs 320 KiB of address space, touched only when
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
}

impl RunArgs {
    /// The checked command.
    pub fn command(self, cx: &Context) -> Result<Command, Error> {
        let RunArgs {
            command,
            output,
            trace,
            slots,
            top,
            width,
            ascii,
        } = self;
        Ok(Command::Run(tools::user_run::RunConfig {
            command,
            output,
            trace,
            slots: slots as usize,
            top,
            style: ShowStyle {
                width: width.max(40),
                color: cx.color,
                ascii,
                shares: cx.shares,
            },
        }))
    }
}

/// Re-execute a trace against another directory (after ULTra), to run one real workload
/// again on other file systems and configurations.
///
/// Traced paths under the root (--root; by default the directory the traced command
/// started in) are mapped into DIR. First the tree the trace needed at its start is
/// created in DIR (directories, and files of their traced sizes, filled with a pattern:
/// traces hold no data); then each traced thread is replayed on a thread of its own, with
/// its own descriptors, keeping the traced order between threads that touched the same
/// file or directory. Calls on paths outside the root or on descriptors the trace did not
/// open (standard streams, pipes) are counted and not replayed. Every path is resolved
/// beneath DIR (openat2 RESOLVE_BENEATH): a call whose path would leave DIR (through an
/// absolute symbolic link, or `..` above it), or that would remove or rename DIR itself, is
/// refused, counted, and the first five listed; links the trace made are recreated, but never
/// followed out. A call whose result differs from the trace's (another errno, a short read,
/// another size) is a mismatch: listed and counted. The last line is `replayed N calls, M
/// mismatches`; the exit code is 1 when there were mismatches. Progress shows on a terminal.
#[derive(Args, Debug)]
pub struct ReplayArgs {
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
}

impl ReplayArgs {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        let ReplayArgs {
            trace,
            dir,
            root,
            timing,
            output,
            list,
            max_memory,
            sparse,
        } = self;
        Ok(Command::Replay(tools::replay::ReplayConfig {
            trace,
            dir,
            root,
            timing,
            output,
            list,
            max_memory: max_memory.map(|m| m.saturating_mul(1 << 20)),
            sparse,
        }))
    }
}

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// List the calls like strace, in the order they started: seconds since the program
    /// started, pid/tid, the call with its arguments, its result (-1 ENOENT for an error) and
    /// its latency in seconds. Each program a process started (the command, each exec) has a
    /// line `+++ exec "PATH", comm "NAME" +++` where it started (not with --call). A trace cut
    /// short is listed up to the cut, and the torn tail is reported on standard error.
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
    /// (between a thread's calls); each process named by the programs it ran (command name
    /// and path; a fork child by its parent's). The response time per call is a log2 profile
    /// (layer `user`, and `user@pid:N` per process), which --output writes for every other
    /// command.
    Stats {
        /// The trace.
        #[arg(value_name = "FILE")]
        trace: PathBuf,
        /// Write the response-time profile to this file (JSON if it ends in .json, else text).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

impl TraceCmd {
    /// The checked command.
    pub fn command(self, _cx: &Context) -> Result<Command, Error> {
        Ok(match self {
            TraceCmd::Show { trace, pids, calls } => {
                Command::TraceShow(tools::trace::TraceShowConfig { trace, pids, calls })
            }
            TraceCmd::Stats { trace, output } => {
                Command::TraceStats(tools::trace::TraceStatsConfig { trace, output })
            }
        })
    }
}
