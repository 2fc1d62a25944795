//! `fsprof-bench`: runs benchmark suites against several file-system targets side by side.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchmarks::harness::progress::Bar;
use benchmarks::harness::{self, Plan, SUITES, target};
use clap::Parser;

/// The largest `--scale`: every workload's counts and sizes stay far from overflowing.
const MAX_SCALE: f64 = 1000.0;

/// The name in messages.
const PROGRAM: &str = "fsprof-bench";

/// Runs named suites against a list of targets (each on a fresh lower directory, mounted and
/// unmounted per run), prints medians, ranges and ratios to the first target, and appends them
/// with the machine's facts to RESULTS.md in the current directory (or --results FILE).
///
/// Targets: native, nomount (native with the syscall level timing every file-system call of
/// the workload in the kernel, as `fsprof profile --no-mount` does), fsprof-fuse-noprofile,
/// fsprof-fuse, raif:LEVEL:N (e.g. raif:5:4), bindfs, unionfs-fuse, mergerfs, loggedfs,
/// passthrough_hp (libfuse's, run with --nopassthrough); `peers` stands for bindfs,
/// unionfs-fuse, mergerfs and loggedfs. fsprof-fuse,
/// fsprof-fuse-noprofile, raif:LEVEL:N and passthrough_hp with `+uring` run over FUSE over
/// io_uring (`--uring`; `-o io_uring` for passthrough_hp). fsprof-fuse[+uring] with `+scrape`
/// serves `--metrics` on a free loopback port and is scraped every 100 ms while the workload
/// runs (`fsprof-fuse fsprof-fuse+scrape`: what a fast Prometheus costs); with `+kernel` it records the kernel's layers (`--kernel`: what tracing the kernel costs); with `+records` it
/// keeps the slow log and per-uid profiles (`--slow 10ms --by uid`: what request records
/// cost). Any target with a daemon takes extra daemon options last, in brackets, separated
/// by spaces, no comma (quote them for the shell): `'fsprof-fuse+uring[--cache=exact]'`,
/// `'fsprof-fuse+uring[--entry-timeout=0s --threads=1]'`, `'raif:1:2[--cache=fast]'`; the
/// name with its options labels the results. Targets whose program
/// is missing are skipped with a message. If a target never ran successfully on some workload,
/// the table is printed but not recorded, and the exit status is 1.
///
/// Each run's figures are printed on standard error as it ends; when standard error is a
/// terminal, a progress bar below them shows the run under way (suite, target, run i/n), the
/// runs done, the time so far and an estimate of the time left.
#[derive(Debug, Parser)]
#[command(name = "fsprof-bench", version)]
struct Args {
    /// Suites, comma-separated: postmark-thesis, postmark-raif, metadata, grep, seqread,
    /// randread, clients, or all (those seven); postmark-reference (the reference Postmark
    /// configuration: 10,000 files of 512 B-10 KiB, 150,000 transactions, 60 subdirectories,
    /// 4 KiB unbuffered I/O, seed 42, at --scale 1) and metadata-flat (metadata's phases on
    /// 20,000 files in one directory) run only when named. metadata: create, stat after
    /// drop_caches, stat again, find after drop_caches and unlink of 20,000 empty files in 100
    /// directories, and `git status` (after drop_caches, then again) in a committed copy of the
    /// files of the workspace fsprof-bench was built from.
    #[arg(short, long, value_delimiter = ',', default_value = "all")]
    suite: Vec<String>,

    /// Targets, comma-separated; the first is the reference for ratios.
    #[arg(
        short,
        long,
        value_delimiter = ',',
        default_value = "native,fsprof-fuse-noprofile,fsprof-fuse,peers"
    )]
    targets: Vec<String>,

    /// Runs of each workload on each target (targets alternate); fewer than 3 draw a warning
    /// and are marked in the results.
    #[arg(short, long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,

    /// Drop the page cache before each measurement (needs root).
    #[arg(long)]
    cold: bool,

    /// Pause between the clean-up of one run and the start of the next (after a sync), with
    /// its unit (65s, 1m). On ext4 without a journal, creating files within 60 s of deleting
    /// many is slow (the allocator skips recently freed inodes one by one), so a run would pay
    /// for the previous run's deletions: 65s makes create-heavy runs independent there.
    #[arg(long, value_name = "TIME", default_value = "0s", value_parser = benchmarks::cli::time_arg)]
    settle: Duration,

    /// Multiplies every workload's size (1 = the sizes in the suite table; postmark-thesis at
    /// 10 is the thesis's configuration). At most 1000 (seqread then writes 256 GiB).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,

    /// Directory for the run directories (lower directories and mount points).
    #[arg(long, default_value = "/tmp/fsprof-bench")]
    work_dir: PathBuf,

    /// fsprof-fuse binary (default: next to this program).
    #[arg(long, value_name = "PATH")]
    fsprof_fuse: Option<PathBuf>,

    /// raif binary (default: next to this program).
    #[arg(long, value_name = "PATH")]
    raif: Option<PathBuf>,

    /// libfuse's passthrough_hp (default: found in PATH), built from libfuse 3.18+ with
    /// `meson setup -Denable-io-uring=true` for the passthrough_hp+uring target.
    #[arg(long, value_name = "PATH")]
    passthrough_hp: Option<PathBuf>,

    /// fsprof-postmark binary (default: next to this program).
    #[arg(long, value_name = "PATH")]
    postmark: Option<PathBuf>,

    /// Source tree copied for the grep suite (default: the cargo registry sources).
    #[arg(long, value_name = "DIR")]
    grep_source: Option<PathBuf>,

    /// Markdown file the results are appended to (created with a header if missing). The
    /// default is RESULTS.md in the current directory; give benchmarks/RESULTS.md of a
    /// checkout to add a run to the project's record.
    #[arg(long, value_name = "FILE", default_value = "RESULTS.md")]
    results: PathBuf,

    /// Run the harness, every workload and every daemon on this one CPU. On a VM, a wake-up
    /// on another virtual CPU can cost more than a FUSE request's own work and varies from run
    /// to run with the scheduler's placement; pinned, every target runs under the same
    /// placement and the comparison is of the file systems themselves. Not for the clients
    /// suite, whose point is concurrency.
    #[arg(long, value_name = "CPU")]
    pin: Option<usize>,

    /// A note recorded with the results (what the run is for, what was left out).
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,

    /// Do not append to the results file (print only).
    #[arg(long)]
    no_record: bool,

    /// Also write every sample as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, default_value = "warn")]
    log_level: String,
}

fn plan(args: &Args) -> Result<Plan, String> {
    let mut targets = Vec::new();
    for t in &args.targets {
        if t == "peers" {
            for p in ["bindfs", "unionfs-fuse", "mergerfs", "loggedfs"] {
                targets.push(target::Target::parse(p)?);
            }
        } else {
            targets.push(target::Target::parse(t)?);
        }
    }
    let mut suites = Vec::new();
    for s in &args.suite {
        if s == "all" {
            suites.extend(SUITES.iter().map(|s| s.to_string()));
        } else if harness::is_suite(s) {
            suites.push(s.clone());
        } else {
            return Err(format!(
                "unknown suite '{s}': expected {}",
                harness::suite_choices()
            ));
        }
    }
    if !(args.scale > 0.0 && args.scale <= MAX_SCALE) {
        return Err(format!(
            "--scale must be above 0 and at most {MAX_SCALE}, not {:?}",
            args.scale
        ));
    }
    let postmark = args
        .postmark
        .clone()
        .or_else(|| target::sibling("fsprof-postmark"))
        .ok_or("fsprof-postmark not found next to fsprof-bench: build it or pass --postmark")?;
    let work_dir =
        std::path::absolute(&args.work_dir).map_err(|e| format!("bad --work-dir: {e}"))?;
    Ok(Plan {
        suites,
        targets,
        runs: args.runs,
        cold: args.cold,
        settle: args.settle,
        work_dir,
        scale: args.scale,
        binaries: target::Binaries {
            fsprof_fuse: args
                .fsprof_fuse
                .clone()
                .or_else(|| target::sibling("fsprof-fuse")),
            raif: args.raif.clone().or_else(|| target::sibling("raif")),
            passthrough_hp: args.passthrough_hp.clone(),
        },
        postmark,
        grep_source: args
            .grep_source
            .clone()
            .unwrap_or_else(harness::default_grep_source),
        note: args.note.clone(),
        pin: args.pin,
    })
}

fn run(args: Args) -> Result<(), (String, u8)> {
    let plan = plan(&args).map_err(|e| (e, 2))?;
    benchmarks::sys::catch_interrupts();
    let command = std::env::args()
        .map(|a| harness::results::shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let report = match Bar::on_terminal() {
        Some(mut bar) => {
            let r = harness::run(&plan, &mut bar);
            bar.finish();
            r
        }
        None => harness::run(&plan, &mut |line: &str| eprintln!("{line}")),
    }
    .map_err(|e| (e, 1))?;
    let md = report.markdown(&plan, &command, started);
    print!("{md}");
    if let Some(j) = &args.json {
        let s = serde_json::to_string_pretty(&report).expect("serializable");
        std::fs::write(j, s).map_err(|e| (format!("cannot write '{}': {e}", j.display()), 1))?;
    }
    let failures = report.failures();
    if let Some(first) = failures.first() {
        // A table with a target that never ran is no result: print it, do not record it.
        return Err((
            format!(
                "{} workload/target pair{} without a successful run (first: {} on {}: {}); \
                 not recorded",
                failures.len(),
                if failures.len() == 1 { "" } else { "s" },
                first.label,
                first.target,
                first.error
            ),
            1,
        ));
    }
    if !args.no_record {
        harness::append_results(&args.results, &md).map_err(|e| (e, 1))?;
        eprintln!("appended to {}", args.results.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Some(dir) = cli_support::docs_request() {
        return cli_support::docs_main(<Args as clap::CommandFactory>::command(), &dir);
    }
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => return cli_support::usage_error(PROGRAM, e),
    };
    env_logger::Builder::new()
        .parse_filters(&args.log_level)
        .parse_default_env()
        .init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((msg, code)) => {
            eprintln!("{PROGRAM}: {msg}");
            ExitCode::from(code)
        }
    }
}
