//! `fsprof-postmark`: a Postmark 1.5-compatible file-system benchmark.

#![deny(unsafe_code)]

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use benchmarks::session::{Options, Session};
use clap::Parser;
use serde::Serialize;

/// The name in messages.
const PROGRAM: &str = "fsprof-postmark";

/// Runs Postmark commands (`set number 500`, `run`, ...) from a file, then from standard input,
/// and prints what Postmark 1.5 prints: its banner, "Reading configuration from file", a `pm>`
/// prompt before each line of standard input, its progress lines and its verbose or terse
/// report, `Eh?` for a line that is not a command and `Error: ...` for a bad setting (both
/// without stopping). Without a file, `./.pmrc` is read first if it exists, as Postmark does.
///
/// Our additions come only on request: --latency (sub-second phase times and client-side
/// latency percentiles after each report), --json, --clients, --profile, --strict.
///
/// Differences from Postmark: a missing FILE is an error (Postmark would go on to the prompt);
/// shell escapes (`!`) are refused; a failed file operation ends the run with an error naming
/// the file, where Postmark would print an error and go on.
#[derive(Debug, Parser)]
#[command(name = "fsprof-postmark", version)]
struct Args {
    /// Command file (Postmark's configuration file); without one, `./.pmrc` if it exists.
    /// Standard input is read after it unless it ends with `quit`.
    #[arg(value_name = "FILE", conflicts_with = "config")]
    file: Option<PathBuf>,

    /// Command file (same as the positional FILE).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Also print sub-second phase times and client-side latency percentiles (microseconds:
    /// mean, p50, p90, p99, p99.9, max per operation) after each report.
    #[arg(long)]
    latency: bool,

    /// Print one JSON document with every run's results, and nothing else, on standard output
    /// (no banner, prompts, progress or reports; `Eh?` goes to standard error).
    #[arg(long)]
    json: bool,

    /// Stop at the first line Postmark would answer with `Eh?` or `Error:`, and at lines it
    /// would take loosely (`set number 9x`, extra words), with the file and line and exit
    /// code 2; a location must exist when it is set. Blank lines and `#` comments are
    /// skipped. For benchmark configurations, where a mistake must not pass unnoticed.
    #[arg(long)]
    strict: bool,

    /// Run N independent clients concurrently, client I in subdirectory `clientI` of each
    /// location (created and removed by the run); results are aggregated.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    clients: u32,

    /// Give client I the seed SEED + I (default: every client uses the configured seed).
    #[arg(long)]
    distinct_seeds: bool,

    /// Write the client-side latencies of all runs as an fsprof profile (layer `client`);
    /// JSON when FILE ends in `.json`, text otherwise.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,

    /// Do not print Postmark's progress lines.
    #[arg(short, long)]
    quiet: bool,

    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, default_value = "warn")]
    log_level: String,
}

#[derive(Serialize)]
struct JsonOutput<'a> {
    tool: &'static str,
    version: &'static str,
    runs: &'a [benchmarks::report::RunSummary],
}

fn run(args: Args) -> Result<(), (String, u8)> {
    let file = args.file.or(args.config);
    if let Some(f) = &file {
        // Postmark would skip a file it cannot open; a typo should not wait at a prompt.
        std::fs::File::open(f).map_err(|e| (format!("cannot read '{}': {e}", f.display()), 2))?;
    }
    let options = Options {
        clients: args.clients,
        distinct_seeds: args.distinct_seeds,
        json: args.json,
        latency: args.latency,
        progress: !args.quiet,
        strict: args.strict,
    };
    let mut session = Session::new(options, io::stdout().lock());
    let result = session.main(file.as_deref(), io::stdin().lock());
    // The profile and JSON cover the runs that finished, even when a later command failed.
    if let Some(p) = &args.profile {
        let profile = session.profile();
        let text = if p.extension().is_some_and(|e| e == "json") {
            profile_store::json::write(&profile)
        } else {
            profile_store::text::write(&profile)
        };
        std::fs::write(p, text)
            .map_err(|e| (format!("cannot write profile '{}': {e}", p.display()), 1))?;
    }
    if args.json {
        let doc = JsonOutput {
            tool: "fsprof-postmark",
            version: env!("CARGO_PKG_VERSION"),
            runs: session.runs(),
        };
        let s = serde_json::to_string_pretty(&doc).expect("serializable");
        writeln!(session.output(), "{s}").map_err(|e| (format!("writing output: {e}"), 1))?;
    }
    let _ = session.output().flush();
    result.map_err(|e| {
        let code = e.exit_code() as u8;
        (e.to_string(), code)
    })
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
