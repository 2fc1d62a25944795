//! The Postmark command language: one command per line.
//!
//! ```text
//! set size LOW [HIGH]        set number N           set seed N
//! set transactions N         set subdirectories N   set read N      set write N
//! set location DIR [WEIGHT]  set location +DIR [WEIGHT]   set location -DIR
//! set buffering true|false   set bias read -1..10   set bias create -1..10
//! set report verbose|terse   run [FILE]   load FILE   show [FILE]   help [PREFIX]   quit
//! ```
//!
//! Postmark itself prints `Eh?` for a line it does not understand and keeps the old value for a
//! number it rejects; as a benchmark input that hides mistakes, so here every such line is an
//! error. Words are separated by any whitespace; blank lines and lines starting with `#` are
//! skipped; `?` means `help` and `exit` means `quit`, as in Postmark. Numbers are decimal and, as
//! in Postmark, must be positive (biases: -1 to 10).

use std::path::PathBuf;

use crate::config::{MAX_SETTING, ReportFormat};

/// How `set location` changes the list of working directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationChange {
    /// `set location DIR [WEIGHT]`: DIR becomes the only location.
    Replace(PathBuf, u32),
    /// `set location +DIR [WEIGHT]`: adds DIR.
    Add(PathBuf, u32),
    /// `set location -DIR`: removes DIR.
    Remove(PathBuf),
}

/// One parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `set size LOW [HIGH]` (HIGH defaults to LOW).
    Size(u32, u32),
    /// `set number N`.
    Number(u32),
    /// `set seed N`.
    Seed(u32),
    /// `set transactions N`.
    Transactions(u32),
    /// `set location ...`.
    Location(LocationChange),
    /// `set subdirectories N`.
    Subdirectories(u32),
    /// `set read N`.
    ReadBlock(u32),
    /// `set write N`.
    WriteBlock(u32),
    /// `set buffering true|false`.
    Buffering(bool),
    /// `set bias read N`.
    BiasRead(i32),
    /// `set bias create N`.
    BiasCreate(i32),
    /// `set report verbose|terse`.
    Report(ReportFormat),
    /// `run [FILE]`: run once; the report is appended to FILE if given.
    Run(Option<PathBuf>),
    /// `load FILE`: read commands from FILE.
    Load(PathBuf),
    /// `show [FILE]`: print the configuration (appended to FILE if given).
    Show(Option<PathBuf>),
    /// `help [PREFIX]`.
    Help(Option<String>),
    /// `quit`.
    Quit,
}

fn positive(word: Option<&str>, what: &str) -> Result<u32, String> {
    let w = word.ok_or_else(|| format!("missing {what}"))?;
    match w.parse::<u64>() {
        Ok(n) if n >= 1 && n <= MAX_SETTING as u64 => Ok(n as u32),
        Ok(_) => Err(format!(
            "{what} must be between 1 and {MAX_SETTING}, not {w}"
        )),
        Err(_) => Err(format!("bad {what} '{w}': expected a positive integer")),
    }
}

fn positive_int(word: Option<&str>, what: &str) -> Result<u32, String> {
    let w = word.ok_or_else(|| format!("missing {what}"))?;
    match w.parse::<u64>() {
        Ok(n) if n >= 1 && n <= i32::MAX as u64 => Ok(n as u32),
        Ok(_) => Err(format!(
            "{what} must be between 1 and {}, not {w}",
            i32::MAX
        )),
        Err(_) => Err(format!("bad {what} '{w}': expected a positive integer")),
    }
}

fn bias(word: Option<&str>) -> Result<i32, String> {
    let w = word.ok_or("missing bias (0-10 for greater chance, -1 to disable)")?;
    match w.parse::<i32>() {
        Ok(n) if (-1..=10).contains(&n) => Ok(n),
        _ => Err(format!(
            "bad bias '{w}': expected 0-10 for greater chance, -1 to disable"
        )),
    }
}

fn no_more(words: &mut std::str::SplitWhitespace<'_>) -> Result<(), String> {
    match words.next() {
        None => Ok(()),
        Some(w) => Err(format!("unexpected '{w}' at end of command")),
    }
}

fn location(rest: &[&str]) -> Result<LocationChange, String> {
    let Some(first) = rest.first() else {
        return Err("missing directory name".into());
    };
    if rest.len() > 2 {
        return Err("expected DIR [WEIGHT] (directory names with spaces are not supported)".into());
    }
    let weight = match rest.get(1) {
        Some(w) => positive(Some(w), "weight")?,
        None => 1,
    };
    let (kind, path) = match first.as_bytes()[0] {
        b'+' => ('+', &first[1..]),
        b'-' => ('-', &first[1..]),
        _ => (' ', *first),
    };
    if path.is_empty() {
        return Err("missing directory name".into());
    }
    let path = PathBuf::from(path);
    Ok(match kind {
        '+' => LocationChange::Add(path, weight),
        '-' if rest.len() == 1 => LocationChange::Remove(path),
        '-' => return Err("'set location -DIR' takes no weight".into()),
        _ => LocationChange::Replace(path, weight),
    })
}

/// Parses one line. `Ok(None)` for a blank line or a `#` comment.
pub fn parse_line(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    if line.starts_with('!') {
        return Err("shell escapes ('!') are not supported".into());
    }
    let mut words = line.split_whitespace();
    let first = words.next().unwrap_or_default();
    let cmd = match first {
        "set" => {
            let what = words.next().ok_or("missing setting after 'set'")?;
            let cmd = match what {
                "size" => {
                    let low = positive(words.next(), "low file size")?;
                    let high = match words.next() {
                        Some(w) => positive(Some(w), "high file size")?,
                        None => low,
                    };
                    if high < low {
                        return Err(format!(
                            "high file size {high} is below low file size {low}"
                        ));
                    }
                    Command::Size(low, high)
                }
                "number" => Command::Number(positive(words.next(), "number of files")?),
                "seed" => Command::Seed(positive_int(words.next(), "seed")?),
                "transactions" => {
                    Command::Transactions(positive_int(words.next(), "number of transactions")?)
                }
                "subdirectories" => {
                    Command::Subdirectories(positive(words.next(), "number of subdirectories")?)
                }
                "read" => Command::ReadBlock(positive(words.next(), "read block size")?),
                "write" => Command::WriteBlock(positive(words.next(), "write block size")?),
                "buffering" => match words.next() {
                    Some("true") => Command::Buffering(true),
                    Some("false") => Command::Buffering(false),
                    Some(w) => {
                        return Err(format!("bad buffering mode '{w}': expected true or false"));
                    }
                    None => return Err("missing buffering mode (true or false)".into()),
                },
                "bias" => match words.next() {
                    Some("read") => Command::BiasRead(bias(words.next())?),
                    Some("create") => Command::BiasCreate(bias(words.next())?),
                    Some(w) => return Err(format!("unknown bias '{w}': expected read or create")),
                    None => return Err("missing bias kind (read or create)".into()),
                },
                "report" => match words.next() {
                    Some("verbose") => Command::Report(ReportFormat::Verbose),
                    Some("terse") => Command::Report(ReportFormat::Terse),
                    Some(w) => {
                        return Err(format!(
                            "bad report format '{w}': expected verbose or terse"
                        ));
                    }
                    None => return Err("missing report format (verbose or terse)".into()),
                },
                "location" => {
                    let rest: Vec<&str> = words.by_ref().collect();
                    Command::Location(location(&rest)?)
                }
                other => return Err(format!("unknown setting 'set {other}' (try 'help set')")),
            };
            no_more(&mut words)?;
            return Ok(Some(cmd));
        }
        "run" => Command::Run(words.next().map(PathBuf::from)),
        "load" => Command::Load(PathBuf::from(
            words.next().ok_or("missing configuration file name")?,
        )),
        "show" => Command::Show(words.next().map(PathBuf::from)),
        "help" | "?" => Command::Help(words.next().map(|w| {
            // Postmark matches the whole rest of the line as a prefix.
            std::iter::once(w)
                .chain(words.by_ref())
                .collect::<Vec<_>>()
                .join(" ")
        })),
        "quit" | "exit" => Command::Quit,
        other => return Err(format!("unknown command '{other}' (try 'help')")),
    };
    no_more(&mut words)?;
    Ok(Some(cmd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Command {
        parse_line(s).unwrap().unwrap()
    }

    #[test]
    fn figure_6_1_parses() {
        assert_eq!(p("set size 512 10240"), Command::Size(512, 10240));
        assert_eq!(p("set number 20000"), Command::Number(20000));
        assert_eq!(p("set seed 42"), Command::Seed(42));
        assert_eq!(p("set transactions 200000"), Command::Transactions(200000));
        assert_eq!(
            p("set location /n/test/fsprof"),
            Command::Location(LocationChange::Replace("/n/test/fsprof".into(), 1))
        );
        assert_eq!(p("set subdirectories 600"), Command::Subdirectories(600));
        assert_eq!(p("set read 4096"), Command::ReadBlock(4096));
        assert_eq!(p("set write 4096"), Command::WriteBlock(4096));
        assert_eq!(p("set buffering false"), Command::Buffering(false));
        assert_eq!(p("set bias read 5"), Command::BiasRead(5));
        assert_eq!(p("set bias create -1"), Command::BiasCreate(-1));
        assert_eq!(p("run"), Command::Run(None));
        assert_eq!(p("quit"), Command::Quit);
        assert_eq!(p("exit"), Command::Quit);
        assert_eq!(p("?"), Command::Help(None));
    }

    #[test]
    fn size_defaults_high_to_low() {
        assert_eq!(p("set size 100"), Command::Size(100, 100));
    }

    #[test]
    fn locations() {
        assert_eq!(
            p("set location +/a 3"),
            Command::Location(LocationChange::Add("/a".into(), 3))
        );
        assert_eq!(
            p("set location -/a"),
            Command::Location(LocationChange::Remove("/a".into()))
        );
        assert!(parse_line("set location").is_err());
        assert!(parse_line("set location /a b").is_err());
        assert!(parse_line("set location /a 1 2").is_err());
    }

    #[test]
    fn blank_and_comments_are_skipped() {
        assert_eq!(parse_line("").unwrap(), None);
        assert_eq!(parse_line("   # note").unwrap(), None);
    }

    #[test]
    fn errors() {
        for bad in [
            "set number 0",
            "set number -3",
            "set number 12abc",
            "set number",
            "set seed 3000000000",
            "set size 200 100",
            "set bias read 11",
            "set bias read -2",
            "set buffering yes",
            "set report short",
            "set colour blue",
            "runx",
            "run a b",
            "frobnicate",
            "!ls",
            "load",
            "set number 5 6",
        ] {
            assert!(parse_line(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn help_prefix_keeps_spaces() {
        assert_eq!(p("help set bias"), Command::Help(Some("set bias".into())));
    }
}
