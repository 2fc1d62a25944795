//! `fsprof-postmark`: a Postmark 1.5-compatible file-system benchmark.

use std::io::{self, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use benchmarks::session::{Options, Session};
use clap::Parser;
use serde::Serialize;

/// Runs Postmark commands (`set number 500`, `run`, ...) from a file or standard input and
/// prints Postmark's report, followed by sub-second timing and client-side latency
/// percentiles.
#[derive(Debug, Parser)]
#[command(name = "fsprof-postmark", version)]
struct Args {
    /// Command file (Postmark's configuration file); standard input when absent.
    #[arg(value_name = "FILE", conflicts_with = "config")]
    file: Option<PathBuf>,

    /// Command file (same as the positional FILE).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print one JSON document with every run's results instead of the text reports.
    #[arg(long)]
    json: bool,

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

    /// Print only what Postmark prints (no wall time or latency table).
    #[arg(long)]
    postmark_only: bool,

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
    let stdin = io::stdin();
    let interactive = file.is_none() && stdin.is_terminal();
    let options = Options {
        clients: args.clients,
        distinct_seeds: args.distinct_seeds,
        json: args.json,
        extras: !args.postmark_only,
        progress: !args.quiet,
        interactive,
    };
    let out = io::stdout().lock();
    let mut session = Session::new(options, out);
    session.on_error(Box::new(|e| eprintln!("Error: {e}")));
    let result = match &file {
        Some(path) => {
            let f = std::fs::File::open(path)
                .map_err(|e| (format!("cannot read '{}': {e}", path.display()), 2))?;
            session.execute(&path.display().to_string(), BufReader::new(f))
        }
        None => session.execute("<stdin>", stdin.lock()),
    };
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
    result.map(drop).map_err(|e| {
        let code = e.exit_code() as u8;
        (e.to_string(), code)
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    env_logger::Builder::new()
        .parse_filters(&args.log_level)
        .parse_default_env()
        .init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((msg, code)) => {
            eprintln!("fsprof-postmark: {msg}");
            ExitCode::from(code)
        }
    }
}
