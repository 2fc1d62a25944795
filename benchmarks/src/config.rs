//! Postmark's settings, their defaults, and the `show` and `help` texts.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

/// Largest file size, block size or number of files accepted. Postmark keeps these in C `int`s
/// and doubles two of them (`number << 1` table slots, `size_high << 1` bytes of random text),
/// so anything above 2^30 would overflow it.
pub const MAX_SETTING: u32 = 1 << 30;

/// Which report `run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// Postmark's multi-line report (the default).
    Verbose,
    /// One line of thirteen numbers.
    Terse,
}

/// One working directory and its weight (`set location DIR [WEIGHT]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The directory as written (relative paths are relative to the current directory).
    pub path: PathBuf,
    /// Relative share of new files created here. Default 1.
    pub weight: u32,
}

/// Postmark's configuration. Field docs give Postmark's defaults, which [`Config::default`]
/// reproduces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    /// Smallest file size in bytes. Default 500.
    pub size_low: u32,
    /// Largest file size in bytes (files never grow beyond it). Default 10000.
    pub size_high: u32,
    /// Files created before the transactions ("simultaneous files"). Default 500.
    pub number: u32,
    /// Seed of the random-number generator. Default 42.
    pub seed: u32,
    /// Transactions to run. Default 500.
    pub transactions: u32,
    /// Working directories; empty means the current directory. Default empty.
    pub locations: Vec<Location>,
    /// Subdirectories `s0`.. per location; used when greater than 1. Default 0.
    pub subdirectories: u32,
    /// Read block size in bytes. Default 512.
    pub read_block: u32,
    /// Write block size in bytes. Default 512.
    pub write_block: u32,
    /// Use C-library-style buffered I/O (a buffer of the file's block size). Default true.
    pub buffering: bool,
    /// Chance in 10 that a transaction reads rather than appends; -1 disables both. Default 5.
    pub bias_read: i32,
    /// Chance in 10 that a transaction creates rather than deletes; -1 disables both. Default 5.
    pub bias_create: i32,
    /// Report format. Default verbose.
    pub report: ReportFormat,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            size_low: 500,
            size_high: 10000,
            number: 500,
            seed: 42,
            transactions: 500,
            locations: Vec::new(),
            subdirectories: 0,
            read_block: 512,
            write_block: 512,
            buffering: true,
            bias_read: 5,
            bias_create: 5,
            report: ReportFormat::Verbose,
        }
    }
}

/// The command table: name and help text, in Postmark's order (used by `help`).
pub const COMMANDS: &[(&str, &str)] = &[
    ("set size", "Sets low and high bounds of files"),
    ("set number", "Sets number of simultaneous files"),
    ("set seed", "Sets seed for random number generator"),
    ("set transactions", "Sets number of transactions"),
    ("set location", "Sets location of working files"),
    ("set subdirectories", "Sets number of subdirectories"),
    ("set read", "Sets read block size"),
    ("set write", "Sets write block size"),
    ("set buffering", "Sets usage of buffered I/O"),
    (
        "set bias read",
        "Sets the chance of choosing read over append",
    ),
    (
        "set bias create",
        "Sets the chance of choosing create over delete",
    ),
    ("set report", "Choose verbose or terse report format"),
    ("run", "Runs one iteration of benchmark"),
    ("load", "Read configuration file"),
    ("show", "Displays current configuration"),
    ("help", "Prints out available commands"),
    ("quit", "Exit program"),
];

/// Postmark's `help [PREFIX]`: the commands starting with `prefix`, or all of them when none
/// does (or no prefix is given).
pub fn help_text(prefix: Option<&str>) -> String {
    let prefix = prefix.filter(|p| !p.is_empty());
    let matching: Vec<_> = match prefix {
        Some(p) => COMMANDS.iter().filter(|(n, _)| n.starts_with(p)).collect(),
        None => Vec::new(),
    };
    let list: Vec<_> = if matching.is_empty() {
        COMMANDS.iter().collect()
    } else {
        matching
    };
    list.iter()
        .map(|(name, help)| format!("{name} - {help}\n"))
        .collect()
}

const KILOBYTE: u32 = 1024;
const MEGABYTE: u32 = KILOBYTE * KILOBYTE;

/// Postmark's `scale()`: an integer byte count as bytes, kilobytes or megabytes.
pub fn scale(i: u32) -> String {
    if i / MEGABYTE != 0 {
        format!("{:.2} megabytes", i as f32 / MEGABYTE as f32)
    } else if i / KILOBYTE != 0 {
        format!("{:.2} kilobytes", i as f32 / KILOBYTE as f32)
    } else {
        format!("{i} bytes")
    }
}

impl Config {
    /// Postmark's `show` text. `cwd` is printed as the working directory when no location is
    /// set.
    pub fn show(&self, cwd: &str) -> String {
        let mut s = String::new();
        s.push_str("Current configuration is:\n");
        let _ = writeln!(s, "The base number of files is {}", self.number);
        let _ = writeln!(s, "Transactions: {}", self.transactions);
        if self.size_low != self.size_high {
            let _ = writeln!(
                s,
                "Files range between {} and {} in size",
                scale(self.size_low),
                scale(self.size_high)
            );
        } else {
            let _ = writeln!(s, "Files are {} in size", scale(self.size_low));
        }
        let _ = writeln!(
            s,
            "Working director{}: {}",
            if self.locations.len() > 1 { "ies" } else { "y" },
            if self.locations.is_empty() { cwd } else { "" }
        );
        for l in &self.locations {
            let _ = writeln!(s, "\t{} (weight={})", l.path.display(), l.weight);
        }
        if self.subdirectories > 0 {
            let _ = writeln!(
                s,
                "{} subdirector{} will be used",
                self.subdirectories,
                if self.subdirectories == 1 { "y" } else { "ies" }
            );
        }
        let _ = writeln!(
            s,
            "Block sizes are: read={}, write={}",
            scale(self.read_block),
            scale(self.write_block)
        );
        let _ = writeln!(
            s,
            "Biases are: read/append={}, create/delete={}",
            self.bias_read, self.bias_create
        );
        let _ = writeln!(
            s,
            "{}sing Unix buffered file I/O",
            if self.buffering { "U" } else { "Not u" }
        );
        let _ = writeln!(s, "Random number generator seed is {}", self.seed);
        let _ = writeln!(
            s,
            "Report format is {}.",
            match self.report {
                ReportFormat::Verbose => "verbose",
                ReportFormat::Terse => "terse",
            }
        );
        s
    }

    /// Total weight of the locations (Postmark's `file_system_weight`).
    pub fn total_weight(&self) -> u32 {
        self.locations.iter().map(|l| l.weight).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text Debian's postmark 1.53 prints for `show` with its defaults and a location.
    #[test]
    fn show_matches_postmark() {
        let mut c = Config::default();
        c.locations.push(Location {
            path: "/tmp/pm".into(),
            weight: 1,
        });
        c.subdirectories = 3;
        let expected = "Current configuration is:\n\
The base number of files is 500\n\
Transactions: 500\n\
Files range between 500 bytes and 9.77 kilobytes in size\n\
Working directory: \n\
\t/tmp/pm (weight=1)\n\
3 subdirectories will be used\n\
Block sizes are: read=512 bytes, write=512 bytes\n\
Biases are: read/append=5, create/delete=5\n\
Using Unix buffered file I/O\n\
Random number generator seed is 42\n\
Report format is verbose.\n";
        assert_eq!(c.show("/cwd"), expected);
    }

    #[test]
    fn show_without_location_prints_cwd() {
        let c = Config {
            size_low: 2048,
            size_high: 2048,
            ..Config::default()
        };
        let s = c.show("/some/where");
        assert!(s.contains("Working directory: /some/where\n"));
        assert!(s.contains("Files are 2.00 kilobytes in size\n"));
        assert!(!s.contains("subdirector"));
    }

    #[test]
    fn scale_units() {
        assert_eq!(scale(512), "512 bytes");
        assert_eq!(scale(10000), "9.77 kilobytes");
        assert_eq!(scale(3 * MEGABYTE / 2), "1.50 megabytes");
    }

    #[test]
    fn help_prefix() {
        assert_eq!(
            help_text(Some("set b")),
            "set buffering - Sets usage of buffered I/O\n\
set bias read - Sets the chance of choosing read over append\n\
set bias create - Sets the chance of choosing create over delete\n"
        );
        assert_eq!(help_text(Some("zzz")).lines().count(), COMMANDS.len());
        assert_eq!(help_text(None).lines().count(), COMMANDS.len());
    }
}
