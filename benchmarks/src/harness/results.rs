//! Aggregating runs into medians and ranges, rendering the Markdown table, and the machine
//! facts recorded with it.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use super::workloads::{Better, Metric};

/// One run of one workload on one target.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// The metrics measured.
    pub metrics: Vec<Metric>,
    /// CPU seconds the FUSE daemon used during the measurement.
    pub daemon_cpu: Option<f64>,
    /// What the run did (same on every target).
    pub fingerprint: String,
}

/// All runs of one workload on one target.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// Target name.
    pub target: String,
    /// The runs that succeeded.
    pub samples: Vec<Sample>,
    /// Why the target stopped running this workload, if it did.
    pub error: Option<String>,
}

/// Results of one workload across targets.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// Suite it belongs to.
    pub suite: String,
    /// Its label (e.g. `clients-4`).
    pub label: String,
    /// What it does.
    pub description: String,
    /// One series per target, in target order.
    pub series: Vec<Series>,
}

/// Median, minimum and maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Median, minimum and maximum of `values` (None when empty).
pub fn stats(values: &[f64]) -> Option<Stats> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Stats {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// A number with about three significant digits.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "n/a".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

impl WorkloadResult {
    /// The metric names and units, from the first sample found.
    fn metric_heads(&self) -> Vec<(&'static str, &'static str, Better)> {
        self.series
            .iter()
            .flat_map(|s| s.samples.first())
            .next()
            .map(|s| {
                s.metrics
                    .iter()
                    .map(|m| (m.name, m.unit, m.better))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn metric_stats(series: &Series, name: &str) -> Option<Stats> {
        let v: Vec<f64> = series
            .samples
            .iter()
            .filter_map(|s| s.metrics.iter().find(|m| m.name == name).map(|m| m.value))
            .collect();
        stats(&v)
    }

    /// The Markdown table: one row per target, one column per metric (median, [min–max],
    /// ratio of medians to the first target), and the daemon's CPU seconds.
    pub fn table(&self) -> String {
        let heads = self.metric_heads();
        let mut s = String::new();
        if self.suite == self.label {
            let _ = writeln!(s, "### {}\n", self.suite);
        } else {
            let _ = writeln!(s, "### {} / {}\n", self.suite, self.label);
        }
        let _ = writeln!(s, "{}\n", self.description);
        let mut header = String::from("| target |");
        let mut rule = String::from("| --- |");
        for (name, unit, better) in &heads {
            let hint = match better {
                Better::Lower => "lower is better",
                Better::Higher => "higher is better",
            };
            let _ = write!(header, " {name} ({unit}; {hint}) |");
            rule.push_str(" ---: |");
        }
        header.push_str(" daemon CPU (s) | runs |");
        rule.push_str(" ---: | ---: |");
        let _ = writeln!(s, "{header}\n{rule}");
        let base = self.series.first();
        for series in &self.series {
            let _ = write!(s, "| {} |", series.target);
            if series.samples.is_empty() {
                let why = series.error.as_deref().unwrap_or("no runs");
                for _ in &heads {
                    s.push_str(" – |");
                }
                let _ = writeln!(s, " – | 0 ({}) |", why.replace('|', "/"));
                continue;
            }
            for (name, _, _) in &heads {
                match Self::metric_stats(series, name) {
                    Some(st) => {
                        let _ = write!(s, " {} [{}–{}]", num(st.median), num(st.min), num(st.max));
                        if let Some(b) = base.and_then(|b| Self::metric_stats(b, name)) {
                            if b.median != 0.0 {
                                let _ = write!(s, " ×{:.2}", st.median / b.median);
                            }
                        }
                        s.push_str(" |");
                    }
                    None => s.push_str(" – |"),
                }
            }
            let cpu: Vec<f64> = series.samples.iter().filter_map(|x| x.daemon_cpu).collect();
            match stats(&cpu) {
                Some(c) => {
                    let _ = write!(s, " {} |", num(c.median));
                }
                None => s.push_str(" – |"),
            }
            let _ = write!(s, " {}", series.samples.len());
            if let Some(e) = &series.error {
                let _ = write!(s, " (then failed: {})", e.replace('|', "/"));
            }
            s.push_str(" |\n");
        }
        // Every target must have done the same work.
        let reference = self
            .series
            .iter()
            .flat_map(|x| x.samples.first())
            .next()
            .map(|x| x.fingerprint.clone());
        if let Some(r) = reference {
            let _ = writeln!(s, "\nWork done: {r}.");
            for series in &self.series {
                for (i, x) in series.samples.iter().enumerate() {
                    if x.fingerprint != r {
                        let _ = writeln!(
                            s,
                            "**Warning**: {} run {} did different work: {}.",
                            series.target,
                            i + 1,
                            x.fingerprint
                        );
                    }
                }
            }
        }
        s
    }
}

/// The first non-empty line of what `cmd` prints on standard output, if it ran and exited
/// with status 0. Standard error is never used: a failing command (`dpkg-query` on a package
/// that is not installed) explains itself there, and that explanation is no version.
pub fn first_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.stdin(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// `git describe --always --dirty` of the source tree this harness was built from, if it is a
/// git checkout.
pub fn git_describe() -> Option<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    first_line(Command::new("git").args(["-C", dir, "describe", "--always", "--dirty"]))
}

/// This crate's version and, in a git checkout, `git describe` of the tree (`-dirty` with
/// local changes).
pub fn own_version() -> String {
    with_git(env!("CARGO_PKG_VERSION").to_string())
}

fn with_git(version: String) -> String {
    match git_describe() {
        Some(g) => format!("{version} (git {g})"),
        None => version,
    }
}

/// The installed version of a Debian package (None unless `dpkg-query` succeeds and prints
/// one).
pub fn package_version(pkg: &str) -> Option<String> {
    first_line(Command::new("dpkg-query").args(["-W", "-f", "${Version}\\n", pkg]))
}

/// The first line `program --version` prints on standard output (None if it fails or prints
/// nothing there).
pub fn program_version(program: &Path) -> Option<String> {
    first_line(Command::new(program).arg("--version"))
}

/// The version of one of the workspace's own binaries (`fsprof-fuse`, `raif`): what its
/// `--version` says, without the leading program name clap prints, and `git describe` of the
/// tree (the binary was built from this workspace, though perhaps not from its latest state).
pub fn workspace_program_version(program: &Path) -> String {
    let v = match program_version(program) {
        Some(line) => {
            let name = program.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match line.strip_prefix(name) {
                Some(rest) if !name.is_empty() && rest.starts_with(' ') => rest.trim().to_string(),
                _ => line,
            }
        }
        None => "unknown".to_string(),
    };
    with_git(v)
}

/// The version of a peer file system: its Debian package's version, else the first line of
/// its `--version`, else `unknown`.
pub fn peer_version(package: &str, program: &Path) -> String {
    package_version(package)
        .or_else(|| program_version(program))
        .unwrap_or_else(|| "unknown".into())
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch (civil-from-days).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Quotes a command-line argument for a POSIX shell when it needs it.
pub fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%".contains(&b))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Facts about the machine and the software, as Markdown list items.
pub fn machine_facts(work_dir: &Path, versions: &[(String, String)]) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
        .unwrap_or("unknown");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or("unknown".into(), |kb| {
            format!("{:.1} GiB", kb as f64 / 1048576.0)
        });
    let mut fstype = super::mounts::fs_type_of(work_dir).unwrap_or_else(|| "unknown".into());
    if super::mounts::ext4_without_journal(work_dir) {
        fstype.push_str(" (no journal)");
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "- Machine: Linux {}, CPU {model}, {cores} cores available, {mem} RAM",
        read_trim("/proc/sys/kernel/osrelease")
    );
    let _ = writeln!(s, "- Work directory: `{}` on {fstype}", work_dir.display());
    let v: Vec<String> = versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(s, "- Versions: {}", v.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        assert_eq!(stats(&[]), None);
        let s = stats(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
    }

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 3600 + 120), "2000-02-29 01:02 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13 UTC");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--runs"), "--runs");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    fn sh(script: &str) -> Option<String> {
        first_line(Command::new("sh").args(["-c", script]))
    }

    /// Regression: a failing command's complaint on stderr was recorded as a version
    /// ("fsprof-fuse dpkg-query: no packages found matching fsprof-fuse").
    #[test]
    fn versions_only_from_commands_that_succeed() {
        assert_eq!(sh("echo 1.0; echo 'no such package' >&2; exit 1"), None);
        assert_eq!(sh("echo 'no such package' >&2"), None);
        assert_eq!(sh("exit 0"), None);
        assert_eq!(sh("echo; echo '  3.0 '; echo 4.0"), Some("3.0".into()));
        assert_eq!(first_line(&mut Command::new("/nonexistent/program")), None);
        assert_eq!(package_version("fsprof-no-such-package"), None);
        assert_eq!(program_version(Path::new("/bin/false")), None);
        assert_eq!(
            peer_version("fsprof-no-such-package", Path::new("/bin/false")),
            "unknown"
        );
    }

    /// Our binaries: clap's `NAME VERSION` without the name, then the tree's git state.
    #[test]
    fn workspace_program_versions() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        // Written by a child process: a descriptor open for writing in this (multi-threaded)
        // test process could be inherited by another test's fork and make exec fail with
        // ETXTBSY ("Text file busy").
        let script = |name: &str, body: &str| {
            let p = dir.join(name);
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(r#"printf '#!/bin/sh\n%s\n' "$1" > "$2" && chmod 755 "$2""#)
                .args(["sh", body])
                .arg(&p)
                .status()
                .unwrap();
            assert!(status.success());
            p
        };
        let git = git_describe().map_or(String::new(), |g| format!(" (git {g})"));
        let ok = script("fsprof-fake", "echo fsprof-fake 9.8.7");
        assert_eq!(workspace_program_version(&ok), format!("9.8.7{git}"));
        let other = script("fsprof-other", "echo something else 1.2");
        assert_eq!(
            workspace_program_version(&other),
            format!("something else 1.2{git}")
        );
        let failing = script("fsprof-failing", "echo fsprof-failing 1.0; exit 3");
        assert_eq!(workspace_program_version(&failing), format!("unknown{git}"));
    }

    fn sample(v: f64, fp: &str) -> Sample {
        Sample {
            metrics: vec![Metric {
                name: "total",
                unit: "s",
                value: v,
                better: Better::Lower,
            }],
            daemon_cpu: Some(0.5),
            fingerprint: fp.into(),
        }
    }

    #[test]
    fn table_has_ratios_and_warnings() {
        let r = WorkloadResult {
            suite: "s".into(),
            label: "w".into(),
            description: "d".into(),
            series: vec![
                Series {
                    target: "native".into(),
                    samples: vec![sample(1.0, "x"), sample(2.0, "x"), sample(3.0, "x")],
                    error: None,
                },
                Series {
                    target: "bindfs".into(),
                    samples: vec![sample(4.0, "x"), sample(4.0, "y")],
                    error: None,
                },
                Series {
                    target: "loggedfs".into(),
                    samples: vec![],
                    error: Some("mount failed".into()),
                },
            ],
        };
        let t = r.table();
        assert!(
            t.contains("| native | 2.00 [1.00–3.00] ×1.00 | 0.500 | 3 |"),
            "{t}"
        );
        assert!(t.contains("| bindfs | 4.00 [4.00–4.00] ×2.00 |"), "{t}");
        assert!(t.contains("| loggedfs | – | – | 0 (mount failed) |"), "{t}");
        assert!(
            t.contains("**Warning**: bindfs run 2 did different work: y."),
            "{t}"
        );
    }
}
