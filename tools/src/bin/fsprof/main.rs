//! `fsprof`: analyse FSprof latency profiles. Parses flags into a [`tools::Command`], sets up
//! logging, runs it, and maps errors to one line on standard error and an exit code (2 for
//! usage, input and output errors, 1 when `check` finds problems).

mod args;
mod compare;
mod record;
mod view;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use args::Context;
use compare::{CompareArgs, DiffArgs, ExportArgs, MergeArgs, PlotArgs};
use record::{ProfileArgs, ReplayArgs, RunArgs, TraceCmd};
use tools::background::Shares;
use tools::show::{ColorMode, use_color};
use tools::{Command, Common, Error};
use view::{
    CheckArgs, FilesArgs, PeaksArgs, ReportArgs, ShowArgs, SlowArgs, StackArgs, SummaryArgs,
    TopArgs, WhyArgs,
};

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

// Made once per run and matched once: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    Profile(ProfileArgs),
    Report(ReportArgs),
    Run(RunArgs),
    /// Read a trace written by `fsprof run --trace`: list it or measure it.
    #[command(subcommand)]
    Trace(TraceCmd),
    Replay(ReplayArgs),
    Show(ShowArgs),
    Summary(SummaryArgs),
    Check(CheckArgs),
    Peaks(PeaksArgs),
    Stack(StackArgs),
    Compare(CompareArgs),
    Diff(DiffArgs),
    Plot(PlotArgs),
    Export(ExportArgs),
    Why(WhyArgs),
    Files(FilesArgs),
    Slow(SlowArgs),
    Merge(MergeArgs),
    Top(TopArgs),
}

impl Cmd {
    /// The checked command, from each subcommand's own options.
    fn command(self, cx: &Context) -> Result<Command, Error> {
        match self {
            Cmd::Profile(a) => a.command(cx),
            Cmd::Report(a) => a.command(cx),
            Cmd::Run(a) => a.command(cx),
            Cmd::Trace(a) => a.command(cx),
            Cmd::Replay(a) => a.command(cx),
            Cmd::Show(a) => a.command(cx),
            Cmd::Summary(a) => a.command(cx),
            Cmd::Check(a) => a.command(cx),
            Cmd::Peaks(a) => a.command(cx),
            Cmd::Stack(a) => a.command(cx),
            Cmd::Compare(a) => a.command(cx),
            Cmd::Diff(a) => a.command(cx),
            Cmd::Plot(a) => a.command(cx),
            Cmd::Export(a) => a.command(cx),
            Cmd::Why(a) => a.command(cx),
            Cmd::Files(a) => a.command(cx),
            Cmd::Slow(a) => a.command(cx),
            Cmd::Merge(a) => a.command(cx),
            Cmd::Top(a) => a.command(cx),
        }
    }
}

/// Turns flags into a checked command.
fn configure(cli: Cli, color: bool) -> Result<Command, Error> {
    let cx = Context {
        color,
        shares: Shares {
            with_background: cli.with_background,
        },
        cycles_per_sec: cli.cycles_per_sec,
    };
    cli.command.command(&cx)
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
    if let Some(dir) = cli_support::docs_request() {
        return cli_support::docs_main(<Cli as clap::CommandFactory>::command(), &dir);
    }
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks of the definition (conflicts and requirements name real options):
    /// run in debug builds only, so a test makes them run under `cargo test --release` too.
    #[test]
    fn the_options_are_consistent() {
        super::Cli::command().debug_assert();
    }
}
