//! `fsprof files MNT|PROFILE`: the hottest files of a mount recorded with `--hot-files` (the
//! `hot_files` section; grammar in `fsprof_fuse::records::hot`): by total latency, then by
//! requests, each with its possible overcount (the space-saving sketch's bound).
//!
//! A value is exact when its overcount is 0, and lies between the value less its overcount and
//! the value otherwise. Where the overcount exceeds what is certain (the value less it), the
//! entry is no fact about the file but a bound: in a long tail of files of about equal weight
//! (8,000 headers read by a `tar`), the sketch's counters pass from file to file and each
//! entry carries most of the tail's weight as its overcount. Such values are shown as
//! `<=VALUE` ([`shown_value`]).

use std::fmt::Write as _;

use crate::error::Error;
use crate::input::Loaded;
use crate::table::Table;

/// `fsprof files`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesConfig {
    /// The profile or mount.
    pub input: String,
    /// Entries listed per ranking at most. Default 20.
    pub top: usize,
    /// The layer whose files (`syscall`); default: the one the findings are about.
    pub layer: Option<String>,
}

/// The profile section of the hottest files.
pub const SECTION: &str = profile_store::HOT_FILES_SECTION;

/// One line of the `hot_files` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `latency` or `calls`.
    pub by: String,
    /// Rank in its list, from 1.
    pub rank: u64,
    /// Cycles (by latency) or requests (by calls).
    pub value: u64,
    /// The sketch's bound on the overcount of `value`.
    pub error: u64,
    /// The path, `(unknown)` when the daemon never knew it.
    pub path: String,
    /// The file was deleted (the path is where it was).
    pub deleted: bool,
}

impl Entry {
    /// The path as shown: with `(deleted)` after it for a deleted file.
    pub fn shown(&self) -> String {
        if self.deleted {
            format!("{} (deleted)", self.path)
        } else {
            self.path.clone()
        }
    }
}

/// The entries of a `hot_files` section, in order.
pub fn entries(s: &profile_store::Section) -> Result<Vec<Entry>, String> {
    s.lines
        .iter()
        .enumerate()
        .map(|(i, l)| parse(l, i + 1))
        .collect()
}

fn parse(line: &str, n: usize) -> Result<Entry, String> {
    let mut e = Entry {
        by: String::new(),
        rank: 0,
        value: 0,
        error: 0,
        path: String::new(),
        deleted: false,
    };
    for f in line.split(' ') {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| format!("hot_files line {n}: '{f}' is not key=value"))?;
        let num = || {
            v.parse::<u64>()
                .map_err(|_| format!("hot_files line {n}: {k}={v} is not a number"))
        };
        match k {
            "by" => e.by = v.to_string(),
            "rank" => e.rank = num()?,
            "value" => e.value = num()?,
            "error" => e.error = num()?,
            "deleted" => e.deleted = v == "1",
            "path" => {
                e.path = if v == "?" {
                    "(unknown)".into()
                } else {
                    // Kept in the JSON form, as the slow records' paths are.
                    profile_store::name::json(&profile_store::name::unescape(v))
                }
            }
            _ => {}
        }
    }
    Ok(e)
}

/// Whether a value of the sketch with overcount `error` is only a bound: its overcount exceeds
/// what is certain of it (`value - error`).
pub fn is_bound(value: u64, error: u64) -> bool {
    error > value - error.min(value)
}

/// A value of the sketch as shown: exact (`41ms`) with no overcount, an estimate (`~41ms`)
/// with an overcount smaller than what is certain, a bound (`<=23ms`) otherwise ([`is_bound`]);
/// `fmt` writes the number.
pub fn shown_value(value: u64, error: u64, fmt: impl Fn(u64) -> String) -> String {
    if error == 0 {
        fmt(value)
    } else if is_bound(value, error) {
        format!("<={}", fmt(value))
    } else {
        format!("~{}", fmt(value))
    }
}

/// What a `<=` value means, said once under the values.
pub const BOUND_NOTE: &str = "(~: estimated; <=: at most: the file is in a long tail of files \
    of about equal weight, and the sketch cannot tell it from the others)";

/// Runs `fsprof files`.
pub fn run(p: &Loaded, c: &FilesConfig, out: &mut String) -> Result<(), Error> {
    let layer = match &c.layer {
        Some(l) => l.clone(),
        None => crate::levels::analysed(&p.profile).map_or("fuse".into(), |l| l.name.clone()),
    };
    let s = crate::input::section_for(&p.profile, SECTION, &layer).ok_or_else(|| {
        Error::input(
            &p.name,
            format!("no hot-file list of layer {layer} (record one with --hot-files)"),
        )
    })?;
    let entries = entries(s).map_err(|e| Error::input(&p.name, e))?;
    let clock = p.clock();
    for (by, title, unit) in [
        ("latency", "by total latency", "time"),
        ("calls", "by requests", "requests"),
    ] {
        let _ = writeln!(
            out,
            "hottest files {title} (at most {} tracked):",
            s.attr("n").unwrap_or("?")
        );
        let mut t = Table::new(&["rank", unit, "at least", "overcount <=", "path"]);
        let mut bounds = false;
        for e in entries.iter().filter(|e| e.by == by).take(c.top) {
            let fmt = |v: u64| {
                if by == "latency" {
                    clock.latency(v as f64)
                } else {
                    v.to_string()
                }
            };
            bounds |= is_bound(e.value, e.error);
            t.row(vec![
                e.rank.to_string(),
                shown_value(e.value, e.error, fmt),
                fmt(e.value.saturating_sub(e.error)),
                fmt(e.error),
                profile_store::name::shown(&e.shown()),
            ]);
        }
        t.render(2, out);
        if bounds {
            let _ = writeln!(out, "  {BOUND_NOTE}");
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{}",
        if layer == syscall_trace::LAYER {
            "a call counts for the file it reached (its descriptor's, the one it opened, the one \
             a stat described; other path calls count for none); counts are exact"
        } else {
            "a request counts for the node it is about (the directory, for lookups and creates)"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overcount_past_what_is_certain_makes_a_bound() {
        let ms = |v: u64| format!("{v}ms");
        assert_eq!(shown_value(41, 0, ms), "41ms");
        assert_eq!(shown_value(41, 10, ms), "~41ms");
        // 23 with an overcount of 15: 8 certain, less than the overcount.
        assert_eq!(shown_value(23, 15, ms), "<=23ms");
        assert_eq!(shown_value(297, 293, |v| v.to_string()), "<=297");
        assert!(is_bound(4, 3) && !is_bound(4, 2) && !is_bound(0, 0));
    }

    #[test]
    fn lines_and_paths_parse() {
        let e = parse("by=calls rank=2 ino=5 value=40 error=3 path=/a%20b", 1).unwrap();
        assert_eq!(
            (e.by.as_str(), e.rank, e.value, e.error),
            ("calls", 2, 40, 3)
        );
        assert_eq!(e.path, "/a b");
        assert!(!e.deleted);
        let e = parse("by=calls rank=1 ino=5 value=4 error=0 path=/j deleted=1", 1).unwrap();
        assert_eq!(e.shown(), "/j (deleted)");
        assert!(parse("by=calls value=x", 4).unwrap_err().contains("line 4"));
        assert_eq!(profile_store::Section::unescape("%"), "%");
        // Any byte, in the JSON form (as the slow records' paths).
        let e = parse(
            "by=calls rank=1 ino=5 value=4 error=0 path=/bad%FF%25%E2%80%AE",
            1,
        )
        .unwrap();
        assert_eq!(e.path, "/bad%FF%25\u{202e}");
        assert_eq!(profile_store::name::shown(&e.path), "/bad\\xFF%\\u{202e}");
    }
}
