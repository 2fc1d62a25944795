//! Command-line pieces the binaries share: one-line usage errors and durations with a unit.

use std::process::ExitCode;
use std::time::Duration;

/// A clap error as one line on standard error, `PROGRAM: MESSAGE (see --help)`, exit code 2
/// (`--help` and `--version` print as usual).
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

/// A clap value parser for a time with its unit (`65s`, `500ms`, `1m`; see
/// [`profile_store::duration`]); a bare number is refused with a one-line hint.
pub fn time_arg(s: &str) -> Result<Duration, String> {
    profile_store::duration::parse_time(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let r = "error: unexpected argument '--bogus' found\n\n  tip: x\n\nUsage: p\n";
        assert_eq!(one_line(r), "unexpected argument '--bogus' found");
    }

    #[test]
    fn times_need_a_unit() {
        assert_eq!(time_arg("65s"), Ok(Duration::from_secs(65)));
        assert!(time_arg("65").unwrap_err().contains("write 65s"));
    }
}
