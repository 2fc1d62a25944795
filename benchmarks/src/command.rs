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
//! Lines are read two ways:
//!
//! * [`parse_postmark`] reads them as Postmark 1.5 does. A line is the first command whose
//!   name it starts with, and the rest after one more character is the argument; numbers are
//!   read with C's `atoi` (leading digits, so `9x` is 9 and `ten` is 0). A line that matches
//!   no command (a blank line and a `#` comment included) is answered `Eh?`; a bad argument
//!   with Postmark's `Error: ...` line, keeping the old value; either way the next line is
//!   read. At the prompt, `?` means `help` and `exit` means `quit`.
//! * [`parse_line`] reads them strictly (`fsprof-postmark --strict`): words separated by any
//!   white space, whole numbers only, nothing left over, blank lines and `#` comments skipped,
//!   `?` and `exit` everywhere; anything else is an error with its line, which ends the session,
//!   so that a mistake in a benchmark's configuration cannot pass unnoticed.
//!
//! Numbers must be positive (biases: -1 to 10) and, where Postmark would overflow, at most
//! [`MAX_SETTING`]. Shell escapes (`!`) are not supported.

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

/// One thing Postmark does for a line, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Runs a command.
    Command(Command),
    /// Prints `Error: MESSAGE` on standard error (the setting keeps its value).
    Error(String),
    /// Prints `Eh?`: not a command.
    Eh,
}

/// Postmark's command table, in its order (the first name a line starts with wins).
const NAMES: [&str; 17] = [
    "set size",
    "set number",
    "set seed",
    "set transactions",
    "set location",
    "set subdirectories",
    "set read",
    "set write",
    "set buffering",
    "set bias read",
    "set bias create",
    "set report",
    "run",
    "load",
    "show",
    "help",
    "quit",
];

/// C's `atoi` as glibc computes it: leading white space, an optional sign, the digits up to
/// the first non-digit (none: 0); out-of-range values clamp as `strtol` does, then the `long`
/// is cut to an `int`.
pub fn atoi(s: &str) -> i32 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    let mut overflow = false;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(i64::from(b - b'0')))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
    }
    let v = match (overflow, negative) {
        (true, true) => i64::MIN,
        (true, false) => i64::MAX,
        (false, true) => -v,
        (false, false) => v,
    };
    v as i32
}

/// A positive setting as Postmark reads it (`atoi` > 0), at most `max`; else `error`.
fn postmark_positive(param: Option<&str>, max: u32, error: &str) -> Result<u32, Step> {
    match param.map(atoi) {
        Some(v) if v > 0 && v as u32 <= max => Ok(v as u32),
        _ => Err(Step::Error(error.to_string())),
    }
}

/// A bias as Postmark reads it.
fn postmark_bias(param: Option<&str>) -> Result<i32, Step> {
    match param.map(atoi) {
        Some(v) if (-1..=10).contains(&v) => Ok(v),
        _ => Err(Step::Error(
            "no bias specified (0-10 for greater chance,-1 to disable)".into(),
        )),
    }
}

/// `set location`'s argument as Postmark splits it: the name, and a weight after its last
/// space (a weight that is not positive is reported and taken as 1).
fn postmark_weighted(param: &str, steps: &mut Vec<Step>) -> (PathBuf, u32) {
    match param.rsplit_once(' ') {
        Some((name, w)) => {
            let weight = match atoi(w) {
                v if v > 0 && v as u32 <= MAX_SETTING => v as u32,
                _ => {
                    steps.push(Step::Error(format!("ignoring invalid weight '{w}'")));
                    1
                }
            };
            (PathBuf::from(name), weight)
        }
        None => (PathBuf::from(param), 1),
    }
}

/// Reads one line as Postmark 1.5 does (see the module documentation): what it does for it,
/// in order. `prompted` is true for lines typed at the `pm>` prompt, where `?` and `exit` are
/// aliases.
pub fn parse_postmark(line: &str, prompted: bool) -> Vec<Step> {
    let line = match line {
        "?" if prompted => "help",
        "exit" if prompted => "quit",
        l => l,
    };
    if line.starts_with('!') {
        return vec![Step::Error("shell escapes ('!') are not supported".into())];
    }
    let Some(name) = NAMES.iter().find(|n| line.starts_with(**n)) else {
        return vec![Step::Eh];
    };
    // The argument starts one character after the name, whatever that character is.
    let param = line[name.len()..]
        .chars()
        .next()
        .map(|c| &line[name.len() + c.len_utf8()..]);
    let path = |p: &str| PathBuf::from(p);
    let mut steps = Vec::new();
    let step = (|| -> Result<Command, Step> {
        Ok(match *name {
            "set size" => {
                let low = postmark_positive(
                    param,
                    MAX_SETTING,
                    "no file size low or high bounds specified",
                )?;
                // The high bound is read after the first space, if it is a valid one.
                let high = param
                    .and_then(|p| p.find(' ').map(|i| atoi(&p[i..])))
                    .filter(|&h| h > 0 && h as u32 >= low && h as u32 <= MAX_SETTING)
                    .map_or(low, |h| h as u32);
                Command::Size(low, high)
            }
            "set number" => Command::Number(postmark_positive(
                param,
                MAX_SETTING,
                "invalid number of files",
            )?),
            "set seed" => Command::Seed(postmark_positive(
                param,
                i32::MAX as u32,
                "invalid seed for random numbers",
            )?),
            "set transactions" => Command::Transactions(postmark_positive(
                param,
                i32::MAX as u32,
                "no transactions specified",
            )?),
            "set subdirectories" => Command::Subdirectories(postmark_positive(
                param,
                MAX_SETTING,
                "invalid number of subdirectories",
            )?),
            "set read" => Command::ReadBlock(postmark_positive(
                param,
                MAX_SETTING,
                "invalid read block size",
            )?),
            "set write" => Command::WriteBlock(postmark_positive(
                param,
                MAX_SETTING,
                "invalid write block size",
            )?),
            "set buffering" => match param {
                Some("true") => Command::Buffering(true),
                Some("false") => Command::Buffering(false),
                _ => {
                    return Err(Step::Error(
                        "no buffering mode (true/false) specified".into(),
                    ));
                }
            },
            "set bias read" => Command::BiasRead(postmark_bias(param)?),
            "set bias create" => Command::BiasCreate(postmark_bias(param)?),
            "set report" => match param {
                Some("verbose") => Command::Report(ReportFormat::Verbose),
                Some("terse") => Command::Report(ReportFormat::Terse),
                _ => return Err(Step::Error("either 'verbose' or 'terse' required".into())),
            },
            "set location" => {
                let p = param
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| Step::Error("no directory name specified".into()))?;
                Command::Location(match p.as_bytes()[0] {
                    b'+' => {
                        let (d, w) = postmark_weighted(&p[1..], &mut steps);
                        LocationChange::Add(d, w)
                    }
                    b'-' => LocationChange::Remove(path(&p[1..])),
                    _ => {
                        let (d, w) = postmark_weighted(p, &mut steps);
                        LocationChange::Replace(d, w)
                    }
                })
            }
            "run" => Command::Run(param.map(path)),
            "load" => Command::Load(
                param
                    .map(path)
                    .ok_or_else(|| Step::Error("no configuration file specified".into()))?,
            ),
            "show" => Command::Show(param.map(path)),
            "help" => Command::Help(param.map(str::to_string)),
            _ => Command::Quit,
        })
    })();
    steps.push(match step {
        Ok(c) => Step::Command(c),
        Err(e) => e,
    });
    steps
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

    fn pm(s: &str) -> Vec<Step> {
        parse_postmark(s, false)
    }

    fn err(m: &str) -> Vec<Step> {
        vec![Step::Error(m.into())]
    }

    #[test]
    fn atoi_like_glibc() {
        assert_eq!(atoi("42"), 42);
        assert_eq!(atoi("  9x"), 9);
        assert_eq!(atoi("ten"), 0);
        assert_eq!(atoi("-1"), -1);
        assert_eq!(atoi("+7 8"), 7);
        assert_eq!(atoi(""), 0);
        // strtol clamps to LONG_MAX, which cut to an int is -1.
        assert_eq!(atoi("99999999999999999999"), -1);
        assert_eq!(atoi("4294967297"), 1);
    }

    /// What Debian's postmark does with each line (checked against it by hand, and in the
    /// integration tests): settings read with atoi, `Eh?` for what is not a command.
    #[test]
    fn lines_as_postmark_reads_them() {
        assert_eq!(pm("set number 9x"), vec![Step::Command(Command::Number(9))]);
        assert_eq!(
            pm("set number 7 8"),
            vec![Step::Command(Command::Number(7))]
        );
        assert_eq!(pm("set number 0"), err("invalid number of files"));
        assert_eq!(pm("set number"), err("invalid number of files"));
        assert_eq!(pm("set seed -1"), err("invalid seed for random numbers"));
        assert_eq!(pm("set transactions x"), err("no transactions specified"));
        assert_eq!(
            pm("set size 900 100"),
            vec![Step::Command(Command::Size(900, 900))]
        );
        assert_eq!(
            pm("set size 100 900"),
            vec![Step::Command(Command::Size(100, 900))]
        );
        assert_eq!(
            pm("set size 0"),
            err("no file size low or high bounds specified")
        );
        assert_eq!(
            pm("set bias read 11"),
            err("no bias specified (0-10 for greater chance,-1 to disable)")
        );
        assert_eq!(
            pm("set bias create -1"),
            vec![Step::Command(Command::BiasCreate(-1))]
        );
        assert_eq!(
            pm("set buffering yes"),
            err("no buffering mode (true/false) specified")
        );
        assert_eq!(
            pm("set report x"),
            err("either 'verbose' or 'terse' required")
        );
        assert_eq!(pm("set location"), err("no directory name specified"));
        assert_eq!(
            pm("set location /a b 0"),
            vec![
                Step::Error("ignoring invalid weight '0'".into()),
                Step::Command(Command::Location(LocationChange::Replace("/a b".into(), 1)))
            ]
        );
        assert_eq!(
            pm("set location +/a 3"),
            vec![Step::Command(Command::Location(LocationChange::Add(
                "/a".into(),
                3
            )))]
        );
        assert_eq!(
            pm("set location -/a 3"),
            vec![Step::Command(Command::Location(LocationChange::Remove(
                "/a 3".into()
            )))]
        );
        assert_eq!(pm("load"), err("no configuration file specified"));
        assert_eq!(pm("run"), vec![Step::Command(Command::Run(None))]);
        assert_eq!(
            pm("run out"),
            vec![Step::Command(Command::Run(Some("out".into())))]
        );
        // Postmark matches the start of the line: `runx` runs, reporting to the file ''.
        assert_eq!(
            pm("runx"),
            vec![Step::Command(Command::Run(Some("".into())))]
        );
        for eh in [
            "",
            "# comment",
            "  set number 5",
            "set  number 5",
            "frobnicate",
            "set colour",
        ] {
            assert_eq!(pm(eh), vec![Step::Eh], "{eh:?}");
        }
        // Aliases only at the prompt.
        assert_eq!(pm("?"), vec![Step::Eh]);
        assert_eq!(
            parse_postmark("?", true),
            vec![Step::Command(Command::Help(None))]
        );
        assert_eq!(pm("exit"), vec![Step::Eh]);
        assert_eq!(
            parse_postmark("exit", true),
            vec![Step::Command(Command::Quit)]
        );
        assert_eq!(pm("quit"), vec![Step::Command(Command::Quit)]);
        assert_eq!(pm("!ls").len(), 1);
        assert!(matches!(pm("!ls")[0], Step::Error(_)));
        // Multi-byte characters after a name do not split a character.
        assert_eq!(
            pm("runé"),
            vec![Step::Command(Command::Run(Some("".into())))]
        );
    }

    #[test]
    fn help_prefix_keeps_spaces() {
        assert_eq!(p("help set bias"), Command::Help(Some("set bias".into())));
    }
}
