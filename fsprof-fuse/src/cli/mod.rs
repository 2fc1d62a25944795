//! Command-line options shared by the programs that mount and profile: `fsprof-fuse`, `raif`
//! and `fsprof profile`. One definition, so that they cannot drift:
//!
//! * [`RecordingArgs`]: what every one of them takes: how the profile is recorded
//!   ([`ProfileArgs`]), the request records ([`RecordArgs`]), how requests are served
//!   ([`ServeArgs`]) and cached ([`CacheArgs`]);
//! * [`DaemonArgs`] and [`ControlArgs`]: what only the two daemons take (background mode,
//!   logs, the control files' names).
//!
//! The option structs live in [`record`] and [`serve`], their value parsers in [`values`];
//! here are the one-line usage errors and the logger.

pub mod record;
pub mod serve;
pub mod values;

use std::process::ExitCode;

use clap::Args;

pub use record::{ProfileArgs, RecordArgs, check_recordable};
pub use serve::{CacheArgs, ControlArgs, DaemonArgs, ServeArgs};
pub use values::{secs, span_arg, time_arg};

/// The options of every program that records a profile (`fsprof-fuse`, `raif`, `fsprof
/// profile`), flattened into each one's arguments. A program that can record nothing (the
/// daemons' `--no-profile`) refuses the recording options with it.
#[derive(Args, Debug, Clone)]
pub struct RecordingArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub profile: ProfileArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub records: RecordArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub cache: CacheArgs,
}

impl RecordingArgs {
    /// The ids of the options that ask for something to be recorded, for a `--no-profile`
    /// flag to conflict with.
    pub const RECORDING: [&'static str; 10] = [
        "epoch",
        "slow",
        "slowest",
        "breakdown",
        "inject",
        "inject_file",
        "by",
        "hot_files",
        "metrics",
        "list_control",
    ];
}

/// A clap error as one line on stderr, exit code 2 (`--help` and `--version` print normally).
pub fn usage_error(program: &str, e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    eprintln!(
        "{program}: {} (see --help)",
        one_line(&e.render().to_string())
    );
    ExitCode::from(2)
}

/// The message part of a rendered clap error, joined into one line.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Installs `env_logger` at `level` (`RUST_LOG` overrides), with millisecond timestamps.
pub fn init_logging(level: &str) {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    if std::env::var_os("RUST_LOG").is_none() {
        // fuser warns when its own unmount-on-drop finds the mount already gone, which is how
        // every clean unmount ends here; its own comment calls this not necessarily an error.
        logger.filter_module("fuser::mnt", log::LevelFilter::Error);
        logger.filter_module("fuser::session", log::LevelFilter::Error);
    }
    logger.format_timestamp_millis().init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let r = "error: unexpected argument '--bogus' found\n\n  tip: x\n\nUsage: p\n";
        assert_eq!(one_line(r), "unexpected argument '--bogus' found");
    }
}
