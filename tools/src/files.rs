//! `fsprof files MNT|PROFILE`: the hottest files of a mount recorded with `--hot-files` (the
//! `hot_files` section; grammar in `fsprof_fuse::records::hot`): by total latency, then by
//! requests, each with its possible overcount (the space-saving sketch's bound).

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
pub const SECTION: &str = "hot_files";

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
                    profile_store::Section::unescape(v)
                }
            }
            _ => {}
        }
    }
    Ok(e)
}

/// Runs `fsprof files`.
pub fn run(p: &Loaded, c: &FilesConfig, out: &mut String) -> Result<(), Error> {
    let layer = match &c.layer {
        Some(l) => l.clone(),
        None => crate::findings::analysed(&p.profile).map_or("fuse".into(), |l| l.name.clone()),
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
        let mut t = Table::new(&["rank", unit, "overcount <=", "path"]);
        for e in entries.iter().filter(|e| e.by == by).take(c.top) {
            let fmt = |v: u64| {
                if by == "latency" {
                    clock.latency(v as f64)
                } else {
                    v.to_string()
                }
            };
            t.row(vec![
                e.rank.to_string(),
                fmt(e.value),
                fmt(e.error),
                crate::error::printable(&e.shown()),
            ]);
        }
        t.render(2, out);
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
    }
}
